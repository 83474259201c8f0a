//! What every lock and every guard can do, written once: the [`Lock`] and [`Guard`] traits,
//! the [`ExclusiveLock`] marker, and the macros that give each type the same methods as
//! inherent ones (so callers need no import).

use std::time::Duration;

use crossbeam_channel::Receiver;

use super::holding::Core;
use super::recipe::Named;
use crate::error::{Error, Result};
use crate::queue::{Canceller, Participant, Wait};

pub(crate) use sealed::{Part, Sealed};

/// The sealed pattern: public items in a private module, so nobody outside the crate can
/// implement the traits or name what their hidden methods take (the same holds for
/// [`Core`], in `holding.rs`, and [`Named`], in `recipe.rs`: public in private modules).
mod sealed {
    /// Implemented by the crate's locks and guards only.
    pub trait Sealed {}

    /// One lock of a [`MultiLock`](crate::MultiLock), held: its guard, boxed.
    #[doc(hidden)]
    pub type Part = Box<dyn super::Guard + Send + Sync>;
}

/// A lock of this crate: [`Mutex`](crate::Mutex), [`ReentrantMutex`](crate::ReentrantMutex),
/// [`UnfairMutex`](crate::UnfairMutex), the two sides of an [`RwLock`](crate::RwLock)
/// ([`ReadLock`](crate::ReadLock), [`WriteLock`](crate::WriteLock)),
/// [`Semaphore`](crate::Semaphore), [`MultiLock`](crate::MultiLock) and
/// [`LeaderElection`](crate::LeaderElection). Sealed: only this crate implements it.
///
/// Every lock type also has these methods as inherent ones (an `RwLock` as
/// `read`/`write`…, a `LeaderElection` as `lead`…), so plain use needs no import; the trait
/// is for code that works with any lock, as Curator's `InterProcessLock` is.
///
/// ```no_run
/// use std::time::Duration;
/// use zkguard::{Guard, Lock};
///
/// /// Runs `job` under any lock, giving up after a minute.
/// fn exclusively<L: Lock>(lock: &L, job: impl FnOnce(u64)) -> zkguard::Result<bool> {
///     match lock.acquire_timeout(Duration::from_secs(60))? {
///         Some(guard) => {
///             job(guard.token()); // the resource refuses writes with older tokens
///             guard.release()?;
///             Ok(true)
///         }
///         None => Ok(false),
///     }
/// }
///
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// exclusively(&zkguard::Mutex::new(&client, "/locks/a")?, |_| {})?;
/// exclusively(zkguard::RwLock::new(&client, "/locks/b")?.write_lock(), |_| {})?;
/// exclusively(&zkguard::Semaphore::new(&client, "/semaphores/c", 2)?, |_| {})?;
/// # Ok(()) }
/// ```
pub trait Lock: Sealed + Named {
    /// What an acquire returns: proof that the lock is held, released on drop.
    type Guard: Guard;

    /// Takes the lock, waiting as `wait` says, cancelled by `cancel`. The one method each
    /// lock writes; everything else is built on it.
    #[doc(hidden)]
    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Self::Guard>>;

    /// The lock's path (a [`MultiLock`](crate::MultiLock)'s: its paths, joined by commas).
    fn path(&self) -> &str {
        self.named_path()
    }

    /// A handle that cancels this lock's blocked acquires from another thread (a
    /// [`LeaderElection`](crate::LeaderElection)'s: its blocked `lead` calls; a
    /// [`Candidate`](crate::Candidate) has its own, and dropping it is how it leaves).
    fn canceller(&self) -> Canceller {
        self.named_canceller().clone()
    }

