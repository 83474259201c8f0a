//! The terminal: while the command runs it is the terminal's foreground job (as under a
//! shell), so it can read the terminal and Ctrl-C and Ctrl-Z reach it; zkguard takes the
//! terminal back whenever the command is stopped or has exited.

/// zkguard's standard input, when it is a terminal.
#[derive(Clone, Copy)]
pub struct Terminal {
    fd: libc::c_int,
}

impl Terminal {
    /// The terminal on standard input, if there is one. The command gets it only while
    /// zkguard's own process group has it (not when zkguard runs in the background).
    pub fn stdin() -> Option<Terminal> {
        // SAFETY: isatty only inspects the descriptor.
        (unsafe { libc::isatty(libc::STDIN_FILENO) } == 1).then_some(Terminal {
            fd: libc::STDIN_FILENO,
        })
    }

    /// Whether zkguard's process group is the terminal's foreground group.
    pub fn ours(&self) -> bool {
        // SAFETY: plain queries of this process and its terminal.
        unsafe { libc::tcgetpgrp(self.fd) == libc::getpgrp() }
    }

    /// Makes `group` the foreground group if zkguard's group is (never takes the terminal
    /// from whoever else has it). True if `group` has it now.
    pub fn give(&self, group: i32) -> bool {
        // SAFETY: a plain query of the terminal.
        let fg = unsafe { libc::tcgetpgrp(self.fd) };
        fg == group || (self.ours() && set_foreground(self.fd, group))
    }

    /// Makes zkguard's group the foreground group again, if `group` has the terminal.
    pub fn take_back(&self, group: i32) {
        // SAFETY: plain queries of this process and its terminal.
        if unsafe { libc::tcgetpgrp(self.fd) } == group {
            set_foreground(self.fd, unsafe { libc::getpgrp() });
        }
    }

    /// For the command's `pre_exec` (between fork and exec, async-signal-safe calls only):
    /// makes the command's new process group the foreground group if zkguard's group
    /// (`parent_group`) has the terminal. Done in the command itself, before it runs, so it
    /// cannot read the terminal first and be stopped (SIGTTIN).
    pub fn claim_in_child(&self, parent_group: i32) {
        // SAFETY: async-signal-safe queries and tcsetpgrp.
        unsafe {
            if libc::tcgetpgrp(self.fd) == parent_group {
                set_foreground(self.fd, libc::getpgrp());
            }
        }
    }
}

/// tcsetpgrp with SIGTTOU blocked in the calling thread: from a background group (zkguard's
/// while the command has the terminal) it would otherwise stop the caller. Async-signal-safe.
fn set_foreground(fd: libc::c_int, group: i32) -> bool {
    // SAFETY: the sets are initialised by sigemptyset before use; the old mask is restored.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        let ok = libc::tcsetpgrp(fd, group) == 0;
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        ok
    }
}
