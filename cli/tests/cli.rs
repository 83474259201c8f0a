//! The `zkguard` binary against real ZooKeeper servers (the library's `testing` harness).

#[path = "cli/acl.rs"]
mod acl;
mod common;
#[path = "cli/escape.rs"]
mod escape;
#[path = "cli/foreign.rs"]
mod foreign;
#[path = "cli/frozen.rs"]
mod frozen;
#[path = "cli/hand_over.rs"]
mod hand_over;
#[path = "cli/input.rs"]
mod input;
#[cfg(feature = "kerberos")]
#[path = "cli/kerberos.rs"]
mod kerberos;
#[path = "cli/logging.rs"]
mod logging;
#[path = "cli/mkdir.rs"]
mod mkdir;
#[path = "cli/secrets.rs"]
mod secrets;
#[path = "cli/show.rs"]
mod show;
#[path = "cli/supervise.rs"]
mod supervise;
#[path = "cli/terminal.rs"]
mod terminal;
#[path = "cli/usage.rs"]
mod usage;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// The shared server's connect string, a scratch directory and a fresh lock path.
fn setup(prefix: &str) -> (String, Scratch, String) {
    (cluster().connect_string(), Scratch::new(), unique(prefix))
}

fn sh(script: &str) -> [&str; 3] {
    ["sh", "-c", script]
}

/// `zkguard lock` processes started together never run their commands at the same time, and
/// each gets a larger fencing token than the one before.
#[test]
fn lock_commands_never_overlap() {
    let (cs, s, path) = setup("overlap");
    let log = s.path("log");
    let script = format!(
        "echo \"start $ZKGUARD_TOKEN\" >> '{l}'; sleep 0.3; echo \"end $ZKGUARD_TOKEN\" >> '{l}'",
        l = log.display()
    );
    let mut procs: Vec<Running> = (0..3)
        .map(|i| start_sh(&cs, &s, &format!("p{i}"), &["lock", &path], &script))
        .collect();
    for p in &mut procs {
        assert_eq!(p.wait(PATIENCE), 0, "{}", p.stderr());
    }
    let lines = s.lines("log");
    assert_eq!(lines.len(), 6, "{lines:?}");
    let mut last = 0u64;
    for pair in lines.chunks(2) {
        let start = pair[0].strip_prefix("start ").expect("a start line");
        assert_eq!(pair[1], format!("end {start}"), "overlap in {lines:?}");
        let token: u64 = start.parse().unwrap();
        assert!(token > last, "tokens do not grow: {lines:?}");
        last = token;
    }
}

/// `--nonblock` and `--timeout` exit with 1 (or `--conflict-exit-code`) without running the
/// command while another process holds the lock, and the lock is free once it is released.
#[test]
fn nonblock_and_timeout_exit_codes() {
    let (cs, s, path) = setup("conflict");
    let holder_script = format!(
        "echo held > '{}'; {}",
        s.path("ready").display(),
        until_file(&s.path("go"))
    );
    let mut holder = start_sh(&cs, &s, "holder", &["lock", &path], &holder_script);
    s.wait_lines("ready", "the holder's command", |l| !l.is_empty());

    let ran = format!("touch '{}'", s.path("ran").display());
    let (code, _, err) = output(
        zkguard(&cs)
            .args(["lock", &path, "--nonblock", "--"])
            .args(sh(&ran)),
    );
    assert_eq!(code, 1, "--nonblock: {err}");
    assert!(err.contains("did not get the lock"), "{err}");
    let (code, _, err) = output(
        zkguard(&cs)
            .args(["lock", &path, "-n", "--conflict-exit-code", "9", "--"])
            .args(sh(&ran)),
    );
    assert_eq!(code, 9, "--conflict-exit-code 9: {err}");
    let t = Instant::now();
    let (code, _, err) = output(
        zkguard(&cs)
            .args(["lock", &path, "--timeout", "700ms", "--"])
            .args(sh(&ran)),
    );
    assert_eq!(code, 1, "--timeout: {err}");
    assert!(t.elapsed() >= Duration::from_millis(700), "gave up early");
    assert!(!s.path("ran").exists(), "a command ran without the lock");

    s.touch("go");
    assert_eq!(holder.wait(PATIENCE), 0, "{}", holder.stderr());
    let (code, _, err) = output(
        zkguard(&cs)
            .args(["lock", &path, "-n", "--"])
            .args(sh(&ran)),
    );
    assert_eq!(code, 0, "free after the release: {err}");
    assert!(s.path("ran").exists());
}

