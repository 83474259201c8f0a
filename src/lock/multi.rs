//! All-or-nothing over several exclusive locks.

use crate::error::escape;
use std::marker::PhantomData;
use std::time::Instant;

use crossbeam_channel::Sender;

use super::api::{guard_api, lock_api, ExclusiveLock, Guard, Lock, Part, Sealed};
use super::holding::{Core, Holding};
use super::mutex::Mutex;
use super::recipe::Named;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::{Canceller, Participant, Wait};

/// Several exclusive locks taken together: all of them, or none.
///
/// [`new`](MultiLock::new) makes one of [`Mutex`]es at the paths given;
/// [`of`](MultiLock::of) and [`and`](MultiLock::and) combine any [`ExclusiveLock`]s, mixed:
/// [`Mutex`], [`ReentrantMutex`](crate::ReentrantMutex),
/// [`UnfairMutex`](crate::UnfairMutex), an [`RwLock`](crate::RwLock)'s
/// [`write_lock`](crate::RwLock::write_lock) (like Curator's `InterProcessMultiLock`, which
/// takes any lock).
///
/// The locks are always taken in one canonical order (sorted by path, one lock per path:
/// the first given), whatever order they were given in, so two multi-locks over
/// overlapping paths cannot deadlock with each other, as long as neither caller already
/// holds one of the locks outside the multi-lock (a thread holding a
/// [`ReentrantMutex`](crate::ReentrantMutex) of the set has taken it out of order). If one
/// cannot be taken in time (timeout, cancel, error) the ones already taken are released, in
/// reverse order. If one taken earlier is lost while a later one is awaited (its session
/// ended, its node was deleted: someone else may hold it by now), all are released and
/// the acquire starts over, with the same deadline. The multi-lock's own
/// [`canceller`](MultiLock::canceller) cancels whichever lock an acquire is waiting for (the
/// locks' own cancellers do not reach a multi-lock's acquire). An error, a timeout or a
/// cancel names the path of the lock it happened on. `try_acquire` tries the locks one
/// after the other, each within the client's request timeout, so with the connection in
/// trouble it can take up to one request timeout per lock before its `Error::Timeout`.
///
/// A [`ReentrantMutex`](crate::ReentrantMutex) taken by a multi-lock counts as one more
/// level held by the thread that called the acquire (at once if that thread holds it
/// already), until the [`MultiLockGuard`] goes. So the guard, like a
/// [`ReentrantMutexGuard`](crate::ReentrantMutexGuard), is not `Send`: on another thread,
/// the thread that took it could re-enter the lock beside it.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let both = zkguard::MultiLock::new(&client, &["/locks/account-7", "/locks/account-3"])?;
/// let guard = both.acquire()?;          // holds /locks/account-3 and /locks/account-7
/// assert_eq!(guard.tokens().len(), 2);
/// drop(guard);
///
/// let catalog = zkguard::RwLock::new(&client, "/locks/catalog")?;
/// let mixed = zkguard::MultiLock::of(zkguard::ReentrantMutex::new(&client, "/locks/ledger")?)
///     .and(catalog.write_lock().clone())
///     .and(zkguard::UnfairMutex::new(&client, "/locks/nightly")?);
/// let _all = mixed.acquire()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    locks: Vec<Box<dyn AnyLock>>,
    /// The paths joined by commas (what errors name).
    joined: String,
    canceller: Canceller,
}

/// An [`ExclusiveLock`] of any type, as a multi-lock keeps it.
trait AnyLock: Send + Sync {
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>>;
    fn path(&self) -> &str;
    fn participants(&self) -> Result<Vec<Participant>>;
    fn clone_part(&self) -> Box<dyn AnyLock>;
}

impl<L: ExclusiveLock> AnyLock for L {
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>> {
        ExclusiveLock::hold_part(self, wait, cancel)
    }
    fn path(&self) -> &str {
        Lock::path(self)
    }
    fn participants(&self) -> Result<Vec<Participant>> {
        Lock::participants(self)
    }
    fn clone_part(&self) -> Box<dyn AnyLock> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn AnyLock> {
    fn clone(&self) -> Self {
        self.clone_part()
    }
}

impl MultiLock {
    /// [`Mutex`]es at `paths` (each checked as for [`Mutex::new`]). An empty list is an
    /// [`Error::InvalidArgument`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty list, and
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming a bad path.
    pub fn new(client: &Client, paths: &[&str]) -> Result<MultiLock> {
        let (first, rest) = paths.split_first().ok_or_else(|| Error::InvalidArgument {
            name: "paths",
            reason: "a multi-lock needs at least one path".into(),
        })?;
        let mut multi = MultiLock::of(Mutex::new(client, first)?);
        for p in rest {
            multi = multi.and(Mutex::new(client, p)?);
        }
        Ok(multi)
    }

