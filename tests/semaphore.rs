//! The semaphore on Curator's `InterProcessSemaphoreV2` protocol, against a real ZooKeeper
//! server: never more holders than permits, the permit count recorded and another count
//! refused, no permit left idle whatever the release order, a bounded number of
//! notifications per release, what happens when the internal lock is lost or a waiter gives
//! up, and paths that hold another recipe's nodes. (Mixed with the real Curator:
//! `tests/curator.rs`.)

mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::partition::partition;
use common::{
    assert_quiet, base, children, connect, expect_children, recv, shared_cluster, spawn, unique,
    wait_children, wait_event, wait_until, WITHIN,
};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Client, CreateMode, Error, Mutex, Permit, Semaphore, SessionEvent};

const SESSION: Duration = Duration::from_secs(10);

fn leases(c: &Client, path: &str) -> Vec<String> {
    children(c, &format!("{path}/leases"))
}

fn locks(c: &Client, path: &str) -> Vec<String> {
    children(c, &format!("{path}/locks"))
}

/// The server's watch count (`mntr`'s `zk_watch_count`): data and child watches.
fn watch_count(cluster: &TestCluster) -> usize {
    let mntr = cluster.four_letter(0, "mntr").expect("mntr");
    mntr.lines()
        .find_map(|l| l.strip_prefix("zk_watch_count")?.trim().parse().ok())
        .expect("zk_watch_count in mntr")
}

/// Waits until nothing of any contender is left under the semaphore.
fn wait_empty(c: &Client, path: &str) {
    wait_until(WITHIN, "no lease and no internal-lock node left", || {
        leases(c, path).is_empty() && locks(c, path).is_empty()
    });
}

/// An acquire on its own client and thread; the receiver gets the permit (and the client,
/// which must outlive it).
fn acquire_on(
    cs: &str,
    path: &str,
    permits: u32,
    session: Duration,
) -> crossbeam_channel::Receiver<(Client, Permit)> {
    let (cs, path) = (cs.to_string(), path.to_string());
    spawn(move || {
        let c = connect(&cs, session);
        let p = Semaphore::new(&c, &path, permits)
            .unwrap()
            .acquire()
            .unwrap();
        (c, p)
    })
}

/// Whether a lease waits beyond the permits (told by `participants()` alone, so that this
/// test reads the same on any layout).
fn waiting_lease(sem: &Semaphore) -> bool {
    let p = sem.participants().unwrap();
    p.iter().filter(|x| x.holds).count() == sem.permits() as usize
        && p.iter().any(|x| !x.holds && x.node.contains("-lease-"))
}

/// The old layout's waiter watched the node `permits` places ahead of it: a holder that
/// released out of arrival order left its permit idle until that node went or a slow
/// re-check (one session timeout) came. The sessions here are long (30 s) and the test
/// waits less than that, so only a waiter that is told about every release passes.
#[test]
fn a_permit_freed_out_of_arrival_order_is_taken_without_waiting_for_a_recheck() {
    let cs = shared_cluster().connect_string();
    let path = unique("sem-order");
    let long = Duration::from_secs(30);
    let c = connect(&cs, long);
    let sem = Semaphore::new(&c, &path, 3).unwrap();
    let held: Vec<Permit> = (0..3).map(|_| sem.acquire().unwrap()).collect();
    let waiter = acquire_on(&cs, &path, 3, long);
    wait_until(WITHIN, "the waiter's lease counted", || waiting_lease(&sem));
    assert_quiet(&waiter, "a fourth holder of 3 permits");
    // Release the newest holder first, then the middle one: neither is the oldest.
    let mut held = held.into_iter();
    let (first, second, third) = (
        held.next().unwrap(),
        held.next().unwrap(),
        held.next().unwrap(),
    );
    third.release().unwrap();
    let (_wc, w) = recv(
        &waiter,
        Duration::from_secs(15),
        "the waiter's permit after the newest holder released",
    );
    assert!(w.is_valid());
    let waiter2 = acquire_on(&cs, &path, 3, long);
    wait_until(WITHIN, "the second waiter's lease counted", || {
        waiting_lease(&sem)
    });
    second.release().unwrap();
    let (_wc2, w2) = recv(
        &waiter2,
        Duration::from_secs(15),
        "the second waiter's permit after the middle holder released",
    );
    assert!(w.token() < w2.token(), "tokens rise with later leases");
    drop((first, w, w2));
    wait_empty(&c, &path);
}

