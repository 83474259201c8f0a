//! Background deletes: a node that must go (an abandoned queue node, a released lock whose
//! delete hit a connection problem) is handed here and deleted as soon as the session can.
//!
//! A helper thread exists while there is work and lingers idle for [`LINGER`] after it,
//! so a release after release starts no thread (the drop of a guard hands its sent delete
//! here every time); it ends once idle that long, when the session that owned the nodes is
//! gone (ephemeral nodes go with it), or when the client is dropped. It never holds the
//! client open for longer than one short request.
//!
//! A delete sent and not waited for (`Job::Sent`: a dropped guard's, a semaphore gate's)
//! needs no wake-up: its reply is looked at, never waited for, whenever the list is
//! touched: by the next hand-over (on the caller's thread, `reap`) and by the thread's
//! passes. Only a failed one needs work (the delete again, on the same session), and a
//! failure comes with a session event the thread is woken by: the connection thread fails
//! the requests in flight *before* it says `Suspended` (`after_disconnect`), and a request
//! never written fails on the caller's thread before the hand-over. So the holder's
//! thread waits for nothing, and no thread is woken per release.
//!
//! A delete for a node of session S is written only on a connection of session S (the
//! requests are pinned to it): once S is gone, the server has removed the node or will, and
//! the job is dropped. Sent on another session, a check-then-delete could remove a node
//! that someone else created at the same path in between.

use crate::error::escape;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

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
    /// A delete of `path` already sent: see that its reply comes, and delete again (if it
    /// passes `check`) if the connection failed under it.
    Sent {
        sent: super::Pending<()>,
        path: String,
        check: Check,
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
    /// Wakes the running thread for a job that needs work now (not for a `Sent` one).
    kick: Option<Sender<()>>,
}

/// How long one background request may take.
const STEP: Duration = Duration::from_secs(2);

/// How long the thread stays idle (no job at all) before it ends.
pub(crate) const LINGER: Duration = Duration::from_secs(10);

/// What a sent delete's reply means.
enum Answer {
    /// Done: deleted, not there, or its session gone (the node with it); or a failure
    /// that another delete would not mend (logged).
    Done,
    /// The connection failed under it: delete again, as this job.
    Again(Box<Job>),
    /// The client is closed (or its login refused): nothing more can be sent.
    Stop,
}

/// Judges a sent delete's reply (`sent` must be settled, or this waits for it).
fn answer(sent: super::Pending<()>, path: String, check: Check, session: i64) -> Answer {
    match sent.wait() {
        Ok(()) | Err(Error::NoNode { .. }) | Err(Error::SessionExpired) => Answer::Done,
        Err(Error::Closed) | Err(Error::AuthFailed) => Answer::Stop,
        Err(e) if e.is_connection_error() => Answer::Again(Box::new(Job::Path {
            path,
            check,
            session,
        })),
        Err(e) => {
            log::warn!(
                "zkguard: background delete of {} failed: {e}",
                escape(&path)
            );
            Answer::Done
        }
    }
}

/// What [`reap`] found.
#[derive(Default)]
struct Reaped {
    /// A sent delete failed on connection trouble: its retry is in the list.
    again: bool,
    /// The client is closed: nothing more can be sent.
    stop: bool,
}

