//! `Client::expire_session` and `Client::drop_connection` (feature `testing`): the session
//! ended by the server now, and the connection dropped now, without a proxy, against real
//! servers (run on 3.6, 3.8 and 3.9 with `ZKGUARD_ZOOKEEPER_VERSION`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{connect, retry, unique, wait_event, wait_until};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Client, CreateMode, Error, LossReason, SessionEvent, SessionState};

/// Longer than any of these tests: a loss the client's own clock decided would show as
/// `Timeout`, and the server's own expiry would not come before it either.
const SESSION: Duration = Duration::from_secs(60);
const PATIENCE: Duration = Duration::from_secs(30);

/// The next `Lost` event (panics after `PATIENCE`).
fn lost(events: &crossbeam_channel::Receiver<SessionEvent>) -> SessionEvent {
    wait_event(events, PATIENCE, "lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    })
}

#[test]
fn expire_session_ends_the_session_on_the_server_now() {
    let cluster = TestCluster::start(1).expect("start");
    let client = connect(&cluster.connect_string(), SESSION);
    let other = connect(&cluster.connect_string(), SESSION);
    let node = unique("expire");
    client
        .create(&node, b"", CreateMode::Ephemeral)
        .expect("ephemeral");
    let guard = zkguard::Mutex::new(&client, &format!("{node}-lock"))
        .expect("mutex")
        .acquire()
        .expect("acquire");
    let old = client.session_id();
    let events = client.events();

    client.expire_session().expect("expire");

    // The server's word, heard before the call returned.
    assert_eq!(
        events
            .try_iter()
            .find(|e| matches!(e, SessionEvent::Lost { .. })),
        Some(SessionEvent::Lost {
            session_id: old,
            reason: LossReason::Expired
        })
    );
    assert!(
        !guard.is_valid(),
        "a guard of the expired session still valid"
    );
    // The server deleted the session's ephemeral nodes before it confirmed the close.
    assert_eq!(other.exists(&node).expect("exists"), None, "ephemeral kept");
    // The client goes on with a new session.
    wait_event(&events, PATIENCE, "connected", |e| {
        matches!(e, SessionEvent::Connected { .. })
    });
    assert_ne!(client.session_id(), old);
    retry(PATIENCE, || {
        client.create(&node, b"", CreateMode::Ephemeral)
    });
    drop(guard);
}

#[test]
fn expire_session_in_an_ensemble_reaches_every_server() {
    let cluster = TestCluster::start(3).expect("start");
    let client = connect(&cluster.server_connect_string(0), SESSION);
    let elsewhere = connect(&cluster.server_connect_string(2), SESSION);
    let node = unique("expire-ensemble");
    client
        .create(&node, b"", CreateMode::Ephemeral)
        .expect("ephemeral");
    let old = client.session_id();
    let events = client.events();
    client.expire_session().expect("expire");
    assert_eq!(
        lost(&events),
        SessionEvent::Lost {
            session_id: old,
            reason: LossReason::Expired
        }
    );
    // Another server, caught up with the leader, no longer has the node.
    elsewhere.sync(&node).expect("sync");
    assert_eq!(elsewhere.exists(&node).expect("exists"), None);
}

#[test]
fn expire_session_of_a_sasl_client() {
    let cluster = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret")])
        .sasl_required(true)
        .start()
        .expect("start a SASL server");
    let client = Client::builder(&cluster.connect_string())
        .sasl_digest("alice", "alice-secret")
        .session_timeout(SESSION)
        .connect_timeout(PATIENCE)
        .build()
        .expect("connect");
    let node = unique("expire-sasl");
    client
        .create(&node, b"", CreateMode::Ephemeral)
        .expect("ephemeral");
    let old = client.session_id();
    let events = client.events();
    client.expire_session().expect("expire");
    assert_eq!(
        lost(&events),
        SessionEvent::Lost {
            session_id: old,
            reason: LossReason::Expired
        }
    );
    wait_until(PATIENCE, "a new session", || {
        client.state() == SessionState::Connected
    });
    assert_eq!(retry(PATIENCE, || client.exists(&node)), None);
}

#[test]
fn expire_session_refuses_a_client_without_a_connection() {
    let cluster = TestCluster::start(1).expect("start");
    let client = connect(&cluster.connect_string(), SESSION);
    let events = client.events();
    cluster.stop(0).expect("stop");
    wait_event(&events, PATIENCE, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    assert_eq!(client.expire_session(), Err(Error::ConnectionLoss));
    cluster.start_server(0).expect("restart");
    client.close();
    assert_eq!(client.expire_session(), Err(Error::Closed));
}

/// An expiry whose server never answers (the client behind a proxy that black-holes every
/// new connection, the client's own still up) gives up at its deadline (the session
/// timeout, at least 10 s) with an error naming what failed, rather than trying for ever.
#[test]
fn expire_session_gives_up_at_its_deadline_when_the_server_never_answers() {
    let cluster = TestCluster::start(1).expect("start");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    let client = Arc::new(connect(&proxy.connect_string(), Duration::from_secs(4)));
    // Nothing is closed: the client still reads as connected, and the expiry's own
    // connections hang unanswered.
    proxy.blackhole();
    let expiring = Arc::clone(&client);
    let said = common::recv(
        &common::spawn(move || expiring.expire_session()),
        PATIENCE,
        "the expiry's end",
    );
    match said {
        Err(e @ Error::Io { .. }) => {
            assert!(e.to_string().contains("did not close session"), "{e}")
        }
        other => panic!("expected the expiry to give up, got {other:?}"),
    }
    proxy.heal();
}

#[test]
fn drop_connection_keeps_the_session() {
    let cluster = TestCluster::start(1).expect("start");
    let client = connect(&cluster.connect_string(), SESSION);
    let node = unique("drop");
    client
        .create(&node, b"", CreateMode::Ephemeral)
        .expect("ephemeral");
    let (_, watch) = client.exists_w(&format!("{node}-watched")).expect("watch");
    let id = client.session_id();
    let events = client.events();

    client.drop_connection();

    assert_eq!(
        wait_event(&events, PATIENCE, "suspended or lost", |e| {
            matches!(
                e,
                SessionEvent::Suspended { .. } | SessionEvent::Lost { .. }
            )
        }),
        SessionEvent::Suspended { session_id: id }
    );
    common::expect_reconnected(&events, id, PATIENCE);
    assert!(
        client.exists(&node).expect("exists").is_some(),
        "ephemeral lost"
    );
    // The watch was armed again on the new connection.
    let other = connect(&cluster.connect_string(), SESSION);
    other
        .create(&format!("{node}-watched"), b"", CreateMode::Ephemeral)
        .expect("create");
    assert_eq!(common::next_watch(&watch), zkguard::EventType::NodeCreated);
}
