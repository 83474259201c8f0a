//! Plain nodes (`Client::create_with_acl`, `Client::ensure_path_with_acl`, a pipeline's
//! create) take the recipes' `NodeAcl` presets as well as a list of `Acl` entries, against a
//! real ZooKeeper server: what the preset says is what the server enforces on an outsider.

mod common;

use common::{as_user, client, unique};
use zkguard::{Acl, CreateMode, Error, NodeAcl};

fn assert_no_auth<T: std::fmt::Debug>(r: zkguard::Result<T>, what: &str) {
    assert!(matches!(r, Err(Error::NoAuth { .. })), "{what}: {r:?}");
}

#[test]
fn plain_nodes_take_a_node_acl_preset_and_the_server_enforces_it() {
    let alice = as_user("alice");
    let outsider = client();
    // create_with_acl with a preset: everyone reads, only alice writes.
    let shown = unique("plain-read");
    alice
        .create_with_acl(
            &shown,
            b"v0",
            CreateMode::Persistent,
            &NodeAcl::creator_read(),
        )
        .unwrap();
    assert_eq!(outsider.get_data(&shown).unwrap().0, b"v0");
    assert_no_auth(outsider.set_data(&shown, b"x", None), "outsider writes");
    alice.set_data(&shown, b"v1", None).unwrap();
    let (acl, _) = outsider.get_acl(&shown).unwrap();
    assert_eq!(acl.len(), NodeAcl::creator_read().entries().len());
    // ensure_path_with_acl: every node it creates gets the preset; the outsider can
    // neither read nor create below them.
    let top = unique("plain-ensure");
    let deep = format!("{top}/a/b");
    alice
        .ensure_path_with_acl(&deep, &NodeAcl::creator())
        .unwrap();
    for node in [&top, &format!("{top}/a"), &deep] {
        assert_no_auth(outsider.get_data(node), &format!("outsider reads {node}"));
    }
    assert_no_auth(
        outsider.create(&format!("{deep}/c"), b"", CreateMode::Persistent),
        "outsider creates below",
    );
    alice.get_data(&deep).unwrap();
    // Existing nodes keep their own ACL; the call is idempotent.
    alice.ensure_path_with_acl(&deep, &NodeAcl::open()).unwrap();
    assert_no_auth(
        outsider.get_data(&deep),
        "outsider reads after a second call",
    );
    // A list of entries still works, as a Vec, a slice, and in a pipeline with a preset.
    let open = unique("plain-open");
    outsider
        .create_with_acl(&open, b"", CreateMode::Persistent, &Acl::open_unsafe())
        .unwrap();
    let preset = NodeAcl::creator();
    let (a, b) = alice.pipeline(|p| {
        (
            p.create_with_acl(&format!("{open}/a"), b"", CreateMode::Persistent, &preset),
            p.create_with_acl(
                &format!("{open}/b"),
                b"",
                CreateMode::Persistent,
                preset.entries(),
            ),
        )
    });
    for (pending, name) in [(a, "a"), (b, "b")] {
        let path = pending.wait().unwrap().path;
        assert_no_auth(outsider.get_data(&path), &format!("outsider reads {name}"));
    }
    // An empty list is refused before anything is sent, naming the path.
    let empty: Vec<Acl> = Vec::new();
    match alice.ensure_path_with_acl(&format!("{open}/c"), &empty) {
        Err(Error::InvalidArgument {
            name: "acl",
            reason,
        }) => {
            assert!(reason.contains(&open), "{reason}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}
