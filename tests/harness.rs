//! The test harness itself, against real ZooKeeper servers: `TestCluster` and `FaultProxy`.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use zkguard::testing::{ClientAuth, FaultProxy, TestCluster};

// ------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------

/// Polls `cond` every 20 ms until it holds; panics after `timeout`.
fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn proc_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Alive and not a zombie (an orphan's zombie may linger if PID 1 does not reap).
fn proc_alive(pid: u32) -> bool {
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
fn four_letter_raw(addr: SocketAddr, cmd: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(cmd.as_bytes()).expect("write");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("read to EOF");
    reply
}

/// An echo server on a free loopback port; runs until the test process exits.
fn echo_server() -> SocketAddr {
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

fn connect(proxy: &FaultProxy) -> TcpStream {
    let s = TcpStream::connect(proxy.local_addrs()[0]).expect("connect to proxy");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

fn echo(s: &mut TcpStream, msg: &str) {
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(msg.as_bytes()).expect("write");
    let mut reply = vec![0u8; msg.len()];
    s.read_exact(&mut reply).expect("echo reply");
    assert_eq!(String::from_utf8_lossy(&reply), msg);
}

fn is_timeout(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Asserts the connection stays open and silent for `d` (the read times out).
fn assert_silent(s: &mut TcpStream, d: Duration) {
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
fn assert_closed(s: &mut TcpStream, d: Duration) {
    s.set_read_timeout(Some(d)).expect("timeout");
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("received {n} unexpected bytes while waiting for a close"),
        Err(e) if is_timeout(e.kind()) => panic!("connection still open after {d:?}"),
        Err(_) => {}
    }
}

// ------------------------------------------------------------------------------------
// TestCluster
// ------------------------------------------------------------------------------------

#[test]
fn standalone_serves_and_drop_removes_everything() {
    let cluster = TestCluster::start(1).expect("start");
    assert_eq!(cluster.len(), 1);
    assert!(!cluster.is_empty());
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");
    let srvr = cluster.four_letter(0, "srvr").expect("srvr");
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    assert_eq!(cluster.mode(0).expect("mode"), "standalone");
    assert_eq!(cluster.leader(), Some(0));
    let port = cluster.client_addr(0).port();
    assert_eq!(cluster.connect_string(), format!("127.0.0.1:{port}"));
    assert_eq!(cluster.server_connect_string(0), cluster.connect_string());

    // Default settings reach the server.
    let conf = cluster.four_letter(0, "conf").expect("conf");
    for line in [
        "tickTime=100",
        "minSessionTimeout=200",
        "maxSessionTimeout=60000",
    ] {
        assert!(
            conf.lines().any(|l| l == line),
            "missing {line} in:\n{conf}"
        );
    }

    // The server logs into its log file.
    let log = std::fs::read_to_string(cluster.log_path(0)).expect("log file");
    assert!(
        log.contains("ZooKeeperServerMain"),
        "unexpected log:\n{log}"
    );

    // A proxy in front of the cluster forwards the client protocol.
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    assert_eq!(four_letter_raw(proxy.local_addrs()[0], "ruok"), "imok");

    let pid = cluster.pid(0).expect("pid");
    assert!(proc_exists(pid));
    let dir = cluster.dir().to_path_buf();
    assert!(dir.exists());
    drop(proxy);
    drop(cluster);
    assert!(!proc_exists(pid), "java process {pid} survived the drop");
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn builder_settings_reach_the_server_and_bad_settings_fail_early() {
    let cluster = TestCluster::builder()
        .servers(1)
        .tick_time(Duration::from_millis(200))
        .min_session_timeout(Duration::from_secs(1))
        .max_session_timeout(Duration::from_secs(10))
        .force_sync(true)
        .start()
        .expect("start");
    let conf = cluster.four_letter(0, "conf").expect("conf");
    for line in [
        "tickTime=200",
        "minSessionTimeout=1000",
        "maxSessionTimeout=10000",
    ] {
        assert!(
            conf.lines().any(|l| l == line),
            "missing {line} in:\n{conf}"
        );
    }
    drop(cluster);

    let err = TestCluster::start(0).expect_err("zero servers");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = TestCluster::builder()
        .min_session_timeout(Duration::from_secs(5))
        .max_session_timeout(Duration::from_secs(1))
        .start()
        .expect_err("min > max");
    assert!(err.to_string().contains("min_session_timeout"), "{err}");
}

#[test]
fn stop_kill_and_restart_reuse_the_same_port() {
    let cluster = TestCluster::start(1).expect("start");
    let addr = cluster.client_addr(0);
    let first_pid = cluster.pid(0).expect("pid");

    cluster.stop(0).expect("stop");
    assert!(!cluster.is_running(0));
    assert_eq!(cluster.pid(0), None);
    assert!(!proc_exists(first_pid));
    assert!(cluster.four_letter(0, "ruok").is_err());
    assert!(cluster.leader().is_none());
    cluster
        .stop(0)
        .expect("stopping a stopped server is a no-op");

    cluster.start_server(0).expect("restart after stop");
    assert_eq!(cluster.client_addr(0), addr);
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");
    let err = cluster.start_server(0).expect_err("already running");
    assert!(err.to_string().contains("already running"), "{err}");

    let second_pid = cluster.pid(0).expect("pid");
    assert_ne!(first_pid, second_pid);
    cluster.kill(0).expect("kill");
    assert!(!cluster.is_running(0));
    assert!(!proc_exists(second_pid));
    cluster.start_server(0).expect("restart after kill");
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");
    cluster
        .wait_serving(0, Duration::from_secs(5))
        .expect("serving");

    // The log records every start.
    let log = std::fs::read_to_string(cluster.log_path(0)).expect("log");
    assert_eq!(log.matches("==== zkguard: starting server 0").count(), 3);
}

#[test]
fn pause_and_resume() {
    let cluster = TestCluster::start(1).expect("start");
    cluster.pause(0).expect("pause");
    assert!(cluster.is_paused(0));
    assert!(cluster.is_running(0), "a paused server is still running");
    let err = cluster
        .four_letter_with_timeout(0, "ruok", Duration::from_millis(500))
        .expect_err("a paused server answers nothing");
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
    cluster.resume(0).expect("resume");
    assert!(!cluster.is_paused(0));
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");

    // Drop kills a paused server too.
    cluster.pause(0).expect("pause again");
    let pid = cluster.pid(0).expect("pid");
    drop(cluster);
    assert!(
        !proc_exists(pid),
        "paused java process {pid} survived the drop"
    );
}

#[test]
fn a_panicking_test_keeps_the_logs() {
    let seen: Arc<Mutex<Option<(PathBuf, u32)>>> = Arc::new(Mutex::new(None));
    let seen2 = Arc::clone(&seen);
    let result = std::panic::catch_unwind(move || {
        let cluster = TestCluster::start(1).expect("start");
        let pid = cluster.pid(0).expect("pid");
        *seen2.lock().expect("lock") = Some((cluster.dir().to_path_buf(), pid));
        panic!("deliberate panic: TestCluster must keep its logs");
    });
    assert!(result.is_err());
    let (dir, pid) = seen.lock().expect("lock").take().expect("cluster started");
    assert!(!proc_exists(pid), "java process {pid} survived the panic");
    assert!(
        dir.join("server-0.log").is_file(),
        "{} not kept",
        dir.display()
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

const CHILD_ENV: &str = "ZKGUARD_HARNESS_WATCHDOG_CHILD";

#[test]
fn servers_die_with_a_test_process_that_is_killed() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // Child: start a server, say where it is, then wait to be SIGKILLed.
        let cluster = TestCluster::start(1).expect("start");
        let pid = cluster.pid(0).expect("pid");
        println!("ZKGUARD-CHILD {pid} {}", cluster.dir().display());
        std::io::stdout().flush().expect("flush");
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "servers_die_with_a_test_process_that_is_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the test binary");
    let stdout = child.stdout.take().expect("stdout");
    let mut found = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read child output");
        // libtest prints "test <name> ... " on the same line first.
        if let Some(rest) = line.split_once("ZKGUARD-CHILD ").map(|(_, rest)| rest) {
            let (pid, dir) = rest.split_once(' ').expect("pid and dir");
            found = Some((pid.parse::<u32>().expect("pid"), PathBuf::from(dir)));
            break;
        }
    }
    let (pid, dir) = found.expect("the child started a server");
    assert!(proc_alive(pid));
    child.kill().expect("SIGKILL the test process");
    child.wait().expect("wait");
    wait_until(
        "the orphaned java process to be killed by the watchdog",
        Duration::from_secs(10),
        || !proc_alive(pid),
    );
    wait_until(
        "the watchdog to remove the orphaned cluster directory",
        Duration::from_secs(10),
        || !dir.exists(),
    );
}

#[test]
fn ensemble_elects_a_new_leader_and_takes_back_a_restarted_server() {
    let cluster = TestCluster::start(3).expect("start ensemble");
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.connect_string().split(',').count(), 3);
    let modes: Vec<String> = (0..3)
        .map(|i| cluster.mode(i).expect("every member serves"))
        .collect();
    assert_eq!(
        modes.iter().filter(|m| *m == "leader").count(),
        1,
        "{modes:?}"
    );
    assert_eq!(
        modes.iter().filter(|m| *m == "follower").count(),
        2,
        "{modes:?}"
    );
    let old = cluster.leader().expect("a leader");
    assert_eq!(modes[old], "leader");

    let started = Instant::now();
    cluster.kill(old).expect("kill leader");
    let mut new = None;
    wait_until("a new leader", Duration::from_secs(30), || {
        new = cluster.leader();
        new.is_some()
    });
    let new = new.expect("new leader");
    assert_ne!(new, old);
    let others: Vec<usize> = (0..3).filter(|&i| i != old && i != new).collect();
    wait_until(
        "the other survivor to follow",
        Duration::from_secs(30),
        || cluster.mode(others[0]).ok().as_deref() == Some("follower"),
    );
    eprintln!("re-election took {:?}", started.elapsed());

    cluster.start_server(old).expect("restart the old leader");
    assert_eq!(cluster.mode(old).expect("mode"), "follower");
    assert_eq!(cluster.leader(), Some(new));
}

// ------------------------------------------------------------------------------------
// FaultProxy
// ------------------------------------------------------------------------------------

#[test]
fn proxy_forwards_and_counts_connections() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    assert_eq!(
        proxy.connect_string(),
        format!("127.0.0.1:{}", proxy.local_addrs()[0].port())
    );
    let mut a = connect(&proxy);
    echo(&mut a, "hello");
    echo(&mut a, "again");
    wait_until("one connection", Duration::from_secs(5), || {
        proxy.connections() == 1
    });
    let mut b = connect(&proxy);
    echo(&mut b, "second");
    wait_until("two connections", Duration::from_secs(5), || {
        proxy.connections() == 2
    });
    drop(a);
    drop(b);
    wait_until("no connections", Duration::from_secs(5), || {
        proxy.connections() == 0
    });
}

#[test]
fn proxy_forwards_large_transfers_intact_also_when_delayed() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for delayed in [false, true] {
        if delayed {
            proxy.delay(Duration::from_millis(20));
        }
        let mut a = connect(&proxy);
        let mut writer = a.try_clone().expect("clone");
        let sent = data.clone();
        let w = thread::spawn(move || writer.write_all(&sent).expect("write"));
        let mut got = vec![0u8; data.len()];
        a.read_exact(&mut got).expect("read everything back");
        w.join().expect("writer");
        assert!(got == data, "bytes corrupted (delayed: {delayed})");
    }
}

#[test]
fn proxy_blackhole_swallows_traffic_and_heal_closes_corrupt_connections() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    echo(&mut a, "before");
    let mut quiet = connect(&proxy);
    echo(&mut quiet, "quiet");

    proxy.blackhole();
    a.write_all(b"lost").expect("write into the black hole");
    assert_silent(&mut a, Duration::from_millis(300));

    // A new connection is accepted but hangs.
    let mut hanging = connect(&proxy);
    hanging.write_all(b"early").expect("write");
    assert_silent(&mut hanging, Duration::from_millis(300));
    wait_until("three connections", Duration::from_secs(5), || {
        proxy.connections() == 3
    });

    proxy.heal();
    // `a` lost bytes: closed.
    assert_closed(&mut a, Duration::from_secs(2));
    // `quiet` sent nothing during the partition: it survives.
    echo(&mut quiet, "still here");
    // The hanging connection is connected now, and what it sent arrives.
    hanging
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut reply = [0u8; 5];
    hanging
        .read_exact(&mut reply)
        .expect("delivered after heal");
    assert_eq!(&reply, b"early");
    echo(&mut hanging, "works");
    // New connections work.
    let mut fresh = connect(&proxy);
    echo(&mut fresh, "fresh");
}

#[test]
fn proxy_reset_closes_live_and_hanging_connections() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    let mut b = connect(&proxy);
    echo(&mut a, "a");
    echo(&mut b, "b");
    proxy.reset();
    assert_closed(&mut a, Duration::from_secs(2));
    assert_closed(&mut b, Duration::from_secs(2));
    wait_until("no connections", Duration::from_secs(5), || {
        proxy.connections() == 0
    });
    let mut c = connect(&proxy);
    echo(&mut c, "after reset");

    // Reset inside a black hole: the mode stays, hanging connections are closed.
    proxy.blackhole();
    let mut hanging = connect(&proxy);
    wait_until("the hanging connection", Duration::from_secs(5), || {
        proxy.connections() == 2
    });
    proxy.reset();
    assert_closed(&mut hanging, Duration::from_secs(2));
    assert_closed(&mut c, Duration::from_secs(2));
    let mut still_hanging = connect(&proxy);
    assert_silent(&mut still_hanging, Duration::from_millis(200));
    proxy.heal();
    echo(&mut still_hanging, "healed");
}

