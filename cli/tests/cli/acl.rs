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
