//! The harness's secured servers: TLS on the `secureClientPort` (standalone and ensembles,
//! through restarts and wipes, expired certificates) and SASL DIGEST-MD5 users.

mod common;

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;

use common::raw::{read_frame, write_frame, zk_handshake};
use zkguard::testing::{ClientAuth, FaultProxy, TestCluster};

/// How long a test's raw socket waits for a server's answer. Generous: these tests check
/// that a server answers, not how fast. A freshly (re)started JVM's first TLS handshake
/// loads and compiles the whole TLS stack; under a load spike of the 2-core machine (two
/// stress runners, release builds) one took over 5 s, the old limit, and the test failed
/// with "TLS handshake ...: Resource temporarily unavailable" while the server's log shows
/// it bound the port and was waiting for nothing else.
const PATIENCE: Duration = Duration::from_secs(60);

// ------------------------------------------------------------------------------------
// Secured servers: TLS (secureClientPort) and SASL DIGEST-MD5
// ------------------------------------------------------------------------------------

/// A TLS client for the tests, with rustls: handshakes with `addr` trusting `ca_pem`,
/// presenting `client` (certificate, key) if given, then opens a ZooKeeper session over
/// the TLS stream. `Ok(session id)` or the first error as text.
#[cfg(feature = "tls")]
fn tls_session(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<(&str, &str)>,
) -> Result<i64, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA PEM")).expect("add CA");
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .expect("client cert PEM");
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("client key PEM");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client auth")
        }
    };
    let name = ServerName::try_from("localhost").expect("server name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("tls client");
    let tcp =
        TcpStream::connect_timeout(&addr, PATIENCE).map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    }
    zk_handshake(&mut tls).map_err(|e| format!("ZooKeeper session over TLS with {addr}: {e}"))
}

/// Whether `addr` completes a TLS handshake and serves a ZooKeeper session over it.
#[cfg(feature = "tls")]
fn assert_tls_serves(addr: SocketAddr, ca_pem: &str, client: Option<(&str, &str)>) {
    match tls_session(addr, ca_pem, client) {
        Ok(session) => assert_ne!(session, 0, "{addr} refused the session"),
        Err(e) => panic!("TLS to {addr} failed: {e}"),
    }
}

/// How often ensemble member `i` has left the quorum (its log's state changes to looking).
fn times_left_quorum(cluster: &TestCluster, i: usize) -> usize {
    std::fs::read_to_string(cluster.dir().join(format!("server-{i}.log")))
        .map(|log| log.matches("Peer state changed: looking").count())
        .unwrap_or(0)
}

/// Runs `attempt` against ensemble member `i` until it succeeds. A member closes every
/// client connection when it leaves the quorum (on a loaded machine a JVM stalled past
/// `syncLimit` ticks makes the ensemble elect again, however long it has served), and
/// refuses new ones until it has synced again ("server is not ready"). So a failed attempt
/// is made again, once the member serves again, only if the member's log says it left the
/// quorum since the attempt began; any other failure fails the test.
fn on_member<T>(
    cluster: &TestCluster,
    i: usize,
    what: &str,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> T {
    for _ in 0..5 {
        let before = times_left_quorum(cluster, i);
        let e = match attempt() {
            Ok(v) => return v,
            Err(e) => e,
        };
        cluster
            .wait_serving(i, Duration::from_secs(60))
            .expect("the member serves again");
        assert_ne!(
            times_left_quorum(cluster, i),
            before,
            "{what} (server {i}, which stayed in the quorum): {e}"
        );
        eprintln!("{what} (server {i}): {e}; it left the quorum meanwhile, trying again");
    }
    panic!("{what}: server {i} left the quorum during each of 5 attempts")
}

#[test]
fn tls_standalone_has_a_secure_port_and_a_pki() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .expect("start a TLS server");
    let pki = cluster.pki().expect("pki");
    assert!(pki.dir().starts_with(cluster.dir()));
    let secure = cluster.secure_client_addr(0).expect("secure port");
    assert_ne!(secure, cluster.client_addr(0));
    assert_eq!(
        cluster
            .secure_connect_string()
            .expect("secure connect string"),
        secure.to_string()
    );
    // The plaintext port keeps serving (four-letter words, existing clients).
    assert!(cluster
        .four_letter(0, "ruok")
        .expect("ruok")
        .contains("imok"));
    let cfg = std::fs::read_to_string(cluster.dir().join("zoo-0.cfg")).expect("zoo.cfg");
    assert!(cfg.contains("ssl.clientAuth=none"), "{cfg}");
    #[cfg(feature = "tls")]
    {
        assert_tls_serves(secure, pki.ca_cert_pem(), None);
        // Another CA's certificate does not verify the server.
        let stranger =
            zkguard::testing::TestPki::generate(&cluster.dir().join("stranger")).expect("pki");
        let err = tls_session(secure, stranger.ca_cert_pem(), None).expect_err("wrong CA");
        assert!(err.contains("handshake"), "{err}");
        // TLS passes through a proxy untouched.
        let proxy = FaultProxy::for_cluster_secure(&cluster).expect("proxy");
        assert_tls_serves(proxy.local_addrs()[0], pki.ca_cert_pem(), None);
    }
    // A plaintext cluster has none of it.
    assert!(
        FaultProxy::for_cluster_secure(&TestCluster::start(1).expect("plain"))
            .is_err_and(|e| e.kind() == ErrorKind::InvalidInput)
    );
}

