//! The one error type of the crate.

use std::fmt;
use std::time::Duration;

/// Everything that can go wrong, in the caller's terms. Messages name the path involved.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The connection dropped before the reply came. The request may or may not have been
    /// applied; the session may still be alive (see [`SessionState`](crate::SessionState)).
    ConnectionLoss,
    /// The session this request belonged to is lost; the client has opened (or is opening) a
    /// new one.
    SessionExpired,
    /// No reply (or no connection to send on) within the request's deadline. Like
    /// [`Error::ConnectionLoss`], the request may or may not have been applied.
    Timeout {
        /// What was being done.
        op: &'static str,
        /// The node involved, if any.
        path: String,
        /// The deadline that passed.
        after: Duration,
    },
    /// The client was closed.
    Closed,
    /// No session could be established before the connect deadline.
    Connect {
        /// The servers tried, each with what went wrong there.
        tried: String,
        /// The connect deadline.
        after: Duration,
    },
    /// The node does not exist.
    NoNode {
        /// The node.
        path: String,
    },
    /// The node already exists.
    NodeExists {
        /// The node.
        path: String,
    },
    /// The node has children, so it cannot be deleted.
    NotEmpty {
        /// The node.
        path: String,
    },
    /// The node's version is not the expected one.
    BadVersion {
        /// The node.
        path: String,
    },
    /// The session is not allowed to do this by the node's ACL.
    NoAuth {
        /// The node.
        path: String,
    },
    /// The ACL is invalid (for example `creator_all` on a session without authentication).
    InvalidAcl {
        /// The node.
        path: String,
    },
    /// Ephemeral nodes cannot have children.
    NoChildrenForEphemerals {
        /// The ephemeral parent's child that was to be created.
        path: String,
    },
    /// The server rejected the credentials.
    AuthFailed,
    /// A path that ZooKeeper would reject, caught before sending.
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument that cannot be right (the message names it).
    InvalidArgument {
        /// The argument.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A multi transaction failed: nothing of it was applied.
    Multi {
        /// Index of the first operation that failed.
        index: usize,
        /// Why it failed.
        source: Box<Error>,
    },
    /// A blocked acquire was cancelled from another thread (see `Canceller`); nothing of
    /// the attempt is left in ZooKeeper.
    Cancelled {
        /// The lock's path.
        path: String,
    },
    /// The lock is no longer held: its session ended, its node was deleted by someone else,
    /// or the client was closed.
    LockLost {
        /// The lock node.
        path: String,
    },
    /// This participant does not lead the election (any more): its node is gone, its
    /// session ended, it resigned, or the client was closed. Returned by
    /// `Leadership::confirm` and `Candidate::confirm`; never a false "yes".
    NotLeader {
        /// The election's path.
        path: String,
    },
    /// The lock directory holds a node that no recipe made (its name has no sequence number
    /// or an unknown layout). It is left alone; remove it or use another path.
    ForeignNode {
        /// The lock directory.
        path: String,
        /// The unexpected child's name.
        node: String,
    },
    /// A semaphore's permit count differs from the one recorded at its path.
    PermitMismatch {
        /// The semaphore's path.
        path: String,
        /// The count recorded at the path (by the first user).
        recorded: u32,
        /// The count this caller asked for.
        requested: u32,
    },
    /// Any other error code from the server.
    Zk {
        /// The ZooKeeper error code (`KeeperException.Code`).
        code: i32,
        /// The node involved, if any.
        path: String,
    },
}

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the outcome of the request is unknown because the connection dropped or the
    /// deadline passed (it may have been applied). Recipes retry such requests idempotently.
    pub fn is_connection_error(&self) -> bool {
        matches!(self, Error::ConnectionLoss | Error::Timeout { .. })
    }

    /// Maps a server error code to an error naming `path`.
    pub(crate) fn from_code(code: i32, path: &str) -> Error {
        use crate::client::proto::code as c;
        let path = path.to_string();
        match code {
            c::CONNECTION_LOSS => Error::ConnectionLoss,
            c::SESSION_EXPIRED => Error::SessionExpired,
            c::NO_NODE => Error::NoNode { path },
            c::NODE_EXISTS => Error::NodeExists { path },
            c::NOT_EMPTY => Error::NotEmpty { path },
            c::BAD_VERSION => Error::BadVersion { path },
            c::NO_AUTH => Error::NoAuth { path },
            c::INVALID_ACL => Error::InvalidAcl { path },
            c::NO_CHILDREN_FOR_EPHEMERALS => Error::NoChildrenForEphemerals { path },
            c::AUTH_FAILED => Error::AuthFailed,
            code => Error::Zk { code, path },
        }
    }
}

