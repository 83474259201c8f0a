//! The background `Candidate` of a leader election against a real ZooKeeper server: its
//! events (every `events()` call a receiver of its own), its terms in order, requeueing after
//! resigning, and closing a leading candidate's client. The guard-style election:
//! `tests/election.rs`.
//!
//! One shared standalone server; every test works on a path of its own.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::election::{assert_not_leader, ids, wait_ids};
use common::{
    assert_quiet, children, connect, recv, shared_cluster, spawn, unique, wait_until, WITHIN,
};
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use zkguard::testing::FaultProxy;
use zkguard::{Error, LeaderElection, LeaderEvent};

/// Session timeout for clients whose session is not the point of the test.
const SESSION: Duration = Duration::from_secs(4);

/// The next event of a candidate.
fn next_event(rx: &Receiver<LeaderEvent>, who: &str) -> LeaderEvent {
    recv(rx, WITHIN, &format!("an event of {who}"))
}

/// The next event of a candidate, which must be `Elected`; its token.
fn expect_elected(rx: &Receiver<LeaderEvent>, who: &str) -> u64 {
    match next_event(rx, who) {
        LeaderEvent::Elected { token } => token,
        other => panic!("{who}: expected Elected, got {other:?}"),
    }
}

#[test]
fn every_candidate_events_call_is_a_receiver_of_its_own_that_starts_with_the_current_term() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    // Long enough that the session outlives the outage below on a loaded machine.
    let a = connect(&proxy.connect_string(), Duration::from_secs(20));
    let path = unique("el-events");
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let first = ca.events();
    let token = expect_elected(&first, "first receiver");
    // Taken after the election: it starts with the term under way.
    let late = ca.events();
    assert_eq!(expect_elected(&late, "late receiver"), token);

    // Every receiver gets every later event (a shared queue gave each to one of them).
    ca.resign().unwrap();
    for (rx, who) in [(&first, "first"), (&late, "late")] {
        assert_eq!(next_event(rx, who), LeaderEvent::Resigned, "{who}");
    }
    let token = expect_elected(&first, "first, queued again alone");
    assert_eq!(expect_elected(&late, "late, queued again alone"), token);

    // Taken while suspended: the term, then the suspension; then what comes to all.
    proxy.blackhole();
    proxy.reset();
    for (rx, who) in [(&first, "first"), (&late, "late")] {
        assert_eq!(next_event(rx, who), LeaderEvent::Suspended, "{who}");
    }
    let suspended = ca.events();
    assert_eq!(expect_elected(&suspended, "taken while suspended"), token);
    assert_eq!(next_event(&suspended, "suspended"), LeaderEvent::Suspended);
    proxy.heal();
    for (rx, who) in [
        (&first, "first"),
        (&late, "late"),
        (&suspended, "suspended"),
    ] {
        assert_eq!(next_event(rx, who), LeaderEvent::Restored, "{who}");
        assert!(rx.is_empty(), "{who}: more events than the others");
    }

    // A dropped receiver costs nothing; once the candidate is gone every stream ends, and
    // a receiver taken after the client closed is closed at once.
    drop(late);
    drop(ca);
    for (rx, who) in [(&first, "first"), (&suspended, "suspended")] {
        match rx.recv_timeout(WITHIN) {
            Err(RecvTimeoutError::Disconnected) => {}
            other => panic!("{who}: expected the end of the stream, got {other:?}"),
        }
    }
    let b = connect(&shared_cluster().connect_string(), SESSION);
    let cb = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    let before = cb.events();
    b.close();
    loop {
        match before.recv_timeout(WITHIN) {
            Ok(LeaderEvent::Elected { .. } | LeaderEvent::Lost) => {}
            Err(RecvTimeoutError::Disconnected) => break,
            other => panic!("b, closing: {other:?}"),
        }
    }
    match cb.events().try_recv() {
        Err(TryRecvError::Disconnected) => {}
        other => panic!("a receiver taken after the end: {other:?}"),
    }
}

