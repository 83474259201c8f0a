//! The one error type of the crate, with the server's error codes ([`ErrorCode`]) and the
//! record of a failed connect ([`ConnectAttempt`]).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Everything that can go wrong, in the caller's terms. Messages name the path involved.
///
/// Errors that have a cause (an I/O error, the failure at each server of a connect, the
/// failing operation of a multi) give it through
/// [`source`](std::error::Error::source). `Error` is `Clone` (an I/O cause is shared
/// through an [`Arc`]). Two errors are equal when they say the same thing: the same
/// variant and fields, I/O causes of the same kind and message.
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
#[derive(Debug, Clone)]
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
        source: Arc<io::Error>,
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
        source: Arc<io::Error>,
    },
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io {
            source: Arc::new(e),
        }
    }
}

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
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
            source: Arc::new(e),
        }
    }
}

/// Two I/O causes are equal when they are the same error or say the same thing (kind and
/// message); `io::Error` itself cannot be compared.
fn same_io(a: &Arc<io::Error>, b: &Arc<io::Error>) -> bool {
    Arc::ptr_eq(a, b) || (a.kind() == b.kind() && a.to_string() == b.to_string())
}

/// Errors are equal when they say the same thing: same variant, same fields, and I/O causes
/// of the same kind and message (an `io::Error` cannot be compared otherwise).
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        use Error as E;
        match (self, other) {
            (E::ConnectionLoss, E::ConnectionLoss)
            | (E::SessionExpired, E::SessionExpired)
            | (E::Closed, E::Closed)
            | (E::AuthFailed, E::AuthFailed) => true,
            (
                E::Timeout { op, path, after },
                E::Timeout {
                    op: o,
                    path: p,
                    after: a,
                },
            ) => (op, path, after) == (o, p, a),
            (E::NoAuth { path, op }, E::NoAuth { path: p, op: o }) => (path, op) == (p, o),
            (
                E::Connect { attempts, after },
                E::Connect {
                    attempts: t,
                    after: a,
                },
            ) => (attempts, after) == (t, a),
            (E::NoNode { path }, E::NoNode { path: p })
            | (E::NodeExists { path }, E::NodeExists { path: p })
            | (E::NotEmpty { path }, E::NotEmpty { path: p })
            | (E::BadVersion { path }, E::BadVersion { path: p })
            | (E::InvalidAcl { path }, E::InvalidAcl { path: p })
            | (E::NoChildrenForEphemerals { path }, E::NoChildrenForEphemerals { path: p })
            | (E::Cancelled { path }, E::Cancelled { path: p })
            | (E::LockLost { path }, E::LockLost { path: p })
            | (E::NotLeader { path }, E::NotLeader { path: p }) => path == p,
            (E::InvalidPath { path, reason }, E::InvalidPath { path: p, reason: r })
            | (E::ForeignNode { path, node: reason }, E::ForeignNode { path: p, node: r }) => {
                (path, reason) == (p, r)
            }
            (
                E::Malformed { op, path, reason },
                E::Malformed {
                    op: o,
                    path: p,
                    reason: r,
                },
            ) => (op, path, reason) == (o, p, r),
            (
                E::Spawn { thread, source },
                E::Spawn {
                    thread: t,
                    source: s,
                },
            ) => thread == t && same_io(source, s),
            (E::InvalidArgument { name, reason }, E::InvalidArgument { name: n, reason: r }) => {
                (name, reason) == (n, r)
            }
            (
                E::Multi { index, source },
                E::Multi {
                    index: i,
                    source: s,
                },
            ) => (index, source) == (i, s),
            (
                E::PermitMismatch {
                    path,
                    recorded,
                    requested,
                },
                E::PermitMismatch {
                    path: p,
                    recorded: r,
                    requested: q,
                },
            ) => (path, recorded, requested) == (p, r, q),
            (E::Zk { code, path }, E::Zk { code: c, path: p }) => (code, path) == (c, p),
            (E::Io { source }, E::Io { source: s }) => same_io(source, s),
            // Different variants. (A new variant needs its arm above: the unit test
            // `every_variant_equals_itself_and_io_causes_compare_by_kind_and_message` lists
            // one of each, and stops compiling until the new one is added there.)
            _ => false,
        }
    }
}

impl Eq for Error {}

