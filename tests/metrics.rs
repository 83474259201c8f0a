//! The measurements (feature `metrics`, `src/metrics.rs`) after scripted scenarios on a real
//! server, read two ways: through `metrics-util`'s debugging recorder (the facade) and
//! through `Client::stats` (the pull snapshot). Scenarios: an uncontended acquire, a
//! contended handoff, a timeout and a try, a cancel, a loss by deletion, a session loss (and
//! a reconnect that re-arms), a leadership change, several kinds held at once; every gauge
//! goes back to zero once every guard is dropped.
//!
//! The recorder is global to the process, and the session metrics have no path: the tests
//! of this binary run one at a time (`SERIAL`), and the recipe metrics are read by each
//! test's own lock path (`metrics_path_labels(true)`).

mod common;

use std::collections::HashMap;
use std::sync::{Mutex as StdMutex, MutexGuard, OnceLock};
use std::time::Duration;

use common::{
    connect, queue_and_owners, queue_watches, recv, shared_cluster, sorted_watchers, spawn, unique,
    wait_until, watches_by_path, WITHIN,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use zkguard::metrics as m;
use zkguard::testing::FaultProxy;
use zkguard::{Client, ClientStats, Error, LeaderElection, Mutex, RwLock, Semaphore, SessionEvent};

const SESSION: Duration = Duration::from_secs(10);

/// What the recorder has seen so far: its snapshots drain counters, gauges and histograms,
/// so they are added up here.
#[derive(Default)]
struct Seen {
    counters: HashMap<Series, u64>,
    gauges: HashMap<Series, f64>,
    histograms: HashMap<Series, Vec<f64>>,
}

/// A metric's name and its labels, sorted.
type Series = (String, Vec<(String, String)>);

struct Recorded {
    snapshotter: Snapshotter,
    seen: Seen,
}

fn recorded() -> &'static StdMutex<Recorded> {
    static R: OnceLock<StdMutex<Recorded>> = OnceLock::new();
    R.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this process");
        StdMutex::new(Recorded {
            snapshotter,
            seen: Seen::default(),
        })
    })
}

/// One test at a time (the recorder and the session metrics are the process's).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: StdMutex<()> = StdMutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    (name.to_string(), l)
}

/// Reads what the recorder has recorded since the last look into `Seen`, then `f` of it.
fn seen<T>(f: impl FnOnce(&Seen) -> T) -> T {
    let mut r = recorded().lock().unwrap();
    for (key, _, _, value) in r.snapshotter.snapshot().into_vec() {
        let (_, key) = key.into_parts();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        labels.sort();
        let s = (key.name().to_string(), labels);
        match value {
            DebugValue::Counter(n) => *r.seen.counters.entry(s).or_default() += n,
            DebugValue::Gauge(g) => *r.seen.gauges.entry(s).or_default() += g.into_inner(),
            DebugValue::Histogram(h) => r
                .seen
                .histograms
                .entry(s)
                .or_default()
                .extend(h.into_iter().map(|x| x.into_inner())),
        }
    }
    f(&r.seen)
}

fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    seen(|s| s.counters.get(&series(name, labels)).copied().unwrap_or(0))
}

fn gauge(name: &str, labels: &[(&str, &str)]) -> f64 {
    seen(|s| s.gauges.get(&series(name, labels)).copied().unwrap_or(0.0))
}

fn samples(name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    seen(|s| {
        s.histograms
            .get(&series(name, labels))
            .cloned()
            .unwrap_or_default()
    })
}

/// A client whose recipe metrics carry the lock path.
fn labeled(connect_string: &str, session: Duration) -> Client {
    recorded(); // installed before the client records anything
    Client::builder(connect_string)
        .session_timeout(session)
        .connect_timeout(WITHIN)
        .metrics_path_labels(true)
        .build()
        .unwrap()
}

/// The acquires of a mutex at `path` that ended with `outcome`.
fn outcomes(path: &str, outcome: &str) -> u64 {
    counter(
        m::ACQUIRES,
        &[("kind", "mutex"), ("outcome", outcome), ("path", path)],
    )
}

