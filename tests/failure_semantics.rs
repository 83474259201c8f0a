//! Attacks on the central promise: a guard never says "valid" once the lock may be someone
//! else's. Each test reproduces one way the promise broke (issue "Failure semantics without
//! a window") against real ZooKeeper servers, and fails without its fix.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_quiet, connect, init_log, recv, shared_cluster, unique, wait_until, WITHIN};
use crossbeam_channel::Receiver;
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{
    Client, CreateMode, Error, LeaderElection, LeaderEvent, MultiLock, Mutex, ReentrantMutex,
    RwLock, Semaphore, SessionState, UnfairMutex,
};

/// Curator's revocation request (what `zkguard::revoke` writes).
const REVOKE: &[u8] = b"__REVOKE__";

// ---------------------------------------------------------------------------------------
// 1. A paused process is told at once that it is no longer valid
// ---------------------------------------------------------------------------------------

const PAUSE_CHILD_ENV: &str = "ZKGUARD_PAUSE_CHILD";
const PAUSE_SESSION: Duration = Duration::from_millis(1500);

/// The child: holds the lock, then calls `is_valid()` every 2 ms. Once the parent has said
/// it is about to stop us (a line on stdin), a gap longer than a third of the session
/// timeout between two calls means the process was stopped in between (the parent resumes
/// it only after another process acquired, at least that long later); it reports the first
/// call that started after the gap, and how long `lost()` took to fire after it.
fn pause_child(spec: &str) {
    let (cs, path) = spec.split_once('|').expect("connect string|path");
    let client = connect(cs, PAUSE_SESSION);
    let guard = Mutex::new(&client, path)
        .unwrap()
        .acquire()
        .expect("child acquires");
    let lost = guard.lost();
    println!("ZKGUARD-HELD {}", guard.token());
    std::io::stdout().flush().unwrap();
    let armed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::spawn({
        let armed = armed.clone();
        move || {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            armed.store(true, std::sync::atomic::Ordering::SeqCst);
            println!("ZKGUARD-ARMED");
            std::io::stdout().flush().unwrap();
        }
    });
    let gap = PAUSE_SESSION / 3;
    let mut prev_end = Instant::now();
    let mut paused_inside = false;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let start = Instant::now();
        let valid = guard.is_valid();
        let state = client.state();
        let end = Instant::now();
        let detecting = armed.load(std::sync::atomic::Ordering::SeqCst);
        if detecting && (start - prev_end > gap || paused_inside) {
            // The first call made entirely after the pause.
            let resumed = Instant::now();
            let fired = lost.recv_timeout(Duration::from_secs(10)).is_ok();
            let lost_ms = resumed.elapsed().as_secs_f64() * 1000.0;
            println!(
                "ZKGUARD-RESUMED valid={valid} state={state:?} gap_ms={} lost={fired} lost_ms={lost_ms:.1}",
                (start - prev_end).as_millis()
            );
            std::io::stdout().flush().unwrap();
            return;
        }
        if detecting && end - start > gap {
            paused_inside = true;
        }
        prev_end = end;
        if !detecting {
            std::thread::sleep(Duration::from_millis(2));
        }
        // Once stopping, spin: on resuming, this thread calls `is_valid()` at once, racing
        // the client's own thread (which used to win only sometimes).
    }
    println!("ZKGUARD-NO-PAUSE");
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