/// Declares [`ErrorCode`] and its table: each code is written here once.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $text:literal;)*) => {
        /// A ZooKeeper server error code (`KeeperException.Code`), carried by
        /// [`Error::Zk`] for the codes that have no variant of their own.
        ///
        /// Codes this version does not know survive as [`ErrorCode::Unknown`];
        /// [`from_i32`](ErrorCode::from_i32) never returns `Unknown` for a code listed
        /// here, so matching on a named variant is enough. New ZooKeeper releases add codes,
        /// so the enum is `#[non_exhaustive]`.
        ///
        /// ```
        /// use zkguard::ErrorCode;
        ///
        /// assert_eq!(ErrorCode::from_i32(-118), ErrorCode::SessionMoved);
        /// assert_eq!(ErrorCode::SessionMoved.as_i32(), -118);
        /// assert_eq!(ErrorCode::SessionMoved.to_string(), "session moved");
        /// assert_eq!(ErrorCode::from_i32(-9999), ErrorCode::Unknown(-9999));
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* $name,)*
            /// A code this version of zkguard does not know, as the server sent it.
            Unknown(i32),
        }

        impl ErrorCode {
            /// Every code zkguard knows, in the order of the protocol's table.
            #[cfg(test)]
            pub(crate) const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            /// The code the server sends for `value`; [`ErrorCode::Unknown`] if this
            /// version does not know it.
            pub const fn from_i32(value: i32) -> ErrorCode {
                match value {
                    $($value => ErrorCode::$name,)*
                    other => ErrorCode::Unknown(other),
                }
            }

            /// The number on the wire.
            pub const fn as_i32(self) -> i32 {
                match self {
                    $(ErrorCode::$name => $value,)*
                    ErrorCode::Unknown(v) => v,
                }
            }

            /// What the code means, in a few words (its `Display`).
            pub const fn description(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => $text,)*
                    ErrorCode::Unknown(_) => "unknown error",
                }
            }
        }
    };
}

error_codes! {
    /// Success (not an error; it appears in replies and multi results).
    Ok = 0, "ok";
    /// A system error on the server.
    SystemError = -1, "system error";
    /// A runtime inconsistency was found (in a multi: an operation not applied because
    /// another one failed).
    RuntimeInconsistency = -2, "runtime inconsistency";
    /// A data inconsistency was found.
    DataInconsistency = -3, "data inconsistency";
    /// The connection to the server was lost.
    ConnectionLoss = -4, "connection loss";
    /// Error while marshalling or unmarshalling data.
    MarshallingError = -5, "marshalling error";
    /// The operation is not implemented by the server.
    Unimplemented = -6, "unimplemented (is the server too old for this operation?)";
    /// The operation timed out on the server.
    OperationTimeout = -7, "operation timeout";
    /// Invalid arguments.
    BadArguments = -8, "bad arguments";
    /// The session is unknown to the server.
    UnknownSession = -12, "unknown session";
    /// A new configuration has no quorum.
    NewConfigNoQuorum = -13, "new config has no quorum";
    /// Another reconfiguration is in progress.
    ReconfigInProgress = -14, "reconfiguration in progress";
    /// The generic API error (no server sends it; codes below it are API errors).
    ApiError = -100, "API error";
    /// The node does not exist.
    NoNode = -101, "no node";
    /// Not authorized by the node's ACL.
    NoAuth = -102, "not authorized";
    /// The node's version is not the expected one.
    BadVersion = -103, "bad version";
    /// Ephemeral nodes cannot have children.
    NoChildrenForEphemerals = -108, "ephemeral nodes cannot have children";
    /// The node already exists.
    NodeExists = -110, "node exists";
    /// The node has children.
    NotEmpty = -111, "node has children";
    /// The session has expired.
    SessionExpired = -112, "session expired";
    /// An invalid callback was given.
    InvalidCallback = -113, "invalid callback";
    /// The ACL is invalid.
    InvalidAcl = -114, "invalid ACL";
    /// Authentication failed.
    AuthFailed = -115, "authentication failed";
    /// The session moved to another server.
    SessionMoved = -118, "session moved";
    /// A state-changing request went to a read-only server.
    NotReadOnly = -119, "server is read-only";
    /// An ephemeral node was requested on a local session.
    EphemeralOnLocalSession = -120, "ephemeral on local session";
    /// No watcher to remove.
    NoWatcher = -121, "no watcher";
    /// The request did not complete in time on the server.
    RequestTimeout = -122, "request timeout";
    /// Dynamic reconfiguration is disabled.
    ReconfigDisabled = -123, "reconfiguration disabled";
    /// The session was closed because SASL authentication is required.
    SessionClosedRequireSaslAuth = -124, "session closed: SASL authentication required";
    /// A quota was exceeded.
    QuotaExceeded = -125, "quota exceeded";
    /// The server throttled the operation.
    Throttled = -127, "throttled";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

impl From<i32> for ErrorCode {
    fn from(value: i32) -> ErrorCode {
        ErrorCode::from_i32(value)
    }
}

impl From<ErrorCode> for i32 {
    fn from(code: ErrorCode) -> i32 {
        code.as_i32()
    }
}

/// One server of a failed connect ([`Error::Connect`]) and what went wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectAttempt {
    /// The server as written in the connect string (`host:port`).
    pub host: String,
    /// The address the failure happened at, once the name was resolved.
    pub addr: Option<SocketAddr>,
    /// What went wrong.
    pub reason: ConnectFailure,
}