    /// Who holds the lock and who waits for it, read from ZooKeeper now: each contender's
    /// node name, its node's data (by default its host and process id; an election's: the
    /// participant id) and whether it holds, holders first, then the waiters in queue order
    /// (nodes that go while they are read are left out). What each lock lists:
    ///
    /// - [`Mutex`](crate::Mutex), [`ReentrantMutex`](crate::ReentrantMutex), a fair
    ///   [`LeaderElection`](crate::LeaderElection): its queue, the first holds;
    /// - [`ReadLock`](crate::ReadLock), [`WriteLock`](crate::WriteLock) (and their
    ///   [`RwLock`](crate::RwLock)): the one queue of both sides, readers and writers;
    /// - [`Semaphore`](crate::Semaphore): the leases, then the contenders queued on its
    ///   internal lock ([`Semaphore::participants`](crate::Semaphore::participants));
    /// - [`UnfairMutex`](crate::UnfairMutex), an unfair election: the holder alone, if any
    ///   (there is no queue: its waiters only watch the node);
    /// - [`MultiLock`](crate::MultiLock): each of its locks' lists, one after the other in
    ///   the order of [`MultiLock::paths`](crate::MultiLock::paths).
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`] if the lock's directory holds a node no recipe made,
    /// [`Error::InvalidPath`] if a persistent node sits where an unfair lock's or
    /// election's node goes, and the errors every request can return (see
    /// [`Client`](crate::Client#errors-every-request-can-return)).
    fn participants(&self) -> Result<Vec<Participant>>;

    /// Blocks until the lock is held. Connection trouble and session expiry are waited out
    /// (a lost session means queueing again).
    ///
    /// # Errors
    ///
    /// [`Error::Cancelled`] after [`Canceller::cancel`] (and at once after
    /// [`Canceller::shut`]), [`Error::Closed`] if the client is
    /// closed, and errors the server answers with (such as [`Error::ForeignNode`] for a
    /// node no lock recipe made in the lock's directory).
    fn acquire(&self) -> Result<Self::Guard> {
        self.hold(Wait::Forever, &self.canceller())?
            .ok_or_else(|| Error::cancelled(self.path()))
    }

    /// Takes the lock if nobody holds or waits for it; never waits for the lock. On `None`
    /// nothing is left behind.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Lock::acquire), and [`Error::Timeout`] if ZooKeeper cannot be asked
    /// within the client's request timeout (connection trouble).
    fn try_acquire(&self) -> Result<Option<Self::Guard>> {
        self.hold(Wait::Try, &self.canceller())
    }

    /// Like [`acquire`](Lock::acquire), but gives up after `timeout` with `Ok(None)`,
    /// leaving nothing behind. The timeout bounds the requests too: one shorter than a round
    /// trip (zero included) gives up without an answer; to ask once whatever it takes, use
    /// [`try_acquire`](Lock::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Lock::acquire).
    fn acquire_timeout(&self, timeout: Duration) -> Result<Option<Self::Guard>> {
        self.hold(Wait::timeout(timeout), &self.canceller())
    }
}

/// A guard of any lock, boxed: what the acquires of a [`DynLock`] return.
pub type BoxedGuard = Box<dyn Guard + Send + Sync>;

/// Any [`Lock`] whose guard can move between threads, behind one type: the acquire trio with
/// the guard boxed. [`Lock`] names its guard's type, so `dyn Lock` is no type; a
/// `Box<dyn DynLock>` is, for code that picks the lock at run time (a command line, a
/// configuration) and holds whichever it got the same way. Every such lock is one (a blanket
/// implementation); [`ReentrantMutex`](crate::ReentrantMutex) and
/// [`MultiLock`](crate::MultiLock), whose guards stay on their thread, are not. Sealed, as
/// [`Lock`] is.
///
/// ```no_run
/// use zkguard::{DynLock, Guard};
///
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let shared = std::env::args().any(|a| a == "--read");
/// let rw = zkguard::RwLock::new(&client, "/locks/catalog")?;
/// let lock: Box<dyn DynLock> = if shared {
///     Box::new(rw.read_lock().clone())
/// } else {
///     Box::new(zkguard::Mutex::new(&client, "/locks/catalog-admin")?)
/// };
/// let guard = lock.acquire_boxed()?;
/// println!("fencing token {}", guard.token());
/// guard.release_boxed()?;
/// # Ok(()) }
/// ```
pub trait DynLock: Sealed + Send + Sync {
    /// [`Lock::acquire`], the guard boxed.
    ///
    /// # Errors
    ///
    /// As [`Lock::acquire`].
    fn acquire_boxed(&self) -> Result<BoxedGuard>;

