//! `W13`: what the co-tenant check costs. A lock whose ACL keeps others out reads its
//! directory's ACL behind its first create there (one more request in the same write, no
//! round trip), and its own node's ACL once per client (who it is); later acquires compare
//! the listing's stat with the one judged and send nothing more. Measured:
//! `Mutex` acquire + release with `NodeAcl::creator()` (a client logged in with a digest
//! identity) against the same with the open ACL (a client without one), and with the
//! creator's entry plus a world WRITE entry (an ACL the check skips: what the ACL alone
//! costs), interleaved, on the bench's server; and the requests each acquire sends.

use crate::*;
use report::Line;
use zkguard::NodeAcl;

pub(crate) fn w13(ctx: &Ctx) -> Res<()> {
    let open = Client::connect(&ctx.connect)?;
    let alice = Client::builder(&ctx.connect)
        .auth("digest", b"bench:bench-pw")
        .build()?;
    let open_lock = Mutex::new(&open, &format!("{}/w13-open", ctx.dir))?;
    let creator_dir = format!("{}/w13-creator", ctx.dir);
    let creator_lock = Mutex::new(&alice, &creator_dir)?.with_acl(NodeAcl::creator())?;
    // The creator's ACL without the check (the world may write data, so the ACL does not
    // keep others out and nothing is checked): what the ACL itself costs the server.
    let mut unchecked_acl = zkguard::Acl::creator_all();
    unchecked_acl.push(zkguard::Acl::new(zkguard::Perms::WRITE, "world", "anyone"));
    let unchecked_dir = format!("{}/w13-unchecked", ctx.dir);
    let unchecked_lock =
        Mutex::new(&alice, &unchecked_dir)?.with_acl(NodeAcl::custom(unchecked_acl)?)?;
    let cycle = |lock: &Mutex| -> Res<(Duration, Duration)> {
        let t = Instant::now();
        let g = lock
            .acquire_timeout(LOCK_WAIT)?
            .ok_or("W13: uncontended acquire timed out")?;
        let acquired = t.elapsed();
        let t = Instant::now();
        g.release()?;
        Ok((acquired, t.elapsed()))
    };
    // Requests of one acquire (the first, with the identity read, apart).
    let requests = |c: &Client, lock: &Mutex| -> Res<u64> {
        let before = c.stats().requests;
        let g = lock.try_acquire()?.ok_or("W13: try_acquire refused")?;
        let sent = c.stats().requests - before;
        g.release()?;
        Ok(sent)
    };
    let first_creator = requests(&alice, &creator_lock)?;
    for _ in 0..200 {
        cycle(&open_lock)?;
        cycle(&creator_lock)?;
        cycle(&unchecked_lock)?;
    }
    let (open_req, creator_req) = (
        requests(&open, &open_lock)?,
        requests(&alice, &creator_lock)?,
    );
    let (mut oa, mut orl, mut ca, mut crl) = (vec![], vec![], vec![], vec![]);
    let mut ua = vec![];
    for _ in 0..ctx.n {
        let (a, r) = cycle(&open_lock)?;
        oa.push(a);
        orl.push(r);
        let (a, r) = cycle(&creator_lock)?;
        ca.push(a);
        crl.push(r);
        ua.push(cycle(&unchecked_lock)?.0);
    }
    // The bench's clean-up lists everything as a client without the identity.
    for dir in [&creator_dir, &unchecked_dir] {
        let _ = alice.delete(dir, None);
    }
    let ratio = p50(&mut ca) / p50(&mut oa);
    Line::new("W13", &ctx.target)
        .s(
            "what",
            "Mutex acquire with NodeAcl::creator() (directory ACL checked) vs open, interleaved",
        )
        .u("n", ctx.n as u64)
        .lat("open_acquire_", &mut oa)
        .lat("creator_acquire_", &mut ca)
        .f("acquire_ratio_p50", ratio)
        .lat("creator_acl_unchecked_acquire_", &mut ua)
        .lat("open_release_", &mut orl)
        .lat("creator_release_", &mut crl)
        .u("open_acquire_requests", open_req)
        .u("creator_acquire_requests", creator_req)
        .u("creator_first_acquire_requests", first_creator)
        .print();
    Ok(())
}
