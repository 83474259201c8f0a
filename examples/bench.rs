//! Benchmark figures, one JSON line each (figures, not assertions).
//!
//! Against a throwaway standalone server from the harness (`forceSync=no`, or `yes` with
//! `BENCH_FORCE_SYNC=1`; the JVM's full JIT; warmed up for 3 s first), or the ensemble named
//! by `ZK_CONNECT`. `BENCH_N` sets the samples per figure (default 2000).
//! `BENCH_ONLY` picks workloads, comma-separated (default all): `ops`, `W1`, `W2` (or one of
//! `W2:2`, `W2:8`, `W2:32`), `W3`, `W4`, `W5`, `W6`, `W7`.
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
//!   holder releases and the next one takes over. One line per queue recipe: `W3` (`Mutex`),
//!   `W3 reentrant`, `W3 write` (`RwLock` writers), `W3 read` (a writer holds, 50 readers
//!   wait: its release lets all of them in), `W3 multi` (`MultiLock` of two paths), `W3
//!   election` (fair).
//! - `W4`: leader election (fair), 5 candidates each on a session of its own: 30 rounds
//!   (`BENCH_N` if set) where the leader resigns and queues again, then 10 where the
//!   leader's client is closed (and a fresh client and candidate replace it), after 5
//!   uncounted rounds. p50, p90 and max of: resign → another candidate knows it leads, the
//!   `Client::close` call, close → another candidate knows it leads; `ratio` = resign →
//!   leader p50 / the p50 of a delete seen by another session's data watch, sampled right
//!   before each resign round (target 1.2), and beside it the same baseline where the
//!   watcher lists the election directory on the event (`delete_watch_list_`). Two lines:
//!   `W4`, the guard style (4 threads blocked in `lead()`, the time taken when `lead()`
//!   returns), and `W4 candidate`, the background style (`Candidate`s, a thread of ours
//!   blocked on each one's `events()`, the time taken when `Elected` arrives). Every round
//!   checks that the next candidate in the queue took over, that exactly one candidate
//!   says it leads, and that the server's first node is its; `violations` and
//!   `order_violations` count the rounds that failed. `requeue_before_delete` counts rounds
//!   where the resigner's new node was created before its old one was deleted.
//! - `W5`: `RwLock`, 8 sessions (6 readers, 2 writers), `BENCH_N` acquisitions in all.
//! - `W7`: `Semaphore` with 3 permits, 8 sessions (one thread each) looping acquire → hold
//!   a random 0–2 ms → release, so holders release in random order, until `BENCH_N`
//!   acquisitions in all: throughput, the wait in `acquire` (p50, p99), idle-permit time
//!   (a permit free while someone waits in `acquire`: in all, as a share of the run, and
//!   per release), watch notifications per release (all 8 sessions, the notified one's
//!   own included), and violations (more than 3 holders). `examples/curator/SemaphoreBench.java`
//!   runs the same workload on Curator's `InterProcessSemaphoreV2`. Before it, `W7
//!   uncontended`: an acquire alone against a pipelined create + listing (`round_trips`, the
//!   ratio of the medians; the protocol needs 2).
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

use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex as PlMutex;
use zkguard::testing::TestCluster;
use zkguard::{
    Candidate, Client, CreateMode, EventType, LeaderElection, LeaderEvent, MultiLock, Mutex,
    ReentrantMutex, RwLock, Semaphore, SessionState,
};

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

    /// p50, p90 and max in µs of `samples` (sorted here) under `prefix`.
    fn dist(self, prefix: &str, samples: &mut [Duration]) -> Line {
        samples.sort();
        self.f(&format!("{prefix}p50_us"), percentile(samples, 0.5))
            .f(&format!("{prefix}p90_us"), percentile(samples, 0.9))
            .f(&format!("{prefix}max_us"), percentile(samples, 1.0))
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
    /// `BENCH_N` as given (W4 keeps the issue's round count unless it is set).
    n_given: Option<usize>,
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

const WORKLOADS: [&str; 10] = [
    "ops", "W1", "W2:2", "W2:8", "W2:32", "W3", "W4", "W5", "W6", "W7",
];

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
    let n_given: Option<usize> = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n >= 2);
    let n = n_given.unwrap_or(2000);
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
            let (c, target) = bench_cluster()?;
            let cs = c.connect_string();
            cluster = Some(c);
            (cs, target)
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
        n_given,
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
    run_one("W4", 120.0, &w4);
    run_one("W5", 180.0, &w5);
    run_one("W6", 600.0, &w6);
    run_one("W7", 180.0, &w7);

    let _armed = watchdog.arm("cleanup", Duration::from_secs(60));
    delete_tree(&ctx.client, &ctx.dir)?;
    ctx.client.close()?;
    drop(cluster);
    Ok(ok)
}