#[test]
fn proxy_delay_delays_each_direction_and_keeps_order() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    echo(&mut a, "warm up");

    proxy.delay(Duration::from_millis(200));
    let t = Instant::now();
    echo(&mut a, "slow");
    let rtt = t.elapsed();
    assert!(
        rtt >= Duration::from_millis(400),
        "round trip took {rtt:?}, expected >= 400 ms"
    );

    // Chunks sent in quick succession are each delayed, not queued behind each other.
    let t = Instant::now();
    let mut expected = String::new();
    let mut last_write = t;
    for i in 0..10 {
        let chunk = format!("<{i}>");
        if i > 0 {
            thread::sleep(Duration::from_millis(10)); // pacing, so each write is its own chunk
        }
        last_write = Instant::now();
        a.write_all(chunk.as_bytes()).expect("write");
        expected.push_str(&chunk);
    }
    let mut reply = vec![0u8; expected.len()];
    a.read_exact(&mut reply).expect("read");
    assert_eq!(String::from_utf8_lossy(&reply), expected, "order kept");
    let total = t.elapsed();
    // Counted from the last write, so that the pacing sleeps (which a loaded machine may
    // stretch) are not in the bound: about 400 ms if each chunk is delayed on its own,
    // about 2 s or more if each waited for the one before it.
    let after_last = last_write.elapsed();
    assert!(
        total >= Duration::from_millis(400) && after_last < Duration::from_millis(1500),
        "ten paced chunks took {total:?}, {after_last:?} after the last write; expected \
         about 400 ms after it"
    );

    proxy.heal();
    echo(&mut a, "fast again");
}

