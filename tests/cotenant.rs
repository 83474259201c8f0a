//! What a co-tenant can still try once the squatted-directory check is in (issue 40), each
//! attack played against a real server by a second identity:
//!
//! - trusting a digest *user name* (`digest:admin:x`): anyone can log in as `admin` with a
//!   password of her own, re-create an empty lock directory as hers, and be trusted;
//! - swapping our node between its create and the read-back that teaches us who we are
//!   (timed by the fault proxy holding the server's replies, so the swap happens exactly
//!   there);
//! - a fenced write whose check passes on a node someone put at our node's path after
//!   deleting ours (timed by the proxy holding our request).
//!
//! Identities use the `digest` scheme, which needs no server configuration.

mod common;

use std::time::Duration;

use common::{as_user, shared_cluster, unique, WITHIN};
use zkguard::testing::FaultProxy;
use zkguard::{Acl, Client, CreateMode, Error, Mutex, NodeAcl, Op, Perms};

/// A client logged in as `user` with `password`, straight to the shared server.
fn login(user: &str, password: &str) -> Client {
    Client::builder(&shared_cluster().connect_string())
        .auth("digest", format!("{user}:{password}").as_bytes())
        .connect_timeout(WITHIN)
        .build()
        .unwrap()
}

/// Alice, logged in as `alice`, through `proxy`; a session long enough to outlast the
/// short stalls the tests make (a stalled client counts its session lost after 2/3 of it).
fn alice_through(proxy: &FaultProxy) -> Client {
    Client::builder(&proxy.connect_string())
        .auth("digest", b"alice:alice-pw")
        .session_timeout(Duration::from_secs(20))
        .connect_timeout(WITHIN)
        .build()
        .unwrap()
}

#[test]
fn a_digest_user_name_is_not_trusted_and_an_impostors_directory_is_refused() {
    // The real administrator, and Mallory logged in as `admin` with her own password.
    let admin = login("admin", "the-real-admin-pw");
    let mallory = login("admin", "mallory-pw");
    let alice = as_user("alice");
    // An empty top-level lock directory (alice's, closed), under the default open root.
    let dir = unique("nightly");
    alice
        .create_with_acl(&dir, b"", CreateMode::Persistent, &Acl::creator_all())
        .unwrap();
    // Mallory deletes it (the root lets her) and re-creates it as `digest:admin:<her hash>`
    // with every right, and Alice's entry (known from any ACL that shows hashes) with all
    // but ADMIN, so that Alice may queue there and is shown every digest entry as USER:x.
    let alice_entry = alice.own_identities("/").unwrap().remove(0);
    mallory.delete(&dir, None).unwrap();
    let mut acl = Acl::creator_all();
    acl.push(Acl::new(
        Perms::READ | Perms::CREATE | Perms::DELETE | Perms::WRITE,
        "digest",
        alice_entry.id.clone(),
    ));
    mallory
        .create_with_acl(&dir, b"", CreateMode::Persistent, &acl)
        .unwrap();
    let hers = mallory.get_acl(&dir).unwrap().0;
    assert!(hers[0].id.starts_with("admin:"), "{hers:?}");

    // Alice trusting the administrator (and herself) by name only, as ZooKeeper shows them
    // to her: refused before anything is sent, saying why and how to give the whole entry.
    let by_name = NodeAcl::creator()
        .trusting("digest", "admin:x")
        .and_then(|acl| acl.trusting("digest", "alice:x"));
    match by_name {
        Err(e) => {
            assert!(
                matches!(e, Error::InvalidArgument { name: "trust", .. }),
                "{e}"
            );
            let said = e.to_string();
            for needed in [
                "not identities",
                "anyone can log in as any user name",
                "digest:USER:BASE64HASH",
                "openssl",
            ] {
                assert!(said.contains(needed), "{needed:?} missing: {said}");
            }
        }
        Ok(acl) => {
            // Accepted: Alice queues in Mallory's directory, Mallory deletes the holder's
            // node, and a second run takes the lock while the first still holds it.
            let lock = Mutex::new(&alice, &dir).unwrap().with_acl(acl.clone());
            let first = lock.unwrap().acquire_timeout(WITHIN);
            let first = first.map(|g| g.map(|g| (g.path().to_string(), g)));
            if let Ok(Some((node, _))) = &first {
                mallory.delete(node, None).unwrap();
            }
            let second = as_user("alice");
            let again = Mutex::new(&second, &dir)
                .unwrap()
                .with_acl(acl)
                .unwrap()
                .acquire_timeout(WITHIN);
            panic!(
                "digest:admin:x trusted: first run {:?}, second run {:?} (two holders)",
                first.map(|g| g.map(|(n, g)| (n, g.is_valid()))),
                again.map(|g| g.is_some())
            );
        }
    }

    // Trusting the administrator's whole entry: Mallory's directory is not the admin's.
    let real = admin.own_identities("/").unwrap();
    assert_eq!(real.len(), 1, "{real:?}");
    assert_ne!(
        real[0].id, hers[0].id,
        "a password of her own, a hash of her own"
    );
    let trusting = NodeAcl::creator()
        .trusting(&real[0].scheme, &real[0].id)
        .unwrap();
    let lock = Mutex::new(&alice, &dir)
        .unwrap()
        .with_acl(trusting)
        .unwrap();
    for run in ["first run", "second run"] {
        match lock.acquire_timeout(WITHIN) {
            Err(Error::UntrustedDirectory {
                path, untrusted, ..
            }) => {
                assert_eq!(path, dir, "{run}");
                assert!(
                    untrusted.iter().any(|a| a.starts_with("digest:admin:")),
                    "{run}: {untrusted:?}"
                );
            }
            Err(e) => panic!("{run}: expected UntrustedDirectory, got {e}"),
            Ok(held) => {
                // Were it granted: Mallory deletes the holder's node, and a second run
                // takes the lock while the first still believes it holds.
                let first = held.map(|g| g.path().to_string());
                panic!("{run}: queued in Mallory's directory ({first:?})");
            }
        }
        // Alice never queued there: nothing for Mallory to delete, no second holder.
        assert!(mallory.get_children(&dir).unwrap().0.is_empty(), "{run}");
    }
}

