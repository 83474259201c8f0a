//! W7: the semaphore, holders releasing in random order.

use crate::*;

// ---------------------------------------------------------------------------------------
// W7: semaphore, holders releasing in random order
// ---------------------------------------------------------------------------------------

/// Who holds a permit and who waits in `acquire`, and how long a permit sat free while
/// someone waited.
pub(crate) struct PermitBook {
    pub(crate) permits: usize,
    pub(crate) holders: usize,
    pub(crate) waiting: usize,
    pub(crate) since: Instant,
    pub(crate) idle: Duration,
    pub(crate) violations: u64,
}

impl PermitBook {
    /// Applies a change (holders and waiters counted after it), adding the time since the
    /// last change to `idle` if a permit was free while someone waited.
    pub(crate) fn change(&mut self, holders: isize, waiting: isize) {
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
pub(crate) fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

pub(crate) fn w7(ctx: &Ctx) -> Res<()> {
    const PERMITS: u32 = 3;
    const SESSIONS: usize = 8;
    w7_uncontended(ctx, PERMITS)?;
    let clients = ctx.connect_many(SESSIONS)?;
    let r = w7_run(ctx, &clients, PERMITS);
    close_all(&clients);
    r
}

/// An uncontended acquire against the round trip it is made of: a create and a listing
/// pipelined (the bound: two of those).
pub(crate) fn w7_uncontended(ctx: &Ctx, permits: u32) -> Res<()> {
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

pub(crate) fn w7_run(ctx: &Ctx, clients: &[Client], permits: u32) -> Res<()> {
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
