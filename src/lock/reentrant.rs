//! The re-entrant lock (Curator's `InterProcessMutex` semantics) and its guard.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

use parking_lot::Mutex as PlMutex;

use super::api::{guard_api, lock_api, ExclusiveLock, Guard, Lock, Part, Sealed};
use super::holding::{Core, Holding, OneNode};
use super::mutex::Mutex;
use super::recipe::{recipe_options, Base, Based};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::{Canceller, Kind, Participant, Wait};

/// Which threads of this process hold the lock, and how many times.
type Owners = Arc<PlMutex<HashMap<ThreadId, (Arc<Holding>, usize)>>>;

/// A fair lock that the thread holding it may take again without waiting, like Curator's
/// `InterProcessMutex`: the first acquire queues one node; nested acquires on the same
/// thread only count; the lock is released when the outermost guard goes.
///
/// Other threads of the same process contend like other processes (each queues its own
/// node). Guards are not `Send`: the hold belongs to the thread that took it.
///
/// A thread whose hold was lost (its node deleted by someone else, its session ended)
/// cannot re-enter: a nested acquire is [`Error::LockLost`](crate::Error::LockLost), never a
/// level of a lock someone else may hold by now, until the thread's guards are gone; then it
/// queues afresh.
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
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path if it is relative, ends in a slash, has an empty segment or is the root.
    pub fn new(client: &Client, path: &str) -> Result<ReentrantMutex> {
        Ok(ReentrantMutex {
            inner: Mutex::new(client, path)?,
            owners: Arc::default(),
        })
    }

    /// Whether the calling thread holds the lock: it has a guard of it, and the lock is not
    /// known to be lost (its node deleted, its session ended). While the connection is
    /// merely suspended it still says yes; [`is_valid`](ReentrantMutexGuard::is_valid) on
    /// the guard says whether it is safe to act now.
    pub fn is_held_by_current_thread(&self) -> bool {
        self.owners
            .lock()
            .get(&std::thread::current().id())
            .is_some_and(|(h, _)| !h.is_gone())
    }

    /// One more level for this thread if it holds the lock, else the lock's node, queued
    /// for with `cancel`.
    fn level(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Level>> {
        let me = std::thread::current().id();
        let level = |holding: Arc<Holding>| Level {
            holding,
            owners: self.owners.clone(),
            thread: me,
            left: AtomicBool::new(false),
        };
        if let Some((h, count)) = self.owners.lock().get_mut(&me) {
            // Re-entering a lock this thread has lost (someone else may hold it now) is not
            // holding it: the caller's outer guard says lost too, and must be let go first.
            if h.is_gone() {
                return Err(Error::LockLost {
                    path: h.path().to_string(),
                });
            }
            *count += 1;
            return Ok(Some(level(h.clone())));
        }
        let Some(holding) = self.inner.node(Kind::Reentrant, wait, cancel)? else {
            return Ok(None);
        };
        let holding = Arc::new(holding);
        self.owners.lock().insert(me, (holding.clone(), 1));
        Ok(Some(level(holding)))
    }
}

impl Based for ReentrantMutex {
    fn base(&self) -> &Base {
        self.inner.base()
    }

    fn each_base(&mut self, f: &mut dyn FnMut(&mut Base)) {
        self.inner.each_base(f);
    }
}

recipe_options!(
    ReentrantMutex,
    "lock",
    "its queue nodes, its directory, and the parents it makes on the way",
    "ReentrantMutex::new(&client, \"/locks/invoices\")",
    data: "node"
);

impl Sealed for ReentrantMutex {}

impl Lock for ReentrantMutex {
    type Guard = ReentrantMutexGuard;

    /// At once if this thread holds the lock already (one more level); else queues.
    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<ReentrantMutexGuard>> {
        Ok(self.level(wait, cancel)?.map(|level| ReentrantMutexGuard {
            level,
            _not_send: PhantomData,
        }))
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        Lock::participants(&self.inner)
    }
}

/// In a [`MultiLock`](crate::MultiLock) the level is held by the multi-lock's guard, which
/// is `Send`: it stays counted for the thread that took it, as a guard's would.
impl ExclusiveLock for ReentrantMutex {
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>> {
        Ok(self
            .level(wait, cancel)?
            .map(|level| Box::new(level) as Part))
    }
}

lock_api!(ReentrantMutex => ReentrantMutexGuard, "the lock (at once if this thread holds it)":
    acquire, try_acquire, acquire_timeout);
lock_api!(ReentrantMutex: common []
    /// Every contender in queue order (a thread's levels are one node, listed once); see
    /// [`Lock::participants`].
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`](crate::Error::ForeignNode) if the directory holds a node no recipe made, and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
);

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
    level: Level,
    _not_send: PhantomData<*const ()>,
}

guard_api!(ReentrantMutexGuard, level);

impl ReentrantMutexGuard {
    /// How many guards this thread holds on the lock, this one included.
    pub fn hold_count(&self) -> usize {
        self.level
            .owners
            .lock()
            .get(&self.level.thread)
            .map_or(0, |(_, count)| *count)
    }
}

/// One level of a held [`ReentrantMutex`]: what a guard holds (or a
/// [`MultiLockGuard`](crate::MultiLockGuard) that took the lock).
pub(crate) struct Level {
    holding: Arc<Holding>,
    owners: Owners,
    thread: ThreadId,
    /// Set once this level has been counted off.
    left: AtomicBool,
}

impl Level {
    /// Counts this level off (once); true when it was the last one.
    fn leave(&self) -> bool {
        if self.left.swap(true, Ordering::SeqCst) {
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

impl OneNode for Level {
    /// The same at every level (so is the token).
    fn node(&self) -> &Holding {
        &self.holding
    }
    /// Gives up this level; for the outermost one this releases the lock and reports how
    /// the delete went.
    fn let_go(&self) -> Result<()> {
        let gone = self.holding.is_gone();
        if self.leave() {
            self.holding.release()
        } else if gone {
            // An inner level of a lost hold: say so, as the outermost would.
            Err(Error::LockLost {
                path: self.holding.path().to_string(),
            })
        } else {
            Ok(())
        }
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        // The node goes when the last `Arc<Holding>` (this one, once the outermost level
        // has been counted off) drops.
        self.leave();
    }
}

// A level inside a `MultiLockGuard` is one of its parts.
impl Sealed for Level {}

impl Guard for Level {
    fn core(&self) -> &dyn Core {
        self
    }
}

impl std::fmt::Debug for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReentrantMutexLevel")
            .field("path", &Core::path(self))
            .field("token", &Core::token(self))
            .field("valid", &Core::is_valid(self))
            .finish()
    }
}
