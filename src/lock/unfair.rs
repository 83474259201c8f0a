//! The unfair single-node lock and its guard.

use std::time::{Duration, Instant};

use crossbeam_channel::select;

use crate::client::{Check, Client, Job};
use crate::error::{Error, Result};
use crate::queue::{self, Acquired, Canceller, Holding, SessionEvents, Wait};
use crate::{CreateMode, EventType, SessionEvent};

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
    canceller: Canceller,
}

impl UnfairMutex {
    /// A lock whose node is `path` itself. A bad path is an [`Error::InvalidPath`].
    pub fn new(client: &Client, path: &str) -> Result<UnfairMutex> {
        queue::check_lock_path(path)?;
        Ok(UnfairMutex {
            client: client.clone(),
            path: path.to_string(),
            canceller: Canceller::default(),
        })
    }

    /// The lock node's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Blocks until the lock is held.
    pub fn acquire(&self) -> Result<UnfairMutexGuard> {
        self.lock(Wait::Forever)?.ok_or_else(|| Error::Cancelled {
            path: self.path.clone(),
        })
    }

    /// One create: the lock if nobody holds it. If ZooKeeper cannot be asked within the
    /// client's request timeout (connection trouble), it fails with [`Error::Timeout`].
    pub fn try_acquire(&self) -> Result<Option<UnfairMutexGuard>> {
        self.lock(Wait::Try)
    }

    /// Like [`acquire`](UnfairMutex::acquire), giving up after `timeout` with `Ok(None)`.
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Option<UnfairMutexGuard>> {
        self.lock(Wait::timeout(timeout))
    }

    /// A handle that cancels this lock's blocked acquires from another thread.
    pub fn canceller(&self) -> Canceller {
        self.canceller.clone()
    }

    /// The current holder's owner id (the node's data), if the lock is held.
    pub fn holder(&self) -> Result<Option<Vec<u8>>> {
        match self.client.get_data(&self.path) {
            Ok((data, _)) => Ok(Some(data)),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn lock(&self, wait: Wait) -> Result<Option<UnfairMutexGuard>> {
        let cancel = self.canceller.register();
        let events = SessionEvents::new(&self.client);
        let events = &events.rx;
        let deadline = wait.deadline(&self.client);
        let id = uuid::Uuid::new_v4().to_string();
        let cancelled = || Error::Cancelled {
            path: self.path.clone(),
        };
        // Set while a create's outcome is unknown; cleared by the next clear answer.
        let mut unsure = false;
        let give_up = |unsure: bool| {
            if unsure {
                self.client.delete_in_background(Job::Path {
                    path: self.path.clone(),
                    check: Check::Data(id.as_bytes().to_vec()),
                    session: self.client.session_id(),
                });
            }
        };
        loop {
            if cancel.rx.try_recv().is_ok() {
                give_up(unsure);
                return Err(cancelled());
            }
            let Some(c) = queue::bounded(&self.client, deadline) else {
                give_up(unsure);
                return queue::expired(wait, &self.path, &self.client);
            };
            let tried = self.try_once(&c, &id);
            unsure =
                matches!(&tried, Err(e) if e.is_connection_error() || *e == Error::SessionExpired);
            match tried {
                Ok(Some(a)) => {
                    return Ok(Some(UnfairMutexGuard {
                        holding: Holding::new(&self.client, a, true),
                    }))
                }
                Ok(None) if matches!(wait, Wait::Try) => return Ok(None),
                Ok(None) => {}
                Err(e) if e.is_connection_error() || e == Error::SessionExpired => {
                    queue::pause(events, &cancel.rx, deadline);
                    continue;
                }
                Err(e) => {
                    give_up(unsure);
                    return Err(e);
                }
            }
            // Held by someone else: wait for the node to go (no watch is left if it
            // already has).
            let watch = match c.get_data_w(&self.path) {
                Ok((_, _, w)) => w,
                Err(Error::NoNode { .. }) => continue,
                Err(e) if e.is_connection_error() || e == Error::SessionExpired => continue,
                Err(e) => return Err(e),
            };
            let until = deadline.unwrap_or_else(|| Instant::now() + self.client.session_timeout());
            select! {
                recv(watch) -> ev => {
                    if let Ok(ev) = ev {
                        if ev.event_type == EventType::Closed {
                            return Err(Error::Closed);
                        }
                    }
                }
                recv(events) -> ev => {
                    if matches!(ev, Ok(SessionEvent::Closed) | Err(_)) {
                        return Err(Error::Closed);
                    }
                }
                recv(cancel.rx) -> _ => return Err(cancelled()),
                recv(crossbeam_channel::at(until)) -> _ => {}
            }
        }
    }

    /// One create; a lost reply is resolved by reading the owner id back.
    fn try_once(&self, c: &Client, id: &str) -> Result<Option<Acquired>> {
        let mut parents_made = false;
        loop {
            match c.create(&self.path, id.as_bytes(), CreateMode::Ephemeral) {
                Ok(cr) => {
                    return Ok(Some(Acquired {
                        path: cr.path,
                        token: cr.stat.czxid as u64,
                        owner: cr.stat.ephemeral_owner,
                    }))
                }
                Err(Error::NodeExists { .. }) => return self.ours(c, id),
                Err(Error::NoNode { .. }) if !parents_made => {
                    parents_made = true;
                    let parent = match self.path.rfind('/') {
                        Some(0) | None => continue,
                        Some(i) => &self.path[..i],
                    };
                    queue::create_dir(c, parent, b"")?;
                }
                Err(e) if e.is_connection_error() => {
                    // Did the create happen? Read the owner id back; if that fails too,
                    // the caller retries with the same id, and a node of ours found by a
                    // later create (NodeExists) is recognised by it.
                    return self.ours(c, id);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The node at the path, if it is ours (our owner id, our session).
    fn ours(&self, c: &Client, id: &str) -> Result<Option<Acquired>> {
        match c.get_data(&self.path) {
            Ok((data, stat)) if data == id.as_bytes() && stat.ephemeral_owner == c.session_id() => {
                Ok(Some(Acquired {
                    path: self.path.clone(),
                    token: stat.czxid as u64,
                    owner: stat.ephemeral_owner,
                }))
            }
            Ok(_) | Err(Error::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl std::fmt::Debug for UnfairMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnfairMutex")
            .field("path", &self.path)
            .finish()
    }
}

/// A held [`UnfairMutex`]; dropping it deletes the node if it is still ours. Validity, loss
/// and the fencing token work as for [`MutexGuard`](crate::MutexGuard).
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct UnfairMutexGuard {
    holding: Holding,
}

super::guard_api!(UnfairMutexGuard);
