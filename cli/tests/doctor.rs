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

/// The statuses of the `acl` findings about `node`.
fn acl_status<'a>(v: &'a Value, node: &str) -> Vec<&'a str> {
    findings(v, "acl")
        .into_iter()
        .filter(|f| f["about"] == node)
        .map(|f| f["status"].as_str().unwrap())
        .collect()
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

/// ZooKeeper 3.10's defaults (the admin server off, `srvr` the only word) on an ensemble:
/// the doctor still reports what the client protocol shows. The session and `whoami`, a
/// timed create and delete standing in for `mntr`'s figures, the contention probe, and the sync window it cannot judge; each
/// gap names the settings that would let it see more (`4lw.commands.whitelist`,
/// `admin.enableServer`).
#[test]
fn with_the_admin_server_and_the_words_off_the_client_protocol_still_reports() {
    let cluster = TestCluster::builder()
        .servers(3)
        .four_letter_words(&["srvr"])
        .admin_server(false)
        .start()
        .expect("an ensemble");
    let cs = cluster.connect_string();
    client(&cs).ensure_path("/quiet").unwrap();
    let args = [
        "--admin-port",
        "1",
        "--path",
        "/quiet/lock",
        "--probe-rounds",
        "1",
    ];
    let (code, v, err) = doctor(&cs, &args);
    assert!(code == 1 || code == 3, "exit {code}: {err}\n{v:#}");
    for s in v["servers"].as_array().unwrap() {
        assert_eq!(s["read_from"]["srvr"], "4lw", "{s}");
        assert_eq!(s["read_from"]["mntr"], Value::Null, "{s}");
    }
    let settings = |text: &str| {
        text.contains("4lw.commands.whitelist") && text.contains("admin.enableServer=true")
    };
    // The session, as a lock user gets it.
    assert!(
        v["session"]["session_id"]
            .as_str()
            .unwrap()
            .starts_with("0x"),
        "{v:#}"
    );
    finding(&v, "whoami", "pass");
    // The sync window cannot be judged: said, with the settings.
    let window = finding(&v, "sync_window", "warn");
    assert!(settings(window["fix"].as_str().unwrap()), "{window}");
    assert_eq!(window["numbers"]["ensemble"], true, "{window}");
    // The servers' own figures: unread, and a write timed through the client protocol.
    for f in findings(&v, "config_readable") {
        assert!(settings(f["fix"].as_str().unwrap()), "{f}");
    }
    let write = finding(&v, "write_probe", "pass");
    assert!(write["numbers"]["create_ms"].is_number(), "{write}");
    assert!(write["numbers"]["delete_ms"].is_number(), "{write}");
    assert!(settings(write["message"].as_str().unwrap()), "{write}");
    assert!(
        write["about"]
            .as_str()
            .unwrap()
            .starts_with("/quiet/zkguard-doctor-"),
        "{write}"
    );
    // The contention probe, through two more sessions.
    finding(&v, "probe", "pass");
    // The scratch nodes are gone.
    let c = client(&cs);
    let (left, _) = c.get_children("/quiet").unwrap();
    assert!(left.is_empty(), "{left:?}");
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

/// Sends 100 MiB of `A` on `conn` (or until the reader goes away).
fn flood(mut conn: std::net::TcpStream) {
    use std::io::Write;
    let chunk = [b'A'; 64 * 1024];
    for _ in 0..1600 {
        if conn.write_all(&chunk).is_err() {
            return;
        }
    }
}

/// A listener on a free loopback port serving each connection with `serve` on a thread of
/// its own; its port.
fn fake_server(serve: fn(std::net::TcpStream)) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            std::thread::spawn(move || serve(conn));
        }
    });
    port
}

