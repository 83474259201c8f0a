//! The watchdog: a small process of its own that keeps the command from outliving
//! zkguard's ability to vouch for the lock.
//!
//! zkguard's supervisor writes a heartbeat (one byte) to the watchdog at every step of its
//! loop ([`step`]: a tenth of the bound, at most 100 ms), and the watchdog answers each
//! (`a`, from the loop that would signal). The watchdog is zkguard's own binary started
//! again (`zkguard __watchdog GROUP START BOUND_MS ACTION KILL_AFTER_MS say|quiet`), in a
//! process group of its own (the terminal's Ctrl-C and a `kill -STOP` of zkguard's group do
//! not reach it), with the environment of zkguard less its secrets ([`SECRET_ENV`]), its
//! stdin one end of a socket pair, its stdout a pipe back. When no heartbeat has come for
//! the bound (a third of the granted session timeout: ZooKeeper expires the session no
//! sooner than two thirds of it after zkguard's last request, since the client pings every
//! third), zkguard is frozen (SIGSTOP, a debugger, a cgroup freeze) or stalled, and the
//! watchdog does to the command's group what `--on-suspend` says zkguard would do to a
//! command it can no longer vouch for: SIGSTOP (`stop`, and `ignore`: a frozen zkguard sees
//! nothing, so the command is not left to run on), or SIGTERM and SIGCONT, then SIGKILL
//! after `--kill-after` (`kill`). It tells zkguard on the pipe (`f`), so that once zkguard
//! runs again it proves the lock with a quorum before it continues the command (or ends
//! the term with `kill`).
//!
//! It cannot be the thing that freezes: zkguard's heartbeat is a non-blocking write (a
//! frozen watchdog never stalls zkguard; its socket buffer holds hours of heartbeats), and
//! the watchdog does nothing but wait for bytes with a deadline; at a normal end zkguard
//! kills it (SIGKILL, which even a stopped watchdog obeys) and reaps it. If zkguard dies
//! (its end of the socket closed) the watchdog SIGKILLs the group, as the command's
//! `PR_SET_PDEATHSIG` does for the command alone (not for workers it forked); a watchdog
//! stopped when zkguard dies is continued by the kernel (its group orphaned: SIGHUP, which
//! it catches, and SIGCONT) and does the same. If the watchdog dies, zkguard sees its pipe
//! close, says so and starts another; if it cannot, it terminates the command. A watchdog
//! that has not answered for the bound while zkguard beat (stopped, frozen, stalled) is
//! killed and replaced the same way, so a frozen watchdog is trusted for no longer than the
//! bound: zkguard frozen after that has a live watchdog over its command.
//!
//! Before every signal the watchdog checks that the group is still its command's: the
//! group's leader, if `/proc` shows a process of that pid, must have the start time zkguard
//! read when it spawned the command (`START`, [`start_time`]). A watchdog stopped until its
//! command's group ended and its pid went to another process, then continued, signals
//! nothing and exits (a pid is not reused while a group of that id has members, so a group
//! whose leader is gone is still the command's).
//!
//! What it cannot cover: zkguard and its watchdog both frozen within one bound of each
//! other (the watchdog is replaced only after a bound unanswered), zkguard killed within a
//! bound of its watchdog's freeze when that does not orphan the watchdog's group (a
//! subreaper in zkguard's session adopts it: the command's forked workers run on until the
//! watchdog is continued), and the whole host frozen (zkguard, the watchdog and the command
//! together). When they resume, the command may run a moment before either acts, after
//! another holder has taken over: only writes fenced with `ZKGUARD_TOKEN` are safe then.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::args::OnSuspend;
use crate::conn::SECRET_ENV;
use crate::fail::{Fail, EXIT_SOFTWARE, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::say::Say;

/// The first argument that runs the watchdog instead of the command line.
pub const ARG: &str = "__watchdog";

/// Heartbeat byte.
const BEAT: u8 = b'b';
/// Watchdog → zkguard: the bound passed; the group was stopped or is being terminated.
const FIRED: u8 = b'f';
/// Watchdog → zkguard: heartbeats heard.
const ANSWER: u8 = b'a';

/// How long zkguard may go unheard: a third of the granted session timeout.
pub fn bound(session_timeout: Duration) -> Duration {
    session_timeout / 3
}

/// How often zkguard heartbeats the watchdog: a tenth of the bound, at most 100 ms, so
/// that a healthy zkguard is never unheard for the bound (ten steps late at least).
pub fn step(bound: Duration) -> Duration {
    (bound / 10).min(Duration::from_millis(100))
}

/// The shortest granted session timeout `lock` and `elect` run a command with: its bound
/// (a third: 667 ms) is ten heartbeat steps of 67 ms, room for a loaded host's scheduling;
/// shorter, a healthy zkguard would be taken for a frozen one and its command stopped.
pub const FLOOR: Duration = Duration::from_secs(2);

/// Refuses a session timeout below [`FLOOR`] for a supervised command: `asked` (the
/// `--session-timeout` given, before connecting: usage, 2) or `granted` (the server's
/// answer, its `maxSessionTimeout` lower: 69).
pub fn check_floor(asked: Duration, granted: Option<Duration>) -> Result<(), Fail> {
    let ms = |d: Duration| humantime::format_duration(Duration::from_millis(d.as_millis() as u64));
    match granted {
        None if asked < FLOOR => Err(Fail::new(
            EXIT_USAGE,
            format!(
                "--session-timeout {}: below the {} a command under the lock needs (its \
                 watchdog acts a third of the session timeout after zkguard goes unheard; \
                 shorter, a busy host would have a healthy zkguard's command stopped): give \
                 at least {}",
                ms(asked),
                ms(FLOOR),
                ms(FLOOR)
            ),
        )),
        Some(g) if g < FLOOR => Err(Fail::new(
            EXIT_UNAVAILABLE,
            format!(
                "the server granted a session timeout of {} (asked {}; its maxSessionTimeout \
                 is lower), below the {} a command under the lock needs: not running the \
                 command; raise the server's maxSessionTimeout",
                ms(g),
                ms(asked),
                ms(FLOOR)
            ),
        )),
        _ => Ok(()),
    }
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, in clock ticks since
/// boot), None if there is no such process (or no `/proc`).
pub fn start_time(pid: Pid) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ...": field 3 is the first after the last ')'; 22 is the 20th.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// What `break` allows the watchdog beyond its bound (a loaded host schedules it late).
pub const MARGIN: Duration = Duration::from_secs(2);

/// How long after a freeze of its zkguard a holder's command has surely been stopped by the
/// watchdog (if the host runs): the bound plus [`MARGIN`].
pub fn acted_within(session_timeout: Duration) -> Duration {
    bound(session_timeout) + MARGIN
}

/// How the holder's node records its granted session timeout, after the data `base`
/// (`lock` without `--data`: "host pid N"): `base (zkguard: session timeout 10000 ms)`.
/// `break` reads it back ([`recorded`]) to wait out the watchdog's bound.
pub fn record(base: &str, session_timeout: Duration) -> String {
    format!(
        "{base}{RECORD_OPEN}{}{RECORD_CLOSE}",
        session_timeout.as_millis()
    )
}

const RECORD_OPEN: &str = " (zkguard: session timeout ";
const RECORD_CLOSE: &str = " ms)";

/// The session timeout a node's data records ([`record`]), if it does.
pub fn recorded(data: &[u8]) -> Option<Duration> {
    let text = std::str::from_utf8(data).ok()?;
    let (_, rest) = text.rsplit_once(RECORD_OPEN)?;
    let ms = rest.strip_suffix(RECORD_CLOSE)?;
    ms.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| ms.parse().ok())
        .flatten()
        .map(Duration::from_millis)
}

/// zkguard's own binary, to start again as the watchdog or the command's gate. Linux: this
/// very binary even if it was replaced or deleted since (an upgrade while `elect --loop`
/// runs).
pub fn own_binary() -> std::io::Result<std::path::PathBuf> {
    match std::path::Path::new("/proc/self/exe") {
        p if p.exists() => Ok(p.to_path_buf()),
        _ => std::env::current_exe(),
    }
}

/// What the watchdog tells zkguard (its answers are counted, not reported:
/// [`Watchdog::unanswered_for`]).
pub enum WatchdogReport {
    /// It found zkguard unheard for the bound and acted on the command's group.
    Fired,
    /// Its pipe closed: the watchdog is gone.
    Died,
}

/// zkguard's side of a running watchdog.
pub struct Watchdog {
    beats: UnixStream,
    process: std::process::Child,
    /// What the watchdog reports.
    pub reports: Receiver<WatchdogReport>,
    /// Since when a heartbeat has gone unanswered (None: all answered).
    unanswered: Arc<Mutex<Option<Instant>>>,
    /// When it was started.
    started: Instant,
}

impl Watchdog {
    /// Starts a watchdog over the process group `group`, whose leader started at `start`
    /// ([`start_time`]; None: unknown, not checked).
    pub fn start(
        group: Pid,
        start: Option<u64>,
        bound: Duration,
        on_suspend: OnSuspend,
        kill_after: Duration,
        say: Say,
    ) -> Result<Watchdog, Fail> {
        let fail =
            |e: std::io::Error| Fail::new(EXIT_SOFTWARE, format!("cannot start the watchdog: {e}"));
        let (beats, theirs) = UnixStream::pair().map_err(fail)?;
        beats.set_nonblocking(true).map_err(fail)?;
        let action = match on_suspend {
            OnSuspend::Kill => "kill",
            OnSuspend::Stop | OnSuspend::Ignore => "stop",
        };
        let mut command = Command::new(own_binary().map_err(fail)?);
        for name in SECRET_ENV {
            command.env_remove(name);
        }
        let mut process = command
            .arg0("zkguard")
            .arg(ARG)
            .arg(group.as_raw().to_string())
            .arg(start.map_or("-".to_string(), |s| s.to_string()))
            .arg(bound.as_millis().to_string())
            .arg(action)
            .arg(kill_after.as_millis().to_string())
            .arg(if say.quiet { "quiet" } else { "say" })
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(fail)?;
        let mut out = process.stdout.take().expect("stdout is piped");
        let (tx, reports) = crossbeam_channel::unbounded();
        let unanswered = Arc::new(Mutex::new(None));
        let heard = Arc::clone(&unanswered);
        std::thread::spawn(move || {
            let mut buf = [0u8; 16];
            loop {
                match out.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(WatchdogReport::Died);
                        return;
                    }
                    Ok(n) => {
                        for b in &buf[..n] {
                            match *b {
                                FIRED => {
                                    let _ = tx.send(WatchdogReport::Fired);
                                }
                                ANSWER => *lock(&heard) = None,
                                _ => {}
                            }
                        }
                    }
                }
            }
        });
        Ok(Watchdog {
            beats,
            process,
            reports,
            unanswered,
            started: Instant::now(),
        })
    }

    /// The watchdog's pid, for messages.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// A heartbeat: never blocks (a full buffer means a frozen watchdog; nothing to add).
    pub fn beat(&self) {
        lock(&self.unanswered).get_or_insert_with(Instant::now);
        let _ = (&self.beats).write(&[BEAT]);
    }

    /// How long the oldest unanswered heartbeat has waited (zero: all answered), counted
    /// from `grace` after the watchdog's start at the earliest: a new process on a loaded
    /// host may take a while to start answering.
    pub fn unanswered_for(&self, grace: Duration) -> Duration {
        let from = self.started + grace;
        lock(&self.unanswered).map_or(Duration::ZERO, |since| {
            Instant::now().saturating_duration_since(since.max(from))
        })
    }

    /// zkguard itself went unheard (frozen, stalled): the heartbeats it owed were not the
    /// watchdog's to answer; the next one starts the count again.
    pub fn excuse(&self) {
        *lock(&self.unanswered) = None;
    }

    /// Ends the watchdog (SIGKILL, reaped) and reads what it had reported: whether it
    /// had fired (stopped or terminated the group) before it went.
    pub fn end(self) -> bool {
        let mut this = self;
        let _ = this.process.kill();
        let _ = this.process.wait();
        // Its pipe is closed now: the reader thread reports what was left, then `Died`.
        this.reports
            .iter()
            .take_while(|r| !matches!(r, WatchdogReport::Died))
            .any(|r| matches!(r, WatchdogReport::Fired))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Watchdog {
    /// A normal end: the watchdog is killed (SIGKILL: it does nothing more to the group,
    /// and even a stopped one ends, so this cannot hang) and reaped.
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The watchdog process (`zkguard __watchdog GROUP START BOUND_MS stop|kill KILL_AFTER_MS
/// say|quiet`, START the group leader's [`start_time`] or `-`): returns its exit status.
pub fn main(args: &[String]) -> i32 {
    let parsed = match args {
        [group, start, bound, action, kill_after, say] => (|| {
            // A command's group is its leader's pid: never 0 (to `killpg` the caller's own
            // group) nor 1 (`killpg(1, …)` is `kill(-1, …)`: every process the user may
            // signal), whoever runs `zkguard __watchdog` and with what.
            let group = Pid::from_raw(group.parse().ok().filter(|g: &i32| *g > 1)?);
            let start = match start.as_str() {
                "-" => None,
                s => Some(s.parse().ok()?),
            };
            let bound = Duration::from_millis(bound.parse().ok()?);
            let kill = match action.as_str() {
                "kill" => true,
                "stop" => false,
                _ => return None,
            };
            let kill_after = Duration::from_millis(kill_after.parse().ok()?);
            let say = Say {
                quiet: say == "quiet",
            };
            Some((Group { id: group, start }, bound, kill, kill_after, say))
        })(),
        _ => None,
    };
    let Some((group, bound, kill, kill_after, say)) = parsed else {
        crate::logging::line(format!(
            "{ARG} is for zkguard's own use (GROUP START BOUND_MS stop|kill KILL_AFTER_MS \
             say|quiet)"
        ));
        return EXIT_USAGE;
    };
    // Caught, so not the death it is by default: when zkguard dies while this watchdog is
    // stopped, its process group is orphaned and the kernel sends it SIGHUP and SIGCONT; it
    // must live on to SIGKILL the command's group (workers the command forked included).
    let _ = signal_hook::flag::register(
        Signal::SIGHUP as i32,
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let (tx, bytes) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 64];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if tx.send(()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut out = std::io::stdout();
    // Set while the group has been acted on and zkguard has not been heard since.
    let mut fired = false;
    // With `kill`: when SIGKILL is due.
    let mut kill_at: Option<Instant> = None;
    loop {
        let wait = match kill_at {
            Some(at) => at.saturating_duration_since(Instant::now()),
            None if fired => Duration::MAX,
            None => bound,
        };
        let signal = |sig| group.signal(sig, say);
        match bytes.recv_timeout(wait) {
            Ok(()) => {
                fired = false;
                // Answered from this loop: zkguard hears that the one that signals runs.
                let _ = out.write_all(&[ANSWER]).and_then(|()| out.flush());
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                // zkguard is gone without a normal end: its command must not run on.
                signal(Signal::SIGKILL);
                return 0;
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if kill_at.is_some_and(|at| Instant::now() >= at) {
                    signal(Signal::SIGKILL);
                    kill_at = None;
                    continue;
                }
                if fired {
                    continue;
                }
                fired = true;
                let what = if kill {
                    signal(Signal::SIGTERM);
                    signal(Signal::SIGCONT);
                    kill_at = Some(Instant::now() + kill_after);
                    "terminating the command (SIGTERM; SIGKILL after --kill-after)"
                } else {
                    signal(Signal::SIGSTOP);
                    "stopping the command (SIGSTOP) until zkguard proves the lock again"
                };
                say.say(format!(
                    "watchdog: the supervising zkguard not heard for {}: it is frozen or \
                     stalled and cannot vouch for the lock; {what}",
                    humantime::format_duration(bound)
                ));
                let _ = out.write_all(&[FIRED]).and_then(|()| out.flush());
            }
        }
    }
}

/// The command's process group, as the watchdog knows it.
#[derive(Clone, Copy)]
struct Group {
    id: Pid,
    /// Its leader's start time, recorded when zkguard spawned it.
    start: Option<u64>,
}

impl Group {
    /// Whether the group is still the command's: its leader, if a process of that pid
    /// exists, is the one that started at the recorded time. (Without the leader the group
    /// is: the kernel does not give its id to a new process while the group has members.)
    fn is_ours(&self) -> bool {
        match (self.start, start_time(self.id)) {
            (Some(recorded), Some(now)) => recorded == now,
            _ => true,
        }
    }

    /// `killpg(sig)` if the group is still the command's ([`Group::is_ours`]); if not (a
    /// watchdog stopped, then continued after its command's group ended and its pid went to
    /// another process), signals nothing and exits: nothing left to watch.
    fn signal(&self, sig: Signal, say: Say) {
        if self.is_ours() {
            let _ = killpg(self.id, sig);
            return;
        }
        say.say(format!(
            "watchdog: process {} is no longer the command's (another start time): it was \
             stopped past its command's end; signalling nothing, exiting",
            self.id
        ));
        std::process::exit(0);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn the_bound_is_a_third_of_the_session_timeout() {
        assert_eq!(super::bound(Duration::from_secs(9)), Duration::from_secs(3));
        assert_eq!(
            super::acted_within(Duration::from_secs(9)),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn the_step_is_a_tenth_of_the_bound_and_the_floor_is_refused() {
        let bound = super::bound(super::FLOOR);
        assert!(super::step(bound) * 10 <= bound, "{bound:?}");
        assert_eq!(
            super::step(Duration::from_secs(10)),
            Duration::from_millis(100)
        );
        let asked = super::check_floor(Duration::from_millis(250), None).unwrap_err();
        assert_eq!(asked.code, crate::fail::EXIT_USAGE);
        assert!(
            asked.msg.contains("--session-timeout 250ms"),
            "{}",
            asked.msg
        );
        let granted = super::check_floor(Duration::from_secs(10), Some(Duration::from_millis(400)))
            .unwrap_err();
        assert_eq!(granted.code, crate::fail::EXIT_UNAVAILABLE);
        assert!(granted.msg.contains("maxSessionTimeout"), "{}", granted.msg);
        assert!(super::check_floor(super::FLOOR, Some(super::FLOOR)).is_ok());
    }

    #[test]
    fn a_process_start_time_reads_from_proc() {
        let me = nix::unistd::getpid();
        let t = super::start_time(me).expect("this process's start time");
        assert_eq!(super::start_time(me), Some(t));
        assert_eq!(
            super::start_time(nix::unistd::Pid::from_raw(i32::MAX)),
            None
        );
    }

    #[test]
    fn a_recorded_session_timeout_reads_back() {
        let data = super::record("host-a pid 42", Duration::from_millis(10_000));
        assert_eq!(data, "host-a pid 42 (zkguard: session timeout 10000 ms)");
        assert_eq!(
            super::recorded(data.as_bytes()),
            Some(Duration::from_secs(10))
        );
        // A record inside the base does not count: only the last one, at the end.
        let twice = super::record("x (zkguard: session timeout 1 ms)", Duration::from_secs(4));
        assert_eq!(
            super::recorded(twice.as_bytes()),
            Some(Duration::from_secs(4))
        );
        for other in [
            &b"host-a pid 42"[..],
            b"",
            b"\xff (zkguard: session timeout 10 ms) tail",
            b"x (zkguard: session timeout  ms)",
            b"x (zkguard: session timeout -5 ms)",
            b"x (zkguard: session timeout +5 ms)",
            b"x (zkguard: session timeout 99999999999999999999999 ms)",
            &[0xff, 0xfe],
        ] {
            assert_eq!(super::recorded(other), None, "{other:?}");
        }
    }

    #[test]
    fn bad_arguments_are_a_usage_error() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(super::main(&args(&[])), crate::fail::EXIT_USAGE);
        assert_eq!(
            super::main(&args(&["12", "-", "1000", "pause", "10", "say"])),
            crate::fail::EXIT_USAGE
        );
        assert_eq!(
            super::main(&args(&["x", "-", "1000", "stop", "10", "say"])),
            crate::fail::EXIT_USAGE
        );
        assert_eq!(
            super::main(&args(&["12", "x", "1000", "stop", "10", "say"])),
            crate::fail::EXIT_USAGE
        );
        // The old form, without START.
        assert_eq!(
            super::main(&args(&["12", "1000", "stop", "10", "say"])),
            crate::fail::EXIT_USAGE
        );
    }
}
