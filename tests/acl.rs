//! ACLs on the nodes the recipes create, attacked by other clients, and fenced writes.
//!
//! Every test runs against a real ZooKeeper server. Identities use the `digest` scheme
//! (`addauth`), which needs no server configuration.

mod common;

use std::time::Duration;

use common::{as_user, connect, recv, shared_cluster, spawn, unique, wait_until, WITHIN};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{
    Client, CreateMode, Error, LeaderElection, MultiLock, Mutex, NodeAcl, Op, OpResult, Semaphore,
    UnfairMutex,
};

fn anon() -> Client {
    connect(&shared_cluster().connect_string(), Duration::from_secs(10))
}

/// Asserts `r` is a refusal by an ACL of `path` for `op`.
fn assert_no_auth<T: std::fmt::Debug>(r: zkguard::Result<T>, path: &str, op: &str, what: &str) {
    match r {
        Err(Error::NoAuth { path: p, op: o }) => {
            assert_eq!((p.as_str(), o), (path, op), "{what}");
        }
        other => panic!("{what}: expected NoAuth by {path} for {op}, got {other:?}"),
    }
}

/// What an outsider tries against a held node `node` in directory `dir` (whose parent the
/// recipe created too): delete the node, write to it, create a child in the directory,
/// delete the directory. Every attempt must be refused.
fn attack(outsider: &Client, who: &str, node: &str, dir: &str) {
    let parent = &dir[..dir.rfind('/').unwrap()];
    assert_no_auth(
        outsider.delete(node, None),
        dir,
        "delete",
        &format!("{who} deletes the held node {node}"),
    );
    assert_no_auth(
        outsider.set_data(node, b"vandal", None),
        node,
        "set_data",
        &format!("{who} writes to the held node {node}"),
    );
    assert_no_auth(
        outsider.create(
            &format!("{dir}/_c_x-lock-"),
            b"",
            CreateMode::EphemeralSequential,
        ),
        dir,
        "create",
        &format!("{who} creates a child in {dir}"),
    );
    assert_no_auth(
        outsider.delete(dir, None),
        parent,
        "delete",
        &format!("{who} deletes the directory {dir}"),
    );
}

/// The presets under attack, and whether outsiders may read.
fn protected() -> [(NodeAcl, bool); 2] {
    [(NodeAcl::creator(), false), (NodeAcl::creator_read(), true)]
}

#[test]
fn a_creator_acl_mutex_refuses_every_outsider_and_its_holder_keeps_it() {
    let alice = as_user("alice");
    for (acl, readable) in protected() {
        let dir = format!("{}/lock", unique("acl-mx"));
        let lock = Mutex::new(&alice, &dir)
            .unwrap()
            .with_acl(acl.clone())
            .unwrap();
        let guard = lock.acquire().unwrap();
        for (who, outsider) in [("bob", as_user("bob")), ("anonymous", anon())] {
            attack(&outsider, who, guard.path(), &dir);
            // Its acquire fails at once, naming the directory; it never waits.
            let theirs = Mutex::new(&outsider, &dir).unwrap();
            let tried = spawn(move || theirs.acquire().map(|g| g.path().to_string()));
            assert_no_auth(
                recv(&tried, WITHIN, "an outsider's acquire"),
                &dir,
                "create",
                &format!("{who} acquires ({acl})"),
            );
            let seen = Mutex::new(&outsider, &dir).unwrap().participants();
            if readable {
                let seen = seen.unwrap();
                assert_eq!(seen.len(), 1, "{who} lists the holder ({acl}): {seen:?}");
                assert!(seen[0].holds && guard.path().ends_with(&seen[0].node));
            } else {
                assert_no_auth(seen, &dir, "get_children", &format!("{who} lists ({acl})"));
            }
        }
        assert!(guard.is_valid(), "{acl}: the holder is still valid");
        guard.confirm().unwrap();
        assert_eq!(
            lock.participants().unwrap().len(),
            1,
            "{acl}: nobody else queued"
        );
    }
}

