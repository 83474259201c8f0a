//! What a new user meets first: the help, flock's habits, a wrong address, `server --port`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::setup;

fn bare() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zkguard"));
    c.env_remove("ZK_CONNECT").stdin(Stdio::null());
    c
}

/// The text of one help section ("Options:" up to the next heading or the end).
fn section<'a>(help: &'a str, heading: &str) -> &'a str {
    let start = help
        .find(&format!("\n{heading}:\n"))
        .unwrap_or_else(|| panic!("no {heading:?} section in:\n{help}"));
    let rest = &help[start + heading.len() + 3..];
    let end = rest.find("\n\n").unwrap_or(rest.len());
    &rest[..end]
}

/// `lock -h` shows its options apart from the connection, TLS and SASL ones; `server -h`
/// shows only what applies to it, and refuses a connection option.
#[test]
fn help_is_grouped_and_server_shows_only_its_options() {
    let (code, help, _) = output(bare().args(["lock", "-h"]));
    assert_eq!(code, 0);
    let options = section(&help, "Options");
    assert!(options.contains("--permits"), "{options}");
    for other in [
        "--connect",
        "--tls-ca",
        "--sasl-user",
        "--timeout",
        "--kill-after",
    ] {
        assert!(
            !options.contains(other),
            "{other} among the options:\n{help}"
        );
    }
    assert!(section(&help, "Waiting").contains("--timeout"), "{help}");
    assert!(section(&help, "While CMD runs").contains("--on-suspend"));
    assert!(section(&help, "Connection").contains("--connect-timeout"));
    assert!(section(&help, "TLS").contains("--tls-cert"));
    assert!(section(&help, "SASL").contains("--sasl-password-file"));

    let (code, help, _) = output(bare().args(["server", "-h"]));
    assert_eq!(code, 0);
    for absent in [
        "--connect",
        "--tls",
        "--sasl",
        "--auth",
        "--session-timeout",
    ] {
        assert!(!help.contains(absent), "server -h lists {absent}:\n{help}");
    }
    assert!(
        help.contains("--port") && help.contains("--quiet"),
        "{help}"
    );
    for args in [
        &["server", "--tls-ca", "ca.pem"][..],
        &["--connect", "127.0.0.1:2181", "server"],
    ] {
        let (code, _, err) = output(bare().args(args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("does not apply to `zkguard server`"), "{err}");
    }
}

/// flock's habits: a command without `--` is answered with where it goes; `-w SECONDS`,
/// bare seconds for `--timeout` (units still work), `-w 0` as `--nonblock`, and `-c`
/// with a shell command line.
#[test]
fn flock_habits_work_or_get_a_hint() {
    let (cs, s, path) = setup("flock-habits");
    for (args, hint) in [
        (
            vec!["lock", &path, "cat", "x"],
            format!("zkguard lock {path} -- cat"),
        ),
        (
            vec!["elect", &path, "-w", "2", "./x"],
            format!("zkguard elect {path} -- ./x"),
        ),
    ] {
        let (code, _, err) = output(zkguard(&cs).args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&hint), "{args:?}: no hint {hint:?}: {err}");
    }

    let mut holder = start_sh(
        &cs,
        &s,
        "holder",
        &["lock", &path],
        &until_file(&s.path("go")),
    );
    wait_contenders(&client(&cs), &path, 1);
    let ran = s.path("ran");
    for (flag, value, at_least) in [
        ("-w", "0.7", Duration::from_millis(700)),
        ("--timeout", "1", Duration::from_secs(1)),
        ("--wait", "300ms", Duration::from_millis(300)),
        ("-w", "0", Duration::ZERO),
    ] {
        let t = Instant::now();
        let (code, _, err) = output(
            zkguard(&cs)
                .args(["lock", &path, flag, value, "--", "touch"])
                .arg(&ran),
        );
        assert_eq!(code, 1, "{flag} {value}: {err}");
        assert!(
            err.contains("did not get the lock"),
            "{flag} {value}: {err}"
        );
        assert!(t.elapsed() >= at_least, "{flag} {value}: gave up early");
    }
    assert!(!ran.exists(), "a command ran without the lock");
    s.touch("go");
    assert_eq!(holder.wait(PATIENCE), 0, "{}", holder.stderr());

    // -c: a shell command line, as flock -c.
    let line = format!(
        "echo \"$ZKGUARD_PATH\" > '{}'; exit 3",
        s.path("c").display()
    );
    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "-c", &line]));
    assert_eq!(code, 3, "{err}");
    assert_eq!(s.lines("c"), [path.as_str()]);
}

