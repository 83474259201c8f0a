//! Ensembles that change under a running client: `Client::update_servers` (a session move,
//! bad input), against real servers.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use common::{connect, unique, wait_event, WITHIN};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{
    Client, EnsembleConfig, Error, LeaderElection, Leadership, Mutex, MutexGuard, SessionEvent,
};

/// The library's `warn` records and above, kept (and shown on stderr) for the tests that
/// look for one; this binary's only logger, installed by every test.
struct Warnings(StdMutex<Vec<String>>);

impl log::Log for Warnings {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn && m.target().starts_with("zkguard")
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("{} {}: {}", r.level(), r.target(), r.args());
            self.0.lock().unwrap().push(r.args().to_string());
        }
    }

    fn flush(&self) {}
}

fn warnings() -> &'static Warnings {
    static WARNINGS: OnceLock<&'static Warnings> = OnceLock::new();
    WARNINGS.get_or_init(|| {
        let w: &'static Warnings = Box::leak(Box::new(Warnings(StdMutex::new(Vec::new()))));
        log::set_logger(w).expect("the only logger of this test binary");
        log::set_max_level(log::LevelFilter::Warn);
        w
    })
}

fn init_log() {
    warnings();
}

/// A lock at `<path>/lock` and the leadership of `<path>/election`, held by `c`.
fn hold(c: &Client, path: &str) -> (MutexGuard, Leadership) {
    let guard = Mutex::new(c, &format!("{path}/lock"))
        .unwrap()
        .acquire()
        .unwrap();
    let leading = LeaderElection::new(c, &format!("{path}/election"), "a")
        .unwrap()
        .lead()
        .unwrap();
    (guard, leading)
}

/// Three servers with reconfiguration on, and `spares` more prepared.
fn reconfigurable(spares: usize) -> TestCluster {
    TestCluster::builder()
        .servers(3)
        .reconfig(spares)
        .start()
        .unwrap()
}

