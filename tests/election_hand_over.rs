//! `hand_over` to the next candidate and `hand_over_to` a named one, against a real server,
//! for both styles (and two at once on one term): the old term ends first (not valid, its
//! fenced writes refused, the resource's highest token the successor's), the next (or
//! named) candidate leads and the one behind it is told nothing, nothing is done with
//! nobody behind or an unknown id; the candidates between a leader and the named one queue
//! again behind it and never lead; a named candidate that does not answer (its connection
//! stalled, or its process, a child run of this binary, stopped by SIGSTOP) or dies
//! mid-hand-over (killed by SIGKILL): leadership goes to the next; and the leaderless time
//! of both hand-overs beside a plain resign's, printed (`cargo test --all-features --test
//! election_hand_over -- --nocapture leaderless`; never asserted). Also: a term that does
//! not head the queue hands nothing over; a waiting candidate sends nothing; one whose
//! answer is lost (timed out, or gone with its connection) answers again. (A Curator
//! `LeaderLatch` as the next candidate, or between the leader and the named one:
//! `tests/curator.rs`.)

mod common;

use std::time::{Duration, Instant};

use common::election::{ids, wait_ids};
use common::{assert_quiet, connect, recv, shared_cluster, spawn, unique, wait_until, WITHIN};
use crossbeam_channel::Receiver;
use zkguard::testing::FaultProxy;
use zkguard::{
    Candidate, Client, CreateMode, Error, LeaderChange, LeaderElection, LeaderEvent, Op, Prefer,
};

const SESSION: Duration = Duration::from_secs(10);

/// A fenced write of `token` as the resource's data (what a leader's work would write).
fn write_token(token: u64, resource: &str) -> Vec<Op> {
    vec![Op::SetData {
        path: resource.to_string(),
        data: token.to_string().into_bytes(),
        version: None,
    }]
}

fn resource_token(c: &Client, resource: &str) -> u64 {
    let (data, _) = c.get_data(resource).unwrap();
    String::from_utf8(data).unwrap().parse().unwrap()
}

fn elected(rx: &Receiver<LeaderEvent>, who: &str) -> u64 {
    match recv(rx, WITHIN, &format!("{who}'s next event")) {
        LeaderEvent::Elected { token } => token,
        other => panic!("{who}: {other:?}"),
    }
}

/// Candidates with these ids join `path` on `client` one by one, each queued (as `lister`
/// sees it) before the next joins, so they queue in this order behind `before`.
fn join_in_order(
    client: &Client,
    path: &str,
    lister: &LeaderElection,
    before: &[&str],
    ids: &[&str],
) -> Vec<Candidate> {
    let mut queued: Vec<&str> = before.to_vec();
    ids.iter()
        .map(|id| {
            let c = LeaderElection::new(client, path, *id)
                .unwrap()
                .join()
                .unwrap();
            queued.push(id);
            wait_ids(lister, &queued);
            c
        })
        .collect()
}

/// Waits until the queue is `head` in this order, then `rest` in any order (candidates
/// that queued again at the back at about the same time).
fn wait_queue(lister: &LeaderElection, head: &[&str], rest: &[&str]) {
    let mut want_rest: Vec<&str> = rest.to_vec();
    want_rest.sort();
    wait_until(WITHIN, &format!("the queue {head:?} then {rest:?}"), || {
        let mut seen = ids(&lister.participants().unwrap());
        if seen.len() != head.len() + rest.len() || seen[..head.len()] != *head {
            return false;
        }
        let tail = &mut seen[head.len()..];
        tail.sort();
        *tail == *want_rest
    });
}

/// The path where a named hand-over asks the candidate at `node` (its full path): beside
/// the election's directory (`queue::names::ask`).
fn ask_path(path: &str, node: &str) -> String {
    format!("{path}.hand-over.{}", node.rsplit('/').next().unwrap())
}

