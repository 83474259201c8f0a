//! Co-tenants of a shared ensemble attack what *they* created, not only what we did: a
//! directory squatted before us (or re-created after our empty container went) with an open
//! ACL, an open parent of an unfair lock, a persistent node parked in a queue. A recipe whose
//! ACL keeps others out must refuse to queue where others may delete its node.
//!
//! Identities use the `digest` scheme (`addauth`), which needs no server configuration;
//! every test runs against a real ZooKeeper server.

mod common;

use std::time::Duration;

use common::{as_user, connect, shared_cluster, unique, WITHIN};
use zkguard::{
    Client, CreateMode, Error, Guard, LeaderElection, MultiLock, Mutex, NodeAcl, RwLock, Semaphore,
    UnfairMutex,
};

/// The recipes that queue in a directory, and the directories a squatter takes for each.
#[derive(Clone, Copy, Debug)]
enum Recipe {
    Mutex,
    Read,
    Write,
    /// The semaphore's leases directory is squatted.
    Leases,
    /// The semaphore's internal lock's directory is squatted.
    SemaphoreLock,
    Election,
    /// A multi-lock whose second part's directory is squatted.
    Multi,
}

const ALL: [Recipe; 7] = [
    Recipe::Mutex,
    Recipe::Read,
    Recipe::Write,
    Recipe::Leases,
    Recipe::SemaphoreLock,
    Recipe::Election,
    Recipe::Multi,
];

impl Recipe {
    /// Takes the recipe at `path` as `c` with `acl`, waiting up to `within`.
    fn take(
        self,
        c: &Client,
        path: &str,
        acl: &NodeAcl,
        within: Duration,
    ) -> zkguard::Result<Option<Box<dyn Guard>>> {
        fn boxed<G: Guard + 'static>(g: Option<G>) -> Option<Box<dyn Guard>> {
            g.map(|g| Box::new(g) as Box<dyn Guard>)
        }
        Ok(match self {
            Recipe::Mutex => boxed(
                Mutex::new(c, path)?
                    .with_acl(acl.clone())?
                    .acquire_timeout(within)?,
            ),
            Recipe::Read | Recipe::Write => {
                let rw = RwLock::new(c, path)?.with_acl(acl.clone())?;
                match self {
                    Recipe::Read => boxed(rw.read_lock().acquire_timeout(within)?),
                    _ => boxed(rw.write_lock().acquire_timeout(within)?),
                }
            }
            Recipe::Leases | Recipe::SemaphoreLock => boxed(
                Semaphore::new(c, path, 1)?
                    .with_acl(acl.clone())?
                    .acquire_timeout(within)?,
            ),
            Recipe::Multi => {
                let part = |p: &str| Mutex::new(c, p)?.with_acl(acl.clone());
                let own = format!("{path}-own");
                boxed(
                    MultiLock::of(part(&own)?)
                        .and(part(path)?)
                        .acquire_timeout(within)?,
                )
            }
            Recipe::Election => boxed(
                LeaderElection::new(c, path, "alice")?
                    .with_acl(acl.clone())?
                    .lead_timeout(within)?,
            ),
        })
    }

    /// The directory the squatter takes.
    fn squatted(self, path: &str) -> String {
        match self {
            Recipe::Leases => format!("{path}/leases"),
            Recipe::SemaphoreLock => format!("{path}/locks"),
            _ => path.to_string(),
        }
    }
}

