//! The read/write lock and its two guards.

use super::api::{boxed, guard_api, lock_api, ExclusiveLock, Lock, Part, Sealed};
use super::holding::Holding;
use super::recipe::{recipe_options, Base, Based};
use crate::client::Client;
use crate::error::Result;
use crate::queue::{self, Canceller, Kind, Participant, Rule, Wait};

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

impl RwLock {
    /// A read/write lock at `path`. Nothing is sent until the first acquire.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path if it is relative, ends in a slash, has an empty segment or is the root.
    pub fn new(client: &Client, path: &str) -> Result<RwLock> {
        let side = Base::new(client, path)?;
        Ok(RwLock {
            read: ReadLock { side: side.clone() },
            write: WriteLock { side },
        })
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
}

impl Based for RwLock {
    fn base(&self) -> &Base {
        &self.write.side
    }

    fn each_base(&mut self, f: &mut dyn FnMut(&mut Base)) {
        f(&mut self.read.side);
        f(&mut self.write.side);
    }
}

recipe_options!(
    RwLock,
    "lock",
    "both sides' queue nodes, its directory, and the parents it makes on the way",
    "RwLock::new(&client, \"/locks/catalog\")",
    data: "nodes, read and write"
);

lock_api!(RwLock.read => ReadGuard, "a read lock": read, try_read, read_timeout);
lock_api!(RwLock.write => WriteGuard, "the write lock": write, try_write, write_timeout);
lock_api!(RwLock.write: common []
    /// Every contender, readers and writers, in queue order (each side lists both); see
    /// [`Lock::participants`].
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`](crate::Error::ForeignNode) if the directory holds a node no recipe made, and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
);

/// The read side of an [`RwLock`] ([`RwLock::read_lock`]): as a [`Lock`], its acquires
/// are the lock's `read`, `try_read` and `read_timeout`.
#[derive(Clone)]
pub struct ReadLock {
    side: Base,
}

/// The write side of an [`RwLock`] ([`RwLock::write_lock`]): as a [`Lock`], its acquires
/// are the lock's `write`, `try_write` and `write_timeout`. It is an [`ExclusiveLock`], so it
/// can be part of a [`MultiLock`](crate::MultiLock).
#[derive(Clone)]
pub struct WriteLock {
    side: Base,
}

/// The [`Lock`] impl of one side, and the same methods inherent.
macro_rules! side {
    ($lock:ident => $guard:ident, $read:literal) => {
        impl Sealed for $lock {}

        // Its one base, the side (the `RwLock`'s setters reach it): its path and canceller.
        recipe_options!($lock { side });

        impl Lock for $lock {
            type Guard = $guard;

            fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<$guard>> {
                let kind = if $read { Kind::Read } else { Kind::Write };
                Ok(self
                    .side
                    .queue(kind, wait, cancel)?
                    .map(|holding| $guard { holding }))
            }

            fn participants(&self) -> Result<Vec<Participant>> {
                queue::participants(&self.side.client, &self.side.path, Rule::ReadWrite)
            }
        }

        lock_api!($lock => $guard, "it": acquire, try_acquire, acquire_timeout);
        lock_api!($lock: common []
        /// Every contender, readers and writers, in queue order (each side lists both); see
        /// [`Lock::participants`].
        ///
        /// # Errors
        ///
        /// [`Error::ForeignNode`](crate::Error::ForeignNode) if the directory holds a node no recipe made, and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
        );
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
