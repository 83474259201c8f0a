//! The crate's `log` records, read from a scripted failover (issue 36): a logger written
//! here (no new dependency) captures every record; a client holding a lock and leading an
//! election loses its session while its standalone server is down, recovers when the
//! server is back, and is closed while holding again. The records must write session ids
//! in hex only, carry no `Option`, sit at the levels the crate docs give, name the election
//! node as an election node, and say nothing above debug about our own close; a client
//! whose build failed (it never had a session) says no unconfirmed close.
//!
//! Beside it, an observer of an unfair election whose path holds a persistent node: a warning
//! per failed read, nothing said, `NoLeader` once the node is gone; and a node an acquire
//! leaves where it may not delete it, warned of.
//!
//! A test binary of its own: a process has one logger (`common::logs`). Its tests run one at
//! a time (`serial`): the failover's test reads every record written after its close began.

mod common;

use std::sync::{Mutex as StdMutex, MutexGuard};
use std::time::Duration;

use common::logs::{capture, level_of, records, saying};
use common::{connect, wait_until, WITHIN};
use log::Level;
use zkguard::testing::TestCluster;
use zkguard::{
    Client, CreateMode, Error, LeaderChange, LeaderElection, LeaderEvent, Mutex, NodeAcl,
};

/// One test at a time, the logger installed (the records are the process's).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: StdMutex<()> = StdMutex::new(());
    let one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    capture();
    one
}

#[test]
fn a_failovers_records_use_hex_ids_no_options_documented_levels_and_name_election_nodes() {
    let _one = serial();
    let cluster = TestCluster::start(1).unwrap();
    let timeout = Duration::from_secs(3);
    let client = connect(&cluster.connect_string(), timeout);
    let dir = common::unique("logging");
    let lock = Mutex::new(&client, &format!("{dir}/lock")).unwrap();
    let guard = lock.acquire().unwrap();
    let lock_node = guard.path().to_string();
    let election_path = format!("{dir}/election");
    let candidate = LeaderElection::new(&client, &election_path, "a")
        .unwrap()
        .join()
        .unwrap();
    let said = candidate.events();
    assert!(matches!(
        said.recv_timeout(WITHIN).unwrap(),
        LeaderEvent::Elected { .. }
    ));
    // And the guard style of an unfair election (its one node at the path).
    let unfair_path = format!("{dir}/unfair");
    let unfair = LeaderElection::unfair(&client, &unfair_path, "a")
        .unwrap()
        .lead()
        .unwrap();
    let old = client.session_id();
    let events = client.events();

    // A reconnect to the same session first: its SetWatches (the guard's and the
    // candidates' watches) is answered without error, and nothing says otherwise.
    client.drop_connection();
    common::expect_reconnected(&events, old, WITHIN);

    // The server is down for longer than the session timeout, then back from its data.
    let new = common::outlive_session(&cluster, &events, timeout);
    // Held again in the new session, then our own close.
    drop(guard);
    let again = lock.acquire().unwrap();
    while said.recv_timeout(WITHIN).unwrap() != LeaderEvent::Rejoined {}
    let before_close = records().len();
    client.close();
    assert!(!again.is_valid());
    let recs = records();

    // Every record of the library starts with `zkguard:`.
    for r in &recs {
        assert!(r.msg.starts_with("zkguard: "), "unprefixed record {r:?}");
    }
    // No `Option` in any message.
    for r in &recs {
        assert!(
            !r.msg.contains("Some(") && !r.msg.contains("None"),
            "an Option in {r:?}"
        );
    }
    // Session ids in hex, never in decimal.
    for id in [old, new] {
        let (hex, dec) = (format!("0x{id:x}"), id.to_string());
        assert!(
            !saying(&recs, &hex).is_empty(),
            "session {hex} in no record: {recs:#?}"
        );
        assert!(saying(&recs, &dec).is_empty(), "session {hex} in decimal");
    }
    // The re-arm of the reconnect was not refused: nothing says it was.
    assert!(
        saying(&recs, "refused to re-arm").is_empty(),
        "a re-arm that succeeded reported refused: {recs:#?}"
    );
    // The levels the crate docs give.
    let (old_hex, new_hex) = (format!("0x{old:x}"), format!("0x{new:x}"));
    assert_eq!(
        level_of(&recs, &format!("session {old_hex} lost")),
        Level::Warn
    );
    assert_eq!(
        level_of(
            &recs,
            &format!("lock node {lock_node} of session {old_hex} lost")
        ),
        Level::Warn
    );
    assert_eq!(
        level_of(&recs, &format!("closed session {old_hex}")),
        Level::Info,
        "the given-up session closed on the server"
    );
    assert_eq!(
        level_of(&recs, &format!("new session {new_hex}")),
        Level::Info
    );
    assert_eq!(level_of(&recs, "connect failed: "), Level::Debug);
    assert_eq!(level_of(&recs, "session event "), Level::Debug);
    // The election's node is named as one, never as a lock node.
    let election_lost = saying(&recs, &format!("election node {election_path}/"));
    assert!(
        election_lost
            .iter()
            .any(|r| r.level == Level::Warn && r.msg.contains(&format!("session {old_hex} lost"))),
        "no warning of the election node's loss: {recs:#?}"
    );
    assert_eq!(
        level_of(
            &recs,
            &format!("election node {unfair_path} of session {old_hex} lost")
        ),
        Level::Warn
    );
    for path in [&election_path, &unfair_path] {
        assert!(
            saying(&recs, &format!("lock node {path}")).is_empty(),
            "an election node called a lock node"
        );
    }
    drop(unfair);
    // Our own close: only debug records from the moment it began (the lock held then is
    // lost by our doing; the server ends the connection because we asked).
    let after = &recs[before_close..];
    assert!(
        !saying(after, &format!("closing session {new_hex}")).is_empty(),
        "the close is not logged: {after:#?}"
    );
    for r in after {
        assert_eq!(
            r.level,
            Level::Debug,
            "above debug after our own close: {r:?}"
        );
    }
    assert!(
        !saying(after, &format!("lock node {}", again.path())).is_empty(),
        "the held lock's end at the close is not logged: {after:#?}"
    );
    // Each record's target is the module that wrote it.
    let session_lost = &saying(&recs, &format!("session {old_hex} lost"))[0];
    assert_eq!(session_lost.target, "zkguard::client::conn::session");
    let closing = &saying(after, "closing session")[0];
    assert_eq!(closing.target, "zkguard::client::conn::session");
    // A client that never had a session has none to close: its failed build says no
    // unconfirmed close.
    let before_failed = records().len();
    let nobody = Client::builder("127.0.0.1:1")
        .connect_timeout(Duration::from_secs(1))
        .build();
    assert!(nobody.is_err());
    let failed = &records()[before_failed..];
    assert!(
        saying(failed, "was not confirmed").is_empty(),
        "a close said unconfirmed without a session: {failed:#?}"
    );
}

