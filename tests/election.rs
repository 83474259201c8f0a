//! Leader election against a real ZooKeeper server: Curator `LeaderLatch` layout (interop
//! with the real Curator is in `tests/curator.rs`), handover without extra round trips, one
//! wake-up per change (fair) against the documented herd (unfair), `confirm` for deposed
//! leaders, nothing left behind, bad input, and closing the leader's client. The unfair
//! single-node kind: `tests/election_unfair.rs`; the background `Candidate`:
//! `tests/candidate.rs`.
//!
//! One shared standalone server; every test works on a path of its own.

mod common;

use std::time::{Duration, Instant};

use common::election::{assert_not_leader, ids, led, spawn_lead, wait_ids};
use common::{
    assert_invalid_path, assert_quiet, base, children, connect, recv, shared_cluster, spawn,
    unique, wait_until, watches_by_path, WITHIN,
};
use crossbeam_channel::{Receiver, Sender};
use zkguard::{Client, Error, LeaderElection, LeaderEvent};

/// Session timeout for clients whose session is not the point of the test.
const SESSION: Duration = Duration::from_secs(4);

/// A session id as the server's `wchp` prints it.
fn session_hex(client: &Client) -> String {
    format!("0x{:x}", client.session_id() as u64)
}

/// Waits until the server says `client`'s session watches `path`.
fn wait_watching(client: &Client, path: &str, who: &str) {
    let me = session_hex(client);
    wait_until(WITHIN, &format!("{who} watching {path}"), || {
        watches_by_path()
            .get(path)
            .is_some_and(|sessions| sessions.contains(&me))
    });
}

/// Makes sure every watch notification the server sent `client` because of changes made
/// before this call has been counted: ZooKeeper delivers a notification before the reply
/// to any later request of the same session.
fn flush(client: &Client, path: &str) {
    client.sync(path).unwrap();
    let _ = client.exists(path).unwrap();
}

/// Checks a node name of the fair election: `_c_<36-char uuid>-latch-<10 digits>`.
fn assert_latch_name(name: &str) {
    let rest = name
        .strip_prefix("_c_")
        .unwrap_or_else(|| panic!("{name}: no _c_ prefix"));
    let (uuid_part, seq) = rest
        .split_once("-latch-")
        .unwrap_or_else(|| panic!("{name}: no -latch-"));
    assert_eq!(uuid_part.len(), 36, "{name}: uuid part {uuid_part:?}");
    assert!(uuid::Uuid::parse_str(uuid_part).is_ok(), "{name}: uuid");
    assert!(
        seq.len() == 10 && seq.bytes().all(|c| c.is_ascii_digit()),
        "{name}: sequence {seq:?}"
    );
}

/// A guard-style candidate on a thread of its own: leads, reports its index on `elected`,
/// and resigns when told to on its own channel.
fn spawn_resigning_candidate(
    election: LeaderElection,
    index: usize,
    elected: Sender<usize>,
) -> (Sender<()>, Receiver<()>) {
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
    let done = spawn(move || {
        let l = election.lead().unwrap();
        elected.send(index).unwrap();
        go_rx.recv().unwrap();
        l.resign().unwrap();
    });
    (go_tx, done)
}

// ---------------------------------------------------------------------------------------
// 1. Layout and observers
// ---------------------------------------------------------------------------------------

