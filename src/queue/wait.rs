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

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};

use super::held::{Acquired, Canceller, Participant};
use super::names;
use super::rules::Rule;
use crate::backoff::Backoff;
use crate::client::{Check, Client, Job, Names, SessionSink};
use crate::error::{Error, Result};
use crate::{Acl, CreateMode, EventType, SessionEvent, SessionState, WatchedEvent};

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
    /// The ACL of every node this call creates: ours, the directory and its parents.
    pub acl: &'a [Acl],
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

/// Our node during one attempt; deletes it on drop unless it was handed to a guard.
pub(crate) struct Attempt<'a> {
    client: &'a Client,
    dir: &'a str,
    uuid: String,
    /// The session the attempt started in.
    session: i64,
    pub node: Option<Acquired>,
    /// A create whose reply never came may have made a node.
    maybe_created: bool,
}

impl Attempt<'_> {
    pub(crate) fn take(&mut self) -> Option<Acquired> {
        self.maybe_created = false;
        self.node.take()
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            // Bounded: one short request at most, then the background takes over.
            let timeout = self.client.timeout().min(Duration::from_secs(1));
            match self
                .client
                .delete_owned(&node.path, Check::None, node.owner, timeout)
            {
                Err(e) if !e.is_connection_error() && e != Error::SessionExpired => {
                    log::warn!("zkguard: cannot delete abandoned node {}: {e}", node.path);
                }
                _ => {}
            }
        } else if self.maybe_created && self.client.state() != SessionState::Closed {
            self.client.delete_in_background(Job::Uuid {
                dir: self.dir.to_string(),
                uuid: self.uuid.clone(),
                session: self.session,
            });
        }
    }
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

/// A node in a queue, with the listing its create brought back.
pub(crate) struct Queued<'a> {
    pub at: Attempt<'a>,
    pub listing: Option<Names>,
}

/// Phase 1 of an attempt: our node, and (usually) a listing of the directory taken right
/// after it, in the same write. `Err` says how the attempt ends instead.
pub(crate) fn enqueue<'a>(
    client: &'a Client,
    spec: &Spec<'a>,
    wait: Wait,
    deadline: Option<Instant>,
    cancel: &Receiver<()>,
    events: &Receiver<SessionEvent>,
) -> std::result::Result<Queued<'a>, Next> {
    let cancelled = || {
        Next::Done(Err(Error::Cancelled {
            path: spec.path.to_string(),
        }))
    };
    let mut at = Attempt {
        client,
        dir: spec.dir,
        uuid: uuid::Uuid::new_v4().to_string(),
        session: client.session_id(),
        node: None,
        maybe_created: false,
    };
    let prefix = names::node_prefix(spec.dir, &at.uuid, spec.marker);
    let mut backoff = retry_backoff();
    let mut parent_tries = 0;
    let mut listing: Option<Names> = None;
    while at.node.is_none() {
        if cancel.try_recv().is_ok() {
            return Err(cancelled());
        }
        let Some(c) = bounded(client, deadline) else {
            return Err(Next::Done(expired(wait, spec.path, client)));
        };
        if at.maybe_created {
            match find_by_uuid(&c, spec.dir, &at.uuid) {
                Ok(found) => {
                    at.maybe_created = false;
                    at.node = found;
                    continue;
                }
                Err(e) if e.is_connection_error() => {
                    pause(events, cancel, deadline, &mut backoff);
                    continue;
                }
                Err(Error::SessionExpired) => {
                    at.maybe_created = false;
                    continue;
                }
                Err(e) => return Err(Next::Done(Err(e))),
            }
        }
        at.session = client.session_id();
        // Pinned: a create that may have happened (a lost reply) happened in `at.session`,
        // the session its clean-up is pinned to.
        let (created, listed) = c.pinned(at.session).pipeline(|p| {
            (
                p.create_with_acl(
                    &prefix,
                    spec.data,
                    CreateMode::EphemeralSequential,
                    spec.acl,
                ),
                p.list(spec.dir),
            )
        });
        match created.wait() {
            Ok(cr) => {
                at.node = Some(Acquired::of(cr.path, &cr.stat));
                listing = listed.wait().ok();
            }
            Err(Error::NoNode { .. }) if parent_tries < 10 => {
                parent_tries += 1;
                match create_dir(&c, spec.dir, spec.dir_data, spec.acl) {
                    Ok(()) => {}
                    Err(e) if e.is_connection_error() || e == Error::SessionExpired => {}
                    Err(e) => return Err(Next::Done(Err(e))),
                }
            }
            Err(e) if e.is_connection_error() => {
                at.maybe_created = true;
                pause(events, cancel, deadline, &mut backoff);
            }
            Err(Error::SessionExpired) => {}
            Err(e) => return Err(Next::Done(Err(e))),
        }
    }
    Ok(Queued { at, listing })
}