#[test]
fn candidates_report_their_terms_in_order_and_requeue_after_resigning() {
    let cs = shared_cluster().connect_string();
    let path = unique("el-cand");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let c = connect(&cs, SESSION);
    let o = connect(&cs, SESSION);
    let observer = LeaderElection::new(&o, &path, "observer").unwrap();
    let short = Duration::from_millis(200);

    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let ev_a = ca.events();
    let t1 = expect_elected(&ev_a, "a");
    assert_eq!(ca.token(), Some(t1));
    assert!(ca.is_leader());
    assert_eq!(ca.wait_for_leadership(short), Ok(Some(t1)));
    ca.confirm().unwrap();
    assert_eq!(ca.election().id(), "a");

    let cb = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    let ev_b = cb.events();
    wait_ids(&observer, &["a", "b"]);
    assert!(!cb.is_leader());
    assert_eq!(cb.token(), None);
    let t0 = Instant::now();
    assert_eq!(cb.wait_for_leadership(short), Ok(None));
    assert!(t0.elapsed() >= short, "wait_for_leadership gave up early");
    assert_not_leader(cb.confirm(), &path, "confirm of a follower");
    assert_not_leader(cb.resign(), &path, "a follower resigned");
    assert_quiet(&ev_b, "an event for a follower");
    assert_quiet(&ev_a, "an event for a leader nobody disturbed");

    // A resigns: B leads, A queues again at the back.
    assert_eq!(ca.resign(), Ok(()));
    assert!(!ca.is_leader());
    assert_eq!(next_event(&ev_a, "a"), LeaderEvent::Resigned);
    let t2 = expect_elected(&ev_b, "b");
    assert!(t2 > t1, "token {t2} after {t1}");
    assert_eq!(cb.token(), Some(t2));
    assert!(cb.is_leader());
    assert_eq!(cb.wait_for_leadership(short), Ok(Some(t2)));
    cb.confirm().unwrap();
    wait_ids(&observer, &["b", "a"]);
    let p = observer.participants().unwrap();
    assert_eq!(p.iter().map(|x| x.holds).collect::<Vec<_>>(), [true, false]);
    assert!(!ca.is_leader());
    assert_not_leader(ca.confirm(), &path, "confirm after resigning");
    assert_eq!(ca.wait_for_leadership(short), Ok(None));

    // B resigns: A's turn again.
    assert_eq!(cb.resign(), Ok(()));
    assert_eq!(next_event(&ev_b, "b"), LeaderEvent::Resigned);
    let t3 = expect_elected(&ev_a, "a");
    assert!(t3 > t2, "token {t3} after {t2}");
    assert_eq!(ca.token(), Some(t3));
    wait_ids(&observer, &["a", "b"]);

    // Dropping a follower removes its node.
    let cc = LeaderElection::new(&c, &path, "c").unwrap().join().unwrap();
    let ev_c = cc.events();
    wait_ids(&observer, &["a", "b", "c"]);
    drop(cc);
    wait_ids(&observer, &["a", "b"]);
    match ev_c.recv_timeout(WITHIN) {
        Err(RecvTimeoutError::Disconnected) => {}
        other => panic!("c's events after drop: {other:?}"),
    }
    assert_quiet(&ev_b, "an event for b when a follower left");

    // Dropping the leader deletes its node at once, and the next one leads.
    let a_node = observer.participants().unwrap()[0].node.clone();
    drop(ca);
    assert!(
        !children(&o, &path).contains(&a_node),
        "the dropped leader's node is still there"
    );
    let t4 = expect_elected(&ev_b, "b");
    assert!(t4 > t3, "token {t4} after {t3}");
    let mut after_drop = Vec::new();
    loop {
        match ev_a.recv_timeout(WITHIN) {
            Ok(ev) => after_drop.push(ev),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("a's events did not end after drop"),
        }
    }
    assert!(
        !after_drop
            .iter()
            .any(|e| matches!(e, LeaderEvent::Elected { .. })),
        "a dropped candidate was elected: {after_drop:?}"
    );
    assert_eq!(ids(&observer.participants().unwrap()), vec!["b"]);

    // Closing the leader's client: Lost, then the stream ends.
    b.close().into_result().unwrap();
    assert_eq!(next_event(&ev_b, "b"), LeaderEvent::Lost);
    match ev_b.recv_timeout(WITHIN) {
        Err(RecvTimeoutError::Disconnected) => {}
        other => panic!("b's events after Lost on close: {other:?}"),
    }
    assert!(!cb.is_leader());
    assert_eq!(cb.wait_for_leadership(WITHIN), Err(Error::Closed));
    assert_eq!(cb.token(), None);
    assert_eq!(observer.participants().unwrap(), vec![]);
    // A closed client cannot join.
    let closed = LeaderElection::new(&b, observer.path(), "late").unwrap();
    assert_eq!(closed.join().err(), Some(Error::Closed));
    // Nor lead, in any style, fair or unfair: `Error::Closed`, as documented.
    assert_eq!(closed.lead().err(), Some(Error::Closed));
    assert_eq!(closed.try_lead().err(), Some(Error::Closed));
    assert_eq!(closed.lead_timeout(WITHIN).err(), Some(Error::Closed));
    let unfair =
        LeaderElection::unfair(&b, &format!("{}-unfair", observer.path()), "late").unwrap();
    assert_eq!(unfair.lead().err(), Some(Error::Closed));
    assert_eq!(unfair.try_lead().err(), Some(Error::Closed));
}

