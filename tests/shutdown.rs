//! Stopping a multi-threaded daemon, against a real ZooKeeper server: threads blocked in a
//! `Mutex`'s and a `Semaphore`'s acquire, in `lead()`, and on a `Candidate` (its events, its
//! `wait_for_leadership`) all return after the stop, by either of the two documented ways:
//! shutting the cancellers and stopping the candidate (the graceful stop, which stays
//! stopped for acquires started later), or closing the client (which ends every blocked
//! call). No timed assertion: the threads are joined with a generous bound; the stop's
//! latency is measured by `examples/daemon.rs`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{children, connect, recv, shared_cluster, spawn, unique, wait_until, WITHIN};
use crossbeam_channel::Receiver;
use zkguard::{Client, Error, LeaderElection, Mutex, Semaphore};

const SESSION: Duration = Duration::from_secs(4);

fn client() -> Client {
    connect(&shared_cluster().connect_string(), SESSION)
}

/// The locks of one daemon, each held by another process (`holder`) so the daemon's
/// threads block on them.
struct Busy {
    mutex: Mutex,
    semaphore: Semaphore,
    election: LeaderElection,
    dirs: Vec<String>,
    _held: Vec<Box<dyn std::any::Any>>,
}

fn busy(holder: &Client, daemon: &Client) -> Busy {
    let base = unique("stop");
    let (m, s, e) = (
        format!("{base}/mutex"),
        format!("{base}/sem"),
        format!("{base}/el"),
    );
    let held: Vec<Box<dyn std::any::Any>> = vec![
        Box::new(Mutex::new(holder, &m).unwrap().acquire().unwrap()),
        Box::new(Semaphore::new(holder, &s, 1).unwrap().acquire().unwrap()),
        Box::new(
            LeaderElection::new(holder, &e, "holder")
                .unwrap()
                .lead()
                .unwrap(),
        ),
    ];
    Busy {
        mutex: Mutex::new(daemon, &m).unwrap(),
        semaphore: Semaphore::new(daemon, &s, 1).unwrap(),
        election: LeaderElection::new(daemon, &e, "daemon").unwrap(),
        dirs: vec![m, format!("{s}/leases"), e],
        _held: held,
    }
}

/// What each blocked thread returned, as text ("ok" or the error's variant).
type Outcome = Receiver<String>;

fn outcome<T>(r: zkguard::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(Error::Cancelled { .. }) => "cancelled".into(),
        Err(Error::Closed) => "closed".into(),
        Err(e) => format!("{e:?}"),
    }
}

/// Threads blocked in: two acquires of the mutex (clones share its canceller), one of the
/// semaphore, `lead()`, the candidate's events (until the stream ends) and its
/// `wait_for_leadership`. Returns once every one is queued in ZooKeeper.
fn block(b: &Busy, candidate: &Arc<zkguard::Candidate>, observer: &Client) -> Vec<Outcome> {
    let mut out = Vec::new();
    for _ in 0..2 {
        let m = b.mutex.clone();
        out.push(spawn(move || outcome(m.acquire())));
    }
    let s = b.semaphore.clone();
    out.push(spawn(move || outcome(s.acquire())));
    let e = b.election.clone();
    out.push(spawn(move || outcome(e.lead())));
    let events = candidate.events();
    out.push(spawn(move || {
        let seen: Vec<_> = events.iter().collect();
        format!("events ended after {seen:?}")
    }));
    let c = candidate.clone();
    out.push(spawn(move || {
        outcome(c.wait_for_leadership(Duration::from_secs(3600)))
    }));
    // Queued: the holder's node and the daemon's (two, one, two: lead and the candidate).
    let want = [3, 2, 3];
    for (dir, n) in b.dirs.iter().zip(want) {
        wait_until(WITHIN, &format!("the waiters queued in {dir}"), || {
            children(observer, dir).len() == n
        });
    }
    out
}

fn results(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .map(|rx| recv(rx, WITHIN, "a blocked thread returned"))
        .collect()
}