#[test]
fn a_leadership_hands_over_to_the_next_candidate_after_its_term_has_ended() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over");
    let resource = format!("{path}-resource");
    x.create(&resource, b"0", CreateMode::Persistent).unwrap();
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    // Alone: nothing done, still leading.
    assert_eq!(leadership.hand_over(WITHIN), Ok(None));
    assert!(leadership.is_valid());
    leadership.confirm().unwrap();
    let b = LeaderElection::new(&y, &path, "b").unwrap().join().unwrap();
    wait_ids(&a, &["a", "b"]);
    let c = LeaderElection::new(&y, &path, "c").unwrap().join().unwrap();
    wait_ids(&a, &["a", "b", "c"]);
    let (b_events, c_events) = (b.events(), c.events());
    leadership
        .fenced_multi(&write_token(leadership.token(), &resource))
        .unwrap();

    let s = leadership.hand_over(WITHIN).unwrap().expect("b takes over");
    let b_token = elected(&b_events, "b");
    assert_eq!((s.id.as_str(), s.token), ("b", b_token));
    assert!(s.token > leadership.token());
    // The old term is over: not valid, its fenced write refused and not applied.
    assert!(!leadership.is_valid());
    assert!(matches!(
        leadership.fenced_multi(&write_token(leadership.token(), &resource)),
        Err(Error::NotLeader { .. })
    ));
    b.fenced_multi(&write_token(b_token, &resource)).unwrap();
    assert_eq!(resource_token(&x, &resource), b_token);
    assert!(matches!(
        leadership.hand_over(WITHIN),
        Err(Error::NotLeader { .. })
    ));
    // The one behind the successor was told nothing.
    assert_quiet(&c_events, "c told of the hand-over");
    wait_ids(&a, &["b", "c"]);
}

/// Candidate "a" (background style) leading an election at a new path under `prefix`, on a
/// client of its own (`_x`); `y`, a second client, holds `lister` ("x", taking no part).
struct ALeads {
    _x: Client,
    y: Client,
    path: String,
    lister: LeaderElection,
    a: Candidate,
    a_events: Receiver<LeaderEvent>,
    a_token: u64,
}

fn a_leads(prefix: &str) -> ALeads {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique(prefix);
    let lister = LeaderElection::new(&y, &path, "x").unwrap();
    let a = LeaderElection::new(&x, &path, "a").unwrap().join().unwrap();
    let a_events = a.events();
    let a_token = elected(&a_events, "a");
    ALeads {
        _x: x,
        y,
        path,
        lister,
        a,
        a_events,
        a_token,
    }
}

#[test]
fn a_candidate_hands_over_and_queues_again_at_the_back() {
    let ALeads {
        y,
        path,
        lister,
        a,
        a_events,
        a_token,
        ..
    } = a_leads("hand-over-cand");
    assert_eq!(a.hand_over(WITHIN), Ok(None), "alone");
    assert!(a.is_leader());
    let b = LeaderElection::new(&y, &path, "b").unwrap().join().unwrap();
    wait_ids(&lister, &["a", "b"]);
    let b_events = b.events();
    let s = a.hand_over(WITHIN).unwrap().expect("b takes over");
    assert_eq!(s.id, "b");
    assert_eq!(elected(&b_events, "b"), s.token);
    assert!(s.token > a_token);
    assert_eq!(recv(&a_events, WITHIN, "a's event"), LeaderEvent::Resigned);
    wait_ids(&lister, &["b", "a"]);
    assert!(!a.is_leader());
    assert!(matches!(a.hand_over(WITHIN), Err(Error::NotLeader { .. })));
}

