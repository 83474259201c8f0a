//! The one error type of the crate, with the server's error codes ([`ErrorCode`], in
//! `code.rs`), the record of a failed connect ([`ConnectAttempt`], in `connect.rs`) and the
//! comparable I/O cause both carry ([`IoCause`], in `cause.rs`).

use std::fmt;
use std::io;
use std::time::Duration;

mod cause;
mod code;
mod connect;
mod escape;
#[cfg(test)]
mod tests;

pub use cause::IoCause;
pub use code::ErrorCode;
pub use connect::{ConnectAttempt, ConnectFailure, KerberosCause};
pub use escape::{escape, escape_bytes};

/// Everything that can go wrong, in the caller's terms. Messages name the path involved.
///
/// Errors that have a cause (an I/O error, the failure at each server of a connect, the
/// failing operation of a multi) give it through
/// [`source`](std::error::Error::source). `Error` is `Clone` (an I/O cause is shared:
/// see [`IoCause`]). Two errors are equal when they say the same thing: the same variant
/// and fields, I/O causes of the same kind and message.
///
/// # Examples
///
/// Matching on a variant, and on the [`ErrorCode`] of an error the crate has no variant
/// for:
///
/// ```no_run
/// use zkguard::{Client, Error, ErrorCode};
///
/// let client = Client::connect("127.0.0.1:2181")?;
/// match client.get_data("/config") {
///     Ok((data, _stat)) => println!("{} bytes", data.len()),
///     Err(Error::NoNode { path }) => println!("{path} is not there yet"),
///     Err(e) if e.is_connection_error() => println!("try again later: {e}"),
///     Err(Error::Zk { code: ErrorCode::QuotaExceeded, path }) => {
///         println!("{path}: over quota")
///     }
///     Err(Error::Zk { code, .. }) if code.as_i32() == -127 => println!("throttled"),
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), zkguard::Error>(())
/// ```
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
    /// No session could be established before the connect deadline. Its
    /// [`source`](std::error::Error::source) is the cause of the last failed attempt.
    Connect {
        /// Every server of the connect string, each with what went wrong there; the last
        /// one failed last.
        attempts: Vec<ConnectAttempt>,
        /// The connect deadline (zero when no server name could be resolved at all).
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
    /// A node's ACL does not allow this session the operation.
    NoAuth {
        /// The node whose ACL refused: for a create or a delete, the *parent* of the node
        /// created or deleted (ZooKeeper checks CREATE and DELETE on the parent); for other
        /// operations the node itself.
        path: String,
        /// The operation refused (`create`, `delete`, `set_data`, `get_data`,
        /// `get_children`, ...).
        op: &'static str,
    },
    /// The server does not implement the operation: it is older than the release named
    /// (`whoAmI`, [`Client::who_am_i`](crate::Client::who_am_i), needs ZooKeeper 3.7.0). The
    /// server answered `unimplemented` and changed nothing; the session goes on.
    ///
    /// ```
    /// use zkguard::{Error, ErrorCode};
    /// # fn check(e: Error) {
    /// if let Error::ServerTooOld { op, needs } = &e {
    ///     eprintln!("{op} needs ZooKeeper {needs} or later");
    /// }
    /// assert_eq!(e.code(), Some(ErrorCode::Unimplemented));
    /// # }
    /// # check(Error::ServerTooOld { op: "who_am_i", needs: "3.7.0" });
    /// ```
    ServerTooOld {
        /// The operation (`who_am_i`).
        op: &'static str,
        /// The oldest ZooKeeper release that implements it (`"3.7.0"`).
        needs: &'static str,
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
    /// The server sent a reply zkguard cannot decode (a bug of the server or of something
    /// between it and us). Only this request fails.
    Malformed {
        /// The request whose reply it was.
        op: &'static str,
        /// The node involved, if any.
        path: String,
        /// What is wrong with the reply.
        reason: String,
    },
    /// A thread the crate needs could not be started. Its
    /// [`source`](std::error::Error::source) is the operating system's error.
    Spawn {
        /// Which thread (for example `"connection thread"`).
        thread: &'static str,
        /// Why it could not be started.
        source: IoCause,
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
    /// The lock directory holds a node that no recipe made: its name has no sequence number
    /// or an unknown layout, or (found when a waiter reaches it) it is a persistent node
    /// ahead in the queue, which no session owns and so nobody would ever release. It is
    /// left alone; remove it or use another path.
    ForeignNode {
        /// The lock directory.
        path: String,
        /// The unexpected child's name.
        node: String,
    },
    /// A recipe whose ACL keeps others out (see
    /// [`NodeAcl::keeps_others_out`](crate::NodeAcl::keeps_others_out)) was to queue in a
    /// directory whose ACL lets identities it does not trust create or delete nodes there, or
    /// change the ACL: any of them could delete a held node and let a second holder in. The
    /// acquire's node was deleted again; nothing of it is left. Create the directory yourself
    /// (or let the recipe create it) with a restrictive ACL, trust the identities if they are
    /// yours ([`NodeAcl::trusting`](crate::NodeAcl::trusting)), or use the open ACL.
    UntrustedDirectory {
        /// The directory (for an unfair lock or election, the parent of its path).
        path: String,
        /// The directory's whole ACL, as the server keeps it, an entry a string
        /// (`world:anyone cdrwa`: scheme, id, and the permissions `getAcl` shows).
        acl: Vec<String>,
        /// The entries that let the untrusted identities in, written the same way.
        untrusted: Vec<String>,
    },
    /// A node this session had just created, to learn from its ACL who the session is (see
    /// [`Client::own_identities`](crate::Client::own_identities)), was not the node read
    /// back: it was deleted, or another node (another creation zxid or owner session) took
    /// its path in between. Someone else may delete and create in the directory; nothing
    /// was learned from the node (a recipe's acquire ends so, its node deleted if it is
    /// still ours). Use a directory only this identity may create and delete in.
    NotOurNode {
        /// The directory the node was created in.
        path: String,
        /// The node created, and then not found as created.
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
        /// The ZooKeeper error code.
        code: ErrorCode,
        /// The node involved, if any.
        path: String,
    },
    /// An I/O error from outside the client, converted with `?` (`From<io::Error>`): the
    /// `testing` harness's, or a program's own, in a function returning
    /// [`zkguard::Result`](Result). The client itself never returns it (its I/O errors are
    /// connection losses, or the causes of [`Error::Connect`] and [`Error::Spawn`]). It
    /// reads as the I/O error itself, and its [`source`](std::error::Error::source) is
    /// that error's.
    ///
    /// ```no_run
    /// # #[cfg(feature = "testing")]
    /// fn main() -> zkguard::Result<()> {
    ///     let cluster = zkguard::testing::TestCluster::start(1)?; // an io::Error converts
    ///     let client = zkguard::Client::connect(&cluster.connect_string())?;
    ///     client.ensure_path("/app")?;
    ///     Ok(())
    /// }
    /// # #[cfg(not(feature = "testing"))] fn main() {}
    /// ```
    Io {
        /// The I/O error.
        source: IoCause,
    },
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io { source: e.into() }
    }
}

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An acquire of `path` was cancelled: the one place this error is built.
    pub(crate) fn cancelled(path: &str) -> Error {
        Error::Cancelled {
            path: path.to_string(),
        }
    }

    /// Whether the outcome of the request is unknown because the connection dropped or the
    /// deadline passed (it may have been applied). Recipes retry such requests idempotently.
    pub fn is_connection_error(&self) -> bool {
        matches!(self, Error::ConnectionLoss | Error::Timeout { .. })
    }

    /// The ZooKeeper error code this error stands for (`KeeperException.Code`): the code of
    /// [`Error::Zk`], and of the variants named after a code ([`Error::NoNode`] is
    /// [`ErrorCode::NoNode`], [`Error::Timeout`] is [`ErrorCode::RequestTimeout`],
    /// [`Error::Malformed`] is [`ErrorCode::MarshallingError`], a multi's is its failing
    /// operation's, …); `None` for errors found on the client side that ZooKeeper has no
    /// code for (closed, invalid arguments, lock recipe errors, …).
    ///
    /// ```
    /// use zkguard::{Error, ErrorCode};
    ///
    /// let e = Error::NoNode { path: "/a".into() };
    /// assert_eq!(e.code(), Some(ErrorCode::NoNode));
    /// assert_eq!(Error::Closed.code(), None);
    /// ```
    pub fn code(&self) -> Option<ErrorCode> {
        Some(match self {
            Error::ConnectionLoss => ErrorCode::ConnectionLoss,
            Error::Timeout { .. } => ErrorCode::RequestTimeout,
            Error::SessionExpired => ErrorCode::SessionExpired,
            Error::NoNode { .. } => ErrorCode::NoNode,
            Error::NodeExists { .. } => ErrorCode::NodeExists,
            Error::NotEmpty { .. } => ErrorCode::NotEmpty,
            Error::BadVersion { .. } => ErrorCode::BadVersion,
            Error::NoAuth { .. } => ErrorCode::NoAuth,
            Error::ServerTooOld { .. } => ErrorCode::Unimplemented,
            Error::InvalidAcl { .. } => ErrorCode::InvalidAcl,
            Error::NoChildrenForEphemerals { .. } => ErrorCode::NoChildrenForEphemerals,
            Error::AuthFailed => ErrorCode::AuthFailed,
            Error::Malformed { .. } => ErrorCode::MarshallingError,
            Error::Zk { code, .. } => *code,
            Error::Multi { source, .. } => return source.code(),
            _ => return None,
        })
    }

    /// Maps a server error code to an error naming `path`.
    pub(crate) fn from_code(code: i32, path: &str) -> Error {
        Error::from_reply(code, "", path)
    }

    /// Maps a server's answer `code` to operation `op` on `path` to an error. A refusal by
    /// an ACL names the node whose ACL refused: the parent for a create or a delete.
    pub(crate) fn from_reply(code: i32, op: &'static str, path: &str) -> Error {
        if code == ErrorCode::NoAuth.as_i32() {
            let judge = match op {
                "create" | "delete" => match path.rfind('/') {
                    Some(0) => "/",
                    Some(i) => &path[..i],
                    None => path,
                },
                _ => path,
            };
            return Error::NoAuth {
                path: judge.to_string(),
                op,
            };
        }
        if code == ErrorCode::Unimplemented.as_i32() {
            if let Some(needs) = needs_release(op) {
                return Error::ServerTooOld { op, needs };
            }
        }
        let path = path.to_string();
        match ErrorCode::from_i32(code) {
            ErrorCode::ConnectionLoss => Error::ConnectionLoss,
            ErrorCode::SessionExpired => Error::SessionExpired,
            ErrorCode::NoNode => Error::NoNode { path },
            ErrorCode::NodeExists => Error::NodeExists { path },
            ErrorCode::NotEmpty => Error::NotEmpty { path },
            ErrorCode::BadVersion => Error::BadVersion { path },
            ErrorCode::NoAuth => Error::NoAuth { path, op: "" },
            ErrorCode::InvalidAcl => Error::InvalidAcl { path },
            ErrorCode::NoChildrenForEphemerals => Error::NoChildrenForEphemerals { path },
            ErrorCode::AuthFailed => Error::AuthFailed,
            code => Error::Zk { code, path },
        }
    }

    /// A thread the crate needs could not be started.
    pub(crate) fn spawn(thread: &'static str, e: io::Error) -> Error {
        Error::Spawn {
            thread,
            source: e.into(),
        }
    }
}

