//! `LeaderElection::observe`, against real servers: observers across resigns and the last
//! candidate leaving, a leader's session expiry and the observer's own, a reconnect after
//! its server is killed, and an unfair election. Every test checks the one promise: the
//! tokens said only grow, and the last thing said is the true leader (the queue's head as
//! `leader()` reads it, on another client). (A Curator `LeaderLatch` observed: in
//! `tests/curator.rs`.)

mod common;

use std::time::{Duration, Instant};

use common::election::wait_ids;
use common::partition::server_of;
use common::{connect, init_log, shared_cluster, unique, wait_until, WITHIN};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{LeaderChange, LeaderElection, LeaderObserver};

/// What one observer has said, checked as it comes: never a token that does not grow,
/// never two `NoLeader`s in a row.
struct Said {
    who: &'static str,
    all: Vec<LeaderChange>,
}

impl Said {
    fn new(who: &'static str) -> Said {
        Said {
            who,
            all: Vec::new(),
        }
    }

    fn push(&mut self, change: LeaderChange) {
        if let LeaderChange::Leader { token, .. } = &change {
            let top = self.all.iter().rev().find_map(|c| match c {
                LeaderChange::Leader { token, .. } => Some(*token),
                _ => None,
            });
            assert!(
                top.is_none_or(|t| *token > t),
                "{}: {change:?} after {:?}",
                self.who,
                self.all
            );
        }
        if change == LeaderChange::NoLeader {
            assert_ne!(
                self.all.last(),
                Some(&LeaderChange::NoLeader),
                "{}: NoLeader twice: {:?}",
                self.who,
                self.all
            );
        }
        self.all.push(change);
    }

    /// Reads `o` until it says `want` (checking everything said on the way).
    fn until(&mut self, o: &LeaderObserver, want: &LeaderChange) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.all.last() != Some(want) {
            let left = deadline.saturating_duration_since(Instant::now());
            match o.events().recv_timeout(left) {
                Ok(c) => self.push(c),
                Err(e) => panic!("{}: no {want:?} ({e}); said {:?}", self.who, self.all),
            }
        }
    }

    /// Nothing more said within a short while (a repeat would be said at once).
    fn quiet(&mut self, o: &LeaderObserver) {
        if let Ok(c) = o.events().recv_timeout(Duration::from_millis(500)) {
            panic!("{}: said {c:?} after {:?}", self.who, self.all);
        }
    }
}

/// An observer of the fair election at `path` on `client`, begun with nobody leading.
fn observing(client: &zkguard::Client, path: &str, who: &'static str) -> (LeaderObserver, Said) {
    let o = LeaderElection::new(client, path, "router")
        .unwrap()
        .observe()
        .unwrap();
    let mut said = Said::new(who);
    said.until(&o, &LeaderChange::NoLeader);
    (o, said)
}

fn leader(id: &str, token: u64) -> LeaderChange {
    LeaderChange::Leader {
        id: id.into(),
        token,
    }
}

#[test]
fn observers_follow_each_resign_and_say_no_leader_when_the_last_candidate_leaves() {
    let cluster = shared_cluster();
    let path = unique("obs-resign");
    let c = connect(&cluster.connect_string(), Duration::from_secs(10));
    let o = connect(&cluster.connect_string(), Duration::from_secs(10));
    let (early, mut said) = observing(&o, &path, "early");

    let a = LeaderElection::new(&c, &path, "a").unwrap().lead().unwrap();
    let a_token = a.token();
    said.until(&early, &leader("a", a_token));
    let lister = LeaderElection::new(&o, &path, "x").unwrap();
    let b = LeaderElection::new(&c, &path, "b").unwrap().join().unwrap();
    wait_ids(&lister, &["a", "b"]);
    let cc = LeaderElection::new(&c, &path, "c").unwrap().join().unwrap();
    wait_ids(&lister, &["a", "b", "c"]);
    said.quiet(&early);
    // One started late says who leads now first.
    let late = LeaderElection::new(&o, &path, "router")
        .unwrap()
        .observe()
        .unwrap();
    let mut late_said = Said::new("late");
    late_said.until(&late, &leader("a", a_token));

    a.resign().unwrap();
    let b_token = b.wait_for_leadership(WITHIN).unwrap().expect("b leads");
    said.until(&early, &leader("b", b_token));
    late_said.until(&late, &leader("b", b_token));
    drop(b); // leaves
    let c_token = cc.wait_for_leadership(WITHIN).unwrap().expect("c leads");
    said.until(&early, &leader("c", c_token));
    late_said.until(&late, &leader("c", c_token));
    drop(cc); // the last candidate leaves
    said.until(&early, &LeaderChange::NoLeader);
    late_said.until(&late, &LeaderChange::NoLeader);
    said.quiet(&early);
    assert_eq!(
        said.all,
        [
            LeaderChange::NoLeader,
            leader("a", a_token),
            leader("b", b_token),
            leader("c", c_token),
            LeaderChange::NoLeader
        ]
    );
}

