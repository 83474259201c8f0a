//! What the server pays for a queue's waiters: N waiters blocked on one `Mutex`, spread over
//! `WATCH_CLIENTS` clients (sessions), against a standalone harness server. Prints one JSON
//! line per N: the server's watch total and watched paths (`wchs`), `mntr`'s watch count,
//! the server's live heap (`jcmd GC.class_histogram`, after a full GC) and its resident memory,
//! each as a difference from before the waiters queued and per waiter; then `WATCH_RELEASES`
//! releases one at a time, each timed from the holder's release call to the next holder's
//! acquire returning (p50, p99), and the server's `mntr` packets sent per release.
//!
//! ```text
//! WATCH_N=1000,10000 WATCH_CLIENTS=10 cargo run --release --example watch_cost --features testing
//! ```
//!
//! Figures only, never assertions (docs/performance.md quotes them).

use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use zkguard::testing::TestCluster;
use zkguard::{Client, Mutex, MutexGuard};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn env_one(name: &str, default: usize) -> usize {
    env_list(name, &default.to_string())
        .first()
        .copied()
        .unwrap_or(default)
}

/// `wchs`: (paths watched, total watches).
fn wchs(cluster: &TestCluster) -> Res<(u64, u64)> {
    let reply = cluster.four_letter(0, "wchs")?;
    let num = |after: &str, before: &str| -> Option<u64> {
        let rest = reply.split(after).nth(1)?;
        rest.split(before).next()?.trim().parse().ok()
    };
    let paths = num("watching", "paths").ok_or("wchs: no path count")?;
    let total = num("Total watches:", "\n").ok_or("wchs: no total")?;
    Ok((paths, total))
}

/// One `mntr` figure.
fn mntr(cluster: &TestCluster, key: &str) -> Res<u64> {
    let reply = cluster.four_letter(0, "mntr")?;
    reply
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once('\t')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| format!("mntr: no {key}").into())
}

/// The server's live heap in bytes (`jcmd GC.class_histogram`: a full GC first, then the
/// total of every live object), and its resident set in KiB.
fn server_memory(cluster: &TestCluster) -> Res<(u64, u64)> {
    let pid = cluster.pid(0).ok_or("no server pid")?.to_string();
    let out = Command::new("jcmd")
        .args([&pid, "GC.class_histogram"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "Total       123456     7890123"
    let live = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Total"))
        .and_then(|s| s.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("jcmd GC.class_histogram: {text}"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|s| s.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Ok((live, rss))
}

/// Polls until `f` gives the same value for 2 s, or `limit` passes.
fn settled(limit: Duration, mut f: impl FnMut() -> Res<u64>) -> Res<u64> {
    let until = Instant::now() + limit;
    let mut last = f()?;
    loop {
        thread::sleep(Duration::from_secs(2));
        let now = f()?;
        if now == last || Instant::now() > until {
            return Ok(now);
        }
        last = now;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn run_one(cluster: &TestCluster, n: usize, clients: usize, releases: usize) -> Res<()> {
    let path = format!("/watch-cost-{n}-{}", uuid::Uuid::new_v4().simple());
    // Patient clients: at 10,000 waiters every enqueue lists thousands of names.
    let connect = || {
        Client::builder(&cluster.connect_string())
            .session_timeout(Duration::from_secs(30))
            .request_timeout(Duration::from_secs(60))
            .build()
    };
    let holder_client = connect()?;
    let sessions: Vec<Client> = (0..clients).map(|_| connect()).collect::<Result<_, _>>()?;
    let mut held = Mutex::new(&holder_client, &path)?.acquire()?;
    let (paths0, watches0) = wchs(cluster)?;
    let (heap0, rss0) = server_memory(cluster)?;
    let (tx, rx) = mpsc::channel::<(MutexGuard, Instant)>();
    let start = Instant::now();
    let mut threads = Vec::new();
    for i in 0..n {
        let (c, path, tx) = (sessions[i % clients].clone(), path.clone(), tx.clone());
        threads.push(
            thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    if let Ok(g) = Mutex::new(&c, &path).and_then(|l| l.acquire()) {
                        let _ = tx.send((g, Instant::now()));
                    }
                })?,
        );
    }
    drop(tx);
    let list = loop {
        match holder_client.get_children(&path) {
            Ok((names, _)) if names.len() > n => break names,
            Err(e) if !e.is_connection_error() => return Err(e.into()),
            _ => thread::sleep(Duration::from_millis(200)),
        }
    };
    let queued_s = start.elapsed().as_secs_f64();
    let watches = settled(Duration::from_secs(60), || Ok(wchs(cluster)?.1))?;
    let (paths, _) = wchs(cluster)?;
    let mntr_watches = mntr(cluster, "zk_watch_count")?;
    let (heap, rss) = server_memory(cluster)?;
    let per = |a: u64, b: u64| (a as f64 - b as f64) / n as f64;
    // Releases, one at a time: each next holder hands its guard back.
    let sent0 = mntr(cluster, "zk_packets_sent")?;
    let mut times = Vec::new();
    for _ in 0..releases.min(n) {
        let t0 = Instant::now();
        held.release()?;
        let (g, at) = rx.recv()?;
        times.push(at - t0);
        held = g;
    }
    let sent = mntr(cluster, "zk_packets_sent")? - sent0;
    times.sort();
    println!(
        "{{\"figure\":\"watch_cost\",\"waiters\":{n},\"clients\":{clients},\"queued_s\":{queued_s:.1},\
         \"children\":{},\"wchs_paths\":{},\"wchs_watches\":{},\"watches_per_waiter\":{:.3},\
         \"mntr_watch_count\":{mntr_watches},\"live_heap_before\":{heap0},\"live_heap\":{heap},\
         \"heap_bytes_per_waiter\":{:.0},\"rss_bytes_per_waiter\":{:.0},\"releases\":{},\
         \"handoff_p50_us\":{:.0},\"handoff_p99_us\":{:.0},\"packets_sent_per_release\":{:.2}}}",
        list.len(),
        paths - paths0,
        watches - watches0,
        per(watches, watches0),
        per(heap, heap0),
        per(rss * 1024, rss0 * 1024),
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        sent as f64 / times.len().max(1) as f64,
    );
    // Closing the clients ends every blocked acquire.
    drop(held);
    for c in &sessions {
        let _ = c.close();
    }
    let _ = holder_client.close();
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

fn main() -> Res<()> {
    let ns = env_list("WATCH_N", "1000");
    let clients = env_one("WATCH_CLIENTS", 10);
    let releases = env_one("WATCH_RELEASES", 200);
    let cluster = TestCluster::start(1)?;
    for n in ns {
        run_one(&cluster, n, clients, releases)?;
    }
    Ok(())
}