    /// [`Lock::try_acquire`], the guard boxed.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_acquire`].
    fn try_acquire_boxed(&self) -> Result<Option<BoxedGuard>>;

    /// [`Lock::acquire_timeout`], the guard boxed.
    ///
    /// # Errors
    ///
    /// As [`Lock::acquire_timeout`].
    fn acquire_timeout_boxed(&self, timeout: Duration) -> Result<Option<BoxedGuard>>;

    /// [`Lock::participants`]: who holds the lock and who waits for it.
    ///
    /// # Errors
    ///
    /// As [`Lock::participants`].
    fn participants(&self) -> Result<Vec<Participant>>;
}

impl<L> DynLock for L
where
    L: Lock + Send + Sync,
    L::Guard: Send + Sync + 'static,
{
    fn acquire_boxed(&self) -> Result<BoxedGuard> {
        Ok(Box::new(self.acquire()?))
    }

    fn try_acquire_boxed(&self) -> Result<Option<BoxedGuard>> {
        Ok(self.try_acquire()?.map(|g| Box::new(g) as BoxedGuard))
    }

    fn acquire_timeout_boxed(&self, timeout: Duration) -> Result<Option<BoxedGuard>> {
        Ok(self
            .acquire_timeout(timeout)?
            .map(|g| Box::new(g) as BoxedGuard))
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        Lock::participants(self)
    }
}

/// A lock that one holder at a time can hold: [`Mutex`](crate::Mutex),
/// [`ReentrantMutex`](crate::ReentrantMutex), [`UnfairMutex`](crate::UnfairMutex) and
/// [`WriteLock`](crate::WriteLock) (an [`RwLock`](crate::RwLock)'s write side). These can be
/// combined, in any mix, into a [`MultiLock`](crate::MultiLock) with
/// [`MultiLock::of`](crate::MultiLock::of).
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let catalog = zkguard::RwLock::new(&client, "/locks/catalog")?;
/// let both = zkguard::MultiLock::of(zkguard::Mutex::new(&client, "/locks/orders")?)
///     .and(catalog.write_lock().clone());
/// let _guard = both.acquire()?; // the orders mutex and the catalog's write lock
/// # Ok(()) }
/// ```
pub trait ExclusiveLock: Lock + Clone + Send + Sync + 'static {
    /// Takes the lock for a [`MultiLock`](crate::MultiLock): its guard, boxed and `Send`.
    #[doc(hidden)]
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>>;
}

/// [`ExclusiveLock::hold_part`] for a lock whose guard is `Send` already.
pub(crate) fn boxed<L: Lock>(lock: &L, wait: Wait, cancel: &Canceller) -> Result<Option<Part>>
where
    L::Guard: Send + Sync + 'static,
{
    Ok(lock.hold(wait, cancel)?.map(|g| Box::new(g) as Part))
}

/// What every guard can say and do, the same for each: [`MutexGuard`](crate::MutexGuard),
/// [`ReentrantMutexGuard`](crate::ReentrantMutexGuard),
/// [`UnfairMutexGuard`](crate::UnfairMutexGuard), [`ReadGuard`](crate::ReadGuard),
/// [`WriteGuard`](crate::WriteGuard), [`Permit`](crate::Permit),
/// [`MultiLockGuard`](crate::MultiLockGuard) and [`Leadership`](crate::Leadership). Sealed:
/// only this crate implements it. Every guard has these methods as inherent ones too.
///
/// ```no_run
/// use zkguard::Guard;
///
/// /// Works while the guard holds; stops when the lock is lost or its holder is asked to
/// /// let go.
/// fn work_while_held(guard: impl Guard, jobs: zkguard::channel::Receiver<String>) {
///     let (lost, revoked) = (guard.lost(), guard.revocation());
///     loop {
///         zkguard::channel::select! {
///             recv(lost) -> _ => return,             // someone else may hold it soon
///             recv(revoked) -> _ => break,           // asked to let go: release below
///             recv(jobs) -> job => {
///                 if !guard.is_valid() { continue; } // disconnected right now
///                 println!("{job:?} with fencing token {}", guard.token());
///             }
///         }
///     }
///     let _ = guard.release();
/// }
/// ```
pub trait Guard: Sealed + std::fmt::Debug {
    /// The node (or nodes) held.
    #[doc(hidden)]
    fn core(&self) -> &dyn Core;

