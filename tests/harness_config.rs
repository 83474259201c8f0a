//! The harness's server settings against real servers: observers, custom `zoo.cfg`
//! properties, the session bounds, and which server a client is on.

mod common;

use std::io::ErrorKind;
use std::time::Duration;

use common::{connect, retry, unique, wait_until};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Client, CreateMode};

const PATIENCE: Duration = Duration::from_secs(30);

#[test]
fn an_observer_serves_a_client_and_does_not_vote() {
    let cluster = TestCluster::builder()
        .servers(2)
        .observers(1)
        .start()
        .expect("start");
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.mode(2).expect("mode"), "observer");
    let leader = cluster.leader().expect("a leader");
    assert!(leader < 2, "the observer leads");
    let client = connect(&cluster.server_connect_string(2), PATIENCE);
    assert_eq!(cluster.server_of(&client), Some(2));
    let node = unique("observer");
    client
        .create(&node, b"through the observer", CreateMode::Persistent)
        .expect("a write through the observer");
    let voter = connect(&cluster.server_connect_string(leader), PATIENCE);
    assert_eq!(
        voter.get_data(&node).expect("read").0,
        b"through the observer"
    );

    // One voter of two stopped: if the observer voted, the other voter and it would be a
    // quorum of three; it does not, so nothing can be written.
    let other = 1 - leader;
    cluster.stop(other).expect("stop a voter");
    let write = client.with_timeout(Duration::from_secs(3)).create(
        &format!("{node}-2"),
        b"",
        CreateMode::Persistent,
    );
    assert!(
        write.is_err(),
        "a write without a quorum of voters: {write:?}"
    );
    wait_until(PATIENCE, "the quorum gone", || cluster.leader().is_none());
    cluster.start_server(other).expect("restart the voter");
    retry(PATIENCE, || {
        client.create(&format!("{node}-3"), b"", CreateMode::Persistent)
    });
}

#[test]
fn observers_and_reconfig_are_refused_together() {
    let err = TestCluster::builder()
        .servers(3)
        .observers(1)
        .reconfig(1)
        .start()
        .expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("observers"), "{err}");
}

#[test]
fn a_property_reaches_zoo_cfg_and_the_server_obeys_it() {
    // Given twice: the last value wins.
    let cluster = TestCluster::builder()
        .property("maxClientCnxns", "5")
        .property("maxClientCnxns", "2")
        .start()
        .expect("start");
    let conf = cluster.four_letter(0, "conf").expect("conf");
    assert!(conf.contains("maxClientCnxns=2"), "{conf}");
    let _a = connect(&cluster.connect_string(), PATIENCE);
    let _b = connect(&cluster.connect_string(), PATIENCE);
    let third = Client::builder(&cluster.connect_string())
        .connect_timeout(Duration::from_secs(2))
        .build();
    assert!(
        matches!(third, Err(zkguard::Error::Connect { .. })),
        "a third connection from 127.0.0.1 with maxClientCnxns=2: {third:?}"
    );
}

#[test]
fn bad_properties_are_refused_before_anything_starts() {
    for (key, value) in [
        ("", "1"),
        ("max ClientCnxns", "1"),
        ("a=b", "1"),
        ("#comment", "1"),
        ("maxClientCnxns", "1\nclientPort=1"),
        ("maxClientCnxns", "1\\"),
    ] {
        let err = TestCluster::builder()
            .property(key, value)
            .start()
            .expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{key:?}={value:?}");
        assert!(err.to_string().contains("property("), "{err}");
    }
}

#[test]
fn the_session_bounds_clamp_what_a_client_asks() {
    let cluster = TestCluster::builder()
        .min_session_timeout(Duration::from_secs(4))
        .max_session_timeout(Duration::from_secs(6))
        .start()
        .expect("start");
    let short = connect(&cluster.connect_string(), Duration::from_secs(1));
    assert_eq!(short.session_timeout(), Duration::from_secs(4));
    let long = connect(&cluster.connect_string(), Duration::from_secs(30));
    assert_eq!(long.session_timeout(), Duration::from_secs(6));
}

#[test]
fn server_of_follows_the_client() {
    let cluster = TestCluster::start(3).expect("start");
    let pinned = connect(&cluster.server_connect_string(1), PATIENCE);
    assert_eq!(cluster.server_of(&pinned), Some(1));
    let client = connect(&cluster.connect_string(), PATIENCE);
    let first = cluster.server_of(&client).expect("on a server");
    cluster.kill(first).expect("kill its server");
    wait_until(PATIENCE, "the client on another server", || {
        cluster.server_of(&client).is_some_and(|i| i != first)
    });
    // Through a proxy the client is on none of the servers' own addresses.
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    let behind = connect(&proxy.connect_string(), PATIENCE);
    assert_eq!(cluster.server_of(&behind), None);
    pinned.close();
    assert_eq!(cluster.server_of(&pinned), None);
}

/// A server that cannot start: the error, printed with `{}`, quotes the server's log tail
/// line by line (what docs/testing.md tells users to print), and names the log.
#[test]
fn a_start_error_prints_the_log_tail_as_lines() {
    let err = TestCluster::builder()
        .property("tickTime", "not-a-number")
        .start()
        .expect_err("a server with tickTime=not-a-number");
    let shown = format!("{err}");
    assert!(shown.contains("not-a-number"), "{shown}");
    assert!(shown.lines().count() > 3, "not line by line: {shown}");
    assert!(!shown.contains("\\n"), "escaped newlines: {shown}");
}

/// A container made with a child, then emptied: the watch that hears the server reap it.
fn emptied_container(c: &Client, path: &str) -> crossbeam_channel::Receiver<zkguard::WatchedEvent> {
    c.create(path, b"", CreateMode::Container)
        .expect("container");
    c.create(&format!("{path}/child"), b"", CreateMode::Persistent)
        .expect("child");
    let (_, _, w) = c.get_data_w(path).expect("watch the container");
    c.delete(&format!("{path}/child"), None).expect("empty it");
    w
}

#[test]
fn the_container_check_interval_reaches_the_server() {
    // The default (100 ms) reaps an emptied container at once; an hour keeps it. The
    // fast server's reaps are the clock: five of them, one after the other, while the slow
    // server's emptied container must stay.
    let fast = TestCluster::start(1).expect("start");
    let slow = TestCluster::builder()
        .container_check_interval(Duration::from_secs(3600))
        .start()
        .expect("start");
    let (f, s) = (
        connect(&fast.connect_string(), PATIENCE),
        connect(&slow.connect_string(), PATIENCE),
    );
    let kept = unique("kept");
    let _kept_watch = emptied_container(&s, &kept);
    for i in 0..5 {
        let reaped = emptied_container(&f, &format!("{}-{i}", unique("reaped")));
        let e = reaped
            .recv_timeout(PATIENCE)
            .expect("the default interval reaps an emptied container");
        assert_eq!(e.event_type, zkguard::EventType::NodeDeleted, "{e:?}");
    }
    assert!(
        s.exists(&kept).expect("exists").is_some(),
        "an emptied container reaped by a server told to look once an hour"
    );
}