/// The harness's standalone server, with the full JIT as a production server runs (tests
/// use C1 only, to start fast); `BENCH_FORCE_SYNC=1` makes it fsync its log as a production
/// server does (`forceSync=yes`, the issue's setting). Also the `target` every line names.
fn bench_cluster() -> Res<(TestCluster, String)> {
    let force_sync = matches!(
        std::env::var("BENCH_FORCE_SYNC").as_deref(),
        Ok("1" | "yes" | "on" | "true")
    );
    let c = TestCluster::builder()
        .full_jit(true)
        .force_sync(force_sync)
        .start()?;
    let target = format!(
        "harness standalone, forceSync={}, full JIT",
        if force_sync { "yes" } else { "no" }
    );
    Ok((c, target))
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
    let node = format!("{}/w2-delete-watch", ctx.dir);
    let dw = DeleteWatch::start(clients[0].clone(), clients[1].clone(), node)?;
    let mut samples = Vec::with_capacity(ctx.n);
    for i in 0..ctx.n + 200 {
        let d = dw.sample()?;
        if i >= 200 {
            samples.push(d);
        }
    }
    let line = Line::new("W2 delete+watch", &ctx.target)
        .s(
            "what",
            "delete by one session until another session's data watch event arrives",
        )
        .u("n", samples.len() as u64);
    Ok((samples, line))
}

/// The delete + watch notification baseline, one sample at a time: `watcher` holds a data
/// watch on `node` (a thread of ours blocked on it), `deleter` deletes the node; a sample
/// runs from just before the delete call to the watch event arriving at that thread (or,
/// with [`sample_listing`](DeleteWatch::sample_listing), to that thread's listing of a
/// directory made on the event coming back).
struct DeleteWatch {
    deleter: Client,
    node: String,
    /// Each message starts one sample: the directory to list after the event, if any.
    go_tx: Option<Sender<Option<String>>>,
    ready_rx: Receiver<Res<()>>,
    seen_rx: Receiver<Res<Instant>>,
    handle: Option<JoinHandle<()>>,
}

impl DeleteWatch {
    fn start(watcher: Client, deleter: Client, node: String) -> Res<DeleteWatch> {
        let (go_tx, go_rx) = crossbeam_channel::bounded::<Option<String>>(0);
        let (ready_tx, ready_rx) = crossbeam_channel::bounded::<Res<()>>(0);
        let (seen_tx, seen_rx) = crossbeam_channel::bounded::<Res<Instant>>(0);
        let path = node.clone();
        let handle = spawn("bench-delete-watch".into(), move || {
            while let Ok(list) = go_rx.recv() {
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
                    Ok(ev) if ev.event_type == EventType::NodeDeleted => match &list {
                        None => Ok(Instant::now()),
                        Some(dir) => match watcher.get_children(dir) {
                            Ok(_) => Ok(Instant::now()),
                            Err(e) => Err(e.into()),
                        },
                    },
                    Ok(ev) => Err(format!("unexpected watch event {ev:?}").into()),
                    Err(e) => Err(format!("no watch event: {e}").into()),
                };
                if seen_tx.send(seen).is_err() {
                    return;
                }
            }
        })?;
        Ok(DeleteWatch {
            deleter,
            node,
            go_tx: Some(go_tx),
            ready_rx,
            seen_rx,
            handle: Some(handle),
        })
    }

    /// Delete until the watch event.
    fn sample(&self) -> Res<Duration> {
        self.run(None)
    }

    /// Delete until the watcher, told by the event, has listed `dir`.
    fn sample_listing(&self, dir: &str) -> Res<Duration> {
        self.run(Some(dir.to_string()))
    }

    fn run(&self, list: Option<String>) -> Res<Duration> {
        let go = self.go_tx.as_ref().ok_or("delete+watch: stopped")?;
        self.deleter
            .create(&self.node, b"", CreateMode::Ephemeral)?;
        go.send(list)
            .map_err(|_| "delete+watch: watcher thread gone")?;
        self.ready_rx.recv_timeout(STEP_WAIT)??;
        let t0 = Instant::now();
        self.deleter.delete(&self.node, None)?;
        let seen = self.seen_rx.recv_timeout(STEP_WAIT)??;
        Ok(seen.saturating_duration_since(t0))
    }
}

