//! All-or-nothing over several locks.

use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::{Mutex, MutexGuard};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::{Canceller, Wait};

/// Several [`Mutex`]es taken together: all of them, or none.
///
/// The locks are always taken in one canonical order (sorted by path, duplicates removed),
/// whatever order they were given in, so two multi-locks over overlapping paths cannot
/// deadlock. If one cannot be taken in time (timeout, cancel, error) the ones already taken
/// are released, in reverse order.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let both = zkguard::MultiLock::new(&client, &["/locks/account-7", "/locks/account-3"])?;
/// let guard = both.acquire()?;          // holds /locks/account-3 and /locks/account-7
/// assert_eq!(guard.tokens().len(), 2);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    locks: Vec<Mutex>,
    canceller: Canceller,
}

impl MultiLock {
    /// Locks at `paths` (each checked as for [`Mutex::new`]). An empty list is an
    /// [`Error::InvalidArgument`].
    pub fn new(client: &Client, paths: &[&str]) -> Result<MultiLock> {
        if paths.is_empty() {
            return Err(Error::InvalidArgument {
                name: "paths",
                reason: "a multi-lock needs at least one path".into(),
            });
        }
        let mut sorted: Vec<&str> = paths.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let canceller = Canceller::default();
        let locks = sorted
            .into_iter()
            .map(|p| Ok(Mutex::new(client, p)?.with_canceller(canceller.clone())))
            .collect::<Result<Vec<_>>>()?;
        Ok(MultiLock { locks, canceller })
    }

    /// The paths, in the order they are taken.
    pub fn paths(&self) -> Vec<&str> {
        self.locks.iter().map(|l| l.path()).collect()
    }

    /// Blocks until every lock is held.
    pub fn acquire(&self) -> Result<MultiLockGuard> {
        self.lock(Wait::Forever)?.ok_or_else(|| Error::Cancelled {
            path: self.paths().join(","),
        })
    }

    /// Every lock if each is free now; never waits (and holds nothing on `None`).
    pub fn try_acquire(&self) -> Result<Option<MultiLockGuard>> {
        self.lock(Wait::Try)
    }

    /// Every lock within `timeout` (one deadline for all), else `Ok(None)` holding none.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<MultiLockGuard>> {
        self.lock(Wait::timeout(timeout))
    }

    /// A handle that cancels a blocked acquire from another thread (whatever lock it is
    /// waiting for).
    pub fn canceller(&self) -> Canceller {
        self.canceller.clone()
    }

    fn lock(&self, wait: Wait) -> Result<Option<MultiLockGuard>> {
        let mut guards = Vec::with_capacity(self.locks.len());
        for l in &self.locks {
            if let Wait::Until(d) = wait {
                if Instant::now() >= d {
                    return Ok(release_all(guards, None));
                }
            }
            match l.hold(wait) {
                Ok(Some(holding)) => guards.push(MutexGuard { holding }),
                Ok(None) => return Ok(release_all(guards, None)),
                Err(e) => return Err(release_all(guards, Some(e)).unwrap_or(Error::Closed)),
            }
        }
        Ok(Some(MultiLockGuard { guards }))
    }
}

/// Releases in reverse order; hands back `ret`.
fn release_all<T>(guards: Vec<MutexGuard>, ret: Option<T>) -> Option<T> {
    for g in guards.into_iter().rev() {
        drop(g);
    }
    ret
}

/// Every lock of a [`MultiLock`], held. Dropping it releases them all (in reverse order).
#[must_use = "the locks are released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct MultiLockGuard {
    guards: Vec<MutexGuard>,
}

impl MultiLockGuard {
    /// Whether every lock is certainly held right now.
    pub fn is_valid(&self) -> bool {
        self.guards.iter().all(MutexGuard::is_valid)
    }

    /// A receiver that gets `()` once any of the locks is lost.
    #[must_use = "the receiver is the only way to hear the signal"]
    pub fn lost(&self) -> Receiver<()> {
        let (tx, rx) = crossbeam_channel::bounded(self.guards.len());
        for g in &self.guards {
            g.holding.notify_lost(tx.clone());
        }
        rx
    }

    /// Proves with ZooKeeper's quorum that every lock is still held (see
    /// [`MutexGuard::confirm`]); the first lock that is not, or the first error.
    pub fn confirm(&self) -> Result<()> {
        self.guards.iter().try_for_each(MutexGuard::confirm)
    }

    /// The fencing tokens, one per lock, in the order of [`MultiLock::paths`].
    pub fn tokens(&self) -> Vec<u64> {
        self.guards.iter().map(MutexGuard::token).collect()
    }

    /// The lock nodes' paths, in the order of [`MultiLock::paths`].
    pub fn paths(&self) -> Vec<&str> {
        self.guards.iter().map(MutexGuard::path).collect()
    }

    /// The guards themselves, for per-lock details.
    pub fn guards(&self) -> &[MutexGuard] {
        &self.guards
    }

    /// Releases every lock (in reverse order) and reports the first error.
    pub fn release(self) -> Result<()> {
        let mut first = Ok(());
        for g in self.guards.into_iter().rev() {
            let r = g.release();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
