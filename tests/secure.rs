//! Secured ensembles against real servers: TLS, mutual TLS and SASL DIGEST-MD5, each
//! attacked as well as shown working (wrong CA, wrong name, missing client certificate,
//! plain client on the TLS port, wrong password, server kills, a silent network).

mod common;

use std::time::{Duration, Instant};

use common::{expect_reconnected, next_watch, unique, wait_event};
use zkguard::testing::{ClientAuth, FaultProxy, TestCluster, TestPki};
use zkguard::{
    Client, ClientBuilder, ConnectFailure, CreateMode, Error, EventType, LeaderElection, Mutex, Op,
    SessionEvent, SessionState, TlsConfig,
};

const T: Duration = Duration::from_secs(4);
const USER: (&str, &str) = ("alice", "alice-secret");

/// The CA of the cluster's throwaway PKI (no client certificate).
fn ca_only(c: &TestCluster) -> TlsConfig {
    let pki = c.pki().expect("a TLS cluster has a PKI");
    TlsConfig::ca_pem(pki.ca_cert_pem().as_bytes()).expect("the harness's CA parses")
}

/// The CA and the client certificate of the cluster's PKI (mutual TLS).
fn with_client_cert(c: &TestCluster) -> TlsConfig {
    let pki = c.pki().expect("a TLS cluster has a PKI");
    ca_only(c)
        .client_cert_pem(
            pki.client().cert_pem().as_bytes(),
            pki.client().key_pem().as_bytes(),
        )
        .expect("the harness's client certificate parses")
}

fn builder(cs: &str) -> ClientBuilder {
    Client::builder(cs)
        .session_timeout(T)
        .connect_timeout(Duration::from_secs(20))
}

/// A standalone server with a TLS port, clients authenticated as `auth` says.
fn tls_cluster(auth: ClientAuth) -> TestCluster {
    common::init_log();
    TestCluster::builder()
        .tls(auth)
        .start()
        .expect("start a TLS server")
}

/// A client over TLS (trusting the cluster's CA, no client certificate).
fn tls_client(c: &TestCluster) -> Client {
    builder(&secure(c))
        .tls(ca_only(c))
        .build()
        .expect("connect over TLS")
}

fn secure(c: &TestCluster) -> String {
    c.secure_connect_string()
        .expect("a TLS cluster has secure ports")
}

