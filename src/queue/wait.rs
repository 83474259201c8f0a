//! The one acquire algorithm under every sequential recipe.
//!
//! 1. Create `<dir>/_c_<uuid>-<marker><seq>` (ephemeral, sequential) and list `dir` in the
//!    same write: one round trip when nobody else is there. Missing parents are created as
//!    containers. If the create's reply is lost, look for our uuid before creating again,
//!    and keep only a node whose ephemeral owner is the current session.
//! 2. Order the listing by sequence and ask the recipe's rule which node blocks us.
//! 3. Arm a data watch on the blocker (`get_data_w`: a missing node answers `NoNode` and
//!    leaves no watch behind). Nodes only ever join behind us, so if the rule finds no
//!    blocker in our listing once the blocker is struck from it, the blocker's deletion
//!    lets us in without listing again; otherwise its deletion means "list again".
//! 4. In that second case, also watch the node that would block us once the blocker is
//!    gone (for a mutex or an election, the node two places ahead; for a reader, the
//!    writer before the one it waits for), in the same round trip. Its deletion (our
//!    blocker now holds, or that node gave up) makes us list again at once, during our
//!    blocker's turn, keeping the blocker's unspent watch: so when the blocker goes we
//!    usually know already that nothing else is ahead, and hold on its notification alone,
//!    with no round trip after it. The price is a second notification per release (to the
//!    waiter two places behind), never more per node: each node is watched by at most two
//!    waiters of a mutex or an election. (Not for a semaphore: its waiters keep one watch.)
//! 5. While waiting, also wake on session events (a reconnect re-lists, a new session
//!    starts over), the caller's deadline, a cancel, and a slow re-check tick.
//! 6. On every way out that is not success, our node is deleted (in the background if the
//!    connection is in trouble).
//!
//! Here: the caller's side ([`acquire`], restarting attempts) and what the recipes share.
//! Step 1 (and 6) is [`enqueue`] in `enqueue.rs`; steps 2 to 5 are the [`Waiter`] in
//! `waiter.rs`, whose steps (list, arm, wait) each return the next. Every wait, step 5's
//! and a pause after connection trouble alike (and the other loops' that wait on ZooKeeper:
//! the single node's, the semaphore's, a leader's), goes through one [`wake`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::enqueue::enqueue;
use super::held::{Acquired, Canceller, Participant};
use super::names;
use super::rules::Rule;
use super::waiter::Waiter;
use super::wake::wake;
use crate::backoff::Backoff;
use crate::client::{Client, SessionSink};
use crate::error::{Error, Result};
use crate::{NodeAcl, SessionEvent};

/// What a recipe asks the queue for.
pub(crate) struct Spec<'a> {
    /// The recipe's own path, the one its errors name (a semaphore queues in directories
    /// under its path; its caller knows only the path).
    pub path: &'a str,
    /// The lock directory.
    pub dir: &'a str,
    /// The node-name marker (`lock-`, `__READ__`, …).
    pub marker: &'static str,
    pub rule: Rule,
    /// Our node's data.
    pub data: &'a [u8],
    /// Data of the directory node if this call has to create it (the semaphore's permits).
    pub dir_data: &'a [u8],
    /// The ACL of every node this call creates: ours, the directory and its parents. One
    /// that keeps others out also has the directory checked (`tenancy.rs`).
    pub acl: &'a NodeAcl,
}

/// How long an acquire may wait. (`pub` only to appear in `Lock`'s hidden method; the
/// module is private.)
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    /// Not at all: take it now or leave nothing behind.
    Try,
    /// Until this instant.
    Until(Instant),
    /// Until acquired, cancelled, or the client is closed.
    Forever,
}

impl Wait {
    pub(crate) fn timeout(d: Duration) -> Wait {
        match Instant::now().checked_add(d) {
            Some(t) => Wait::Until(t),
            None => Wait::Forever,
        }
    }

    /// When the call gives up. A try waits for nothing, connection trouble included: it
    /// gets one request timeout.
    pub(crate) fn deadline(self, client: &Client) -> Option<Instant> {
        match self {
            Wait::Until(t) => Some(t),
            Wait::Try => Some(Instant::now() + client.timeout()),
            Wait::Forever => None,
        }
    }
}

/// What a call returns when its deadline passed: `Ok(None)` (not acquired in time), or for
/// a try, which waits for nothing, the timeout of the request that could not be made.
pub(crate) fn expired<T>(wait: Wait, path: &str, client: &Client) -> Result<Option<T>> {
    match wait {
        Wait::Try => Err(Error::Timeout {
            op: "try_acquire",
            path: path.to_string(),
            after: client.timeout(),
        }),
        _ => Ok(None),
    }
}

/// Forwards session events into a waiter's channel.
struct Forward(Sender<SessionEvent>);

impl SessionSink for Forward {
    fn on_session(&self, ev: &SessionEvent) {
        let _ = self.0.send(*ev);
    }
}

/// A channel of session events for one waiting call. Unlike `Client::events`, it leaves
/// the client's list as soon as it is dropped (the list holds it weakly).
pub(crate) struct SessionEvents {
    _sink: Arc<dyn SessionSink>,
    pub rx: Receiver<SessionEvent>,
}

