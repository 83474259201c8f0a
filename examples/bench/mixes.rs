//! W5 (a read/write mix) and W6 (1,000 waiters in one process).

use crate::*;

// ---------------------------------------------------------------------------------------
// W5: read/write lock throughput
// ---------------------------------------------------------------------------------------

pub(crate) fn w5(ctx: &Ctx) -> Res<()> {
    const READERS: usize = 6;
    const WRITERS: usize = 2;
    let clients = ctx.connect_many(READERS + WRITERS)?;
    let r = w5_run(ctx, &clients, READERS);
    close_all(&clients);
    r
}

pub(crate) fn w5_run(ctx: &Ctx, clients: &[Client], readers: usize) -> Res<()> {
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

// ---------------------------------------------------------------------------------------
// W6: many waiters in one process
// ---------------------------------------------------------------------------------------

pub(crate) fn w6(ctx: &Ctx) -> Res<()> {
    const SESSIONS: usize = 50;
    const PER_CLIENT: usize = 20;
    const WAITERS: usize = SESSIONS * PER_CLIENT;
    const FEW: usize = 8;
    const SEGMENTS: usize = 4;
    // What a bare blocked thread of ours costs, for comparison with a waiter.
    let rss_idle_thread = idle_threads_rss(WAITERS)?;
    let threads_before = proc_status("Threads").unwrap_or(0);
    let rss_before = proc_status("VmRSS").unwrap_or(0);
    let clients = ctx.connect_many(SESSIONS)?;
    // Two more: the delete + watch baseline, sampled during each run.
    let pair = ctx.connect_many(2)?;
    let rss_clients = proc_status("VmRSS").unwrap_or(0);
    let baseline = || Some((pair[0].clone(), pair[1].clone()));
    // The 8- and the 1,000-waiter runs alternate in SEGMENTS parts of `n / SEGMENTS`
    // acquisitions each, so both meet the same disk: this box's fsync time drifts by half
    // within a minute, which made one 8-waiter run then one 1,000-waiter run compare two
    // different disks (the ratio of one binary ranged 1.0-1.6 from run to run).
    let per_segment = (ctx.n / SEGMENTS).max(1);
    let warm_up = (3 * ctx.n).max(1);
    let mut segment_ratios = Vec::with_capacity(SEGMENTS);
    let r = (|| -> Res<(Run, Run)> {
        let mut both: Option<(Run, Run)> = None;
        let mut first_queue: Option<Run> = None;
        // Segment 0 is not counted: it warms the server's JIT for this workload's paths (a
        // listing of 1,000 names on every handoff), which the 3 s warm-up at the start of the
        // bench does not reach. Without it, the JVM's compiler threads took a third of the
        // machine's CPU samples during the first counted segments (perf).
        for segment in 0..=SEGMENTS {
            let n = if segment == 0 { warm_up } else { per_segment };
            let run = |sessions: &[Client], threads: usize, label: &str| {
                let path = format!("{}/{label}/lock", ctx.dir);
                run_contention(ctx, sessions, threads, &path, n, CAP, label, baseline())
            };
            // 8 waiters: one thread on each of 8 of the sessions.
            let few = run(&clients[..FEW], FEW, "w6-few")?;
            let many = run(&clients, WAITERS, "w6-many")?;
            if segment == 0 {
                // Its queue-time figures (threads, memory, build time) are kept: the first
                // queue of 1,000 in this process, as before segments.
                first_queue = Some(many);
                continue;
            }
            segment_ratios.push(p50(&mut many.handoffs.clone()) / p50(&mut few.handoffs.clone()));
            match both.as_mut() {
                None => both = Some((few, many)),
                Some((f, m)) => {
                    f.absorb(few);
                    m.absorb(many);
                }
            }
        }
        let (few, mut many) = both.ok_or("W6: no segment ran")?;
        if let Some(q) = first_queue {
            many.threads_queued = q.threads_queued;
            many.rss_queued_kb = q.rss_queued_kb;
            many.bench_threads_queued = q.bench_threads_queued;
            many.queue_build = q.queue_build;
        }
        Ok((few, many))
    })();
    close_all(&clients);
    close_all(&pair);
    let (mut few, mut many) = r?;
    let clients_alive = SESSIONS as u64 + 3; // the baseline's two, and the bench's own client
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
    let (dw_few_n, dw_many_n) = (
        few.delete_watch_in_run.len(),
        many.delete_watch_in_run.len(),
    );
    let dw_few = p50(&mut few.delete_watch_in_run);
    let dw_many = p50(&mut many.delete_watch_in_run);
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
        .cpu_used("acquisition_1000", many.cpu, many.cpu_acquisitions)
        .u("handoffs_8", few.handoffs.len() as u64)
        .b("time_capped_8", few.capped)
        .lat("handoff_8_", &mut few.handoffs)
        .lat("release_8_", &mut few.releases)
        .f("acquisitions_per_s_8", few.per_s)
        .cpu_used("acquisition_8", few.cpu, few.cpu_acquisitions)
        .f("ratio", ratio)
        .s("ratio_target", "<= 1.3")
        .u("segments", SEGMENTS as u64)
        .s(
            "ratio_by_segment",
            &segment_ratios
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(","),
        )
        .b("target_met", ratio <= 1.3)
        .u("delete_watch_in_run_8_n", dw_few_n as u64)
        .f("delete_watch_in_run_8_p50_us", dw_few)
        .u("delete_watch_in_run_1000_n", dw_many_n as u64)
        .f("delete_watch_in_run_1000_p50_us", dw_many)
        .f("server_slowdown", dw_many / dw_few)
        .s(
            "server_slowdown_is",
            "delete_watch_in_run_1000_p50 / delete_watch_in_run_8_p50: the same delete + watch, sampled every 10 ms by two more sessions during each run",
        )
        .f("ratio_in_run_1000", many_p50 / dw_many)
        .f("ratio_in_run_8", few_p50 / dw_few)
        .u("violations", many.violations + few.violations)
        .print();
    if many.violations + few.violations > 0 {
        return Err("W6: mutual-exclusion violations".into());
    }
    Ok(())
}

/// VmRSS growth (kB) per thread while `k` of our threads sit blocked on a channel.
pub(crate) fn idle_threads_rss(k: usize) -> Res<f64> {
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