/// SIGINT while waiting for the lock: zkguard exits with 130 at once, the command never
/// runs, and its place in the queue is gone.
#[test]
fn sigint_while_waiting_exits_130_and_leaves_no_node() {
    let (cs, s, path) = setup("sigint-wait");
    let c = client(&cs);
    let mut h = start_sh(
        &cs,
        &s,
        "holder",
        &["lock", &path],
        &until_file(&s.path("go")),
    );
    wait_contenders(&c, &path, 1);
    let mut w = zkguard(&cs);
    w.args(["lock", &path, "--", "touch"]).arg(s.path("ran"));
    let mut w = Running::start(w, &s, "waiter");
    wait_contenders(&c, &path, 2);

    w.signal(libc::SIGINT);
    assert_eq!(w.wait(PATIENCE), 130, "{}", w.stderr());
    wait_contenders(&c, &path, 1);
    s.touch("go");
    assert_eq!(h.wait(PATIENCE), 0, "{}", h.stderr());
    assert!(
        !s.path("ran").exists(),
        "the interrupted waiter ran its command"
    );
}

/// The command's exit status comes back as zkguard's (a signal as 128+N), and the command
/// sees the fencing token, the lock path and its node in its environment.
#[test]
fn exit_status_passes_through_with_the_environment() {
    let (cs, s, path) = setup("status");
    let env = s.path("env");
    let script = format!(
        "echo \"$ZKGUARD_TOKEN|$ZKGUARD_PATH|$ZKGUARD_NODE\" > '{}'; exit 7",
        env.display()
    );
    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "--"]).args(sh(&script)));
    assert_eq!(code, 7, "{err}");
    let line = s.lines("env").concat();
    let parts: Vec<&str> = line.split('|').collect();
    assert!(parts[0].parse::<u64>().is_ok_and(|t| t > 0), "{line}");
    assert_eq!(parts[1], path);
    assert!(
        parts[2].starts_with(&format!("{path}/")) && parts[2].contains("-lock-"),
        "{line}"
    );

    let (code, _, err) = output(
        zkguard(&cs)
            .args(["lock", &path, "-q", "--"])
            .args(sh("kill -KILL $$")),
    );
    assert_eq!(code, 128 + 9, "{err}");
    assert!(err.is_empty(), "--quiet printed {err:?}");

    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "-q", "--", "/no/such/command"]));
    assert_eq!(code, 127, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let not_executable = s.path("not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    let (code, _, err) = output(
        zkguard(&cs)
            .args(["lock", &path, "-q", "--"])
            .arg(&not_executable),
    );
    assert_eq!(code, 126, "{err}");
    // Nothing was left behind: the lock is free.
    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "-n", "--", "true"]));
    assert_eq!(code, 0, "{err}");
}

