//! Node data is whoever created the node's: every command that shows it shows it escaped
//! (`zkguard::escape`), never raw, so an escape sequence cannot rewrite the operator's
//! screen and a newline cannot forge a line of output.

use crate::common::*;
use crate::setup;
use zkguard::Lock as _;

/// What a co-tenant writes as its node's data: clear the screen, then a line of its own.
const NASTY: &str = "x\x1b[2J\nHOLDER forged";
/// How it must be shown.
const SHOWN: &str = r"x\x1b[2J\nHOLDER forged";

/// `text` (a command's stdout and stderr) shows the data escaped: no escape byte, no line
/// of the data's making, and the escaped data itself.
fn escaped(what: &str, text: &str) {
    assert!(!text.contains('\x1b'), "{what}: a raw ESC in {text:?}");
    assert!(
        !text.lines().any(|l| l.starts_with("HOLDER forged")),
        "{what}: a forged line in {text:?}"
    );
    assert!(
        text.contains(SHOWN),
        "{what}: the data not shown escaped: {text:?}"
    );
}

/// A mutex held, and an election led, by library clients whose data is [`NASTY`]:
/// `holders`, `holders --json`, `leader` (and `--watch`), `lock`'s "waiting for" line, `revoke`, `doctor
/// --path` and `break` each show it escaped; the JSON still decodes to the data.
#[test]
fn node_data_is_shown_escaped_by_every_command() {
    let (cs, s, path) = setup("escape");
    let c = client(&cs);
    let lock = zkguard::Mutex::new(&c, &path).unwrap().with_data(NASTY);
    let held = lock.acquire().unwrap();
    let election = unique("escape-leader");
    let led = zkguard::LeaderElection::new(&c, &election, NASTY)
        .unwrap()
        .acquire()
        .unwrap();
    let run = |args: &[&str]| {
        let (code, out, err) = output(zkguard(&cs).args(args));
        (code, format!("{out}{err}"), out)
    };

    let (code, said, _) = run(&["holders", &path]);
    assert_eq!(code, 0, "{said}");
    escaped("holders", &said);
    let (code, said, out) = run(&["holders", &path, "--json"]);
    assert_eq!(code, 0, "{said}");
    assert!(!said.contains('\x1b'), "holders --json: {said:?}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["participants"][0]["data"], NASTY, "{v}");

    let (code, said, _) = run(&["leader", &election]);
    assert_eq!(code, 0, "{said}");
    escaped("leader", &said);
    let mut watching = zkguard(&cs)
        .args(["leader", &election, "--watch"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let line = first_line(&mut watching);
    let _ = watching.kill();
    let _ = watching.wait();
    escaped("leader --watch", &line);

    let mut waiting = start_sh(&cs, &s, "waiter", &["lock", &path], "true");
    waiting.wait_stderr("waiting for");
    waiting.signal(libc::SIGTERM);
    assert_eq!(waiting.wait(PATIENCE), 128 + libc::SIGTERM);
    escaped("lock's waiting line", &waiting.stderr());

    let (code, said, _) = run(&["doctor", "--path", &path, "--probe-rounds", "0"]);
    assert!(said.contains("Findings"), "doctor {code}: {said}");
    escaped("doctor --path", &said);

    let (code, said, _) = run(&["revoke", &path]);
    assert_eq!(code, 0, "{said}");
    escaped("revoke", &said);
    // The request replaced the data: the co-tenant writes it again.
    c.set_data(held.path(), NASTY.as_bytes(), None).unwrap();

    let (code, said, _) = run(&["break", &path, "--holder", "--yes", "--now"]);
    assert_eq!(code, 0, "{said}");
    escaped("break", &said);
    assert!(!held.is_valid() || held.lost().recv_timeout(PATIENCE).is_ok());
    drop(led);
}
