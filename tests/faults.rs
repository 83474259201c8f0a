//! The client under faults, against real servers: restarts, failover, partitions through the
//! fault proxy, session expiry, malformed frames.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::partition::partition;
use common::{
    connect, expect_reconnected, init_log, next_watch, recv, retry, shared_cluster, spawn, unique,
    wait_event, WITHIN,
};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{
    Acl, Client, CloseOutcome, CreateMode, Error, EventType, LossReason, SessionEvent, SessionState,
};

/// A request that finds no connection to be written on before its deadline times out
/// naming its own operation, node and deadline (each request of a pipeline its own).
#[test]
fn a_request_with_no_connection_times_out_naming_its_op_and_path() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let c = connect(&cluster.connect_string(), Duration::from_secs(8));
    let events = c.events();
    cluster.stop(0).unwrap();
    wait_event(&events, Duration::from_secs(10), "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    let short = Duration::from_millis(300);
    let err = c.with_timeout(short).get_data("/zookeeper").unwrap_err();
    match &err {
        Error::Timeout { op, path, after } => {
            assert_eq!(
                (*op, path.as_str(), *after),
                ("get_data", "/zookeeper", short)
            )
        }
        e => panic!("expected a timeout, got {e:?}"),
    }
    assert!(err.to_string().contains("get_data /zookeeper"), "{err}");
    let (a, b) = c
        .with_timeout(short)
        .pipeline(|p| (p.exists("/a"), p.get_children("/b")));
    match (a.wait(), b.wait()) {
        (
            Err(Error::Timeout {
                op: op_a,
                path: path_a,
                after: after_a,
            }),
            Err(Error::Timeout {
                op: op_b,
                path: path_b,
                after: after_b,
            }),
        ) => {
            assert_eq!((op_a, path_a.as_str(), after_a), ("exists", "/a", short));
            assert_eq!(
                (op_b, path_b.as_str(), after_b),
                ("get_children", "/b", short)
            );
        }
        other => panic!("expected two timeouts, got {other:?}"),
    }
}

#[test]
fn watches_survive_a_server_restart() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    // 20 s: the session must outlive the server's restart, which is a JVM start. With 8 s
    // it once did not (3.6.3, a load spike of two stress runners and a release build on 2
    // cores): the client rightly gave the session up (`Lost`, reason `Timeout`) before the
    // server was back. The test is about the watches, not about how fast a JVM starts.
    let s = Duration::from_secs(20);
    let c = connect(&cluster.connect_string(), s);
    let other = connect(&cluster.connect_string(), s);
    let p = unique("restart");
    c.create(&p, b"0", CreateMode::Persistent).unwrap();
    let session = c.session_id();
    let events = c.events();
    let (_, _, data_w) = c.get_data_w(&p).unwrap();
    let (_, missing_w) = c.exists_w(&format!("{p}/later")).unwrap();

    cluster.stop(0).unwrap();
    wait_event(&events, Duration::from_secs(10), "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    assert_eq!(c.state(), SessionState::Suspended);
    cluster.start_server(0).unwrap();
    expect_reconnected(&events, session, s * 2);

    // The server forgot every watch when it stopped; SetWatches re-armed them.
    retry(Duration::from_secs(15), || other.set_data(&p, b"1", None));
    assert_eq!(next_watch(&data_w), EventType::NodeDataChanged);
    retry(Duration::from_secs(15), || {
        other.create(&format!("{p}/later"), b"", CreateMode::Persistent)
    });
    assert_eq!(next_watch(&missing_w), EventType::NodeCreated);
    assert_eq!(c.session_id(), session);
}

