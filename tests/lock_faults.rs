//! Lock recipes under faults, against real servers: servers killed and restarted under a
//! contended mutex, partitions through the fault proxy, sessions expiring while holding or
//! waiting, clients closed while holding, bounded acquires during a partition.
//!
//! Every test starts its own cluster. Assertions are about orderings (who acquired before
//! whom, what fired before what), with generous deadlines only to turn a hang into a
//! failure. The overlap detector and its contending workers: `tests/common/exclusion.rs`.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::exclusion::{hold_briefly, wait_holds, worker, Arena, WorkerStats};
use common::partition::{partition, server_of, wait_server_of};
use common::{
    children, connect, expect_reconnected, init_log, unique, wait_event, wait_until, WITHIN,
};
use crossbeam_channel::Receiver;
use zkguard::testing::TestCluster;
use zkguard::{Client, Error, EventType, Mutex, MutexGuard, SessionEvent, SessionState};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// What a background acquire reports.
struct Acquired {
    /// When `acquire` returned.
    at: Instant,
    result: zkguard::Result<MutexGuard>,
    /// Whether the previous holder's `lost()` had fired by the time `acquire` returned
    /// (`None` when not asked).
    previous_lost: Option<bool>,
}

/// Runs `lock.acquire()` on a thread. If `previous_lost` (a `lost()` receiver of the
/// current holder's guard) is given, the moment `acquire` returns it also looks whether
/// that had fired: the holder must know it lost the lock before anyone else has it.
fn spawn_acquire(lock: Mutex, previous_lost: Option<Receiver<()>>) -> Receiver<Acquired> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    thread::spawn(move || {
        let result = lock.acquire();
        let at = Instant::now();
        let previous_lost = previous_lost.map(|l| l.try_recv().is_ok());
        let _ = tx.send(Acquired {
            at,
            result,
            previous_lost,
        });
    });
    rx
}

/// Waits for a background acquire to succeed: when it returned, whether the previous
/// holder had reported lost by then, and the guard.
fn expect_acquired(
    rx: &Receiver<Acquired>,
    within: Duration,
    who: &str,
) -> (Instant, Option<bool>, MutexGuard) {
    match rx.recv_timeout(within) {
        Ok(Acquired {
            at,
            result: Ok(g),
            previous_lost,
        }) => (at, previous_lost, g),
        Ok(Acquired { result: Err(e), .. }) => panic!("{who}: acquire failed: {e}"),
        Err(_) => panic!("{who}: did not acquire within {within:?}"),
    }
}

/// A thread that records the instant `guard.lost()` fires (None if not within 60 s).
fn watch_lost(guard: &MutexGuard) -> JoinHandle<Option<Instant>> {
    let lost = guard.lost();
    thread::spawn(move || {
        lost.recv_timeout(Duration::from_secs(60))
            .ok()
            .map(|()| Instant::now())
    })
}

/// Waits until `lock` has exactly `n` contenders.
fn wait_contenders(lock: &Mutex, n: usize, what: &str) {
    wait_until(
        Duration::from_secs(20),
        what,
        || matches!(lock.participants(), Ok(p) if p.len() == n),
    );
}

// ---------------------------------------------------------------------------------------
// 1. Mutual exclusion while servers are killed
// ---------------------------------------------------------------------------------------

#[test]
fn mutual_exclusion_holds_while_connected_servers_are_killed_and_restarted() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let t = Duration::from_secs(4);
    let clients: Vec<Client> = (0..5)
        .map(|_| connect(&cluster.connect_string(), t))
        .collect();
    let path = unique("mx-kill");
    let arena = Arc::new(Arena::default());
    let cycles = 25u64;
    let threads: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(id, c)| {
            let lock = Mutex::new(c, &path).unwrap();
            let arena = arena.clone();
            thread::spawn(move || worker(id, lock, arena, Some(cycles)))
        })
        .collect();

    wait_holds(&arena, 15, "holds before the first kill");
    let victim = wait_server_of(&cluster, &clients[0]);
    cluster.kill(victim).unwrap();
    wait_holds(&arena, 35, "progress with one server killed");
    cluster.start_server(victim).unwrap();

    wait_holds(&arena, 60, "holds before the second kill");
    // The second time, prefer the leader if some client is connected to it.
    let leader = cluster.leader();
    let victim2 = clients
        .iter()
        .filter_map(|c| server_of(&cluster, c))
        .find(|&i| Some(i) == leader)
        .unwrap_or_else(|| wait_server_of(&cluster, &clients[1]));
    cluster.kill(victim2).unwrap();
    wait_holds(&arena, 80, "progress after the second kill");
    cluster.start_server(victim2).unwrap();

    let stats: Vec<WorkerStats> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    log::info!("workers: {stats:?}");
    let v = arena.detector.violations();
    assert!(v.is_empty(), "exclusion violated:\n{}", v.join("\n"));
    assert_eq!(arena.holds.load(Ordering::SeqCst), cycles * 5);
    // Everything released (or gone with its session).
    let observer = connect(&cluster.connect_string(), t);
    wait_until(Duration::from_secs(30), "lock directory empty", || {
        children(&observer, &path).is_empty()
    });
}

