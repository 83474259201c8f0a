//! zkguard's secrets stay with zkguard: the command it runs under `lock` and `elect` does
//! not see the credentials' variables in its environment; the user's own variables pass.

use crate::common::*;
use crate::setup;

/// The environment a `zkguard ARGS -- sh -c 'env > FILE'` command saw, with
/// `ZKGUARD_AUTH` and `ZKGUARD_SASL_PASSWORD` set for zkguard.
fn env_seen(cs: &str, s: &Scratch, name: &str, args: &[&str]) -> Vec<String> {
    let file = s.path(name);
    let (code, _, err) = output(
        zkguard(cs)
            .env("ZKGUARD_AUTH", "alice:s3cret-auth")
            .env("ZKGUARD_SASL_PASSWORD", "s3cret-sasl")
            .env("ZKGUARD_TEST_ORDINARY", "plain-value")
            .args(args)
            .args(["--", "sh", "-c"])
            .arg(format!("env > '{}'", file.display())),
    );
    assert_eq!(code, 0, "{args:?}: {err}");
    s.lines(name)
}

#[test]
fn the_command_does_not_see_the_credentials_variables() {
    let (cs, s, path) = setup("secrets");
    let election = unique("secrets-elect");
    for (name, args) in [
        ("lock.env", vec!["lock", path.as_str()]),
        ("elect.env", vec!["elect", election.as_str(), "--id", "e-1"]),
    ] {
        let env = env_seen(&cs, &s, name, &args);
        assert!(
            env.iter().any(|l| l == "ZKGUARD_TEST_ORDINARY=plain-value"),
            "{args:?}: the user's own variable is missing: {env:?}"
        );
        assert!(
            env.iter().any(|l| l.starts_with("ZKGUARD_TOKEN=")),
            "{args:?}: not the command's environment: {env:?}"
        );
        for secret in ["ZKGUARD_AUTH=", "ZKGUARD_SASL_PASSWORD="] {
            assert!(
                !env.iter().any(|l| l.starts_with(secret)),
                "{args:?}: the command sees {secret}…: {env:?}"
            );
        }
        let all = env.concat();
        assert!(
            !all.contains("s3cret"),
            "{args:?}: a secret reached the command: {env:?}"
        );
    }
}

/// The watchdog `lock` starts beside its command is zkguard's own binary again: its
/// environment (`/proc/PID/environ`, readable by the user's other processes) holds none of
/// zkguard's secrets either. Before the scrub it held `ZKGUARD_AUTH` and
/// `ZKGUARD_SASL_PASSWORD` as given.
#[test]
fn the_watchdog_does_not_keep_the_credentials_variables() {
    let (cs, s, path) = setup("secrets-dog");
    let mut c = zkguard(&cs);
    c.env("ZKGUARD_AUTH", "alice:s3cret-auth")
        .env("ZKGUARD_SASL_PASSWORD", "s3cret-sasl")
        .env("ZKGUARD_TEST_ORDINARY", "plain-value")
        .args(["lock", &path, "--", "sh", "-c"])
        .arg(s.ticker(""));
    let mut a = Running::start(c, &s, "a");
    s.ticker_pid();
    let dog = crate::frozen::watchdog_of(a.pid());
    let environ = std::fs::read(format!("/proc/{dog}/environ")).expect("the watchdog's environ");
    let vars: Vec<String> = environ
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert!(
        vars.iter()
            .any(|v| v == "ZKGUARD_TEST_ORDINARY=plain-value"),
        "not the watchdog's environment: {vars:?}"
    );
    for secret in ["ZKGUARD_AUTH=", "ZKGUARD_SASL_PASSWORD="] {
        assert!(
            !vars.iter().any(|v| v.starts_with(secret)),
            "the watchdog keeps {secret}…: {vars:?}"
        );
    }
    assert!(
        !vars.concat().contains("s3cret"),
        "a secret in the watchdog's environment: {vars:?}"
    );
    s.touch("go");
    assert_eq!(a.wait(PATIENCE), 0, "{}", a.stderr());
}

/// What the open-ACL warning says.
const OPEN_ACL: &str = "get the open ACL";