#[test]
fn failover_keeps_the_session_and_reports_a_change_made_during_the_outage() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let c = connect(&cluster.connect_string(), Duration::from_secs(8));
    let p = unique("failover");
    c.create(&p, b"0", CreateMode::Persistent).unwrap();
    c.create(&format!("{p}/eph"), b"", CreateMode::Ephemeral)
        .unwrap();
    let session = c.session_id();
    let events = c.events();
    let (_, _, data_w) = c.get_data_w(&p).unwrap();
    let (_, _, kids_w) = c.get_children_w(&p).unwrap();

    let here = c.connected_server().unwrap();
    let victim = (0..3).find(|&i| cluster.client_addr(i) == here).unwrap();
    let elsewhere = (0..3).find(|&i| i != victim).unwrap();
    let other = connect(
        &cluster.server_connect_string(elsewhere),
        Duration::from_secs(8),
    );

    cluster.kill(victim).unwrap();
    // Change the node while `c` is still finding another server.
    retry(Duration::from_secs(20), || {
        other.set_data(&p, b"during", None)
    });
    expect_reconnected(&events, session, Duration::from_secs(20));
    assert_ne!(c.connected_server(), Some(here));
    assert_eq!(next_watch(&data_w), EventType::NodeDataChanged);
    retry(Duration::from_secs(10), || {
        other.create(&format!("{p}/new"), b"", CreateMode::Persistent)
    });
    assert_eq!(next_watch(&kids_w), EventType::NodeChildrenChanged);
    // The ephemeral node is still there: same session.
    assert!(retry(Duration::from_secs(10), || other
        .exists(&format!("{p}/eph")))
    .is_some());
}