// ---------------------------------------------------------------------------------------
// 2. Mutual exclusion across a partition of the holder
// ---------------------------------------------------------------------------------------

#[test]
fn a_partitioned_holder_loses_before_anyone_else_acquires_and_reacquires_after_heal() {
    let (cluster, proxy) = partition(3);
    let tp = Duration::from_secs(3);
    let p_client = connect(&proxy.connect_string(), tp);
    let path = unique("mx-partition");
    let p_lock = Mutex::new(&p_client, &path).unwrap();
    let arena = Arc::new(Arena::default());
    const P: usize = 99;

    // The partitioned session holds first; the others queue behind it.
    let gp = Arc::new(p_lock.acquire().unwrap());
    assert!(arena.detector.enter(P, &gp), "fresh guard not valid");
    let lost_watch = watch_lost(&gp);
    // Whether the guard still said valid the moment its lost() fired (an order checked at
    // the event, not two instants stamped by threads that a loaded machine wakes late).
    let valid_when_lost = {
        let (lost, g) = (gp.lost(), gp.clone());
        thread::spawn(move || {
            lost.recv_timeout(Duration::from_secs(60))
                .ok()
                .map(|()| g.is_valid())
        })
    };
    *arena.previous_lost.lock() = Some(gp.lost());
    let others: Vec<_> = (0..3)
        .map(|id| {
            let c = connect(&cluster.connect_string(), Duration::from_secs(4));
            let lock = Mutex::new(&c, &path).unwrap();
            let arena = arena.clone();
            thread::spawn(move || worker(id, lock, arena, None))
        })
        .collect();
    wait_contenders(&p_lock, 4, "all four sessions queued");

    let cut = Instant::now();
    proxy.blackhole();
    let mut invalid_at = None;
    wait_until(tp * 4, "partitioned guard invalid", || {
        arena.detector.check(P, &gp);
        if gp.is_valid() {
            return false;
        }
        invalid_at = Some(Instant::now());
        true
    });
    let invalid_at = invalid_at.unwrap();
    let lost_at = lost_watch
        .join()
        .unwrap()
        .expect("the partitioned guard never reported lost");
    assert!(
        invalid_at - cut < tp,
        "guard still valid {:?} after the cut (session timeout {tp:?})",
        invalid_at - cut
    );
    assert_eq!(
        valid_when_lost.join().unwrap(),
        Some(false),
        "lost reported while the guard still said valid (or never)"
    );
    assert!(!gp.is_valid());
    // Someone else gets the lock, and not before the partitioned holder knew it lost it.
    wait_until(Duration::from_secs(30), "another session acquired", || {
        arena.first_acquired.lock().is_some()
    });
    let (other_at, knew) = arena.first_acquired.lock().unwrap();
    log::info!(
        "invalid {:?}, lost {:?}, another session acquired {:?} after the cut",
        invalid_at - cut,
        lost_at - cut,
        other_at.saturating_duration_since(cut)
    );
    // Checked by the acquirer the moment its acquire returned (no observer thread's
    // wake-up in between): had the partitioned guard's `lost()` fired by then?
    assert_eq!(
        knew,
        Some(true),
        "another session acquired {:?} after the cut while the partitioned holder had not \
         yet reported lost (its watcher saw lost {:?} after the cut)",
        other_at.saturating_duration_since(cut),
        lost_at - cut
    );
    arena.detector.leave(P);
    drop(Arc::try_unwrap(gp).expect("the detector let go of the guard"));

    // After the heal the same lock object acquires again, on a new session.
    proxy.heal();
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < give_up,
            "the healed client never reacquired"
        );
        match p_lock.acquire_timeout(Duration::from_secs(10)) {
            Ok(Some(g)) => {
                let g = Arc::new(g);
                if arena.detector.enter(P, &g) {
                    hold_briefly(&arena, P, &g);
                    arena.detector.leave(P);
                    let g = Arc::try_unwrap(g).expect("the detector let go of the guard");
                    g.release().unwrap();
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                log::info!("healed client: acquire failed ({e}); retrying");
                thread::sleep(Duration::from_millis(50)); // back off before retrying
            }
        }
    }
    arena.stop.store(true, Ordering::SeqCst);
    let stats: Vec<WorkerStats> = others.into_iter().map(|h| h.join().unwrap()).collect();
    log::info!("workers: {stats:?}");
    let v = arena.detector.violations();
    assert!(v.is_empty(), "exclusion violated:\n{}", v.join("\n"));
    assert!(stats.iter().map(|s| s.holds).sum::<u64>() > 0);
}

