//! Recovery after a local loss (issue 36): a standalone server stopped for longer than a
//! client's session timeout and started again from its data restores the client's old
//! session, ephemeral nodes and all, with a fresh timeout. The client, which declared that
//! session lost on its own clock, closes it on the server before it opens its new session,
//! so `Connected` for the new session comes after the old nodes are gone; a candidate says
//! `Rejoined` only once that new session exists. And the promise's other side: a session
//! the client still counts live (an outage shorter than the timeout) is never closed.
//!
//! Every test starts its own standalone server (they stop it).

mod common;

use std::time::Duration;

use common::{
    connect, expect_reconnected, init_log, outlive_session, unique, wait_event, wait_until, WITHIN,
};
use crossbeam_channel::Receiver;
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Client, LeaderElection, LeaderEvent, LossReason, Mutex, SessionEvent};

/// The next event of a candidate, failing after `WITHIN`.
fn next_leader_event(rx: &Receiver<LeaderEvent>) -> LeaderEvent {
    rx.recv_timeout(WITHIN)
        .unwrap_or_else(|e| panic!("no candidate event within {WITHIN:?}: {e}"))
}

/// The full path of the node of the candidate that leads the election at `path`.
fn leader_node(client: &Client, path: &str) -> String {
    let all = LeaderElection::new(client, path, "observer")
        .unwrap()
        .participants()
        .unwrap();
    let leader = all.iter().find(|p| p.holds).expect("a leader");
    format!("{path}/{}", leader.node)
}

#[test]
fn a_given_up_sessions_nodes_are_gone_when_the_new_session_is_reported() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let timeout = Duration::from_secs(4);
    let a = connect(&cluster.connect_string(), timeout);
    let dir = unique("recovery");
    let lock = Mutex::new(&a, &format!("{dir}/lock")).unwrap();
    let guard = lock.acquire().unwrap();
    let lock_node = guard.path().to_string();
    let election_path = format!("{dir}/election");
    let candidate = LeaderElection::new(&a, &election_path, "a")
        .unwrap()
        .join()
        .unwrap();
    let said = candidate.events();
    assert!(matches!(
        next_leader_event(&said),
        LeaderEvent::Elected { .. }
    ));
    let election_node = leader_node(&a, &election_path);
    let old = a.session_id();
    let events = a.events();

    // Down for longer than the session timeout (the client gives the session up), then
    // started again from its data: the server has restored the old session.
    let new = outlive_session(&cluster, &events, timeout);
    assert_ne!(new, old);
    assert_eq!(guard.lost().try_recv(), Ok(()), "the guard was not told");
    assert!(!guard.is_valid());
    // Reported once the old session was closed: its nodes are gone now, not a session
    // timeout later (without the close, the restored session keeps them for its timeout).
    assert_eq!(
        a.exists(&lock_node).unwrap(),
        None,
        "the lost session's lock node outlived the new session's start"
    );
    assert_eq!(
        a.exists(&election_node).unwrap(),
        None,
        "the lost session's election node outlived the new session's start"
    );

    // The candidate: its term lost, then `Rejoined` only once the new session exists.
    let mut seen = Vec::new();
    loop {
        let ev = next_leader_event(&said);
        if ev == LeaderEvent::Rejoined {
            let now = a.session_id();
            assert!(
                now != 0 && now != old,
                "Rejoined while the client had no new session (session id {now:#x})"
            );
            break;
        }
        seen.push(ev);
    }
    assert_eq!(seen, [LeaderEvent::Suspended, LeaderEvent::Lost]);
    // And it leads again in the new session (nothing of the old one stands in its way).
    assert!(matches!(
        next_leader_event(&said),
        LeaderEvent::Elected { .. }
    ));
    drop(guard);
    let again = lock.try_acquire().unwrap();
    assert!(again.is_some(), "the lock is still busy after recovery");
}

