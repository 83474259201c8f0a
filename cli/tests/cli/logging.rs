//! The library's log records on zkguard's stderr: warnings by default, more with `-v`,
//! fewer with `--quiet`, and `RUST_LOG` deciding when it is set.

use crate::common::*;

/// The info record the library writes once a session exists ("new session 0x… via ADDR,
/// session timeout …").
const CONNECTED: &str = "session timeout";

fn holders(cs: &str, path: &str, flags: &[&str], rust_log: Option<&str>) -> String {
    let mut c = zkguard(cs);
    if let Some(filters) = rust_log {
        c.env("RUST_LOG", filters);
    }
    let (code, _, err) = output(c.args(flags).args(["holders", path]));
    assert_eq!(code, 0, "{flags:?} RUST_LOG={rust_log:?}: {err}");
    for line in err.lines() {
        assert!(
            is_log_record(line) || line.starts_with("zkguard: "),
            "a line that is neither zkguard's nor a whole record: {line:?} in\n{err}"
        );
    }
    err
}

#[test]
fn verbose_shows_the_librarys_info_records_and_rust_log_decides_when_set() {
    let cs = cluster().connect_string();
    let path = unique("logging");
    let quiet_default = holders(&cs, &path, &[], None);
    assert!(!quiet_default.contains(CONNECTED), "{quiet_default}");

    let verbose = holders(&cs, &path, &["-v"], None);
    let record = verbose
        .lines()
        .find(|l| l.contains(CONNECTED))
        .unwrap_or_else(|| panic!("-v: no connect record:\n{verbose}"));
    assert!(
        record.starts_with("[INFO ") && record.contains("zkguard::client"),
        "{record}"
    );
    // After the subcommand too (a global flag), and more of it with -vv.
    let debug = holders(&cs, &path, &["--verbose", "--verbose"], None);
    assert!(
        debug.contains(" DEBUG "),
        "-vv shows no debug record:\n{debug}"
    );

    // RUST_LOG, when set, decides: info without -v, and nothing below error with -v.
    let by_env = holders(&cs, &path, &[], Some("zkguard=info"));
    assert!(
        by_env.contains(CONNECTED),
        "RUST_LOG=zkguard=info:\n{by_env}"
    );
    let env_wins = holders(&cs, &path, &["-v"], Some("error"));
    assert!(
        !env_wins.contains(CONNECTED),
        "RUST_LOG=error -v:\n{env_wins}"
    );
}

/// Nothing answers at the address: the library warns that it keeps trying (every server
/// failed), and zkguard shows the warning by default, not with `--quiet`.
#[test]
fn the_librarys_warnings_show_by_default_and_not_with_quiet() {
    let unreachable = |flags: &[&str]| {
        let (code, _, err) = output(
            std::process::Command::new(env!("CARGO_BIN_EXE_zkguard"))
                .env_remove("RUST_LOG")
                .args(["--connect", "127.0.0.1:1", "--connect-timeout", "1s"])
                .args(flags)
                .args(["holders", "/cli/logging-unreachable"]),
        );
        assert_eq!(code, 69, "{err}");
        err
    };
    let err = unreachable(&[]);
    let warning = err
        .lines()
        .find(|l| l.contains("no ZooKeeper session yet"))
        .unwrap_or_else(|| panic!("no library warning:\n{err}"));
    assert!(warning.starts_with("[WARN "), "{warning}");
    let own = own_lines(&err);
    assert_eq!(own.len(), 1, "{err}");
    assert!(
        own[0].starts_with("zkguard: cannot connect to 127.0.0.1:1"),
        "{err}"
    );
    let quiet = unreachable(&["-q"]);
    assert!(
        !quiet.contains("[WARN"),
        "--quiet showed a warning:\n{quiet}"
    );
    assert_eq!(own_lines(&quiet).len(), 1, "{quiet}");
}