// ---------------------------------------------------------------------------------------
// 3. A waiter queued across a restart and across a failover
// ---------------------------------------------------------------------------------------

#[test]
fn a_waiter_queued_across_a_server_restart_acquires_when_the_holder_releases() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    // Long enough to outlast the restart of a JVM on a loaded machine: both sessions stay.
    let t = Duration::from_secs(8);
    let h = connect(&cluster.connect_string(), t);
    let w = connect(&cluster.connect_string(), t);
    let path = unique("mx-restart");
    let h_lock = Mutex::new(&h, &path).unwrap();
    let gh = h_lock.acquire().unwrap();
    let waiter = spawn_acquire(Mutex::new(&w, &path).unwrap(), None);
    wait_contenders(&h_lock, 2, "waiter queued");
    let (h_events, w_events) = (h.events(), w.events());
    let (hs, ws) = (h.session_id(), w.session_id());

    cluster.stop(0).unwrap();
    for ev in [&h_events, &w_events] {
        wait_event(ev, Duration::from_secs(10), "suspended", |e| {
            matches!(e, SessionEvent::Suspended { .. })
        });
    }
    cluster.start_server(0).unwrap();
    expect_reconnected(&h_events, hs, Duration::from_secs(20));
    expect_reconnected(&w_events, ws, Duration::from_secs(20));
    wait_until(Duration::from_secs(10), "holder valid again", || {
        gh.is_valid()
    });
    assert!(
        waiter.try_recv().is_err(),
        "the waiter returned while the holder still held"
    );
    let h_token = gh.token();
    let released_at = Instant::now();
    gh.release().unwrap();
    let (at, _, gw) = expect_acquired(&waiter, Duration::from_secs(30), "waiter");
    assert!(at >= released_at);
    assert!(gw.token() > h_token);
    assert!(gw.is_valid());
    assert_eq!(w.session_id(), ws, "the waiter's session was not kept");
    gw.release().unwrap();
}

#[test]
fn a_waiter_whose_server_is_killed_still_acquires_after_failing_over() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let t = Duration::from_secs(4);
    let w = connect(&cluster.connect_string(), t);
    let w_server = wait_server_of(&cluster, &w);
    // The holder sits on another server, which stays up.
    let h = connect(&cluster.server_connect_string((w_server + 1) % 3), t);
    let path = unique("mx-failover");
    let h_lock = Mutex::new(&h, &path).unwrap();
    let gh = h_lock.acquire().unwrap();
    let waiter = spawn_acquire(Mutex::new(&w, &path).unwrap(), None);
    wait_contenders(&h_lock, 2, "waiter queued");
    let w_events = w.events();

    cluster.kill(w_server).unwrap();
    // Release while the waiter is moving to another server.
    let released_at = Instant::now();
    match gh.release() {
        Ok(()) => {}
        // Retried in the background (the killed server may have been the leader).
        Err(e) if e.is_connection_error() => log::info!("release during failover: {e}"),
        Err(e) => panic!("release during failover: {e}"),
    }
    let (at, _, gw) = expect_acquired(&waiter, Duration::from_secs(30), "waiter");
    assert!(at >= released_at);
    wait_event(&w_events, Duration::from_secs(10), "waiter back", |e| {
        matches!(
            e,
            SessionEvent::Reconnected { .. } | SessionEvent::Connected { .. }
        )
    });
    assert_ne!(server_of(&cluster, &w), Some(w_server));
    wait_until(Duration::from_secs(10), "waiter's guard valid", || {
        gw.is_valid()
    });
    let names = children(&w, &path);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(gw.path().ends_with(&names[0]));
    gw.release().unwrap();
}