/// One release: the lease's deletion notifies the internal-lock holder (it takes the
/// permit), and its letting go of the internal lock notifies the next contender in that
/// queue. Nobody else hears of it.
#[test]
fn one_release_notifies_two_contenders_and_nobody_else() {
    // A server of its own: its watch count (`mntr`) is this test's alone.
    let cluster = TestCluster::start(1).unwrap();
    let cs = cluster.connect_string();
    let path = unique("sem-herd");
    let c = connect(&cs, SESSION);
    let sem = Semaphore::new(&c, &path, 2).unwrap();
    let h1 = sem.acquire().unwrap();
    let h2 = sem.acquire().unwrap();
    let clients: Vec<Client> = (0..8).map(|_| connect(&cs, SESSION)).collect();
    let (in_tx, in_rx) = crossbeam_channel::unbounded();
    let (go_tx, go_rx) = crossbeam_channel::unbounded::<()>();
    let done: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let (w, path, in_tx, go_rx) = (w.clone(), path.clone(), in_tx.clone(), go_rx.clone());
            spawn(move || {
                let p = Semaphore::new(&w, &path, 2).unwrap().acquire().unwrap();
                in_tx.send(i).unwrap();
                go_rx.recv().unwrap();
                p.release().unwrap();
            })
        })
        .collect();
    // Settled: one contender waits with a lease (3 leases), all 8 are queued on the
    // internal lock (its holder included).
    wait_until(
        WITHIN,
        "8 contenders queued, one waiting with a lease",
        || leases(&c, &path).len() == 3 && locks(&c, &path).len() == 8,
    );
    // Every contender has armed its watches (the server says so), or a release could pass
    // unnoticed by the count below: on the internal lock, each one watches its own node and
    // the two before it (the holder its own); the holder also watches the lease list, a
    // child watch, which `wchp` does not show but `mntr`'s count does.
    let (queue, owners) = common::queue_and_owners(&c, &format!("{path}/locks"));
    let want = common::queue_watches(&queue, &owners);
    wait_until(WITHIN, "every contender watching", || {
        // Watches are only added until the release: the same count before and after the
        // listing is the count of the listing.
        let count = watch_count(&cluster);
        let by_path = common::watches_on(&cluster);
        if watch_count(&cluster) != count {
            return false;
        }
        let data: usize = by_path.values().map(Vec::len).sum();
        let on_locks = by_path
            .into_iter()
            .filter(|(p, _)| p.starts_with(&format!("{path}/locks/")))
            .collect();
        common::sorted_watchers(on_locks) == want && count == data + 1
    });
    let before: Vec<u64> = clients.iter().map(|w| w.stats().watch_events).collect();
    h1.release().unwrap();
    let first = recv(&in_rx, WITHIN, "a waiter got the freed permit");
    // The next contender takes the internal lock and waits with its lease.
    wait_until(WITHIN, "the next contender waiting with its lease", || {
        leases(&c, &path).len() == 3 && locks(&c, &path).len() == 7
    });
    // A notification reaches a session before the reply to any later read that sees the
    // change, so after these reads every notification of the release has been counted.
    for w in &clients {
        w.sync(&path).unwrap();
        let _ = w.get_children(&format!("{path}/leases")).unwrap();
    }
    let deltas: Vec<u64> = clients
        .iter()
        .zip(&before)
        .map(|(w, b)| w.stats().watch_events - b)
        .collect();
    // The one that got in: the lease list's change, and the deletion of its own
    // internal-lock node (it watched that node while it waited). The next two in the
    // internal lock's queue: that deletion (the next takes the lock; the one after it lists
    // the queue again, so that its own turn needs no round trip). Nobody else.
    assert_eq!(
        deltas[first], 2,
        "the one that got in: lease list + own lock node: {deltas:?}"
    );
    let others: u64 = deltas
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != first)
        .map(|(_, d)| d)
        .sum();
    assert_eq!(
        others, 2,
        "notifications to the other contenders: {deltas:?}"
    );
    drop(h2);
    for _ in 0..8 {
        go_tx.send(()).unwrap();
    }
    for d in &done {
        recv(d, WITHIN, "contender done");
    }
    wait_empty(&c, &path);
}

