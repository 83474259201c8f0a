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
    Ok(())
}
