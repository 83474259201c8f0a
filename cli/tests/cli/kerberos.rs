//! `--sasl-mechanism gssapi`: Kerberos logins of the command line against a real KDC and a
//! Kerberized server (the cli's `kerberos` feature). The KDC is the test process's
//! (`TestKdc::shared`, which sets `KRB5_CONFIG` for this process and so for the `zkguard`
//! processes it starts).

use std::sync::OnceLock;

use crate::common::*;
use zkguard::testing::{TestCluster, TestKdc};
use zkguard::{Client, Error, Kerberos};

fn kerberized() -> (&'static TestKdc, &'static TestCluster) {
    static BOTH: OnceLock<(std::sync::Arc<TestKdc>, TestCluster)> = OnceLock::new();
    let (kdc, cluster) = BOTH.get_or_init(|| {
        let kdc = TestKdc::shared().expect("a test KDC");
        let cluster = TestCluster::builder()
            .kerberos(&kdc)
            .start()
            .expect("a Kerberized server");
        (kdc, cluster)
    });
    (kdc, cluster)
}

#[test]
fn a_lock_under_a_keytab_login_refuses_other_principals() {
    let (kdc, cluster) = kerberized();
    let cs = cluster.connect_string();
    let s = Scratch::new();
    let path = unique("krb-cli");
    let alice = kdc.add_principal("alice").unwrap();
    let bob = kdc.add_principal("bob").unwrap();
    let keytab = |k: &std::path::Path| {
        [
            "--sasl-mechanism".to_string(),
            "gssapi".into(),
            "--sasl-keytab".into(),
            k.display().to_string(),
        ]
    };
    let mut holder = {
        let mut c = zkguard(&cs);
        c.args(keytab(&alice))
            .args(["lock", "--acl", "creator", &path]);
        Running::start(c, &s, "holder")
    };
    holder.wait_stderr("holding it until signalled");
    // The node is alice@ZKGUARD.TEST's: bob's client can neither list, delete nor join it.
    let as_principal = |keytab: &std::path::Path| {
        Client::builder(&cs)
            .sasl_kerberos(Kerberos::new().keytab(keytab))
            .build()
            .unwrap()
    };
    let held = as_principal(&alice).get_children(&path).unwrap().0;
    assert_eq!(held.len(), 1, "{held:?}");
    let bob_client = as_principal(&bob);
    assert!(matches!(
        bob_client.get_children(&path),
        Err(Error::NoAuth { .. })
    ));
    assert!(matches!(
        bob_client.delete(&format!("{path}/{}", held[0]), None),
        Err(Error::NoAuth { .. })
    ));
    let (code, _, err) = output(
        zkguard(&cs)
            .args(keytab(&bob))
            .args(["lock", &path, "--", "true"]),
    );
    assert_eq!(code, 77, "{err}");
    assert!(err.contains(&path), "{err}");
    // A credential cache from kinit, named by --sasl-ccache, with the principal named.
    let ccache = kdc.kinit("alice", None).unwrap();
    let (code, _, err) = output(zkguard(&cs).args([
        "--sasl-mechanism",
        "gssapi",
        "--sasl-ccache",
        &ccache.display().to_string(),
        "--sasl-user",
        &kdc.principal("alice"),
        "holders",
        &path,
    ]));
    assert_eq!(code, 0, "{err}");
    // With no Kerberos option at all, the environment decides, as for every Kerberos
    // program: KRB5CCNAME (a kinit cache) or KRB5_CLIENT_KTNAME (a client keytab).
    let (code, _, err) = output(
        zkguard(&cs)
            .env("KRB5CCNAME", format!("FILE:{}", ccache.display()))
            .args(["--sasl-mechanism", "gssapi", "holders", &path]),
    );
    assert_eq!(code, 0, "alice from KRB5CCNAME: {err}");
    let (code, _, err) = output(
        zkguard(&cs)
            .env("KRB5CCNAME", format!("MEMORY:cli-{}", std::process::id()))
            .env("KRB5_CLIENT_KTNAME", &alice)
            .args(["--sasl-mechanism", "gssapi", "holders", &path]),
    );
    assert_eq!(code, 0, "alice from KRB5_CLIENT_KTNAME: {err}");
    let (code, _, err) = output(
        zkguard(&cs)
            .env(
                "KRB5CCNAME",
                format!("FILE:{}", kdc.kinit("bob", None).unwrap().display()),
            )
            .args(["--sasl-mechanism", "gssapi", "holders", &path]),
    );
    assert_eq!(
        code, 77,
        "bob from KRB5CCNAME may not list alice's lock: {err}"
    );
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.wait(PATIENCE), 0, "{}", holder.stderr());
}

#[test]
fn a_login_that_cannot_be_made_is_named() {
    let (_, cluster) = kerberized();
    let cs = cluster.connect_string();
    let path = unique("krb-cli-fail");
    let (code, _, err) = output(zkguard(&cs).args([
        "--sasl-mechanism",
        "gssapi",
        "--sasl-ccache",
        "/nonexistent/zkguard-cc",
        "lock",
        &path,
        "--",
        "true",
    ]));
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("no Kerberos credentials"), "{err}");
    let (code, _, err) =
        output(zkguard(&cs).args(["--sasl-keytab", "/x.keytab", "lock", &path, "--", "true"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--sasl-mechanism gssapi"), "{err}");
}

#[test]
fn without_the_gssapi_library_the_login_names_the_package() {
    let (kdc, cluster) = kerberized();
    let cs = cluster.connect_string();
    let keytab = kdc.add_principal("alice").unwrap();
    let path = unique("krb-cli-nolib");
    // The library is loaded at the first login of each zkguard process.
    let (code, _, err) = output(
        zkguard(&cs)
            .env("ZKGUARD_GSSAPI_LIBRARY", "/nonexistent/libgssapi_krb5.so.2")
            .args(["--sasl-mechanism", "gssapi", "--sasl-keytab"])
            .arg(&keytab)
            .args(["lock", &path, "--", "true"]),
    );
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("no usable GSSAPI library"), "{err}");
    assert!(err.contains("libgssapi-krb5-2"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `doctor` with a keytab login: whoami shows the principal with its realm; bob's `break`
/// of alice's creator-only lock is refused (77), and the lock stays alice's.
#[test]
fn doctor_shows_the_kerberos_principal_and_break_respects_its_acl() {
    let (kdc, cluster) = kerberized();
    let cs = cluster.connect_string();
    let (s, path) = (Scratch::new(), unique("krb-doctor"));
    let login = |name: &str| {
        let keytab = kdc.add_principal(name).unwrap();
        let mut c = zkguard(&cs);
        c.args(["--sasl-mechanism", "gssapi", "--sasl-keytab"])
            .arg(keytab);
        c
    };
    let (code, out, err) = output(login("alice").args(["doctor", "--json"]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        doctor_passed_but_for_load(code, doctor_not_passed(&v)),
        "exit {code}: {err}\n{out}"
    );
    let ids = v["session"]["identities"].as_array().unwrap();
    assert!(ids.contains(&"sasl:alice@ZKGUARD.TEST".into()), "{ids:?}");

    let mut holder = login("alice");
    holder.args(["lock", "--acl", "creator", &path]);
    let mut holder = Running::start(holder, &s, "holder");
    holder.wait_stderr("holding it until signalled");
    let (code, _, err) = output(login("bob").args(["break", &path, "--holder", "--yes", "--now"]));
    assert_eq!(code, 77, "{err}");
    assert!(err.contains(&path), "{err}");
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.wait(PATIENCE), 0, "{}", holder.stderr());
}
