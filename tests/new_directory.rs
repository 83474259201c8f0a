//! A new lock's first acquire: the missing directory and our node made in one `multi` (one
//! quorum write), with everything the two separate creates promised: the directory a
//! container with the recipe's ACL, missing parents containers, the co-tenant check of a
//! directory someone else made meanwhile, and nothing another identity can do to a
//! directory made with our node in it. The same for the single-node recipes (the unfair
//! lock and election), whose node is the lock's path itself and whose directory is its
//! parent. Every test runs against a real ZooKeeper server.

mod common;

use std::time::Duration;

use common::{as_user, shared_cluster, unique, wait_until, WITHIN};
use zkguard::testing::FaultProxy;
use zkguard::{
    Acl, BoxedGuard, Client, CreateMode, DynLock, Error, Guard, LeaderElection, Mutex, NodeAcl,
    UnfairMutex,
};

/// An open parent that stands for any directory others may write.
fn open_parent(c: &Client, name: &str) -> String {
    let base = unique(name);
    c.create(&base, b"", CreateMode::Persistent).unwrap();
    base
}

/// The directory our node went in was made by the same transaction as the node (its
/// creation zxid is the node's, the lock's token), with `acl`. (That it is a container the
/// callers see when the server reaps it: a client reads a container's `ephemeralOwner`
/// as 0, as a persistent node's.)
fn assert_made_with(c: &Client, dir: &str, guard: &dyn Guard, acl: &[Acl]) {
    let (got, stat) = c.get_acl(dir).unwrap();
    assert_eq!(
        stat.czxid as u64,
        guard.token(),
        "{dir} and our node {} were made in one transaction",
        guard.path()
    );
    assert_eq!(got, acl, "{dir} has the recipe's ACL");
}

#[test]
fn a_new_locks_directory_comes_with_its_first_node_in_one_write() {
    let alice = as_user("alice");
    let base = open_parent(&alice, "newdir");
    for (name, acl) in [("open", NodeAcl::open()), ("creator", NodeAcl::creator())] {
        let dir = format!("{base}/{name}");
        let lock = Mutex::new(&alice, &dir)
            .unwrap()
            .with_acl(acl.clone())
            .unwrap();
        let before = alice.stats().requests;
        let guard = lock.acquire().unwrap();
        let sent = alice.stats().requests - before;
        let (entries, _) = alice.get_acl(guard.path()).unwrap();
        assert_made_with(&alice, &dir, &guard, &entries);
        if name == "open" {
            // The create that found no directory and its listing, the multi and its
            // listing, the guard's own watch (two creates and a listing more before).
            assert_eq!(sent, 5, "requests of a new lock's first acquire");
        }
        guard.release().unwrap();
        // A container: the server removes it once it is empty.
        wait_until(WITHIN, "the emptied directory reaped", || {
            alice.exists(&dir).unwrap().is_none()
        });
    }
}

#[test]
fn missing_parents_are_containers_and_the_directory_comes_with_the_node() {
    let alice = as_user("alice");
    let base = open_parent(&alice, "newparents");
    let dir = format!("{base}/a/b/lock");
    let guard = Mutex::new(&alice, &dir).unwrap().acquire().unwrap();
    assert_made_with(&alice, &dir, &guard, &Acl::open_unsafe());
    for parent in [format!("{base}/a"), format!("{base}/a/b")] {
        let stat = alice.exists(&parent).unwrap().expect("the parent made");
        assert!((stat.czxid as u64) < guard.token(), "{parent} made before");
    }
    drop(guard);
    // Containers, each reaped once empty (the directory first, then its parents).
    wait_until(WITHIN, "the emptied parents reaped", || {
        alice.exists(&format!("{base}/a")).unwrap().is_none()
    });
}

/// The last request id (`lcxid`) the server answered on `session`'s connection, from `cons`.
fn last_cxid(session: i64) -> Option<i64> {
    let cons = shared_cluster().four_letter(0, "cons").unwrap();
    let sid = format!("sid=0x{:x}", session as u64);
    let line = cons.lines().find(|l| l.contains(&sid))?;
    let hex = line.split("lcxid=0x").nth(1)?;
    let hex: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
    i64::from_str_radix(&hex, 16).ok()
}

/// Alice, logged in, through `proxy` with patient timeouts (a stalled or delayed path must
/// not end her session), and the last request id the server answered her.
fn alice_through(proxy: &FaultProxy) -> (Client, i64) {
    let alice = Client::builder(&proxy.connect_string())
        .auth("digest", b"alice:alice-pw")
        .connect_timeout(WITHIN)
        .session_timeout(Duration::from_secs(30))
        .request_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    alice.exists("/").unwrap();
    let answered = last_cxid(alice.session_id()).expect("Alice's connection in `cons`");
    (alice, answered)
}

