//! Thousands of locks in one process (issue 25, at test size): one client holds 2,000
//! distinct `Mutex`es; the server watches exactly their own nodes for its session; a failover
//! of the connected server keeps the session and every guard, with every watch re-armed (a
//! deletion afterwards reaches exactly its guard); dropping them all leaves no node and no
//! watch. The figures at 10,000 are the benchmark's (`examples/bench`), not tests.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::thread;
use std::time::{Duration, Instant};

use common::partition::wait_server_of;
use common::{connect, expect_reconnected, init_log, recv, shared_cluster, unique, wait_until};
use crossbeam_channel::Receiver;
use zkguard::testing::TestCluster;
use zkguard::{Client, Error, Mutex, MutexGuard};

/// How many locks one client holds.
const GUARDS: usize = 2_000;
/// How many threads take them.
const THREADS: usize = 4;
/// Long enough that a loaded machine does not expire the session during a failover.
const SESSION: Duration = Duration::from_secs(20);
/// How long to wait for something that must happen at this size on a slow, loaded machine.
const WITHIN: Duration = Duration::from_secs(45);
/// The held nodes another client deletes after the failover, spread across the set.
const DELETED: [usize; 5] = [0, 499, 1_000, 1_501, GUARDS - 1];
/// The length of a directory name that makes the failover test's paths long (about 700
/// bytes each): re-arming its 2,000 watches then takes over 1.3 MB of paths, more than the
/// server's `jute.maxbuffer` (1 MiB) accepts in one frame, as 10,000 ordinary paths would.
const LONG_NAME: usize = 600;

/// The lock path of the `i`th lock under `root` (zero-padded: paths sort by `i`).
fn lock_path(root: &str, i: usize) -> String {
    format!("{root}/m{i:04}")
}

