//! Values exchanged with the server: node metadata, create modes, ACLs, events.

use std::time::Duration;

mod fmt;
pub(crate) use fmt::Hex;

/// A node's metadata, as ZooKeeper reports it (`Stat`). Its `Debug` shows
/// `ephemeral_owner`, a session id, in hex as every session id the crate writes.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stat {
    /// Transaction id of the create. Grows with every later create anywhere in the ensemble,
    /// which makes it a sound fencing token for a lock node; [`Stat::token`] gives it as
    /// the `u64` the guards' tokens are.
    pub czxid: i64,
    /// Transaction id of the last data change.
    pub mzxid: i64,
    /// Creation time, milliseconds since the epoch (server clock).
    pub ctime: i64,
    /// Last modification time, milliseconds since the epoch (server clock).
    pub mtime: i64,
    /// Data version (number of data changes).
    pub version: i32,
    /// Children version (number of child changes).
    pub cversion: i32,
    /// ACL version.
    pub aversion: i32,
    /// Session id of the owner if the node is ephemeral, otherwise 0.
    pub ephemeral_owner: i64,
    /// Length of the node's data in bytes.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
    /// Transaction id of the last change to the children.
    pub pzxid: i64,
}

impl Stat {
    /// The node's creation zxid as the crate's fencing tokens are written: a `u64`, the
    /// type of every guard's [`token`](crate::Guard::token), a
    /// [`LeaderTerm`](crate::LeaderTerm)'s and [`LeaderEvent::Elected`](crate::LeaderEvent)'s.
    /// A lock's node read with [`Client::get_data`](crate::Client::get_data) or
    /// [`exists`](crate::Client::exists) has `stat.token() == guard.token()` for as long as
    /// the guard's node is there (ZooKeeper's wire format has `czxid` signed; zxids are
    /// never negative, so nothing is lost).
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client, guard: &zkguard::MutexGuard) -> zkguard::Result<()> {
    /// let stat = client.exists(guard.path())?.expect("held");
    /// assert_eq!(stat.token(), guard.token());
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> u64 {
        u64::try_from(self.czxid).unwrap_or(0)
    }
}

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Stays until deleted.
    Persistent,
    /// Persistent, with a 10-digit monotonically increasing suffix appended to the name.
    PersistentSequential,
    /// Deleted by the server when the creating session ends.
    Ephemeral,
    /// Ephemeral, with a sequence suffix.
    EphemeralSequential,
    /// Deleted by the server some time after its last child is gone (ZooKeeper 3.5.3+). Sent
    /// with the container op code, so it really is a container.
    Container,
    /// Persistent, deleted by the server when it has had no children and no changes for the
    /// given time. Needs `extendedTypesEnabled=true` on the server.
    PersistentWithTtl(Duration),
    /// Like [`CreateMode::PersistentWithTtl`], with a sequence suffix.
    PersistentSequentialWithTtl(Duration),
}

impl CreateMode {
    /// The wire flag value.
    pub(crate) fn flag(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::Ephemeral => 1,
            CreateMode::PersistentSequential => 2,
            CreateMode::EphemeralSequential => 3,
            CreateMode::Container => 4,
            CreateMode::PersistentWithTtl(_) => 5,
            CreateMode::PersistentSequentialWithTtl(_) => 6,
        }
    }

    /// Whether the server appends a sequence number.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl(_)
        )
    }

    /// Whether the node goes away with the session.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    pub(crate) fn ttl(self) -> Option<Duration> {
        match self {
            CreateMode::PersistentWithTtl(t) | CreateMode::PersistentSequentialWithTtl(t) => {
                Some(t)
            }
            _ => None,
        }
    }
}

/// Permission bits of an [`Acl`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Perms(u32);

impl Perms {
    /// Read data and list children.
    pub const READ: Perms = Perms(1);
    /// Set data.
    pub const WRITE: Perms = Perms(2);
    /// Create children.
    pub const CREATE: Perms = Perms(4);
    /// Delete children.
    pub const DELETE: Perms = Perms(8);
    /// Change the ACL.
    pub const ADMIN: Perms = Perms(16);
    /// Everything.
    pub const ALL: Perms = Perms(31);