/// Alice takes `recipe` at `path` (in a directory Mallory made open to all) while another
/// run of hers may be queued: the take must be refused, naming the directory and the open
/// entry, and leave nothing behind. Were it granted, Mallory deletes the holder's node and a
/// second run of Alice's takes the lock while the first still holds it: the two-holder
/// sequence the refusal exists to prevent, asserted here so that the test fails loudly.
fn assert_refused(recipe: Recipe, path: &str, first: &Client, mallory: &Client) {
    let squatted = recipe.squatted(path);
    let second = as_user("alice");
    let acl = NodeAcl::creator();
    match recipe.take(first, path, &acl, WITHIN) {
        Err(Error::UntrustedDirectory {
            path: dir,
            acl: whole,
            untrusted,
        }) => {
            assert_eq!(dir, squatted, "{recipe:?}: the squatted directory is named");
            assert!(
                untrusted.iter().any(|a| a.starts_with("world:anyone")),
                "{recipe:?}: {untrusted:?}"
            );
            assert!(whole.len() >= untrusted.len(), "{recipe:?}");
        }
        Err(e) => panic!("{recipe:?}: expected UntrustedDirectory, got {e}"),
        Ok(None) => panic!("{recipe:?}: neither refused nor granted within {WITHIN:?}"),
        Ok(Some(held)) => {
            mallory.delete(held.path(), None).ok();
            let again = recipe.take(&second, path, &acl, Duration::from_secs(5));
            let both = matches!(&again, Ok(Some(_)));
            panic!(
                "{recipe:?}: granted in {squatted}, which Mallory may delete in; after \
                 Mallory deleted the holder's node, a second run {} (first still believes \
                 it holds: {})",
                if both { "took it too" } else { "did not" },
                held.is_valid()
            );
        }
    }
    // Nothing of Alice's is left in the squatted directory (Mallory may list it).
    let (left, _) = mallory.get_children(&squatted).unwrap();
    assert!(
        left.is_empty(),
        "{recipe:?}: left behind in {squatted}: {left:?}"
    );
    // The refusal is the error of every later try as well: the attack never gets a holder.
    assert!(matches!(
        recipe.take(&second, path, &acl, WITHIN),
        Err(Error::UntrustedDirectory { .. })
    ));
}

/// Mallory creates `dir` (and what is missing above it) with the open ACL; the semaphore's
/// count node gets the permit count the recipe asks for.
fn squat(mallory: &Client, recipe: Recipe, path: &str) {
    let squatted = recipe.squatted(path);
    if squatted != path && mallory.exists(path).unwrap().is_none() {
        mallory.create(path, b"1", CreateMode::Persistent).unwrap();
    }
    mallory
        .create(&squatted, b"", CreateMode::Persistent)
        .unwrap();
}

/// An open parent that stands for any directory others may write (a default ensemble's `/`,
/// or a shared `/locks` made open long ago).
fn open_parent(mallory: &Client) -> String {
    let base = unique("squat");
    mallory.create(&base, b"", CreateMode::Persistent).unwrap();
    base
}

#[test]
fn a_directory_squatted_before_first_use_is_refused_by_every_recipe() {
    let mallory = as_user("mallory");
    let base = open_parent(&mallory);
    for recipe in ALL {
        let path = format!("{base}/{recipe:?}");
        squat(&mallory, recipe, &path);
        assert_refused(recipe, &path, &as_user("alice"), &mallory);
    }
}

#[test]
fn a_directory_squatted_after_ours_went_away_is_refused_by_every_recipe() {
    let mallory = as_user("mallory");
    let base = open_parent(&mallory);
    let alice = as_user("alice");
    for recipe in ALL {
        let path = format!("{base}/{recipe:?}");
        // A first run makes the directory creator-only, holds, and lets go.
        if matches!(recipe, Recipe::Leases | Recipe::SemaphoreLock) {
            // The semaphore's count node must be Mallory's for the squat to be possible
            // (under Alice's own creator-only count node nobody else may create).
            mallory.create(&path, b"1", CreateMode::Persistent).unwrap();
        }
        let held = recipe
            .take(&alice, &path, &NodeAcl::creator(), WITHIN)
            .unwrap()
            .unwrap();
        let squatted = recipe.squatted(&path);
        assert!(
            !alice
                .get_acl(&squatted)
                .unwrap()
                .0
                .iter()
                .any(|a| a.scheme == "world"),
            "{recipe:?}: the first run's directory is closed"
        );
        drop(held);
        // The emptied container goes: the server reaps it (the harness checks containers
        // every 100 ms). (Mallory deleting it while empty would do the same, but races the
        // reaper: ZooKeeper's container manager deletes a node at a path it saw as an empty
        // container even if it was re-created persistent meanwhile.)
        // Alice looks: from ZooKeeper 3.9.2 (ZOOKEEPER-2590) `exists` needs READ on the
        // node, which her creator-only directory refuses Mallory.
        common::wait_until(WITHIN, "the emptied directory reaped", || {
            alice.exists(&squatted).unwrap().is_none()
        });
        squat(&mallory, recipe, &path);
        // The same client: it judged the first directory trusted, and must not take the
        // new one for it.
        assert_refused(recipe, &path, &alice, &mallory);
    }
}