    /// Whether the lock is held right now, as far as this process can know without
    /// asking ZooKeeper: the session that created the node is connected, has had a request
    /// answered within the last two thirds of its timeout, and the lock was not lost.
    /// Computed at the call from the monotonic clock, so a process resumed after a pause
    /// longer than that gets `false` at once, before the client's thread has run. False
    /// while disconnected or unanswered (the session may still be alive; it turns true again
    /// if the client gets back in time) and for good once lost.
    ///
    /// This is local detection. It is enough when the session timeout is well above the
    /// ensemble's `syncLimit × tickTime`: a server cut off from its quorum keeps answering
    /// pings until it notices (up to that long), while the others count the session's
    /// timeout from the cut. Below that, call [`confirm`](Guard::confirm) before acting.
    /// (`lost()` counts from the last answer, so in that case it can fire up to
    /// `syncLimit × tickTime` late.)
    fn is_valid(&self) -> bool {
        self.core().is_valid()
    }

    /// A receiver of its own (every call makes one, as `events()` does on a
    /// [`Client`](crate::Client) or [`Candidate`](crate::Candidate)) that gets `()` once
    /// the lock is lost (at once if it already is): the
    /// session expired (counted by the client itself, so known even with no server
    /// reachable), the client was closed, or the node was deleted by someone else (the
    /// guard keeps a watch on its node from acquire to release, armed again after every
    /// data change and reconnect). Meant for `select!` beside the work.
    #[must_use = "the receiver is the only way to hear the signal"]
    fn lost(&self) -> Receiver<()> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.core().notify_lost(&tx);
        rx
    }

    /// The fencing token: the node's creation zxid. It is larger for every later holder of
    /// the same lock (a holder that got it after this one let go or was cut off). Send it
    /// with each write to the resource the lock protects and have the resource refuse
    /// tokens lower than the highest it has seen: a holder paused past its session's expiry
    /// is then stopped by the resource.
    ///
    /// Tokens of different locks do not compare (a later holder of another lock may have
    /// queued earlier). A [`MultiLockGuard`](crate::MultiLockGuard)'s token fences holders
    /// of the same set of locks (see there). A [`Permit`](crate::Permit)'s token tells
    /// permits apart but is no fence by "highest seen": permits are held side by side, and
    /// a holder of an older permit is still a rightful holder; the same goes for a
    /// [`ReadGuard`](crate::ReadGuard) among readers (a writer's token is above
    /// every reader's before it).
    fn token(&self) -> u64 {
        self.core().token()
    }

    /// The full path of the node this guard holds.
    fn path(&self) -> &str {
        self.core().path()
    }

    /// A receiver that gets `()` when someone asks this holder to let go (see
    /// [`revoke`](crate::revoke), compatible with Curator's `Revoker`: the node's data set
    /// to exactly `__REVOKE__`; other writes are not requests). Letting go is up to the
    /// holder.
    #[must_use = "the receiver is the only way to hear the signal"]
    fn revocation(&self) -> Receiver<()> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.core().notify_revoked(&tx);
        rx
    }

    /// Proves, with ZooKeeper's quorum, that the lock is still ours at this instant (one
    /// round trip: a read of our node and a write that changes nothing).
    /// [`Error::LockLost`] if it is not (the node is gone or replaced, or its session ended;
    /// the guard is lost from then on); a connection error or timeout if ZooKeeper cannot be
    /// asked. Never a false yes. ([`Leadership`](crate::Leadership) says
    /// [`Error::NotLeader`] where a lock's guard says [`Error::LockLost`].)
    ///
    /// Use it before an action that must not run twice when the session timeout is not
    /// comfortably above the ensemble's `syncLimit × tickTime` (see
    /// [`is_valid`](Guard::is_valid)).
    fn confirm(&self) -> Result<()> {
        self.core().confirm()
    }

    /// Releases and reports how the delete went, waiting for its answer:
    /// [`Error::LockLost`] if the lock had already been lost; on a connection error the
    /// delete is retried in the background. Dropping the guard releases without waiting:
    /// the delete is written and the answer left to the background (docs/semantics.md,
    /// "What a returned drop means"). For a [`Leadership`](crate::Leadership) this is
    /// resigning ([`Error::NotLeader`] if it was lost); for a
    /// [`ReentrantMutexGuard`](crate::ReentrantMutexGuard), giving up one level (the lock is
    /// released with the outermost); for a [`MultiLockGuard`](crate::MultiLockGuard), every
    /// lock in reverse order, reporting the first error.
    ///
    /// `release` answers one question: was the lock ours until this release? So after a
    /// loss it is [`Error::LockLost`] even if [`lost`](Guard::lost) fired or
    /// [`is_valid`](Guard::is_valid) said so before: the signal may have reached another
    /// thread, or no thread at all, and the code that releases after its work must learn
    /// that the work did not all run under the lock. Code that has handled the loss
    /// already and wants nothing more drops the guard instead (the quiet release).
    fn release(self) -> Result<()>
    where
        Self: Sized,
    {
        self.core().release()
    }

    /// [`release`](Guard::release) for a boxed guard (a [`BoxedGuard`], which `release`,
    /// taking the guard by value, cannot take).
    ///
    /// # Errors
    ///
    /// As [`release`](Guard::release).
    fn release_boxed(self: Box<Self>) -> Result<()> {
        self.core().release()
    }

    /// Applies `ops` to ZooKeeper only if the lock is still held when they apply: one
    /// [`Client::multi`](crate::Client::multi) that first checks that the guard's node still
    /// exists (for a [`MultiLockGuard`](crate::MultiLockGuard), every node), sent only on the
    /// session that holds it. All or nothing: if the node is gone (deleted, or its session
    /// expired, so someone else may hold the lock now) nothing of `ops` is applied. This
    /// closes the paused-holder window inside ZooKeeper itself: a leader that writes its
    /// decisions to ZooKeeper this way cannot overwrite its successor's, however long it was
    /// stopped. (For other resources, send [`token`](Guard::token) instead.)
    ///
    /// Returns the results of `ops` alone (the checks left out). Nodes that `ops` create get
    /// the open ACL, as in any multi.
    ///
    /// ```no_run
    /// use zkguard::{Guard, Op};
    /// # fn f(election: &zkguard::LeaderElection) -> zkguard::Result<()> {
    /// let leadership = election.lead()?;
    /// // Applied only while this process still leads.
    /// leadership.fenced_multi(&[Op::SetData {
    ///     path: "/app/assignment".into(),
    ///     data: b"shard-7=host-a".to_vec(),
    ///     version: None,
    /// }])?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::LockLost`] ([`Error::NotLeader`] for a [`Leadership`](crate::Leadership))
    ///   when the lock is known lost or a node check fails: nothing was applied; also when
    ///   the server applied the `multi` but the node was known gone once its reply arrived
    ///   (as [`confirm`](Guard::confirm), never a "yes" then): `ops` *were* applied, but not
    ///   provably under the lock (the check may have passed on a node someone else put at
    ///   the node's path after deleting ours; the table in docs/semantics.md, "Fenced
    ///   writes", says what each answer means);
    /// - [`Error::Multi`] when one of `ops` fails, with its index in `ops`: nothing was
    ///   applied;
    /// - [`Error::InvalidArgument`] for an unfair lock or election (its node sits at a
    ///   shared path where the next holder creates an identical one, which a check cannot
    ///   tell apart), or a multi-lock whose parts are held by different clients;
    /// - a connection error or timeout: as for any write, it may or may not have applied.
    fn fenced_multi(&self, ops: &[crate::client::Op]) -> Result<Vec<crate::client::OpResult>> {
        self.core().fenced(ops)
    }
}

