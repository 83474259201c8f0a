//! Rules every lock type shares, against a real ZooKeeper server: bad paths, a lock under
//! an ephemeral node, foreign children, revocation and loss, participants, closing the
//! client, the server's watch count after contention, and what a lock's directory costs.
//! Each recipe's own tests: `tests/mutex.rs`, `tests/rwlock.rs`, `tests/semaphore.rs`,
//! `tests/multilock.rs`.

mod common;

use std::time::Duration;

use common::{
    assert_invalid_path, assert_quiet, base, children, connect, datas, expect_children, recv,
    shared_cluster, spawn, unique, wait_children, wait_event, wait_until, watches_by_path, WITHIN,
};
use zkguard::testing::FaultProxy;
use zkguard::{
    Canceller, Client, CreateMode, DynLock, Error, Lock, MultiLock, Mutex, ReentrantMutex, RwLock,
    Semaphore, SessionEvent, UnfairMutex,
};

/// Session timeout for clients whose session is not the point of the test.
const SESSION: Duration = Duration::from_secs(10);

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
    // The semaphore records its count (creates its node) at its first acquire.
    let sem = Semaphore::new(&client, &under, 2).unwrap();
    check(sem.acquire().map(|_| true), &under, "Semaphore::acquire");
    check(
        sem.try_acquire().map(|g| g.is_some()),
        &under,
        "Semaphore::try_acquire",
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

/// A guard granted after a wait keeps the data watch its waiter armed on its own node
/// instead of arming another (one request less): what its waiter read with that watch
/// counts as the guard's own read, and what happens to the node after still reaches the
/// guard, across a reconnect too. Attacked from another client: a revocation request
/// written while it waited, other bytes, and, after its connection was reset, a delete.
#[test]
fn a_guard_that_waited_hears_its_node_through_the_watch_its_waiter_armed() {
    let cs = shared_cluster().connect_string();
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let path = unique("adopt");
    let a = connect(&cs, SESSION);
    let b = connect(&proxy.connect_string(), SESSION);
    let b_events = b.events();
    let other = connect(&cs, SESSION);
    let lock_a = Mutex::new(&a, &path).unwrap();
    let g = lock_a.acquire().unwrap();
    let waiter = {
        let lock_b = Mutex::new(&b, &path).unwrap();
        spawn(move || lock_b.acquire())
    };
    wait_until(WITHIN, "the waiter queued", || {
        lock_a.participants().unwrap().len() == 2
    });
    let node_b = format!("{path}/{}", lock_a.participants().unwrap()[1].node);
    let session_b = format!("0x{:x}", b.session_id() as u64);
    let watched_by_b = || {
        watches_by_path()
            .get(&node_b)
            .is_some_and(|s| s.contains(&session_b))
    };
    wait_until(WITHIN, "the waiter watches its own node", watched_by_b);
    // Asked to let go while it waits: the write spends the waiter's watch, which it arms
    // again (reading the request).
    zkguard::revoke(&other, &node_b).unwrap();
    wait_until(
        WITHIN,
        "the waiter watches its own node again",
        watched_by_b,
    );
    drop(g);
    let gb = recv(&waiter, WITHIN, "the waiter's acquire").unwrap();
    assert_eq!(gb.path(), node_b);
    recv(
        &gb.revocation(),
        WITHIN,
        "the revocation request written while it waited",
    );
    assert!(watched_by_b(), "the guard's node is not watched");
    let lost = gb.lost();
    other.set_data(&node_b, b"hello", None).unwrap();
    // The write spent the watch; the guard's is armed again (a round trip on its session
    // after the write comes back after the re-arm's reply, as the server answers in order).
    wait_until(WITHIN, "the guard watches its node again", watched_by_b);
    gb.confirm().unwrap();
    assert_quiet(&lost, "a loss after a write of other bytes");
    // A new connection of the same session: the watch is armed again with the others
    // (SetWatches), and still the guard's.
    proxy.reset();
    wait_event(&b_events, WITHIN, "B reconnected", |ev| {
        matches!(ev, SessionEvent::Reconnected { .. })
    });
    gb.confirm().unwrap();
    assert!(
        watched_by_b(),
        "the guard's node not watched after the reconnect"
    );
    other.delete(&node_b, None).unwrap();
    recv(&lost, WITHIN, "lost after its node was deleted");
    assert!(!gb.is_valid());
    drop(gb);
    wait_children(&a, &path, &[]);
}

/// A waiter hears its session's events the moment they come, not at its slow re-check (a
/// session timeout later): when its connection is reset and the same session comes back,
/// it lists its queue again at once. (The wait sleeps on one bell that the session's
/// events ring; without that ring it would list only at the re-check, 60 s here.)
#[test]
fn a_waiter_lists_again_as_soon_as_its_connection_is_back() {
    let cs = shared_cluster().connect_string();
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let path = unique("relist");
    let a = connect(&cs, SESSION);
    // The longest session the harness grants: the waiter's slow re-check is that far off.
    let b = connect(&proxy.connect_string(), Duration::from_secs(60));
    let b_events = b.events();
    let lock_a = Mutex::new(&a, &path).unwrap();
    let g = lock_a.acquire().unwrap();
    let waiter = {
        let lock_b = Mutex::new(&b, &path).unwrap();
        spawn(move || lock_b.acquire())
    };
    let session_b = format!("0x{:x}", b.session_id() as u64);
    wait_until(WITHIN, "the waiter watches the holder's node", || {
        watches_by_path()
            .get(g.path())
            .is_some_and(|s| s.contains(&session_b))
    });
    let before = b.stats().requests;
    proxy.reset();
    wait_event(&b_events, WITHIN, "B reconnected", |ev| {
        matches!(ev, SessionEvent::Reconnected { .. })
    });
    wait_until(WITHIN, "the waiter listed its queue again", || {
        b.stats().requests > before
    });
    assert_quiet(&waiter, "acquired while the lock is held");
    drop(g);
    let gb = recv(&waiter, WITHIN, "the waiter's acquire").unwrap();
    assert!(gb.is_valid());
}

/// A lock of `kind` at `path` on `client`, and its canceller: each kind's wait is another
/// loop over the same wake-up (`Attempt::woke`): `mutex` the queue's waiter, `unfair` the
/// single node's, `semaphore` (one permit) the lease phase's behind its internal lock.
fn waiting_kind(client: &Client, kind: &str, path: &str) -> (Box<dyn DynLock>, Canceller) {
    fn boxed<L: Lock + DynLock + 'static>(l: L) -> (Box<dyn DynLock>, Canceller) {
        let c = l.canceller();
        (Box::new(l), c)
    }
    match kind {
        "mutex" => boxed(Mutex::new(client, path).unwrap()),
        "unfair" => boxed(UnfairMutex::new(client, path).unwrap()),
        "semaphore" => boxed(Semaphore::new(client, path, 1).unwrap()),
        _ => unreachable!("{kind}"),
    }
}

