//! Raw sockets and processes for the harness's own tests (`tests/harness*.rs`): process
//! checks, four-letter words, an echo server behind the proxy, ZooKeeper frames written by
//! hand, and a zkguard client with a generous deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use zkguard::testing::FaultProxy;

use super::unique;

/// Polls `cond` every 20 ms until it holds; panics after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

pub fn proc_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Alive and not a zombie (an orphan's zombie may linger if PID 1 does not reap).
pub fn proc_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
    }
}

/// A four-letter command over a plain socket (used through the proxy).
pub fn four_letter_raw(addr: SocketAddr, cmd: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(cmd.as_bytes()).expect("write");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("read to EOF");
    reply
}

/// An echo server on a free loopback port; runs until the test process exits.
pub fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind echo server");
    let addr = listener.local_addr().expect("addr");
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if stream.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

pub fn connect(proxy: &FaultProxy) -> TcpStream {
    let s = TcpStream::connect(proxy.local_addrs()[0]).expect("connect to proxy");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

pub fn echo(s: &mut TcpStream, msg: &str) {
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(msg.as_bytes()).expect("write");
    let mut reply = vec![0u8; msg.len()];
    s.read_exact(&mut reply).expect("echo reply");
    assert_eq!(String::from_utf8_lossy(&reply), msg);
}

pub fn is_timeout(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Asserts the connection stays open and silent for `d` (the read times out).
pub fn assert_silent(s: &mut TcpStream, d: Duration) {
    s.set_read_timeout(Some(d)).expect("timeout");
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Err(e) if is_timeout(e.kind()) => {}
        Ok(0) => panic!("connection was closed, expected it to hang"),
        Ok(n) => panic!("received {n} bytes, expected silence"),
        Err(e) => panic!("read failed with {e}, expected a timeout"),
    }
}

/// Asserts the connection gets closed (EOF or an error) within `d`.
pub fn assert_closed(s: &mut TcpStream, d: Duration) {
    s.set_read_timeout(Some(d)).expect("timeout");
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("received {n} unexpected bytes while waiting for a close"),
        Err(e) if is_timeout(e.kind()) => panic!("connection still open after {d:?}"),
        Err(_) => {}
    }
}

/// Writes one length-prefixed ZooKeeper frame.
pub fn write_frame(s: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    s.write_all(&frame)
}

/// Reads one length-prefixed ZooKeeper frame.
pub fn read_frame(s: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// Sends a ConnectRequest for a new session and reads the ConnectResponse: the session id
/// (0 when the server refused).
pub fn zk_handshake(s: &mut (impl Read + Write)) -> std::io::Result<i64> {
    let mut req = Vec::new();
    req.extend_from_slice(&0i32.to_be_bytes()); // protocol version
    req.extend_from_slice(&0i64.to_be_bytes()); // last zxid seen
    req.extend_from_slice(&10_000i32.to_be_bytes()); // session timeout, ms
    req.extend_from_slice(&0i64.to_be_bytes()); // session id: a new session
    req.extend_from_slice(&16i32.to_be_bytes());
    req.extend_from_slice(&[0u8; 16]); // password
    write_frame(s, &req)?;
    let reply = read_frame(s)?;
    assert!(reply.len() >= 16, "short ConnectResponse: {reply:?}");
    Ok(i64::from_be_bytes(
        reply[8..16].try_into().expect("8 bytes"),
    ))
}

/// Sends a ping (xid -2, op 11) and waits for its reply.
pub fn zk_ping(s: &mut TcpStream) -> std::io::Result<()> {
    let mut req = Vec::new();
    req.extend_from_slice(&(-2i32).to_be_bytes());
    req.extend_from_slice(&11i32.to_be_bytes());
    write_frame(s, &req)?;
    let reply = read_frame(s)?;
    let xid = i32::from_be_bytes(reply[..4].try_into().expect("4 bytes"));
    assert_eq!(xid, -2, "not a ping reply: {reply:?}");
    Ok(())
}

/// A zkguard client with a generous connect deadline (slow, loaded machines).
pub fn zk_client(connect_string: &str, session_timeout: Duration) -> zkguard::Client {
    let _ = env_logger::builder().is_test(true).try_init();
    zkguard::Client::builder(connect_string)
        .session_timeout(session_timeout)
        .connect_timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}

/// Retries `f` while it fails with a connection error (an election or reconnect).
pub fn zk_retry<T>(within: Duration, mut f: impl FnMut() -> zkguard::Result<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline && e.is_connection_error() => {
                thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("still failing after {within:?}: {e}"),
        }
    }
}

/// Creates `n` persistent nodes under a fresh path; returns their paths and the last czxid.
pub fn create_nodes(c: &zkguard::Client, prefix: &str, n: usize) -> (Vec<String>, i64) {
    let mut paths = Vec::new();
    let mut zxid = 0;
    for k in 0..n {
        let p = format!("{}-{k}", unique(prefix));
        zxid = c
            .create(&p, b"x", zkguard::CreateMode::Persistent)
            .expect("create")
            .stat
            .czxid;
        paths.push(p);
    }
    (paths, zxid)
}
