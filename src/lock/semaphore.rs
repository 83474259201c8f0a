//! The counting semaphore and its permit, on Apache Curator's `InterProcessSemaphoreV2`
//! protocol. Here only what is the semaphore's own: its count node, Curator's layout
//! (`locks`, `leases`), `participants` and the guard; the queue takes the permit (a gated
//! acquire: the internal lock is the gate, the lease waits by count, `queue/lease.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::api::{guard_api, lock_api, Lock, Sealed};
use super::holding::Holding;
use super::recipe::{recipe_options, Base};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::{self, names, Attempt, Canceller, Next, Participant, Place, Rule, Wait};

/// A counting semaphore: at most `permits` holders at once, shared with Apache Curator's
/// `InterProcessSemaphoreV2` on the same path.
///
/// It speaks Curator's protocol. A contender first takes the semaphore's internal lock, a
/// fair [`Mutex`](crate::Mutex) at `<path>/locks`; holding it, it creates its lease, an
/// ephemeral sequential `_c_<uuid>-lease-<seq>` under `<path>/leases`, and lists the leases.
/// If there are at most `permits` leases, its lease is a permit; otherwise it waits, still
/// holding the internal lock and watching the lease list, until a lease goes and the count
/// is back within `permits`. Then it lets the internal lock go. Java services using
/// Curator's semaphore and Rust programs using this one therefore share one permit count.
///
/// - **No idle permit.** Only the holder of the internal lock waits for a permit, and it
///   watches the whole lease list: whichever holder releases, it is notified and takes the
///   freed permit after one more round trip. The others wait for the internal lock, each
///   watching the two nodes ahead of it there (as every [`Mutex`](crate::Mutex) waiter
///   does), so one release notifies the contender that takes the permit (twice: the lease
///   list, then its own internal-lock node as it lets go), and handing the internal lock on
///   notifies the next two in its queue: four notifications, whatever the number of
///   contenders (no herd). A contender that gets in without waiting leaves no watch on the
///   lease list.
/// - **Cost.** An uncontended acquire takes two round trips (the internal lock's node and
///   its listing in one write, then the lease and the lease listing in another); the
///   internal lock is let go in the background, off the caller's path. (Curator needs
///   about five.)
/// - **Permit count.** The count is recorded as the data of `path` by the first acquire
///   of a zkguard user (so the node gets the semaphore's ACL); a [`Semaphore::new`] with
///   another count fails with [`Error::PermitMismatch`], and so does the first acquire of a
///   semaphore made with another count before any count was recorded.
///   That node is persistent (its parents are containers), so the count outlives idle
///   periods; delete it yourself to change the count once nobody uses the semaphore.
///   Curator does not record its count: a Curator user configured with another count is
///   not detected, so configure both sides alike.
/// - **Counting is safe on its own.** A contender counts every lease, its own included,
///   in a listing taken after its lease was created, and holds only if the count is within
///   `permits`; that alone never lets more than `permits` contenders hold at once, whoever
///   holds the internal lock. The internal lock is what keeps waiters from blocking each
///   other: a contender that loses it while waiting (its node deleted, its session gone)
///   deletes its lease and queues again.
///
/// A `Semaphore` pointed at a path that holds anything but `locks` and `leases` (another
/// recipe's nodes, or the lease nodes of earlier zkguard builds, which sat directly under
/// the path) fails with [`Error::ForeignNode`] naming the node, and writes nothing there.
///
/// A `try_acquire` that finds another contender taking a free permit at that moment (it
/// holds the internal lock for a round trip or two) waits for it to finish, up to the
/// client's request timeout; it says no at once only when no permit is free.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let pool = zkguard::Semaphore::new(&client, "/semaphores/db-connections", 3)?;
/// let permit = pool.acquire()?;   // at most 3 processes get past here at once
/// println!("permit {} with token {}", permit.path(), permit.token());
/// drop(permit);                   // the lease is deleted: a waiter takes the permit
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    base: Base,
    /// `<path>/locks`: the internal lock (Curator's `InterProcessMutex` layout).
    locks: String,
    /// `<path>/leases`: one node per lease.
    leases: String,
    permits: u32,
    /// Set once the count is known recorded at `path` (by `new`, or by the first acquire,
    /// which records it with the semaphore's ACL); shared by clones.
    recorded: Arc<AtomicBool>,
}

