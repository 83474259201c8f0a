//! The unfair election (one ephemeral node at the path, holding the leader's id) against a
//! real ZooKeeper server: its node, a leader whose node was replaced, and paths that hold
//! something else. The fair election: `tests/election.rs`.
//!
//! One shared standalone server; every test works on a path of its own.

mod common;

use std::time::Duration;

use common::election::{led, spawn_lead};
use common::{
    assert_invalid_path, assert_quiet, base, children, connect, shared_cluster, unique, WITHIN,
};
use zkguard::{CreateMode, Error, LeaderElection};

/// Session timeout for clients whose session is not the point of the test.
const SESSION: Duration = Duration::from_secs(4);

#[test]
fn an_unfair_election_is_one_ephemeral_node_at_the_path_holding_the_leaders_id() {
    let cs = shared_cluster().connect_string();
    // Missing parents are created.
    let path = format!("{}/svc/leader", unique("el-unfair"));
    let a = connect(&cs, SESSION);
    let b = connect(&cs, SESSION);
    let c = connect(&cs, SESSION);
    let o = connect(&cs, SESSION);
    let ea = LeaderElection::unfair(&a, &path, "host-a").unwrap();
    let eb = LeaderElection::unfair(&b, &path, "host-b").unwrap();
    let ec = LeaderElection::unfair(&c, &path, "host-c").unwrap();
    let observer = LeaderElection::unfair(&o, &path, "observer").unwrap();
    assert!(!ea.is_fair());
    assert_eq!(observer.leader().unwrap(), None);
    assert_eq!(observer.participants().unwrap(), vec![]);

    let la = ea.lead().unwrap();
    assert_eq!(la.path(), path, "the node is at the path itself");
    let (data, stat) = o.get_data(&path).unwrap();
    assert!(
        data.starts_with(b"host-a\n"),
        "node data {:?}",
        String::from_utf8_lossy(&data)
    );
    assert_eq!(stat.ephemeral_owner, a.session_id(), "owned by A's session");
    assert_eq!(la.token(), stat.czxid as u64);
    for (who, e) in [("observer", &observer), ("candidate b", &eb)] {
        let leader = e.leader().unwrap().expect("a leader");
        assert_eq!(
            leader.id(),
            "host-a",
            "{who}: the id without the call's value"
        );
        assert_eq!(leader.node, "leader", "{who}");
        assert!(leader.holds, "{who}");
        assert_eq!(e.participants().unwrap(), vec![leader], "{who}");
    }
    assert!(eb.try_lead().unwrap().is_none(), "two leaders");
    assert!(ec.try_lead().unwrap().is_none(), "two leaders");
    assert!(ea.try_lead().unwrap().is_none(), "the leader led twice");
    assert!(eb
        .lead_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_eq!(
        o.exists(&path).unwrap().map(|s| s.czxid),
        Some(stat.czxid),
        "the leader's node was touched"
    );

    // The next leader comes once the node goes.
    let waiting = spawn_lead(&eb);
    assert_quiet(&waiting, "b led while a leads");
    drop(la);
    let lb = led(&waiting, "b");
    assert_eq!(lb.path(), path);
    assert_eq!(observer.leader().unwrap().unwrap().id(), "host-b");
    assert_eq!(
        o.exists(&path).unwrap().unwrap().ephemeral_owner,
        b.session_id()
    );

    lb.resign().unwrap();
    assert_eq!(o.exists(&path).unwrap(), None);

    // A persistent node at the path (here: a fair election's directory) is refused.
    let fair_path = unique("el-unfair-on-fair");
    let fair = LeaderElection::new(&a, &fair_path, "fair").unwrap();
    let fair_leader = fair.lead().unwrap();
    let on_fair = LeaderElection::unfair(&b, &fair_path, "unfair").unwrap();
    assert_invalid_path(
        on_fair.try_lead(),
        &fair_path,
        "unfair try_lead on a fair path",
    );
    assert_invalid_path(
        on_fair.lead_timeout(Duration::from_secs(2)),
        &fair_path,
        "unfair lead_timeout on a fair path",
    );
    assert_invalid_path(on_fair.lead(), &fair_path, "unfair lead on a fair path");
    assert_eq!(
        children(&a, &fair_path),
        vec![base(fair_leader.path())],
        "the fair election was disturbed"
    );
    assert!(fair_leader.is_valid());
    fair_leader.confirm().unwrap();
    drop(fair_leader);
    let plain = unique("el-persistent");
    o.create(&plain, b"config", CreateMode::Persistent).unwrap();
    let on_plain = LeaderElection::unfair(&b, &plain, "unfair").unwrap();
    assert_invalid_path(on_plain.lead(), &plain, "unfair lead on a persistent node");
    assert_eq!(o.get_data(&plain).unwrap().0, b"config");
    o.delete(&plain, None).unwrap();
}

#[test]
fn an_unfair_elections_leader_is_not_a_persistent_node_at_its_path() {
    let cs = shared_cluster().connect_string();
    let path = unique("el-unfair-plain");
    let c = connect(&cs, SESSION);
    c.create(&path, b"hello", CreateMode::Persistent).unwrap();
    let election = LeaderElection::unfair(&c, &path, "a").unwrap();
    let refused = election.try_lead().map(|l| l.is_some());
    assert_invalid_path(refused.clone(), &path, "try_lead on a persistent node");
    // leader() and participants() say what lead says, not that "hello" leads.
    let leader = election.leader();
    assert_invalid_path(leader.clone(), &path, "leader of a persistent node");
    assert_eq!(leader.unwrap_err(), refused.clone().unwrap_err());
    let participants = election.participants();
    assert_invalid_path(participants.clone(), &path, "participants");
    assert_eq!(participants.unwrap_err(), refused.unwrap_err());
    assert_eq!(
        c.get_data(&path).unwrap().0,
        b"hello",
        "the node was touched"
    );
    c.delete(&path, None).unwrap();
    assert_eq!(election.leader().unwrap(), None);
}

/// One round of [`an_unfair_leaders_confirm_says_not_leader_once_its_node_was_replaced`]:
/// what went wrong.
fn replaced_unfair_node_round(cs: &str, watch_first: bool) -> Vec<String> {
    let round = if watch_first {
        "with lost() called before"
    } else {
        "without a watch"
    };
    let path = unique("el-unfair-replaced");
    let b = connect(cs, SESSION);
    let c = connect(cs, SESSION);
    let o = connect(cs, SESSION);
    let lb = LeaderElection::unfair(&b, &path, "host-b")
        .unwrap()
        .lead()
        .unwrap();
    let lost = watch_first.then(|| lb.lost());
    if watch_first {
        // The watch is armed without waiting; a round trip makes sure it is registered.
        b.sync(&path).unwrap();
    }
    // Someone deletes B's node, and C takes over at the same path.
    o.delete(&path, None).unwrap();
    let lc = LeaderElection::unfair(&c, &path, "host-c")
        .unwrap()
        .lead_timeout(WITHIN)
        .unwrap()
        .expect("free once the node is gone");
    let c_czxid = o.exists(&path).unwrap().expect("C's node").czxid;
    assert_eq!(lc.token(), c_czxid as u64);
    assert!(lc.token() > lb.token());
    let mut wrong = Vec::new();
    if let Some(lost) = &lost {
        if lost.recv_timeout(WITHIN).is_err() {
            wrong.push(format!("{round}: lost() did not fire"));
        }
    }
    match lb.confirm() {
        Err(Error::NotLeader { path: p }) if p == path => {}
        other => wrong.push(format!(
            "{round}: confirm of the deposed leader: expected NotLeader, got {other:?} \
             (is_valid: {})",
            lb.is_valid()
        )),
    }
    match lb.resign() {
        Err(Error::NotLeader { path: p }) if p == path => {}
        other => wrong.push(format!(
            "{round}: resign of the deposed leader: expected NotLeader, got {other:?}"
        )),
    }
    match o.exists(&path).unwrap() {
        Some(stat) if stat.czxid == c_czxid && stat.ephemeral_owner == c.session_id() => {}
        other => wrong.push(format!(
            "{round}: the new leader's node after the old one resigned: {other:?}"
        )),
    }
    if let Err(e) = lc.confirm() {
        wrong.push(format!("{round}: confirm of the new leader: {e}"));
    }
    drop(lc);
    wrong
}

#[test]
fn an_unfair_leaders_confirm_says_not_leader_once_its_node_was_replaced() {
    let cs = shared_cluster().connect_string();
    // The unfair node's path is shared by every term, so "a node exists at the path"
    // proves nothing: confirm must tell the new leader's node from its own, whether or not
    // the old leader had a watch on its node when it was deleted.
    let wrong: Vec<String> = [true, false]
        .into_iter()
        .flat_map(|watch_first| replaced_unfair_node_round(&cs, watch_first))
        .collect();
    assert!(
        wrong.is_empty(),
        "a deposed unfair leader:\n{}",
        wrong.join("\n")
    );
}