/// A client of `connect` that follows the ensemble.
fn following(connect: &str, session_timeout: Duration) -> Client {
    Client::builder(connect)
        .session_timeout(session_timeout)
        .connect_timeout(WITHIN)
        .follow_ensemble(true)
        .build()
        .unwrap()
}

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
    let (guard, leading) = hold(&c, &unique("move"));
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
    let cluster = reconfigurable(2);
    let c = connect(&cluster.connect_string(), Duration::from_secs(10));
    let config = |c: &Client| {
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

/// Samples `valid` every 2 ms until `stop`'s sender is dropped: how many samples read
/// invalid, and the longest run of them.
fn sample_validity(valid: impl Fn() -> bool, stop: &Receiver<()>) -> (u32, Duration) {
    let (mut invalid, mut longest, mut since) = (0, Duration::ZERO, None::<Instant>);
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(Duration::from_millis(2)) {
        if valid() {
            if let Some(t) = since.take() {
                longest = longest.max(t.elapsed());
            }
        } else {
            invalid += 1;
            since.get_or_insert_with(Instant::now);
        }
    }
    (invalid, longest)
}

/// The scene: a 3-server ensemble grows to 5 (servers 4 and 5 added), then
/// servers 1, 2 and 3 are removed by reconfig and stopped. A client following the
/// ensemble, holding a lock and leading an election, moves to the new servers with the
/// same session: no `Lost`, its guards never lost and valid after the move, and a new
/// acquire works. The control, built with the old list and not following, cannot
/// reconnect: its session is lost and stays without a server.
#[test]
fn a_following_client_keeps_its_session_when_every_server_is_replaced() {
    init_log();
    let cluster = reconfigurable(2);
    let timeout = Duration::from_secs(10);
    let follower = following(&cluster.connect_string(), timeout);
    let control = connect(&cluster.connect_string(), timeout);
    let (session, control_session) = (follower.session_id(), control.session_id());
    let path = unique("replaced");
    let (guard, leading) = hold(&follower, &path);
    let (lost_lock, lost_lead) = (guard.lost(), leading.lost());
    let events = follower.events();
    let control_events = control.events();
    let (stop_tx, stop) = crossbeam_channel::bounded::<()>(1);
    // The sender lives in the scope's closure: a failing assertion drops it while
    // unwinding, which ends the sampler, so the scope can end too.
    std::thread::scope(|scope| {
        let stop_tx = stop_tx;
        let validity =
            scope.spawn(|| sample_validity(|| guard.is_valid() && leading.is_valid(), &stop));
        cluster.add_server(3).unwrap();
        cluster.add_server(4).unwrap();
        let five: Vec<String> = (0..5).map(|i| cluster.server_connect_string(i)).collect();
        common::wait_until(WITHIN, "five servers followed", || {
            sorted(follower.servers()) == sorted(five.clone())
        });
        let removed = Instant::now();
        cluster.remove_servers(&[0, 1, 2]).unwrap();
        let new: Vec<String> = (3..5).map(|i| cluster.server_connect_string(i)).collect();
        let new_addrs = [cluster.client_addr(3), cluster.client_addr(4)];
        common::wait_until(WITHIN, "the removal followed and the session moved", || {
            sorted(follower.servers()) == sorted(new.clone())
                && follower
                    .connected_server()
                    .is_some_and(|a| new_addrs.contains(&a))
        });
        let moved_after = removed.elapsed();
        for i in 0..3 {
            cluster.stop(i).unwrap();
        }
        // The session carried on: no loss, no new session, the guards never lost.
        assert_eq!(follower.session_id(), session);
        let seen = drain(&events);
        assert!(
            !seen.iter().any(|e| matches!(
                e,
                SessionEvent::Lost { .. } | SessionEvent::Connected { .. }
            )),
            "{seen:?}"
        );
        assert!(lost_lock.try_recv().is_err() && lost_lead.try_recv().is_err());
        common::retry(WITHIN, || guard.confirm());
        common::retry(WITHIN, || leading.confirm());
        assert!(guard.is_valid() && leading.is_valid());
        let other = Mutex::new(&follower, &format!("{path}/after"))
            .unwrap()
            .acquire()
            .unwrap();
        assert!(other.is_valid());
        drop(stop_tx);
        let (invalid_samples, longest) = validity.join().unwrap();
        eprintln!(
            "ensemble replaced: the session moved {moved_after:?} after the removal's reconfig \
         returned; the guards read invalid in {invalid_samples} samples of 2 ms (longest \
         {longest:?}: the move's reconnect), never lost; events: {seen:?}"
        );
        // The control knew only servers 1 to 3: its session is lost, and no server takes it.
        wait_event(
            &control_events,
            timeout * 3,
            "the control's loss",
            |e| matches!(e, SessionEvent::Lost { session_id, .. } if *session_id == control_session),
        );
        assert!(control.exists("/").is_err());
        assert_ne!(control.state(), zkguard::SessionState::Connected);
        other.release().unwrap();
    });
    guard.release().unwrap();
}

/// A configuration node that cannot be read is ignored with a warning, and so is an empty
/// one: the list stays, the session carries on. (The superuser writes the node directly,
/// which the servers allow; their own configuration is untouched.)
#[test]
fn a_garbage_or_empty_configuration_is_ignored_with_a_warning() {
    init_log();
    let cluster = reconfigurable(0);
    let follower = following(&cluster.connect_string(), Duration::from_secs(10));
    let admin = Client::builder(&cluster.connect_string())
        .auth("digest", TestCluster::SUPERUSER)
        .connect_timeout(WITHIN)
        .build()
        .unwrap();
    let (servers, session) = (sorted(follower.servers()), follower.session_id());
    let events = follower.events();
    for (bad, says) in [
        (&b"garbage\x1b[2J"[..], "not key=value"),
        (b"", "empty"),
        (
            b"server.1=127.0.0.1:1:2\nversion=ffffffffff",
            "no server with a client address",
        ),
        // Written by the superuser, not by a reconfig: a version no zxid of the
        // ensemble has reached, which would have shut out every later configuration.
        (
            b"server.1=127.0.0.1:1:2;127.0.0.1:1\nversion=ffffffffffffff00",
            "version ffffffffffffff00 is beyond the zxid",
        ),
    ] {
        admin.set_data(zkguard::CONFIG_NODE, bad, None).unwrap();
        common::wait_until(WITHIN, "the warning", || {
            warnings().0.lock().unwrap().iter().any(|w| {
                w.starts_with("zkguard: the ensemble's configuration is ignored")
                    && w.contains(says)
            })
        });
        assert_eq!(sorted(follower.servers()), servers);
    }
    assert!(
        !warnings()
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|w| w.contains('\x1b')),
        "server-sent text is escaped"
    );
    follower.exists("/").unwrap();
    assert_eq!(follower.session_id(), session);
    assert_eq!(drain(&events), vec![]);
}