impl ConnectAttempt {
    pub(crate) fn new(host: &str, addr: Option<SocketAddr>, reason: ConnectFailure) -> Self {
        ConnectAttempt {
            host: host.to_string(),
            addr,
            reason,
        }
    }
}

impl fmt::Display for ConnectAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            // The address only when it says more than the host.
            Some(addr) if addr.to_string() != self.host => {
                write!(f, "{} ({addr}: {})", self.host, self.reason)
            }
            Some(_) => write!(f, "{} ({})", self.host, self.reason),
            None => write!(f, "{} ({})", self.host, self.reason),
        }
    }
}

/// Why one server of a connect gave no session ([`ConnectAttempt::reason`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// No attempt at this server had failed by the connect deadline: it was not tried yet,
    /// or its attempt (TCP connect or handshake) was still under way.
    NotReached,
    /// Its name could not be resolved.
    Resolve(Arc<io::Error>),
    /// Its name resolves to no address.
    NoAddress,
    /// An I/O error: the TCP connect was refused or timed out, or the connection broke
    /// during the handshake.
    Io {
        /// The step that failed (`"connect"`, `"handshake"`, `"auth"`, …).
        during: &'static str,
        /// The I/O error.
        source: Arc<io::Error>,
    },
    /// The server's handshake reply (or a frame right after it) could not be decoded.
    Malformed(String),
    /// The server refused to open a new session (a zero session timeout in its reply).
    SessionRefused,
    /// The server rejected the credentials (the client is closed then).
    AuthFailed,
    /// The TLS handshake failed: the server's certificate is not signed by a trusted
    /// authority, is for another name or has expired; the server refused ours (mutual
    /// TLS); or the port does not speak TLS. The reason says which.
    Tls {
        /// What went wrong, in words.
        reason: String,
    },
    /// The SASL login could not be carried out with this server: it does not offer
    /// DIGEST-MD5 (no JAAS `Server` section), or it could not prove that it knows the
    /// password. (A server that refuses the password is [`ConnectFailure::AuthFailed`].)
    Sasl {
        /// What went wrong, in words.
        reason: String,
    },
}

impl ConnectFailure {
    /// A failure that retrying the same server cannot cure (a rejected certificate or
    /// credentials), as opposed to one that may pass (a refused or broken connection).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            ConnectFailure::Tls { .. } | ConnectFailure::Sasl { .. } | ConnectFailure::AuthFailed
        )
    }
}