/// Credentials without `--acl`: `lock` and `elect` warn once that their nodes get the open
/// ACL and name `--acl creator` and `--acl creator-read`; not with an explicit `--acl`
/// (`open` included), not without credentials, not with `--quiet`.
#[test]
fn credentials_without_acl_warn_once_that_the_nodes_are_open() {
    let (cs, _s, path) = setup("open-acl");
    let election = unique("open-acl-elect");
    let run = |env_auth: bool, args: &[&str]| {
        let mut c = zkguard(&cs);
        if env_auth {
            c.env("ZKGUARD_AUTH", "alice:alice-pw");
        }
        let (code, _, err) = output(c.args(args).args(["--", "true"]));
        assert_eq!(code, 0, "{args:?}: {err}");
        err
    };
    let auth = ["--auth", "alice:alice-pw"];
    for (env_auth, args) in [
        (false, [&auth[..], &["lock", &path]].concat()),
        (true, vec!["lock", &path, "--read"]),
        (true, vec!["elect", &election, "--id", "e-1"]),
    ] {
        let err = run(env_auth, &args);
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains(OPEN_ACL)).collect();
        assert_eq!(warnings.len(), 1, "{args:?}: not one warning:\n{err}");
        let w = warnings[0];
        assert!(
            w.starts_with("zkguard: warning: ")
                && w.contains("--acl creator ")
                && w.contains("--acl creator-read"),
            "{args:?}: {w}"
        );
    }
    let other = unique("open-acl-quiet");
    for (env_auth, args) in [
        (true, vec!["lock", &path, "--acl", "open"]),
        (true, vec!["lock", &other, "--acl", "creator"]),
        (
            true,
            vec!["elect", &election, "--acl", "open", "--id", "e-2"],
        ),
        (false, vec!["lock", &path]),
        (true, vec!["lock", &path, "-q"]),
    ] {
        let err = run(env_auth, &args);
        assert!(!err.contains(OPEN_ACL), "{args:?} warned:\n{err}");
    }
}

/// What the cleartext warning says.
const CLEARTEXT: &str = "without TLS";

/// Credentials without TLS: one warning a run (however many sessions the command makes:
/// `doctor --path` makes five), saying what an observer on the path can do and how to turn
/// TLS on; none without credentials, none with `--quiet`. (With TLS: none, in
/// `tls_and_sasl_flags_reach_a_secured_server_and_bad_ones_fail_clearly`.)
#[test]
fn credentials_without_tls_warn_once_what_an_observer_can_do() {
    let (cs, _s, path) = setup("cleartext");
    // Paths of their own: `path`'s directory, a container with alice's ACL, is removed by
    // the server at some time once empty.
    let (open, quiet) = (unique("cleartext-open"), unique("cleartext-quiet"));
    let auth = ["--auth", "alice:alice-pw"];
    let run = |args: &[&str]| {
        let (code, _, err) = output(zkguard(&cs).args(args));
        (code, err)
    };
    for args in [
        [
            &auth[..],
            &["lock", &path, "--acl", "creator", "--", "true"],
        ]
        .concat(),
        [
            &auth[..],
            &["doctor", "--path", &path, "--probe-rounds", "1"],
        ]
        .concat(),
        [&auth[..], &["holders", &path]].concat(),
    ] {
        let (_, err) = run(&args);
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains(CLEARTEXT)).collect();
        assert_eq!(warnings.len(), 1, "{args:?}: not one warning:\n{err}");
        let w = warnings[0];
        assert!(
            w.starts_with("zkguard: warning: ")
                && w.contains("read the password")
                && w.contains("close it")
                && w.contains("--tls-ca"),
            "{args:?}: {w}"
        );
    }
    for args in [
        vec!["lock", &open, "--", "true"],
        vec!["holders", &open],
        [
            &auth[..],
            &["-q", "lock", &quiet, "--acl", "creator", "--", "true"],
        ]
        .concat(),
    ] {
        let (code, err) = run(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!err.contains(CLEARTEXT), "{args:?} warned:\n{err}");
    }
}
