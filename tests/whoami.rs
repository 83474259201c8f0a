//! `Client::who_am_i` (ZooKeeper's `whoAmI`, 3.7+) against real servers: what a session
//! without a login, with digest credentials and with a SASL login carries, and the
//! harness's `sync_limit` and `four_letter_words` settings the doctor's tests rely on.

mod common;

use std::time::Duration;

use common::{as_user, connect, shared_cluster};
use zkguard::testing::TestCluster;
use zkguard::{Client, Identity};

fn names(ids: &[Identity]) -> Vec<String> {
    ids.iter().map(ToString::to_string).collect()
}

/// Without a login a session is only its address; `addauth digest` adds `digest:USER` (the
/// user's name, without the hash an ACL entry holds), and the session keeps its address.
#[test]
fn who_am_i_names_the_address_and_each_login() {
    let anon = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    assert_eq!(names(&anon.who_am_i().unwrap()), ["ip:127.0.0.1"]);
    let alice = as_user("alice");
    let ids = names(&alice.who_am_i().unwrap());
    assert!(ids.contains(&"ip:127.0.0.1".to_string()), "{ids:?}");
    let digest: Vec<&String> = ids.iter().filter(|i| i.starts_with("digest:")).collect();
    assert_eq!(digest.len(), 1, "{ids:?}");
    assert_eq!(digest[0], "digest:alice", "{ids:?}");
    // Not a hard-coded answer: another user is another identity.
    let bob = names(&as_user("bob").who_am_i().unwrap());
    assert!(bob.contains(&"digest:bob".to_string()), "{bob:?}");
    assert!(!bob.contains(digest[0]), "{bob:?}");
}

/// A SASL DIGEST-MD5 login is `sasl:USER`; a wrong identity is not what the server sees.
/// The same cluster answers only `srvr` of the four-letter words it was given.
#[test]
fn a_sasl_login_is_what_the_server_sees() {
    let cluster = TestCluster::builder()
        .sasl_digest_users(&[("alice", "alice-secret")])
        .sasl_required(false)
        .four_letter_words(&["ruok"])
        .start()
        .unwrap();
    let client = Client::builder(&cluster.connect_string())
        .sasl_digest("alice", "alice-secret")
        .connect_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let ids = names(&client.who_am_i().unwrap());
    assert!(ids.contains(&"sasl:alice".to_string()), "{ids:?}");
    assert_eq!(cluster.four_letter(0, "ruok").unwrap(), "imok");
    assert!(cluster.four_letter(0, "srvr").unwrap().contains("Mode:"));
    let conf = cluster.four_letter(0, "conf").unwrap();
    assert!(conf.contains("not in the whitelist"), "{conf}");
}

/// `sync_limit` reaches the servers' configuration (an ensemble's `conf` shows it).
#[test]
fn sync_limit_reaches_the_ensemble() {
    let cluster = TestCluster::builder()
        .servers(3)
        .sync_limit(7)
        .start()
        .unwrap();
    let conf = cluster.four_letter(0, "conf").unwrap();
    assert!(conf.lines().any(|l| l == "syncLimit=7"), "{conf}");
    let bad = TestCluster::builder().sync_limit(0).start().unwrap_err();
    assert_eq!(bad.kind(), std::io::ErrorKind::InvalidInput);
}