/// I/O causes compare by kind and message (see [`Error`]'s `PartialEq`).
impl PartialEq for ConnectFailure {
    fn eq(&self, other: &ConnectFailure) -> bool {
        use ConnectFailure as F;
        match (self, other) {
            (F::NotReached, F::NotReached)
            | (F::NoAddress, F::NoAddress)
            | (F::SessionRefused, F::SessionRefused)
            | (F::AuthFailed, F::AuthFailed) => true,
            (F::Resolve(a), F::Resolve(b)) => same_io(a, b),
            (F::Tls { reason: a }, F::Tls { reason: b })
            | (F::Sasl { reason: a }, F::Sasl { reason: b }) => a == b,
            (
                F::Io { during, source },
                F::Io {
                    during: d,
                    source: s,
                },
            ) => during == d && same_io(source, s),
            (F::Malformed(a), F::Malformed(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for ConnectFailure {}

impl ConnectFailure {
    pub(crate) fn io(during: &'static str, e: io::Error) -> Self {
        ConnectFailure::Io {
            during,
            source: Arc::new(e),
        }
    }
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectFailure::NotReached => write!(f, "not reached before the deadline"),
            ConnectFailure::Resolve(e) => write!(f, "cannot resolve: {e}"),
            ConnectFailure::NoAddress => write!(f, "resolves to no address"),
            ConnectFailure::Io {
                during: "connect",
                source,
            } => write!(f, "{source}"),
            ConnectFailure::Io { during, source } => write!(f, "during the {during}: {source}"),
            ConnectFailure::Malformed(why) => write!(f, "malformed handshake reply: {why}"),
            ConnectFailure::SessionRefused => write!(f, "server refused a new session"),
            ConnectFailure::AuthFailed => write!(f, "authentication failed"),
            ConnectFailure::Tls { reason } => write!(f, "TLS handshake failed: {reason}"),
            ConnectFailure::Sasl { reason } => write!(f, "SASL login failed: {reason}"),
        }
    }
}

impl std::error::Error for ConnectFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectFailure::Resolve(e) | ConnectFailure::Io { source: e, .. } => Some(e.as_ref()),
            _ => None,
        }
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
            Error::Connect { attempts, after } => {
                let unresolved = !attempts.is_empty()
                    && attempts.iter().all(|a| {
                        matches!(a.reason, ConnectFailure::Resolve(_) | ConnectFailure::NoAddress)
                    });
                if unresolved {
                    write!(f, "no server of the connect string resolves to an address: ")?;
                } else {
                    write!(f, "no ZooKeeper session within {after:?}; servers tried: ")?;
                }
                for (i, a) in attempts.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{a}")?;
                }
                Ok(())
            }
            Error::NoNode { path } => write!(f, "node {path} does not exist"),
            Error::NodeExists { path } => write!(f, "node {path} already exists"),
            Error::NotEmpty { path } => write!(f, "node {path} has children"),
            Error::BadVersion { path } => write!(f, "node {path} has another version"),
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
                write!(f, "not authorized: the ACL of node {path} does not allow {what}")
            }
            Error::InvalidAcl { path } => write!(f, "invalid ACL for node {path}"),
            Error::NoChildrenForEphemerals { path } => {
                write!(f, "cannot create {path}: its parent is ephemeral")
            }
            Error::AuthFailed => write!(f, "ZooKeeper authentication failed"),
            Error::InvalidPath { path, reason } => write!(f, "invalid path {path:?}: {reason}"),
            Error::Malformed { op, path, reason } if path.is_empty() => {
                write!(f, "malformed {op} reply: {reason}")
            }
            Error::Malformed { op, path, reason } => {
                write!(f, "malformed {op} reply for {path}: {reason}")
            }
            Error::Spawn { thread, source } => write!(f, "cannot start the {thread}: {source}"),
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
                write!(f, "ZooKeeper error {} ({code})", code.as_i32())
            }
            Error::Zk { code, path } => {
                write!(f, "ZooKeeper error {} ({code}) on {path}", code.as_i32())
            }
            Error::Io { source } => write!(f, "{source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Multi { source, .. } => Some(source.as_ref()),
            Error::Spawn { source, .. } => Some(source.as_ref()),
            // Transparent: it reads as the I/O error, so the chain goes on with its cause.
            Error::Io { source } => source.source(),
            // The last attempt's cause: its I/O error if it has one, else the failure itself.
            Error::Connect { attempts, .. } => attempts.last().map(|a| {
                let reason: &(dyn std::error::Error + 'static) = &a.reason;
                reason.source().unwrap_or(reason)
            }),
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

    #[test]
    fn every_code_round_trips_and_has_a_name() {
        let mut seen = std::collections::HashSet::new();
        for &code in ErrorCode::ALL {
            let n = code.as_i32();
            assert!(seen.insert(n), "{n} is listed twice");
            assert_eq!(ErrorCode::from_i32(n), code);
            assert_eq!(ErrorCode::from(n), code);
            assert_eq!(i32::from(code), n);
            assert!(!matches!(code, ErrorCode::Unknown(_)));
            assert_ne!(code.to_string(), "unknown error", "{code:?}");
            assert_eq!(code.to_string(), code.description());
        }
        // KeeperException.Code has 32 codes (OK included) in ZooKeeper 3.8.
        assert_eq!(ErrorCode::ALL.len(), 32);
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

    #[test]
    fn the_protocol_constants_come_from_the_table() {
        use crate::client::proto::code;
        assert_eq!(code::OK, 0);
        assert_eq!(code::RUNTIME_INCONSISTENCY, -2);
        assert_eq!(code::NO_NODE, -101);
        assert_eq!(code::SESSION_EXPIRED, -112);
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
    fn connect_error_names_every_server_and_gives_the_last_cause() {
        use std::error::Error as _;
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let e = Error::Connect {
            attempts: vec![
                ConnectAttempt::new("zk3:2181", None, ConnectFailure::NotReached),
                ConnectAttempt::new("zk2:2181", None, ConnectFailure::SessionRefused),
                ConnectAttempt::new(
                    "localhost:1",
                    Some(addr),
                    ConnectFailure::io("connect", refused()),
                ),
            ],
            after: Duration::from_secs(2),
        };
        assert_eq!(
            e.to_string(),
            "no ZooKeeper session within 2s; servers tried: zk3:2181 (not reached before the \
             deadline), zk2:2181 (server refused a new session), localhost:1 (127.0.0.1:1: \
             Connection refused)"
        );
        let cause = e.source().expect("a cause");
        let io = cause.downcast_ref::<io::Error>().expect("an io::Error");
        assert_eq!(io.kind(), io::ErrorKind::ConnectionRefused);

        // A host that is its address is not repeated; names that resolve nowhere are not
        // a deadline that passed.
        let e = Error::Connect {
            attempts: vec![ConnectAttempt::new(
                "127.0.0.1:1",
                Some(addr),
                ConnectFailure::io("connect", refused()),
            )],
            after: Duration::from_secs(15),
        };
        assert_eq!(
            e.to_string(),
            "no ZooKeeper session within 15s; servers tried: 127.0.0.1:1 (Connection refused)"
        );
        let e = Error::Connect {
            attempts: vec![
                ConnectAttempt::new(
                    "nosuch.invalid:2181",
                    None,
                    ConnectFailure::Resolve(Arc::new(io::Error::other(
                        "Name or service not known",
                    ))),
                ),
                ConnectAttempt::new("empty.invalid:2181", None, ConnectFailure::NoAddress),
            ],
            after: Duration::ZERO,
        };
        assert_eq!(
            e.to_string(),
            "no server of the connect string resolves to an address: nosuch.invalid:2181 \
             (cannot resolve: Name or service not known), empty.invalid:2181 (resolves to no \
             address)"
        );

        // A last attempt without an I/O cause gives the failure itself.
        let e = Error::Connect {
            attempts: vec![ConnectAttempt::new(
                "zk:2181",
                None,
                ConnectFailure::SessionRefused,
            )],
            after: Duration::from_secs(1),
        };
        let cause = e.source().expect("a cause");
        assert!(matches!(
            cause.downcast_ref::<ConnectFailure>(),
            Some(ConnectFailure::SessionRefused)
        ));

        // Handshake-phase failures say which step broke.
        let f = ConnectFailure::io(
            "handshake",
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ),
        );
        assert_eq!(
            f.to_string(),
            "during the handshake: the server closed the connection"
        );
        assert_eq!(
            f.source()
                .and_then(|s| s.downcast_ref::<io::Error>())
                .map(io::Error::kind),
            Some(io::ErrorKind::UnexpectedEof)
        );
        assert!(ConnectFailure::Malformed("x".into()).source().is_none());
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
            Error::PermitMismatch {
                path: p(),
                recorded: 1,
                requested: 2,
            },
            Error::Zk {
                code: ErrorCode::SessionMoved,
                path: p(),
            },
            Error::from(refused()),
        ];
        // No wildcard: a new variant stops this from compiling until it is listed above (and
        // given its arm in `PartialEq`).
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
}
