//! The harness's `FaultProxy`, against echo servers and real ZooKeeper servers: forwarding,
//! blackhole, reset, delay, stall in one direction, flapping, and closing.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::raw::{
    assert_closed, assert_silent, connect, echo, echo_server, wait_until, zk_client, zk_handshake,
    zk_ping, zk_retry,
};
use common::unique;
use zkguard::testing::{FaultProxy, TestCluster};

// ------------------------------------------------------------------------------------
// FaultProxy
// ------------------------------------------------------------------------------------

#[test]
fn proxy_forwards_and_counts_connections() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    assert_eq!(
        proxy.connect_string(),
        format!("127.0.0.1:{}", proxy.local_addrs()[0].port())
    );
    let mut a = connect(&proxy);
    echo(&mut a, "hello");
    echo(&mut a, "again");
    wait_until("one connection", Duration::from_secs(5), || {
        proxy.connections() == 1
    });
    let mut b = connect(&proxy);
    echo(&mut b, "second");
    wait_until("two connections", Duration::from_secs(5), || {
        proxy.connections() == 2
    });
    drop(a);
    drop(b);
    wait_until("no connections", Duration::from_secs(5), || {
        proxy.connections() == 0
    });
}

#[test]
fn proxy_forwards_large_transfers_intact_also_when_delayed() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for delayed in [false, true] {
        if delayed {
            proxy.delay(Duration::from_millis(20));
        }
        let mut a = connect(&proxy);
        let mut writer = a.try_clone().expect("clone");
        let sent = data.clone();
        let w = thread::spawn(move || writer.write_all(&sent).expect("write"));
        let mut got = vec![0u8; data.len()];
        a.read_exact(&mut got).expect("read everything back");
        w.join().expect("writer");
        assert!(got == data, "bytes corrupted (delayed: {delayed})");
    }
}

#[test]
fn proxy_blackhole_swallows_traffic_and_heal_closes_corrupt_connections() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    echo(&mut a, "before");
    let mut quiet = connect(&proxy);
    echo(&mut quiet, "quiet");

    proxy.blackhole();
    a.write_all(b"lost").expect("write into the black hole");
    assert_silent(&mut a, Duration::from_millis(300));

    // A new connection is accepted but hangs.
    let mut hanging = connect(&proxy);
    hanging.write_all(b"early").expect("write");
    assert_silent(&mut hanging, Duration::from_millis(300));
    wait_until("three connections", Duration::from_secs(5), || {
        proxy.connections() == 3
    });

    proxy.heal();
    // `a` lost bytes: closed.
    assert_closed(&mut a, Duration::from_secs(2));
    // `quiet` sent nothing during the partition: it survives.
    echo(&mut quiet, "still here");
    // The hanging connection is connected now, and what it sent arrives.
    hanging
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut reply = [0u8; 5];
    hanging
        .read_exact(&mut reply)
        .expect("delivered after heal");
    assert_eq!(&reply, b"early");
    echo(&mut hanging, "works");
    // New connections work.
    let mut fresh = connect(&proxy);
    echo(&mut fresh, "fresh");
}

#[test]
fn proxy_reset_closes_live_and_hanging_connections() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    let mut b = connect(&proxy);
    echo(&mut a, "a");
    echo(&mut b, "b");
    proxy.reset();
    assert_closed(&mut a, Duration::from_secs(2));
    assert_closed(&mut b, Duration::from_secs(2));
    wait_until("no connections", Duration::from_secs(5), || {
        proxy.connections() == 0
    });
    let mut c = connect(&proxy);
    echo(&mut c, "after reset");

    // Reset inside a black hole: the mode stays, hanging connections are closed.
    proxy.blackhole();
    let mut hanging = connect(&proxy);
    wait_until("the hanging connection", Duration::from_secs(5), || {
        proxy.connections() == 2
    });
    proxy.reset();
    assert_closed(&mut hanging, Duration::from_secs(2));
    assert_closed(&mut c, Duration::from_secs(2));
    let mut still_hanging = connect(&proxy);
    assert_silent(&mut still_hanging, Duration::from_millis(200));
    proxy.heal();
    echo(&mut still_hanging, "healed");
}

#[test]
fn proxy_delay_delays_each_direction_and_keeps_order() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    echo(&mut a, "warm up");

    proxy.delay(Duration::from_millis(200));
    let t = Instant::now();
    echo(&mut a, "slow");
    let rtt = t.elapsed();
    assert!(
        rtt >= Duration::from_millis(400),
        "round trip took {rtt:?}, expected >= 400 ms"
    );

    // Chunks sent in quick succession are each delayed, not queued behind each other.
    let t = Instant::now();
    let mut expected = String::new();
    let mut last_write = t;
    for i in 0..10 {
        let chunk = format!("<{i}>");
        if i > 0 {
            thread::sleep(Duration::from_millis(10)); // pacing, so each write is its own chunk
        }
        last_write = Instant::now();
        a.write_all(chunk.as_bytes()).expect("write");
        expected.push_str(&chunk);
    }
    let mut reply = vec![0u8; expected.len()];
    a.read_exact(&mut reply).expect("read");
    assert_eq!(String::from_utf8_lossy(&reply), expected, "order kept");
    let total = t.elapsed();
    // Counted from the last write, so that the pacing sleeps (which a loaded machine may
    // stretch) are not in the bound: about 400 ms if each chunk is delayed on its own,
    // about 2 s or more if each waited for the one before it.
    let after_last = last_write.elapsed();
    assert!(
        total >= Duration::from_millis(400) && after_last < Duration::from_millis(1500),
        "ten paced chunks took {total:?}, {after_last:?} after the last write; expected \
         about 400 ms after it"
    );

    proxy.heal();
    echo(&mut a, "fast again");
}

