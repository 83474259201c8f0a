//! Leader election under faults, against real servers: failover after a leader goes silent
//! and after its client is closed (fair and unfair elections); a candidate that survives its
//! session's expiry; a leader whose server is killed; confirm during a partition. (A hundred
//! rounds of churn: `tests/election_churn.rs`.)
//!
//! Every test starts its own cluster. Assertions are about orderings (who led before whom,
//! what was reported before what), with generous deadlines only to turn a hang into a
//! failure; the few durations asserted have bounds a loaded machine cannot break in the
//! direction asserted (a session cannot expire early on the server).

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::partition::{partition, server_of};
use common::{connect, init_log, queue, unique, wait_event, wait_until, WITHIN};
use crossbeam_channel::{Receiver, Select};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Candidate, Client, Error, LeaderElection, LeaderEvent, SessionEvent};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// The next event of a candidate, waiting at most `within`.
fn next_event(events: &Receiver<LeaderEvent>, within: Duration, who: &str) -> LeaderEvent {
    events
        .recv_timeout(within)
        .unwrap_or_else(|e| panic!("{who}: no event within {within:?} ({e})"))
}

/// Every event already queued for a candidate, without waiting.
fn queued_events(events: &Receiver<LeaderEvent>) -> Vec<LeaderEvent> {
    events.try_iter().collect()
}

