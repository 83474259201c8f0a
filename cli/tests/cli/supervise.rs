//! The command under supervision: a signal forwarded, a holder cut off from ZooKeeper
//! (its command killed before another runs, or stopped, or left running, as `--on-suspend`
//! says), a killed zkguard, Ctrl-Z.

use std::time::{Duration, Instant};

use zkguard::testing::FaultProxy;

use crate::common::*;
use crate::setup;

/// SIGTERM to zkguard reaches the command (in its own process group, so only by
/// forwarding), and a waiting zkguard runs its command only after the first command has
/// finished its clean-up and exited.
#[test]
fn sigterm_is_forwarded_and_the_lock_released_after_the_command_exits() {
    let (cs, s, path) = setup("sigterm");
    let c = client(&cs);
    let log = s.path("log").display().to_string();
    let first = format!(
        "trap 'echo term >> {log}; sleep 1; echo cleaned >> {log}; exit 0' TERM; \
         echo start >> {log}; while :; do sleep 0.05; done"
    );
    let mut a = start_sh(&cs, &s, "a", &["lock", &path], &first);
    s.wait_lines("log", "first command", |l| l.len() == 1);
    let mut b = start_sh(
        &cs,
        &s,
        "b",
        &["lock", &path, "--timeout", "60s"],
        &format!("echo second >> {log}"),
    );
    wait_contenders(&c, &path, 2);

    a.signal(libc::SIGTERM);
    assert_eq!(a.wait(PATIENCE), 0, "the command's status: {}", a.stderr());
    assert_eq!(b.wait(PATIENCE), 0, "{}", b.stderr());
    assert_eq!(s.lines("log"), ["start", "term", "cleaned", "second"]);
    assert!(a.stderr().contains("forwarding SIGTERM"), "{}", a.stderr());
}

/// A holder cut off by the fault proxy (2.5 s session; the client declares the session lost
/// 250 ms before the server may): its command is told to stop (SIGTERM, then killed)
/// before another `zkguard lock` runs its command, and the cut-off zkguard exits with 75.
#[test]
fn a_cut_off_holder_has_its_command_killed_before_another_runs() {
    let (cs, s, path) = setup("cut");
    let c = client(&cs);
    let proxy = FaultProxy::for_cluster(cluster()).unwrap();
    let log = s.path("log").display().to_string();
    let first = format!(
        "trap 'echo killed $(date +%s.%N) >> {log}; exit 143' TERM; echo start >> {log}; \
         while :; do sleep 0.05; done"
    );
    let mut a = start_sh(
        &proxy.connect_string(),
        &s,
        "a",
        &["--session-timeout", "2500ms", "lock", &path],
        &first,
    );
    s.wait_lines("log", "first command", |l| l.len() == 1);
    let mut b = start_sh(
        &cs,
        &s,
        "b",
        &["lock", &path],
        &format!("echo second $(date +%s.%N) >> {log}"),
    );
    wait_contenders(&c, &path, 2);

    let cut = std::time::SystemTime::now();
    proxy.blackhole();
    assert_eq!(b.wait(PATIENCE), 0, "{}", b.stderr());
    assert_eq!(a.wait(PATIENCE), 75, "{}", a.stderr());
    let lines = s.lines("log");
    let words: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(
        words,
        ["start", "killed", "second"],
        "{lines:?}; holder's stderr:\n{}",
        a.stderr()
    );
    let at = |i: usize| -> f64 { lines[i].split(' ').nth(1).unwrap().parse().unwrap() };
    let cut = cut
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    eprintln!(
        "2.5 s session: the cut-off command was told to stop {:.3} s after the cut, \
         the next command started {:.3} s after the cut",
        at(1) - cut,
        at(2) - cut
    );
    proxy.heal();
}

/// A zkguard that is killed (SIGKILL: no clean-up of its own) takes its command with it
/// (Linux's parent-death signal), and its lock goes with its session.
#[test]
fn a_killed_zkguard_takes_its_command_and_its_lock_with_it() {
    let (cs, s, path) = setup("crash");
    let args = ["--session-timeout", "2s", "lock", &path];
    let mut a = start_sh(&cs, &s, "a", &args, &s.ticker(""));
    let pid = s.ticker_pid();

    a.signal(libc::SIGKILL);
    assert_eq!(a.wait(PATIENCE), 128 + 9);
    wait_until(|| "the command outlived zkguard".into(), || is_dead(pid));
    let (code, _, err) =
        output(zkguard(&cs).args(["lock", &path, "--timeout", "30s", "--", "true"]));
    assert_eq!(code, 0, "the lock never came free: {err}");
}

/// A ticker (see `Scratch::ticker`) holding a lock through a fault proxy, then cut off.
struct CutOff {
    proxy: FaultProxy,
    s: Scratch,
    a: Running,
    /// The ticker's pid.
    pid: i32,
    /// Just before the cut.
    cut: Instant,
}

/// Starts `zkguard --session-timeout 20s lock PATH --on-suspend POLICY EXTRA… -- TICKER`
/// through a fault proxy, then cuts it off: the proxy black-holes and closes its
/// connection, so the client is disconnected at once and its reconnects hang until `heal`.
fn cut_off_ticker(name: &str, policy: &str, extra: &[&str], prelude: &str) -> CutOff {
    let (_, s, path) = setup(name);
    let proxy = FaultProxy::for_cluster(cluster()).unwrap();
    let args = [
        "--session-timeout",
        "20s",
        "lock",
        &path,
        "--on-suspend",
        policy,
    ];
    let args = [&args[..], extra].concat();
    let a = start_sh(&proxy.connect_string(), &s, "a", &args, &s.ticker(prelude));
    // Once (stress, --hog) the command never ticked within a minute and nothing said why:
    // zkguard's stderr says now.
    wait_until(
        || format!("the command never ran; zkguard's stderr:\n{}", a.stderr()),
        || !s.lines("ticks").is_empty(),
    );
    let pid = s.ticker_pid();
    let cut = Instant::now();
    proxy.blackhole();
    proxy.reset();
    CutOff {
        proxy,
        s,
        a,
        pid,
        cut,
    }
}