/// The leaderless time of a hand-over to the next candidate, of one named (the next: the
/// ask's answer comes before the term ends, its one `multi` after), and of a plain resign,
/// side by side: from the moment the old term is no longer valid (polled every 100 µs) to
/// the successor's `Elected`. Printed, never asserted (a loaded machine decides it).
#[test]
fn leaderless_time_of_a_hand_over_beside_a_resign_printed() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-time");
    let lister = LeaderElection::new(&x, &path, "x").unwrap();
    let a = LeaderElection::new(&x, &path, "a").unwrap().join().unwrap();
    a.wait_for_leadership(WITHIN).unwrap().expect("a leads");
    let b = LeaderElection::new(&y, &path, "b").unwrap().join().unwrap();
    wait_ids(&lister, &["a", "b"]);
    let (mut leader, mut next) = (&a, &b);
    let rounds = 20;
    let names = ["hand_over", "hand_over_to", "resign"];
    let mut gaps: [Vec<Duration>; 3] = Default::default();
    for round in 0..names.len() * rounds {
        let how = round % names.len();
        let term = leader.term().expect("leads");
        let events = next.events();
        let gap = std::thread::scope(|s| {
            let stepping = s.spawn(|| match how {
                0 => leader.hand_over(WITHIN).map(|s| assert!(s.is_some())),
                1 => leader
                    .hand_over_to(next.election().id(), WITHIN)
                    .map(|s| assert_eq!(s.unwrap().id, next.election().id())),
                _ => leader.resign(),
            });
            while term.is_valid() && !stepping.is_finished() {
                std::thread::sleep(Duration::from_micros(100));
            }
            if term.is_valid() {
                // Returned with the term still on: its failure, said (else no end).
                stepping.join().unwrap().unwrap();
                panic!("{} returned with the term still valid", names[how]);
            }
            let ended = Instant::now();
            loop {
                if let LeaderEvent::Elected { .. } = recv(&events, WITHIN, "the successor") {
                    break;
                }
            }
            let gap = ended.elapsed();
            stepping.join().unwrap().unwrap();
            gap
        });
        gaps[how].push(gap);
        std::mem::swap(&mut leader, &mut next);
        wait_ids(&lister, &[leader.election().id(), next.election().id()]);
    }
    for (name, g) in names.iter().zip(&mut gaps) {
        g.sort();
        let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
        eprintln!(
            "leaderless time, {name}: {} rounds, median {:.2} ms, min {:.2} ms, max {:.2} ms",
            g.len(),
            ms(&g[g.len() / 2]),
            ms(&g[0]),
            ms(&g[g.len() - 1])
        );
    }
}

/// Two hand-overs of one term at once: leadership moves once, to the next candidate; each
/// call says that successor, or that this was not the leader any more; the one behind the
/// successor is not elected.
#[test]
fn two_hand_overs_at_once_move_leadership_once() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-twice");
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let b = LeaderElection::new(&y, &path, "b").unwrap().join().unwrap();
    wait_ids(&a, &["a", "b"]);
    let c = LeaderElection::new(&y, &path, "c").unwrap().join().unwrap();
    wait_ids(&a, &["a", "b", "c"]);
    let (b_events, c_events) = (b.events(), c.events());
    let results: Vec<_> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..2)
            .map(|_| s.spawn(|| leadership.hand_over(WITHIN)))
            .collect();
        calls.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let b_token = elected(&b_events, "b");
    for r in &results {
        match r {
            Ok(Some(s)) => assert_eq!((s.id.as_str(), s.token), ("b", b_token)),
            Err(Error::NotLeader { .. }) => {}
            other => panic!("a hand-over said {other:?}"),
        }
    }
    assert!(results.iter().any(|r| r.is_ok()), "{results:?}");
    assert!(!leadership.is_valid());
    assert_quiet(&c_events, "c elected");
    assert_eq!(b.token(), Some(b_token));
}

/// A named hand-over past two candidates: the old term ends first (not valid, its fenced
/// write refused, the resource's highest token the named one's), the named one leads next
/// (an observer sees no leader between), the two between are never elected and queue again
/// behind it, the one behind it is told nothing.
#[test]
fn a_leadership_hands_over_to_a_named_candidate_and_those_between_queue_again_behind_it() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-to");
    let resource = format!("{path}-resource");
    x.create(&resource, b"0", CreateMode::Persistent).unwrap();
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let queued = join_in_order(&y, &path, &a, &["a"], &["b", "c", "d", "e"]);
    let events: Vec<_> = queued.iter().map(Candidate::events).collect();
    let observer = a.observe().unwrap();
    let leader = |id: &str, token| LeaderChange::Leader {
        id: id.into(),
        token,
    };
    assert_eq!(
        recv(observer.events(), WITHIN, "the observer"),
        leader("a", leadership.token())
    );
    leadership
        .fenced_multi(&write_token(leadership.token(), &resource))
        .unwrap();

    let s = leadership
        .hand_over_to("d", WITHIN)
        .unwrap()
        .expect("d takes over");
    let d_token = elected(&events[2], "d");
    assert_eq!((s.id.as_str(), s.token), ("d", d_token));
    assert!(s.token > leadership.token());
    assert_eq!(
        recv(observer.events(), WITHIN, "the observer"),
        leader("d", d_token),
        "someone led between a and d"
    );
    assert!(!leadership.is_valid());
    assert!(matches!(
        leadership.fenced_multi(&write_token(leadership.token(), &resource)),
        Err(Error::NotLeader { .. })
    ));
    queued[2]
        .fenced_multi(&write_token(d_token, &resource))
        .unwrap();
    assert_eq!(resource_token(&x, &resource), d_token);
    // b and c queued again behind d and e; e stayed where it was.
    wait_queue(&a, &["d", "e"], &["b", "c"]);
    for (rx, who) in [(&events[0], "b"), (&events[1], "c"), (&events[3], "e")] {
        assert_quiet(rx, &format!("{who} told of the hand-over"));
    }
    assert!(matches!(
        leadership.hand_over_to("e", WITHIN),
        Err(Error::NotLeader { .. })
    ));
}

