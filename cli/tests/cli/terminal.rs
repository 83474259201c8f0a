//! A command that reads the terminal: zkguard runs on a pseudo-terminal (as the session
//! leader, like a login shell's job) and its command gets the terminal while it runs.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use crate::common::*;
use crate::setup;

/// A pseudo-terminal: the master (the test types into it) and the slave's path.
struct Pty {
    master: File,
    slave: std::path::PathBuf,
}

impl Pty {
    fn open() -> Pty {
        // SAFETY: plain calls on a descriptor we own; the name buffer is NUL-terminated by
        // ptsname_r on success.
        unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            assert_eq!(libc::grantpt(fd), 0, "grantpt");
            assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
            let slave = std::ffi::CStr::from_ptr(name.as_ptr())
                .to_string_lossy()
                .into_owned();
            Pty {
                master: File::from_raw_fd(fd),
                slave: slave.into(),
            }
        }
    }

    /// Types `text` (a line, or a control character such as Ctrl-Z).
    fn type_in(&mut self, text: &[u8]) {
        self.master.write_all(text).unwrap();
        self.master.flush().unwrap();
    }

    /// `zkguard ARGS -- sh -c SCRIPT` with the terminal as its controlling terminal, in a
    /// session of its own (so its group is the terminal's foreground group), and as its
    /// stdin if `stdin`.
    fn start(&self, cs: &str, s: &Scratch, args: &[&str], script: &str) -> Running {
        self.start_with(cs, s, args, script, true)
    }

    fn start_with(
        &self,
        cs: &str,
        s: &Scratch,
        args: &[&str],
        script: &str,
        stdin: bool,
    ) -> Running {
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.slave)
            .unwrap();
        let tty = slave.as_raw_fd();
        let mut c = zkguard(cs);
        c.args(args).args(["--", "sh", "-c", script]);
        if stdin {
            c.stdin(Stdio::from(slave.try_clone().unwrap()));
        }
        // SAFETY: setsid and ioctl are async-signal-safe; `slave` outlives the spawn.
        unsafe {
            c.pre_exec(move || {
                if libc::setsid() < 0 || libc::ioctl(tty, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Running::start(c, s, "zkguard")
    }
}

/// The terminal's foreground process group, as /proc shows it for `pid` (its 8th field).
fn foreground(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(5)?
        .parse()
        .ok()
}

/// The command reads a line typed on the terminal (it is the foreground job, not stopped
/// by SIGTTIN), exits, and the lock is released; zkguard takes the terminal back from the
/// background without being stopped (SIGTTOU).
#[test]
fn a_command_reads_a_line_from_the_terminal() {
    let (cs, s, path) = setup("tty-read");
    let mut pty = Pty::open();
    let script = format!(
        "IFS= read -r line && echo \"$line\" > '{}'",
        s.path("got").display()
    );
    let mut z = pty.start(&cs, &s, &["lock", &path], &script);
    z.wait_stderr("running the command");
    pty.type_in(b"hello from the terminal\n");
    assert_eq!(z.wait(PATIENCE), 0, "{}", z.stderr());
    assert_eq!(s.lines("got"), ["hello from the terminal"]);
    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "-n", "--", "true"]));
    assert_eq!(code, 0, "the lock was not released: {err}");
}

