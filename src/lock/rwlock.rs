//! The read/write lock and its two guards.

use super::{boxed, guard_api, lock_api, ExclusiveLock, Lock, Part, Sealed};
use super::{Holding, Role};
use crate::client::{Client, NodeAcl};
use crate::error::Result;
use crate::queue::{self, names, Canceller, Participant, Rule, Spec, Wait};

/// A fair read/write lock: many readers at once, or one writer.
///
/// Readers and writers queue in one directory, in arrival order. A reader waits only for
/// the nearest writer queued before it; a writer waits for the node right before it. So a
/// waiting writer blocks every reader that arrives after it: writers are never starved.
/// A release notifies the waiters it lets in (the next writer, or every reader queued
/// before the next writer), and those it brings next in line (the writer after, or the
/// readers queued behind that writer), which list the queue again during the coming turn
/// so that theirs starts on a notification alone: without waiters giving up, each waiter
/// is notified twice per acquisition at most.
///
/// Node names follow Curator's `InterProcessReadWriteLock` (`_c_<uuid>-__READ__<seq>`,
/// `_c_<uuid>-__WRIT__<seq>`), so both libraries share a lock. Neither lock is re-entrant,
/// and a reader cannot upgrade to a writer (it would wait for itself).
///
/// Each side is a lock of its own too, as Curator's `readLock()` and `writeLock()` are:
/// [`read_lock`](RwLock::read_lock) and [`write_lock`](RwLock::write_lock) implement
/// [`Lock`], and the write side can go into a [`MultiLock`](crate::MultiLock). Both share
/// this lock's path, data and canceller.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let lock = zkguard::RwLock::new(&client, "/locks/catalog")?;
/// {
///     let _read = lock.read()?;  // shared with other readers
/// }
/// let _write = lock.write()?;    // alone
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    read: ReadLock,
    write: WriteLock,
}

/// What both sides of an [`RwLock`] share.
#[derive(Clone)]
struct Side {
    client: Client,
    path: String,
    data: Vec<u8>,
    acl: NodeAcl,
    canceller: Canceller,
}

impl Side {
    fn hold(&self, read: bool, wait: Wait, cancel: &Canceller) -> Result<Option<Holding>> {
        let spec = Spec {
            path: &self.path,
            dir: &self.path,
            marker: if read { names::READ } else { names::WRITE },
            rule: if read { Rule::Read } else { Rule::Exclusive },
            data: &self.data,
            dir_data: b"",
            acl: &self.acl,
        };
        Ok(queue::acquire(&self.client, &spec, wait, cancel)?
            .map(|a| Holding::new(&self.client, a, Role::Lock, false)))
    }
}

impl RwLock {
    /// A read/write lock at `path`. Nothing is sent until the first acquire; a bad path is
    /// an [`Error::InvalidPath`](crate::Error::InvalidPath) naming it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path if it is relative, ends in a slash, has an empty segment or is the root.
    pub fn new(client: &Client, path: &str) -> Result<RwLock> {
        queue::check_lock_path(path)?;
        let side = Side {
            client: client.clone(),
            path: path.to_string(),
            data: names::default_data(),
            acl: client.node_acl().clone(),
            canceller: Canceller::default(),
        };
        Ok(RwLock {
            read: ReadLock { side: side.clone() },
            write: WriteLock { side },
        })
    }

    /// The ACL of the nodes both sides of this lock creates (its queue nodes, its directory, and the parents it makes on the
    /// way) instead of the client's [`ClientBuilder::node_acl`](crate::ClientBuilder::node_acl).
    /// See [`NodeAcl`] for the presets and what a creator ACL implies (an existing directory
    /// keeps its own ACL).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an ACL that names the
    /// creator's identities on a client that has none; nothing is created.
    pub fn with_acl(mut self, acl: NodeAcl) -> Result<RwLock> {
        acl.check_identity(self.write.side.client.has_identity(), &self.write.side.path)?;
        self.read.side.acl = acl.clone();
        self.write.side.acl = acl;
        Ok(self)
    }

    /// Sets the data stored in this contender's nodes (default: host name and process id).
    #[must_use = "with_data returns the changed lock; the original is consumed"]
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> RwLock {
        self.write.side.data = data.into();
        self.read.side.data.clone_from(&self.write.side.data);
        self
    }

    /// The read side, a [`Lock`] of its own (Curator's `readLock()`).
    pub fn read_lock(&self) -> &ReadLock {
        &self.read
    }

    /// The write side, a [`Lock`] of its own (Curator's `writeLock()`), exclusive: clone it
    /// into a [`MultiLock`](crate::MultiLock).
    pub fn write_lock(&self) -> &WriteLock {
        &self.write
    }

    /// Every contender, readers and writers, in queue order.
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`](crate::Error::ForeignNode) if the directory holds a node no recipe made, and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn participants(&self) -> Result<Vec<Participant>> {
        let side = &self.write.side;
        queue::participants(&side.client, &side.path, Rule::ReadWrite)
    }
}

lock_api!(RwLock.read => ReadGuard, "a read lock": read, try_read, read_timeout);
lock_api!(RwLock.write => WriteGuard, "the write lock": write, try_write, write_timeout);
lock_api!(RwLock.write: common []);

/// The read side of an [`RwLock`] ([`RwLock::read_lock`]): as a [`Lock`], its acquires
/// are the lock's `read`, `try_read` and `read_timeout`.
#[derive(Clone)]
pub struct ReadLock {
    side: Side,
}

/// The write side of an [`RwLock`] ([`RwLock::write_lock`]): as a [`Lock`], its acquires
/// are the lock's `write`, `try_write` and `write_timeout`. It is an [`ExclusiveLock`], so it
/// can be part of a [`MultiLock`](crate::MultiLock).
#[derive(Clone)]
pub struct WriteLock {
    side: Side,
}

/// The [`Lock`] impl of one side, and the same methods inherent.
macro_rules! side {
    ($lock:ident => $guard:ident, $read:literal) => {
        impl Sealed for $lock {}

        impl Lock for $lock {
            type Guard = $guard;

            fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<$guard>> {
                Ok(self
                    .side
                    .hold($read, wait, cancel)?
                    .map(|holding| $guard { holding }))
            }

            fn path(&self) -> &str {
                &self.side.path
            }

            fn canceller(&self) -> Canceller {
                self.side.canceller.clone()
            }
        }

        lock_api!($lock => $guard, "it": acquire, try_acquire, acquire_timeout);
        lock_api!($lock: common []);
    };
}
side!(ReadLock => ReadGuard, true);
side!(WriteLock => WriteGuard, false);

impl ExclusiveLock for WriteLock {
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>> {
        boxed(self, wait, cancel)
    }
}

/// A held read lock of an [`RwLock`]; dropping it releases it. Validity, loss and the
/// fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct ReadGuard {
    holding: Holding,
}

guard_api!(ReadGuard);

/// The held write lock of an [`RwLock`]; dropping it releases it. Validity, loss and the
/// fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct WriteGuard {
    holding: Holding,
}

guard_api!(WriteGuard);