/// The children a semaphore's directory may have.
const LOCKS: &str = "locks";
const LEASES: &str = "leases";

impl Semaphore {
    /// A semaphore with `permits` permits at `path`. Checks the count recorded at `path`,
    /// if one is; if none is, the first acquire records it (with the semaphore's ACL: see
    /// [`with_acl`](Semaphore::with_acl)).
    ///
    /// # Errors
    ///
    /// [`Error::PermitMismatch`] if another count is recorded, [`Error::ForeignNode`] if
    /// `path` holds a node that is not the semaphore's (nothing is written then),
    /// [`Error::InvalidArgument`] for zero permits or data at `path` that is not a count,
    /// [`Error::InvalidPath`] for a bad path, and connection errors.
    pub fn new(client: &Client, path: &str, permits: u32) -> Result<Semaphore> {
        let base = Base::new(client, path)?;
        if permits == 0 {
            return Err(Error::InvalidArgument {
                name: "permits",
                reason: format!("a semaphore at {path} needs at least one permit"),
            });
        }
        let s = Semaphore {
            locks: names::child(path, LOCKS),
            leases: names::child(path, LEASES),
            base,
            permits,
            recorded: Arc::default(),
        };
        s.check_layout()?;
        if s.recorded_count()?.is_some() {
            s.recorded.store(true, Ordering::Release);
        }
        Ok(s)
    }