#[test]
fn proxy_closes_clients_when_upstream_is_down() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let proxy = FaultProxy::start(&[dead]).expect("proxy");
    let mut a = connect(&proxy);
    assert_closed(&mut a, Duration::from_secs(3));
    wait_until("no connections", Duration::from_secs(5), || {
        proxy.connections() == 0
    });
}

#[test]
fn proxy_drop_closes_everything_quickly() {
    let proxy = FaultProxy::start(&[echo_server(), echo_server()]).expect("proxy");
    assert_eq!(proxy.connect_string().split(',').count(), 2);
    let mut a = connect(&proxy);
    echo(&mut a, "a");
    let mut b = TcpStream::connect(proxy.local_addrs()[1]).expect("connect");
    echo(&mut b, "b");
    proxy.delay(Duration::from_millis(100));
    proxy.blackhole();
    let mut hanging = connect(&proxy);
    wait_until("three connections", Duration::from_secs(5), || {
        proxy.connections() == 3
    });
    let addr = proxy.local_addrs()[0];
    // Dropped on a thread of its own, so that a drop that hangs (on the hanging connection,
    // or on bytes still delayed) fails the test instead of hanging it. How long a drop takes
    // is not promised; a loaded machine may take a while to join the proxy's threads.
    let t = Instant::now();
    let (tx, dropped) = std::sync::mpsc::channel();
    thread::spawn(move || {
        drop(proxy);
        let _ = tx.send(());
    });
    dropped
        .recv_timeout(Duration::from_secs(20))
        .expect("the proxy's drop did not finish within 20 s");
    eprintln!("drop took {:?}", t.elapsed());
    assert_closed(&mut a, Duration::from_secs(2));
    assert_closed(&mut b, Duration::from_secs(2));
    assert_closed(&mut hanging, Duration::from_secs(2));
    assert!(TcpStream::connect(addr).is_err(), "listener still open");
}