fn attempt(
    client: &Client,
    spec: &Spec<'_>,
    wait: Wait,
    deadline: Option<Instant>,
    cancel: &Receiver<()>,
    events: &Receiver<SessionEvent>,
) -> Next {
    let Queued {
        mut at,
        mut listing,
        ..
    } = match enqueue(client, spec, wait, deadline, cancel, events) {
        Ok(q) => q,
        Err(next) => return next,
    };
    let cancelled = || {
        Next::Done(Err(Error::Cancelled {
            path: spec.path.to_string(),
        }))
    };
    let Some(node) = at.node.clone() else {
        return Next::Restart;
    };
    let me = names::base(&node.path).to_string();
    let tick = client.session_timeout().max(Duration::from_secs(1));
    // Phase 2: wait for our turn. Between listings we keep only what the last one told us
    // (a `View`: a thousand waiters would each keep a thousand names otherwise) and our
    // unspent watches.
    let mut view: Option<View> = None;
    let mut watching = Watching::default();
    let mut backoff = retry_backoff();
    loop {
        if cancel.try_recv().is_ok() {
            return cancelled();
        }
        if client.session_id() != node.owner {
            return Next::Restart;
        }
        let Some(c) = bounded(client, deadline) else {
            return Next::Done(expired(wait, spec.path, client));
        };
        let v = match view.take() {
            Some(known) => known,
            None => {
                let listed = match listing.take() {
                    Some(n) => n,
                    None => match c.list(spec.dir) {
                        Ok(n) => n,
                        Err(e) if e.is_connection_error() => {
                            pause(events, cancel, deadline, &mut backoff);
                            continue;
                        }
                        Err(Error::SessionExpired) | Err(Error::NoNode { .. }) => {
                            return Next::Restart
                        }
                        Err(e) => return Next::Done(Err(e)),
                    },
                };
                let q = match names::order_upto(spec.dir, listed.iter(), &me) {
                    Ok(q) => q,
                    Err(e) => return Next::Done(Err(e)),
                };
                // Only nodes up to ours were kept: ours is the last, if it is there.
                let Some(pos) = q.iter().rposition(|x| x.name == me) else {
                    // Our node is gone: deleted by someone, or its session ended.
                    at.node = None;
                    return Next::Restart;
                };
                let Some(v) = View::of(spec.dir, spec.rule, q, pos) else {
                    return grant(client, &node, &mut at);
                };
                if matches!(wait, Wait::Try) {
                    return Next::Done(Ok(None));
                }
                v
            }
        };
        let gone = match watching.arm(&c, &v, &node.path) {
            Ok(gone) => {
                // The server answers again: the next trouble starts with a short pause.
                backoff.reset();
                gone
            }
            Err(e) if e.is_connection_error() => {
                pause(events, cancel, deadline, &mut backoff);
                continue;
            }
            Err(Error::SessionExpired) => return Next::Restart,
            Err(e) => return Next::Done(Err(e)),
        };
        if gone.contains(&node.path.as_str()) {
            // Deleted by someone else while we waited.
            at.node = None;
            return Next::Restart;
        }
        let own = watching.receiver(&node.path);
        if !gone.is_empty() {
            // The blocker is gone already and nothing else blocks us: ours, unless our own
            // node went before it (its event would have come before the answer).
            if v.grant_when_gone && own.is_empty() {
                return grant(client, &node, &mut at);
            }
            continue; // list again
        }
        let blocker = watching.receiver(&v.blocker);
        let next = v
            .next
            .as_deref()
            .map_or_else(crossbeam_channel::never, |n| watching.receiver(n));
        let wake_at = {
            let t = Instant::now() + tick;
            deadline.map_or(t, |d| d.min(t))
        };
        loop {
            select! {
                recv(blocker) -> ev => {
                    watching.spent(&v.blocker);
                    match heard(ev) {
                        // Unless our own node was deleted before it (that event would have
                        // come first: one session's notifications come in order).
                        Heard::Deleted if v.grant_when_gone && own.is_empty() => {
                            return grant(client, &node, &mut at);
                        }
                        Heard::Deleted => {} // list again
                        Heard::Changed => view = Some(v),
                        Heard::End(end) => return end,
                    }
                    break;
                }
                // The node ahead of our blocker went: our blocker holds now, or the node
                // gave up. Either way, list again while our blocker is still there (its
                // watch is kept), so that its deletion finds us knowing whether we are next.
                recv(next) -> ev => {
                    watching.spent(v.next.as_deref().unwrap_or_default());
                    match heard(ev) {
                        Heard::Deleted => {} // list again
                        Heard::Changed => view = Some(v),
                        Heard::End(end) => return end,
                    }
                    break;
                }
                // Our own node, deleted by someone else: we start over.
                recv(own) -> ev => {
                    watching.spent(&node.path);
                    match heard(ev) {
                        Heard::Deleted => {
                            at.node = None;
                            return Next::Restart;
                        }
                        Heard::Changed => view = Some(v),
                        Heard::End(end) => return end,
                    }
                    break;
                }
                recv(events) -> ev => match News::of(ev, node.owner) {
                    News::Wait => continue,
                    News::Relist => break,
                    News::Restart => return Next::Restart,
                    News::Closed => return Next::Done(Err(Error::Closed)),
                },
                recv(cancel) -> _ => return cancelled(),
                recv(crossbeam_channel::at(wake_at)) -> _ => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Next::Done(Ok(None));
                    }
                    break; // the slow re-check: list again
                }
            }
        }
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

