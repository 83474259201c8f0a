//! `zkguard revoke` and `zkguard break` against a lock held by another `zkguard lock`
//! process on a real server: the holder lets go when revoked (its command gets SIGTERM,
//! the lock is released after it exits), loses the lock when broken (its command is
//! terminated, exit 75), and an identity the ACL refuses gets 77 naming the ACL.

mod common;

use common::*;

/// A `zkguard lock PATH` holder running a ticker that traps SIGTERM (exits 7), as `name`.
fn holder(cs: &str, s: &Scratch, path: &str, extra: &[&str]) -> Running {
    let mut args = vec!["lock", path, "--data", "holder-h", "--kill-after", "30s"];
    args.extend_from_slice(extra);
    start_sh(
        cs,
        s,
        "holder",
        &args,
        &s.ticker(&format!(
            "trap 'echo term >> \"{}\"; exit 7' TERM;",
            s.path("term").display()
        )),
    )
}

/// The holder's node: its full path and its session (from the library, not the CLI).
fn held_node(c: &zkguard::Client, path: &str) -> (String, i64) {
    let lock = zkguard::Mutex::new(c, path).unwrap();
    let ps = lock.participants().unwrap();
    let node = format!("{path}/{}", ps[0].node);
    let stat = c.exists(&node).unwrap().expect("the holder's node");
    (node, stat.ephemeral_owner)
}

/// `revoke` writes Curator's request into the holder's node; the `zkguard lock` holder
/// sends SIGTERM to its command, which exits 7, and releases: the node is gone, zkguard
/// exits with 7. With nobody holding, `revoke` says so and exits 1.
#[test]
fn revoke_makes_a_zkguard_holder_let_go() {
    let cs = cluster().connect_string();
    let (s, path) = (Scratch::new(), unique("revoke"));
    let c = client(&cs);
    let mut h = holder(&cs, &s, &path, &[]);
    s.ticker_pid();
    let (node, _) = held_node(&c, &path);

    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("asked {node}")), "{err}");
    assert_eq!(h.wait(PATIENCE), 7, "{}", h.stderr());
    assert!(h.stderr().contains("asked to let go"), "{}", h.stderr());
    assert_eq!(s.lines("term"), ["term"], "SIGTERM, once");
    assert_eq!(
        c.exists(&node).unwrap(),
        None,
        "released after the command exited"
    );

    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nobody holds"), "{err}");
}

/// `revoke` on an election asks its leader (a `zkguard elect` leader lets go as a lock's
/// holder does: SIGTERM, resigned after its command exits, and the candidate behind it, a
/// library candidate, is told nothing and leads); on a semaphore it asks each permit's
/// holder (the `zkguard lock --permits` holder lets go, the library holder is told on its
/// guard).
#[test]
fn revoke_reaches_an_elections_leader_and_every_permits_holder() {
    let cs = cluster().connect_string();
    let c = client(&cs);
    let trap = |s: &Scratch| {
        s.ticker(&format!(
            "trap 'echo term >> \"{}\"; exit 7' TERM;",
            s.path("term").display()
        ))
    };

    let (s, path) = (Scratch::new(), unique("revoke-elect"));
    let args = ["elect", &path, "--id", "leader-h", "--kill-after", "30s"];
    let mut h = start_sh(&cs, &s, "leader", &args, &trap(&s));
    s.ticker_pid();
    let behind = zkguard::LeaderElection::new(&c, &path, "behind")
        .unwrap()
        .join()
        .unwrap();
    let events = behind.events();
    wait_contenders(&c, &path, 2);
    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("leader-h"), "{err}");
    assert!(err.contains("warning: a Curator LeaderLatch"), "{err}");
    assert_eq!(h.wait(PATIENCE), 7, "{}", h.stderr());
    assert_eq!(s.lines("term"), ["term"], "SIGTERM, once");
    match events.recv_timeout(PATIENCE) {
        Ok(zkguard::LeaderEvent::Elected { .. }) => {}
        other => panic!("the candidate behind: {other:?}"),
    }

    let (s, path) = (Scratch::new(), unique("revoke-sem"));
    let args = ["lock", &path, "--permits", "2", "--kill-after", "30s"];
    let mut h = start_sh(&cs, &s, "holder", &args, &trap(&s));
    s.ticker_pid();
    let sem = zkguard::Semaphore::new(&c, &path, 2).unwrap();
    let permit = sem.acquire().unwrap();
    let revoked = permit.revocation();
    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(permit.path()), "{err}");
    assert!(!err.contains("LeaderLatch"), "{err}");
    assert_eq!(h.wait(PATIENCE), 7, "{}", h.stderr());
    revoked
        .recv_timeout(PATIENCE)
        .expect("the library holder told");
    assert!(permit.is_valid(), "a revocation is a request, not a loss");
    permit.release().unwrap();
}