/// The inherent methods of a lock: one-line delegations to [`Lock`], so callers need no
/// import. `lock_api!(Mutex => MutexGuard, "the lock": acquire, try_acquire,
/// acquire_timeout)` gives the acquire trio under those names; `lock_api!(RwLock.read => …)`
/// the trio of the view in field `read`. `lock_api!(Mutex: common [methods] /// docs)` gives
/// `path`, `canceller`, `queue_events`, `participants` (its docs those given: what this type
/// lists) and a `Debug` showing the path and what the methods listed return.
macro_rules! lock_api {
    ($lock:ident $(.$view:ident)? => $guard:ty, $what:literal:
        $acquire:ident, $try_acquire:ident, $acquire_timeout:ident) => {
        impl $lock {
            #[doc = concat!("Blocks until ", $what, " is held; see [`Lock::acquire`](crate::Lock::acquire).")]
            pub fn $acquire(&self) -> $crate::error::Result<$guard> {
                $crate::lock::api::Lock::acquire(&(*self)$(.$view)?)
            }

            #[doc = concat!(
                "Takes ", $what, " if it is free and nobody waits for it, never waiting for it; ",
                "see [`Lock::try_acquire`](crate::Lock::try_acquire)."
            )]
            pub fn $try_acquire(&self) -> $crate::error::Result<Option<$guard>> {
                $crate::lock::api::Lock::try_acquire(&(*self)$(.$view)?)
            }

            #[doc = concat!(
                "Takes ", $what, " within `timeout`, else `Ok(None)` with nothing left behind; ",
                "see [`Lock::acquire_timeout`](crate::Lock::acquire_timeout)."
            )]
            pub fn $acquire_timeout(
                &self,
                timeout: std::time::Duration,
            ) -> $crate::error::Result<Option<$guard>> {
                $crate::lock::api::Lock::acquire_timeout(&(*self)$(.$view)?, timeout)
            }
        }
    };
    ($lock:ident $(.$view:ident)?: common [$($field:ident),*] $(#[$participants:meta])+) => {
        impl $lock {
            /// The lock's path.
            pub fn path(&self) -> &str {
                $crate::lock::api::Lock::path(&(*self)$(.$view)?)
            }

            /// A handle that cancels this lock's blocked acquires from another thread.
            pub fn canceller(&self) -> $crate::queue::Canceller {
                $crate::lock::api::Lock::canceller(&(*self)$(.$view)?)
            }

            /// Where this lock's waiting acquires stand in its queue: when each one's node
            /// is made, and its place in line as it moves (see [`QueueEvent`](crate::QueueEvent);
            /// the same as [`Canceller::queue_events`](crate::Canceller::queue_events)).
            #[must_use = "the receiver is the only way to hear the events"]
            pub fn queue_events(&self) -> crossbeam_channel::Receiver<$crate::queue::QueueEvent> {
                self.canceller().queue_events()
            }

            $(#[$participants])+
            pub fn participants(&self) -> $crate::error::Result<Vec<$crate::queue::Participant>> {
                $crate::lock::api::Lock::participants(&(*self)$(.$view)?)
            }
        }

        impl std::fmt::Debug for $lock {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($lock))
                    .field("path", &self.path())
                    $(.field(stringify!($field), &self.$field()))*
                    .finish()
            }
        }
    };
}
pub(crate) use lock_api;