#[test]
fn a_directory_opened_after_it_was_judged_is_refused() {
    // Alice's own directory, judged trusted at her first acquire, later opened to all (by
    // her or an administrator: anyone with ADMIN on it): her next acquire is refused.
    let alice = as_user("alice");
    let dir = format!("{}/lock", unique("opened"));
    // Persistent, so that the server does not reap it between the acquires.
    alice.ensure_path(&dir[..dir.rfind('/').unwrap()]).unwrap();
    alice
        .create_with_acl(
            &dir,
            b"",
            CreateMode::Persistent,
            &zkguard::Acl::creator_all(),
        )
        .unwrap();
    let lock = Mutex::new(&alice, &dir)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    drop(lock.acquire().unwrap());
    let before = alice.stats().requests;
    drop(lock.acquire().unwrap());
    // Judged before and unchanged: create, list and the guard's own watch, nothing else.
    assert_eq!(
        alice.stats().requests - before,
        4,
        "requests of a second acquire and its release"
    );
    let (_, stat) = alice.get_acl(&dir).unwrap();
    alice
        .set_acl(&dir, &zkguard::Acl::open_unsafe(), Some(stat.aversion))
        .unwrap();
    match lock.acquire() {
        Err(Error::UntrustedDirectory { path, .. }) => assert_eq!(path, dir),
        other => panic!("expected UntrustedDirectory, got {:?}", other.map(|_| ())),
    }
    assert!(alice.get_children(&dir).unwrap().0.is_empty());
}

/// The ACL entry the server stores for `user`'s digest login (read back from a node made
/// with the creator's ACL).
fn digest(user: &str) -> zkguard::Acl {
    let probe = unique("whoami");
    let c = as_user(user);
    c.create_with_acl(
        &probe,
        b"",
        CreateMode::Ephemeral,
        &zkguard::Acl::creator_all(),
    )
    .unwrap();
    c.get_acl(&probe).unwrap().0.remove(0)
}

/// The directory `dir` made by `admin` for the service `service` too: both with every
/// right, nobody else anything.
fn prepared(admin: &Client, dir: &str, service: &zkguard::Acl) {
    let mut acl = zkguard::Acl::creator_all();
    acl.push(service.clone());
    admin
        .create_with_acl(dir, b"", CreateMode::Persistent, &acl)
        .unwrap();
}

#[test]
fn a_directory_prepared_for_several_identities_is_used_when_they_are_trusted() {
    // An administrator made the directory for the service (alice) and an operator (ops),
    // both with every right, nobody else anything.
    let (alice, ops) = (as_user("alice"), as_user("ops"));
    let dir = unique("prepared");
    let (alice_id, ops_id) = (digest("alice"), digest("ops"));
    prepared(&ops, &dir, &alice_id);
    // Untrusted by default: ops may delete alice's node.
    let e = Recipe::Mutex
        .take(&alice, &dir, &NodeAcl::creator(), WITHIN)
        .err()
        .unwrap();
    match &e {
        Error::UntrustedDirectory { untrusted, .. } => {
            assert_eq!(untrusted, &[ops_id.to_string()], "only ops is untrusted")
        }
        other => panic!("expected UntrustedDirectory, got {other}"),
    }
    assert!(e.to_string().contains(&dir), "{e}");
    // Trusted by name: used, and outsiders still cannot touch it.
    let trusting = NodeAcl::creator()
        .trusting(&ops_id.scheme, &ops_id.id)
        .unwrap();
    let held = Recipe::Mutex
        .take(&alice, &dir, &trusting, WITHIN)
        .unwrap()
        .unwrap();
    let bob = as_user("bob");
    assert!(matches!(
        bob.delete(held.path(), None),
        Err(Error::NoAuth { .. })
    ));
    held.confirm().unwrap();
    drop(held);
    // Alice without ADMIN there: the server shows her every digest entry as USER:x, so
    // nothing can be told apart, and the refusal says why.
    let hidden = unique("prepared-hidden");
    let acl = vec![
        ops_id.clone(),
        zkguard::Acl::new(
            zkguard::Perms::READ | zkguard::Perms::CREATE | zkguard::Perms::DELETE,
            "digest",
            alice_id.id.clone(),
        ),
    ];
    ops.create_with_acl(&hidden, b"", CreateMode::Persistent, &acl)
        .unwrap();
    match Recipe::Mutex.take(&alice, &hidden, &trusting, WITHIN) {
        Err(e @ Error::UntrustedDirectory { .. }) => {
            assert!(e.to_string().contains("ADMIN"), "{e}")
        }
        other => panic!(
            "expected UntrustedDirectory, got {:?}",
            other.map(|g| g.is_some())
        ),
    }
    assert!(ops.get_children(&hidden).unwrap().0.is_empty());
}

