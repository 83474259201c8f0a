//! Benchmark figures, one JSON line each (figures, not assertions).
//!
//! Against a throwaway standalone server from the harness (`forceSync=no`, or `yes` with
//! `BENCH_FORCE_SYNC=1`; the JVM's full JIT; warmed up for 3 s first), or the ensemble named
//! by `ZK_CONNECT`. `BENCH_N` sets the samples per figure (default 2000).
//! `BENCH_ONLY` picks workloads, comma-separated (default all): `ops`, `W1`, `W2` (or one of
//! `W2:2`, `W2:8`, `W2:32`), `W3`, `W4`, `W5`, `W6`, `W7`, `W8`, `W9`, `W10`, `W11`, `W12`, `W13`, `F`, and `TLS`: built with the `tls`
//! feature, the harness server also has a TLS port, and `ops`, `W1` and `W2` run a second
//! time over TLS right after the plaintext ones (their lines' `target` ends in `over TLS`);
//! `BENCH_ONLY=ops,W1,W2,TLS` gives both side by side.
//!
//! `BENCH_RTT` runs the selected workloads through the harness's fault proxy at each round
//! trip named (`1ms,5ms,16ms`; `0` for loopback without the proxy, the default when unset):
//! each direction delayed by half of it (`FaultProxy::delay`), a `rtt` line with the round
//! trip of a bare `exists` measured through it, and every time in µs of every line after it
//! also in round trips (`…_rtt` keys: the time over that measured round trip; `rtt_us`).
//! The workloads that start servers of their own (W9's ensemble) do not go through it.
//!
//! ```text
//! cargo run --release --example bench --features testing
//! BENCH_ONLY=W1,W6 BENCH_N=500 cargo run --release --example bench --features testing
//! BENCH_RTT=0,1ms,5ms,16ms BENCH_ONLY=W1,W2:8 BENCH_N=200 cargo run --release --example bench --features testing
//! ```
//!
//! Figures:
//!
//! - `ops`: the round trip (median and p99) of create, `get_children`, exists and delete, and
//!   of a create + `get_children` pair sent back to back on the session (pipelined), next to
//!   the same pair sent one after the other.
//! - `W1`: one session, one thread, `Mutex` acquire + release on one path, `BENCH_N` times,
//!   interleaved with a create (ephemeral sequential) + delete cycle on the same client;
//!   `ratio` = lock cycle p50 / create+delete p50. Also the acquire and release apart, and
//!   the requests the lock sends made by hand (create + listing pipelined, the guard's
//!   own-node watch written and not waited for, then delete), so `ratio_to_same_requests`
//!   is the library's own overhead; `ratio_to_create_list_delete` leaves out the own-node
//!   watch (what that key measured before f9d069f, and what Curator's cycle sends).
//!   `drop_cycle_`: acquire + drop (the guard dropped, not released), `BENCH_N` back to
//!   back, each timed, with their client CPU (`drop_cycle_cpu_…`): the drop writes its
//!   delete and returns, so the next acquire goes out behind it.
//! - `W2:K`: K sessions, one thread each, acquire → release until `BENCH_N` acquisitions in
//!   all: throughput, handoff (from just before a holder's release to the next holder's
//!   acquire returning), the holders' release (delete) time, mutual-exclusion violations;
//!   `ratio` = handoff p50 / the p50 of a delete seen by another session's data watch
//!   (`W2 delete+watch`, measured once per run, on a server doing nothing else);
//!   `ratio_to_release` = handoff p50 / the holders' release p50 in the same run, the
//!   delete's round trip under the writes the workload itself keeps in flight;
//!   `ratio_in_run` = handoff p50 / the same delete + watch baseline sampled every 10 ms by
//!   two more sessions while the workload runs (`delete_watch_in_run_p50_us`).
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
//!   watcher lists the election directory on the event (`delete_watch_list_`), and the same
//!   where the deleter also holds a data watch on the node, as a leader's guard does on its
//!   own (`delete_watch_own_`), and the floor W2 compares against: the same delete + watch
//!   sampled every 10 ms by two more sessions while each style's rounds run
//!   (`delete_watch_in_run_`; `ratio_in_run` = resign → leader p50 / its p50,
//!   `close_ratio_in_run` the same for close → leader). `BENCH_W4_TRACE=1` prints each
//!   counted round's stamps and each quiet baseline sample's on standard error (`w4-trace
//!   STYLE START END`, µs since the Unix epoch), for `examples/bench/zk_wire.py --trace`
//!   to put beside a packet capture of the same run (docs/performance.md, "The leader
//!   handoff against its floor"). `BENCH_W4_CANDIDATES` sets the candidates (default 5, at
//!   least 2). Two lines:
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
//!   measured as in `W2` with threads that queue again after each release; the two runs
//!   alternate in 4 segments of `BENCH_N / 4` acquisitions each, so both meet the same disk
//!   (`ratio_by_segment`: each segment's ratio; `ratio`: of the pooled p50s), after one
//!   uncounted segment of each that warms the server's JIT for this workload. Each run also
//!   samples the delete + watch baseline under its own load, as `W2` does:
//!   `server_slowdown` is how much slower that baseline is at 1,000 waiters than at 8, and
//!   `ratio_in_run_1000` / `ratio_in_run_8` each run's handoff against it.
//!
//! - `W8`–`W10` (`BENCH_SCALE` guards, default 10,000) run together on a 3-server harness
//!   ensemble of their own (whatever `ZK_CONNECT` says: W9 kills one of its servers); any of
//!   them selected runs all three and prints the selected lines.
//!   `W8`: one client takes `BENCH_SCALE` distinct `Mutex`es, uncontended, from 4 threads,
//!   and holds them: acquisitions per second, resident memory per held guard (VmRSS delta),
//!   requests per guard, and the connected server's watch total (`wchs`) against the
//!   guards' own-node watches. Each lock's directory is new, so its creation is in the
//!   figure; `W8 existing dirs` takes the same locks again after `W10`, while their
//!   directories still exist (the server removes empty containers after 60 s).
//!   `W9`: with them held, the connected server is SIGKILLed: time from the kill until
//!   `Reconnected`, until every guard `is_valid()`, and until the new server counts every
//!   watch again (`watches_rearmed_ms`); connection attempts, the requests callers sent
//!   (`ClientStats::requests`, which leaves out the connection thread's handshake and
//!   SetWatches) and the packets and bytes the surviving servers received meanwhile (their
//!   `mntr` `zk_packets_received`, `zk_bytes_received_count`: the handshake, SetWatches
//!   frames and pings); then another client deletes one held node: the time until its
//!   guard's `lost()` fires, and how many other guards are not valid at the end.
//!   `goal_met`: watches re-armed within 2 s, nothing lost. `killed_leader`: the killed
//!   server led the ensemble (then the others elect a leader before serving again, and
//!   the client's `connect_attempts` count the refusals meanwhile, and
//!   `server_packets_received` is null: a server that changes role restarts that counter).
//!   `W10`: every guard dropped (released) from one thread: time, requests, and the
//!   server's watch total afterwards.
//! - `W12` (built with the `kerberos` feature; otherwise a `skipped` line): what a login
//!   costs: `build()` p50/p99 without a login, with a first Kerberos login from a keytab
//!   (tickets from the KDC), with later ones (tickets in memory: what a reconnect costs) and
//!   from a `kinit` cache file, interleaved against one Kerberized server of its own,
//!   `BENCH_LOGIN_N` each (default 200), and the ratios to no login.
//! - `W13`: what the co-tenant check of a lock whose ACL keeps others out costs: `Mutex`
//!   acquire and release p50/p99 with `NodeAcl::creator()` against the open ACL,
//!   interleaved, one session each; `acquire_ratio_p50`; the requests one acquire sends
//!   (after the first in a directory, as many as the open lock's) and those of a client's
//!   first (with the directory's and its own node's `getACL`).
//! - `W11`: `BENCH_SCALE / 10` threads (default 1,000) blocked on as many `Mutex`es of one
//!   client, each held by another client, released one at a time (each after the previous
//!   waiter woke): p50/p99 from the start of the release (the holder's delete) to the
//!   waiter's acquire returning, against the same with one waiter (as many rounds);
//!   `ratio_p50` of the two, and the releases' own times beside them.
//! - `F`: each operation alone, nobody else on its path, one line each with its floor in
//!   round trips (`floor_rtt`; run it with `BENCH_RTT` to read the `…_rtt` keys): a
//!   `Mutex` acquire after a confirmed release, an acquire right behind a drop,
//!   `release()`, acquire + drop, a new lock's first acquire (its directory missing), a
//!   read and a write acquire of an `RwLock`, a `Semaphore` permit (3 permits, none
//!   taken), an election won (`lead`, then `resign`). `BENCH_N / 2` samples each (at
//!   least 30), after 20 uncounted.
//!
//! The cost of the metrics (`examples/bench/metrics_cost.sh`): built with the `metrics`
//! feature and run with `BENCH_METRICS=recorder`, the bench installs a Prometheus recorder
//! (`metrics-exporter-prometheus`, rendering only) before measuring, and every line's
//! `target` says so (`metrics: recorder installed`; built with the feature and without
//! `BENCH_METRICS`: `metrics: feature on, no recorder`). `BENCH_SERVE=1` only starts the
//! bench's server, prints its connect string and keeps it until standard input closes, so
//! that the builds with and without the feature take turns against one server.
//!
//! Contention runs (`W2`, `W6`) start with every contender queued behind a holder on the
//! bench's own session, count `BENCH_N` acquisitions or as many as happen in 90 s (then
//! `time_capped` is true), and cancel the waiters left.
//!
//! Client CPU: every workload is followed by a `<name> client cpu` line, the process's user
//! and system CPU (`getrusage(RUSAGE_SELF)`; the servers are processes of their own) over
//! the whole workload, its setup included; `ops`, `W1`, `W2` and `W6` also print it per
//! request, cycle or acquisition (`cpu_us_per_…`, with its user and system parts), over the
//! measured part only. `BENCH_PROFILE=1` is for a profiler that counts the whole process
//! (`valgrind --tool=callgrind`): `W1` runs its lock cycles alone (no interleaved plain and
//! by-hand cycles) and `W2` skips both delete + watch baselines, so that the difference
//! between two runs with different `BENCH_N` is that many lock cycles or acquisitions and
//! nothing else (docs/performance.md, "Client CPU").
//!
//! Every workload runs under a watchdog: one that takes too long prints an `error` line and
//! ends the process with status 2 (the harness's own watchdog then stops the servers). Each
//! blocking acquire is bounded as well. A workload that fails prints an `error` line; the
//! others still run, and the process exits with status 1.