/// `delay(d)` holds each chunk `d` in each direction, counted from its arrival, for `d`
/// from 100 µs to 1 s, and keeps the order. An echo's round trip through the proxy is
/// never shorter than `2 d` (which a pump delaying one direction only, or delivering
/// early, breaks); how much longer it is, is printed, not asserted (a loaded machine may
/// stretch it): `cargo test --all-features --test harness_proxy proxy_delay_is_accurate
/// -- --nocapture`.
#[test]
fn proxy_delay_is_accurate_from_100_us_to_1_s() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    a.set_nodelay(true).expect("nodelay");
    let mut seq = 0u32;
    let mut round_trips = |a: &mut TcpStream, rounds: usize, at_least: Duration| {
        let mut rtts = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            seq += 1;
            let t = Instant::now();
            echo(a, &format!("<{seq}>"));
            let rtt = t.elapsed();
            assert!(
                rtt >= at_least,
                "a round trip took {rtt:?}, less than twice the delay ({at_least:?})"
            );
            rtts.push(rtt);
        }
        rtts.sort();
        rtts
    };
    let base = round_trips(&mut a, 50, Duration::ZERO);
    let base_median = base[base.len() / 2];
    eprintln!("no delay: median round trip {base_median:?}");
    for (d, rounds) in [
        (Duration::from_micros(100), 50),
        (Duration::from_millis(1), 50),
        (Duration::from_millis(5), 30),
        (Duration::from_millis(50), 10),
        (Duration::from_secs(1), 1),
    ] {
        proxy.delay(d);
        let rtts = round_trips(&mut a, rounds, 2 * d);
        let median = rtts[rtts.len() / 2];
        eprintln!(
            "delay {d:?}: round trips min {:?}, median {median:?}, max {:?}; median - 2 d = \
             {:?} ({:?} without the delay)",
            rtts[0],
            rtts[rtts.len() - 1],
            median - 2 * d,
            base_median,
        );
        // A burst of small writes, each its own chunk or not: the bytes come back in order.
        let burst: String = (0..20).map(|i| format!("[{i}]")).collect();
        for i in 0..20 {
            a.write_all(format!("[{i}]").as_bytes()).expect("write");
        }
        let mut reply = vec![0u8; burst.len()];
        a.read_exact(&mut reply).expect("the burst's echo");
        assert_eq!(
            String::from_utf8_lossy(&reply),
            burst,
            "order kept at {d:?}"
        );
    }
    proxy.heal();
    echo(&mut a, "fast again");
}

#[test]
fn proxy_closes_clients_when_upstream_is_down() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let proxy = FaultProxy::start(&[dead]).expect("proxy");
    let mut a = connect(&proxy);
    assert_closed(&mut a, Duration::from_secs(3));
    wait_until("no connections", Duration::from_secs(5), || {
        proxy.connections() == 0
    });
}

#[test]
fn proxy_drop_closes_everything_quickly() {
    let proxy = FaultProxy::start(&[echo_server(), echo_server()]).expect("proxy");
    assert_eq!(proxy.connect_string().split(',').count(), 2);
    let mut a = connect(&proxy);
    echo(&mut a, "a");
    let mut b = TcpStream::connect(proxy.local_addrs()[1]).expect("connect");
    echo(&mut b, "b");
    proxy.delay(Duration::from_millis(100));
    proxy.blackhole();
    let mut hanging = connect(&proxy);
    wait_until("three connections", Duration::from_secs(5), || {
        proxy.connections() == 3
    });
    let addr = proxy.local_addrs()[0];
    // Dropped on a thread of its own, so that a drop that hangs (on the hanging connection,
    // or on bytes still delayed) fails the test instead of hanging it. How long a drop takes
    // is not promised; a loaded machine may take a while to join the proxy's threads.
    let t = Instant::now();
    let (tx, dropped) = std::sync::mpsc::channel();
    thread::spawn(move || {
        drop(proxy);
        let _ = tx.send(());
    });
    dropped
        .recv_timeout(Duration::from_secs(20))
        .expect("the proxy's drop did not finish within 20 s");
    eprintln!("drop took {:?}", t.elapsed());
    assert_closed(&mut a, Duration::from_secs(2));
    assert_closed(&mut b, Duration::from_secs(2));
    assert_closed(&mut hanging, Duration::from_secs(2));
    assert!(TcpStream::connect(addr).is_err(), "listener still open");
}