fn mutex_gauges(path: &str) -> (f64, f64) {
    let l = [("kind", "mutex"), ("path", path)];
    (gauge(m::GUARDS_HELD, &l), gauge(m::WAITERS_QUEUED, &l))
}

fn wait_stats(c: &Client, what: &str, cond: impl Fn(&ClientStats) -> bool) {
    wait_until(WITHIN, what, || cond(&c.stats()));
}

/// A mutex at a fresh path held by client `a`, and the same mutex on client `b`: the
/// contended scenes' setting (path, a, b, a's guard, b's lock).
fn contended(prefix: &str) -> (String, Client, Client, zkguard::MutexGuard, Mutex) {
    let cs = shared_cluster().connect_string();
    let path = unique(prefix);
    let (a, b) = (labeled(&cs, SESSION), labeled(&cs, SESSION));
    let held = Mutex::new(&a, &path).unwrap().acquire().unwrap();
    let lock_b = Mutex::new(&b, &path).unwrap();
    (path, a, b, held, lock_b)
}

#[test]
fn an_uncontended_acquire_is_one_grant_one_wait_and_one_hold() {
    let _s = serial();
    let path = unique("m-one");
    let c = labeled(&shared_cluster().connect_string(), SESSION);
    let lock = Mutex::new(&c, &path).unwrap();
    let g = lock.acquire().unwrap();
    assert_eq!(outcomes(&path, "acquired"), 1);
    let waited = samples(
        m::ACQUIRE_WAIT,
        &[("kind", "mutex"), ("outcome", "acquired"), ("path", &path)],
    );
    assert_eq!(waited.len(), 1, "one wait recorded: {waited:?}");
    assert_eq!(mutex_gauges(&path), (1.0, 0.0), "(held, queued) while held");
    let s = c.stats();
    assert_eq!((s.acquired, s.guards_held, s.waiters_queued), (1, 1, 0));
    // No handoff: nobody was ahead.
    assert!(samples(m::HANDOFF_GAP, &[("kind", "mutex"), ("path", &path)]).is_empty());
    // Requests were timed by operation (the create and its listing went together).
    assert!(!samples(m::REQUEST, &[("op", "create")]).is_empty());
    g.release().unwrap();
    assert_eq!(
        mutex_gauges(&path),
        (0.0, 0.0),
        "(held, queued) after release"
    );
    let held = samples(m::HOLD, &[("kind", "mutex"), ("path", &path)]);
    assert_eq!(held.len(), 1);
    assert_eq!(c.stats().guards_held, 0);
    // Released is no loss.
    let s = c.stats();
    assert_eq!(
        (s.lost_session, s.lost_node_deleted, s.lost_closed),
        (0, 0, 0)
    );
    c.close();
}

#[test]
fn a_contended_handoff_counts_the_waiter_queued_then_measures_the_gap() {
    let _s = serial();
    let (path, a, b, held, lock_b) = contended("m-handoff");
    let got = spawn(move || lock_b.acquire().map(|g| g.token()));
    wait_until(WITHIN, "the waiter queued", || {
        b.stats().waiters_queued == 1 && mutex_gauges(&path) == (1.0, 1.0)
    });
    // Queued is counted when B's node is made, before B lists and arms its watch on A's
    // node: released before that watch is armed, A's node is found gone by B's arm, not
    // heard going, and no gap starts (what this test once saw: "handoff gaps: []"). So
    // the release waits for the server to show B's watch on A's node.
    let (queue, owners) = queue_and_owners(&a, &path);
    let want = queue_watches(&queue, &owners);
    wait_until(WITHIN, "the waiter's watch on the holder's node", || {
        let got = sorted_watchers(watches_by_path());
        want.iter().all(|(p, w)| got.get(p) == Some(w))
    });
    held.release().unwrap();
    recv(&got, WITHIN, "B's grant").unwrap();
    // B heard A's node go and was granted on that notification: one gap measured.
    let gaps = samples(m::HANDOFF_GAP, &[("kind", "mutex"), ("path", &path)]);
    assert_eq!(gaps.len(), 1, "handoff gaps: {gaps:?}");
    assert_eq!(outcomes(&path, "acquired"), 2);
    // B's guard was dropped with the thread's result: nothing held, nobody queued.
    wait_until(WITHIN, "gauges back to zero", || {
        mutex_gauges(&path) == (0.0, 0.0)
    });
    assert_eq!((b.stats().guards_held, b.stats().waiters_queued), (0, 0));
    a.close();
    b.close();
}