/// The TLS failure of every server a connect error names.
fn tls_reasons(e: &Error) -> Vec<String> {
    match e {
        Error::Connect { attempts, .. } => attempts
            .iter()
            .map(|a| match &a.reason {
                ConnectFailure::Tls { reason } => reason.clone(),
                other => panic!("{}: expected a TLS failure, got {other:?}", a.host),
            })
            .collect(),
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[test]
fn every_operation_works_over_tls() {
    let cluster = tls_cluster(ClientAuth::None);
    let c = tls_client(&cluster);
    assert_eq!(c.state(), SessionState::Connected);
    assert_eq!(c.connected_server(), cluster.secure_client_addr(0));
    let dir = unique("tls");
    c.create(&dir, b"d", CreateMode::Persistent).unwrap();
    let (data, stat) = c.get_data(&dir).unwrap();
    assert_eq!(data, b"d");
    // A frame near the server's limit, split over many TLS records both ways.
    let big = vec![0x5a; 1_000_000];
    c.set_data(&dir, &big, Some(stat.version)).unwrap();
    assert_eq!(c.get_data(&dir).unwrap().0, big);
    let seq = c
        .create(&format!("{dir}/e-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    assert_eq!(c.get_children(&dir).unwrap().0.len(), 1);
    assert!(c.exists(&seq.path).unwrap().is_some());
    // Pipelined requests, a multi and a watch.
    let (a, b) = c.pipeline(|p| (p.exists(&dir), p.get_children(&dir)));
    assert!(a.wait().unwrap().is_some());
    assert_eq!(b.wait().unwrap().0.len(), 1);
    c.multi(&[
        Op::Check {
            path: dir.clone(),
            version: None,
        },
        Op::Create {
            path: format!("{dir}/m"),
            data: Vec::new(),
            mode: CreateMode::Persistent,
        },
    ])
    .unwrap();
    let (_, _, w) = c.get_data_w(&format!("{dir}/m")).unwrap();
    let other = tls_client(&cluster);
    other.delete(&format!("{dir}/m"), None).unwrap();
    assert_eq!(next_watch(&w), EventType::NodeDeleted);
    // Pings over TLS keep an idle session (2 s timeout) through three timeouts: silence
    // detection would drop a connection whose pings went unanswered. (Not 1 s: a ping goes
    // out after a third of the timeout of silence and must be answered before two thirds,
    // and a loaded machine needs more than the 333 ms that would leave.)
    let t = Duration::from_secs(2);
    let idle = builder(&secure(&cluster))
        .session_timeout(t)
        .tls(ca_only(&cluster))
        .build()
        .unwrap();
    let (id, events) = (idle.session_id(), idle.events());
    // Counted from here: a loaded machine may need a second attempt for the build itself.
    let attempts = idle.stats().connect_attempts;
    let quiet = events.recv_timeout(t * 3);
    assert!(quiet.is_err(), "an idle TLS session saw {quiet:?}");
    assert_eq!(idle.state(), SessionState::Connected);
    assert!(idle.exists("/").unwrap().is_some());
    assert_eq!(idle.session_id(), id);
    assert_eq!(
        idle.stats().connect_attempts,
        attempts,
        "the idle connection was dropped"
    );
    idle.close();
    c.delete(&seq.path, None).unwrap();
    c.delete(&dir, None).unwrap();
    assert!(c.close().is_clean());
    assert!(other.close().is_clean());
}

#[test]
fn mutual_tls_required_by_the_server_refuses_a_client_without_a_certificate() {
    let cluster = tls_cluster(ClientAuth::Need);
    // Without a certificate: a TLS failure naming the server, well before the deadline.
    let started = Instant::now();
    let err = builder(&secure(&cluster))
        .tls(ca_only(&cluster))
        .build()
        .expect_err("no client certificate, yet connected");
    let reasons = tls_reasons(&err);
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].contains("refused") || reasons[0].contains("closed the connection"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited out the connect deadline ({:?}) for a refusal",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(
        text.contains(&secure(&cluster)),
        "the server is not named: {text}"
    );
    // With it: connected, and every request works.
    let c = builder(&secure(&cluster))
        .tls(with_client_cert(&cluster))
        .build()
        .expect("mutual TLS");
    let p = unique("mtls");
    c.create(&p, b"x", CreateMode::Ephemeral).unwrap();
    assert_eq!(c.get_data(&p).unwrap().0, b"x");
    assert!(c.close().is_clean());
}

#[test]
fn a_server_certificate_from_another_ca_or_for_another_name_is_rejected_clearly() {
    let cluster = tls_cluster(ClientAuth::None);
    let other_dir = cluster.dir().join("other-ca");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = TestPki::generate(&other_dir).unwrap();
    let wrong_ca = TlsConfig::ca_pem(other.ca_cert_pem().as_bytes()).unwrap();
    let err = builder(&secure(&cluster))
        .tls(wrong_ca)
        .build()
        .expect_err("trusted a certificate from an unknown CA");
    let reasons = tls_reasons(&err);
    assert!(
        reasons[0].contains("not signed by a trusted certificate authority"),
        "{err}"
    );
    // The right CA, but a name the certificate is not for.
    let err = builder(&secure(&cluster))
        .tls(ca_only(&cluster).server_name("zk.example.org").unwrap())
        .build()
        .expect_err("accepted a certificate for another name");
    let reasons = tls_reasons(&err);
    assert!(reasons[0].contains("not valid for the name"), "{err}");
    assert!(reasons[0].contains("zk.example.org"), "{err}");
    // The name the certificate is for, given explicitly, through an address that is not.
    let addr = cluster.secure_client_addr(0).unwrap();
    let c = builder(&format!("127.0.0.1:{}", addr.port()))
        .tls(ca_only(&cluster).server_name("localhost").unwrap())
        .build()
        .expect("verify 'localhost' while connecting to 127.0.0.1");
    c.close();
    // A TLS client on the plaintext port, and a plaintext client on the TLS port.
    // The plaintext server closes the connection: not a TLS verdict, so retried (it may be
    // a server restarting) until the deadline, and the reason says what to check.
    let err = builder(&cluster.connect_string())
        .connect_timeout(Duration::from_secs(2))
        .tls(ca_only(&cluster))
        .build()
        .expect_err("TLS to a plaintext port");
    match &err {
        Error::Connect { attempts, .. } => {
            assert!(
                matches!(
                    attempts[0].reason,
                    ConnectFailure::Io {
                        during: "TLS handshake",
                        ..
                    }
                ),
                "{err}"
            );
            assert!(!attempts[0].reason.is_permanent(), "{err}");
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
    assert!(err.to_string().contains("TLS port"), "{err}");
    let plain = Client::builder(&secure(&cluster))
        .connect_timeout(Duration::from_secs(2))
        .build();
    assert!(
        matches!(plain, Err(Error::Connect { .. })),
        "a plaintext client on the TLS port: {plain:?}"
    ); // A failed handshake is one server failing: with a plaintext port listed beside the
       // TLS port, the client ends up on the TLS port, whichever it tries first.
    for _ in 0..3 {
        let mixed = format!("{},{}", cluster.connect_string(), secure(&cluster));
        let c = builder(&mixed)
            .tls(ca_only(&cluster))
            .build()
            .expect("the TLS port of the list");
        assert_eq!(c.connected_server(), cluster.secure_client_addr(0));
        c.close();
    }
}

#[test]
fn an_expired_server_certificate_is_rejected() {
    common::init_log();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .tls_expired_server_cert(true)
        .start()
        .expect("start a TLS server with an expired certificate");
    let err = builder(&secure(&cluster))
        .tls(ca_only(&cluster))
        .build()
        .expect_err("accepted an expired certificate");
    assert!(tls_reasons(&err)[0].contains("expired"), "{err}");
}

#[test]
fn a_tls_session_survives_a_server_kill_in_an_ensemble_with_its_watches() {
    common::init_log();
    let cluster = TestCluster::builder()
        .servers(3)
        .tls(ClientAuth::Need)
        .start()
        .expect("start a TLS ensemble");
    let c = builder(&secure(&cluster))
        .tls(with_client_cert(&cluster))
        .build()
        .unwrap();
    let writer = builder(&secure(&cluster))
        .tls(with_client_cert(&cluster))
        .build()
        .unwrap();
    let p = unique("tls-kill");
    c.create(&p, b"0", CreateMode::Persistent).unwrap();
    let (_, _, data_watch) = c.get_data_w(&p).unwrap();
    let (_, _, child_watch) = c.get_children_w(&p).unwrap();
    let id = c.session_id();
    let events = c.events();
    let server = c.connected_server().expect("connected");
    let i = (0..cluster.len())
        .find(|&i| cluster.secure_client_addr(i) == Some(server))
        .expect("connected to one of the secure ports");
    cluster.kill(i).unwrap();
    wait_event(&events, T, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    expect_reconnected(&events, id, T * 3);
    assert_ne!(c.connected_server(), Some(server));
    // Changes made by another session after the kill reach the re-armed watches.
    common::retry(T * 3, || writer.set_data(&p, b"1", None));
    assert_eq!(next_watch(&data_watch), EventType::NodeDataChanged);
    common::retry(T * 3, || {
        writer.create(&format!("{p}/c"), b"", CreateMode::Persistent)
    });
    assert_eq!(next_watch(&child_watch), EventType::NodeChildrenChanged);
    assert_eq!(c.get_data(&p).unwrap().0, b"1");
    cluster.start_server(i).unwrap();
    c.close();
    writer.close();
}

/// A TLS server behind a fault proxy, and a client (CA only) connected through it. The
/// certificate names 127.0.0.1, the proxy's address: it verifies as is.
fn tls_through_proxy() -> (TestCluster, FaultProxy, Client) {
    let cluster = tls_cluster(ClientAuth::None);
    let proxy = FaultProxy::for_cluster_secure(&cluster).unwrap();
    let c = builder(&proxy.connect_string())
        .tls(ca_only(&cluster))
        .build()
        .unwrap();
    (cluster, proxy, c)
}

/// `fault` on the proxy is noticed (`Suspended`) within the session timeout (two thirds of
/// it of silence, give or take a ping interval); after the proxy heals, the same session
/// comes back.
fn noticed_then_resumed(
    proxy: &FaultProxy,
    c: &Client,
    events: &crossbeam_channel::Receiver<SessionEvent>,
    what: &str,
    fault: impl FnOnce(&FaultProxy),
) {
    let id = c.session_id();
    fault(proxy);
    let cut = Instant::now();
    wait_event(events, T, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    assert!(
        cut.elapsed() < T,
        "{what}: noticed after {:?}",
        cut.elapsed()
    );
    proxy.heal();
    expect_reconnected(events, id, T);
}

#[test]
fn a_silent_tls_connection_is_detected_and_the_session_resumes() {
    let (_cluster, proxy, c) = tls_through_proxy();
    let events = c.events();
    let p = unique("tls-silent");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    noticed_then_resumed(&proxy, &c, &events, "silence", FaultProxy::blackhole);
    assert!(
        c.exists(&p).unwrap().is_some(),
        "the session's node survived"
    );
    c.close();
}

fn sasl_cluster(servers: usize, tls: Option<ClientAuth>) -> TestCluster {
    common::init_log();
    let b = TestCluster::builder()
        .servers(servers)
        .sasl_digest_users(&[USER, ("bob", "bob-secret")]);
    let b = match tls {
        Some(auth) => b.tls(auth),
        None => b,
    };
    b.start().expect("start a server requiring SASL")
}

#[test]
fn sasl_digest_login_works_and_is_redone_on_every_reconnect() {
    let cluster = sasl_cluster(1, None);
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let c = builder(&proxy.connect_string())
        .sasl_digest(USER.0, USER.1)
        .build()
        .expect("log in as alice");
    let p = unique("sasl");
    // The server refuses any request of a session that has not logged in.
    c.create(&p, b"", CreateMode::Persistent).unwrap();
    let (id, events) = (c.session_id(), c.events());
    for round in 0..3 {
        // Every connection is cut: the session resumes on a new one, which must log in
        // again before the server serves it.
        proxy.reset();
        wait_event(&events, T, "suspended", |e| {
            matches!(e, SessionEvent::Suspended { .. })
        });
        expect_reconnected(&events, id, T);
        common::retry(T, || c.set_data(&p, format!("{round}").as_bytes(), None));
        assert_eq!(c.get_data(&p).unwrap().0, format!("{round}").as_bytes());
    }
    assert_eq!(c.session_id(), id);
    c.delete(&p, None).unwrap();
    assert!(c.close().is_clean());
}

#[test]
fn a_wrong_sasl_password_is_auth_failed_at_build_without_a_reconnect_loop() {
    let cluster = sasl_cluster(1, None);
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let started = Instant::now();
    let err = builder(&proxy.connect_string())
        .sasl_digest(USER.0, "not-alices-password")
        .build()
        .expect_err("logged in with a wrong password");
    assert_eq!(err, Error::AuthFailed, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the refusal took {:?}",
        started.elapsed()
    );
    // An unknown user. (Not with alice's password: ZooKeeper 3.8.0's server keeps the name
    // of the last user it found, and checks an unknown user's password against that one's,
    // so `mallory` with alice's password logs in. A server bug, not ours.)
    let err = builder(&proxy.connect_string())
        .sasl_digest("mallory", "mallory-secret")
        .build()
        .expect_err("logged in as an unknown user");
    assert_eq!(err, Error::AuthFailed, "{err}");
    // Nothing tries again behind the caller's back: one connection per refused build.
    let accepted = proxy.accepted();
    assert_eq!(accepted, 2, "connections accepted for two refused logins");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        proxy.accepted(),
        accepted,
        "a closed client kept reconnecting"
    );
}

#[test]
fn without_a_login_a_server_requiring_sasl_refuses_requests_with_a_clear_error() {
    let cluster = sasl_cluster(1, None);
    let c = builder(&cluster.connect_string()).build().unwrap();
    match c.create(&unique("nosasl"), b"", CreateMode::Persistent) {
        Err(e) => assert_eq!(
            e.code(),
            Some(zkguard::ErrorCode::SessionClosedRequireSaslAuth),
            "{e}"
        ),
        Ok(_) => panic!("a server requiring SASL served a client that never logged in"),
    }
    c.close();
}

#[test]
fn a_lock_and_an_election_work_over_tls_and_sasl() {
    let cluster = sasl_cluster(1, Some(ClientAuth::Need));
    let connect = |user: (&str, &str)| {
        builder(&secure(&cluster))
            .tls(with_client_cert(&cluster))
            .sasl_digest(user.0, user.1)
            .build()
            .expect("TLS + SASL")
    };
    let (a, b) = (connect(USER), connect(("bob", "bob-secret")));
    let path = unique("secure-lock");
    let (la, lb) = (
        Mutex::new(&a, &path).unwrap(),
        Mutex::new(&b, &path).unwrap(),
    );
    let ga = la.acquire().unwrap();
    assert!(lb.try_acquire().unwrap().is_none(), "two holders");
    let token_a = ga.token();
    drop(ga);
    let gb = lb
        .acquire_timeout(T)
        .unwrap()
        .expect("the lock passes to the other session");
    assert!(gb.token() > token_a);
    drop(gb);

    let epath = unique("secure-election");
    let (ea, eb) = (
        LeaderElection::new(&a, &epath, "a").unwrap(),
        LeaderElection::new(&b, &epath, "b").unwrap(),
    );
    let lead_a = ea.lead().unwrap();
    assert_eq!(
        ea.leader().unwrap().map(|p| p.id().to_string()),
        Some("a".to_string())
    );
    let waiting = common::spawn(move || -> zkguard::Result<(bool, Option<String>)> {
        let lead_b = eb.lead()?;
        let leader = eb.leader()?.map(|p| p.id().to_string());
        Ok((lead_b.is_valid(), leader))
    });
    lead_a.resign().unwrap();
    let (valid, leader) = common::recv(&waiting, T, "b leads").unwrap();
    assert!(valid);
    assert_eq!(leader, Some("b".to_string()));
    a.close();
    b.close();
}

#[test]
fn many_threads_writing_and_reading_large_frames_share_one_tls_session() {
    let cluster = tls_cluster(ClientAuth::None);
    let c = tls_client(&cluster);
    // Counted from here: on a loaded machine the build itself may need a second attempt
    // (the server logged "Unsuccessful handshake" for the first), which is not what this
    // test is about.
    let attempts = c.stats().connect_attempts;
    let dir = unique("tls-threads");
    c.create(&dir, b"", CreateMode::Persistent).unwrap();
    // Callers encrypt and write their own frames while the connection thread decrypts
    // replies: 8 threads, each with large frames in both directions and pipelines, must
    // see exactly their own bytes back on one session.
    let workers: Vec<_> = (0..8u8)
        .map(|t| {
            let (c, dir) = (c.clone(), dir.clone());
            common::spawn(move || {
                let p = format!("{dir}/n{t}");
                c.create(&p, b"", CreateMode::Persistent).unwrap();
                for round in 0..40u32 {
                    let data: Vec<u8> = (0..100_000u32)
                        .map(|i| (i.wrapping_mul(31) ^ round ^ u32::from(t)) as u8)
                        .collect();
                    c.set_data(&p, &data, None).unwrap();
                    let (a, b) = c.pipeline(|pl| (pl.get_data(&p), pl.exists(&p)));
                    assert_eq!(a.wait().unwrap().0, data, "thread {t} round {round}");
                    assert!(b.wait().unwrap().is_some());
                }
                t
            })
        })
        .collect();
    for w in workers {
        common::recv(&w, Duration::from_secs(120), "a worker thread");
    }
    assert_eq!(c.get_children(&dir).unwrap().0.len(), 8);
    assert_eq!(c.stats().sessions, 1);
    assert_eq!(
        c.stats().connect_attempts,
        attempts,
        "the TLS connection broke"
    );
    c.close();
}

#[test]
fn a_close_to_a_frozen_tls_server_is_bounded_and_unconfirmed() {
    // The server is SIGSTOPped mid-session: the TLS connection stays open and nothing
    // answers, while a caller is blocked waiting on it. Close must not hang on the TLS
    // session (the reader or a writer holding it).
    let cluster = tls_cluster(ClientAuth::None);
    let c = tls_client(&cluster);
    let p = unique("tls-frozen");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    cluster.pause(0).unwrap();
    let blocked = {
        let c = c.with_timeout(Duration::from_secs(30));
        let p = p.clone();
        common::spawn(move || c.set_data(&p, &vec![1u8; 500_000], None))
    };
    let started = Instant::now();
    let outcome = c.close();
    let took = started.elapsed();
    cluster.resume(0).unwrap();
    assert!(
        matches!(
            &outcome,
            zkguard::CloseOutcome::Unconfirmed {
                reason: Error::Timeout { op: "close", .. }
            }
        ),
        "{outcome:?}"
    );
    assert!(took < Duration::from_secs(3), "close took {took:?}");
    assert_eq!(c.state(), SessionState::Closed);
    let r = common::recv(&blocked, Duration::from_secs(5), "the blocked request");
    assert!(r.is_err(), "a request to a frozen server succeeded: {r:?}");
}

#[test]
fn a_sasl_login_to_a_server_without_sasl_is_a_clear_error_not_a_hang() {
    common::init_log();
    let cluster = TestCluster::start(1).expect("start a plain server");
    let started = Instant::now();
    // The builder's 20 s connect deadline: the bound below (10 s) then tells "at once" from
    // "at the deadline" with room on both sides (with 5 s and 4 s, a loaded machine had 4 s).
    let r = builder(&cluster.connect_string())
        .sasl_digest(USER.0, USER.1)
        .build();
    let err = r.expect_err("logged in to a server that has no SASL users");
    match &err {
        Error::Connect { attempts, .. } => match &attempts[0].reason {
            ConnectFailure::Sasl { reason } => {
                assert!(reason.contains("SASL is not set up"), "{err}")
            }
            other => panic!("expected a SASL failure, got {other:?}"),
        },
        other => panic!("expected a connect error, got {other:?}"),
    }
    // Said as a refusal: not "no ZooKeeper session within 14.66ms" (a deadline it never
    // waited for).
    let said = err.to_string();
    assert!(said.starts_with("ZooKeeper refused the login;"), "{said}");
    assert!(!said.contains("within"), "{said}");
    // A failure retrying cannot cure: reported at once, not at the connect deadline.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn platform_roots_trust_what_the_system_bundle_trusts() {
    let cluster = tls_cluster(ClientAuth::None);
    let pki = cluster.pki().expect("a PKI");
    // The platform's bundle, as an operator points it elsewhere (rustls-native-certs reads
    // SSL_CERT_FILE first). No other test of this binary reads it.
    std::env::set_var("SSL_CERT_FILE", pki.ca_cert_path());
    let roots = TlsConfig::platform_roots();
    std::env::remove_var("SSL_CERT_FILE");
    let c = builder(&secure(&cluster))
        .tls(roots.expect("the bundle holds the harness's CA"))
        .build()
        .expect("trusted through the platform's roots");
    assert!(c.exists("/").unwrap().is_some());
    c.close();
    // The system's real bundle does not hold a throwaway CA.
    if let Ok(system) = TlsConfig::platform_roots() {
        let err = builder(&secure(&cluster))
            .tls(system)
            .build()
            .expect_err("a throwaway CA trusted by the system's roots");
        assert!(
            tls_reasons(&err)[0].contains("not signed by a trusted"),
            "{err}"
        );
    }
}

#[test]
fn a_tls_connection_stalled_in_either_direction_is_dropped_and_the_session_resumes() {
    let (_cluster, proxy, c) = tls_through_proxy();
    let events = c.events();
    // Client to server: our requests and pings are held back; whatever the server sends
    // still comes. Then the other way round.
    for (direction, stall) in [
        (
            "client to server",
            FaultProxy::stall_client_to_server as fn(&FaultProxy),
        ),
        ("server to client", FaultProxy::stall_server_to_client),
    ] {
        noticed_then_resumed(&proxy, &c, &events, direction, stall);
        assert!(c.exists("/").unwrap().is_some(), "{direction}");
    }
    c.close();
}

/// A handshake cut off by the network (a server restarting, a proxy dropping the
/// connection) is that one attempt failing, not a verdict on the server: `build()` tries
/// again and connects, where a certificate it refuses makes it give up at once. Without
/// the distinction, this build failed within milliseconds with a `Tls` reason.
#[test]
fn a_tls_handshake_cut_off_midway_is_retried_and_the_client_connects() {
    let cluster = tls_cluster(ClientAuth::None);
    let proxy = FaultProxy::for_cluster_secure(&cluster).unwrap();
    // The client's first bytes (its TLS hello) are held back: the handshake is under way.
    proxy.stall_client_to_server();
    let (cs, tls) = (proxy.connect_string(), ca_only(&cluster));
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(builder(&cs).tls(tls).build());
    });
    common::wait_until(common::WITHIN, "the client's first connection", || {
        proxy.accepted() >= 1
    });
    proxy.reset();
    proxy.heal();
    let c = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("build() returned")
        .expect("build() connects after one cut-off handshake");
    assert!(
        proxy.accepted() >= 2,
        "connected without a second attempt: {}",
        proxy.accepted()
    );
    assert!(c.exists("/").unwrap().is_some());
    c.close();
}