/// `Prefer::Newest`: leadership to the candidate queued last, past those between, which
/// queue again behind it, and to the one behind when it is the only one; with nobody
/// behind, nothing done, at once (nobody asked: the bound, an hour here, not waited).
#[test]
fn a_hand_over_to_the_newest_goes_to_the_candidate_queued_last() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-newest");
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = std::sync::Arc::new(a.lead().unwrap());
    let alone = {
        let leadership = leadership.clone();
        spawn(move || leadership.hand_over_to(Prefer::Newest, Duration::from_secs(3600)))
    };
    assert_eq!(
        recv(&alone, WITHIN, "the hand-over with nobody behind"),
        Ok(None)
    );
    assert!(leadership.is_valid());
    let queued = join_in_order(&y, &path, &a, &["a"], &["b", "c"]);
    let (b_events, c_events) = (queued[0].events(), queued[1].events());
    let s = leadership
        .hand_over_to(Prefer::Newest, WITHIN)
        .unwrap()
        .expect("c takes over");
    assert_eq!(s.id, "c");
    assert_eq!(elected(&c_events, "c"), s.token);
    assert!(!leadership.is_valid());
    wait_ids(&a, &["c", "b"]);
    assert_quiet(&b_events, "b elected");
    // The only one behind is the newest.
    let s = queued[1]
        .hand_over_to(Prefer::Newest, WITHIN)
        .unwrap()
        .expect("b takes over");
    assert_eq!(s.id, "b");
    assert_eq!(elected(&b_events, "b"), s.token);
    wait_ids(&a, &["b", "c"]);
}

/// A candidate hands over to a named one; an unknown id (its own among them) is refused
/// with nothing done.
#[test]
fn a_candidate_hands_over_to_a_named_one_and_an_unknown_id_is_refused() {
    let ALeads {
        y,
        path,
        lister,
        a,
        a_events,
        a_token,
        ..
    } = a_leads("hand-over-to-cand");
    let queued = join_in_order(&y, &path, &lister, &["a"], &["b", "c"]);
    let (b_events, c_events) = (queued[0].events(), queued[1].events());
    for unknown in ["z", "a", ""] {
        match a.hand_over_to(unknown, WITHIN) {
            Err(Error::InvalidArgument { .. }) => {}
            other => panic!("hand_over_to({unknown:?}) said {other:?}"),
        }
    }
    assert!(a.is_leader());
    assert_eq!(a.token(), Some(a_token));
    assert_eq!(ids(&lister.participants().unwrap()), ["a", "b", "c"]);
    assert_quiet(&b_events, "b told of a refused hand-over");

    let s = a.hand_over_to("c", WITHIN).unwrap().expect("c takes over");
    assert_eq!(s.id, "c");
    assert_eq!(elected(&c_events, "c"), s.token);
    assert_eq!(recv(&a_events, WITHIN, "a's event"), LeaderEvent::Resigned);
    wait_queue(&lister, &["c"], &["a", "b"]);
    assert_quiet(&b_events, "b elected");
    assert!(matches!(
        a.hand_over_to("b", WITHIN),
        Err(Error::NotLeader { .. })
    ));
}

/// How candidate "d" (the one named) runs in [`named_behind`].
enum D {
    /// In this process, on a client through `proxy`: stalled, its connection is a path that
    /// lost its way back (requests reach the server, nothing comes back).
    Proxied { proxy: FaultProxy, _d: Candidate },
    /// In a child process ([`child_candidate_d_stands_until_stdin_closes`]): stopped by
    /// SIGSTOP, a frozen process.
    Process(std::process::Child),
}