#[test]
fn a_timeout_and_a_busy_try_leave_the_queue_and_count_by_outcome() {
    let _s = serial();
    let (path, a, b, _held, lock_b) = contended("m-timeout");
    assert!(lock_b
        .acquire_timeout(Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert!(lock_b.try_acquire().unwrap().is_none());
    assert_eq!(outcomes(&path, "timed_out"), 1);
    assert_eq!(outcomes(&path, "busy"), 1);
    let s = b.stats();
    assert_eq!((s.acquire_timed_out, s.acquire_busy, s.acquired), (1, 1, 0));
    assert_eq!(s.waiters_queued, 0, "a timed-out waiter left the queue");
    assert_eq!(mutex_gauges(&path), (1.0, 0.0));
    a.close();
    b.close();
}

#[test]
fn a_cancelled_waiter_is_counted_cancelled_and_leaves_the_queue() {
    let _s = serial();
    let (path, a, b, _held, lock_b) = contended("m-cancel");
    let canceller = lock_b.canceller();
    let got = spawn(move || lock_b.acquire().map(|_| ()));
    wait_stats(&b, "the waiter queued", |s| s.waiters_queued == 1);
    canceller.cancel();
    assert!(matches!(
        recv(&got, WITHIN, "the cancelled acquire"),
        Err(Error::Cancelled { .. })
    ));
    assert_eq!(outcomes(&path, "cancelled"), 1);
    assert_eq!(b.stats().acquire_cancelled, 1);
    assert_eq!(b.stats().waiters_queued, 0);
    assert_eq!(mutex_gauges(&path), (1.0, 0.0));
    a.close();
    b.close();
}

#[test]
fn a_node_deleted_by_someone_else_is_a_loss_by_deletion_and_ends_the_hold() {
    let _s = serial();
    let cs = shared_cluster().connect_string();
    let path = unique("m-deleted");
    let a = labeled(&cs, SESSION);
    let admin = connect(&cs, SESSION);
    let g = Mutex::new(&a, &path).unwrap().acquire().unwrap();
    let lost = g.lost();
    admin.delete(g.path(), None).unwrap();
    recv(&lost, WITHIN, "the guard's loss");
    let l = [
        ("kind", "mutex"),
        ("reason", "node_deleted"),
        ("path", &path),
    ];
    assert_eq!(counter(m::LOSSES, &l), 1);
    assert_eq!(a.stats().lost_node_deleted, 1);
    // The hold ended at the loss, not at the drop: counted once.
    assert_eq!(mutex_gauges(&path).0, 0.0);
    assert_eq!(a.stats().guards_held, 0);
    drop(g);
    assert_eq!(
        samples(m::HOLD, &[("kind", "mutex"), ("path", &path)]).len(),
        1
    );
    assert_eq!(
        mutex_gauges(&path).0,
        0.0,
        "no second decrement at the drop"
    );
    a.close();
}

#[test]
fn a_reconnect_re_arms_and_a_lost_session_is_a_loss_and_a_new_session() {
    let _s = serial();
    let cluster = shared_cluster();
    let proxy = FaultProxy::start(&[cluster.client_addr(0)]).unwrap();
    let path = unique("m-session");
    let c = labeled(&proxy.connect_string(), Duration::from_secs(4));
    let events = c.events();
    let g = Mutex::new(&c, &path).unwrap().acquire().unwrap();
    // One round trip: the guard's own-node watch (sent unwaited with the grant) is set.
    g.confirm().unwrap();
    let resumed_before = counter(m::RECONNECTS, &[("session", "resumed")]);
    // A dropped connection, the same session: the guard's own-node watch is re-armed.
    proxy.reset();
    common::wait_event(&events, WITHIN, "reconnected", |e| {
        matches!(e, SessionEvent::Reconnected { .. })
    });
    let s = c.stats();
    assert!(s.reconnects >= 1 && s.watch_rearms >= 1, "{s:?}");
    assert!(counter(m::RECONNECTS, &[("session", "resumed")]) > resumed_before);
    assert!(counter(m::WATCH_REARMS, &[]) >= 1);
    assert!(g.is_valid(), "a resumed session keeps the lock");
    // Cut off: the session is lost, and so is the lock.
    let lost = g.lost();
    let to_lost = counter(m::SESSION_TRANSITIONS, &[("to", "lost")]);
    // Clients whose session is lost (this binary's others are closed: they left the gauge).
    let in_lost = || gauge(m::SESSION_STATE, &[("state", "lost")]);
    let lost_before = in_lost();
    proxy.blackhole();
    recv(&lost, Duration::from_secs(30), "the guard's loss");
    let l = [
        ("kind", "mutex"),
        ("reason", "session_lost"),
        ("path", &path),
    ];
    assert_eq!(counter(m::LOSSES, &l), 1);
    assert_eq!(c.stats().lost_session, 1);
    assert!(counter(m::SESSION_TRANSITIONS, &[("to", "lost")]) > to_lost);
    assert_eq!(in_lost(), lost_before + 1.0, "this client counted as lost");
    assert_eq!(mutex_gauges(&path).0, 0.0);
    // Healed: a new session, counted as a reconnect to a new session.
    let new_before = counter(m::RECONNECTS, &[("session", "new")]);
    proxy.heal();
    common::wait_event(&events, WITHIN, "a new session", |e| {
        matches!(e, SessionEvent::Connected { .. })
    });
    assert!(counter(m::RECONNECTS, &[("session", "new")]) > new_before);
    assert_eq!(c.stats().sessions, 2);
    assert_eq!(
        in_lost(),
        lost_before,
        "connected again: out of the lost state"
    );
    drop(g);
    c.close();
}

#[test]
fn a_leadership_change_moves_the_leading_gauge_and_counts_terms() {
    let _s = serial();
    let cs = shared_cluster().connect_string();
    let path = unique("m-elect");
    let a = labeled(&cs, SESSION);
    let b = labeled(&cs, SESSION);
    let leading = || gauge(m::LEADING, &[("election", &path)]);
    let ea = LeaderElection::new(&a, &path, "a").unwrap();
    let eb = LeaderElection::new(&b, &path, "b").unwrap();
    let la = ea.lead().unwrap();
    assert_eq!(leading(), 1.0);
    assert_eq!(a.stats().leadership_gained, 1);
    let next = spawn(move || eb.lead().map(|l| (l.token(), l)));
    wait_stats(&b, "b queued", |s| s.waiters_queued == 1);
    la.resign().unwrap();
    let (_, lb) = recv(&next, WITHIN, "b leads").unwrap();
    assert_eq!(leading(), 1.0, "one leader at a time in this process");
    let released = [("kind", "election"), ("reason", "released")];
    assert_eq!(counter(m::LEADERSHIP_LOST, &released), 1);
    assert_eq!(counter(m::LEADERSHIP_GAINED, &[("kind", "election")]), 2);
    // B's client closes under it: a loss, and nobody leads from here.
    b.close();
    let closed = [("kind", "election"), ("reason", "closed")];
    assert_eq!(counter(m::LEADERSHIP_LOST, &closed), 1);
    assert_eq!(b.stats().lost_closed, 1);
    assert_eq!(leading(), 0.0);
    drop(lb);
    assert_eq!(leading(), 0.0, "the drop after the loss changes nothing");
    assert_eq!(
        (a.stats().leadership_lost, b.stats().leadership_lost),
        (1, 1)
    );
    a.close();
}

#[test]
fn every_gauge_is_back_to_zero_once_every_kind_of_guard_is_dropped() {
    let _s = serial();
    let cs = shared_cluster().connect_string();
    let path = unique("m-kinds");
    let c = labeled(&cs, SESSION);
    let other = labeled(&cs, SESSION);
    let rw = RwLock::new(&c, &format!("{path}/rw")).unwrap();
    let (r1, r2) = (rw.read().unwrap(), rw.read().unwrap());
    let sem = Semaphore::new(&c, &format!("{path}/sem"), 2).unwrap();
    let (p1, p2) = (sem.acquire().unwrap(), sem.acquire().unwrap());
    // A third permit waits (the semaphore is full), measured as one semaphore waiter.
    let sem_other = Semaphore::new(&other, &format!("{path}/sem"), 2).unwrap();
    let third = spawn(move || sem_other.acquire().map(|_| ()));
    let sem_path = format!("{path}/sem");
    let queued = [("kind", "semaphore"), ("path", sem_path.as_str())];
    // Its lease made (past the internal lock's queue): queued until a permit frees.
    wait_until(WITHIN, "the third permit's lease queued", || {
        common::children(&c, &format!("{sem_path}/leases")).len() == 3
            && other.stats().waiters_queued == 1
            && gauge(m::WAITERS_QUEUED, &queued) == 1.0
    });
    let s = c.stats();
    assert_eq!(s.guards_held, 4, "{s:?}");
    let rw_path = format!("{path}/rw");
    let held = |kind: &str, p: &str| gauge(m::GUARDS_HELD, &[("kind", kind), ("path", p)]);
    assert_eq!(held("read_lock", &rw_path), 2.0);
    assert_eq!(held("semaphore", &sem_path), 2.0);
    drop((r1, r2, p1));
    recv(&third, WITHIN, "the third permit").unwrap();
    drop(p2);
    wait_until(WITHIN, "every gauge at zero", || {
        held("read_lock", &rw_path) == 0.0
            && held("semaphore", &sem_path) == 0.0
            && gauge(m::WAITERS_QUEUED, &queued) == 0.0
    });
    for client in [&c, &other] {
        let s = client.stats();
        assert_eq!((s.guards_held, s.waiters_queued), (0, 0), "{s:?}");
    }
    // Three permits granted; the internal lock's own grants are not acquires of their own.
    let granted = [("kind", "semaphore"), ("outcome", "acquired")];
    assert_eq!(
        counter(m::ACQUIRES, &[granted[0], granted[1], ("path", &sem_path)]),
        3
    );
    // Without the opt-in, no path label: the series is the kind's alone.
    let plain = connect(&cs, SESSION);
    let p = format!("{path}/plain");
    let before = counter(m::ACQUIRES, &[("kind", "mutex"), ("outcome", "acquired")]);
    drop(Mutex::new(&plain, &p).unwrap().acquire().unwrap());
    assert_eq!(
        counter(m::ACQUIRES, &[("kind", "mutex"), ("outcome", "acquired")]),
        before + 1
    );
    assert_eq!(outcomes(&p, "acquired"), 0);
    c.close();
    other.close();
    plain.close();
}

#[test]
fn a_permit_call_that_ends_in_the_internal_lock_queue_is_one_outcome() {
    let _s = serial();
    let cs = shared_cluster().connect_string();
    let path = unique("m-sem-queue");
    let (a, b, c) = (
        labeled(&cs, SESSION),
        labeled(&cs, SESSION),
        labeled(&cs, SESSION),
    );
    let _permit = Semaphore::new(&a, &path, 1).unwrap().acquire().unwrap();
    // b waits for the permit holding the internal lock: c can only queue behind it.
    let sem_b = Semaphore::new(&b, &path, 1).unwrap();
    let _waiting = spawn(move || sem_b.acquire().map(|_| ()));
    wait_stats(&b, "b waiting with its lease", |s| s.waiters_queued == 1);
    let sem_c = Semaphore::new(&c, &path, 1).unwrap();
    assert!(sem_c.try_acquire().unwrap().is_none());
    let short = Duration::from_millis(300);
    assert!(sem_c.acquire_timeout(short).unwrap().is_none());
    let by = |outcome: &str| {
        let l = [("kind", "semaphore"), ("outcome", outcome), ("path", &path)];
        counter(m::ACQUIRES, &l)
    };
    assert_eq!((by("busy"), by("timed_out"), by("acquired")), (1, 1, 1));
    let s = c.stats();
    assert_eq!(
        (
            s.acquire_busy,
            s.acquire_timed_out,
            s.acquired,
            s.waiters_queued
        ),
        (1, 1, 0, 0)
    );
    let queued = [("kind", "semaphore"), ("path", path.as_str())];
    assert_eq!(gauge(m::WAITERS_QUEUED, &queued), 1.0, "b alone waits");
    for client in [a, b, c] {
        client.close();
    }
}
