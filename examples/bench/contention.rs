//! W2 (handoff between K sessions, and the delete + watch baseline) and W3
//! (notifications per release).

use crate::*;

// ---------------------------------------------------------------------------------------
// Contention: handoff measurement shared by W2 and W6
// ---------------------------------------------------------------------------------------

/// What the contending threads share.
pub(crate) struct Contention {
    /// Taken just before a holder's release; read by whoever acquires next.
    pub(crate) released_at: PlMutex<Option<Instant>>,
    /// In acquisition order (the lock orders them).
    pub(crate) handoffs: PlMutex<Vec<Duration>>,
    /// How long the holders' `release` calls took (the delete's round trip).
    pub(crate) releases: PlMutex<Vec<Duration>>,
    pub(crate) inside: AtomicUsize,
    pub(crate) violations: AtomicU64,
    pub(crate) acquired: AtomicUsize,
    /// Acquisitions to count.
    pub(crate) total: usize,
    /// Counting also ends at this instant (set when the gate opens).
    pub(crate) cap: PlMutex<Option<Instant>>,
    /// The instant and the number of the last counted acquisition.
    pub(crate) done: PlMutex<Option<(Instant, usize)>>,
    pub(crate) stop: AtomicBool,
}

impl Contention {
    pub(crate) fn new(total: usize) -> Contention {
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
pub(crate) fn contend(lock: Mutex, c: Arc<Contention>) -> Res<()> {
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
pub(crate) struct Run {
    /// In acquisition order.
    pub(crate) handoffs: Vec<Duration>,
    pub(crate) releases: Vec<Duration>,
    /// Acquisitions counted (fewer than asked if the time cap ended the run).
    pub(crate) counted: usize,
    pub(crate) capped: bool,
    pub(crate) per_s: f64,
    pub(crate) violations: u64,
    /// Threads and VmRSS (kB) while every waiter was queued behind the gate.
    pub(crate) threads_queued: u64,
    pub(crate) rss_queued_kb: u64,
    pub(crate) bench_threads_queued: usize,
    /// How long it took until every contender was queued behind the gate.
    pub(crate) queue_build: Duration,
    /// The delete + watch baseline sampled during the counted acquisitions (every
    /// [`IN_RUN_PACE`]), when the run was given a pair of sessions for it.
    pub(crate) delete_watch_in_run: Vec<Duration>,
    /// The process's CPU from the gate's release until the count was
    /// reached, and the acquisitions in that time (counted or not).
    pub(crate) cpu: CpuUsed,
    pub(crate) cpu_acquisitions: usize,
}

impl Run {
    /// Adds a later run of the same workload: samples pooled, counts summed, the
    /// queue-time figures (threads, memory, build time) kept from the first.
    pub(crate) fn absorb(&mut self, later: Run) {
        let secs = |r: &Run| r.counted as f64 / r.per_s.max(f64::MIN_POSITIVE);
        let total_s = secs(self) + secs(&later);
        self.handoffs.extend(later.handoffs);
        self.releases.extend(later.releases);
        self.counted += later.counted;
        self.capped |= later.capped;
        self.per_s = self.counted as f64 / total_s.max(f64::MIN_POSITIVE);
        self.violations += later.violations;
        self.delete_watch_in_run.extend(later.delete_watch_in_run);
        self.cpu = self.cpu + later.cpu;
        self.cpu_acquisitions += later.cpu_acquisitions;
    }
}

/// The pause between two in-run delete + watch samples: each sample is two writes, so
/// this keeps the sampler's load to a small share of the workload's (a handoff is two
/// writes too, about every millisecond).
pub(crate) const IN_RUN_PACE: Duration = Duration::from_millis(10);

/// The delete + watch baseline sampled under a workload's load: a thread of its own runs
/// a [`DeleteWatch`] on a pair of sessions (watcher, deleter) every [`IN_RUN_PACE`] from
/// [`start`](InRun::start) until [`finish`](InRun::finish). W2, W4 and W6 compare their
/// handoffs against it (`ratio_in_run`).
pub(crate) struct InRun {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Res<Vec<Duration>>>,
}

impl InRun {
    /// Starts sampling on `pair` (watcher, deleter) with the node `node`.
    pub(crate) fn start(pair: (Client, Client), node: String) -> Res<InRun> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = spawn("bench-in-run-baseline".into(), move || {
            let dw = DeleteWatch::start(pair.0, pair.1, node)?;
            let mut samples = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                samples.push(dw.sample()?);
                std::thread::sleep(IN_RUN_PACE);
            }
            Ok(samples)
        })?;
        Ok(InRun { stop, handle })
    }

    /// Stops sampling: the samples taken.
    pub(crate) fn finish(self) -> Res<Vec<Duration>> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .join()
            .map_err(|_| "the in-run baseline sampler panicked")?
    }
}