/// A child left stopped by a failing test would outlive the test binary, and hold its
/// output open (a harness reading it, cargo-mutants, then waits for its timeout): killed
/// (SIGKILL ends a stopped process too) and reaped. After a passing test it has exited.
impl Drop for D {
    fn drop(&mut self) {
        if let D::Process(child) = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const CHILD: &str = "ZKGUARD_HAND_OVER_CHILD";

/// The child's part of the frozen and killed tests: joins the election at
/// `$ZKGUARD_HAND_OVER_CHILD` (`CONNECT|PATH|SESSION_MS`) as "d" and stands until its stdin
/// is closed. Run only when this binary is run again by those tests; an ordinary run of the
/// suite passes through.
#[test]
fn child_candidate_d_stands_until_stdin_closes() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let f: Vec<&str> = spec.split('|').collect();
    let c = connect(f[0], Duration::from_millis(f[2].parse().unwrap()));
    let _d = LeaderElection::new(&c, f[1], "d").unwrap().join().unwrap();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
}

/// Sends `sig` (`STOP`, `CONT`, `KILL`) to `child`.
fn signal(child: &std::process::Child, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig}: {status}");
}

/// An election where "a" leads, "b" is next and "d" (named in the tests) behind it, run as
/// `how` says ("proxied" or "process", its session `d_session`), asking-ready (the server
/// shows its waiter watching its ask path); then made deaf: its connection stalled, or its
/// process stopped.
struct Named {
    x: Client,
    a: LeaderElection,
    leadership: std::sync::Arc<zkguard::Leadership>,
    b_events: Receiver<LeaderEvent>,
    d: D,
    /// Where the leader asks "d".
    ask: String,
    _b: Candidate,
}

fn named_behind(prefix: &str, how: &str, d_session: Duration) -> Named {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique(prefix);
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = std::sync::Arc::new(a.lead().unwrap());
    let b = join_in_order(&y, &path, &a, &["a"], &["b"]).remove(0);
    let d = match how {
        "proxied" => {
            let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
            let t = connect(&proxy.connect_string(), d_session);
            let d = join_in_order(&t, &path, &a, &["a", "b"], &["d"]).remove(0);
            D::Proxied { proxy, _d: d }
        }
        _ => {
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "child_candidate_d_stands_until_stdin_closes",
                    "--test-threads=1",
                ])
                .env(CHILD, format!("{cs}|{path}|{}", d_session.as_millis()))
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            wait_ids(&a, &["a", "b", "d"]);
            D::Process(child)
        }
    };
    let ask = ask_path(&path, &a.participants().unwrap()[2].node);
    wait_until(WITHIN, "d watching its ask path", || {
        common::watches_by_path().contains_key(&ask)
    });
    match &d {
        D::Proxied { proxy, .. } => proxy.stall_server_to_client(),
        D::Process(child) => signal(child, "STOP"),
    }
    Named {
        x,
        a,
        leadership,
        b_events: b.events(),
        d,
        ask,
        _b: b,
    }
}

impl Named {
    /// The hand-over's outcome: "b" took over, "a"'s term is over, the ask taken back.
    fn passed_to_b(&self, handed: zkguard::Result<Option<zkguard::Successor>>) {
        let s = handed.unwrap().expect("b takes over");
        assert_eq!(s.id, "b");
        assert_eq!(elected(&self.b_events, "b"), s.token);
        assert!(!self.leadership.is_valid());
        assert_eq!(self.x.exists(&self.ask).unwrap(), None, "the ask was left");
    }
}

/// The named candidate cannot answer, cut off (its connection stalled one way: a
/// partition) or frozen (its process stopped by SIGSTOP): after the bound, leadership goes
/// to the next candidate, as a resign would give it, and the ask is taken back. The named
/// one stays queued behind it once it runs again.
#[test]
fn a_named_candidate_partitioned_or_frozen_is_passed_over_after_the_bound() {
    for how in ["proxied", "process"] {
        let mut n = named_behind("hand-over-deaf", how, Duration::from_secs(30));
        n.passed_to_b(n.leadership.hand_over_to("d", Duration::from_secs(2)));
        match &mut n.d {
            D::Proxied { proxy, .. } => proxy.heal(),
            D::Process(child) => signal(child, "CONT"),
        }
        wait_ids(&n.a, &["b", "d"]);
        if let D::Process(child) = &mut n.d {
            drop(child.stdin.take());
            assert!(
                child.wait().unwrap().success(),
                "the child candidate failed"
            );
        }
    }
}

