//! The fair exclusive lock and its guard.

use super::api::{boxed, guard_api, lock_api, ExclusiveLock, Lock, Part, Sealed};
use super::holding::Holding;
use super::recipe::{recipe_options, Base};
use crate::client::Client;
use crate::error::Result;
use crate::queue::{self, Canceller, Kind, Participant, Rule, Wait};

/// A fair, exclusive, non-re-entrant lock shared by every process that uses the same path.
///
/// Contenders queue in arrival order: each creates an ephemeral sequential node under
/// `path` and waits for the node right before its own. It also watches the node before
/// that one, so a release notifies two waiters: the next, which takes over, and the one
/// after it, which lists the queue again during that turn and then takes over on the
/// notification alone, with no round trip after it. The node names follow Apache Curator's
/// `InterProcessMutex`
/// (`_c_<uuid>-lock-<seq>`), so Java services using Curator and programs using zkguard
/// exclude each other on the same path.
///
/// An uncontended acquire costs one round trip (the create and the listing travel
/// together). Missing parent nodes are created as containers, which the server removes
/// once they are empty.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let lock = zkguard::Mutex::new(&client, "/locks/invoices")?;
/// {
///     let guard = lock.acquire()?;
///     // ... only one process at a time runs this; pass guard.token() to the resource.
///     assert!(guard.is_valid());
/// } // dropping the guard releases the lock
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Mutex {
    base: Base,
}

impl Mutex {
    /// A lock at `path` (a directory: contenders' nodes are created under it).
    ///
    /// Nothing is sent to ZooKeeper until the first acquire.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path if it is relative, ends in a slash, has an empty segment or is the root.
    pub fn new(client: &Client, path: &str) -> Result<Mutex> {
        Ok(Mutex {
            base: Base::new(client, path)?,
        })
    }

    /// The lock's node, held (for the recipes built on this one).
    pub(crate) fn node(
        &self,
        kind: Kind,
        wait: Wait,
        cancel: &Canceller,
    ) -> Result<Option<Holding>> {
        self.base.queue(kind, wait, cancel)
    }
}

recipe_options!(
    Mutex { base },
    "lock",
    "its queue nodes, its directory, and the parents it makes on the way",
    "Mutex::new(&client, \"/locks/invoices\")",
    data: "node"
);

impl Sealed for Mutex {}

impl Lock for Mutex {
    type Guard = MutexGuard;

    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<MutexGuard>> {
        Ok(self
            .node(Kind::Mutex, wait, cancel)?
            .map(|holding| MutexGuard { holding }))
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        queue::participants(&self.base.client, &self.base.path, Rule::Exclusive)
    }
}

impl ExclusiveLock for Mutex {
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>> {
        boxed(self, wait, cancel)
    }
}

lock_api!(Mutex => MutexGuard, "the lock": acquire, try_acquire, acquire_timeout);
lock_api!(Mutex: common []
    /// Every contender (holder first, then the waiters in order) with its node's data; see
    /// [`Lock::participants`].
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`](crate::Error::ForeignNode) if the directory holds a node no recipe made, and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
);

/// Proof that a [`Mutex`] is held. Dropping it releases the lock.
///
/// # Valid, suspended, lost
///
/// - [`is_valid`](MutexGuard::is_valid) is true while the session that created the lock
///   node is connected. While the connection is down it is false (the lock may or may not
///   still be held: the session may be alive); if the client gets back in time it is true
///   again.
/// - The lock is *lost* once the session has expired (the client counts the negotiated
///   timeout itself, so this is known even with no server reachable), the client was
///   closed, or the node was deleted by someone else. [`lost`](MutexGuard::lost) fires then.
///   A partitioned holder therefore learns it is not valid at once, and that it lost the
///   lock no later than the moment the server may hand the lock to someone else.
///
/// # Fencing tokens
///
/// ZooKeeper cannot stop a holder that was paused (GC, swap, SIGSTOP) from carrying on
/// after its session expired and someone else took the lock. [`token`](MutexGuard::token)
/// is the lock node's creation zxid: it grows with every later holder of any lock in the
/// ensemble. Send it with every write to the protected resource, and have the resource
/// reject a write whose token is lower than the highest it has seen.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct MutexGuard {
    pub(crate) holding: Holding,
}

guard_api!(MutexGuard);