/// Bad input and an unreachable ensemble are one line on stderr and a documented status.
#[test]
fn bad_input_is_one_line_and_a_documented_status() {
    let cs = cluster().connect_string();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["lock", "/cli/x", "echo"], 2, "-- echo"),
        (vec!["lock", "cli/x", "--", "true"], 2, "invalid path"),
        (vec!["lock", "/cli//x", "--", "true"], 2, "invalid path"),
        (
            vec!["lock", "/cli/x", "--timeout", "3x", "--", "true"],
            2,
            "--timeout",
        ),
        (
            vec!["lock", "/cli/x", "--kill-after", "soon", "--", "true"],
            2,
            "--kill-after",
        ),
        (
            vec!["lock", "/cli/x", "--read", "--write", "--", "true"],
            2,
            "--write",
        ),
        (
            vec!["lock", "/cli/x", "--auth", "nocolon", "--", "true"],
            2,
            "user:password",
        ),
        (
            vec!["elect", "/cli/x", "--on-suspend", "maybe", "--", "true"],
            2,
            "maybe",
        ),
        (vec!["holders"], 2, "<PATH>"),
        (vec!["frobnicate"], 2, "frobnicate"),
    ];
    for (args, want, mentions) in cases {
        let (code, out, err) = output(zkguard(&cs).args(&args));
        assert_eq!(code, want, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(
            err.contains(mentions),
            "{args:?} does not name {mentions}: {err}"
        );
        assert!(
            !err.contains("panicked") && out.is_empty(),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = output(
        std::process::Command::new(env!("CARGO_BIN_EXE_zkguard"))
            .env("ZK_CONNECT", "127.0.0.1:1")
            .env_remove("RUST_LOG")
            .args(["--connect-timeout", "1s", "lock", "/cli/x", "--", "true"]),
    );
    assert_eq!(code, 69, "unreachable: {err}");
    // One line of zkguard's own; the library's warning that it keeps trying may come first.
    assert_eq!(own_lines(&err).len(), 1, "{err}");
    assert!(err.contains("cannot connect to 127.0.0.1:1"), "{err}");
}

/// Digest credentials from `--auth-file` or `ZKGUARD_AUTH` open a lock directory that only
/// their user may use; without them the refusal is one line and status 77.
#[test]
fn credentials_from_a_file_or_the_environment() {
    let (cs, s, _) = setup("auth");
    let owner = zkguard::Client::builder(&cs)
        .auth("digest", b"alice:secret")
        .connect_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let path = format!("/cli-acl-{}", uuid::Uuid::new_v4().simple());
    owner
        .create_with_acl(
            &path,
            b"",
            zkguard::CreateMode::Persistent,
            &zkguard::Acl::creator_all(),
        )
        .unwrap();
    let (code, _, err) = output(zkguard(&cs).args(["holders", &path]));
    assert_eq!(code, 77, "{err}");
    assert_eq!(
        err.lines().filter(|l| !is_connect_notice(l)).count(),
        1,
        "{err}"
    );

    std::fs::write(s.path("cred"), "alice:secret\n").unwrap();
    let (code, out, err) = output(
        zkguard(&cs)
            .arg("--auth-file")
            .arg(s.path("cred"))
            .args(["holders", &path]),
    );
    assert_eq!((code, out.contains("nobody")), (0, true), "{err}");
    let (code, _, err) = output(
        zkguard(&cs)
            .env("ZKGUARD_AUTH", "alice:secret")
            .args(["lock", &path, "-n", "--", "true"]),
    );
    assert_eq!(code, 0, "{err}");
    owner.delete(&path, None).unwrap();
}

/// `elect --loop`: when the leader's command exits, the other candidate leads, and the
/// first queues again behind it; terms never overlap.
#[test]
fn elect_loop_hands_over_when_the_command_exits() {
    let (cs, s, path) = setup("elect");
    let log = s.path("log").display().to_string();
    // Longer than zkguard's one-second pause between short terms, so it never waits. The
    // fifth term runs until it is signalled: stopped while its command runs, zkguard
    // forwards the signal and exits as the command did (a command that had just ended on
    // its own under load would give 0, not 143).
    let script = format!(
        "echo \"start $ZKGUARD_ID\" >> {log}; \
         if [ \"$(wc -l < {log})\" -gt 8 ]; then exec sleep 600; fi; \
         sleep 1.2; echo \"end $ZKGUARD_ID\" >> {log}"
    );
    let mut procs: Vec<Running> = ["a", "b"]
        .iter()
        .map(|id| {
            start_sh(
                &cs,
                &s,
                id,
                &["elect", &path, "--id", id, "--loop"],
                &script,
            )
        })
        .collect();
    s.wait_lines("log", "four terms and the fifth's start", |l| l.len() >= 9);
    for p in &procs {
        p.signal(libc::SIGTERM);
    }
    for p in &mut procs {
        assert_eq!(p.wait(PATIENCE), 143, "{}", p.stderr());
    }
    let lines = s.lines("log");
    let mut previous = String::new();
    for term in lines.chunks(2).take(4) {
        let id = term[0].strip_prefix("start ").expect("a start line");
        assert_eq!(term[1], format!("end {id}"), "terms overlap: {lines:?}");
        assert_ne!(id, previous, "no hand-over: {lines:?}");
        previous = id.to_string();
    }
}

/// `holders --json` and `leader --json` parse and name the holder, the waiter and the
/// leader; the table and the waiting message name the holder too.
#[test]
fn holders_and_leader_json_parse() {
    let (cs, s, path) = setup("holders");
    let c = client(&cs);
    let wait_go = until_file(&s.path("go"));
    let mut h = start_sh(
        &cs,
        &s,
        "holder",
        &["lock", &path, "--data", "holder-x"],
        &wait_go,
    );
    wait_contenders(&c, &path, 1);
    let mut w = zkguard(&cs);
    w.args(["lock", &path, "--data", "waiter-y", "--", "true"]);
    let mut w = Running::start(w, &s, "waiter");
    wait_contenders(&c, &path, 2);

    let (code, out, err) = output(zkguard(&cs).args(["holders", &path, "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("holders --json parses");
    assert_eq!(v["path"], path.as_str());
    assert_eq!(v["kind"], "mutex");
    let ps = v["participants"].as_array().unwrap();
    assert_eq!(ps.len(), 2, "{v}");
    assert_eq!(
        (&ps[0]["data"], &ps[0]["holds"]),
        (&"holder-x".into(), &true.into())
    );
    assert_eq!(
        (&ps[1]["data"], &ps[1]["role"]),
        (&"waiter-y".into(), &"waiter".into())
    );
    assert!(ps[0]["age_ms"].as_u64().is_some(), "{v}");
    let (code, out, _) = output(zkguard(&cs).args(["holders", &path]));
    assert_eq!(code, 0);
    assert!(
        out.contains("holder-x") && out.contains("waiter-y"),
        "{out}"
    );
    w.wait_stderr(&format!("waiting for {path}, held by holder-x for"));

    let election = unique("leader");
    let mut l = start_sh(
        &cs,
        &s,
        "leader",
        &["elect", &election, "--id", "leader-1"],
        &wait_go,
    );
    wait_contenders(&c, &election, 1);
    let (code, out, err) = output(zkguard(&cs).args(["leader", &election, "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("leader --json parses");
    assert_eq!(v["leader"], "leader-1", "{v}");
    assert_eq!(v["participants"][0]["role"], "leader", "{v}");

    s.touch("go");
    for p in [&mut h, &mut w, &mut l] {
        assert_eq!(p.wait(PATIENCE), 0, "{}", p.stderr());
    }
}

/// Readers share `--read`, and `--permits 2` lets two in and turns a third away.
#[test]
fn read_locks_share_and_permits_count() {
    let (cs, s, path) = setup("rw");
    // Each reader enters, then waits for the other to be inside too: only if both hold
    // the read lock at once do both exit 0.
    let reader = |me: &str, other: &str| {
        let script = format!(
            "touch '{}'; {}",
            s.path(me).display(),
            until_file(&s.path(other))
        );
        start_sh(&cs, &s, me, &["lock", &path, "--read"], &script)
    };
    let mut r1 = reader("r1", "r2");
    let mut r2 = reader("r2", "r1");
    assert_eq!(r1.wait(PATIENCE), 0, "{}", r1.stderr());
    assert_eq!(r2.wait(PATIENCE), 0, "{}", r2.stderr());

    let sem = unique("sem");
    let wait_go = until_file(&s.path("go"));
    let mut holders: Vec<Running> = (0..2)
        .map(|i| {
            start_sh(
                &cs,
                &s,
                &format!("permit{i}"),
                &["lock", &sem, "--permits", "2"],
                &wait_go,
            )
        })
        .collect();
    let deadline = Instant::now() + PATIENCE;
    // Both hold (not one holding and one queued) once a third is turned away.
    let (code, _, err) = loop {
        let (code, out, err) = output(zkguard(&cs).args(["holders", &sem, "--json"]));
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        let holding = v["participants"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["holds"] == true)
            .count();
        if holding == 2 {
            assert_eq!(v["kind"], "semaphore");
            break output(zkguard(&cs).args(["lock", &sem, "--permits", "2", "-n", "--", "true"]));
        }
        assert!(Instant::now() < deadline, "two permits never held: {v}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, 1, "a third permit: {err}");
    s.touch("go");
    for h in &mut holders {
        assert_eq!(h.wait(PATIENCE), 0, "{}", h.stderr());
    }
}

/// `zkguard server` prints a connect string a client can use, and stops its servers on
/// SIGINT.
#[test]
fn server_prints_a_connect_string_a_client_can_use() {
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_zkguard"))
        .args(["server", "--servers", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = first_line(&mut server);
    let cs = line.trim().to_string();
    assert!(cs.starts_with("127.0.0.1:"), "{line:?}");
    let c = client(&cs);
    let node = c
        .create("/from-the-test", b"hi", zkguard::CreateMode::Persistent)
        .unwrap();
    assert_eq!(c.get_data(&node.path).unwrap().0, b"hi");
    c.close().into_result().unwrap();

    // SAFETY: a plain kill(2) of our own child.
    unsafe {
        libc::kill(server.id() as i32, libc::SIGINT);
    }
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(st) = server.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "server did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit_code(status), 0);
    let gone = zkguard::Client::builder(&cs)
        .connect_timeout(Duration::from_secs(2))
        .build();
    assert!(gone.is_err(), "the servers still answer after SIGINT");
}

/// A secured server (mutual TLS required, SASL required): the flags that reach it, and a
/// one-line error with a documented status for each way of getting them wrong.
#[test]
fn tls_and_sasl_flags_reach_a_secured_server_and_bad_ones_fail_clearly() {
    let cluster = zkguard::testing::TestCluster::builder()
        .tls(zkguard::testing::ClientAuth::Need)
        .sasl_digest_users(&[("alice", "alice-secret")])
        .start()
        .expect("start a TLS + SASL server");
    let pki = cluster.pki().expect("a PKI");
    let cs = cluster.secure_connect_string().expect("a TLS port");
    let path = unique("cli-secure");
    let secured = |extra: &[&str]| {
        let mut c = zkguard(&cs);
        c.arg("--tls-ca")
            .arg(pki.ca_cert_path())
            .args(["--sasl-user", "alice"])
            .args(extra);
        c
    };
    let with_cert = |c: &mut std::process::Command| {
        c.arg("--tls-cert")
            .arg(pki.client().cert_path())
            .arg("--tls-key")
            .arg(pki.client().key_path());
    };
    // Right: a lock, then the holders listing.
    let mut ok = secured(&[]);
    with_cert(&mut ok);
    let (code, _, err) = output(
        ok.env("ZKGUARD_SASL_PASSWORD", "alice-secret")
            .args(["lock", &path, "-n", "--acl", "creator", "--", "true"]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("without TLS"), "a warning with TLS on: {err}");
    let mut show = secured(&[]);
    with_cert(&mut show);
    let s = Scratch::new();
    std::fs::write(s.path("pw"), "alice-secret\n").unwrap();
    let (code, out, err) = output(
        show.arg("--sasl-password-file")
            .arg(s.path("pw"))
            .args(["holders", &path]),
    );
    assert_eq!((code, out.contains("nobody")), (0, true), "{out} {err}");
    // No client certificate: the server refuses the handshake.
    let (code, _, err) = output(
        secured(&[])
            .env("ZKGUARD_SASL_PASSWORD", "alice-secret")
            .args(["holders", &path]),
    );
    assert_eq!(code, 69, "{err}");
    assert_eq!(
        err.lines().filter(|l| !is_connect_notice(l)).count(),
        1,
        "{err}"
    );
    assert!(err.contains("TLS"), "{err}");
    // A wrong password: refused credentials.
    let mut wrong = secured(&[]);
    with_cert(&mut wrong);
    let (code, _, err) = output(
        wrong
            .env("ZKGUARD_SASL_PASSWORD", "not-it")
            .args(["holders", &path]),
    );
    assert_eq!(code, 77, "{err}");
    let said = own_lines(&err)
        .into_iter()
        .filter(|l| !is_connect_notice(l));
    assert_eq!(said.count(), 1, "{err}");
    assert!(err.contains("authentication"), "{err}");
    // Bad input: usage status, naming the flag, before any connection.
    let cert = pki.client().cert_path().display().to_string();
    for (args, says) in [
        (
            vec!["--tls-cert", cert.as_str()],
            "--tls-cert needs --tls-key",
        ),
        (
            vec!["--tls-key", cert.as_str()],
            "--tls-key needs --tls-cert",
        ),
        (
            vec!["--tls-server-name", "not a host name!"],
            "--tls-server-name",
        ),
        (
            vec!["--tls-ca", "/nonexistent/ca.pem"],
            "/nonexistent/ca.pem",
        ),
    ] {
        let mut c = zkguard(&cs);
        if args[0] != "--tls-ca" {
            c.arg("--tls-ca").arg(pki.ca_cert_path());
        }
        let (code, _, err) = output(c.args(&args).args(["holders", &path]));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // TLS-only flags without TLS turned on.
    let (code, _, err) =
        output(zkguard(&cs).args(["--tls-server-name", "localhost", "holders", &path]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tls-server-name needs TLS"), "{err}");
    let (code, _, err) = output(zkguard(&cs).args(["--sasl-user", "alice", "holders", &path]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ZKGUARD_SASL_PASSWORD"), "{err}");
    // The password given two ways at once: which one was meant is not guessed.
    let (code, _, err) = output(
        zkguard(&cs)
            .env("ZKGUARD_SASL_PASSWORD", "alice-secret")
            .args(["--sasl-user", "alice", "--sasl-password-file"])
            .arg(s.path("pw"))
            .args(["holders", &path]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("given twice"), "{err}");
}