/// The named candidate dies mid-hand-over (asked while frozen, then SIGKILLed: its session
/// expires): the leader stops waiting for it at its node's deletion, not at the bound (an
/// hour here), and leadership goes to the next candidate.
#[test]
fn a_named_candidate_killed_mid_hand_over_passes_leadership_to_the_next() {
    let mut n = named_behind("hand-over-killed", "process", Duration::from_secs(4));
    let handing = {
        let leadership = n.leadership.clone();
        spawn(move || leadership.hand_over_to("d", Duration::from_secs(3600)))
    };
    wait_until(WITHIN, "the ask made", || {
        n.x.exists(&n.ask).unwrap().is_some()
    });
    if let D::Process(child) = &mut n.d {
        signal(child, "KILL");
        let _ = child.wait();
    }
    n.passed_to_b(recv(&handing, WITHIN, "the hand-over's end"));
    wait_ids(&n.a, &["b"]);
}

/// An election's waiter keeps a watch on its ask path while it waits, and takes it back
/// when its wait ends without a term (its candidate stopped); elected, its term's guard
/// takes it back when the term ends (not before: nothing is sent on the way to leading).
/// (A watch on a path nobody creates would otherwise stay on the server, and in the
/// client, for the rest of the session: one more per wait.)
#[test]
fn a_waiter_takes_its_ask_watch_back_when_its_wait_ends() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-ask-watch");
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let queued = join_in_order(&y, &path, &a, &["a"], &["b", "c"]);
    let asks: Vec<String> = a.participants().unwrap()[1..]
        .iter()
        .map(|p| ask_path(&path, &p.node))
        .collect();
    let watched = |ask: &str| common::watches_by_path().contains_key(ask);
    for ask in &asks {
        wait_until(WITHIN, &format!("{ask} watched"), || watched(ask));
    }
    queued[0].stop();
    wait_until(WITHIN, "the stopped waiter's ask unwatched", || {
        !watched(&asks[0])
    });
    assert!(watched(&asks[1]), "c's ask watch went with b's");
    let c_events = queued[1].events();
    leadership.resign().unwrap();
    elected(&c_events, "c");
    assert!(
        watched(&asks[1]),
        "c's ask watch taken back before its term ends"
    );
    queued[1].resign().unwrap();
    wait_until(WITHIN, "the ask of a term ended unwatched", || {
        !watched(&asks[1])
    });
}

