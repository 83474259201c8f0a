//! A frozen zkguard (SIGSTOP of its own process, the command left running): its watchdog
//! stops the command before the session can expire, so another holder's command never runs
//! beside it, whether the lock frees by expiry or by `break`.

use std::time::SystemTime;

use crate::common::*;
use crate::setup;

/// A command that appends `NAME SECONDS.NANOS` to `log` every 100 ms (until `stop` exists),
/// its pid first in `NAME.pid`.
fn writer(s: &Scratch, name: &str) -> String {
    format!(
        "echo $$ > '{pid}'; while [ ! -e '{stop}' ]; do echo \"{name} $(date +%s.%N)\" >> '{log}'; \
         sleep 0.1; done",
        pid = s.path(&format!("{name}.pid")).display(),
        stop = s.path("stop").display(),
        log = s.path("log").display(),
    )
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The log's lines as (writer, time).
fn entries(s: &Scratch) -> Vec<(String, f64)> {
    s.lines("log")
        .iter()
        .filter_map(|l| {
            let (who, at) = l.split_once(' ')?;
            Some((who.to_string(), at.parse().ok()?))
        })
        .collect()
}

/// Holder `a` (`session` long, running `job`) and waiter `b` (the plain writer) on `path`,
/// writing into one log: returns once `a`'s command writes and `b` is queued.
fn holder_and_waiter(
    cs: &str,
    s: &Scratch,
    path: &str,
    session: &str,
    job: &str,
) -> (Running, Running) {
    let c = client(cs);
    let a = start_sh(
        cs,
        s,
        "a",
        &["--session-timeout", session, "lock", path],
        job,
    );
    s.wait_lines("log", "the holder's command writing", |l| l.len() >= 3);
    let b = start_sh(
        cs,
        s,
        "b",
        &["lock", path, "--timeout", "60s"],
        &writer(s, "b"),
    );
    wait_contenders(&c, path, 2);
    (a, b)
}

/// The log's check once both commands ended: no line of `a` after `b`'s first. Prints the
/// two commands' times after `frozen` (`what` names the run).
fn no_overlap(s: &Scratch, a: &Running, frozen: f64, what: &str) {
    let log = entries(s);
    let first_b = log.iter().position(|(w, _)| w == "b").unwrap();
    let last_a = log.iter().rposition(|(w, _)| w == "a").unwrap();
    eprintln!(
        "{what}: the holder's command last wrote {:.3} s after the freeze, the next command \
         first {:.3} s after it: {:.3} s of both",
        log[last_a].1 - frozen,
        log[first_b].1 - frozen,
        (log[last_a].1 - log[first_b].1).max(0.0)
    );
    assert!(
        last_a < first_b,
        "the two commands ran at once: {log:?}\nholder's stderr:\n{}",
        a.stderr()
    );
}

/// Holder `a` (`session` long) and waiter `b` writing into one log; `a`'s zkguard
/// frozen, `free` run at once, then checks that no line of `a` follows `b`'s first and
/// prints the overlap (or the gap) between the two commands.
fn frozen_holder(name: &str, session: &str, free: impl FnOnce(&str, &Scratch, &Running)) {
    let (cs, s, path) = setup(name);
    let (mut a, mut b) = holder_and_waiter(&cs, &s, &path, session, &writer(&s, "a"));
    let frozen = now();
    a.signal(libc::SIGSTOP);
    free(&path, &s, &a);
    s.wait_lines("log", "the second command writing", |l| {
        l.iter().filter(|l| l.starts_with("b ")).count() >= 5
    });
    a.signal(libc::SIGCONT);
    assert_eq!(a.wait(PATIENCE), 75, "the frozen holder: {}", a.stderr());
    s.touch("stop");
    assert_eq!(b.wait(PATIENCE), 0, "{}", b.stderr());
    no_overlap(&s, &a, frozen, &format!("{name} ({session} session)"));
    assert!(a.stderr().contains("watchdog: "), "{}", a.stderr());
}

/// The lock frees when the frozen holder's session expires (6 s: its watchdog acts 2 s
/// after the freeze, the server expires the session no sooner than 4 s after it).
#[test]
fn a_frozen_zkguard_has_its_command_stopped_before_another_runs() {
    frozen_holder("frozen", "6s", |_, _, _| {});
}

/// `break` right after the freeze, long before the frozen holder's watchdog acts (15 s
/// session: the watchdog acts 5 s after the freeze): `break` reads the session timeout the
/// holder recorded in its node and waits until 7 s after it started (a third of it plus
/// 2 s) before deleting, so the next command runs only once the frozen holder's command is
/// stopped. The session expires no sooner than 10 s after the freeze, so it is `break` that
/// frees the lock. Without the wait both commands ran for 5 s.
#[test]
fn break_on_a_frozen_holder_runs_the_next_command_alone() {
    frozen_holder("frozen-break", "15s", |path, _, _| {
        let cs = cluster().connect_string();
        let (code, _, err) = output(zkguard(&cs).args(["break", path, "--holder", "--yes"]));
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains("watchdog") && err.contains("ZKGUARD_TOKEN"),
            "break says what is left to fencing: {err}"
        );
        assert!(
            err.contains("the holder's session timeout, 15s, recorded in its node"),
            "break says what it waits for: {err}"
        );
    });
}

