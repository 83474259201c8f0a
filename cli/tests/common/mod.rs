//! Helpers for the command-line tests: a shared real ZooKeeper server, the built binary,
//! and waits with deadlines.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use zkguard::testing::TestCluster;
use zkguard::Client;

/// Generous: the machine may be slow and loaded.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// One standalone server for every test of this binary; its watchdog stops it at exit.
pub fn cluster() -> &'static TestCluster {
    static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let c = TestCluster::start(1).expect("start a ZooKeeper server");
        // The tests' parent, open to all: a test whose lock (with a creator ACL) made it
        // would close it to every other test's identity.
        Client::connect(&c.connect_string())
            .and_then(|z| z.ensure_path("/cli"))
            .expect("create /cli");
        c
    })
}

pub fn client(connect: &str) -> Client {
    Client::builder(connect)
        .connect_timeout(Duration::from_secs(20))
        .build()
        .unwrap_or_else(|e| panic!("connect to {connect}: {e}"))
}

/// A fresh lock path.
pub fn unique(prefix: &str) -> String {
    format!("/cli/{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// A scratch directory; the tests' commands write their lines into files there.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The lines of a file (none if it does not exist yet).
    pub fn lines(&self, name: &str) -> Vec<String> {
        read_lines(&self.path(name))
    }

    /// Waits until the lines of `name` satisfy `pred`; panics with them at the deadline.
    pub fn wait_lines(&self, name: &str, what: &str, pred: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let lines = self.lines(name);
            if pred(&lines) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {PATIENCE:?}; {name} has {lines:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A command that writes its pid to `pid`, then a `tick` line to `ticks` every 50 ms
    /// until `go` exists; `prelude` runs first (a trap, say).
    pub fn ticker(&self, prelude: &str) -> String {
        format!(
            "{prelude} echo $$ > '{}'; while [ ! -e '{}' ]; do echo tick >> '{}'; sleep 0.05; done",
            self.path("pid").display(),
            self.path("go").display(),
            self.path("ticks").display()
        )
    }

    /// The ticker's pid, once it ticks.
    pub fn ticker_pid(&self) -> i32 {
        self.wait_lines("ticks", "the command running", |l| !l.is_empty());
        self.lines("pid")[0].parse().unwrap()
    }

    /// Waits until the ticker has ticked `n` more times than `since` (it runs).
    pub fn wait_ticks_after(&self, since: usize, n: usize) {
        self.wait_lines("ticks", "the command ticking", |l| l.len() >= since + n);
    }

    pub fn touch(&self, name: &str) {
        std::fs::write(self.path(name), b"").unwrap();
    }
}

pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `zkguard` with `--connect` set.
pub fn zkguard(connect: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zkguard"));
    c.env_remove("ZK_CONNECT")
        .env_remove("ZKGUARD_AUTH")
        .env_remove("ZKGUARD_TLS_CA")
        .env_remove("ZKGUARD_TLS_CERT")
        .env_remove("ZKGUARD_TLS_KEY")
        .env_remove("ZKGUARD_SASL_USER")
        .env_remove("ZKGUARD_SASL_PASSWORD")
        .env_remove("RUST_LOG")
        .env_remove("RUST_LOG_STYLE")
        .arg("--connect")
        .arg(connect)
        .arg("--connect-timeout")
        .arg("20s")
        .stdin(Stdio::null());
    c
}

/// A running zkguard, its stderr in a file; SIGKILLed if the test ends first.
pub struct Running {
    pub child: Child,
    pub stderr: PathBuf,
}

impl Running {
    pub fn start(mut cmd: Command, scratch: &Scratch, name: &str) -> Running {
        let stderr = scratch.path(&format!("{name}.stderr"));
        let file = std::fs::File::create(&stderr).unwrap();
        let child = cmd
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start zkguard");
        Running { child, stderr }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Its exit status (panics, showing its stderr, at the deadline).
    pub fn wait(&mut self, within: Duration) -> i32 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return exit_code(st);
            }
            assert!(
                Instant::now() < deadline,
                "zkguard did not exit within {within:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until its stderr contains `text`.
    pub fn wait_stderr(&self, text: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.stderr().contains(text) {
            assert!(
                Instant::now() < deadline,
                "no {text:?} on stderr within {PATIENCE:?}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Starts `zkguard ARGS -- sh -c SCRIPT` against `connect`, its stderr in `NAME.stderr`.
pub fn start_sh(connect: &str, s: &Scratch, name: &str, args: &[&str], script: &str) -> Running {
    let mut c = zkguard(connect);
    c.args(args).args(["--", "sh", "-c", script]);
    Running::start(c, s, name)
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// Runs zkguard to the end: (status, stdout, stderr).
pub fn output(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("run zkguard");
    (
        exit_code(out.status),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Waits until `n` contenders are queued at a lock path (seen through the library).
pub fn wait_contenders(client: &Client, path: &str, n: usize) {
    let lock = zkguard::Mutex::new(client, path).unwrap();
    wait_count(&format!("contenders at {path}"), n, || {
        lock.participants().map(|p| p.len()).unwrap_or(0)
    });
}

/// Waits until `count()` says `n` (polled every 20 ms, for up to [`PATIENCE`]).
pub fn wait_count(what: &str, n: usize, count: impl Fn() -> usize) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let seen = count();
        if seen == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{n} {what} not within {PATIENCE:?} (saw {seen})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first line a child prints on stdout (a server's connect string), within two minutes.
pub fn first_line(child: &mut std::process::Child) -> String {
    let stdout = child.stdout.take().expect("stdout piped");
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("a connect string within 2 minutes")
}

/// A shell loop that waits (at most a minute) for a file, then exits 0; 1 if it never came.
pub fn until_file(path: &Path) -> String {
    format!(
        "i=0; while [ ! -e '{p}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; [ -e '{p}' ]",
        p = path.display()
    )
}

/// Polls `cond` every 20 ms; panics with `what()` at the deadline.
pub fn wait_until(what: impl Fn() -> String, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Gone, or a zombie waiting for a reaper that is not ours.
pub fn is_dead(pid: i32) -> bool {
    matches!(proc_state(pid), None | Some('Z'))
}

/// The state letter of a process in /proc (R, S, T …), if it exists.
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The processes of process group `pgid`: (pid, state letter, parent's pid).
pub fn group_members(pgid: i32) -> Vec<(i32, char, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) S ppid pgrp ...": the fields after the last ')'.
            let mut f = stat.rsplit_once(')')?.1.split_whitespace();
            let state = f.next()?.chars().next()?;
            let ppid: i32 = f.next()?.parse().ok()?;
            let pgrp: i32 = f.next()?.parse().ok()?;
            (pgrp == pgid).then_some((pid, state, ppid))
        })
        .collect()
}

/// Whether process group `pgid` (a command's: its pid) is stopped: no process of it can
/// run. Each is stopped (`T`), a zombie, or a shell blocked in `vfork` on a stopped child
/// (`D`, with a child of the group in `T`): dash starts a command with vfork, and a
/// SIGSTOP for the group that catches the child between vfork and exec stops the child
/// before it execs, so its parent waits in the kernel (`D`), never `T`, until the group is
/// continued. Looking at the leader's state alone misses that stop.
pub fn group_stopped(pgid: i32) -> bool {
    let members = group_members(pgid);
    let stopped_child = |parent: i32| {
        members
            .iter()
            .any(|&(_, state, ppid)| ppid == parent && state == 'T')
    };
    members.iter().any(|&(_, state, _)| state == 'T')
        && members.iter().all(|&(pid, state, _)| match state {
            'T' | 'Z' => true,
            'D' => stopped_child(pid),
            _ => false,
        })
}

/// Whether a line of zkguard's stderr is one of the library's log records
/// (`[LEVEL target] message`, from `-vv` on `[TIMESTAMP LEVEL target] message`).
pub fn is_log_record(line: &str) -> bool {
    const LEVELS: [&str; 5] = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"];
    line.strip_prefix('[')
        .and_then(|rest| rest.split_once("] "))
        .is_some_and(|(head, _)| {
            let words: Vec<&str> = head.split_whitespace().collect();
            words.len() >= 2 && LEVELS.contains(&words[words.len() - 2])
        })
}

/// Whether a line of zkguard's stderr is its notice that a connect is taking long (`no
/// ZooKeeper answers at … yet`, said after a second without a session): on a loaded machine
/// a TLS and SASL handshake may take that long before it fails or succeeds, so a test that
/// counts the lines a failure prints leaves it out.
pub fn is_connect_notice(line: &str) -> bool {
    line.starts_with("zkguard: no ZooKeeper answers at ") && line.contains(" yet; still trying")
}

/// zkguard's own lines of its stderr: all but the library's log records.
pub fn own_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| !is_log_record(l)).collect()
}

/// The checks of `zkguard doctor` that measure how loaded the server is right now (request
/// latency, fsync times), not how a test set it up: on a loaded test machine they warn.
const LOAD_CHECKS: [&str; 2] = ["latency", "fsync"];

/// Whether `doctor` passed, but for warnings of the load it measured: exit 0, or exit 1
/// (warnings) where `not_passed` (the checks of every finding that did not pass) are all
/// load measurements.
pub fn doctor_passed_but_for_load<'a>(
    code: i32,
    not_passed: impl IntoIterator<Item = &'a str>,
) -> bool {
    code == 0
        || (code == 1
            && not_passed
                .into_iter()
                .all(|check| LOAD_CHECKS.contains(&check)))
}

/// The checks of a `doctor --json` report's findings that did not pass.
pub fn doctor_not_passed(report: &serde_json::Value) -> Vec<&str> {
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["status"] != "pass")
        .map(|f| f["check"].as_str().unwrap_or("?"))
        .collect()
}
