//! The command: started in a process group of its own, signalled as a group, and waited for
//! by a thread that reports its exit on a channel.
//!
//! The command is started through a gate: zkguard's own binary started again as
//! `zkguard __gate FD -- CMD…` (the command's pid, process group, environment, stdin and
//! terminal from the start), which waits on `FD` (one end of a socket pair) until zkguard
//! says go, then execs CMD in its place: zkguard says go only once the command's watchdog
//! runs ([`Child::release`]), so no moment of the command runs without one (a zkguard
//! frozen between the two would otherwise leave the command unwatched). The gate says on
//! the same socket why an exec failed; a successful exec closes the gate's end
//! (close-on-exec), which zkguard reads as the command running. std's spawn cannot wait
//! for this itself: it waits for the exec, so a wait in `pre_exec` would never end.
//!
//! The `unsafe` of the command line is here: std's `CommandExt::pre_exec`, for what must
//! happen in the command's process between fork and exec, and the gate's taking of the
//! socket it was given by number.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use nix::fcntl::FdFlag;
use nix::sys::signal::{kill, killpg, raise, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, getpid, Pid};

use crate::conn::SECRET_ENV;
use crate::fail::{Fail, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_SOFTWARE, EXIT_USAGE};
use crate::tty::Terminal;

/// A running command.
pub struct Child {
    /// Its pid, which is also its process group's id.
    pub pid: Pid,
    /// Its start time ([`crate::watchdog::start_time`]), read while the gate waits: the
    /// watchdog signals the group only while its leader is this process.
    pub start: Option<u64>,
    /// Gets its status once (the waiting thread reaps it), as a shell reports it: the exit
    /// code, or 128 + the signal that killed it ([`EXIT_SOFTWARE`] if it cannot be waited for).
    pub exited: Receiver<i32>,
    /// The signal, each time the command itself is stopped (SIGSTOP, SIGTSTP, SIGTTIN …).
    pub stopped: Receiver<Signal>,
    /// zkguard's terminal, which the command has while it runs in the foreground.
    terminal: Option<Terminal>,
    /// zkguard's end of the gate's socket, until [`Child::release`].
    gate: std::sync::Mutex<Option<UnixStream>>,
    /// The command as asked for, for messages.
    program: String,
}

impl Child {
    /// Gives the command the terminal (if zkguard has it); true if the command has it now.
    pub fn give_terminal(&self) -> bool {
        self.terminal.is_some_and(|t| t.give(self.pid))
    }

    /// Takes the terminal back from the command (if it has it), so that Ctrl-C and Ctrl-Z
    /// reach zkguard while the command is stopped or after it has exited.
    pub fn take_terminal_back(&self) {
        if let Some(t) = self.terminal {
            t.take_back(self.pid);
        }
    }

    /// Whether the command runs with zkguard's terminal (zkguard's stdin is one).
    pub fn has_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// Sends `sig` to the command's process group.
    pub fn signal(&self, sig: Signal) {
        signal_group(self.pid, sig);
    }

    /// Opens the gate (once its watchdog runs): the gate execs the command. Returns at once
    /// (the gate may be stopped by then: a watchdog that fired before the go), with the
    /// receiver of the exec's failure: a command that cannot be run is the error a shell
    /// gives (127 not found, 126 otherwise), sent before the gate's exit is reported on
    /// `exited`; the sender is dropped once the command runs (or the gate is gone).
    pub fn release(&self) -> Receiver<Fail> {
        let (tx, failed) = crossbeam_channel::bounded(1);
        let gate = self.gate.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut gate) = gate.filter(|mut g| g.write_all(&[GO]).is_ok()) {
            let program = self.program.clone();
            std::thread::spawn(move || {
                let mut why = String::new();
                if let Ok(1..) = gate.read_to_string(&mut why) {
                    let _ = tx.send(exec_failure(&program, &why));
                }
            });
        }
        failed
    }
}

/// The byte that opens the gate.
const GO: u8 = b'g';

/// The first argument that runs the gate instead of the command line.
pub const GATE_ARG: &str = "__gate";

/// What the gate says when the exec failed: `nf` (not found) or `ex MESSAGE`.
fn exec_failure(program: &str, why: &str) -> Fail {
    match why.strip_prefix("ex ") {
        None => Fail::new(EXIT_NOT_FOUND, format!("{program}: command not found")),
        Some(e) => Fail::new(EXIT_CANNOT_EXECUTE, format!("cannot run {program}: {e}")),
    }
}