/// What [`swapped`] did: the open directory, the path of Alice's node that Mallory took,
/// and whether Mallory's node is still there.
struct Swap {
    dir: String,
    node: String,
    kept: bool,
}

impl Swap {
    /// `taken` must be the refusal of the swapped node, naming the directory and the node,
    /// and Mallory's node must have been left alone (it was never Alice's to delete).
    fn assert_refused<T: std::fmt::Debug>(&self, taken: zkguard::Result<T>) {
        match taken {
            Err(e @ Error::NotOurNode { .. }) => {
                let Error::NotOurNode { path, node } = &e else {
                    unreachable!()
                };
                assert_eq!((path, node), (&self.dir, &self.node));
                let said = e.to_string();
                assert!(said.contains(&self.dir) && said.contains("nothing was learned"));
            }
            other => panic!("expected NotOurNode, got {other:?}"),
        }
        assert!(
            self.kept,
            "Mallory's node was deleted: it was never Alice's"
        );
    }
}

/// Runs `take` as Alice (through a fault proxy) on a directory Mallory made open to all,
/// while Mallory swaps the node Alice's request makes there for one of her own: the
/// server's replies to Alice are held back from before her request until the swap is done,
/// so Alice reads back Mallory's node.
fn swapped<T: Send>(prefix: &str, take: impl FnOnce(&Client, &str) -> T + Send) -> (T, Swap) {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let alice = alice_through(&proxy);
    let mallory = as_user("mallory");
    let dir = unique(prefix);
    mallory.create(&dir, b"", CreateMode::Persistent).unwrap();
    let (_, _, appeared) = mallory.get_children_w(&dir).unwrap();
    let swapped = std::thread::scope(|s| {
        proxy.stall_server_to_client();
        let (alice, at) = (&alice, dir.as_str());
        let taking = s.spawn(move || take(alice, at));
        // Alice's create reached the server (her request went out; its reply is held).
        common::next_watch(&appeared);
        let (names, _) = mallory.get_children(&dir).unwrap();
        assert_eq!(names.len(), 1, "Alice's node alone: {names:?}");
        let node = format!("{dir}/{}", names[0]);
        mallory.delete(&node, None).unwrap();
        // Hers (`digest:mallory:<hash>`), and anyone may read it and administer it, so
        // that Alice is shown its hash as she is shown her own node's.
        let mut acl = Acl::creator_all();
        acl.push(Acl::new(Perms::READ | Perms::ADMIN, "world", "anyone"));
        mallory
            .create_with_acl(&node, b"", CreateMode::Ephemeral, &acl)
            .unwrap();
        proxy.heal();
        let taken = taking.join().unwrap();
        let kept = mallory
            .exists(&node)
            .unwrap()
            .is_some_and(|stat| stat.ephemeral_owner == mallory.session_id());
        (taken, node, kept)
    });
    let (taken, node, kept) = swapped;
    (taken, Swap { dir, node, kept })
}

