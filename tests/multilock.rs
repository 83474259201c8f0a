//! The `MultiLock` against a real ZooKeeper server: over mixed exclusive locks, its token
//! and revocation, a part lost while it waits for the next (deleted, session expired, cut
//! off), no deadlock over the same paths in opposite orders, all or nothing when it cannot
//! get every lock.

mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::partition::partition;
use common::{
    base, children, connect, expect_children, recv, shared_cluster, spawn, unique, wait_children,
    wait_until, WITHIN,
};
use zkguard::{Client, Error, Guard, MultiLock, Mutex, ReentrantMutex, RwLock, UnfairMutex};

const SESSION: Duration = Duration::from_secs(10);

/// Waits until `dir` has no children (a failed acquire's node may go in the background).
fn wait_empty(client: &Client, dir: &str) {
    wait_until(WITHIN, &format!("{dir} empty"), || {
        children(client, dir).is_empty()
    });
}

#[test]
fn a_multilock_over_mixed_locks_excludes_a_plain_mutex_on_each_path() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let root = unique("lock-api-multi");
    let (pm, pr, pw) = (
        format!("{root}/m"),
        format!("{root}/r"),
        format!("{root}/w"),
    );
    let reentrant = ReentrantMutex::new(&x, &pr).unwrap();
    let rw = RwLock::new(&x, &pw).unwrap();
    // Given out of order: taken in path order.
    let multi = MultiLock::of(rw.write_lock().clone())
        .and(Mutex::new(&x, &pm).unwrap())
        .and(reentrant.clone());
    assert_eq!(multi.paths(), vec![&pm[..], &pr[..], &pw[..]]);
    assert_eq!(multi.path(), format!("{pm},{pr},{pw}"));

    let g = multi.acquire().unwrap();
    assert_eq!(g.guards().len(), 3);
    assert_eq!(g.paths().len(), 3);
    for (node, dir) in g.paths().iter().zip([&pm, &pr, &pw]) {
        assert!(node.starts_with(&format!("{dir}/")), "{node} not in {dir}");
    }
    assert!(g.is_valid());
    g.confirm().unwrap();

    // The thread that took the multi-lock holds the ReentrantMutex: it may take it again.
    let inner = reentrant.try_acquire().unwrap().expect("re-entered");
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(inner.path(), g.paths()[1]);
    drop(inner);

    // A plain Mutex on each path, in another session, is kept out while the multi holds...
    let plain: Vec<Mutex> = [&pm, &pr, &pw]
        .iter()
        .map(|p| Mutex::new(&y, p).unwrap())
        .collect();
    for m in &plain {
        assert!(
            m.try_acquire().unwrap().is_none(),
            "{} taken beside the multi-lock",
            m.path()
        );
    }
    let waiting: Vec<_> = plain
        .iter()
        .map(|m| {
            let m = m.clone();
            spawn(move || m.acquire().map(|g| g.release()))
        })
        .collect();
    for m in &plain {
        wait_until(WITHIN, &format!("a waiter queued on {}", m.path()), || {
            m.participants().unwrap().len() == 2
        });
    }
    for w in &waiting {
        assert!(w.try_recv().is_err(), "a plain mutex got a held path");
    }
    // ... and gets each path once it lets go.
    g.release().unwrap();
    for (w, m) in waiting.iter().zip(&plain) {
        let released = recv(w, WITHIN, &format!("{} after the multi-lock", m.path()));
        released.unwrap().unwrap();
    }
    for p in [&pm, &pr, &pw] {
        wait_empty(&x, p);
    }
    assert!(!reentrant.is_held_by_current_thread());

    // One canceller cancels the multi-lock's acquire whichever lock it waits for: here the
    // RwLock's write side, the last one. The locks taken before it are given back.
    let holder = Mutex::new(&y, &pw).unwrap().acquire().unwrap();
    let blocked = {
        let multi = multi.clone();
        spawn(move || multi.acquire().map(|g| g.tokens()))
    };
    wait_until(WITHIN, "the multi-lock queued on the write lock", || {
        rw.participants().unwrap().len() == 2
    });
    multi.canceller().cancel();
    match recv(&blocked, WITHIN, "cancelled multi-lock") {
        // Named after the lock it was waiting for.
        Err(Error::Cancelled { path }) => assert_eq!(path, pw),
        other => panic!("expected Cancelled, got {other:?}"),
    }
    wait_empty(&x, &pm);
    wait_empty(&x, &pr);
    assert_eq!(
        children(&x, &pw),
        vec![holder.path().rsplit('/').next().unwrap()]
    );
    drop(holder);
    wait_empty(&x, &pw);
}

