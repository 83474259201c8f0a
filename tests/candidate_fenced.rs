//! Fenced writes of the background `Candidate` (`Candidate::fenced_multi`, `LeaderTerm`)
//! against real ZooKeeper servers: applied while it leads, refused once the term is over
//! (the node deleted by another client, the session expired, resigned, stopped), refused by
//! the server itself when the leader has not heard of its loss (the way back stalled), and
//! a term that cannot write in the next one. The term's node is the listed leader.
//!
//! No `use zkguard::Guard` in this file: the guards' `fenced_multi` is inherent.

mod common;

use std::time::Duration;

use common::election::assert_not_leader;
use common::partition::stallable;
use common::{connect, recv, shared_cluster, unique, wait_until, WITHIN};
use crossbeam_channel::Receiver;
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{
    Candidate, Client, CreateMode, Error, LeaderElection, LeaderEvent, LeaderTerm, Op, Stat,
};

const SESSION: Duration = Duration::from_secs(4);

fn anon() -> Client {
    connect(&shared_cluster().connect_string(), Duration::from_secs(10))
}

fn set(target: &str, data: &[u8]) -> Op {
    Op::SetData {
        path: target.to_string(),
        data: data.to_vec(),
        version: None,
    }
}

/// Waits for `Elected` (skipping other events); its token.
fn elected(rx: &Receiver<LeaderEvent>, who: &str) -> u64 {
    loop {
        match recv(rx, WITHIN, &format!("{who} elected")) {
            LeaderEvent::Elected { token } => return token,
            LeaderEvent::Failed { error } => panic!("{who}: {error}"),
            _ => {}
        }
    }
}

/// Waits for the event `want`, skipping others.
fn expect(rx: &Receiver<LeaderEvent>, want: LeaderEvent, who: &str) {
    loop {
        let ev = recv(rx, WITHIN, &format!("{who}: {want:?}"));
        if ev == want {
            return;
        }
    }
}

/// A persistent node holding `before`, made by `c`.
fn target(c: &Client, prefix: &str) -> String {
    let t = unique(prefix);
    c.create(&t, b"before", CreateMode::Persistent).unwrap();
    t
}

/// A candidate of `client` in a fresh election, leading: the election's path, the
/// candidate, its events (past its `Elected`) and its term.
fn leading(
    client: &Client,
    prefix: &str,
) -> (String, Candidate, Receiver<LeaderEvent>, LeaderTerm) {
    let path = unique(prefix);
    let a = LeaderElection::new(client, &path, "a")
        .unwrap()
        .join()
        .unwrap();
    let events = a.events();
    elected(&events, "a");
    let term = a.term().expect("a term while leading");
    (path, a, events, term)
}

fn assert_refused(r: zkguard::Result<Vec<zkguard::OpResult>>, election: &str, what: &str) {
    assert_not_leader(r, election, what);
}