    /// A multi-lock of one lock, to which [`and`](MultiLock::and) adds more.
    pub fn of(lock: impl ExclusiveLock) -> MultiLock {
        MultiLock {
            joined: Lock::path(&lock).to_string(),
            locks: vec![Box::new(lock)],
            canceller: Canceller::default(),
        }
    }

    /// Adds `lock`, of any exclusive type, in its place in the canonical order. A lock at a
    /// path already in the multi-lock is left out (taking one path twice would wait for
    /// itself).
    #[must_use = "and returns the changed multi-lock; the original is consumed"]
    pub fn and(mut self, lock: impl ExclusiveLock) -> MultiLock {
        let path = Lock::path(&lock);
        if let Err(at) = self.locks.binary_search_by(|l| l.path().cmp(path)) {
            self.locks.insert(at, Box::new(lock));
            self.joined = self.paths().join(",");
        }
        self
    }

    /// The paths, in the order they are taken.
    pub fn paths(&self) -> Vec<&str> {
        self.locks.iter().map(|l| l.path()).collect()
    }
}

impl Sealed for MultiLock {}

/// Its [`Lock::path`]: the paths joined by commas; its [`Lock::canceller`]: its own, which
/// cancels a blocked acquire from another thread, whatever lock it is waiting for.
impl Named for MultiLock {
    fn named_path(&self) -> &str {
        &self.joined
    }

    fn named_canceller(&self) -> &Canceller {
        &self.canceller
    }
}

impl Lock for MultiLock {
    type Guard = MultiLockGuard;

    /// Takes each lock in order, all with one deadline and `cancel` (a cancel between two
    /// locks cancels the next one). A lock taken earlier that is lost while a later one is
    /// awaited (its session ended, its node was deleted: someone else may hold it now)
    /// makes the call let everything go and start over.
    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<MultiLockGuard>> {
        let call = cancel.call();
        let cancel = &call.canceller;
        'attempt: loop {
            let mut parts: Vec<Part> = Vec::with_capacity(self.locks.len());
            for l in &self.locks {
                if let Wait::Until(d) = wait {
                    if Instant::now() >= d {
                        return Ok(release_all(parts, None));
                    }
                }
                match l.hold_part(wait, cancel) {
                    Ok(Some(part)) => parts.push(part),
                    Ok(None) => return Ok(release_all(parts, None)),
                    Err(e) => return Err(release_all(parts, Some(e)).unwrap_or(Error::Closed)),
                }
                if let Some(lost) = parts.iter().find(|p| p.core().is_gone()) {
                    log::info!(
                        "zkguard: multi-lock {}: {} was lost while taking the others; \
                         starting over",
                        escape(&self.joined),
                        escape(lost.path())
                    );
                    release_all::<()>(parts, None);
                    continue 'attempt;
                }
            }
            return Ok(Some(MultiLockGuard {
                parts: Parts::new(parts),
                _not_send: PhantomData,
            }));
        }
    }

    /// Each lock's, one after the other, in the order of [`paths`](MultiLock::paths).
    fn participants(&self) -> Result<Vec<Participant>> {
        let mut out = Vec::new();
        for l in &self.locks {
            out.extend(l.participants()?);
        }
        Ok(out)
    }
}

lock_api!(MultiLock => MultiLockGuard, "every lock": acquire, try_acquire, acquire_timeout);
lock_api!(MultiLock: common []
    /// The contenders of each lock, one lock's after the other in the order of
    /// [`paths`](MultiLock::paths), each list as that lock's own `participants` gives it
    /// (so a holder of the multi-lock is listed once per lock, holding each). There is no
    /// queue of the multi-lock itself: a contender waiting for the second lock is listed
    /// as holding the first. See [`Lock::participants`].
    ///
    /// # Errors
    ///
    /// The first error of a lock's listing (see [`Lock::participants`]).
);

/// Releases in reverse order; hands back `ret`.
fn release_all<T>(parts: Vec<Part>, ret: Option<T>) -> Option<T> {
    for p in parts.into_iter().rev() {
        drop(p);
    }
    ret
}