/// For each kind: the lock held on one client, and on a client whose slow re-check is a
/// minute off (the longest session the harness grants) an acquire started by `start` and
/// seen waiting (a watch of its session on the server); `end` then gets the acquire's
/// outcome channel, its canceller and its client.
fn while_waiting(
    start: impl Fn(&dyn DynLock) -> zkguard::Result<bool> + Copy + Send + 'static,
    end: impl Fn(&str, &zkguard::channel::Receiver<zkguard::Result<bool>>, &Canceller, &Client),
) {
    let cs = shared_cluster().connect_string();
    for kind in ["mutex", "unfair", "semaphore"] {
        let path = unique(&format!("wake-{kind}"));
        let a = connect(&cs, SESSION);
        let b = connect(&cs, Duration::from_secs(60));
        let held = waiting_kind(&a, kind, &path).0.acquire_boxed().unwrap();
        let (lock_b, cancel_b) = waiting_kind(&b, kind, &path);
        let waiter = spawn(move || start(&*lock_b));
        let session_b = format!("0x{:x}", b.session_id() as u64);
        wait_until(WITHIN, "the acquire waits on a watch", || {
            watches_by_path().values().any(|s| s.contains(&session_b))
        });
        assert_quiet(&waiter, "acquired while the lock is held");
        end(kind, &waiter, &cancel_b, &b);
        drop(held);
    }
}

/// A cancel reaches an acquire waiting on a watch the moment it is made, not at the wait's
/// slow re-check (a minute here): every wait names the call's cancel among its sources
/// (`Attempt::wake`; without it the cancel's ring finds nothing to take, and the acquire
/// sleeps on to the re-check).
#[test]
fn a_cancel_ends_a_waiting_acquire_at_once_not_at_its_slow_re_check() {
    while_waiting(
        |l| l.acquire_boxed().map(|_| true),
        |kind, waiter, cancel, _| {
            cancel.cancel();
            match recv(waiter, WITHIN, &format!("the {kind}'s cancelled acquire")) {
                Err(Error::Cancelled { .. }) => {}
                other => panic!("{kind}: expected Cancelled, got {other:?}"),
            }
        },
    );
}

