//! The Curator peer of `tests/curator.rs`: finding Curator, compiling `CuratorPeer.java`
//! (beside this file) once per test binary, running it in child JVMs, the marker files both
//! sides create while holding, and zkguard's side of the same loops.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use super::common::{connect, recv, shared_cluster, spawn, WITHIN};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use zkguard::testing::CuratorJava;
use zkguard::{Client, Mutex};

/// The compiled peer: the `java` to run it with and its class path.
pub struct Compiled {
    pub java: PathBuf,
    pub classpath: String,
}

/// `CuratorPeer` compiled once per test binary into a fresh directory under cargo's
/// temporary directory, against Curator found (or installed) by the harness
/// ([`CuratorJava::find`]). Every test fails with the reason if it cannot be built.
pub fn peer() -> &'static Compiled {
    static PEER: OnceLock<Result<Compiled, String>> = OnceLock::new();
    match PEER.get_or_init(compile_peer) {
        Ok(peer) => peer,
        Err(e) => panic!("Curator interop tests cannot run: {e}"),
    }
}

pub fn compile_peer() -> Result<Compiled, String> {
    let kit = CuratorJava::find().map_err(|e| e.to_string())?;
    let curator = kit.classpath.to_string_lossy().into_owned();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/curator/CuratorPeer.java");
    let out =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("curator-peer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let javac = Command::new(&kit.javac)
        .args(["-Xlint:all,-path", "-d"])
        .arg(&out)
        .arg("-cp")
        .arg(&curator)
        .arg(&source)
        .output()
        .map_err(|e| format!("cannot run {} ({e})", kit.javac.display()))?;
    if !javac.status.success() {
        return Err(format!(
            "{} {} against {curator} failed ({}): {}",
            kit.javac.display(),
            source.display(),
            javac.status,
            String::from_utf8_lossy(&javac.stderr)
        ));
    }
    Ok(Compiled {
        java: kit.java,
        classpath: format!("{}:{curator}", out.display()),
    })
}

/// A running `CuratorPeer`: its stdout lines arrive on a channel; killed on drop.
pub struct Peer {
    pub name: String,
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: Receiver<String>,
    pub seen: Vec<String>,
    pub stderr: Arc<StdMutex<String>>,
    /// Disconnects once stderr is read to its end.
    pub stderr_closed: Receiver<()>,
}

impl Peer {
    /// Starts `CuratorPeer <shared server> <args...>`.
    pub fn start(args: &[&str]) -> Peer {
        Self::start_on(&shared_cluster().connect_string(), &[], "", args)
    }

    /// Starts `CuratorPeer <connect> <args...>` with extra JVM options and class path
    /// entries (a secured ensemble's client settings).
    pub fn start_on(connect: &str, jvm: &[String], extra_cp: &str, args: &[&str]) -> Peer {
        let peer = peer();
        let cp = format!("{}{extra_cp}", peer.classpath);
        let name = args.join(" ");
        let mut child = Command::new(&peer.java)
            .args(["-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .args(jvm)
            .arg("-cp")
            .arg(cp)
            .arg("CuratorPeer")
            .arg(connect)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} ({e})", peer.java.display()));
        let (tx, lines) = crossbeam_channel::unbounded();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(StdMutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let (closing, stderr_closed) = crossbeam_channel::bounded::<()>(0);
        std::thread::spawn({
            let stderr = stderr.clone();
            move || {
                let _closing = closing;
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = err.read(&mut buf) {
                    stderr
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        let stdin = child.stdin.take();
        Peer {
            name,
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
            stderr_closed,
        }
    }

    pub fn fail(&self, what: &str) -> ! {
        panic!(
            "Curator peer `{}`: {what}; its output: {:?}; stderr: {}",
            self.name,
            self.seen,
            self.stderr.lock().unwrap()
        )
    }

    /// Waits for a line starting with `prefix` (earlier lines are kept for messages).
    pub fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + WITHIN;
        loop {
            match self.lines.recv_deadline(deadline) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return line;
                    }
                }
                Err(_) if Instant::now() >= deadline => {
                    self.fail(&format!("no `{prefix}` line within {WITHIN:?}"))
                }
                Err(_) => {
                    let status = self.exit_status();
                    self.fail(&format!("exited ({status}) before a `{prefix}` line"))
                }
            }
        }
    }

    /// Waits for the peer to exit (its stdout is closed) and for the rest of its stderr.
    pub fn exit_status(&mut self) -> String {
        let status = match self.child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => format!("wait: {e}"),
        };
        let _ = self.stderr_closed.recv_timeout(WITHIN);
        status
    }

    /// Asserts that the peer prints nothing for `within` (it is blocked).
    pub fn assert_quiet(&mut self, within: Duration, what: &str) {
        match self.lines.recv_timeout(within) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(line) => {
                self.seen.push(line.clone());
                self.fail(&format!("{what}: printed `{line}`"))
            }
            Err(RecvTimeoutError::Disconnected) => self.fail(&format!("{what}: exited")),
        }
    }

    /// Tells a peer in `hold` mode to release.
    pub fn release(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "release")
            .and_then(|_| stdin.flush())
            .unwrap();
        self.expect("released");
    }

    /// Waits for a looping peer's final line: its violation count, after checking that it
    /// did all `rounds`.
    pub fn violations(&mut self, rounds: usize) -> usize {
        let done = self.expect("done ");
        let field = |key: &str| -> usize {
            done.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| self.fail(&format!("no {key} in `{done}`")))
        };
        assert_eq!(
            field("rounds="),
            rounds,
            "Curator peer {} rounds",
            self.name
        );
        let violations = field("violations=");
        match self.lines.recv_timeout(WITHIN) {
            Err(RecvTimeoutError::Disconnected) => {}
            other => self.fail(&format!("printed {other:?} after `{done}`")),
        }
        let status = self.exit_status();
        if status != "exit status: 0" {
            self.fail(&format!("exited with {status}"));
        }
        violations
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// The shared mutual-exclusion check (the same rules as `Marker` in CuratorPeer.java)
// ---------------------------------------------------------------------------------------

/// What a holder marks in the shared directory.
#[derive(Clone, Copy, Debug)]
pub enum Mark {
    /// One of `slot-0..slot-(n-1)`, created exclusively: an exclusive lock or leadership
    /// (`n` = 1), or a semaphore permit. A violation if all are taken.
    Slots(u32),
    /// `r-<unique>`; a violation if `w` exists.
    Reader,
    /// `w`, created exclusively; a violation if it exists or any `r-*` does.
    Writer,
}

impl Mark {
    /// A marker making this mark in `dir` (the Java peer picks its mark from its recipe).
    pub fn marker(self, dir: &Path) -> Marker {
        Marker {
            dir: dir.to_path_buf(),
            mark: self,
            violations: Vec::new(),
        }
    }
}

pub struct Marker {
    pub dir: PathBuf,
    pub mark: Mark,
    pub violations: Vec<String>,
}

impl Marker {
    /// Takes a slot: the file to delete before releasing, or none (a violation).
    pub fn take(&mut self) -> Option<PathBuf> {
        match self.mark {
            Mark::Slots(n) => {
                let slot = (0..n).find_map(|i| self.create_new(&format!("slot-{i}")));
                if slot.is_none() {
                    self.violations.push(format!("all {n} slots taken"));
                }
                slot
            }
            Mark::Writer => {
                let Some(w) = self.create_new("w") else {
                    self.violations.push("w exists".into());
                    return None;
                };
                let readers: Vec<_> = std::fs::read_dir(&self.dir)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("r-"))
                    .collect();
                if !readers.is_empty() {
                    self.violations
                        .push(format!("readers {readers:?} hold with the writer"));
                }
                Some(w)
            }
            Mark::Reader => {
                let r = self.create_new(&format!("r-rust-{}", uuid::Uuid::new_v4().simple()));
                if self.dir.join("w").exists() {
                    self.violations.push("w exists with a reader".into());
                }
                r
            }
        }
    }

    pub fn create_new(&self, name: &str) -> Option<PathBuf> {
        let path = self.dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => Some(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
            Err(e) => panic!("create {}: {e}", path.display()),
        }
    }
}