#[test]
fn an_observer_goes_on_across_a_leaders_session_expiry_and_its_own() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let t = Duration::from_secs(3);
    let (pa, po) = (
        FaultProxy::for_cluster(&cluster).unwrap(),
        FaultProxy::for_cluster(&cluster).unwrap(),
    );
    let a = connect(&pa.connect_string(), t);
    let b = connect(&cluster.connect_string(), t);
    let o = connect(&po.connect_string(), t);
    let path = unique("obs-expire");
    let (observer, mut said) = observing(&o, &path, "observer");
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let a_token = ca.wait_for_leadership(WITHIN).unwrap().expect("a leads");
    said.until(&observer, &leader("a", a_token));
    let lister = LeaderElection::new(&b, &path, "x").unwrap();
    let cb = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    wait_ids(&lister, &["a", "b"]);
    let cc = LeaderElection::new(&b, &path, "c").unwrap().join().unwrap();
    wait_ids(&lister, &["a", "b", "c"]);

    // The leader's session expires: b leads; the observer says so.
    pa.blackhole();
    let b_token = cb
        .wait_for_leadership(Duration::from_secs(60))
        .unwrap()
        .expect("b leads after a's expiry");
    said.until(&observer, &leader("b", b_token));

    // The observer's own session expires; meanwhile b resigns and c leads, then a, back
    // with a new session, queues behind c.
    let o_session = o.session_id();
    po.blackhole();
    wait_until(
        Duration::from_secs(60),
        "the observer's session lost",
        || o.session_id() != o_session,
    );
    cb.resign().unwrap();
    let c_token = cc.wait_for_leadership(WITHIN).unwrap().expect("c leads");
    pa.heal();
    po.heal();
    said.until(&observer, &leader("c", c_token));
    assert_ne!(
        o.session_id(),
        o_session,
        "the observer's session was not lost"
    );
    said.quiet(&observer);
    let truth = lister.leader().unwrap();
    assert_eq!(truth.map(|p| p.id()), Some("c".into()));
    drop(ca);
}

#[test]
fn an_observer_whose_server_is_killed_reconnects_and_says_the_leader_it_missed() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    let t = Duration::from_secs(10);
    let o = connect(&cluster.connect_string(), t);
    let path = unique("obs-kill");
    let (observer, mut said) = observing(&o, &path, "observer");
    let mut server = None;
    wait_until(WITHIN, "the observer connected", || {
        server = server_of(&cluster, &o);
        server.is_some()
    });
    let victim = server.unwrap();
    // The candidates on another server than the one about to be killed.
    let other = cluster.server_connect_string((victim + 1) % 3);
    let c = connect(&other, t);
    let ca = LeaderElection::new(&c, &path, "a").unwrap().join().unwrap();
    let a_token = ca.wait_for_leadership(WITHIN).unwrap().expect("a leads");
    said.until(&observer, &leader("a", a_token));
    let cb = LeaderElection::new(&c, &path, "b").unwrap().join().unwrap();
    wait_ids(&LeaderElection::new(&c, &path, "x").unwrap(), &["a", "b"]);

    // The observer's server dies; a resigns while the observer is cut off (it may or may
    // not have heard before); once reconnected it says b, and nothing older after.
    let session = o.session_id();
    cluster.kill(victim).unwrap();
    ca.resign().unwrap();
    let b_token = cb.wait_for_leadership(WITHIN).unwrap().expect("b leads");
    said.until(&observer, &leader("b", b_token));
    assert_eq!(o.session_id(), session, "a reconnect, not a new session");
    drop(ca);
    drop(cb);
    said.until(&observer, &LeaderChange::NoLeader);
    said.quiet(&observer);
}

#[test]
fn an_unfair_election_is_observed_through_its_one_node() {
    let cluster = shared_cluster();
    let path = unique("obs-unfair");
    let c = connect(&cluster.connect_string(), Duration::from_secs(10));
    let observer = LeaderElection::unfair(&c, &path, "router")
        .unwrap()
        .observe()
        .unwrap();
    let mut said = Said::new("unfair");
    said.until(&observer, &LeaderChange::NoLeader);
    // Its `Debug` says how many changes wait unread: none yet after the first.
    assert_eq!(format!("{observer:?}"), "LeaderObserver { unread: 0 }");
    let a = LeaderElection::unfair(&c, &path, "a")
        .unwrap()
        .lead()
        .unwrap();
    said.until(&observer, &leader("a", a.token()));
    let b = LeaderElection::unfair(&c, &path, "b").unwrap();
    let waiting = common::spawn(move || b.lead().unwrap());
    drop(a);
    let b = common::recv(&waiting, WITHIN, "b leads");
    said.until(&observer, &leader("b", b.token()));
    drop(b);
    said.until(&observer, &LeaderChange::NoLeader);
}
