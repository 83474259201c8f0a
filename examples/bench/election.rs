//! W4: leader election, change of leader.

use crate::*;

// ---------------------------------------------------------------------------------------
// W4: leader election, change of leader
// ---------------------------------------------------------------------------------------

/// Candidates in the election, each on a client (session) of its own.
pub(crate) const W4_CANDIDATES: usize = 5;

/// W4's candidates: `BENCH_W4_CANDIDATES` (at least 2), else [`W4_CANDIDATES`].
pub(crate) fn w4_n() -> usize {
    std::env::var("BENCH_W4_CANDIDATES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(W4_CANDIDATES, |n| n.max(2))
}
/// Resign rounds by default (the count; `BENCH_N`, when set, replaces it).
pub(crate) const W4_RESIGNS: usize = 30;
/// Rounds where the leader's client is closed.
pub(crate) const W4_CLOSES: usize = 10;
/// Resign rounds run first and not counted.
pub(crate) const W4_WARMUP: usize = 5;

/// What one style's rounds measured.
#[derive(Default)]
pub(crate) struct W4Run {
    /// From just before the resign to the successor learning it leads.
    pub(crate) resign_to_leader: Vec<Duration>,
    /// The delete + watch baseline, one sample right before each counted resign round.
    pub(crate) baseline: Vec<Duration>,
    /// The same, with the watcher listing the election's directory on the event (what a
    /// successor whose last listing is stale must add), sampled right after `baseline`.
    pub(crate) baseline_list: Vec<Duration>,
    /// The same as `baseline`, with the deleter holding a data watch on the node too (as a
    /// leader's guard does on its own node), sampled right after `baseline_list`.
    pub(crate) baseline_own: Vec<Duration>,
    /// The same delete + watch baseline sampled by two more sessions every
    /// [`IN_RUN_PACE`](crate::contention::IN_RUN_PACE) while this style's rounds run (W2's
    /// in-run floor: [`InRun`](crate::contention::InRun)).
    pub(crate) baseline_in_run: Vec<Duration>,
    /// Each counted resign round's start and the successor's learning it leads, for
    /// `BENCH_W4_TRACE` (see [`w4_trace`]).
    pub(crate) trace: Vec<(Instant, Instant)>,
    /// The same for each `baseline` sample: just before the delete, the event's arrival.
    pub(crate) baseline_trace: Vec<(Instant, Instant)>,
    /// The resign call itself.
    pub(crate) resign_call: Vec<Duration>,
    /// `Client::close` on the leader's client.
    pub(crate) close_call: Vec<Duration>,
    /// From just before the close to the successor learning it leads.
    pub(crate) close_to_leader: Vec<Duration>,
    /// Requests the successor's client sent from just before the resign until it knew.
    pub(crate) successor_requests: Vec<u64>,
    /// Rounds where not exactly one candidate led once the change was over (or a second
    /// one said it was elected, or the server's first node was someone else's).
    pub(crate) violations: u64,
    /// Rounds where the new leader was not the next candidate in the queue.
    pub(crate) order_violations: u64,
    /// Settled rounds where a child of the election changed after the newest node was
    /// created, i.e. the resigner queued again before its old node was deleted.
    pub(crate) requeue_before_delete: u64,
    /// Closed leaders that learned it: `Lost` (background style), or `lost()` fired (guard
    /// style).
    pub(crate) lost_reported: u64,
}

pub(crate) fn w4(ctx: &Ctx) -> Res<()> {
    let resigns = ctx.n_given.unwrap_or(W4_RESIGNS);
    let closes = W4_CLOSES;
    let base_clients = ctx.connect_many(4)?;
    let r = (|| -> Res<(W4Run, W4Run)> {
        let dw = DeleteWatch::start(
            base_clients[0].clone(),
            base_clients[1].clone(),
            format!("{}/w4-delete-watch", ctx.dir),
        )?;
        let pair = (base_clients[2].clone(), base_clients[3].clone());
        let guard = w4_in_run(ctx, &pair, "guard", |run| {
            w4_guard(ctx, &dw, resigns, closes, run)
        })?;
        let background = w4_in_run(ctx, &pair, "candidate", |run| {
            w4_candidates(ctx, &dw, resigns, closes, run)
        })?;
        Ok((guard, background))
    })();
    close_all(&base_clients);
    let (mut guard, mut background) = r?;
    if std::env::var_os("BENCH_W4_TRACE").is_some() {
        w4_trace("guard", &guard);
        w4_trace("candidate", &background);
    }
    w4_line(
        "W4",
        ctx,
        "guard style: the other candidates blocked in lead(), a thread each; from just before the leader's resign() to lead() returning in another",
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

/// With `BENCH_W4_TRACE` set, one line on standard error per counted resign round: `w4-trace
/// STYLE T0 LED`, the round's start (just before the resign) and the successor's learning it
/// leads, and one per `baseline` sample (`STYLE-baseline`: just before the delete, the
/// event's arrival), in µs since the Unix epoch, the clock a packet capture stamps packets with, so
/// that `examples/bench/zk_wire.py --trace` can put them beside the round's frames.
pub(crate) fn w4_trace(style: &str, run: &W4Run) {
    let (mono, wall) = (Instant::now(), std::time::SystemTime::now());
    let wall_us = wall
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1e6;
    let unix_us = |at: Instant| wall_us - mono.saturating_duration_since(at).as_secs_f64() * 1e6;
    for &(t0, led) in &run.trace {
        eprintln!("w4-trace {style} {:.1} {:.1}", unix_us(t0), unix_us(led));
    }
    for &(t0, seen) in &run.baseline_trace {
        eprintln!(
            "w4-trace {style}-baseline {:.1} {:.1}",
            unix_us(t0),
            unix_us(seen)
        );
    }
}

/// Runs one style's rounds (`rounds` fills the run it is given) while the in-run baseline
/// is sampled on `pair`, as W2 samples it: its samples go into the run too.
pub(crate) fn w4_in_run(
    ctx: &Ctx,
    pair: &(Client, Client),
    style: &str,
    rounds: impl FnOnce(&mut W4Run) -> Res<()>,
) -> Res<W4Run> {
    let node = format!("{}/w4-{style}-delete-watch-in-run", ctx.dir);
    let sampler = InRun::start(pair.clone(), node)?;
    let mut run = W4Run::default();
    let r = rounds(&mut run);
    let sampled = sampler.finish();
    r?;
    run.baseline_in_run = sampled?;
    Ok(run)
}

pub(crate) fn w4_line(figure: &str, ctx: &Ctx, what: &str, run: &mut W4Run) {
    let leader_p50 = p50(&mut run.resign_to_leader);
    let ratio = leader_p50 / p50(&mut run.baseline);
    let in_run_p50 = p50(&mut run.baseline_in_run);
    let close_p50 = p50(&mut run.close_call);
    let mut line = Line::new(figure, &ctx.target)
        .s("what", what)
        .u("candidates", w4_n() as u64)
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
        .in_run(
            "resign_to_leader",
            leader_p50,
            &mut run.baseline_in_run,
            "this style's rounds run (W2's ratio_in_run)",
        )
        .s("ratio_in_run_target", "<= 1.1")
        .b("ratio_in_run_target_met", leader_p50 / in_run_p50 <= 1.1)
        .dist("delete_watch_list_", &mut run.baseline_list)
        .f(
            "ratio_to_delete_watch_list",
            leader_p50 / p50(&mut run.baseline_list),
        )
        .dist("delete_watch_own_", &mut run.baseline_own)
        .f(
            "ratio_to_delete_watch_own",
            leader_p50 / p50(&mut run.baseline_own),
        )
        .s(
            "ratio_to_delete_watch_own_is",
            "resign_to_leader_p50 / the delete + watch baseline where the deleter also watches the node, as a leader's guard watches its own node",
        )
        .dist("resign_call_", &mut run.resign_call)
        .dist("close_call_", &mut run.close_call)
        .s("close_call_target", "p50 < 5000 us")
        .b("close_call_target_met", close_p50 < 5000.0)
        .dist("close_to_leader_", &mut run.close_to_leader)
        .f("close_ratio_in_run", p50(&mut run.close_to_leader) / in_run_p50);
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
pub(crate) fn w4_settle(
    client: &Client,
    observer: &LeaderElection,
    want: usize,
) -> Res<(Vec<String>, bool)> {
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
pub(crate) fn w4_check_winner(
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
pub(crate) fn w4_retire(handle: JoinHandle<Res<()>>, what: &str) -> Res<()> {
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
pub(crate) struct Led {
    pub(crate) who: usize,
    pub(crate) at: Instant,
    pub(crate) requests: u64,
}

pub(crate) struct GuardShared {
    /// Candidates that hold leadership (by their own count).
    pub(crate) inside: AtomicUsize,
    pub(crate) violations: AtomicU64,
    /// Set just before a leader's resign; taken by the main thread.
    pub(crate) resigned_at: PlMutex<Option<Instant>>,
    pub(crate) resign_calls: PlMutex<Vec<Duration>>,
    /// False during the clean-up, when leaders come and go uncounted.
    pub(crate) counting: AtomicBool,
}

pub(crate) struct GuardSlot {
    pub(crate) who: usize,
    pub(crate) client: Client,
    /// A message: resign and lead again. Dropped: resign and leave.
    pub(crate) cmd: Option<Sender<()>>,
    pub(crate) handle: JoinHandle<Res<()>>,
}

pub(crate) fn w4_guard_thread(
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

pub(crate) fn w4_guard(
    ctx: &Ctx,
    dw: &DeleteWatch,
    resigns: usize,
    closes: usize,
    run: &mut W4Run,
) -> Res<()> {
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
        let client = ctx.connect_one()?;
        let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
        let who = next_who;
        next_who += 1;
        let (c, p, s, l) = (client.clone(), path.clone(), shared.clone(), led_tx.clone());
        let handle = match spawn(format!("bench-w4-g{who}"), move || {
            w4_guard_thread(who, c, p, s, cmd_rx, l)
        }) {
            Ok(h) => h,
            Err(e) => {
                client.close();
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
    let r = (|| -> Res<()> {
        for _ in 0..w4_n() {
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
            let (ids, requeued_early) = w4_settle(&ctx.client, &observer, w4_n())?;
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
                let (d, r) = timed(|| slots[li].client.close().into_result());
                r?;
                (t0, Some(d))
            } else {
                if counted {
                    let (b0, seen) = dw.sample_stamped()?;
                    run.baseline.push(seen.saturating_duration_since(b0));
                    run.baseline_trace.push((b0, seen));
                    run.baseline_list.push(dw.sample_listing(&path)?);
                    run.baseline_own.push(dw.sample_own_watched()?);
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
            w4_check_winner(run, &observer, "W4 guard", &format!("g{}", won.who), &next)?;
            leader = won.who;
            if counted {
                run.successor_requests
                    .push(won.requests.saturating_sub(before));
                match took {
                    Some(c) => {
                        run.close_call.push(c);
                        run.close_to_leader.push(d);
                    }
                    None => {
                        run.resign_to_leader.push(d);
                        run.trace.push((t0, won.at));
                    }
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
            s.client.close();
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
    Ok(())
}

// --- background style ------------------------------------------------------------------

/// An event of a background-style candidate, stamped when its listener received it.
pub(crate) struct Stamped {
    pub(crate) who: usize,
    pub(crate) ev: LeaderEvent,
    pub(crate) at: Instant,
}

pub(crate) struct CandSlot {
    pub(crate) who: usize,
    pub(crate) client: Client,
    pub(crate) candidate: Candidate,
    pub(crate) listener: JoinHandle<Res<()>>,
}

pub(crate) fn w4_candidates(
    ctx: &Ctx,
    dw: &DeleteWatch,
    resigns: usize,
    closes: usize,
    run: &mut W4Run,
) -> Res<()> {
    let path = format!("{}/w4-candidate", ctx.dir);
    let observer = LeaderElection::new(&ctx.client, &path, "observer")?;
    let (heard_tx, heard_rx) = crossbeam_channel::unbounded::<Stamped>();
    let mut slots: Vec<CandSlot> = Vec::new();
    let mut next_who = 0;
    let mut add = |slots: &mut Vec<CandSlot>| -> Res<()> {
        let client = ctx.connect_one()?;
        let who = next_who;
        next_who += 1;
        let joined = LeaderElection::new(&client, &path, format!("c{who}")).and_then(|e| e.join());
        let candidate = match joined {
            Ok(c) => c,
            Err(e) => {
                client.close();
                return Err(e.into());
            }
        };
        // A thread of ours blocked on the events, as a daemon would be.
        let (events, tx) = (candidate.events(), heard_tx.clone());
        let listener = spawn(format!("bench-w4-c{who}"), move || -> Res<()> {
            for ev in events.iter() {
                let at = Instant::now();
                let _ = tx.send(Stamped { who, ev, at });
            }
            Ok(())
        });
        let listener = match listener {
            Ok(h) => h,
            Err(e) => {
                drop(candidate);
                client.close();
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
    let r = (|| -> Res<()> {
        for _ in 0..w4_n() {
            add(&mut slots)?;
            w4_settle(&ctx.client, &observer, slots.len())?;
        }
        let mut leader = None;
        let slot_of = |slots: &[CandSlot], who: usize| slots.iter().position(|s| s.who == who);
        for round in 0..W4_WARMUP + resigns + closes {
            let counted = round >= W4_WARMUP;
            let closing = round >= W4_WARMUP + resigns;
            let (ids, requeued_early) = w4_settle(&ctx.client, &observer, w4_n())?;
            if counted && requeued_early {
                run.requeue_before_delete += 1;
            }
            // What was said since the last round: a Resigned or a Lost, and no Elected but
            // the first candidate's before the first round.
            while let Ok(h) = heard_rx.try_recv() {
                if w4_heard(&h, run)? {
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
                let (b0, seen) = dw.sample_stamped()?;
                run.baseline.push(seen.saturating_duration_since(b0));
                run.baseline_trace.push((b0, seen));
                run.baseline_list.push(dw.sample_listing(&path)?);
                run.baseline_own.push(dw.sample_own_watched()?);
            }
            let t0 = Instant::now();
            let (took, r) = if closing {
                timed(|| slots[li].client.close().into_result())
            } else {
                timed(|| slots[li].candidate.resign())
            };
            if let Err(e) = r {
                return Err(format!("W4: c{leader_now} was not let go as asked: {e}").into());
            }
            // Until someone says it is elected.
            let won = loop {
                let h = heard_rx.recv_timeout(STEP_WAIT)?;
                if w4_heard(&h, run)? {
                    break h;
                }
            };
            leader = Some(won.who);
            let d = won.at.saturating_duration_since(t0);
            w4_check_winner(
                run,
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
                    run.trace.push((t0, won.at));
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
        w4_settle(&ctx.client, &observer, w4_n())?;
        while let Ok(h) = heard_rx.try_recv() {
            if w4_heard(&h, run)? {
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
            s.client.close();
            s.listener
        })
        .collect();
    let joined = join_all(handles);
    r?;
    joined?;
    Ok(())
}

/// Takes in one event of a background-style candidate: true for `Elected`. A `Lost` is
/// counted (only closed candidates lose); anything but these and `Resigned` is an error.
pub(crate) fn w4_heard(h: &Stamped, run: &mut W4Run) -> Res<bool> {
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