/// A library holder sees the CLI's revocation on its guard (`--node` names it).
#[test]
fn revoke_reaches_a_library_guard() {
    let cs = cluster().connect_string();
    let path = unique("revoke-lib");
    let c = client(&cs);
    let lock = zkguard::Mutex::new(&c, &path).unwrap();
    let g = lock.acquire().unwrap();
    let revoked = g.revocation();
    let name = g.path().rsplit('/').next().unwrap().to_string();
    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path, "--node", &name]));
    assert_eq!(code, 0, "{err}");
    revoked
        .recv_timeout(PATIENCE)
        .expect("the revocation request");
    assert!(g.is_valid(), "a revocation is a request, not a loss");
    g.release().unwrap();
}

/// `break` without `--yes` and without a terminal refuses (2) and leaves the node; with
/// `--yes` it names the holder's session and data, deletes its node, and the holder's
/// command is terminated (SIGTERM, its trap runs) and zkguard exits 75.
#[test]
fn break_deletes_the_holders_node_and_its_command_is_terminated() {
    let cs = cluster().connect_string();
    let (s, path) = (Scratch::new(), unique("break"));
    let c = client(&cs);
    let mut h = holder(&cs, &s, &path, &[]);
    let pid = s.ticker_pid();
    let (node, session) = held_node(&c, &path);

    let (code, _, err) = output(zkguard(&cs).args(["break", &path, "--holder"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(
        c.exists(&node).unwrap().is_some(),
        "not deleted without --yes"
    );

    let (code, _, err) = output(zkguard(&cs).args([
        "break",
        &path,
        "--node",
        "nope-0000000001",
        "--yes",
        "--now",
    ]));
    assert_eq!(code, 1, "{err}");
    let (code, _, err) =
        output(zkguard(&cs).args(["break", &path, "--node", "/elsewhere/x", "--yes", "--now"]));
    assert_eq!(code, 2, "{err}");

    let (code, _, err) = output(zkguard(&cs).args(["break", &path, "--holder", "--yes", "--now"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("session 0x{session:x}")), "{err}");
    assert!(err.contains("holder-h") && err.contains("ago"), "{err}");
    assert_eq!(h.wait(PATIENCE), 75, "{}", h.stderr());
    assert!(h.stderr().contains("was lost"), "{}", h.stderr());
    assert!(is_dead(pid), "the command was terminated");
    assert_eq!(s.lines("term"), ["term"], "by SIGTERM, its trap ran");
    assert_eq!(c.exists(&node).unwrap(), None);
}

/// A lock whose nodes only alice may change (`--acl creator-read`: others may read): bob's
/// `break` and `revoke` are refused with 77 naming the ACL, and alice's command runs on.
/// With `--acl creator` bob may not even list the lock: 77 too, saying so.
#[test]
fn an_acl_refusal_is_77_naming_the_acl() {
    let cs = cluster().connect_string();
    let (s, path) = (Scratch::new(), unique("break-acl"));
    let alice = ["--auth", "alice:alice-pw", "--acl", "creator-read"];
    let mut h = holder(&cs, &s, &path, &alice);
    s.ticker_pid();
    let bob = |args: &[&str]| output(zkguard(&cs).args(["--auth", "bob:bob-pw"]).args(args));

    let (code, _, err) = bob(&["break", &path, "--holder", "--yes", "--now"]);
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains(&format!("the ACL of {path} is [digest:alice:")),
        "{err}"
    );
    let (code, _, err) = bob(&["revoke", &path]);
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains("is [digest:alice:") && err.contains("world:anyone r"),
        "{err}"
    );

    let ticks = s.lines("ticks").len();
    s.wait_ticks_after(ticks, 3);
    s.touch("go");
    assert_eq!(h.wait(PATIENCE), 0, "{}", h.stderr());

    let (s2, closed) = (Scratch::new(), unique("break-closed"));
    let mut h = holder(
        &cs,
        &s2,
        &closed,
        &["--auth", "alice:alice-pw", "--acl", "creator"],
    );
    s2.ticker_pid();
    let (code, _, err) = bob(&["break", &closed, "--holder", "--yes", "--now"]);
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains(&format!("the ACL of {closed} is unreadable")),
        "{err}"
    );
    s2.touch("go");
    assert_eq!(h.wait(PATIENCE), 0, "{}", h.stderr());
}

/// Runs `zkguard break ARGS` on a terminal (`script(1)` gives it one), waits until its
/// question is on the screen, runs `meanwhile`, then types `reply`: its exit status and
/// everything it said.
fn break_on_a_terminal(
    cs: &str,
    args: &[&str],
    meanwhile: impl FnOnce(),
    reply: &str,
) -> (i32, String) {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};

    let line = format!(
        "'{}' --connect {cs} break {}",
        env!("CARGO_BIN_EXE_zkguard"),
        args.join(" ")
    );
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("[y/N]") {
        let n = out.read(&mut buf).unwrap();
        assert!(n > 0, "no question: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    meanwhile();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{reply}\n").as_bytes())
        .unwrap();
    let _ = out.read_to_end(&mut seen);
    let code = exit_code(child.wait().unwrap());
    (code, String::from_utf8_lossy(&seen).into_owned())
}