    /// The raw bit mask.
    pub fn bits(self) -> u32 {
        self.0
    }
    /// Permissions from a raw bit mask (unknown bits are kept; the server judges them).
    pub fn from_bits(bits: u32) -> Perms {
        Perms(bits)
    }
    /// Whether every bit of `other` is set here.
    pub fn contains(self, other: Perms) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Perms {
    type Output = Perms;
    fn bitor(self, rhs: Perms) -> Perms {
        Perms(self.0 | rhs.0)
    }
}

/// One access-control entry: who (`scheme`:`id`) may do what (`perms`).
///
/// ```no_run
/// use zkguard::{Acl, Client, CreateMode, Perms};
/// # fn main() -> zkguard::Result<()> {
/// // Only the session that authenticated as `app` may change the node; everyone may read.
/// let client = Client::builder("127.0.0.1:2181").auth("digest", b"app:secret").build()?;
/// let mut acl = Acl::creator_all();
/// acl.push(Acl::new(Perms::READ, "world", "anyone"));
/// client.create_with_acl("/config", b"v1", CreateMode::Persistent, &acl)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    /// What the identity may do.
    pub perms: Perms,
    /// Auth scheme: `world`, `auth`, `digest`, `ip`, ...
    pub scheme: String,
    /// Identity within the scheme (`anyone` for `world`).
    pub id: String,
}

impl Acl {
    /// Any permissions for one identity.
    pub fn new(perms: Perms, scheme: impl Into<String>, id: impl Into<String>) -> Acl {
        Acl {
            perms,
            scheme: scheme.into(),
            id: id.into(),
        }
    }
    /// Everyone may do everything (`world:anyone`, all). ZooKeeper's `OPEN_ACL_UNSAFE`.
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl::new(Perms::ALL, "world", "anyone")]
    }
    /// Only the identities this session authenticated as (see
    /// [`ClientBuilder::auth`](crate::ClientBuilder::auth)) may do anything. ZooKeeper's
    /// `CREATOR_ALL_ACL`; the create fails with an invalid-ACL error if the session has no
    /// authenticated identity.
    pub fn creator_all() -> Vec<Acl> {
        vec![Acl::new(Perms::ALL, "auth", "")]
    }
    /// Everyone may read, nobody may change. ZooKeeper's `READ_ACL_UNSAFE`.
    pub fn read_unsafe() -> Vec<Acl> {
        vec![Acl::new(Perms::READ, "world", "anyone")]
    }
}

/// `scheme:id` and the permissions as `getAcl` letters: `world:anyone cdrwa`.
impl std::fmt::Display for Acl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bits = [
            (Perms::CREATE, 'c'),
            (Perms::DELETE, 'd'),
            (Perms::READ, 'r'),
            (Perms::WRITE, 'w'),
            (Perms::ADMIN, 'a'),
        ];
        let letters: String = bits
            .iter()
            .filter(|(b, _)| self.perms.contains(*b))
            .map(|(_, c)| *c)
            .collect();
        write!(f, "{}:{} {letters}", self.scheme, self.id)
    }
}

/// One identity a session carries, as the server's `whoAmI` reports it (ZooKeeper 3.7+,
/// [`Client::who_am_i`](crate::Client::who_am_i)): the scheme (`ip`, `digest`, `sasl`,
/// `x509` …) and the identity within it, written as an ACL would name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Identity {
    /// The auth scheme: `ip`, `digest`, `sasl`, `x509`, `super` …
    pub scheme: String,
    /// The identity within the scheme: an address for `ip`, the user for `digest` and
    /// `sasl`, the certificate's subject for `x509`.
    pub id: String,
}

/// `scheme:id`, as an ACL entry names the identity.
impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.scheme, self.id)
    }
}

/// The result of a create.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Created {
    /// The path of the created node (with its sequence suffix for sequential modes), relative
    /// to the client's chroot.
    pub path: String,
    /// The new node's metadata (from `create2`, no extra round trip). `stat.czxid` is the
    /// fencing token of a lock node.
    pub stat: Stat,
}

