//! Background deletes: a node that must go (an abandoned queue node, a released lock whose
//! delete hit a connection problem) is handed here and deleted as soon as the session can.
//!
//! A helper thread exists only while there is work, and ends when the list is empty, the
//! session that owned the nodes is gone (ephemeral nodes go with it), or the client is
//! dropped. It never holds the client open for longer than one short request.
//!
//! A delete for a node of session S is written only on a connection of session S (the
//! requests are pinned to it): once S is gone, the server has removed the node or will, and
//! the job is dropped. Sent on another session, a check-then-delete could remove a node
//! that someone else created at the same path in between.

use crate::error::escape;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::{Client, Owner};
use crate::backoff::Backoff;
use crate::client::types::Hex;
use crate::client::{SessionEvent, SessionState};
use crate::error::Error;

/// One node to delete. Its `Debug` (in log records) shows the session in hex.
pub(crate) enum Job {
    /// Delete `path` if it passes `check`.
    Path {
        path: String,
        check: Check,
        session: i64,
    },
    /// Delete every child of `dir` whose name contains `uuid` (a create whose reply was
    /// lost may or may not have made one).
    Uuid {
        dir: String,
        uuid: String,
        session: i64,
    },
    /// A delete of `path` already sent: see that its reply comes, and delete again if the
    /// connection failed under it.
    Sent {
        sent: super::Pending<()>,
        path: String,
        session: i64,
    },
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Path {
                path,
                check,
                session,
            } => {
                let mut d = f.debug_struct("Path");
                d.field("path", path);
                if !matches!(check, Check::None) {
                    d.field("check", check);
                }
                d.field("session", &Hex(*session)).finish()
            }
            Job::Uuid { dir, uuid, session } => f
                .debug_struct("Uuid")
                .field("dir", dir)
                .field("uuid", uuid)
                .field("session", &Hex(*session))
                .finish(),
            Job::Sent { path, session, .. } => f
                .debug_struct("Sent")
                .field("path", path)
                .field("session", &Hex(*session))
                .finish(),
        }
    }
}

impl Job {
    fn session(&self) -> i64 {
        match self {
            Job::Path { session, .. } | Job::Uuid { session, .. } | Job::Sent { session, .. } => {
                *session
            }
        }
    }
}

/// What must be true of a node before the janitor deletes it: a condition the recipe that
/// hands the node over states as data (the janitor knows no recipe).
#[derive(Debug, Clone)]
pub(crate) enum Check {
    /// Nothing: the path is the caller's alone (its name carries the caller's uuid).
    None,
    /// It is still the node created at this zxid.
    Czxid(u64),
    /// Its data is exactly these bytes (a node that holds its owner's id).
    Data(Vec<u8>),
}

#[derive(Default)]
pub(crate) struct Janitor {
    jobs: Vec<Job>,
    running: bool,
}

/// How long one background request may take.
const STEP: Duration = Duration::from_secs(2);

impl Client {
    /// Deletes `path`, an ephemeral node of session `owner` that passes `check`, now if
    /// the client is connected, else (or on a connection error) in the background.
    /// `Ok(true)`: deleted; `Ok(false)`: not there, or not the node `check` describes;
    /// `Err(SessionExpired)`: its session is gone, and the node with it; a connection error:
    /// handed to the background.
    pub(crate) fn delete_owned(
        &self,
        path: &str,
        check: Check,
        owner: i64,
        timeout: Duration,
    ) -> crate::error::Result<bool> {
        let current = self.session_id();
        let state = self.state();
        if state == SessionState::Closed || (current != 0 && current != owner) {
            return Err(Error::SessionExpired);
        }
        let later = |check| Job::Path {
            path: path.to_string(),
            check,
            session: owner,
        };
        if state != SessionState::Connected {
            self.delete_in_background(later(check));
            return Err(Error::ConnectionLoss);
        }
        match delete_checked(&self.with_timeout(timeout).pinned(owner), path, &check) {
            Err(e) if e.is_connection_error() => {
                self.delete_in_background(later(check));
                Err(e)
            }
            r => r,
        }
    }

    /// Sends a delete of `path`, an ephemeral node of session `owner` (no check: the path is
    /// ours), without waiting for its reply: the caller goes on at once, and the background
    /// sees the reply come (or deletes again if the connection failed under it). Never
    /// blocks.
    pub(crate) fn delete_unwaited(&self, path: &str, owner: i64) {
        let later = || Job::Path {
            path: path.to_string(),
            check: Check::None,
            session: owner,
        };
        if self.session_id() != owner || self.state() != SessionState::Connected {
            return self.delete_in_background(later());
        }
        let sent = self.pinned(owner).pipeline(|p| p.delete(path, None));
        self.delete_in_background(Job::Sent {
            sent,
            path: path.to_string(),
            session: owner,
        });
    }