#[test]
fn multilock_token_is_the_largest_of_its_locks_and_rises_for_a_later_holder() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let root = unique("lock-api-token");
    let (pa, pz) = (format!("{root}/a"), format!("{root}/z"));
    // The lock taken last in path order (z) is held by this thread already, with an older
    // node: the largest token is the first lock's, not the last one's.
    let z = ReentrantMutex::new(&x, &pz).unwrap();
    let outer = z.acquire().unwrap();
    let multi = MultiLock::of(z.clone()).and(Mutex::new(&x, &pa).unwrap());
    let g = multi.acquire().unwrap();
    let tokens = g.tokens();
    assert_eq!(tokens.len(), 2);
    assert_eq!(
        tokens[1],
        outer.token(),
        "the re-entered level keeps its token"
    );
    assert!(tokens[0] > tokens[1], "{tokens:?}");
    assert_eq!(g.token(), *tokens.iter().max().unwrap());
    assert_eq!(Guard::token(&g), g.token());

    // A later holder of the same locks, in another session: every one of its tokens, hence
    // its largest, is above every one of ours.
    let later = MultiLock::new(&y, &[&pa, &pz]).unwrap();
    let waiting = {
        let later = later.clone();
        spawn(move || later.acquire().map(|g| (g.token(), g.tokens())))
    };
    wait_until(WITHIN, "the later multi-lock queued", || {
        Mutex::new(&y, &pa).unwrap().participants().unwrap().len() == 2
    });
    let ours = g.token();
    drop(g);
    drop(outer);
    let (theirs, their_tokens) = recv(&waiting, WITHIN, "the later holder").unwrap();
    assert!(theirs > ours, "later token {theirs} not above {ours}");
    assert!(
        their_tokens.iter().all(|t| tokens.iter().all(|o| t > o)),
        "later tokens {their_tokens:?} not all above ours {tokens:?}"
    );
    wait_empty(&x, &pa);
    wait_empty(&x, &pz);
}

#[test]
fn multilock_revocation_fires_when_any_of_its_locks_is_asked_to_let_go() {
    let cs = shared_cluster().connect_string();
    let (x, other) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let root = unique("lock-api-revoke");
    let rw = RwLock::new(&x, &format!("{root}/w")).unwrap();
    let multi = MultiLock::of(Mutex::new(&x, &format!("{root}/m")).unwrap())
        .and(ReentrantMutex::new(&x, &format!("{root}/r")).unwrap())
        .and(rw.write_lock().clone());
    let g = multi.acquire().unwrap();
    let nodes: Vec<String> = g.paths().iter().map(|p| p.to_string()).collect();
    let revoked = g.revocation();
    let lost = g.lost();
    // The guards' watches are armed without waiting; a round trip on the same session
    // makes sure the server has them before the revoke comes from another session.
    for n in &nodes {
        x.sync(n).unwrap();
    }
    assert!(revoked.try_recv().is_err(), "revoked before anyone asked");

    // The middle lock (the ReentrantMutex) is asked to let go.
    zkguard::revoke(&other, &nodes[1]).unwrap();
    recv(&revoked, WITHIN, "the multi-lock's revocation request");
    // A request is not a loss.
    assert!(g.is_valid());
    assert!(
        lost.try_recv().is_err(),
        "a revocation request counted as a loss"
    );
    // The same request through that lock's own guard.
    recv(
        &g.guards()[1].revocation(),
        WITHIN,
        "the reentrant part's revocation",
    );

    // A receiver taken after a request to another lock hears it too.
    let h =
        MultiLock::of(Mutex::new(&x, &format!("{root}/n")).unwrap()).and(rw.write_lock().clone());
    drop(g);
    let g = h.acquire().unwrap();
    let last = g.paths()[1].to_string();
    zkguard::revoke(&other, &last).unwrap();
    recv(
        &g.revocation(),
        WITHIN,
        "an earlier request to the write lock",
    );

    // Deleting one lock's node is a loss of the whole.
    let lost = g.lost();
    other.delete(&last, None).unwrap();
    recv(&lost, WITHIN, "the multi-lock's loss");
    assert!(!g.is_valid());
    drop(g);
}