#[test]
fn fair_election_nodes_follow_curator_leader_latch_and_anyone_can_see_the_queue() {
    let cs = shared_cluster().connect_string();
    let path = unique("el-layout");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let c = connect(&cs, SESSION);
    let o = connect(&cs, SESSION);
    let ea = LeaderElection::new(&a, &path, "host-a").unwrap();
    let eb = LeaderElection::new(&b, &path, "host-b").unwrap();
    let ec = LeaderElection::new(&c, &path, "host-c").unwrap();
    // An observer: an election object on another client that never runs.
    let observer = LeaderElection::new(&o, &path, "observer").unwrap();
    assert!(observer.is_fair());
    assert_eq!(observer.path(), path);
    assert_eq!(observer.id(), "observer");

    // Nobody runs (the path does not even exist yet).
    assert_eq!(observer.participants().unwrap(), vec![]);
    assert_eq!(observer.leader().unwrap(), None);

    let la = ea.lead().unwrap();
    assert!(la.is_valid());
    assert!(
        la.path().starts_with(&format!("{path}/")),
        "leader node {} not under {path}",
        la.path()
    );
    let leader_node = base(la.path());
    assert_latch_name(&leader_node);
    let (data, stat) = o.get_data(la.path()).unwrap();
    assert_eq!(data, b"host-a", "the leader's node data is its id");
    assert_eq!(stat.ephemeral_owner, a.session_id());
    assert_eq!(la.token(), stat.czxid as u64);

    // Two more candidates, queued one after the other.
    let wait_b = spawn_lead(&eb);
    wait_ids(&observer, &["host-a", "host-b"]);
    let wait_c = spawn_lead(&ec);
    wait_ids(&observer, &["host-a", "host-b", "host-c"]);

    for (who, e) in [("observer", &observer), ("candidate b", &eb)] {
        let p = e.participants().unwrap();
        assert_eq!(ids(&p), vec!["host-a", "host-b", "host-c"], "{who}");
        assert_eq!(
            p.iter().map(|x| x.holds).collect::<Vec<_>>(),
            vec![true, false, false],
            "{who}: holds"
        );
        assert_eq!(p[0].node, leader_node, "{who}");
        assert_eq!(p[0].data, b"host-a".to_vec(), "{who}");
        for x in &p {
            assert_latch_name(&x.node);
        }
        let mut names: Vec<String> = p.iter().map(|x| x.node.clone()).collect();
        names.sort();
        assert_eq!(names, children(&o, &path), "{who}: every node listed");
        let leader = e.leader().unwrap().expect("a leader");
        assert_eq!(leader, p[0], "{who}: leader() is the head of the queue");
        assert!(leader.holds);
        assert_eq!(leader.id(), "host-a");
    }
    // Observing made no node.
    assert_eq!(children(&o, &path).len(), 3);

    // The queue moves on in arrival order.
    drop(la);
    let lb = led(&wait_b, "b");
    assert_eq!(observer.leader().unwrap().unwrap().id(), "host-b");
    let p = observer.participants().unwrap();
    assert_eq!(ids(&p), vec!["host-b", "host-c"]);
    assert_eq!(p.iter().map(|x| x.holds).collect::<Vec<_>>(), [true, false]);
    assert_quiet(&wait_c, "c elected while b leads");
    lb.resign().unwrap();
    let lc = led(&wait_c, "c");
    assert_eq!(observer.leader().unwrap().unwrap().id(), "host-c");
    lc.resign().unwrap();

    // Nobody runs any more (the empty directory may or may not have been reaped yet).
    assert_eq!(observer.participants().unwrap(), vec![]);
    assert_eq!(observer.leader().unwrap(), None);
    // A path nobody ever used, fair and unfair.
    let never = unique("el-never");
    let fair = LeaderElection::new(&o, &never, "x").unwrap();
    assert_eq!(fair.participants().unwrap(), vec![]);
    assert_eq!(fair.leader().unwrap(), None);
    let unfair = LeaderElection::unfair(&o, &never, "x").unwrap();
    assert_eq!(unfair.participants().unwrap(), vec![]);
    assert_eq!(unfair.leader().unwrap(), None);
    assert_eq!(o.exists(&never).unwrap(), None, "observing created {never}");
}

// ---------------------------------------------------------------------------------------
// 3. No extra round trip for the successor of a leader
// ---------------------------------------------------------------------------------------

/// `ea` leads; a candidate `who` (on a client of its own, session `long`) queues behind it
/// at `path`, then `eb`: `who`'s election, A's leadership and the two waiting `lead()`s.
fn three_in_line(
    cs: &str,
    long: Duration,
    path: &str,
    ea: &LeaderElection,
    eb: &LeaderElection,
    who: &str,
) -> (
    LeaderElection,
    zkguard::Leadership,
    Receiver<zkguard::Result<zkguard::Leadership>>,
    Receiver<zkguard::Result<zkguard::Leadership>>,
) {
    let client = connect(cs, long);
    let e = LeaderElection::new(&client, path, who).unwrap();
    let la = ea.lead().unwrap();
    let who_waiting = spawn_lead(&e);
    wait_ids(ea, &["a", who]);
    let b_waiting = spawn_lead(eb);
    wait_ids(ea, &["a", who, "b"]);
    (e, la, who_waiting, b_waiting)
}