/// A waiter whose internal-lock node is deleted by someone else must give up its lease and
/// queue again: a second waiter then takes the internal lock, and two waiting leases would
/// each count the other forever (1 permit: holder gone, 2 leases, neither gets in).
#[test]
fn a_waiter_that_loses_the_internal_lock_requeues_instead_of_blocking_the_next() {
    let cs = shared_cluster().connect_string();
    let path = unique("sem-lostlock");
    let c = connect(&cs, SESSION);
    let sem = Semaphore::new(&c, &path, 1).unwrap();
    let holder = sem.acquire().unwrap();
    let w1 = acquire_on(&cs, &path, 1, SESSION);
    wait_until(WITHIN, "the first waiter's lease", || {
        leases(&c, &path).len() == 2
    });
    let lock_nodes = locks(&c, &path);
    assert_eq!(
        lock_nodes.len(),
        1,
        "the first waiter holds the internal lock"
    );
    // Someone deletes the waiter's internal-lock node.
    c.delete(&format!("{path}/locks/{}", lock_nodes[0]), None)
        .unwrap();
    // It notices, deletes its lease, and queues on the internal lock again.
    wait_until(WITHIN, "the first waiter's lease gone or renewed", || {
        let l = leases(&c, &path);
        let k = locks(&c, &path);
        l.len() == 2 && k.len() == 1 && k[0] != lock_nodes[0]
    });
    let w2 = acquire_on(&cs, &path, 1, SESSION);
    wait_until(WITHIN, "the second waiter queued", || {
        locks(&c, &path).len() == 2
    });
    holder.release().unwrap();
    // Both get in, one after the other.
    let (first, second) = crossbeam_channel::select! {
        recv(w1) -> p => (p.expect("first waiter"), w2),
        recv(w2) -> p => (p.expect("second waiter"), w1),
        recv(crossbeam_channel::after(WITHIN)) -> _ => panic!("nobody got the freed permit (two waiting leases?)"),
    };
    assert_quiet(&second, "a second holder of 1 permit");
    drop(first);
    let last = recv(&second, WITHIN, "the other waiter's permit");
    drop(last);
    wait_empty(&c, &path);
}

/// A waiter holding the semaphore's internal lock behind the one permit's holder.
struct AtTheGate {
    c: Client,
    path: String,
    holder: Permit,
    waiter: crossbeam_channel::Receiver<(Client, Permit)>,
    /// The internal lock's one node, the waiter's, and its path.
    lock_nodes: Vec<String>,
    gate: String,
}

impl AtTheGate {
    fn new(name: &str) -> AtTheGate {
        let cs = shared_cluster().connect_string();
        let path = unique(name);
        let c = connect(&cs, SESSION);
        let holder = Semaphore::new(&c, &path, 1).unwrap().acquire().unwrap();
        let waiter = acquire_on(&cs, &path, 1, SESSION);
        wait_until(WITHIN, "the waiter's lease", || {
            leases(&c, &path).len() == 2
        });
        let lock_nodes = locks(&c, &path);
        assert_eq!(lock_nodes.len(), 1, "the waiter holds the internal lock");
        let gate = format!("{path}/locks/{}", lock_nodes[0]);
        AtTheGate {
            c,
            path,
            holder,
            waiter,
            lock_nodes,
            gate,
        }
    }

