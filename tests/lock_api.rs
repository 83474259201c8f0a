//! The `Lock` and `Guard` traits against a real ZooKeeper server: generic code over any
//! lock, and `Leadership::revocation`. The `MultiLock` is in `multilock.rs`.

mod common;

use std::time::{Duration, Instant};

use common::{connect, recv, shared_cluster, spawn, unique, wait_until, WITHIN};
use zkguard::{
    Error, Guard, LeaderElection, Lock, MultiLock, Mutex, ReentrantMutex, RwLock, Semaphore,
    UnfairMutex,
};

const SESSION: Duration = Duration::from_secs(10);
/// A timeout that must run out (the lock is held throughout).
const SHORT: Duration = Duration::from_millis(300);

/// Generic over any lock: `mine` and `theirs` are two handles on one lock, in two sessions.
/// Exercises acquire, try, timeout and cancel through the trait alone, and the guard through
/// `Guard`.
fn exercise<L>(what: &str, mine: &L, theirs: &L)
where
    L: Lock + Clone + Send + 'static,
{
    assert_eq!(mine.path(), theirs.path(), "{what}: one lock");
    let g = mine
        .acquire()
        .unwrap_or_else(|e| panic!("{what}: acquire: {e}"));
    assert!(Guard::is_valid(&g), "{what}: fresh guard not valid");
    // A node in (or, unfair, at) the lock's path; a multi-lock's are listed with commas.
    let nodes: Vec<&str> = Guard::path(&g).split(',').collect();
    let dirs: Vec<&str> = mine.path().split(',').collect();
    assert_eq!(nodes.len(), dirs.len(), "{what}: node paths");
    for (node, dir) in nodes.iter().zip(dirs) {
        assert!(node.starts_with(dir), "{what}: node {node} not at {dir}");
    }
    Guard::confirm(&g).unwrap_or_else(|e| panic!("{what}: confirm: {e}"));
    let token = Guard::token(&g);

    assert!(
        theirs.try_acquire().unwrap().is_none(),
        "{what}: try_acquire got a held lock"
    );
    let t0 = Instant::now();
    assert!(
        theirs.acquire_timeout(SHORT).unwrap().is_none(),
        "{what}: acquire_timeout got a held lock"
    );
    assert!(t0.elapsed() >= SHORT, "{what}: timeout gave up early");

    // A blocked acquire, cancelled through the trait's canceller.
    let blocked = {
        let theirs = theirs.clone();
        spawn(move || theirs.acquire().map(|g| Guard::token(&g)))
    };
    assert!(
        blocked.recv_timeout(SHORT).is_err(),
        "{what}: acquired a held lock"
    );
    // A cancel reaches the acquires blocked at that moment: repeat it until this one, which
    // may not have started blocking yet on a loaded machine, has returned.
    let deadline = Instant::now() + WITHIN;
    let cancelled = loop {
        theirs.canceller().cancel();
        match blocked.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => break r,
            Err(_) => assert!(Instant::now() < deadline, "{what}: acquire not cancelled"),
        }
    };
    match cancelled {
        Err(Error::Cancelled { path }) => assert!(theirs.path().contains(&path), "{what}"),
        other => panic!("{what}: expected Cancelled, got {other:?}"),
    }

    // Released through the trait, the other handle gets it, with a larger token.
    Guard::release(g).unwrap_or_else(|e| panic!("{what}: release: {e}"));
    let g2 = theirs
        .acquire_timeout(WITHIN)
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: released lock not acquired"));
    assert!(Guard::token(&g2) > token, "{what}: token did not rise");
    drop(g2);
}

#[test]
fn generic_code_over_impl_lock_works_with_every_lock_type() {
    let cs = shared_cluster().connect_string();
    let (a, b) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let root = unique("lock-api");
    let at = |name: &str| format!("{root}/{name}");

    let p = at("mutex");
    exercise(
        "Mutex",
        &Mutex::new(&a, &p).unwrap(),
        &Mutex::new(&b, &p).unwrap(),
    );
    let p = at("reentrant");
    exercise(
        "ReentrantMutex",
        &ReentrantMutex::new(&a, &p).unwrap(),
        &ReentrantMutex::new(&b, &p).unwrap(),
    );
    let p = at("unfair");
    exercise(
        "UnfairMutex",
        &UnfairMutex::new(&a, &p).unwrap(),
        &UnfairMutex::new(&b, &p).unwrap(),
    );
    let p = at("rw");
    exercise(
        "RwLock::write_lock",
        RwLock::new(&a, &p).unwrap().write_lock(),
        RwLock::new(&b, &p).unwrap().write_lock(),
    );
    let p = at("sem");
    exercise(
        "Semaphore",
        &Semaphore::new(&a, &p, 1).unwrap(),
        &Semaphore::new(&b, &p, 1).unwrap(),
    );
    let p = at("elect");
    exercise(
        "LeaderElection",
        &LeaderElection::new(&a, &p, "a").unwrap(),
        &LeaderElection::new(&b, &p, "b").unwrap(),
    );
    let (p, q) = (at("multi-x"), at("multi-y"));
    exercise(
        "MultiLock",
        &MultiLock::new(&a, &[&p, &q]).unwrap(),
        &MultiLock::new(&b, &[&q, &p]).unwrap(),
    );

    // The read side is a lock too: readers share it, and a writer excludes them.
    let p = at("rw-read");
    let (ra, rb) = (RwLock::new(&a, &p).unwrap(), RwLock::new(&b, &p).unwrap());
    let r1 = Lock::acquire(ra.read_lock()).unwrap();
    let r2 = Lock::try_acquire(rb.read_lock())
        .unwrap()
        .expect("a second reader");
    assert!(rb.write_lock().try_acquire().unwrap().is_none());
    drop((r1, r2));
    let w = rb.write_lock().acquire_timeout(WITHIN).unwrap().unwrap();
    assert!(Lock::try_acquire(ra.read_lock()).unwrap().is_none());
    drop(w);
}

#[test]
fn leadership_revocation_fires_when_revoke_is_called_on_its_node() {
    let cs = shared_cluster().connect_string();
    let (x, other) = (connect(&cs, SESSION), connect(&cs, SESSION));
    for (kind, election) in [
        (
            "fair",
            LeaderElection::new(&x, &unique("lock-api-lead"), "me").unwrap(),
        ),
        (
            "unfair",
            LeaderElection::unfair(&x, &unique("lock-api-lead"), "me").unwrap(),
        ),
    ] {
        let leadership = election.lead().unwrap();
        let revoked = leadership.revocation();
        let lost = leadership.lost();
        x.sync(leadership.path()).unwrap();
        assert!(revoked.try_recv().is_err(), "{kind}: revoked before asked");
        zkguard::revoke(&other, leadership.path()).unwrap();
        recv(&revoked, WITHIN, &format!("{kind}: leadership revocation"));
        assert!(leadership.is_valid(), "{kind}: a request is not a loss");
        assert!(lost.try_recv().is_err(), "{kind}: a request is not a loss");
        leadership.confirm().unwrap();
        // Through the trait, and releasing is resigning.
        recv(
            &Guard::revocation(&leadership),
            WITHIN,
            &format!("{kind}: revocation through Guard"),
        );
        Guard::release(leadership).unwrap();
        wait_until(WITHIN, &format!("{kind}: no leader"), || {
            election.leader().unwrap().is_none()
        });
    }
}