#[test]
fn a_successor_right_behind_the_leader_takes_over_without_a_round_trip_but_relists_after_a_waiter_left(
) {
    let cs = shared_cluster().connect_string();
    // A session long enough that the waiter's slow re-check tick (one session timeout)
    // cannot fall between the two counter readings.
    let long = Duration::from_secs(10);
    let path = unique("el-rtt");
    let a = connect(&cs, long);
    let b = connect(&cs, long);
    let ea = LeaderElection::new(&a, &path, "a").unwrap();
    let eb = LeaderElection::new(&b, &path, "b").unwrap();

    // B right behind the leader.
    let la = ea.lead().unwrap();
    let waiting = spawn_lead(&eb);
    wait_ids(&ea, &["a", "b"]);
    wait_watching(&b, la.path(), "b");
    let before = b.stats().requests;
    la.resign().unwrap();
    let lb = led(&waiting, "b");
    let spent = b.stats().requests - before;
    // Nothing: no listing, no round trip before leading, and the new leader's guard keeps
    // the watch its waiter armed on its own node.
    assert_eq!(
        spent, 0,
        "B's client sent {spent} requests between the leader's resign and B leading"
    );
    lb.resign().unwrap();

    // Third in line: the leader's resign (the node ahead of B's blocker) leaves B's blocker
    // the last node ahead, which B knows from its listing; so it leads on its blocker's
    // resign, without listing in between.
    let (_y, la, y_waiting, waiting) = three_in_line(&cs, long, &path, &ea, &eb, "y");
    wait_watching(&b, la.path(), "b");
    let before = b.stats().requests;
    la.resign().unwrap();
    let ly = led(&y_waiting, "y");
    assert_quiet(&waiting, "b led while y leads");
    ly.resign().unwrap();
    let lb = led(&waiting, "b");
    let spent = b.stats().requests - before;
    assert_eq!(
        spent, 0,
        "B's client sent {spent} requests between the first resign and B leading"
    );
    lb.resign().unwrap();

    // The contrast: a waiter X between the leader and B gives up.
    let (ex, la, x_waiting, waiting) = three_in_line(&cs, long, &path, &ea, &eb, "x");
    let x_node = format!("{path}/{}", ea.participants().unwrap()[1].node);
    wait_watching(&b, &x_node, "b");
    let before = b.stats().requests;
    ex.canceller().cancel();
    match recv(&x_waiting, WITHIN, "x cancelled") {
        Err(Error::Cancelled { path: p }) => assert_eq!(p, path),
        other => panic!("x: expected Cancelled, got {other:?}"),
    }
    // B lists again and finds the leader ahead: it must not lead yet.
    wait_watching(&b, la.path(), "b after x left");
    assert_quiet(&waiting, "b led while a leads");
    la.resign().unwrap();
    let lb = led(&waiting, "b");
    let spent = b.stats().requests - before;
    assert_eq!(
        spent, 1,
        "B led without listing again (0) after the waiter ahead of it left, or did more"
    );
    lb.resign().unwrap();
    assert_eq!(children(&a, &path), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// 4. One wake-up per change (fair), the herd (unfair)
// ---------------------------------------------------------------------------------------

#[test]
fn a_fair_election_wakes_only_the_next_candidate_per_resign_and_an_unfair_one_wakes_all() {
    let cs = shared_cluster().connect_string();

    // Fair: ten candidates on ten clients, queued in order.
    let path = unique("el-herd");
    let clients: Vec<Client> = (0..10).map(|_| connect(&cs, SESSION)).collect();
    let elections: Vec<LeaderElection> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| LeaderElection::new(c, &path, format!("c{i}")).unwrap())
        .collect();
    let (elected_tx, elected) = crossbeam_channel::unbounded::<usize>();
    let mut candidates = Vec::new();
    for (i, e) in elections.iter().enumerate() {
        candidates.push(spawn_resigning_candidate(e.clone(), i, elected_tx.clone()));
        let want: Vec<String> = (0..=i).map(|k| format!("c{k}")).collect();
        let want: Vec<&str> = want.iter().map(String::as_str).collect();
        wait_ids(&elections[0], &want);
    }
    assert_eq!(recv(&elected, WITHIN, "first leader"), 0);
    // Every waiter watches the node right before its own, the one before that, and its own
    // (the server says so), and only them; the leader watches its own node.
    let queue: Vec<String> = elections[0]
        .participants()
        .unwrap()
        .into_iter()
        .map(|p| format!("{path}/{}", p.node))
        .collect();
    for i in 1..10 {
        wait_watching(&clients[i], &queue[i - 1], &format!("c{i}"));
        if i >= 2 {
            wait_watching(&clients[i], &queue[i - 2], &format!("c{i} (two ahead)"));
        }
    }
    let watches = watches_by_path();
    for (k, node) in queue.iter().enumerate() {
        // The next candidate, and the one after it (which lists again when this node goes).
        let mut want: Vec<String> = (k + 1..(k + 3).min(10))
            .map(|i| session_hex(&clients[i]))
            .collect();
        // Its own candidate: the leader's guard, and each waiter (to tell a deletion of its
        // node by someone else from its turn).
        want.push(session_hex(&clients[k]));
        want.sort();
        let mut got = watches.get(node).cloned().unwrap_or_default();
        got.sort();
        assert_eq!(got, want, "watchers of the node of c{k}");
    }
    for k in 0..9 {
        let before: Vec<u64> = clients.iter().map(|c| c.stats().watch_events).collect();
        candidates[k].0.send(()).unwrap();
        let next = recv(&elected, WITHIN, "next leader");
        assert_eq!(next, k + 1, "not the next in the queue");
        for c in &clients {
            flush(c, &path);
        }
        let deltas: Vec<u64> = clients
            .iter()
            .zip(&before)
            .map(|(c, b)| c.stats().watch_events - b)
            .collect();
        // The resigning leader hears of its own node's deletion (its own-node watch);
        // among the others, two are woken: the next (it leads) and the one after it (it
        // lists again, to know it is next), while there is one.
        let after = usize::from(k + 2 < 10);
        assert_eq!(
            deltas.iter().sum::<u64>() - deltas[k],
            1 + after as u64,
            "notifications per client for resign {k}: {deltas:?}"
        );
        assert!(deltas[k] <= 1, "the resigner: {deltas:?}");
        assert_eq!(
            deltas[k + 1],
            1,
            "the woken one is not the next: {deltas:?}"
        );
        if after == 1 {
            assert_eq!(
                deltas[k + 2],
                1,
                "the other woken one is not the one after the next: {deltas:?}"
            );
        }
        assert_quiet(&elected, "a second leader");
    }
    candidates[9].0.send(()).unwrap();
    for (_, done) in &candidates {
        recv(done, WITHIN, "fair candidate done");
    }
    assert_eq!(children(&clients[0], &path), Vec::<String>::new());

    // Unfair: a leader and five waiters. One resign notifies every waiter: the herd the
    // documentation warns about.
    let upath = unique("el-herd-unfair");
    let lc = connect(&cs, SESSION);
    let leader = LeaderElection::unfair(&lc, &upath, "leader")
        .unwrap()
        .lead()
        .unwrap();
    let waiters = &clients[..5];
    let (elected_tx, elected) = crossbeam_channel::unbounded::<usize>();
    let candidates: Vec<_> = waiters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let e = LeaderElection::unfair(c, &upath, format!("u{i}")).unwrap();
            spawn_resigning_candidate(e, i, elected_tx.clone())
        })
        .collect();
    for (i, c) in waiters.iter().enumerate() {
        wait_watching(c, &upath, &format!("unfair waiter u{i}"));
    }
    assert_quiet(&elected, "an unfair waiter led past the leader");
    let before: Vec<u64> = waiters.iter().map(|c| c.stats().watch_events).collect();
    leader.resign().unwrap();
    let first = recv(&elected, WITHIN, "unfair successor");
    // The losers are watching the winner's node again before they go quiet.
    for (i, c) in waiters.iter().enumerate() {
        if i != first {
            wait_watching(c, &upath, &format!("unfair loser u{i}"));
        }
    }
    for c in waiters {
        flush(c, &upath);
    }
    let deltas: Vec<u64> = waiters
        .iter()
        .zip(&before)
        .map(|(c, b)| c.stats().watch_events - b)
        .collect();
    assert_eq!(
        deltas,
        vec![1; waiters.len()],
        "notifications per unfair waiter for one resign"
    );
    // Let them all lead in turn.
    candidates[first].0.send(()).unwrap();
    for _ in 1..waiters.len() {
        let i = recv(&elected, WITHIN, "next unfair leader");
        candidates[i].0.send(()).unwrap();
    }
    for (_, done) in &candidates {
        recv(done, WITHIN, "unfair candidate done");
    }
    assert_eq!(lc.exists(&upath).unwrap(), None);
}