/// Alice's take (`take`, her first acquire with a closed ACL, through a proxy) finds no
/// directory at `dir`; Mallory makes it open to all before Alice's multi. The multi fails on
/// the directory (nothing made), Alice's node goes into Mallory's directory by a plain
/// create, and the co-tenant check refuses it and deletes it again.
fn squatted_between(
    mallory: &Client,
    dir: &str,
    take: impl FnOnce(Client) -> zkguard::Result<Option<BoxedGuard>> + Send + 'static,
) {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let (alice, answered) = alice_through(&proxy);
    let session = alice.session_id();
    // Alice's requests reach the server, its replies are held back.
    proxy.stall_server_to_client();
    let taker = {
        let alice = alice.clone();
        std::thread::spawn(move || take(alice))
    };
    // Her first create (the next request id) has been answered: no directory.
    wait_until(WITHIN, "Alice's first create answered", || {
        last_cxid(session).is_some_and(|c| c > answered)
    });
    mallory.create(dir, b"", CreateMode::Persistent).unwrap();
    proxy.heal();
    match taker.join().unwrap() {
        Err(Error::UntrustedDirectory {
            path, untrusted, ..
        }) => {
            assert_eq!(path, dir);
            assert!(untrusted.iter().any(|a| a.starts_with("world:anyone")));
        }
        Err(e) => panic!("expected UntrustedDirectory, got {e}"),
        Ok(held) => panic!(
            "granted in {dir}, which Mallory may delete in: {:?}",
            held.map(|g| g.path().to_string())
        ),
    }
    let (left, _) = mallory.get_children(dir).unwrap();
    assert!(left.is_empty(), "left behind in {dir}: {left:?}");
}

#[test]
fn a_directory_squatted_between_the_failed_create_and_the_multi_is_refused() {
    let mallory = as_user("mallory");
    let dir = format!("{}/lock", open_parent(&mallory, "squatbetween"));
    let lock = dir.clone();
    squatted_between(&mallory, &dir, move |alice| {
        Mutex::new(&alice, &lock)?
            .with_acl(NodeAcl::creator())?
            .acquire_timeout_boxed(WITHIN)
    });
}

