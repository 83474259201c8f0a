//! The counting semaphore and its permit.

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::{self, names, Canceller, Holding, Participant, Rule, Spec, Wait};

/// A counting semaphore: at most `permits` holders at once, queued fairly.
///
/// Contenders queue like a [`Mutex`](crate::Mutex)'s; the first `permits` nodes hold a
/// permit. A waiter watches only the node `permits` places ahead of it, so one release
/// wakes one waiter (no herd).
///
/// The permit count is recorded as the data of the semaphore's node (`path`) by the first
/// user; a [`Semaphore::new`] with another count fails with [`Error::PermitMismatch`].
/// That node is persistent (its parents are containers), so the count outlives idle
/// periods; delete it yourself to change the count once nobody uses the semaphore.
///
/// Known limit of the N-places-ahead rule: when holders release out of arrival order, a
/// freed permit can stay unused until the node the first waiter watches goes, or until the
/// waiter's slow re-check (about one session timeout). Every permit is still used by the
/// time each holder has released once; the count of holders never exceeds `permits`.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let pool = zkguard::Semaphore::new(&client, "/semaphores/db-connections", 3)?;
/// let permit = pool.acquire()?;   // at most 3 processes get past here at once
/// drop(permit);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    path: String,
    permits: u32,
    data: Vec<u8>,
    canceller: Canceller,
}

impl Semaphore {
    /// A semaphore with `permits` permits at `path`. Records the count at `path` if nobody
    /// has, else checks it: [`Error::PermitMismatch`] if it differs,
    /// [`Error::InvalidArgument`] for zero permits, [`Error::InvalidPath`] for a bad path.
    pub fn new(client: &Client, path: &str, permits: u32) -> Result<Semaphore> {
        queue::check_lock_path(path)?;
        if permits == 0 {
            return Err(Error::InvalidArgument {
                name: "permits",
                reason: format!("a semaphore at {path} needs at least one permit"),
            });
        }
        let s = Semaphore {
            client: client.clone(),
            path: path.to_string(),
            permits,
            data: names::default_data(),
            canceller: Canceller::default(),
        };
        s.check_recorded()?;
        Ok(s)
    }

    fn check_recorded(&self) -> Result<()> {
        let want = self.permits.to_string();
        for _ in 0..10 {
            match self.client.get_data(&self.path) {
                Ok((data, stat)) if data.is_empty() => {
                    match self
                        .client
                        .set_data(&self.path, want.as_bytes(), Some(stat.version))
                    {
                        Ok(_) => return Ok(()),
                        Err(Error::BadVersion { .. }) | Err(Error::NoNode { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Ok((data, _)) => {
                    let recorded = std::str::from_utf8(&data)
                        .ok()
                        .and_then(|s| s.trim().parse::<u32>().ok())
                        .ok_or_else(|| Error::InvalidArgument {
                            name: "path",
                            reason: format!(
                                "{} holds data that is not a permit count ({:?})",
                                self.path,
                                String::from_utf8_lossy(&data)
                            ),
                        })?;
                    if recorded != self.permits {
                        return Err(Error::PermitMismatch {
                            path: self.path.clone(),
                            recorded,
                            requested: self.permits,
                        });
                    }
                    return Ok(());
                }
                Err(Error::NoNode { .. }) => {
                    match queue::create_dir(&self.client, &self.path, want.as_bytes()) {
                        Ok(()) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::InvalidArgument {
            name: "path",
            reason: format!(
                "{} keeps changing; cannot record the permit count",
                self.path
            ),
        })
    }

    /// Sets the data stored in this contender's node (default: host name and process id).
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Semaphore {
        self.data = data.into();
        self
    }

    /// The semaphore's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The number of permits.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// Blocks until a permit is held.
    pub fn acquire(&self) -> Result<Permit> {
        self.hold(Wait::Forever)?.ok_or_else(|| Error::Cancelled {
            path: self.path.clone(),
        })
    }

    /// A permit if one is free and nobody waits; never waits.
    pub fn try_acquire(&self) -> Result<Option<Permit>> {
        self.hold(Wait::Try)
    }

    /// A permit within `timeout`, else `Ok(None)` with nothing left behind.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<Permit>> {
        self.hold(Wait::timeout(timeout))
    }

    /// A handle that cancels this semaphore's blocked acquires from another thread.
    pub fn canceller(&self) -> Canceller {
        self.canceller.clone()
    }

    /// Every contender in queue order: the first `permits` hold a permit.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        queue::participants(&self.client, &self.path, Rule::Semaphore(self.permits))
    }

    fn hold(&self, wait: Wait) -> Result<Option<Permit>> {
        let permits = self.permits.to_string();
        let spec = Spec {
            dir: &self.path,
            marker: names::LEASE,
            rule: Rule::Semaphore(self.permits),
            data: &self.data,
            dir_data: permits.as_bytes(),
        };
        Ok(
            queue::acquire(&self.client, &spec, wait, &self.canceller)?.map(|a| Permit {
                holding: Holding::new(&self.client, a, false),
            }),
        )
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("path", &self.path)
            .field("permits", &self.permits)
            .finish()
    }
}

/// One held permit of a [`Semaphore`]; dropping it gives the permit back. Validity, loss
/// and the fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the permit is given back as soon as it is dropped"]
pub struct Permit {
    holding: Holding,
}

super::guard_api!(Permit);