    /// Hands a delete to the background. Never blocks.
    pub(crate) fn delete_in_background(&self, job: Job) {
        log::debug!("zkguard: background delete {job:?}");
        let start = {
            let mut j = self.owner.janitor.lock();
            j.jobs.push(job);
            !std::mem::replace(&mut j.running, true)
        };
        if start {
            let shared = self.shared.clone();
            let owner = Arc::downgrade(&self.owner);
            let events = shared.subscribe();
            let spawned = std::thread::Builder::new()
                .name("zkguard-janitor".into())
                .spawn(move || run(owner, shared.negotiated_timeout().min(STEP), events));
            if let Err(e) = spawned {
                log::error!("zkguard: cannot start the background delete thread: {e}");
                self.owner.janitor.lock().running = false;
            }
        }
    }
}

fn run(owner: Weak<Owner>, timeout: Duration, events: Receiver<SessionEvent>) {
    // Between passes that left deletes undone (connection trouble).
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
    loop {
        let Some(owner) = owner.upgrade() else {
            return;
        };
        let client = Client {
            shared: owner.shared.clone(),
            owner,
            timeout,
            pin: None,
        };
        let jobs = std::mem::take(&mut client.owner.janitor.lock().jobs);
        let mut left = Vec::new();
        for job in jobs {
            // A delete sent by its caller: done once answered, else retried like any other.
            let job = match job {
                Job::Sent {
                    sent,
                    path,
                    session,
                } => match sent.wait() {
                    Ok(()) | Err(Error::NoNode { .. }) | Err(Error::SessionExpired) => continue,
                    Err(Error::Closed) | Err(Error::AuthFailed) => return stop(&client),
                    Err(e) if e.is_connection_error() => Job::Path {
                        path,
                        check: Check::None,
                        session,
                    },
                    Err(e) => {
                        log::warn!(
                            "zkguard: background delete of {} failed: {e}",
                            escape(&path)
                        );
                        continue;
                    }
                },
                job => job,
            };
            let current = client.session_id();
            if job.session() == 0 || (current != 0 && current != job.session()) {
                // The session that owned the node is gone; so is the node (ephemeral), or
                // it will be once the server expires the session. Only that session may
                // delete it: on another, the path may already be someone else's node.
                continue;
            }
            // Pinned: if the session goes between the check above and the write, the
            // request fails instead of going out on the next session.
            match attempt(&client.pinned(job.session()), &job) {
                Ok(_) => {}
                Err(e) if e.is_connection_error() => left.push(job),
                Err(Error::SessionExpired) => {}
                Err(Error::Closed) | Err(Error::AuthFailed) => return stop(&client),
                Err(e) => log::warn!("zkguard: background delete {job:?} failed: {e}"),
            }
        }
        let (idle, fresh) = {
            let mut j = client.owner.janitor.lock();
            // Jobs handed over during this pass go out at once; only retries wait.
            let fresh = !j.jobs.is_empty();
            j.jobs.extend(left);
            if j.jobs.is_empty() {
                j.running = false;
                (true, false)
            } else {
                (false, fresh)
            }
        };
        if idle {
            return;
        }
        if fresh {
            backoff.reset();
            continue;
        }
        // Wait for the session to change (or the back-off's pause), without holding the
        // client.
        drop(client);
        if events.recv_timeout(backoff.next_pause()).is_ok() {
            backoff.reset();
        }
    }
}

fn stop(client: &Client) {
    let mut j = client.owner.janitor.lock();
    j.jobs.clear();
    j.running = false;
}

/// Deletes `path` if it passes `check`: `Ok(true)` if it did, `Ok(false)` if the node was
/// not there or not the one `check` describes.
fn delete_checked(client: &Client, path: &str, check: &Check) -> crate::error::Result<bool> {
    let version = match check {
        Check::None => None,
        Check::Czxid(z) => match client.exists(path)? {
            Some(stat) if stat.czxid as u64 == *z => Some(stat.version),
            _ => return Ok(false),
        },
        Check::Data(d) => match client.get_data(path) {
            Ok((data, stat)) if data == *d => Some(stat.version),
            Ok(_) | Err(Error::NoNode { .. }) => return Ok(false),
            Err(e) => return Err(e),
        },
    };
    match client.delete(path, version) {
        Ok(()) => Ok(true),
        Err(Error::NoNode { .. }) | Err(Error::BadVersion { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

fn attempt(client: &Client, job: &Job) -> crate::error::Result<()> {
    match job {
        Job::Path { path, check, .. } => delete_checked(client, path, check).map(|_| ()),
        // Resolved before any attempt (see `run`).
        Job::Sent { .. } => Ok(()),
        Job::Uuid { dir, uuid, .. } => {
            let names = match client.get_children(dir) {
                Ok((names, _)) => names,
                Err(Error::NoNode { .. }) => return Ok(()),
                Err(e) => return Err(e),
            };
            for n in names.iter().filter(|n| n.contains(uuid.as_str())) {
                match client.delete(&format!("{dir}/{n}"), None) {
                    Ok(()) | Err(Error::NoNode { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
    }
}
