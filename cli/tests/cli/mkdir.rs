//! `zkguard mkdir`: a team directory another identity can neither delete, squat, fill nor
//! re-ACL; kept when run again; refused (77) where an open directory is; locks of every
//! kind work under it and in it.

use zkguard::{Acl, Client, CreateMode, Error, DIRECTORY_MARKER};

use crate::common::*;
use crate::setup;

fn as_user(cs: &str, user: &str) -> Client {
    Client::builder(cs)
        .auth("digest", format!("{user}:{user}-pw").as_bytes())
        .build()
        .unwrap()
}

const ALICE: [&str; 2] = ["--auth", "alice:alice-pw"];

/// Made by alice: bob cannot delete it (it is never empty), delete its marker, create in
/// it, change its ACL or its data; nor can a client without credentials. Run again it is
/// kept (exit 0). alice's locks work under it and in it.
#[test]
fn a_made_directory_is_refused_to_every_other_identity() {
    let (cs, s, dir) = setup("team");
    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &dir, "--acl", "creator"]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("made") && err.contains("digest:alice:…"),
        "{err}"
    );
    assert!(!err.contains("alice:alice-pw"), "{err}");
    let marker = format!("{dir}/{DIRECTORY_MARKER}");

    for other in [as_user(&cs, "bob"), client(&cs)] {
        let e = other.delete(&dir, None).unwrap_err();
        assert!(
            matches!(e, Error::NotEmpty { .. }),
            "delete the directory: {e:?}"
        );
        let e = other.delete(&marker, None).unwrap_err();
        assert!(
            matches!(e, Error::NoAuth { .. }),
            "delete the marker: {e:?}"
        );
        let e = other
            .create(&format!("{dir}/squat"), b"", CreateMode::Persistent)
            .unwrap_err();
        assert!(matches!(e, Error::NoAuth { .. }), "create inside: {e:?}");
        let e = other.create(&dir, b"", CreateMode::Persistent).unwrap_err();
        assert!(matches!(e, Error::NodeExists { .. }), "squat: {e:?}");
        let e = other.set_acl(&dir, &Acl::open_unsafe(), None).unwrap_err();
        assert!(matches!(e, Error::NoAuth { .. }), "re-ACL: {e:?}");
        let e = other.set_data(&dir, b"x", None).unwrap_err();
        assert!(matches!(e, Error::NoAuth { .. }), "write: {e:?}");
    }

    // Idempotent.
    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &dir, "--acl", "creator"]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("nothing to do"), "{err}");

    // The directory itself as a mutex's, an election's and (after them: it leaves its
    // own directories there) a semaphore's, and a lock under it: the marker is neither a
    // contender nor a foreign node.
    let mut held = {
        let mut c = zkguard(&cs);
        c.args(ALICE)
            .args(["lock", "--acl", "creator", &dir, "--", "sh", "-c"]);
        c.arg(until_file(&s.path("go")));
        Running::start(c, &s, "holder")
    };
    held.wait_stderr("running the command");
    let (code, out, err) = output(zkguard(&cs).args(ALICE).args(["holders", &dir, "--json"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "one holder, no marker: {out}");
    s.touch("go");
    assert_eq!(held.wait(PATIENCE), 0, "{}", held.stderr());
    let under = format!("{dir}/nightly");
    for args in [
        vec!["elect", "--acl", "creator", dir.as_str()],
        vec!["lock", "--acl", "creator", "--permits", "2", dir.as_str()],
        vec!["lock", "--acl", "creator", under.as_str()],
    ] {
        let (code, _, err) = output(zkguard(&cs).args(ALICE).args(&args).args(["--", "true"]));
        assert_eq!(code, 0, "{args:?}: {err}");
    }
}

/// An existing directory whose ACL is open is refused (77, naming what lets others in),
/// and nothing is written in it; so is a parent this identity may not create in.
#[test]
fn mkdir_refuses_an_open_directory_and_a_closed_parent() {
    let (cs, _s, dir) = setup("team-open");
    client(&cs)
        .create(&dir, b"", CreateMode::Persistent)
        .unwrap();
    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &dir, "--acl", "creator"]),
    );
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("world:anyone"), "{err}");
    assert_eq!(
        client(&cs).get_children(&dir).unwrap().0,
        Vec::<String>::new()
    );

    let (code, _, err) = output(zkguard(&cs).args(["mkdir", &dir, "--acl", "open"]));
    assert_eq!(code, 2, "{err}");

    let theirs = format!("{dir}-bob");
    let (code, _, err) = output(zkguard(&cs).args([
        "--auth",
        "bob:bob-pw",
        "mkdir",
        &theirs,
        "--acl",
        "creator-read",
    ]));
    assert_eq!(code, 0, "{err}");
    let inside = format!("{theirs}/alice");
    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &inside, "--acl", "creator"]),
    );
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains(&theirs) && err.contains("digest:bob:…"),
        "{err}"
    );
    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &theirs, "--acl", "creator"]),
    );
    assert_eq!(code, 77, "someone else's directory: {err}");
}