// ---------------------------------------------------------------------------------------
// 4. A holder's session expires while partitioned
// ---------------------------------------------------------------------------------------

#[test]
fn a_partitioned_holder_whose_session_expires_loses_the_lock_to_a_waiter() {
    let (cluster, proxy) = partition(1);
    let h = connect(&proxy.connect_string(), Duration::from_secs(2));
    let w = connect(&cluster.connect_string(), Duration::from_secs(4));
    let path = unique("mx-expire");
    let gh = Mutex::new(&h, &path).unwrap().acquire().unwrap();
    let w_lock = Mutex::new(&w, &path).unwrap();
    let waiter = spawn_acquire(w_lock.clone(), Some(gh.lost()));
    wait_contenders(&w_lock, 2, "waiter queued");
    let lost_watch = watch_lost(&gh);

    let cut = Instant::now();
    proxy.blackhole();
    let lost_at = lost_watch
        .join()
        .unwrap()
        .expect("lost never fired for the partitioned holder");
    assert!(!gh.is_valid());
    // Still partitioned: the holder knows it has lost, and release says so.
    let gh_path = gh.path().to_string();
    assert_eq!(
        gh.release(),
        Err(Error::LockLost { path: gh_path }),
        "release of a lost lock (client still partitioned)"
    );
    let (at, previous_lost, gw) = expect_acquired(&waiter, Duration::from_secs(30), "waiter");
    log::info!(
        "lost reported {:?} after the cut, the waiter acquired {:?} after it",
        lost_at - cut,
        at.saturating_duration_since(cut)
    );
    // Checked by the waiter the moment its acquire returned (no observer thread's wake-up
    // in between): had the holder's `lost()` fired by then?
    assert_eq!(
        previous_lost,
        Some(true),
        "the waiter acquired {:?} after the cut while the holder had not yet reported lost \
         (its watcher saw lost {:?} after the cut)",
        at.saturating_duration_since(cut),
        lost_at - cut
    );
    assert!(gw.is_valid());
    proxy.heal();
    gw.release().unwrap();
}

// ---------------------------------------------------------------------------------------
// 5. A waiter's session is lost while it is queued
// ---------------------------------------------------------------------------------------

#[test]
fn a_waiter_whose_session_is_lost_requeues_after_heal_and_acquires() {
    let (cluster, proxy) = partition(1);
    let h = connect(&cluster.connect_string(), Duration::from_secs(4));
    let w = connect(&proxy.connect_string(), Duration::from_secs(2));
    let path = unique("mx-waiter-lost");
    let h_lock = Mutex::new(&h, &path).unwrap();
    let gh = h_lock.acquire().unwrap();
    let waiter = spawn_acquire(Mutex::new(&w, &path).unwrap(), None);
    wait_contenders(&h_lock, 2, "waiter queued");
    let w_events = w.events();
    let old = w.session_id();

    proxy.blackhole();
    wait_event(&w_events, Duration::from_secs(15), "lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    // The server expires the old session and its queued node with it.
    wait_contenders(&h_lock, 1, "the lost waiter's node removed");
    proxy.heal();
    let ev = wait_event(&w_events, Duration::from_secs(15), "new session", |e| {
        matches!(e, SessionEvent::Connected { .. })
    });
    assert_ne!(ev, SessionEvent::Connected { session_id: old });
    // It queues again by itself, and waits: the holder still holds.
    wait_contenders(&h_lock, 2, "waiter queued again");
    assert!(
        waiter.try_recv().is_err(),
        "the waiter returned while the holder still held"
    );
    gh.release().unwrap();
    let (_, _, gw) = expect_acquired(&waiter, Duration::from_secs(30), "waiter");
    assert!(gw.is_valid());
    let names = children(&h, &path);
    assert_eq!(names.len(), 1, "nodes left behind: {names:?}");
    assert!(gw.path().ends_with(&names[0]));
    let stat = h.exists(gw.path()).unwrap().expect("the waiter's node");
    assert_eq!(stat.ephemeral_owner, w.session_id());
    assert_ne!(stat.ephemeral_owner, old);
    gw.release().unwrap();
}

// ---------------------------------------------------------------------------------------
// 6. Closing a client while it holds
// ---------------------------------------------------------------------------------------

#[test]
fn closing_a_holding_client_reports_lost_and_hands_the_lock_over_promptly() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    // A long session: a handover within half of it cannot be the session expiring.
    let t = Duration::from_secs(30);
    let h = connect(&cluster.connect_string(), t);
    let w = connect(&cluster.connect_string(), Duration::from_secs(4));
    let path = unique("mx-close");
    let h_lock = Mutex::new(&h, &path).unwrap();
    let gh = h_lock.acquire().unwrap();
    let waiter = spawn_acquire(Mutex::new(&w, &path).unwrap(), None);
    wait_contenders(&h_lock, 2, "waiter queued");
    let lost = gh.lost();

    let closed_at = Instant::now();
    if let Err(e) = h.close().into_result() {
        log::warn!("close: {e}");
    }
    lost.recv_timeout(Duration::from_secs(5))
        .expect("lost did not fire after close");
    assert!(!gh.is_valid());
    let (at, _, gw) = expect_acquired(&waiter, t / 2, "waiter after the holder closed");
    assert!(at >= closed_at);
    assert!(gw.is_valid());
    let gh_path = gh.path().to_string();
    assert_eq!(
        gh.release(),
        Err(Error::LockLost { path: gh_path }),
        "release after the client was closed"
    );
    gw.release().unwrap();
}