#[test]
fn a_creator_unfair_lock_or_election_refuses_an_open_parent() {
    let mallory = as_user("mallory");
    let alice = as_user("alice");
    let base = open_parent(&mallory);
    // Under `/` (open on a default ensemble) and under an open directory.
    let top = unique("unfair-top");
    for path in [top.clone(), format!("{base}/u")] {
        let parent = match path.rfind('/') {
            Some(0) => "/".to_string(),
            Some(i) => path[..i].to_string(),
            None => unreachable!(),
        };
        let lock = UnfairMutex::new(&alice, &path)
            .unwrap()
            .with_acl(NodeAcl::creator())
            .unwrap();
        match lock.try_acquire() {
            Err(Error::UntrustedDirectory { path: p, .. }) => assert_eq!(p, parent),
            other => panic!("{path}: expected UntrustedDirectory, got {other:?}"),
        }
        assert!(alice.exists(&path).unwrap().is_none(), "{path} left behind");
        let el = LeaderElection::unfair(&alice, &path, "alice")
            .unwrap()
            .with_acl(NodeAcl::creator_read())
            .unwrap();
        assert!(matches!(
            el.try_lead(),
            Err(Error::UntrustedDirectory { .. })
        ));
        // Held by another identity there: a contender is refused too, without waiting.
        mallory.create(&path, b"m", CreateMode::Ephemeral).unwrap();
        assert!(matches!(
            lock.acquire_timeout(WITHIN),
            Err(Error::UntrustedDirectory { .. })
        ));
        mallory.delete(&path, None).unwrap();
    }
    // A parent of its own, made by the recipe: held, and safe from Mallory.
    let own = format!("{}/u", unique("unfair-own"));
    let lock = UnfairMutex::new(&alice, &own)
        .unwrap()
        .with_acl(NodeAcl::creator())
        .unwrap();
    let held = lock.try_acquire().unwrap().unwrap();
    assert!(matches!(
        mallory.delete(held.path(), None),
        Err(Error::NoAuth { .. })
    ));
}

#[test]
fn an_open_lock_still_queues_in_an_open_directory() {
    // The check is for ACLs that keep others out; the open ACL promises nothing of the sort.
    let mallory = as_user("mallory");
    let base = open_parent(&mallory);
    let c = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    for recipe in ALL {
        let path = format!("{base}/{recipe:?}");
        squat(&mallory, recipe, &path);
        let held = recipe
            .take(&c, &path, &NodeAcl::open(), WITHIN)
            .unwrap()
            .unwrap();
        drop(held); // releases
    }
}