/// A directory an administrator prepared for alice and ops: refused to alice alone (ops may
/// delete there), kept with `--trust` naming ops' digest identity, its marker added.
#[test]
fn mkdir_keeps_a_prepared_directory_only_with_trust() {
    let (cs, _s, dir) = setup("team-shared");
    // Each identity as ZooKeeper records it (digest:USER:HASH), read back from a node of
    // its own.
    let identity = |user: &str| {
        let c = as_user(&cs, user);
        let probe = format!("{dir}-{user}");
        c.create_with_acl(&probe, b"", CreateMode::Persistent, &Acl::creator_all())
            .unwrap();
        let acl = c.get_acl(&probe).unwrap().0;
        c.delete(&probe, None).unwrap();
        acl[0].clone()
    };
    let (alice, ops) = (identity("alice"), identity("ops"));
    client(&cs)
        .create_with_acl(&dir, b"", CreateMode::Persistent, &[alice, ops.clone()])
        .unwrap();
    let marker = format!("{dir}/{DIRECTORY_MARKER}");

    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &dir, "--acl", "creator"]),
    );
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("digest:ops:…"), "{err}");
    assert_eq!(client(&cs).exists(&marker).unwrap(), None);

    let trust = format!("digest:{}", ops.id);
    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &dir, "--acl", "creator", "--trust", &trust]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("added its marker"), "{err}");
    let st = as_user(&cs, "alice")
        .exists(&marker)
        .unwrap()
        .expect("the marker");
    assert_eq!(st.ephemeral_owner, 0, "persistent");
}

/// Mallory prepares the directory alice will `mkdir`: made open, with an *ephemeral*
/// `zkguard-directory` of her own session inside, then its ACL set to alice's identity
/// alone (the open ACL let her administer it). mkdir must not take that marker for one:
/// once mallory's session ends it would be gone, the directory empty, and mallory (the
/// root lets anyone delete) could delete it and make it again open. Kept, the marker is
/// persistent: after mallory's session is gone the directory is still not hers to delete.
#[test]
fn mkdir_does_not_keep_a_marker_that_goes_with_a_session() {
    let (cs, _s, dir) = setup("team-squat");
    let alice = as_user(&cs, "alice");
    let alice_id: Vec<Acl> = alice
        .own_identities("/")
        .unwrap()
        .into_iter()
        .map(|a| Acl::new(zkguard::Perms::ALL, &a.scheme, &a.id))
        .collect();
    let mallory = as_user(&cs, "mallory");
    mallory.create(&dir, b"", CreateMode::Persistent).unwrap();
    let marker = format!("{dir}/{DIRECTORY_MARKER}");
    mallory.create(&marker, b"", CreateMode::Ephemeral).unwrap();
    mallory.set_acl(&dir, &alice_id, None).unwrap();

    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &dir, "--acl", "creator"]),
    );
    assert_eq!(code, 0, "{err}");
    let st = alice.exists(&marker).unwrap().expect("the marker");
    assert_eq!(st.ephemeral_owner, 0, "a persistent marker: {err}");

    mallory.close();
    let other = as_user(&cs, "mallory");
    let e = other.delete(&dir, None).unwrap_err();
    assert!(matches!(e, Error::NotEmpty { .. }), "{e:?}");

    // The same with a container as the marker, kept up by an ephemeral child of mallory's
    // in it (a container looks persistent to a client; the server deletes it once its
    // last child is gone): mkdir cannot replace it (the child is not alice's to delete),
    // and says so rather than keep it.
    let second = format!("{dir}-container");
    let mallory = as_user(&cs, "mallory");
    mallory
        .create(&second, b"", CreateMode::Persistent)
        .unwrap();
    let marker = format!("{second}/{DIRECTORY_MARKER}");
    let mallory_id = mallory.own_identities(&second).unwrap();
    mallory
        .create_with_acl(&marker, b"", CreateMode::Container, &mallory_id)
        .unwrap();
    let child = format!("{marker}/keep");
    mallory
        .create_with_acl(&child, b"", CreateMode::Ephemeral, &mallory_id)
        .unwrap();
    mallory.set_acl(&second, &alice_id, None).unwrap();
    let st = alice.exists(&marker).unwrap().expect("the marker");
    assert_eq!(st.ephemeral_owner, 0, "a container looks persistent");
    let (code, _, err) = output(
        zkguard(&cs)
            .args(ALICE)
            .args(["mkdir", &second, "--acl", "creator"]),
    );
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains("cannot be replaced: it has children") && err.contains(&marker),
        "{err}"
    );
}