/// Every lock of a [`MultiLock`], held. Dropping it releases them all (in reverse order).
/// It is not `Send` (see [`MultiLock`] on re-entrant locks):
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// # fn f(g: zkguard::MultiLockGuard) {
/// send(g);
/// # }
/// ```
///
/// As a [`Guard`] it stands for all its locks: [`is_valid`](MultiLockGuard::is_valid) when
/// every one is, [`lost`](MultiLockGuard::lost) and
/// [`revocation`](MultiLockGuard::revocation) fire when any one is lost or asked to let go,
/// [`confirm`](MultiLockGuard::confirm) proves them all, and [`path`](MultiLockGuard::path)
/// is their nodes' paths joined by commas ([`paths`](MultiLockGuard::paths) lists them).
///
/// # Fencing token
///
/// [`token`](MultiLockGuard::token) is the largest of the locks' tokens (their nodes'
/// creation zxids). It is a fencing token among holders of **the same set of locks**: a
/// later holder of the set makes its node on the set's last lock only once it holds the
/// first, after our release, hence after every node of ours; zxids only grow, so its
/// largest token exceeds every one of ours (its others need not: it may have queued on the
/// first lock while we held it). A resource that only holders of this set write, and that
/// refuses tokens below the highest it has seen, therefore refuses a paused earlier holder.
///
/// It does not compare with the tokens of a holder of another set, or of one of the locks
/// alone: such a contender can queue on one of our locks before we make our node on
/// another, and hold after us with a smaller token. For a resource guarded by one lock,
/// send that lock's own token ([`tokens`](MultiLockGuard::tokens)): each lock's tokens
/// rise from holder to holder, whoever took it with what.
#[must_use = "the locks are released as soon as the guard is dropped"]
pub struct MultiLockGuard {
    parts: Parts,
    /// Not `Send`: a [`ReentrantMutex`](crate::ReentrantMutex) level inside counts for the
    /// thread that took it, which could otherwise re-enter the lock while another thread
    /// holds this guard.
    _not_send: PhantomData<*const ()>,
}

guard_api!(MultiLockGuard, parts);

impl MultiLockGuard {
    /// The fencing tokens, one per lock, in the order of [`MultiLock::paths`].
    pub fn tokens(&self) -> Vec<u64> {
        self.parts.list.iter().map(|g| g.token()).collect()
    }

    /// The lock nodes' paths, in the order of [`MultiLock::paths`].
    pub fn paths(&self) -> Vec<&str> {
        self.parts.list.iter().map(|g| g.path()).collect()
    }

    /// The locks' guards, for per-lock details, in the order of [`MultiLock::paths`]. (Each
    /// is one of the crate's guards behind [`Guard`]; for a
    /// [`ReentrantMutex`](crate::ReentrantMutex), its level.)
    pub fn guards(&self) -> Vec<&dyn Guard> {
        self.parts
            .list
            .iter()
            .map(|g| g.as_ref() as &dyn Guard)
            .collect()
    }
}

/// The guards of the locks a [`MultiLockGuard`] holds, in the order they were taken.
struct Parts {
    list: Vec<Part>,
    joined: String,
}

impl Parts {
    fn new(list: Vec<Part>) -> Parts {
        let joined = list.iter().map(|g| g.path()).collect::<Vec<_>>().join(",");
        Parts { list, joined }
    }
}

impl Core for Parts {
    fn is_valid(&self) -> bool {
        self.list.iter().all(|g| g.is_valid())
    }
    fn is_gone(&self) -> bool {
        self.list.iter().any(|g| g.core().is_gone())
    }
    fn notify_lost(&self, tx: &Sender<()>) {
        self.list.iter().for_each(|g| g.core().notify_lost(tx));
    }
    fn notify_revoked(&self, tx: &Sender<()>) {
        self.list.iter().for_each(|g| g.core().notify_revoked(tx));
    }
    fn token(&self) -> u64 {
        self.list.iter().map(|g| g.token()).max().unwrap_or(0)
    }
    fn path(&self) -> &str {
        &self.joined
    }
    fn holdings(&self) -> Vec<&Holding> {
        self.list.iter().flat_map(|g| g.core().holdings()).collect()
    }
    /// The first lock that is not held, or the first error.
    fn confirm(&self) -> Result<()> {
        self.list.iter().try_for_each(|g| g.confirm())
    }
    /// Every lock, in reverse order; the first error.
    fn release(&self) -> Result<()> {
        let mut first = Ok(());
        for g in self.list.iter().rev() {
            let r = g.core().release();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for Parts {
    /// In reverse order.
    fn drop(&mut self) {
        while let Some(g) = self.list.pop() {
            drop(g);
        }
    }
}
