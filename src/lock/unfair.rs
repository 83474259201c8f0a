//! The unfair single-node lock and its guard.

use super::api::{boxed, guard_api, lock_api, ExclusiveLock, Lock, Part, Sealed};
use super::holding::Holding;
use super::recipe::{recipe_options, Base};
use crate::client::Client;
use crate::error::Result;
use crate::queue::{self, names, Canceller, Kind, Participant, Wait};

/// The simplest lock: one ephemeral node at `path` whose data is a unique owner id.
///
/// `try_acquire` is a single create. There is no queue: when the holder lets go, every
/// blocked caller wakes and races to create the node (a herd), and the order is not fair.
/// That is fine for a handful of contenders that rarely collide (a cron job that must not
/// run twice, a maintenance task); use [`Mutex`](crate::Mutex) when many processes wait.
///
/// A connection loss during the create or the delete is resolved by reading the owner id
/// back; release deletes the node only if it is still the one this guard created.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let lock = zkguard::UnfairMutex::new(&client, "/locks/nightly-report")?;
/// match lock.try_acquire()? {
///     Some(_guard) => println!("running the report"),
///     None => println!("another process runs it"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct UnfairMutex {
    base: Base,
}

impl UnfairMutex {
    /// A lock whose node is `path` itself. Nothing is sent until the first acquire.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path if it is relative, ends in a slash, has an empty segment or is the root.
    pub fn new(client: &Client, path: &str) -> Result<UnfairMutex> {
        Ok(UnfairMutex {
            base: Base::new(client, path)?,
        })
    }

    /// The current holder, if the lock is held: a [`Participant`] (as
    /// [`LeaderElection::leader`](crate::LeaderElection::leader) returns) whose `node` is the
    /// path's last component, `data` the holder's owner id (the node's data) and `holds` true.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) if a persistent node (not a lock's ephemeral one) is at the
    /// path, as an acquire says; and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn holder(&self) -> Result<Option<Participant>> {
        let data = queue::single_holder(&self.base.client, &self.base.path)?;
        Ok(data.map(|data| Participant {
            node: names::base(&self.base.path).to_string(),
            data,
            holds: true,
        }))
    }
}

// No `with_data`: the node's data is the owner id that tells this holder's node from the next.
recipe_options!(
    UnfairMutex { base },
    "lock",
    "its single node, and the parents it makes on the way: the parent directory decides who \
     may delete the node",
    "UnfairMutex::new(&client, \"/locks/nightly-report\")"
);

impl Sealed for UnfairMutex {}

impl Lock for UnfairMutex {
    type Guard = UnfairMutexGuard;

    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<UnfairMutexGuard>> {
        let id = uuid::Uuid::new_v4().to_string();
        Ok(self
            .base
            .single(Kind::Unfair, id.as_bytes(), wait, cancel)?
            .map(|holding| UnfairMutexGuard { holding }))
    }

    /// The lock node's path.
    /// The [`holder`](UnfairMutex::holder) alone, if any: an unfair lock has no queue.
    fn participants(&self) -> Result<Vec<Participant>> {
        Ok(self.holder()?.into_iter().collect())
    }
}

impl ExclusiveLock for UnfairMutex {
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>> {
        boxed(self, wait, cancel)
    }
}

lock_api!(UnfairMutex => UnfairMutexGuard, "the lock": acquire, try_acquire, acquire_timeout);
lock_api!(UnfairMutex: common []
    /// The [`holder`](UnfairMutex::holder) alone, if the lock is held (an unfair lock has no
    /// queue: its waiters only watch the node); see [`Lock::participants`].
    ///
    /// # Errors
    ///
    /// As [`holder`](UnfairMutex::holder).
);

/// A held [`UnfairMutex`]; dropping it deletes the node if it is still ours. Validity, loss
/// and the fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct UnfairMutexGuard {
    holding: Holding,
}

guard_api!(UnfairMutexGuard);
