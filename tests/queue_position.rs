//! A waiter's place in line (`QueueEvent`, `queue_events()`): told when its node is made
//! (while it still waits: the node is there to see), its position as the queue moves, told
//! anew when it has to queue again, through the calls made of several acquires (a
//! semaphore's internal lock, then its lease), and for a background candidate each time it
//! queues.

mod common;

use std::time::Duration;

use common::{base, connect, recv, shared_cluster, spawn, unique, WITHIN};
use crossbeam_channel::Receiver;
use zkguard::{Client, LeaderElection, LeaderEvent, Mutex, QueueEvent, Semaphore};

const SESSION: Duration = Duration::from_secs(10);

fn next(rx: &Receiver<QueueEvent>, what: &str) -> QueueEvent {
    recv(rx, WITHIN, what)
}

/// The node a `Queued` event names.
fn queued(ev: QueueEvent) -> String {
    match ev {
        QueueEvent::Queued { node } => node,
        other => panic!("expected Queued, got {other:?}"),
    }
}

/// The position a `Position` event gives, for `node`.
fn ahead(ev: QueueEvent, node: &str) -> usize {
    match ev {
        QueueEvent::Position { node: n, ahead } if n == node => ahead,
        other => panic!("expected a Position of {node}, got {other:?}"),
    }
}

/// A waiter on its own client: it acquires, says so, and holds until told to let go.
struct Waiter {
    granted: Receiver<()>,
    release: crossbeam_channel::Sender<()>,
}

fn waiter(lock: Mutex) -> Waiter {
    let (release, told) = crossbeam_channel::bounded::<()>(1);
    let (granted_tx, granted) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let g = lock.acquire().unwrap();
        let _ = granted_tx.send(());
        let _ = told.recv();
        drop(g);
    });
    Waiter { granted, release }
}

/// The children of `dir` once there are `n`, in queue order.
fn queue_of(c: &Client, dir: &str, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    common::wait_until(WITHIN, "the queue to fill", || {
        names = common::children(c, dir);
        names.len() == n
    });
    names.sort_by_key(|n| n.rsplit('-').next().unwrap_or_default().to_string());
    names
}

#[test]
fn a_waiter_is_told_its_node_then_its_place_as_the_queue_moves() {
    let cs = shared_cluster().connect_string();
    let path = unique("pos");
    let admin = connect(&cs, SESSION);
    let holder = Mutex::new(&admin, &path).unwrap().acquire().unwrap();
    let mut ahead_of_me = Vec::new();
    for i in 0..2 {
        let c = connect(&cs, SESSION);
        ahead_of_me.push(waiter(Mutex::new(&c, &path).unwrap()));
        queue_of(&admin, &path, i + 2);
    }
    let c = connect(&cs, SESSION);
    let lock = Mutex::new(&c, &path).unwrap();
    let events = lock.queue_events();
    let mine = spawn(move || lock.acquire().map(|g| g.path().to_string()));
    let node = queued(next(&events, "Queued"));
    // Told while waiting, and the node is there: its place is reserved (CURATOR-592).
    assert!(admin.exists(&node).unwrap().is_some(), "{node} not there");
    assert_eq!(
        queue_of(&admin, &path, 4).last().map(String::as_str),
        Some(base(&node).as_str())
    );
    assert_eq!(ahead(next(&events, "first position"), &node), 3);
    // The queue moves: the holder goes, then the first waiter.
    drop(holder);
    recv(&ahead_of_me[0].granted, WITHIN, "the first waiter's grant");
    ahead_of_me[0].release.send(()).unwrap();
    recv(&ahead_of_me[1].granted, WITHIN, "the second waiter's grant");
    // The node two ahead went: a listing during the second waiter's turn says 1 (a slow
    // re-check may have said 2 before it).
    let mut seen = vec![3];
    while *seen.last().unwrap() > 1 {
        seen.push(ahead(next(&events, "a position"), &node));
    }
    ahead_of_me[1].release.send(()).unwrap();
    assert_eq!(recv(&mine, WITHIN, "our grant").unwrap(), node);
    seen.push(ahead(next(&events, "the grant's position"), &node));
    assert!(
        seen.windows(2).all(|w| w[1] < w[0]) && seen.last() == Some(&0),
        "positions out of order: {seen:?}"
    );
    assert!(events.try_recv().is_err(), "an event after the grant");
    admin.close();
    c.close();
}

