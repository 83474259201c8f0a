//! Kerberos logins while the KDC is down. A process of its own: the test stops the
//! process's one KDC (`TestKdc::shared`), which the tests of `kerberos.rs` must not see.

mod common;

use std::time::{Duration, Instant};

use common::partition::fail_over;
use common::{init_log, unique};
use zkguard::testing::{TestCluster, TestKdc};
use zkguard::{Client, ConnectFailure, CreateMode, Error, Kerberos, KerberosCause};

/// The whole sequence runs in one test: it stops and starts the KDC the process shares.
#[test]
fn a_kdc_that_is_down_is_named_and_cached_tickets_still_serve() {
    init_log();
    let kdc = TestKdc::shared().expect("a test KDC");
    let cluster = TestCluster::builder()
        .servers(3)
        .kerberos(&kdc)
        .start()
        .expect("a Kerberized ensemble");
    let alice_keytab = kdc.add_principal("alice").unwrap();
    let bob_keytab = kdc.add_principal("bob").unwrap();
    let builder = |keytab: &std::path::Path, timeout: Duration| {
        Client::builder(&cluster.connect_string())
            .session_timeout(Duration::from_secs(4))
            .connect_timeout(timeout)
            .sasl_kerberos(Kerberos::new().keytab(keytab))
    };
    // Alice logs in while the KDC is up: her client holds a ticket for the servers.
    let alice = builder(&alice_keytab, Duration::from_secs(30))
        .build()
        .expect("alice logs in");
    let events = alice.events();
    let path = unique("krb-kdc-down");
    alice.create(&path, b"x", CreateMode::Persistent).unwrap();

    kdc.stop().expect("the KDC stops");

    // A new login needs the KDC: it is named, by the connect deadline (the one cause that
    // is retried until then).
    let deadline = Duration::from_secs(3);
    let started = Instant::now();
    let err = builder(&bob_keytab, deadline)
        .build()
        .expect_err("no login without a KDC");
    let took = started.elapsed();
    match &err {
        Error::Connect { attempts, .. } => {
            assert!(!attempts.is_empty());
            for a in attempts {
                match &a.reason {
                    ConnectFailure::Kerberos { cause, reason } => {
                        assert_eq!(*cause, KerberosCause::KdcUnreachable, "{err}");
                        assert!(reason.contains(kdc.realm()), "{err}");
                    }
                    // A server not tried yet when the deadline passed.
                    ConnectFailure::NotReached => {}
                    other => panic!("not a Kerberos failure: {other} (in {err})"),
                }
            }
        }
        other => panic!("not a connect error: {other:?}"),
    }
    assert!(
        took < deadline + Duration::from_secs(20),
        "the error came long after the deadline: {took:?}"
    );

    // Alice's session goes on, and even a reconnect to the other server logs in with the
    // ticket her client already has (every server is zookeeper/localhost).
    fail_over(&cluster, &alice, &events);
    assert_eq!(
        alice.get_data(&path).expect("served after the reconnect").0,
        b"x"
    );

    // Once the KDC is back, a new login works again.
    kdc.start_again().expect("the KDC starts again");
    let bob = builder(&bob_keytab, Duration::from_secs(30))
        .build()
        .expect("bob logs in once the KDC is back");
    assert_eq!(bob.get_data(&path).unwrap().0, b"x");
}