/// Two named hand-overs of one term at once, to different candidates: leadership moves
/// once, to one of them; each call says that successor, or that this was not the leader
/// any more; nobody else is elected.
#[test]
fn two_named_hand_overs_at_once_move_leadership_once() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-to-twice");
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let queued = join_in_order(&y, &path, &a, &["a"], &["b", "c", "d"]);
    let events: Vec<_> = queued.iter().map(Candidate::events).collect();
    let results: Vec<_> = std::thread::scope(|s| {
        let calls: Vec<_> = ["c", "d"]
            .into_iter()
            .map(|id| {
                let leadership = &leadership;
                s.spawn(move || leadership.hand_over_to(id, WITHIN))
            })
            .collect();
        calls.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let winner = results
        .iter()
        .find_map(|r| r.as_ref().ok().cloned().flatten())
        .unwrap_or_else(|| panic!("no hand-over succeeded: {results:?}"));
    for r in &results {
        match r {
            Ok(Some(s)) => assert_eq!(s, &winner),
            Err(Error::NotLeader { .. }) => {}
            other => panic!("a hand-over said {other:?}"),
        }
    }
    let (won, lost) = match winner.id.as_str() {
        "c" => (1, 2),
        "d" => (2, 1),
        other => panic!("{other} took over"),
    };
    assert_eq!(elected(&events[won], &winner.id), winner.token);
    assert!(!leadership.is_valid());
    assert_quiet(&events[0], "b elected");
    assert_quiet(&events[lost], "the other named candidate elected");
}

/// Another identity puts a node at a waiter's ask path, in a parent that lets everyone
/// create but only that identity delete: the waiter cannot answer (its delete is refused).
/// That ends nothing: it stops answering asks in this wait and leads at its turn, and the
/// other identity's node is left alone. (Without the rule the waiter's `lead()` failed
/// with `NoAuth`.)
#[test]
fn an_ask_the_waiter_may_not_delete_does_not_end_its_wait() {
    let cs = shared_cluster().connect_string();
    let vandal = common::as_user("vandal");
    let parent = common::dir_others_may_not_delete_in(&vandal, "ask-parent");
    let path = format!("{parent}/election");
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let b = LeaderElection::new(&y, &path, "b").unwrap();
    let b_lead = spawn(move || b.lead().map(|l| (l.is_valid(), l)));
    wait_ids(&a, &["a", "b"]);
    let ask = ask_path(&path, &a.participants().unwrap()[1].node);
    wait_until(WITHIN, "b's ask watched", || {
        common::watches_by_path().contains_key(&ask)
    });
    // y is b's alone: its next request is the waiter's answer, the refused delete.
    let before = y.stats().requests;
    vandal
        .create(&ask, b"not a leader's", CreateMode::Persistent)
        .unwrap();
    wait_until(WITHIN, "b's answer sent", || y.stats().requests > before);
    leadership.resign().unwrap();
    let (valid, b_leads) = recv(&b_lead, WITHIN, "b's lead()").expect("b leads");
    assert!(valid, "b's leadership valid when handed out");
    assert_eq!(
        vandal.get_data(&ask).unwrap().0,
        b"not a leader's".to_vec(),
        "the other identity's node left alone"
    );
    b_leads.resign().unwrap();
    vandal.delete(&ask, None).unwrap();
}

/// An election's waiter sends nothing while nothing changes: its ask's watch armed, it
/// sleeps to its watches, answering only an ask that is there, never in a loop of answers
/// and re-arms. (Pings are not requests: `ClientStats::requests`.)
#[test]
fn a_waiting_candidate_sends_nothing_while_nothing_changes() {
    let cs = shared_cluster().connect_string();
    // b's client with a long session: its waiter's slow re-check (a session timeout) is
    // then far outside the quiet window, so any request in it is a wrong one.
    let (x, y) = (connect(&cs, SESSION), connect(&cs, Duration::from_secs(60)));
    let path = unique("hand-over-quiet");
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let b = join_in_order(&y, &path, &a, &["a"], &["b"]).remove(0);
    let ask = ask_path(&path, &a.participants().unwrap()[1].node);
    wait_until(WITHIN, "b watching its ask path", || {
        common::watches_by_path().contains_key(&ask)
    });
    let b_events = b.events();
    let before = y.stats().requests;
    assert_quiet(&b_events, "b told something while a leads");
    assert_eq!(y.stats().requests, before, "b's requests while it waits");
    leadership.resign().unwrap();
    elected(&b_events, "b");
}

/// A named candidate whose answer is lost goes on answering asks. Its delete of the ask
/// timed out (its connection stalled toward the server): not a refusal, only a path cut
/// for a while (taken for a refusal, the error would end its answers for this wait); once
/// healed it watches its ask path again. Its delete lost with its connection: the ask is
/// still there when it arms its watch again, and it answers it then (not only asks it
/// hears of). A named hand-over to it then succeeds.
#[test]
fn a_named_candidate_whose_answer_is_lost_answers_again() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-answer-lost");
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let _b = join_in_order(&y, &path, &a, &["a"], &["b"]).remove(0);
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let t = Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(30))
        .request_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let d = join_in_order(&t, &path, &a, &["a", "b"], &["d"]).remove(0);
    let ask = ask_path(&path, &a.participants().unwrap()[2].node);
    let watched = || common::watches_by_path().contains_key(&ask);
    wait_until(WITHIN, "d watching its ask path", watched);
    proxy.stall_client_to_server();
    let before = t.stats().requests;
    // An ask, as the leader makes it: d hears it; its answer is held back and times out.
    x.create(
        &ask,
        leadership.token().to_string().as_bytes(),
        CreateMode::Ephemeral,
    )
    .unwrap();
    // The delete, then (after its timeout) the next request.
    wait_until(WITHIN, "d's answer and its next request sent", || {
        t.stats().requests >= before + 2
    });
    proxy.heal();
    wait_until(
        WITHIN,
        "the ask answered and d watching its ask path again",
        || x.exists(&ask).unwrap().is_none() && watched(),
    );
    // Again, the answer lost with its connection this time (held back, then the connection
    // closed: it never reaches the server): d finds the ask there when it arms its watch
    // on the next connection, and answers it then.
    proxy.stall_client_to_server();
    let before = t.stats().requests;
    x.create(
        &ask,
        leadership.token().to_string().as_bytes(),
        CreateMode::Ephemeral,
    )
    .unwrap();
    wait_until(WITHIN, "d's answer sent", || t.stats().requests > before);
    proxy.reset();
    proxy.heal();
    wait_until(
        WITHIN,
        "the ask found and answered on the next connection",
        || x.exists(&ask).unwrap().is_none() && watched(),
    );
    let d_events = d.events();
    let s = leadership
        .hand_over_to("d", WITHIN)
        .unwrap()
        .expect("d takes over");
    assert_eq!(s.id, "d");
    assert_eq!(elected(&d_events, "d"), s.token);
}

