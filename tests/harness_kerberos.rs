//! The Kerberos test harness: a throwaway MIT KDC ([`TestKdc`]) and ZooKeeper servers that
//! require Kerberos logins ([`TestClusterBuilder::kerberos`]), checked with a real Java
//! ZooKeeper client (`tests/kerberos/KrbPeer.java`, compiled once per run against the
//! ZooKeeper jars Curator's class path names) that logs in with a keytab or a credential
//! cache through JAAS.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use zkguard::testing::{ClientAuth, CuratorJava, TestCluster, TestKdc};

/// Generous bound for anything that should happen in seconds.
const WITHIN: Duration = Duration::from_secs(90);

fn kdc() -> Arc<TestKdc> {
    let _ = env_logger::builder().is_test(true).try_init();
    TestKdc::shared().expect("start the shared KDC")
}

/// One standalone server requiring Kerberos logins, shared by the tests.
fn cluster() -> &'static TestCluster {
    static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        TestCluster::builder()
            .kerberos(&kdc())
            .start()
            .expect("start a Kerberos ZooKeeper server")
    })
}

/// `KrbPeer` compiled once per test binary: `java` and the class path.
fn peer() -> &'static (PathBuf, String) {
    static PEER: OnceLock<(PathBuf, String)> = OnceLock::new();
    PEER.get_or_init(|| {
        let kit = CuratorJava::find().expect("a JDK and ZooKeeper's client jars");
        let cp = kit.classpath.to_string_lossy().into_owned();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kerberos/KrbPeer.java");
        let out =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("krb-peer-{}", std::process::id()));
        std::fs::create_dir_all(&out).expect("peer directory");
        let javac = Command::new(&kit.javac)
            .arg("-d")
            .arg(&out)
            .arg("-cp")
            .arg(&cp)
            .arg(&source)
            .output()
            .expect("run javac");
        assert!(
            javac.status.success(),
            "javac {}: {}",
            source.display(),
            String::from_utf8_lossy(&javac.stderr)
        );
        (kit.java, format!("{}:{cp}", out.display()))
    })
}

/// How the Java client logs in.
enum Login<'a> {
    /// JAAS `Client` section with this principal's keytab.
    Keytab(&'a str),
    /// JAAS `Client` section reading this credential cache, for this principal.
    Cache(&'a str, &'a Path),
    /// No SASL at all (`-Dzookeeper.sasl.client=false`).
    None,
}

/// The JVM options for `login` against `kdc`.
fn login_options(kdc: &TestKdc, login: Login) -> Vec<String> {
    let section = match login {
        Login::None => return vec!["-Dzookeeper.sasl.client=false".into()],
        Login::Keytab(name) => return kdc.java_client_options(name).expect("a Java login"),
        Login::Cache(name, ccache) => format!(
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=false \
             useTicketCache=true ticketCache=\"{}\" doNotPrompt=true principal=\"{}\";",
            ccache.display(),
            kdc.principal(name)
        ),
    };
    let jaas = kdc
        .dir()
        .join(format!("client-jaas-{}.conf", uuid::Uuid::new_v4()));
    std::fs::write(&jaas, format!("Client {{\n  {section}\n}};\n")).expect("write JAAS file");
    vec![
        "-Dzookeeper.sasl.client=true".into(),
        format!("-Djava.security.auth.login.config={}", jaas.display()),
        format!("-Djava.security.krb5.conf={}", kdc.krb5_conf().display()),
    ]
}