/// A holder whose node records no session timeout (`--data`, as another client's or an
/// older zkguard's node): `break` says so and waits a third of the longest session the
/// server grants (the harness's 60 s) plus 2 s before it deletes, however the holder runs.
#[test]
fn break_without_a_recorded_timeout_waits_for_the_longest_session() {
    let (cs, s, path) = setup("frozen-norecord");
    let c = client(&cs);
    let mut a = start_sh(
        &cs,
        &s,
        "a",
        &["lock", &path, "--data", "mine"],
        &s.ticker(""),
    );
    s.ticker_pid();
    let held = zkguard::Mutex::new(&c, &path)
        .unwrap()
        .participants()
        .unwrap();
    let node = format!("{path}/{}", held[0].node);
    let started = std::time::Instant::now();
    let (code, _, err) = output(zkguard(&cs).args(["break", &path, "--holder", "--yes"]));
    let took = started.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("records no session timeout") && err.contains("1m"),
        "{err}"
    );
    assert!(
        took >= std::time::Duration::from_secs(22),
        "deleted after {took:?}, before the wait it announced: {err}"
    );
    assert_eq!(c.exists(&node).unwrap(), None);
    assert_eq!(a.wait(PATIENCE), 75, "{}", a.stderr());
}

/// The command runs only once its watchdog does: its first act (shell builtins only, no
/// fork) is to read its zkguard's children, where the watchdog already is, then to freeze
/// its zkguard (`kill -STOP $PPID`), and the watchdog stops it all the same. (Spawned
/// before its watchdog, a command could freeze zkguard before the watchdog existed and run
/// on unwatched.)
#[test]
fn a_command_never_runs_before_its_watchdog() {
    let (cs, s, path) = setup("frozen-gate");
    let prelude = format!(
        "read kids < /proc/$PPID/task/$PPID/children; echo \"$kids\" > '{}'; kill -STOP $PPID;",
        s.path("kids").display()
    );
    let mut a = start_sh(
        &cs,
        &s,
        "a",
        &["--session-timeout", "10s", "lock", &path],
        &s.ticker(&prelude),
    );
    let pid = s.ticker_pid();
    let dog = watchdog_of(a.pid());
    let kids = s.lines("kids");
    assert!(
        kids.iter()
            .flat_map(|l| l.split_whitespace())
            .any(|k| k == dog.to_string()),
        "the command started before its watchdog (pid {dog}): zkguard's children then were \
         {kids:?}"
    );
    wait_until(
        || {
            format!(
                "the command of a frozen zkguard was never stopped (the group: {:?}); its \
                 stderr:\n{}",
                group_members(pid),
                a.stderr()
            )
        },
        || group_stopped(pid),
    );
    assert_eq!(proc_state(a.pid()), Some('T'), "zkguard was frozen");
    a.signal(libc::SIGCONT);
    a.wait_stderr("watchdog: ");
    s.touch("go");
    // Continued before its session expired it proves the lock and lets the command end (0);
    // after, the lock is lost (75). Either way the command was stopped while unwatched.
    let code = a.wait(PATIENCE);
    assert!(code == 0 || code == 75, "{code}: {}", a.stderr());
}

/// The watchdog of the zkguard `pid` (its child running `zkguard __watchdog`), once there.
pub fn watchdog_of(pid: i32) -> i32 {
    let find = || {
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let p: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid: i32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            (ppid == pid && cmd.windows(10).any(|w| w == b"__watchdog")).then_some(p)
        })
    };
    let found = std::cell::Cell::new(None);
    wait_until(
        || format!("no watchdog under zkguard {pid}"),
        || {
            found.set(find());
            found.get().is_some()
        },
    );
    found.get().unwrap()
}

