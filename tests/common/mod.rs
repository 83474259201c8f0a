//! Shared helpers for the integration tests (real ZooKeeper servers via the harness).
//!
//! Every test binary compiles all of it (`mod common;`), so `dead_code` is allowed here and
//! in the modules below, each used by a few binaries only:
//! - `partition`: servers behind a fault proxy, and which server a client is on;
//! - `churn`: the churn checker of the election (referee, recorder, monitor);
//! - `exclusion`: the mutual-exclusion detector and contending workers of the lock faults;
//! - `election`: helpers of the election and candidate tests;
//! - `raw`: raw sockets, processes and hand-written frames for the harness's own tests;
//! - `logs`: the library's log records captured in memory.
#![allow(dead_code)]

pub mod churn;
pub mod election;
pub mod exclusion;
pub mod logs;
pub mod partition;
pub mod raw;

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use zkguard::testing::TestCluster;
use zkguard::{Client, ConnectAttempt, Error, LeaderElection, Participant, SessionEvent};

pub fn init_log() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// One standalone server shared by every test of a test binary. It is never dropped: its
/// watchdog stops it when the process exits, and a failing test keeps its logs.
pub fn shared_cluster() -> &'static TestCluster {
    static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    init_log();
    CLUSTER.get_or_init(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(c) = CLUSTER.get() {
                eprintln!(
                    "shared ZooKeeper's logs kept at {}",
                    c.keep_logs().display()
                );
            }
            default_hook(info);
        }));
        TestCluster::start(1).expect("start a ZooKeeper server")
    })
}

/// A client of the shared server logged in as digest user `user` (password `<user>-pw`).
pub fn as_user(user: &str) -> Client {
    Client::builder(&shared_cluster().connect_string())
        .auth("digest", format!("{user}:{user}-pw").as_bytes())
        .connect_timeout(WITHIN)
        .build()
        .unwrap()
}

/// A new persistent node (a unique path under `prefix`) that `owner` alone may delete
/// children of, and anyone may read and create children in: ZooKeeper checks a delete
/// against the parent's ACL, so what another identity creates there it cannot delete.
pub fn dir_others_may_not_delete_in(owner: &Client, prefix: &str) -> String {
    let path = unique(prefix);
    let mut acl = zkguard::Acl::creator_all();
    acl.push(zkguard::Acl::new(
        zkguard::Perms::READ | zkguard::Perms::CREATE,
        "world",
        "anyone",
    ));
    owner
        .create_with_acl(&path, b"", zkguard::CreateMode::Persistent, &acl)
        .unwrap();
    path
}

/// A client with the given session timeout and a generous connect deadline (slow CI).
pub fn connect(connect_string: &str, session_timeout: Duration) -> Client {
    Client::builder(connect_string)
        .session_timeout(session_timeout)
        .connect_timeout(Duration::from_secs(20))
        .build()
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}

/// A fresh top-level path for one test.
pub fn unique(prefix: &str) -> String {
    format!("/{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Waits for the first event matching `pred`, returning it (and panicking on the deadline).
pub fn wait_event(
    rx: &Receiver<SessionEvent>,
    within: Duration,
    what: &str,
    pred: impl Fn(&SessionEvent) -> bool,
) -> SessionEvent {
    let deadline = Instant::now() + within;
    loop {
        match rx.recv_deadline(deadline) {
            Ok(ev) if pred(&ev) => return ev,
            Ok(_) => continue,
            Err(_) => panic!("no {what} event within {within:?}"),
        }
    }
}

/// Waits for the session to come back: `Reconnected` with the same id, not `Lost`.
pub fn expect_reconnected(rx: &Receiver<SessionEvent>, session_id: i64, within: Duration) {
    let ev = wait_event(rx, within, "reconnected", |e| {
        matches!(
            e,
            SessionEvent::Reconnected { .. } | SessionEvent::Lost { .. }
        )
    });
    assert_eq!(
        ev,
        SessionEvent::Reconnected { session_id },
        "session not kept"
    );
}

/// The type of the next event of a watch, waiting at most 10 s.
pub fn next_watch(w: &Receiver<zkguard::WatchedEvent>) -> zkguard::EventType {
    w.recv_timeout(Duration::from_secs(10))
        .expect("no watch event within 10 s")
        .event_type
}

/// Retries `f` while it fails with a connection error (an election or reconnect in progress).
pub fn retry<T>(within: Duration, mut f: impl FnMut() -> zkguard::Result<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e)
                if Instant::now() < deadline
                    && (e.is_connection_error() || matches!(e, zkguard::Error::SessionExpired)) =>
            {
                // Back off a little between attempts; the request itself waits for a connection.
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("still failing after {within:?}: {e}"),
        }
    }
}