/// Waits until the election's queue holds exactly `ids`, in this order.
fn wait_queue(observer: &LeaderElection, ids: &[&str], what: &str) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let last = queue(observer);
        if last
            .iter()
            .map(|(id, _)| id.as_str())
            .eq(ids.iter().copied())
        {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: queue is {last:?}, want {ids:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// What a guard-style `lead()` on another thread reports.
struct Led {
    /// When `lead` returned.
    at: Instant,
    result: zkguard::Result<zkguard::Leadership>,
    /// Whether the previous leader's `lost()` had fired by the time `lead` returned.
    previous_lost: bool,
}

/// Runs `election.lead()` on a thread; the moment it returns, it looks whether
/// `previous_lost` (a `lost()` receiver of the current leader) has fired.
fn spawn_lead(election: LeaderElection, previous_lost: Receiver<()>) -> Receiver<Led> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    thread::spawn(move || {
        let result = election.lead();
        let at = Instant::now();
        let previous_lost = previous_lost.try_recv().is_ok();
        let _ = tx.send(Led {
            at,
            result,
            previous_lost,
        });
    });
    rx
}

// ---------------------------------------------------------------------------------------
// 2. Failover after the leader goes silent
// ---------------------------------------------------------------------------------------

/// A fair or an unfair election at a fresh path.
fn election(client: &Client, path: &str, id: &str, fair: bool) -> LeaderElection {
    if fair {
        LeaderElection::new(client, path, id).unwrap()
    } else {
        LeaderElection::unfair(client, path, id).unwrap()
    }
}

/// Waits until the standalone server of `cluster` holds at least `n` watches (the unfair
/// election's waiters are seen only as watches on its node).
fn wait_watches(cluster: &TestCluster, n: usize, what: &str) {
    wait_until(Duration::from_secs(20), what, || {
        let reply = cluster.four_letter(0, "wchs").unwrap_or_default();
        reply
            .lines()
            .find_map(|l| l.strip_prefix("Total watches:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .is_some_and(|v| v >= n)
    });
}

/// The leader (guard style) goes silent; a waiter (guard style) takes over once the server
/// expires the leader's session.
fn silent_leader_failover(fair: bool) {
    let (cluster, proxy) = partition(1);
    let a = connect(&proxy.connect_string(), Duration::from_secs(3));
    let b = connect(&cluster.connect_string(), Duration::from_secs(3));
    let t = a.session_timeout();
    let path = unique("el-silent");
    let ea = election(&a, &path, "a", fair);
    let la = ea.lead().unwrap();
    let lost = la.lost();
    let successor = spawn_lead(election(&b, &path, "b", fair), la.lost());
    if fair {
        wait_queue(&ea, &["a", "b"], "b queued");
    } else {
        // a's own watch (armed by lost()) and b's.
        wait_watches(&cluster, 2, "b waiting");
    }
    let a_events = a.events();

    // The server hears from the leader now, and then never again. The server renews the
    // session when the confirm arrives, after `heard`; `cut` is taken after its reply has
    // come back, which on a loaded machine may be well after that.
    let heard = Instant::now();
    la.confirm().unwrap();
    let cut = Instant::now();
    proxy.blackhole();
    wait_event(&a_events, t * 2, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    let suspended = cut.elapsed();
    assert!(!la.is_valid(), "valid while suspended");
    lost.recv_timeout(WITHIN).expect("lost never fired");
    let lost_after = cut.elapsed();
    assert!(!la.is_valid());
    let led = successor
        .recv_timeout(t + WITHIN)
        .expect("no successor after the session timeout");
    let lb = led.result.unwrap();
    let failover = led.at - cut;
    log::info!(
        "silent leader (fair {fair}, session {t:?}): suspended after {suspended:?}, lost \
         after {lost_after:?}, successor elected after {failover:?}"
    );
    assert!(
        led.previous_lost,
        "the successor was elected {failover:?} after the cut, before the old leader's lost() \
         fired"
    );
    // The server keeps the silent session for its whole timeout from when it last heard
    // from it: no sooner, whatever the load (counted from before the confirm was sent, as
    // the server may have heard it well before `cut`). No upper bound: how fast the server
    // expires a session and the successor reacts is not a promise of ours.
    let since_heard = led.at - heard;
    assert!(
        since_heard + Duration::from_millis(100) >= t,
        "successor elected {since_heard:?} after the leader's last confirm: sooner than the \
         session timeout {t:?}"
    );
    // The silent leader stopped counting as leader before its session could expire: the
    // promise is two thirds of the timeout (docs/semantics.md); the last third is slack for the
    // client's thread on a loaded machine. Timing-sensitive by design.
    assert!(suspended < t, "suspended only {suspended:?} after the cut");
    assert!(lb.is_valid());
    lb.confirm().unwrap();
    assert!(lb.token() > la.token());
    proxy.heal();
    drop(la);
    lb.resign().unwrap();
}

#[test]
fn failover_after_the_leader_goes_silent_takes_about_the_session_timeout() {
    silent_leader_failover(true);
}

#[test]
fn unfair_failover_after_the_leader_goes_silent_takes_about_the_session_timeout() {
    silent_leader_failover(false);
}

// ---------------------------------------------------------------------------------------
// 3. Failover after the leader's client is closed
// ---------------------------------------------------------------------------------------

/// A guard-style leader closes its client, then the background-style leader elected after
/// it does the same.
fn closed_leader_failover(fair: bool) {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    // A long session: a failover within half of it cannot be the session expiring (that
    // takes at least two thirds of it after the last ping), and half of it is ample for a
    // prompt handover on a loaded machine. (With 6 s, "fast" meant within 3 s.)
    let t = Duration::from_secs(30);
    let a = connect(&cluster.connect_string(), t);
    let path = unique("el-close");
    let ea = election(&a, &path, "a", fair);
    let la = ea.lead().unwrap();
    let a_lost = la.lost();
    let mut others = Vec::new();
    for id in ["b", "c"] {
        let client = connect(&cluster.connect_string(), t);
        let cand = election(&client, &path, id, fair).join().unwrap();
        let events = cand.events();
        others.push((id, client, cand, events));
        if fair {
            let ids: Vec<&str> = std::iter::once("a")
                .chain(others.iter().map(|o| o.0))
                .collect();
            wait_queue(&ea, &ids, "queued");
        }
    }
    if !fair {
        wait_watches(&cluster, 3, "b and c waiting");
    }

    // Whichever of b and c is elected next (the unfair kind has no order).
    let next_elected = |others: &[(&str, Client, Candidate, Receiver<LeaderEvent>)],
                        skip: Option<usize>|
     -> (usize, LeaderEvent) {
        let mut sel = Select::new();
        let idx: Vec<usize> = (0..others.len()).filter(|&i| Some(i) != skip).collect();
        for &i in &idx {
            sel.recv(&others[i].3);
        }
        let op = sel
            .select_timeout(t)
            .unwrap_or_else(|_| panic!("nobody elected within {t:?}"));
        let i = idx[op.index()];
        let ev = op.recv(&others[i].3).unwrap();
        (i, ev)
    };

    // A guard-style leader closes its client: its lost() fires before anyone else leads.
    let closed = Instant::now();
    if let Err(e) = a.close().into_result() {
        log::info!("close: {e}");
    }
    let (w, ev) = next_elected(&others, None);
    let first = closed.elapsed();
    let a_knew = a_lost.try_recv().is_ok();
    assert!(
        matches!(ev, LeaderEvent::Elected { .. }),
        "{}: {ev:?}",
        others[w].0
    );
    assert!(
        a_knew,
        "{} was elected before a's lost() fired",
        others[w].0
    );
    assert!(!la.is_valid());
    assert!(
        first < t / 2,
        "failover after close took {first:?} (session timeout {t:?})"
    );

    // A background-style leader closes its client: it reports Lost before anyone else
    // is elected, and is_leader() is false by then.
    others[w].2.confirm().unwrap();
    let closed = Instant::now();
    if let Err(e) = others[w].1.close().into_result() {
        log::info!("close: {e}");
    }
    let (v, ev) = next_elected(&others, Some(w));
    let second = closed.elapsed();
    let w_said = queued_events(&others[w].3);
    let w_leads = others[w].2.is_leader();
    assert!(
        matches!(ev, LeaderEvent::Elected { .. }),
        "{}: {ev:?}",
        others[v].0
    );
    assert!(
        w_said.contains(&LeaderEvent::Lost),
        "{} was elected {second:?} after {}'s client was closed, which had reported only \
         {w_said:?}",
        others[v].0,
        others[w].0
    );
    assert!(!w_leads, "the closed leader still said it leads");
    assert!(
        second < t / 2,
        "failover after close took {second:?} (session timeout {t:?})"
    );
    log::info!("failover after close (fair {fair}): guard {first:?}, candidate {second:?}");
    others[v].2.confirm().unwrap();
    // The closed candidate's stream ends.
    assert_eq!(
        others[w].3.recv_timeout(Duration::from_secs(10)),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected),
        "events after Lost"
    );
    assert_eq!(
        others[w].2.wait_for_leadership(Duration::from_secs(1)),
        Err(Error::Closed)
    );
    drop(la);
}

#[test]
fn failover_after_the_leaders_client_is_closed_is_fast_and_reported_first() {
    closed_leader_failover(true);
}

#[test]
fn unfair_failover_after_the_leaders_client_is_closed_is_fast_and_reported_first() {
    closed_leader_failover(false);
}

// ---------------------------------------------------------------------------------------
// 4. A candidate survives its session's expiry
// ---------------------------------------------------------------------------------------

#[test]
fn candidates_survive_their_sessions_expiry_and_are_elected_again() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let t = Duration::from_secs(3);
    let (pa, pc) = (
        FaultProxy::for_cluster(&cluster).unwrap(),
        FaultProxy::for_cluster(&cluster).unwrap(),
    );
    let a = connect(&pa.connect_string(), t);
    let b = connect(&cluster.connect_string(), t);
    let c = connect(&pc.connect_string(), t);
    let path = unique("el-expire");
    let observer = LeaderElection::new(&b, &path, "observer").unwrap();
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let a_events = ca.events();
    let a_token = match next_event(&a_events, Duration::from_secs(20), "a") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("a: {ev:?}"),
    };
    let cb = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    let b_events = cb.events();
    wait_queue(&observer, &["a", "b"], "b queued");
    let cc = LeaderElection::new(&c, &path, "c").unwrap().join().unwrap();
    let c_events = cc.events();
    let before = wait_queue(&observer, &["a", "b", "c"], "c queued");
    let (a_session, c_session) = (a.session_id(), c.session_id());

    // The leader and a follower are cut off long enough for their sessions to expire.
    pa.blackhole();
    pc.blackhole();
    let b_token = match next_event(&b_events, Duration::from_secs(30), "b") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("b: {ev:?}"),
    };
    // Reported by a before b was elected.
    let a_said = queued_events(&a_events);
    assert_eq!(
        a_said[..a_said.len().min(2)],
        [LeaderEvent::Suspended, LeaderEvent::Lost],
        "a's events when b was elected"
    );
    assert!(b_token > a_token);
    let mut a_said = a_said;
    while a_said.len() < 2 {
        a_said.push(next_event(&a_events, Duration::from_secs(20), "a"));
    }
    assert_eq!(a_said, [LeaderEvent::Suspended, LeaderEvent::Lost]);
    wait_queue(&observer, &["b"], "the expired sessions' nodes gone");
    assert!(!ca.is_leader());
    assert!(cb.is_leader());

    // Back: each gets a new session on its own and queues again behind b; `Rejoined` is
    // said once the new session exists (issue 36), never while cut off.
    pa.heal();
    assert_eq!(
        next_event(&a_events, Duration::from_secs(20), "a"),
        LeaderEvent::Rejoined
    );
    assert_ne!(a.session_id(), a_session, "Rejoined before a new session");
    assert_ne!(a.session_id(), 0, "Rejoined before a new session");
    let after_a = wait_queue(&observer, &["b", "a"], "a queued again");
    assert_ne!(after_a[1].1, before[0].1, "a's node is not new");
    pc.heal();
    assert_eq!(
        next_event(&c_events, Duration::from_secs(20), "c"),
        LeaderEvent::Rejoined
    );
    assert_ne!(c.session_id(), c_session, "Rejoined before a new session");
    assert_ne!(c.session_id(), 0, "Rejoined before a new session");
    let after = wait_queue(&observer, &["b", "a", "c"], "c queued again");
    assert_ne!(after[2].1, before[2].1, "c's node is not new");
    assert_ne!(a.session_id(), a_session);
    assert_ne!(c.session_id(), c_session);
    assert!(queued_events(&a_events).is_empty());
    assert!(queued_events(&c_events).is_empty());

    // b resigns: a leads again, with a larger token; then a resigns: c leads.
    assert_eq!(cb.resign(), Ok(()));
    assert_eq!(
        next_event(&b_events, Duration::from_secs(10), "b"),
        LeaderEvent::Resigned
    );
    let a_token2 = match next_event(&a_events, Duration::from_secs(20), "a") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("a: {ev:?}"),
    };
    assert!(a_token2 > b_token && a_token2 > a_token);
    assert_eq!(ca.token(), Some(a_token2));
    ca.confirm().unwrap();
    assert_eq!(ca.resign(), Ok(()));
    let c_token = match next_event(&c_events, Duration::from_secs(20), "c") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("c: {ev:?}"),
    };
    assert!(c_token > a_token2);
    cc.confirm().unwrap();
    assert_eq!(observer.leader().unwrap().map(|p| p.id()), Some("c".into()));
}

