//! `zkguard doctor` against real servers from the harness: a standalone server, a
//! three-server ensemble whose `syncLimit × tickTime` the session timeout passes, nears and
//! falls below (then one server killed), four-letter words refused (ZooKeeper's default
//! whitelist) with and without the admin server, an open and a closed lock directory, a
//! SASL login, mutual TLS, nothing listening. (A Kerberos login: `cli/kerberos.rs`.)
//! Assertions read `--json`'s fields, never timings.

mod common;

use common::*;
use serde_json::Value;
use zkguard::testing::TestCluster;
use zkguard::{Acl, CreateMode, Perms};

/// `zkguard doctor ARGS --json` against `cs`: its status and the parsed report.
fn doctor(cs: &str, args: &[&str]) -> (i32, Value, String) {
    let (code, out, err) = output(zkguard(cs).arg("doctor").arg("--json").args(args));
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("doctor --json: {e}; stdout {out:?}, stderr {err}"));
    said(args, code, &v);
    (code, v, err)
}

/// What a configuration reported, on stderr (`--nocapture` shows it).
fn said(args: &[&str], code: i32, v: &Value) {
    eprintln!("doctor {args:?}: exit {code}");
    for f in v["findings"].as_array().into_iter().flatten() {
        eprintln!("  {} {}: {}", f["status"], f["check"], f["message"]);
    }
}

/// The findings of one check.
fn findings<'a>(v: &'a Value, check: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .collect()
}

/// The one finding of `check`, which must have `status`.
fn finding<'a>(v: &'a Value, check: &str, status: &str) -> &'a Value {
    let fs = findings(v, check);
    assert_eq!(fs.len(), 1, "one {check} finding: {v:#}");
    assert_eq!(fs[0]["status"], status, "{check}: {:#}", fs[0]);
    fs[0]
}

/// A standalone server with the harness's defaults: every check passes, every figure is
/// read from the four-letter words, the session is granted what it asked, and the human
/// report says the same. Asking for more than maxSessionTimeout is a warning with the
/// numbers.
#[test]
fn a_standalone_server_passes_with_every_figure_read() {
    let cs = cluster().connect_string();
    let (code, v, err) = doctor(&cs, &["--session-timeout", "4s"]);
    assert!(
        doctor_passed_but_for_load(code, doctor_not_passed(&v)),
        "exit {code}: {err}\n{v:#}"
    );
    let status = if code == 0 { "pass" } else { "warn" };
    assert_eq!(v["status"], status, "{v:#}");
    let s = &v["servers"][0];
    assert_eq!(s["reachable"], true);
    assert_eq!(s["mode"], "standalone");
    assert!(s["version"].as_str().unwrap().starts_with("3."), "{s}");
    assert_eq!(s["rtt_ms"]["count"], 5, "{s}");
    for word in ["srvr", "conf", "mntr", "envi"] {
        assert_eq!(s["read_from"][word], "4lw", "{word}: {s}");
    }
    let sess = &v["session"];
    assert_eq!(sess["tick_time_ms"], 100);
    assert_eq!(sess["max_session_timeout_ms"], 60000);
    assert_eq!(
        (
            &sess["requested_timeout_ms"],
            &sess["negotiated_timeout_ms"]
        ),
        (&4000.into(), &4000.into())
    );
    assert_eq!(sess["identities"], serde_json::json!(["ip:127.0.0.1"]));
    let cond = finding(&v, "sync_window", "pass");
    assert_eq!(cond["numbers"]["ensemble"], false, "{cond}");
    finding(&v, "whoami", "pass");
    assert!(findings(&v, "session_timeout").is_empty(), "{v:#}");

    let (code, v, _) = doctor(&cs, &["--session-timeout", "90s"]);
    assert_eq!(code, 1, "{v:#}");
    let clamped = finding(&v, "session_timeout", "warn");
    assert_eq!(clamped["numbers"]["granted_ms"], 60000, "{clamped}");
    assert_eq!(clamped["numbers"]["asked_ms"], 90000, "{clamped}");

    let (code, human, err) = output(zkguard(&cs).args(["doctor", "--session-timeout", "4s"]));
    // The human report's findings: "  STATUS  check  message".
    let not_passed = human.lines().filter_map(|l| {
        let mut words = l.split_whitespace();
        match (words.next(), words.next()) {
            (Some("WARN" | "FAIL"), Some(check)) => Some(check),
            _ => None,
        }
    });
    assert!(
        doctor_passed_but_for_load(code, not_passed),
        "exit {code}: {err}\n{human}"
    );
    let result = if code == 0 { "pass" } else { "warn" };
    assert!(
        human.contains("standalone") && human.contains(&format!("Result: {result} (exit {code})")),
        "{human}"
    );
}

