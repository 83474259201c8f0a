//! `--acl`: a lock's and an election's nodes, held by one digest identity, are refused to
//! every other identity and to clients without credentials; `holders` and `leader` say so,
//! naming the node and the operation.

use crate::common::*;
use crate::setup;
use zkguard::{Client, Error};

fn as_user(cs: &str, user: &str) -> Client {
    Client::builder(cs)
        .auth("digest", format!("{user}:{user}-pw").as_bytes())
        .build()
        .unwrap()
}

#[test]
fn a_creator_acl_lock_and_election_refuse_other_identities() {
    let (cs, s, path) = setup("acl-lock");
    let alice = ["--auth", "alice:alice-pw"];
    let bob = ["--auth", "bob:bob-pw"];
    // Without credentials a creator ACL is refused at once, naming the flag's value.
    let (code, _, err) =
        output(zkguard(&cs).args(["lock", "--acl", "creator", &path, "--", "true"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("creator") && err.contains(&path), "{err}");
    let (code, _, err) =
        output(zkguard(&cs).args(["lock", "--acl", "nobody", &path, "--", "true"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("open, creator or creator-read"), "{err}");
    assert_eq!(
        client(&cs).exists(&path).unwrap(),
        None,
        "something was created"
    );

    let mut holder = {
        let mut c = zkguard(&cs);
        c.args(alice).args(["lock", "--acl", "creator", &path]);
        Running::start(c, &s, "holder")
    };
    holder.wait_stderr("holding it until signalled");
    let a = as_user(&cs, "alice");
    let held = a.get_children(&path).unwrap().0;
    assert_eq!(held.len(), 1, "{held:?}");
    let node = format!("{path}/{}", held[0]);
    for outsider in [as_user(&cs, "bob"), client(&cs)] {
        assert_eq!(
            outsider.delete(&node, None),
            Err(Error::NoAuth {
                path: path.clone(),
                op: "delete"
            })
        );
        assert!(matches!(
            outsider.set_data(&node, b"x", None),
            Err(Error::NoAuth { .. })
        ));
    }
    // Another identity's lock and holders fail at once with the no-permission status.
    let (code, _, err) = output(zkguard(&cs).args(bob).args(["lock", &path, "--", "true"]));
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains(&path) && err.contains("creating children"),
        "{err}"
    );
    let (code, _, err) = output(zkguard(&cs).args(bob).args(["holders", &path]));
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains(&path) && err.contains("listing its children"),
        "{err}"
    );
    // The same identity sees it held.
    let (code, _, err) = output(
        zkguard(&cs)
            .args(alice)
            .args(["lock", &path, "-n", "--", "true"]),
    );
    assert_eq!(
        code, 1,
        "alice's second lock was not refused as busy: {err}"
    );
    holder.signal(libc::SIGTERM);
    assert_eq!(holder.wait(PATIENCE), 0, "{}", holder.stderr());

    // An election with creator-read: others may see the leader, not run.
    let election = unique("acl-elect");
    let mut leader = {
        let mut c = zkguard(&cs);
        c.args(alice).args([
            "elect",
            "--acl",
            "creator-read",
            &election,
            "--id",
            "alice-1",
        ]);
        Running::start(c, &s, "leader")
    };
    leader.wait_stderr("holding it until signalled");
    let (code, out, err) = output(zkguard(&cs).args(["leader", &election, "--json"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"leader\":\"alice-1\""), "{out}");
    let (code, _, err) = output(
        zkguard(&cs)
            .args(bob)
            .args(["elect", &election, "-n", "--", "true"]),
    );
    assert_eq!(code, 77, "{err}");
    leader.signal(libc::SIGTERM);
    assert_eq!(leader.wait(PATIENCE), 0, "{}", leader.stderr());
}

/// The co-tenant sequence: Alice's creator-only lock directory goes away when empty (the
/// server reaps it, or anyone deletes it), Mallory makes it again, open to all. Alice's next
/// runs must not queue there (Mallory could delete the holder's node and start a second run
/// while the first still runs): exit 77 naming the directory and its open entry, nothing
/// left, the command never run. A directory prepared for alice and an operator is used once
/// the operator is trusted.
#[test]
fn a_squatted_directory_is_refused_and_a_trusted_one_is_used() {
    // Top-level: the squatter needs CREATE on the parent (`/` on a default ensemble).
    let (cs, s, _) = setup("acl-squat");
    let path = format!("/squat-{}", uuid::Uuid::new_v4().simple());
    let alice = ["--auth", "alice:alice-pw"];
    let ran = s.path("ran");
    let mark = format!("touch {}", ran.display());
    let (code, _, err) = output(
        zkguard(&cs)
            .args(alice)
            .args(["lock", "--acl", "creator", &path, "--", "true"]),
    );
    assert_eq!(code, 0, "{err}");
    let mallory = as_user(&cs, "mallory");
    // The server reaps the emptied container (the harness checks every 100 ms). Deleting it
    // by hand would race the reaper, which deletes a node at a path it saw as an empty
    // container even if it was re-created meanwhile.
    wait_until(
        || format!("{path} reaped"),
        || mallory.exists(&path).unwrap().is_none(),
    );
    mallory
        .create(&path, b"", zkguard::CreateMode::Persistent)
        .unwrap();
    let (code, _, err) = output(
        zkguard(&cs)
            .args(alice)
            .args(["lock", "--acl", "creator", &path, "--", "sh", "-c", &mark]),
    );
    assert_eq!(code, 77, "{err}");
    assert!(err.contains(&path) && err.contains("world:anyone"), "{err}");
    assert!(!ran.exists(), "the command ran in a squatted directory");
    assert!(mallory.get_children(&path).unwrap().0.is_empty());
    // Trusting needs a protective ACL, and a well-formed identity.
    let (code, _, err) = output(zkguard(&cs).args(alice).args([
        "lock",
        "--trust",
        "digest:x:y",
        &path,
        "--",
        "true",
    ]));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = output(zkguard(&cs).args(alice).args([
        "lock",
        "--acl",
        "creator",
        "--trust",
        "world:anyone",
        &path,
        "--",
        "true",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--trust world:anyone"), "{err}");
    // Prepared by an operator for alice and itself (both with every right).
    let ops = as_user(&cs, "ops");
    let prepared = format!("{path}-prepared");
    let probe = format!("{path}-probe");
    let id_of = |c: &Client| {
        c.create_with_acl(
            &probe,
            b"",
            zkguard::CreateMode::Ephemeral,
            &zkguard::Acl::creator_all(),
        )
        .unwrap();
        let id = c.get_acl(&probe).unwrap().0.remove(0);
        c.delete(&probe, None).unwrap();
        id
    };
    let (alice_id, ops_id) = (id_of(&as_user(&cs, "alice")), id_of(&ops));
    ops.create_with_acl(
        &prepared,
        b"",
        zkguard::CreateMode::Persistent,
        &[alice_id, ops_id.clone()],
    )
    .unwrap();
    let (code, _, err) = output(
        zkguard(&cs)
            .args(alice)
            .args(["lock", "--acl", "creator", &prepared, "--", "true"]),
    );
    assert_eq!(code, 77, "{err}");
    let trust = format!("{}:{}", ops_id.scheme, ops_id.id);
    let (code, _, err) = output(zkguard(&cs).args(alice).args([
        "lock", "--acl", "creator", "--trust", &trust, &prepared, "--", "sh", "-c", &mark,
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(
        ran.exists(),
        "the command did not run under the trusted directory's lock"
    );
}

/// Issue 40's first attack: Mallory logs in as `admin` with a password of her own and
/// makes an empty top-level lock directory hers (`digest:admin:<her hash>` with every
/// right, Alice's entry beside it without ADMIN, so that Alice is shown every digest entry
/// as USER:x). Alice trusting the administrator by name (`--trust digest:admin:x`, as the
/// old help suggested) must be refused before anything is sent: a usage error that says
/// why and how to give the whole entry, the command never run, no node of hers there (no
/// holder for Mallory to delete, no second holder).
#[test]
fn a_trusted_digest_user_name_is_refused_and_never_queues() {
    let (cs, s, _) = setup("acl-digest-name");
    let path = format!("/nightly-{}", uuid::Uuid::new_v4().simple());
    let mallory = Client::builder(&cs)
        .auth("digest", b"admin:mallory-pw")
        .build()
        .unwrap();
    let alice_entry = as_user(&cs, "alice").own_identities("/").unwrap().remove(0);
    let mut acl = zkguard::Acl::creator_all();
    acl.push(zkguard::Acl::new(
        zkguard::Perms::READ
            | zkguard::Perms::CREATE
            | zkguard::Perms::DELETE
            | zkguard::Perms::WRITE,
        "digest",
        alice_entry.id,
    ));
    mallory
        .create_with_acl(&path, b"", zkguard::CreateMode::Persistent, &acl)
        .unwrap();
    let ran = s.path("ran");
    let mark = format!("touch {}", ran.display());
    let (code, _, err) = output(zkguard(&cs).args(["--auth", "alice:alice-pw"]).args([
        "lock",
        "--acl",
        "creator",
        "--trust",
        "digest:admin:x",
        "--trust",
        "digest:alice:x",
        &path,
        "--",
        "sh",
        "-c",
        &mark,
    ]));
    assert_eq!(code, 2, "{err}");
    for needed in [
        "--trust digest:admin:x",
        "not identities",
        "anyone can log in as any user name",
        "digest:USER:BASE64HASH",
    ] {
        assert!(err.contains(needed), "{needed:?} missing: {err}");
    }
    assert!(!ran.exists(), "the command ran");
    assert!(
        mallory.get_children(&path).unwrap().0.is_empty(),
        "a node was queued in Mallory's directory"
    );
}