/// On a terminal it asks first: `n` leaves the node and exits 1, `y` deletes it. The
/// answer is typed only once the question is on the screen.
#[test]
fn break_asks_on_a_terminal() {
    let cs = cluster().connect_string();
    let (s, path) = (Scratch::new(), unique("break-tty"));
    let c = client(&cs);
    let mut h = holder(&cs, &s, &path, &[]);
    s.ticker_pid();
    let (node, _) = held_node(&c, &path);
    let (code, said) = break_on_a_terminal(&cs, &[&path, "--holder"], || {}, "n");
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("not deleted"), "{said}");
    assert!(c.exists(&node).unwrap().is_some());
    let (code, said) = break_on_a_terminal(&cs, &[&path, "--holder"], || {}, "y");
    assert_eq!(code, 0, "{said}");
    assert_eq!(h.wait(PATIENCE), 75, "{}", h.stderr());
    assert_eq!(c.exists(&node).unwrap(), None);
}

/// A node at a fixed path that changes hands while `break` asks (its holder lets go, another
/// client makes the node again: a new node at the same path, whose data version starts at
/// 0 again, as the one shown was) is not the node shown: `break` deletes nothing, exits 1
/// and says so; the new holder keeps its node (`revoke` refuses an unfair lock: its data is
/// the holder's owner id). Two such nodes: a node with a contender's
/// name in a lock directory made by another program, and an unfair lock's node (the path
/// itself).
#[test]
fn break_deletes_nothing_when_the_node_changed_hands_while_it_asked() {
    let cs = cluster().connect_string();
    let (first, second) = (client(&cs), client(&cs));
    // A fixed name that lists as the lock's holder.
    let dir = unique("break-fixed");
    second.ensure_path(&dir).unwrap();
    let node = format!("{dir}/_c_fixed-lock-0000000001");
    let make = |c: &zkguard::Client, data: &[u8]| {
        c.create(&node, data, zkguard::CreateMode::Ephemeral)
            .unwrap();
    };
    make(&first, b"first holder");
    let (code, said) = break_on_a_terminal(
        &cs,
        &[&dir, "--holder"],
        || {
            first.delete(&node, None).unwrap();
            make(&second, b"second holder");
        },
        "y",
    );
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("first holder"),
        "the first node was shown: {said}"
    );
    assert!(
        said.contains("changed hands") && said.contains("not deleted"),
        "{said}"
    );
    let now = second
        .exists(&node)
        .unwrap()
        .expect("the second holder's node is left");
    assert_eq!(now.ephemeral_owner, second.session_id());

    // An unfair lock: its node is the path itself.
    let path = unique("break-unfair");
    let taken = zkguard::UnfairMutex::new(&first, &path)
        .unwrap()
        .acquire()
        .unwrap();
    let lock = zkguard::UnfairMutex::new(&second, &path).unwrap();
    let mut next = None;
    let (code, said) = break_on_a_terminal(
        &cs,
        &[&path, "--holder"],
        || {
            taken.release().unwrap();
            next = Some(lock.acquire().unwrap());
        },
        "y",
    );
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("changed hands"), "{said}");
    let next = next.unwrap();
    assert!(next.is_valid(), "the new holder keeps the lock");
    next.confirm()
        .expect("the new holder's node is still there");
    // Its data is the holder's owner id: `revoke` writes nothing there.
    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unfair"), "{err}");
    next.confirm().expect("the holder's node untouched");
}