#[test]
fn tls_need_refuses_clients_without_a_certificate() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::Need)
        .start()
        .expect("start a mutual-TLS server");
    let cfg = std::fs::read_to_string(cluster.dir().join("zoo-0.cfg")).expect("zoo.cfg");
    assert!(cfg.contains("ssl.clientAuth=need"), "{cfg}");
    #[cfg(feature = "tls")]
    {
        let pki = cluster.pki().expect("pki");
        let secure = cluster.secure_client_addr(0).expect("secure port");
        let err = tls_session(secure, pki.ca_cert_pem(), None).expect_err("no client cert");
        assert!(!err.is_empty());
        let client = pki.client();
        assert_tls_serves(
            secure,
            pki.ca_cert_pem(),
            Some((client.cert_pem(), client.key_pem())),
        );
        // A certificate from another CA is refused too.
        let stranger =
            zkguard::testing::TestPki::generate(&cluster.dir().join("stranger")).expect("pki");
        let c = stranger.client();
        tls_session(secure, pki.ca_cert_pem(), Some((c.cert_pem(), c.key_pem())))
            .expect_err("client cert of another CA");
    }
}

#[test]
fn tls_ensemble_serves_tls_on_every_server_and_after_a_restart() {
    let cluster = TestCluster::builder()
        .servers(3)
        .tls(ClientAuth::Want)
        .sasl_digest_users(&[("alice", "alice-secret")])
        .start()
        .expect("start a TLS ensemble that requires SASL");
    let secure: Vec<SocketAddr> = (0..3)
        .map(|i| cluster.secure_client_addr(i).expect("secure port"))
        .collect();
    assert_eq!(
        cluster.secure_connect_string().expect("secure"),
        secure
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    #[cfg(feature = "tls")]
    {
        let pki = cluster.pki().expect("pki");
        let client = pki.client();
        for (i, &addr) in secure.iter().enumerate() {
            for cert in [None, Some((client.cert_pem(), client.key_pem()))] {
                let session = on_member(&cluster, i, "a TLS session", || {
                    tls_session(addr, pki.ca_cert_pem(), cert)
                });
                assert_ne!(session, 0, "{addr} refused the session");
            }
        }
    }
    // SASL is required on every member (here on a plaintext port).
    let (session, err) = on_member(&cluster, 2, "a plaintext session", || {
        let mut s = TcpStream::connect(cluster.client_addr(2)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(PATIENCE)).expect("timeout");
        let session = zk_handshake(&mut s).map_err(|e| format!("session: {e}"))?;
        let err = zk_get_data_err(&mut s).map_err(|e| format!("a reply: {e}"))?;
        Ok((session, err))
    });
    assert_ne!(session, 0);
    assert_eq!(err, -124);

    cluster.kill(1).expect("kill");
    assert!(TcpStream::connect_timeout(&secure[1], Duration::from_secs(1)).is_err());
    cluster.start_server(1).expect("restart");
    // start_server returns once the server serves, its secure port included.
    TcpStream::connect_timeout(&secure[1], Duration::from_secs(1)).expect("secure port back");
    #[cfg(feature = "tls")]
    {
        let ca = cluster.pki().expect("pki").ca_cert_pem();
        let session = on_member(&cluster, 1, "a TLS session after the restart", || {
            tls_session(secure[1], ca, None)
        });
        assert_ne!(session, 0, "{} refused the session", secure[1]);
    }
}

#[test]
fn tls_standalone_survives_kill_restart_pause_and_wipe() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .expect("start");
    let secure = cluster.secure_client_addr(0).expect("secure port");
    cluster.kill(0).expect("kill");
    cluster.start_server(0).expect("restart");
    cluster.pause(0).expect("pause");
    cluster.resume(0).expect("resume");
    cluster.wipe(0).expect("wipe");
    cluster.start_server(0).expect("start the wiped server");
    TcpStream::connect_timeout(&secure, Duration::from_secs(1)).expect("secure port back");
    #[cfg(feature = "tls")]
    assert_tls_serves(secure, cluster.pki().expect("pki").ca_cert_pem(), None);
}

