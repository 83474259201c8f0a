//! A daemon with a lock and an election that serves its zkguard metrics to Prometheus at
//! `/metrics`, over a plain `std::net::TcpListener`: zkguard records through the `metrics`
//! facade (feature `metrics`), and the application picks the exporter. Here that is
//! `metrics-exporter-prometheus` without its default features (no HTTP listener, so no tokio
//! or hyper): it renders the text format, and this file serves it.
//!
//! Two workers (two clients, so two sessions) take turns on a mutex, and each also joins an
//! election; the metrics show their acquire waits, hold times, handoffs, the waiters queued,
//! the leader, the session states and the request latencies.
//!
//! ```text
//! cargo run --example metrics_prometheus --features testing,metrics            # serves :9464
//! curl -s 127.0.0.1:9464/metrics | grep zkguard_
//! cargo run --example metrics_prometheus --features testing,metrics -- --once  # CI: one
//!     # round of work, one scrape of its own endpoint, checked and printed, then exit
//! ```
//!
//! Each connection is served on a thread of its own, and what is read of a request is capped
//! (its request line and headers together, [`MAX_HEAD`]): a slow or endless client holds
//! only its own thread and a few KiB, never the next scrape. `--once` shows it: its scrape
//! is made while another client trickles an endless header, and a request line over the cap
//! is answered 431.
//!
//! With `ZK_CONNECT` unset it starts a throwaway ZooKeeper server on loopback (the
//! `testing` feature's harness); with `ZK_CONNECT=host:port,...` it uses your ensemble,
//! under a fresh `/zkguard-metrics-<pid>` path.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use zkguard::testing::TestCluster;
use zkguard::{Client, LeaderElection, Mutex};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The most read of one request: its request line and headers together. A scrape's are a
/// few hundred bytes.
const MAX_HEAD: u64 = 8 * 1024;

/// Rounds of work per worker with `--once`.
const ROUNDS: usize = 20;

fn main() -> BoxResult<()> {
    let once = std::env::args().any(|a| a == "--once");
    let listen = match std::env::args().skip_while(|a| a != "--listen").nth(1) {
        Some(a) => a,
        None if once => "127.0.0.1:0".into(),
        None => "127.0.0.1:9464".into(),
    };
    // Seconds-scale buckets: lock waits and holds run from milliseconds to minutes.
    let buckets = [0.001, 0.005, 0.02, 0.1, 0.5, 2.0, 10.0, 60.0, 600.0];
    let handle = PrometheusBuilder::new()
        .set_buckets(&buckets)?
        .install_recorder()?;

    let cluster;
    let connect_string = match std::env::var("ZK_CONNECT") {
        Ok(cs) => cs,
        Err(_) => {
            cluster = TestCluster::start(1)?;
            cluster.connect_string()
        }
    };
    let root = format!("/zkguard-metrics-{}", std::process::id());

    let listener = TcpListener::bind(&listen)?;
    let addr = listener.local_addr()?;
    println!("serving http://{addr}/metrics");
    let served = handle.clone();
    std::thread::spawn(move || serve(listener, served));

    let workers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|id| {
            let (cs, root) = (connect_string.clone(), root.clone());
            std::thread::spawn(move || work(&cs, &root, id, once.then_some(ROUNDS)))
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| "a worker panicked")??;
    }
    // Only with --once do the workers stop: scrape our own endpoint, as Prometheus would,
    // while a slow client trickles an endless header (served one at a time, the scrape
    // would wait for it for half an hour), and check that an oversized request is refused.
    let slow = slow_client(&addr.to_string())?;
    let body = scrape(&addr.to_string())?;
    drop(slow);
    oversized(&addr.to_string())?;
    print!("{body}");
    for want in [
        "zkguard_acquires_total",
        "zkguard_acquire_wait_seconds_bucket",
        "zkguard_hold_seconds",
        "zkguard_guards_held",
        "zkguard_leadership_gained_total",
        "zkguard_leading",
        "zkguard_session_state",
        "zkguard_request_seconds",
    ] {
        if !body.contains(want) {
            return Err(format!("{want} missing from /metrics").into());
        }
    }
    println!("# metrics_prometheus: every expected metric served");
    Ok(())
}