fn code_name(code: i32) -> &'static str {
    match code {
        -1 => "system error",
        -2 => "runtime inconsistency",
        -3 => "data inconsistency",
        -5 => "marshalling error",
        -6 => "unimplemented (is the server too old for this operation?)",
        -7 => "operation timeout",
        -8 => "bad arguments",
        -12 => "unknown session",
        -13 => "new config has no quorum",
        -14 => "reconfiguration in progress",
        -113 => "invalid callback",
        -118 => "session moved",
        -119 => "server is read-only",
        -120 => "ephemeral on local session",
        -121 => "no watcher",
        -122 => "request timeout",
        -123 => "reconfiguration disabled",
        -125 => "quota exceeded",
        -127 => "throttled",
        _ => "unknown error",
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ConnectionLoss => write!(
                f,
                "connection to ZooKeeper lost before the reply (the request may have been applied)"
            ),
            Error::SessionExpired => write!(f, "ZooKeeper session expired"),
            Error::Timeout { op, path, after } if path.is_empty() => {
                write!(f, "{op} timed out after {after:?}")
            }
            Error::Timeout { op, path, after } => {
                write!(f, "{op} {path} timed out after {after:?}")
            }
            Error::Closed => write!(f, "the ZooKeeper client is closed"),
            Error::Connect { tried, after } => write!(
                f,
                "no ZooKeeper session within {after:?}; servers tried: {tried}"
            ),
            Error::NoNode { path } => write!(f, "node {path} does not exist"),
            Error::NodeExists { path } => write!(f, "node {path} already exists"),
            Error::NotEmpty { path } => write!(f, "node {path} has children"),
            Error::BadVersion { path } => write!(f, "node {path} has another version"),
            Error::NoAuth { path } => write!(f, "not authorized for node {path}"),
            Error::InvalidAcl { path } => write!(f, "invalid ACL for node {path}"),
            Error::NoChildrenForEphemerals { path } => {
                write!(f, "cannot create {path}: its parent is ephemeral")
            }
            Error::AuthFailed => write!(f, "ZooKeeper authentication failed"),
            Error::InvalidPath { path, reason } => write!(f, "invalid path {path:?}: {reason}"),
            Error::InvalidArgument { name, reason } => write!(f, "invalid {name}: {reason}"),
            Error::Multi { index, source } => {
                write!(f, "multi failed at operation {index}: {source}")
            }
            Error::Cancelled { path } => write!(f, "acquire of {path} was cancelled"),
            Error::LockLost { path } => write!(f, "lock {path} was lost"),
            Error::NotLeader { path } => write!(f, "not the leader of election {path}"),
            Error::ForeignNode { path, node } => write!(
                f,
                "lock directory {path} holds {node:?}, a node no lock recipe made; it was left alone"
            ),
            Error::PermitMismatch {
                path,
                recorded,
                requested,
            } => write!(
                f,
                "semaphore {path} has {recorded} permits recorded, but {requested} were asked for"
            ),
            Error::Zk { code, path } if path.is_empty() => {
                write!(f, "ZooKeeper error {code} ({})", code_name(*code))
            }
            Error::Zk { code, path } => {
                write!(f, "ZooKeeper error {code} ({}) on {path}", code_name(*code))
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Multi { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
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
}