#[test]
fn a_second_process_with_the_same_identity_shares_a_creator_lock() {
    let dir = format!("{}/lock", unique("acl-share"));
    let (a1, a2) = (as_user("alice"), as_user("alice"));
    let first = Mutex::new(&a1, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    let second = Mutex::new(&a2, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    let held = first.acquire().unwrap();
    assert!(second.try_acquire().unwrap().is_none(), "two holders");
    let waiting = spawn(move || second.acquire().map(|g| g.token()));
    common::assert_quiet(&waiting, "the second alice acquired while the first holds");
    let token = held.token();
    drop(held);
    let next = recv(&waiting, WITHIN, "the second alice's acquire").unwrap();
    assert!(next > token);
}

#[test]
fn a_creator_acl_semaphore_refuses_every_outsider() {
    let alice = as_user("alice");
    for (acl, readable) in protected() {
        let path = format!("{}/pool", unique("acl-sem"));
        let sem = Semaphore::new(&alice, &path, 2)
            .unwrap()
            .with_acl(acl.clone())
            .unwrap();
        let permit = sem.acquire().unwrap();
        let leases = format!("{path}/leases");
        for (who, outsider) in [("bob", as_user("bob")), ("anonymous", anon())] {
            attack(&outsider, who, permit.path(), &leases);
            // The recorded count cannot be changed either.
            assert_no_auth(
                outsider.set_data(&path, b"100", None),
                &path,
                "set_data",
                &format!("{who} rewrites the count"),
            );
            let theirs = Semaphore::new(&outsider, &path, 2);
            if readable {
                // It may read the count, but not queue.
                let theirs = theirs.unwrap();
                let tried = spawn(move || theirs.acquire().map(|p| p.path().to_string()));
                // Refused by the internal lock's directory, or, if the server removed that
                // empty container meanwhile, by the semaphore's node when re-creating it.
                match recv(&tried, WITHIN, "an outsider's acquire") {
                    Err(Error::NoAuth {
                        path: p,
                        op: "create",
                    }) if p == path || p == format!("{path}/locks") => {}
                    other => panic!("{who} acquires ({acl}): {other:?}"),
                }
            } else {
                assert_no_auth(
                    theirs,
                    &path,
                    "get_children",
                    &format!("{who} opens ({acl})"),
                );
            }
        }
        assert!(permit.is_valid());
        permit.confirm().unwrap();
    }
}

#[test]
fn a_creator_acl_election_refuses_every_outsider_and_creator_read_shows_the_leader() {
    let alice = as_user("alice");
    for (acl, readable) in protected() {
        let dir = format!("{}/election", unique("acl-el"));
        let election = LeaderElection::new(&alice, &dir, "alice-1")
            .unwrap()
            .with_acl(acl.clone())
            .unwrap();
        let leadership = election.lead().unwrap();
        for (who, outsider) in [("bob", as_user("bob")), ("anonymous", anon())] {
            attack(&outsider, who, leadership.path(), &dir);
            let theirs = LeaderElection::new(&outsider, &dir, who).unwrap();
            assert_no_auth(theirs.try_lead(), &dir, "create", &format!("{who} runs"));
            if readable {
                let leader = theirs.leader().unwrap().expect("a leader");
                assert_eq!(leader.data, b"alice-1");
                assert_eq!(theirs.participants().unwrap().len(), 1);
            } else {
                assert_no_auth(theirs.leader(), &dir, "get_children", who);
            }
        }
        assert!(leadership.is_valid());
        leadership.confirm().unwrap();
    }
}

#[test]
fn a_creator_acl_unfair_lock_cannot_be_deleted_or_taken_by_an_outsider() {
    let alice = as_user("alice");
    let dir = unique("acl-unfair");
    let path = format!("{dir}/u");
    let lock = UnfairMutex::new(&alice, &path)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    let guard = lock.acquire().unwrap();
    let bob = as_user("bob");
    assert_no_auth(bob.delete(&path, None), &dir, "delete", "bob deletes it");
    assert_no_auth(
        bob.set_data(&path, b"x", None),
        &path,
        "set_data",
        "bob writes",
    );
    let theirs = UnfairMutex::new(&bob, &path).unwrap();
    assert_no_auth(theirs.try_acquire(), &dir, "create", "bob's try");
    assert!(guard.is_valid());
    guard.confirm().unwrap();
}

#[test]
fn a_creator_acl_without_credentials_is_refused_before_anything_is_created() {
    let c = anon();
    let dir = unique("acl-anon");
    let path = format!("{dir}/lock");
    for acl in [NodeAcl::creator(), NodeAcl::creator_read()] {
        let e = Mutex::new(&c, &path)
            .unwrap()
            .with_acl(acl.clone())
            .unwrap_err();
        assert!(
            matches!(
                &e,
                Error::InvalidArgument {
                    name: "node_acl",
                    ..
                }
            ) && e.to_string().contains(&path),
            "{e}"
        );
        assert!(LeaderElection::unfair(&c, &path, "x")
            .unwrap()
            .with_acl(acl.clone())
            .is_err());
        assert!(Semaphore::new(&c, &path, 1)
            .unwrap()
            .with_acl(acl.clone())
            .is_err());
        let built = Client::builder(&shared_cluster().connect_string())
            .node_acl(acl)
            .build();
        assert!(
            matches!(
                built,
                Err(Error::InvalidArgument {
                    name: "node_acl",
                    ..
                })
            ),
            "{built:?}"
        );
    }
    assert_eq!(c.exists(&dir).unwrap(), None, "something was created");
    // The client default applies to every recipe; an open override is allowed.
    let alice = Client::builder(&shared_cluster().connect_string())
        .auth("digest", b"alice:alice-pw")
        .node_acl(NodeAcl::creator())
        .build()
        .unwrap();
    assert_eq!(alice.node_acl(), &NodeAcl::creator());
    let held = Mutex::new(&alice, &path).unwrap().acquire().unwrap();
    assert_no_auth(c.delete(held.path(), None), &path, "delete", "the default");
    drop(held);
    let open_path = format!("{}/open", unique("acl-open"));
    let open = Mutex::new(&alice, &open_path)
        .unwrap()
        .with_acl(NodeAcl::open())
        .unwrap();
    let g = open.acquire().unwrap();
    c.set_data(g.path(), b"anyone may", None).unwrap();
}

#[test]
fn an_existing_open_directory_is_refused_for_a_creator_lock() {
    // The directory exists with the open ACL: a creator-ACL'd node in it could be deleted by
    // anyone (DELETE is checked on the parent), so the lock refuses to queue there, naming
    // the directory, and leaves nothing. (tests/tenancy.rs attacks every recipe so.)
    let anyone = anon();
    let dir = unique("acl-existing");
    anyone.create(&dir, b"", CreateMode::Persistent).unwrap();
    let alice = as_user("alice");
    let lock = Mutex::new(&alice, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    match lock.acquire() {
        Err(Error::UntrustedDirectory {
            path, untrusted, ..
        }) => {
            assert_eq!(path, dir);
            assert_eq!(untrusted, ["world:anyone cdrwa"]);
        }
        other => panic!("expected UntrustedDirectory, got {other:?}"),
    }
    assert!(anyone.get_children(&dir).unwrap().0.is_empty());
}

// ------------------------------------------------------------------------------- fenced writes

#[test]
fn a_fenced_write_applies_while_held_and_is_all_or_nothing() {
    let c = anon();
    let target = unique("fence-target");
    c.create(&target, b"v0", CreateMode::Persistent).unwrap();
    let lock = Mutex::new(&c, &format!("{}/lock", unique("fence"))).unwrap();
    let guard = lock.acquire().unwrap();
    let made = format!("{target}-made");
    let results = guard
        .fenced_multi(&[
            Op::SetData {
                path: target.clone(),
                data: b"v1".to_vec(),
                version: None,
            },
            Op::Create {
                path: made.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
        ])
        .unwrap();
    assert_eq!(results.len(), 2, "the check is not among the results");
    assert!(matches!(&results[1], OpResult::Create { path, .. } if *path == made));
    assert_eq!(c.get_data(&target).unwrap().0, b"v1");
    // The failing op is named by its index in the caller's list; nothing is applied.
    let e = guard
        .fenced_multi(&[
            Op::SetData {
                path: target.clone(),
                data: b"v2".to_vec(),
                version: None,
            },
            Op::Create {
                path: made.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
        ])
        .unwrap_err();
    assert!(matches!(e, Error::Multi { index: 1, .. }), "{e:?}");
    assert_eq!(c.get_data(&target).unwrap().0, b"v1");
    assert!(guard.is_valid());
}

fn set(target: &str, data: &[u8]) -> Op {
    Op::SetData {
        path: target.to_string(),
        data: data.to_vec(),
        version: None,
    }
}

#[test]
fn a_fenced_write_of_a_holder_whose_node_was_deleted_is_refused() {
    let c = anon();
    let target = unique("fence-del");
    c.create(&target, b"before", CreateMode::Persistent)
        .unwrap();
    let dir = format!("{}/lock", unique("fence-del"));
    let guard = Mutex::new(&c, &dir).unwrap().acquire().unwrap();
    let lost = guard.lost();
    anon().delete(guard.path(), None).unwrap();
    let e = guard.fenced_multi(&[set(&target, b"after")]).unwrap_err();
    assert_eq!(
        e,
        Error::LockLost {
            path: guard.path().to_string()
        }
    );
    recv(&lost, WITHIN, "lost");
    assert_eq!(c.get_data(&target).unwrap().0, b"before");
    // An election's leader is told it is not the leader.
    let el = LeaderElection::new(&c, &format!("{dir}-el"), "a").unwrap();
    let leadership = el.lead().unwrap();
    anon().delete(leadership.path(), None).unwrap();
    let e = leadership
        .fenced_multi(&[set(&target, b"after")])
        .unwrap_err();
    assert!(matches!(e, Error::NotLeader { .. }), "{e:?}");
    assert_eq!(c.get_data(&target).unwrap().0, b"before");
}

/// The server itself refuses: the holder has not heard of the deletion (the way back from
/// the server is stalled) when it sends the write, so only the check inside the multi can
/// stop it. A plain write sent right after it on the same session shows when the server
/// has processed both.
#[test]
fn the_server_refuses_a_fenced_write_of_a_holder_that_has_not_heard_its_node_is_gone() {
    let cluster = shared_cluster();
    let proxy = FaultProxy::for_cluster(cluster).unwrap();
    let holder = common::partition::stallable(&proxy);
    let other = anon();
    let target = unique("fence-dark");
    let after = format!("{target}-after");
    other
        .create(&target, b"before", CreateMode::Persistent)
        .unwrap();
    let guard = Mutex::new(&holder, &format!("{}/lock", unique("fence-dark")))
        .unwrap()
        .acquire()
        .unwrap();
    let lost = guard.lost();
    proxy.stall_server_to_client();
    other.delete(guard.path(), None).unwrap();
    let (_, watch) = other.exists_w(&after).unwrap();
    // The holder does not know: no notification reached it.
    assert!(lost.try_recv().is_err(), "the holder heard of the deletion");
    let fenced = guard.fenced_multi(&[set(&target, b"after")]);
    assert!(matches!(fenced, Err(Error::Timeout { .. })), "{fenced:?}");
    let plain = holder.create(&after, b"", CreateMode::Persistent);
    assert!(plain.is_err(), "its reply is stalled too");
    recv(&watch, WITHIN, "the plain write behind the fenced one");
    assert!(lost.try_recv().is_err(), "the holder heard of the deletion");
    assert_eq!(other.get_data(&target).unwrap().0, b"before", "applied");
    proxy.heal();
}

#[test]
fn a_fenced_write_of_a_holder_whose_session_expired_is_refused() {
    let cluster = TestCluster::start(1).unwrap();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let holder = connect(&proxy.connect_string(), Duration::from_secs(4));
    let other = connect(&cluster.connect_string(), Duration::from_secs(10));
    let target = unique("fence-exp");
    other
        .create(&target, b"before", CreateMode::Persistent)
        .unwrap();
    let guard = Mutex::new(&holder, &format!("{}/lock", unique("fence-exp")))
        .unwrap()
        .acquire()
        .unwrap();
    let node = guard.path().to_string();
    let lost = guard.lost();
    proxy.blackhole();
    recv(&lost, WITHIN, "the loss of the session");
    // The server expires the session and deletes the node.
    wait_until(WITHIN, "the expired holder's node deleted", || {
        other.exists(&node).unwrap().is_none()
    });
    proxy.heal();
    let e = guard.fenced_multi(&[set(&target, b"after")]).unwrap_err();
    assert_eq!(e, Error::LockLost { path: node.clone() });
    // Also once the client has a new session: the write never goes out on it.
    wait_until(WITHIN, "a new session", || {
        holder.state() == zkguard::SessionState::Connected
    });
    let e = guard.fenced_multi(&[set(&target, b"after")]).unwrap_err();
    assert_eq!(e, Error::LockLost { path: node });
    assert_eq!(other.get_data(&target).unwrap().0, b"before");
}

fn assert_not_fenceable(r: zkguard::Result<Vec<OpResult>>) {
    let e = r.unwrap_err();
    assert!(
        matches!(
            &e,
            Error::InvalidArgument {
                name: "fenced write",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn fenced_writes_need_a_sequential_node_and_one_session() {
    let c = anon();
    let target = unique("fence-unfair");
    c.create(&target, b"", CreateMode::Persistent).unwrap();
    let u = UnfairMutex::new(&c, &format!("{target}-u")).unwrap();
    let g = u.acquire().unwrap();
    assert_not_fenceable(g.fenced_multi(&[set(&target, b"x")]));
    drop(g);
    // A multi-lock checks every part: one deleted part refuses the write.
    let (a, b) = (format!("{target}-a"), format!("{target}-b"));
    let multi = MultiLock::new(&c, &[&a, &b]).unwrap();
    let held = multi.acquire().unwrap();
    held.fenced_multi(&[set(&target, b"both")]).unwrap();
    let part_b = held.guards()[1].path().to_string();
    anon().delete(&part_b, None).unwrap();
    let e = held.fenced_multi(&[set(&target, b"one")]).unwrap_err();
    assert_eq!(e, Error::LockLost { path: part_b });
    assert_eq!(c.get_data(&target).unwrap().0, b"both");
    // Parts held by two clients cannot share one transaction.
    let d = anon();
    let two = MultiLock::of(Mutex::new(&c, &format!("{target}-c")).unwrap())
        .and(Mutex::new(&d, &format!("{target}-d")).unwrap());
    let held = two.acquire().unwrap();
    assert_not_fenceable(held.fenced_multi(&[set(&target, b"x")]));
}

#[test]
fn an_existing_directory_under_a_parent_others_may_not_create_in_is_used() {
    // /p lets only alice create; /p/q, made by alice, is open. Bob's lock below /p/q walks
    // the path creating what is missing: /p/q exists, and the server's refusal to create it
    // again (the ACL is checked before existence) must not stop him.
    let alice = as_user("alice");
    let p = unique("acl-walk");
    alice
        .create_with_acl(
            &p,
            b"",
            CreateMode::Persistent,
            NodeAcl::creator_read().entries(),
        )
        .unwrap();
    alice
        .create(&format!("{p}/q"), b"", CreateMode::Persistent)
        .unwrap();
    let bob = as_user("bob");
    let lock = Mutex::new(&bob, &format!("{p}/q/lock")).unwrap();
    let guard = lock.acquire().unwrap();
    assert!(guard.is_valid());
    let unfair = UnfairMutex::new(&bob, &format!("{p}/q/u/one")).unwrap();
    let held = unfair.acquire().unwrap();
    assert!(held.is_valid());
}

#[test]
fn a_fenced_create_gets_the_lock_s_acl_or_the_one_given() {
    let alice = as_user("alice");
    let dir = format!("{}/lock", unique("fence-acl"));
    let lock = Mutex::new(&alice, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    let guard = lock.acquire().unwrap();
    let (made, given) = (unique("fenced-made"), unique("fenced-given"));
    guard
        .fenced_multi(&[
            Op::Create {
                path: made.clone(),
                data: b"x".to_vec(),
                mode: CreateMode::Persistent,
            },
            Op::CreateWithAcl {
                path: given.clone(),
                data: b"y".to_vec(),
                mode: CreateMode::Persistent,
                acl: zkguard::Acl::read_unsafe(),
            },
        ])
        .unwrap();
    // The lock's creator ACL: only alice; bob may not even read it.
    let (acl, _) = alice.get_acl(&made).unwrap();
    assert!(
        acl.len() == 1 && acl[0].scheme == "digest" && acl[0].id.starts_with("alice:"),
        "{acl:?}"
    );
    let bob = as_user("bob");
    assert_no_auth(bob.get_data(&made), &made, "get_data", "bob reads");
    assert_no_auth(
        bob.set_data(&made, b"v", None),
        &made,
        "set_data",
        "bob writes",
    );
    // The ACL given: everyone reads, nobody writes.
    assert_eq!(
        alice.get_acl(&given).unwrap().0,
        zkguard::Acl::read_unsafe()
    );
    assert_eq!(bob.get_data(&given).unwrap().0, b"y");
}