/// Starts `cmd` with `env` added and zkguard's secrets ([`SECRET_ENV`]) removed, as the
/// leader of a new process group (so a signal for the command reaches its children too, and
/// zkguard can stop and continue the group without stopping itself). On Linux the command
/// is killed if zkguard dies (`PR_SET_PDEATHSIG`): a crashed zkguard releases the lock, so
/// its command must not run on. With `terminal`, the new group becomes the terminal's
/// foreground group before the command runs (if zkguard's group had it): the terminal's
/// Ctrl-C and Ctrl-Z then reach the command directly. Without, they reach zkguard, which
/// forwards Ctrl-C and stops both on Ctrl-Z.
pub fn spawn(
    cmd: &[OsString],
    env: &[(&str, String)],
    terminal: Option<Terminal>,
) -> Result<Child, Fail> {
    let program = cmd
        .first()
        .ok_or_else(|| Fail::new(2, "no command to run (give one after --)"))?
        .to_string_lossy()
        .into_owned();
    let fail = |e: io::Error| {
        Fail::new(
            EXIT_SOFTWARE,
            format!("cannot start the command's gate: {e}"),
        )
    };
    let (ours, theirs) = UnixStream::pair().map_err(fail)?;
    let theirs = Arc::new(theirs);
    let fd = theirs.as_raw_fd();
    let mut c = Command::new(crate::watchdog::own_binary().map_err(fail)?);
    c.arg0("zkguard")
        .arg(GATE_ARG)
        .arg(fd.to_string())
        .arg("--")
        .args(cmd)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0);
    for name in SECRET_ENV {
        c.env_remove(name);
    }
    let parent_group = getpgrp();
    let parent = nix::unistd::getpid();
    // The gate's end of the socket is kept across the exec of the gate only (close-on-exec
    // cleared in the child).
    let gate_end = Arc::clone(&theirs);
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed. It makes only thin wrappers of such calls
    // (fcntl, prctl, getppid, and in `claim_in_child` tcgetpgrp, getpgrp, tcsetpgrp and
    // pthread_sigmask), allocates nothing but the error of an early parent exit (after
    // which the child exits), and captures only `Copy` values made before the fork and
    // an `Arc` of the socket, only read through.
    unsafe {
        c.pre_exec(move || {
            nix::fcntl::fcntl(&*gate_end, nix::fcntl::FcntlArg::F_SETFD(FdFlag::empty()))?;
            before_exec(terminal, parent_group, parent)
        });
    }
    let child = c.spawn().map_err(fail)?;
    // The gate has its end now: zkguard's copy goes, so that its exec closes the last one.
    drop(c);
    drop(theirs);
    let pid = Pid::from_raw(child.id() as i32);
    // Read before anything can reap it: the gate waits for the go.
    let start = crate::watchdog::start_time(pid);
    GROUP.store(pid.as_raw(), Ordering::SeqCst);
    // Reaped by waitpid below, not by `child` (which has no Drop that waits or kills).
    drop(child);
    let (tx, exited) = crossbeam_channel::bounded(1);
    let (stop_tx, stopped) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        let code = loop {
            match waitpid(pid, Some(WaitPidFlag::WUNTRACED)) {
                Ok(WaitStatus::Stopped(_, sig)) => {
                    let _ = stop_tx.send(sig);
                }
                Ok(WaitStatus::Exited(_, code)) => break code,
                Ok(WaitStatus::Signaled(_, sig, _)) => break 128 + sig as i32,
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break EXIT_SOFTWARE,
            }
        };
        GROUP.store(0, Ordering::SeqCst);
        let _ = tx.send(code);
    });
    Ok(Child {
        pid,
        start,
        exited,
        stopped,
        terminal,
        gate: std::sync::Mutex::new(Some(ours)),
        program,
    })
}

/// The gate (`zkguard __gate FD -- CMD…`, see the module doc): waits on the socket `FD` for
/// zkguard's go, then execs CMD; returns only if it cannot (its exit status).
pub fn gate(args: &[OsString]) -> i32 {
    let fd = match args {
        [fd, dashes, _, ..] if dashes == "--" => fd
            .to_str()
            .and_then(|f| f.parse::<i32>().ok())
            .filter(|f| *f > 2 && is_socket(*f)),
        _ => None,
    };
    let Some(fd) = fd else {
        crate::logging::line(format!(
            "{GATE_ARG} is for zkguard's own use (FD -- COMMAND…, FD an inherited socket)"
        ));
        return EXIT_USAGE;
    };
    // SAFETY: `fd` is open and a socket (checked above), inherited from zkguard for this
    // process alone; nothing else here uses it.
    let mut gate = unsafe { UnixStream::from_raw_fd(fd) };
    let mut go = [0u8; 1];
    // zkguard gone, or it gave up before the go: the command does not run.
    if !matches!(gate.read(&mut go), Ok(1) if go[0] == GO) {
        return EXIT_SOFTWARE;
    }
    // Closed by the exec: zkguard reads that as the command running.
    if nix::fcntl::fcntl(&gate, nix::fcntl::FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).is_err() {
        return EXIT_SOFTWARE;
    }
    let e = Command::new(&args[2]).args(&args[3..]).exec();
    let why = match e.kind() {
        io::ErrorKind::NotFound => "nf".to_string(),
        _ => format!("ex {e}"),
    };
    let _ = gate.write_all(why.as_bytes());
    match e.kind() {
        io::ErrorKind::NotFound => EXIT_NOT_FOUND,
        _ => EXIT_CANNOT_EXECUTE,
    }
}