#[cfg(feature = "tls")]
#[test]
fn tls_with_an_expired_server_certificate_is_refused_by_the_client() {
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .tls_expired_server_cert(true)
        .start()
        .expect("start a server with an expired certificate");
    let pki = cluster.pki().expect("pki");
    let secure = cluster.secure_client_addr(0).expect("secure port");
    let err = tls_session(secure, pki.ca_cert_pem(), None).expect_err("expired");
    assert!(err.to_lowercase().contains("expired"), "{err}");
}

#[test]
fn bad_sasl_users_are_rejected_before_anything_starts() {
    for (users, needle) in [
        (vec![("", "pw")], "empty name"),
        (vec![("al\"ice", "pw")], "al\\\"ice"),
        (vec![("back\\slash", "pw")], "back"),
        (vec![("bob", "pass\"word")], "\"bob\""),
        (vec![("bob", "")], "\"bob\""),
        (vec![("bob", "1"), ("bob", "2")], "twice"),
        (vec![], "at least one"),
    ] {
        let err = TestCluster::builder()
            .sasl_digest_users(&users)
            .start()
            .expect_err("invalid SASL users");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(needle), "{err} lacks {needle}");
    }
    let err = TestCluster::builder()
        .tls_expired_server_cert(true)
        .start()
        .expect_err("expired cert without tls");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

/// Sends getData("/") on an open session; the reply header's error code, or the I/O error
/// when the server closed the connection instead.
fn zk_get_data_err(s: &mut TcpStream) -> std::io::Result<i32> {
    let mut req = Vec::new();
    req.extend_from_slice(&1i32.to_be_bytes()); // xid
    req.extend_from_slice(&4i32.to_be_bytes()); // getData
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(b"/");
    req.push(0); // no watch
    write_frame(s, &req)?;
    let reply = read_frame(s)?;
    Ok(i32::from_be_bytes(
        reply[12..16].try_into().expect("4 bytes"),
    ))
}

#[test]
fn sasl_required_refuses_unauthenticated_requests() {
    let cluster = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret"), ("bob", "bob-secret")])
        .start()
        .expect("start a SASL server");
    let jaas = std::fs::read_to_string(cluster.jaas_path().expect("jaas")).expect("read jaas");
    assert!(jaas.contains("user_alice=\"alice-secret\""), "{jaas}");
    let mut s = TcpStream::connect(cluster.client_addr(0)).expect("connect");
    s.set_read_timeout(Some(PATIENCE)).expect("timeout");
    assert_ne!(zk_handshake(&mut s).expect("session"), 0);
    // ZooKeeper 3.8 answers SessionClosedRequireSaslAuth (-124) and closes the connection.
    assert_eq!(zk_get_data_err(&mut s).expect("a reply"), -124);
    // Closed by the server: end of stream (or a reset), not our read timeout, which would
    // also be an error and so made this check unable to fail.
    match read_frame(&mut s) {
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
            ) => {}
        other => panic!("the connection should be closed by the server, got {other:?}"),
    }

    let open = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret")])
        .sasl_required(false)
        .start()
        .expect("start a SASL server that does not require it");
    let mut s = TcpStream::connect(open.client_addr(0)).expect("connect");
    s.set_read_timeout(Some(PATIENCE)).expect("timeout");
    assert_ne!(zk_handshake(&mut s).expect("session"), 0);
    assert_eq!(zk_get_data_err(&mut s).expect("a reply"), 0);
}