/// A watchdog that dies is replaced (said on stderr), and the new one does its work:
/// zkguard frozen afterwards still has its command stopped; continued before its session
/// expires, zkguard proves the lock and continues the command.
#[test]
fn a_dead_watchdog_is_replaced() {
    let (cs, s, path) = setup("frozen-dog");
    let mut a = start_sh(
        &cs,
        &s,
        "a",
        &["--session-timeout", "10s", "lock", &path],
        &s.ticker(""),
    );
    let pid = s.ticker_pid();
    let dog = watchdog_of(a.pid());
    // SAFETY: a plain kill(2) of a process this test started (through zkguard).
    unsafe {
        libc::kill(dog, libc::SIGKILL);
    }
    a.wait_stderr("started another");
    let again = watchdog_of(a.pid());
    assert_ne!(again, dog);
    a.signal(libc::SIGSTOP);
    wait_until(
        || "the command runs on beside a frozen zkguard".into(),
        || group_stopped(pid),
    );
    a.signal(libc::SIGCONT);
    a.wait_stderr("proven again; continuing the command");
    s.touch("go");
    assert_eq!(a.wait(PATIENCE), 0, "{}", a.stderr());
}

/// With `--on-suspend kill` the watchdog terminates the command of a frozen zkguard, which
/// exits 75 once it runs again.
#[test]
fn with_on_suspend_kill_the_watchdog_terminates_the_command() {
    let (cs, s, path) = setup("frozen-kill");
    let mut a = start_sh(
        &cs,
        &s,
        "a",
        &[
            "--session-timeout",
            "3s",
            "lock",
            &path,
            "--on-suspend",
            "kill",
        ],
        &s.ticker(""),
    );
    let pid = s.ticker_pid();
    a.signal(libc::SIGSTOP);
    wait_until(
        || "the command outlived its frozen zkguard".into(),
        || is_dead(pid),
    );
    a.signal(libc::SIGCONT);
    assert_eq!(a.wait(PATIENCE), 75, "{}", a.stderr());
    assert!(a.stderr().contains("watchdog: "), "{}", a.stderr());
}

/// A zkguard killed outright (SIGKILL) leaves no watchdog behind, nor a command: the
/// watchdog sees its socket close, SIGKILLs the command's group and exits.
#[test]
fn a_killed_zkguard_leaves_no_watchdog_behind() {
    let (cs, s, path) = setup("frozen-killed");
    let mut a = start_sh(&cs, &s, "a", &["lock", &path], &s.ticker(""));
    let pid = s.ticker_pid();
    let dog = watchdog_of(a.pid());
    a.signal(libc::SIGKILL);
    assert_eq!(a.wait(PATIENCE), 128 + 9);
    wait_until(|| "the watchdog outlived zkguard".into(), || is_dead(dog));
    wait_until(|| "the command outlived zkguard".into(), || is_dead(pid));
}

/// `zkguard __watchdog` run by hand with a group that is no command's: 0 (the caller's own
/// group, for `killpg`) or 1 (`killpg(1, …)` is `kill(-1, …)`: every process the user may
/// signal) is refused as bad input before anything is signalled, not taken as a group to
/// SIGKILL once its stdin ends. Run in a group of its own with stdin closed, so that
/// without the check it kills only itself (group 0); group 1 is left out here for that
/// reason: the same check refuses it.
#[test]
fn the_watchdog_refuses_a_group_that_is_not_a_command_s() {
    use std::os::unix::process::CommandExt;
    for group in ["0", "-7"] {
        let (code, _, err) = output(
            std::process::Command::new(env!("CARGO_BIN_EXE_zkguard"))
                .args(["__watchdog", group, "-", "100", "kill", "10", "say"])
                .stdin(std::process::Stdio::null())
                .process_group(0),
        );
        assert_eq!(code, 2, "group {group}: {err}");
        assert!(err.contains("__watchdog is for zkguard's own use"), "{err}");
    }
}

/// SIGKILLs a process this test made (through zkguard) when dropped: a stopped watchdog is
/// not left behind by a failing test.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        signal(self.0, libc::SIGKILL);
    }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: a plain kill(2) of a process this test started (through zkguard).
    unsafe {
        libc::kill(pid, sig);
    }
}