// ---------------------------------------------------------------------------------------
// 5. A leader whose server is killed keeps its term
// ---------------------------------------------------------------------------------------

#[test]
fn a_leader_whose_server_is_killed_is_suspended_then_restored_with_the_same_token() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    // Long enough to outlast a leader election of the ensemble on a loaded machine.
    let t = Duration::from_secs(6);
    let a = connect(&cluster.connect_string(), t);
    let b = connect(&cluster.connect_string(), t);
    let c = connect(&cluster.connect_string(), t);
    let path = unique("el-kill");
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let a_events = ca.events();
    let token = match next_event(&a_events, Duration::from_secs(20), "a") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("a: {ev:?}"),
    };
    let observer = LeaderElection::new(&b, &path, "observer").unwrap();
    let cb = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    wait_queue(&observer, &["a", "b"], "b queued");
    let cc = LeaderElection::new(&c, &path, "c").unwrap().join().unwrap();
    let before = wait_queue(&observer, &["a", "b", "c"], "all queued");
    let (b_events, c_events) = (cb.events(), cc.events());
    let session = a.session_id();

    // First a's own server, then whichever server leads the ensemble.
    for phase in ["a's server", "the ensemble's leader"] {
        ca.confirm().unwrap();
        let victim = if phase == "a's server" {
            let mut s = None;
            wait_until(Duration::from_secs(20), "a connected", || {
                s = server_of(&cluster, &a);
                s.is_some()
            });
            s.unwrap_or_default()
        } else {
            cluster.leader().expect("the ensemble has a leader")
        };
        let killed = Instant::now();
        cluster.kill(victim).unwrap();
        assert_eq!(
            next_event(&a_events, Duration::from_secs(20), "a"),
            LeaderEvent::Suspended,
            "{phase}"
        );
        // Suspended again if a reconnect drops before leadership is proven.
        loop {
            match next_event(&a_events, Duration::from_secs(30), "a") {
                LeaderEvent::Restored => break,
                LeaderEvent::Suspended => continue,
                ev => panic!("{phase}: a: {ev:?}"),
            }
        }
        log::info!(
            "{phase} (server {victim}) killed: a restored after {:?}",
            killed.elapsed()
        );
        assert!(ca.is_leader());
        ca.confirm().unwrap();
        assert_eq!(ca.token(), Some(token));
        assert_eq!(a.session_id(), session);
        assert!(queued_events(&b_events).is_empty(), "{phase}: b");
        assert!(queued_events(&c_events).is_empty(), "{phase}: c");
        assert!(!cb.is_leader() && !cc.is_leader());
        cluster.start_server(victim).unwrap();
    }
    let after = wait_queue(&observer, &["a", "b", "c"], "nobody moved");
    assert_eq!(after, before);
    assert!(queued_events(&a_events).is_empty());
    assert!(queued_events(&b_events).is_empty());
    assert!(queued_events(&c_events).is_empty());
}