    /// Once its internal-lock node went: the waiter queues again (a new node there, its
    /// lease other than `lease_before`), waits while the holder holds, and gets the permit
    /// once it is released; nothing is left.
    fn queues_again_and_is_served(self, lease_before: &[String]) {
        let (c, path) = (&self.c, &self.path);
        wait_until(
            WITHIN,
            "the waiter queued again with a new internal-lock node",
            || {
                let k = locks(c, path);
                k.len() == 1 && k[0] != self.lock_nodes[0] && leases(c, path) != lease_before
            },
        );
        assert_quiet(&self.waiter, "a permit while the holder holds the only one");
        drop(self.holder);
        let (_wc, p) = recv(&self.waiter, WITHIN, "the waiter's permit");
        assert!(p.is_valid());
        drop(p);
        wait_empty(c, path);
    }
}

/// A waiter with the internal lock watches its node there: another client writing data on
/// that node is no loss (the waiter keeps its place and watches the node again), and the
/// node's deletion after that is still seen: the waiter deletes its lease and queues again.
#[test]
fn a_waiter_keeps_watching_its_internal_lock_node_after_a_write_on_it() {
    let t = AtTheGate::new("sem-gate-write");
    let (c, path, gate) = (&t.c, &t.path, &t.gate);
    let lease_before = leases(c, path);
    // A write on the waiter's internal-lock node: its watch fires, and nothing is lost.
    c.set_data(gate, b"written", None).unwrap();
    // The waiter lists the leases again after the write (arming its watches anew); wait
    // until the server holds a data watch on the node again, by its session.
    wait_until(WITHIN, "the internal-lock node watched again", || {
        common::watches_by_path().contains_key(gate)
    });
    assert_eq!(leases(c, path), lease_before, "the waiter kept its lease");
    assert_eq!(
        locks(c, path),
        t.lock_nodes,
        "the waiter kept the internal lock"
    );
    assert_quiet(&t.waiter, "a permit while the holder holds the only one");
    // Now someone deletes it: the waiter notices and queues again.
    c.delete(gate, None).unwrap();
    t.queues_again_and_is_served(&lease_before);
}

/// A waiter whose internal-lock node goes in the same transaction as a write on it hears
/// only the write (a data watch fires once): it finds the node gone when it lists the
/// leases again and reads the node to watch it anew. That `NoNode` is its node lost, as the
/// deletion's event would be: it queues again and gets the permit once one is free (not an
/// error: that is what the lease phase's `failed(e, true)` says; with `false` this acquire
/// failed with `NoNode`).
#[test]
fn a_waiter_whose_internal_lock_node_goes_unheard_queues_again() {
    let t = AtTheGate::new("sem-gate-unheard");
    let (c, path, gate) = (&t.c, &t.path, &t.gate);
    wait_until(WITHIN, "the internal-lock node watched", || {
        common::watches_by_path().contains_key(gate)
    });
    let lease_before = leases(c, path);
    c.multi(&[
        zkguard::Op::SetData {
            path: gate.clone(),
            data: b"written".to_vec(),
            version: None,
        },
        zkguard::Op::Delete {
            path: gate.clone(),
            version: None,
        },
    ])
    .unwrap();
    t.queues_again_and_is_served(&lease_before);
}

