//! W8–W11: thousands of locks on one client, and a server failover under them.

use crate::*;
use zkguard::MutexGuard;

/// Guards held by one client in W8–W10 (`BENCH_SCALE`, default 10,000); W11 blocks a tenth
/// as many threads (at least 1).
pub(crate) fn scale_n() -> usize {
    std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n >= 1)
        .unwrap_or(10_000)
}

/// How much longer than at the default size W8–W11 may take (`BENCH_SCALE / 10,000`, at
/// least 1).
pub(crate) fn scale_budget() -> f64 {
    (scale_n() as f64 / 10_000.0).max(1.0)
}

/// Threads that acquire the guards in W8 (and block in W11 only as waiters, one per lock).
const TAKERS: usize = 4;
/// Longest wait for the failover's steps and a deletion's notification.
const FAILOVER_WAIT: Duration = Duration::from_secs(60);

/// Which of W8, W9 and W10 print their line (all three run: W9 and W10 need W8's guards).
pub(crate) struct HeldFigures {
    pub(crate) w8: bool,
    pub(crate) w9: bool,
    pub(crate) w10: bool,
}

/// The server's watch total (`wchs`: "Total watches:N").
fn server_watches(cluster: &TestCluster, i: usize) -> Res<u64> {
    let reply = cluster.four_letter(i, "wchs")?;
    reply
        .lines()
        .find_map(|l| l.trim().strip_prefix("Total watches:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("wchs of server {i}: unexpected reply {reply:?}").into())
}

/// Polls the server's watch total until it is `want` or `wait` passes; the last total seen.
fn await_watches(cluster: &TestCluster, i: usize, want: u64, wait: Duration) -> Res<u64> {
    let until = Instant::now() + wait;
    loop {
        let seen = server_watches(cluster, i)?;
        if seen == want || Instant::now() >= until {
            return Ok(seen);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `key` of the server's `mntr` (0 for a server that is down or lacks it).
fn mntr(cluster: &TestCluster, i: usize, key: &str) -> u64 {
    let Ok(reply) = cluster.four_letter(i, "mntr") else {
        return 0;
    };
    reply
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once('\t')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// The packets and bytes servers `others` received from clients, summed.
fn received(cluster: &TestCluster, others: &[usize]) -> (u64, u64) {
    others.iter().fold((0, 0), |(p, b), &i| {
        (
            p + mntr(cluster, i, "zk_packets_received"),
            b + mntr(cluster, i, "zk_bytes_received_count"),
        )
    })
}

/// The index of the server `client` is connected to.
fn serving(cluster: &TestCluster, client: &Client) -> Res<usize> {
    (0..cluster.len())
        .find(|&i| client.connected_server() == Some(cluster.client_addr(i)))
        .ok_or_else(|| "the client is connected to none of the ensemble's servers".into())
}

/// W8–W10 on a 3-server ensemble of their own (W9 kills one of its servers).
pub(crate) fn held_guards(ctx: &Ctx, show: &HeldFigures) -> Res<()> {
    let n = scale_n();
    let cluster = TestCluster::builder().servers(3).full_jit(true).start()?;
    let target = format!("harness ensemble of 3, forceSync=no, full JIT, {n} guards");
    let client = Client::connect(&cluster.connect_string())?;
    let dir = format!("{}-scale", ctx.dir);
    let result =
        warm(&client, &dir).and_then(|()| held_on(&cluster, &client, &dir, n, &target, show));
    client.close();
    result
}

/// Creates `dir` and warms the servers' JIT for 3 s with the lock's requests, as the
/// standalone server is before the other figures.
fn warm(client: &Client, dir: &str) -> Res<()> {
    client.create(dir, b"", CreateMode::Persistent)?;
    let lock = Mutex::new(client, &format!("{dir}/warm"))?;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        lock.acquire_timeout(LOCK_WAIT)?
            .ok_or("the warm-up lock was not acquired")?
            .release()?;
    }
    Ok(())
}

fn held_on(
    cluster: &TestCluster,
    client: &Client,
    dir: &str,
    n: usize,
    target: &str,
    show: &HeldFigures,
) -> Res<()> {
    let guards = w8(cluster, client, dir, n, target, show.w8)?;
    w9(cluster, client, &guards, target, show.w9)?;
    w10(cluster, client, guards, target, show.w10)?;
    if show.w8 {
        // The same locks again while their directories still exist (the server removes an
        // empty container only after its check interval, 60 s by default): the cost of
        // an acquire without the directory's creation.
        let (guards, took, requests) = take_all(client, dir, n)?;
        Line::new("W8 existing dirs", target)
            .u("guards", guards.len() as u64)
            .f("acquisitions_per_s", n as f64 / took.as_secs_f64())
            .f("requests_per_guard", requests as f64 / n as f64)
            .print();
    }
    Ok(())
}

/// `n` distinct `Mutex`es under `dir` taken by `TAKERS` threads of `client`: the guards,
/// the time taken and the requests sent.
fn take_all(client: &Client, dir: &str, n: usize) -> Res<(Vec<MutexGuard>, Duration, u64)> {
    let requests_before = client.stats().requests;
    let start = Instant::now();
    let handles = (0..TAKERS)
        .map(|t| {
            let (c, dir) = (client.clone(), dir.to_string());
            spawn(format!("bench-W8-{t}"), move || -> Res<Vec<MutexGuard>> {
                (t..n)
                    .step_by(TAKERS)
                    .map(|i| {
                        Mutex::new(&c, &format!("{dir}/lock-{i}"))?
                            .acquire_timeout(LOCK_WAIT)?
                            .ok_or_else(|| {
                                format!("lock {i} not acquired within {LOCK_WAIT:?}").into()
                            })
                    })
                    .collect()
            })
        })
        .collect::<Res<Vec<_>>>()?;
    let guards: Vec<MutexGuard> = join_all(handles)?.into_iter().flatten().collect();
    let took = start.elapsed();
    Ok((guards, took, client.stats().requests - requests_before))
}

/// W8: one client takes `n` distinct `Mutex`es from `TAKERS` threads and holds them.
fn w8(
    cluster: &TestCluster,
    client: &Client,
    dir: &str,
    n: usize,
    target: &str,
    show: bool,
) -> Res<Vec<MutexGuard>> {
    let rss_before = proc_status("VmRSS").unwrap_or(0);
    let (guards, took, requests) = take_all(client, dir, n)?;
    let rss_after = proc_status("VmRSS").unwrap_or(0);
    // The own-node watch is sent, not waited for: give the server a moment to count it.
    let server = serving(cluster, client)?;
    let watches = await_watches(cluster, server, n as u64, Duration::from_secs(10))?;
    if show {
        Line::new("W8", target)
            .u("guards", guards.len() as u64)
            .u("threads", TAKERS as u64)
            .f("acquisitions_per_s", n as f64 / took.as_secs_f64())
            .f("seconds", took.as_secs_f64())
            .f(
                "rss_per_guard_bytes",
                (rss_after.saturating_sub(rss_before) * 1024) as f64 / n as f64,
            )
            .u("rss_before_kb", rss_before)
            .u("rss_after_kb", rss_after)
            .f("requests_per_guard", requests as f64 / n as f64)
            .u("server_watches", watches)
            .u("expected_watches", n as u64)
            .print();
    }
    Ok(guards)
}

/// W9: SIGKILL the connected server with every guard held, then another client deletes
/// one held node (its guard must report the loss).
fn w9(
    cluster: &TestCluster,
    client: &Client,
    guards: &[MutexGuard],
    target: &str,
    show: bool,
) -> Res<()> {
    let n = guards.len();
    let killed = serving(cluster, client)?;
    // A dead leader costs the ensemble an election before anyone serves again.
    let killed_leader = cluster.leader() == Some(killed);
    let others: Vec<usize> = (0..cluster.len()).filter(|&i| i != killed).collect();
    let events = client.events();
    let (packets_before, bytes_before) = received(cluster, &others);
    let requests_before = client.stats().requests;
    let connects_before = client.stats().connect_attempts;
    let start = Instant::now();
    cluster.kill(killed)?;
    let until = start + FAILOVER_WAIT;
    let reconnected = loop {
        match events.recv_deadline(until) {
            Ok(zkguard::SessionEvent::Reconnected { .. }) => break start.elapsed(),
            Ok(zkguard::SessionEvent::Lost { .. } | zkguard::SessionEvent::Closed) => {
                return Err("the session was lost in the failover".into())
            }
            Ok(_) => continue,
            Err(_) => return Err(format!("no reconnect within {FAILOVER_WAIT:?}").into()),
        }
    };
    let all_valid = loop {
        if guards.iter().all(|g| g.is_valid()) {
            break Some(start.elapsed());
        }
        if Instant::now() >= until {
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let server = serving(cluster, client)?;
    let watches = await_watches(cluster, server, n as u64, FAILOVER_WAIT)?;
    let rearmed = start.elapsed();
    let (packets_after, bytes_after) = received(cluster, &others);
    let requests = client.stats().requests - requests_before;
    let connects = client.stats().connect_attempts - connects_before;
    let not_valid = guards.iter().filter(|g| !g.is_valid()).count();

    // Another client deletes one held node: its guard must hear it.
    let victim = n / 2;
    let other = Client::connect(&cluster.connect_string())?;
    let lost_rx = guards[victim].lost();
    let t = Instant::now();
    let deleted = other.delete(guards[victim].path(), None);
    let delete_rtt = t.elapsed();
    let lost_after = lost_rx
        .recv_timeout(FAILOVER_WAIT)
        .ok()
        .map(|_| t.elapsed());
    other.close();
    deleted?;
    let others_invalid = guards
        .iter()
        .enumerate()
        .filter(|(i, g)| *i != victim && !g.is_valid())
        .count();
    if show {
        let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        Line::new("W9", target)
            .u("guards", n as u64)
            .u("killed_server", killed as u64)
            .b("killed_leader", killed_leader)
            .u("new_server", server as u64)
            .f("reconnected_ms", ms(Some(reconnected)))
            .f("all_valid_ms", ms(all_valid))
            .f("watches_rearmed_ms", ms(Some(rearmed)))
            .u("server_watches", watches)
            .u("not_valid_after_failover", not_valid as u64)
            .u("connect_attempts", connects)
            .u("caller_requests", requests)
            // A server that changes role (the leader died) restarts its packet counters;
            // the byte counter is a metric that survives it.
            .put(
                "server_packets_received",
                match killed_leader {
                    false => packets_after.saturating_sub(packets_before).into(),
                    true => serde_json::Value::Null,
                },
            )
            .u(
                "server_bytes_received",
                bytes_after.saturating_sub(bytes_before),
            )
            .f("delete_rtt_ms", ms(Some(delete_rtt)))
            .f("delete_to_lost_ms", ms(lost_after))
            .u("others_not_valid_at_end", others_invalid as u64)
            .b(
                "goal_met",
                rearmed < Duration::from_secs(2)
                    && not_valid == 0
                    && others_invalid == 0
                    && lost_after.is_some(),
            )
            .print();
    }
    Ok(())
}

/// W10: every guard dropped (released) from one thread.
fn w10(
    cluster: &TestCluster,
    client: &Client,
    guards: Vec<MutexGuard>,
    target: &str,
    show: bool,
) -> Res<()> {
    let n = guards.len();
    let requests_before = client.stats().requests;
    let (took, ()) = timed(|| drop(guards));
    let requests = client.stats().requests - requests_before;
    let server = serving(cluster, client)?;
    let watches = await_watches(cluster, server, 0, Duration::from_secs(10))?;
    if show {
        Line::new("W10", target)
            .u("guards", n as u64)
            .u("already_lost", 1) // W9's deleted node
            .f("seconds", took.as_secs_f64())
            .f("releases_per_s", n as f64 / took.as_secs_f64())
            .u("requests", requests)
            .f("requests_per_guard", requests as f64 / n as f64)
            .u("server_watches_after", watches)
            .print();
    }
    Ok(())
}

/// W11: `BENCH_SCALE / 10` threads blocked on as many locks of one client (each held by
/// another client), released one at a time: from the release to the waiter's wake-up,
/// against the same with one waiter (as many rounds).
pub(crate) fn w11(ctx: &Ctx) -> Res<()> {
    let k = (scale_n() / 10).max(1);
    let holder = ctx.connect_one()?;
    let waiter = ctx.connect_one()?;
    let result = (|| -> Res<()> {
        let paths: Vec<String> = (0..k).map(|i| format!("{}/w11-{i}", ctx.dir)).collect();
        let threads_before = proc_status("Threads").unwrap_or(0);
        let (mut wake_k, mut release_k, threads) = dispatch(&holder, &waiter, &paths)?;
        let one = [format!("{}/w11-one", ctx.dir)];
        let (mut wake_1, mut release_1) = (Vec::new(), Vec::new());
        for _ in 0..k {
            let (w, r, _) = dispatch(&holder, &waiter, &one)?;
            wake_1.extend(w);
            release_1.extend(r);
        }
        let ratio = p50(&mut wake_k) / p50(&mut wake_1);
        Line::new("W11", &ctx.target)
            .u("waiters", k as u64)
            .u(
                "threads_while_blocked",
                threads.saturating_sub(threads_before),
            )
            .lat(&format!("wake_{k}_"), &mut wake_k)
            .lat("wake_1_", &mut wake_1)
            .f("ratio_p50", ratio)
            .lat(&format!("release_{k}_"), &mut release_k)
            .lat("release_1_", &mut release_1)
            .print();
        Ok(())
    })();
    close_all(&[holder, waiter]);
    result
}

/// `holder` takes every lock at `paths`, one thread per lock blocks on it on `waiter`; then
/// the holder releases them one at a time, each after the previous waiter woke. The release
/// → wake-up times, the releases' own times, and the process's threads while all waited.
fn dispatch(
    holder: &Client,
    waiter: &Client,
    paths: &[String],
) -> Res<(Vec<Duration>, Vec<Duration>, u64)> {
    let held = paths
        .iter()
        .map(|p| {
            Mutex::new(holder, p)?
                .acquire_timeout(LOCK_WAIT)?
                .ok_or_else(|| format!("{p}: not acquired within {LOCK_WAIT:?}").into())
        })
        .collect::<Res<Vec<MutexGuard>>>()?;
    let (tx, rx) = crossbeam_channel::unbounded::<(usize, Instant, Res<MutexGuard>)>();
    let mut handles = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        let (c, p, tx) = (waiter.clone(), p.clone(), tx.clone());
        handles.push(spawn(format!("bench-W11-{i}"), move || {
            let got = Mutex::new(&c, &p).map_err(BoxError::from).and_then(|l| {
                l.acquire_timeout(LOCK_WAIT)?
                    .ok_or_else(|| format!("{p}: not acquired within {LOCK_WAIT:?}").into())
            });
            let _ = tx.send((i, Instant::now(), got));
        })?);
    }
    drop(tx);
    // Every waiter queued: its node beside the holder's.
    let until = Instant::now() + STEP_WAIT;
    for p in paths {
        while holder.get_children(p)?.0.len() < 2 {
            if Instant::now() >= until {
                return Err(format!("{p}: the waiter did not queue within {STEP_WAIT:?}").into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let threads = proc_status("Threads").unwrap_or(0);
    let (mut wake, mut release, mut woken) = (Vec::new(), Vec::new(), Vec::new());
    for (i, guard) in held.into_iter().enumerate() {
        let t = Instant::now();
        drop(guard);
        release.push(t.elapsed());
        let (j, at, got) = rx.recv_timeout(LOCK_WAIT)?;
        woken.push(got?);
        if j != i {
            return Err(format!("released lock {i}, but the waiter of lock {j} woke").into());
        }
        wake.push(at.saturating_duration_since(t));
    }
    drop(woken);
    for h in handles {
        let _ = h.join();
    }
    Ok((wake, release, threads))
}