impl Line {
    /// The in-run floor's fields ([`InRun`]'s `samples`, taken while `during`) and the
    /// handoff's ratio to it: `delete_watch_in_run_n`, its p50 and p99, and `ratio_in_run`
    /// = `handoff_p50` (the figure's `{handoff}_p50_us`) / its p50.
    pub(crate) fn in_run(
        self,
        handoff: &str,
        handoff_p50: f64,
        samples: &mut [Duration],
        during: &str,
    ) -> Line {
        let n = samples.len();
        let ratio = handoff_p50 / p50(samples);
        self.u("delete_watch_in_run_n", n as u64)
            .lat("delete_watch_in_run_", samples)
            .f("ratio_in_run", ratio)
            .s(
                "ratio_in_run_is",
                &format!("{handoff}_p50 / delete_watch_in_run_p50: the same delete + watch baseline, sampled by two more sessions every 10 ms while {during}"),
            )
    }
}

/// `threads` threads (thread i on `clients[i % len]`) contend for one Mutex at `path`. The
/// main client holds the lock until every thread is queued, then lets go: from then on
/// `total` acquisitions are counted, or as many as happen within `cap`. Then the waiters
/// still queued are cancelled. With `baseline` (a watcher and a deleter session), the
/// delete + watch baseline is sampled meanwhile, under the workload's load.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_contention(
    ctx: &Ctx,
    clients: &[Client],
    threads: usize,
    path: &str,
    total: usize,
    cap: Duration,
    label: &str,
    baseline: Option<(Client, Client)>,
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
    let sampler = match baseline {
        Some(pair) => {
            let node = format!("{}/{label}-delete-watch-in-run", ctx.dir);
            match InRun::start(pair, node) {
                Ok(h) => Some(h),
                Err(e) => {
                    drop(gate);
                    let _ = stop_all(handles);
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let (start, cpu) = (Instant::now(), Cpu::now());
    *shared.cap.lock() = Some(start + cap);
    *shared.released_at.lock() = Some(start);
    let released = gate.release();
    // Wait for the count (or the cap, noticed by the next acquirer), then stop everyone.
    let wait_until = start + cap + STEP_WAIT;
    while !shared.stop.load(Ordering::SeqCst) && Instant::now() < wait_until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let cpu_acquisitions = shared.acquired.load(Ordering::SeqCst);
    let cpu = cpu.since();
    let sampled = sampler.map(InRun::finish);
    let stopped = stop_all(handles);
    let delete_watch_in_run = sampled.transpose()?.unwrap_or_default();
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
        delete_watch_in_run,
        cpu,
        cpu_acquisitions,
    })
}

/// p50 of: one session holds a data watch on a node, another deletes it; from just before
/// the delete to the watch event arriving at a thread blocked on it.
pub(crate) fn delete_watch_p50(ctx: &Ctx) -> Res<f64> {
    let clients = ctx.connect_many(2)?;
    let r = delete_watch(ctx, &clients);
    close_all(&clients);
    let (mut samples, line) = r?;
    let p = p50(&mut samples);
    line.lat("", &mut samples).print();
    Ok(p)
}

pub(crate) fn delete_watch(ctx: &Ctx, clients: &[Client]) -> Res<(Vec<Duration>, Line)> {
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
pub(crate) struct DeleteWatch {
    pub(crate) deleter: Client,
    pub(crate) node: String,
    /// Each message starts one sample: the directory to list after the event, if any.
    pub(crate) go_tx: Option<Sender<Option<String>>>,
    pub(crate) ready_rx: Receiver<Res<()>>,
    pub(crate) seen_rx: Receiver<Res<Instant>>,
    pub(crate) handle: Option<JoinHandle<()>>,
}

impl DeleteWatch {
    pub(crate) fn start(watcher: Client, deleter: Client, node: String) -> Res<DeleteWatch> {
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
    pub(crate) fn sample(&self) -> Res<Duration> {
        self.run(None, false)
    }

    /// Delete until the watcher, told by the event, has listed `dir`.
    pub(crate) fn sample_listing(&self, dir: &str) -> Res<Duration> {
        self.run(Some(dir.to_string()), false)
    }

    /// [`sample`](DeleteWatch::sample) with the deleter holding a data watch on the node
    /// too, as a guard holds one on its own node: the server then sends two notifications
    /// before the delete's reply, one to the deleter's own session.
    pub(crate) fn sample_own_watched(&self) -> Res<Duration> {
        self.run(None, true)
    }

    /// [`sample`](DeleteWatch::sample) as two instants: just before the delete, and the
    /// event's arrival (for `BENCH_W4_TRACE`).
    pub(crate) fn sample_stamped(&self) -> Res<(Instant, Instant)> {
        self.stamped(None, false)
    }

    pub(crate) fn run(&self, list: Option<String>, own_watch: bool) -> Res<Duration> {
        let (t0, seen) = self.stamped(list, own_watch)?;
        Ok(seen.saturating_duration_since(t0))
    }

    fn stamped(&self, list: Option<String>, own_watch: bool) -> Res<(Instant, Instant)> {
        let go = self.go_tx.as_ref().ok_or("delete+watch: stopped")?;
        self.deleter
            .create(&self.node, b"", CreateMode::Ephemeral)?;
        let _own = match own_watch {
            true => Some(self.deleter.get_data_w(&self.node)?),
            false => None,
        };
        go.send(list)
            .map_err(|_| "delete+watch: watcher thread gone")?;
        self.ready_rx.recv_timeout(STEP_WAIT)??;
        let t0 = Instant::now();
        self.deleter.delete(&self.node, None)?;
        let seen = self.seen_rx.recv_timeout(STEP_WAIT)??;
        Ok((t0, seen))
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

pub(crate) fn w2(ctx: &Ctx, k: usize, delete_watch_p50: f64) -> Res<()> {
    let clients = ctx.connect_many(k + 2)?;
    let path = format!("{}/w2-{k}/lock", ctx.dir);
    let pair = (clients[k].clone(), clients[k + 1].clone());
    let r = run_contention(
        ctx,
        &clients[..k],
        k,
        &path,
        ctx.n,
        CAP,
        &format!("w2-{k}"),
        (!profiling()).then_some(pair),
    );
    close_all(&clients);
    let mut run = r?;
    let hp50 = p50(&mut run.handoffs);
    let rp50 = p50(&mut run.releases);
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
        .cpu_used("acquisition", run.cpu, run.cpu_acquisitions)
        .s(
            "cpu_is",
            "this process's user+sys from the first release to the last counted acquisition, per acquisition in that time (the in-run sampler's two sessions included)",
        )
        .f("delete_watch_p50_us", delete_watch_p50)
        .f("ratio", hp50 / delete_watch_p50)
        .s("ratio_is", "handoff_p50 / delete_watch_p50")
        .f("ratio_to_release", hp50 / rp50)
        .s(
            "ratio_to_release_is",
            "handoff_p50 / release_p50: the holders' delete round trip in this run, under the load the workload makes",
        )
        .in_run("handoff", hp50, &mut run.delete_watch_in_run, "the workload runs")
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
pub(crate) const W3_WAITERS: usize = 50;

/// A held lock (or leadership) of any kind; dropping it releases.
pub(crate) type Held = Box<dyn std::any::Any>;

/// One queue recipe as W3 queues it: `hold(client, path, who)` blocks (bounded) until it
/// holds. Every kind queues its contenders in the directory `path` (a `MultiLock` in the
/// first of its two).
pub(crate) struct W3Kind {
    pub(crate) figure: &'static str,
    pub(crate) hold: fn(&Client, &str, usize) -> Res<Held>,
}

pub(crate) fn held<G: 'static>(g: zkguard::Result<Option<G>>) -> Res<Held> {
    match g? {
        Some(g) => Ok(Box::new(g)),
        None => Err(format!("acquire timed out after {LOCK_WAIT:?}").into()),
    }
}

pub(crate) const W3_KINDS: [W3Kind; 6] = [
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
pub(crate) fn w3(ctx: &Ctx) -> Res<()> {
    let holder_client = ctx.connect_one()?;
    let clients = match ctx.connect_many(W3_WAITERS) {
        Ok(c) => c,
        Err(e) => {
            holder_client.close();
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
    holder_client.close();
    r
}

pub(crate) fn w3_run(
    ctx: &Ctx,
    kind: &W3Kind,
    holder_client: &Client,
    clients: &[Client],
) -> Res<()> {
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