#[test]
fn closing_a_leading_candidates_client_reports_lost_before_the_successor_is_elected() {
    let cs = shared_cluster().connect_string();
    let long = Duration::from_secs(30);
    // `LeaderEvent::Lost` is documented as "reported before anyone else can be elected".
    // The two are on different threads, so one round can only catch a late report by
    // chance: a few rounds, every wrong outcome reported together.
    let mut wrong = Vec::new();
    for round in 0..16 {
        let path = unique("el-close-cand");
        let a = connect(&cs, long);
        let b = connect(&cs, SESSION);
        let ca = Arc::new(LeaderElection::new(&a, &path, "a").unwrap().join().unwrap());
        let ev_a = ca.events();
        expect_elected(&ev_a, "a");
        let eb = LeaderElection::new(&b, &path, "b").unwrap();
        // When the successor's lead() returns: does the old candidate still say it leads,
        // and has it reported Lost?
        let successor = {
            let (eb, ca, ev_a) = (eb.clone(), ca.clone(), ev_a.clone());
            spawn(move || {
                let l = eb.lead().unwrap();
                let seen = (ca.is_leader(), ev_a.try_recv());
                drop(l);
                seen
            })
        };
        wait_ids(&eb, &["a", "b"]);
        assert_quiet(&successor, "elected while a leads");
        a.close().into_result().unwrap();
        let (still_leader, event) = recv(&successor, WITHIN, "successor elected");
        if still_leader {
            wrong.push(format!(
                "round {round}: the closed candidate still said it leads when the successor \
                 was elected"
            ));
        }
        match event {
            Ok(LeaderEvent::Lost) => {}
            Err(crossbeam_channel::TryRecvError::Empty) => {
                // Not reported yet: say whether it comes at all.
                let later = ev_a.recv_timeout(WITHIN);
                wrong.push(format!(
                    "round {round}: Lost was not reported when the successor was elected \
                     (later: {later:?})"
                ));
            }
            other => wrong.push(format!(
                "round {round}: old candidate's event when the successor was elected: {other:?}"
            )),
        }
        assert_eq!(ca.wait_for_leadership(WITHIN), Err(Error::Closed));
        drop(ca);
        wait_until(WITHIN, "every node gone", || children(&b, &path).is_empty());
    }
    assert!(
        wrong.is_empty(),
        "closing a leading candidate's client:\n{}",
        wrong.join("\n")
    );
}