/// What a watch reports. A watch fires once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventType {
    /// The node was created (exists watches).
    NodeCreated,
    /// The node was deleted.
    NodeDeleted,
    /// The node's data changed.
    NodeDataChanged,
    /// A child was added or removed.
    NodeChildrenChanged,
    /// The session the watch belonged to is lost (expired on the server, or its timeout
    /// passed without contact). The watch will never fire; look again on the new session.
    SessionLost,
    /// The client was closed.
    Closed,
}

/// A watch notification.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WatchedEvent {
    /// What happened.
    pub event_type: EventType,
    /// The watched path (relative to the chroot).
    pub path: String,
}

/// The client's view of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionState {
    /// Connected to a server; the session is alive.
    Connected,
    /// Disconnected; the session may still be alive on the server. Locks and leaders should
    /// act as if they do not hold anything until it is connected again.
    Suspended,
    /// The session is gone (the server said it expired, or the negotiated timeout passed
    /// without contact). Its ephemeral nodes are gone or going. The client is opening a new
    /// session on its own.
    Lost,
    /// [`Client::close`](crate::Client::close) was called or the last handle was dropped.
    Closed,
}

/// Why a session counts as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossReason {
    /// A server said the session expired.
    Expired,
    /// The negotiated session timeout passed since the last frame from any server: the server
    /// has expired it or soon will, whatever it may say later.
    Timeout,
}

/// A change of the session's state, delivered to every receiver from
/// [`Client::events`](crate::Client::events), in order.
///
/// ```no_run
/// use zkguard::{LossReason, SessionEvent};
/// # fn f(client: &zkguard::Client) {
/// for ev in client.events().iter() {
///     match ev {
///         SessionEvent::Suspended { .. } => eprintln!("connection down; the session may live"),
///         SessionEvent::Reconnected { .. } => eprintln!("back, same session, watches re-armed"),
///         SessionEvent::Lost { reason: LossReason::Timeout, .. } => {
///             eprintln!("no server heard from for a session timeout: ephemerals are gone")
///         }
///         SessionEvent::Closed => break,
///         _ => {}
///     }
/// }
/// # }
/// ```
///
/// Its `Debug` shows session ids in hex, as ZooKeeper's own logs do
/// (`Connected { session_id: 0x1000a3b4c5d0000 }`), and so do the crate's log records.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A new session was established (the first one, or a replacement after a loss).
    Connected {
        /// The new session's id.
        session_id: i64,
    },
    /// The connection dropped; the session may still be alive.
    Suspended {
        /// The session that may still be alive.
        session_id: i64,
    },
    /// Connected again within the same session; watches were re-armed.
    Reconnected {
        /// The (unchanged) session id.
        session_id: i64,
    },
    /// The session is gone; every ephemeral node and watch of it is gone.
    Lost {
        /// The lost session's id.
        session_id: i64,
        /// Who decided.
        reason: LossReason,
    },
    /// The client was closed.
    Closed,
}

/// One operation of a [`Client::multi`](crate::Client::multi) transaction.
///
/// ```no_run
/// use zkguard::{CreateMode, Error, Op};
/// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
/// // Move a job from "pending" to "running" only if nobody changed it meanwhile.
/// let (data, stat) = client.get_data("/jobs/pending/42")?;
/// let done = client.multi(&[
///     Op::Delete { path: "/jobs/pending/42".into(), version: Some(stat.version) },
///     Op::Create { path: "/jobs/running/42".into(), data, mode: CreateMode::Persistent },
/// ]);
/// match done {
///     Ok(_) => {}                                   // both applied
///     Err(Error::Multi { index: 0, .. }) => {}      // someone else took it: nothing applied
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Succeeds only if the node's data version is `version` (or the node exists, for `None`).
    Check {
        /// Node path.
        path: String,
        /// Expected data version; `None` checks existence only.
        version: Option<i32>,
    },
    /// Creates a node with the open ACL (in a guard's
    /// [`fenced_multi`](crate::Guard::fenced_multi): with the lock's ACL).
    Create {
        /// Node path.
        path: String,
        /// Initial data.
        data: Vec<u8>,
        /// Create mode (TTL modes are not allowed inside a multi).
        mode: CreateMode,
    },
    /// Creates a node with the given ACL.
    CreateWithAcl {
        /// Node path.
        path: String,
        /// Initial data.
        data: Vec<u8>,
        /// Create mode (TTL modes are not allowed inside a multi).
        mode: CreateMode,
        /// The new node's ACL.
        acl: Vec<Acl>,
    },
    /// Deletes a node.
    Delete {
        /// Node path.
        path: String,
        /// Expected data version; `None` for any.
        version: Option<i32>,
    },
    /// Sets a node's data.
    SetData {
        /// Node path.
        path: String,
        /// New data.
        data: Vec<u8>,
        /// Expected data version; `None` for any.
        version: Option<i32>,
    },
}