#[test]
fn a_directory_made_with_our_node_is_out_of_reach_of_the_open_parents_owner() {
    // Mallory owns the open parent (she may create, delete and administer there). The
    // directory Alice's first acquire makes in it is Alice's: Mallory can neither take her
    // node out, nor the directory, nor open it, nor queue in it.
    let mallory = as_user("mallory");
    let base = open_parent(&mallory, "reach");
    let dir = format!("{base}/lock");
    let alice = as_user("alice");
    let lock = Mutex::new(&alice, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    let guard = lock.acquire().unwrap();
    let (entries, _) = alice.get_acl(&dir).unwrap();
    assert!(entries.iter().all(|a| a.scheme == "digest"), "{entries:?}");
    let refused = |r: zkguard::Result<()>, what: &str| {
        assert!(
            matches!(r, Err(Error::NoAuth { .. }) | Err(Error::NotEmpty { .. })),
            "Mallory could {what}: {r:?}"
        );
    };
    refused(mallory.delete(guard.path(), None), "delete Alice's node");
    refused(mallory.delete(&dir, None), "delete the directory");
    refused(
        mallory.set_acl(&dir, &Acl::open_unsafe(), None).map(drop),
        "open the directory",
    );
    refused(
        mallory
            .create(&format!("{dir}/x"), b"", CreateMode::Persistent)
            .map(drop),
        "create in the directory",
    );
    assert!(guard.is_valid());
    guard.confirm().unwrap();
    // A second run of Alice's queues behind the holder and gets the lock after it.
    let second = as_user("alice");
    let lock2 = Mutex::new(&second, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    assert!(lock2.try_acquire().unwrap().is_none());
    guard.release().unwrap();
    lock2.acquire().unwrap().release().unwrap();
}

/// A single-node recipe (`"lock"`: the unfair lock, `"election"`: the unfair election) at
/// `path`, its node with `acl`.
fn single_node(kind: &str, c: &Client, path: &str, acl: NodeAcl) -> Box<dyn DynLock> {
    match kind {
        "lock" => Box::new(UnfairMutex::new(c, path).unwrap().with_acl(acl).unwrap()),
        _ => Box::new(
            LeaderElection::unfair(c, path, "alice")
                .unwrap()
                .with_acl(acl)
                .unwrap(),
        ),
    }
}

const SINGLE_NODE: [&str; 2] = ["lock", "election"];

#[test]
fn a_new_single_nodes_directory_comes_with_it_in_one_write() {
    let alice = as_user("alice");
    let base = open_parent(&alice, "newsingle");
    for kind in SINGLE_NODE {
        for (name, acl) in [("open", NodeAcl::open()), ("creator", NodeAcl::creator())] {
            let dir = format!("{base}/{kind}-{name}");
            let path = format!("{dir}/node");
            let lock = single_node(kind, &alice, &path, acl);
            let before = alice.stats().requests;
            let guard = lock.acquire_boxed().unwrap();
            let sent = alice.stats().requests - before;
            assert_eq!(guard.path(), path);
            let (entries, _) = alice.get_acl(&path).unwrap();
            assert_made_with(&alice, &dir, &*guard, &entries);
            if name == "open" {
                // The create that found no directory, the multi, the guard's own watch
                // (a create more before).
                assert_eq!(sent, 3, "requests of a new {kind}'s first acquire");
            }
            guard.release_boxed().unwrap();
            wait_until(WITHIN, "the emptied directory reaped", || {
                alice.exists(&dir).unwrap().is_none()
            });
        }
        // In a directory that exists: the create and the guard's own watch, nothing more.
        let path = format!("{base}/{kind}-existing");
        let lock = single_node(kind, &alice, &path, NodeAcl::open());
        let before = alice.stats().requests;
        let guard = lock.acquire_boxed().unwrap();
        assert_eq!(
            alice.stats().requests - before,
            2,
            "requests of a {kind} in an existing directory"
        );
        guard.release_boxed().unwrap();
    }
}

#[test]
fn a_single_nodes_missing_parents_are_containers_and_its_directory_comes_with_it() {
    let alice = as_user("alice");
    let base = open_parent(&alice, "singleparents");
    for kind in SINGLE_NODE {
        let dir = format!("{base}/{kind}/a/b");
        let lock = single_node(kind, &alice, &format!("{dir}/node"), NodeAcl::open());
        let guard = lock.acquire_boxed().unwrap();
        assert_made_with(&alice, &dir, &*guard, &Acl::open_unsafe());
        for parent in [format!("{base}/{kind}"), format!("{base}/{kind}/a")] {
            let stat = alice.exists(&parent).unwrap().expect("the parent made");
            assert!((stat.czxid as u64) < guard.token(), "{parent} made before");
        }
        guard.release_boxed().unwrap();
        wait_until(WITHIN, "the emptied parents reaped", || {
            alice.exists(&format!("{base}/{kind}")).unwrap().is_none()
        });
    }
}

#[test]
fn a_single_nodes_directory_squatted_between_the_failed_create_and_the_multi_is_refused() {
    // As for the queue, with the node's parent.
    let mallory = as_user("mallory");
    let base = open_parent(&mallory, "singlesquat");
    for kind in SINGLE_NODE {
        let dir = format!("{base}/{kind}");
        let path = format!("{dir}/node");
        squatted_between(&mallory, &dir, move |alice| {
            single_node(kind, &alice, &path, NodeAcl::creator()).acquire_timeout_boxed(WITHIN)
        });
    }
}

/// A take whose first write is lost with its connection (`proxy` delaying every byte 2 s:
/// the server applies it well before its reply could arrive; `writes_before`: Alice's
/// requests before the multi) finds the node the multi made and goes on with it, leaving
/// no second node in `dir`.
fn lost_multi_reply(
    dir: &str,
    writes_before: i64,
    take: impl FnOnce(Client) -> zkguard::Result<Option<BoxedGuard>> + Send + 'static,
) {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let (alice, answered) = alice_through(&proxy);
    let session = alice.session_id();
    proxy.delay(Duration::from_secs(2));
    let taker = {
        let alice = alice.clone();
        std::thread::spawn(move || take(alice))
    };
    wait_until(WITHIN, "Alice's multi applied", || {
        last_cxid(session).is_some_and(|c| c > answered + writes_before)
    });
    proxy.reset();
    proxy.heal();
    // (Were the node the multi made not found, a second one would queue behind it, or
    // the single node's race wait for it, in the same session, and wait out `WITHIN`.)
    let guard = taker
        .join()
        .unwrap()
        .expect("no error after the lost reply")
        .expect("acquired after the lost reply");
    assert_eq!(alice.session_id(), session, "the same session throughout");
    let (names, _) = alice.get_children(dir).unwrap();
    assert_eq!(names.len(), 1, "one node: {names:?}");
    assert_eq!(guard.path(), format!("{dir}/{}", names[0]));
    let (_, stat) = alice.get_acl(dir).unwrap();
    assert_eq!(stat.czxid as u64, guard.token(), "the node the multi made");
    assert!(guard.is_valid());
    guard.release_boxed().unwrap();
}

#[test]
fn a_lost_multi_reply_finds_the_node_it_made() {
    // The multi that makes the directory and Alice's node is applied, but its reply is
    // lost with the connection: the acquire finds its node by its uuid (its own session's)
    // and goes on with it. Before the multi: the create that found no directory and its
    // listing.
    let dir = format!("{}/lock", open_parent(&as_user("bob"), "lostmulti"));
    let lock = dir.clone();
    lost_multi_reply(&dir, 2, move |alice| {
        Mutex::new(&alice, &lock)?.acquire_timeout_boxed(WITHIN)
    });
}

#[test]
fn a_single_nodes_lost_multi_reply_finds_the_node_it_made() {
    // The same for the single node, found by reading it back (its data is unique to the
    // call). Before the multi: the create that found no directory.
    let base = open_parent(&as_user("bob"), "singlelost");
    for kind in SINGLE_NODE {
        let dir = format!("{base}/{kind}");
        let path = format!("{dir}/node");
        lost_multi_reply(&dir, 1, move |alice| {
            single_node(kind, &alice, &path, NodeAcl::open()).acquire_timeout_boxed(WITHIN)
        });
    }
}