/// A waiter that gives up (timeout, cancel) while waiting with the internal lock deletes
/// its lease and lets the internal lock go, so the contender behind it moves up.
#[test]
fn a_waiter_giving_up_with_the_internal_lock_leaves_nothing_and_hands_it_on() {
    let cs = shared_cluster().connect_string();
    let path = unique("sem-giveup");
    let c = connect(&cs, SESSION);
    let sem = Semaphore::new(&c, &path, 1).unwrap();
    let holder = sem.acquire().unwrap();

    // Timeout.
    let a = connect(&cs, SESSION);
    let sem_a = Semaphore::new(&a, &path, 1).unwrap();
    let timed = spawn(move || sem_a.acquire_timeout(Duration::from_millis(1500)));
    wait_until(WITHIN, "the timing-out waiter's lease", || {
        leases(&c, &path).len() == 2
    });
    let behind = acquire_on(&cs, &path, 1, SESSION);
    wait_until(WITHIN, "a contender behind it", || {
        locks(&c, &path).len() == 2
    });
    assert!(recv(&timed, WITHIN, "the timed acquire").unwrap().is_none());
    // The one behind now waits with the internal lock and its own lease.
    wait_until(WITHIN, "the contender behind moved up", || {
        leases(&c, &path).len() == 2 && locks(&c, &path).len() == 1
    });

    // Cancel: the one now waiting is cancelled from another thread.
    let b = connect(&cs, SESSION);
    let sem_b = Semaphore::new(&b, &path, 1).unwrap();
    let canceller = sem_b.canceller();
    let cancelled = spawn(move || sem_b.acquire().map(drop));
    wait_until(WITHIN, "a third contender queued", || {
        locks(&c, &path).len() == 2
    });
    canceller.cancel();
    match recv(&cancelled, WITHIN, "the cancelled acquire") {
        Err(Error::Cancelled { path: p }) => assert_eq!(p, path),
        other => panic!("expected Cancelled, got {other:?}"),
    }
    wait_until(WITHIN, "the cancelled contender's node gone", || {
        locks(&c, &path).len() == 1 && leases(&c, &path).len() == 2
    });
    drop(holder);
    let (_bc, p) = recv(&behind, WITHIN, "the contender behind got the permit");
    assert!(p.is_valid());
    drop(p);
    wait_empty(&c, &path);
}

/// A semaphore pointed at another recipe's directory, or at the lease nodes of zkguard's
/// earlier layout (directly under the path), is refused, naming the node, and writes
/// nothing there (not even its permit count). Another recipe pointed at a semaphore is
/// refused too.
#[test]
fn a_semaphore_refuses_a_path_holding_other_nodes_and_changes_nothing() {
    let cs = shared_cluster().connect_string();
    let c = connect(&cs, SESSION);

    let mutex_path = unique("sem-foreign");
    let guard = Mutex::new(&c, &mutex_path).unwrap().acquire().unwrap();
    match Semaphore::new(&c, &mutex_path, 2) {
        Err(Error::ForeignNode { path, node }) => {
            assert_eq!(path, mutex_path);
            assert_eq!(node, base(guard.path()));
        }
        other => panic!("expected ForeignNode, got {other:?}"),
    }
    let (data, _) = c.get_data(&mutex_path).unwrap();
    assert!(data.is_empty(), "the permit count was written: {data:?}");
    assert_eq!(children(&c, &mutex_path), vec![base(guard.path())]);
    drop(guard);

    let old_layout = unique("sem-old");
    c.create(&old_layout, b"", CreateMode::Persistent).unwrap();
    let lease = c
        .create(
            &format!("{old_layout}/_c_0c0a2b9d-3a4f-4c7e-8e7e-2f0c8a4355a5-lease-"),
            b"old",
            CreateMode::EphemeralSequential,
        )
        .unwrap();
    let err = Semaphore::new(&c, &old_layout, 2).unwrap_err();
    match &err {
        Error::ForeignNode { path, node } => {
            assert_eq!(path, &old_layout);
            assert_eq!(node, &base(&lease.path));
        }
        other => panic!("expected ForeignNode, got {other:?}"),
    }
    assert!(err.to_string().contains(&old_layout), "{err}");
    assert!(c.get_data(&old_layout).unwrap().0.is_empty());
    assert_eq!(children(&c, &old_layout), vec![base(&lease.path)]);

    // The other way round: a mutex on a semaphore's path.
    let sem_path = unique("sem-taken");
    let sem = Semaphore::new(&c, &sem_path, 2).unwrap();
    let permit = sem.acquire().unwrap();
    match Mutex::new(&c, &sem_path).unwrap().try_acquire() {
        Err(Error::ForeignNode { path, node }) => {
            assert_eq!(path, sem_path);
            assert!(node == "leases" || node == "locks", "{node}");
        }
        other => panic!("expected ForeignNode, got {other:?}"),
    }
    drop(permit);
    wait_empty(&c, &sem_path);
}