/// A fresh, empty marker directory.
pub fn slot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("curator-slots-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------
// zkguard loops (one helper serves every lock type)
// ---------------------------------------------------------------------------------------

/// How long each holder of a loop holds (both sides).
pub const HOLD_MS: u64 = 20;

/// A zkguard loop on its own thread and client.
pub struct ZkRun {
    /// `()` after each acquire.
    pub acquired: Receiver<()>,
    /// The violations seen, or what went wrong.
    pub done: Receiver<Result<Vec<String>, String>>,
}

impl ZkRun {
    /// Waits for the end: the violations, or what stopped the loop.
    pub fn outcome(&self, what: &str) -> Result<Vec<String>, String> {
        recv(&self.done, 3 * WITHIN, what)
    }

    /// Waits for the end, asserting the loop completed; returns its violations.
    pub fn violations(&self, what: &str) -> Vec<String> {
        self.outcome(what).unwrap_or_else(|e| panic!("{what}: {e}"))
    }
}

/// Runs `rounds` rounds on a new client: acquire with `acquire` (the guard is dropped to
/// release), take a marker slot of `mark` in `dir`, hold, free it. After the first acquire
/// it waits for `gate` to close, holding, if there is one.
pub fn zk_loop<L, G>(
    dir: &Path,
    mark: Mark,
    rounds: usize,
    gate: Option<Receiver<()>>,
    make: impl FnOnce(&Client) -> zkguard::Result<L> + Send + 'static,
    acquire: impl Fn(&L) -> zkguard::Result<G> + Send + 'static,
) -> ZkRun {
    let (tx, acquired) = crossbeam_channel::unbounded();
    let mut marker = mark.marker(dir);
    let done = spawn(move || {
        let client = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
        let lock = make(&client).map_err(|e| format!("new lock: {e:?}"))?;
        for round in 0..rounds {
            let guard = acquire(&lock).map_err(|e| format!("acquire, round {round}: {e:?}"))?;
            let _ = tx.send(());
            let slot = marker.take();
            if round == 0 {
                if let Some(gate) = &gate {
                    let _ = gate.recv();
                }
            }
            std::thread::sleep(Duration::from_millis(HOLD_MS));
            if let Some(slot) = slot {
                std::fs::remove_file(slot).unwrap();
            }
            drop(guard);
        }
        Ok(marker.violations)
    });
    ZkRun { acquired, done }
}

pub fn zk_mutex(dir: &Path, path: &str, rounds: usize) -> ZkRun {
    let path = path.to_string();
    zk_loop(
        dir,
        Mark::Slots(1),
        rounds,
        None,
        move |c| Mutex::new(c, &path),
        Mutex::acquire,
    )
}

/// The JVM options of a Java service logged in to a Kerberized ensemble as `name` of `kdc`,
/// as such a service configures it (nothing set on Curator for the login): a JAAS `Client`
/// section with `Krb5LoginModule` and `name`'s keytab, the KDC's `krb5.conf`, and
/// `-Dpeer.acl=creator` (every node `CREATOR_ALL_ACL`, which the server turns into
/// `sasl:<name>@<realm>`).
///
/// Nothing else is needed: the ZooKeeper client logs in inside the JAAS subject itself, so
/// `javax.security.auth.useSubjectCredsOnly` keeps its default; and the server's principal
/// for `127.0.0.1` comes out as `zookeeper/localhost@ZKGUARD.TEST`, the one the Kerberized
/// `TestCluster` servers have, through the reverse lookup (`/etc/hosts`) twice over: the
/// ZooKeeper client canonicalizes the host, and the JDK's Kerberos does it again because the
/// KDC's `krb5.conf` says `dns_canonicalize_hostname = true` (with
/// `-Dzookeeper.sasl.client.canonicalize.hostname=false` the ticket, seen with
/// `-Dsun.security.krb5.debug=true`, is still for `zookeeper/localhost`).
#[cfg(feature = "kerberos")]
pub fn kerberos_jvm(kdc: &zkguard::testing::TestKdc, name: &str) -> Vec<String> {
    let mut jvm = kdc
        .java_client_options(name)
        .unwrap_or_else(|e| panic!("a Kerberos login for {name}: {e}"));
    jvm.push("-Dpeer.acl=creator".into());
    jvm
}

/// A Curator peer looping `rounds` times on `recipe` (with its arguments) at `path`.
pub fn curator_loop(recipe: &[&str], path: &str, rounds: usize, dir: &Path) -> Peer {
    let (rounds, hold) = (rounds.to_string(), HOLD_MS.to_string());
    let mut args = vec![recipe[0], path];
    args.extend(&recipe[1..]);
    args.extend(["loop", &rounds, s(dir), &hold]);
    Peer::start(&args)
}

/// A Curator peer holding `recipe` at `path` until told to release; returns once it holds.
pub fn curator_hold(recipe: &[&str], path: &str) -> Peer {
    let mut args = vec![recipe[0], path];
    args.extend(&recipe[1..]);
    args.push("hold");
    let mut peer = Peer::start(&args);
    peer.expect("acquired");
    peer
}

/// How long a blocked Curator peer must stay blocked (a JVM is slow to react; a pass
/// proves nothing by itself, a failure is a real bug).
pub const JAVA_QUIET: Duration = Duration::from_millis(1500);