/// [`writer`] run by a worker the command forks (a background subshell; its pid in
/// `NAME.worker`), the command waiting for it: the worker is in the command's group but is
/// not zkguard's child, so the parent-death signal that kills the command misses it.
fn forking_writer(s: &Scratch, name: &str) -> String {
    format!(
        "( {} ) & echo $! > '{}'; wait",
        writer(s, name),
        s.path(&format!("{name}.worker")).display()
    )
}

/// Holder `a` (6 s session: bound 2 s) whose command's worker writes into the log, waiter
/// `b`; `a`'s watchdog is stopped first, and once `a` has replaced it (it did not answer
/// for the bound) `a` itself is stopped (`kill` false) or SIGKILLed: no line of `a`'s job
/// follows `b`'s first, and `a`'s worker does not survive. Before the answers, a stopped
/// watchdog looked healthy for ever: `a` never said it had not answered (the test's wait
/// for it failed), and the job ran beside `b`'s.
fn frozen_watchdog_then(name: &str, kill: bool) {
    let (cs, s, path) = setup(name);
    let (mut a, mut b) = holder_and_waiter(&cs, &s, &path, "6s", &forking_writer(&s, "a"));
    let dog = watchdog_of(a.pid());
    let _old = KillOnDrop(dog);
    signal(dog, libc::SIGSTOP);
    a.wait_stderr("has not answered");
    assert!(is_dead(dog), "the unanswering watchdog was not ended");
    let worker: i32 = s.lines("a.worker")[0].parse().unwrap();
    let _worker = KillOnDrop(worker);
    let frozen = now();
    a.signal(if kill { libc::SIGKILL } else { libc::SIGSTOP });
    s.wait_lines("log", "the second command writing", |l| {
        l.iter().filter(|l| l.starts_with("b ")).count() >= 5
    });
    if kill {
        assert_eq!(a.wait(PATIENCE), 128 + 9);
        assert!(is_dead(worker), "the holder's forked worker survived");
    } else {
        a.signal(libc::SIGCONT);
        assert_eq!(a.wait(PATIENCE), 75, "the frozen holder: {}", a.stderr());
    }
    s.touch("stop");
    assert_eq!(b.wait(PATIENCE), 0, "{}", b.stderr());
    no_overlap(
        &s,
        &a,
        frozen,
        &format!("{name} (zkguard frozen after its watchdog)"),
    );
}

#[test]
fn a_stopped_watchdog_is_replaced_before_its_zkguard_freezes() {
    frozen_watchdog_then("frozen-dog-stop", false);
}

#[test]
fn a_stopped_watchdog_is_replaced_before_its_zkguard_is_killed() {
    frozen_watchdog_then("frozen-dog-kill", true);
}

/// Whether every thread of process `pid` is stopped (`T`).
fn all_threads_stopped(pid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let states: Vec<Option<char>> = dir
        .flatten()
        .map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            stat.rsplit_once(')')?.1.trim_start().chars().next()
        })
        .collect();
    !states.is_empty() && states.iter().all(|s| *s == Some('T'))
}

/// Starts `sleep 600` in a process group of its own with the pid `pid` (free by now):
/// through `ns_last_pid` where it may be written, else by cycling through the pids.
fn process_with_pid(pid: i32) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let _ = std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string());
        let mut c = std::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        if c.id() as i32 == pid {
            return c;
        }
        let _ = c.kill();
        let _ = c.wait();
        assert!(
            std::time::Instant::now() < deadline,
            "pid {pid} never came back to this test"
        );
    }
}

/// A watchdog stopped, its zkguard SIGKILLed at once (30 s session: within the bound, the
/// watchdog not replaced yet), the command's job a forked worker: the kernel continues the
/// orphaned watchdog (SIGHUP and SIGCONT to a stopped process whose group is orphaned),
/// which SIGKILLs the command's group, the worker with it. Before, the watchdog died of
/// the SIGHUP and the worker, which the parent-death signal misses, ran on.
#[test]
fn a_stopped_watchdog_of_a_killed_zkguard_still_kills_the_forked_worker() {
    let (cs, s, path) = setup("frozen-orphan");
    let mut a = start_sh(
        &cs,
        &s,
        "a",
        &["--session-timeout", "30s", "lock", &path],
        &forking_writer(&s, "a"),
    );
    s.wait_lines("log", "the holder's command writing", |l| !l.is_empty());
    let worker: i32 = s.lines("a.worker")[0].parse().unwrap();
    let _worker = KillOnDrop(worker);
    let dog = watchdog_of(a.pid());
    let _dog = KillOnDrop(dog);
    signal(dog, libc::SIGSTOP);
    // Every thread: the kernel continues an orphaned group only once it is wholly stopped
    // (its main thread may show `T` while another has yet to stop).
    wait_until(
        || "the watchdog never stopped".into(),
        || all_threads_stopped(dog),
    );
    a.signal(libc::SIGKILL);
    assert_eq!(a.wait(PATIENCE), 128 + 9);
    wait_until(
        || {
            format!(
                "the forked worker {worker} outlived its killed zkguard (the watchdog: {:?})",
                proc_state(dog)
            )
        },
        || is_dead(worker),
    );
}

