//! Lock recipes against a real ZooKeeper server: exclusion, order, cleanup, the rules of
//! each lock type.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use common::{
    assert_invalid_path, assert_quiet, base, children, connect, recv, shared_cluster, spawn,
    unique, wait_until, watches_by_path, WITHIN,
};
use zkguard::{
    Client, CreateMode, Error, MultiLock, Mutex, Participant, ReentrantMutex, RwLock, Semaphore,
    UnfairMutex,
};

#[test]
fn eight_sessions_never_hold_the_same_mutex_at_once_and_tokens_rise() {
    let cs = shared_cluster().connect_string();
    let path = unique("mx");
    let holders = Arc::new(AtomicI64::new(0));
    let last_token = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (cs, path) = (cs.clone(), path.clone());
            let (holders, last_token) = (holders.clone(), last_token.clone());
            std::thread::spawn(move || {
                let client = connect(&cs, Duration::from_secs(10));
                let lock = Mutex::new(&client, &path).unwrap();
                for _ in 0..150 {
                    let g = lock.acquire().unwrap();
                    assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    let prev = last_token.swap(g.token(), Ordering::SeqCst);
                    assert!(g.token() > prev, "token {} after {prev}", g.token());
                    assert!(g.is_valid());
                    holders.fetch_sub(1, Ordering::SeqCst);
                    g.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let client = connect(&cs, Duration::from_secs(10));
    // The directory is a container: the server may already have removed it (no nodes).
    let left = children(&client, &path);
    assert!(left.is_empty(), "nodes left: {left:?}");
}

// ---------------------------------------------------------------------------------------
// Helpers for the tests below.
// ---------------------------------------------------------------------------------------

/// Session timeout for clients whose session is not the point of the test.
const SESSION: Duration = Duration::from_secs(10);

/// Waits until `dir` holds exactly `want` (sorted names).
fn wait_children(client: &Client, dir: &str, want: &[String]) {
    expect_children(client, dir, want, "");
}

/// Waits until `dir` holds exactly `want` (a node a failed acquire leaves may be deleted in
/// the background); `what` says what would have left a node.
fn expect_children(client: &Client, dir: &str, want: &[String], what: &str) {
    let mut want = want.to_vec();
    want.sort();
    let deadline = Instant::now() + WITHIN;
    let seen = loop {
        let seen = children(client, dir);
        if seen == want || Instant::now() >= deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(seen, want, "children of {dir} {what}");
}

/// The data of every participant, in queue order.
fn datas(p: &[Participant]) -> Vec<Vec<u8>> {
    p.iter().map(|x| x.data.clone()).collect()
}

// ---------------------------------------------------------------------------------------
// 1. Fairness
// ---------------------------------------------------------------------------------------

#[test]
fn mutex_waiters_acquire_in_arrival_order() {
    let cs = shared_cluster().connect_string();
    let path = unique("fifo");
    let client = connect(&cs, SESSION);
    let lock = Mutex::new(&client, &path).unwrap().with_data("holder");
    let holder = lock.acquire().unwrap();
    let order = Arc::new(StdMutex::new(Vec::new()));
    let mut done = Vec::new();
    for i in 0..5usize {
        let (cs, path, order) = (cs.clone(), path.clone(), order.clone());
        done.push(spawn(move || {
            let client = connect(&cs, SESSION);
            let lock = Mutex::new(&client, &path)
                .unwrap()
                .with_data(format!("w{i}"));
            let g = lock.acquire().unwrap();
            order.lock().unwrap().push(i);
            // Whoever holds is the head of the queue.
            let head = lock.participants().unwrap();
            assert_eq!(head[0].node, base(g.path()), "holder {i} is not the head");
            g.release().unwrap();
        }));
        // Queue the next waiter only once this one's node is in the queue.
        let me = format!("w{i}").into_bytes();
        wait_until(WITHIN, &format!("w{i} queued"), || {
            lock.participants().unwrap().last().map(|p| &p.data) == Some(&me)
        });
    }
    let queued = datas(&lock.participants().unwrap());
    let want: Vec<Vec<u8>> = std::iter::once(b"holder".to_vec())
        .chain((0..5).map(|i| format!("w{i}").into_bytes()))
        .collect();
    assert_eq!(queued, want, "queue order");
    assert!(
        order.lock().unwrap().is_empty(),
        "a waiter got in past the holder"
    );
    holder.release().unwrap();
    for rx in &done {
        recv(rx, WITHIN, "waiter done");
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    wait_children(&client, &path, &[]);
    // The directory was made as a container: the server removes it once it is empty.
    wait_until(WITHIN, "the empty lock directory removed", || {
        client.exists(&path).unwrap().is_none()
    });
}

// ---------------------------------------------------------------------------------------
// 2. try / timeout / cancel leave nothing behind
// ---------------------------------------------------------------------------------------

#[test]
fn mutex_try_timeout_and_cancel_leave_no_node_and_the_lock_still_works() {
    let cs = shared_cluster().connect_string();
    let path = unique("tmc");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let lock_a = Mutex::new(&a, &path).unwrap();
    let lock_b = Mutex::new(&b, &path).unwrap();
    let held = lock_a.acquire().unwrap();
    let only_holder = vec![base(held.path())];
    assert_eq!(children(&a, &path), only_holder);

    // try_acquire: None while held, nothing left.
    assert!(lock_b.try_acquire().unwrap().is_none());
    expect_children(&a, &path, &only_holder, "try_acquire left a node");
    // Also from the holder's own session (the lock is not re-entrant).
    assert!(lock_a.try_acquire().unwrap().is_none());
    expect_children(&a, &path, &only_holder, "try_acquire left a node");

    // acquire_timeout: Ok(None) after (at least) the timeout, nothing left.
    let t0 = Instant::now();
    let r = lock_b.acquire_timeout(Duration::from_millis(500)).unwrap();
    assert!(r.is_none(), "acquired a held lock");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(500),
        "gave up early: {took:?}"
    );
    assert!(took < WITHIN, "gave up late: {took:?}");
    expect_children(&a, &path, &only_holder, "acquire_timeout left a node");

    // Cancel: a blocked acquire returns Err(Cancelled), nothing left.
    let blocked = {
        let lock_b = lock_b.clone();
        spawn(move || lock_b.acquire().map(|g| g.path().to_string()))
    };
    wait_until(WITHIN, "the blocked acquire queued", || {
        lock_a.participants().unwrap().len() == 2
    });
    assert_quiet(&blocked, "acquired a held lock");
    lock_b.canceller().cancel();
    match recv(&blocked, WITHIN, "cancelled acquire") {
        Err(Error::Cancelled { path: p }) => assert_eq!(p, path),
        other => panic!("expected Cancelled, got {other:?}"),
    }
    expect_children(&a, &path, &only_holder, "a cancelled acquire left a node");

    // The lock still works: for B after A lets go, and a cancel does not stick.
    held.release().unwrap();
    let g = lock_b
        .acquire_timeout(WITHIN)
        .unwrap()
        .expect("the lock is free");
    assert!(g.is_valid());
    assert_eq!(children(&a, &path), vec![base(g.path())]);
    assert!(lock_a.try_acquire().unwrap().is_none());
    drop(g);
    let g = lock_a.acquire().unwrap();
    drop(g);
    wait_children(&a, &path, &[]);
}

// ---------------------------------------------------------------------------------------
// 3. Re-entrancy
// ---------------------------------------------------------------------------------------

/// From a thread of its own, with its own session: whether `path` can be taken right now.
fn other_session_can_take(cs: &str, path: &str) -> bool {
    let (cs, path) = (cs.to_string(), path.to_string());
    let rx = spawn(move || {
        let client = connect(&cs, SESSION);
        let lock = ReentrantMutex::new(&client, &path).unwrap();
        let guard = lock.try_acquire().unwrap();
        assert_eq!(lock.is_held_by_current_thread(), guard.is_some());
        guard.is_some()
    });
    recv(&rx, WITHIN, "try_acquire from another session")
}

#[test]
fn reentrant_mutex_counts_nested_holds_on_one_node() {
    let cs = shared_cluster().connect_string();
    let path = unique("re");
    let client = connect(&cs, SESSION);
    let lock = ReentrantMutex::new(&client, &path).unwrap();
    assert!(!lock.is_held_by_current_thread());
    let outer = lock.acquire().unwrap();
    assert_eq!(outer.hold_count(), 1);
    let node = vec![base(outer.path())];
    let inner = lock.acquire().unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(outer.hold_count(), 2);
    assert_eq!(inner.path(), outer.path());
    assert_eq!(inner.token(), outer.token());
    assert!(lock.is_held_by_current_thread());
    assert_eq!(
        children(&client, &path),
        node,
        "a nested acquire queued a node"
    );
    // try_acquire and acquire_timeout count too on the holding thread.
    let third = lock.try_acquire().unwrap().expect("re-entrant try_acquire");
    assert_eq!(third.hold_count(), 3);
    let fourth = lock
        .acquire_timeout(Duration::from_millis(1))
        .unwrap()
        .expect("re-entrant acquire_timeout");
    assert_eq!(fourth.hold_count(), 4);
    drop(fourth);
    third.release().unwrap();
    assert_eq!(children(&client, &path), node);

    // Another thread of the same process (same lock object) contends like a stranger.
    let same_object = {
        let lock = lock.clone();
        spawn(move || lock.try_acquire().unwrap().is_some())
    };
    assert!(!recv(&same_object, WITHIN, "other thread's try_acquire"));
    assert!(!other_session_can_take(&cs, &path));

    // Letting go of the inner level keeps the lock.
    inner.release().unwrap();
    assert_eq!(outer.hold_count(), 1);
    assert!(outer.is_valid());
    assert!(lock.is_held_by_current_thread());
    assert_eq!(
        children(&client, &path),
        node,
        "inner release touched the node"
    );
    assert!(!other_session_can_take(&cs, &path));

    // The outermost guard releases.
    drop(outer);
    assert!(!lock.is_held_by_current_thread());
    wait_children(&client, &path, &[]);
    assert!(other_session_can_take(&cs, &path));
    // And this thread can take it again from scratch.
    let again = lock.acquire().unwrap();
    assert_eq!(again.hold_count(), 1);
    assert_ne!(base(again.path()), node[0]);
    drop(again);
    wait_children(&client, &path, &[]);
}

/// A thread whose re-entrant hold was lost (its node deleted by another client) while
/// another session took the lock cannot re-enter: a nested acquire is `LockLost`, not a
/// level of a lock someone else holds (without the check it returned `Ok` with a guard, the
/// `let _g = lock.acquire()?` pattern then ran beside the new holder). Once its guards are
/// gone, the thread queues afresh behind the new holder.
#[test]
fn a_thread_whose_reentrant_hold_was_lost_cannot_reenter() {
    let cs = shared_cluster().connect_string();
    let path = unique("re-lost");
    let (client, other) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let lock = ReentrantMutex::new(&client, &path).unwrap();
    let outer = lock.acquire().unwrap();
    let inner = lock.acquire().unwrap();
    let lost = outer.lost();
    other.delete(outer.path(), None).unwrap();
    recv(&lost, WITHIN, "the outer guard lost");
    // Letting go of an inner level says the lock was lost, as the outermost would.
    match inner.release() {
        Err(Error::LockLost { path: p }) => assert_eq!(p, outer.path()),
        other => panic!("inner release: expected LockLost, got {other:?}"),
    }
    let theirs = Mutex::new(&other, &path).unwrap().acquire().unwrap();
    assert!(!lock.is_held_by_current_thread());
    match lock.acquire() {
        Err(Error::LockLost { path: p }) => assert_eq!(p, outer.path()),
        Ok(g) => panic!(
            "re-entered a lost lock while another session holds it (valid: {})",
            g.is_valid()
        ),
        Err(e) => panic!("expected LockLost, got {e:?}"),
    }
    match lock.try_acquire() {
        Err(Error::LockLost { .. }) => {}
        other => panic!("try_acquire: expected LockLost, got {other:?}"),
    }
    drop(outer);
    // Queues afresh: waits behind the holder, then gets it.
    assert!(lock.try_acquire().unwrap().is_none());
    let next = {
        let lock = lock.clone();
        spawn(move || lock.acquire().map(|g| (g.is_valid(), g.hold_count())))
    };
    assert_quiet(&next, "acquired while the other session holds it");
    theirs.release().unwrap();
    assert_eq!(recv(&next, WITHIN, "queued afresh").unwrap(), (true, 1));
}

// ---------------------------------------------------------------------------------------
// 4. Read/write lock
// ---------------------------------------------------------------------------------------

#[test]
fn rwlock_shares_reads_and_a_queued_writer_blocks_later_readers() {
    let cs = shared_cluster().connect_string();
    let path = unique("rw");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let d = connect(&cs, SESSION);
    let lock_a = RwLock::new(&a, &path).unwrap().with_data("r1");
    let lock_b = RwLock::new(&b, &path).unwrap().with_data("r2");
    let lock_d = RwLock::new(&d, &path).unwrap();

    // Two readers at once.
    let r1 = lock_a.read().unwrap();
    let r2 = lock_b
        .try_read()
        .unwrap()
        .expect("a second reader is let in");
    assert!(r1.is_valid() && r2.is_valid());
    // A writer cannot get in past them, and leaves nothing behind.
    assert!(lock_d.try_write().unwrap().is_none());
    assert!(lock_d
        .write_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    wait_until(WITHIN, "the refused writer's node gone", || {
        children(&a, &path).len() == 2
    });

    let log = Arc::new(StdMutex::new(Vec::<&'static str>::new()));
    // A writer queues behind the readers.
    let (w_go_tx, w_go_rx) = crossbeam_channel::bounded::<()>(1);
    let (w_in_tx, w_in_rx) = crossbeam_channel::bounded::<()>(1);
    let writer = {
        let (cs, path, log) = (cs.clone(), path.clone(), log.clone());
        spawn(move || {
            let client = connect(&cs, SESSION);
            let lock = RwLock::new(&client, &path).unwrap().with_data("w");
            let g = lock.write().unwrap();
            log.lock().unwrap().push("w in");
            w_in_tx.send(()).unwrap();
            w_go_rx.recv().unwrap();
            log.lock().unwrap().push("w out");
            g.release().unwrap();
        })
    };
    wait_until(WITHIN, "the writer queued", || {
        datas(&lock_a.participants().unwrap()).last() == Some(&b"w".to_vec())
    });
    assert_quiet(&w_in_rx, "the writer got in while readers hold");

    // No writer starvation: a reader arriving after the waiting writer waits too.
    assert!(
        lock_d.try_read().unwrap().is_none(),
        "reader jumped the queued writer"
    );
    assert!(lock_d
        .read_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    wait_until(WITHIN, "the refused readers' nodes gone", || {
        children(&a, &path).len() == 3
    });
    let late_reader = {
        let (cs, path, log) = (cs.clone(), path.clone(), log.clone());
        spawn(move || {
            let client = connect(&cs, SESSION);
            let lock = RwLock::new(&client, &path).unwrap().with_data("r3");
            let g = lock.read().unwrap();
            log.lock().unwrap().push("r3 in");
            g.release().unwrap();
        })
    };
    wait_until(WITHIN, "the late reader queued", || {
        datas(&lock_a.participants().unwrap()).last() == Some(&b"r3".to_vec())
    });
    let queue = datas(&lock_a.participants().unwrap());
    assert_eq!(
        queue,
        vec![
            b"r1".to_vec(),
            b"r2".to_vec(),
            b"w".to_vec(),
            b"r3".to_vec()
        ]
    );
    assert_quiet(&late_reader, "the late reader got in past the writer");

    // One reader leaves: the writer still waits for the other.
    r1.release().unwrap();
    assert_quiet(&w_in_rx, "the writer got in while a reader holds");
    // The last reader leaves: the writer gets in, alone.
    drop(r2);
    recv(&w_in_rx, WITHIN, "writer in");
    assert!(
        lock_d.try_read().unwrap().is_none(),
        "reader beside a writer"
    );
    assert!(lock_d.try_write().unwrap().is_none(), "two writers");
    assert!(lock_a
        .read_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_quiet(&late_reader, "the late reader got in beside the writer");
    w_go_tx.send(()).unwrap();
    recv(&writer, WITHIN, "writer done");
    recv(&late_reader, WITHIN, "late reader done");
    assert_eq!(*log.lock().unwrap(), vec!["w in", "w out", "r3 in"]);

    // Free again: readers and a writer get in.
    let r = lock_d.try_read().unwrap().expect("free for readers");
    drop(r);
    let w = lock_d
        .write_timeout(WITHIN)
        .unwrap()
        .expect("free for a writer");
    drop(w);
    wait_children(&a, &path, &[]);
}

// ---------------------------------------------------------------------------------------
// 5. Semaphore
// ---------------------------------------------------------------------------------------

#[test]
fn semaphore_never_lets_more_than_its_permits_in() {
    let cs = shared_cluster().connect_string();
    let path = unique("sem");
    let client = connect(&cs, SESSION);
    let sem = Semaphore::new(&client, &path, 3).unwrap();
    assert_eq!(sem.permits(), 3);
    // The count is recorded: another count on the same path is refused.
    match Semaphore::new(&client, &path, 5) {
        Err(Error::PermitMismatch {
            path: p,
            recorded: 3,
            requested: 5,
        }) => assert_eq!(p, path),
        other => panic!("expected PermitMismatch, got {other:?}"),
    }
    assert!(Semaphore::new(&client, &path, 3).is_ok());
    match Semaphore::new(&client, &path, 0) {
        Err(Error::InvalidArgument { name, reason }) => {
            assert_eq!(name, "permits");
            assert!(reason.contains(&path), "{reason}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }

    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (cs, path) = (cs.clone(), path.clone());
            let (inside, most) = (inside.clone(), most.clone());
            spawn(move || {
                let client = connect(&cs, SESSION);
                let sem = Semaphore::new(&client, &path, 3).unwrap();
                for _ in 0..20 {
                    let permit = sem.acquire().unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 3, "{now} holders of 3 permits");
                    // A little work while holding, so that holders overlap.
                    std::thread::sleep(Duration::from_millis(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    permit.release().unwrap();
                }
            })
        })
        .collect();
    let deadline = Duration::from_secs(45);
    for t in &threads {
        recv(t, deadline, "semaphore worker done");
    }
    let most = most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "most holders at once: {most}");
    if most == 1 {
        eprintln!("note: the semaphore's holders never overlapped in this run");
    }
    wait_children(&client, &path, &[]);
}

#[test]
fn semaphore_refuses_another_count_while_permits_are_held() {
    let cs = shared_cluster().connect_string();
    let path = unique("semc");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let sem = Semaphore::new(&a, &path, 2).unwrap();
    let p1 = sem.acquire().unwrap();
    let p2 = sem.try_acquire().unwrap().expect("second permit");
    match Semaphore::new(&b, &path, 1) {
        Err(Error::PermitMismatch {
            recorded: 2,
            requested: 1,
            ..
        }) => {}
        other => panic!("expected PermitMismatch, got {other:?}"),
    }
    let sem_b = Semaphore::new(&b, &path, 2).unwrap();
    assert!(
        sem_b.try_acquire().unwrap().is_none(),
        "a third holder of 2"
    );
    assert!(sem_b
        .acquire_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    let mut got: Vec<String> = sem
        .participants()
        .unwrap()
        .into_iter()
        .map(|p| p.node)
        .collect();
    got.sort();
    let mut want = vec![base(p1.path()), base(p2.path())];
    want.sort();
    assert_eq!(got, want, "participants");
    // Curator's layout: the leases under <path>/leases, the internal lock at <path>/locks.
    expect_children(
        &a,
        &format!("{path}/leases"),
        &want,
        "a refused try left a node",
    );
    expect_children(
        &a,
        &format!("{path}/locks"),
        &[],
        "a try kept the internal lock",
    );
    drop(p1);
    let p3 = sem_b
        .acquire_timeout(WITHIN)
        .unwrap()
        .expect("a freed permit");
    drop(p2);
    drop(p3);
    wait_children(&a, &path, &[]);
}

#[test]
fn semaphore_permit_count_stays_recorded_while_a_user_is_alive() {
    let cs = shared_cluster().connect_string();
    let path = unique("semrec");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let sem3 = Semaphore::new(&a, &path, 3).unwrap();
    drop(sem3.acquire().unwrap());
    wait_children(&a, &path, &[]);
    // The semaphore is idle for a while: long enough for the server's container cleanup
    // (every 100 ms on the test server, every minute by default) to remove the semaphore's
    // node if it is a container. A correct implementation may keep it: then this only waits.
    let idle = Instant::now() + Duration::from_secs(3);
    while Instant::now() < idle && a.exists(&path).unwrap().is_some() {
        std::thread::sleep(Duration::from_millis(20));
    }
    // sem3 is still alive and in use with 3 permits: another count must still be refused,
    // or the two users would apply different limits to one queue.
    let r = Semaphore::new(&b, &path, 5);
    let still_used = sem3.try_acquire().unwrap().is_some();
    match r {
        Err(Error::PermitMismatch {
            recorded: 3,
            requested: 5,
            ..
        }) => {}
        Ok(_) => panic!(
            "a 5-permit semaphore was accepted on {path} while a 3-permit one is in use \
             (the 3-permit user can still acquire: {still_used})"
        ),
        Err(e) => panic!("expected PermitMismatch, got {e}"),
    }
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

// ---------------------------------------------------------------------------------------
// 7. UnfairMutex
// ---------------------------------------------------------------------------------------

#[test]
fn unfair_mutex_excludes_hands_over_and_names_its_holder() {
    let cs = shared_cluster().connect_string();
    // Missing parents are created.
    let path = format!("{}/jobs/nightly", unique("unfair"));
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let lock_a = UnfairMutex::new(&a, &path).unwrap();
    let lock_b = UnfairMutex::new(&b, &path).unwrap();
    assert_eq!(lock_a.holder().unwrap(), None);

    let ga = lock_a.try_acquire().unwrap().expect("free lock");
    assert_eq!(ga.path(), path);
    assert!(ga.is_valid());
    let id_a = lock_b.holder().unwrap().expect("a holder");
    let (data, stat) = b.get_data(&path).unwrap();
    assert_eq!(id_a, data);
    assert_eq!(stat.ephemeral_owner, a.session_id());
    let id_a_text = String::from_utf8(id_a.clone()).expect("owner id is text");
    assert!(
        uuid::Uuid::parse_str(&id_a_text).is_ok(),
        "owner id {id_a_text:?}"
    );
    assert_eq!(ga.token(), stat.czxid as u64);

    assert!(lock_b.try_acquire().unwrap().is_none());
    assert!(lock_a.try_acquire().unwrap().is_none(), "not re-entrant");
    assert!(lock_b
        .acquire_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_eq!(
        lock_b.holder().unwrap(),
        Some(id_a.clone()),
        "holder changed"
    );

    // B blocks, and gets the lock once A's guard is dropped.
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
    let (in_tx, in_rx) = crossbeam_channel::bounded::<Vec<u8>>(1);
    let blocked = {
        let lock_b = lock_b.clone();
        spawn(move || {
            let g = lock_b.acquire().unwrap();
            in_tx.send(lock_b.holder().unwrap().unwrap()).unwrap();
            go_rx.recv().unwrap();
            g.release().unwrap();
        })
    };
    assert_quiet(&in_rx, "B got a held lock");
    drop(ga);
    let id_b = recv(&in_rx, WITHIN, "B acquired");
    assert_ne!(id_b, id_a);
    assert_eq!(lock_a.holder().unwrap(), Some(id_b));
    assert_eq!(
        a.exists(&path).unwrap().unwrap().ephemeral_owner,
        b.session_id()
    );
    go_tx.send(()).unwrap();
    recv(&blocked, WITHIN, "B released");
    assert_eq!(lock_a.holder().unwrap(), None);
}

#[test]
fn an_unfair_mutexs_holder_is_not_a_persistent_node_at_its_path() {
    let cs = shared_cluster().connect_string();
    let path = unique("unfair-plain");
    let c = connect(&cs, SESSION);
    c.create(&path, b"hello", CreateMode::Persistent).unwrap();
    let lock = UnfairMutex::new(&c, &path).unwrap();
    let refused = lock.try_acquire().map(|g| g.is_some());
    assert_invalid_path(refused.clone(), &path, "try_acquire on a persistent node");
    // holder() says what the acquire says, not that "hello" holds the lock.
    let holder = lock.holder();
    assert_invalid_path(holder.clone(), &path, "holder of a persistent node");
    assert_eq!(holder.unwrap_err(), refused.unwrap_err());
    assert_eq!(
        c.get_data(&path).unwrap().0,
        b"hello",
        "the node was touched"
    );
    c.delete(&path, None).unwrap();
    assert_eq!(lock.holder().unwrap(), None);
}

#[test]
fn unfair_mutex_release_only_deletes_its_own_node() {
    let cs = shared_cluster().connect_string();
    let path = unique("unfair");
    let a = connect(&cs, SESSION);
    let c = connect(&cs, SESSION);
    let other = connect(&cs, SESSION);
    let ga = UnfairMutex::new(&a, &path)
        .unwrap()
        .try_acquire()
        .unwrap()
        .expect("free lock");
    // Someone deletes A's node, and C takes the lock.
    other.delete(&path, None).unwrap();
    let lock_c = UnfairMutex::new(&c, &path).unwrap();
    let gc = lock_c
        .acquire_timeout(WITHIN)
        .unwrap()
        .expect("free after the delete");
    let id_c = lock_c.holder().unwrap().expect("C holds");
    // A's release must not touch C's node.
    match ga.release() {
        Err(Error::LockLost { path: p }) => assert_eq!(p, path),
        other => panic!("expected LockLost, got {other:?}"),
    }
    let (data, stat) = other.get_data(&path).expect("C's node is gone");
    assert_eq!(data, id_c);
    assert_eq!(stat.ephemeral_owner, c.session_id());
    assert!(gc.is_valid());

    // The same with a plain drop, and a node recreated by a foreign client in A's session's
    // absence (no owner id of ours in it).
    drop(gc);
    let ga = UnfairMutex::new(&a, &path)
        .unwrap()
        .acquire_timeout(WITHIN)
        .unwrap()
        .expect("free lock");
    other.delete(&path, None).unwrap();
    other
        .create(&path, b"someone else", CreateMode::Ephemeral)
        .unwrap();
    drop(ga);
    let (data, _) = other
        .get_data(&path)
        .expect("the dropped guard deleted a node that is not its own");
    assert_eq!(data, b"someone else");
    other.delete(&path, None).unwrap();
}

// ---------------------------------------------------------------------------------------
// 8. No herd
// ---------------------------------------------------------------------------------------

#[test]
fn a_release_wakes_two_of_twenty_waiters_the_next_and_the_one_after_it() {
    let cs = shared_cluster().connect_string();
    let path = unique("herd");
    let client = connect(&cs, SESSION);
    let lock = Mutex::new(&client, &path).unwrap();
    let holder = lock.acquire().unwrap();
    let waiters: Vec<Client> = (0..20).map(|_| connect(&cs, SESSION)).collect();
    let (in_tx, in_rx) = crossbeam_channel::unbounded::<usize>();
    let (go_tx, go_rx) = crossbeam_channel::unbounded::<()>();
    let done: Vec<_> = waiters
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let (w, path, in_tx, go_rx) = (w.clone(), path.clone(), in_tx.clone(), go_rx.clone());
            spawn(move || {
                let lock = Mutex::new(&w, &path).unwrap();
                let g = lock.acquire().unwrap();
                in_tx.send(i).unwrap();
                go_rx.recv().unwrap();
                g.release().unwrap();
            })
        })
        .collect();
    wait_until(WITHIN, "20 waiters queued", || {
        lock.participants().unwrap().len() == 21
    });
    // Every waiter must have armed its watch (the server says so), or the release could be
    // noticed without a notification.
    let queue: Vec<String> = lock
        .participants()
        .unwrap()
        .into_iter()
        .map(|p| format!("{path}/{}", p.node))
        .collect();
    let owners: Vec<String> = queue
        .iter()
        .map(|n| {
            let owner = client
                .exists(n)
                .unwrap()
                .expect("queued node")
                .ephemeral_owner;
            format!("0x{:x}", owner as u64)
        })
        .collect();
    let ours = |w: &HashMap<String, Vec<String>>| -> HashMap<String, Vec<String>> {
        w.iter()
            .filter(|(p, _)| **p == path || p.starts_with(&format!("{path}/")))
            .map(|(p, s)| (p.clone(), s.clone()))
            .collect()
    };
    // Each waiter watches the node right before it, the one before that, and its own, and
    // nothing else; the holder watches its own node.
    let mut want: HashMap<String, Vec<String>> = HashMap::new();
    for (k, owner) in owners.iter().enumerate() {
        for watched in &queue[k.saturating_sub(2)..=k] {
            want.entry(watched.clone()).or_default().push(owner.clone());
        }
    }
    let sorted = |m: HashMap<String, Vec<String>>| -> HashMap<String, Vec<String>> {
        m.into_iter()
            .map(|(p, mut s)| {
                s.sort();
                (p, s)
            })
            .collect()
    };
    let want = sorted(want);
    let mut watches = HashMap::new();
    wait_until(WITHIN, "every waiter watching", || {
        watches = sorted(ours(&watches_by_path()));
        watches == want
    });
    let before: Vec<u64> = waiters.iter().map(|w| w.stats().watch_events).collect();
    holder.release().unwrap();
    let first = recv(&in_rx, WITHIN, "first waiter acquired");
    // ZooKeeper delivers a notification before the reply to any later read of the same
    // session that sees the change, so after these reads every notification the release
    // caused has been counted.
    for w in &waiters {
        w.sync(&path).unwrap();
        let _ = w.get_children(&path).unwrap();
    }
    let deltas: Vec<u64> = waiters
        .iter()
        .zip(&before)
        .map(|(w, b)| w.stats().watch_events - b)
        .collect();
    // Two notifications: the next waiter (it gets in) and the one after it (it lists again,
    // to know it is next).
    assert_eq!(
        deltas.iter().sum::<u64>(),
        2,
        "notifications per waiter: {deltas:?}"
    );
    assert_eq!(deltas[first], 1, "the waiter that got in was not woken");
    let second = waiters
        .iter()
        .position(|w| format!("0x{:x}", w.session_id() as u64) == owners[2])
        .expect("the second waiter's client");
    assert_eq!(
        deltas[second], 1,
        "the other woken waiter is not the second in the queue: {deltas:?}"
    );
    assert_eq!(
        owners[1],
        format!("0x{:x}", waiters[first].session_id() as u64),
        "the first in the queue did not get in first"
    );
    assert_eq!(watches, want, "watches before the release");
    assert_quiet(&in_rx, "a second waiter got in");
    for _ in 0..20 {
        go_tx.send(()).unwrap();
    }
    for d in &done {
        recv(d, WITHIN, "waiter done");
    }
    wait_children(&client, &path, &[]);
}

// ---------------------------------------------------------------------------------------
// 9. Bad input
// ---------------------------------------------------------------------------------------

#[test]
fn bad_lock_paths_are_refused_by_every_constructor() {
    let cs = shared_cluster().connect_string();
    let client = connect(&cs, SESSION);
    for bad in ["relative", "/trailing/", "/a//b", "/", ""] {
        assert_invalid_path(Mutex::new(&client, bad), bad, "Mutex::new");
        assert_invalid_path(
            ReentrantMutex::new(&client, bad),
            bad,
            "ReentrantMutex::new",
        );
        assert_invalid_path(RwLock::new(&client, bad), bad, "RwLock::new");
        assert_invalid_path(Semaphore::new(&client, bad, 2), bad, "Semaphore::new");
        assert_invalid_path(UnfairMutex::new(&client, bad), bad, "UnfairMutex::new");
        assert_invalid_path(
            MultiLock::new(&client, &["/ok", bad]),
            bad,
            "MultiLock::new",
        );
    }
    match MultiLock::new(&client, &[]) {
        Err(Error::InvalidArgument { name: "paths", .. }) => {}
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn a_lock_under_an_ephemeral_node_is_an_error_naming_the_path() {
    let cs = shared_cluster().connect_string();
    let client = connect(&cs, SESSION);
    let eph = unique("eph");
    client.create(&eph, b"", CreateMode::Ephemeral).unwrap();
    let under = format!("{eph}/lock");
    let check = |r: zkguard::Result<bool>, want_in: &str, what: &str| match r {
        Err(e @ Error::NoChildrenForEphemerals { .. }) => {
            assert!(e.to_string().contains(want_in), "{what}: {e}");
        }
        other => panic!("{what}: expected NoChildrenForEphemerals, got {other:?}"),
    };
    for dir in [eph.as_str(), under.as_str()] {
        let lock = Mutex::new(&client, dir).unwrap();
        check(lock.acquire().map(|_| true), dir, "Mutex::acquire");
        check(
            lock.try_acquire().map(|g| g.is_some()),
            dir,
            "Mutex::try_acquire",
        );
        check(
            lock.acquire_timeout(Duration::from_secs(2))
                .map(|g| g.is_some()),
            dir,
            "Mutex::acquire_timeout",
        );
        let rw = RwLock::new(&client, dir).unwrap();
        check(rw.read().map(|_| true), dir, "RwLock::read");
        check(rw.write().map(|_| true), dir, "RwLock::write");
        let multi = MultiLock::new(&client, &[dir]).unwrap();
        check(multi.acquire().map(|_| true), dir, "MultiLock::acquire");
    }
    check(
        Semaphore::new(&client, &under, 2).map(|_| true),
        &under,
        "Semaphore::new",
    );
    let unfair = UnfairMutex::new(&client, &format!("{under}/x")).unwrap();
    check(
        unfair.try_acquire().map(|g| g.is_some()),
        &under,
        "UnfairMutex",
    );
    let unfair = UnfairMutex::new(&client, &under).unwrap();
    check(unfair.acquire().map(|_| true), &under, "UnfairMutex");
    // Nothing was made under the ephemeral node, and the client still works.
    assert_eq!(children(&client, &eph), Vec::<String>::new());
    client.delete(&eph, None).unwrap();
}

#[test]
fn a_foreign_child_in_the_lock_directory_is_an_error_and_left_alone() {
    let cs = shared_cluster().connect_string();
    let client = connect(&cs, SESSION);
    let dir = unique("foreign");
    client.create(&dir, b"", CreateMode::Persistent).unwrap();
    let config = format!("{dir}/config");
    client
        .create(&config, b"keep me", CreateMode::Persistent)
        .unwrap();
    let just_config = vec!["config".to_string()];
    let check = |r: zkguard::Result<bool>, what: &str| {
        match r {
            Err(Error::ForeignNode { path, node }) => {
                assert_eq!(path, dir, "{what}");
                assert_eq!(node, "config", "{what}");
            }
            other => panic!("{what}: expected ForeignNode, got {other:?}"),
        }
        expect_children(&client, &dir, &just_config, &format!("{what} left a node"));
        assert_eq!(client.get_data(&config).unwrap().0, b"keep me", "{what}");
    };
    let lock = Mutex::new(&client, &dir).unwrap();
    check(lock.acquire().map(|_| true), "Mutex::acquire");
    check(
        lock.try_acquire().map(|g| g.is_some()),
        "Mutex::try_acquire",
    );
    check(
        lock.acquire_timeout(Duration::from_secs(2))
            .map(|g| g.is_some()),
        "Mutex::acquire_timeout",
    );
    check(lock.participants().map(|_| true), "Mutex::participants");
    let re = ReentrantMutex::new(&client, &dir).unwrap();
    check(re.acquire().map(|_| true), "ReentrantMutex::acquire");
    assert!(!re.is_held_by_current_thread());
    let rw = RwLock::new(&client, &dir).unwrap();
    check(rw.read().map(|_| true), "RwLock::read");
    check(rw.write().map(|_| true), "RwLock::write");
    let multi = MultiLock::new(&client, &[&dir]).unwrap();
    check(multi.acquire().map(|_| true), "MultiLock::acquire");
    client.delete(&config, None).unwrap();
    // Without the foreign node the lock works.
    drop(lock.acquire().unwrap());
    wait_children(&client, &dir, &[]);
    client.delete(&dir, None).unwrap();
}

// ---------------------------------------------------------------------------------------
// 10, 11. Revocation and loss
// ---------------------------------------------------------------------------------------

#[test]
fn revoke_reaches_the_holders_revocation_receiver() {
    let cs = shared_cluster().connect_string();
    let path = unique("revoke");
    let a = connect(&cs, SESSION);
    let other = connect(&cs, SESSION);
    let lock = Mutex::new(&a, &path).unwrap();
    let g = lock.acquire().unwrap();
    let revoked = g.revocation();
    let lost = g.lost();
    // The watch is armed without waiting; a round trip on the same session makes sure the
    // server has registered it before the revoke comes from another session.
    a.sync(g.path()).unwrap();
    assert!(revoked.try_recv().is_err(), "revoked before anyone asked");
    zkguard::revoke(&other, g.path()).unwrap();
    recv(&revoked, WITHIN, "revocation request");
    // A revocation request is not a loss.
    assert!(g.is_valid());
    assert!(lost.try_recv().is_err());
    // Asked again later: answered at once.
    recv(&g.revocation(), WITHIN, "revocation (already requested)");
    g.release().unwrap();
    wait_children(&a, &path, &[]);
    // Revoking a node that is gone names it.
    let gone = format!("{path}/_c_x-lock-0000000000");
    match zkguard::revoke(&other, &gone) {
        Err(Error::NoNode { path: p }) => assert_eq!(p, gone),
        r => panic!("expected NoNode, got {r:?}"),
    }
}

#[test]
fn a_revoke_made_before_revocation_is_called_is_not_missed() {
    let cs = shared_cluster().connect_string();
    let path = unique("revoke");
    let a = connect(&cs, SESSION);
    let other = connect(&cs, SESSION);
    let g = Mutex::new(&a, &path).unwrap().acquire().unwrap();
    // Someone asks the holder to let go before it has set up its receiver.
    zkguard::revoke(&other, g.path()).unwrap();
    let revoked = g.revocation();
    recv(
        &revoked,
        Duration::from_secs(10),
        "an earlier revocation request",
    );
    drop(g);
    wait_children(&a, &path, &[]);
}

#[test]
fn deleting_the_holders_node_is_a_loss() {
    let cs = shared_cluster().connect_string();
    let path = unique("lost");
    let a = connect(&cs, SESSION);
    let other = connect(&cs, SESSION);
    let lock = Mutex::new(&a, &path).unwrap();
    let g = lock.acquire().unwrap();
    let lost = g.lost();
    assert!(g.is_valid());
    assert!(lost.try_recv().is_err(), "lost while held");
    other.delete(g.path(), None).unwrap();
    recv(&lost, WITHIN, "lost after the node was deleted");
    assert!(!g.is_valid());
    // Asked after the fact: answered at once.
    recv(&g.lost(), WITHIN, "lost (already lost)");
    // Someone else can take the lock now.
    let g2 = Mutex::new(&other, &path)
        .unwrap()
        .acquire_timeout(WITHIN)
        .unwrap()
        .expect("the lock is free once the node is gone");
    match g.release() {
        Err(Error::LockLost { path: p }) => assert!(p.starts_with(&path), "{p}"),
        r => panic!("expected LockLost, got {r:?}"),
    }
    assert!(
        g2.is_valid(),
        "releasing a lost guard disturbed the new holder"
    );
    assert_eq!(children(&a, &path), vec![base(g2.path())]);
    drop(g2);

    // The node deleted before anyone asked: lost() still finds out.
    let g = lock.acquire().unwrap();
    other.delete(g.path(), None).unwrap();
    recv(&g.lost(), WITHIN, "lost for a node deleted earlier");
    assert!(!g.is_valid());
    assert!(matches!(g.release(), Err(Error::LockLost { .. })));
    wait_children(&a, &path, &[]);
}

// ---------------------------------------------------------------------------------------
// 13. Participants
// ---------------------------------------------------------------------------------------

#[test]
fn participants_show_default_and_custom_data_in_queue_order() {
    let cs = shared_cluster().connect_string();
    let path = unique("part");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let lock_a = Mutex::new(&a, &path).unwrap();
    assert_eq!(lock_a.participants().unwrap(), vec![], "before anyone came");
    let g = lock_a.acquire().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    let default = format!("{host} pid {}", std::process::id()).into_bytes();
    let p = lock_a.participants().unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].node, base(g.path()));
    assert_eq!(
        String::from_utf8_lossy(&p[0].data),
        String::from_utf8_lossy(&default)
    );
    // Curator's layout: _c_<uuid>-lock-<10 digits>.
    let name = &p[0].node;
    assert!(name.starts_with("_c_"), "{name}");
    let (uuid_part, seq) = name["_c_".len()..].split_once("-lock-").expect("-lock-");
    assert!(uuid::Uuid::parse_str(uuid_part).is_ok(), "{name}");
    assert!(
        seq.len() == 10 && seq.bytes().all(|c| c.is_ascii_digit()),
        "{name}"
    );

    let lock_b = Mutex::new(&b, &path).unwrap().with_data(b"x".to_vec());
    let waiter = {
        let lock_b = lock_b.clone();
        spawn(move || lock_b.acquire().map(drop))
    };
    wait_until(WITHIN, "the waiter queued", || {
        lock_a.participants().unwrap().len() == 2
    });
    let p = lock_b.participants().unwrap();
    assert_eq!(datas(&p), vec![default.clone(), b"x".to_vec()]);
    assert_eq!(p[0].node, base(g.path()));
    drop(g);
    recv(&waiter, WITHIN, "waiter done").unwrap();
    wait_children(&a, &path, &[]);
    assert_eq!(lock_a.participants().unwrap(), vec![]);

    // The other recipes show data the same way.
    let rw = RwLock::new(&a, &path).unwrap().with_data("reader");
    let r = rw.read().unwrap();
    assert_eq!(datas(&rw.participants().unwrap()), vec![b"reader".to_vec()]);
    drop(r);
    let sem_path = unique("part");
    let sem = Semaphore::new(&a, &sem_path, 2).unwrap();
    let permit = sem.acquire().unwrap();
    assert_eq!(datas(&sem.participants().unwrap()), vec![default]);
    drop(permit);
    wait_children(&a, &path, &[]);
    wait_children(&a, &sem_path, &[]);
}

// ---------------------------------------------------------------------------------------
// Closing the client
// ---------------------------------------------------------------------------------------

/// One round of [`closing_the_client_loses_its_locks_and_ends_its_blocked_acquires`]: what
/// went wrong.
fn close_round(cs: &str) -> Vec<String> {
    let path = unique("close");
    let unfair_path = unique("close");
    let a = connect(cs, SESSION);
    let b = connect(cs, SESSION);
    let lock = Mutex::new(&a, &path).unwrap();
    let g = lock.acquire().unwrap();
    let lost = g.lost();
    // Three more acquires on the same client queue behind the first.
    let blocked: Vec<_> = (0..3)
        .map(|_| {
            let lock = lock.clone();
            spawn(move || lock.acquire().map(|g| g.path().to_string()))
        })
        .collect();
    wait_until(WITHIN, "the other acquires queued", || {
        lock.participants().unwrap().len() == 4
    });
    // An unfair acquire on the same client blocked behind another session.
    let held_by_b = UnfairMutex::new(&b, &unfair_path)
        .unwrap()
        .try_acquire()
        .unwrap()
        .expect("free lock");
    let blocked_unfair = {
        let u = UnfairMutex::new(&a, &unfair_path).unwrap();
        spawn(move || u.acquire().map(|g| g.path().to_string()))
    };
    assert_quiet(&blocked_unfair, "got a held unfair lock");

    a.close().into_result().unwrap();
    // Every outcome is checked, then all the wrong ones are reported together.
    let mut wrong = Vec::new();
    recv(&lost, WITHIN, "lost on close");
    if g.is_valid() {
        wrong.push("the guard is still valid after close".to_string());
    }
    for b in &blocked {
        match recv(b, WITHIN, "blocked acquire ended by close") {
            Err(Error::Closed) => {}
            other => wrong.push(format!(
                "blocked Mutex::acquire: expected Closed, got {other:?}"
            )),
        }
    }
    match recv(
        &blocked_unfair,
        WITHIN,
        "blocked unfair acquire ended by close",
    ) {
        Err(Error::Closed) => {}
        other => wrong.push(format!(
            "blocked UnfairMutex::acquire: expected Closed, got {other:?}"
        )),
    }
    // The session's nodes are gone with it.
    wait_children(&b, &path, &[]);
    match g.release() {
        Err(Error::LockLost { .. }) => {}
        other => wrong.push(format!(
            "release after close: expected LockLost, got {other:?}"
        )),
    }
    match lock.try_acquire() {
        Err(Error::Closed) => {}
        other => wrong.push(format!(
            "try_acquire on a closed client: expected Closed, got {other:?}"
        )),
    }
    assert!(held_by_b.is_valid());
    drop(held_by_b);
    wait_until(WITHIN, "the unfair node released", || {
        b.exists(&unfair_path).unwrap().is_none()
    });
    wrong
}

#[test]
fn closing_the_client_loses_its_locks_and_ends_its_blocked_acquires() {
    let cs = shared_cluster().connect_string();
    // A few rounds: some outcomes depend on which of two simultaneous wake-ups a waiter
    // sees first.
    let wrong: Vec<String> = (0..3).flat_map(|_| close_round(&cs)).collect();
    assert!(
        wrong.is_empty(),
        "after Client::close:\n{}",
        wrong.join("\n")
    );
}

/// P9: the server's watch count returns to where it was after contended cycles with
/// timeouts and cancels (no watch is left on a node that is gone or never existed), while
/// every client is still connected.
#[test]
fn the_servers_watch_count_returns_to_its_baseline_after_contention() {
    common::init_log();
    let cluster = zkguard::testing::TestCluster::start(1).unwrap();
    let total_watches = || {
        let out = cluster.four_letter(0, "wchs").unwrap();
        out.lines()
            .find_map(|l| l.strip_prefix("Total watches:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("unexpected wchs output: {out}"))
    };
    let cs = cluster.connect_string();
    let clients: Vec<Client> = (0..4)
        .map(|_| connect(&cs, Duration::from_secs(10)))
        .collect();
    let baseline = total_watches();
    let path = unique("mx-watches");
    let threads: Vec<_> = clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, c)| {
            let path = path.clone();
            std::thread::spawn(move || {
                let lock = Mutex::new(&c, &path).unwrap();
                for n in 0..40 {
                    // Some attempts give up while queued, leaving their blocker's watch to
                    // fire later; the rest hold briefly.
                    if (n + i) % 5 == 0 {
                        let _ = lock.acquire_timeout(Duration::from_millis(1)).unwrap();
                    } else {
                        let g = lock.acquire().unwrap();
                        g.release().unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Nodes are all gone, so every watch armed on them has fired and been removed.
    wait_until(
        Duration::from_secs(10),
        "watch count back to baseline",
        || total_watches() == baseline,
    );
    // An attempt that gave up before its create was answered leaves the node's deletion to
    // the background (it finds the node by its uuid): nothing is left once that is done.
    wait_until(Duration::from_secs(10), "no node left", || {
        children(&clients[0], &path).is_empty()
    });
}