// ---------------------------------------------------------------------------------------
// 6. confirm() during a partition
// ---------------------------------------------------------------------------------------

#[test]
fn a_partitioned_leaders_confirm_never_says_yes() {
    let (cluster, proxy) = partition(1);
    let t = Duration::from_secs(3);
    let a = connect(&proxy.connect_string(), t);
    let b = connect(&cluster.connect_string(), t);
    // a leads two elections, one in each style; b waits in both.
    let (p1, p2) = (unique("el-confirm-guard"), unique("el-confirm-cand"));
    let la = LeaderElection::new(&a, &p1, "a").unwrap().lead().unwrap();
    let ca = LeaderElection::new(&a, &p2, "a").unwrap().join().unwrap();
    assert!(ca
        .wait_for_leadership(Duration::from_secs(20))
        .unwrap()
        .is_some());
    let cb1 = LeaderElection::new(&b, &p1, "b").unwrap().join().unwrap();
    let cb2 = LeaderElection::new(&b, &p2, "b").unwrap().join().unwrap();
    wait_queue(
        &LeaderElection::new(&b, &p1, "o").unwrap(),
        &["a", "b"],
        "b queued (guard)",
    );
    wait_queue(
        &LeaderElection::new(&b, &p2, "o").unwrap(),
        &["a", "b"],
        "b queued (candidate)",
    );
    la.confirm().unwrap();
    ca.confirm().unwrap();

    // The first question goes out while the client still believes it is connected.
    assert_eq!(a.state(), zkguard::SessionState::Connected);
    proxy.blackhole();
    let cut = Instant::now();
    // Ask both, again and again, until b leads both elections, and once more after.
    let mut answers: Vec<(&str, Duration, Duration, Error)> = Vec::new();
    loop {
        let b_leads = cb1.is_leader() && cb2.is_leader();
        for who in ["guard", "candidate"] {
            let asked = cut.elapsed();
            let r = if who == "guard" {
                la.confirm()
            } else {
                ca.confirm()
            };
            match r {
                Ok(()) => panic!(
                    "{who}: confirm asked {asked:?} into the partition said yes (answers so \
                     far: {answers:?})"
                ),
                Err(e) => answers.push((who, asked, cut.elapsed(), e)),
            }
        }
        if b_leads {
            break;
        }
        assert!(
            cut.elapsed() < t * 10,
            "b not leading both within {:?}",
            t * 10
        );
        // Pacing: once the terms are known lost, the answers come at once.
        thread::sleep(Duration::from_millis(20));
    }
    let firsts: Vec<_> = answers.iter().take(4).collect();
    log::info!(
        "confirm during the partition: {} answers, all errors; the first: {firsts:?}",
        answers.len()
    );
    for who in ["guard", "candidate"] {
        assert!(
            answers
                .iter()
                .any(|(w, _, _, e)| *w == who && matches!(e, Error::NotLeader { .. })),
            "{who}: never NotLeader during the partition: {answers:?}"
        );
    }
    assert!(!la.is_valid());
    assert!(!ca.is_leader());
    proxy.heal();
    cb1.confirm().unwrap();
    cb2.confirm().unwrap();
    // Healed, the old terms stay gone.
    assert!(
        matches!(la.confirm(), Err(Error::NotLeader { .. })),
        "{:?}",
        la.confirm()
    );
    assert!(!la.is_valid());
}

