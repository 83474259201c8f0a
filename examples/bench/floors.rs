//! F: every single operation alone, each next to its floor in round trips (issue 57's
//! table): run it through `BENCH_RTT` to read the `…_rtt` keys.

use crate::*;

// ---------------------------------------------------------------------------------------
// F: one operation at a time, nobody else in the way
// ---------------------------------------------------------------------------------------

/// Times `op` `n` times, each call alone (`before` runs first, untimed), and prints one line
/// naming the operation and its floor.
fn floor<T>(
    ctx: &Ctx,
    name: &str,
    floor: &str,
    n: usize,
    mut before: impl FnMut(usize) -> Res<()>,
    mut op: impl FnMut(usize) -> Res<T>,
    mut after: impl FnMut(T) -> Res<()>,
) -> Res<()> {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + 20 {
        before(i)?;
        let (d, r) = timed(|| op(i));
        let held = r?;
        after(held)?;
        // The first 20 warm up.
        if i >= 20 {
            samples.push(d);
        }
    }
    Line::new(&format!("F {name}"), &ctx.target)
        .s("what", "one operation alone, nobody else on its path")
        .s("floor_rtt", floor)
        .u("n", n as u64)
        .lat("", &mut samples)
        .print();
    Ok(())
}

pub(crate) fn floors(ctx: &Ctx) -> Res<()> {
    let client = &ctx.client;
    let dir = format!("{}/floors", ctx.dir);
    client.create(&dir, b"", CreateMode::Persistent)?;
    let n = (ctx.n / 2).max(30);
    let none = |_: usize| -> Res<()> { Ok(()) };

    let mutex = Mutex::new(client, &format!("{dir}/mutex"))?;
    let acquire = |_: usize| -> Res<_> {
        mutex
            .acquire_timeout(LOCK_WAIT)?
            .ok_or_else(|| BoxError::from("F: uncontended acquire timed out"))
    };
    // The acquire after a confirmed release (nothing of ours in flight), then released.
    floor(ctx, "mutex acquire", "1", n, none, acquire, |g| {
        g.release().map_err(Into::into)
    })?;
    // The acquire right behind a drop (its delete in flight ahead of the create).
    floor(
        ctx,
        "mutex acquire after a drop",
        "1",
        n,
        none,
        acquire,
        |g| {
            drop(g);
            Ok(())
        },
    )?;
    // release(): the delete's answer awaited.
    let held = PlMutex::new(None);
    floor(
        ctx,
        "mutex release",
        "1",
        n,
        |_| {
            *held.lock() = Some(acquire(0)?);
            Ok(())
        },
        |_| {
            let g = held.lock().take().ok_or("F: no guard")?;
            g.release().map_err(BoxError::from)
        },
        |()| Ok(()),
    )?;
    // Acquire + drop, back to back.
    floor(
        ctx,
        "mutex acquire + drop",
        "1",
        n,
        none,
        |_| {
            drop(acquire(0)?);
            Ok(())
        },
        |()| Ok(()),
    )?;
    // A lock whose directory does not exist yet: the node and its directory in one write.
    floor(
        ctx,
        "new lock first acquire",
        "1",
        n,
        none,
        |i| {
            let lock = Mutex::new(client, &format!("{dir}/new-{i}"))?;
            lock.acquire_timeout(LOCK_WAIT)?
                .ok_or_else(|| BoxError::from("F: first acquire timed out"))
        },
        |g| g.release().map_err(Into::into),
    )?;

    let rw = RwLock::new(client, &format!("{dir}/rw"))?;
    floor(
        ctx,
        "read acquire",
        "1",
        n,
        none,
        |_| {
            rw.read_lock()
                .acquire_timeout(LOCK_WAIT)?
                .ok_or_else(|| BoxError::from("F: read acquire timed out"))
        },
        |g| g.release().map_err(Into::into),
    )?;
    floor(
        ctx,
        "write acquire",
        "1",
        n,
        none,
        |_| {
            rw.write_lock()
                .acquire_timeout(LOCK_WAIT)?
                .ok_or_else(|| BoxError::from("F: write acquire timed out"))
        },
        |g| g.release().map_err(Into::into),
    )?;

    let sem = Semaphore::new(client, &format!("{dir}/sem"), 3)?;
    floor(
        ctx,
        "semaphore acquire",
        "<= 2",
        n,
        none,
        |_| {
            sem.acquire_timeout(LOCK_WAIT)?
                .ok_or_else(|| BoxError::from("F: permit timed out"))
        },
        |g| g.release().map_err(Into::into),
    )?;

    let election = LeaderElection::new(client, &format!("{dir}/election"), "floors")?;
    floor(
        ctx,
        "election win",
        "1",
        n,
        none,
        |_| {
            election
                .lead_timeout(LOCK_WAIT)?
                .ok_or_else(|| BoxError::from("F: election timed out"))
        },
        |l| l.resign().map_err(Into::into),
    )?;
    handoffs(ctx, &dir, n)
}