#[test]
fn a_frozen_server_is_left_for_another_and_the_session_kept() {
    // SIGSTOP: the TCP connection stays open, the server just says nothing any more.
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    // 9 s: the client notices the silence after 6 s and has the last 3 s to resume its
    // session on another server before the servers may expire it. With 3 s that margin
    // was 1 s, which a loaded machine (three JVMs on 2 cores) once overran on 3.9.3: the
    // session expired before the reconnect, which then failed this test.
    let t = Duration::from_secs(9);
    let c = connect(&cluster.connect_string(), t);
    let p = unique("frozen");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    let session = c.session_id();
    let events = c.events();
    let here = c.connected_server().unwrap();
    let frozen = (0..3).find(|&i| cluster.client_addr(i) == here).unwrap();
    let paused_at = Instant::now();
    cluster.pause(frozen).unwrap();
    wait_event(&events, t * 2, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    // Silence is noticed after two thirds of the session timeout (docs/semantics.md), not
    // never: the bound is that promise (6 s) plus a third of the timeout (3 s) of slack for the
    // client's thread to wake up on a loaded machine. Timing-sensitive by design.
    assert!(paused_at.elapsed() < t, "{:?}", paused_at.elapsed());
    expect_reconnected(&events, session, Duration::from_secs(20));
    assert_ne!(c.connected_server(), Some(here));
    assert!(retry(Duration::from_secs(10), || c.exists(&p)).is_some());
    cluster.resume(frozen).unwrap();
}

#[test]
fn a_partition_is_suspended_at_once_and_lost_within_the_session_timeout() {
    let (cluster, proxy) = partition(1);
    let t = Duration::from_secs(2);
    let c = connect(&proxy.connect_string(), t);
    let observer = connect(&cluster.connect_string(), Duration::from_secs(10));
    let p = unique("partition");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    let (_, _, w) = c.get_data_w(&p).unwrap();
    let old = c.session_id();
    let events = c.events();

    let cut = Instant::now();
    proxy.blackhole();
    wait_event(&events, t * 3, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    // A request waiting for the connection learns that its session is gone.
    let waiter = {
        let c = c.with_timeout(Duration::from_secs(30));
        let p = p.clone();
        std::thread::spawn(move || c.get_data(&p))
    };
    let lost = wait_event(&events, t * 3, "lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    let took = cut.elapsed();
    assert_eq!(
        lost,
        SessionEvent::Lost {
            session_id: old,
            reason: LossReason::Timeout
        }
    );
    // The promise under test (docs/semantics.md, "Lost"): the session timeout less a tenth
    // (at most 250 ms) after the last request a server answered, which was before the cut. The
    // slack is for the wake-ups of the client's thread and of this one on a loaded
    // machine; it is not part of the promise. Timing-sensitive by design.
    let promised = t - (t / 10).min(Duration::from_millis(250));
    let slack = Duration::from_secs(1);
    assert!(
        took <= promised + slack,
        "lost reported {took:?} after the cut (promised {promised:?}, slack {slack:?})"
    );
    // The watches are told by the client's thread right after the event this thread got.
    assert_eq!(
        w.recv_timeout(WITHIN).unwrap().event_type,
        EventType::SessionLost
    );
    assert_eq!(waiter.join().unwrap().unwrap_err(), Error::SessionExpired);

    proxy.heal();
    let ev = wait_event(&events, Duration::from_secs(15), "connected", |e| {
        matches!(e, SessionEvent::Connected { .. })
    });
    let SessionEvent::Connected { session_id } = ev else {
        unreachable!()
    };
    assert_ne!(session_id, old);
    assert_eq!(c.session_id(), session_id);
    assert_eq!(c.state(), SessionState::Connected);
    // Usable again; the old session's ephemeral node is gone (server-side expiry).
    c.create(&format!("{p}-again"), b"", CreateMode::Ephemeral)
        .unwrap();
    let (_, gone) = observer.exists_w(&p).unwrap();
    if observer.exists(&p).unwrap().is_some() {
        assert_eq!(
            gone.recv_timeout(Duration::from_secs(15))
                .unwrap()
                .event_type,
            EventType::NodeDeleted
        );
    }
    assert_eq!(c.stats().sessions, 2);
}

/// Writes one length-prefixed frame.
#[test]
fn a_close_the_server_cannot_hear_is_unconfirmed_and_the_ephemerals_stay_until_expiry() {
    init_log();
    let cluster = shared_cluster();
    let proxy = FaultProxy::for_cluster(cluster).unwrap();
    let t = Duration::from_secs(2);
    // `c`'s session is 9 s: it notices the silence at 6 s and has the last 3 s to close and
    // let the test see its node still there before the server may expire it. With 2 s that
    // margin was 0.67 s, which a load spike overran once (stress, 2 cores, two runners and
    // a release build): the server expired the session first and the check below failed.
    let s = Duration::from_secs(9);
    let observer = connect(&cluster.connect_string(), Duration::from_secs(10));
    let c = connect(&proxy.connect_string(), s);
    let gone = connect(&proxy.connect_string(), t);
    let p = unique("unheard-close");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    let (_, _, deleted) = observer.get_data_w(&p).unwrap();
    let (events, gone_events) = (c.events(), gone.events());

    proxy.blackhole();
    let cut = Instant::now();
    wait_event(&events, s * 2, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    // The session may be alive at the server: the close is not confirmed, and says so.
    let outcome = c.close();
    assert!(
        matches!(&outcome, CloseOutcome::Unconfirmed { reason } if reason.is_connection_error()),
        "{outcome:?}"
    );
    assert!(!outcome.is_clean());
    assert!(outcome.clone().into_result().is_err());
    assert_eq!(c.state(), SessionState::Closed);
    // Its ephemeral node stays until the server expires the session, and goes then.
    let there = observer.exists(&p).unwrap().is_some();
    assert!(
        there,
        "the node went {:?} after the cut (session {s:?})",
        cut.elapsed()
    );
    let ev = deleted
        .recv_timeout(s * 4)
        .expect("the node outlived the session");
    assert_eq!(ev.event_type, EventType::NodeDeleted);
    assert!(matches!(c.close(), CloseOutcome::AlreadyClosed));

    // A client whose session is known lost has nothing left at the server to close.
    wait_event(&gone_events, t * 10, "lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    let outcome = gone.close();
    assert!(matches!(outcome, CloseOutcome::NoSession), "{outcome:?}");
    assert!(outcome.is_clean());
    proxy.heal();
}

#[test]
fn a_close_to_a_frozen_server_is_bounded_and_unconfirmed() {
    // The server is SIGSTOPped: the connection stays open and nothing answers. The close
    // must not hang, must say the server did not confirm, and must leave the client closed.
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    // A session far longer than the wait below: a close that waited for the session's
    // loss (or for ever) is not back within it. Bounded means its own short bound.
    let c = Arc::new(connect(
        &cluster.connect_string(),
        WITHIN + Duration::from_secs(5),
    ));
    let p = unique("frozen-close");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    cluster.pause(0).unwrap();
    let closing = Arc::clone(&c);
    let outcome = recv(&spawn(move || closing.close()), WITHIN, "the close");
    cluster.resume(0).unwrap();
    assert!(
        matches!(
            &outcome,
            CloseOutcome::Unconfirmed {
                reason: Error::Timeout { op: "close", .. }
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(c.state(), SessionState::Closed);
    assert!(matches!(c.exists(&p), Err(Error::Closed)));
    // The server, once it runs again, still ends the session (the connection is gone), and
    // with it the ephemeral node.
    let observer = connect(&cluster.connect_string(), Duration::from_secs(10));
    let ev = match observer.get_data_w(&p) {
        Ok((_, _, w)) => w.recv_timeout(WITHIN * 2).map(|e| e.event_type),
        Err(Error::NoNode { .. }) => Ok(EventType::NodeDeleted),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(ev, Ok(EventType::NodeDeleted));
}

/// Once a close is said (`Closed`, before the server is asked), a request is refused with
/// `Closed` and never sent, a new server list refused and a second close no close of its
/// own, though the first still waits for the server.
#[test]
fn a_request_made_once_the_close_is_said_is_refused_and_never_sent() {
    init_log();
    let proxy = FaultProxy::start(&[shared_cluster().client_addr(0)]).unwrap();
    let c = connect(&proxy.connect_string(), Duration::from_secs(30));
    let events = c.events();
    let before = c.stats().requests;
    // Nothing answers the close: it waits its bound, the client closing all the while.
    proxy.blackhole();
    let closer = {
        let c = c.clone();
        spawn(move || c.close())
    };
    wait_event(&events, WITHIN, "the close said", |e| {
        matches!(e, SessionEvent::Closed)
    });
    let r = c.exists("/");
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    // The client counts as closed for everything else too.
    let r = c.update_servers(&proxy.connect_string());
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    // A second close while the first waits is no close of its own.
    let again = c.close();
    assert!(matches!(again, CloseOutcome::AlreadyClosed), "{again:?}");
    let outcome = recv(&closer, WITHIN, "the close");
    assert!(
        matches!(outcome, CloseOutcome::Unconfirmed { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        c.stats().requests,
        before + 1,
        "the close alone was sent once the close was said"
    );
}

fn send_frame(s: &mut std::net::TcpStream, body: &[u8]) {
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    s.write_all(&frame).unwrap();
}

/// A ConnectResponse body.
fn connect_response(timeout_ms: i32, session_id: i64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&0i32.to_be_bytes());
    r.extend_from_slice(&timeout_ms.to_be_bytes());
    r.extend_from_slice(&session_id.to_be_bytes());
    r.extend_from_slice(&16i32.to_be_bytes());
    r.extend_from_slice(&[7u8; 16]);
    r
}

#[test]
fn a_server_saying_expired_is_reported_as_lost_and_a_new_session_follows() {
    // On a real server the client's own timer (same length as the server's) always fires
    // first, so the server's "expired" answer is driven by a scripted peer: session 0x51,
    // a dropped connection, "expired" on the reconnect, then a new session 0x52.
    init_log();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (go, go_rx) = crossbeam_channel::bounded::<()>(1);
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for (i, reply) in [(4000, 0x51i64), (0, 0), (4000, 0x52)]
            .into_iter()
            .enumerate()
        {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 256];
            let n = s.read(&mut buf).unwrap();
            // The session id the client asked for: bytes 4+4+8+4 .. +8 of the frame.
            seen.push(i64::from_be_bytes(buf[20..28].try_into().unwrap()));
            assert!(n >= 28);
            send_frame(&mut s, &connect_response(reply.0, reply.1));
            if i == 0 {
                // Drop the first connection once the test listens for events.
                let _ = go_rx.recv();
            }
            if i == 2 {
                // Keep the last connection open until the client closes it.
                let _ = s.read(&mut buf);
            }
        }
        seen
    });
    let c = Client::builder(&addr).build().unwrap();
    let events = c.events();
    go.send(()).unwrap();
    let lost = wait_event(&events, Duration::from_secs(10), "lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    assert_eq!(
        lost,
        SessionEvent::Lost {
            session_id: 0x51,
            reason: LossReason::Expired
        }
    );
    let next = wait_event(&events, Duration::from_secs(10), "connected", |e| {
        matches!(e, SessionEvent::Connected { .. })
    });
    assert_eq!(next, SessionEvent::Connected { session_id: 0x52 });
    drop(c);
    // First a new session, then a resume of 0x51, then a new session again.
    assert_eq!(server.join().unwrap(), vec![0, 0x51, 0]);
}

#[test]
fn a_busy_client_survives_a_one_second_blip_with_the_same_session() {
    let (_cluster, proxy) = partition(1);
    let c = connect(&proxy.connect_string(), Duration::from_secs(4));
    let p = unique("blip");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    let session = c.session_id();
    let events = c.events();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let c = c.with_timeout(Duration::from_millis(500));
        let p = p.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (0u32, 0u32);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match c.exists(&p) {
                    Ok(Some(_)) => ok += 1,
                    Ok(None) => panic!("ephemeral node vanished"),
                    Err(e) if e.is_connection_error() => failed += 1,
                    Err(e) => panic!("unexpected error during a blip: {e}"),
                }
            }
            (ok, failed)
        })
    };
    retry(Duration::from_secs(5), || c.exists(&p));
    proxy.blackhole();
    std::thread::sleep(Duration::from_secs(1)); // the length of the fault itself
    proxy.heal();
    // Working again on the same session.
    retry(Duration::from_secs(10), || c.set_data(&p, b"after", None));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, _failed) = busy.join().unwrap();
    assert!(ok > 0);
    assert_eq!(c.session_id(), session);
    while let Ok(ev) = events.try_recv() {
        assert!(
            !matches!(
                ev,
                SessionEvent::Lost { .. } | SessionEvent::Connected { .. }
            ),
            "{ev:?}"
        );
    }
    assert_eq!(c.stats().sessions, 1);
}

#[test]
fn a_client_that_only_receives_events_keeps_its_session() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let t = Duration::from_secs(2);
    let c = connect(&cluster.connect_string(), t);
    let writer = connect(&cluster.connect_string(), Duration::from_secs(10));
    let dir = unique("listener");
    writer.create(&dir, b"", CreateMode::Persistent).unwrap();
    let mine = c
        .create(&format!("{dir}/me"), b"", CreateMode::Ephemeral)
        .unwrap();
    let session = c.session_id();
    let n = 60;
    let mut watches = Vec::new();
    for i in 0..n {
        let p = format!("{dir}/n{i}");
        writer.create(&p, b"", CreateMode::Persistent).unwrap();
        watches.push(c.get_data_w(&p).unwrap().2);
    }
    let events = c.events();
    // 60 changes, 100 ms apart: 6 s = three session timeouts during which `c` sends nothing
    // of its own but pings (a client that let inbound events push its pings back would
    // lose its session here).
    for i in 0..n {
        writer.set_data(&format!("{dir}/n{i}"), b"x", None).unwrap();
        std::thread::sleep(Duration::from_millis(100)); // the pace of the other writer
    }
    for (i, w) in watches.iter().enumerate() {
        let ev = w
            .recv_timeout(WITHIN)
            .unwrap_or_else(|_| panic!("event {i} missing"));
        assert_eq!(ev.event_type, EventType::NodeDataChanged);
    }
    assert_eq!(c.session_id(), session);
    assert!(
        events.try_recv().is_err(),
        "session changed state while receiving events"
    );
    assert_eq!(
        writer.exists(&mine.path).unwrap().unwrap().ephemeral_owner,
        session
    );
}

#[test]
fn digest_auth_is_replayed_after_a_reconnect() {
    let (cluster, proxy) = partition(1);
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(8))
        .auth("digest", b"bob:pw")
        .build()
        .unwrap();
    let p = unique("secret");
    c.create_with_acl(&p, b"s3cret", CreateMode::Persistent, &Acl::creator_all())
        .unwrap();
    let session = c.session_id();
    let events = c.events();
    proxy.reset();
    expect_reconnected(&events, session, Duration::from_secs(10));
    assert_eq!(
        retry(Duration::from_secs(5), || c.get_data(&p)).0,
        b"s3cret"
    );
    let stranger = connect(&cluster.connect_string(), Duration::from_secs(8));
    assert_eq!(
        stranger.get_data(&p).unwrap_err(),
        Error::NoAuth {
            path: p.clone(),
            op: "get_data"
        }
    );
}