/// Takes the answered `Sent` jobs out of `jobs`, leaving their retries in their place.
/// Never waits.
fn reap(jobs: &mut Vec<Job>) -> Reaped {
    let mut r = Reaped::default();
    let mut i = 0;
    while i < jobs.len() {
        if !matches!(&jobs[i], Job::Sent { sent, .. } if sent.is_settled()) {
            i += 1;
            continue;
        }
        let Job::Sent {
            sent,
            path,
            check,
            session,
        } = jobs.swap_remove(i)
        else {
            unreachable!("matched above");
        };
        match answer(sent, path, check, session) {
            Answer::Done => {}
            Answer::Again(job) => {
                r.again = true;
                jobs.push(*job);
            }
            Answer::Stop => r.stop = true,
        }
    }
    r
}

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

    /// Sends a delete of `path`, an ephemeral node of session `owner` whose path is ours
    /// (a plain delete: `check` is what a delete again must pass), without waiting for its
    /// reply: the caller goes on at once, its delete written on the socket (when connected:
    /// the process may exit next), and the background sees to the reply (see the module
    /// doc). Waits only for the `io` lock, as any request's write does.
    pub(crate) fn delete_unwaited(&self, path: &str, check: Check, owner: i64) {
        let current = self.session_id();
        let state = self.state();
        if state == SessionState::Closed || (current != 0 && current != owner) {
            // Its session is gone, and the node with it (as `delete_owned` says).
            return;
        }
        if current != owner || state != SessionState::Connected {
            return self.delete_in_background(Job::Path {
                path: path.to_string(),
                check,
                session: owner,
            });
        }
        let sent = self.pinned(owner).pipeline(|p| p.delete(path, None));
        self.delete_in_background(Job::Sent {
            sent,
            path: path.to_string(),
            check,
            session: owner,
        });
    }

    /// Hands a delete to the background. Never blocks. The answered sent deletes are taken
    /// out on the way (`reap`), so the list holds only what is in flight or to retry.
    pub(crate) fn delete_in_background(&self, job: Job) {
        log::debug!("zkguard: background delete {job:?}");
        let urgent = !matches!(job, Job::Sent { .. });
        let start = {
            let mut j = self.owner.janitor.lock();
            j.jobs.push(job);
            let reaped = reap(&mut j.jobs);
            if reaped.stop {
                j.jobs.clear();
            }
            if j.jobs.is_empty() {
                None
            } else if j.running {
                if urgent || reaped.again {
                    if let Some(kick) = &j.kick {
                        let _ = kick.try_send(());
                    }
                }
                None
            } else {
                j.running = true;
                let (tx, rx) = crossbeam_channel::bounded(1);
                j.kick = Some(tx);
                Some(rx)
            }
        };
        if let Some(kick) = start {
            let shared = self.shared.clone();
            let owner = Arc::downgrade(&self.owner);
            let events = shared.subscribe();
            let spawned = std::thread::Builder::new()
                .name("zkguard-janitor".into())
                .spawn(move || run(owner, shared.negotiated_timeout().min(STEP), events, kick));
            if let Err(e) = spawned {
                log::error!("zkguard: cannot start the background delete thread: {e}");
                let mut j = self.owner.janitor.lock();
                j.running = false;
                j.kick = None;
            }
        }
    }
}

fn run(weak: Weak<Owner>, timeout: Duration, events: Receiver<SessionEvent>, kick: Receiver<()>) {
    // Between passes that left deletes undone (connection trouble).
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
    // Since when the list has been empty (the thread ends after `LINGER` of it).
    let mut idle_since: Option<Instant> = None;
    loop {
        let Some(owner) = weak.upgrade() else {
            return;
        };
        let client = Client {
            shared: owner.shared.clone(),
            owner,
            timeout,
            pin: None,
        };
        let mut jobs = std::mem::take(&mut client.owner.janitor.lock().jobs);
        // The sent deletes answered (never waited for: see the module doc), their failures
        // turned into deletes again; the others stay in flight.
        if reap(&mut jobs).stop {
            return stop(&client);
        }
        let mut left = Vec::new();
        for job in jobs {
            if matches!(job, Job::Sent { .. }) {
                left.push(job);
                continue;
            }
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
        // Whether deletes wait to be tried again (not only sent ones to hear from).
        let retries = left.iter().any(|job| !matches!(job, Job::Sent { .. }));
        let fresh = {
            let mut j = client.owner.janitor.lock();
            // Jobs handed over during this pass go out at once; only retries wait.
            let fresh = j.jobs.iter().any(|job| !matches!(job, Job::Sent { .. }));
            j.jobs.extend(left);
            if !j.jobs.is_empty() {
                idle_since = None;
            } else if idle_since.is_some_and(|t| t.elapsed() >= LINGER) {
                j.running = false;
                j.kick = None;
                return;
            } else {
                idle_since.get_or_insert_with(Instant::now);
            }
            fresh
        };
        if fresh {
            backoff.reset();
            continue;
        }
        // Wait for a session event (a sent delete's failure comes with one), a job that
        // needs work, the back-off's pause before a retry, or the end of the lingering,
        // without holding the client.
        drop(client);
        let pause = if retries {
            backoff.next_pause()
        } else {
            idle_since.map_or(LINGER, |t| LINGER.saturating_sub(t.elapsed()))
        };
        crossbeam_channel::select! {
            recv(events) -> ev => match ev {
                Ok(_) => backoff.reset(),
                // The client's session machinery is gone: so is the client.
                Err(_) => {
                    if let Some(owner) = weak.upgrade() {
                        let mut j = owner.janitor.lock();
                        j.jobs.clear();
                        j.running = false;
                        j.kick = None;
                    }
                    return;
                }
            },
            recv(kick) -> _ => {}
            default(pause) => {}
        }
    }
}

fn stop(client: &Client) {
    let mut j = client.owner.janitor.lock();
    j.jobs.clear();
    j.running = false;
    j.kick = None;
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
        // Answered before any attempt (see `run`).
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