/// A term whose node no longer heads the queue (a node put ahead of it by hand, with a
/// smaller sequence number) hands nothing over: both hand-overs say `NotLeader` with
/// nothing done, the term still valid and the one behind told nothing.
#[test]
fn a_term_that_does_not_head_the_queue_hands_nothing_over() {
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let path = unique("hand-over-not-head");
    x.create(&path, b"", CreateMode::Persistent).unwrap();
    // A sequence number spent, so that a node can be put ahead of the leader's below.
    let spent = format!("{path}/spent-");
    let spent = x
        .create(&spent, b"", CreateMode::PersistentSequential)
        .unwrap()
        .path;
    x.delete(&spent, None).unwrap();
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let b = join_in_order(&y, &path, &a, &["a"], &["b"]).remove(0);
    let b_events = b.events();
    y.create(
        &format!("{path}/latch-0000000000"),
        b"z",
        CreateMode::Ephemeral,
    )
    .unwrap();
    match leadership.hand_over(WITHIN) {
        Err(Error::NotLeader { .. }) => {}
        other => panic!("hand_over said {other:?}"),
    }
    match leadership.hand_over_to("b", WITHIN) {
        Err(Error::NotLeader { .. }) => {}
        other => panic!("hand_over_to said {other:?}"),
    }
    assert!(leadership.is_valid());
    assert_quiet(&b_events, "b told of a refused hand-over");
}

/// A hand-over whose step down the server refuses (the election's directory lets the
/// leader's identity create its node but not delete it) says why, at once: `NoAuth`, not a
/// wait for a successor that cannot come.
#[test]
fn a_hand_over_whose_step_down_the_server_refuses_says_why() {
    let owner = common::as_user("election-owner");
    let path = common::dir_others_may_not_delete_in(&owner, "hand-over-refused");
    let cs = shared_cluster().connect_string();
    let (x, y) = (connect(&cs, SESSION), connect(&cs, SESSION));
    let a = LeaderElection::new(&x, &path, "a").unwrap();
    let leadership = a.lead().unwrap();
    let b = LeaderElection::new(&y, &path, "b").unwrap().join().unwrap();
    wait_ids(&a, &["a", "b"]);
    // A short bound: only a wrongly swallowed refusal would wait it out.
    match leadership.hand_over(Duration::from_secs(2)) {
        Err(Error::NoAuth { path: p, op }) => assert_eq!((p.as_str(), op), (&*path, "delete")),
        other => panic!("expected NoAuth for the refused step down, got {other:?}"),
    }
    assert!(!leadership.is_valid(), "the term ended before the delete");
    drop((leadership, b));
    let (_x, _y) = (x.close(), y.close());
    wait_until(
        WITHIN,
        "the candidates' nodes gone with their sessions",
        || owner.get_children(&path).unwrap().0.is_empty(),
    );
    owner.delete(&path, None).unwrap();
}