/// The same behind a proxy that accepts every connection and closes it while the server
/// behind it is down (a load balancer, a sidecar, the harness's `FaultProxy`): such a
/// connection served nothing, so it is no refused close of the given-up session. (Counted
/// as one, the client gave the old session up after three of them and, once the server was
/// back, opened its new session beside the restored old one and its nodes: a 3.9.5 server
/// that accepts before it serves did the same once in the mutation runs.)
#[test]
fn connections_closed_unanswered_while_the_server_is_down_do_not_give_up_the_close() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let timeout = Duration::from_secs(6);
    let a = connect(&proxy.connect_string(), timeout);
    let dir = unique("recovery-proxy");
    let lock = Mutex::new(&a, &format!("{dir}/lock")).unwrap();
    let guard = lock.acquire().unwrap();
    let lock_node = guard.path().to_string();
    let old = a.session_id();
    let events = a.events();

    cluster.stop(0).unwrap();
    wait_event(&events, timeout * 3, "the loss", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    // From the loss on, each connection the client makes is first a close of the given-up
    // session; the proxy accepts it and, finding no server, closes it unanswered.
    let lost_at = proxy.accepted();
    wait_until(WITHIN, "five connections after the loss", || {
        proxy.accepted() >= lost_at + 5
    });
    cluster.start_server(0).unwrap();
    let new = match wait_event(&events, WITHIN, "the new session", |e| {
        matches!(e, SessionEvent::Connected { .. })
    }) {
        SessionEvent::Connected { session_id } => session_id,
        ev => unreachable!("{ev:?}"),
    };
    assert_ne!(new, old);
    assert_eq!(
        a.exists(&lock_node).unwrap(),
        None,
        "the lost session's lock node outlived the new session's start"
    );
    drop(guard);
    assert!(
        lock.try_acquire().unwrap().is_some(),
        "the lock is still busy"
    );
}

#[test]
fn a_given_up_session_is_closed_on_a_server_that_requires_a_sasl_login() {
    // The close's own connection must log in as the client does: this server refuses every
    // request of a session that has not (and closes its connection).
    init_log();
    let cluster = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret")])
        .start()
        .unwrap();
    let timeout = Duration::from_secs(3);
    let a = Client::builder(&cluster.connect_string())
        .session_timeout(timeout)
        .connect_timeout(WITHIN)
        .sasl_digest("alice", "alice-secret")
        .build()
        .unwrap();
    let lock = Mutex::new(&a, &unique("recovery-sasl")).unwrap();
    let guard = lock.acquire().unwrap();
    let node = guard.path().to_string();
    let old = a.session_id();
    let events = a.events();
    assert_ne!(outlive_session(&cluster, &events, timeout), old);
    assert_eq!(
        a.exists(&node).unwrap(),
        None,
        "the lost session's node outlived the new session's start"
    );
}

#[test]
fn a_session_the_client_still_counts_live_is_never_closed() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let timeout = Duration::from_secs(8);
    let a = connect(&cluster.connect_string(), timeout);
    let dir = unique("recovery-live");
    let lock = Mutex::new(&a, &format!("{dir}/lock")).unwrap();
    let guard = lock.acquire().unwrap();
    let node = guard.path().to_string();
    let session = a.session_id();
    let events = a.events();

    // A restart well within the session timeout: the session lives on, and so does its node.
    cluster.kill(0).unwrap();
    wait_event(&events, WITHIN, "the suspension", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    cluster.start_server(0).unwrap();
    expect_reconnected(&events, session, WITHIN);
    let stat = a
        .exists(&node)
        .unwrap()
        .expect("the live session's node was deleted");
    assert_eq!(stat.ephemeral_owner, session);
    assert!(guard.confirm().is_ok(), "the lock is not held any more");
    // No loss was reported at all.
    assert!(
        events
            .try_iter()
            .all(|e| !matches!(e, SessionEvent::Lost { .. })),
        "a loss after the reconnect"
    );
}

#[test]
fn a_session_the_server_expired_is_not_closed_again_and_recovery_goes_on() {
    init_log();
    // The server expires the session itself while the client is cut off (wiped: it comes
    // back without the session): the close finds nothing to close, and the new session
    // follows at once.
    let cluster = TestCluster::start(1).unwrap();
    let timeout = Duration::from_secs(2);
    let a = connect(&cluster.connect_string(), timeout);
    let old = a.session_id();
    let events = a.events();
    cluster.stop(0).unwrap();
    let lost = wait_event(&events, timeout * 5, "the loss", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    assert_eq!(
        lost,
        SessionEvent::Lost {
            session_id: old,
            reason: LossReason::Timeout
        }
    );
    cluster.wipe(0).unwrap();
    cluster.start_server(0).unwrap();
    let ev = wait_event(&events, WITHIN, "the new session", |e| {
        matches!(e, SessionEvent::Connected { .. })
    });
    assert_ne!(ev, SessionEvent::Connected { session_id: old });
    let path = unique("recovery-after-wipe");
    a.create(&path, b"x", zkguard::CreateMode::Ephemeral)
        .expect("the new session works");
}