    /// Nothing but the internal lock's and the leases' directories (and the
    /// [`DIRECTORY_MARKER`](crate::DIRECTORY_MARKER) of a directory `zkguard mkdir` made)
    /// may be under the path.
    fn check_layout(&self) -> Result<()> {
        let names = match self.base.client.get_children(&self.base.path) {
            Ok((names, _)) => names,
            Err(Error::NoNode { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        match names
            .into_iter()
            .find(|n| n != LOCKS && n != LEASES && n != names::DIRECTORY_MARKER)
        {
            Some(node) => Err(Error::ForeignNode {
                path: self.base.path.clone(),
                node,
            }),
            None => Ok(()),
        }
    }

    /// The count recorded at `path`, checked against ours: `None` if none is recorded
    /// (no node, or one without data: a zkguard user's directory made before the count).
    fn recorded_count(&self) -> Result<Option<u32>> {
        match self.base.client.get_data(&self.base.path) {
            Ok((data, _)) if data.is_empty() => Ok(None),
            Ok((data, _)) => self.check_count(&data).map(Some),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `data` read at `path` as a count equal to ours.
    fn check_count(&self, data: &[u8]) -> Result<u32> {
        let path = &self.base.path;
        let recorded = std::str::from_utf8(data)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .ok_or_else(|| Error::InvalidArgument {
                name: "path",
                reason: format!(
                    "{path} holds data that is not a permit count ({:?})",
                    String::from_utf8_lossy(data)
                ),
            })?;
        if recorded != self.permits {
            return Err(Error::PermitMismatch {
                path: path.clone(),
                recorded,
                requested: self.permits,
            });
        }
        Ok(recorded)
    }

    /// Records our count at `path` (created with our ACL) unless a count is recorded, which
    /// must then be ours; within the acquire's context `cx` (its deadline, cancel, pauses
    /// after connection trouble). Once per semaphore and its clones.
    fn record(&self, cx: &mut Attempt<'_>) -> std::result::Result<(), Next> {
        let path = &self.base.path;
        let want = self.permits.to_string();
        let mut rounds = 0;
        while !self.recorded.load(Ordering::Acquire) {
            rounds += 1;
            if rounds > 10 {
                return Err(Next::Done(Err(Error::InvalidArgument {
                    name: "path",
                    reason: format!("{path} keeps changing; cannot record the permit count"),
                })));
            }
            let c = cx.checked(None)?;
            let step = match c.get_data(path) {
                Ok((data, stat)) if data.is_empty() => c
                    .set_data(path, want.as_bytes(), Some(stat.version))
                    .map(|_| true),
                Ok((data, _)) => self.check_count(&data).map(|_| true),
                // Read back on the next round: a create that lost a race is no error.
                Err(Error::NoNode { .. }) => {
                    queue::create_dir(&c, path, want.as_bytes(), self.base.acl.entries())
                        .map(|()| false)
                }
                Err(e) => Err(e),
            };
            match step {
                Ok(true) => self.recorded.store(true, Ordering::Release),
                Ok(false) | Err(Error::BadVersion { .. }) | Err(Error::NoNode { .. }) => {}
                // Retried after a pause (trouble is no change of the node: not a round).
                Err(e) => {
                    cx.failed(e, false)?;
                    rounds -= 1;
                }
            }
        }
        Ok(())
    }

    /// The number of permits.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// One permit call: [`record`](Semaphore::record) the count, then the queue's gated
    /// acquire (the internal lock at `locks`, then the lease at `leases`: `queue/lease.rs`),
    /// all in one acquire context.
    fn permit(&self, wait: Wait, canceller: &Canceller) -> Result<Option<Permit>> {
        let client = &self.base.client;
        let behind = Place::Behind {
            gate: &self.locks,
            permits: self.permits,
        };
        let spec = self.base.spec(behind, &self.leases);
        let got = queue::acquire_after(client, &spec, wait, canceller, |cx| self.record(cx))?;
        Ok(got.map(|a| Permit {
            holding: Holding::new(client, a, spec.place.kind()),
        }))
    }
}

recipe_options!(
    Semaphore { base },
    "semaphore",
    "the count node at its path when the first acquire records the count, its `locks` and \
     `leases` directories, their nodes, and the parents it makes on the way",
    "Semaphore::new(&client, \"/pools/db\", 3)",
    data: "nodes (its lease, and its node in the internal lock's queue)"
);

impl Sealed for Semaphore {}

impl Lock for Semaphore {
    type Guard = Permit;

    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Permit>> {
        self.permit(wait, cancel)
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        let mut out = queue::participants(
            &self.base.client,
            &self.leases,
            Rule::Semaphore(self.permits),
        )?;
        let queued = queue::participants(&self.base.client, &self.locks, Rule::Exclusive)?;
        out.extend(queued.into_iter().map(|mut p| {
            p.holds = false;
            p
        }));
        Ok(out)
    }
}

lock_api!(Semaphore => Permit, "a permit": acquire, try_acquire, acquire_timeout);
lock_api!(Semaphore: common [permits]
    /// The lease holders in lease order, Curator's too (the first `permits` leases hold a
    /// permit; a lease beyond them is the one waiting with the internal lock), then the
    /// contenders queued on the internal lock (`holds` is false for them; the first of them
    /// may be the one whose lease waits). [`Participant::node`] is the node's name: for a
    /// lease what Curator's `getParticipantNodes()` lists. See [`Lock::participants`].
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`] for a node no lock recipe made, and connection errors.
);

/// One held permit of a [`Semaphore`]; dropping it gives the permit back. Validity and
/// loss work as for [`MutexGuard`](crate::MutexGuard). The token is the lease node's
/// creation zxid: unique to this permit, but not a fence that refuses tokens below the
/// highest seen, since up to `permits` holders hold at once and an older permit's holder
/// is as rightful as a newer one's.
#[must_use = "the permit is given back as soon as it is dropped"]
pub struct Permit {
    holding: Holding,
}

guard_api!(Permit);