#[test]
fn a_multilock_over_two_clients_is_lost_when_one_is_cut_off_before_anyone_else_gets_its_lock() {
    // The locks of one MultiLock may live on different sessions. Cutting one session off
    // must turn the whole guard invalid at once and report it lost before the server lets
    // another session take that session's lock.
    let cluster = shared_cluster();
    let proxy = zkguard::testing::FaultProxy::for_cluster(cluster).unwrap();
    let t = Duration::from_secs(3);
    let a = connect(&cluster.connect_string(), SESSION);
    let b = connect(&proxy.connect_string(), t);
    let other = connect(&cluster.connect_string(), SESSION);
    let (pa, pb) = (unique("multi-two-a"), unique("multi-two-b"));
    let multi = MultiLock::of(Mutex::new(&a, &pa).unwrap()).and(UnfairMutex::new(&b, &pb).unwrap());
    let g = multi.acquire().unwrap();
    assert!(g.is_valid());
    let lost = g.lost();

    proxy.blackhole();
    let cut = Instant::now();
    // The contender on the cut-off session's path gets it once the server expires that
    // session; the moment its acquire returns, it looks whether our lost() had fired (an
    // order, not two instants stamped by threads that a loaded machine may wake late).
    let contender = {
        let pb = pb.clone();
        let lost_seen = g.lost();
        spawn(move || {
            let guard = UnfairMutex::new(&other, &pb).unwrap().acquire().unwrap();
            (lost_seen.try_recv().is_ok(), guard)
        })
    };
    // The promise: invalid once the silence is noticed, two thirds of the timeout (2 s);
    // the last third is slack for the threads on a loaded machine. Timing-sensitive.
    wait_until(t, "the guard invalid after the cut", || !g.is_valid());
    let invalid_after = cut.elapsed();
    recv(&lost, WITHIN, "the multi-lock's loss");
    let (lost_first, _theirs) = recv(&contender, WITHIN, "the contender's acquire");
    assert!(
        lost_first,
        "the other session took the lock before our lost() fired"
    );
    assert!(invalid_after < t, "invalid only after {invalid_after:?}");
    // The lock on the healthy session is still held by its own guard, and is released with
    // the multi-lock.
    let nodes: Vec<_> = g.guards().iter().map(|x| x.is_valid()).collect();
    assert_eq!(nodes.iter().filter(|v| **v).count(), 1, "{nodes:?}");
    drop(g);
    wait_empty(&a, &pa);
    proxy.heal();
}

