//! The re-entrant lock (Curator's `InterProcessMutex` semantics) and its guard.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use parking_lot::Mutex as PlMutex;

use super::Mutex;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::{Canceller, Holding, Participant, Wait};

/// Which threads of this process hold the lock, and how many times.
type Owners = Arc<PlMutex<HashMap<ThreadId, (Arc<Holding>, usize)>>>;

/// A fair lock that the thread holding it may take again without waiting, like Curator's
/// `InterProcessMutex`: the first acquire queues one node; nested acquires on the same
/// thread only count; the lock is released when the outermost guard goes.
///
/// Other threads of the same process contend like other processes (each queues its own
/// node). Guards are not `Send`: the hold belongs to the thread that took it.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let lock = zkguard::ReentrantMutex::new(&client, "/locks/ledger")?;
/// let outer = lock.acquire()?;
/// let inner = lock.acquire()?;          // same thread: no wait, no new node
/// assert_eq!(inner.hold_count(), 2);
/// drop(inner);
/// drop(outer);                          // released here
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ReentrantMutex {
    inner: Mutex,
    owners: Owners,
}

impl ReentrantMutex {
    /// A re-entrant lock at `path`; see [`Mutex::new`] for the rules on paths.
    pub fn new(client: &Client, path: &str) -> Result<ReentrantMutex> {
        Ok(ReentrantMutex {
            inner: Mutex::new(client, path)?,
            owners: Arc::default(),
        })
    }

    /// Sets the data stored in this contender's node (default: host name and process id).
    #[must_use = "with_data returns the changed lock; the original is consumed"]
    pub fn with_data(self, data: impl Into<Vec<u8>>) -> ReentrantMutex {
        ReentrantMutex {
            inner: self.inner.with_data(data),
            owners: self.owners,
        }
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// Blocks until this thread holds the lock (at once if it already does).
    pub fn acquire(&self) -> Result<ReentrantMutexGuard> {
        self.lock(Wait::Forever)?.ok_or_else(|| Error::Cancelled {
            path: self.path().to_string(),
        })
    }

    /// Takes the lock if this thread holds it or nobody holds or waits for it.
    pub fn try_acquire(&self) -> Result<Option<ReentrantMutexGuard>> {
        self.lock(Wait::Try)
    }

    /// Like [`acquire`](ReentrantMutex::acquire), giving up after `timeout` with `Ok(None)`.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<ReentrantMutexGuard>> {
        self.lock(Wait::timeout(timeout))
    }

    /// Whether the calling thread holds the lock.
    pub fn is_held_by_current_thread(&self) -> bool {
        self.owners
            .lock()
            .contains_key(&std::thread::current().id())
    }

    /// A handle that cancels this lock's blocked acquires from another thread.
    pub fn canceller(&self) -> Canceller {
        self.inner.canceller()
    }

    /// Every contender in queue order.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.inner.participants()
    }

    fn lock(&self, wait: Wait) -> Result<Option<ReentrantMutexGuard>> {
        let me = std::thread::current().id();
        let guard = |holding: Arc<Holding>| ReentrantMutexGuard {
            holding,
            owners: self.owners.clone(),
            thread: me,
            left: std::cell::Cell::new(false),
            _not_send: PhantomData,
        };
        if let Some((h, count)) = self.owners.lock().get_mut(&me) {
            *count += 1;
            return Ok(Some(guard(h.clone())));
        }
        let Some(holding) = self.inner.hold(wait)? else {
            return Ok(None);
        };
        let holding = Arc::new(holding);
        self.owners.lock().insert(me, (holding.clone(), 1));
        Ok(Some(guard(holding)))
    }
}

impl std::fmt::Debug for ReentrantMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReentrantMutex")
            .field("path", &self.path())
            .finish()
    }
}

/// One level of a held [`ReentrantMutex`]. The lock is released when the thread's last
/// guard goes. Validity, loss and the fencing token work as for
/// [`MutexGuard`](crate::MutexGuard) and are shared by all levels.
///
/// Not `Send`: the hold belongs to the thread that took it.
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// # fn f(lock: &zkguard::ReentrantMutex) -> zkguard::Result<()> {
/// send(lock.acquire()?); // error: the guard cannot move to another thread
/// # Ok(()) }
/// ```
#[must_use = "the lock is released as soon as the outermost guard is dropped"]
pub struct ReentrantMutexGuard {
    holding: Arc<Holding>,
    owners: Owners,
    thread: ThreadId,
    /// Set once this level has been counted off.
    left: std::cell::Cell<bool>,
    _not_send: PhantomData<*const ()>,
}

impl ReentrantMutexGuard {
    /// Whether the lock is certainly held right now (see [`MutexGuard::is_valid`](crate::MutexGuard::is_valid)).
    pub fn is_valid(&self) -> bool {
        self.holding.is_valid()
    }

    /// A receiver that gets `()` once the lock is lost (see
    /// [`MutexGuard::lost`](crate::MutexGuard::lost)).
    #[must_use = "the receiver is the only way to hear the signal"]
    pub fn lost(&self) -> crossbeam_channel::Receiver<()> {
        self.holding.lost()
    }

    /// The fencing token (the node's creation zxid), the same at every level.
    pub fn token(&self) -> u64 {
        self.holding.token()
    }

    /// The lock node's full path.
    pub fn path(&self) -> &str {
        self.holding.path()
    }

    /// A receiver that fires when someone asks the holder to let go (see
    /// [`revoke`](crate::revoke)).
    #[must_use = "the receiver is the only way to hear the signal"]
    pub fn revocation(&self) -> crossbeam_channel::Receiver<()> {
        self.holding.revocation()
    }

    /// Proves with ZooKeeper's quorum that the lock is still held (see
    /// [`MutexGuard::confirm`](crate::MutexGuard::confirm)).
    pub fn confirm(&self) -> Result<()> {
        self.holding.confirm()
    }

    /// How many guards this thread holds on the lock, this one included.
    pub fn hold_count(&self) -> usize {
        self.owners
            .lock()
            .get(&self.thread)
            .map_or(0, |(_, count)| *count)
    }

    /// Gives up this level. For the outermost guard this releases the lock and reports how
    /// the delete went (as [`MutexGuard::release`](crate::MutexGuard::release)).
    pub fn release(self) -> Result<()> {
        let outermost = self.leave();
        if outermost {
            self.holding.release()
        } else {
            Ok(())
        }
    }

    /// Counts this level off (once); true when it was the last one.
    fn leave(&self) -> bool {
        if self.left.replace(true) {
            return false;
        }
        let mut owners = self.owners.lock();
        match owners.get_mut(&self.thread) {
            Some((h, count)) if Arc::ptr_eq(h, &self.holding) => {
                *count -= 1;
                if *count == 0 {
                    owners.remove(&self.thread);
                    true
                } else {
                    false
                }
            }
            _ => false,
        }
    }
}

impl Drop for ReentrantMutexGuard {
    fn drop(&mut self) {
        // The node goes when the last `Arc<Holding>` (this one, once the outermost level
        // has been counted off) drops.
        self.leave();
    }
}

impl std::fmt::Debug for ReentrantMutexGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReentrantMutexGuard")
            .field("path", &self.holding.path())
            .field("token", &self.holding.token())
            .finish()
    }
}