// ------------------------------------------------------------------------------------
// ZooKeeper wire helpers (raw sockets: what the proxy and the servers really do)
// ------------------------------------------------------------------------------------

/// Writes one length-prefixed ZooKeeper frame.
fn write_frame(s: &mut impl Write, body: &[u8]) -> std::io::Result<()> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    s.write_all(&frame)
}

/// Reads one length-prefixed ZooKeeper frame.
fn read_frame(s: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// Sends a ConnectRequest for a new session and reads the ConnectResponse: the session id
/// (0 when the server refused).
fn zk_handshake(s: &mut (impl Read + Write)) -> std::io::Result<i64> {
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
fn zk_ping(s: &mut TcpStream) -> std::io::Result<()> {
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
fn zk_client(connect_string: &str, session_timeout: Duration) -> zkguard::Client {
    let _ = env_logger::builder().is_test(true).try_init();
    zkguard::Client::builder(connect_string)
        .session_timeout(session_timeout)
        .connect_timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}

/// Retries `f` while it fails with a connection error (an election or reconnect).
fn zk_retry<T>(within: Duration, mut f: impl FnMut() -> zkguard::Result<T>) -> T {
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

fn unique(prefix: &str) -> String {
    format!("/{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Creates `n` persistent nodes under a fresh path; returns their paths and the last czxid.
fn create_nodes(c: &zkguard::Client, prefix: &str, n: usize) -> (Vec<String>, i64) {
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

// ------------------------------------------------------------------------------------
// FaultProxy: one-way stall, flapping
// ------------------------------------------------------------------------------------

#[test]
fn proxy_stall_holds_client_requests_while_watch_events_flow() {
    let cluster = TestCluster::start(1).expect("start");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    let c = zk_client(&proxy.connect_string(), Duration::from_secs(20));
    let other = zk_client(&cluster.connect_string(), Duration::from_secs(20));
    let p = unique("stall");
    c.create(&p, b"0", zkguard::CreateMode::Persistent)
        .expect("create");
    let (_, _, watch) = c.get_data_w(&p).expect("watch");

    proxy.stall_client_to_server();
    // The client's own request goes unanswered...
    let held = format!("{p}/held");
    let err = c
        .with_timeout(Duration::from_millis(500))
        .create(&held, b"", zkguard::CreateMode::Persistent)
        .expect_err("a request through a stalled proxy");
    assert!(matches!(err, zkguard::Error::Timeout { .. }), "{err}");
    // ...and has not reached the server (it is held, not delivered).
    assert!(other.exists(&held).expect("exists").is_none());
    // Server -> client still flows: the watch fires.
    other.set_data(&p, b"1", None).expect("set_data");
    let ev = watch
        .recv_timeout(Duration::from_secs(10))
        .expect("the watch event arrives through the stalled proxy");
    assert_eq!(ev.event_type, zkguard::EventType::NodeDataChanged);
    // Nothing was closed by the proxy.
    assert!(
        proxy.connections() >= 1,
        "the stalled connection was closed"
    );

    proxy.heal();
    // What was held back is delivered now: the create reaches the server.
    wait_until("the held create to arrive", Duration::from_secs(10), || {
        other.exists(&held).expect("exists").is_some()
    });
    assert!(zk_retry(Duration::from_secs(20), || c.exists(&p)).is_some());
}

#[test]
fn proxy_stall_holds_raw_bytes_until_heal() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    echo(&mut a, "before");
    proxy.stall_client_to_server();
    a.write_all(b"held").expect("write");
    assert_silent(&mut a, Duration::from_millis(300));
    // A new connection is accepted and connected, but its bytes are held as well.
    let mut b = connect(&proxy);
    b.write_all(b"new").expect("write");
    assert_silent(&mut b, Duration::from_millis(100));
    proxy.heal();
    let mut reply = [0u8; 4];
    a.read_exact(&mut reply)
        .expect("held bytes delivered after heal");
    assert_eq!(&reply, b"held");
    let mut reply = [0u8; 3];
    b.read_exact(&mut reply)
        .expect("held bytes delivered after heal");
    assert_eq!(&reply, b"new");
    echo(&mut a, "after");
    assert_eq!(proxy.accepted(), 2);
}

#[test]
fn proxy_flap_closes_each_new_connection_after_the_first_reply() {
    let cluster = TestCluster::start(1).expect("start");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    assert_eq!(proxy.accepted(), 0);
    let mut before = connect(&proxy);
    assert_ne!(zk_handshake(&mut before).expect("handshake"), 0);
    zk_ping(&mut before).expect("ping");
    assert_eq!(proxy.accepted(), 1);

    proxy.flap();
    // A connection that got its first reply before stays.
    zk_ping(&mut before).expect("ping on the older connection");
    for round in 2..=3u64 {
        let mut s = connect(&proxy);
        let session = zk_handshake(&mut s).expect("the handshake reply is delivered");
        assert_ne!(session, 0, "the server granted a session");
        assert_closed(&mut s, Duration::from_secs(5));
        assert_eq!(proxy.accepted(), round);
        wait_until("the flap to be counted", Duration::from_secs(5), || {
            proxy.flapped() == round - 1
        });
    }

    proxy.heal();
    let mut after = connect(&proxy);
    assert_ne!(zk_handshake(&mut after).expect("handshake"), 0);
    zk_ping(&mut after).expect("ping after heal");
    assert_eq!(proxy.accepted(), 4);
    assert_eq!(proxy.flapped(), 2);
}

#[test]
fn proxy_flap_makes_a_client_reconnect_again_and_again() {
    let cluster = TestCluster::start(1).expect("start");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    let c = zk_client(&proxy.connect_string(), Duration::from_secs(20));
    let session = c.session_id();
    let first = proxy.accepted();
    proxy.flap();
    proxy.reset();
    wait_until(
        "three more connection attempts",
        Duration::from_secs(30),
        || proxy.accepted() >= first + 3,
    );
    assert!(proxy.flapped() >= 2, "flapped {}", proxy.flapped());
    proxy.heal();
    assert!(zk_retry(Duration::from_secs(30), || c.exists("/zookeeper")).is_some());
    assert_eq!(
        c.session_id(),
        session,
        "every flap renewed the same session"
    );
}

// ------------------------------------------------------------------------------------
// TestCluster: wipe
// ------------------------------------------------------------------------------------

#[test]
fn wipe_restarts_a_standalone_server_empty() {
    let cluster = TestCluster::start(1).expect("start");
    let c = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    let (paths, zxid) = create_nodes(&c, "wipe", 40);
    assert!(zxid > 0x20, "zxid {zxid:#x}");
    c.close().into_result().expect("close");

    cluster.wipe(0).expect("wipe");
    assert!(!cluster.is_running(0));
    cluster.start_server(0).expect("start after wipe");
    cluster
        .wait_serving(0, Duration::from_secs(30))
        .expect("serving");

    let fresh = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    for p in &paths {
        assert!(fresh.exists(p).expect("exists").is_none(), "{p} survived");
    }
    let again = fresh
        .create(&unique("fresh"), b"", zkguard::CreateMode::Persistent)
        .expect("create")
        .stat
        .czxid;
    assert!(again < 0x20, "zxid after the wipe {again:#x}");

    // Not isolatable: isolate says so instead of doing nothing.
    let err = cluster.isolate(0).expect_err("not isolatable");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let err = TestCluster::builder()
        .servers(1)
        .isolatable(true)
        .start()
        .expect_err("a standalone server cannot be isolated");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

#[test]
fn wipe_every_member_of_an_ensemble_starts_it_empty() {
    let cluster = TestCluster::start(3).expect("start ensemble");
    let c = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    let (paths, zxid) = create_nodes(&c, "wipe3", 40);
    assert!(zxid & 0xffff_ffff > 0x20, "zxid {zxid:#x}");
    c.close().into_result().expect("close");

    for i in 0..3 {
        cluster.wipe(i).expect("wipe");
    }
    for i in 0..3 {
        cluster.start_server(i).expect("start after wipe");
    }
    for i in 0..3 {
        cluster
            .wait_serving(i, Duration::from_secs(60))
            .expect("serving");
    }
    // The same three members (each kept its myid) formed a new, empty ensemble.
    assert!(cluster.leader().is_some());
    let fresh = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    for p in &paths {
        let gone = zk_retry(Duration::from_secs(20), || fresh.exists(p));
        assert!(gone.is_none(), "{p} survived");
    }
    let again = zk_retry(Duration::from_secs(20), || {
        fresh.create(&unique("fresh"), b"", zkguard::CreateMode::Persistent)
    })
    .stat
    .czxid;
    assert!(
        again & 0xffff_ffff < 0x20,
        "zxid after the wipe {again:#x} (before {zxid:#x})"
    );
}

// ------------------------------------------------------------------------------------
// TestCluster: isolating one server from its peers
// ------------------------------------------------------------------------------------

fn isolatable_ensemble() -> TestCluster {
    let _ = env_logger::builder().is_test(true).try_init();
    TestCluster::builder()
        .servers(3)
        .tick_time(Duration::from_millis(100))
        .isolatable(true)
        .start()
        .expect("start an isolatable ensemble")
}

/// Asserts server `i` says it is not serving, and stays so for a while (no path around
/// the isolation lets it find a quorum).
fn assert_stays_not_serving(cluster: &TestCluster, i: usize) {
    let srvr = cluster.four_letter(i, "srvr").expect("srvr");
    assert!(
        srvr.contains("not currently serving requests"),
        "srvr of isolated server {i}: {srvr}"
    );
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        assert!(cluster.mode(i).is_err(), "isolated server {i} serves again");
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn isolating_the_leader_moves_leadership_and_rejoin_brings_it_back() {
    let cluster = isolatable_ensemble();
    let old = cluster.leader().expect("a leader");
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let started = Instant::now();
    cluster.isolate(old).expect("isolate");
    assert!(cluster.is_isolated(old));
    assert!(!cluster.is_isolated(others[0]));
    wait_until(
        "the isolated leader to stop serving",
        Duration::from_secs(20),
        || cluster.mode(old).is_err(),
    );
    eprintln!(
        "isolated leader stopped serving after {:?}",
        started.elapsed()
    );
    wait_until(
        "the other two to elect a leader",
        Duration::from_secs(30),
        || {
            let modes: Vec<_> = others.iter().map(|&j| cluster.mode(j).ok()).collect();
            modes.iter().all(Option::is_some)
                && modes.iter().any(|m| m.as_deref() == Some("leader"))
        },
    );
    eprintln!("new leader after {:?}", started.elapsed());
    assert_stays_not_serving(&cluster, old);
    assert!(cluster.isolate(old).is_ok(), "isolating twice is a no-op");

    // The majority serves a client.
    let majority = others
        .iter()
        .map(|&j| cluster.server_connect_string(j))
        .collect::<Vec<_>>()
        .join(",");
    let c = zk_client(&majority, Duration::from_secs(10));
    let p = unique("during-isolation");
    zk_retry(Duration::from_secs(20), || {
        c.create(&p, b"", zkguard::CreateMode::Persistent)
    });

    cluster.rejoin(old).expect("rejoin");
    assert!(!cluster.is_isolated(old));
    cluster
        .wait_serving(old, Duration::from_secs(30))
        .expect("serving again after rejoin");
    eprintln!("rejoined and serving after {:?}", started.elapsed());
    let mut mode = String::new();
    wait_until("the old leader to follow", Duration::from_secs(30), || {
        mode = cluster.mode(old).unwrap_or_default();
        mode == "follower"
    });
    // It synced what was written while it was cut off.
    let d = zk_client(&cluster.server_connect_string(old), Duration::from_secs(10));
    assert!(zk_retry(Duration::from_secs(20), || d.exists(&p)).is_some());
}

#[test]
fn a_client_of_an_isolated_follower_is_answered_until_the_follower_notices() {
    // A 400 ms tick: the follower notices after syncLimit (5) ticks, so this test's first
    // ping after the cut has 2 s to be answered instead of 0.5 s, which a loaded machine
    // (a slow isolate(), this thread or the server scheduled late) could miss.
    let _ = env_logger::builder().is_test(true).try_init();
    let cluster = TestCluster::builder()
        .servers(3)
        .tick_time(Duration::from_millis(400))
        .isolatable(true)
        .start()
        .expect("start an isolatable ensemble");
    let f = (0..3)
        .find(|&i| cluster.mode(i).ok().as_deref() == Some("follower"))
        .expect("a follower");
    let mut s = TcpStream::connect(cluster.client_addr(f)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    assert_ne!(zk_handshake(&mut s).expect("handshake"), 0);
    zk_ping(&mut s).expect("ping");

    let cut = Instant::now();
    cluster.isolate(f).expect("isolate");
    // ZooKeeper's behaviour: the follower answers pings on its own until it notices the
    // leader is gone. The harness must leave the client connection alone meanwhile.
    let mut answered = 0;
    let mut last_answer = Duration::ZERO;
    while cut.elapsed() < Duration::from_secs(20) {
        match zk_ping(&mut s) {
            Ok(()) => {
                answered += 1;
                last_answer = cut.elapsed();
            }
            Err(e) => {
                eprintln!("ping failed after {:?}: {e}", cut.elapsed());
                break;
            }
        }
        thread::sleep(Duration::from_millis(20)); // pacing, like a client's ping interval
    }
    eprintln!(
        "isolated follower answered {answered} ping(s), the last {last_answer:?} after the cut"
    );
    assert!(answered >= 1, "no ping answered after the isolation");
    wait_until(
        "the isolated follower to stop serving",
        Duration::from_secs(20),
        || cluster.mode(f).is_err(),
    );
    assert_stays_not_serving(&cluster, f);
    // The other two keep a leader and a follower.
    let others: Vec<usize> = (0..3).filter(|&i| i != f).collect();
    wait_until("the majority to serve", Duration::from_secs(30), || {
        others.iter().all(|&j| cluster.mode(j).is_ok())
    });

    cluster.rejoin(f).expect("rejoin");
    cluster
        .wait_serving(f, Duration::from_secs(30))
        .expect("serving again after rejoin");
}

/// Socket inodes of the open TCP sockets of process `pid` (from `/proc/<pid>/fd`).
fn socket_inodes(pid: &str) -> std::collections::HashSet<u64> {
    let mut inodes = std::collections::HashSet::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return inodes;
    };
    for fd in fds.flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let t = target.to_string_lossy();
            if let Some(inode) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                if let Ok(inode) = inode.parse() {
                    inodes.insert(inode);
                }
            }
        }
    }
    inodes
}

/// Established loopback TCP connections as (local port, remote port, inode).
fn established_tcp() -> Vec<(u16, u16, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap_or(""), 16).ok();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // 01 = ESTABLISHED
            if f.len() < 10 || f[3] != "01" {
                return None;
            }
            Some((port(f[1])?, port(f[2])?, f[9].parse().ok()?))
        })
        .collect()
}

/// Server `i`'s own quorum and election ports, from its `conf` (its own `server.N` line).
/// A server that is not serving at the moment (still syncing after the elections this
/// test forces, which a loaded machine stretches) answers `conf` without it: asked again.
fn own_peer_ports(cluster: &TestCluster, i: usize) -> (u16, u16) {
    let want = format!("server.{}=", i + 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    let line = loop {
        let conf = cluster.four_letter(i, "conf").unwrap_or_default();
        if let Some(line) = conf.lines().find(|l| l.starts_with(&want)) {
            break line.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no {want} line in server {i}'s conf within 30 s; last:\n{conf}"
        );
        thread::sleep(Duration::from_millis(50));
    };
    // server.N=127.0.0.1:Q:E:participant;...
    let parts: Vec<&str> = line.split(['=', ':', ';']).collect();
    (
        parts[2].parse().expect("quorum port"),
        parts[3].parse().expect("election port"),
    )
}

#[test]
fn isolatable_servers_never_connect_to_each_other_directly() {
    if !Path::new("/proc/net/tcp").exists() {
        eprintln!("no /proc/net/tcp: skipped");
        return;
    }
    let cluster = isolatable_ensemble();
    // Force elections in which higher ids connect back to lower ones.
    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader).expect("kill the leader");
    cluster.start_server(leader).expect("restart it");
    let lowest = 0;
    cluster.isolate(lowest).expect("isolate");
    wait_until("server 0 to drop out", Duration::from_secs(20), || {
        cluster.mode(lowest).is_err()
    });
    cluster.rejoin(lowest).expect("rejoin");
    cluster
        .wait_serving(lowest, Duration::from_secs(30))
        .expect("serving");

    let real: Vec<(u16, u16)> = (0..3).map(|i| own_peer_ports(&cluster, i)).collect();
    let real_ports: Vec<u16> = real.iter().flat_map(|&(q, e)| [q, e]).collect();
    let ours = socket_inodes("self");
    let conns = established_tcp();
    // Every connection to a server's real quorum or election port comes from a proxy.
    let direct: Vec<_> = conns
        .iter()
        .filter(|(_, remote, inode)| real_ports.contains(remote) && !ours.contains(inode))
        .collect();
    assert!(
        direct.is_empty(),
        "servers connected to a peer's real port, bypassing the proxies: {direct:?} \
         (real ports {real:?})"
    );
    // And the peers do talk, through the proxies.
    let proxied = conns
        .iter()
        .filter(|(_, remote, inode)| real_ports.contains(remote) && ours.contains(inode))
        .count();
    assert!(proxied >= 3, "only {proxied} proxied peer connections");
}

// ------------------------------------------------------------------------------------
// Secured servers: TLS (secureClientPort) and SASL DIGEST-MD5
// ------------------------------------------------------------------------------------

/// A TLS client for the tests, with rustls: handshakes with `addr` trusting `ca_pem`,
/// presenting `client` (certificate, key) if given, then opens a ZooKeeper session over
/// the TLS stream. `Ok(session id)` or the first error as text.
#[cfg(feature = "tls")]
fn tls_session(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<(&str, &str)>,
) -> Result<i64, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("add CA");
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .expect("client cert PEM");
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("client key PEM");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client auth")
        }
    };
    let name = ServerName::try_from("localhost").expect("server name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("tls client");
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    }
    zk_handshake(&mut tls).map_err(|e| format!("ZooKeeper session over TLS with {addr}: {e}"))
}