/// `client` takes the `GUARDS` locks under `root` from `THREADS` threads; the guards are
/// returned in lock order (guard `i` holds `lock_path(root, i)`).
fn take_all(client: &Client, root: &str) -> Vec<MutexGuard> {
    let takers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (client, root) = (client.clone(), root.to_string());
            thread::spawn(move || {
                (t..GUARDS)
                    .step_by(THREADS)
                    .map(|i| {
                        let path = lock_path(&root, i);
                        Mutex::new(&client, &path)
                            .and_then(|m| m.acquire())
                            .unwrap_or_else(|e| panic!("acquire {path}: {e}"))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut guards: Vec<MutexGuard> = takers
        .into_iter()
        .flat_map(|t| t.join().expect("a taking thread panicked"))
        .collect();
    guards.sort_by(|a, b| a.path().cmp(b.path()));
    for (i, g) in guards.iter().enumerate() {
        assert!(
            g.path().starts_with(&format!("{}/", lock_path(root, i))),
            "guard {i} holds {}",
            g.path()
        );
    }
    guards
}

/// `wchc` of server `i`: session id (`0x...`, lower case) -> the paths it watches.
fn watches_by_session(cluster: &TestCluster, i: usize) -> HashMap<String, BTreeSet<String>> {
    let out = cluster
        .four_letter_with_timeout(i, "wchc", WITHIN)
        .expect("wchc");
    let mut map: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut current = None;
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('/') {
            let session = current
                .clone()
                .unwrap_or_else(|| panic!("wchc: a path before any session: {out}"));
            map.entry(session).or_default().insert(line.to_string());
        } else {
            current = Some(line.to_lowercase());
            map.entry(line.to_lowercase()).or_default();
        }
    }
    map
}

/// The paths server `i` watches for `client`'s session.
fn session_watches(cluster: &TestCluster, i: usize, client: &Client) -> BTreeSet<String> {
    let id = format!("{:#x}", client.session_id());
    watches_by_session(cluster, i)
        .remove(&id)
        .unwrap_or_default()
}

/// Asserts that server `i` watches exactly `want` for `client`'s session: nothing missing
/// (a watch not armed or not re-armed), nothing extra. The failure names a few of each.
fn assert_watches(
    cluster: &TestCluster,
    i: usize,
    client: &Client,
    want: &BTreeSet<String>,
    when: &str,
) {
    let seen = session_watches(cluster, i, client);
    // Named by their lock directory and node: the paths are long.
    let short = |p: &String| {
        let mut last_two: Vec<&str> = p.rsplit('/').take(2).collect();
        last_two.reverse();
        last_two.join("/")
    };
    let missing: Vec<_> = want.difference(&seen).take(5).map(short).collect();
    let extra: Vec<_> = seen.difference(want).take(5).map(short).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{when}: server {i} watches {} paths for the session, want {}; missing (first 5) \
         {missing:?}, extra (first 5) {extra:?}",
        seen.len(),
        want.len()
    );
}

/// Every watch server `i` holds, child watches included (`wchs`): on a cluster of one test,
/// where only the holder watches anything, a stray watch of any kind shows here.
fn total_watches(cluster: &TestCluster, i: usize) -> usize {
    let out = cluster.four_letter(i, "wchs").expect("wchs");
    out.lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected wchs output: {out}"))
}

/// The held nodes of `guards`.
fn own_nodes<'a>(guards: impl IntoIterator<Item = &'a MutexGuard>) -> BTreeSet<String> {
    guards.into_iter().map(|g| g.path().to_string()).collect()
}

/// The lock directories under `root` (by name) that still hold a node, with their nodes (a
/// missing one holds none: an empty container is reaped). Listed in pipelined batches.
fn dirs_with_nodes(client: &Client, root: &str) -> Vec<String> {
    let dirs: Vec<String> = (0..GUARDS).map(|i| lock_path(root, i)).collect();
    let mut left = Vec::new();
    for batch in dirs.chunks(500) {
        let pending =
            client.pipeline(|p| batch.iter().map(|d| p.get_children(d)).collect::<Vec<_>>());
        for (dir, reply) in batch.iter().zip(pending) {
            match reply.wait() {
                Ok((names, _)) if names.is_empty() => {}
                Ok((names, _)) => left.push(format!("{}: {names:?}", common::base(dir))),
                Err(Error::NoNode { .. }) => {}
                Err(e) => panic!("list {dir}: {e}"),
            }
        }
    }
    left
}

/// Drops every guard, then waits until no lock directory under `root` holds a node and the
/// server `server` watches nothing for `client`'s session.
fn drop_all_and_expect_nothing_left(
    guards: Vec<MutexGuard>,
    cluster: &TestCluster,
    server: usize,
    client: &Client,
    root: &str,
) {
    drop(guards);
    wait_for_none(WITHIN, "held nodes left", || dirs_with_nodes(client, root));
    // Every watched node is gone, so every watch has fired and been removed.
    wait_for_none(WITHIN, "watches left for the session", || {
        session_watches(cluster, server, client)
            .into_iter()
            .collect()
    });
}

/// Polls `left` (every 10 ms) until it lists nothing; panics naming `what` and the first
/// few items after `within`.
fn wait_for_none(within: Duration, what: &str, mut left: impl FnMut() -> Vec<String>) {
    let deadline = Instant::now() + within;
    loop {
        let now_left = left();
        if now_left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} {what} after {within:?}, first: {:?}",
            now_left.len(),
            &now_left[..now_left.len().min(3)]
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// One client takes 2,000 distinct locks from a few threads and holds them: every guard is
/// valid, the server watches exactly their nodes for the session (one own-node watch each,
/// nothing more); dropped, they leave no node and no watch.
#[test]
fn two_thousand_held_locks_keep_one_watch_each_and_leave_nothing_when_dropped() {
    let cluster = shared_cluster();
    let client = connect(&cluster.connect_string(), SESSION);
    let root = unique("scale-held");
    let guards = take_all(&client, &root);
    assert!(guards.iter().all(|g| g.is_valid()), "a guard is not valid");
    // A round trip on the session after every guard's watch request was sent: the server
    // has registered them all.
    client.sync(&root).unwrap();
    assert_watches(cluster, 0, &client, &own_nodes(&guards), "held");
    drop_all_and_expect_nothing_left(guards, cluster, 0, &client, &root);
}

/// With 2,000 locks held, the client's server is killed: the same session comes back on
/// another server, every guard is valid again and none reports a loss, with nothing sent
/// for it by the guards (the connection thread re-arms their watches). The new server
/// watches exactly the held nodes, and a deletion by another client afterwards reaches
/// exactly the deleted nodes' guards. Dropped, they leave no node and no watch. The paths
/// are long, so that the re-arming does not fit in one frame the server accepts.
#[test]
fn two_thousand_guards_survive_a_failover_and_a_later_deletion_reaches_only_its_guard() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let holder = connect(&cluster.connect_string(), SESSION);
    let root = format!("{}/{}", unique("scale-failover"), "n".repeat(LONG_NAME));
    let guards = take_all(&holder, &root);
    let lost: Vec<Receiver<()>> = guards.iter().map(|g| g.lost()).collect();
    holder.sync(&root).unwrap();
    let first = wait_server_of(&cluster, &holder);
    let held = own_nodes(&guards);
    assert_watches(&cluster, first, &holder, &held, "before the failover");
    assert_eq!(
        total_watches(&cluster, first),
        GUARDS,
        "before the failover"
    );

    let events = holder.events();
    let session = holder.session_id();
    let requests = holder.stats().requests;
    cluster.kill(first).unwrap();
    expect_reconnected(&events, session, WITHIN);
    wait_until(WITHIN, "every guard valid again", || {
        guards.iter().all(|g| g.is_valid())
    });
    let reported: Vec<usize> = (0..GUARDS)
        .filter(|&i| lost[i].try_recv().is_ok())
        .collect();
    assert!(
        reported.is_empty(),
        "lost across the failover: {reported:?}"
    );
    assert_eq!(
        holder.stats().requests,
        requests,
        "the guards sent requests of their own across the failover"
    );
    let second = wait_server_of(&cluster, &holder);
    assert_ne!(second, first, "still on the killed server");
    // The re-arming is done before the session's first request after the reconnect.
    holder.sync(&root).unwrap();
    assert_watches(&cluster, second, &holder, &held, "after the failover");
    assert_eq!(
        total_watches(&cluster, second),
        GUARDS,
        "after the failover"
    );

    // Another client deletes a few held nodes: exactly their guards hear of it.
    let other = connect(&cluster.connect_string(), SESSION);
    for &i in &DELETED {
        other.delete(guards[i].path(), None).unwrap();
    }
    for &i in &DELETED {
        recv(&lost[i], WITHIN, &format!("loss of {}", guards[i].path()));
        assert!(
            !guards[i].is_valid(),
            "{} valid once deleted",
            guards[i].path()
        );
    }
    // The holder's server has delivered every deletion before this reply.
    holder.sync(&root).unwrap();
    let wrongly: Vec<&str> = (0..GUARDS)
        .filter(|i| !DELETED.contains(i))
        .filter(|&i| lost[i].try_recv().is_ok() || !guards[i].is_valid())
        .map(|i| guards[i].path())
        .collect();
    assert!(wrongly.is_empty(), "lost though not deleted: {wrongly:?}");
    let kept = own_nodes(
        (0..GUARDS)
            .filter(|i| !DELETED.contains(i))
            .map(|i| &guards[i]),
    );
    assert_watches(&cluster, second, &holder, &kept, "after the deletions");
    assert_eq!(
        total_watches(&cluster, second),
        kept.len(),
        "after the deletions"
    );

    drop_all_and_expect_nothing_left(guards, &cluster, second, &holder, &root);
    assert_eq!(total_watches(&cluster, second), 0, "after the drop");
}