/// With nothing listening at the connect string, zkguard says so while it keeps trying
/// (not silently for the whole connect timeout), naming the address and how to fix it.
#[test]
fn nothing_listening_is_said_while_still_trying() {
    let s = Scratch::new();
    let mut c = bare();
    c.args(["--connect", "127.0.0.1:1", "--connect-timeout", "10m"])
        .args(["holders", "/cli/x"]);
    let mut z = Running::start(c, &s, "unreachable");
    let deadline = Instant::now() + PATIENCE;
    let err = loop {
        let err = z.stderr();
        if err.contains("no ZooKeeper answers at 127.0.0.1:1") {
            break err;
        }
        if let Some(st) = z.child.try_wait().unwrap() {
            // A client that gives up early on refused connections is fine too.
            assert_eq!(exit_code(st), 69, "{err}");
            assert!(err.contains("127.0.0.1:1"), "{err}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "silent for {PATIENCE:?}: {err:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(err.contains("still trying"), "{err}");
    assert!(
        err.contains("ZK_CONNECT") && err.contains("zkguard server"),
        "{err}"
    );
    assert!(z.child.try_wait().unwrap().is_none(), "gave up: {err}");
}

/// A listener on a free loopback port below the kernel's ephemeral range, so that once it
/// is closed no outgoing connection takes the port as its source port meanwhile.
fn below_ephemeral_range() -> std::net::TcpListener {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let span = u128::from(low.saturating_sub(10_000).max(1));
    (0..500)
        .map(|_| 10_000 + (uuid::Uuid::new_v4().as_u128() % span) as u16)
        .find_map(|port| std::net::TcpListener::bind(("127.0.0.1", port)).ok())
        .unwrap_or_else(|| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
}

/// `server --port P` serves at 127.0.0.1:P; a taken port is one line and status 69.
#[test]
fn server_port_is_the_one_asked_for() {
    let taken = below_ephemeral_range();
    let port = taken.local_addr().unwrap().port().to_string();
    let (code, _, err) = output(bare().args(["server", "--port", &port]));
    assert_eq!(code, 69, "{err}");
    assert!(err.contains(&format!("port {port}")), "{err}");
    drop(taken);

    let mut server = bare()
        .args(["server", "--port", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = first_line(&mut server);
    assert_eq!(line.trim(), format!("127.0.0.1:{port}"));
    let c = client(line.trim());
    assert!(c.exists("/").unwrap().is_some());
    c.close();
    // SAFETY: a plain kill(2) of our own child.
    unsafe {
        libc::kill(server.id() as i32, libc::SIGINT);
    }
    let deadline = Instant::now() + PATIENCE;
    while server.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "server did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Without a command (as `etcdctl lock` and `etcdctl elect`), `lock` holds and `elect`
/// leads until signalled, then lets go and exits with 0.
#[test]
fn without_a_command_it_holds_until_signalled() {
    let (cs, s, path) = setup("no-command");
    let start = |args: &[&str], name: &str| {
        let mut c = zkguard(&cs);
        c.args(args);
        Running::start(c, &s, name)
    };
    let mut holder = start(&["lock", &path], "holder");
    holder.wait_stderr("holding it until signalled");
    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "-n", "--", "true"]));
    assert_eq!(code, 1, "the lock was free: {err}");
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.wait(PATIENCE), 0, "{}", holder.stderr());
    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "-n", "--", "true"]));
    assert_eq!(code, 0, "not released: {err}");

    let election = unique("no-command-elect");
    let mut leader = start(&["elect", &election, "--id", "solo"], "leader");
    leader.wait_stderr("holding it until signalled");
    let (code, out, err) = output(zkguard(&cs).args(["leader", &election, "--json"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"leader\":\"solo\""), "{out}");
    leader.signal(libc::SIGINT);
    assert_eq!(leader.wait(PATIENCE), 0, "{}", leader.stderr());
}
