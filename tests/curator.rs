//! Interop with the real Apache Curator: `tests/curator/CuratorPeer.java`, compiled here with
//! `javac` against Debian's Curator jars (`libcurator-recipes-java`), runs Curator's recipes
//! in child JVMs on the same server and path as zkguard's locks. Mutual exclusion is checked
//! by marker files both sides create while holding (see [`Marker`]), and one test shows the
//! check sees an overlap when the two sides use different paths.
//!
//! Curator's jars and `javac` are found, or installed (as root on Debian, like ZooKeeper), by
//! the harness: [`CuratorJava::find`]. Where it may not install, every test fails saying what
//! to install; set `ZKGUARD_CURATOR_CLASSPATH` to a complete class path for Curator's recipes
//! to use other jars than `/usr/share/java`'s.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use common::{
    assert_quiet, children, connect, recv, shared_cluster, spawn, unique, wait_until, WITHIN,
};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use zkguard::testing::CuratorJava;
use zkguard::{Client, LeaderElection, Mutex, RwLock, Semaphore};

// ---------------------------------------------------------------------------------------
// The Curator peer: finding Curator, compiling the helper, running it
// ---------------------------------------------------------------------------------------

/// The compiled peer: the `java` to run it with and its class path.
struct Compiled {
    java: PathBuf,
    classpath: String,
}

/// `CuratorPeer` compiled once per test binary into a fresh directory under cargo's
/// temporary directory, against Curator found (or installed) by the harness
/// ([`CuratorJava::find`]). Every test fails with the reason if it cannot be built.
fn peer() -> &'static Compiled {
    static PEER: OnceLock<Result<Compiled, String>> = OnceLock::new();
    match PEER.get_or_init(compile_peer) {
        Ok(peer) => peer,
        Err(e) => panic!("Curator interop tests cannot run: {e}"),
    }
}