/// Runs `KrbPeer <connect> <args>` to its end (killed after [`WITHIN`]); its stdout lines.
fn java(connect: &str, jvm: &[String], extra_cp: &str, args: &[&str]) -> Vec<String> {
    let (java, cp) = peer();
    let mut child = Command::new(java)
        .args(["-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
        .args(jvm)
        .arg("-cp")
        .arg(format!("{cp}{extra_cp}"))
        .arg("KrbPeer")
        .arg(connect)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run java");
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for java") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    match status {
        Some(s) if s.success() => out.lines().map(str::to_string).collect(),
        _ => panic!("KrbPeer {args:?} ended with {status:?}; stdout:\n{out}\nstderr:\n{err}"),
    }
}

fn has(lines: &[String], line: &str) -> bool {
    lines.iter().any(|l| l == line)
}

#[test]
fn a_keytab_login_creates_a_node_that_only_its_identity_may_read() {
    let (kdc, cluster) = (kdc(), cluster());
    assert_eq!(
        cluster.kerberos_principal().as_deref(),
        Some("zookeeper/localhost@ZKGUARD.TEST")
    );
    let connect = cluster.connect_string();
    let alice = login_options(&kdc, Login::Keytab("alice"));
    let out = java(&connect, &alice, "", &["whoami"]);
    assert!(has(&out, "event SaslAuthenticated"), "{out:?}");
    // ZooKeeper's default: the whole principal, realm included.
    assert!(has(&out, "whoami sasl alice@ZKGUARD.TEST"), "{out:?}");
    // The Java client asked the KDC for the server's principal by canonical host name.
    let kdc_log = std::fs::read_to_string(kdc.dir().join("kdc.log")).expect("kdc.log");
    assert!(
        kdc_log.contains("alice@ZKGUARD.TEST for zookeeper/localhost@ZKGUARD.TEST"),
        "{kdc_log}"
    );

    let path = format!("/krb-{}", uuid::Uuid::new_v4());
    let out = java(&connect, &alice, "", &["create", &path]);
    assert!(
        has(&out, &format!("created {path} sasl:alice@ZKGUARD.TEST")),
        "{out:?}"
    );
    let out = java(&connect, &alice, "", &["read", &path]);
    assert!(has(&out, "read ok"), "{out:?}");
    let bob = login_options(&kdc, Login::Keytab("bob"));
    let out = java(&connect, &bob, "", &["read", &path]);
    assert!(has(&out, "event SaslAuthenticated"), "{out:?}");
    assert!(has(&out, "error NOAUTH"), "{out:?}");
}

#[test]
fn a_credential_cache_from_kinit_logs_in_too() {
    let kdc = kdc();
    let ccache = kdc.kinit("carol", None).expect("kinit");
    assert!(kdc.has_valid_ticket(&ccache).expect("klist"));
    let login = login_options(&kdc, Login::Cache("carol", &ccache));
    let out = java(&cluster().connect_string(), &login, "", &["whoami"]);
    assert!(has(&out, "whoami sasl carol@ZKGUARD.TEST"), "{out:?}");
}

/// What MIT's library (and so a GSSAPI client on it) makes of the host-based service name
/// `zookeeper@127.0.0.1` with the KDC's krb5.conf: `kvno -S zookeeper 127.0.0.1` asks the
/// KDC for a ticket to `zookeeper/localhost@ZKGUARD.TEST`.
#[test]
fn the_service_zookeeper_at_127_0_0_1_is_zookeeper_slash_localhost() {
    let (kdc, cluster) = (kdc(), cluster());
    let ccache = kdc.kinit("grace", None).expect("kinit");
    let kvno = ["/usr/bin/kvno", "/usr/local/bin/kvno"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .unwrap_or("kvno");
    let out = Command::new(kvno)
        .args(["-S", "zookeeper", "127.0.0.1"])
        .env("KRB5_CONFIG", kdc.krb5_conf())
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()))
        .output()
        .expect("run kvno (krb5-user)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let principal = cluster.kerberos_principal().expect("a principal");
    assert!(text.starts_with(&format!("{principal}: kvno = ")), "{text}");
}

#[test]
fn a_client_without_a_kerberos_login_is_refused() {
    let login = login_options(&kdc(), Login::None);
    let out = java(&cluster().connect_string(), &login, "", &["read", "/"]);
    assert!(!has(&out, "read ok"), "{out:?}");
    assert!(has(&out, "error SESSIONCLOSEDREQUIRESASLAUTH"), "{out:?}");
}

#[test]
fn without_sasl_required_a_client_without_a_login_is_served() {
    let kdc = kdc();
    let cluster = TestCluster::builder()
        .kerberos(&kdc)
        .sasl_required(false)
        .start()
        .expect("start a Kerberos server");
    let out = java(
        &cluster.connect_string(),
        &login_options(&kdc, Login::None),
        "",
        &["read", "/"],
    );
    assert!(has(&out, "read ok"), "{out:?}");
    let login = login_options(&kdc, Login::Keytab("alice"));
    let out = java(&cluster.connect_string(), &login, "", &["whoami"]);
    assert!(has(&out, "whoami sasl alice@ZKGUARD.TEST"), "{out:?}");
}

#[test]
fn kerberos_works_over_tls() {
    let kdc = kdc();
    let cluster = TestCluster::builder()
        .kerberos(&kdc)
        .tls(ClientAuth::None)
        .start()
        .expect("start a Kerberos + TLS server");
    let pki = cluster.pki().expect("a PKI");
    let mut jvm = login_options(&kdc, Login::Keytab("alice"));
    jvm.extend([
        "-Dzookeeper.client.secure=true".into(),
        "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty".into(),
        format!(
            "-Dzookeeper.ssl.trustStore.location={}",
            pki.ca_cert_path().display()
        ),
        "-Dzookeeper.ssl.trustStore.type=PEM".into(),
    ]);
    // The Java client's Netty socket needs these beside what zookeeper.jar's manifest names.
    let netty: String = [
        "netty-codec",
        "netty-resolver",
        "netty-transport-native-unix-common",
    ]
    .iter()
    .map(|j| format!("/usr/share/java/{j}.jar"))
    .filter(|p| Path::new(p).is_file())
    .map(|p| format!(":{p}"))
    .collect();
    let secure = cluster.secure_connect_string().expect("a TLS port");
    let out = java(&secure, &jvm, &netty, &["whoami"]);
    assert!(has(&out, "whoami sasl alice@ZKGUARD.TEST"), "{out:?}");
}

#[test]
fn kerberos_and_digest_users_cannot_be_combined() {
    let e = TestCluster::builder()
        .kerberos(&kdc())
        .sasl_digest_users(&[("alice", "alice-secret")])
        .start()
        .expect_err("GSSAPI and DIGEST-MD5 together");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("cannot be combined"), "{e}");
}