// ---------------------------------------------------------------------------------------
// 7. Bounded acquires during a partition
// ---------------------------------------------------------------------------------------

#[test]
fn try_acquire_during_a_partition_returns_in_bounded_time_and_leaves_nothing() {
    let (cluster, proxy) = partition(1);
    let h = connect(&cluster.connect_string(), Duration::from_secs(4));
    let c = connect(&proxy.connect_string(), Duration::from_secs(3));
    let path = unique("mx-try");
    let gh = Mutex::new(&h, &path).unwrap().acquire().unwrap();
    let c_lock = Mutex::new(&c, &path).unwrap();

    proxy.blackhole();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let started = Instant::now();
    {
        let c_lock = c_lock.clone();
        thread::spawn(move || {
            let r = c_lock.try_acquire();
            let _ = tx.send((started.elapsed(), r));
        });
    }
    // One request timeout, and as much again for slack: "never waits" must not mean
    // "waits for the partition to end".
    let bound = c.session_timeout() * 2 + Duration::from_secs(3);
    let (hung, (took, r)) = match rx.recv_timeout(bound) {
        Ok(x) => (false, x),
        Err(_) => {
            proxy.heal();
            let x = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("try_acquire still hanging 60 s after the heal");
            (true, x)
        }
    };
    proxy.heal();
    match &r {
        Ok(None) => {}
        Err(e) => log::info!("try_acquire during the partition: {e}"),
        Ok(Some(g)) => panic!("try_acquire took a held lock: {g:?}"),
    }
    drop(r);
    // Nothing of the attempt remains: only the holder's node.
    let h_node = gh.path().rsplit('/').next().unwrap_or_default().to_string();
    wait_until(Duration::from_secs(20), "no node of the attempt", || {
        children(&h, &path) == vec![h_node.clone()]
    });
    assert!(
        !hung,
        "try_acquire did not return within {bound:?} while the partition lasted \
         (returned {took:?} after the call, once healed)"
    );
    gh.release().unwrap();
}