impl SessionEvents {
    pub(crate) fn new(client: &Client) -> SessionEvents {
        let (tx, rx) = crossbeam_channel::unbounded();
        let sink: Arc<dyn SessionSink> = Arc::new(Forward(tx));
        client.subscribe_sink(Arc::downgrade(&sink));
        SessionEvents { _sink: sink, rx }
    }
}

/// Why the current attempt ends.
pub(crate) enum Next {
    /// Start over with a new node (the session changed or our node vanished).
    Restart,
    /// Give up: deadline passed (`Ok(None)`), or an error.
    Done(Result<Option<Acquired>>),
}

/// Acquires a place at the head of the queue per `spec.rule`. `Ok(None)`: not acquired
/// within `wait` (nothing left behind).
pub(crate) fn acquire(
    client: &Client,
    spec: &Spec<'_>,
    wait: Wait,
    canceller: &Canceller,
) -> Result<Option<Acquired>> {
    let cancel = canceller.register();
    let events = SessionEvents::new(client);
    let deadline = wait.deadline(client);
    loop {
        match attempt(client, spec, wait, deadline, &cancel.rx, &events.rx) {
            Next::Restart => {
                log::info!(
                    "zkguard: {}: session changed or node vanished; queueing again",
                    spec.dir
                );
                continue;
            }
            Next::Done(r) => return r,
        }
    }
}

/// A handle whose requests end by the caller's deadline; `None` once it has passed.
pub(crate) fn bounded(client: &Client, deadline: Option<Instant>) -> Option<Client> {
    match deadline {
        None => Some(client.clone()),
        Some(d) => {
            let left = d.checked_duration_since(Instant::now())?;
            if left.is_zero() {
                return None;
            }
            Some(client.with_timeout(left.min(client.timeout())))
        }
    }
}

/// One attempt: our node (phase 1, [`enqueue`]), then our turn (phase 2, a [`Waiter`]).
fn attempt(
    client: &Client,
    spec: &Spec<'_>,
    wait: Wait,
    deadline: Option<Instant>,
    cancel: &Receiver<()>,
    events: &Receiver<SessionEvent>,
) -> Next {
    match enqueue(client, spec, wait, deadline, cancel, events) {
        Ok(queued) => match Waiter::new(client, spec, (wait, deadline), (cancel, events), queued) {
            Some(waiter) => waiter.run(),
            None => Next::Restart,
        },
        Err(next) => next,
    }
}

/// What a waiter whose node belongs to session `owner` makes of a session event.
pub(crate) enum News {
    /// Nothing to do: wait on.
    Wait,
    /// Same session, new connection: list again.
    Relist,
    /// Our session is gone (or another began): start over.
    Restart,
    /// The client was closed.
    Closed,
}

impl News {
    pub(crate) fn of(ev: Result<SessionEvent, crossbeam_channel::RecvError>, owner: i64) -> News {
        match ev {
            Ok(SessionEvent::Suspended { .. }) => News::Wait,
            Ok(SessionEvent::Closed) | Err(_) => News::Closed,
            Ok(SessionEvent::Reconnected { .. }) => News::Relist,
            // News from before our node was made, read only now (the events that came
            // while we queued, or while a recipe took its internal lock, wait in the
            // channel): the start of the session our node belongs to, or the end of an
            // earlier one. Starting over for them would put us at the back for nothing.
            Ok(SessionEvent::Connected { session_id }) if session_id == owner => News::Wait,
            Ok(SessionEvent::Lost { session_id, .. }) if session_id != owner => News::Wait,
            Ok(_) => News::Restart,
        }
    }
}

/// The back-off of a recipe's requests that met connection trouble.
pub(crate) fn retry_backoff() -> Backoff {
    Backoff::new(Duration::from_millis(50), Duration::from_secs(1))
}

/// Waits a little after a connection problem: until the session changes, a cancel, the
/// deadline, or the back-off's next pause.
pub(crate) fn pause(
    events: &Receiver<SessionEvent>,
    cancel: &Receiver<()>,
    deadline: Option<Instant>,
    backoff: &mut Backoff,
) {
    let until = Instant::now() + backoff.next_pause();
    let _ = wake(&[], None, events, cancel, deadline, Some(until));
}

/// The queue's contenders with their data, in order, and which of them hold it by `rule`
/// (nodes that go while we read are skipped).
pub(crate) fn participants(client: &Client, dir: &str, rule: Rule) -> Result<Vec<Participant>> {
    let names = match client.get_children(dir) {
        Ok((n, _)) => n,
        Err(Error::NoNode { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let q = names::order(dir, names)?;
    let holds: Vec<bool> = (0..q.len())
        .map(|i| rule.blocker(&q, i).is_none())
        .collect();
    let pending = client.pipeline(|p| {
        q.iter()
            .map(|x| p.get_data(&names::child(dir, &x.name)))
            .collect::<Vec<_>>()
    });
    let mut out = Vec::with_capacity(q.len());
    for ((x, p), holds) in q.into_iter().zip(pending).zip(holds) {
        match p.wait() {
            Ok((data, _)) => out.push(Participant {
                node: x.name,
                data,
                holds,
            }),
            Err(Error::NoNode { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
