//! The warning of a login without TLS (issue 40): a client with credentials that connects
//! without TLS says once, at its first login, what an on-path observer can do with what it
//! sends and how to turn TLS on; never again for that client (not at a reconnect, which
//! logs in again), never with TLS, never without credentials. Against real servers: one
//! with a plaintext and a TLS port, a fault proxy in front of the plaintext one.
//!
//! A test binary of its own: a process has one logger (`common::logs`). The records of
//! each client are told apart by the server address the warning names.

mod common;

use std::time::Duration;

use common::logs::{capture, records, saying, Rec};
use common::{expect_reconnected, WITHIN};
use log::Level;
use zkguard::testing::{ClientAuth, FaultProxy, TestCluster};
use zkguard::{Client, ClientBuilder, TlsConfig};

const WARNING: &str = "without TLS";

fn builder(cs: &str) -> ClientBuilder {
    Client::builder(cs)
        .session_timeout(Duration::from_secs(10))
        .connect_timeout(WITHIN)
}

/// The warnings of a login without TLS that name `server`.
fn warnings_at(server: &str) -> Vec<Rec> {
    saying(&records(), WARNING)
        .into_iter()
        .filter(|r| r.msg.contains(&format!("to {server} ")))
        .collect()
}

#[test]
fn a_login_without_tls_warns_once_per_client_and_never_with_tls() {
    capture();
    let cluster = TestCluster::builder()
        .tls(ClientAuth::None)
        .start()
        .unwrap();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let plain = proxy.connect_string();

    // Digest credentials, no TLS: one warning at the first login...
    let alice = builder(&plain)
        .auth("digest", b"alice:alice-pw")
        .build()
        .unwrap();
    alice.exists("/").unwrap();
    let said = warnings_at(&plain);
    assert_eq!(said.len(), 1, "{said:#?}");
    let w = &said[0];
    assert_eq!(w.level, Level::Warn);
    assert_eq!(w.target, "zkguard::client::conn::connect");
    for needed in [
        "the digest password",
        "the session's id and password",
        "close this session",
        "secureClientPort",
        "ClientBuilder::tls",
    ] {
        assert!(w.msg.contains(needed), "{needed:?} missing: {}", w.msg);
    }
    // ...and none at the next one: the connection is cut, the client logs in again.
    let events = alice.events();
    let session = alice.session_id();
    proxy.reset();
    expect_reconnected(&events, session, WITHIN);
    alice.exists("/").unwrap();
    assert_eq!(warnings_at(&plain).len(), 1, "warned again at a reconnect");
    // A second client with credentials is warned too: once per client.
    let bob = builder(&plain)
        .auth("digest", b"bob:bob-pw")
        .build()
        .unwrap();
    bob.exists("/").unwrap();
    assert_eq!(warnings_at(&plain).len(), 2, "{:#?}", warnings_at(&plain));
    bob.close();

    // No credentials: nothing to warn of.
    let direct = cluster.connect_string();
    let anonymous = builder(&direct).build().unwrap();
    anonymous.exists("/").unwrap();
    assert!(
        warnings_at(&direct).is_empty(),
        "warned without credentials"
    );

    // The same credentials over TLS: never.
    let secure = cluster.secure_connect_string().unwrap();
    let pki = cluster.pki().unwrap();
    let tls = TlsConfig::ca_pem(pki.ca_cert_pem().as_bytes()).unwrap();
    let over_tls = builder(&secure)
        .tls(tls)
        .auth("digest", b"alice:alice-pw")
        .build()
        .unwrap();
    over_tls.exists("/").unwrap();
    assert!(
        saying(&records(), WARNING)
            .iter()
            .all(|r| !secure.split(',').any(|s| r.msg.contains(s))),
        "warned over TLS: {:#?}",
        saying(&records(), WARNING)
    );
    alice.close();
    over_tls.close();
    anonymous.close();
}