/// An ensemble with `syncLimit` 10 at 100 ms ticks (a one-second window): a 5 s session
/// passes, 1.5 s is a warning, 800 ms fails with the fix naming the timeout to ask for.
/// Each server's mode is read; exactly one leads.
#[test]
fn the_sync_window_condition_is_judged_with_numbers() {
    let cluster = TestCluster::builder()
        .servers(3)
        .sync_limit(10)
        .start()
        .expect("an ensemble");
    let cs = cluster.connect_string();
    let (code, v, err) = doctor(&cs, &["--session-timeout", "5s"]);
    assert!(
        doctor_passed_but_for_load(code, doctor_not_passed(&v)),
        "exit {code}: {err}\n{v:#}"
    );
    let cond = finding(&v, "sync_window", "pass");
    assert_eq!(cond["numbers"]["sync_window_ms"], 1000, "{cond}");
    assert_eq!(cond["numbers"]["sync_limit"], 10, "{cond}");
    assert_eq!(cond["numbers"]["ensemble"], true, "{cond}");
    let modes: Vec<&str> = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["mode"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        modes.iter().filter(|m| **m == "leader").count(),
        1,
        "{modes:?}"
    );
    assert_eq!(
        modes.iter().filter(|m| **m == "follower").count(),
        2,
        "{modes:?}"
    );
    assert_eq!(v["session"]["init_limit"], 10);

    let (code, v, _) = doctor(&cs, &["--session-timeout", "1500ms"]);
    assert_eq!(code, 1, "{v:#}");
    finding(&v, "sync_window", "warn");

    let (code, v, _) = doctor(&cs, &["--session-timeout", "800ms"]);
    assert_eq!(code, 3, "{v:#}");
    let cond = finding(&v, "sync_window", "fail");
    assert_eq!(cond["numbers"]["session_timeout_ms"], 800, "{cond}");
    let fix = cond["fix"].as_str().unwrap();
    assert!(fix.contains("--session-timeout 2000ms"), "{fix}");
    assert!(
        cond["message"]
            .as_str()
            .unwrap()
            .contains("syncLimit × tickTime"),
        "{cond}"
    );

    // A follower killed: that server is a failure, named; the others still judge.
    let follower = (0..3).find(|&i| Some(i) != cluster.leader()).unwrap();
    cluster.kill(follower).unwrap();
    let (code, v, _) = doctor(&cs, &["--session-timeout", "5s"]);
    assert_eq!(code, 3, "{v:#}");
    let down = cluster.client_addr(follower).to_string();
    let f = finding(&v, "reachable", "fail");
    assert_eq!(f["about"], down.as_str(), "{f}");
    assert_eq!(v["servers"][follower]["reachable"], false);
    finding(&v, "sync_window", "pass");
}

/// ZooKeeper's default whitelist (`srvr` alone): version and mode are still read, the rest
/// is named as unread with how to enable it (the admin server asked too, and refused), and
/// what depends on it is not made up.
#[test]
fn refused_four_letter_words_are_named_with_the_fix() {
    let cluster = TestCluster::builder()
        .four_letter_words(&["srvr"])
        .start()
        .expect("a server");
    let (code, v, err) = doctor(&cluster.connect_string(), &["--admin-port", "1"]);
    assert_eq!(code, 1, "{err}\n{v:#}");
    let s = &v["servers"][0];
    assert_eq!(s["read_from"]["srvr"], "4lw", "{s}");
    assert_eq!(s["mode"], "standalone");
    let unread: Vec<&str> = s["unread"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["word"].as_str().unwrap())
        .collect();
    assert_eq!(unread, ["conf", "envi", "mntr"], "{s}");
    let why = s["unread"][0]["why"].as_str().unwrap();
    assert!(
        why.contains("not in 4lw.commands.whitelist") && why.contains("AdminServer"),
        "{why}"
    );
    let f = finding(&v, "config_readable", "warn");
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .contains("4lw.commands.whitelist"),
        "{f}"
    );
    assert_eq!(v["session"]["tick_time_ms"], Value::Null);
    assert_eq!(v["session"]["max_session_timeout_ms"], Value::Null);
}