/// `--on-suspend stop`: while the holder is disconnected its command is stopped (state T);
/// after the heal the lock is proven again and the command continues, then ends normally.
#[test]
fn on_suspend_stop_pauses_and_resumes_the_command() {
    let CutOff {
        proxy,
        s,
        mut a,
        pid,
        ..
    } = cut_off_ticker("suspend", "stop", &[], "");
    wait_until(
        || {
            format!(
                "never stopped (the group: {:?}): {}",
                group_members(pid),
                a.stderr()
            )
        },
        || group_stopped(pid),
    );
    let stopped_at = s.lines("ticks").len();

    proxy.heal();
    s.wait_ticks_after(stopped_at, 3);
    a.wait_stderr("proven again");
    s.touch("go");
    assert_eq!(a.wait(PATIENCE), 0, "{}", a.stderr());
}

/// `--on-suspend ignore`: the command runs on while the holder is disconnected, and
/// zkguard says so (and says when it is connected again).
#[test]
fn on_suspend_ignore_lets_the_command_run_on() {
    let CutOff {
        proxy,
        s,
        mut a,
        pid,
        ..
    } = cut_off_ticker("ignore", "ignore", &[], "");
    a.wait_stderr("the command runs on");
    let since = s.lines("ticks").len();
    s.wait_ticks_after(since, 5);
    assert!(!group_stopped(pid), "stopped despite ignore");
    proxy.heal();
    a.wait_stderr("connected again");
    s.touch("go");
    assert_eq!(a.wait(PATIENCE), 0, "{}", a.stderr());
}

/// Ctrl-Z (SIGTSTP) stops zkguard and its command together; when zkguard is continued,
/// the command is continued only after the lock is proven again.
#[test]
fn sigtstp_stops_the_command_with_zkguard() {
    let (cs, s, path) = setup("tstp");
    let mut a = start_sh(&cs, &s, "a", &["lock", &path], &s.ticker(""));
    let pid = s.ticker_pid();

    a.signal(libc::SIGTSTP);
    wait_until(
        || format!("not both stopped: {}", a.stderr()),
        || group_stopped(pid) && proc_state(a.pid()) == Some('T'),
    );
    let stopped_at = s.lines("ticks").len();
    a.signal(libc::SIGCONT);
    a.wait_stderr("proven again");
    s.wait_ticks_after(stopped_at, 3);
    s.touch("go");
    assert_eq!(a.wait(PATIENCE), 0, "{}", a.stderr());
}

/// `--on-suspend kill` terminates the command as soon as the connection drops, and a
/// command that ignores SIGTERM is SIGKILLed after `--kill-after`; zkguard exits with 75.
#[test]
fn on_suspend_kill_and_kill_after() {
    // `s` is kept: dropping it would delete the files the test reads.
    let CutOff {
        proxy,
        s: _s,
        mut a,
        pid,
        cut,
    } = cut_off_ticker(
        "kill-after",
        "kill",
        &["--kill-after", "1s"],
        "trap '' TERM;",
    );
    assert_eq!(a.wait(PATIENCE), 75, "{}", a.stderr());
    assert!(
        cut.elapsed() >= Duration::from_secs(1),
        "SIGKILL before --kill-after: {}",
        a.stderr()
    );
    assert!(a.stderr().contains("SIGKILL"), "{}", a.stderr());
    assert!(is_dead(pid), "the command survived");
    proxy.heal();
}

/// What the tests take for "the command is stopped" ([`group_stopped`]) holds for a shell
/// that starts commands with vfork (dash): a SIGSTOP for its group that catches the child
/// between vfork and exec leaves the shell in `D`, not `T`, for as long as the group stays
/// stopped. Under load that happened to the ticker in 2 of about 22 runs of
/// `on_suspend_stop_pauses_and_resumes_the_command` (and once in the frozen `break` test),
/// which looked at the shell's state alone and never saw `T`. Here a shell forks a command
/// every millisecond and its group is stopped 200 times: each stop is seen, and how often
/// the shell was caught in vfork is printed.
#[test]
fn a_stopped_group_is_seen_stopped_even_with_its_shell_in_vfork() {
    use std::os::unix::process::CommandExt;
    let mut sh = std::process::Command::new("sh")
        .args(["-c", "while :; do sleep 0.001; done"])
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = sh.id() as i32;
    let mut in_vfork = 0;
    for _ in 0..200 {
        // SAFETY: plain killpg(2) of the group this test started.
        unsafe { libc::killpg(pid, libc::SIGSTOP) };
        wait_until(
            || format!("never seen stopped: {:?}", group_members(pid)),
            || group_stopped(pid),
        );
        if proc_state(pid) != Some('T') {
            in_vfork += 1;
        }
        // SAFETY: as above.
        unsafe { libc::killpg(pid, libc::SIGCONT) };
        wait_until(
            || format!("never seen running again: {:?}", group_members(pid)),
            || !group_stopped(pid),
        );
    }
    eprintln!("the shell was caught in vfork (state D, not T) in {in_vfork} of 200 stops");
    let _ = sh.kill();
    let _ = sh.wait();
}
