//! Release off the holder's path (docs/semantics.md, "What a returned drop means"): a
//! dropped guard writes its delete and returns; the answer is the background deletes'
//! (`client/janitor.rs`). Attacked here: a close right after a drop, a process that exits
//! or returns from `main` right after a drop (a child process: this test binary run
//! again), the connection cut with the delete swallowed, the server killed right after
//! a drop, a waiter behind. (Many drops in a row start no thread each: `process.rs`, whose
//! tests run one at a time so the thread count is theirs.)
//!
//! No timed assertion: where a node left behind would be waited out, the holder's session
//! timeout is a minute, and the next holder's acquire gives up long before that could
//! have expired (a hang turned into a failure), or a read is made once the node's fate is
//! settled.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{connect, init_log, unique, WITHIN};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{CloseOutcome, Mutex, SessionState};

/// The holder's session timeout: a node left behind would stay this long.
const HOLDER_SESSION: Duration = Duration::from_secs(60);
/// How long the next holder waits: far below [`HOLDER_SESSION`].
const NEXT_WAITS: Duration = Duration::from_secs(25);

/// A cluster that grants the minute-long session [`HOLDER_SESSION`].
fn cluster() -> TestCluster {
    TestCluster::builder()
        .servers(1)
        .max_session_timeout(Duration::from_secs(120))
        .start()
        .expect("start a ZooKeeper server")
}

/// The next holder (another client) acquires within [`NEXT_WAITS`]: the dropped guard's
/// node did not stay for its session timeout.
fn next_holder_gets_it(connect_string: &str, path: &str) {
    let other = connect(connect_string, Duration::from_secs(10));
    let lock = Mutex::new(&other, path).unwrap();
    let g = lock
        .acquire_timeout(NEXT_WAITS)
        .unwrap_or_else(|e| panic!("the next holder's acquire failed: {e}"))
        .unwrap_or_else(|| panic!("the next holder waited {NEXT_WAITS:?}: the node stayed"));
    assert!(g.is_valid());
    drop(g);
    other.close();
}

#[test]
fn a_close_right_after_a_drop_leaves_no_node() {
    init_log();
    let cluster = cluster();
    let path = unique("release-close");
    let a = connect(&cluster.connect_string(), HOLDER_SESSION);
    let g = Mutex::new(&a, &path).unwrap().acquire().unwrap();
    let node = g.path().to_string();
    drop(g);
    // The delete was written before the drop returned; closeSession follows it on the
    // same connection, and the close waits for its answer, which comes after the
    // delete's: by then the node is gone (and would be with the session anyway).
    let closed = a.close();
    assert!(matches!(closed, CloseOutcome::Confirmed), "{closed:?}");
    let b = connect(&cluster.connect_string(), Duration::from_secs(10));
    assert_eq!(b.exists(&node).unwrap(), None, "{node} outlived the close");
}

/// What the child does after dropping its guard (its environment says).
const CHILD: &str = "ZKGUARD_RELEASE_CHILD";

/// The child's part of the two tests below: acquires, drops the guard, and at once exits
/// (`exit`) or returns from `main` with the client still open (`return`: the client is
/// leaked, as one in a `static` or a leaked `Arc` would be: no close). Run only when this
/// binary is run again by those tests; an ordinary run of the suite passes through.
#[test]
fn child_acquires_drops_and_leaves() {
    let Ok(how) = std::env::var(CHILD) else {
        return;
    };
    let connect_string = std::env::var("ZKGUARD_RELEASE_CONNECT").unwrap();
    let path = std::env::var("ZKGUARD_RELEASE_PATH").unwrap();
    let c = connect(&connect_string, HOLDER_SESSION);
    let g = Mutex::new(&c, &path).unwrap().acquire().unwrap();
    assert!(g.is_valid());
    drop(g);
    match how.as_str() {
        "exit" => std::process::exit(0),
        _ => std::mem::forget(c),
    }
}

/// Runs [`child_acquires_drops_and_leaves`] in a child process, `how` it leaves.
fn run_child(how: &str) {
    init_log();
    let cluster = cluster();
    let path = unique("release-child");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_acquires_drops_and_leaves",
            "--test-threads=1",
        ])
        .env(CHILD, how)
        .env("ZKGUARD_RELEASE_CONNECT", cluster.connect_string())
        .env("ZKGUARD_RELEASE_PATH", &path)
        .status()
        .unwrap();
    assert!(status.success(), "the child failed: {status}");
    // The child is gone, its session not (a minute): only its delete frees the lock.
    next_holder_gets_it(&cluster.connect_string(), &path);
}

#[test]
fn a_process_that_exits_right_after_a_drop_leaves_no_node() {
    run_child("exit");
}

#[test]
fn a_process_that_returns_from_main_right_after_a_drop_leaves_no_node() {
    run_child("return");
}

#[test]
fn a_delete_swallowed_by_a_cut_connection_is_sent_again() {
    init_log();
    let cluster = cluster();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let path = unique("release-cut");
    let a = connect(&proxy.connect_string(), HOLDER_SESSION);
    let events = a.events();
    let g = Mutex::new(&a, &path).unwrap().acquire().unwrap();
    let node = g.path().to_string();
    // The delete is written and lost on the way: the server never hears it.
    proxy.blackhole();
    drop(g);
    proxy.reset();
    proxy.heal();
    // The session resumes (a minute long: it cannot have expired), and the background
    // deletes again on it: the next holder gets the lock, while the holder's client lives.
    common::wait_event(&events, WITHIN, "reconnected", |e| {
        matches!(e, zkguard::SessionEvent::Reconnected { .. })
    });
    next_holder_gets_it(&cluster.connect_string(), &path);
    assert_eq!(a.state(), SessionState::Connected);
    let b = connect(&cluster.connect_string(), Duration::from_secs(10));
    assert_eq!(b.exists(&node).unwrap(), None);
}

#[test]
fn a_drop_right_before_the_server_is_killed_still_frees_the_lock() {
    init_log();
    let cluster = cluster();
    let path = unique("release-kill");
    let a = connect(&cluster.connect_string(), HOLDER_SESSION);
    let events = a.events();
    let g = Mutex::new(&a, &path).unwrap().acquire().unwrap();
    drop(g);
    // Applied or not: the answer is lost either way.
    cluster.kill(0).unwrap();
    cluster.start_server(0).unwrap();
    common::wait_event(&events, WITHIN, "reconnected", |e| {
        matches!(e, zkguard::SessionEvent::Reconnected { .. })
    });
    next_holder_gets_it(&cluster.connect_string(), &path);
    assert_eq!(a.state(), SessionState::Connected);
}

#[test]
fn a_waiter_behind_a_dropped_guard_gets_the_lock() {
    init_log();
    let cluster = cluster();
    let path = unique("release-waiter");
    let a = connect(&cluster.connect_string(), HOLDER_SESSION);
    let b = connect(&cluster.connect_string(), Duration::from_secs(10));
    let g = Mutex::new(&a, &path).unwrap().acquire().unwrap();
    let lock_b = Mutex::new(&b, &path).unwrap();
    let waiter = common::spawn(move || {
        lock_b
            .acquire_timeout(NEXT_WAITS)
            .map(|g| g.map(|g| g.is_valid()))
    });
    common::wait_until(WITHIN, "the waiter queued", || {
        common::children(&a, &path).len() == 2
    });
    drop(g);
    let got = common::recv(&waiter, WITHIN + NEXT_WAITS, "the waiter");
    assert!(
        matches!(got, Ok(Some(true))),
        "the waiter did not get it: {got:?}"
    );
}
