//! Benchmark figures, one JSON line each (figures, not assertions).
//!
//! Against a throwaway standalone server from the harness (`forceSync=no`, the JVM's full
//! JIT, warmed up for 3 s first), or the ensemble named by `ZK_CONNECT`. `BENCH_N` sets the samples per figure (default 2000).
//! `BENCH_ONLY` picks workloads, comma-separated (default all): `ops`, `W1`, `W2` (or one of
//! `W2:2`, `W2:8`, `W2:32`), `W3`, `W5`, `W6`.
//!
//! ```text
//! cargo run --release --example bench --features testing
//! BENCH_ONLY=W1,W6 BENCH_N=500 cargo run --release --example bench --features testing
//! ```
//!
//! Figures:
//!
//! - `ops`: the round trip (median and p99) of create, get_children, exists and delete, and
//!   of a create + get_children pair sent back to back on the session (pipelined), next to
//!   the same pair sent one after the other.
//! - `W1`: one session, one thread, `Mutex` acquire + release on one path, `BENCH_N` times,
//!   interleaved with a create (ephemeral sequential) + delete cycle on the same client;
//!   `ratio` = lock cycle p50 / create+delete p50. Also the acquire and release apart, and
//!   the requests the lock sends made by hand (create + listing pipelined, then delete), so
//!   `ratio_to_same_requests` is the library's own overhead.
//! - `W2:K`: K sessions, one thread each, acquire → release until `BENCH_N` acquisitions in
//!   all: throughput, handoff (from just before a holder's release to the next holder's
//!   acquire returning), the holders' release (delete) time, mutual-exclusion violations;
//!   `ratio` = handoff p50 / the p50 of a delete seen by another session's data watch
//!   (`W2 delete+watch`, measured once per run).
//! - `W3`: 50 sessions queued behind a holder; watch notifications the 50 receive when the
//!   holder releases and the next one takes over.
//! - `W5`: `RwLock`, 8 sessions (6 readers, 2 writers), `BENCH_N` acquisitions in all.
//! - `W6`: 1,000 waiters (20 threads on each of 50 sessions) on one `Mutex`: threads (and
//!   `library_threads`: all but ours and main), resident memory per waiter (beside what an
//!   idle thread of ours costs), and handoff p50 at 1,000 waiters against 8 waiters, both
//!   measured as in `W2` with threads that queue again after each release.
//!
//! Contention runs (`W2`, `W6`) start with every contender queued behind a holder on the
//! bench's own session, count `BENCH_N` acquisitions or as many as happen in 90 s (then
//! `time_capped` is true), and cancel the waiters left.
//!
//! Every workload runs under a watchdog: one that takes too long prints an `error` line and
//! ends the process with status 2 (the harness's own watchdog then stops the servers). Each
//! blocking acquire is bounded as well. A workload that fails prints an `error` line; the
//! others still run, and the process exits with status 1.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};
use parking_lot::Mutex as PlMutex;
use zkguard::testing::TestCluster;
use zkguard::{Client, CreateMode, EventType, Mutex, RwLock};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = std::result::Result<T, BoxError>;