/// Two ports of the connect string are not ZooKeeper: one answers everything with 100 MiB,
/// the other refuses the four-letter words and its admin server port (the first one) answers
/// with 100 MiB. The doctor reads at most 1 MiB of a reply: its peak memory (the kernel's
/// count for the process, from `wait4`) stays under 50 MiB, both are reported unreadable (a
/// failure each, nothing more asked of them), and the real server is still checked.
#[test]
fn a_server_that_sends_100_mib_is_unreadable_and_memory_stays_bounded() {
    use std::io::{Read, Write};
    use std::process::Stdio;

    let flooding = fake_server(flood);
    let refusing = fake_server(|mut conn| {
        let mut word = [0u8; 4];
        if conn.read_exact(&mut word).is_ok() {
            let word = String::from_utf8_lossy(&word).into_owned();
            let _ = write!(
                conn,
                "{word} is not executed because it is not in the whitelist."
            );
        }
    });
    let cs = format!(
        "{},127.0.0.1:{flooding},127.0.0.1:{refusing}",
        cluster().connect_string()
    );
    let admin = flooding.to_string();
    // Reaped by wait4 below, which also gives its resource usage.
    #[allow(clippy::zombie_processes)]
    let mut child = zkguard(&cs)
        .args(["doctor", "--json", "--admin-port", &admin])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let err = stderr.join().unwrap();
    let mut status = 0;
    // SAFETY: wait4(2) of our own child, with pointers to two locals; `rusage` is plain
    // data, all zeros a valid value.
    let (reaped, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let r = libc::wait4(child.id() as i32, &mut status, 0, &mut usage);
        (r, usage)
    };
    assert_eq!(reaped, child.id() as i32, "wait4: {err}");
    let peak_kib = usage.ru_maxrss;
    eprintln!("doctor's peak resident memory: {peak_kib} KiB");
    assert!(
        peak_kib < 50 * 1024,
        "doctor grew to {peak_kib} KiB reading a flood: {err}"
    );
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    said(&["--connect", &cs], libc::WEXITSTATUS(status), &v);
    assert_eq!(libc::WEXITSTATUS(status), 3, "{v:#}");
    let servers = v["servers"].as_array().unwrap();
    assert_eq!(servers[0]["unreadable"], Value::Null, "{v:#}");
    assert_eq!(servers[0]["read_from"]["srvr"], "4lw", "{v:#}");
    for (s, via) in [(&servers[1], "`srvr`"), (&servers[2], "AdminServer")] {
        let why = s["unreadable"].as_str().unwrap_or_else(|| panic!("{s:#}"));
        assert!(why.contains("over 1 MiB") && why.contains(via), "{s:#}");
    }
    let unreadable: Vec<&Value> = findings(&v, "readable")
        .into_iter()
        .map(|f| &f["about"])
        .collect();
    assert_eq!(
        unreadable,
        [
            &Value::from(format!("127.0.0.1:{flooding}")),
            &Value::from(format!("127.0.0.1:{refusing}"))
        ],
        "{v:#}"
    );
}