/// A fault: the client is partitioned from its only server (a fault proxy black-holes the
/// connection) and the new list names other servers. A client that has noticed (already
/// `Suspended`) connects to the new list on its next attempt; one that has not (still
/// `Connected` to a silent server) is moved at once. Either way the same session comes
/// back, no `Lost`, and the lock and the leadership are still held.
#[test]
fn a_new_list_takes_a_partitioned_client_out_of_its_partition() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let proxy = FaultProxy::start(&[cluster.client_addr(0)]).unwrap();
    let others = format!(
        "{},{}",
        cluster.server_connect_string(1),
        cluster.server_connect_string(2)
    );
    // Long enough that the silence is noticed (two thirds of it) well before the loss
    // clock runs out, with a connect attempt to the black hole in between.
    let timeout = Duration::from_secs(15);
    let noticed = connect(&proxy.connect_string(), timeout);
    let unnoticed = connect(&proxy.connect_string(), timeout);
    let held: Vec<_> = [&noticed, &unnoticed]
        .iter()
        .map(|c| (c.session_id(), c.events(), hold(c, &unique("partitioned"))))
        .collect();
    proxy.blackhole();
    assert!(unnoticed.update_servers(&others).unwrap(), "moved at once");
    wait_event(&held[0].1, WITHIN, "the partition noticed", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    assert!(
        !noticed.update_servers(&others).unwrap(),
        "nothing to leave"
    );
    for (c, (session, events, (guard, leading))) in [&noticed, &unnoticed].iter().zip(&held) {
        common::expect_reconnected(events, *session, WITHIN);
        let on = c.connected_server().expect("connected");
        assert!(
            on == cluster.client_addr(1) || on == cluster.client_addr(2),
            "{on}"
        );
        common::retry(WITHIN, || guard.confirm());
        common::retry(WITHIN, || leading.confirm());
        let seen = drain(events);
        assert!(
            !seen.iter().any(|e| matches!(e, SessionEvent::Lost { .. })),
            "{seen:?}"
        );
    }
    proxy.heal();
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn write_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    s.write_all(&frame)
}

/// A reply header: xid, zxid, error 0.
fn reply_header(xid: i32, zxid: i64) -> Vec<u8> {
    let mut h = xid.to_be_bytes().to_vec();
    h.extend_from_slice(&zxid.to_be_bytes());
    h.extend_from_slice(&0i32.to_be_bytes());
    h
}

/// A scripted server that lies (no ZooKeeper does this; a fake server in the connect
/// string, or a man in the middle, can): it takes over any session it is asked to resume,
/// fires the configuration's watch at once, and answers the read of `/zookeeper/config`
/// with `config`, reporting the client's own last zxid in every header. Each read it
/// answers is sent on the channel.
fn lying_server(config: String) -> (String, Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let (served, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { return };
            let _ = lie(s, &config, &served);
        }
    });
    (addr, rx)
}