#[test]
fn a_paused_holder_is_invalid_on_its_first_call_after_resuming() {
    if let Ok(spec) = std::env::var(PAUSE_CHILD_ENV) {
        pause_child(&spec);
        return;
    }
    init_log();
    let cs = shared_cluster().connect_string();
    let path = unique("pause");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_paused_holder_is_invalid_on_its_first_call_after_resuming",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PAUSE_CHILD_ENV, format!("{cs}|{path}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the test binary as the holder");
    let pid = child.id();
    let (lines_tx, lines) = crossbeam_channel::unbounded::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let next_tagged = |tag: &str| loop {
        let line = recv(&lines, WITHIN * 2, tag);
        if let Some((_, rest)) = line.split_once(tag) {
            return rest.trim().to_string();
        }
    };
    let child_token: u64 = next_tagged("ZKGUARD-HELD").parse().unwrap();

    // Stop the holder past its session timeout; another process takes the lock meanwhile.
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "stopping").unwrap();
    stdin.flush().unwrap();
    next_tagged("ZKGUARD-ARMED");
    signal(pid, "-STOP");
    wait_until(WITHIN, "the child stopped", || proc_state(pid) == Some('T'));
    let other = connect(&cs, Duration::from_secs(10));
    let guard = Mutex::new(&other, &path)
        .unwrap()
        .acquire_timeout(WITHIN)
        .expect("acquire while the holder is stopped")
        .expect("the stopped holder's session expires");
    assert!(guard.token() > child_token);
    signal(pid, "-CONT");

    let report = next_tagged("ZKGUARD-RESUMED");
    let _ = child.wait();
    eprintln!("paused holder after resuming: {report}");
    assert!(
        report.contains("valid=false"),
        "the resumed holder's first is_valid() said valid while another process held the lock: {report}"
    );
    assert!(
        !report.contains("state=Connected"),
        "Client::state() said Connected: {report}"
    );
    let lost_ms: f64 = report
        .split("lost_ms=")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("lost_ms");
    assert!(report.contains("lost=true"), "lost() never fired: {report}");
    // "Within a few milliseconds" on an idle machine; generous for a loaded one.
    assert!(lost_ms < 1000.0, "lost() fired {lost_ms} ms after resuming");
    guard.release().unwrap();
}

// ---------------------------------------------------------------------------------------
// 3. A write to a held node does not switch off loss detection
// ---------------------------------------------------------------------------------------

/// What the attack needs of a guard.
struct Held {
    what: &'static str,
    path: String,
    lost: Receiver<()>,
    revocation: Option<Receiver<()>>,
    valid: Box<dyn Fn() -> bool>,
}

/// Someone writes `__REVOKE__` to the held node, then deletes it: the revocation is seen,
/// and then the deletion is a loss (the watch was armed again after the write).
fn write_then_delete(other: &Client, h: Held) {
    assert!((h.valid)(), "{}: not valid after acquire", h.what);
    other.set_data(&h.path, REVOKE, None).unwrap();
    if let Some(r) = &h.revocation {
        recv(r, WITHIN, &format!("{}: revocation", h.what));
    }
    // The node is still ours: a write is no loss.
    assert_quiet(&h.lost, &format!("{}: lost after a write", h.what));
    assert!((h.valid)(), "{}: invalid after a write", h.what);
    other.delete(&h.path, None).unwrap();
    recv(
        &h.lost,
        WITHIN,
        &format!("{}: lost after the delete", h.what),
    );
    assert!(!(h.valid)(), "{}: valid after its node was deleted", h.what);
}

