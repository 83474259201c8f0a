//! Kerberos (SASL GSSAPI) logins against a real MIT KDC and real Kerberized servers
//! (`TestKdc`, `TestClusterBuilder::kerberos`): keytab and credential-cache logins, locks and
//! elections over them, a reconnect that logs in again, each named failure, Kerberos over
//! TLS, and ACLs that tell principals apart. The KDC-down cases are in `kerberos_kdc.rs`
//! (a process of their own, since they stop the process's KDC).

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::partition::fail_over;
use common::{init_log, unique};
use zkguard::testing::{TestCluster, TestKdc};
use zkguard::{
    Acl, Client, ConnectFailure, CreateMode, Error, Kerberos, KerberosCause, LeaderElection, Mutex,
    NodeAcl, Perms,
};

/// Long enough never to be what ends a test: a named failure must come well before it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

fn kdc() -> Arc<TestKdc> {
    init_log();
    TestKdc::shared().expect("a test KDC")
}

/// One Kerberized server, shared by the tests of this file that need no faults.
fn shared_cluster() -> &'static TestCluster {
    static CLUSTER: std::sync::OnceLock<TestCluster> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| {
        TestCluster::builder()
            .kerberos(&kdc())
            .start()
            .expect("a Kerberized server")
    })
}

/// Three Kerberized servers of a test's own (for failovers).
fn ensemble(kdc: &Arc<TestKdc>) -> TestCluster {
    TestCluster::builder()
        .servers(3)
        .kerberos(kdc)
        .start()
        .expect("a Kerberized ensemble")
}

/// A keytab login as `name` (made in the KDC on first use).
fn keytab_login(kdc: &TestKdc, name: &str) -> Kerberos {
    Kerberos::new().keytab(kdc.add_principal(name).expect("a principal"))
}

/// A client logged in with `login`. Its session outlasts what a loaded machine does to an
/// ensemble (its JVMs stalled past `syncLimit`, elections one after the other, a Kerberos
/// login at each reconnect): the tests here keep their session through failovers and
/// never wait for one to expire (seen with 4 s: lost between two failovers).
fn client_as(cluster: &TestCluster, login: Kerberos) -> Client {
    Client::builder(&cluster.connect_string())
        .session_timeout(Duration::from_secs(20))
        .connect_timeout(CONNECT_TIMEOUT)
        .sasl_kerberos(login)
        .build()
        .expect("a Kerberos login")
}

/// The Kerberos cause of every server's failure in a connect error.
fn causes(err: &Error) -> Vec<KerberosCause> {
    common::attempts(err)
        .iter()
        .map(|a| match &a.reason {
            ConnectFailure::Kerberos { cause, .. } => *cause,
            other => panic!("not a Kerberos failure: {other} (in {err})"),
        })
        .collect()
}

/// Builds a client that must fail, and returns the error and how long it took.
fn failing(cluster: &TestCluster, login: Kerberos) -> (Error, Duration) {
    let started = Instant::now();
    let err = Client::builder(&cluster.connect_string())
        .connect_timeout(CONNECT_TIMEOUT)
        .sasl_kerberos(login)
        .build()
        .expect_err("the login must fail");
    (err, started.elapsed())
}

/// An ACL giving everything to one Kerberos principal only.
fn only(principal: &str) -> Vec<Acl> {
    vec![Acl::new(Perms::ALL, "sasl", principal)]
}

#[test]
fn a_keytab_login_is_the_principal_in_acls_and_others_are_refused() {
    let kdc = kdc();
    let cluster = shared_cluster();
    let alice = client_as(cluster, keytab_login(&kdc, "alice"));
    let bob = client_as(cluster, keytab_login(&kdc, "bob"));
    let path = unique("krb-only-alice");
    // The server knows the session as sasl:alice@ZKGUARD.TEST: a node only that id may use
    // is created, read and written by alice, and refused to bob.
    alice
        .create_with_acl(
            &path,
            b"a",
            CreateMode::Persistent,
            &only(&kdc.principal("alice")),
        )
        .expect("alice creates a node only she may use");
    assert_eq!(alice.get_data(&path).expect("alice reads").0, b"a");
    alice.set_data(&path, b"b", None).expect("alice writes");
    match bob.get_data(&path) {
        Err(Error::NoAuth { path: p, .. }) => assert_eq!(p, path),
        other => panic!("bob read alice's node: {other:?}"),
    }
    match bob.set_data(&path, b"bob", None) {
        Err(Error::NoAuth { .. }) => {}
        other => panic!("bob wrote alice's node: {other:?}"),
    }
    // A session without a login is refused by a server that requires one.
    let anonymous = Client::builder(&cluster.connect_string())
        .connect_timeout(CONNECT_TIMEOUT)
        .build();
    let refused = anonymous.and_then(|c| c.get_data(&path));
    assert!(
        refused.is_err(),
        "a session without a Kerberos login was served: {refused:?}"
    );
}