/// Polls `cond` (every 10 ms) until it holds; panics naming `what` after `within`.
pub fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "not {what} within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The children of `dir`, sorted; none if it does not exist (a reaped container).
/// Connection trouble is retried for a while.
pub fn children(client: &Client, dir: &str) -> Vec<String> {
    let mut names = retry(Duration::from_secs(20), || match client.get_children(dir) {
        Ok((names, _)) => Ok(names),
        Err(zkguard::Error::NoNode { .. }) => Ok(Vec::new()),
        Err(e) => Err(e),
    });
    names.sort();
    names
}

/// How long to wait for something that must happen (slow, loaded CI machines).
pub const WITHIN: Duration = Duration::from_secs(20);
/// How long to watch for something that must *not* happen. A pass proves nothing by
/// itself; a failure is a real bug (the thing happened).
pub const QUIET: Duration = Duration::from_millis(300);

/// The last component of a node path.
pub fn base(path: &str) -> String {
    path.rsplit('/').next().unwrap().to_string()
}

/// Runs `f` on its own thread; the receiver gets its result (disconnects if it panics).
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Receiver<T> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}

/// The next message of `rx`, failing the test if none comes within `within`.
pub fn recv<T>(rx: &Receiver<T>, within: Duration, what: &str) -> T {
    match rx.recv_timeout(within) {
        Ok(v) => v,
        Err(RecvTimeoutError::Timeout) => panic!("no {what} within {within:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what}: the sender is gone (a panic?)"),
    }
}

/// Asserts that nothing arrives on `rx` for a short while ([`QUIET`]).
pub fn assert_quiet<T: std::fmt::Debug>(rx: &Receiver<T>, what: &str) {
    match rx.recv_timeout(QUIET) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("{what}: {other:?}"),
    }
}

/// `wchp` from the shared server: watched path -> session ids (as `0x...`) watching it.
pub fn watches_by_path() -> HashMap<String, Vec<String>> {
    watches_on(shared_cluster())
}

/// A mutex queue at `dir` in line order: each node's path and its owner's session (`0x…`),
/// as [`queue_watches`] takes them.
pub fn queue_and_owners(client: &Client, dir: &str) -> (Vec<String>, Vec<String>) {
    let queue: Vec<String> = zkguard::Mutex::new(client, dir)
        .unwrap()
        .participants()
        .unwrap()
        .into_iter()
        .map(|p| format!("{dir}/{}", p.node))
        .collect();
    let owners = queue
        .iter()
        .map(|n| {
            let stat = client.exists(n).unwrap().expect("queued node");
            format!("0x{:x}", stat.ephemeral_owner as u64)
        })
        .collect();
    (queue, owners)
}

/// The watches a queue's contenders leave (as [`watches_by_path`] shows them, each path's
/// watchers sorted): the one at `queue[k]`, whose session is `owners[k]` (`0x…`), watches
/// its own node and the two before it (a waiter the node right before it, and the one
/// before that to learn it is next; the holder only its own).
pub fn queue_watches(queue: &[String], owners: &[String]) -> HashMap<String, Vec<String>> {
    let mut want: HashMap<String, Vec<String>> = HashMap::new();
    for (k, owner) in owners.iter().enumerate() {
        for watched in &queue[k.saturating_sub(2)..=k] {
            want.entry(watched.clone()).or_default().push(owner.clone());
        }
    }
    sorted_watchers(want)
}