/// What a waiter makes of an event on one of its watches.
enum Heard {
    /// The node was deleted.
    Deleted,
    /// The node is still there (its data changed: a revocation request, say); the watch
    /// is spent, so it is armed again.
    Changed,
    /// The client was closed or the session lost: the attempt ends so.
    End(Next),
}

fn heard(ev: Result<WatchedEvent, crossbeam_channel::RecvError>) -> Heard {
    match ev.map(|e| e.event_type) {
        Ok(EventType::NodeDeleted) => Heard::Deleted,
        Ok(EventType::Closed) => Heard::End(Next::Done(Err(Error::Closed))),
        Ok(EventType::SessionLost) => Heard::End(Next::Restart),
        _ => Heard::Changed,
    }
}

/// What a waiter keeps from its last listing.
#[derive(Debug, PartialEq, Eq)]
struct View {
    /// The node we wait for (a path).
    blocker: String,
    /// Whether `blocker`'s deletion lets us in without listing again: the rule finds no
    /// other blocker in this listing once `blocker` is struck out. Nodes only ever join
    /// behind us, so the nodes ahead of us from now on are a subset of this listing's, and
    /// a rule that finds no blocker among them finds none later either.
    grant_when_gone: bool,
    /// Otherwise, the node that blocks us once `blocker` is gone, by the same rule (for a
    /// mutex or an election, the node two places ahead of ours; for a reader, the writer
    /// before the one it waits for). When it goes (our blocker now holds, or it gave up,
    /// timed out, expired or was deleted), we list again at once, during our blocker's
    /// turn: so when our blocker goes we normally know already that we are next, and hold
    /// on its notification alone. `None` for a semaphore (one watch per waiter, as
    /// documented there).
    next: Option<String>,
}

impl View {
    /// What a listing `queue` (ordered) says to the node at `me`; `None`: it holds.
    fn of<N: AsRef<str>>(
        dir: &str,
        rule: Rule,
        mut queue: Vec<names::Contender<N>>,
        me: usize,
    ) -> Option<View> {
        let b = rule.blocker(&queue, me)?;
        let blocker = queue.remove(b).name;
        // The blocker is always ahead of us: without it, we are one place further up.
        let then = rule.blocker(&queue, me - 1);
        let next = then
            .filter(|_| rule.looks_two_ahead())
            .map(|i| names::child(dir, queue[i].name.as_ref()));
        Some(View {
            blocker: names::child(dir, blocker.as_ref()),
            grant_when_gone: then.is_none(),
            next,
        })
    }
}