#[test]
fn a_lock_and_an_election_over_kerberos_logins_with_creator_acls() {
    let kdc = kdc();
    let cluster = shared_cluster();
    let alice = client_as(cluster, keytab_login(&kdc, "alice"));
    let alice2 = client_as(cluster, keytab_login(&kdc, "alice"));
    let bob = client_as(cluster, keytab_login(&kdc, "bob"));
    let path = unique("krb-lock");

    let lock = Mutex::new(&alice, &path)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    let guard = lock.acquire().expect("alice locks");
    // The same principal in another process (session) shares the lock: it waits.
    let lock2 = Mutex::new(&alice2, &path)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    assert!(
        lock2.try_acquire().unwrap().is_none(),
        "a second holder while alice holds"
    );
    // Another principal can neither queue nor remove the holder's node.
    match Mutex::new(&bob, &path).unwrap().try_acquire() {
        Err(Error::NoAuth { .. }) => {}
        other => panic!("bob queued in alice's creator-only lock: {other:?}"),
    }
    match bob.delete(guard.path(), None) {
        Err(Error::NoAuth { .. }) => {}
        other => panic!("bob deleted alice's lock node: {other:?}"),
    }
    assert!(guard.is_valid());
    guard.confirm().expect("alice still holds");
    drop(guard);
    let g2 = lock2
        .acquire_timeout(Duration::from_secs(20))
        .unwrap()
        .expect("alice's second session gets the lock after the first let go");
    drop(g2);

    let epath = unique("krb-election");
    let election = LeaderElection::new(&alice, &epath, "alice")
        .unwrap()
        .with_acl(NodeAcl::creator_read())
        .unwrap();
    let leadership = election.lead().expect("alice leads");
    let observer = LeaderElection::new(&bob, &epath, "bob").unwrap();
    let leader = observer.leader().unwrap().expect("a leader");
    assert_eq!(leader.data, b"alice", "bob reads who leads (creator-read)");
    match observer.try_lead() {
        Err(Error::NoAuth { .. }) => {}
        other => panic!("bob joined alice's creator-read election: {other:?}"),
    }
    assert!(leadership.is_valid());
}

#[test]
fn a_credential_cache_login_from_kinit() {
    let kdc = kdc();
    let cluster = shared_cluster();
    kdc.add_principal("carol").unwrap();
    let ccache = kdc.kinit("carol", None).expect("kinit carol");
    let carol = client_as(cluster, Kerberos::new().ccache(&ccache));
    let path = unique("krb-carol");
    carol
        .create_with_acl(
            &path,
            b"c",
            CreateMode::Persistent,
            &only(&kdc.principal("carol")),
        )
        .expect("carol creates a node only she may use");
    assert_eq!(carol.get_data(&path).unwrap().0, b"c");
    // The principal named explicitly is found in the cache too.
    let named = client_as(
        cluster,
        Kerberos::new()
            .ccache(&ccache)
            .principal(&kdc.principal("carol")),
    );
    assert_eq!(named.get_data(&path).unwrap().0, b"c");
}