/// The two handoffs, each between two sessions: a `Mutex` released while another session
/// waits in `acquire`, and a leader's resign while another candidate waits in `lead`; from
/// just before the release (the resign) to the waiter's call returning. Its floor is one
/// round trip: the delete reaching the server, the notification reaching the waiter.
fn handoffs(ctx: &Ctx, dir: &str, n: usize) -> Res<()> {
    let clients = ctx.connect_many(2)?;
    let (a, b) = (&clients[0], &clients[1]);
    let lock_path = format!("{dir}/handoff");
    let election_path = format!("{dir}/handoff-election");
    let (la, lb) = (Mutex::new(a, &lock_path)?, Mutex::new(b, &lock_path)?);
    let (ea, eb) = (
        LeaderElection::new(a, &election_path, "a")?,
        LeaderElection::new(b, &election_path, "b")?,
    );
    let r = (|| -> Res<()> {
        let mut lock = Vec::with_capacity(n);
        let mut leader = Vec::with_capacity(n);
        for i in 0..n + 20 {
            let held = la.acquire()?;
            let d = handoff(a, &lock_path, || lb.acquire().map(drop), || held.release())?;
            let led = ea.lead()?;
            let e = handoff(a, &election_path, || eb.lead().map(drop), || led.resign())?;
            if i >= 20 {
                lock.push(d);
                leader.push(e);
            }
        }
        for (name, samples) in [("mutex handoff", &mut lock), ("leader change", &mut leader)] {
            Line::new(&format!("F {name}"), &ctx.target)
                .s("what", "release (resign) until another session's blocked acquire (lead) returns, two sessions")
                .s("floor_rtt", "1")
                .u("n", n as u64)
                .lat("", samples)
                .print();
        }
        Ok(())
    })();
    close_all(&clients);
    r
}

/// Starts `take` on a thread, waits until its node is queued in `dir` behind the holder's
/// (two nodes listed) and its watch armed (three round trips more: it is armed within one
/// of the listing), then times `give` until `take` returns.
fn handoff(
    watcher: &Client,
    dir: &str,
    take: impl FnOnce() -> zkguard::Result<()> + Send,
    give: impl FnOnce() -> zkguard::Result<()>,
) -> Res<Duration> {
    std::thread::scope(|s| -> Res<Duration> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let t = s.spawn(move || {
            let r = take();
            let _ = tx.send(Instant::now());
            r
        });
        let queued = Instant::now() + STEP_WAIT;
        while watcher.get_children(dir)?.0.len() < 2 {
            if Instant::now() > queued {
                return Err("F: the waiter never queued".into());
            }
        }
        let rtt = rtt_us().unwrap_or(0.0);
        std::thread::sleep(Duration::from_secs_f64((3.0 * rtt * 1e-6).max(0.002)));
        let start = Instant::now();
        give()?;
        let end = rx.recv_timeout(LOCK_WAIT)?;
        t.join().map_err(|_| "F: the waiter panicked")??;
        Ok(end - start)
    })
}