/// Whether `addr` completes a TLS handshake and serves a ZooKeeper session over it.
#[cfg(feature = "tls")]
fn assert_tls_serves(addr: SocketAddr, ca_pem: &str, client: Option<(&str, &str)>) {
    match tls_session(addr, ca_pem, client) {
        Ok(session) => assert_ne!(session, 0, "{addr} refused the session"),
        Err(e) => panic!("TLS to {addr} failed: {e}"),
    }
}

#[test]
fn tls_standalone_has_a_secure_port_and_a_pki() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .expect("start a TLS server");
    let pki = cluster.pki().expect("pki");
    assert!(pki.dir().starts_with(cluster.dir()));
    let secure = cluster.secure_client_addr(0).expect("secure port");
    assert_ne!(secure, cluster.client_addr(0));
    assert_eq!(
        cluster
            .secure_connect_string()
            .expect("secure connect string"),
        secure.to_string()
    );
    // The plaintext port keeps serving (four-letter words, existing clients).
    assert!(cluster
        .four_letter(0, "ruok")
        .expect("ruok")
        .contains("imok"));
    let cfg = std::fs::read_to_string(cluster.dir().join("zoo-0.cfg")).expect("zoo.cfg");
    assert!(cfg.contains("ssl.clientAuth=none"), "{cfg}");
    #[cfg(feature = "tls")]
    {
        assert_tls_serves(secure, pki.ca_cert_pem(), None);
        // Another CA's certificate does not verify the server.
        let stranger =
            zkguard::testing::TestPki::generate(&cluster.dir().join("stranger")).expect("pki");
        let err = tls_session(secure, stranger.ca_cert_pem(), None).expect_err("wrong CA");
        assert!(err.contains("handshake"), "{err}");
        // TLS passes through a proxy untouched.
        let proxy = FaultProxy::for_cluster_secure(&cluster).expect("proxy");
        assert_tls_serves(proxy.local_addrs()[0], pki.ca_cert_pem(), None);
    }
    // A plaintext cluster has none of it.
    assert!(
        FaultProxy::for_cluster_secure(&TestCluster::start(1).expect("plain"))
            .is_err_and(|e| e.kind() == ErrorKind::InvalidInput)
    );
}