/// `participants()` lists the leases in order (the first `permits` hold), then the
/// contenders queued on the internal lock, none holding.
#[test]
fn participants_list_leases_then_the_internal_lock_queue() {
    let cs = shared_cluster().connect_string();
    let path = unique("sem-part");
    let c = connect(&cs, SESSION);
    let sem = Semaphore::new(&c, &path, 1).unwrap().with_data("holder");
    assert!(sem.participants().unwrap().is_empty());
    let held = sem.acquire().unwrap();
    let w = connect(&cs, SESSION);
    let sem_w = Semaphore::new(&w, &path, 1).unwrap().with_data("waiter");
    let waiting = spawn(move || sem_w.acquire().map(drop));
    wait_until(WITHIN, "the waiter's lease", || {
        leases(&c, &path).len() == 2
    });
    wait_until(WITHIN, "the holder's internal lock let go", || {
        locks(&c, &path).len() == 1
    });
    let p = sem.participants().unwrap();
    let seen: Vec<(String, bool)> = p.iter().map(|p| (p.id(), p.holds)).collect();
    assert_eq!(
        seen,
        vec![
            ("holder".to_string(), true),
            ("waiter".to_string(), false),
            ("waiter".to_string(), false),
        ],
        "{p:?}"
    );
    assert_eq!(p[0].node, base(held.path()));
    assert!(
        p[0].node.contains("-lease-") && p[2].node.contains("-lock-"),
        "{p:?}"
    );
    drop(held);
    recv(&waiting, WITHIN, "the waiter's permit").unwrap();
    wait_empty(&c, &path);
}