// ---------------------------------------------------------------------------------------
// 6. confirm() and resign() of a deposed leader
// ---------------------------------------------------------------------------------------

#[test]
fn confirm_and_resign_fail_with_not_leader_for_a_deposed_leader() {
    let cs = shared_cluster().connect_string();
    let path = unique("el-confirm");
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let o = connect(&cs, SESSION);
    let ea = LeaderElection::new(&a, &path, "a").unwrap();
    let eb = LeaderElection::new(&b, &path, "b").unwrap();

    let la = ea.lead().unwrap();
    la.confirm().unwrap();
    let waiting = spawn_lead(&eb);
    wait_ids(&ea, &["a", "b"]);
    // Someone else deletes the leader's node: B takes over.
    o.delete(la.path(), None).unwrap();
    let lb = led(&waiting, "b");
    assert_not_leader(la.confirm(), &path, "confirm after the node was deleted");
    lb.confirm().unwrap();
    assert_not_leader(la.resign(), &path, "resign after the node was deleted");
    assert_eq!(ids(&eb.participants().unwrap()), vec!["b"]);
    lb.confirm().unwrap();

    // The leader's client is closed.
    b.close().into_result().unwrap();
    assert_not_leader(lb.confirm(), &path, "confirm after the client was closed");
    assert!(!lb.is_valid());
    // And the real leader, once there is one again, confirms.
    let la = ea.lead_timeout(WITHIN).unwrap().expect("free after close");
    la.confirm().unwrap();
    la.resign().unwrap();
    assert_eq!(children(&a, &path), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// 7. try / timeout / cancel leave nothing behind
// ---------------------------------------------------------------------------------------

#[test]
fn try_lead_lead_timeout_and_cancel_leave_no_node_and_the_election_still_works() {
    let cs = shared_cluster().connect_string();
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);

    // Fair.
    let path = unique("el-tmc");
    let ea = LeaderElection::new(&a, &path, "a").unwrap();
    let eb = LeaderElection::new(&b, &path, "b").unwrap();
    let la = ea.lead().unwrap();
    let only_leader = vec![base(la.path())];
    assert!(eb.try_lead().unwrap().is_none());
    assert_eq!(children(&a, &path), only_leader, "try_lead left a node");
    // The leader itself cannot lead twice.
    assert!(ea.try_lead().unwrap().is_none());
    assert_eq!(children(&a, &path), only_leader, "try_lead left a node");
    let t0 = Instant::now();
    assert!(eb
        .lead_timeout(Duration::from_millis(500))
        .unwrap()
        .is_none());
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(500),
        "gave up early: {took:?}"
    );
    assert!(took < WITHIN, "gave up late: {took:?}");
    assert_eq!(children(&a, &path), only_leader, "lead_timeout left a node");
    let blocked = spawn_lead(&eb);
    wait_ids(&ea, &["a", "b"]);
    assert_quiet(&blocked, "b led while a leads");
    eb.canceller().cancel();
    match recv(&blocked, WITHIN, "cancelled lead") {
        Err(Error::Cancelled { path: p }) => assert_eq!(p, path),
        other => panic!("expected Cancelled, got {other:?}"),
    }
    assert_eq!(
        children(&a, &path),
        only_leader,
        "a cancelled lead left a node"
    );
    assert!(la.is_valid());
    // The election still works, and the cancel does not stick.
    la.resign().unwrap();
    let lb = eb.lead_timeout(WITHIN).unwrap().expect("free");
    assert_eq!(children(&a, &path), vec![base(lb.path())]);
    assert!(ea.try_lead().unwrap().is_none());
    drop(lb);
    let la = ea.try_lead().unwrap().expect("free after b resigned");
    drop(la);
    assert_eq!(children(&a, &path), Vec::<String>::new());

    // Unfair.
    let upath = unique("el-tmc-unfair");
    let ua = LeaderElection::unfair(&a, &upath, "a").unwrap();
    let ub = LeaderElection::unfair(&b, &upath, "b").unwrap();
    let la = ua.lead().unwrap();
    let czxid = a.exists(&upath).unwrap().unwrap().czxid;
    let untouched = |what: &str| {
        let stat = b.exists(&upath).unwrap().expect("the leader's node");
        assert_eq!(stat.czxid, czxid, "{what} replaced the leader's node");
        assert_eq!(stat.ephemeral_owner, a.session_id(), "{what}");
    };
    assert!(ub.try_lead().unwrap().is_none());
    untouched("try_lead");
    assert!(ub
        .lead_timeout(Duration::from_millis(300))
        .unwrap()
        .is_none());
    untouched("lead_timeout");
    let blocked = spawn_lead(&ub);
    assert_quiet(&blocked, "b led while a leads");
    ub.canceller().cancel();
    match recv(&blocked, WITHIN, "cancelled unfair lead") {
        Err(Error::Cancelled { path: p }) => assert_eq!(p, upath),
        other => panic!("expected Cancelled, got {other:?}"),
    }
    untouched("cancel");
    la.resign().unwrap();
    assert_eq!(a.exists(&upath).unwrap(), None);
    let lb = ub.lead_timeout(WITHIN).unwrap().expect("free");
    lb.resign().unwrap();
    assert_eq!(a.exists(&upath).unwrap(), None);
}