/// The oldest ZooKeeper release that implements operation `op`, for the operations the
/// client sends that a release zkguard supports (3.5 and later) may not know. Only these
/// turn an `unimplemented` answer into [`Error::ServerTooOld`].
fn needs_release(op: &str) -> Option<&'static str> {
    match op {
        "who_am_i" => Some("3.7.0"),
        _ => None,
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
                write!(f, "{op} {} timed out after {after:?}", escape(path))
            }
            Error::Closed => write!(f, "the ZooKeeper client is closed"),
            Error::Connect { attempts, after } => {
                let unresolved = !attempts.is_empty()
                    && attempts.iter().all(|a| {
                        matches!(
                            a.reason,
                            ConnectFailure::Resolve(_) | ConnectFailure::NoAddress
                        )
                    });
                // Every server said no for good (the connect ends at once, so its time says
                // nothing): name the refusal, not a deadline.
                let refused =
                    !attempts.is_empty() && attempts.iter().all(|a| a.reason.is_permanent());
                let login = attempts.iter().any(|a| a.reason.is_login());
                if unresolved {
                    write!(
                        f,
                        "no server of the connect string resolves to an address: "
                    )?;
                } else if refused && login {
                    write!(f, "ZooKeeper refused the login; servers tried: ")?;
                } else if refused {
                    write!(f, "every server refused the TLS handshake; servers tried: ")?;
                } else {
                    write!(f, "no ZooKeeper session within {after:?}; servers tried: ")?;
                }
                for (i, a) in attempts.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{a}")?;
                }
                Ok(())
            }
            Error::NoNode { path } => write!(f, "node {} does not exist", escape(path)),
            Error::NodeExists { path } => write!(f, "node {} already exists", escape(path)),
            Error::NotEmpty { path } => write!(f, "node {} has children", escape(path)),
            Error::BadVersion { path } => write!(f, "node {} has another version", escape(path)),
            Error::ServerTooOld { op, needs } => write!(
                f,
                "{op} needs ZooKeeper {needs} or later: the server answered that it does not \
                 implement it"
            ),
            Error::NoAuth { path, op } => {
                let what = match *op {
                    "create" => "creating children",
                    "delete" => "deleting children",
                    "set_data" => "writing its data",
                    "get_data" => "reading its data",
                    "get_children" => "listing its children",
                    "" => "this operation",
                    other => other,
                };
                write!(
                    f,
                    "not authorized: the ACL of node {} does not allow {what}",
                    escape(path)
                )
            }
            Error::InvalidAcl { path } => write!(f, "invalid ACL for node {}", escape(path)),
            Error::NoChildrenForEphemerals { path } => {
                write!(f, "cannot create {}: its parent is ephemeral", escape(path))
            }
            Error::AuthFailed => write!(f, "ZooKeeper authentication failed"),
            Error::InvalidPath { path, reason } => {
                write!(f, "invalid path \"{}\": {reason}", escape(path))
            }
            Error::Malformed { op, path, reason } if path.is_empty() => {
                write!(f, "malformed {op} reply: {}", escape(reason))
            }
            Error::Malformed { op, path, reason } => {
                write!(
                    f,
                    "malformed {op} reply for {}: {}",
                    escape(path),
                    escape(reason)
                )
            }
            Error::Spawn { thread, source } => write!(f, "cannot start the {thread}: {source}"),
            Error::InvalidArgument { name, reason } => write!(f, "invalid {name}: {reason}"),
            Error::Multi { index, source } => {
                write!(f, "multi failed at operation {index}: {source}")
            }
            Error::Cancelled { path } => write!(f, "acquire of {} was cancelled", escape(path)),
            Error::LockLost { path } => write!(f, "lock {} was lost", escape(path)),
            Error::NotLeader { path } => write!(f, "not the leader of election {}", escape(path)),
            Error::ForeignNode { path, node } => write!(
                f,
                "lock directory {} holds \"{}\", a node no lock recipe made (recipes make \
                 ephemeral nodes with sequence numbers), which would block the queue forever; it \
                 was left alone: delete it, or use another path",
                escape(path),
                escape(node)
            ),
            Error::UntrustedDirectory {
                path,
                acl,
                untrusted,
            } => {
                write!(
                    f,
                    "refusing to queue in {}: its ACL lets others in ({}), so they could \
                     delete a held node and take the lock while it is held (whole ACL: {}); \
                     nothing was left there. Use a directory only this identity may create \
                     and delete in: let zkguard create it (a new path, or delete this one), \
                     create it yourself with a restrictive ACL, or for an unfair lock or \
                     election put its path under such a directory; trust those identities if \
                     they are yours (NodeAcl::trusting, --trust), or use the open ACL",
                    escape(path),
                    escape(&untrusted.join(", ")),
                    escape(&acl.join(", "))
                )?;
                let hidden = |a: &String| {
                    a.starts_with("digest:")
                        && a.split(' ').next().is_some_and(|i| i.ends_with(":x"))
                };
                if untrusted.iter().any(hidden) {
                    write!(
                        f,
                        " (ZooKeeper hides digest identities as USER:x from sessions without \
                         ADMIN on {}: give this identity ADMIN there to tell them apart)",
                        escape(path)
                    )?;
                }
                Ok(())
            }
            Error::NotOurNode { path, node } => write!(
                f,
                "cannot learn who this session is in {}: the node {} it had just created there \
                 was deleted or replaced (another creation zxid or owner session) before its \
                 ACL was read back, so someone else may delete and create in {0}; nothing was \
                 learned from it. Use a directory only this identity may create and delete in",
                escape(path),
                escape(node)
            ),
            Error::PermitMismatch {
                path,
                recorded,
                requested,
            } => write!(
                f,
                "semaphore {} has {recorded} permits recorded, but {requested} were asked for",
                escape(path)
            ),
            Error::Zk { code, path } if path.is_empty() => {
                write!(f, "ZooKeeper error {} ({code})", code.as_i32())
            }
            Error::Zk { code, path } => {
                write!(
                    f,
                    "ZooKeeper error {} ({code}) on {}",
                    code.as_i32(),
                    escape(path)
                )
            }
            Error::Io { source } => write!(f, "{source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Multi { source, .. } => Some(source.as_ref()),
            Error::Spawn { source, .. } => Some(source.get_ref()),
            // Transparent: it reads as the I/O error, so the chain goes on with its cause.
            Error::Io { source } => source.get_ref().source(),
            // The last attempt's cause: its I/O error if it has one, else the failure itself.
            Error::Connect { attempts, .. } => attempts.last().map(|a| {
                let reason: &(dyn std::error::Error + 'static) = &a.reason;
                reason.source().unwrap_or(reason)
            }),
            _ => None,
        }
    }
}