/// The multi-lock's token fences holders of the same set of locks, even a later holder
/// that queued on the first lock before we had made our node on the second: not every one
/// of its tokens is above ours, but its largest is (it makes its node on the second lock
/// only once it holds the first, after our release). A holder of the first lock alone
/// that queued in that window holds after us with a token below our largest: its token
/// compares with our token for that lock (`tokens()`), not with the multi-lock's.
#[test]
fn multilock_token_rises_for_a_later_holder_of_the_set_that_queued_before_our_last_node() {
    let cs = shared_cluster().connect_string();
    let [a, c, d, e] = [(); 4].map(|_| connect(&cs, SESSION));
    let root = unique("lock-api-token-window");
    let (px, py) = (format!("{root}/a"), format!("{root}/b"));
    // d holds y, an unfair lock: a node only while held. Our multi-lock takes x, then
    // waits for y with no node made there yet.
    let dy = UnfairMutex::new(&d, &py).unwrap().acquire().unwrap();
    let set = |c: &Client| {
        MultiLock::of(Mutex::new(c, &px).unwrap()).and(UnfairMutex::new(c, &py).unwrap())
    };
    let queued = |n: usize| {
        let x = Mutex::new(&d, &px).unwrap();
        wait_until(WITHIN, &format!("{n} on x"), || {
            x.participants().unwrap().len() == n
        });
        x.participants().unwrap()
    };
    let ours = set(&a);
    // The guard stays on its thread (it is not `Send`) until `let_go` says.
    let (let_go, go_rx) = crossbeam_channel::bounded::<()>(1);
    let ours_rx = spawn(move || {
        ours.acquire().map(|g| {
            let held = (g.token(), g.tokens());
            let _ = go_rx.recv();
            drop(g);
            held
        })
    });
    queued(1);
    // In that window: another holder of the same set, then one of x alone, queue on x.
    let theirs = set(&c);
    let theirs_rx = spawn(move || theirs.acquire().map(|g| (g.token(), g.tokens())));
    queued(2);
    let alone = Mutex::new(&e, &px).unwrap();
    let alone_rx = spawn(move || alone.acquire().map(|g| g.token()));
    let nodes = queued(3);
    let czxid = |n: &str| {
        d.exists(&format!("{px}/{n}"))
            .unwrap()
            .expect("a queued node")
            .czxid as u64
    };
    let (their_x, alone_x) = (czxid(&nodes[1].node), czxid(&nodes[2].node));

    drop(dy);
    // Ours holds both (theirs and the lone one cannot get x): the guard's tokens come
    // back when it lets go.
    wait_until(WITHIN, "our node on y", || d.exists(&py).unwrap().is_some());
    let_go.send(()).unwrap();
    let (token, tokens) = recv(&ours_rx, WITHIN, "our multi-lock").unwrap();
    assert!(
        tokens[1] > their_x && tokens[1] > alone_x,
        "our node on y ({tokens:?}) was not made after theirs on x ({their_x}, {alone_x})"
    );
    assert_eq!(token, tokens[1]);

    let (their_token, their_tokens) = recv(&theirs_rx, WITHIN, "their multi-lock").unwrap();
    assert_eq!(their_tokens[0], their_x);
    assert!(
        their_tokens[0] < token,
        "the window did not happen: {their_tokens:?} vs {token}"
    );
    assert!(
        their_token > token,
        "a later holder of the same set has token {their_token}, not above ours {token}"
    );
    // x alone: above our token for x, below our largest.
    let alone_token = recv(&alone_rx, WITHIN, "x alone").unwrap();
    assert_eq!(alone_token, alone_x);
    assert!(alone_token > tokens[0] && alone_token > their_tokens[0]);
    assert!(alone_token < token);
    wait_empty(&a, &px);
}

/// What a multi-lock's acquire got: whether the guard was valid, whole and part by part.
type Seen = crossbeam_channel::Receiver<zkguard::Result<(bool, Vec<bool>)>>;

/// A multi-lock's acquire on its own thread (its guard is not `Send`): the thread reports
/// whether the guard it got is valid, part by part, then waits for `let_go` before it
/// releases.
fn multi_on_a_thread(multi: MultiLock) -> (Seen, crossbeam_channel::Sender<()>) {
    let (let_go, go_rx) = crossbeam_channel::bounded::<()>(1);
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || match multi.acquire() {
        Ok(g) => {
            let seen = (
                g.is_valid(),
                g.guards().iter().map(|p| p.is_valid()).collect(),
            );
            let _ = tx.send(Ok(seen));
            let _ = go_rx.recv();
            drop(g);
        }
        Err(e) => {
            let _ = tx.send(Err(e));
        }
    });
    (rx, let_go)
}