#[test]
fn a_persistent_node_ahead_in_the_queue_is_named_not_waited_on_forever() {
    let c = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    let dir = unique("parked");
    c.create(&dir, b"", CreateMode::Persistent).unwrap();
    // A node with a lock node's name that no session owns: it never goes by itself.
    let parked = c
        .create(
            &format!("{dir}/lock-"),
            b"",
            CreateMode::PersistentSequential,
        )
        .unwrap()
        .path;
    let lock = Mutex::new(&c, &dir).unwrap();
    match lock.acquire_timeout(WITHIN) {
        Err(Error::ForeignNode { path, node }) => {
            assert_eq!(path, dir);
            assert_eq!(format!("{dir}/{node}"), parked);
        }
        other => panic!("expected ForeignNode for {parked}, got {other:?}"),
    }
    let (left, _) = c.get_children(&dir).unwrap();
    assert_eq!(left.len(), 1, "only the parked node is left: {left:?}");
    // Once it is gone the lock works.
    c.delete(&parked, None).unwrap();
    let held = lock.try_acquire().unwrap().unwrap();
    held.confirm().unwrap();
}

#[test]
fn a_listing_over_the_reply_limit_is_an_error_not_a_reconnect_loop() {
    // A directory whose listing is over the client's reply limit (here 256 KiB; ZooKeeper
    // itself sends such replies, however large): the request fails with an error saying so,
    // the connection and the session stay, and a lock there fails instead of spinning.
    let cs = shared_cluster().connect_string();
    let c = Client::builder(&cs)
        .max_reply_size(256 * 1024)
        .connect_timeout(WITHIN)
        .build()
        .unwrap();
    let dir = unique("crowded");
    c.create(&dir, b"", CreateMode::Persistent).unwrap();
    let long = "x".repeat(3_000);
    let made = c.pipeline(|p| {
        (0..100)
            .map(|i| {
                p.create(
                    &format!("{dir}/{long}-lock-{i:010}"),
                    b"",
                    CreateMode::Persistent,
                )
            })
            .collect::<Vec<_>>()
    });
    for m in made {
        m.wait().unwrap();
    }
    let (session, connects) = (c.session_id(), c.stats().connect_attempts);
    match c.get_children(&dir) {
        Err(Error::Malformed { op, path, reason }) => {
            assert_eq!((op, path.as_str()), ("get_children", dir.as_str()));
            assert!(reason.contains("max_reply_size"), "{reason}");
        }
        other => panic!("expected Malformed, got {:?}", other.map(|(n, _)| n.len())),
    }
    let lock = Mutex::new(&c, &dir).unwrap();
    assert!(matches!(
        lock.acquire_timeout(WITHIN),
        Err(Error::Malformed { .. })
    ));
    // The same connection serves on; nothing of the lock's is left.
    assert!(c.exists(&dir).unwrap().is_some());
    assert_eq!(
        (c.session_id(), c.stats().connect_attempts),
        (session, connects),
        "no reconnect"
    );
    let big = Client::connect(&cs).unwrap();
    assert_eq!(big.get_children(&dir).unwrap().0.len(), 100);
}

/// Who we are is learned from our first node's ACL less the recipe's own entries: an
/// identity a recipe's ACL names (ops, granted every right) is not ours, so it stays
/// untrusted for a later recipe of the same client that does not name it.
#[test]
fn an_identity_a_recipes_acl_names_is_not_learned_as_ours() {
    let (alice, ops) = (as_user("alice"), as_user("ops"));
    let ops_id = digest("ops");
    let mut entries = zkguard::Acl::creator_all();
    entries.push(ops_id.clone());
    let shared = NodeAcl::custom(entries).unwrap();
    // The client's first protected node, in a directory of its own: who we are learned.
    let first = Recipe::Mutex
        .take(&alice, &unique("learned"), &shared, WITHIN)
        .unwrap()
        .unwrap();
    drop(first);
    // A directory ops prepared for alice: ops may delete her node, and is not trusted.
    let dir = unique("prepared-later");
    prepared(&ops, &dir, &digest("alice"));
    match Recipe::Mutex.take(&alice, &dir, &NodeAcl::creator(), WITHIN) {
        Err(Error::UntrustedDirectory { untrusted, .. }) => {
            assert_eq!(untrusted, [ops_id.to_string()], "only ops is untrusted")
        }
        other => panic!(
            "expected UntrustedDirectory, got {:?}",
            other.map(|g| g.is_some())
        ),
    }
    assert!(ops.get_children(&dir).unwrap().0.is_empty());
}