#[test]
fn a_reconnect_to_another_server_logs_in_again() {
    let kdc = kdc();
    let cluster = ensemble(&kdc);
    let alice = client_as(&cluster, keytab_login(&kdc, "alice"));
    let events = alice.events();
    let path = unique("krb-reconnect");
    alice
        .create_with_acl(
            &path,
            b"1",
            CreateMode::Persistent,
            &only(&kdc.principal("alice")),
        )
        .unwrap();
    let session = alice.session_id();
    for _ in 0..2 {
        let i = fail_over(&cluster, &alice, &events);
        // The new server requires a login and serves alice's own node only to alice: the
        // login was made again there.
        assert_eq!(
            alice.get_data(&path).expect("served after the reconnect").0,
            b"1"
        );
        cluster.start_server(i).unwrap();
        cluster.wait_serving(i, Duration::from_secs(30)).unwrap();
    }
    assert_eq!(alice.session_id(), session, "the same session throughout");
}

#[test]
fn a_keytab_login_gets_new_tickets_when_its_own_have_expired() {
    let kdc = kdc();
    let cluster = ensemble(&kdc);
    // gina's tickets live 3 s (the KDC caps them), so they are long gone by the reconnect.
    let keytab = kdc.add_principal("gina").unwrap();
    kadmin(
        &kdc,
        &format!("modprinc -maxlife \"3 seconds\" {}", kdc.principal("gina")),
    );
    let gina = Client::builder(&cluster.connect_string())
        .session_timeout(Duration::from_secs(20))
        .connect_timeout(CONNECT_TIMEOUT)
        .sasl_kerberos(Kerberos::new().keytab(&keytab))
        .build()
        .expect("gina logs in");
    let logged_in = Instant::now();
    let events = gina.events();
    let path = unique("krb-renew");
    gina.create_with_acl(
        &path,
        b"g",
        CreateMode::Persistent,
        &only(&kdc.principal("gina")),
    )
    .unwrap();
    // The tickets' end (3 s) and the clock-skew tolerance (2 s) have passed: nothing to wait
    // for but the clock.
    std::thread::sleep(Duration::from_secs(6).saturating_sub(logged_in.elapsed()));
    fail_over(&cluster, &gina, &events);
    assert_eq!(
        gina.get_data(&path).expect("served after the reconnect").0,
        b"g"
    );
}

#[test]
fn a_missing_ticket_and_an_unknown_server_are_named_at_once() {
    let kdc = kdc();
    let cluster = shared_cluster();

    let (err, took) = failing(
        cluster,
        Kerberos::new().ccache("/nonexistent/zkguard-krb5cc"),
    );
    assert_eq!(causes(&err), [KerberosCause::NoCredentials], "{err}");
    assert!(
        err.to_string().contains("/nonexistent/zkguard-krb5cc"),
        "{err}"
    );
    assert!(took < CONNECT_TIMEOUT, "waited out the deadline: {took:?}");

    // A principal the keytab does not hold.
    let (err, _) = failing(
        cluster,
        keytab_login(&kdc, "alice").principal(&kdc.principal("mallory")),
    );
    assert_eq!(causes(&err), [KerberosCause::NoCredentials], "{err}");

    // A server principal the KDC does not know: a wrong service, or a wrong host.
    let (err, took) = failing(cluster, keytab_login(&kdc, "alice").service("zk-nosuch"));
    assert_eq!(causes(&err), [KerberosCause::UnknownServer], "{err}");
    assert!(err.to_string().contains("zk-nosuch"), "{err}");
    assert!(took < CONNECT_TIMEOUT, "waited out the deadline: {took:?}");
    let (err, _) = failing(
        cluster,
        keytab_login(&kdc, "alice")
            .host("nosuch.invalid")
            .realm(kdc.realm()),
    );
    assert_eq!(causes(&err), [KerberosCause::UnknownServer], "{err}");
}

#[test]
fn an_unknown_client_principal_is_named() {
    let kdc = kdc();
    let cluster = shared_cluster();
    // A keytab whose principal the KDC no longer has.
    let keytab = kdc.add_principal("dave").unwrap();
    delete_principal(&kdc, "dave");
    let (err, _) = failing(cluster, Kerberos::new().keytab(&keytab));
    assert_eq!(causes(&err), [KerberosCause::UnknownClient], "{err}");
}