/// The data watches a waiter holds (at most three: its blocker, the node before it, and its
/// own node), kept across listings while unspent. A watch armed before a listing and not
/// yet fired is still armed when the listing is taken (ZooKeeper delivers a watch's event
/// before the reply to any later request of the session), so its node's deletion after
/// the listing is still ours to hear.
///
/// The watch on our own node tells a deletion of it by someone else apart before a grant
/// that lists nothing: without it, a waiter whose node was deleted would take its turn
/// with a guard that is lost one round trip later, beside a waiter behind it that took
/// the same turn.
#[derive(Default)]
struct Watching(Vec<(String, Receiver<WatchedEvent>)>);

impl Watching {
    /// Arms a data watch on each node `v` names and on `own` (our node), each that is not
    /// watched yet, in one round trip, and forgets other watches. Returns the nodes that
    /// are gone already (no watch is left on a missing node).
    fn arm<'v>(&mut self, c: &Client, v: &'v View, own: &'v str) -> Result<Vec<&'v str>> {
        let want: Vec<&str> = std::iter::once(v.blocker.as_str())
            .chain(v.next.as_deref())
            .chain(std::iter::once(own))
            .collect();
        // A watch whose event has come (but was not taken) is spent. If the event says the
        // node was deleted, it is gone: no need to ask (this is the common case of a
        // listing answered just before our blocker's deletion, whose notification then
        // came while we read the listing). Any other event: arm it again.
        let mut gone: Vec<&'v str> = Vec::new();
        self.0.retain(|(path, rx)| {
            let Some(w) = want.iter().find(|w| **w == path.as_str()) else {
                return false;
            };
            match rx.try_recv() {
                Err(_) => true,
                Ok(ev) if ev.event_type == EventType::NodeDeleted => {
                    gone.push(w);
                    false
                }
                Ok(_) => false,
            }
        });
        let missing: Vec<&str> = want
            .into_iter()
            .filter(|w| !gone.contains(w) && !self.0.iter().any(|(path, _)| path == w))
            .collect();
        if missing.is_empty() {
            return Ok(gone);
        }
        let pending = c.pipeline(|p| {
            missing
                .iter()
                .map(|path| p.get_data_w(path))
                .collect::<Vec<_>>()
        });
        let mut failed = None;
        for (path, p) in missing.into_iter().zip(pending) {
            match p.wait() {
                Ok((_, _, rx)) => self.0.push((path.to_string(), rx)),
                Err(Error::NoNode { .. }) => gone.push(path),
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(gone), Err)
    }

    /// The receiver of the watch on `path` (armed by [`arm`](Watching::arm)).
    fn receiver(&self, path: &str) -> Receiver<WatchedEvent> {
        self.0
            .iter()
            .find(|(p, _)| p == path)
            .map_or_else(crossbeam_channel::never, |(_, rx)| rx.clone())
    }

    /// The watch on `path` fired: forget it.
    fn spent(&mut self, path: &str) {
        self.0.retain(|(p, _)| p != path);
    }
}

/// Our node heads the queue: the last checks, then it is the caller's. A closing client
/// grants nothing; a session that changed since our node was made starts over. (Our
/// node's listing was answered within its session, and an ephemeral node only goes with
/// its session or by an explicit delete, which a guard's own watch reports.)
fn grant(client: &Client, node: &Acquired, at: &mut Attempt<'_>) -> Next {
    if client.is_closing() {
        return Next::Done(Err(Error::Closed));
    }
    if client.session_id() != node.owner {
        return Next::Restart;
    }
    Next::Done(Ok(at.take()))
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
    let mut until = Instant::now() + backoff.next_pause();
    if let Some(d) = deadline {
        until = until.min(d);
    }
    select! {
        recv(events) -> _ => {}
        recv(cancel) -> _ => {}
        recv(crossbeam_channel::at(until)) -> _ => {}
    }
}

/// After a create whose reply was lost: our node, if the server made it in this session.
/// A node of ours left by an earlier session is deleted.
fn find_by_uuid(c: &Client, dir: &str, uuid: &str) -> Result<Option<Acquired>> {
    let names = match c.get_children(dir) {
        Ok((names, _)) => names,
        Err(Error::NoNode { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut found = None;
    for n in names.into_iter().filter(|n| n.contains(uuid)) {
        let path = names::child(dir, &n);
        match c.exists(&path)? {
            Some(stat) if found.is_none() && stat.ephemeral_owner == c.session_id() => {
                found = Some(Acquired::of(path, &stat));
            }
            Some(_) => {
                let _ = c.delete(&path, None);
            }
            None => {}
        }
    }
    Ok(found)
}

/// Creates every missing ancestor of `dir` as a container node, and `dir` itself as a
/// container, or, when it has data to keep (a semaphore's permit count, which must outlive
/// idle periods), as a persistent node. Each created node gets `acl`; an existing one is
/// left as it is.
pub(crate) fn create_dir(c: &Client, dir: &str, dir_data: &[u8], acl: &[Acl]) -> Result<()> {
    let mut path = String::new();
    let parts: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        path.push('/');
        path.push_str(part);
        let last = i + 1 == parts.len();
        let (data, mode) = if last && !dir_data.is_empty() {
            (dir_data, CreateMode::Persistent)
        } else {
            (&b""[..], CreateMode::Container)
        };
        match c.create_with_acl(&path, data, mode, acl) {
            Ok(_) | Err(Error::NodeExists { .. }) => {}
            // The server checks the parent's ACL before whether the node exists: a node
            // that exists under a parent we may not create in is no obstacle.
            Err(e @ Error::NoAuth { .. }) => {
                if c.exists(&path)?.is_none() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::names::tests::queue as q;

    /// The blocker, whether its deletion lets `me` in, and the next node watched.
    fn view(rule: Rule, kinds: &str, me: usize) -> Option<(String, bool, Option<String>)> {
        View::of("/d", rule, q(kinds), me).map(|v| (v.blocker, v.grant_when_gone, v.next))
    }

    fn some(blocker: &str, next: Option<&str>) -> Option<(String, bool, Option<String>)> {
        Some((
            blocker.to_string(),
            next.is_none(),
            next.map(str::to_string),
        ))
    }

    #[test]
    fn an_exclusive_waiter_watches_its_predecessor_and_the_node_before_it() {
        assert_eq!(view(Rule::Exclusive, "w", 0), None);
        // Right behind the head: the head's deletion lets it in.
        assert_eq!(view(Rule::Exclusive, "ww", 1), some("/d/n0", None));
        assert_eq!(
            view(Rule::Exclusive, "www", 2),
            some("/d/n1", Some("/d/n0"))
        );
        assert_eq!(
            view(Rule::Exclusive, "wwwww", 4),
            some("/d/n3", Some("/d/n2"))
        );
        // Readers ahead block a writer like writers do.
        assert_eq!(
            view(Rule::Exclusive, "rrw", 2),
            some("/d/n1", Some("/d/n0"))
        );
    }

    #[test]
    fn a_reader_watches_the_nearest_writer_and_the_writer_before_it() {
        assert_eq!(view(Rule::Read, "rrr", 2), None);
        assert_eq!(view(Rule::Read, "wrr", 2), some("/d/n0", None));
        assert_eq!(view(Rule::Read, "rwrr", 3), some("/d/n1", None));
        assert_eq!(view(Rule::Read, "wrrwrr", 5), some("/d/n3", Some("/d/n0")));
        assert_eq!(view(Rule::Read, "wwr", 2), some("/d/n1", Some("/d/n0")));
    }

    #[test]
    fn a_semaphore_waiter_watches_its_blocker_only() {
        let rule = Rule::Semaphore(2);
        assert_eq!(view(rule, "ww", 1), None);
        assert_eq!(view(rule, "www", 2), some("/d/n0", None));
        assert_eq!(
            view(rule, "wwww", 3),
            Some(("/d/n1".to_string(), false, None))
        );
    }
}
