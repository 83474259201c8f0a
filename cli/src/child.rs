//! The command: started in a process group of its own, signalled as a group, and waited for
//! by a thread that reports its exit on a channel.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

use crossbeam_channel::Receiver;

use crate::conn::SECRET_ENV;
use crate::tty::Terminal;
use crate::{Fail, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_SOFTWARE};

/// A running command.
pub struct Child {
    /// Its pid, which is also its process group's id.
    pub pid: i32,
    /// Gets its exit status once (the waiting thread reaps it).
    pub exited: Receiver<io::Result<ExitStatus>>,
    /// The signal, each time the command itself is stopped (SIGSTOP, SIGTSTP, SIGTTIN …).
    pub stopped: Receiver<i32>,
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
}

/// Starts `cmd` with `env` added and zkguard's secrets ([`SECRET_ENV`]) removed, as the leader of a new process group (so a signal for
/// the command reaches its children too, and zkguard can stop and continue the group
/// without stopping itself). On Linux the command is killed if zkguard dies (`PR_SET_PDEATHSIG`):
/// a crashed zkguard releases the lock, so its command must not run on. With `terminal`,
/// the new group becomes the terminal's foreground group before the command runs (if
/// zkguard's group had it): the terminal's Ctrl-C and Ctrl-Z then reach the command
/// directly. Without, they reach zkguard, which forwards Ctrl-C and stops both on Ctrl-Z.
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
    if let Some(t) = terminal {
        // SAFETY: a plain query of this process.
        let parent_group = unsafe { libc::getpgrp() };
        // SAFETY: claim_in_child makes only async-signal-safe calls.
        unsafe {
            c.pre_exec(move || {
                t.claim_in_child(parent_group);
                Ok(())
            });
        }
    }
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            c.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() as u32 != parent {
                    return Err(io::Error::other(
                        "zkguard exited before the command started",
                    ));
                }
                Ok(())
            });
        }
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
    let pid = child.id() as i32;
    GROUP.store(pid, Ordering::SeqCst);
    // Reaped by waitpid below, not by `child` (which has no Drop that waits or kills).
    drop(child);
    let (tx, exited) = crossbeam_channel::bounded(1);
    let (stop_tx, stopped) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        let status = loop {
            match wait(pid) {
                Ok(Waited::Stopped(sig)) => {
                    let _ = stop_tx.send(sig);
                }
                Ok(Waited::Exited(st)) => break Ok(st),
                Err(e) => break Err(e),
            }
        };
        GROUP.store(0, Ordering::SeqCst);
        let _ = tx.send(status);
    });
    Ok(Child {
        pid,
        exited,
        stopped,
        terminal,
    })
}

enum Waited {
    Stopped(i32),
    Exited(ExitStatus),
}

/// The command's next change: stopped (it can be continued) or exited (reaped).
fn wait(pid: i32) -> io::Result<Waited> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer; pid is our unreaped child.
        if unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) } == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(if libc::WIFSTOPPED(status) {
        Waited::Stopped(libc::WSTOPSIG(status))
    } else {
        Waited::Exited(ExitStatus::from_raw(status))
    })
}

/// Sends `sig` to the command's process group.
pub fn signal_group(pid: i32, sig: i32) {
    // SAFETY: kill has no memory effects; a group that is gone is ESRCH, ignored.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// The status as a shell reports it: the exit code, or 128 + the signal that killed it.
pub fn status_code(status: &io::Result<ExitStatus>) -> i32 {
    match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => EXIT_SOFTWARE,
    }
}

/// A signal's name for messages.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGTSTP => "SIGTSTP".into(),
        libc::SIGTTIN => "SIGTTIN".into(),
        libc::SIGTTOU => "SIGTTOU".into(),
        n => format!("signal {n}"),
    }
}

/// The running command's process group, for the signal thread (0: none).
static GROUP: AtomicI32 = AtomicI32::new(0);

/// What the signal thread sends after zkguard was stopped (SIGTSTP) and continued: the
/// command, stopped with it, waits until the lock is proven again. Not a request to end.
pub const RESUMED: i32 = libc::SIGCONT;

/// SIGINT, SIGTERM and SIGHUP as a channel (signal-hook's self-pipe, read by a thread).
///
/// SIGTSTP (Ctrl-Z) is handled here: the command's group is stopped first, then zkguard
/// stops itself; once continued it sends [`RESUMED`] if a command is running. Without this
/// the command would run on, unsupervised, while the stopped zkguard's session expires.
pub fn signals() -> Result<Receiver<i32>, Fail> {
    let mut s = signal_hook::iterator::Signals::new([
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGTSTP,
    ])
    .map_err(|e| Fail::new(EXIT_SOFTWARE, format!("cannot handle signals: {e}")))?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for sig in s.forever() {
            let sig = if sig == libc::SIGTSTP {
                let group = GROUP.load(Ordering::SeqCst);
                if group != 0 {
                    signal_group(group, libc::SIGSTOP);
                }
                // SAFETY: raise(3) stops this process until a SIGCONT.
                unsafe {
                    libc::raise(libc::SIGSTOP);
                }
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
    // SAFETY: kill has no memory effects.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGTSTP);
    }
}

/// The next signal that asks zkguard to end, by `deadline` (None: none came).
pub fn next_signal(signals: &Receiver<i32>, deadline: Option<Instant>) -> Option<i32> {
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
