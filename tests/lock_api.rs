//! The `Lock` and `Guard` traits against a real ZooKeeper server: generic code over any
//! lock, `participants()` through `DynLock` and `Lock`, and `Leadership::revocation`. The
//! `MultiLock` is in `multilock.rs`.

mod common;

use std::time::{Duration, Instant};

use common::{connect, recv, shared_cluster, spawn, unique, wait_until, WITHIN};
use zkguard::{
    BoxedGuard, Client, DynLock, Error, Guard, LeaderElection, Lock, MultiLock, Mutex, Participant,
    ReentrantMutex, RwLock, Semaphore, UnfairMutex,
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

/// A lock of `kind` at `dir` picked at run time, its nodes' data `data` (an unfair lock's
/// data is its owner id, not settable). `read-write`: `data` "a" takes the read side, any
/// other the write side, of one `RwLock`.
fn pick(client: &Client, kind: &str, dir: &str, data: &str) -> Box<dyn DynLock> {
    let made = match kind {
        "mutex" => Mutex::new(client, dir).map(|l| Box::new(l.with_data(data)) as Box<dyn DynLock>),
        "read-write" => RwLock::new(client, dir).map(|l| {
            let l = l.with_data(data);
            if data == "a" {
                Box::new(l.read_lock().clone()) as Box<dyn DynLock>
            } else {
                Box::new(l.write_lock().clone())
            }
        }),
        "semaphore" => Semaphore::new(client, dir, 1).map(|l| Box::new(l.with_data(data)) as _),
        "election" => LeaderElection::new(client, dir, data).map(|l| Box::new(l) as _),
        "unfair" => UnfairMutex::new(client, dir).map(|l| Box::new(l) as _),
        other => panic!("no lock kind {other}"),
    };
    made.unwrap_or_else(|e| panic!("{kind} at {dir}: {e}"))
}

/// Each contender as (data, holds), in the order listed.
fn listed(kind: &str, lock: &dyn DynLock) -> Vec<(String, bool)> {
    lock.participants()
        .unwrap_or_else(|e| panic!("{kind}: participants: {e}"))
        .into_iter()
        .map(|p| (String::from_utf8_lossy(&p.data).into_owned(), p.holds))
        .collect()
}

/// Waits until both handles list `want` (the semaphore lets its internal lock go in the
/// background, so a list settles a moment after an acquire returns).
fn settles(kind: &str, what: &str, handles: [&dyn DynLock; 2], want: &[(&str, bool)]) {
    let want: Vec<(String, bool)> = want.iter().map(|&(d, h)| (d.to_string(), h)).collect();
    let deadline = Instant::now() + WITHIN;
    loop {
        let got = [listed(kind, handles[0]), listed(kind, handles[1])];
        if got[0] == want && got[1] == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{kind}, {what}: listed {got:?}, want {want:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `participants()` through `Box<dyn DynLock>`, for every kind a caller may pick at run
/// time: nothing before anyone came; the holder first and the waiter after it, from either
/// session; the waiter alone and holding once the holder let go; nothing once it let go
/// too. An unfair lock lists its holder alone (its node, at the lock's path), never a waiter.
#[test]
fn participants_through_dyn_lock_list_the_holder_then_the_waiters() {
    let cs = shared_cluster().connect_string();
    let (a, b) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let root = unique("lock-api-participants");
    for kind in ["mutex", "read-write", "semaphore", "election", "unfair"] {
        let dir = format!("{root}/{kind}");
        let mine = pick(&a, kind, &dir, "a");
        let theirs: std::sync::Arc<dyn DynLock> = pick(&b, kind, &dir, "b").into();
        settles(kind, "before anyone", [&*mine, &*theirs], &[]);

        let g = mine
            .acquire_boxed()
            .unwrap_or_else(|e| panic!("{kind}: acquire: {e}"));
        let waiter = {
            let theirs = theirs.clone();
            spawn(move || theirs.acquire_boxed())
        };
        if kind == "unfair" {
            // Its waiter only watches the node: the holder is listed, alone.
            let got = mine.participants().unwrap();
            assert_eq!(got.len(), 1, "unfair: {got:?}");
            let Participant { node, holds, .. } = &got[0];
            assert!(*holds && node == "unfair", "unfair: {got:?}");
            assert_eq!(
                theirs.participants().unwrap(),
                got,
                "unfair: from the other session"
            );
        } else {
            // A semaphore's waiter: its lease (over the one permit), then its node in the
            // internal lock's queue, which it holds while its lease waits.
            let want: &[(&str, bool)] = if kind == "semaphore" {
                &[("a", true), ("b", false), ("b", false)]
            } else {
                &[("a", true), ("b", false)]
            };
            settles(kind, "held, one waiting", [&*mine, &*theirs], want);
        }
        assert!(
            waiter.recv_timeout(SHORT).is_err(),
            "{kind}: the waiter got a held lock"
        );

        g.release_boxed()
            .unwrap_or_else(|e| panic!("{kind}: release: {e}"));
        let g2: BoxedGuard = recv(&waiter, WITHIN, &format!("{kind}: the waiter's acquire"))
            .unwrap_or_else(|e| panic!("{kind}: the waiter's acquire: {e}"));
        if kind == "unfair" {
            let got = theirs.participants().unwrap();
            assert_eq!(got.len(), 1, "unfair: {got:?}");
            assert!(got[0].holds, "unfair: {got:?}");
        } else {
            settles(kind, "handed over", [&*mine, &*theirs], &[("b", true)]);
        }
        g2.release_boxed()
            .unwrap_or_else(|e| panic!("{kind}: release: {e}"));
        settles(kind, "let go", [&*mine, &*theirs], &[]);
    }
}

/// `Lock::participants` of the two locks `DynLock` leaves out: a `ReentrantMutex` lists a
/// thread's levels as one node, a `MultiLock` each of its locks' lists in path order.
#[test]
fn participants_of_a_reentrant_lock_and_a_multi_lock() {
    let cs = shared_cluster().connect_string();
    let a = connect(&cs, SESSION);
    let root = unique("lock-api-participants-more");
    let who = |list: Vec<Participant>| -> Vec<(String, bool)> {
        list.into_iter()
            .map(|p| (String::from_utf8_lossy(&p.data).into_owned(), p.holds))
            .collect()
    };

    let r = ReentrantMutex::new(&a, &format!("{root}/reentrant"))
        .unwrap()
        .with_data("r");
    let (outer, inner) = (r.acquire().unwrap(), r.acquire().unwrap());
    assert_eq!(
        who(Lock::participants(&r).unwrap()),
        [("r".to_string(), true)]
    );
    drop((inner, outer));
    assert_eq!(Lock::participants(&r).unwrap(), []);

    // Given mutex first, taken (and listed) unfair lock first: `x` sorts before `y`.
    let (mutex_at, unfair_at) = (format!("{root}/y"), format!("{root}/x"));
    let multi = MultiLock::of(Mutex::new(&a, &mutex_at).unwrap().with_data("y"))
        .and(UnfairMutex::new(&a, &unfair_at).unwrap());
    assert_eq!(multi.participants().unwrap(), []);
    let g = multi.acquire().unwrap();
    // In path order: the unfair lock at `.../x` (its holder, named by the path), then the
    // mutex at `.../y`.
    let list = multi.participants().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(list[0].holds && list[0].node == "x", "{list:?}");
    assert_eq!(who(list[1..].to_vec()), [("y".to_string(), true)]);
    drop(g);
    assert_eq!(Lock::participants(&multi).unwrap(), []);
}