#[test]
fn a_leading_candidate_writes_fenced_and_its_term_is_the_listed_leader() {
    let c = anon();
    let other = anon();
    let t = target(&other, "cf-write");
    let path = unique("cf-lead");
    let election = LeaderElection::new(&c, &path, "a").unwrap();
    let a = election.join().unwrap();
    let token = elected(&a.events(), "a");
    let term = a.term().expect("a term while leading");
    assert_eq!(term.token(), token);
    assert!(term.is_valid(), "the term of a leading candidate");
    // Its `Debug` says which term, and that it goes on.
    assert_eq!(
        format!("{term:?}"),
        format!(
            "LeaderTerm {{ path: {:?}, token: {token}, valid: true }}",
            term.path()
        )
    );
    // The node is the one the election lists first, and its stat's token is the term's.
    let leader = election.leader().unwrap().expect("a leader");
    assert_eq!(term.path(), format!("{path}/{}", leader.node));
    assert!(leader.holds);
    let stat: Stat = other.exists(term.path()).unwrap().expect("the term's node");
    assert_eq!(
        stat.token(),
        term.token(),
        "Stat::token is the fencing token"
    );
    // Through the candidate (the current term) and through the term itself.
    let made = format!("{t}-made");
    let r = a
        .fenced_multi(&[
            set(&t, b"a1"),
            Op::Create {
                path: made.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
        ])
        .unwrap();
    assert_eq!(r.len(), 2, "the check is not among the results");
    assert_eq!(other.get_data(&t).unwrap().0, b"a1");
    term.fenced_multi(&[set(&t, b"a2")]).unwrap();
    assert_eq!(other.get_data(&t).unwrap().0, b"a2");
    // All or nothing: a failing op is named by its index in the caller's list.
    let e = term
        .fenced_multi(&[
            set(&t, b"a3"),
            Op::Create {
                path: made,
                data: vec![],
                mode: CreateMode::Persistent,
            },
        ])
        .unwrap_err();
    assert!(matches!(e, Error::Multi { index: 1, .. }), "{e:?}");
    assert_eq!(other.get_data(&t).unwrap().0, b"a2");
    // A candidate queued behind it does not lead: no term, no write.
    let b = LeaderElection::new(&other, &path, "b")
        .unwrap()
        .join()
        .unwrap();
    wait_until(WITHIN, "b queued", || {
        election.participants().unwrap().len() == 2
    });
    assert!(b.term().is_none());
    assert_refused(b.fenced_multi(&[set(&t, b"b")]), &path, "b queued");
    assert_eq!(other.get_data(&t).unwrap().0, b"a2");
    // Resigned: the old term refuses, even once a leads again (a later term, not this one).
    let a_events = a.events();
    assert_eq!(elected(&a_events, "a (replayed)"), token);
    a.resign().unwrap();
    assert_refused(term.fenced_multi(&[set(&t, b"old")]), &path, "resigned");
    assert!(!term.is_valid());
    let b_token = elected(&b.events(), "b");
    b.fenced_multi(&[set(&t, b"b1")]).unwrap();
    drop(b);
    let again = elected(&a_events, "a again");
    assert!(again > b_token && b_token > token, "tokens grow");
    assert_refused(
        term.fenced_multi(&[set(&t, b"old")]),
        &path,
        "a term of a candidate leading again",
    );
    assert_refused(term.confirm().map(|_| vec![]), &path, "old term's confirm");
    let now = a.term().unwrap();
    assert_eq!(now.token(), again);
    now.fenced_multi(&[set(&t, b"a4")]).unwrap();
    // Stopped: the candidate leaves; its term refuses and it has none.
    a.stop();
    assert_refused(now.fenced_multi(&[set(&t, b"late")]), &path, "stopped");
    assert_refused(a.fenced_multi(&[set(&t, b"late")]), &path, "stopped");
    assert!(a.term().is_none());
    assert_eq!(other.get_data(&t).unwrap().0, b"a4");
}

#[test]
fn a_term_whose_node_another_client_deleted_writes_nothing() {
    let c = anon();
    let other = anon();
    let t = target(&other, "cf-del");
    let (path, a, events, term) = leading(&c, "cf-del");
    other.delete(term.path(), None).unwrap();
    // Refused whether or not the watch's notification has arrived yet: either the client
    // knows, or the server's check of the node fails.
    assert_refused(term.fenced_multi(&[set(&t, b"after")]), &path, "deleted");
    expect(&events, LeaderEvent::Lost, "a");
    assert_refused(
        term.fenced_multi(&[set(&t, b"after")]),
        &path,
        "deleted, known",
    );
    assert_eq!(other.get_data(&t).unwrap().0, b"before");
    // The candidate queues again and leads in a new term; the old one still refuses.
    elected(&events, "a again");
    assert_ne!(a.term().unwrap().path(), term.path());
    assert_refused(term.fenced_multi(&[set(&t, b"old")]), &path, "next term");
    assert_eq!(other.get_data(&t).unwrap().0, b"before");
}

#[test]
fn a_term_whose_session_expired_writes_nothing() {
    let cluster = TestCluster::start(1).unwrap();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let holder = connect(&proxy.connect_string(), SESSION);
    let other = connect(&cluster.connect_string(), Duration::from_secs(10));
    let t = target(&other, "cf-exp");
    let (path, a, events, term) = leading(&holder, "cf-exp");
    let node = term.path().to_string();
    proxy.blackhole();
    expect(&events, LeaderEvent::Lost, "a (session lost)");
    // The server expires the session and deletes the node.
    wait_until(WITHIN, "the expired leader's node deleted", || {
        other.exists(&node).unwrap().is_none()
    });
    assert_refused(term.fenced_multi(&[set(&t, b"after")]), &path, "expired");
    assert!(a.term().is_none() || a.term().unwrap().path() != node);
    proxy.heal();
    // Once the client has a new session too: the write never goes out on it.
    wait_until(WITHIN, "a new session", || {
        holder.state() == zkguard::SessionState::Connected
    });
    assert_refused(
        term.fenced_multi(&[set(&t, b"after")]),
        &path,
        "expired, new session",
    );
    assert_eq!(other.get_data(&t).unwrap().0, b"before");
}

/// The server itself refuses: the leader has not heard that its node is gone (the way back
/// from the server is stalled) when it sends the write, so only the check inside the multi
/// can stop it. A plain write sent right after it on the same session shows when the server
/// has processed both.
#[test]
fn the_server_refuses_the_fenced_write_of_a_leader_that_has_not_heard_its_node_is_gone() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let holder = stallable(&proxy);
    let other = anon();
    let t = target(&other, "cf-dark");
    let after = format!("{t}-after");
    let (path, a, events, term) = leading(&holder, "cf-dark");
    proxy.stall_server_to_client();
    other.delete(term.path(), None).unwrap();
    let (_, watch) = other.exists_w(&after).unwrap();
    // The leader does not know: still its term, no notification reached it.
    assert!(a.term().is_some(), "the leader heard of the deletion");
    let fenced = a.fenced_multi(&[set(&t, b"after")]);
    assert!(matches!(fenced, Err(Error::Timeout { .. })), "{fenced:?}");
    let plain = holder.create(&after, b"", CreateMode::Persistent);
    assert!(plain.is_err(), "its reply is stalled too");
    recv(&watch, WITHIN, "the plain write behind the fenced one");
    assert_eq!(other.get_data(&t).unwrap().0, b"before", "applied");
    proxy.heal();
    // Once the replies flow, the leader learns its term is over.
    expect(&events, LeaderEvent::Lost, "a");
    assert_refused(term.fenced_multi(&[set(&t, b"x")]), &path, "healed");
    assert_eq!(other.get_data(&t).unwrap().0, b"before");
}

#[test]
fn an_unfair_candidate_cannot_write_fenced() {
    let c = anon();
    let t = target(&c, "cf-unfair");
    let a = LeaderElection::unfair(&c, &unique("cf-unfair"), "a")
        .unwrap()
        .join()
        .unwrap();
    elected(&a.events(), "a");
    match a.fenced_multi(&[set(&t, b"x")]) {
        Err(Error::InvalidArgument { name, reason }) => {
            assert_eq!(name, "fenced write");
            assert!(reason.contains(a.term().unwrap().path()), "{reason}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(c.get_data(&t).unwrap().0, b"before");
}
