//! A process without a usable GSSAPI library: `ZKGUARD_GSSAPI_LIBRARY` names one that does
//! not exist (once loaded, the library serves the whole process, so this is a process of
//! its own). A Kerberos login fails at once with
//! `KerberosCause::LibraryUnavailable`, naming the library and the package to install; it
//! does not panic, and it leaves other logins (DIGEST-MD5) working; once the library can
//! be loaded, the next login in the same process succeeds.

mod common;

use std::time::{Duration, Instant};

use common::{init_log, unique};
use zkguard::testing::{TestCluster, TestKdc};
use zkguard::{Client, ConnectFailure, Error, Kerberos, KerberosCause, Mutex};

const MISSING: &str = "/nonexistent/zkguard/libgssapi_krb5.so.2";

/// One test: the variable must be set before anything in the process loads the library.
#[test]
fn without_the_gssapi_library_a_kerberos_login_is_named_and_digest_still_works() {
    init_log();
    // Set before any thread of this process reads the environment for GSSAPI.
    std::env::set_var("ZKGUARD_GSSAPI_LIBRARY", MISSING);
    // Everything else a login needs is there: a KDC, a Kerberized server, a keytab.
    let kdc = TestKdc::shared().expect("a test KDC");
    let kerberized = TestCluster::builder()
        .kerberos(&kdc)
        .start()
        .expect("a Kerberized server");
    let keytab = kdc.add_principal("alice").unwrap();
    // Twice: the second login tries to load it again, and fails the same way.
    for round in 0..2 {
        let started = Instant::now();
        let err = Client::builder(&kerberized.connect_string())
            .connect_timeout(Duration::from_secs(30))
            .sasl_kerberos(Kerberos::new().keytab(&keytab))
            .build()
            .expect_err("no Kerberos login without the library");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "named at once, not at the connect deadline (round {round}): {err}"
        );
        let Error::Connect { attempts, .. } = &err else {
            panic!("not a connect failure: {err}");
        };
        assert!(!attempts.is_empty(), "{err}");
        for a in attempts {
            match &a.reason {
                ConnectFailure::Kerberos { cause, reason } => {
                    assert_eq!(*cause, KerberosCause::LibraryUnavailable, "{err}");
                    assert!(reason.contains(MISSING), "names the library: {err}");
                    assert!(
                        reason.contains("libgssapi-krb5-2"),
                        "names the package: {err}"
                    );
                }
                other => panic!("not a Kerberos failure: {other} (in {err})"),
            }
        }
        let text = err.to_string();
        assert!(text.contains("GSSAPI library"), "{text}");
    }
    // Also with the credentials left to the environment (no credential store).
    let err = Client::builder(&kerberized.connect_string())
        .sasl_kerberos(Kerberos::new())
        .build()
        .expect_err("no Kerberos login without the library");
    assert!(err.to_string().contains("libgssapi-krb5-2"), "{err}");

    // DIGEST-MD5 logins do not need the library: a lock over one works as ever.
    let digest = TestCluster::builder()
        .sasl_digest_users(&[("bob", "bob-secret")])
        .start()
        .expect("a server requiring SASL");
    let client = Client::builder(&digest.connect_string())
        .sasl_digest("bob", "bob-secret")
        .build()
        .expect("a DIGEST-MD5 login needs no GSSAPI");
    let path = unique("nolib");
    let guard = Mutex::new(&client, &path).unwrap().acquire().unwrap();
    assert!(guard.is_valid());
    guard.release().unwrap();

    // A failed load is not kept: once the library is there (here: named), the next login
    // loads it and succeeds, in the same process.
    std::env::set_var("ZKGUARD_GSSAPI_LIBRARY", "libgssapi_krb5.so.2");
    let client = Client::builder(&kerberized.connect_string())
        .sasl_kerberos(Kerberos::new().keytab(&keytab))
        .build()
        .expect("a Kerberos login once the library can be loaded");
    let guard = Mutex::new(&client, &unique("nolib-then-lib"))
        .unwrap()
        .acquire()
        .unwrap();
    guard.release().unwrap();
}