/// A contender whose session expires while it queues for the internal lock queues again in
/// its new session; the news of that expiry (read late, once it waits for a permit) must
/// not send it to the back again. With 1 permit: H holds, X waits with the internal lock,
/// W queues behind X, W's session expires and W queues again, Y queues behind W. Then the
/// permit goes H → X → W → Y, in that order.
#[test]
fn late_news_of_an_earlier_session_does_not_send_a_waiter_to_the_back() {
    let (cluster, proxy) = partition(1);
    let cs = cluster.connect_string();
    let path = unique("sem-late-news");
    let c = connect(&cs, SESSION);
    let sem = Semaphore::new(&c, &path, 1).unwrap();
    let h = sem.acquire().unwrap();
    let x = acquire_on(&cs, &path, 1, SESSION);
    wait_until(WITHIN, "X waits with the internal lock", || {
        leases(&c, &path).len() == 2
    });
    let w_client = connect(&proxy.connect_string(), Duration::from_secs(2));
    let w_events = w_client.events();
    let old = w_client.session_id();
    let w = {
        let (wc, path) = (w_client.clone(), path.clone());
        spawn(move || Semaphore::new(&wc, &path, 1).unwrap().acquire().unwrap())
    };
    wait_until(WITHIN, "W queued on the internal lock", || {
        locks(&c, &path).len() == 2
    });
    proxy.blackhole();
    wait_event(&w_events, WITHIN, "W's session lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    proxy.heal();
    wait_event(
        &w_events,
        WITHIN,
        "W's new session",
        |e| matches!(e, SessionEvent::Connected { session_id } if *session_id != old),
    );
    wait_until(WITHIN, "W queued again in its new session", || {
        locks(&c, &path).len() == 2
    });
    let y = acquire_on(&cs, &path, 1, SESSION);
    wait_until(WITHIN, "Y queued behind W", || locks(&c, &path).len() == 3);

    drop(h);
    let (_xc, px) = recv(&x, WITHIN, "X's permit");
    // W takes the internal lock and waits with its lease, reading the late news now.
    wait_until(WITHIN, "W waits with its lease", || {
        leases(&c, &path).len() == 2 && locks(&c, &path).len() == 2
    });
    drop(px);
    let pw = recv(&w, WITHIN, "W's permit (before Y's)");
    assert_quiet(&y, "Y got a permit while W holds the only one");
    drop(pw);
    let (_yc, py) = recv(&y, WITHIN, "Y's permit");
    drop(py);
    wait_empty(&c, &path);
}

#[test]
fn an_internal_lock_release_lost_on_the_wire_is_sent_again_after_the_reconnect() {
    // The permit's holder lets the internal lock go without waiting for the reply. Here
    // that delete never reaches the server (the proxy holds it back and then drops it, and
    // the connection breaks): the janitor must send it again on the same session once the
    // client is back, or the internal lock stays held, and every later contender waits
    // behind it, for as long as the holder's session lives.
    let cluster = shared_cluster();
    let proxy = FaultProxy::for_cluster(cluster).unwrap();
    let observer = connect(&cluster.connect_string(), SESSION);
    let c = connect(&proxy.connect_string(), SESSION);
    let path = unique("sem-lost-release");
    let sem = Semaphore::new(&c, &path, 2).unwrap();
    let events = c.events();
    let session = c.session_id();

    proxy.delay(Duration::from_millis(500));
    let permit = sem.acquire().unwrap();
    // The internal lock's delete is in the proxy's queue for half a second: dropped here.
    proxy.blackhole();
    assert_eq!(
        locks(&observer, &path).len(),
        1,
        "the delete got through too early"
    );
    // The connection breaks with the delete still held back; the client comes back to its
    // session over a new one.
    proxy.reset();
    proxy.heal();
    wait_event(&events, WITHIN, "reconnected", |e| {
        matches!(e, SessionEvent::Reconnected { .. })
    });
    wait_until(
        WITHIN,
        "the internal lock released after the reconnect",
        || locks(&observer, &path).is_empty(),
    );
    assert_eq!(
        c.session_id(),
        session,
        "released by a session change, not a resend"
    );
    assert!(permit.is_valid());
    assert_eq!(leases(&observer, &path).len(), 1);
    // Another contender gets the second permit at once.
    let other = Semaphore::new(&observer, &path, 2).unwrap();
    assert!(other.try_acquire().unwrap().is_some());
    drop(permit);
}

/// A try that finds the internal lock taken while a permit is free waits for its holder
/// (who is then taking that permit and lets go within a round trip or two) and gets the
/// other permit once it is let go; with every permit taken, a try behind the internal lock
/// says no and leaves nothing behind. The internal lock is held here by another session's
/// node, put there by hand and deleted when the test says so.
#[test]
fn a_try_behind_the_internal_lock_waits_only_while_a_permit_is_free() {
    let cs = shared_cluster().connect_string();
    let path = unique("sem-try-gate");
    let c = connect(&cs, SESSION);
    let sem = Semaphore::new(&c, &path, 2).unwrap();
    let first = sem.acquire().unwrap();
    let other = connect(&cs, SESSION);
    // The internal lock's directory is a container: the server may reap it whenever it is
    // empty (after the first acquire let its internal lock go, the test once found it gone:
    // NoNode). So it is made again, as the recipe itself does, until the node is in.
    let hold_gate = || loop {
        match other.create(
            &format!("{path}/locks/_c_00000000-0000-0000-0000-000000000000-lock-"),
            b"",
            CreateMode::EphemeralSequential,
        ) {
            Ok(created) => break created.path,
            Err(Error::NoNode { .. }) => {
                match other.create(&format!("{path}/locks"), b"", CreateMode::Container) {
                    Ok(_) | Err(Error::NodeExists { .. }) => {}
                    Err(e) => panic!("making the internal lock's directory: {e:?}"),
                }
            }
            Err(e) => panic!("holding the internal lock by hand: {e:?}"),
        }
    };

    // One permit free: the try waits behind the internal lock (its request timeout is
    // long, so only the holder's going ends its wait) and takes the permit.
    let gate = hold_gate();
    let t = Client::builder(&cs)
        .session_timeout(SESSION)
        .request_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let sem_t = Semaphore::new(&t, &path, 2).unwrap();
    let tried = spawn(move || sem_t.try_acquire().unwrap().map(|p| (t, p)));
    wait_until(WITHIN, "the try queued behind the internal lock", || {
        locks(&c, &path).len() == 2
    });
    assert_quiet(&tried, "a try past an internal lock that is held");
    other.delete(&gate, None).unwrap();
    let (t, second) = recv(&tried, WITHIN, "the try").expect("the free permit");
    assert!(second.is_valid());
    wait_until(WITHIN, "the try's internal-lock node let go", || {
        locks(&c, &path).is_empty()
    });

    // No permit free: the try says no at once, and leaves neither a lease nor a lock node.
    // On `t`, whose request timeout is long: a try that waited for its turn here (a gate
    // that thought a permit free, `try_waits`) would wait for the internal lock's holder,
    // who lets go only after this try has answered.
    let gate = hold_gate();
    let sem_n = Semaphore::new(&t, &path, 2).unwrap();
    let refused = spawn(move || sem_n.try_acquire().unwrap().is_none());
    assert!(
        recv(
            &refused,
            WITHIN,
            "the try with no permit free, the internal lock held"
        ),
        "a try got a permit though both were taken"
    );
    wait_until(WITHIN, "nothing of the refused try left", || {
        locks(&c, &path) == [gate.rsplit('/').next().unwrap().to_string()]
            && leases(&c, &path).len() == 2
    });
    other.delete(&gate, None).unwrap();
    drop((first, second));
    wait_empty(&c, &path);
}

/// A try that cannot reach ZooKeeper times out naming the semaphore's own path (not the
/// internal directory it queues in), built with it where the timeout happens.
#[test]
fn a_try_without_zookeeper_times_out_naming_the_semaphore() {
    let cluster = TestCluster::start(1).unwrap();
    let c = connect(&cluster.connect_string(), SESSION);
    let path = unique("sem-try-down");
    let sem = Semaphore::new(&c, &path, 1).unwrap();
    let events = c.events();
    cluster.stop(0).unwrap();
    wait_event(&events, WITHIN, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    match sem.try_acquire() {
        Err(Error::Timeout { op, path: p, after }) => {
            assert_eq!((op, p.as_str()), ("try_acquire", path.as_str()));
            assert_eq!(after, c.timeout());
        }
        other => panic!("expected a timeout naming {path}, got {other:?}"),
    }
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
    // Made before any count is recorded: accepted, its first acquire decides.
    let early = Semaphore::new(&client, &path, 5).unwrap();
    // The first acquire records the count: another count on the same path is refused, by
    // `new` from now on, and by the first acquire of a semaphore made earlier.
    drop(sem.acquire().unwrap());
    match early.try_acquire() {
        Err(Error::PermitMismatch {
            path: p,
            recorded: 3,
            requested: 5,
        }) => assert_eq!(p, path),
        other => panic!("expected PermitMismatch from the first acquire, got {other:?}"),
    }
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

/// `zkguard::revoke` on a permit's lease node (its guard's `path()`, as
/// `participants()` lists it under `leases`) reaches that permit's holder alone, and is no
/// loss; the holder lets go and a waiter takes the permit.
#[test]
fn a_revoked_permits_holder_is_told_and_the_other_holder_is_not() {
    let cs = shared_cluster().connect_string();
    let (x, other) = (
        connect(&cs, Duration::from_secs(10)),
        connect(&cs, Duration::from_secs(10)),
    );
    let path = unique("sem-revoke");
    let sem = Semaphore::new(&x, &path, 2).unwrap();
    let (p1, p2) = (sem.acquire().unwrap(), sem.acquire().unwrap());
    let (r1, r2) = (p1.revocation(), p2.revocation());
    assert!(
        p1.path().starts_with(&format!("{path}/leases/")),
        "{}",
        p1.path()
    );
    let waiting = {
        let sem = Semaphore::new(&other, &path, 2).unwrap();
        spawn(move || sem.acquire().unwrap())
    };
    zkguard::revoke(&other, p1.path()).unwrap();
    recv(&r1, WITHIN, "the revoked permit's holder told");
    assert!(p1.is_valid(), "a request is not a loss");
    p1.confirm().unwrap();
    assert_quiet(&r2, "the other permit's holder told");
    drop(p1);
    let p3 = recv(&waiting, WITHIN, "the waiter takes the permit let go");
    p3.confirm().unwrap();
    assert!(r2.try_recv().is_err());
}
