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
    common::init_log();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .expect("start a TLS server");
    let c = builder(&secure(&cluster))
        .tls(ca_only(&cluster))
        .build()
        .expect("connect over TLS");
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
    let other = builder(&secure(&cluster))
        .tls(ca_only(&cluster))
        .build()
        .unwrap();
    other.delete(&format!("{dir}/m"), None).unwrap();
    assert_eq!(next_watch(&w), EventType::NodeDeleted);
    // Pings over TLS keep an idle session (1 s timeout) through three timeouts: silence
    // detection would drop a connection whose pings went unanswered.
    let idle = builder(&secure(&cluster))
        .session_timeout(Duration::from_secs(1))
        .tls(ca_only(&cluster))
        .build()
        .unwrap();
    let (id, events) = (idle.session_id(), idle.events());
    let quiet = events.recv_timeout(Duration::from_secs(3));
    assert!(quiet.is_err(), "an idle TLS session saw {quiet:?}");
    assert_eq!(idle.state(), SessionState::Connected);
    assert!(idle.exists("/").unwrap().is_some());
    assert_eq!(idle.session_id(), id);
    assert_eq!(
        idle.stats().connect_attempts,
        1,
        "the idle connection was never dropped"
    );
    idle.close();
    c.delete(&seq.path, None).unwrap();
    c.delete(&dir, None).unwrap();
    assert!(c.close().is_clean());
    assert!(other.close().is_clean());
}

#[test]
fn mutual_tls_required_by_the_server_refuses_a_client_without_a_certificate() {
    common::init_log();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::Need)
        .start()
        .expect("start a TLS server requiring client certificates");
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
    common::init_log();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .expect("start a TLS server");
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
    let err = builder(&cluster.connect_string())
        .tls(ca_only(&cluster))
        .build()
        .expect_err("TLS to a plaintext port");
    let reasons = tls_reasons(&err);
    assert!(reasons[0].contains("TLS port"), "{err}");
    let plain = Client::builder(&secure(&cluster))
        .connect_timeout(Duration::from_secs(2))
        .build();
    assert!(
        matches!(plain, Err(Error::Connect { .. })),
        "a plaintext client on the TLS port: {plain:?}"
    );
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

#[test]
fn a_silent_tls_connection_is_detected_and_the_session_resumes() {
    common::init_log();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .expect("start a TLS server");
    let proxy = FaultProxy::for_cluster_secure(&cluster).unwrap();
    // The certificate names 127.0.0.1, the proxy's address: it verifies as is.
    let c = builder(&proxy.connect_string())
        .tls(ca_only(&cluster))
        .build()
        .unwrap();
    let id = c.session_id();
    let events = c.events();
    let p = unique("tls-silent");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    proxy.blackhole();
    let cut = Instant::now();
    wait_event(&events, T, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    // Two thirds of the session timeout of silence, give or take a ping interval.
    assert!(
        cut.elapsed() < T,
        "silence noticed after {:?}",
        cut.elapsed()
    );
    proxy.heal();
    expect_reconnected(&events, id, T);
    assert!(
        c.exists(&p).unwrap().is_some(),
        "the session's node survived"
    );
    c.close();
}
