//! Bad paths and bad connect strings: refused by the library's own checks
//! (`zkguard::validate_path`, `zkguard::ConnectString`) before any connection, one line on
//! stderr naming what is wrong, escaped, exit 2.

use crate::common::*;

/// A loopback address nothing listens on: a command that connected would wait there for
/// its whole connect timeout (20 s) and exit 69, not 2.
fn nobody() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    drop(l);
    addr.to_string()
}

/// Every command that takes a path, with `path` in its place.
fn commands(path: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["lock", path, "--", "true"],
        vec!["elect", path, "--", "true"],
        vec!["holders", path],
        vec!["leader", path],
        vec!["revoke", path],
        vec!["break", path, "--holder", "--yes"],
        vec!["mkdir", path, "--acl", "creator"],
        vec!["doctor", "--path", path],
    ]
}

#[test]
fn bad_paths_are_refused_before_connecting_named_and_escaped() {
    let cs = nobody();
    for (path, says) in [
        ("", "empty path"),
        ("locks/x", "must start with '/'"),
        ("/locks/x/", "must not end with '/'"),
        ("/locks//x", "empty segment"),
        ("/locks/./x", "relative segment"),
        ("/locks/..", "relative segment"),
        ("/", "a lock or an election needs a directory of its own, not the root; give one like /locks/nightly"),
        ("/locks/\u{1b}[2Jx", "a character ZooKeeper does not allow"),
        ("/locks/\u{85}x", "a character ZooKeeper does not allow"),
        ("/locks/\u{7f}", "a character ZooKeeper does not allow"),
    ] {
        for args in commands(path) {
            let (code, out, err) = output(zkguard(&cs).args(&args));
            assert_eq!(code, 2, "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.contains("invalid path") && err.contains(says),
                "{args:?}: {err}"
            );
            assert!(
                !err.contains(['\u{1b}', '\u{85}', '\u{7f}']),
                "{args:?}: {err:?}"
            );
            assert!(out.is_empty(), "{args:?}: {out}");
        }
    }
}

/// `doctor` reaches each server of the connect string alone: it parses the string as the
/// client does, so a bad one is bad input (exit 2, named), not a report about servers
/// that do not exist.
#[test]
fn doctor_refuses_a_bad_connect_string_as_the_client_would() {
    let good = cluster().connect_string();
    for (cs, says) in [
        (format!("{good},,{good}"), "empty host entry".to_string()),
        (
            "127.0.0.1:99999".to_string(),
            r#"bad port "99999""#.to_string(),
        ),
        (format!("{good}:1"), "[addr]:port".to_string()),
        (format!("{good}/app//x"), "bad chroot".to_string()),
        (format!("{good}/app/"), "bad chroot".to_string()),
        (format!("zk://{good}"), "URL scheme".to_string()),
        (format!("{good}/app/\u{1b}[2J"), "bad chroot".to_string()),
    ] {
        let (code, out, err) = output(zkguard(&cs).args(["doctor", "--json"]));
        assert_eq!(code, 2, "{cs:?}: {out} {err}");
        assert!(out.is_empty(), "{cs:?}: {out}");
        assert!(
            err.contains("--connect: invalid connect string") && err.contains(&says),
            "{cs:?}: {err}"
        );
        assert!(!err.contains('\u{1b}'), "{cs:?}: {err:?}");
    }
}