#[test]
fn a_request_on_a_partitioned_connection_times_out_naming_op_and_path() {
    let (_cluster, proxy) = partition(1);
    let c = connect(&proxy.connect_string(), Duration::from_secs(6));
    proxy.blackhole();
    let started = Instant::now();
    let err = c
        .with_timeout(Duration::from_millis(300))
        .get_data("/zookeeper")
        .unwrap_err();
    let took = started.elapsed();
    match &err {
        Error::Timeout { op, path, .. } => {
            assert_eq!((*op, path.as_str()), ("get_data", "/zookeeper"))
        }
        e => panic!("expected a timeout, got {e}"),
    }
    assert!(err.to_string().contains("/zookeeper"));
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    proxy.heal();
    retry(Duration::from_secs(10), || c.exists("/zookeeper"));
}

#[test]
fn a_handle_dropped_during_an_outage_leaves_no_zombie_session() {
    let (cluster, proxy) = partition(1);
    let t = Duration::from_secs(2);
    let c = connect(&proxy.connect_string(), t);
    let observer = connect(&cluster.connect_string(), Duration::from_secs(10));
    let p = unique("zombie");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    proxy.blackhole();
    let started = Instant::now();
    drop(c);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "drop blocked for {:?}",
        started.elapsed()
    );
    proxy.heal();
    // Had the dropped handle reconnected, its session would keep the node forever.
    let (_, w) = observer.exists_w(&p).unwrap();
    if observer.exists(&p).unwrap().is_some() {
        assert_eq!(
            w.recv_timeout(t * 8).unwrap().event_type,
            EventType::NodeDeleted
        );
    }
    assert_eq!(observer.exists(&p).unwrap(), None);
    assert_eq!(proxy.connections(), 0, "the dropped client connected again");
}