/// Makes `$guard` a [`Guard`] whose node (or nodes) is the [`Core`] in field `$field`, and
/// gives it the same methods as inherent ones (one-line delegations) and its `Debug`.
macro_rules! guard_api {
    ($guard:ident) => {
        $crate::lock::api::guard_api!($guard, holding);
    };
    ($guard:ident, $field:ident) => {
        impl $crate::lock::api::Sealed for $guard {}

        impl $crate::lock::api::Guard for $guard {
            fn core(&self) -> &dyn $crate::lock::holding::Core {
                &self.$field
            }
        }

        impl $guard {
            /// Whether the lock is held right now, as far as this process can know without
            /// asking ZooKeeper; see [`Guard::is_valid`](crate::Guard::is_valid).
            pub fn is_valid(&self) -> bool {
                $crate::lock::api::Guard::is_valid(self)
            }

            /// A receiver that gets `()` once the lock is lost; see
            /// [`Guard::lost`](crate::Guard::lost).
            #[must_use = "the receiver is the only way to hear the signal"]
            pub fn lost(&self) -> crossbeam_channel::Receiver<()> {
                $crate::lock::api::Guard::lost(self)
            }

            /// The fencing token, larger for every later holder; see
            /// [`Guard::token`](crate::Guard::token).
            pub fn token(&self) -> u64 {
                $crate::lock::api::Guard::token(self)
            }

            /// The full path of the node held; see [`Guard::path`](crate::Guard::path).
            pub fn path(&self) -> &str {
                $crate::lock::api::Guard::path(self)
            }

            /// A receiver that gets `()` when someone asks this holder to let go; see
            /// [`Guard::revocation`](crate::Guard::revocation).
            #[must_use = "the receiver is the only way to hear the signal"]
            pub fn revocation(&self) -> crossbeam_channel::Receiver<()> {
                $crate::lock::api::Guard::revocation(self)
            }

            /// Proves with ZooKeeper's quorum that the lock is still ours at this instant;
            /// see [`Guard::confirm`](crate::Guard::confirm).
            ///
            /// # Errors
            ///
            /// [`Error::LockLost`](crate::Error::LockLost) if it is not (for a leadership,
            /// [`Error::NotLeader`](crate::Error::NotLeader)); a connection error or timeout
            /// if ZooKeeper cannot be asked.
            pub fn confirm(&self) -> $crate::error::Result<()> {
                $crate::lock::api::Guard::confirm(self)
            }

            /// Releases and reports how the delete went; see
            /// [`Guard::release`](crate::Guard::release).
            ///
            /// # Errors
            ///
            /// [`Error::LockLost`](crate::Error::LockLost) (for a leadership,
            /// [`Error::NotLeader`](crate::Error::NotLeader)) if it had already been lost;
            /// connection errors, after which the delete is retried in the background.
            /// After a loss this is an error even if `lost()` fired before (it answers
            /// whether the lock was held until the release); drop the guard instead when
            /// the loss was handled already.
            pub fn release(self) -> $crate::error::Result<()> {
                $crate::lock::api::Guard::release(self)
            }

            /// Applies `ops` only while the lock is held: one `multi` behind a check of
            /// the held node (or nodes), on the holding session; see
            /// [`Guard::fenced_multi`](crate::Guard::fenced_multi).
            ///
            /// # Errors
            ///
            /// [`Error::LockLost`](crate::Error::LockLost) (for a leadership,
            /// [`Error::NotLeader`](crate::Error::NotLeader)) when the lock is lost:
            /// nothing was applied; [`Error::Multi`](crate::Error::Multi) naming the op that
            /// failed; the others of [`Guard::fenced_multi`](crate::Guard::fenced_multi).
            pub fn fenced_multi(
                &self,
                ops: &[$crate::client::Op],
            ) -> $crate::error::Result<Vec<$crate::client::OpResult>> {
                $crate::lock::api::Guard::fenced_multi(self, ops)
            }
        }

        impl std::fmt::Debug for $guard {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let core = $crate::lock::api::Guard::core(self);
                f.debug_struct(stringify!($guard))
                    .field("path", &core.path())
                    .field("token", &core.token())
                    .field("valid", &core.is_valid())
                    .finish()
            }
        }
    };
}
pub(crate) use guard_api;