#[test]
fn a_short_ticket_expires() {
    let kdc = kdc();
    let lifetime = Duration::from_secs(4);
    let obtained = Instant::now();
    let ccache = kdc.kinit("dave", Some(lifetime)).expect("kinit -l 4s");
    let valid = kdc.has_valid_ticket(&ccache).expect("klist");
    if obtained.elapsed() < lifetime / 2 {
        assert!(valid, "a fresh ticket is valid");
    }
    let deadline = Instant::now() + WITHIN;
    while kdc.has_valid_ticket(&ccache).expect("klist") {
        assert!(Instant::now() < deadline, "the ticket never expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(obtained.elapsed() >= lifetime - Duration::from_secs(1));
    let e = kdc
        .kinit("dave", Some(Duration::from_millis(500)))
        .expect_err("a lifetime under a second");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
}

#[test]
fn a_stopped_kdc_refuses_kinit_and_serves_again_after_start_again() {
    // A KDC of its own: the shared one serves the other tests meanwhile.
    let kdc = TestKdc::start().expect("start a KDC");
    let addr = kdc.kdc_address();
    kdc.kinit("erin", None).expect("kinit while running");
    kdc.stop().expect("stop");
    assert!(!kdc.is_running());
    let e = kdc.kinit("erin", None).expect_err("no KDC");
    let msg = e.to_string();
    assert!(msg.contains("kinit"), "{msg}");
    assert!(msg.contains("Cannot contact any KDC"), "{msg}");
    kdc.start_again().expect("start again");
    assert!(kdc.is_running());
    assert_eq!(kdc.kdc_address(), addr);
    let ccache = kdc.kinit("erin", None).expect("kinit after the restart");
    assert!(kdc.has_valid_ticket(&ccache).expect("klist"));
    let dir = kdc.dir().to_path_buf();
    drop(kdc);
    assert!(!dir.exists(), "{} is left", dir.display());
}

#[test]
fn bad_principal_names_are_refused() {
    for bad in ["", "alice@ZKGUARD.TEST", "a b"] {
        let e = kdc().add_principal(bad).expect_err(bad);
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    }
    let kdc = kdc();
    assert_eq!(
        kdc.add_principal("frank").unwrap(),
        kdc.add_principal("frank").unwrap(),
        "one keytab per principal"
    );
}

/// Live (not zombie) `krb5kdc` processes whose command line names `dir`.
fn live_kdcs_in(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if cmdline.contains("krb5kdc") && cmdline.contains(&needle) && state != Some("Z") {
            pids.push(pid);
        }
    }
    pids
}

const CHILD: &str = "ZKGUARD_KDC_TEST_CHILD";

/// Runs itself as a child test binary that starts the shared KDC and exits without
/// dropping it (a `static`); then no `krb5kdc` of that KDC may be left, nor its directory.
#[test]
fn no_krb5kdc_outlives_the_test_binary() {
    if std::env::var_os(CHILD).is_some() {
        let kdc = kdc();
        assert!(kdc.is_running());
        println!("KDC-DIR {}", kdc.dir().display());
        return;
    }
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "no_krb5kdc_outlives_the_test_binary",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the child test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child: {stdout}");
    let dir = stdout
        .lines()
        .find_map(|l| l.strip_prefix("KDC-DIR "))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("the child printed no KDC-DIR line: {stdout}"));
    let deadline = Instant::now() + WITHIN;
    while dir.exists() || !live_kdcs_in(&dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "after the child exited: krb5kdc {:?} still runs, {} exists: {}",
            live_kdcs_in(&dir),
            dir.display(),
            dir.exists()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The servers accept logins with their keytab alone (`isInitiator=false`): one restarts
/// while the KDC is down, and takes a login once the KDC is back.
#[test]
fn a_kerberos_server_restarts_while_the_kdc_is_down() {
    let kdc = Arc::new(TestKdc::start().expect("start a KDC"));
    let cluster = TestCluster::builder()
        .kerberos(&kdc)
        .start()
        .expect("start a Kerberos server");
    kdc.stop().expect("stop the KDC");
    cluster.stop(0).expect("stop the server");
    cluster
        .start_server(0)
        .expect("a server restarts while the KDC is down");
    kdc.start_again().expect("start the KDC again");
    let login = login_options(&kdc, Login::Keytab("alice"));
    let out = java(&cluster.connect_string(), &login, "", &["whoami"]);
    assert!(has(&out, "whoami sasl alice@ZKGUARD.TEST"), "{out:?}");
}

#[test]
fn every_server_of_a_kerberos_ensemble_takes_logins() {
    let kdc = kdc();
    let cluster = TestCluster::builder()
        .servers(3)
        .kerberos(&kdc)
        .start()
        .expect("start a Kerberos ensemble");
    let login = login_options(&kdc, Login::Keytab("alice"));
    for i in 0..cluster.len() {
        let out = java(&cluster.server_connect_string(i), &login, "", &["whoami"]);
        assert!(
            has(&out, "whoami sasl alice@ZKGUARD.TEST"),
            "server {i}: {out:?}"
        );
    }
}