/// One worker: its own client, a candidate in the election, and turns on the mutex (for
/// `rounds` turns, or for ever).
fn work(connect_string: &str, root: &str, id: &str, rounds: Option<usize>) -> zkguard::Result<()> {
    let client = Client::builder(connect_string)
        .session_timeout(Duration::from_secs(6))
        .metrics_path_labels(true) // two paths: a series each is fine
        .build()?;
    let candidate = LeaderElection::new(&client, &format!("{root}/leader"), id)?.join()?;
    let lock = Mutex::new(&client, &format!("{root}/jobs"))?.with_data(id);
    let mut done = 0;
    while rounds.is_none_or(|n| done < n) {
        let guard = lock.acquire()?;
        std::thread::sleep(Duration::from_millis(10)); // the job
        guard.release()?;
        done += 1;
    }
    drop(candidate);
    client.close();
    Ok(())
}

/// Answers `GET /metrics` with the rendered text format, anything else with 404; each
/// connection on a thread of its own.
fn serve(listener: TcpListener, handle: PrometheusHandle) {
    for stream in listener.incoming().flatten() {
        let handle = handle.clone();
        std::thread::spawn(move || {
            let _ = answer(stream, &handle);
        });
    }
}

fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    // At most MAX_HEAD bytes are read, however long the lines a client sends.
    let mut reader = BufReader::new((&stream).take(MAX_HEAD));
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The headers too, up to the blank line: a socket closed with unread bytes is reset,
    // and the client would lose the reply.
    let mut header = String::new();
    let mut complete = request.ends_with('\n');
    while complete {
        header.clear();
        let n = reader.read_line(&mut header)?;
        complete = header.ends_with('\n');
        if n <= 2 {
            break;
        }
    }
    // Incomplete: the cap reached, or the client's end closed before the blank line.
    let capped = reader.get_ref().limit() == 0;
    let (status, body) = if !complete && capped {
        (
            "431 Request Header Fields Too Large",
            format!("a request's line and headers are read up to {MAX_HEAD} bytes\n"),
        )
    } else if !complete {
        ("400 Bad Request", "the request ended early\n".to_string())
    } else if request.starts_with("GET /metrics ") {
        handle.run_upkeep();
        ("200 OK", handle.render())
    } else {
        ("404 Not Found", "try /metrics\n".to_string())
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    if !complete {
        // The reply, then our end closed; what the client still sends is read (a bounded
        // amount) and dropped, so the close is not a reset that would lose the reply.
        stream.shutdown(std::net::Shutdown::Write)?;
        std::io::copy(&mut (&stream).take(16 * MAX_HEAD), &mut std::io::sink())?;
    }
    Ok(())
}

/// A client that sends a request line, then one header byte every 100 ms, for as long as
/// the returned sender lives (or the server lets it).
fn slow_client(addr: &str) -> BoxResult<std::sync::mpsc::Sender<()>> {
    let mut s = TcpStream::connect(addr)?;
    write!(s, "GET /metrics HTTP/1.1\r\nX-Slow: ")?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            stopped.recv_timeout(Duration::from_millis(100))
        {
            if s.write_all(b"a").is_err() {
                return;
            }
        }
    });
    Ok(stop)
}

/// A request line longer than [`MAX_HEAD`] is answered 431, not read to its end.
fn oversized(addr: &str) -> BoxResult<()> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    // Written on a thread: the server stops reading at the cap, so the write may block.
    let mut w = s.try_clone()?;
    std::thread::spawn(move || {
        let line = vec![b'a'; 4 * MAX_HEAD as usize];
        let _ = w.write_all(b"GET /");
        let _ = w.write_all(&line);
        let _ = w.shutdown(std::net::Shutdown::Write);
    });
    let mut reply = Vec::new();
    s.read_to_end(&mut reply)?;
    let reply = String::from_utf8_lossy(&reply);
    if !reply.starts_with("HTTP/1.1 431") {
        return Err(format!("an oversized request got: {reply:.200}").into());
    }
    println!("# metrics_prometheus: an oversized request was refused (431)");
    Ok(())
}

/// `GET /metrics` from `addr`: the body.
fn scrape(addr: &str) -> BoxResult<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n")?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    match reply.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(format!("unexpected reply: {reply}").into()),
    }
}