#[test]
fn every_guard_notices_a_delete_that_follows_a_write_to_its_node() {
    let cs = shared_cluster().connect_string();
    let c = connect(&cs, Duration::from_secs(10));
    let other = connect(&cs, Duration::from_secs(10));
    let dir = unique("write-delete");

    let g = Mutex::new(&c, &format!("{dir}/mutex"))
        .unwrap()
        .acquire()
        .unwrap();
    write_then_delete(
        &other,
        Held {
            what: "Mutex",
            path: g.path().to_string(),
            lost: g.lost(),
            revocation: Some(g.revocation()),
            valid: Box::new({
                let g = std::sync::Arc::new(g);
                move || g.is_valid()
            }),
        },
    );

    let l = ReentrantMutex::new(&c, &format!("{dir}/reentrant")).unwrap();
    let g = l.acquire().unwrap();
    let p = g.path().to_string();
    let (lost, rev) = (g.lost(), g.revocation());
    assert!(g.is_valid());
    other.set_data(&p, REVOKE, None).unwrap();
    recv(&rev, WITHIN, "ReentrantMutex: revocation");
    other.delete(&p, None).unwrap();
    recv(&lost, WITHIN, "ReentrantMutex: lost after the delete");
    assert!(!g.is_valid());
    drop(g);

    let g = UnfairMutex::new(&c, &format!("{dir}/unfair"))
        .unwrap()
        .acquire()
        .unwrap();
    write_then_delete(
        &other,
        Held {
            what: "UnfairMutex",
            path: g.path().to_string(),
            lost: g.lost(),
            revocation: Some(g.revocation()),
            valid: Box::new({
                let g = std::sync::Arc::new(g);
                move || g.is_valid()
            }),
        },
    );

    let rw = RwLock::new(&c, &format!("{dir}/rw")).unwrap();
    let g = rw.read().unwrap();
    write_then_delete(
        &other,
        Held {
            what: "ReadGuard",
            path: g.path().to_string(),
            lost: g.lost(),
            revocation: Some(g.revocation()),
            valid: Box::new({
                let g = std::sync::Arc::new(g);
                move || g.is_valid()
            }),
        },
    );
    let g = rw.write().unwrap();
    write_then_delete(
        &other,
        Held {
            what: "WriteGuard",
            path: g.path().to_string(),
            lost: g.lost(),
            revocation: Some(g.revocation()),
            valid: Box::new({
                let g = std::sync::Arc::new(g);
                move || g.is_valid()
            }),
        },
    );

    let g = Semaphore::new(&c, &format!("{dir}/sem"), 2)
        .unwrap()
        .acquire()
        .unwrap();
    write_then_delete(
        &other,
        Held {
            what: "Permit",
            path: g.path().to_string(),
            lost: g.lost(),
            revocation: Some(g.revocation()),
            valid: Box::new({
                let g = std::sync::Arc::new(g);
                move || g.is_valid()
            }),
        },
    );

    let (a, b) = (format!("{dir}/multi-a"), format!("{dir}/multi-b"));
    let g = MultiLock::new(&c, &[&a, &b]).unwrap().acquire().unwrap();
    let second = g.paths()[1].to_string();
    write_then_delete(
        &other,
        Held {
            what: "MultiLockGuard",
            path: second,
            lost: g.lost(),
            revocation: Some(g.guards()[1].revocation()),
            valid: Box::new({
                let g = std::sync::Arc::new(g);
                move || g.is_valid()
            }),
        },
    );

    for (what, e) in [
        (
            "Leadership (fair)",
            LeaderElection::new(&c, &format!("{dir}/elect"), "me").unwrap(),
        ),
        (
            "Leadership (unfair)",
            LeaderElection::unfair(&c, &format!("{dir}/elect-unfair"), "me").unwrap(),
        ),
    ] {
        let l = e.lead().unwrap();
        write_then_delete(
            &other,
            Held {
                what,
                path: l.path().to_string(),
                lost: l.lost(),
                revocation: None,
                valid: Box::new({
                    let l = std::sync::Arc::new(l);
                    move || l.is_valid()
                }),
            },
        );
    }
}

#[test]
fn a_candidate_notices_a_delete_that_follows_a_write_to_its_node() {
    let cs = shared_cluster().connect_string();
    let c = connect(&cs, Duration::from_secs(10));
    let other = connect(&cs, Duration::from_secs(10));
    for unfair in [false, true] {
        let path = unique("cand-write-delete");
        let e = if unfair {
            LeaderElection::unfair(&c, &path, "me").unwrap()
        } else {
            LeaderElection::new(&c, &path, "me").unwrap()
        };
        let cand = e.join().unwrap();
        let events = cand.events();
        let token = match recv(&events, WITHIN, "elected") {
            LeaderEvent::Elected { token } => token,
            other => panic!("expected Elected, got {other:?}"),
        };
        let node = if unfair {
            path.clone()
        } else {
            let p = e.participants().unwrap();
            format!("{path}/{}", p[0].node)
        };
        other.set_data(&node, REVOKE, None).unwrap();
        other.set_data(&node, b"x", None).unwrap();
        assert_quiet(&events, "an event after writes to the leader's node");
        assert!(cand.is_leader());
        other.delete(&node, None).unwrap();
        match recv(&events, WITHIN, "lost after the delete") {
            LeaderEvent::Lost => {}
            other => panic!("unfair={unfair}: expected Lost, got {other:?}"),
        }
        // It competes again (alone: it leads again, with a later token).
        match recv(&events, WITHIN, "elected again") {
            LeaderEvent::Elected { token: t } => assert!(t > token),
            other => panic!("unfair={unfair}: expected Elected, got {other:?}"),
        }
        drop(cand);
    }
}

