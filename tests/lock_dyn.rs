//! `DynLock` and `BoxedGuard` against a real ZooKeeper server: a lock picked at run time,
//! held through `Box<dyn DynLock>` and released through `Guard::release_boxed`, with the
//! same exclusion and tokens as the concrete lock.

mod common;

use std::time::{Duration, Instant};

use common::{connect, recv, shared_cluster, spawn, unique, WITHIN};
use zkguard::{
    BoxedGuard, Client, DynLock, Error, LeaderElection, Mutex, RwLock, Semaphore, UnfairMutex,
};

const SESSION: Duration = Duration::from_secs(10);
/// A timeout that must run out (the lock is held throughout).
const SHORT: Duration = Duration::from_millis(300);

/// Each kind of lock whose guard is `Send`, boxed, at `dir`, as picked by name at run time.
fn pick(client: &Client, kind: &str, dir: &str) -> Box<dyn DynLock> {
    let made = match kind {
        "mutex" => Mutex::new(client, dir).map(|l| Box::new(l) as Box<dyn DynLock>),
        "unfair" => UnfairMutex::new(client, dir).map(|l| Box::new(l) as Box<dyn DynLock>),
        "write" => RwLock::new(client, dir).map(|l| Box::new(l.write_lock().clone()) as _),
        "semaphore" => Semaphore::new(client, dir, 1).map(|l| Box::new(l) as _),
        "election" => LeaderElection::new(client, dir, "id").map(|l| Box::new(l) as _),
        other => panic!("no lock kind {other}"),
    };
    made.unwrap_or_else(|e| panic!("{kind} at {dir}: {e}"))
}

#[test]
fn a_boxed_lock_of_every_kind_excludes_hands_over_with_a_larger_token_and_releases() {
    let cs = shared_cluster().connect_string();
    let (a, b) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let root = unique("lock-dyn");
    for kind in ["mutex", "unfair", "write", "semaphore", "election"] {
        let dir = format!("{root}/{kind}");
        let (mine, theirs) = (pick(&a, kind, &dir), pick(&b, kind, &dir));
        let g = mine
            .acquire_boxed()
            .unwrap_or_else(|e| panic!("{kind}: acquire_boxed: {e}"));
        assert!(g.is_valid(), "{kind}: fresh guard not valid");
        assert!(g.path().starts_with(&dir), "{kind}: node {}", g.path());
        let token = g.token();
        // Refused by the other session, at once and after the timeout (not before).
        let t0 = Instant::now();
        let refused = [
            ("try_acquire_boxed", theirs.try_acquire_boxed()),
            ("acquire_timeout_boxed", theirs.acquire_timeout_boxed(SHORT)),
        ];
        assert!(t0.elapsed() >= SHORT, "{kind}: timeout gave up early");
        for (how, got) in refused {
            let got = got.unwrap_or_else(|e| panic!("{kind}: {how}: {e}"));
            assert!(got.is_none(), "{kind}: {how} got a held lock");
        }

        // The boxed guard moves to another thread and is released there, with a report.
        let released = spawn(move || g.release_boxed());
        recv(&released, WITHIN, "the release")
            .unwrap_or_else(|e| panic!("{kind}: release_boxed: {e}"));
        let next = theirs.acquire_timeout_boxed(WITHIN).unwrap();
        assert!(
            next.is_some_and(|g2| g2.token() > token),
            "{kind}: not handed over with a larger token"
        );
    }
}

/// `release_boxed` reports a lock lost before it, as `release` does.
#[test]
fn release_boxed_reports_a_lock_lost_before_it() {
    let cs = shared_cluster().connect_string();
    let (a, other) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let dir = unique("lock-dyn-lost");
    let g: BoxedGuard = pick(&a, "mutex", &dir).acquire_boxed().unwrap();
    let lost = g.lost();
    other.delete(g.path(), None).unwrap();
    recv(&lost, WITHIN, "the loss of the deleted node");
    match g.release_boxed() {
        Err(Error::LockLost { .. }) => {}
        other => panic!("expected LockLost, got {other:?}"),
    }
}
