//! The unit tests of [`Error`]: messages, codes, causes and equality.

use std::io;
use std::time::Duration;

use super::*;

#[test]
fn messages_name_the_path() {
    let e = Error::from_code(-101, "/locks/a");
    assert_eq!(
        e,
        Error::NoNode {
            path: "/locks/a".into()
        }
    );
    assert!(e.to_string().contains("/locks/a"));
    let e = Error::from_code(-118, "/x");
    assert!(e.to_string().contains("session moved") && e.to_string().contains("/x"));
    assert!(Error::ConnectionLoss.is_connection_error());
    assert!(!Error::SessionExpired.is_connection_error());
}

#[test]
fn unknown_codes_survive() {
    for n in [-9, -99, -126, -128, -1000, 1, 7, i32::MIN, i32::MAX] {
        let code = ErrorCode::from_i32(n);
        assert_eq!(code, ErrorCode::Unknown(n));
        assert_eq!(code.as_i32(), n);
        assert_eq!(code.to_string(), "unknown error");
        let e = Error::from_code(n, "/p");
        assert_eq!(
            e,
            Error::Zk {
                code: ErrorCode::Unknown(n),
                path: "/p".into()
            }
        );
        assert_eq!(
            e.to_string(),
            format!("ZooKeeper error {n} (unknown error) on /p")
        );
    }
}

#[test]
fn codes_with_a_variant_map_to_it_and_the_rest_to_zk() {
    let p = || "/a".to_string();
    let cases = [
        (ErrorCode::ConnectionLoss, Error::ConnectionLoss),
        (ErrorCode::SessionExpired, Error::SessionExpired),
        (ErrorCode::NoNode, Error::NoNode { path: p() }),
        (ErrorCode::NodeExists, Error::NodeExists { path: p() }),
        (ErrorCode::NotEmpty, Error::NotEmpty { path: p() }),
        (ErrorCode::BadVersion, Error::BadVersion { path: p() }),
        (ErrorCode::NoAuth, Error::NoAuth { path: p(), op: "" }),
        (ErrorCode::InvalidAcl, Error::InvalidAcl { path: p() }),
        (
            ErrorCode::NoChildrenForEphemerals,
            Error::NoChildrenForEphemerals { path: p() },
        ),
        (ErrorCode::AuthFailed, Error::AuthFailed),
    ];
    for (code, want) in &cases {
        assert_eq!(&Error::from_code(code.as_i32(), "/a"), want);
        assert_eq!(want.code(), Some(*code), "{want:?}");
    }
    for &code in ErrorCode::ALL {
        if cases.iter().any(|(c, _)| *c == code) {
            continue;
        }
        let e = Error::from_code(code.as_i32(), "/a");
        assert_eq!(e, Error::Zk { code, path: p() });
        assert_eq!(e.code(), Some(code));
        assert_eq!(
            e.to_string(),
            format!(
                "ZooKeeper error {} ({}) on /a",
                code.as_i32(),
                code.description()
            )
        );
    }
    let e = Error::from_code(-5, "");
    assert_eq!(e.to_string(), "ZooKeeper error -5 (marshalling error)");
}

fn refused() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, "Connection refused")
}

#[test]
fn an_io_error_converts_with_the_question_mark_and_reads_as_itself() {
    // What `TestCluster::start(1)?` does in a `fn main() -> zkguard::Result<()>`.
    fn harness() -> io::Result<()> {
        Err(io::Error::other("no ZooKeeper installation found"))
    }
    fn program() -> Result<()> {
        harness()?;
        Ok(())
    }
    let e = program().unwrap_err();
    assert!(matches!(&e, Error::Io { source } if source.kind() == io::ErrorKind::Other));
    assert_eq!(e.to_string(), "no ZooKeeper installation found");
    assert_eq!(e.code(), None);
    assert!(!e.is_connection_error());
}

