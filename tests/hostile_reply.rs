//! A hostile server's huge reply, in a test binary of its own: the process's peak memory
//! (`VmHWM`) is this test's alone.
//!
//! A scripted server (no ZooKeeper sends this) answers the handshake, then a getChildren
//! with 64 MiB of empty names: 16 777 216 of them, each 4 bytes on the wire and 24 as a
//! `String`. Decoded, they took about 400 MB; the client refuses the listing (more entries
//! than it decodes from one reply) and stays well under 200 MB.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use zkguard::{Client, Error};

/// Names in the reply: 64 MiB of 4-byte lengths of zero.
const NAMES: usize = 16 << 20;

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// A reply header (xid, zxid, error 0) with its frame length for a body of `body` bytes.
fn header(xid: i32, body: usize) -> Vec<u8> {
    let mut f = ((16 + body) as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&xid.to_be_bytes());
    f.extend_from_slice(&1i64.to_be_bytes());
    f.extend_from_slice(&0i32.to_be_bytes());
    f
}

/// Answers the handshake, pings and a close; a getChildren2 gets [`NAMES`] empty names
/// and a stat, streamed from one zeroed megabyte (the server's memory is this process's).
fn serve(mut s: TcpStream) -> std::io::Result<()> {
    read_frame(&mut s)?; // ConnectRequest
    let mut resp = Vec::new();
    resp.extend_from_slice(&0i32.to_be_bytes());
    resp.extend_from_slice(&10_000i32.to_be_bytes());
    resp.extend_from_slice(&0x54i64.to_be_bytes());
    resp.extend_from_slice(&16i32.to_be_bytes());
    resp.extend_from_slice(&[7u8; 16]);
    let mut frame = (resp.len() as u32).to_be_bytes().to_vec();
    frame.extend(resp);
    s.write_all(&frame)?;
    let zeros = vec![0u8; 1 << 20];
    loop {
        let req = read_frame(&mut s)?;
        let xid = i32::from_be_bytes(req[..4].try_into().unwrap());
        let op = i32::from_be_bytes(req[4..8].try_into().unwrap());
        match op {
            12 => {
                let body = 4 + 4 * NAMES + 68;
                s.write_all(&header(xid, body))?;
                s.write_all(&(NAMES as i32).to_be_bytes())?;
                let mut left = 4 * NAMES + 68; // the names, then a stat of zeros
                while left > 0 {
                    let n = left.min(zeros.len());
                    s.write_all(&zeros[..n])?;
                    left -= n;
                }
            }
            -11 => {
                s.write_all(&header(xid, 0))?;
                return Ok(());
            }
            _ => s.write_all(&header(xid, 0))?,
        }
    }
}

/// The process's peak resident memory, in bytes (`VmHWM` of /proc/self/status).
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("a VmHWM line");
    let kb: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in kB");
    kb * 1024
}

#[test]
fn sixty_four_mib_of_empty_child_names_stay_under_200_mb() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = std::thread::spawn(move || {
        let (s, _) = listener.accept().expect("accept");
        let _ = serve(s);
    });
    let c = Client::builder(&addr)
        // The reply is a little over the 64 MiB default: let the client take it whole.
        .max_reply_size(80 << 20)
        .session_timeout(Duration::from_secs(10))
        .request_timeout(Duration::from_secs(120))
        .build()
        .expect("the scripted server's session");
    let before = peak_rss();
    let got = c.get_children("/many");
    let peak = peak_rss();
    let outcome = match &got {
        Ok((names, _)) => format!("Ok with {} names", names.len()),
        Err(e) => format!("Err({e})"),
    };
    eprintln!(
        "peak {} MB, {} MB before the call: {outcome}",
        peak >> 20,
        before >> 20
    );
    assert!(
        peak < 200 << 20,
        "peak resident memory {} MB (before the call {} MB): {outcome}",
        peak >> 20,
        before >> 20
    );
    match got {
        Err(Error::Malformed { op, path, reason }) => {
            assert_eq!((op, path.as_str()), ("get_children", "/many"));
            assert!(reason.contains("more than the 1048576"), "{reason}");
        }
        r => panic!("expected the listing refused, got {outcome}: {r:?}"),
    }
    drop(c);
    server.join().expect("the scripted server");
}