// ---------------------------------------------------------------------------------------
// 8. Bad input
// ---------------------------------------------------------------------------------------

#[test]
fn bad_election_paths_and_oversized_ids_are_refused() {
    let cs = shared_cluster().connect_string();
    let client = connect(&cs, SESSION);
    for bad in ["relative", "/trailing/", "/", "/a//b", ""] {
        assert_invalid_path(LeaderElection::new(&client, bad, "x"), bad, "new");
        assert_invalid_path(LeaderElection::unfair(&client, bad, "x"), bad, "unfair");
    }
    let path = unique("el-big");
    let max = 512 * 1024;
    for (kind, make) in [
        ("new", LeaderElection::new as fn(&Client, &str, String) -> _),
        (
            "unfair",
            LeaderElection::unfair as fn(&Client, &str, String) -> _,
        ),
    ] {
        match make(&client, &path, "x".repeat(max + 1)) {
            Err(Error::InvalidArgument { name, reason }) => {
                assert_eq!(name, "id", "{kind}");
                assert!(reason.contains(&path), "{kind}: {reason}");
            }
            other => panic!("{kind}: expected InvalidArgument, got {other:?}"),
        }
    }
    // Exactly 512 KiB is accepted, and works.
    let big = "y".repeat(max);
    let e = LeaderElection::new(&client, &path, big.clone()).unwrap();
    let l = e.lead().unwrap();
    assert_eq!(e.leader().unwrap().unwrap().id(), big);
    l.resign().unwrap();
    assert_eq!(children(&client, &path), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// 10. Closing the leader's client
// ---------------------------------------------------------------------------------------

#[test]
fn closing_the_leaders_client_reports_lost_before_the_successor_is_elected() {
    let cs = shared_cluster().connect_string();
    // A long session for the leader: a prompt handover cannot be its session expiring.
    let long = Duration::from_secs(30);
    for round in 0..3 {
        for successor_is_candidate in [false, true] {
            let what = format!(
                "round {round}, {} successor",
                if successor_is_candidate {
                    "Candidate"
                } else {
                    "guard-style"
                }
            );
            let path = unique("el-close");
            let a = connect(&cs, long);
            let b = connect(&cs, SESSION);
            let la = LeaderElection::new(&a, &path, "a").unwrap().lead().unwrap();
            let lost = la.lost();
            let lost_seen = la.lost();
            let eb = LeaderElection::new(&b, &path, "b").unwrap();
            // Whether the old leader's lost() had fired when the successor was elected (and
            // the successor's Candidate, kept alive until the end of the round).
            let (successor, keep) = if successor_is_candidate {
                let cb = eb.join().unwrap();
                let events = cb.events();
                let knew = spawn(move || {
                    match events.recv_timeout(WITHIN) {
                        Ok(LeaderEvent::Elected { .. }) => {}
                        other => panic!("successor candidate: {other:?}"),
                    }
                    lost_seen.try_recv().is_ok()
                });
                (knew, Some(cb))
            } else {
                let eb = eb.clone();
                let knew = spawn(move || {
                    let l = eb.lead().unwrap();
                    let knew = lost_seen.try_recv().is_ok();
                    drop(l);
                    knew
                });
                (knew, None)
            };
            wait_ids(&eb, &["a", "b"]);
            assert_quiet(&successor, &format!("{what}: elected while a leads"));
            a.close().into_result().unwrap();
            recv(&lost, WITHIN, &format!("{what}: lost after close"));
            assert!(!la.is_valid(), "{what}");
            let knew = recv(&successor, WITHIN, &format!("{what}: successor elected"));
            assert!(
                knew,
                "{what}: the successor was elected before the old leader's lost() fired"
            );
            drop(keep);
            drop(la);
            wait_until(WITHIN, "every node gone", || children(&b, &path).is_empty());
        }
    }
}