#[test]
fn spawn_and_malformed_have_their_own_variants() {
    use std::error::Error as _;
    let e = Error::spawn(
        "connection thread",
        io::Error::from(io::ErrorKind::OutOfMemory),
    );
    assert!(
        e.to_string()
            .starts_with("cannot start the connection thread: "),
        "{e}"
    );
    let src = e.source().and_then(|s| s.downcast_ref::<io::Error>());
    assert_eq!(src.map(io::Error::kind), Some(io::ErrorKind::OutOfMemory));
    // Cloning shares the cause; clones are equal.
    let c = e.clone();
    assert_eq!(c, e);
    assert!(!e.is_connection_error());

    let m = Error::Malformed {
        op: "get_data",
        path: "/a".into(),
        reason: "stat cut short".into(),
    };
    assert_eq!(
        m.to_string(),
        "malformed get_data reply for /a: stat cut short"
    );
    assert!(m.source().is_none());
    assert!(!m.is_connection_error());
    assert_eq!(m.code(), Some(ErrorCode::MarshallingError));
    assert_eq!(e.code(), None);
    let t = Error::Timeout {
        op: "exists",
        path: "/a".into(),
        after: Duration::from_secs(1),
    };
    assert_eq!(t.code(), Some(ErrorCode::RequestTimeout));
    let multi = Error::Multi {
        index: 2,
        source: Box::new(Error::BadVersion { path: "/a".into() }),
    };
    assert_eq!(multi.code(), Some(ErrorCode::BadVersion));
    assert_eq!(Error::Closed.code(), None);
    let arg = Error::InvalidArgument {
        name: "ttl",
        reason: "zero".into(),
    };
    assert_eq!(arg.code(), None);
    let m = Error::Malformed {
        op: "multi",
        path: String::new(),
        reason: "result type 99".into(),
    };
    assert_eq!(m.to_string(), "malformed multi reply: result type 99");
}

#[test]
fn every_variant_equals_itself_and_io_causes_compare_by_kind_and_message() {
    let p = || "/p".to_string();
    let all = vec![
        Error::ConnectionLoss,
        Error::SessionExpired,
        Error::Timeout {
            op: "get_data",
            path: p(),
            after: Duration::from_secs(1),
        },
        Error::Closed,
        Error::Connect {
            attempts: vec![ConnectAttempt::new(
                "h:1",
                None,
                ConnectFailure::io("connect", refused()),
            )],
            after: Duration::from_secs(1),
        },
        Error::NoNode { path: p() },
        Error::NodeExists { path: p() },
        Error::NotEmpty { path: p() },
        Error::BadVersion { path: p() },
        Error::NoAuth {
            path: p(),
            op: "create",
        },
        Error::InvalidAcl { path: p() },
        Error::NoChildrenForEphemerals { path: p() },
        Error::AuthFailed,
        Error::InvalidPath {
            path: p(),
            reason: "r".into(),
        },
        Error::Malformed {
            op: "exists",
            path: p(),
            reason: "r".into(),
        },
        Error::spawn("candidate thread", refused()),
        Error::InvalidArgument {
            name: "n",
            reason: "r".into(),
        },
        Error::Multi {
            index: 1,
            source: Box::new(Error::NoNode { path: p() }),
        },
        Error::Cancelled { path: p() },
        Error::LockLost { path: p() },
        Error::NotLeader { path: p() },
        Error::ForeignNode {
            path: p(),
            node: "x".into(),
        },
        Error::UntrustedDirectory {
            path: p(),
            acl: vec!["world:anyone cdrwa".into()],
            untrusted: vec!["world:anyone cdrwa".into()],
        },
        Error::NotOurNode {
            path: p(),
            node: "/p/n".into(),
        },
        Error::PermitMismatch {
            path: p(),
            recorded: 1,
            requested: 2,
        },
        Error::Zk {
            code: ErrorCode::SessionMoved,
            path: p(),
        },
        Error::ServerTooOld {
            op: "who_am_i",
            needs: "3.7.0",
        },
        Error::from(refused()),
    ];
    // No wildcard: a new variant stops this from compiling until it is listed above (its
    // equality is derived, so the comparisons below check it).
    for e in &all {
        match e {
            Error::ConnectionLoss
            | Error::SessionExpired
            | Error::Timeout { .. }
            | Error::Closed
            | Error::Connect { .. }
            | Error::NoNode { .. }
            | Error::NodeExists { .. }
            | Error::NotEmpty { .. }
            | Error::BadVersion { .. }
            | Error::NoAuth { .. }
            | Error::ServerTooOld { .. }
            | Error::InvalidAcl { .. }
            | Error::NoChildrenForEphemerals { .. }
            | Error::AuthFailed
            | Error::InvalidPath { .. }
            | Error::Malformed { .. }
            | Error::Spawn { .. }
            | Error::InvalidArgument { .. }
            | Error::Multi { .. }
            | Error::Cancelled { .. }
            | Error::LockLost { .. }
            | Error::NotLeader { .. }
            | Error::ForeignNode { .. }
            | Error::UntrustedDirectory { .. }
            | Error::NotOurNode { .. }
            | Error::PermitMismatch { .. }
            | Error::Zk { .. }
            | Error::Io { .. } => {}
        }
    }
    let kinds: std::collections::HashSet<_> = all.iter().map(std::mem::discriminant).collect();
    assert_eq!(kinds.len(), all.len(), "one of each variant");
    for (i, a) in all.iter().enumerate() {
        for (j, b) in all.iter().enumerate() {
            assert_eq!(i == j, a == b, "{a:?} vs {b:?}");
        }
        // A clone, and a rebuilt I/O cause saying the same, are equal.
        assert_eq!(a, &a.clone());
        // Every error about a node names it.
        let pathless = matches!(
            a,
            Error::ConnectionLoss
                | Error::SessionExpired
                | Error::Closed
                | Error::Connect { .. }
                | Error::AuthFailed
                | Error::ServerTooOld { .. }
                | Error::Spawn { .. }
                | Error::InvalidArgument { .. }
                | Error::Io { .. }
        );
        assert!(pathless || a.to_string().contains("/p"), "{a}");
    }
    assert_eq!(Error::spawn("t", refused()), Error::spawn("t", refused()));
    assert_ne!(
        Error::spawn("t", refused()),
        Error::spawn("t", io::Error::from(io::ErrorKind::ConnectionRefused))
    );
    assert_ne!(
        Error::spawn("t", refused()),
        Error::spawn("t", io::Error::other("Connection refused"))
    );
}