/// With the terminal, Ctrl-Z stops the command and zkguard (which takes the terminal
/// back), and after zkguard is continued the command is the foreground job again and
/// reads its line; Ctrl-C reaches the command, and its death by SIGINT ends `--loop`.
#[test]
fn ctrl_z_and_ctrl_c_with_the_terminal() {
    let (cs, s, path) = setup("tty-keys");
    let mut pty = Pty::open();
    let script = format!(
        "echo $$ >> '{pid}'; IFS= read -r line && echo \"$line\" >> '{got}'",
        pid = s.path("pid").display(),
        got = s.path("got").display()
    );
    let mut z = pty.start(&cs, &s, &["elect", &path, "--loop"], &script);
    let zk = z.pid();
    s.wait_lines("pid", "the first term", |l| l.len() == 1);
    let cmd: i32 = s.lines("pid")[0].parse().unwrap();
    let fg = || format!("foreground {:?}: {}", foreground(zk), z.stderr());
    wait_until(fg, || foreground(zk) == Some(cmd));

    pty.type_in(b"\x1a");
    wait_until(
        || format!("not both stopped: {}", fg()),
        || group_stopped(cmd) && proc_state(zk) == Some('T'),
    );
    assert_eq!(foreground(zk), Some(zk), "not taken back: {}", fg());
    // As a shell's `fg` would.
    z.signal(libc::SIGCONT);
    wait_until(fg, || foreground(zk) == Some(cmd));
    pty.type_in(b"one\n");
    s.wait_lines("got", "the line read after Ctrl-Z", |l| l == ["one"]);

    s.wait_lines("pid", "the second term", |l| l.len() == 2);
    let cmd: i32 = s.lines("pid")[1].parse().unwrap();
    wait_until(fg, || foreground(zk) == Some(cmd));
    pty.type_in(b"\x03");
    assert_eq!(z.wait(PATIENCE), 130, "{}", z.stderr());
    assert_eq!(s.lines("got"), ["one"]);
}

/// `--on-suspend stop` with the terminal: while the holder is cut off its command is
/// stopped and zkguard has the terminal (so Ctrl-C would reach zkguard); after the heal
/// the command is the foreground job again, continued, and reads its line.
#[test]
fn a_suspended_command_gives_the_terminal_back_until_resumed() {
    let (_, s, path) = setup("tty-suspend");
    let proxy = zkguard::testing::FaultProxy::for_cluster(cluster()).unwrap();
    let mut pty = Pty::open();
    let script = format!(
        "echo $$ > '{pid}'; IFS= read -r line && echo \"$line\" > '{got}'",
        pid = s.path("pid").display(),
        got = s.path("got").display()
    );
    let args = ["--session-timeout", "20s", "lock", &path];
    let mut z = pty.start(&proxy.connect_string(), &s, &args, &script);
    let zk = z.pid();
    s.wait_lines("pid", "the command", |l| l.len() == 1);
    let cmd: i32 = s.lines("pid")[0].parse().unwrap();
    let fg = || format!("foreground {:?}: {}", foreground(zk), z.stderr());
    wait_until(fg, || foreground(zk) == Some(cmd));

    proxy.blackhole();
    proxy.reset();
    wait_until(
        || format!("not stopped with zkguard in the foreground: {}", fg()),
        || group_stopped(cmd) && foreground(zk) == Some(zk),
    );
    proxy.heal();
    wait_until(
        || format!("not continued in the foreground: {}", fg()),
        || !group_stopped(cmd) && foreground(zk) == Some(cmd),
    );
    pty.type_in(b"after the heal\n");
    assert_eq!(z.wait(PATIENCE), 0, "{}", z.stderr());
    assert_eq!(s.lines("got"), ["after the heal"]);
}

/// With a controlling terminal but stdin elsewhere, zkguard keeps the terminal; a command
/// that reads it anyway (`/dev/tty`) is stopped (SIGTTIN), and zkguard says why instead of
/// waiting silently.
#[test]
fn a_command_wanting_a_terminal_zkguard_cannot_give_is_named() {
    let (cs, s, path) = setup("tty-none");
    let pty = Pty::open();
    let script = format!(
        "echo $$ > '{}'; read line < /dev/tty",
        s.path("pid").display()
    );
    let z = pty.start_with(&cs, &s, &["lock", &path], &script, false);
    s.wait_lines("pid", "the command", |l| l.len() == 1);
    let cmd: i32 = s.lines("pid")[0].parse().unwrap();
    z.wait_stderr("it wants the terminal, and zkguard has none to give");
    assert!(group_stopped(cmd), "{:?}", group_members(cmd));
    assert_eq!(foreground(z.pid()), Some(z.pid()));
}