mod acl;
mod contention;
mod election;
mod floors;
mod login;
mod mixes;
mod report;
mod rig;
mod scale;
mod semaphore;
mod uncontended;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex as PlMutex;
use zkguard::testing::{FaultProxy, TestCluster};
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

use contention::*;
use election::*;
use floors::*;
use mixes::*;
use report::*;
use rig::*;
use scale::*;
use semaphore::*;
use uncontended::*;

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
    /// TLS settings when this run measures over TLS (feature `tls`).
    #[cfg(feature = "tls")]
    tls: Option<zkguard::TlsConfig>,
}

impl Ctx {
    /// A new session to the bench's server (over TLS in a TLS run).
    fn connect_one(&self) -> Res<Client> {
        let builder = Client::builder(&self.connect);
        #[cfg(feature = "tls")]
        let builder = match &self.tls {
            Some(t) => builder.tls(t.clone()),
            None => builder,
        };
        Ok(builder.build()?)
    }

    fn connect_many(&self, k: usize) -> Res<Vec<Client>> {
        (0..k).map(|_| self.connect_one()).collect()
    }
}

const WORKLOADS: [&str; 17] = [
    "ops", "W1", "W2:2", "W2:8", "W2:32", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11",
    "W12", "W13", "F",
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
            if name != "W2" && name != "TLS" && !WORKLOADS.contains(&name.as_str()) {
                return Err(format!(
                    "BENCH_ONLY: unknown workload {name:?}; known: W2, TLS, {}",
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

    if std::env::var_os("BENCH_SERVE").is_some() {
        let (c, target) = bench_cluster()?;
        println!("{}", c.connect_string());
        eprintln!("bench: serving ({target}) until standard input closes");
        std::io::copy(&mut std::io::stdin(), &mut std::io::sink())?;
        drop(c);
        return Ok(true);
    }
    let rtts = rtt_setting()?;
    let metrics = metrics_setting()?;
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
    let target = match metrics {
        Some(m) => format!("{target}, metrics: {m}"),
        None => target,
    };
    let watchdog = Watchdog::start(target.clone())?;
    let client = Client::connect(&connect)?;
    let dir = format!("/zkguard-bench-{}", std::process::id());
    client.create(&dir, b"", CreateMode::Persistent)?;
    // Warm the server's JIT up before measuring anything.
    // A profile counts instructions: a fixed number of rounds, not a time.
    let warm_until = Instant::now() + Duration::from_secs(3);
    let mut warm_rounds = 0;
    while if profiling() {
        warm_rounds < 1000
    } else {
        Instant::now() < warm_until
    } {
        warm_rounds += 1;
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
        #[cfg(feature = "tls")]
        tls: None,
    };

    // On loopback, unless BENCH_RTT leaves it out (it names `0` for it).
    let mut ok = true;
    if rtts.is_empty() || rtts.contains(&Duration::ZERO) {
        ok = workloads(&ctx, cluster.as_ref(), &selected, &watchdog)?;
    }
    // The same workloads through a delaying proxy, at each round trip asked.
    for rtt in rtts.into_iter().filter(|r| !r.is_zero()) {
        let Some(c) = &cluster else {
            return Err("BENCH_RTT needs the harness's server (not ZK_CONNECT)".into());
        };
        let _armed = watchdog.arm("BENCH_RTT setup", Duration::from_secs(60));
        let (proxied, proxy) = rtt_ctx(c, &ctx, rtt)?;
        drop(_armed);
        ok &= workloads(&proxied, None, &selected, &watchdog)?;
        set_rtt_us(None);
        delete_tree(&proxied.client, &proxied.dir)?;
        proxied.client.close();
        drop(proxy);
    }
    let _armed = watchdog.arm("cleanup", Duration::from_secs(60));
    delete_tree(&ctx.client, &ctx.dir)?;
    ctx.client.close().into_result()?;
    drop(cluster);
    Ok(ok)
}

/// Every selected workload on `ctx` (and, with the harness's `cluster` and the `tls` feature,
/// the TLS lines); whether every one succeeded.
fn workloads(
    ctx: &Ctx,
    cluster: Option<&TestCluster>,
    selected: &dyn Fn(&str) -> bool,
    watchdog: &Watchdog,
) -> Res<bool> {
    #[cfg(not(feature = "tls"))]
    let _ = cluster;
    let n = ctx.n;
    // Budgets: generous for the default size, scaled with BENCH_N.
    let scale = (n as f64 / 2000.0).max(1.0);
    let budget = |secs: f64| Duration::from_secs_f64(secs * scale);
    let mut ok = true;
    let mut run_one = |name: &str, secs: f64, f: &dyn Fn(&Ctx) -> Res<()>| {
        if !selected(name) {
            return;
        }
        let _armed = watchdog.arm(name, budget(secs));
        let (cpu, wall) = (Cpu::now(), Instant::now());
        let r = f(ctx);
        let used = cpu.since();
        let (user, sys) = (used.user, used.sys);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Line::new(&format!("{name} client cpu"), &ctx.target)
            .s(
                "what",
                "getrusage(RUSAGE_SELF) user+sys over the whole workload, setup included",
            )
            .f("wall_ms", ms(wall.elapsed()))
            .f("cpu_ms", ms(user + sys))
            .f("cpu_user_ms", ms(user))
            .f("cpu_sys_ms", ms(sys))
            .u("switches", used.voluntary)
            .u("preempted", used.involuntary)
            .print();
        if let Err(e) = r {
            ok = false;
            Line::new(name, &ctx.target)
                .s("error", &e.to_string())
                .print();
            eprintln!("bench: workload {name} failed: {e}");
        }
    };
    run_one("ops", 120.0, &ops);
    run_one("W1", 120.0, &w1);
    run_one("F", 300.0, &floors);
    let mut dw: Option<f64> = None;
    for k in [2, 8, 32] {
        let name = format!("W2:{k}");
        let dw_cell = PlMutex::new(dw);
        run_one(&name, 180.0, &|ctx: &Ctx| {
            let known = *dw_cell.lock();
            let base = match known {
                Some(v) => v,
                // Not measured: a profile counts the acquisitions alone.
                None if profiling() => f64::NAN,
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
    // The same round trips, W1 and W2 over TLS, against the same server in the same run.
    #[cfg(feature = "tls")]
    if let (Some(c), true) = (cluster, selected("TLS")) {
        let tls_ctx = tls_ctx(c, ctx)?;
        run_one("ops", 120.0, &|_: &Ctx| ops(&tls_ctx));
        run_one("W1", 120.0, &|_: &Ctx| w1(&tls_ctx));
        let base = PlMutex::new(None);
        for k in [2, 8, 32] {
            let name = format!("W2:{k}");
            run_one(&name, 180.0, &|_: &Ctx| {
                // Measured once, as for the plaintext lines.
                let known = *base.lock();
                let b = match known {
                    Some(v) => v,
                    None => {
                        let v = delete_watch_p50(&tls_ctx)?;
                        *base.lock() = Some(v);
                        v
                    }
                };
                w2(&tls_ctx, k, b)
            });
        }
        delete_tree(&tls_ctx.client, &tls_ctx.dir)?;
        tls_ctx.client.close();
    }
    run_one("W3", 120.0, &w3);
    run_one("W4", 120.0, &w4);
    run_one("W5", 180.0, &w5);
    run_one("W6", 600.0, &w6);
    run_one("W7", 180.0, &w7);
    // W8–W10 share the held guards: run once under the first one selected.
    let show = HeldFigures {
        w8: selected("W8"),
        w9: selected("W9"),
        w10: selected("W10"),
    };
    if let Some(first) = [("W8", show.w8), ("W9", show.w9), ("W10", show.w10)]
        .into_iter()
        .find_map(|(name, on)| on.then_some(name))
    {
        run_one(first, 300.0 * scale_budget(), &|ctx: &Ctx| {
            held_guards(ctx, &show)
        });
    }
    run_one("W11", 300.0 * scale_budget(), &w11);
    run_one("W12", 300.0, &login::w12);
    run_one("W13", 120.0, &acl::w13);

    Ok(ok)
}

/// `BENCH_RTT`: the round trips to run the workloads at, comma-separated (`1ms,5ms,16ms`;
/// units `us`, `ms`, `s`; `0` for loopback without a proxy); none if unset.
fn rtt_setting() -> Res<Vec<Duration>> {
    let Ok(v) = std::env::var("BENCH_RTT") else {
        return Ok(Vec::new());
    };
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            parse_rtt(s).ok_or_else(|| {
                format!("BENCH_RTT: {s:?} is not a round trip (like 500us, 1ms, 16ms, 0)").into()
            })
        })
        .collect()
}

/// `500us`, `1ms`, `1.5ms`, `2s` or `0`.
fn parse_rtt(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic())?);
    let x: f64 = num
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x > 0.0)?;
    let secs = match unit {
        "us" | "µs" => x / 1e6,
        "ms" => x / 1e3,
        "s" => x,
        _ => return None,
    };
    (secs <= 60.0).then(|| Duration::from_secs_f64(secs))
}

/// A context whose sessions reach the harness's server through a fault proxy delaying each
/// direction by half of `rtt`, and the measured round trip of a bare request through it
/// (the median of 200 `exists`), which every line printed from now on also expresses its
/// times in (`set_rtt_us`).
fn rtt_ctx(cluster: &TestCluster, plain: &Ctx, rtt: Duration) -> Res<(Ctx, FaultProxy)> {
    let proxy = FaultProxy::for_cluster(cluster)?;
    proxy.delay(rtt / 2);
    let connect = proxy.connect_string();
    let client = Client::connect(&connect)?;
    let mut samples = Vec::with_capacity(200);
    for _ in 0..200 {
        let (took, r) = timed(|| client.exists("/"));
        r?;
        samples.push(took);
    }
    let measured = p50(&mut samples);
    let dir = format!("{}-rtt-{}us", plain.dir, rtt.as_micros());
    client.create(&dir, b"", CreateMode::Persistent)?;
    let target = format!(
        "{}, through a proxy at {rtt:?} round trip (measured {:.0} us)",
        plain.target, measured
    );
    Line::new("rtt", &target)
        .s(
            "what",
            "the round trip of a bare exists through the proxy, p50 of 200",
        )
        .f("asked_us", rtt.as_secs_f64() * 1e6)
        .f("measured_us", measured)
        .print();
    set_rtt_us(Some(measured));
    let ctx = Ctx {
        connect,
        target,
        n: plain.n,
        n_given: plain.n_given,
        dir,
        client,
        #[cfg(feature = "tls")]
        tls: None,
    };
    Ok((ctx, proxy))
}

/// With the `metrics` feature: installs a Prometheus recorder if `BENCH_METRICS=recorder`;
/// what the lines' `target` says of the metrics (`None` without the feature).
fn metrics_setting() -> Res<Option<&'static str>> {
    let asked = std::env::var("BENCH_METRICS").ok();
    #[cfg(feature = "metrics")]
    return match asked.as_deref() {
        Some("recorder") => {
            let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
            metrics::set_global_recorder(recorder)?;
            Ok(Some("recorder installed"))
        }
        None | Some("") => Ok(Some("feature on, no recorder")),
        Some(other) => Err(format!("BENCH_METRICS: {other:?}; known: recorder").into()),
    };
    #[cfg(not(feature = "metrics"))]
    match asked {
        Some(_) => Err("BENCH_METRICS: this bench was built without the metrics feature".into()),
        None => Ok(None),
    }
}

/// The harness's standalone server, with the full JIT as a production server runs (tests
/// use C1 only, to start fast); `BENCH_FORCE_SYNC=1` makes it fsync its log as a production
/// server does (`forceSync=yes`, the issue's setting). Also the `target` every line names.
fn bench_cluster() -> Res<(TestCluster, String)> {
    let force_sync = matches!(
        std::env::var("BENCH_FORCE_SYNC").as_deref(),
        Ok("1" | "yes" | "on" | "true")
    );
    // Empty containers reaped as a production server does (ZooKeeper's default, 60 s), not
    // at the harness's 100 ms: a lock directory emptied between two of a workload's
    // acquires would cost the next its create again.
    let builder = TestCluster::builder()
        .full_jit(true)
        .force_sync(force_sync)
        .container_check_interval(Duration::from_secs(60));
    // A TLS port beside the plaintext one, for the TLS lines (feature `tls`).
    #[cfg(feature = "tls")]
    let builder = builder.tls(zkguard::testing::ClientAuth::None);
    let c = builder.start()?;
    let target = format!(
        "harness standalone, forceSync={}, full JIT, containers reaped every 60 s",
        if force_sync { "yes" } else { "no" }
    );
    Ok((c, target))
}

/// A context whose sessions use TLS to the harness server's secure port (the line's
/// `target` says so).
#[cfg(feature = "tls")]
fn tls_ctx(cluster: &TestCluster, plain: &Ctx) -> Res<Ctx> {
    let pki = cluster.pki().ok_or("the bench cluster has no TLS port")?;
    let tls = zkguard::TlsConfig::ca_pem(pki.ca_cert_pem().as_bytes())?;
    let connect = cluster
        .secure_connect_string()
        .ok_or("the bench cluster has no TLS port")?;
    let client = Client::builder(&connect).tls(tls.clone()).build()?;
    // Its own directory: the workloads use fixed node names.
    let dir = format!("{}-tls", plain.dir);
    client.create(&dir, b"", CreateMode::Persistent)?;
    Ok(Ctx {
        connect,
        target: format!("{}, over TLS", plain.target),
        n: plain.n,
        n_given: plain.n_given,
        dir,
        client,
        tls: Some(tls),
    })
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

/// `BENCH_PROFILE=1`: only what a whole-process profiler should count (see the module doc).
pub(crate) fn profiling() -> bool {
    matches!(
        std::env::var("BENCH_PROFILE").as_deref(),
        Ok("1" | "yes" | "on" | "true")
    )
}