fn lie(mut s: TcpStream, config: &str, served: &Sender<()>) -> std::io::Result<()> {
    // ConnectRequest: protocol version, last zxid, timeout, session id, password.
    let req = read_frame(&mut s)?;
    let int = |at: usize| i32::from_be_bytes(req[at..at + 4].try_into().unwrap());
    let long = |at: usize| i64::from_be_bytes(req[at..at + 8].try_into().unwrap());
    let (zxid, timeout, session) = (long(4), int(12), long(16));
    let passwd = &req[28..28 + int(24) as usize];
    let mut resp = 0i32.to_be_bytes().to_vec();
    resp.extend_from_slice(&timeout.to_be_bytes());
    resp.extend_from_slice(&session.to_be_bytes());
    resp.extend_from_slice(&(passwd.len() as i32).to_be_bytes());
    resp.extend_from_slice(passwd);
    write_frame(&mut s, &resp)?;
    // NodeDataChanged (3), SyncConnected (3), on the configuration node.
    let mut event = reply_header(-1, -1);
    event.extend_from_slice(&3i32.to_be_bytes());
    event.extend_from_slice(&3i32.to_be_bytes());
    event.extend_from_slice(&(zkguard::CONFIG_NODE.len() as i32).to_be_bytes());
    event.extend_from_slice(zkguard::CONFIG_NODE.as_bytes());
    write_frame(&mut s, &event)?;
    loop {
        let req = read_frame(&mut s)?;
        let xid = i32::from_be_bytes(req[..4].try_into().unwrap());
        let op = i32::from_be_bytes(req[4..8].try_into().unwrap());
        let mut reply = reply_header(xid, zxid);
        if op == 4 {
            // getData: the data, then a stat of zeros.
            reply.extend_from_slice(&(config.len() as i32).to_be_bytes());
            reply.extend_from_slice(config.as_bytes());
            reply.extend_from_slice(&[0u8; 68]);
        }
        write_frame(&mut s, &reply)?;
        if op == 4 {
            let _ = served.send(());
        }
    }
}

/// An attack: a server the client is moved to (a fake one in the list, or a man in the
/// middle) publishes the real servers at version `ffffffffffffffff`, beyond the zxid it
/// reports. Not applied (a warning names it; the list stays), so the client is not pinned
/// to that version: back on the real servers, a real reconfiguration is followed, and the
/// session is the same throughout.
#[test]
fn a_version_beyond_the_servers_own_zxid_is_not_applied_and_a_real_reconfig_still_is() {
    init_log();
    let cluster = reconfigurable(1);
    let real = cluster.connect_string();
    let follower = following(&real, Duration::from_secs(30));
    let session = follower.session_id();
    let hosts =
        |n: usize| -> Vec<String> { (0..n).map(|i| cluster.server_connect_string(i)).collect() };
    let lines: Vec<String> = hosts(3)
        .iter()
        .enumerate()
        .map(|(i, h)| format!("server.{}=127.0.0.1:1:2;{h}", i + 1))
        .collect();
    let (fake, served) = lying_server(format!("{}\nversion=ffffffffffffffff", lines.join("\n")));
    follower.update_servers(&fake).unwrap();
    served
        .recv_timeout(WITHIN)
        .expect("the follower read the lying server's configuration");
    common::wait_until(WITHIN, "the warning naming the version", || {
        warnings().0.lock().unwrap().iter().any(|w| {
            w.starts_with("zkguard: the ensemble's configuration is ignored")
                && w.contains("version ffffffffffffffff is beyond the zxid")
        })
    });
    assert_eq!(follower.servers(), vec![fake.clone()]);
    follower.update_servers(&real).unwrap();
    cluster.add_server(3).unwrap();
    common::wait_until(WITHIN, "the real reconfiguration followed", || {
        sorted(follower.servers()) == sorted(hosts(4))
    });
    follower.exists("/").unwrap();
    assert_eq!(follower.session_id(), session);
}
