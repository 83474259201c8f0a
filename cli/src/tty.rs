//! The terminal: while the command runs it is the terminal's foreground job (as under a
//! shell), so it can read the terminal and Ctrl-C and Ctrl-Z reach it; zkguard takes the
//! terminal back whenever the command is stopped or has exited.

use std::io::IsTerminal;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::OnceLock;

use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::unistd::{getpgrp, tcgetpgrp, tcsetpgrp, Pid};

/// zkguard's standard input, when it is a terminal.
#[derive(Clone, Copy)]
pub struct Terminal {
    fd: BorrowedFd<'static>,
}

impl Terminal {
    /// The terminal on standard input, if there is one. The command gets it only while
    /// zkguard's own process group has it (not when zkguard runs in the background).
    pub fn stdin() -> Option<Terminal> {
        // Kept for the life of the process, so its descriptor can be borrowed for as long
        // (and used between fork and exec, where nothing may be allocated).
        static STDIN: OnceLock<std::io::Stdin> = OnceLock::new();
        let stdin = STDIN.get_or_init(std::io::stdin);
        stdin.is_terminal().then(|| Terminal { fd: stdin.as_fd() })
    }

    /// The terminal's foreground group (none if it cannot be asked).
    fn foreground(&self) -> Option<Pid> {
        tcgetpgrp(self.fd).ok()
    }

    /// Whether zkguard's process group is the terminal's foreground group.
    pub fn ours(&self) -> bool {
        self.foreground() == Some(getpgrp())
    }

    /// Makes `group` the foreground group if zkguard's group is (never takes the terminal
    /// from whoever else has it). True if `group` has it now.
    pub fn give(&self, group: Pid) -> bool {
        self.foreground() == Some(group) || (self.ours() && self.set_foreground(group))
    }

    /// Makes zkguard's group the foreground group again, if `group` has the terminal.
    pub fn take_back(&self, group: Pid) {
        if self.foreground() == Some(group) {
            self.set_foreground(getpgrp());
        }
    }

    /// For the command's `pre_exec` (between fork and exec, async-signal-safe calls only:
    /// `nix`'s thin wrappers of `tcgetpgrp`, `getpgrp`, `tcsetpgrp` and `pthread_sigmask`, which
    /// allocate nothing): makes the command's new process group the foreground group if
    /// zkguard's group (`parent_group`) has the terminal. Done in the command itself, before
    /// it runs, so it cannot read the terminal first and be stopped (SIGTTIN).
    pub fn claim_in_child(&self, parent_group: Pid) {
        if self.foreground() == Some(parent_group) {
            self.set_foreground(getpgrp());
        }
    }

    /// tcsetpgrp with SIGTTOU blocked in the calling thread: from a background group
    /// (zkguard's while the command has the terminal) it would otherwise stop the caller.
    /// Async-signal-safe.
    fn set_foreground(&self, group: Pid) -> bool {
        let mut block = SigSet::empty();
        block.add(Signal::SIGTTOU);
        let mut old = SigSet::empty();
        if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&block), Some(&mut old)).is_err() {
            return false;
        }
        let ok = tcsetpgrp(self.fd, group).is_ok();
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
        ok
    }
}
