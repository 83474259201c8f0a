//! `ops` (single requests) and W1 (the uncontended lock cycle).

use crate::*;

// ---------------------------------------------------------------------------------------
// ops: single requests
// ---------------------------------------------------------------------------------------

pub(crate) fn ops(ctx: &Ctx) -> Res<()> {
    let (client, dir, n, target) = (&ctx.client, &ctx.dir, ctx.n, &ctx.target);
    // Warm up the JIT of the server and our code paths.
    for i in 0..200 {
        let p = format!("{dir}/warm-{i}");
        client.create(&p, b"", CreateMode::Ephemeral)?;
        client.exists(&p)?;
        client.delete(&p, None)?;
    }

    let (mut create, mut children, mut exists, mut delete) = (vec![], vec![], vec![], vec![]);
    let cpu = Cpu::now();
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
    Line::new("ops client cpu per request", target)
        .s(
            "what",
            "create, get_children, exists, delete in turn, one thread",
        )
        .u("requests", 4 * n as u64)
        .cpu("request", cpu, 4 * n)
        .print();
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

pub(crate) fn w1(ctx: &Ctx) -> Res<()> {
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
    // The cycle a program dropping its guard makes: the drop writes the delete and
    // returns, so the next acquire goes out behind it (docs/semantics.md, "What a returned
    // drop means").
    let drop_cycle = || -> Res<()> {
        let g = lock
            .acquire_timeout(LOCK_WAIT)?
            .ok_or("W1: uncontended acquire timed out")?;
        drop(g);
        Ok(())
    };
    let plain_cycle = || -> Res<()> {
        let c = client.create(&plain_prefix, b"", CreateMode::EphemeralSequential)?;
        client.delete(&c.path, None)?;
        Ok(())
    };
    // What the lock sends, without the lock: create + listing in one write, then (with
    // `own_watch`, as the guard does) a data read with a watch on our node, written and not
    // waited for, then delete.
    let by_hand = |own_watch: bool| -> Res<()> {
        let (c, l) = client.pipeline(|p| {
            (
                p.create(&plain_prefix, b"", CreateMode::EphemeralSequential),
                p.get_children(&plain_dir),
            )
        });
        let c = c.wait()?;
        l.wait()?;
        let _watch = own_watch.then(|| client.pipeline(|p| p.get_data_w(&c.path)));
        client.delete(&c.path, None)?;
        Ok(())
    };
    let wire_cycle = || by_hand(false);
    let same_cycle = || by_hand(true);
    if profiling() {
        // Lock cycles only, so that two runs' difference is lock cycles alone.
        for _ in 0..200 {
            lock_cycle()?;
        }
        let cpu = Cpu::now();
        for _ in 0..ctx.n {
            lock_cycle()?;
        }
        Line::new("W1", &ctx.target)
            .s("what", "BENCH_PROFILE: lock cycles only")
            .u("n", ctx.n as u64)
            .cpu("cycle", cpu, ctx.n)
            .print();
        return Ok(());
    }
    for _ in 0..200 {
        lock_cycle()?;
        plain_cycle()?;
        wire_cycle()?;
        same_cycle()?;
    }
    // The client CPU of a lock cycle: a block of cycles alone (the interleaved ones below
    // would mix in the plain and by-hand cycles' CPU).
    let cpu = Cpu::now();
    for _ in 0..ctx.n {
        lock_cycle()?;
    }
    let cpu = cpu.since();
    let mut locks = Vec::with_capacity(ctx.n);
    let (mut acquires, mut releases) = (Vec::with_capacity(ctx.n), Vec::with_capacity(ctx.n));
    let (mut plains, mut wires) = (Vec::with_capacity(ctx.n), Vec::with_capacity(ctx.n));
    let mut sames = Vec::with_capacity(ctx.n);
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
        let (d, r) = timed(same_cycle);
        r?;
        sames.push(d);
    }
    // Drop cycles back to back, each timed (the steady state of a loop that drops its
    // guard), and their client CPU.
    let drop_cpu = Cpu::now();
    let mut drops = Vec::with_capacity(ctx.n);
    for _ in 0..ctx.n {
        let (d, r) = timed(drop_cycle);
        r?;
        drops.push(d);
    }
    let drop_cpu = drop_cpu.since();
    let lock_total: f64 = locks.iter().map(Duration::as_secs_f64).sum();
    let plain_p50 = p50(&mut plains);
    let wire_p50 = p50(&mut wires);
    let same_p50 = p50(&mut sames);
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
        .f("ratio_to_create_list_delete", lock_p50 / wire_p50)
        .lat("same_requests_", &mut sames)
        .f("ratio_to_same_requests", lock_p50 / same_p50)
        .s(
            "ratio_to_same_requests_is",
            "lock cycle p50 / the lock's four requests by hand (create + listing pipelined, the own-node watch written and not waited for, delete); before f9d069f this key was against the first three only (now ratio_to_create_list_delete)",
        )
        .cpu_used("cycle", cpu, ctx.n)
        .lat("drop_cycle_", &mut drops)
        .cpu_used("drop_cycle", drop_cpu, ctx.n)
        .print();
    Ok(())
}
