//! The mutexes against a real ZooKeeper server: exclusion and rising tokens, arrival order,
//! try / timeout / cancel leaving nothing behind, the re-entrant mutex, the unfair mutex, and
//! a release waking only the next two waiters (no herd). Rules every lock type shares:
//! `tests/locks.rs`.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use common::{
    assert_invalid_path, assert_quiet, base, children, connect, datas, expect_children, recv,
    shared_cluster, spawn, unique, wait_children, wait_until, watches_by_path, WITHIN,
};
use zkguard::{Client, CreateMode, Error, Mutex, ReentrantMutex, UnfairMutex};

/// Session timeout for clients whose session is not the point of the test.
const SESSION: Duration = Duration::from_secs(10);

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
// 7. UnfairMutex
// ---------------------------------------------------------------------------------------

/// A blocked unfair acquire races again as soon as the holder lets go, not at its slow
/// re-check (a session timeout later: 60 s here): its wait sleeps on a bell the watch on the
/// held node rings.
#[test]
fn an_unfair_waiter_races_again_as_soon_as_the_holder_lets_go() {
    let cs = shared_cluster().connect_string();
    let path = unique("unfair-wake");
    let a = connect(&cs, SESSION);
    // The longest session the harness grants: the waiter's slow re-check is that far off.
    let b = connect(&cs, Duration::from_secs(60));
    let g = UnfairMutex::new(&a, &path).unwrap().acquire().unwrap();
    let waiter = {
        let lock_b = UnfairMutex::new(&b, &path).unwrap();
        spawn(move || lock_b.acquire())
    };
    let session_b = format!("0x{:x}", b.session_id() as u64);
    wait_until(WITHIN, "the waiter watches the held node", || {
        watches_by_path()
            .get(&path)
            .is_some_and(|s| s.contains(&session_b))
    });
    assert_quiet(&waiter, "acquired while the lock is held");
    drop(g);
    let gb = recv(&waiter, WITHIN, "the waiter's acquire").unwrap();
    assert_eq!(gb.path(), path);
}

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
    let holder_a = lock_b.holder().unwrap().expect("a holder");
    assert!(
        holder_a.holds && path.ends_with(&format!("/{}", holder_a.node)),
        "{holder_a:?}"
    );
    let id_a = holder_a.data;
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
        lock_b.holder().unwrap().map(|p| p.data),
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
            in_tx.send(lock_b.holder().unwrap().unwrap().data).unwrap();
            go_rx.recv().unwrap();
            g.release().unwrap();
        })
    };
    assert_quiet(&in_rx, "B got a held lock");
    drop(ga);
    let id_b = recv(&in_rx, WITHIN, "B acquired");
    assert_ne!(id_b, id_a);
    assert_eq!(lock_a.holder().unwrap().map(|p| p.data), Some(id_b));
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
    let id_c = lock_c.holder().unwrap().expect("C holds").data;
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
    let (queue, owners) = common::queue_and_owners(&client, &path);
    let ours = |w: &HashMap<String, Vec<String>>| -> HashMap<String, Vec<String>> {
        w.iter()
            .filter(|(p, _)| **p == path || p.starts_with(&format!("{path}/")))
            .map(|(p, s)| (p.clone(), s.clone()))
            .collect()
    };
    // Each waiter watches the node right before it, the one before that, and its own, and
    // nothing else; the holder watches its own node.
    let want = common::queue_watches(&queue, &owners);
    let mut watches = HashMap::new();
    wait_until(WITHIN, "every waiter watching", || {
        watches = common::sorted_watchers(ours(&watches_by_path()));
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