/// An unfair election's path holding a persistent node (a co-tenant's, a typo): the observer
/// never says it leads, warns of each failed read (not a connection error: a warning, not
/// debug), and says `NoLeader` once the node is gone.
#[test]
fn an_observer_of_a_persistent_node_at_an_unfair_elections_path_warns_and_says_nothing() {
    let _one = serial();
    let cluster = TestCluster::start(1).unwrap();
    let client = connect(&cluster.connect_string(), Duration::from_secs(10));
    let path = common::unique("logging-observe");
    client
        .create(&path, b"config", CreateMode::Persistent)
        .unwrap();
    let observer = LeaderElection::unfair(&client, &path, "router")
        .unwrap()
        .observe()
        .unwrap();
    let needle = format!("observing the election {path}: ");
    wait_until(WITHIN, "the observer's warning", || {
        !saying(&records(), &needle).is_empty()
    });
    assert_eq!(level_of(&records(), &needle), Level::Warn);
    assert!(
        saying(&records(), &needle)[0]
            .msg
            .contains("persistent node"),
        "{:#?}",
        saying(&records(), &needle)
    );
    assert!(
        observer.events().is_empty(),
        "said {:?} of a persistent node",
        observer.events().try_recv()
    );
    client.delete(&path, None).unwrap();
    assert_eq!(
        observer.events().recv_timeout(WITHIN),
        Ok(LeaderChange::NoLeader)
    );
    drop(observer);
    client.close();
}

/// A creator lock's acquire in a directory anyone may create in but only its owner (ops) may
/// delete in: refused (anyone could create there), and its node, which it may not delete,
/// is left with a warning naming it.
#[test]
fn a_node_an_acquire_may_not_delete_is_warned_of() {
    let _one = serial();
    let (alice, ops) = (common::as_user("alice"), common::as_user("ops"));
    let dir = common::dir_others_may_not_delete_in(&ops, "logging-abandoned");
    let refused = Mutex::new(&alice, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap()
        .acquire_timeout(WITHIN);
    assert!(
        matches!(refused, Err(Error::UntrustedDirectory { .. })),
        "{:?}",
        refused.map(|g| g.is_some())
    );
    let left = ops.get_children(&dir).unwrap().0;
    assert_eq!(left.len(), 1, "{left:?}");
    let needle = format!("cannot delete abandoned node {dir}/{}", left[0]);
    assert_eq!(level_of(&records(), &needle), Level::Warn);
}