#[test]
fn tls_need_refuses_clients_without_a_certificate() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::Need)
        .start()
        .expect("start a mutual-TLS server");
    let cfg = std::fs::read_to_string(cluster.dir().join("zoo-0.cfg")).expect("zoo.cfg");
    assert!(cfg.contains("ssl.clientAuth=need"), "{cfg}");
    #[cfg(feature = "tls")]
    {
        let pki = cluster.pki().expect("pki");
        let secure = cluster.secure_client_addr(0).expect("secure port");
        let err = tls_session(secure, pki.ca_cert_pem(), None).expect_err("no client cert");
        assert!(!err.is_empty());
        let client = pki.client();
        assert_tls_serves(
            secure,
            pki.ca_cert_pem(),
            Some((client.cert_pem(), client.key_pem())),
        );
        // A certificate from another CA is refused too.
        let stranger =
            zkguard::testing::TestPki::generate(&cluster.dir().join("stranger")).expect("pki");
        let c = stranger.client();
        tls_session(secure, pki.ca_cert_pem(), Some((c.cert_pem(), c.key_pem())))
            .expect_err("client cert of another CA");
    }
}

#[test]
fn tls_ensemble_serves_tls_on_every_server_and_after_a_restart() {
    let cluster = TestCluster::builder()
        .servers(3)
        .tls(ClientAuth::Want)
        .sasl_digest_users(&[("alice", "alice-secret")])
        .start()
        .expect("start a TLS ensemble that requires SASL");
    let secure: Vec<SocketAddr> = (0..3)
        .map(|i| cluster.secure_client_addr(i).expect("secure port"))
        .collect();
    assert_eq!(
        cluster.secure_connect_string().expect("secure"),
        secure
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    #[cfg(feature = "tls")]
    {
        let pki = cluster.pki().expect("pki");
        let client = pki.client();
        for &addr in &secure {
            assert_tls_serves(addr, pki.ca_cert_pem(), None);
            assert_tls_serves(
                addr,
                pki.ca_cert_pem(),
                Some((client.cert_pem(), client.key_pem())),
            );
        }
    }
    // SASL is required on every member (here on a plaintext port).
    let mut s = TcpStream::connect(cluster.client_addr(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert_ne!(zk_handshake(&mut s).expect("session"), 0);
    assert_eq!(zk_get_data_err(&mut s).expect("a reply"), -124);

    cluster.kill(1).expect("kill");
    assert!(TcpStream::connect_timeout(&secure[1], Duration::from_secs(1)).is_err());
    cluster.start_server(1).expect("restart");
    // start_server returns once the server serves, its secure port included.
    TcpStream::connect_timeout(&secure[1], Duration::from_secs(1)).expect("secure port back");
    #[cfg(feature = "tls")]
    assert_tls_serves(secure[1], cluster.pki().expect("pki").ca_cert_pem(), None);
}

#[test]
fn tls_standalone_survives_kill_restart_pause_and_wipe() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .expect("start");
    let secure = cluster.secure_client_addr(0).expect("secure port");
    cluster.kill(0).expect("kill");
    cluster.start_server(0).expect("restart");
    cluster.pause(0).expect("pause");
    cluster.resume(0).expect("resume");
    cluster.wipe(0).expect("wipe");
    cluster.start_server(0).expect("start the wiped server");
    TcpStream::connect_timeout(&secure, Duration::from_secs(1)).expect("secure port back");
    #[cfg(feature = "tls")]
    assert_tls_serves(secure, cluster.pki().expect("pki").ca_cert_pem(), None);
}

#[cfg(feature = "tls")]
#[test]
fn tls_with_an_expired_server_certificate_is_refused_by_the_client() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .tls_expired_server_cert(true)
        .start()
        .expect("start a server with an expired certificate");
    let pki = cluster.pki().expect("pki");
    let secure = cluster.secure_client_addr(0).expect("secure port");
    let err = tls_session(secure, pki.ca_cert_pem(), None).expect_err("expired");
    assert!(err.to_lowercase().contains("expired"), "{err}");
}

#[test]
fn bad_sasl_users_are_rejected_before_anything_starts() {
    for (users, needle) in [
        (vec![("", "pw")], "empty name"),
        (vec![("al\"ice", "pw")], "al\\\"ice"),
        (vec![("back\\slash", "pw")], "back"),
        (vec![("bob", "pass\"word")], "\"bob\""),
        (vec![("bob", "")], "\"bob\""),
        (vec![("bob", "1"), ("bob", "2")], "twice"),
        (vec![], "at least one"),
    ] {
        let err = TestCluster::builder()
            .sasl_digest_users(&users)
            .start()
            .expect_err("invalid SASL users");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(needle), "{err} lacks {needle}");
    }
    let err = TestCluster::builder()
        .tls_expired_server_cert(true)
        .start()
        .expect_err("expired cert without tls");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

/// Sends getData("/") on an open session; the reply header's error code, or the I/O error
/// when the server closed the connection instead.
fn zk_get_data_err(s: &mut TcpStream) -> std::io::Result<i32> {
    let mut req = Vec::new();
    req.extend_from_slice(&1i32.to_be_bytes()); // xid
    req.extend_from_slice(&4i32.to_be_bytes()); // getData
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(b"/");
    req.push(0); // no watch
    write_frame(s, &req)?;
    let reply = read_frame(s)?;
    Ok(i32::from_be_bytes(
        reply[12..16].try_into().expect("4 bytes"),
    ))
}

#[test]
fn sasl_required_refuses_unauthenticated_requests() {
    let cluster = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret"), ("bob", "bob-secret")])
        .start()
        .expect("start a SASL server");
    let jaas = std::fs::read_to_string(cluster.jaas_path().expect("jaas")).expect("read jaas");
    assert!(jaas.contains("user_alice=\"alice-secret\""), "{jaas}");
    let mut s = TcpStream::connect(cluster.client_addr(0)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert_ne!(zk_handshake(&mut s).expect("session"), 0);
    // ZooKeeper 3.8 answers SessionClosedRequireSaslAuth (-124) and closes the connection.
    assert_eq!(zk_get_data_err(&mut s).expect("a reply"), -124);
    assert!(read_frame(&mut s).is_err(), "the connection stays open");

    let open = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret")])
        .sasl_required(false)
        .start()
        .expect("start a SASL server that does not require it");
    let mut s = TcpStream::connect(open.client_addr(0)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert_ne!(zk_handshake(&mut s).expect("session"), 0);
    assert_eq!(zk_get_data_err(&mut s).expect("a reply"), 0);
}