impl Drop for DeleteWatch {
    fn drop(&mut self) {
        self.go_tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
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
// W3: notifications per release, for each queue recipe
// ---------------------------------------------------------------------------------------

/// Sessions queued behind the holder in W3.
const W3_WAITERS: usize = 50;

/// A held lock (or leadership) of any kind; dropping it releases.
type Held = Box<dyn std::any::Any>;

/// One queue recipe as W3 queues it: `hold(client, path, who)` blocks (bounded) until it
/// holds. Every kind queues its contenders in the directory `path` (a `MultiLock` in the
/// first of its two).
struct W3Kind {
    figure: &'static str,
    hold: fn(&Client, &str, usize) -> Res<Held>,
}

fn held<G: 'static>(g: zkguard::Result<Option<G>>) -> Res<Held> {
    match g? {
        Some(g) => Ok(Box::new(g)),
        None => Err(format!("acquire timed out after {LOCK_WAIT:?}").into()),
    }
}

const W3_KINDS: [W3Kind; 6] = [
    W3Kind {
        figure: "W3",
        hold: |c, path, _| held(Mutex::new(c, path)?.acquire_timeout(LOCK_WAIT)),
    },
    W3Kind {
        figure: "W3 reentrant",
        hold: |c, path, _| held(ReentrantMutex::new(c, path)?.acquire_timeout(LOCK_WAIT)),
    },
    W3Kind {
        figure: "W3 write",
        hold: |c, path, _| held(RwLock::new(c, path)?.write_timeout(LOCK_WAIT)),
    },
    W3Kind {
        figure: "W3 read",
        // The holder (the last `who`) writes; the 50 waiters read: its release lets them
        // all in at once.
        hold: |c, path, who| {
            let lock = RwLock::new(c, path)?;
            if who == W3_WAITERS {
                held(lock.write_timeout(LOCK_WAIT))
            } else {
                held(lock.read_timeout(LOCK_WAIT))
            }
        },
    },
    W3Kind {
        figure: "W3 multi",
        hold: |c, path, _| {
            let second = format!("{path}-second");
            held(MultiLock::new(c, &[path, &second])?.acquire_timeout(LOCK_WAIT))
        },
    },
    W3Kind {
        figure: "W3 election",
        hold: |c, path, who| {
            held(LeaderElection::new(c, path, format!("w3-{who}"))?.lead_timeout(LOCK_WAIT))
        },
    },
];

/// Each kind in turn: 50 sessions queued behind a holder; the watch notifications the 50
/// receive when the holder releases and the next one takes over.
fn w3(ctx: &Ctx) -> Res<()> {
    let holder_client = Client::connect(&ctx.connect)?;
    let clients = match ctx.connect_many(W3_WAITERS) {
        Ok(c) => c,
        Err(e) => {
            let _ = holder_client.close();
            return Err(e);
        }
    };
    let mut r = Ok(());
    for kind in &W3_KINDS {
        let one = w3_run(ctx, kind, &holder_client, &clients);
        if let Err(e) = one {
            Line::new(kind.figure, &ctx.target)
                .s("error", &e.to_string())
                .print();
            r = Err(e);
        }
    }
    close_all(&clients);
    let _ = holder_client.close();
    r
}

fn w3_run(ctx: &Ctx, kind: &W3Kind, holder_client: &Client, clients: &[Client]) -> Res<()> {
    let path = format!(
        "{}/w3-{}/lock",
        ctx.dir,
        kind.figure.replace(' ', "-").to_lowercase()
    );
    let holder = (kind.hold)(holder_client, &path, clients.len())?;
    let watch_sum = || clients.iter().map(|c| c.stats().watch_events).sum::<u64>();
    let before_queue = watch_sum();
    let (got_tx, got_rx) = crossbeam_channel::unbounded::<usize>();
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    let mut handles = Vec::with_capacity(clients.len());
    for (i, c) in clients.iter().enumerate() {
        let (c, path, hold) = (c.clone(), path.clone(), kind.hold);
        let (got_tx, done_rx) = (got_tx.clone(), done_rx.clone());
        let h = spawn(format!("bench-w3-{i}"), move || -> Res<()> {
            let g = hold(&c, &path, i)?;
            let _ = got_tx.send(i);
            // Hold until the measurement is done (the sender is dropped), then let go.
            let _ = done_rx.recv_timeout(STEP_WAIT);
            drop(g);
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
            let have = ctx.client.get_children(&path)?.0.len();
            if have == clients.len() + 1 {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("W3: {have} contenders, want {}", clients.len() + 1).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let the waiters arm their watches (the last ones queued may still be arming).
        std::thread::sleep(Duration::from_millis(300));
        let queued = watch_sum();
        let t0 = Instant::now();
        drop(holder);
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
    Line::new(kind.figure, &ctx.target)
        .s(
            "what",
            "50 sessions queued behind a holder; the holder releases",
        )
        .u("waiters", clients.len() as u64)
        .u("notifications_delivered", delivered)
        .s("notifications_target", "<= 2 (W3 read: the readers let in)")
        .b("target_met", delivered <= 2 || kind.figure == "W3 read")
        .u("notifications_while_queueing", while_queueing)
        .u("handoff_us", took_us)
        .print();
    Ok(())
}

// ---------------------------------------------------------------------------------------
// W4: leader election, change of leader
// ---------------------------------------------------------------------------------------

/// Candidates in the election, each on a client (session) of its own.
const W4_CANDIDATES: usize = 5;
/// Resign rounds by default (the issue's count; `BENCH_N`, when set, replaces it).
const W4_RESIGNS: usize = 30;
/// Rounds where the leader's client is closed.
const W4_CLOSES: usize = 10;
/// Resign rounds run first and not counted.
const W4_WARMUP: usize = 5;

/// What one style's rounds measured.
#[derive(Default)]
struct W4Run {
    /// From just before the resign to the successor learning it leads.
    resign_to_leader: Vec<Duration>,
    /// The delete + watch baseline, one sample right before each counted resign round.
    baseline: Vec<Duration>,
    /// The same, with the watcher listing the election's directory on the event (what a
    /// successor whose last listing is stale must add), sampled right after `baseline`.
    baseline_list: Vec<Duration>,
    /// The resign call itself.
    resign_call: Vec<Duration>,
    /// `Client::close` on the leader's client.
    close_call: Vec<Duration>,
    /// From just before the close to the successor learning it leads.
    close_to_leader: Vec<Duration>,
    /// Requests the successor's client sent from just before the resign until it knew.
    successor_requests: Vec<u64>,
    /// Rounds where not exactly one candidate led once the change was over (or a second
    /// one said it was elected, or the server's first node was someone else's).
    violations: u64,
    /// Rounds where the new leader was not the next candidate in the queue.
    order_violations: u64,
    /// Settled rounds where a child of the election changed after the newest node was
    /// created, i.e. the resigner queued again before its old node was deleted.
    requeue_before_delete: u64,
    /// Closed leaders that learned it: `Lost` (background style), or `lost()` fired (guard
    /// style).
    lost_reported: u64,
}

fn w4(ctx: &Ctx) -> Res<()> {
    let resigns = ctx.n_given.unwrap_or(W4_RESIGNS);
    let closes = W4_CLOSES;
    let base_clients = ctx.connect_many(2)?;
    let r = (|| -> Res<(W4Run, W4Run)> {
        let dw = DeleteWatch::start(
            base_clients[0].clone(),
            base_clients[1].clone(),
            format!("{}/w4-delete-watch", ctx.dir),
        )?;
        let guard = w4_guard(ctx, &dw, resigns, closes)?;
        let background = w4_candidates(ctx, &dw, resigns, closes)?;
        Ok((guard, background))
    })();
    close_all(&base_clients);
    let (mut guard, mut background) = r?;
    w4_line(
        "W4",
        ctx,
        "guard style: 4 threads blocked in lead(); from just before the leader's resign() to lead() returning in another",
        &mut guard,
    );
    w4_line(
        "W4 candidate",
        ctx,
        "background style: Candidate::events() receiving Elected, one thread per candidate; from just before resign() to the event",
        &mut background,
    );
    let bad = guard.violations + background.violations;
    let order = guard.order_violations + background.order_violations;
    if bad + order > 0 {
        return Err(format!(
            "W4: {bad} rounds without exactly one leader, {order} out of queue order"
        )
        .into());
    }
    Ok(())
}

fn w4_line(figure: &str, ctx: &Ctx, what: &str, run: &mut W4Run) {
    let leader_p50 = p50(&mut run.resign_to_leader);
    let ratio = leader_p50 / p50(&mut run.baseline);
    let close_p50 = p50(&mut run.close_call);
    let mut line = Line::new(figure, &ctx.target)
        .s("what", what)
        .u("candidates", W4_CANDIDATES as u64)
        .u("resign_rounds", run.resign_to_leader.len() as u64)
        .u("close_rounds", run.close_call.len() as u64)
        .dist("resign_to_leader_", &mut run.resign_to_leader)
        .dist("delete_watch_", &mut run.baseline)
        .f("ratio", ratio)
        .s(
            "ratio_is",
            "resign_to_leader_p50 / delete_watch_p50 (interleaved)",
        )
        .s("ratio_target", "<= 1.2")
        .b("target_met", ratio <= 1.2)
        .dist("delete_watch_list_", &mut run.baseline_list)
        .f(
            "ratio_to_delete_watch_list",
            leader_p50 / p50(&mut run.baseline_list),
        )
        .dist("resign_call_", &mut run.resign_call)
        .dist("close_call_", &mut run.close_call)
        .s("close_call_target", "p50 < 5000 us")
        .b("close_call_target_met", close_p50 < 5000.0)
        .dist("close_to_leader_", &mut run.close_to_leader);
    if !run.successor_requests.is_empty() {
        let r = &run.successor_requests;
        line = line
            .f(
                "successor_requests_mean",
                r.iter().sum::<u64>() as f64 / r.len() as f64,
            )
            .u(
                "successor_requests_max",
                r.iter().copied().max().unwrap_or(0),
            );
    }
    line.u("requeue_before_delete", run.requeue_before_delete)
        .u("closed_leaders_reported_lost", run.lost_reported)
        .u("violations", run.violations)
        .u("order_violations", run.order_violations)
        .print();
}

/// The election's queue, once it holds `want` candidates and has been quiet for a moment:
/// their ids in queue order, and whether a child changed after the newest was created.
fn w4_settle(client: &Client, observer: &LeaderElection, want: usize) -> Res<(Vec<String>, bool)> {
    let deadline = Instant::now() + STEP_WAIT;
    loop {
        let have = observer.participants()?;
        if have.len() == want {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("W4: {} candidates queued, want {want}", have.len()).into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Let the last one arm its watch, and the leader its own.
    std::thread::sleep(Duration::from_millis(5));
    let (names, stat) = client.get_children(observer.path())?;
    let newest = names
        .iter()
        .max_by_key(|n| n.rsplit('-').next().and_then(|s| s.parse::<u64>().ok()))
        .ok_or("W4: empty election")?;
    let newest = client
        .exists(&format!("{}/{newest}", observer.path()))?
        .ok_or("W4: the newest node went away")?;
    let ids = observer.participants()?;
    if ids.len() != want {
        return Err(format!("W4: {} candidates after settling, want {want}", ids.len()).into());
    }
    Ok((
        ids.iter().map(|p| p.id()).collect(),
        stat.pzxid > newest.czxid,
    ))
}

/// Checks the candidate that says it was elected: the next in queue order, and the leader
/// by the server's listing too. Counts what is wrong.
fn w4_check_winner(
    run: &mut W4Run,
    observer: &LeaderElection,
    figure: &str,
    won: &str,
    next: &str,
) -> Res<()> {
    if won != next {
        run.order_violations += 1;
        eprintln!("{figure}: {won} leads, expected {next}");
    }
    if observer.leader()?.is_none_or(|p| p.id() != won) {
        run.violations += 1;
        eprintln!("{figure}: {won} says it leads, the server disagrees");
    }
    Ok(())
}

/// Waits (bounded) for the thread of a closed candidate to end, and joins it.
fn w4_retire(handle: JoinHandle<Res<()>>, what: &str) -> Res<()> {
    let deadline = Instant::now() + STEP_WAIT;
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if !handle.is_finished() {
        return Err(format!("W4: {what} did not end after close").into());
    }
    handle.join().map_err(|_| format!("W4: {what} panicked"))?
}

// --- guard style -----------------------------------------------------------------------

/// A guard-style candidate won: who, when `lead()` returned, and its client's request count.
struct Led {
    who: usize,
    at: Instant,
    requests: u64,
}

struct GuardShared {
    /// Candidates that hold leadership (by their own count).
    inside: AtomicUsize,
    violations: AtomicU64,
    /// Set just before a leader's resign; taken by the main thread.
    resigned_at: PlMutex<Option<Instant>>,
    resign_calls: PlMutex<Vec<Duration>>,
    /// False during the clean-up, when leaders come and go uncounted.
    counting: AtomicBool,
}

struct GuardSlot {
    who: usize,
    client: Client,
    /// A message: resign and lead again. Dropped: resign and leave.
    cmd: Option<Sender<()>>,
    handle: JoinHandle<Res<()>>,
}

fn w4_guard_thread(
    who: usize,
    client: Client,
    path: String,
    shared: Arc<GuardShared>,
    cmd: Receiver<()>,
    led: Sender<Led>,
) -> Res<()> {
    let election = LeaderElection::new(&client, &path, format!("g{who}"))?;
    loop {
        let leadership = match election.lead_timeout(LOCK_WAIT) {
            Ok(Some(l)) => l,
            Ok(None) => return Err(format!("W4: g{who}: lead timed out").into()),
            // Our client was closed while we waited.
            Err(zkguard::Error::Closed) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let at = Instant::now();
        let requests = client.stats().requests;
        if shared.inside.fetch_add(1, Ordering::SeqCst) != 0
            && shared.counting.load(Ordering::SeqCst)
        {
            shared.violations.fetch_add(1, Ordering::SeqCst);
        }
        let lost = leadership.lost();
        let _ = led.send(Led { who, at, requests });
        select! {
            recv(cmd) -> c => {
                shared.inside.fetch_sub(1, Ordering::SeqCst);
                if c.is_err() {
                    let _ = leadership.resign();
                    return Ok(());
                }
                let t = Instant::now();
                *shared.resigned_at.lock() = Some(t);
                leadership.resign()?;
                shared.resign_calls.lock().push(t.elapsed());
            }
            recv(lost) -> _ => {
                // The main thread closed our client (and took us out of the count).
                if client.state() != SessionState::Closed {
                    return Err(format!("W4: g{who} lost leadership, its client not closed").into());
                }
                return Ok(());
            }
        }
    }
}

fn w4_guard(ctx: &Ctx, dw: &DeleteWatch, resigns: usize, closes: usize) -> Res<W4Run> {
    let path = format!("{}/w4-guard", ctx.dir);
    let observer = LeaderElection::new(&ctx.client, &path, "observer")?;
    let shared = Arc::new(GuardShared {
        inside: AtomicUsize::new(0),
        violations: AtomicU64::new(0),
        resigned_at: PlMutex::new(None),
        resign_calls: PlMutex::new(Vec::new()),
        counting: AtomicBool::new(true),
    });
    let (led_tx, led_rx) = crossbeam_channel::unbounded::<Led>();
    let mut slots: Vec<GuardSlot> = Vec::new();
    let mut next_who = 0;
    let mut add = |slots: &mut Vec<GuardSlot>| -> Res<()> {
        let client = Client::connect(&ctx.connect)?;
        let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
        let who = next_who;
        next_who += 1;
        let (c, p, s, l) = (client.clone(), path.clone(), shared.clone(), led_tx.clone());
        let handle = match spawn(format!("bench-w4-g{who}"), move || {
            w4_guard_thread(who, c, p, s, cmd_rx, l)
        }) {
            Ok(h) => h,
            Err(e) => {
                let _ = client.close();
                return Err(e);
            }
        };
        slots.push(GuardSlot {
            who,
            client,
            cmd: Some(cmd_tx),
            handle,
        });
        Ok(())
    };
    let mut run = W4Run::default();
    let r = (|| -> Res<()> {
        for _ in 0..W4_CANDIDATES {
            add(&mut slots)?;
            // One at a time, so the queue order is the order of `slots`.
            w4_settle(&ctx.client, &observer, slots.len())?;
        }
        let first = led_rx.recv_timeout(STEP_WAIT)?;
        let mut leader = first.who;
        let slot_of = |slots: &[GuardSlot], who: usize| slots.iter().position(|s| s.who == who);
        for round in 0..W4_WARMUP + resigns + closes {
            let counted = round >= W4_WARMUP;
            let closing = round >= W4_WARMUP + resigns;
            let (ids, requeued_early) = w4_settle(&ctx.client, &observer, W4_CANDIDATES)?;
            if counted && requeued_early {
                run.requeue_before_delete += 1;
            }
            // Nobody else may have said it leads since the last round.
            while let Ok(extra) = led_rx.try_recv() {
                run.violations += 1;
                eprintln!("W4 guard: g{} led out of turn", extra.who);
            }
            if ids[0] != format!("g{leader}") {
                run.violations += 1;
                eprintln!("W4 guard: the server's leader is {}, not g{leader}", ids[0]);
            }
            let next = ids[1].clone();
            let li = slot_of(&slots, leader).ok_or("W4: the leader's slot is gone")?;
            let succ = slots
                .iter()
                .find(|s| format!("g{}", s.who) == next)
                .ok_or("W4: the next candidate is not ours")?;
            let before = succ.client.stats().requests;
            let (t0, took) = if closing {
                shared.inside.fetch_sub(1, Ordering::SeqCst);
                let t0 = Instant::now();
                let (d, r) = timed(|| slots[li].client.close());
                r?;
                (t0, Some(d))
            } else {
                if counted {
                    run.baseline.push(dw.sample()?);
                    run.baseline_list.push(dw.sample_listing(&path)?);
                }
                slots[li]
                    .cmd
                    .as_ref()
                    .ok_or("W4: no command channel")?
                    .send(())
                    .map_err(|_| "W4: the leader's thread is gone")?;
                (Instant::now(), None)
            };
            let won = led_rx.recv_timeout(STEP_WAIT)?;
            let t0 = if closing {
                t0
            } else {
                shared
                    .resigned_at
                    .lock()
                    .take()
                    .ok_or("W4: the leader did not say when it resigned")?
            };
            let d = won.at.saturating_duration_since(t0);
            w4_check_winner(
                &mut run,
                &observer,
                "W4 guard",
                &format!("g{}", won.who),
                &next,
            )?;
            leader = won.who;
            if counted {
                run.successor_requests
                    .push(won.requests.saturating_sub(before));
                match took {
                    Some(c) => {
                        run.close_call.push(c);
                        run.close_to_leader.push(d);
                    }
                    None => run.resign_to_leader.push(d),
                }
            }
            if closing {
                // The closed candidate's thread ends; a fresh client and candidate join.
                let old = slots.remove(li);
                w4_retire(old.handle, &format!("g{}'s thread", old.who))?;
                // It led, so it could only end well through its `lost` signal.
                run.lost_reported += 1;
                add(&mut slots)?;
            }
        }
        Ok(())
    })();
    // Clean-up: every leader resigns and leaves in turn (the command channels are dropped).
    shared.counting.store(false, Ordering::SeqCst);
    for s in &mut slots {
        s.cmd = None;
    }
    let deadline = Instant::now() + STEP_WAIT;
    while !slots.iter().all(|s| s.handle.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let handles: Vec<_> = slots
        .into_iter()
        .map(|s| {
            let _ = s.client.close();
            s.handle
        })
        .collect();
    let joined = join_all(handles);
    r?;
    joined?;
    let mut calls = std::mem::take(&mut *shared.resign_calls.lock());
    // The warm-up rounds' resign calls are not counted.
    run.resign_call = calls.split_off(W4_WARMUP.min(calls.len()));
    run.violations += shared.violations.load(Ordering::SeqCst);
    Ok(run)
}

// --- background style ------------------------------------------------------------------

/// An event of a background-style candidate, stamped when its listener received it.
struct Heard {
    who: usize,
    ev: LeaderEvent,
    at: Instant,
}

struct CandSlot {
    who: usize,
    client: Client,
    candidate: Candidate,
    listener: JoinHandle<Res<()>>,
}

fn w4_candidates(ctx: &Ctx, dw: &DeleteWatch, resigns: usize, closes: usize) -> Res<W4Run> {
    let path = format!("{}/w4-candidate", ctx.dir);
    let observer = LeaderElection::new(&ctx.client, &path, "observer")?;
    let (heard_tx, heard_rx) = crossbeam_channel::unbounded::<Heard>();
    let mut slots: Vec<CandSlot> = Vec::new();
    let mut next_who = 0;
    let mut add = |slots: &mut Vec<CandSlot>| -> Res<()> {
        let client = Client::connect(&ctx.connect)?;
        let who = next_who;
        next_who += 1;
        let joined = LeaderElection::new(&client, &path, format!("c{who}")).and_then(|e| e.join());
        let candidate = match joined {
            Ok(c) => c,
            Err(e) => {
                let _ = client.close();
                return Err(e.into());
            }
        };
        // A thread of ours blocked on the events, as a daemon would be.
        let (events, tx) = (candidate.events(), heard_tx.clone());
        let listener = spawn(format!("bench-w4-c{who}"), move || -> Res<()> {
            for ev in events.iter() {
                let at = Instant::now();
                let _ = tx.send(Heard { who, ev, at });
            }
            Ok(())
        });
        let listener = match listener {
            Ok(h) => h,
            Err(e) => {
                drop(candidate);
                let _ = client.close();
                return Err(e);
            }
        };
        slots.push(CandSlot {
            who,
            client,
            candidate,
            listener,
        });
        Ok(())
    };
    let mut run = W4Run::default();
    let r = (|| -> Res<()> {
        for _ in 0..W4_CANDIDATES {
            add(&mut slots)?;
            w4_settle(&ctx.client, &observer, slots.len())?;
        }
        let mut leader = None;
        let slot_of = |slots: &[CandSlot], who: usize| slots.iter().position(|s| s.who == who);
        for round in 0..W4_WARMUP + resigns + closes {
            let counted = round >= W4_WARMUP;
            let closing = round >= W4_WARMUP + resigns;
            let (ids, requeued_early) = w4_settle(&ctx.client, &observer, W4_CANDIDATES)?;
            if counted && requeued_early {
                run.requeue_before_delete += 1;
            }
            // What was said since the last round: a Resigned or a Lost, and no Elected but
            // the first candidate's before the first round.
            while let Ok(h) = heard_rx.try_recv() {
                if w4_heard(&h, &mut run)? {
                    if leader.is_none() {
                        leader = Some(h.who);
                    } else {
                        run.violations += 1;
                        eprintln!("W4 candidate: c{} elected out of turn", h.who);
                    }
                }
            }
            let leader_now = leader.ok_or("W4: nobody was elected")?;
            if ids[0] != format!("c{leader_now}") {
                run.violations += 1;
                eprintln!(
                    "W4 candidate: the server's leader is {}, not c{leader_now}",
                    ids[0]
                );
            }
            let next = ids[1].clone();
            let li = slot_of(&slots, leader_now).ok_or("W4: the leader's slot is gone")?;
            if counted && !closing {
                run.baseline.push(dw.sample()?);
                run.baseline_list.push(dw.sample_listing(&path)?);
            }
            let t0 = Instant::now();
            let (took, r) = if closing {
                timed(|| slots[li].client.close().map(|()| true))
            } else {
                timed(|| slots[li].candidate.resign())
            };
            if !r? {
                return Err(
                    format!("W4: c{leader_now} was not leading when asked to resign").into(),
                );
            }
            // Until someone says it is elected.
            let won = loop {
                let h = heard_rx.recv_timeout(STEP_WAIT)?;
                if w4_heard(&h, &mut run)? {
                    break h;
                }
            };
            leader = Some(won.who);
            let d = won.at.saturating_duration_since(t0);
            w4_check_winner(
                &mut run,
                &observer,
                "W4 candidate",
                &format!("c{}", won.who),
                &next,
            )?;
            // Exactly one candidate says it leads, and the server agrees.
            let says: Vec<usize> = slots
                .iter()
                .filter(|s| s.candidate.is_leader())
                .map(|s| s.who)
                .collect();
            if says != [won.who] {
                run.violations += 1;
                eprintln!(
                    "W4 candidate: after c{} was elected, {says:?} say they lead",
                    won.who
                );
            }
            if counted {
                if closing {
                    run.close_call.push(took);
                    run.close_to_leader.push(d);
                } else {
                    run.resign_call.push(took);
                    run.resign_to_leader.push(d);
                }
            }
            if closing {
                // The closed candidate stops and its events end; a fresh one joins.
                let old = slots.remove(li);
                drop(old.candidate);
                w4_retire(old.listener, &format!("c{}'s listener", old.who))?;
                add(&mut slots)?;
            }
        }
        // The last round's news.
        w4_settle(&ctx.client, &observer, W4_CANDIDATES)?;
        while let Ok(h) = heard_rx.try_recv() {
            if w4_heard(&h, &mut run)? {
                run.violations += 1;
                eprintln!("W4 candidate: c{} elected out of turn", h.who);
            }
        }
        if run.lost_reported != closes as u64 {
            return Err(format!(
                "W4: {} of {closes} closed candidates reported Lost",
                run.lost_reported
            )
            .into());
        }
        Ok(())
    })();
    // Clean-up: the candidates leave, their clients close, the listeners see the end.
    let handles: Vec<_> = slots
        .into_iter()
        .map(|s| {
            drop(s.candidate);
            let _ = s.client.close();
            s.listener
        })
        .collect();
    let joined = join_all(handles);
    r?;
    joined?;
    Ok(run)
}

/// Takes in one event of a background-style candidate: true for `Elected`. A `Lost` is
/// counted (only closed candidates lose); anything but these and `Resigned` is an error.
fn w4_heard(h: &Heard, run: &mut W4Run) -> Res<bool> {
    match &h.ev {
        LeaderEvent::Elected { .. } => Ok(true),
        LeaderEvent::Resigned => Ok(false),
        LeaderEvent::Lost => {
            run.lost_reported += 1;
            Ok(false)
        }
        ev => Err(format!("W4: c{}: unexpected event {ev:?}", h.who).into()),
    }
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
    let mut steps = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let lock = RwLock::new(c, &path)?;
        let is_reader = i < readers;
        let (acquired, reads, writes) = (acquired.clone(), reads.clone(), writes.clone());
        let (readers_in, writers_in) = (readers_in.clone(), writers_in.clone());
        let (violations, stop_w, done_at) = (violations.clone(), stop.clone(), done_at.clone());
        steps.push(move || -> Res<()> {
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
            Ok(())
        });
    }
    let start = run_workers("w5", steps, &stop)?;
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

/// Runs one thread per step function, all started together once every thread exists:
/// each calls its step until `stop` is set; a step that fails sets `stop` for everyone, and
/// the first error is returned. `Ok`: the instant they were started.
fn run_workers<F>(name: &str, steps: Vec<F>, stop: &Arc<AtomicBool>) -> Res<Instant>
where
    F: FnMut() -> Res<()> + Send + 'static,
{
    let (start_tx, start_rx) = crossbeam_channel::bounded::<()>(0);
    let mut handles = Vec::new();
    for (i, mut step) in steps.into_iter().enumerate() {
        let (stop_w, start_rx) = (stop.clone(), start_rx.clone());
        let h = spawn(format!("bench-{name}-{i}"), move || -> Res<()> {
            // Everyone starts when the sender is dropped.
            let _ = start_rx.recv();
            let r = (|| -> Res<()> {
                while !stop_w.load(Ordering::SeqCst) {
                    step()?;
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
    join_all(handles).map(|_| start)
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

// ---------------------------------------------------------------------------------------
// W7: semaphore, holders releasing in random order
// ---------------------------------------------------------------------------------------

/// Who holds a permit and who waits in `acquire`, and how long a permit sat free while
/// someone waited.
struct PermitBook {
    permits: usize,
    holders: usize,
    waiting: usize,
    since: Instant,
    idle: Duration,
    violations: u64,
}

impl PermitBook {
    /// Applies a change (holders and waiters counted after it), adding the time since the
    /// last change to `idle` if a permit was free while someone waited.
    fn change(&mut self, holders: isize, waiting: isize) {
        let now = Instant::now();
        if self.holders < self.permits && self.waiting > 0 {
            self.idle += now - self.since;
        }
        self.since = now;
        self.holders = self.holders.saturating_add_signed(holders);
        self.waiting = self.waiting.saturating_add_signed(waiting);
        if self.holders > self.permits {
            self.violations += 1;
        }
    }
}

/// A small deterministic generator for hold times (xorshift64).
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn w7(ctx: &Ctx) -> Res<()> {
    const PERMITS: u32 = 3;
    const SESSIONS: usize = 8;
    w7_uncontended(ctx, PERMITS)?;
    let clients = ctx.connect_many(SESSIONS)?;
    let r = w7_run(ctx, &clients, PERMITS);
    close_all(&clients);
    r
}

/// An uncontended acquire against the round trip it is made of: a create and a listing
/// pipelined (the issue's bound: two of those).
fn w7_uncontended(ctx: &Ctx, permits: u32) -> Res<()> {
    let client = &ctx.client;
    let sem = Semaphore::new(client, &format!("{}/w7/alone", ctx.dir), permits)?;
    let dir = format!("{}/w7", ctx.dir);
    let rounds = (ctx.n / 4).max(50);
    let (mut acquire, mut pair) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (d, permit) = timed(|| sem.acquire());
        acquire.push(d);
        permit?.release()?;
        let (d, r) = timed(|| {
            let (c, l) = client.pipeline(|p| {
                (
                    p.create(&format!("{dir}/q-"), b"", CreateMode::EphemeralSequential),
                    p.get_children(&dir),
                )
            });
            c.wait().and_then(|c| l.wait().map(|_| c))
        });
        pair.push(d);
        client.delete(&r?.path, None)?;
    }
    let ratio = p50(&mut acquire) / p50(&mut pair);
    Line::new("W7 uncontended", &ctx.target)
        .s(
            "what",
            "Semaphore acquire alone, against a pipelined create + listing",
        )
        .u("n", rounds as u64)
        .lat("acquire_", &mut acquire)
        .lat("create_list_", &mut pair)
        .f("round_trips", ratio)
        .print();
    Ok(())
}

fn w7_run(ctx: &Ctx, clients: &[Client], permits: u32) -> Res<()> {
    let path = format!("{}/w7/sem", ctx.dir);
    let total = ctx.n;
    let acquired = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let done_at = Arc::new(PlMutex::new(None::<Instant>));
    let book = Arc::new(PlMutex::new(PermitBook {
        permits: permits as usize,
        holders: 0,
        waiting: 0,
        since: Instant::now(),
        idle: Duration::ZERO,
        violations: 0,
    }));
    let waits = Arc::new(PlMutex::new(Vec::with_capacity(total + clients.len())));
    let mut steps = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let sem = Semaphore::new(c, &path, permits)?;
        let (acquired, stop_w, done_at) = (acquired.clone(), stop.clone(), done_at.clone());
        let (book, waits) = (book.clone(), waits.clone());
        let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
        steps.push(move || -> Res<()> {
            book.lock().change(0, 1);
            let (waited, permit) = timed(|| sem.acquire_timeout(LOCK_WAIT));
            let permit = permit?.ok_or("W7: an acquire timed out")?;
            book.lock().change(1, -1);
            waits.lock().push(waited);
            count(&acquired, total, &stop_w, &done_at);
            std::thread::sleep(Duration::from_micros(next_rand(&mut rng) % 2001));
            book.lock().change(-1, 0);
            permit.release()?;
            Ok(())
        });
    }
    let watch_sum = || clients.iter().map(|c| c.stats().watch_events).sum::<u64>();
    let watch_before = watch_sum();
    book.lock().since = Instant::now();
    let start = run_workers("w7", steps, &stop)?;
    let done = done_at.lock().ok_or("W7: the count was never reached")?;
    let run = (done - start).as_secs_f64();
    let mut waits = std::mem::take(&mut *waits.lock());
    let book = book.lock();
    // Every acquisition but the first `permits` followed a release.
    let releases = (acquired.load(Ordering::SeqCst) as u64).max(1);
    let notifications = watch_sum() - watch_before;
    Line::new("W7", &ctx.target)
        .s(
            "what",
            "Semaphore, 3 permits, 8 sessions x 1 thread, hold 0-2 ms at random",
        )
        .u("acquisitions", total as u64)
        .f("acquisitions_per_s", total as f64 / run)
        .lat("wait_", &mut waits)
        .f("idle_permit_ms", book.idle.as_secs_f64() * 1e3)
        .f("idle_permit_share", book.idle.as_secs_f64() / run)
        .f(
            "idle_permit_per_release_us",
            book.idle.as_secs_f64() * 1e6 / releases as f64,
        )
        .f(
            "notifications_per_release",
            notifications as f64 / releases as f64,
        )
        .u("violations", book.violations)
        .print();
    if book.violations > 0 {
        return Err(format!("W7: {} times more than 3 holders", book.violations).into());
    }
    Ok(())
}