/// Whether this process's file descriptor `fd` is an open socket.
fn is_socket(fd: i32) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(format!("/proc/self/fd/{fd}")).is_ok_and(|m| m.file_type().is_socket())
}

/// In the command's process, between fork and exec: takes the terminal (see
/// [`Terminal::claim_in_child`]) and, on Linux, asks for SIGKILL when zkguard dies, failing
/// if it already has. Async-signal-safe.
fn before_exec(terminal: Option<Terminal>, parent_group: Pid, parent: Pid) -> io::Result<()> {
    if let Some(t) = terminal {
        t.claim_in_child(parent_group);
    }
    #[cfg(target_os = "linux")]
    {
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
        if nix::unistd::getppid() != parent {
            return Err(io::Error::other(
                "zkguard exited before the command started",
            ));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
    Ok(())
}

/// Sends `sig` to the process group `pid` (one that is gone is ignored).
fn signal_group(pid: Pid, sig: Signal) {
    let _ = killpg(pid, sig);
}

/// A signal's name for messages.
pub fn signal_name(sig: Signal) -> &'static str {
    sig.as_str()
}

/// The running command's process group, for the signal thread (0: none).
static GROUP: AtomicI32 = AtomicI32::new(0);

/// What the signal thread sends after zkguard was stopped (SIGTSTP) and continued: the
/// command, stopped with it, waits until the lock is proven again. Not a request to end.
pub const RESUMED: Signal = Signal::SIGCONT;

/// SIGINT, SIGTERM and SIGHUP as a channel (signal-hook's self-pipe, read by a thread).
///
/// SIGTSTP (Ctrl-Z) is handled here: the command's group is stopped first, then zkguard
/// stops itself; once continued it sends [`RESUMED`] if a command is running. Without this
/// the command would run on, unsupervised, while the stopped zkguard's session expires.
pub fn signals() -> Result<Receiver<Signal>, Fail> {
    let handled = [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGTSTP,
    ];
    let mut s = signal_hook::iterator::Signals::new(handled.map(|s| s as i32))
        .map_err(|e| Fail::new(EXIT_SOFTWARE, format!("cannot handle signals: {e}")))?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for raw in s.forever() {
            let Ok(sig) = Signal::try_from(raw) else {
                continue;
            };
            let sig = if sig == Signal::SIGTSTP {
                let group = GROUP.load(Ordering::SeqCst);
                if group != 0 {
                    signal_group(Pid::from_raw(group), Signal::SIGSTOP);
                }
                // Stops this process until a SIGCONT.
                let _ = raise(Signal::SIGSTOP);
                if group == 0 {
                    continue;
                }
                RESUMED
            } else {
                sig
            };
            if tx.send(sig).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

/// Stops zkguard as Ctrl-Z does (through the SIGTSTP handling of [`signals`]: the
/// command's group is stopped too, and [`RESUMED`] comes once zkguard is continued).
pub fn stop_self() {
    let _ = kill(getpid(), Signal::SIGTSTP);
}

/// The next signal that asks zkguard to end, by `deadline` (None: none came).
pub fn next_signal(signals: &Receiver<Signal>, deadline: Option<Instant>) -> Option<Signal> {
    loop {
        let sig = match deadline {
            Some(d) => signals.recv_deadline(d).ok()?,
            None => signals.recv().ok()?,
        };
        if sig != RESUMED {
            return Some(sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    /// `zkguard __gate` by hand with no socket of zkguard's: a usage error, nothing run.
    /// (File descriptor 1000 is not open in the test process; 0 to 2 are stdio.)
    #[test]
    fn the_gate_refuses_what_is_not_zkguard_s_socket() {
        for bad in [
            &[][..],
            &["7"],
            &["7", "--"],
            &["7", "x", "true"],
            &["1", "--", "true"],
            &["-3", "--", "true"],
            &["x", "--", "true"],
            &["1000", "--", "true"],
        ] {
            assert_eq!(super::gate(&args(bad)), crate::fail::EXIT_USAGE, "{bad:?}");
        }
    }

    #[test]
    fn an_exec_failure_reads_as_a_shell_s() {
        let f = super::exec_failure("nope", "nf");
        assert_eq!((f.code, f.msg.as_str()), (127, "nope: command not found"));
        let f = super::exec_failure("./x", "ex Permission denied (os error 13)");
        assert_eq!(
            (f.code, f.msg.as_str()),
            (126, "cannot run ./x: Permission denied (os error 13)")
        );
    }
}