/// A port of the connect string (and its admin server port) trickles a byte every 20 ms
/// and never ends its answer: each word and each admin server command ends at the exchange's
/// timeout (a word's silence is not waited for again), the port is reported with why, and
/// the real server is still checked.
#[test]
fn a_port_that_trickles_is_no_answer_and_the_doctor_finishes() {
    let trickle = fake_server(|mut conn| {
        use std::io::Write;
        while conn.write_all(b"x").is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    let cs = format!("{},127.0.0.1:{trickle}", cluster().connect_string());
    let (code, v, _) = doctor(&cs, &["--admin-port", &trickle.to_string()]);
    assert_eq!(code, 3, "{v:#}");
    let servers = v["servers"].as_array().unwrap();
    assert_eq!(servers[0]["read_from"]["srvr"], "4lw", "{v:#}");
    let slow = &servers[1];
    assert_eq!(slow["reachable"], true, "{slow:#}");
    assert_eq!(slow["unreadable"], Value::Null, "{slow:#}");
    let unread = slow["unread"].as_array().unwrap();
    assert_eq!(unread.len(), 4, "{slow:#}");
    for u in unread {
        let why = u["why"].as_str().unwrap();
        assert!(
            why.matches("no whole answer").count() == 2 && why.contains("AdminServer"),
            "{u}"
        );
    }
}

/// A port of the connect string answers the four-letter words with escape sequences and
/// forged lines in its version, mode and figures: the report for people shows them
/// escaped (no ESC byte, no line of the server's making) and the JSON report carries them
/// as JSON escapes.
#[test]
fn what_a_server_says_is_shown_escaped() {
    use std::io::{Read, Write};

    let nasty = fake_server(|mut conn| {
        let mut word = [0u8; 4];
        if conn.read_exact(&mut word).is_err() {
            return;
        }
        let reply = match &word {
            b"srvr" => {
                "Zookeeper version: 3.8.0\x1b[2J\nMode: leader\x1b]0;owned\x07\nFORGED line\n"
            }
            b"mntr" => "zk_avg_latency\t1\x1b[31m\nzk_max_latency\t2\n",
            b"conf" => "tickTime=100\x1b[2J\n",
            _ => "java.version=17\x1b[2J\n",
        };
        let _ = conn.write_all(reply.as_bytes());
    });
    let cs = format!("127.0.0.1:{nasty}");
    let (_, out, err) = output(zkguard(&cs).args(["doctor", "--connect-timeout", "1s"]));
    let text = format!("{out}{err}");
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(!text.lines().any(|l| l.starts_with("FORGED")), "{text:?}");
    assert!(
        text.contains(r"3.8.0\x1b[2J"),
        "the version shown escaped: {text}"
    );
    let (_, out, err) = output(zkguard(&cs).args(["doctor", "--json", "--connect-timeout", "1s"]));
    assert!(!out.contains('\x1b'), "{out:?}");
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    assert_eq!(v["servers"][0]["version"], "3.8.0\x1b[2J", "{v:#}");
}

/// `doctor --path` under a directory `zkguard mkdir` made passes: the directory is closed
/// and nobody else can delete it, so the open `/cli` and `/` above it are notes, not
/// warnings. The report (JSON and for people) never shows a digest password's hash, and
/// says how long a dead holder keeps the lock with the granted session timeout.
#[test]
fn doctor_passes_under_a_made_directory_and_hides_hashes() {
    let cs = cluster().connect_string();
    let dir = unique("doctor-team");
    let alice = ["--auth", "alice:alice-pw"];
    let (code, _, err) = output(
        zkguard(&cs)
            .args(alice)
            .args(["mkdir", &dir, "--acl", "creator"]),
    );
    assert_eq!(code, 0, "{err}");
    let path = format!("{dir}/nightly");
    let args = [
        "--auth",
        "alice:alice-pw",
        "--session-timeout",
        "6s",
        "--path",
        &path,
        "--probe-rounds",
        "1",
    ];
    let (code, v, err) = doctor(&cs, &args);
    assert_eq!((code, &v["status"]), (0, &"pass".into()), "{err}\n{v:#}");
    let status_of = |node: &str| acl_status(&v, node);
    assert_eq!(status_of(&dir), ["pass"], "{v:#}");
    assert_eq!(status_of("/cli"), ["note"], "{v:#}");
    assert_eq!(status_of("/"), ["note"], "{v:#}");
    let dead = finding(&v, "dead_holder", "note");
    assert!(
        dead["message"].as_str().unwrap().contains("6000 ms"),
        "{dead}"
    );

    // The hash ZooKeeper keeps for alice:alice-pw (base64 of SHA-1 of "alice:alice-pw").
    let client = zkguard::Client::builder(&cs)
        .auth("digest", b"alice:alice-pw")
        .build()
        .unwrap();
    let (entries, _) = client.get_acl(&dir).unwrap();
    let hash = entries[0].id.split_once(':').unwrap().1.to_string();
    assert!(hash.len() > 20, "{entries:?}");
    let text = v.to_string();
    assert!(
        !text.contains(&hash),
        "the JSON report shows the hash: {text}"
    );
    assert!(text.contains("digest:alice:…"), "{text}");
    let (_, out, err) = output(zkguard(&cs).arg("doctor").args(args));
    assert!(!out.contains(&hash) && !err.contains(&hash), "{out}{err}");
}

/// A closed team directory made by hand (no marker) whose only child is a lock's directory:
/// a container, which ZooKeeper deletes once its last lock node is gone, and which a
/// client's stat shows as persistent (`ephemeralOwner` 0). Nothing keeps the team directory
/// from becoming empty, then deleted by anyone (the open root) and made again open, so the
/// open root above it is a warning, not a note: the container is no anchor, though a lock
/// is held in it while doctor looks. (Before, any child that looked persistent ended the
/// walk with a pass.)
#[test]
fn a_lock_s_container_does_not_make_its_closed_parent_undeletable() {
    let cs = cluster().connect_string();
    let dir = unique("doctor-container");
    let alice = zkguard::Client::builder(&cs)
        .auth("digest", b"alice:alice-pw")
        .build()
        .unwrap();
    let closed = Acl::creator_all();
    alice
        .create_with_acl(&dir, b"", CreateMode::Persistent, &closed)
        .unwrap();
    let path = format!("{dir}/nightly");
    alice
        .create_with_acl(&path, b"", CreateMode::Container, &closed)
        .unwrap();
    // A lock held there while doctor looks (the harness's servers delete an empty
    // container within 100 ms: it stands only while it has a child).
    let node = format!("{path}/_c_a-lock-0000000000");
    alice
        .create_with_acl(&node, b"", CreateMode::Ephemeral, &closed)
        .unwrap();
    let st = alice.exists(&path).unwrap().expect("the container");
    assert_eq!(st.ephemeral_owner, 0, "a container looks persistent");

    let args = [
        "--auth",
        "alice:alice-pw",
        "--path",
        &path,
        "--probe-rounds",
        "1",
    ];
    let (_, v, err) = doctor(&cs, &args);
    let status_of = |node: &str| acl_status(&v, node);
    assert!(!status_of(&dir).contains(&"pass"), "{err}\n{v:#}");
    assert_eq!(status_of("/"), ["warn"], "{v:#}");
}