#[test]
fn a_waiter_whose_node_is_deleted_is_told_its_new_node_and_place() {
    let cs = shared_cluster().connect_string();
    let path = unique("pos-requeue");
    let admin = connect(&cs, SESSION);
    let holder = Mutex::new(&admin, &path).unwrap().acquire().unwrap();
    let c = connect(&cs, SESSION);
    let lock = Mutex::new(&c, &path).unwrap();
    let events = lock.queue_events();
    let mine = spawn(move || lock.acquire().map(|g| g.path().to_string()));
    let first = queued(next(&events, "Queued"));
    assert_eq!(ahead(next(&events, "position"), &first), 1);
    admin.delete(&first, None).unwrap();
    let second = queued(next(&events, "Queued again"));
    assert_ne!(first, second, "queued again with a new node");
    assert_eq!(ahead(next(&events, "position again"), &second), 1);
    drop(holder);
    assert_eq!(recv(&mine, WITHIN, "our grant").unwrap(), second);
    assert_eq!(ahead(next(&events, "granted"), &second), 0);
    admin.close();
    c.close();
}

#[test]
fn a_semaphore_waiter_hears_of_its_internal_lock_node_then_its_lease() {
    let cs = shared_cluster().connect_string();
    let path = unique("pos-sem");
    let a = connect(&cs, SESSION);
    let permit = Semaphore::new(&a, &path, 1).unwrap().acquire().unwrap();
    let b = connect(&cs, SESSION);
    let sem = Semaphore::new(&b, &path, 1).unwrap();
    let events = sem.queue_events();
    let got = spawn(move || sem.acquire().map(|_| ()));
    let lock_node = queued(next(&events, "the internal lock's node"));
    assert!(
        lock_node.starts_with(&format!("{path}/locks/")),
        "{lock_node}"
    );
    assert_eq!(ahead(next(&events, "its position"), &lock_node), 0);
    let lease = queued(next(&events, "the lease"));
    assert!(lease.starts_with(&format!("{path}/leases/")), "{lease}");
    drop(permit);
    recv(&got, WITHIN, "the second permit").unwrap();
    a.close();
    b.close();
}

#[test]
fn a_candidate_hears_its_place_each_time_it_queues() {
    let cs = shared_cluster().connect_string();
    let path = unique("pos-cand");
    let (a, b) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let first = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let first_events = first.events();
    assert!(matches!(
        recv(&first_events, WITHIN, "a leads"),
        LeaderEvent::Elected { .. }
    ));
    let second = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    let places = second.queue_events();
    // Subscribed after the join: the first node may be told or not; its place behind the
    // leader is (the waiter lists after it subscribed at the latest on the hand-over).
    first.resign().unwrap();
    let mut aheads = Vec::new();
    while aheads.last() != Some(&0) {
        if let QueueEvent::Position { ahead, .. } = next(&places, "b's place") {
            aheads.push(ahead);
        }
    }
    // b leads now; it resigns and queues again behind a (which queued again on its
    // resign): a new node, one ahead, then 0 once a resigns again.
    let second_events = second.events();
    assert!(matches!(
        recv(&second_events, WITHIN, "b leads"),
        LeaderEvent::Elected { .. }
    ));
    second.resign().unwrap();
    let node = queued(next(&places, "b queued again"));
    assert_eq!(ahead(next(&places, "b behind a"), &node), 1);
    let elected = |e: &LeaderEvent| matches!(e, LeaderEvent::Elected { .. });
    while !elected(&recv(&first_events, WITHIN, "a leads again")) {}
    first.resign().unwrap();
    assert_eq!(ahead(next(&places, "b leads again"), &node), 0);
    drop((first, second));
    a.close();
    b.close();
}