/// `zkguard::revoke` on a leading candidate's term node says `Revoked` to it (once), not to
/// the candidate behind it, and ends nothing; once it resigns, the one behind leads (the
/// request's data change on the node it watches did not stop it waiting).
#[test]
fn a_revoked_leader_candidate_is_told_and_its_successor_still_takes_over_on_its_resign() {
    let cs = shared_cluster().connect_string();
    let (x, other) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("cand-revoke");
    let a = LeaderElection::new(&x, &path, "a").unwrap().join().unwrap();
    let a_events = a.events();
    let a_token = expect_elected(&a_events, "a");
    let b = LeaderElection::new(&other, &path, "b")
        .unwrap()
        .join()
        .unwrap();
    let b_events = b.events();
    wait_ids(a.election(), &["a", "b"]);
    let term = a.term().expect("a leads");
    zkguard::revoke(&other, term.path()).unwrap();
    assert_eq!(next_event(&a_events, "a"), LeaderEvent::Revoked);
    assert!(a.is_leader(), "a request is not a loss");
    a.confirm().unwrap();
    assert_eq!(a.token(), Some(a_token));
    // Asked again in the same term: said once.
    zkguard::revoke(&other, term.path()).unwrap();
    a.confirm().unwrap();
    assert_quiet(&a_events, "a told twice in one term");
    assert_quiet(&b_events, "b told");
    a.resign().unwrap();
    assert_eq!(next_event(&a_events, "a"), LeaderEvent::Resigned);
    let b_token = expect_elected(&b_events, "b");
    assert!(b_token > a_token);
    // Behind b now, a is asked nothing; b is told when its own node is asked.
    zkguard::revoke(&x, b.term().expect("b leads").path()).unwrap();
    assert_eq!(next_event(&b_events, "b"), LeaderEvent::Revoked);
    assert_quiet(&a_events, "a told of b's request");
}

/// A candidate that resigns while its connection is down leads no more at once: `Ok(())`,
/// as documented (the delete of its node is retried in the background: a connection
/// error of the delete is not the caller's), and the node is gone once the connection is
/// back.
#[test]
fn a_resign_while_the_connection_is_down_is_ok_and_the_node_goes_once_back() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let a = zkguard::Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(20))
        .request_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let observer = connect(&shared_cluster().connect_string(), SESSION);
    let path = unique("resign-down");
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let events = ca.events();
    expect_elected(&events, "a");
    // Its `Debug` says the election and that it leads.
    let said = format!("{ca:?}");
    assert!(
        said.contains(&path) && said.contains("leader: true"),
        "{said}"
    );
    let node = ca.term().expect("a term").path().to_string();
    proxy.blackhole();
    proxy.reset();
    assert_eq!(next_event(&events, "a"), LeaderEvent::Suspended);
    ca.resign().expect("a resign with the connection down");
    assert_eq!(next_event(&events, "a"), LeaderEvent::Resigned);
    proxy.heal();
    wait_until(WITHIN, "the resigned term's node deleted", || {
        observer.exists(&node).unwrap().is_none()
    });
}

/// A resign the server refuses (the election's directory lets this identity create its node
/// but not delete it) says why: `NoAuth`, never `Ok` as if the node were going. Only a
/// connection error is the delete's "under way in the background".
#[test]
fn a_resign_whose_delete_the_server_refuses_says_why() {
    let owner = common::as_user("election-owner");
    let path = common::dir_others_may_not_delete_in(&owner, "resign-refused");
    // What a refused resign must say (`NoAuth`, named by the directory whose ACL refused the
    // delete) and leave (the node, until its session's end takes it away, with the one a
    // candidate queued again with).
    let refused = |who: &str, said: zkguard::Result<()>, node: &str, client: &zkguard::Client| {
        match said {
            Err(Error::NoAuth { path: p, op }) => {
                assert_eq!((p.as_str(), op), (&*path, "delete"), "{who}")
            }
            other => panic!("{who}: expected NoAuth for the refused delete, got {other:?}"),
        }
        assert!(
            owner.exists(node).unwrap().is_some(),
            "{who}: the node the server kept"
        );
        let _closed = client.close();
        wait_until(
            WITHIN,
            &format!("{who}'s nodes gone with its session"),
            || children(&owner, &path).is_empty(),
        );
    };
    let a = connect(&shared_cluster().connect_string(), SESSION);
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    expect_elected(&ca.events(), "a");
    let node = ca.term().expect("a term").path().to_string();
    refused("the candidate", ca.resign(), &node, &a);
    // The guard style says the same.
    let b = connect(&shared_cluster().connect_string(), SESSION);
    let leadership = LeaderElection::new(&b, &path, "b").unwrap().lead().unwrap();
    let node = leadership.path().to_string();
    refused("the guard", leadership.resign(), &node, &b);
    owner.delete(&path, None).unwrap();
}
