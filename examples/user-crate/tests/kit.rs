//! One test of each kind of the harness, as a user's crate writes them (docs/testing.md).

use std::time::{Duration, Instant};

use zkguard::testing::{FaultProxy, TestChroot, TestCluster};
use zkguard::{Client, CloseOutcome, LossReason, SessionEvent};
use zkguard_user_crate::run_exclusive;

const PATIENCE: Duration = Duration::from_secs(30);

fn lost(events: &crossbeam_channel::Receiver<SessionEvent>) -> SessionEvent {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ev = events.recv_deadline(deadline).expect("no Lost event");
        if matches!(ev, SessionEvent::Lost { .. }) {
            return ev;
        }
    }
}

#[test]
fn one_holder_at_a_time() {
    let cluster = TestCluster::start(1).unwrap_or_else(|e| panic!("{e}"));
    let client = Client::connect(&cluster.connect_string()).unwrap();
    let lock = zkguard::Mutex::new(&client, "/jobs/nightly").unwrap();
    let guard = lock.acquire().unwrap();
    assert!(lock.try_acquire().unwrap().is_none()); // held: a second try gets nothing
    drop(guard);
    assert!(lock.try_acquire().unwrap().is_some());
}

#[test]
fn a_chroot_per_test_on_a_shared_server() {
    let root = TestChroot::new().unwrap_or_else(|e| panic!("{e}"));
    let client = Client::connect(&root.connect_string()).unwrap();
    let mut ran = false;
    assert!(run_exclusive(&client, "nightly", || ran = true).unwrap());
    assert!(ran);
}

#[test]
fn the_server_expires_the_session() {
    let cluster = TestCluster::start(1).unwrap_or_else(|e| panic!("{e}"));
    let client = Client::connect(&cluster.connect_string()).unwrap();
    let guard = zkguard::Mutex::new(&client, "/jobs/expiring")
        .unwrap()
        .acquire()
        .unwrap();
    let events = client.events();
    let id = client.session_id();
    client.expire_session().unwrap();
    assert!(!guard.is_valid());
    assert_eq!(
        lost(&events),
        SessionEvent::Lost {
            session_id: id,
            reason: LossReason::Expired
        }
    );
}

#[test]
fn a_dropped_connection_keeps_the_session() {
    let cluster = TestCluster::start(1).unwrap_or_else(|e| panic!("{e}"));
    let client = Client::connect(&cluster.connect_string()).unwrap();
    let guard = zkguard::Mutex::new(&client, "/jobs/kept")
        .unwrap()
        .acquire()
        .unwrap();
    let events = client.events();
    let id = client.session_id();
    client.drop_connection();
    let deadline = Instant::now() + PATIENCE;
    loop {
        match events
            .recv_deadline(deadline)
            .expect("no Reconnected event")
        {
            SessionEvent::Reconnected { session_id } => break assert_eq!(session_id, id),
            SessionEvent::Lost { .. } => panic!("session lost"),
            _ => {}
        }
    }
    assert!(guard.confirm().is_ok(), "the guard after a reconnect");
}

#[test]
fn an_observer_serves_and_the_client_knows_its_server() {
    let cluster = TestCluster::builder()
        .servers(2)
        .observers(1)
        .property("maxClientCnxns", "10")
        .min_session_timeout(Duration::from_secs(4))
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cluster.mode(2).unwrap(), "observer");
    let client = Client::connect(&cluster.server_connect_string(2)).unwrap();
    assert_eq!(cluster.server_of(&client), Some(2));
    assert!(client.session_timeout() >= Duration::from_secs(4));
    assert!(run_exclusive(&client, "observed", || {}).unwrap());
}

#[test]
fn a_slow_network_and_a_close_during_a_partition() {
    let cluster = TestCluster::start(1).unwrap_or_else(|e| panic!("{e}"));
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let client = Client::connect(&proxy.connect_string()).unwrap();
    proxy.delay(Duration::from_millis(5));
    let t = Instant::now();
    client.exists("/").unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(10),
        "a round trip is 2 × 5 ms more"
    );
    proxy.blackhole();
    // The expected outcome of a close the server cannot hear.
    assert!(matches!(client.close(), CloseOutcome::Unconfirmed { .. }));
}