/// A fake server: answers the handshake properly, then sends `reply` to the first request.
fn fake_server(reply: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf); // ConnectRequest
        send_frame(&mut s, &connect_response(4000, 0x77));
        let _ = s.read(&mut buf); // the first request
        let _ = s.write_all(&reply);
        // Refuse everything after that.
        drop(listener);
        let _ = s.read(&mut buf);
    });
    (addr, h)
}

#[test]
fn malformed_frames_give_errors_not_panics() {
    init_log();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "frame shorter than a reply header",
            vec![0, 0, 0, 3, 1, 2, 3],
        ),
        ("negative frame length", (-7i32).to_be_bytes().to_vec()),
        (
            "frame longer than any server sends",
            0x7fff_fff0i32.to_be_bytes().to_vec(),
        ),
        ("watch event with a truncated path", {
            let mut f = Vec::new();
            f.extend_from_slice(&(-1i32).to_be_bytes());
            f.extend_from_slice(&0i64.to_be_bytes());
            f.extend_from_slice(&0i32.to_be_bytes());
            f.extend_from_slice(&3i32.to_be_bytes());
            f.extend_from_slice(&3i32.to_be_bytes());
            f.extend_from_slice(&1000i32.to_be_bytes());
            f.extend_from_slice(b"/ab");
            let mut out = (f.len() as u32).to_be_bytes().to_vec();
            out.extend(f);
            out
        }),
    ];
    for (what, reply) in cases {
        let (addr, server) = fake_server(reply);
        let c = Client::builder(&addr)
            .session_timeout(Duration::from_secs(4))
            .connect_timeout(Duration::from_secs(5))
            .request_timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let events = c.events();
        let err = c.exists("/x").unwrap_err();
        assert!(err.is_connection_error(), "{what}: {err}");
        wait_event(&events, Duration::from_secs(5), "suspended", |e| {
            matches!(e, SessionEvent::Suspended { .. })
        });
        // The connection thread is alive and the client can still be closed cleanly.
        assert_eq!(c.state(), SessionState::Suspended, "{what}");
        drop(c);
        server.join().unwrap();
    }
}