/// `--path`: an open lock directory is flagged (so are its open parents), a directory
/// closed to all but the user is not; holders and waiters are listed; the probe hands a
/// scratch lock over three times with exclusion confirmed and leaves nothing behind.
#[test]
fn path_checks_flag_an_open_directory_and_probe_a_scratch_lock() {
    let cs = cluster().connect_string();
    let c = client(&cs);
    let path = unique("doctor-open");
    let holder = zkguard::Mutex::new(&c, &path).unwrap();
    let _held = holder.acquire().unwrap();
    let s = Scratch::new();
    let mut waiter = zkguard(&cs);
    waiter.args(["lock", &path, "--data", "waiter-w", "--", "true"]);
    let _waiter = Running::start(waiter, &s, "waiter");
    wait_contenders(&c, &path, 2);

    let (code, v, err) = doctor(&cs, &["--path", &path]);
    assert_eq!(code, 1, "{err}\n{v:#}");
    let acl: Vec<&Value> = findings(&v, "acl");
    let flagged: Vec<&str> = acl.iter().map(|f| f["about"].as_str().unwrap()).collect();
    assert!(flagged.contains(&path.as_str()), "{flagged:?}");
    assert!(flagged.contains(&"/cli"), "{flagged:?}");
    let rows = v["path"]["acl"].as_array().unwrap();
    assert_eq!(
        rows.last().unwrap()["open_to_others"],
        serde_json::json!(["world:anyone cdrwa"])
    );
    let roles: Vec<&str> = v["path"]["holders"]["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["holder", "waiter"]);
    let probe = &v["path"]["probe"];
    assert_eq!(
        (&probe["handoffs"], &probe["exclusion"]),
        (&3.into(), &true.into()),
        "{probe}"
    );
    assert_eq!(probe["cleaned_up"], true, "{probe}");
    finding(&v, "probe", "pass");
    let left: Vec<String> = c.get_children("/cli").unwrap().0;
    assert!(
        !left.iter().any(|n| n.starts_with("zkguard-doctor-")),
        "{left:?}"
    );

    // A directory only alice may change (everyone may read): not flagged for alice.
    let alice = zkguard::Client::builder(&cs)
        .auth("digest", b"alice:alice-pw")
        .build()
        .unwrap();
    let closed = unique("doctor-closed");
    let mut acl = Acl::creator_all();
    acl.push(Acl::new(Perms::READ, "world", "anyone"));
    alice
        .create_with_acl(&closed, b"", CreateMode::Persistent, &acl)
        .unwrap();
    let (_, v, err) = doctor(
        &cs,
        &[
            "--auth",
            "alice:alice-pw",
            "--path",
            &closed,
            "--probe-rounds",
            "0",
        ],
    );
    let about: Vec<&str> = findings(&v, "acl")
        .iter()
        .map(|f| f["about"].as_str().unwrap())
        .collect();
    assert!(!about.contains(&closed.as_str()), "{about:?} {err}");
    assert!(about.contains(&"/cli"), "{about:?}");
    assert_eq!(v["path"]["probe"], Value::Null);
    // For bob the same directory is open to another identity (alice may delete his
    // nodes there): flagged; and he may not create there, so his probe is refused, naming
    // the ACL's directory.
    let inner = format!("{closed}/x");
    let (code, v, _) = doctor(&cs, &["--auth", "bob:bob-pw", "--path", &inner]);
    assert_eq!(code, 3, "{v:#}");
    let about: Vec<&str> = findings(&v, "acl")
        .iter()
        .map(|f| f["about"].as_str().unwrap())
        .collect();
    assert!(about.contains(&closed.as_str()), "{about:?}");
    let probe = finding(&v, "probe", "fail");
    assert!(probe["fix"].as_str().unwrap().contains(&closed), "{probe}");
}

/// A SASL DIGEST-MD5 login: whoami shows `sasl:alice`; a wrong password is refused (77).
#[test]
fn a_sasl_login_is_what_whoami_shows() {
    let cluster = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret")])
        .sasl_required(false)
        .start()
        .expect("a SASL server");
    let cs = cluster.connect_string();
    let sasl = |password: &str| {
        let mut c = zkguard(&cs);
        c.env("ZKGUARD_SASL_PASSWORD", password)
            .args(["--sasl-user", "alice", "doctor", "--json"]);
        output(&mut c)
    };
    let (code, out, err) = sasl("alice-secret");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        doctor_passed_but_for_load(code, doctor_not_passed(&v)),
        "exit {code}: {err}\n{out}"
    );
    let ids = v["session"]["identities"].as_array().unwrap();
    assert!(ids.contains(&"sasl:alice".into()), "{ids:?}");
    assert!(finding(&v, "whoami", "pass")["message"]
        .as_str()
        .unwrap()
        .contains("sasl:alice"));
    let (code, _, err) = sasl("wrong");
    assert_eq!(code, 77, "{err}");
}