/// alice's closed directory without a marker (creator-read: anyone may list it), and an
/// anonymous attacker who watches it: when `mkdir`'s identity probe appears, it streams
/// transactions that delete the directory and make it again open until one lands (after
/// the probe is gone, before the marker is made) or `mkdir` is done. Run until the swap
/// has won three times (at most 40 runs): each run the attacker won ends in 77 naming the
/// swap, never "kept"; each it lost keeps the directory (0). Before the second look,
/// `mkdir` said "kept; added its marker" and exited 0 with the directory open.
#[test]
fn a_directory_swapped_between_its_probe_and_its_marker_is_never_kept() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use zkguard::Op;
    let cs = cluster().connect_string();
    let alice = as_user(&cs, "alice");
    let (mut won, mut runs) = (0, 0);
    while won < 3 && runs < 40 {
        runs += 1;
        let dir = unique("team-swap");
        alice
            .create_with_acl(
                &dir,
                b"",
                CreateMode::Persistent,
                zkguard::NodeAcl::creator_read().entries(),
            )
            .unwrap();
        let judged = alice.exists(&dir).unwrap().unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let attacker = {
            let (cs, dir, done) = (cs.clone(), dir.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let c = client(&cs);
                loop {
                    let (kids, _, watch) = c.get_children_w(&dir).unwrap();
                    if !kids.is_empty() {
                        break;
                    }
                    if done.load(Ordering::SeqCst) {
                        return;
                    }
                    let _ = watch.recv_timeout(std::time::Duration::from_millis(200));
                }
                let swap = [
                    Op::Delete {
                        path: dir.clone(),
                        version: None,
                    },
                    Op::Create {
                        path: dir.clone(),
                        data: Vec::new(),
                        mode: CreateMode::Persistent,
                    },
                ];
                while !done.load(Ordering::SeqCst) && c.multi(&swap).is_err() {}
            })
        };
        let (code, _, err) =
            output(
                zkguard(&cs)
                    .args(ALICE)
                    .args(["mkdir", &dir, "--acl", "creator-read"]),
            );
        done.store(true, Ordering::SeqCst);
        attacker.join().unwrap();
        let now = alice.exists(&dir).unwrap().unwrap();
        if now.czxid != judged.czxid {
            won += 1;
            assert_eq!(code, 77, "swapped, yet: {err}");
            assert!(!err.contains("kept;"), "swapped, yet: {err}");
            assert!(
                err.contains("was swapped") || err.contains("was deleted"),
                "{err}"
            );
        } else {
            assert_eq!(code, 0, "not swapped: {err}");
            assert!(err.contains("kept; added its marker"), "{err}");
        }
    }
    eprintln!("the swap won {won} of {runs} runs");
    assert!(
        won > 0,
        "the swap never won in {runs} runs: the test proves nothing"
    );
}