impl Op {
    /// The operation's name, as errors name it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Op::Check { .. } => "check",
            Op::Create { .. } | Op::CreateWithAcl { .. } => "create",
            Op::Delete { .. } => "delete",
            Op::SetData { .. } => "set_data",
        }
    }

    /// The path the operation acts on.
    pub fn path(&self) -> &str {
        match self {
            Op::Check { path, .. }
            | Op::Create { path, .. }
            | Op::CreateWithAcl { path, .. }
            | Op::Delete { path, .. }
            | Op::SetData { path, .. } => path,
        }
    }
}

/// The result of one operation of a successful multi.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// A check passed.
    Check,
    /// A node was created at this path.
    Create {
        /// The created path (relative to the chroot).
        path: String,
        /// The new node's metadata, when the server sends it: for a container (ZooKeeper
        /// answers any other create inside a multi with its path alone). Every node a multi
        /// creates has the multi's zxid as its `czxid`.
        stat: Option<Stat>,
    },
    /// A node was deleted.
    Delete,
    /// Data was set.
    SetData {
        /// The node's new metadata.
        stat: Stat,
    },
}

/// How [`Client::close`](crate::Client::close) went. Whatever it says, the client is closed:
/// no request goes out from it again and its guards report their locks lost.
///
/// What differs is when ZooKeeper deletes the session's ephemeral nodes (lock nodes,
/// leaderships): at once if the server confirmed the close, otherwise only when the server
/// expires the session, up to one session timeout after its last contact with this client.
/// Until then other processes still see those locks as held.
///
/// ```no_run
/// # fn f(client: zkguard::Client) {
/// match client.close() {
///     zkguard::CloseOutcome::Unconfirmed { reason } => {
///         eprintln!("close not confirmed ({reason}); our locks free up when the session expires")
///     }
///     _ => {} // nothing of the session is left
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CloseOutcome {
    /// The server closed the session: its ephemeral nodes are gone.
    Confirmed,
    /// The client had been closed already (by this handle, a clone, or the last drop).
    AlreadyClosed,
    /// There was no live session to close (it had expired, or none was ever established):
    /// no ephemeral node of it is left.
    NoSession,
    /// The server could not be asked (the connection was down) or did not confirm within
    /// about a second: the session's ephemeral nodes stay until the server expires it.
    Unconfirmed {
        /// Why: the connection error, timeout or server error.
        reason: crate::error::Error,
    },
}

impl CloseOutcome {
    /// Whether nothing of the session is left in ZooKeeper (everything but
    /// [`CloseOutcome::Unconfirmed`]).
    pub fn is_clean(&self) -> bool {
        !matches!(self, CloseOutcome::Unconfirmed { .. })
    }

    /// `Err` with the reason if the close was [`CloseOutcome::Unconfirmed`], for `?`.
    ///
    /// # Errors
    ///
    /// The connection error, timeout or server error that kept the server from confirming.
    pub fn into_result(self) -> crate::error::Result<()> {
        match self {
            CloseOutcome::Unconfirmed { reason } => Err(reason),
            _ => Ok(()),
        }
    }
}
