//! Attacks on the central promise: a guard never says "valid" once the lock may be someone
//! else's. Each test reproduces one way the promise broke (issue "Failure semantics without
//! a window") against real ZooKeeper servers, and fails without its fix.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    assert_quiet, connect, init_log, recv, retry, shared_cluster, spawn, unique, wait_until, WITHIN,
};
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
    let held_session = client.session_id();
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
        // Read after the state: if the state said `Connected` of the session that held the
        // lock, the client's thread cannot have moved to a new session before the state
        // was read, so this still names the old session.
        let session = if client.session_id() == held_session {
            "held"
        } else {
            "new"
        };
        let end = Instant::now();
        let detecting = armed.load(std::sync::atomic::Ordering::SeqCst);
        if detecting && (start - prev_end > gap || paused_inside) {
            // The first call made entirely after the pause.
            let resumed = Instant::now();
            let fired = lost.recv_timeout(Duration::from_secs(10)).is_ok();
            let lost_ms = resumed.elapsed().as_secs_f64() * 1000.0;
            println!(
                "ZKGUARD-RESUMED valid={valid} state={state:?} session={session} gap_ms={} lost={fired} lost_ms={lost_ms:.1}",
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
    // `state()` never says `Connected` of the session that held the lock: it is lost at the
    // call, even before the client's thread has run. The client's thread may already have
    // opened a new session by then (it runs while this one resumes), and `Connected` is
    // then true of that one.
    assert!(
        !report.contains("state=Connected session=held"),
        "Client::state() said Connected of the session that held the lock: {report}"
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

/// A [`Held`] for any guard with the usual methods; `g => expr` gives its revocation
/// receiver (`None` for `Leadership`, which has none).
macro_rules! held {
    ($what:expr, $guard:expr) => {
        held!($what, $guard, g => Some(g.revocation()))
    };
    ($what:expr, $guard:expr, $g:ident => $revocation:expr) => {{
        let $g = std::sync::Arc::new($guard);
        Held {
            what: $what,
            path: $g.path().to_string(),
            lost: $g.lost(),
            revocation: $revocation,
            valid: Box::new(move || $g.is_valid()),
        }
    }};
}

#[test]
fn every_guard_notices_a_delete_that_follows_a_write_to_its_node() {
    let cs = shared_cluster().connect_string();
    let c = connect(&cs, Duration::from_secs(10));
    let other = connect(&cs, Duration::from_secs(10));
    let dir = unique("write-delete");
    let at = |name: &str| format!("{dir}/{name}");

    let g = Mutex::new(&c, &at("mutex")).unwrap().acquire().unwrap();
    write_then_delete(&other, held!("Mutex", g));
    let g = ReentrantMutex::new(&c, &at("reentrant"))
        .unwrap()
        .acquire()
        .unwrap();
    // Not Send, so not behind an Arc shared with the closure: checked here.
    let (p, lost, rev) = (g.path().to_string(), g.lost(), g.revocation());
    other.set_data(&p, REVOKE, None).unwrap();
    recv(&rev, WITHIN, "ReentrantMutex: revocation");
    other.delete(&p, None).unwrap();
    recv(&lost, WITHIN, "ReentrantMutex: lost after the delete");
    assert!(!g.is_valid());
    drop(g);
    let g = UnfairMutex::new(&c, &at("unfair"))
        .unwrap()
        .acquire()
        .unwrap();
    write_then_delete(&other, held!("UnfairMutex", g));
    let rw = RwLock::new(&c, &at("rw")).unwrap();
    write_then_delete(&other, held!("ReadGuard", rw.read().unwrap()));
    write_then_delete(&other, held!("WriteGuard", rw.write().unwrap()));
    let sem = Semaphore::new(&c, &at("sem"), 2).unwrap();
    write_then_delete(&other, held!("Permit", sem.acquire().unwrap()));

    // A MultiLock: the write and the delete hit the node of its second lock.
    let (a, b) = (at("multi-a"), at("multi-b"));
    let g = std::rc::Rc::new(MultiLock::new(&c, &[&a, &b]).unwrap().acquire().unwrap());
    let h = Held {
        what: "MultiLockGuard",
        path: g.paths()[1].to_string(),
        lost: g.lost(),
        revocation: Some(g.guards()[1].revocation()),
        valid: Box::new(move || g.is_valid()),
    };
    write_then_delete(&other, h);

    let fair = LeaderElection::new(&c, &at("elect"), "me").unwrap();
    write_then_delete(
        &other,
        held!("Leadership (fair)", fair.lead().unwrap(), g => None),
    );
    let unfair = LeaderElection::unfair(&c, &at("elect-unfair"), "me").unwrap();
    write_then_delete(
        &other,
        held!("Leadership (unfair)", unfair.lead().unwrap(), g => None),
    );
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
        // A revocation request is told (once per term), and is no loss; other bytes are
        // nothing at all.
        other.set_data(&node, REVOKE, None).unwrap();
        match recv(&events, WITHIN, "the revocation request told") {
            LeaderEvent::Revoked => {}
            other => panic!("unfair={unfair}: expected Revoked, got {other:?}"),
        }
        other.set_data(&node, b"x", None).unwrap();
        other.set_data(&node, REVOKE, None).unwrap();
        assert_quiet(&events, "an event after more writes to the leader's node");
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
    c.close().into_result().unwrap();
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

// ---------------------------------------------------------------------------------------
// 2. The loss clock runs while connected: a one-way stall
// ---------------------------------------------------------------------------------------

/// Stamps the moment `rx` fires (or never, if it does not within the deadline).
fn stamp(rx: Receiver<()>) -> Receiver<Instant> {
    spawn(move || {
        rx.recv_timeout(WITHIN * 2)
            .map(|()| Instant::now())
            .unwrap_or_else(|_| Instant::now() + WITHIN * 10)
    })
}

#[test]
fn a_holder_whose_requests_go_unanswered_is_lost_before_another_process_acquires() {
    let cs = shared_cluster().connect_string();
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let t = Duration::from_secs(2);
    let a = connect(&proxy.connect_string(), t);
    let writer = connect(&cs, Duration::from_secs(10));
    let b = connect(&cs, Duration::from_secs(10));
    let dir = unique("one-way");
    writer.create(&dir, b"", CreateMode::Persistent).unwrap();
    // Watches that the writer fires one by one: the server keeps sending to A while A's
    // own requests (pings included) go unanswered.
    let watched: Vec<String> = (0..150).map(|i| format!("{dir}/w{i}")).collect();
    let mut watches = Vec::new();
    for p in &watched {
        writer.create(p, b"", CreateMode::Persistent).unwrap();
        watches.push(a.get_data_w(p).unwrap().2);
    }
    let lock_path = format!("{dir}/lock");
    let g = Mutex::new(&a, &lock_path).unwrap().acquire().unwrap();
    let a_lost = stamp(g.lost());
    let contender = {
        let (b, p) = (b.clone(), lock_path.clone());
        // Whether A's lost() had fired when B's acquire returned: an order, unlike the two
        // stamps, which are taken by threads that a loaded machine may wake late.
        let a_lost_seen = g.lost();
        spawn(move || {
            let g = Mutex::new(&b, &p).unwrap().acquire_timeout(WITHIN).unwrap();
            let a_lost_first = a_lost_seen.try_recv().is_ok();
            (Instant::now(), a_lost_first, g)
        })
    };
    let lock = Mutex::new(&writer, &lock_path).unwrap();
    wait_until(WITHIN, "the contender queued", || {
        lock.participants().unwrap().len() == 2
    });

    proxy.stall_client_to_server();
    let stalled = Instant::now();
    // One write every 25 ms or more: the 150 nodes last at least 3.75 s, past the 1.33 s
    // (two thirds of A's timeout) in which A must notice that its requests go unanswered,
    // and past A's loss. After that, the contender is only waited for: it acquires once
    // the server expires A's session, which a loaded machine may make late.
    let mut next = 0;
    let (b_acquired, a_lost_first, b_guard) = loop {
        if next == watched.len() {
            break recv(&contender, WITHIN, "the contender's acquisition");
        }
        match contender.recv_timeout(Duration::from_millis(25)) {
            Ok(r) => break r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                writer.set_data(&watched[next], b"x", None).unwrap();
                next += 1;
            }
            Err(e) => panic!("contender: {e}"),
        }
    };
    let b_guard = b_guard.expect("the contender acquired");
    let valid_then = g.is_valid();
    let lost_at = recv(&a_lost, WITHIN * 3, "A's loss stamp");
    let delivered = watches
        .iter()
        .filter(|w| {
            w.try_recv()
                .is_ok_and(|e| e.event_type == zkguard::EventType::NodeDataChanged)
        })
        .count();
    eprintln!(
        "one-way stall: A lost at {:?}, B acquired at {:?} after the stall; {delivered} events reached A",
        lost_at.saturating_duration_since(stalled),
        b_acquired - stalled
    );
    assert!(
        delivered > 0,
        "no event reached A: the stall was not one-way"
    );
    assert!(
        a_lost_first,
        "A's lost() had not fired when B acquired (stamped {:?} after)",
        lost_at.saturating_duration_since(b_acquired)
    );
    assert!(!valid_then, "A was valid when B acquired");
    drop(b_guard);
    drop(proxy);
}

// ---------------------------------------------------------------------------------------
// 4. A server (or an ensemble) rebuilt from nothing takes a new session
// ---------------------------------------------------------------------------------------

fn rebuilt_from_nothing(servers: usize) {
    init_log();
    let cluster = TestCluster::builder().servers(servers).start().unwrap();
    // A token is a zxid, its high half the leader epoch: one more for every leader election
    // of an ensemble (a standalone server stays at 0). The rebuilt ensemble counts its epochs
    // from 1 again, but under load it may elect more than once while starting (a leader
    // that did not hear a quorum within `initLimit` gives up), so the old ensemble's epoch is
    // first raised well above that: three elections, the leader killed and started again.
    for _ in 0..if servers > 1 { 3 } else { 0 } {
        // The ensemble may still be electing (the restarted server serves as a follower of
        // a leader that has since given up, or `srvr` timed out on a loaded machine): the
        // mode is a snapshot, so wait for one to say it leads.
        let mut leader = None;
        common::wait_until(WITHIN * 2, "a leader", || {
            leader = cluster.leader();
            leader.is_some()
        });
        let leader = leader.expect("a leader");
        cluster.kill(leader).unwrap();
        cluster.start_server(leader).unwrap();
    }
    // Through a proxy, to cut the new session's connection at the end.
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let c = connect(&proxy.connect_string(), Duration::from_secs(2));
    let events = c.events();
    // Move the zxid well past where a fresh server starts.
    for i in 0..40 {
        retry(WITHIN, || {
            match c.create(&format!("/n{i}"), b"", CreateMode::Persistent) {
                Err(Error::NodeExists { .. }) => Ok(()),
                r => r.map(|_| ()),
            }
        });
    }
    let g = Mutex::new(&c, "/locks/job").unwrap().acquire().unwrap();
    let old_token = g.token();
    let lost = g.lost();
    let old_session = c.session_id();
    for i in 0..servers {
        cluster.wipe(i).unwrap();
    }
    for i in 0..servers {
        cluster.start_server(i).unwrap();
    }
    for i in 0..servers {
        cluster.wait_serving(i, WITHIN * 2).unwrap();
    }
    common::wait_event(&events, WITHIN, "lost", |e| {
        matches!(e, zkguard::SessionEvent::Lost { .. })
    });
    recv(&lost, WITHIN, "the guard lost");
    assert!(!g.is_valid());
    let ev = common::wait_event(&events, WITHIN * 2, "a new session", |e| {
        matches!(e, zkguard::SessionEvent::Connected { .. })
    });
    assert_ne!(c.session_id(), old_session, "{ev:?}");
    // The data is gone, and the client works.
    assert_eq!(retry(WITHIN, || c.exists("/n0")), None);
    let g2 = retry(WITHIN, || {
        Mutex::new(&c, "/locks/job")
            .unwrap()
            .acquire_timeout(WITHIN)
    })
    .expect("acquire on the rebuilt ensemble");
    // Fencing tokens restart with the ensemble's zxids (documented).
    assert!(
        g2.token() < old_token,
        "{:#x} vs {old_token:#x} (epoch, counter)",
        g2.token()
    );
    // The new session's seen zxid starts from the rebuilt servers' (far below the old
    // session's): its connection cut, it resumes. Had it kept the old session's, every
    // server would refuse it ("client has seen zxid … our last zxid is …") until it was
    // lost.
    let new_session = c.session_id();
    while events.try_recv().is_ok() {}
    proxy.reset();
    let ev = common::wait_event(&events, WITHIN, "the new session resumed", |e| {
        matches!(
            e,
            zkguard::SessionEvent::Reconnected { .. } | zkguard::SessionEvent::Lost { .. }
        )
    });
    assert_eq!(
        ev,
        zkguard::SessionEvent::Reconnected {
            session_id: new_session
        }
    );
    assert!(g2.is_valid(), "the rebuilt ensemble's guard kept");
    drop(g);
}

#[test]
fn a_client_opens_a_new_session_on_a_standalone_server_rebuilt_from_nothing() {
    rebuilt_from_nothing(1);
}

#[test]
fn a_client_opens_a_new_session_on_an_ensemble_rebuilt_from_nothing() {
    rebuilt_from_nothing(3);
}

// ---------------------------------------------------------------------------------------
// 5. No hot reconnect loop against a server that drops every connection
// ---------------------------------------------------------------------------------------

#[test]
fn a_server_that_drops_every_connection_after_the_handshake_gets_back_off() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let c = connect(&proxy.connect_string(), Duration::from_secs(3));
    let events = c.events();
    let before = proxy.accepted();
    proxy.flap();
    proxy.reset();
    let started = Instant::now();
    // Three seconds of flapping.
    while started.elapsed() < Duration::from_secs(3) {
        let _ = events.recv_timeout(Duration::from_millis(100));
    }
    let attempts = proxy.accepted() - before;
    eprintln!("flapping server: {attempts} connections in 3 s");
    assert!(attempts >= 2, "the client stopped trying ({attempts})");
    // Back-off from 25 ms doubling to 1 s allows about ten; a hot loop makes thousands.
    assert!(attempts < 40, "{attempts} connections in 3 s");
    proxy.heal();
    retry(WITHIN, || c.exists("/"));
    assert_eq!(c.state(), SessionState::Connected);
}

// ---------------------------------------------------------------------------------------
// Also: a follower cut off from its quorum
// ---------------------------------------------------------------------------------------

#[test]
fn a_holder_on_a_server_cut_off_from_its_quorum_is_invalid_before_another_acquires_and_never_confirmed(
) {
    init_log();
    let cluster = TestCluster::builder()
        .servers(3)
        .isolatable(true)
        .start()
        .unwrap();
    let leader = (0..3)
        .find(|&i| cluster.mode(i).map(|m| m == "leader").unwrap_or(false))
        .expect("a leader");
    let follower = (leader + 1) % 3;
    let others: Vec<String> = (0..3)
        .filter(|&i| i != follower)
        .map(|i| cluster.server_connect_string(i))
        .collect();
    // A session timeout comfortably above syncLimit x tickTime (5 x 100 ms).
    let t = Duration::from_secs(3);
    let a = Client::builder(&cluster.server_connect_string(follower))
        .session_timeout(t)
        .request_timeout(Duration::from_millis(500))
        .connect_timeout(WITHIN)
        .build()
        .unwrap();
    let b = connect(&others.join(","), Duration::from_secs(10));
    let path = "/locks/cut-off";
    let g = Mutex::new(&a, path).unwrap().acquire().unwrap();
    g.confirm().unwrap();
    let a_lost = stamp(g.lost());
    let contender = {
        let b = b.clone();
        spawn(move || {
            let g = Mutex::new(&b, path)
                .unwrap()
                .acquire_timeout(WITHIN)
                .unwrap();
            (Instant::now(), g)
        })
    };
    wait_until(WITHIN, "the contender queued", || {
        Mutex::new(&b, path).unwrap().participants().unwrap().len() == 2
    });
    cluster.isolate(follower).unwrap();
    let cut = Instant::now();
    // A sampler notes when A turns invalid; meanwhile confirm() is tried until the
    // contender gets in.
    let g = std::sync::Arc::new(g);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let invalid = {
        let (g, stop) = (g.clone(), stop.clone());
        spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if !g.is_valid() {
                    return Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            None
        })
    };
    let mut confirms = 0;
    let (b_acquired, b_guard) = loop {
        if let Ok(r) = contender.try_recv() {
            break r;
        }
        if let Ok(()) = g.confirm() {
            panic!("confirm() said yes {:?} after the cut", cut.elapsed());
        }
        confirms += 1;
        // Pacing only (a failed confirm can return at once).
        std::thread::sleep(Duration::from_millis(5));
    };
    let b_guard = b_guard.expect("the contender acquired");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let invalid_at = recv(&invalid, WITHIN, "the sampler").expect("A still valid when B acquired");
    let lost_at = recv(&a_lost, WITHIN * 3, "A's loss stamp");
    eprintln!(
        "cut-off follower: A invalid at {:?}, lost at {:?}, B acquired at {:?} after the cut; {confirms} confirms, none yes",
        invalid_at - cut,
        lost_at.saturating_duration_since(cut),
        b_acquired - cut
    );
    assert!(invalid_at < b_acquired, "A was valid when B acquired");
    drop(b_guard);
    cluster.rejoin(follower).unwrap();
}

// ---------------------------------------------------------------------------------------
// 6. A background delete never goes out on another session
// ---------------------------------------------------------------------------------------

#[test]
fn a_lost_unfair_holders_background_delete_never_goes_out_on_its_next_session() {
    let cs = shared_cluster().connect_string();
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let a = connect(&proxy.connect_string(), Duration::from_secs(2));
    let (a_events, a_session) = (a.events(), a.session_id());
    let b = connect(&cs, Duration::from_secs(10));
    let path = unique("unfair-bg-delete");
    // Another ephemeral node of A's session: the server deletes all of a session's
    // ephemeral nodes in one step when it expires the session.
    let marker = unique("marker");
    a.create(&marker, b"", CreateMode::Ephemeral).unwrap();
    let g = UnfairMutex::new(&a, &path).unwrap().acquire().unwrap();
    let lost = g.lost();
    let contender = {
        let (b, path, marker) = (b.clone(), path.clone(), marker.clone());
        spawn(move || {
            let g = UnfairMutex::new(&b, &path)
                .unwrap()
                .acquire_timeout(WITHIN)
                .unwrap()
                .expect("the contender acquired");
            // Read right after the grant: was A's session still alive when A's node went?
            let marker_left = b.exists(&marker).unwrap().is_some();
            (g, marker_left)
        })
    };
    wait_until(WITHIN, "the contender watching", || {
        common::watches_by_path()
            .get(&path)
            .is_some_and(|s| s.contains(&format!("0x{:x}", b.session_id() as u64)))
    });
    // A's pings still reach the server (its session stays alive there) but no answer
    // comes back: A counts its session lost while the server still has it.
    proxy.stall_server_to_client();
    recv(&lost, WITHIN, "A's guard lost");
    // The release cannot be sent now: it goes to the background, for A's old session.
    drop(g);
    proxy.heal();
    let (b_guard, marker_left) = recv(&contender, WITHIN * 2, "the contender");
    assert!(
        !marker_left,
        "A's node was deleted while A's old session was still alive: the background delete \
         went out on A's next session"
    );
    // A opens its next session by itself (after closing the old one on the server, which
    // may be what let the contender in: so it is awaited, not read at once).
    common::wait_event(&a_events, WITHIN, "A's next session", |e| {
        matches!(e, zkguard::SessionEvent::Connected { .. })
    });
    assert_ne!(a.session_id(), 0);
    assert_ne!(a.session_id(), a_session);
    drop(b_guard);
}
