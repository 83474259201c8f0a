//! The command: started in a process group of its own, signalled as a group, and waited for
//! by a thread that reports its exit on a channel.
//!
//! The one `unsafe` of the command line is here: std's `CommandExt::pre_exec`, for what
//! must happen in the command's process between fork and exec.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use crossbeam_channel::Receiver;
use nix::sys::signal::{kill, killpg, raise, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, getpid, Pid};

use crate::conn::SECRET_ENV;
use crate::tty::Terminal;
use crate::{Fail, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_SOFTWARE};

/// A running command.
pub struct Child {
    /// Its pid, which is also its process group's id.
    pub pid: Pid,
    /// Gets its status once (the waiting thread reaps it), as a shell reports it: the exit
    /// code, or 128 + the signal that killed it ([`EXIT_SOFTWARE`] if it cannot be waited for).
    pub exited: Receiver<i32>,
    /// The signal, each time the command itself is stopped (SIGSTOP, SIGTSTP, SIGTTIN …).
    pub stopped: Receiver<Signal>,
    /// zkguard's terminal, which the command has while it runs in the foreground.
    terminal: Option<Terminal>,
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
    let (program, args) = cmd.split_first().expect("spawn is called with a command");
    let mut c = Command::new(program);
    c.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0);
    for name in SECRET_ENV {
        c.env_remove(name);
    }
    let parent_group = getpgrp();
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed. It makes only thin wrappers of such calls
    // (prctl, getppid, and in `claim_in_child` tcgetpgrp, getpgrp, tcsetpgrp and
    // pthread_sigmask), allocates nothing but the error of an early parent exit (after
    // which the child exits), and captures only `Copy` values made before the fork.
    unsafe {
        c.pre_exec(move || before_exec(terminal, parent_group, parent));
    }
    let child = c.spawn().map_err(|e| {
        let name = program.to_string_lossy();
        match e.kind() {
            io::ErrorKind::NotFound => {
                Fail::new(EXIT_NOT_FOUND, format!("{name}: command not found"))
            }
            _ => Fail::new(EXIT_CANNOT_EXECUTE, format!("cannot run {name}: {e}")),
        }
    })?;
    let pid = Pid::from_raw(child.id() as i32);
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
        exited,
        stopped,
        terminal,
    })
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