/// `watches` with each path's watchers sorted, to compare with [`queue_watches`].
pub fn sorted_watchers(watches: HashMap<String, Vec<String>>) -> HashMap<String, Vec<String>> {
    watches
        .into_iter()
        .map(|(p, mut s)| {
            s.sort();
            (p, s)
        })
        .collect()
}

/// [`watches_by_path`] of `cluster`'s first server.
pub fn watches_on(cluster: &TestCluster) -> HashMap<String, Vec<String>> {
    let out = cluster.four_letter(0, "wchp").expect("wchp");
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    let mut current = None;
    for line in out.lines() {
        if line.starts_with('/') {
            current = Some(line.trim().to_string());
            map.entry(line.trim().to_string()).or_default();
        } else if let (Some(p), s) = (&current, line.trim()) {
            if !s.is_empty() {
                map.entry(p.clone()).or_default().push(s.to_lowercase());
            }
        }
    }
    map
}

/// Asserts `r` is an `InvalidPath` naming `path`, in the error and in its message.
pub fn assert_invalid_path<T: std::fmt::Debug>(r: zkguard::Result<T>, path: &str, what: &str) {
    match r {
        Err(e @ zkguard::Error::InvalidPath { .. }) => {
            let zkguard::Error::InvalidPath { path: p, .. } = &e else {
                unreachable!()
            };
            assert_eq!(p, path, "{what}");
            assert!(e.to_string().contains(path), "{what}: message {e}");
        }
        other => panic!("{what} with {path:?}: expected InvalidPath, got {other:?}"),
    }
}

/// Waits until `dir` holds exactly `want` (sorted names).
pub fn wait_children(client: &Client, dir: &str, want: &[String]) {
    expect_children(client, dir, want, "");
}

/// Waits until `dir` holds exactly `want` (a node a failed acquire leaves may be deleted in
/// the background); `what` says what would have left a node.
pub fn expect_children(client: &Client, dir: &str, want: &[String], what: &str) {
    let mut want = want.to_vec();
    want.sort();
    let deadline = Instant::now() + WITHIN;
    let seen = loop {
        let seen = children(client, dir);
        if seen == want || Instant::now() >= deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(seen, want, "children of {dir} {what}");
}

/// The data of every participant, in queue order.
pub fn datas(p: &[Participant]) -> Vec<Vec<u8>> {
    p.iter().map(|x| x.data.clone()).collect()
}

/// The participant ids of an election in queue order, with node names.
pub fn queue(observer: &LeaderElection) -> Vec<(String, String)> {
    match observer.participants() {
        Ok(ps) => ps.into_iter().map(|p| (p.id(), p.node)).collect(),
        Err(e) => {
            log::info!("participants: {e}");
            Vec::new()
        }
    }
}

/// A client of the shared server (10 s session timeout).
pub fn client() -> Client {
    connect(&shared_cluster().connect_string(), Duration::from_secs(10))
}

/// The per-server attempts of a connect error.
pub fn attempts(err: &Error) -> &[ConnectAttempt] {
    match err {
        Error::Connect { attempts, .. } => attempts,
        e => panic!("expected a connect error, got {e:?}"),
    }
}

/// Keeps standalone server 0 of `cluster` down until `events` (a client's, with session
/// timeout `timeout`) says the session is lost, starts it again from its data (which
/// restores the sessions it had), and returns the id of the client's new session once it
/// is reported.
pub fn outlive_session(
    cluster: &TestCluster,
    events: &Receiver<SessionEvent>,
    timeout: Duration,
) -> i64 {
    cluster.stop(0).unwrap();
    wait_event(events, timeout * 3, "the loss", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    cluster.start_server(0).unwrap();
    match wait_event(events, WITHIN, "the new session", |e| {
        matches!(e, SessionEvent::Connected { .. })
    }) {
        SessionEvent::Connected { session_id } => session_id,
        ev => unreachable!("{ev:?}"),
    }
}