/// A multi-lock holds `a` and waits for `b`; meanwhile another client deletes its node on
/// `a` and a third takes `a`. When `b` frees up the acquire must not return (before, it
/// returned `Ok` with a guard whose `a` part was lost while the third client held `a`): it
/// lets `b` go, queues on `a` again, and gets both, valid, once the third lets go.
#[test]
fn a_multilock_whose_first_lock_is_deleted_while_it_waits_for_the_next_starts_over() {
    let cs = shared_cluster().connect_string();
    let [h, w, c] = [(); 3].map(|_| connect(&cs, SESSION));
    let root = unique("lock-api-multi-part-lost");
    let (pa, pb) = (format!("{root}/a"), format!("{root}/b"));
    let hb = Mutex::new(&h, &pb).unwrap().acquire().unwrap();
    let multi = MultiLock::new(&w, &[&pa, &pb]).unwrap();
    let (got, let_go) = multi_on_a_thread(multi);
    wait_until(WITHIN, "the multi-lock holds a and waits for b", || {
        children(&h, &pa).len() == 1 && children(&h, &pb).len() == 2
    });
    h.delete(&format!("{pa}/{}", children(&h, &pa)[0]), None)
        .unwrap();
    let ca = Mutex::new(&c, &pa).unwrap().acquire().unwrap();
    hb.release().unwrap();
    // It lets b go and queues behind c on a.
    wait_until(WITHIN, "the multi-lock queued on a again", || {
        children(&h, &pa).len() == 2 && children(&h, &pb).is_empty()
    });
    common::assert_quiet(&got, "the multi-lock returned while another client holds a");
    assert!(ca.is_valid());
    ca.release().unwrap();
    let (valid, parts) = recv(&got, WITHIN, "the multi-lock").unwrap();
    assert!(valid && parts == [true, true], "{valid} {parts:?}");
    let_go.send(()).unwrap();
    wait_empty(&h, &pa);
    wait_empty(&h, &pb);
}

/// The same when the multi-lock's session expires while it waits for `b` (a partition):
/// another client takes `a` from the expired session; after the partition heals the
/// multi-lock must not return until it holds `a` again in its new session.
#[test]
fn a_multilock_whose_session_expires_while_it_waits_for_the_next_lock_starts_over() {
    let (cluster, proxy) = partition(1);
    let h = connect(&cluster.connect_string(), SESSION);
    let w = connect(&proxy.connect_string(), Duration::from_secs(2));
    let c = connect(&cluster.connect_string(), SESSION);
    let (pa, pb) = (unique("lock-api-expire-a"), unique("lock-api-expire-b"));
    let hb = Mutex::new(&h, &pb).unwrap().acquire().unwrap();
    let multi = MultiLock::new(&w, &[&pa, &pb]).unwrap();
    let (got, let_go) = multi_on_a_thread(multi);
    wait_until(WITHIN, "the multi-lock holds a and waits for b", || {
        children(&h, &pa).len() == 1 && children(&h, &pb).len() == 2
    });
    let events = w.events();
    proxy.blackhole();
    common::wait_event(&events, WITHIN, "the session lost", |e| {
        matches!(e, zkguard::SessionEvent::Lost { .. })
    });
    wait_until(WITHIN, "the expired session's nodes gone", || {
        children(&h, &pa).is_empty() && children(&h, &pb).len() == 1
    });
    let ca = Mutex::new(&c, &pa).unwrap().acquire().unwrap();
    proxy.heal();
    // In its new session the multi-lock queues on b again (it still believes in a), gets
    // b, finds a lost, lets b go and queues on a behind c.
    hb.release().unwrap();
    wait_until(WITHIN, "the multi-lock queued on a behind c", || {
        children(&h, &pa).len() == 2 && children(&h, &pb).is_empty()
    });
    common::assert_quiet(&got, "the multi-lock returned while another client holds a");
    ca.release().unwrap();
    let (valid, parts) = recv(&got, WITHIN, "the multi-lock").unwrap();
    assert!(valid && parts == [true, true], "{valid} {parts:?}");
    let_go.send(()).unwrap();
}

// ---------------------------------------------------------------------------------------
// 6. MultiLock
// ---------------------------------------------------------------------------------------