/// A semaphore's lease `NAME` lives in `PATH/leases`; another client puts a node of the
/// same name right in `PATH` (open to all). `revoke --node NAME` and `break --node NAME`
/// look for `NAME` only where the listing found it, and the listing refuses a semaphore
/// directory holding a node no lock made (77, naming it): the decoy is never written or
/// deleted, and neither is the lease.
#[test]
fn break_and_revoke_never_touch_a_same_named_node_elsewhere() {
    let cs = cluster().connect_string();
    let (holder, other) = (client(&cs), client(&cs));
    let path = unique("break-decoy");
    let sem = zkguard::Semaphore::new(&holder, &path, 2).unwrap();
    let lease = sem.acquire().unwrap();
    let name = lease.path().rsplit('/').next().unwrap().to_string();
    assert_eq!(lease.path(), format!("{path}/leases/{name}"));
    let (before, _) = holder.get_data(lease.path()).unwrap();
    let decoy = format!("{path}/{name}");
    other
        .create(&decoy, b"decoy", zkguard::CreateMode::Ephemeral)
        .unwrap();

    for args in [
        vec!["revoke", &path, "--node", &name],
        vec!["break", &path, "--node", &name, "--yes", "--now"],
        vec!["break", &path, "--holder", "--yes", "--now"],
    ] {
        let (code, _, err) = output(zkguard(&cs).args(&args));
        assert_eq!(code, 77, "{args:?}: {err}");
        assert!(
            err.contains(&format!("holds \"{name}\"")),
            "{args:?}: {err}"
        );
    }
    let (data, _) = other.get_data(&decoy).expect("the decoy is left");
    assert_eq!(data, b"decoy", "and never written");
    let (data, _) = holder.get_data(lease.path()).expect("the lease is left");
    assert_eq!(data, before, "and never written");
    assert!(lease.is_valid());
}

/// `revoke --wait` on a holder whose command is stopped (SIGSTOP, by someone else): the
/// holder continues it (SIGCONT) along with the SIGTERM, it exits, the lock is released,
/// and `revoke` says so, exit 0.
#[test]
fn revoke_wait_frees_a_lock_whose_command_is_stopped() {
    let cs = cluster().connect_string();
    let (s, path) = (Scratch::new(), unique("revoke-stopped"));
    let c = client(&cs);
    let mut h = start_sh(
        &cs,
        &s,
        "holder",
        &["lock", &path, "--kill-after", "2s"],
        &s.ticker(""),
    );
    let pid = s.ticker_pid();
    let (node, _) = held_node(&c, &path);
    // SAFETY: a plain kill(2) of the ticker, a process of this test's.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
    }
    wait_until(|| "the command stopped".into(), || group_stopped(pid));

    let asked = std::time::Instant::now();
    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path, "--wait", "20s"]));
    eprintln!(
        "revoke --wait on a stopped command (--kill-after 2s) returned after {:.2} s",
        asked.elapsed().as_secs_f64()
    );
    assert_eq!(code, 0, "{err}\nholder:\n{}", h.stderr());
    assert!(err.contains("let go"), "{err}");
    assert_eq!(c.exists(&node).unwrap(), None);
    assert_eq!(h.wait(PATIENCE), 128 + 15, "{}", h.stderr());
}

/// A command that ignores SIGTERM gets SIGKILL after `--kill-after`: `revoke --wait` sees
/// the lock released, and the holder exits with 137.
#[test]
fn revoke_escalates_to_sigkill_on_a_command_ignoring_sigterm() {
    let cs = cluster().connect_string();
    let (s, path) = (Scratch::new(), unique("revoke-deaf"));
    let c = client(&cs);
    let mut h = start_sh(
        &cs,
        &s,
        "holder",
        &["lock", &path, "--kill-after", "1s"],
        &s.ticker("trap '' TERM;"),
    );
    s.ticker_pid();
    let (node, _) = held_node(&c, &path);

    let asked = std::time::Instant::now();
    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path, "--wait", "30s"]));
    eprintln!(
        "revoke --wait on a command ignoring SIGTERM (--kill-after 1s) returned after {:.2} s",
        asked.elapsed().as_secs_f64()
    );
    assert_eq!(code, 0, "{err}\nholder:\n{}", h.stderr());
    assert_eq!(c.exists(&node).unwrap(), None);
    assert_eq!(h.wait(PATIENCE), 128 + 9, "{}", h.stderr());
    assert!(h.stderr().contains("SIGKILL"), "{}", h.stderr());
}

/// A holder that cannot let go (its zkguard frozen): `revoke --wait` gives up at the
/// deadline, exit 75, naming the node it still saw and its session.
#[test]
fn revoke_wait_names_a_holder_that_did_not_let_go() {
    let cs = cluster().connect_string();
    let (s, path) = (Scratch::new(), unique("revoke-frozen"));
    let c = client(&cs);
    let h = holder(&cs, &s, &path, &["--session-timeout", "20s"]);
    s.ticker_pid();
    let (node, session) = held_node(&c, &path);
    h.signal(libc::SIGSTOP);

    let (code, _, err) = output(zkguard(&cs).args(["revoke", &path, "--wait", "1s"]));
    h.signal(libc::SIGCONT);
    assert_eq!(code, 75, "{err}");
    assert!(err.contains("still held after 1s"), "{err}");
    assert!(err.contains(&node), "{err}");
    assert!(err.contains(&format!("session 0x{session:x}")), "{err}");
}