#[test]
fn an_expired_ticket_is_named() {
    let kdc = kdc();
    let cluster = shared_cluster();
    kdc.add_principal("erin").unwrap();
    let ccache = kdc
        .kinit("erin", Some(Duration::from_secs(2)))
        .expect("a short ticket");
    wait_expired(&kdc, &ccache);
    // The KDC still takes an expired ticket for its clock-skew tolerance (2 s in the
    // harness's krb5.conf): log in until it is refused.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (err, took) = loop {
        let started = Instant::now();
        match Client::builder(&cluster.connect_string())
            .connect_timeout(CONNECT_TIMEOUT)
            .sasl_kerberos(Kerberos::new().ccache(&ccache))
            .build()
        {
            Err(err) => break (err, started.elapsed()),
            Ok(_) => {
                assert!(
                    Instant::now() < deadline,
                    "an expired ticket kept logging in"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    assert_eq!(causes(&err), [KerberosCause::TicketExpired], "{err}");
    assert!(took < CONNECT_TIMEOUT, "waited out the deadline: {took:?}");
}

#[test]
fn a_live_session_outlives_its_ticket() {
    let kdc = kdc();
    let cluster = shared_cluster();
    kdc.add_principal("frank").unwrap();
    let ccache = kdc
        .kinit("frank", Some(Duration::from_secs(3)))
        .expect("a short ticket");
    let frank = client_as(cluster, Kerberos::new().ccache(&ccache));
    let lock = Mutex::new(&frank, &unique("krb-outlive")).unwrap();
    let guard = lock.acquire().unwrap();
    wait_expired(&kdc, &ccache);
    // ZooKeeper authenticates a connection once: the session and the lock stay.
    guard
        .confirm()
        .expect("the lock is still held after the ticket expired");
    assert!(guard.is_valid());
}

#[cfg(feature = "tls")]
#[test]
fn kerberos_over_mutual_tls() {
    use zkguard::testing::ClientAuth;
    let kdc = kdc();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::Need)
        .kerberos(&kdc)
        .start()
        .expect("a TLS and Kerberos server");
    let pki = cluster.pki().expect("TLS");
    let tls = zkguard::TlsConfig::ca_pem(pki.ca_cert_pem().as_bytes())
        .unwrap()
        .client_cert_pem(
            pki.client().cert_pem().as_bytes(),
            pki.client().key_pem().as_bytes(),
        )
        .unwrap();
    let secure = cluster.secure_connect_string().expect("TLS ports");
    let alice = Client::builder(&secure)
        .connect_timeout(CONNECT_TIMEOUT)
        .tls(tls.clone())
        .sasl_kerberos(keytab_login(&kdc, "alice"))
        .build()
        .expect("TLS and a Kerberos login");
    let path = unique("krb-tls");
    alice
        .create_with_acl(
            &path,
            b"t",
            CreateMode::Persistent,
            &only(&kdc.principal("alice")),
        )
        .unwrap();
    let _g = Mutex::new(&alice, &unique("krb-tls-lock"))
        .unwrap()
        .acquire()
        .unwrap();
    // TLS alone (the client certificate) is not the Kerberos identity.
    let cert_only = Client::builder(&secure)
        .connect_timeout(CONNECT_TIMEOUT)
        .tls(tls)
        .build();
    assert!(
        cert_only.and_then(|c| c.get_data(&path)).is_err(),
        "a TLS session without a Kerberos login read alice's node"
    );
}

/// Waits (polling `klist -s`) until the cache's ticket has expired.
fn wait_expired(kdc: &TestKdc, ccache: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while kdc.has_valid_ticket(ccache).unwrap() {
        assert!(Instant::now() < deadline, "the ticket never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes a principal from the KDC's database.
fn delete_principal(kdc: &TestKdc, name: &str) {
    kadmin(kdc, &format!("delprinc -force {}", kdc.principal(name)));
}

/// Runs one `kadmin.local` query on the KDC's database (it exits 0 even when the query
/// fails: success is its "Principal "…" modified/deleted." line).
fn kadmin(kdc: &TestKdc, query: &str) {
    let out = Command::new("kadmin.local")
        .env("KRB5_CONFIG", kdc.krb5_conf())
        .env("KRB5_KDC_PROFILE", kdc.kdc_conf())
        .args(["-q", query])
        .output()
        .expect("kadmin.local");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("Principal \""),
        "kadmin.local -q {query:?}: {text}"
    );
}