/// A timed acquire waiting on a watch gives up at its deadline, not at its wait's slow
/// re-check (a minute here; a timed wait has none): every wait names the call's deadline
/// (`Attempt::wake`).
#[test]
fn a_timed_acquire_gives_up_at_its_deadline_not_at_its_slow_re_check() {
    while_waiting(
        |l| {
            l.acquire_timeout_boxed(Duration::from_secs(2))
                .map(|g| g.is_some())
        },
        |kind, waiter, _, _| {
            let got = recv(waiter, WITHIN, &format!("the {kind}'s timed acquire"));
            assert!(
                matches!(got, Ok(false)),
                "{kind}: expected Ok(None), got {got:?}"
            );
        },
    );
}

/// An acquire waiting on a watch sends nothing until something changes: it sleeps to its
/// watch, a session event or its slow re-check (a minute here), never in a loop of races
/// (the single node's re-check set in the past, `now - timeout`, would race again and
/// again). Pings are not requests (`ClientStats::requests`).
#[test]
fn a_waiting_acquire_sends_nothing_while_nothing_changes() {
    while_waiting(
        |l| l.acquire_boxed().map(|_| true),
        |kind, waiter, cancel, client| {
            let before = client.stats().requests;
            assert_quiet(waiter, "acquired while the lock is held");
            assert_eq!(
                client.stats().requests,
                before,
                "{kind}: requests sent while waiting"
            );
            cancel.cancel();
            assert!(matches!(
                recv(waiter, WITHIN, "the cancelled acquire"),
                Err(Error::Cancelled { .. })
            ));
        },
    );
}

/// A try on a held lock says no at once, for every kind's loop: on a client whose request
/// timeout (a try's one deadline) is two minutes, a try that waited for the holder instead
/// (the single node's race without its "a try does not wait" arm) would answer only then.
#[test]
fn a_try_on_a_held_lock_says_no_at_once() {
    let cs = shared_cluster().connect_string();
    for kind in ["mutex", "unfair", "semaphore"] {
        let path = unique(&format!("try-{kind}"));
        let a = connect(&cs, SESSION);
        let _held = waiting_kind(&a, kind, &path).0.acquire_boxed().unwrap();
        let t = Client::builder(&cs)
            .session_timeout(SESSION)
            .request_timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let (lock_t, _) = waiting_kind(&t, kind, &path);
        let tried = spawn(move || lock_t.try_acquire_boxed().map(|g| g.is_some()));
        let got = recv(&tried, WITHIN, &format!("the {kind}'s try"));
        assert!(
            matches!(got, Ok(false)),
            "{kind}: expected Ok(None), got {got:?}"
        );
    }
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
    // The default data is `zkguard::host_id()`, as its documentation promises.
    let default = zkguard::host_id().into_bytes();
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

/// A lock's directory under an existing parent costs one create, however deep the parent
/// (not one per ancestor); a missing chain is made in full, so an acquire there works too.
#[test]
fn a_lock_directory_costs_one_create_however_deep_its_existing_parent() {
    let c = connect(&shared_cluster().connect_string(), SESSION);
    let root = unique("dirs");
    for p in ["", "/a", "/a/b", "/a/b/c", "/p"] {
        c.create(&format!("{root}{p}"), b"", CreateMode::Persistent)
            .unwrap();
    }
    // Requests of a first acquire (the directory is made) and its release.
    let first_acquire = |path: &str| {
        let before = c.stats().requests;
        let guard = Mutex::new(&c, path).unwrap().acquire().unwrap();
        let cost = c.stats().requests - before;
        drop(guard);
        cost
    };
    let deep = first_acquire(&format!("{root}/a/b/c/lock"));
    let shallow = first_acquire(&format!("{root}/p/lock"));
    assert_eq!(deep, shallow, "requests under a parent 4 deep and 1 deep");
    // A missing chain.
    let missing = format!("{root}/x/y/lock");
    let more = first_acquire(&missing);
    assert!(
        more > shallow,
        "{more} requests for a missing chain, {shallow} for one"
    );
    assert!(c.exists(&format!("{root}/x/y")).unwrap().is_some());
}