#[test]
fn acquire_timeout_during_a_partition_returns_in_bounded_time_and_its_nodes_are_removed() {
    let (cluster, proxy) = partition(1);
    let h = connect(&cluster.connect_string(), Duration::from_secs(4));
    // Long enough that the session survives the whole partition: what is removed below is
    // removed by the library, not by the session expiring.
    let c = connect(&proxy.connect_string(), Duration::from_secs(8));
    let session = c.session_id();
    let path = unique("mx-timeout");
    let gh = Mutex::new(&h, &path).unwrap().acquire().unwrap();
    let h_node = gh.path().rsplit('/').next().unwrap_or_default().to_string();
    let c_lock = Mutex::new(&c, &path).unwrap();

    // a) Queued (its node exists), then partitioned: the deadline still ends the wait.
    let (tx, rx) = crossbeam_channel::bounded(1);
    {
        let c_lock = c_lock.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let r = c_lock.acquire_timeout(Duration::from_secs(2));
            let _ = tx.send((started.elapsed(), r));
        });
    }
    wait_contenders(&c_lock, 2, "the timed acquire queued");
    proxy.blackhole();
    let (took, r) = rx
        .recv_timeout(Duration::from_secs(15))
        .expect("acquire_timeout(2 s) hung during a partition");
    assert!(
        matches!(r, Ok(None)) || matches!(&r, Err(e) if e.is_connection_error()),
        "{r:?}"
    );
    drop(r);
    log::info!("queued acquire_timeout(2 s) returned after {took:?}");

    // b) Called while partitioned: nothing can be sent, the deadline still holds.
    let started = Instant::now();
    let r = c_lock.acquire_timeout(Duration::from_secs(1));
    let took = started.elapsed();
    assert!(
        matches!(r, Ok(None)) || matches!(&r, Err(e) if e.is_connection_error()),
        "{r:?}"
    );
    drop(r);
    assert!(
        took < Duration::from_secs(1) + c.session_timeout(),
        "acquire_timeout(1 s) took {took:?} during a partition"
    );

    proxy.heal();
    wait_until(
        Duration::from_secs(20),
        "the abandoned nodes removed",
        || children(&h, &path) == vec![h_node.clone()],
    );
    assert_eq!(
        c.session_id(),
        session,
        "the session did not survive the partition"
    );

    // c) The create reaches the server only after the caller gave up: the node that
    //    appears later must be found and deleted too. Its appearance is seen by a watch,
    //    not by polling: it lives only about two delays (1.4 s), which a test thread on a
    //    loaded machine could sleep through.
    let (now, _, appeared) = h.get_children_w(&path).unwrap();
    assert_eq!(now, vec![h_node.clone()]);
    proxy.delay(Duration::from_millis(700));
    let r = c_lock.acquire_timeout(Duration::from_millis(300));
    assert!(
        matches!(r, Ok(None)) || matches!(&r, Err(e) if e.is_connection_error()),
        "{r:?}"
    );
    drop(r);
    assert_eq!(
        appeared
            .recv_timeout(WITHIN)
            .expect("the late create was not applied")
            .event_type,
        EventType::NodeChildrenChanged
    );
    wait_until(Duration::from_secs(20), "the late node removed", || {
        children(&h, &path) == vec![h_node.clone()]
    });
    proxy.heal();
    assert_eq!(c.session_id(), session);
    assert_eq!(c.state(), SessionState::Connected);
    gh.release().unwrap();
}

#[test]
fn unfair_try_acquire_during_a_partition_fails_in_bounded_time() {
    let (cluster, proxy) = partition(1);
    let h = connect(&cluster.connect_string(), Duration::from_secs(4));
    let c = connect(&proxy.connect_string(), Duration::from_secs(3));
    let path = unique("unfair-try");
    let gh = zkguard::UnfairMutex::new(&h, &path)
        .unwrap()
        .acquire()
        .unwrap();
    let c_lock = zkguard::UnfairMutex::new(&c, &path).unwrap();
    proxy.blackhole();
    let (tx, rx) = crossbeam_channel::bounded(1);
    let started = Instant::now();
    thread::spawn(move || {
        let r = c_lock.try_acquire().map(|g| g.is_some());
        let _ = tx.send((started.elapsed(), r));
    });
    let bound = c.session_timeout() * 2 + Duration::from_secs(3);
    let got = rx.recv_timeout(bound);
    proxy.heal();
    let (took, r) =
        got.unwrap_or_else(|_| panic!("unfair try_acquire still blocked after {bound:?}"));
    log::info!("unfair try_acquire during the partition: {r:?} after {took:?}");
    assert!(
        matches!(r, Err(ref e) if e.is_connection_error() || *e == Error::SessionExpired),
        "a try during a partition reports the trouble, not 'held by someone': {r:?}"
    );
    // The holder's node is untouched.
    let holder = zkguard::UnfairMutex::new(&h, &path)
        .unwrap()
        .holder()
        .unwrap();
    assert!(holder.is_some());
    drop(gh);
}