// ------------------------------------------------------------------------------------
// FaultProxy: one-way stall, flapping
// ------------------------------------------------------------------------------------

#[test]
fn proxy_stall_holds_client_requests_while_watch_events_flow() {
    let cluster = TestCluster::start(1).expect("start");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    let c = zk_client(&proxy.connect_string(), Duration::from_secs(20));
    let other = zk_client(&cluster.connect_string(), Duration::from_secs(20));
    let p = unique("stall");
    c.create(&p, b"0", zkguard::CreateMode::Persistent)
        .expect("create");
    let (_, _, watch) = c.get_data_w(&p).expect("watch");

    proxy.stall_client_to_server();
    // The client's own request goes unanswered...
    let held = format!("{p}/held");
    let err = c
        .with_timeout(Duration::from_millis(500))
        .create(&held, b"", zkguard::CreateMode::Persistent)
        .expect_err("a request through a stalled proxy");
    assert!(matches!(err, zkguard::Error::Timeout { .. }), "{err}");
    // ...and has not reached the server (it is held, not delivered).
    assert!(other.exists(&held).expect("exists").is_none());
    // Server -> client still flows: the watch fires.
    other.set_data(&p, b"1", None).expect("set_data");
    let ev = watch
        .recv_timeout(Duration::from_secs(10))
        .expect("the watch event arrives through the stalled proxy");
    assert_eq!(ev.event_type, zkguard::EventType::NodeDataChanged);
    // Nothing was closed by the proxy.
    assert!(
        proxy.connections() >= 1,
        "the stalled connection was closed"
    );

    proxy.heal();
    // What was held back is delivered now: the create reaches the server.
    wait_until("the held create to arrive", Duration::from_secs(10), || {
        other.exists(&held).expect("exists").is_some()
    });
    assert!(zk_retry(Duration::from_secs(20), || c.exists(&p)).is_some());
}

#[test]
fn proxy_stall_holds_raw_bytes_until_heal() {
    let proxy = FaultProxy::start(&[echo_server()]).expect("proxy");
    let mut a = connect(&proxy);
    echo(&mut a, "before");
    proxy.stall_client_to_server();
    a.write_all(b"held").expect("write");
    assert_silent(&mut a, Duration::from_millis(300));
    // A new connection is accepted and connected, but its bytes are held as well.
    let mut b = connect(&proxy);
    b.write_all(b"new").expect("write");
    assert_silent(&mut b, Duration::from_millis(100));
    proxy.heal();
    let mut reply = [0u8; 4];
    a.read_exact(&mut reply)
        .expect("held bytes delivered after heal");
    assert_eq!(&reply, b"held");
    let mut reply = [0u8; 3];
    b.read_exact(&mut reply)
        .expect("held bytes delivered after heal");
    assert_eq!(&reply, b"new");
    echo(&mut a, "after");
    assert_eq!(proxy.accepted(), 2);
}

#[test]
fn proxy_flap_closes_each_new_connection_after_the_first_reply() {
    let cluster = TestCluster::start(1).expect("start");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    assert_eq!(proxy.accepted(), 0);
    let mut before = connect(&proxy);
    assert_ne!(zk_handshake(&mut before).expect("handshake"), 0);
    zk_ping(&mut before).expect("ping");
    assert_eq!(proxy.accepted(), 1);

    proxy.flap();
    // A connection that got its first reply before stays.
    zk_ping(&mut before).expect("ping on the older connection");
    for round in 2..=3u64 {
        let mut s = connect(&proxy);
        let session = zk_handshake(&mut s).expect("the handshake reply is delivered");
        assert_ne!(session, 0, "the server granted a session");
        assert_closed(&mut s, Duration::from_secs(5));
        assert_eq!(proxy.accepted(), round);
        wait_until("the flap to be counted", Duration::from_secs(5), || {
            proxy.flapped() == round - 1
        });
    }

    proxy.heal();
    let mut after = connect(&proxy);
    assert_ne!(zk_handshake(&mut after).expect("handshake"), 0);
    zk_ping(&mut after).expect("ping after heal");
    assert_eq!(proxy.accepted(), 4);
    assert_eq!(proxy.flapped(), 2);
}

#[test]
fn proxy_flap_makes_a_client_reconnect_again_and_again() {
    let cluster = TestCluster::start(1).expect("start");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    let c = zk_client(&proxy.connect_string(), Duration::from_secs(20));
    let session = c.session_id();
    let first = proxy.accepted();
    proxy.flap();
    proxy.reset();
    wait_until(
        "three more connection attempts",
        Duration::from_secs(30),
        || proxy.accepted() >= first + 3,
    );
    assert!(proxy.flapped() >= 2, "flapped {}", proxy.flapped());
    proxy.heal();
    assert!(zk_retry(Duration::from_secs(30), || c.exists("/zookeeper")).is_some());
    assert_eq!(
        c.session_id(),
        session,
        "every flap renewed the same session"
    );
}