/// How long one acquire may block before the workload fails.
const LOCK_WAIT: Duration = Duration::from_secs(60);
/// Contention runs stop counting after this long (and say so).
const CAP: Duration = Duration::from_secs(90);
/// Longest wait for any single step that is not an acquire (a watch event, a queue forming).
const STEP_WAIT: Duration = Duration::from_secs(60);

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn report(figure: &str, target: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{{\"figure\":\"{figure}\",\"target\":\"{target}\",\"n\":{},\"p50_us\":{:.1},\"p99_us\":{:.1},\"mean_us\":{:.1}}}",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.iter().map(|d| d.as_secs_f64()).sum::<f64>() / samples.len() as f64 * 1e6
    );
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

// ---------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------

/// One JSON object, fields in insertion order.
struct Line(String);

impl Line {
    fn new(figure: &str, target: &str) -> Line {
        Line(String::new()).s("figure", figure).s("target", target)
    }

    fn key(&mut self, k: &str) {
        self.0.push(if self.0.is_empty() { '{' } else { ',' });
        let _ = write!(self.0, "\"{k}\":");
    }

    fn s(mut self, k: &str, v: &str) -> Line {
        self.key(k);
        self.0.push('"');
        for c in v.chars() {
            match c {
                '"' => self.0.push_str("\\\""),
                '\\' => self.0.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(self.0, "\\u{:04x}", c as u32);
                }
                c => self.0.push(c),
            }
        }
        self.0.push('"');
        self
    }

    fn f(mut self, k: &str, v: f64) -> Line {
        self.key(k);
        if v.is_finite() {
            let _ = write!(self.0, "{}", (v * 1000.0).round() / 1000.0);
        } else {
            self.0.push_str("null");
        }
        self
    }

    fn u(mut self, k: &str, v: u64) -> Line {
        self.key(k);
        let _ = write!(self.0, "{v}");
        self
    }

    fn b(mut self, k: &str, v: bool) -> Line {
        self.key(k);
        let _ = write!(self.0, "{v}");
        self
    }

    /// p50 and p99 in µs of `samples` (sorted here) under `prefix`.
    fn lat(self, prefix: &str, samples: &mut [Duration]) -> Line {
        samples.sort();
        self.f(&format!("{prefix}p50_us"), percentile(samples, 0.5))
            .f(&format!("{prefix}p99_us"), percentile(samples, 0.99))
    }

    fn print(mut self) {
        self.0.push('}');
        println!("{}", self.0);
    }
}

fn p50(samples: &mut [Duration]) -> f64 {
    samples.sort();
    percentile(samples, 0.5)
}

// ---------------------------------------------------------------------------------------
// Threads, watchdog, process figures
// ---------------------------------------------------------------------------------------

/// Threads this program started that are still running.
static BENCH_THREADS: AtomicUsize = AtomicUsize::new(0);

struct ThreadCount;

impl Drop for ThreadCount {
    fn drop(&mut self) {
        BENCH_THREADS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Spawns a counted thread (small stack: the workers only wait and keep a few buffers).
fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> Res<JoinHandle<T>> {
    BENCH_THREADS.fetch_add(1, Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name(name)
        .stack_size(256 * 1024)
        .spawn(move || {
            let _count = ThreadCount;
            f()
        });
    spawned.map_err(|e| {
        BENCH_THREADS.fetch_sub(1, Ordering::SeqCst);
        format!("cannot spawn a thread: {e}").into()
    })
}

/// Joins every handle; the first error (or panic) wins.
fn join_all<T>(handles: Vec<JoinHandle<Res<T>>>) -> Res<Vec<T>> {
    let mut out = Vec::with_capacity(handles.len());
    let mut first_err: Option<BoxError> = None;
    for h in handles {
        match h.join() {
            Ok(Ok(v)) => out.push(v),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert_with(|| "a worker thread panicked".into());
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Ends the process loudly if a workload outlives its budget.
struct Watchdog {
    tx: Sender<Option<(String, Instant)>>,
}

struct Armed<'a>(&'a Watchdog);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        let _ = self.0.tx.send(None);
    }
}

impl Watchdog {
    fn start(target: String) -> Res<Watchdog> {
        let (tx, rx) = crossbeam_channel::unbounded::<Option<(String, Instant)>>();
        spawn("bench-watchdog".into(), move || {
            let mut armed: Option<(String, Instant)> = None;
            loop {
                let msg = match &armed {
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    Some((_, deadline)) => rx.recv_deadline(*deadline),
                };
                match msg {
                    Ok(m) => armed = m,
                    Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => {
                        let name = armed.map(|(n, _)| n).unwrap_or_default();
                        Line::new(&name, &target)
                            .s("error", "timed out: the workload outlived its budget")
                            .print();
                        eprintln!("bench: workload {name} timed out; exiting");
                        std::process::exit(2);
                    }
                }
            }
        })?;
        Ok(Watchdog { tx })
    }

    fn arm(&self, name: &str, budget: Duration) -> Armed<'_> {
        let _ = self
            .tx
            .send(Some((name.to_string(), Instant::now() + budget)));
        Armed(self)
    }
}

/// A field of `/proc/self/status` (the number before any unit).
fn proc_status(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

// ---------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------

struct Ctx {
    connect: String,
    target: String,
    n: usize,
    dir: String,
    client: Client,
}

impl Ctx {
    fn connect_many(&self, k: usize) -> Res<Vec<Client>> {
        (0..k)
            .map(|_| Client::connect(&self.connect).map_err(Into::into))
            .collect()
    }
}

fn close_all(clients: &[Client]) {
    for c in clients {
        let _ = c.close();
    }
}

const WORKLOADS: [&str; 8] = ["ops", "W1", "W2:2", "W2:8", "W2:32", "W3", "W5", "W6"];

fn main() {
    std::process::exit(match run() {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("bench: {e}");
            1
        }
    })
}

/// Whether every selected workload succeeded.
fn run() -> Res<bool> {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n >= 2)
        .unwrap_or(2000);
    let only: Option<Vec<String>> = std::env::var("BENCH_ONLY")
        .ok()
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|v| !v.is_empty());
    if let Some(names) = &only {
        for name in names {
            if name != "W2" && !WORKLOADS.contains(&name.as_str()) {
                return Err(format!(
                    "BENCH_ONLY: unknown workload {name:?}; known: W2, {}",
                    WORKLOADS.join(", ")
                )
                .into());
            }
        }
    }
    let selected = |name: &str| match &only {
        None => true,
        Some(names) => names
            .iter()
            .any(|s| s == name || (s == "W2" && name.starts_with("W2:"))),
    };

    let cluster;
    let (connect, target) = match std::env::var("ZK_CONNECT") {
        Ok(cs) if !cs.is_empty() => {
            cluster = None;
            (cs, "ZK_CONNECT".to_string())
        }
        _ => {
            // The full JIT, as a production server runs (tests use C1 only, to start fast).
            let c = TestCluster::builder().full_jit(true).start()?;
            let cs = c.connect_string();
            cluster = Some(c);
            (cs, "harness standalone, forceSync=no, full JIT".to_string())
        }
    };
    let watchdog = Watchdog::start(target.clone())?;
    let client = Client::connect(&connect)?;
    let dir = format!("/zkguard-bench-{}", std::process::id());
    client.create(&dir, b"", CreateMode::Persistent)?;
    // Warm the server's JIT up before measuring anything.
    let warm_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < warm_until {
        let (created, _) = client.pipeline(|p| {
            (
                p.create(
                    &format!("{dir}/warm-"),
                    b"",
                    CreateMode::EphemeralSequential,
                ),
                p.get_children(&dir),
            )
        });
        let node = created.wait()?;
        client.delete(&node.path, None)?;
    }
    let ctx = Ctx {
        connect,
        target,
        n,
        dir,
        client,
    };

    // Budgets: generous for the default size, scaled with BENCH_N.
    let scale = (n as f64 / 2000.0).max(1.0);
    let budget = |secs: f64| Duration::from_secs_f64(secs * scale);
    let mut ok = true;
    let mut run_one = |name: &str, secs: f64, f: &dyn Fn(&Ctx) -> Res<()>| {
        if !selected(name) {
            return;
        }
        let _armed = watchdog.arm(name, budget(secs));
        if let Err(e) = f(&ctx) {
            ok = false;
            Line::new(name, &ctx.target)
                .s("error", &e.to_string())
                .print();
            eprintln!("bench: workload {name} failed: {e}");
        }
    };
    run_one("ops", 120.0, &ops);
    run_one("W1", 120.0, &w1);
    let mut dw: Option<f64> = None;
    for k in [2, 8, 32] {
        let name = format!("W2:{k}");
        let dw_cell = PlMutex::new(dw);
        run_one(&name, 180.0, &|ctx: &Ctx| {
            let known = *dw_cell.lock();
            let base = match known {
                Some(v) => v,
                None => {
                    let v = delete_watch_p50(ctx)?;
                    *dw_cell.lock() = Some(v);
                    v
                }
            };
            w2(ctx, k, base)
        });
        dw = dw_cell.into_inner();
    }
    run_one("W3", 120.0, &w3);
    run_one("W5", 180.0, &w5);
    run_one("W6", 600.0, &w6);

    let _armed = watchdog.arm("cleanup", Duration::from_secs(60));
    delete_tree(&ctx.client, &ctx.dir)?;
    ctx.client.close()?;
    drop(cluster);
    Ok(ok)
}

/// Deletes `path` and everything under it (nodes that vanish meanwhile are fine).
fn delete_tree(c: &Client, path: &str) -> Res<()> {
    for _ in 0..20 {
        let children = match c.get_children(path) {
            Ok((names, _)) => names,
            Err(zkguard::Error::NoNode { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for name in children {
            delete_tree(c, &format!("{path}/{name}"))?;
        }
        match c.delete(path, None) {
            Ok(()) | Err(zkguard::Error::NoNode { .. }) => return Ok(()),
            Err(zkguard::Error::NotEmpty { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(format!("{path} keeps getting new children").into())
}

// ---------------------------------------------------------------------------------------
// ops: single requests
// ---------------------------------------------------------------------------------------

fn ops(ctx: &Ctx) -> Res<()> {
    let (client, dir, n, target) = (&ctx.client, &ctx.dir, ctx.n, &ctx.target);
    // Warm up the JIT of the server and our code paths.
    for i in 0..200 {
        let p = format!("{dir}/warm-{i}");
        client.create(&p, b"", CreateMode::Ephemeral)?;
        client.exists(&p)?;
        client.delete(&p, None)?;
    }

    let (mut create, mut children, mut exists, mut delete) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let p = format!("{dir}/n-{i}");
        let (d, r) = timed(|| client.create(&p, b"payload", CreateMode::Ephemeral));
        r?;
        create.push(d);
        let (d, r) = timed(|| client.get_children(dir));
        r?;
        children.push(d);
        let (d, r) = timed(|| client.exists(&p));
        r?;
        exists.push(d);
        let (d, r) = timed(|| client.delete(&p, None));
        r?;
        delete.push(d);
    }
    report("create", target, create);
    report("get_children", target, children);
    report("exists", target, exists);
    report("delete", target, delete);

    let (mut piped, mut serial) = (vec![], vec![]);
    for _ in 0..n {
        let (d, r) = timed(|| {
            let (c, l) = client.pipeline(|p| {
                (
                    p.create(&format!("{dir}/q-"), b"", CreateMode::EphemeralSequential),
                    p.get_children(dir),
                )
            });
            c.wait().and_then(|c| l.wait().map(|_| c))
        });
        piped.push(d);
        client.delete(&r?.path, None)?;
        let (d, r) = timed(|| {
            let c = client.create(&format!("{dir}/q-"), b"", CreateMode::EphemeralSequential)?;
            client.get_children(dir)?;
            Ok::<_, zkguard::Error>(c)
        });
        serial.push(d);
        client.delete(&r?.path, None)?;
    }
    report("create+get_children pipelined", target, piped);
    report("create+get_children sequential", target, serial);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// W1: uncontended lock cycle against a plain create + delete
// ---------------------------------------------------------------------------------------

fn w1(ctx: &Ctx) -> Res<()> {
    let client = &ctx.client;
    let lock = Mutex::new(client, &format!("{}/w1/lock", ctx.dir))?;
    let plain_dir = format!("{}/w1-plain", ctx.dir);
    client.create(&plain_dir, b"", CreateMode::Persistent)?;
    let plain_prefix = format!("{plain_dir}/n-");
    // The lock cycle, with its acquire and release timed apart.
    let lock_cycle = || -> Res<(Duration, Duration)> {
        let t = Instant::now();
        let g = lock
            .acquire_timeout(LOCK_WAIT)?
            .ok_or("W1: uncontended acquire timed out")?;
        let acquired = t.elapsed();
        let t = Instant::now();
        g.release()?;
        Ok((acquired, t.elapsed()))
    };
    let plain_cycle = || -> Res<()> {
        let c = client.create(&plain_prefix, b"", CreateMode::EphemeralSequential)?;
        client.delete(&c.path, None)?;
        Ok(())
    };
    // What the lock sends, without the lock: create + listing in one write, then delete.
    let wire_cycle = || -> Res<()> {
        let (c, l) = client.pipeline(|p| {
            (
                p.create(&plain_prefix, b"", CreateMode::EphemeralSequential),
                p.get_children(&plain_dir),
            )
        });
        let c = c.wait()?;
        l.wait()?;
        client.delete(&c.path, None)?;
        Ok(())
    };
    for _ in 0..200 {
        lock_cycle()?;
        plain_cycle()?;
        wire_cycle()?;
    }
    let mut locks = Vec::with_capacity(ctx.n);
    let (mut acquires, mut releases) = (Vec::with_capacity(ctx.n), Vec::with_capacity(ctx.n));
    let (mut plains, mut wires) = (Vec::with_capacity(ctx.n), Vec::with_capacity(ctx.n));
    for _ in 0..ctx.n {
        let (d, r) = timed(lock_cycle);
        let (a, rel) = r?;
        locks.push(d);
        acquires.push(a);
        releases.push(rel);
        let (d, r) = timed(plain_cycle);
        r?;
        plains.push(d);
        let (d, r) = timed(wire_cycle);
        r?;
        wires.push(d);
    }
    let lock_total: f64 = locks.iter().map(Duration::as_secs_f64).sum();
    let plain_p50 = p50(&mut plains);
    let wire_p50 = p50(&mut wires);
    let lock_p50 = p50(&mut locks);
    let ratio = lock_p50 / plain_p50;
    Line::new("W1", &ctx.target)
        .s(
            "what",
            "Mutex acquire+release, 1 session, 1 thread, same path",
        )
        .u("n", ctx.n as u64)
        .f("cycles_per_s", ctx.n as f64 / lock_total)
        .lat("", &mut locks)
        .lat("create_delete_", &mut plains)
        .f("ratio", ratio)
        .s("ratio_target", "<= 1.15")
        .b("target_met", ratio <= 1.15)
        .lat("acquire_", &mut acquires)
        .lat("release_", &mut releases)
        .lat("create_list_delete_", &mut wires)
        .f("ratio_to_same_requests", lock_p50 / wire_p50)
        .print();
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Contention: handoff measurement shared by W2 and W6
// ---------------------------------------------------------------------------------------

/// What the contending threads share.
struct Contention {
    /// Taken just before a holder's release; read by whoever acquires next.
    released_at: PlMutex<Option<Instant>>,
    /// In acquisition order (the lock orders them).
    handoffs: PlMutex<Vec<Duration>>,
    /// How long the holders' `release` calls took (the delete's round trip).
    releases: PlMutex<Vec<Duration>>,
    inside: AtomicUsize,
    violations: AtomicU64,
    acquired: AtomicUsize,
    /// Acquisitions to count.
    total: usize,
    /// Counting also ends at this instant (set when the gate opens).
    cap: PlMutex<Option<Instant>>,
    /// The instant and the number of the last counted acquisition.
    done: PlMutex<Option<(Instant, usize)>>,
    stop: AtomicBool,
}

impl Contention {
    fn new(total: usize) -> Contention {
        Contention {
            released_at: PlMutex::new(None),
            handoffs: PlMutex::new(Vec::with_capacity(total)),
            releases: PlMutex::new(Vec::with_capacity(total)),
            inside: AtomicUsize::new(0),
            violations: AtomicU64::new(0),
            acquired: AtomicUsize::new(0),
            total,
            cap: PlMutex::new(None),
            done: PlMutex::new(None),
            stop: AtomicBool::new(false),
        }
    }
}

/// Acquire → release until the shared count (or time cap) is reached, or someone failed.
/// Once stopping, a cancelled acquire is the normal way out.
fn contend(lock: Mutex, c: Arc<Contention>) -> Res<()> {
    let r = (|| -> Res<()> {
        while !c.stop.load(Ordering::SeqCst) {
            let guard = match lock.acquire_timeout(LOCK_WAIT) {
                Ok(Some(g)) => g,
                Err(zkguard::Error::Cancelled { .. }) if c.stop.load(Ordering::SeqCst) => {
                    return Ok(())
                }
                Ok(None) => {
                    return Err(
                        format!("acquire of {} timed out after {LOCK_WAIT:?}", lock.path()).into(),
                    )
                }
                Err(e) => return Err(e.into()),
            };
            let now = Instant::now();
            if c.inside.fetch_add(1, Ordering::SeqCst) != 0 {
                c.violations.fetch_add(1, Ordering::SeqCst);
            }
            let prev = c.released_at.lock().take();
            let counting = !c.stop.load(Ordering::SeqCst);
            let k = c.acquired.fetch_add(1, Ordering::SeqCst) + 1;
            if counting && k <= c.total {
                if let Some(t) = prev {
                    c.handoffs.lock().push(now - t);
                }
                let capped = c.cap.lock().is_some_and(|cap| now >= cap);
                if k == c.total || capped {
                    *c.done.lock() = Some((now, k));
                    c.stop.store(true, Ordering::SeqCst);
                }
            }
            c.inside.fetch_sub(1, Ordering::SeqCst);
            let t = Instant::now();
            *c.released_at.lock() = Some(t);
            guard.release()?;
            if counting && k <= c.total {
                c.releases.lock().push(t.elapsed());
            }
        }
        Ok(())
    })();
    if r.is_err() {
        c.stop.store(true, Ordering::SeqCst);
    }
    r
}

/// Result of one contention run.
struct Run {
    /// In acquisition order.
    handoffs: Vec<Duration>,
    releases: Vec<Duration>,
    /// Acquisitions counted (fewer than asked if the time cap ended the run).
    counted: usize,
    capped: bool,
    per_s: f64,
    violations: u64,
    /// Threads and VmRSS (kB) while every waiter was queued behind the gate.
    threads_queued: u64,
    rss_queued_kb: u64,
    bench_threads_queued: usize,
    /// How long it took until every contender was queued behind the gate.
    queue_build: Duration,
}

/// `threads` threads (thread i on `clients[i % len]`) contend for one Mutex at `path`. The
/// main client holds the lock until every thread is queued, then lets go: from then on
/// `total` acquisitions are counted, or as many as happen within `cap`. Then the waiters
/// still queued are cancelled.
fn run_contention(
    ctx: &Ctx,
    clients: &[Client],
    threads: usize,
    path: &str,
    total: usize,
    cap: Duration,
    label: &str,
) -> Res<Run> {
    let gate_lock = Mutex::new(&ctx.client, path)?;
    let gate = gate_lock
        .acquire_timeout(LOCK_WAIT)?
        .ok_or("the gate acquire timed out")?;
    let shared = Arc::new(Contention::new(total));
    let locks: Vec<Mutex> = clients
        .iter()
        .map(|c| Mutex::new(c, path))
        .collect::<zkguard::Result<_>>()?;
    let stop_all = |handles: Vec<JoinHandle<Res<()>>>| -> Res<()> {
        shared.stop.store(true, Ordering::SeqCst);
        // Cancel until every thread is out (one may start an acquire after a cancel).
        let deadline = Instant::now() + STEP_WAIT;
        while !handles.iter().all(JoinHandle::is_finished) {
            if Instant::now() > deadline {
                let left = handles.iter().filter(|h| !h.is_finished()).count();
                return Err(format!("{label}: {left} threads did not stop").into());
            }
            for l in &locks {
                l.canceller().cancel();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        join_all(handles).map(|_| ())
    };
    let build_start = Instant::now();
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let lock = locks[i % locks.len()].clone();
        let c = shared.clone();
        match spawn(format!("bench-{label}-{i}"), move || contend(lock, c)) {
            Ok(h) => handles.push(h),
            Err(e) => {
                drop(gate);
                let _ = stop_all(handles);
                return Err(e);
            }
        }
    }
    // Wait for the queue: the gate plus one node per thread.
    let deadline = Instant::now() + STEP_WAIT;
    let queued = loop {
        let have = match ctx.client.get_children(path) {
            Ok((names, _)) => names.len(),
            Err(e) => break Err(BoxError::from(e)),
        };
        if have > threads {
            break Ok(());
        }
        if Instant::now() > deadline {
            break Err(format!("{label}: only {have} of {} contenders queued", threads + 1).into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let queue_build = build_start.elapsed();
    let threads_queued = proc_status("Threads").unwrap_or(0);
    let rss_queued_kb = proc_status("VmRSS").unwrap_or(0);
    let bench_threads_queued = BENCH_THREADS.load(Ordering::SeqCst);
    if let Err(e) = queued {
        drop(gate);
        let _ = stop_all(handles);
        return Err(e);
    }
    let start = Instant::now();
    *shared.cap.lock() = Some(start + cap);
    *shared.released_at.lock() = Some(start);
    let released = gate.release();
    // Wait for the count (or the cap, noticed by the next acquirer), then stop everyone.
    let wait_until = start + cap + STEP_WAIT;
    while !shared.stop.load(Ordering::SeqCst) && Instant::now() < wait_until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped = stop_all(handles);
    released?;
    stopped?;
    let (done, counted) = shared
        .done
        .lock()
        .ok_or_else(|| format!("{label}: no acquisition within {cap:?} and more"))?;
    let handoffs = std::mem::take(&mut *shared.handoffs.lock());
    let releases = std::mem::take(&mut *shared.releases.lock());
    Ok(Run {
        handoffs,
        releases,
        counted,
        capped: counted < total,
        per_s: counted as f64 / (done - start).as_secs_f64(),
        violations: shared.violations.load(Ordering::SeqCst),
        threads_queued,
        rss_queued_kb,
        bench_threads_queued,
        queue_build,
    })
}

/// p50 of: one session holds a data watch on a node, another deletes it; from just before
/// the delete to the watch event arriving at a thread blocked on it.
fn delete_watch_p50(ctx: &Ctx) -> Res<f64> {
    let clients = ctx.connect_many(2)?;
    let r = delete_watch(ctx, &clients);
    close_all(&clients);
    let (mut samples, line) = r?;
    let p = p50(&mut samples);
    line.lat("", &mut samples).print();
    Ok(p)
}

fn delete_watch(ctx: &Ctx, clients: &[Client]) -> Res<(Vec<Duration>, Line)> {
    let (watcher, deleter) = (clients[0].clone(), clients[1].clone());
    let node = format!("{}/w2-delete-watch", ctx.dir);
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(0);
    let (ready_tx, ready_rx) = crossbeam_channel::bounded::<Res<()>>(0);
    let (seen_tx, seen_rx) = crossbeam_channel::bounded::<Res<Instant>>(0);
    let path = node.clone();
    let h = spawn("bench-delete-watch".into(), move || {
        while go_rx.recv().is_ok() {
            let watch = match watcher.get_data_w(&path) {
                Ok((_, _, w)) => w,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.into()));
                    return;
                }
            };
            if ready_tx.send(Ok(())).is_err() {
                return;
            }
            let seen = match watch.recv_timeout(STEP_WAIT) {
                Ok(ev) if ev.event_type == EventType::NodeDeleted => Ok(Instant::now()),
                Ok(ev) => Err(format!("unexpected watch event {ev:?}").into()),
                Err(e) => Err(format!("no watch event: {e}").into()),
            };
            if seen_tx.send(seen).is_err() {
                return;
            }
        }
    })?;
    let rounds = ctx.n + 200;
    let mut samples = Vec::with_capacity(ctx.n);
    let r = (|| -> Res<()> {
        for i in 0..rounds {
            deleter.create(&node, b"", CreateMode::Ephemeral)?;
            go_tx.send(()).map_err(|_| "watcher thread gone")?;
            ready_rx.recv_timeout(STEP_WAIT)??;
            let t0 = Instant::now();
            deleter.delete(&node, None)?;
            let seen = seen_rx.recv_timeout(STEP_WAIT)??;
            if i >= 200 {
                samples.push(seen.saturating_duration_since(t0));
            }
        }
        Ok(())
    })();
    drop(go_tx);
    let _ = h.join();
    r?;
    let line = Line::new("W2 delete+watch", &ctx.target)
        .s(
            "what",
            "delete by one session until another session's data watch event arrives",
        )
        .u("n", samples.len() as u64);
    Ok((samples, line))
}

fn w2(ctx: &Ctx, k: usize, delete_watch_p50: f64) -> Res<()> {
    let clients = ctx.connect_many(k)?;
    let path = format!("{}/w2-{k}/lock", ctx.dir);
    let r = run_contention(ctx, &clients, k, &path, ctx.n, CAP, &format!("w2-{k}"));
    close_all(&clients);
    let mut run = r?;
    let hp50 = p50(&mut run.handoffs);
    Line::new(&format!("W2:{k}"), &ctx.target)
        .s("what", "K sessions x 1 thread, Mutex acquire->release loop")
        .u("sessions", k as u64)
        .u("acquisitions", run.counted as u64)
        .b("time_capped", run.capped)
        .f("acquisitions_per_s", run.per_s)
        .u("handoffs", run.handoffs.len() as u64)
        .lat("handoff_", &mut run.handoffs)
        .lat("release_", &mut run.releases)
        .u("violations", run.violations)
        .f("delete_watch_p50_us", delete_watch_p50)
        .f("ratio", hp50 / delete_watch_p50)
        .s("ratio_is", "handoff_p50 / delete_watch_p50")
        .print();
    if run.violations > 0 {
        return Err(format!("W2:{k}: {} mutual-exclusion violations", run.violations).into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// W3: one release, one notification
// ---------------------------------------------------------------------------------------

fn w3(ctx: &Ctx) -> Res<()> {
    const WAITERS: usize = 50;
    let holder_client = Client::connect(&ctx.connect)?;
    let clients = match ctx.connect_many(WAITERS) {
        Ok(c) => c,
        Err(e) => {
            let _ = holder_client.close();
            return Err(e);
        }
    };
    let r = w3_run(ctx, &holder_client, &clients);
    close_all(&clients);
    let _ = holder_client.close();
    r
}

fn w3_run(ctx: &Ctx, holder_client: &Client, clients: &[Client]) -> Res<()> {
    let path = format!("{}/w3/lock", ctx.dir);
    let lock = Mutex::new(holder_client, &path)?;
    let holder = lock
        .acquire_timeout(LOCK_WAIT)?
        .ok_or("W3: the holder's acquire timed out")?;
    let watch_sum = || clients.iter().map(|c| c.stats().watch_events).sum::<u64>();
    let before_queue = watch_sum();
    let (got_tx, got_rx) = crossbeam_channel::unbounded::<usize>();
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    let mut handles = Vec::with_capacity(clients.len());
    for (i, c) in clients.iter().enumerate() {
        let lock = Mutex::new(c, &path)?;
        let (got_tx, done_rx) = (got_tx.clone(), done_rx.clone());
        let h = spawn(format!("bench-w3-{i}"), move || -> Res<()> {
            let g = lock
                .acquire_timeout(LOCK_WAIT)?
                .ok_or("W3: a waiter's acquire timed out")?;
            let _ = got_tx.send(i);
            // Hold until the measurement is done (the sender is dropped), then let go.
            let _ = done_rx.recv_timeout(STEP_WAIT);
            g.release()?;
            Ok(())
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                drop((holder, done_tx));
                let _ = join_all(handles);
                return Err(e);
            }
        }
    }
    drop(got_tx);
    let r = (|| -> Res<(u64, u64, u64)> {
        let deadline = Instant::now() + STEP_WAIT;
        loop {
            let have = lock.participants()?.len();
            if have == clients.len() + 1 {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("W3: {have} participants, want {}", clients.len() + 1).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let queued = watch_sum();
        let t0 = Instant::now();
        holder.release()?;
        got_rx.recv_timeout(STEP_WAIT)?;
        let took = t0.elapsed();
        // Let any stray notification arrive before counting.
        std::thread::sleep(Duration::from_millis(300));
        let after = watch_sum();
        Ok((
            queued - before_queue,
            after - queued,
            took.as_micros() as u64,
        ))
    })();
    drop(done_tx);
    let joined = join_all(handles);
    let (while_queueing, delivered, took_us) = r?;
    joined?;
    Line::new("W3", &ctx.target)
        .s(
            "what",
            "50 sessions queued behind a holder; the holder releases",
        )
        .u("waiters", clients.len() as u64)
        .u("notifications_delivered", delivered)
        .s("notifications_target", "1")
        .b("target_met", delivered == 1)
        .u("notifications_while_queueing", while_queueing)
        .u("handoff_us", took_us)
        .print();
    Ok(())
}

// ---------------------------------------------------------------------------------------
// W5: read/write lock throughput
// ---------------------------------------------------------------------------------------

fn w5(ctx: &Ctx) -> Res<()> {
    const READERS: usize = 6;
    const WRITERS: usize = 2;
    let clients = ctx.connect_many(READERS + WRITERS)?;
    let r = w5_run(ctx, &clients, READERS);
    close_all(&clients);
    r
}

fn w5_run(ctx: &Ctx, clients: &[Client], readers: usize) -> Res<()> {
    let path = format!("{}/w5/rw", ctx.dir);
    let total = ctx.n;
    let acquired = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let readers_in = Arc::new(AtomicUsize::new(0));
    let writers_in = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let done_at = Arc::new(PlMutex::new(None::<Instant>));
    let (start_tx, start_rx) = crossbeam_channel::bounded::<()>(0);
    let mut handles = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let lock = RwLock::new(c, &path)?;
        let is_reader = i < readers;
        let (acquired, reads, writes) = (acquired.clone(), reads.clone(), writes.clone());
        let (readers_in, writers_in) = (readers_in.clone(), writers_in.clone());
        let (violations, stop_w, done_at) = (violations.clone(), stop.clone(), done_at.clone());
        let start_rx = start_rx.clone();
        let h = spawn(format!("bench-w5-{i}"), move || -> Res<()> {
            // Everyone starts when the sender is dropped.
            let _ = start_rx.recv();
            let r = (|| -> Res<()> {
                while !stop_w.load(Ordering::SeqCst) {
                    if is_reader {
                        let g = lock
                            .read_timeout(LOCK_WAIT)?
                            .ok_or("W5: a read acquire timed out")?;
                        readers_in.fetch_add(1, Ordering::SeqCst);
                        if writers_in.load(Ordering::SeqCst) != 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        reads.fetch_add(1, Ordering::SeqCst);
                        count(&acquired, total, &stop_w, &done_at);
                        readers_in.fetch_sub(1, Ordering::SeqCst);
                        g.release()?;
                    } else {
                        let g = lock
                            .write_timeout(LOCK_WAIT)?
                            .ok_or("W5: a write acquire timed out")?;
                        if writers_in.fetch_add(1, Ordering::SeqCst) != 0
                            || readers_in.load(Ordering::SeqCst) != 0
                        {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        writes.fetch_add(1, Ordering::SeqCst);
                        count(&acquired, total, &stop_w, &done_at);
                        writers_in.fetch_sub(1, Ordering::SeqCst);
                        g.release()?;
                    }
                }
                Ok(())
            })();
            if r.is_err() {
                stop_w.store(true, Ordering::SeqCst);
            }
            r
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                drop(start_tx);
                let _ = join_all(handles);
                return Err(e);
            }
        }
    }
    drop(start_tx);
    let start = Instant::now();
    join_all(handles)?;
    let done = done_at.lock().ok_or("W5: the count was never reached")?;
    let v = violations.load(Ordering::SeqCst);
    Line::new("W5", &ctx.target)
        .s(
            "what",
            "RwLock, 8 sessions x 1 thread (6 readers, 2 writers)",
        )
        .u("acquisitions", total as u64)
        .f(
            "acquisitions_per_s",
            total as f64 / (done - start).as_secs_f64(),
        )
        .u("reads", reads.load(Ordering::SeqCst))
        .u("writes", writes.load(Ordering::SeqCst))
        .u("violations", v)
        .print();
    if v > 0 {
        return Err(format!("W5: {v} read/write exclusion violations").into());
    }
    Ok(())
}

/// Counts one acquisition; the one that reaches `total` stops everyone.
fn count(
    acquired: &AtomicUsize,
    total: usize,
    stop: &AtomicBool,
    done_at: &PlMutex<Option<Instant>>,
) {
    if acquired.fetch_add(1, Ordering::SeqCst) + 1 == total {
        *done_at.lock() = Some(Instant::now());
        stop.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------
// W6: many waiters in one process
// ---------------------------------------------------------------------------------------

fn w6(ctx: &Ctx) -> Res<()> {
    const SESSIONS: usize = 50;
    const PER_CLIENT: usize = 20;
    const WAITERS: usize = SESSIONS * PER_CLIENT;
    const FEW: usize = 8;
    // What a bare blocked thread of ours costs, for comparison with a waiter.
    let rss_idle_thread = idle_threads_rss(WAITERS)?;
    let threads_before = proc_status("Threads").unwrap_or(0);
    let rss_before = proc_status("VmRSS").unwrap_or(0);
    let clients = ctx.connect_many(SESSIONS)?;
    let rss_clients = proc_status("VmRSS").unwrap_or(0);
    let r = (|| -> Res<(Run, Run)> {
        // 8 waiters: one thread on each of 8 of the sessions.
        let few = run_contention(
            ctx,
            &clients[..FEW],
            FEW,
            &format!("{}/w6-few/lock", ctx.dir),
            ctx.n,
            CAP,
            "w6-few",
        )?;
        let many = run_contention(
            ctx,
            &clients,
            WAITERS,
            &format!("{}/w6-many/lock", ctx.dir),
            ctx.n,
            CAP,
            "w6",
        )?;
        Ok((few, many))
    })();
    close_all(&clients);
    let (mut few, mut many) = r?;
    let clients_alive = SESSIONS as u64 + 1; // and the bench's own client
    let library_threads = many
        .threads_queued
        .saturating_sub(many.bench_threads_queued as u64 + 1);
    // Before sorting: the first and the last 100 handoffs of the 1,000-waiter run.
    let edge = many.handoffs.len().min(100);
    let first_p50 = p50(&mut many.handoffs[..edge].to_vec());
    let last_p50 = p50(&mut many.handoffs[many.handoffs.len() - edge..].to_vec());
    let few_p50 = p50(&mut few.handoffs);
    let many_p50 = p50(&mut many.handoffs);
    let ratio = many_p50 / few_p50;
    let per_waiter = |from: u64| many.rss_queued_kb.saturating_sub(from) as f64 / WAITERS as f64;
    Line::new("W6", &ctx.target)
        .s(
            "what",
            "1000 waiters (50 sessions x 20 threads) on one Mutex, looping; vs 8 waiters (8 sessions x 1)",
        )
        .u("waiters", WAITERS as u64)
        .u("sessions", SESSIONS as u64)
        .u("threads_total", many.threads_queued)
        .u("threads_before", threads_before)
        .u("bench_threads", many.bench_threads_queued as u64)
        .u("library_threads", library_threads)
        .u("clients_alive", clients_alive)
        .f(
            "library_threads_per_client",
            library_threads as f64 / clients_alive as f64,
        )
        .u("rss_before_kb", rss_before)
        .u("rss_clients_kb", rss_clients)
        .u("rss_queued_kb", many.rss_queued_kb)
        .f("rss_delta_per_waiter_kb", per_waiter(rss_before))
        .f("rss_per_idle_thread_kb", rss_idle_thread)
        .f(
            "rss_delta_per_waiter_excl_clients_kb",
            per_waiter(rss_clients),
        )
        .f("queue_build_s", many.queue_build.as_secs_f64())
        .u("acquisitions_1000", many.counted as u64)
        .b("time_capped_1000", many.capped)
        .u("handoffs_1000", many.handoffs.len() as u64)
        .lat("handoff_1000_", &mut many.handoffs)
        .f("handoff_1000_first100_p50_us", first_p50)
        .f("handoff_1000_last100_p50_us", last_p50)
        .lat("release_1000_", &mut many.releases)
        .f("acquisitions_per_s_1000", many.per_s)
        .u("handoffs_8", few.handoffs.len() as u64)
        .b("time_capped_8", few.capped)
        .lat("handoff_8_", &mut few.handoffs)
        .lat("release_8_", &mut few.releases)
        .f("acquisitions_per_s_8", few.per_s)
        .f("ratio", ratio)
        .s("ratio_target", "<= 1.3")
        .b("target_met", ratio <= 1.3)
        .u("violations", many.violations + few.violations)
        .print();
    if many.violations + few.violations > 0 {
        return Err("W6: mutual-exclusion violations".into());
    }
    Ok(())
}

/// VmRSS growth (kB) per thread while `k` of our threads sit blocked on a channel.
fn idle_threads_rss(k: usize) -> Res<f64> {
    let before = proc_status("VmRSS").unwrap_or(0);
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    let (up_tx, up_rx) = crossbeam_channel::unbounded::<()>();
    let mut handles = Vec::with_capacity(k);
    let mut spawned = Ok(());
    for i in 0..k {
        let (release_rx, up_tx) = (release_rx.clone(), up_tx.clone());
        match spawn(format!("bench-idle-{i}"), move || -> Res<()> {
            let _ = up_tx.send(());
            let _ = release_rx.recv();
            Ok(())
        }) {
            Ok(h) => handles.push(h),
            Err(e) => {
                spawned = Err(e);
                break;
            }
        }
    }
    let mut up = Ok(());
    for _ in 0..handles.len() {
        if let Err(e) = up_rx.recv_timeout(STEP_WAIT) {
            up = Err(e);
            break;
        }
    }
    let during = proc_status("VmRSS").unwrap_or(0);
    drop(release_tx);
    join_all(handles)?;
    spawned?;
    up?;
    Ok(during.saturating_sub(before) as f64 / k as f64)
}