#[test]
fn a_truncated_reply_body_is_an_error_for_that_request_only() {
    init_log();
    // Reply header for xid 1 with OK, but a Stat cut short.
    let mut f = Vec::new();
    f.extend_from_slice(&1i32.to_be_bytes());
    f.extend_from_slice(&5i64.to_be_bytes());
    f.extend_from_slice(&0i32.to_be_bytes());
    f.extend_from_slice(&[0u8; 10]);
    let mut reply = (f.len() as u32).to_be_bytes().to_vec();
    reply.extend(f);
    let (addr, server) = fake_server(reply);
    let c = Client::builder(&addr)
        .request_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = c.exists("/x").unwrap_err();
    // Its own variant, naming the request, the node and what was wrong with the reply.
    match &err {
        Error::Malformed { op, path, reason } => {
            assert_eq!((*op, path.as_str()), ("exists", "/x"), "{err}");
            assert!(!reason.is_empty(), "{err}");
        }
        e => panic!("expected a malformed-reply error, got {e:?}"),
    }
    assert!(err.to_string().contains("/x"));
    assert!(err.to_string().contains("malformed exists reply"), "{err}");
    drop(c);
    server.join().unwrap();
}

/// A 64 MiB request, written through `c`'s pipeline on a thread of its own; the thread
/// ends when the write does (the request's answer is not waited for).
fn big_write(c: &Client, path: &str) -> std::thread::JoinHandle<()> {
    let (c, path) = (c.with_timeout(Duration::from_secs(60)), path.to_string());
    std::thread::spawn(move || {
        let big = vec![0u8; 64 * 1024 * 1024];
        let _pending = c.pipeline(|p| p.set_data(&path, &big, None));
    })
}