#[test]
fn multilocks_over_the_same_paths_in_opposite_orders_do_not_deadlock() {
    let cs = shared_cluster().connect_string();
    let root = unique("multi");
    let (pa, pb) = (format!("{root}/a"), format!("{root}/b"));
    let holders = Arc::new(AtomicI64::new(0));
    let workers: Vec<_> = [[pa.clone(), pb.clone()], [pb.clone(), pa.clone()]]
        .into_iter()
        .map(|paths| {
            let (cs, holders) = (cs.clone(), holders.clone());
            spawn(move || {
                let client = connect(&cs, SESSION);
                let lock = MultiLock::new(&client, &[&paths[0], &paths[1]]).unwrap();
                let mut sorted = paths.clone();
                sorted.sort();
                assert_eq!(lock.paths(), vec![&sorted[0], &sorted[1]]);
                for _ in 0..30 {
                    let g = lock.acquire().unwrap();
                    assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    assert!(g.is_valid());
                    assert_eq!(g.tokens().len(), 2);
                    assert_eq!(g.guards().len(), 2);
                    assert!(g.paths()[0].starts_with(&format!("{}/", sorted[0])));
                    assert!(g.paths()[1].starts_with(&format!("{}/", sorted[1])));
                    holders.fetch_sub(1, Ordering::SeqCst);
                    g.release().unwrap();
                }
            })
        })
        .collect();
    for w in &workers {
        recv(
            w,
            Duration::from_secs(45),
            "multi-lock worker done (deadlock?)",
        );
    }
    let client = connect(&cs, SESSION);
    wait_children(&client, &pa, &[]);
    wait_children(&client, &pb, &[]);
}

#[test]
fn multilock_that_cannot_get_every_lock_holds_none() {
    let cs = shared_cluster().connect_string();
    let root = unique("multi");
    let (pa, pb) = (format!("{root}/a"), format!("{root}/b"));
    let x = connect(&cs, SESSION);
    let y = connect(&cs, SESSION);
    // Hold the second lock in canonical order, so the first is taken and must be given back.
    let held = Mutex::new(&x, &pb).unwrap().acquire().unwrap();
    let held_node = vec![base(held.path())];
    let multi = MultiLock::new(&y, &[&pb, &pa]).unwrap();
    assert_eq!(multi.paths(), vec![pa.as_str(), pb.as_str()]);
    let dup = MultiLock::new(&y, &[&pa, &pa]).unwrap();
    assert_eq!(dup.paths(), vec![pa.as_str()], "duplicates are taken once");

    assert!(multi.try_acquire().unwrap().is_none());
    expect_children(&x, &pa, &[], &format!("try left a node in {pa}"));
    expect_children(&x, &pb, &held_node, &format!("try left a node in {pb}"));

    let t0 = Instant::now();
    let r = multi.acquire_timeout(Duration::from_millis(700)).unwrap();
    assert!(r.is_none(), "acquired while {pb} is held");
    assert!(t0.elapsed() >= Duration::from_millis(700), "gave up early");
    expect_children(&x, &pa, &[], &format!("timeout left a node in {pa}"));
    expect_children(&x, &pb, &held_node, &format!("timeout left a node in {pb}"));
    // The first lock was given back: a plain Mutex gets it at once.
    let a_free = Mutex::new(&x, &pa).unwrap().try_acquire().unwrap();
    assert!(a_free.is_some(), "{pa} still taken");
    drop(a_free);

    // Cancel while blocked on the second lock: nothing held, nothing left.
    let blocked = {
        let multi = multi.clone();
        spawn(move || multi.acquire().map(|g| g.tokens()))
    };
    let mutex_b = Mutex::new(&x, &pb).unwrap();
    wait_until(WITHIN, "the multi-lock queued on the second lock", || {
        mutex_b.participants().unwrap().len() == 2
    });
    multi.canceller().cancel();
    match recv(&blocked, WITHIN, "cancelled multi-lock") {
        Err(Error::Cancelled { .. }) => {}
        other => panic!("expected Cancelled, got {other:?}"),
    }
    expect_children(&x, &pa, &[], &format!("cancel left a node in {pa}"));
    expect_children(&x, &pb, &held_node, &format!("cancel left a node in {pb}"));

    // Once the holder lets go, the multi-lock gets both.
    drop(held);
    let g = multi
        .acquire_timeout(WITHIN)
        .unwrap()
        .expect("both locks free");
    assert!(g.is_valid());
    g.release().unwrap();
    wait_children(&x, &pa, &[]);
    wait_children(&x, &pb, &[]);
}