#[test]
fn only_the_exact_revocation_request_counts_and_other_writes_are_not_losses() {
    let cs = shared_cluster().connect_string();
    let c = connect(&cs, Duration::from_secs(10));
    let other = connect(&cs, Duration::from_secs(10));
    let g = Mutex::new(&c, &unique("revoke-bytes"))
        .unwrap()
        .acquire()
        .unwrap();
    let (lost, rev) = (g.lost(), g.revocation());
    for data in [&b"__REVOKE__ please"[..], b"__revoke__", b"", b"hello"] {
        other.set_data(g.path(), data, None).unwrap();
    }
    // The node was read back after each write (the watch is armed again each time).
    assert_quiet(&rev, "a revocation for other bytes");
    assert_quiet(&lost, "a loss after writes");
    assert!(g.is_valid());
    g.confirm().unwrap();
    other.set_data(g.path(), REVOKE, None).unwrap();
    recv(&rev, WITHIN, "the revocation");
    assert!(g.is_valid(), "a revocation request is not a loss");
    g.release().unwrap();
}

// ---------------------------------------------------------------------------------------
// Lock guards' confirm()
// ---------------------------------------------------------------------------------------

#[test]
fn a_lock_guards_confirm_says_yes_only_while_the_lock_is_ours() {
    let cs = shared_cluster().connect_string();
    let other = connect(&cs, Duration::from_secs(10));

    // Held: yes. Deleted by someone else: LockLost, and the guard is lost from then on.
    let c = connect(&cs, Duration::from_secs(10));
    let g = Mutex::new(&c, &unique("confirm"))
        .unwrap()
        .acquire()
        .unwrap();
    g.confirm().unwrap();
    other.delete(g.path(), None).unwrap();
    assert!(matches!(g.confirm(), Err(Error::LockLost { .. })));
    assert!(!g.is_valid());

    // An unfair lock's node replaced by another owner at the same path: LockLost.
    let path = unique("confirm-unfair");
    let g = UnfairMutex::new(&c, &path).unwrap().acquire().unwrap();
    g.confirm().unwrap();
    other.delete(&path, None).unwrap();
    other
        .create(&path, b"someone else", CreateMode::Ephemeral)
        .unwrap();
    assert!(matches!(g.confirm(), Err(Error::LockLost { .. })));
    other.delete(&path, None).unwrap();

    // Closed client: LockLost.
    let g = Semaphore::new(&c, &unique("confirm-sem"), 1)
        .unwrap()
        .acquire()
        .unwrap();
    g.confirm().unwrap();
    c.close().unwrap();
    assert!(matches!(g.confirm(), Err(Error::LockLost { .. })));

    // Partitioned: never a yes.
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let pc = Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let rw = RwLock::new(&pc, &unique("confirm-rw")).unwrap();
    let g = rw.write().unwrap();
    g.confirm().unwrap();
    proxy.blackhole();
    let until = Instant::now() + Duration::from_secs(4);
    let mut tries = 0;
    while Instant::now() < until {
        tries += 1;
        match g.confirm() {
            Ok(()) => panic!("confirm() said yes while partitioned (try {tries})"),
            Err(e) => assert!(
                e.is_connection_error() || matches!(e, Error::LockLost { .. }),
                "unexpected {e:?}"
            ),
        }
    }
    assert!(matches!(g.confirm(), Err(Error::LockLost { .. })));
    assert_eq!(pc.state(), SessionState::Lost);
    drop(proxy);
}