/// A caller's write that blocks on a full socket (the server froze) while the connection
/// goes silent must not hold back `Suspended` or `Lost`: before, the connection thread
/// waited for that writer's `io` lock before telling anyone, and `Lost` came seconds past
/// the session timeout, when the ensemble may have given the session's locks away
/// (measured by a reviewer: `Suspended` and `Lost` at 10.1 s with a 6 s session). Now the
/// socket is cut first, which ends the write at once.
///
/// Judged against a control: a second client of the same frozen server, without a blocked
/// write, whose events come when the machine lets its timers fire. Against fixed bounds
/// alone (`Suspended` before 6 s) the test failed once under a load spike (Suspended at
/// 6.7 s, stress with two runners and a release build on 2 cores), a delay the writer
/// did not cause; the control is late by the same spike, the old bug (4 to 6 s later
/// than the control) is not.
#[test]
fn a_write_blocked_on_a_frozen_server_does_not_delay_suspended_or_lost() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let build = || {
        Client::builder(&cluster.connect_string())
            .session_timeout(Duration::from_secs(6))
            .max_request_size(i32::MAX as usize)
            .build()
            .unwrap()
    };
    let (c, control) = (build(), build());
    let t = c.session_timeout();
    assert_eq!(control.session_timeout(), t);
    let (events, control_events) = (c.events(), control.events());
    c.exists("/").unwrap();
    control.exists("/").unwrap();
    cluster.pause(0).unwrap();
    let frozen = Instant::now();
    // Not a wait for an event: this places the write so that it is still blocked when the
    // connection's silence is noticed (at 2/3 of the timeout); a write started earlier
    // fails on its own socket timeout (1/3) and drops the connection itself.
    std::thread::sleep(t * 2 / 3 - Duration::from_millis(300));
    let writer = big_write(&c, "/anything");
    // The control's events are read on a thread of their own, so neither wait delays the
    // other's clock.
    let control_seen = std::thread::spawn(move || {
        let wait = |what: &str, f: fn(&SessionEvent) -> bool| {
            wait_event(&control_events, t * 3, what, f);
            frozen.elapsed()
        };
        let suspended = wait("the control suspended", |e| {
            matches!(e, SessionEvent::Suspended { .. })
        });
        let lost = wait("the control lost", |e| {
            matches!(e, SessionEvent::Lost { .. })
        });
        (suspended, lost)
    });
    wait_event(&events, t * 3, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    let suspended_at = frozen.elapsed();
    wait_event(&events, t * 3, "lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    let lost_at = frozen.elapsed();
    let (control_suspended, control_lost) = control_seen.join().unwrap();
    cluster.resume(0).unwrap();
    writer.join().unwrap();
    let slack = Duration::from_secs(1);
    assert!(
        suspended_at < control_suspended + slack,
        "Suspended {suspended_at:?} after the freeze, the control's {control_suspended:?} \
         (session timeout {t:?})"
    );
    assert!(
        lost_at < control_lost + slack,
        "Lost {lost_at:?} after the freeze, the control's {control_lost:?} \
         (session timeout {t:?})"
    );
}

/// `close()` is bounded (about a second) even while another caller's write is blocked on
/// a full socket: before, it waited for that writer's `io` lock, 8 s in a reviewer's run.
/// The blocked write fails, and so does a request made meanwhile, at its own deadline.
#[test]
fn close_is_bounded_while_another_callers_write_is_blocked() {
    let (_cluster, proxy) = partition(1);
    let c = Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(30))
        .max_request_size(i32::MAX as usize)
        .build()
        .unwrap();
    c.exists("/").unwrap();
    proxy.stall_client_to_server();
    let writer = big_write(&c, "/anything");
    // While the writer is blocked, a short request gives up at its deadline (it cannot
    // even be written).
    common::wait_until(
        Duration::from_secs(20),
        "a request timing out beside the blocked writer",
        || {
            matches!(
                c.with_timeout(Duration::from_millis(300)).exists("/"),
                Err(Error::Timeout { .. })
            ) && !writer.is_finished()
        },
    );
    let started = Instant::now();
    let outcome = c.close();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "close took {took:?} ({outcome:?})"
    );
    assert!(
        matches!(outcome, CloseOutcome::Unconfirmed { .. }),
        "{outcome:?}"
    );
    writer.join().unwrap();
    proxy.heal();
}