/// Text a server sent (node names, ACL ids, reasons) is shown through `escape` in every
/// error: a co-tenant's node named with an escape sequence or a newline cannot rewrite the
/// operator's screen or forge a line through an error message.
#[test]
fn server_sent_text_in_errors_is_escaped() {
    let evil = "/d/\x1b[2J\nzkguard: fake line\u{202e}";
    let acl = "digest:ev\x1bil:x cdrwa".to_string();
    let errors = [
        Error::ForeignNode {
            path: "/d".into(),
            node: "n\x1b[2J\nfake".into(),
        },
        Error::UntrustedDirectory {
            path: evil.into(),
            acl: vec![acl.clone()],
            untrusted: vec![acl],
        },
        Error::NotOurNode {
            path: evil.into(),
            node: evil.into(),
        },
        Error::NoNode { path: evil.into() },
        Error::NoAuth {
            path: evil.into(),
            op: "create",
        },
        Error::LockLost { path: evil.into() },
        Error::Zk {
            code: ErrorCode::SessionMoved,
            path: evil.into(),
        },
        Error::Malformed {
            op: "get_data",
            path: evil.into(),
            reason: "\x1b]0;title\x07".into(),
        },
        Error::InvalidPath {
            path: evil.into(),
            reason: "r".into(),
        },
        Error::Connect {
            attempts: vec![ConnectAttempt {
                host: "h".into(),
                addr: None,
                reason: ConnectFailure::Sasl {
                    reason: "realm \x1b[31m".into(),
                },
            }],
            after: Duration::from_secs(1),
        },
    ];
    for e in &errors {
        let shown = e.to_string();
        assert!(
            !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{shown:?}"
        );
        assert!(shown.contains("\\x1b"), "{shown:?}");
    }
    let foreign = errors[0].to_string();
    assert!(foreign.contains("\"n\\x1b[2J\\nfake\""), "{foreign}");
    let untrusted = errors[1].to_string();
    assert!(
        untrusted.contains("digest:ev\\x1bil:x cdrwa"),
        "{untrusted}"
    );
    // Clean text is shown as it is.
    let plain = Error::ForeignNode {
        path: "/locks/a".into(),
        node: "stray".into(),
    };
    assert!(plain.to_string().contains("/locks/a holds \"stray\""));
}

/// An old server's `unimplemented` names the release an operation needs when the client
/// knows it; for any other operation it stays the plain code with the path.
#[test]
fn unimplemented_names_the_release_the_operation_needs() {
    let e = Error::from_reply(-6, "who_am_i", "/");
    assert_eq!(
        e,
        Error::ServerTooOld {
            op: "who_am_i",
            needs: "3.7.0"
        }
    );
    assert_eq!(e.code(), Some(ErrorCode::Unimplemented));
    let text = e.to_string();
    assert!(
        text.contains("who_am_i needs ZooKeeper 3.7.0 or later"),
        "{text}"
    );
    assert_eq!(
        Error::from_reply(-6, "create", "/a/b"),
        Error::Zk {
            code: ErrorCode::Unimplemented,
            path: "/a/b".into()
        }
    );
}