#[test]
fn shut_cancellers_and_a_stopped_candidate_end_every_blocked_call_and_stay_stopped() {
    let (holder, daemon) = (client(), client());
    let b = busy(&holder, &daemon);
    let candidate = Arc::new(b.election.join().unwrap());
    let blocked = block(&b, &candidate, &holder);
    b.mutex.canceller().shut();
    b.semaphore.canceller().shut();
    b.election.canceller().shut();
    candidate.stop();
    let got = results(&blocked);
    assert_eq!(
        got,
        [
            "cancelled",
            "cancelled",
            "cancelled",
            "cancelled",
            "events ended after []",
            "closed"
        ]
    );
    // Stays stopped: an acquire started later (the race of "set a flag, then cancel")
    // returns at once, leaving nothing behind; a plain `cancel` does not do that.
    assert!(b.mutex.canceller().is_shut());
    assert_eq!(outcome(b.mutex.acquire()), "cancelled");
    assert_eq!(outcome(b.semaphore.acquire()), "cancelled");
    assert_eq!(outcome(b.election.lead()), "cancelled");
    assert_eq!(
        outcome(b.mutex.clone().acquire_timeout(Duration::from_secs(3600))),
        "cancelled"
    );
    // Only the holder's nodes are left: the daemon's went with the stop.
    for dir in &b.dirs {
        wait_until(WITHIN, &format!("only the holder's node in {dir}"), || {
            children(&holder, dir).len() == 1
        });
    }
    // The client itself goes on: a new lock object at the same path works.
    let fresh = Mutex::new(&daemon, &b.dirs[0]).unwrap();
    assert!(
        fresh.try_acquire().unwrap().is_none(),
        "the holder holds it"
    );
}

#[test]
fn a_plain_cancel_does_not_reach_later_acquires() {
    let (holder, daemon) = (client(), client());
    let b = busy(&holder, &daemon);
    let m = b.mutex.clone();
    let first = spawn(move || outcome(m.acquire()));
    wait_until(WITHIN, "queued", || {
        children(&holder, &b.dirs[0]).len() == 2
    });
    b.mutex.canceller().cancel();
    assert_eq!(recv(&first, WITHIN, "the cancelled acquire"), "cancelled");
    assert!(!b.mutex.canceller().is_shut());
    wait_until(WITHIN, "the cancelled waiter's node gone", || {
        children(&holder, &b.dirs[0]).len() == 1
    });
    // A later one waits again (and is ended by the shut).
    let m = b.mutex.clone();
    let later = spawn(move || outcome(m.acquire()));
    wait_until(WITHIN, "queued again", || {
        children(&holder, &b.dirs[0]).len() == 2
    });
    assert!(
        later.try_recv().is_err(),
        "a cancel reached a later acquire"
    );
    b.mutex.canceller().shut();
    assert_eq!(recv(&later, WITHIN, "the shut acquire"), "cancelled");
}

#[test]
fn closing_the_client_ends_every_blocked_call_and_a_leading_candidate() {
    let (holder, daemon) = (client(), client());
    let b = busy(&holder, &daemon);
    let candidate = Arc::new(b.election.join().unwrap());
    let blocked = block(&b, &candidate, &holder);
    // A second candidate that leads (its own election) and a guard held: both lost.
    let leading = LeaderElection::new(&daemon, &unique("stop-lead"), "daemon")
        .unwrap()
        .join()
        .unwrap();
    let lead_events = leading.events();
    leading.wait_for_leadership(WITHIN).unwrap().expect("leads");
    let guard = Mutex::new(&daemon, &unique("stop-held"))
        .unwrap()
        .acquire()
        .unwrap();
    let lost = guard.lost();
    daemon.close();
    let got = results(&blocked);
    assert_eq!(
        got,
        [
            "closed",
            "closed",
            "closed",
            "closed",
            "events ended after []",
            "closed"
        ]
    );
    let seen: Vec<_> = lead_events.iter().collect();
    assert_eq!(
        seen,
        [
            zkguard::LeaderEvent::Elected {
                token: seen_token(&seen)
            },
            zkguard::LeaderEvent::Lost
        ]
    );
    recv(&lost, WITHIN, "the held guard lost");
    assert_eq!(outcome(b.mutex.acquire()), "closed");
    // The session's end took every node of the daemon's with it.
    for dir in &b.dirs {
        wait_until(WITHIN, &format!("only the holder's node in {dir}"), || {
            children(&holder, dir).len() == 1
        });
    }
}

fn seen_token(seen: &[zkguard::LeaderEvent]) -> u64 {
    match seen.first() {
        Some(zkguard::LeaderEvent::Elected { token }) => *token,
        other => panic!("expected Elected first, got {other:?}"),
    }
}