/// A watchdog left stopped past its command's end, continued later: its command (`sleep`
/// in a group of its own, started by this test, which stands for zkguard and keeps the
/// watchdog's group from being orphaned, as a subreaper in zkguard's session does) is gone
/// and its pid taken by another process leading a group of that id; the watchdog's stdin
/// closes (its zkguard gone) and it is continued: it signals nothing (the leader's start
/// time is not the one recorded) and exits. Run the same way, the watchdog before the
/// start time (`GROUP BOUND_MS kill KILL_AFTER_MS say`) SIGKILLed the other process.
#[test]
fn an_orphaned_watchdog_continued_later_signals_nothing_that_is_not_its_job_s() {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut job = Command::new("sleep")
        .arg("600")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = job.id() as i32;
    let start = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start = start
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    let mut dog = Command::new(env!("CARGO_BIN_EXE_zkguard"))
        .args([
            "__watchdog",
            &pid.to_string(),
            &start,
            "600000",
            "kill",
            "10",
            "say",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let _dog = KillOnDrop(dog.id() as i32);
    signal(dog.id() as i32, libc::SIGSTOP);
    wait_until(
        || {
            format!(
                "the watchdog is not running: {:?}",
                proc_state(dog.id() as i32)
            )
        },
        || proc_state(dog.id() as i32) == Some('T'),
    );
    let _ = job.kill();
    let _ = job.wait();
    let mut other = process_with_pid(pid);
    drop(dog.stdin.take());
    signal(dog.id() as i32, libc::SIGCONT);
    let mut said = String::new();
    let _ = std::io::Read::read_to_string(&mut dog.stderr.take().unwrap(), &mut said);
    let status = dog.wait().unwrap();
    let survived = other.try_wait().unwrap().is_none();
    let _ = other.kill();
    let _ = other.wait();
    assert!(
        survived,
        "the continued watchdog ({status}) signalled process {pid}, which is not its job's"
    );
    assert_eq!(status.code(), Some(0), "the watchdog: {status}: {said}");
    assert!(said.contains("signalling nothing"), "{said}");
}

/// A session timeout below the floor (2 s) for a command under the lock: refused before
/// the command starts, whether asked (`--session-timeout 250ms`: 2) or granted (a server
/// whose `maxSessionTimeout` is 1 s: 69). Before the floor, at 250 ms with `--on-suspend
/// kill` the command ran and was killed at once by a watchdog that took a healthy zkguard
/// for a frozen one.
#[test]
fn a_session_below_the_floor_is_refused_before_the_command_starts() {
    let (cs, s, path) = setup("floor");
    let ran = s.path("ran");
    let touch = format!("touch '{}'", ran.display());
    let (code, _, err) = output(
        zkguard(&cs)
            .args(["--session-timeout", "250ms", "lock", &path])
            .args(["--on-suspend", "kill", "--", "sh", "-c", &touch]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--session-timeout 250ms") && err.contains("at least 2s"),
        "{err}"
    );
    assert!(!ran.exists(), "the command ran: {err}");

    let low = zkguard::testing::TestCluster::builder()
        .tick_time(std::time::Duration::from_millis(100))
        .max_session_timeout(std::time::Duration::from_secs(1))
        .start()
        .expect("a server with maxSessionTimeout 1 s");
    for args in [
        &["lock", "/floor", "--"][..],
        &["elect", "/floor-elect", "--id", "e", "--"],
    ] {
        let (code, _, err) = output(
            zkguard(&low.connect_string())
                .args(args)
                .args(["sh", "-c", &touch]),
        );
        assert_eq!(code, 69, "{args:?}: {err}");
        assert!(
            err.contains("granted a session timeout of 1s") && err.contains("maxSessionTimeout"),
            "{args:?}: {err}"
        );
        assert!(!ran.exists(), "{args:?}: the command ran: {err}");
    }
}
