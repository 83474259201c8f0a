//! The unfair single-node lock and its guard.

use super::{boxed, guard_api, lock_api, ExclusiveLock, Lock, Part, Sealed};
use super::{Holding, Role};
use crate::client::{Client, NodeAcl};
use crate::error::Result;
use crate::queue::{self, names, Canceller, Participant, Wait};

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
    client: Client,
    path: String,
    acl: NodeAcl,
    canceller: Canceller,
}

impl UnfairMutex {
    /// A lock whose node is `path` itself. A bad path is an [`Error::InvalidPath`](crate::Error::InvalidPath).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path if it is relative, ends in a slash, has an empty segment or is the root.
    pub fn new(client: &Client, path: &str) -> Result<UnfairMutex> {
        queue::check_lock_path(path)?;
        Ok(UnfairMutex {
            client: client.clone(),
            path: path.to_string(),
            acl: client.node_acl().clone(),
            canceller: Canceller::default(),
        })
    }

    /// The ACL of the nodes this lock creates (its single node, and the parents it makes on the
    /// way: the parent directory decides who may delete the node) instead of the client's [`ClientBuilder::node_acl`](crate::ClientBuilder::node_acl).
    /// See [`NodeAcl`] for the presets and what a creator ACL implies (an existing directory
    /// keeps its own ACL).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an ACL that names the
    /// creator's identities on a client that has none; nothing is created.
    pub fn with_acl(mut self, acl: NodeAcl) -> Result<UnfairMutex> {
        acl.check_identity(self.client.has_identity(), &self.path)?;
        self.acl = acl;
        Ok(self)
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
        let data = queue::single_holder(&self.client, &self.path)?;
        Ok(data.map(|data| Participant {
            node: names::base(&self.path).to_string(),
            data,
            holds: true,
        }))
    }
}

impl Sealed for UnfairMutex {}

impl Lock for UnfairMutex {
    type Guard = UnfairMutexGuard;

    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<UnfairMutexGuard>> {
        let id = uuid::Uuid::new_v4().to_string();
        let acquired = queue::single(
            &self.client,
            &self.path,
            id.as_bytes(),
            &self.acl,
            wait,
            cancel,
        )?;
        Ok(acquired.map(|a| UnfairMutexGuard {
            holding: Holding::new(&self.client, a, Role::Lock, true),
        }))
    }

    /// The lock node's path.
    fn path(&self) -> &str {
        &self.path
    }

    fn canceller(&self) -> Canceller {
        self.canceller.clone()
    }
}

impl ExclusiveLock for UnfairMutex {
    fn hold_part(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Part>> {
        boxed(self, wait, cancel)
    }
}

lock_api!(UnfairMutex => UnfairMutexGuard, "the lock": acquire, try_acquire, acquire_timeout);
lock_api!(UnfairMutex: common []);

/// A held [`UnfairMutex`]; dropping it deletes the node if it is still ours. Validity, loss
/// and the fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct UnfairMutexGuard {
    holding: Holding,
}

guard_api!(UnfairMutexGuard);