/// A leader back within its session proves leadership before `Restored`. When the proof
/// cannot be made in time although the connection is up (a slow link: every reply takes
/// longer than the request timeout, yet the connection is not silent long enough to be
/// dropped), the candidate stays suspended and tries again, and is restored once the link
/// is fast again, with nobody else elected meanwhile.
#[test]
fn a_leader_whose_proof_is_slow_stays_suspended_until_it_is_proven() {
    let (cluster, proxy) = partition(1);
    let t = Duration::from_secs(4);
    let slow = Client::builder(&proxy.connect_string())
        .session_timeout(t)
        .request_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_secs(20))
        .build()
        .expect("connect through the proxy");
    let other = connect(&cluster.connect_string(), t);
    let path = unique("el-slow-proof");
    let a = LeaderElection::new(&slow, &path, "a")
        .unwrap()
        .join()
        .unwrap();
    let ev = a.events();
    assert!(matches!(
        next_event(&ev, Duration::from_secs(10), "a"),
        LeaderEvent::Elected { .. }
    ));
    let token = a.token().unwrap();
    let b = LeaderElection::new(&other, &path, "b")
        .unwrap()
        .join()
        .unwrap();
    let ev_b = b.events();
    let session = slow.session_id();
    let session_events = slow.events();

    // Every byte 400 ms late each way: the handshake fits in a connect attempt, the proof
    // (one request, 800 ms round trip) does not fit in 300 ms.
    proxy.delay(Duration::from_millis(400));
    proxy.reset();
    assert_eq!(next_event(&ev, t, "a"), LeaderEvent::Suspended);
    wait_event(&session_events, t * 3, "reconnected", |e| {
        matches!(e, SessionEvent::Reconnected { .. })
    });
    assert_eq!(slow.session_id(), session, "the session must survive");
    // Proofs keep timing out: still suspended, nothing else happened.
    match ev.recv_timeout(Duration::from_millis(1500)) {
        Err(_) => {}
        Ok(e) => panic!("a said {e:?} while its proofs cannot be made"),
    }
    assert!(!a.is_leader());
    assert!(ev_b.try_recv().is_err(), "b must not be elected");

    proxy.heal();
    assert_eq!(next_event(&ev, t * 3, "a"), LeaderEvent::Restored);
    assert!(a.is_leader());
    assert_eq!(a.token(), Some(token), "the same term");
    a.confirm().unwrap();
    assert!(ev_b.try_recv().is_err(), "b must not be elected");
    drop(b);
    drop(a);
}
