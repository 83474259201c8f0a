//! Ensembles that change under a running client: `Client::update_servers` (a session move,
//! bad input), against real servers.

mod common;

use std::time::Duration;

use common::{connect, init_log, unique, wait_event, WITHIN};
use crossbeam_channel::Receiver;
use zkguard::testing::TestCluster;
use zkguard::{EnsembleConfig, Error, LeaderElection, Mutex, SessionEvent};

/// Every event received so far, without waiting.
fn drain(events: &Receiver<SessionEvent>) -> Vec<SessionEvent> {
    events.try_iter().collect()
}

/// A list without the server the client is on moves the session: the same session
/// resumed on a server of the new list, the lock's guard and the leadership valid
/// throughout, no `Lost`, and the lock node still the guard's.
#[test]
fn a_list_without_the_current_server_moves_the_session() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let c = connect(&cluster.server_connect_string(0), Duration::from_secs(6));
    assert_eq!(c.connected_server(), Some(cluster.client_addr(0)));
    let session = c.session_id();
    let path = unique("move");
    let guard = Mutex::new(&c, &format!("{path}/lock"))
        .unwrap()
        .acquire()
        .unwrap();
    let leading = LeaderElection::new(&c, &format!("{path}/election"), "a")
        .unwrap()
        .lead()
        .unwrap();
    let events = c.events();
    let others = format!(
        "{},{}",
        cluster.server_connect_string(1),
        cluster.server_connect_string(2)
    );
    assert!(c.update_servers(&others).unwrap(), "must move");
    let ev = wait_event(&events, WITHIN, "the move's reconnect", |e| {
        matches!(
            e,
            SessionEvent::Reconnected { .. }
                | SessionEvent::Lost { .. }
                | SessionEvent::Connected { .. }
        )
    });
    assert_eq!(
        ev,
        SessionEvent::Reconnected {
            session_id: session
        }
    );
    let on = c.connected_server().expect("connected");
    assert!(
        [cluster.client_addr(1), cluster.client_addr(2)].contains(&on),
        "moved to {on}"
    );
    assert!(guard.is_valid() && leading.is_valid());
    guard.confirm().unwrap();
    leading.confirm().unwrap();
    assert!(
        !drain(&events).iter().any(|e| matches!(
            e,
            SessionEvent::Lost { .. } | SessionEvent::Connected { .. }
        )),
        "the session must carry on"
    );
    let mut servers = c.servers();
    servers.sort();
    let mut want = vec![
        cluster.server_connect_string(1),
        cluster.server_connect_string(2),
    ];
    want.sort();
    assert_eq!(servers, want);
    guard.release().unwrap();
}

/// A new list that keeps the current server and does not grow keeps the connection:
/// nothing is cut, no event at all.
#[test]
fn a_list_that_keeps_the_server_and_does_not_grow_keeps_the_connection() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let c = connect(&cluster.connect_string(), Duration::from_secs(6));
    let on = c.connected_server().expect("connected");
    let events = c.events();
    let reversed: Vec<String> = (0..3)
        .rev()
        .map(|i| cluster.server_connect_string(i))
        .collect();
    assert!(!c.update_servers(&reversed.join(",")).unwrap());
    // A round trip: the connection it goes over is the one before.
    c.exists("/").unwrap();
    assert_eq!(c.connected_server(), Some(on));
    assert_eq!(drain(&events), vec![]);
}

/// Bad input is an error naming what is wrong, and changes nothing: the list, the session
/// and the connection stay.
#[test]
fn bad_lists_are_refused_and_change_nothing() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let base = unique("chroot");
    let root = connect(&cluster.connect_string(), Duration::from_secs(6));
    root.create(&base, b"", zkguard::CreateMode::Persistent)
        .unwrap();
    let c = connect(
        &format!("{}{base}", cluster.connect_string()),
        Duration::from_secs(6),
    );
    let (servers, session, on) = (c.servers(), c.session_id(), c.connected_server());
    let events = c.events();
    let other_chroot = format!("{}/elsewhere", cluster.connect_string());
    for (bad, says) in [
        ("", "empty host entry"),
        ("127.0.0.1:0", "bad port"),
        ("a:1,,b:2", "empty host entry"),
        ("zk://127.0.0.1:2181", "URL scheme"),
        (other_chroot.as_str(), "is not the client's"),
        ("no-such-host.invalid:2181", "no-such-host.invalid"),
    ] {
        let e = c.update_servers(bad).expect_err(bad);
        assert!(
            matches!(e, Error::InvalidArgument { .. } | Error::Connect { .. }),
            "{bad}: {e:?}"
        );
        assert!(e.to_string().contains(says), "{bad}: {e}");
        assert_eq!(c.servers(), servers, "{bad}");
    }
    // The client's own chroot, written out, is accepted.
    let same = format!("{}{base}", cluster.connect_string());
    assert!(!c.update_servers(&same).unwrap());
    c.exists("/").unwrap();
    assert_eq!((c.session_id(), c.connected_server()), (session, on));
    assert_eq!(drain(&events), vec![]);
    c.close();
    assert!(matches!(
        c.update_servers(&cluster.connect_string()),
        Err(Error::Closed)
    ));
}

/// The harness's reconfiguration: two spares added, three members removed, each step
/// seen in `/zookeeper/config` (a growing version, the members' client addresses); a
/// session that is not the superuser may not reconfigure.
#[test]
fn the_harness_adds_and_removes_servers_by_reconfig() {
    init_log();
    let cluster = TestCluster::builder()
        .servers(3)
        .reconfig(2)
        .start()
        .unwrap();
    let c = connect(&cluster.connect_string(), Duration::from_secs(10));
    let config = |c: &zkguard::Client| {
        let (data, _) = c.get_config().unwrap();
        EnsembleConfig::parse(&data).unwrap()
    };
    let hosts = |members: &[usize]| -> Vec<String> {
        members
            .iter()
            .map(|&i| cluster.server_connect_string(i))
            .collect()
    };
    let first = config(&c);
    assert_eq!(sorted(first.client_hosts()), sorted(hosts(&[0, 1, 2])));
    let refused = c.reconfig(&[&cluster.config_line(3)], &[], None);
    assert!(matches!(refused, Err(Error::NoAuth { .. })), "{refused:?}");
    cluster.add_server(3).unwrap();
    cluster.add_server(4).unwrap();
    let grown = config(&c);
    assert!(grown.version() > first.version());
    assert_eq!(
        sorted(grown.client_hosts()),
        sorted(hosts(&[0, 1, 2, 3, 4]))
    );
    let text = cluster.remove_servers(&[0, 1, 2]).unwrap();
    let shrunk = EnsembleConfig::parse(text.as_bytes()).unwrap();
    assert!(shrunk.version() > grown.version());
    assert_eq!(sorted(shrunk.client_hosts()), sorted(hosts(&[3, 4])));
    assert_eq!(cluster.members(), vec![3, 4]);
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
