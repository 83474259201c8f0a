//! The unit tests of `acl.rs`: the presets, custom lists, the directory rule, what may be
//! trusted.

use super::*;

#[test]
fn presets_parse_by_name_and_say_what_they_need() {
    for (name, identity) in [("open", false), ("creator", true), ("creator-read", true)] {
        let acl: NodeAcl = name.parse().unwrap();
        assert_eq!(acl.name(), name);
        assert_eq!(acl.to_string(), name);
        assert_eq!(acl.needs_identity(), identity, "{name}");
    }
    assert_eq!(NodeAcl::default(), NodeAcl::open());
    let read = NodeAcl::creator_read();
    assert!(read
        .entries()
        .iter()
        .any(|a| a.scheme == "world" && a.perms == Perms::READ));
    let e = "creator_read".parse::<NodeAcl>().unwrap_err().to_string();
    assert!(
        e.contains("creator_read") && e.contains("creator-read"),
        "{e}"
    );
}

#[test]
fn a_custom_list_is_checked() {
    assert!(NodeAcl::custom(vec![]).is_err());
    assert!(NodeAcl::custom(vec![Acl::new(Perms::ALL, "", "x")]).is_err());
    let none = NodeAcl::custom(vec![Acl::new(Perms::from_bits(0), "digest", "a:b")]);
    assert!(none.unwrap_err().to_string().contains("digest:a:b"));
    let ok = NodeAcl::custom(vec![Acl::new(Perms::ALL, "digest", "a:b")]).unwrap();
    assert!(!ok.needs_identity());
    assert_eq!(ok.name(), "custom");
}

fn alice() -> Vec<Acl> {
    vec![Acl::new(Perms::ALL, "digest", "alice:h")]
}

#[test]
fn a_directory_that_lets_others_in_is_untrusted() {
    let world = |p: Perms| Acl::new(p, "world", "anyone");
    let creator = NodeAcl::creator();
    // Our own directory, as the server records it.
    assert!(creator.untrusted(&alice(), &alice()).is_empty());
    // Open, or open to create/delete/admin: untrusted. Read alone is harmless.
    for p in [Perms::ALL, Perms::CREATE, Perms::DELETE, Perms::ADMIN] {
        let dir = [alice(), vec![world(p)]].concat();
        assert_eq!(creator.untrusted(&dir, &alice()), vec![world(p)], "{p:?}");
    }
    let dir = [alice(), vec![world(Perms::READ | Perms::WRITE)]].concat();
    assert!(creator.untrusted(&dir, &alice()).is_empty());
    // An address is never trusted, even when the ACL names it.
    let ip = Acl::new(Perms::ALL, "ip", "127.0.0.1");
    let custom = NodeAcl::custom([alice(), vec![ip.clone()]].concat()).unwrap();
    assert_eq!(custom.untrusted(std::slice::from_ref(&ip), &[]), vec![ip]);
    // Another identity: untrusted unless trusted by name, or named by a custom list.
    let bob_id = "bob:fvr2cB/fjGeAiX8g1aGhUm3ZICk=";
    let bob = Acl::new(Perms::CREATE, "digest", bob_id);
    let dir = [alice(), vec![bob.clone()]].concat();
    assert_eq!(creator.untrusted(&dir, &alice()), vec![bob.clone()]);
    let trusting = creator.clone().trusting("digest", bob_id).unwrap();
    assert!(trusting.untrusted(&dir, &alice()).is_empty());
    let custom = NodeAcl::custom(dir.clone()).unwrap();
    assert!(custom.untrusted(&dir, &[]).is_empty());
    // Without knowing who we are, our own entry is someone else's.
    assert_eq!(creator.untrusted(&alice(), &[]), alice());
}

#[test]
fn which_acls_keep_others_out_and_what_may_be_trusted() {
    assert!(!NodeAcl::open().keeps_others_out());
    assert!(NodeAcl::creator().keeps_others_out());
    assert!(NodeAcl::creator_read().keeps_others_out());
    let ip = NodeAcl::custom(vec![Acl::new(Perms::ALL, "ip", "10.0.0.1")]).unwrap();
    assert!(!ip.keeps_others_out());
    assert!(NodeAcl::custom(alice()).unwrap().keeps_others_out());
    for (scheme, id) in [
        ("world", "anyone"),
        ("ip", "10.0.0.1"),
        ("auth", "x"),
        ("", "x"),
    ] {
        let e = NodeAcl::creator().trusting(scheme, id).unwrap_err();
        assert!(e.to_string().contains("trust"), "{e}");
    }
    assert!(NodeAcl::creator().trusting("digest", "").is_err());
}

#[test]
fn a_digest_entry_is_trusted_only_with_its_real_hash() {
    // sha1("admin:secret"), base64: what a server stores for that login.
    let real = "admin:fvr2cB/fjGeAiX8g1aGhUm3ZICk=";
    assert!(NodeAcl::creator().trusting("digest", real).is_ok());
    for hidden in [
        "admin:x",
        "admin",
        "admin:",
        ":kWN6aNSbjcKWPqjiV7cg0N24raU=",
        "admin:kWN6aNSbjcKWPqjiV7cg0N24raU",
        "admin:kWN6aNSbjcKWPqjiV7cg0N24ra==",
        "admin:kWN6aNSbjcKWPqjiV7cg0N2*raU=",
    ] {
        let e = NodeAcl::creator()
            .trusting("digest", hidden)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not identities")
                && e.contains("anyone can log in")
                && e.contains("digest:USER:BASE64HASH")
                && e.contains("openssl"),
            "{hidden}: {e}"
        );
    }
    // A user name with a colon keeps its hash last.
    assert!(NodeAcl::creator()
        .trusting("digest", "a:b:kWN6aNSbjcKWPqjiV7cg0N24raU=")
        .is_ok());
    // Another scheme's id is the server's to judge.
    assert!(NodeAcl::creator().trusting("sasl", "ops").is_ok());
    // The id is shown escaped.
    let e = NodeAcl::creator()
        .trusting("digest", "a\x1b[2J:x")
        .unwrap_err();
    assert!(e.to_string().contains("a\\x1b[2J:x"), "{e}");
}

#[test]
fn a_creator_acl_without_identity_is_refused_naming_the_path() {
    let e = NodeAcl::creator()
        .check_identity(false, "/locks/a")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/locks/a") && e.contains("creator"), "{e}");
    assert!(NodeAcl::creator().check_identity(true, "/x").is_ok());
    assert!(NodeAcl::open().check_identity(false, "/x").is_ok());
}