#[test]
fn a_node_swapped_before_the_read_back_teaches_nothing_and_is_refused() {
    let ((taken, later), swap) = swapped("swap", |alice, dir| {
        let lock = Mutex::new(alice, dir)
            .unwrap()
            .with_acl(NodeAcl::creator())
            .unwrap();
        let taken = lock.acquire_timeout(WITHIN).map(|g| g.is_some());
        // Learned nothing: a directory of Alice's own, closed to others, is hers (had she
        // learned Mallory's identity as hers, her own entry would be a stranger's).
        let own = unique("alice-own");
        alice
            .create_with_acl(&own, b"", CreateMode::Persistent, &Acl::creator_all())
            .unwrap();
        let later = Mutex::new(alice, &own)
            .unwrap()
            .with_acl(NodeAcl::creator())
            .unwrap()
            .acquire_timeout(WITHIN)
            .map(|g| g.is_some());
        (taken, later)
    });
    swap.assert_refused(taken);
    assert_eq!(later, Ok(true), "Alice's own directory after the swap");
}

#[test]
fn own_identities_refuses_a_node_swapped_before_the_read_back() {
    let ((learned, again), swap) = swapped("swap-id", |alice, dir| {
        (alice.own_identities(dir), alice.own_identities(dir))
    });
    swap.assert_refused(learned);
    // Unswapped, the same call learns Alice's own entry (with her hash), and leaves no node.
    let ours = again.unwrap();
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(ours[0].id.starts_with("alice:") && ours[0].id.len() == "alice:".len() + 28);
    // Nothing of Alice's is left (Mallory's node went with her session).
    let left = as_user("mallory").get_children(&swap.dir).unwrap().0;
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_fenced_write_whose_node_was_replaced_before_it_applied_is_lock_lost() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let alice = alice_through(&proxy);
    let mallory = as_user("mallory");
    let dir = unique("fenced");
    let data = format!("{dir}-data");
    mallory.create(&data, b"", CreateMode::Persistent).unwrap();
    // The open ACL: anyone may delete and create in the lock's directory. Persistent, so
    // that the server does not reap it while Mallory swaps its only child.
    mallory.create(&dir, b"", CreateMode::Persistent).unwrap();
    let lock = Mutex::new(&alice, &dir).unwrap();
    let held = lock.acquire().unwrap();
    let write = |what: &str| {
        [Op::SetData {
            path: data.clone(),
            data: what.as_bytes().to_vec(),
            version: None,
        }]
    };
    held.fenced_multi(&write("while held")).unwrap();
    let node = held.path().to_string();
    let outcome = std::thread::scope(|s| {
        // Alice's request is held back on its way to the server...
        proxy.stall_client_to_server();
        let sent = alice.stats().requests;
        let writing = s.spawn(|| held.fenced_multi(&write("after the loss")));
        common::wait_until(WITHIN, "the fenced write sent", || {
            alice.stats().requests > sent
        });
        // ...while Mallory deletes Alice's node (Alice hears of it at once: that direction
        // flows) and puts a node of hers at its path, which the write's check will find.
        mallory.delete(&node, None).unwrap();
        mallory.create(&node, b"", CreateMode::Persistent).unwrap();
        proxy.heal();
        writing.join().unwrap()
    });
    // The server applied it (its check passed on Mallory's node)...
    assert_eq!(mallory.get_data(&data).unwrap().0, b"after the loss");
    // ...but the lock was gone by the reply: never an `Ok`.
    match outcome {
        Err(Error::LockLost { path }) => assert_eq!(path, node),
        other => panic!("expected LockLost, got {other:?}"),
    }
    assert!(!held.is_valid());
    mallory.delete(&node, None).unwrap();
}

/// Another identity's nodes named like the directory marker, in an open lock directory:
/// the exact name (`zkguard-directory`) is left out (neither a contender nor foreign), but
/// a node with the server's sequence number after that name is a contender like any other,
/// not hidden: a lock behind it waits, and it is listed as the holder. (Were it skipped as
/// the marker, the lock would be granted beside it: two holders.)
#[test]
fn a_sequential_node_named_like_the_marker_is_a_contender_not_skipped() {
    let dir = unique("marker-like");
    let mallory = as_user("mallory");
    mallory.create(&dir, b"", CreateMode::Persistent).unwrap();
    let marker = format!("{dir}/{}", zkguard::DIRECTORY_MARKER);
    mallory
        .create(&marker, b"", CreateMode::Persistent)
        .unwrap();
    let theirs = mallory
        .create(&marker, b"mallory", CreateMode::EphemeralSequential)
        .unwrap()
        .path;
    assert!(theirs.starts_with(&marker) && theirs != marker, "{theirs}");

    let alice = as_user("alice");
    let lock = Mutex::new(&alice, &dir).unwrap();
    assert!(
        lock.try_acquire().unwrap().is_none(),
        "granted beside {theirs}"
    );
    let holders: Vec<_> = lock
        .participants()
        .unwrap()
        .into_iter()
        .filter(|p| p.holds)
        .map(|p| p.node)
        .collect();
    assert_eq!(holders, [theirs.rsplit('/').next().unwrap()]);

    mallory.delete(&theirs, None).unwrap();
    let guard = lock.acquire().unwrap();
    assert!(guard.is_valid());
}
