//! What depends on the server's release, checked on whichever release the harness runs
//! (`ZKGUARD_ZOOKEEPER_VERSION`, see docs/testing.md; CI runs this file on 3.6.3, 3.8.0 and
//! 3.9.3): an operation the server is too old for fails naming the release it needs, and
//! the session goes on. Containers and TTL nodes (3.5.3+, every release zkguard supports)
//! are `client.rs`'s; `whoami.rs` covers `whoAmI` itself on 3.7 and later.

mod common;

use std::time::Duration;

use common::{connect, shared_cluster};
use zkguard::{Error, ErrorCode, Mutex};

/// `whoAmI` is 3.7's: before that the server answers `unimplemented`, which the client
/// turns into `ServerTooOld` naming 3.7.0, on the same session, with no reconnect, and the
/// recipes go on working on it.
#[test]
fn who_am_i_answers_from_3_7_and_names_the_release_it_needs_before() {
    let cluster = shared_cluster();
    let version = cluster.version(0).unwrap();
    let client = connect(&cluster.connect_string(), Duration::from_secs(10));
    let session = client.session_id();
    match client.who_am_i() {
        Ok(ids) => {
            assert!(version >= (3, 7, 0), "{version:?} answered whoAmI: {ids:?}");
            let names: Vec<String> = ids.iter().map(ToString::to_string).collect();
            assert!(names.contains(&"ip:127.0.0.1".to_string()), "{names:?}");
        }
        Err(e) => {
            assert!(version < (3, 7, 0), "{version:?} refused whoAmI: {e}");
            assert_eq!(
                e,
                Error::ServerTooOld {
                    op: "who_am_i",
                    needs: "3.7.0"
                }
            );
            assert_eq!(e.code(), Some(ErrorCode::Unimplemented));
            assert!(e.to_string().contains("3.7.0"), "{e}");
        }
    }
    // Either way the session is the one it was, never dropped for the request.
    assert_eq!(client.session_id(), session);
    assert_eq!(client.stats().reconnects, 0);
    let guard = Mutex::new(&client, &common::unique("versions"))
        .unwrap()
        .acquire()
        .unwrap();
    assert!(guard.confirm().is_ok());
    assert_eq!(client.session_id(), session);
}

/// The harness runs the release it was asked for: `ZKGUARD_ZOOKEEPER_VERSION` is the
/// server's own `srvr` line, never a quiet fall back to another installed server.
#[test]
fn the_server_is_the_release_the_harness_was_asked_for() {
    let version = shared_cluster().version(0).unwrap();
    match std::env::var("ZKGUARD_ZOOKEEPER_VERSION") {
        Ok(asked) if !asked.is_empty() => {
            assert_eq!(
                format!("{}.{}.{}", version.0, version.1, version.2),
                asked,
                "asked for {asked}, the server says {version:?}"
            );
        }
        _ => assert!(version >= (3, 5, 0), "{version:?}"),
    }
}
