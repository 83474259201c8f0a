//! The read/write lock and its two guards.

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::{self, names, Canceller, Holding, Participant, Rule, Spec, Wait};

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
    client: Client,
    path: String,
    data: Vec<u8>,
    canceller: Canceller,
}

impl RwLock {
    /// A read/write lock at `path`. Nothing is sent until the first acquire; a bad path is
    /// an [`Error::InvalidPath`] naming it.
    pub fn new(client: &Client, path: &str) -> Result<RwLock> {
        queue::check_lock_path(path)?;
        Ok(RwLock {
            client: client.clone(),
            path: path.to_string(),
            data: names::default_data(),
            canceller: Canceller::default(),
        })
    }

    /// Sets the data stored in this contender's nodes (default: host name and process id).
    #[must_use = "with_data returns the changed lock; the original is consumed"]
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> RwLock {
        self.data = data.into();
        self
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Blocks until a read lock is held.
    pub fn read(&self) -> Result<ReadGuard> {
        self.hold(true, Wait::Forever)?
            .map(|holding| ReadGuard { holding })
            .ok_or_else(|| self.cancelled())
    }

    /// A read lock if no writer holds or waits; never waits.
    pub fn try_read(&self) -> Result<Option<ReadGuard>> {
        Ok(self
            .hold(true, Wait::Try)?
            .map(|holding| ReadGuard { holding }))
    }

    /// A read lock within `timeout`, else `Ok(None)` with nothing left behind.
    pub fn read_timeout(&self, timeout: Duration) -> Result<Option<ReadGuard>> {
        Ok(self
            .hold(true, Wait::timeout(timeout))?
            .map(|holding| ReadGuard { holding }))
    }

    /// Blocks until the write lock is held.
    pub fn write(&self) -> Result<WriteGuard> {
        self.hold(false, Wait::Forever)?
            .map(|holding| WriteGuard { holding })
            .ok_or_else(|| self.cancelled())
    }

    /// The write lock if nobody holds or waits; never waits.
    pub fn try_write(&self) -> Result<Option<WriteGuard>> {
        Ok(self
            .hold(false, Wait::Try)?
            .map(|holding| WriteGuard { holding }))
    }

    /// The write lock within `timeout`, else `Ok(None)` with nothing left behind.
    pub fn write_timeout(&self, timeout: Duration) -> Result<Option<WriteGuard>> {
        Ok(self
            .hold(false, Wait::timeout(timeout))?
            .map(|holding| WriteGuard { holding }))
    }

    /// A handle that cancels this lock's blocked acquires (read and write) from another
    /// thread.
    pub fn canceller(&self) -> Canceller {
        self.canceller.clone()
    }

    /// Every contender, readers and writers, in queue order.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        queue::participants(&self.client, &self.path, Rule::ReadWrite)
    }

    fn cancelled(&self) -> Error {
        Error::Cancelled {
            path: self.path.clone(),
        }
    }

    fn hold(&self, read: bool, wait: Wait) -> Result<Option<Holding>> {
        let spec = Spec {
            path: &self.path,
            dir: &self.path,
            marker: if read { names::READ } else { names::WRITE },
            rule: if read { Rule::Read } else { Rule::Exclusive },
            data: &self.data,
            dir_data: b"",
        };
        Ok(queue::acquire(&self.client, &spec, wait, &self.canceller)?
            .map(|a| Holding::new(&self.client, a, false)))
    }
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock").field("path", &self.path).finish()
    }
}

/// A held read lock of an [`RwLock`]; dropping it releases it. Validity, loss and the
/// fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct ReadGuard {
    holding: Holding,
}

super::guard_api!(ReadGuard);

/// The held write lock of an [`RwLock`]; dropping it releases it. Validity, loss and the
/// fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct WriteGuard {
    holding: Holding,
}

super::guard_api!(WriteGuard);