/// The words refused but the admin server on: the doctor reads `conf`, `mntr` and `envi`
/// from `/commands/...` instead, and the configuration with them.
#[test]
fn the_admin_server_stands_in_for_refused_words() {
    let cluster = TestCluster::builder()
        .four_letter_words(&["srvr"])
        .admin_server(true)
        .start()
        .expect("a server");
    let port = cluster.admin_port(0).unwrap().to_string();
    let (code, v, err) = doctor(&cluster.connect_string(), &["--admin-port", &port]);
    let s = &v["servers"][0];
    assert_eq!(s["read_from"]["srvr"], "4lw", "{s}");
    for word in ["conf", "mntr", "envi"] {
        assert_eq!(s["read_from"][word], "admin", "{word}: {s}\n{err}");
    }
    assert_eq!(v["session"]["tick_time_ms"], 100, "{v:#}");
    assert_eq!(v["session"]["max_session_timeout_ms"], 60000, "{v:#}");
    assert!(s["mntr"]["max_latency"].is_string(), "{s}");
    assert!(findings(&v, "config_readable").is_empty(), "{v:#}");
    assert!(
        doctor_passed_but_for_load(code, doctor_not_passed(&v)),
        "exit {code}: {v:#}"
    );
}

/// Nothing listening: no session (69), and still a report: the server unreachable and
/// the session's failure, each a finding with its fix.
#[test]
fn without_a_session_the_servers_are_still_reported() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cs = format!("127.0.0.1:{port}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zkguard"))
        .args([
            "--connect",
            &cs,
            "--connect-timeout",
            "1s",
            "-q",
            "doctor",
            "--json",
        ])
        .env_remove("ZK_CONNECT")
        .output()
        .unwrap();
    assert_eq!(exit_code(out.status), 69);
    let v: Value = serde_json::from_slice(&out.stdout).expect("a report");
    said(&["--connect", &cs], exit_code(out.status), &v);
    assert_eq!(v["servers"][0]["reachable"], false, "{v:#}");
    assert_eq!(finding(&v, "reachable", "fail")["about"], cs.as_str());
    assert!(finding(&v, "session", "fail")["fix"]
        .as_str()
        .unwrap()
        .contains("quorum"));
    assert_eq!((&v["exit"], &v["session"]), (&69.into(), &Value::Null));
}

/// `doctor` with a TLS client certificate against `cluster`'s secure ports.
fn doctor_tls(cluster: &TestCluster) -> (i32, Value) {
    let pki = cluster.pki().unwrap();
    let mut c = zkguard(&cluster.secure_connect_string().unwrap());
    c.arg("--tls-ca")
        .arg(pki.ca_cert_path())
        .arg("--tls-cert")
        .arg(pki.client().cert_path())
        .arg("--tls-key")
        .arg(pki.client().key_path())
        .args(["doctor", "--json", "--admin-port", "1"]);
    let (code, out, err) = output(&mut c);
    let v = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    said(&["--tls-ca", "..", "--tls-cert", ".."], code, &v);
    (code, v)
}

/// A client certificate the server never asks for (`ssl.clientAuth=none`): the login the
/// user thinks it has is not what the server sees, a failure naming what it does see.
#[test]
fn a_login_the_server_does_not_see_fails() {
    let cluster = TestCluster::builder()
        .tls(zkguard::testing::ClientAuth::None)
        .start()
        .expect("a TLS server");
    let (code, v) = doctor_tls(&cluster);
    assert_eq!(code, 3, "{v:#}");
    let f = finding(&v, "whoami", "fail");
    let said = f["message"].as_str().unwrap();
    assert!(
        said.contains("TLS client certificate") && said.contains("ip:127.0.0.1"),
        "{f}"
    );
    assert_eq!(
        v["session"]["identities"],
        serde_json::json!(["ip:127.0.0.1"])
    );
}

/// Over mutual TLS, with the TLS options a lock user gives: the session is made through
/// the secure ports (whoami shows the certificate's identity), and the four-letter words,
/// which a TLS port does not answer in plain text, are named as unread (waited for once).
#[test]
fn over_tls_the_session_uses_the_tls_options() {
    let cluster = TestCluster::builder()
        .tls(zkguard::testing::ClientAuth::Need)
        .start()
        .expect("a TLS server");
    let (code, v) = doctor_tls(&cluster);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["servers"][0]["reachable"], true);
    let ids = v["session"]["identities"].as_array().unwrap();
    assert!(
        ids.iter().any(|i| i
            .as_str()
            .unwrap()
            .starts_with("x509:CN=zkguard-test-client")),
        "{ids:?}"
    );
    let unread = finding(&v, "config_readable", "warn")["message"]
        .as_str()
        .unwrap();
    assert!(
        unread.contains("TLS-only port") && unread.contains("srvr"),
        "{unread}"
    );
    // Its mode unread, one server could be either: the condition is not judged.
    let cond = finding(&v, "sync_window", "warn");
    assert!(cond["message"].as_str().unwrap().contains("mode"), "{cond}");
}