fn compile_peer() -> Result<Compiled, String> {
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
struct Peer {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<StdMutex<String>>,
    /// Disconnects once stderr is read to its end.
    stderr_closed: Receiver<()>,
}

impl Peer {
    /// Starts `CuratorPeer <shared server> <args...>`.
    fn start(args: &[&str]) -> Peer {
        Self::start_on(&shared_cluster().connect_string(), &[], "", args)
    }

    /// Starts `CuratorPeer <connect> <args...>` with extra JVM options and class path
    /// entries (a secured ensemble's client settings).
    fn start_on(connect: &str, jvm: &[String], extra_cp: &str, args: &[&str]) -> Peer {
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

    fn fail(&self, what: &str) -> ! {
        panic!(
            "Curator peer `{}`: {what}; its output: {:?}; stderr: {}",
            self.name,
            self.seen,
            self.stderr.lock().unwrap()
        )
    }

    /// Waits for a line starting with `prefix` (earlier lines are kept for messages).
    fn expect(&mut self, prefix: &str) -> String {
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
    fn exit_status(&mut self) -> String {
        let status = match self.child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => format!("wait: {e}"),
        };
        let _ = self.stderr_closed.recv_timeout(WITHIN);
        status
    }

    /// Asserts that the peer prints nothing for `within` (it is blocked).
    fn assert_quiet(&mut self, within: Duration, what: &str) {
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
    fn release(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "release")
            .and_then(|_| stdin.flush())
            .unwrap();
        self.expect("released");
    }

    /// Waits for a looping peer's final line: its violation count, after checking that it
    /// did all `rounds`.
    fn violations(&mut self, rounds: usize) -> usize {
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
enum Kind {
    /// One of `slot-0..slot-(n-1)`, created exclusively: an exclusive lock or leadership
    /// (`n` = 1), or a semaphore permit. A violation if all are taken.
    Slots(u32),
    /// `r-<unique>`; a violation if `w` exists.
    Reader,
    /// `w`, created exclusively; a violation if it exists or any `r-*` does.
    Writer,
}

impl Kind {
    /// A marker of this kind in `dir` (the Java peer picks its kind from its recipe).
    fn marker(self, dir: &Path) -> Marker {
        Marker {
            dir: dir.to_path_buf(),
            kind: self,
            violations: Vec::new(),
        }
    }
}

struct Marker {
    dir: PathBuf,
    kind: Kind,
    violations: Vec<String>,
}

impl Marker {
    /// Takes a slot: the file to delete before releasing, or none (a violation).
    fn take(&mut self) -> Option<PathBuf> {
        match self.kind {
            Kind::Slots(n) => {
                let slot = (0..n).find_map(|i| self.create_new(&format!("slot-{i}")));
                if slot.is_none() {
                    self.violations.push(format!("all {n} slots taken"));
                }
                slot
            }
            Kind::Writer => {
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
            Kind::Reader => {
                let r = self.create_new(&format!("r-rust-{}", uuid::Uuid::new_v4().simple()));
                if self.dir.join("w").exists() {
                    self.violations.push("w exists with a reader".into());
                }
                r
            }
        }
    }

    fn create_new(&self, name: &str) -> Option<PathBuf> {
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
fn slot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("curator-slots-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------
// zkguard loops (one helper serves every lock type)
// ---------------------------------------------------------------------------------------

/// How long each holder of a loop holds (both sides).
const HOLD_MS: u64 = 20;

/// A zkguard loop on its own thread and client.
struct ZkRun {
    /// `()` after each acquire.
    acquired: Receiver<()>,
    /// The violations seen, or what went wrong.
    done: Receiver<Result<Vec<String>, String>>,
}

impl ZkRun {
    /// Waits for the end: the violations, or what stopped the loop.
    fn outcome(&self, what: &str) -> Result<Vec<String>, String> {
        recv(&self.done, 3 * WITHIN, what)
    }

    /// Waits for the end, asserting the loop completed; returns its violations.
    fn violations(&self, what: &str) -> Vec<String> {
        self.outcome(what).unwrap_or_else(|e| panic!("{what}: {e}"))
    }
}

/// Runs `rounds` rounds on a new client: acquire with `acquire` (the guard is dropped to
/// release), take a marker slot of `kind` in `dir`, hold, free it. After the first acquire
/// it waits for `gate` to close, holding, if there is one.
fn zk_loop<L, G>(
    dir: &Path,
    kind: Kind,
    rounds: usize,
    gate: Option<Receiver<()>>,
    make: impl FnOnce(&Client) -> zkguard::Result<L> + Send + 'static,
    acquire: impl Fn(&L) -> zkguard::Result<G> + Send + 'static,
) -> ZkRun {
    let (tx, acquired) = crossbeam_channel::unbounded();
    let mut marker = kind.marker(dir);
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

fn zk_mutex(dir: &Path, path: &str, rounds: usize) -> ZkRun {
    let path = path.to_string();
    zk_loop(
        dir,
        Kind::Slots(1),
        rounds,
        None,
        move |c| Mutex::new(c, &path),
        Mutex::acquire,
    )
}

/// A Curator peer looping `rounds` times on `recipe` (with its arguments) at `path`.
fn curator_loop(recipe: &[&str], path: &str, rounds: usize, dir: &Path) -> Peer {
    let (rounds, hold) = (rounds.to_string(), HOLD_MS.to_string());
    let mut args = vec![recipe[0], path];
    args.extend(&recipe[1..]);
    args.extend(["loop", &rounds, s(dir), &hold]);
    Peer::start(&args)
}

/// A Curator peer holding `recipe` at `path` until told to release; returns once it holds.
fn curator_hold(recipe: &[&str], path: &str) -> Peer {
    let mut args = vec![recipe[0], path];
    args.extend(&recipe[1..]);
    args.push("hold");
    let mut peer = Peer::start(&args);
    peer.expect("acquired");
    peer
}

/// How long a blocked Curator peer must stay blocked (a JVM is slow to react; a pass
/// proves nothing by itself, a failure is a real bug).
const JAVA_QUIET: Duration = Duration::from_millis(1500);

// ---------------------------------------------------------------------------------------
// 1. InterProcessMutex and Mutex, and the check itself
// ---------------------------------------------------------------------------------------

#[test]
fn curator_mutex_and_zkguard_mutexes_on_one_path_never_hold_together_and_all_progress() {
    let (path, dir) = (unique("cur-mx"), slot_dir());
    let mut java = curator_loop(&["mutex"], &path, 30, &dir);
    java.expect("acquired");
    let zk: Vec<_> = (0..2).map(|_| zk_mutex(&dir, &path, 30)).collect();
    for (i, run) in zk.iter().enumerate() {
        let v = run.violations(&format!("zkguard mutex loop {i}"));
        assert!(v.is_empty(), "zkguard {i} held with another: {v:?}");
    }
    assert_eq!(java.violations(30), 0, "Curator held with another");
}

#[test]
fn the_marker_check_sees_the_overlap_when_curator_and_zkguard_lock_different_paths() {
    let dir = slot_dir();
    let mut java = curator_loop(&["mutex"], &unique("cur-mx-a"), 40, &dir);
    java.expect("acquired");
    let zk = zk_mutex(&dir, &unique("cur-mx-b"), 10);
    let zk_violations = zk.violations("zkguard mutex loop").len();
    let java_violations = java.violations(40);
    assert!(
        zk_violations + java_violations > 0,
        "two locks on different paths held together unseen: the check is blind"
    );
}

// ---------------------------------------------------------------------------------------
// 2. InterProcessReadWriteLock and RwLock
// ---------------------------------------------------------------------------------------

fn zk_rw(dir: &Path, path: &str, write: bool, rounds: usize) -> ZkRun {
    let path = path.to_string();
    let kind = if write { Kind::Writer } else { Kind::Reader };
    zk_loop(
        dir,
        kind,
        rounds,
        None,
        move |c| RwLock::new(c, &path),
        // Either guard, as one type: Ok(write) or Err(read).
        move |l| {
            if write {
                l.write().map(Ok)
            } else {
                l.read().map(Err)
            }
        },
    )
}

#[test]
fn curator_and_zkguard_readers_and_writers_on_one_path_keep_the_rules_and_all_progress() {
    let (path, dir) = (unique("cur-rw"), slot_dir());
    let mut writer = curator_loop(&["write"], &path, 15, &dir);
    let mut reader = curator_loop(&["read"], &path, 15, &dir);
    writer.expect("acquired");
    reader.expect("acquired");
    let zk = [zk_rw(&dir, &path, true, 15), zk_rw(&dir, &path, false, 15)];
    for (run, who) in zk.iter().zip(["zkguard writer", "zkguard reader"]) {
        let v = run.violations(who);
        assert!(v.is_empty(), "{who}: {v:?}");
    }
    assert_eq!(writer.violations(15), 0, "Curator writer");
    assert_eq!(reader.violations(15), 0, "Curator reader");
}

#[test]
fn curator_and_zkguard_readers_hold_together_and_a_writer_of_either_excludes_the_other() {
    let path = unique("cur-rw-hold");
    let z = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    let lock = RwLock::new(&z, &path).unwrap();

    // A Curator reader holds: a zkguard reader joins it, a zkguard writer cannot.
    let mut java = curator_hold(&["read"], &path);
    let read = lock
        .try_read()
        .unwrap()
        .expect("zkguard read beside Curator's");
    assert!(read.is_valid());
    assert!(lock.try_write().unwrap().is_none(), "wrote beside a reader");
    java.release();
    drop(read);

    // A Curator writer holds: zkguard can neither read nor write; a blocked reader gets in
    // once the writer releases.
    let mut java = curator_hold(&["write"], &path);
    assert!(
        lock.try_read().unwrap().is_none(),
        "read beside Curator's writer"
    );
    assert!(
        lock.try_write().unwrap().is_none(),
        "wrote beside Curator's writer"
    );
    let waiting = {
        let lock = RwLock::new(&z, &path).unwrap();
        spawn(move || lock.read().unwrap())
    };
    assert_quiet(&waiting, "read while Curator's writer holds");
    java.release();
    drop(recv(
        &waiting,
        WITHIN,
        "zkguard read after Curator's writer",
    ));

    // A zkguard writer holds: a Curator reader waits for it.
    let write = lock.write().unwrap();
    let mut java = Peer::start(&["read", &path, "hold"]);
    java.expect("connected");
    wait_until(WITHIN, "Curator's reader queued", || {
        lock.participants().unwrap().len() == 2
    });
    java.assert_quiet(JAVA_QUIET, "Curator read beside zkguard's writer");
    drop(write);
    java.expect("acquired");
    java.release();
}

// ---------------------------------------------------------------------------------------
// 3. LeaderLatch and the fair LeaderElection
// ---------------------------------------------------------------------------------------

#[test]
fn a_curator_leader_latch_leads_first_and_zkguard_leads_only_once_it_closes() {
    let path = unique("cur-latch");
    let z = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    let mut java = curator_hold(&["latch", "java-1"], &path);
    let election = LeaderElection::new(&z, &path, "zk-1").unwrap();
    let leader = election.leader().unwrap().expect("Curator's latch leads");
    assert_eq!(leader.id(), "java-1");
    assert!(election.try_lead().unwrap().is_none(), "led past Curator");
    let waiting = {
        let election = LeaderElection::new(&z, &path, "zk-1").unwrap();
        spawn(move || election.lead().unwrap())
    };
    wait_until(WITHIN, "the zkguard candidate queued", || {
        election.participants().unwrap().len() == 2
    });
    assert_quiet(&waiting, "led while Curator's latch leads");
    java.release();
    let led = recv(
        &waiting,
        WITHIN,
        "zkguard leadership after the latch closed",
    );
    led.confirm().unwrap();
    assert_eq!(election.leader().unwrap().unwrap().id(), "zk-1");
}

#[test]
fn a_zkguard_leader_keeps_curators_leader_latch_waiting_until_it_resigns() {
    let path = unique("cur-latch-zk");
    let z = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    let election = LeaderElection::new(&z, &path, "zk-1").unwrap();
    let led = election.lead().unwrap();
    let mut java = Peer::start(&["latch", &path, "java-1", "hold"]);
    java.expect("connected");
    wait_until(WITHIN, "Curator's latch queued", || {
        election.participants().unwrap().len() == 2
    });
    java.assert_quiet(JAVA_QUIET, "Curator's latch led beside zkguard's leader");
    led.resign().unwrap();
    java.expect("acquired");
    assert_eq!(election.leader().unwrap().unwrap().id(), "java-1");
    java.release();
}

#[test]
fn curator_latches_and_zkguard_candidates_handing_over_never_lead_together() {
    let (path, dir) = (unique("cur-latch-loop"), slot_dir());
    let mut java = curator_loop(&["latch", "java-1"], &path, 10, &dir);
    java.expect("acquired");
    let zk = {
        let path = path.clone();
        zk_loop(
            &dir,
            Kind::Slots(1),
            10,
            None,
            move |c| LeaderElection::new(c, &path, "zk-1"),
            LeaderElection::lead,
        )
    };
    let v = zk.violations("zkguard leader loop");
    assert!(v.is_empty(), "zkguard led with Curator: {v:?}");
    assert_eq!(java.violations(10), 0, "Curator led with zkguard");
}

// ---------------------------------------------------------------------------------------
// 4. Revoker and revocation(), both ways
// ---------------------------------------------------------------------------------------

#[test]
fn curators_revoker_reaches_a_zkguard_holder() {
    let path = unique("cur-revoke-zk");
    let z = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    let guard = Mutex::new(&z, &path).unwrap().acquire().unwrap();
    let revocation = guard.revocation();
    assert_quiet(&revocation, "revocation asked before anyone did");
    let mut java = Peer::start(&["revoke", guard.path()]);
    java.expect("revoke sent");
    recv(&revocation, WITHIN, "revocation from Curator's Revoker");
    assert!(guard.is_valid(), "a revocation request is not a loss");
}

#[test]
fn zkguard_revoke_reaches_a_revocable_curator_holder_which_lets_a_zkguard_mutex_in() {
    let path = unique("cur-revoke-java");
    let z = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    let mut java = Peer::start(&["revocable", &path]);
    let node = java.expect("acquired ");
    let node = node.strip_prefix("acquired ").unwrap().to_string();
    assert!(node.starts_with(&format!("{path}/")), "node {node}");
    let waiting = {
        let lock = Mutex::new(&z, &path).unwrap();
        assert!(lock.try_acquire().unwrap().is_none(), "took Curator's lock");
        spawn(move || lock.acquire().unwrap())
    };
    java.assert_quiet(Duration::from_millis(300), "revoked before asked");
    zkguard::revoke(&z, &node).unwrap();
    java.expect("revoked");
    java.expect("released");
    let guard = recv(&waiting, WITHIN, "zkguard mutex after Curator let go");
    guard.confirm().unwrap();
}

// ---------------------------------------------------------------------------------------
// 5. InterProcessSemaphoreV2 and Semaphore
// ---------------------------------------------------------------------------------------

const PERMITS: u32 = 2;
const SEM_ROUNDS: usize = 20;

fn zk_semaphore(dir: &Path, path: &str, gate: Option<Receiver<()>>) -> ZkRun {
    let path = path.to_string();
    zk_loop(
        dir,
        Kind::Slots(PERMITS),
        SEM_ROUNDS,
        gate,
        move |c| Semaphore::new(c, &path, PERMITS),
        Semaphore::acquire,
    )
}

fn curator_semaphore(dir: &Path, path: &str) -> Peer {
    let permits = PERMITS.to_string();
    curator_loop(&["semaphore", &permits], path, SEM_ROUNDS, dir)
}

/// The nodes of a semaphore's holders and waiters at `path`: whatever is directly under it
/// and under its `leases` (Curator's layout), less Curator's `leases` and `locks` folders.
fn semaphore_nodes(client: &Client, path: &str) -> usize {
    let top = children(client, path);
    let below = children(client, &format!("{path}/leases"));
    top.iter()
        .filter(|n| *n != "leases" && *n != "locks")
        .count()
        + below.len()
}

/// Two Curator peers and two zkguard threads, each `SEM_ROUNDS` rounds: nobody holds beyond
/// the permits, everyone finishes. Reports every side's trouble together.
fn assert_semaphore_shared(java: Vec<Peer>, zk: Vec<ZkRun>) {
    let mut seen = Vec::new();
    for (i, run) in zk.iter().enumerate() {
        match run.outcome(&format!("zkguard semaphore loop {i}")) {
            Ok(v) => seen.extend(v.into_iter().map(|v| format!("zkguard {i}: {v}"))),
            Err(e) => seen.push(format!("zkguard {i} failed: {e}")),
        }
    }
    for (i, mut peer) in java.into_iter().enumerate() {
        let v = peer.violations(SEM_ROUNDS);
        if v > 0 {
            seen.push(format!("Curator {i}: {v} violations"));
        }
    }
    assert!(
        seen.is_empty(),
        "over {PERMITS} holders or a side stopped: {seen:?}"
    );
}

#[test]
fn curator_semaphore_first_then_zkguard_never_exceed_the_permits_together() {
    let (path, dir) = (unique("cur-sem"), slot_dir());
    let mut java: Vec<_> = (0..2).map(|_| curator_semaphore(&dir, &path)).collect();
    for peer in &mut java {
        peer.expect("acquired");
    }
    let zk = (0..2).map(|_| zk_semaphore(&dir, &path, None)).collect();
    assert_semaphore_shared(java, zk);
}

#[test]
fn zkguard_semaphore_first_then_curator_never_exceed_the_permits_together() {
    let (path, dir) = (unique("cur-sem-zk"), slot_dir());
    let (open, gate): (Sender<()>, _) = crossbeam_channel::bounded(0);
    let zk: Vec<_> = (0..2)
        .map(|_| zk_semaphore(&dir, &path, Some(gate.clone())))
        .collect();
    for (i, run) in zk.iter().enumerate() {
        recv(
            &run.acquired,
            WITHIN,
            &format!("zkguard {i}'s first permit"),
        );
    }
    // Both permits are held by zkguard: a Curator peer that asks must wait (its lease node
    // made, the other peer behind Curator's internal lock), then zkguard goes on.
    let mut java: Vec<_> = (0..2).map(|_| curator_semaphore(&dir, &path)).collect();
    for peer in &mut java {
        peer.expect("connected");
    }
    let z = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    wait_until(WITHIN, "a Curator lease node beside zkguard's two", || {
        semaphore_nodes(&z, &path) >= 3
    });
    for peer in &mut java {
        peer.assert_quiet(
            JAVA_QUIET,
            "Curator acquired while zkguard held every permit",
        );
    }
    drop(open);
    assert_semaphore_shared(java, zk);
}

// ---------------------------------------------------------------------------------------
// 6. A secured ensemble: Curator and zkguard both over mutual TLS and SASL
// ---------------------------------------------------------------------------------------

/// Curator's `InterProcessMutex` and zkguard's `Mutex`, each over mutual TLS with a SASL
/// DIGEST-MD5 login (Curator through the Java client's Netty socket, PEM stores and JAAS
/// `Client` section, as a Java service configures it), exclude each other on one path, and
/// the lock passes from Curator to zkguard on release.
#[cfg(feature = "tls")]
#[test]
fn curator_and_zkguard_exclude_each_other_on_a_tls_and_sasl_ensemble() {
    use zkguard::testing::{ClientAuth, TestCluster};
    common::init_log();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::Need)
        .sasl_digest_users(&[("alice", "alice-secret")])
        .start()
        .expect("start a TLS + SASL server");
    let pki = cluster.pki().expect("a PKI");
    let secure = cluster.secure_connect_string().expect("a TLS port");
    let jaas = cluster.dir().join("curator-client-jaas.conf");
    std::fs::write(
        &jaas,
        "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
         username=\"alice\"\n  password=\"alice-secret\";\n};\n",
    )
    .unwrap();
    let jvm: Vec<String> = vec![
        "-Dzookeeper.client.secure=true".into(),
        "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty".into(),
        format!(
            "-Dzookeeper.ssl.keyStore.location={}",
            pki.client().keystore_path().display()
        ),
        "-Dzookeeper.ssl.keyStore.type=PEM".into(),
        format!(
            "-Dzookeeper.ssl.trustStore.location={}",
            pki.ca_cert_path().display()
        ),
        "-Dzookeeper.ssl.trustStore.type=PEM".into(),
        format!("-Djava.security.auth.login.config={}", jaas.display()),
    ];
    // The Java client's Netty socket needs these beside what zookeeper.jar's manifest names.
    let netty: String = [
        "netty-codec",
        "netty-resolver",
        "netty-transport-native-unix-common",
    ]
    .iter()
    .map(|j| format!("/usr/share/java/{j}.jar"))
    .filter(|p| Path::new(p).is_file())
    .map(|p| format!(":{p}"))
    .collect();
    let path = unique("cur-secure");
    let mut java = Peer::start_on(&secure, &jvm, &netty, &["mutex", &path, "hold"]);
    java.expect("acquired");
    let tls = zkguard::TlsConfig::ca_pem(pki.ca_cert_pem().as_bytes())
        .and_then(|t| {
            t.client_cert_pem(
                pki.client().cert_pem().as_bytes(),
                pki.client().key_pem().as_bytes(),
            )
        })
        .unwrap();
    let z = Client::builder(&secure)
        .tls(tls)
        .sasl_digest("alice", "alice-secret")
        .connect_timeout(Duration::from_secs(20))
        .build()
        .expect("zkguard over TLS + SASL");
    let lock = Mutex::new(&z, &path).unwrap();
    assert!(
        lock.try_acquire().unwrap().is_none(),
        "zkguard took a lock Curator holds"
    );
    let waiting = spawn(move || {
        lock.acquire_timeout(WITHIN)
            .map(|g| g.map(|g| (g.is_valid(), g.token())))
    });
    assert_quiet(&waiting, "zkguard acquired while Curator holds");
    java.release();
    let (valid, _token) = recv(&waiting, WITHIN, "zkguard's acquire")
        .unwrap()
        .expect("zkguard gets the lock once Curator releases");
    assert!(valid);
    z.close();
}

// ---------------------------------------------------------------------------------------
// ACLs: a Curator service with an ACLProvider and zkguard with the same identity
// ---------------------------------------------------------------------------------------

/// Curator with digest credentials and `CREATOR_ALL_ACL` from its `ACLProvider`, and zkguard
/// logged in as the same digest user with [`NodeAcl::creator`], share one lock (each waits
/// for the other), while another identity is refused at once, by both's directory.
#[test]
fn curator_with_a_creator_acl_and_zkguard_with_the_same_identity_share_a_lock() {
    let path = format!("{}/lock", unique("cur-acl"));
    let jvm = ["-Dpeer.digest=alice:alice-pw".to_string()];
    let mut java = Peer::start_on(
        &shared_cluster().connect_string(),
        &jvm,
        "",
        &["mutex", &path, "hold"],
    );
    java.expect("acquired");
    let alice = Client::builder(&shared_cluster().connect_string())
        .auth("digest", b"alice:alice-pw")
        .node_acl(zkguard::NodeAcl::creator())
        .build()
        .unwrap();
    let lock = Mutex::new(&alice, &path).unwrap();
    assert!(
        lock.try_acquire().unwrap().is_none(),
        "zkguard took a lock Curator holds"
    );
    // Another identity cannot even queue in the directory Curator made creator-only.
    let bob = Client::builder(&shared_cluster().connect_string())
        .auth("digest", b"bob:bob-pw")
        .build()
        .unwrap();
    match Mutex::new(&bob, &path).unwrap().try_acquire() {
        Err(zkguard::Error::NoAuth {
            path: p,
            op: "create",
        }) => assert_eq!(p, path),
        other => panic!("bob in Curator's creator-only directory: {other:?}"),
    }
    let waiting = spawn(move || {
        lock.acquire_timeout(WITHIN)
            .map(|g| g.map(|g| g.is_valid()))
    });
    assert_quiet(&waiting, "zkguard acquired while Curator holds");
    java.release();
    assert_eq!(
        recv(&waiting, WITHIN, "zkguard's acquire").unwrap(),
        Some(true),
        "zkguard gets the lock once Curator releases"
    );
    // And the other way round: zkguard holds, a Curator peer with the same identity waits.
    let path2 = format!("{}/lock", unique("cur-acl2"));
    let held = Mutex::new(&alice, &path2).unwrap().acquire().unwrap();
    let mut java = Peer::start_on(
        &shared_cluster().connect_string(),
        &jvm,
        "",
        &["mutex", &path2, "hold"],
    );
    java.expect("connected");
    java.assert_quiet(JAVA_QUIET, "Curator acquired while zkguard holds");
    drop(held);
    java.expect("acquired");
    java.release();
}
