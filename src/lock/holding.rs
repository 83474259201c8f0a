//! The core of every guard, which the lock traits wrap: the [`Core`] trait every
//! [`Guard`](crate::Guard) method reads, and the [`Holding`] that implements it (locks and
//! elections build it from the node the queue acquired): the node it holds, its validity,
//! the lost and revocation signals, and the delete on release.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use super::revoke::REVOKE_MESSAGE;
use crate::client::{Bell, Check, Client, Hex, Ringing, SessionSink, WatchSink};
use crate::client::{EventType, Op, OpResult, SessionEvent, SessionState, Stat, WatchedEvent};
use crate::error::{Error, Result};
use crate::metrics::{Labels, Loss, Meter};
use crate::queue::{token_of, Acquired, Kind};

/// A one-shot signal: fires once, and every receiver handed out before or after gets `()`.
#[derive(Default)]
struct Signal {
    fired: AtomicBool,
    txs: Mutex<Vec<Ringing<()>>>,
}

impl Signal {
    /// Fires; false if it had fired already.
    fn fire(&self) -> bool {
        self.fire_after(|| {})
    }

    /// Fires, running `first` before anyone is told; false (and `first` not run) if it had
    /// fired already.
    fn fire_after(&self, first: impl FnOnce()) -> bool {
        let mut txs = self.txs.lock();
        if self.fired.swap(true, Ordering::SeqCst) {
            return false;
        }
        first();
        for tx in txs.drain(..) {
            tx.send_last(());
        }
        true
    }

    fn is_fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// `tx` gets `()` when the signal fires (at once if it has).
    fn notify(&self, tx: Ringing<()>) {
        let mut txs = self.txs.lock();
        if self.is_fired() {
            tx.send_last(());
        } else {
            txs.push(tx);
        }
    }
}

/// The live part of a guard; the connection thread reaches it through the sink traits.
pub(crate) struct State {
    path: String,
    /// The recipe (what the log records call the node).
    kind: Kind,
    owner: i64,
    /// The node's creation zxid: tells our node from a later one at the same path.
    token: u64,
    lost: Signal,
    revoked: Signal,
    released: AtomicBool,
    /// The client's measurements (not the client: the connection thread holds this state).
    meter: Arc<Meter>,
    /// What the hold is measured as (`None`: not measured).
    labels: Option<Arc<Labels>>,
    since: Instant,
    /// Counted as held: until the first of a loss and a release.
    counted: AtomicBool,
}

impl State {
    fn mark_lost(&self, why: Loss) {
        self.mark_lost_at(why, log::Level::Warn);
    }

    /// Lost, said at `level`: a warning, unless it is our own close's doing (debug).
    /// Measured before anyone hears of the loss.
    fn mark_lost_at(&self, why: Loss, level: log::Level) {
        if !self.released.load(Ordering::SeqCst)
            && self
                .lost
                .fire_after(|| self.ended(Some(why), Instant::now()))
        {
            log::log!(
                level,
                "zkguard: {} {} of session {} lost",
                self.kind.noun(),
                self.path,
                Hex(self.owner)
            );
        }
    }

    /// The hold ended at `at` (released: `None`): measured once.
    fn ended(&self, loss: Option<Loss>, at: Instant) {
        if let (true, Some(l)) = (self.counted.swap(false, Ordering::SeqCst), &self.labels) {
            self.meter
                .hold_ended(l, at.saturating_duration_since(self.since), loss);
        }
    }
}

impl SessionSink for State {
    fn on_session(&self, ev: &SessionEvent) {
        match *ev {
            SessionEvent::Lost { session_id, .. } if session_id == self.owner => {
                self.mark_lost(Loss::SessionLost)
            }
            SessionEvent::Connected { session_id } if session_id != self.owner => {
                self.mark_lost(Loss::SessionLost)
            }
            SessionEvent::Closed => self.mark_lost_at(Loss::Closed, log::Level::Debug),
            _ => {}
        }
    }
}

/// The guard's watch on its own node, armed from the moment it holds until it is released:
/// the connection thread arms it again after every data change and after every reconnect
/// (see [`WatchSink::keep`]), so a deletion by anyone is a loss within one notification.
impl WatchSink for State {
    fn on_watch(&self, ev: &WatchedEvent) {
        match ev.event_type {
            // The connection thread re-arms the watch; the reply's data tells whether it
            // was a revocation request (`on_data`), and its stat whether the node is still
            // ours (a node deleted and re-created at the shared path during an outage is
            // reported as a data change after the reconnect).
            EventType::NodeDataChanged
            | EventType::NodeCreated
            | EventType::NodeChildrenChanged => {}
            EventType::NodeDeleted => self.mark_lost(Loss::NodeDeleted),
            EventType::SessionLost => self.mark_lost(Loss::SessionLost),
            EventType::Closed => self.mark_lost_at(Loss::Closed, log::Level::Debug),
        }
    }

    fn keep(&self) -> Option<i64> {
        let live = !self.released.load(Ordering::SeqCst) && !self.lost.is_fired();
        live.then_some(self.owner)
    }

    fn on_data(&self, data: &[u8], stat: &Stat) {
        // The watch went on whatever node is at the path now: if that is not ours (the
        // unfair recipes' shared path, re-created by someone else), ours is gone.
        if token_of(stat) != self.token || stat.ephemeral_owner != self.owner {
            self.mark_lost(Loss::NodeDeleted);
            return;
        }
        // Only Curator's exact revocation request counts (as in Curator); other writes to
        // the node are not requests.
        if data == REVOKE_MESSAGE {
            self.revoked.fire();
        }
    }
}

/// The core of every guard.
pub struct Holding {
    client: Client,
    acquired: Acquired,
    state: Arc<State>,
    /// The recipe: a single node is deleted only if it is still the one we created.
    kind: Kind,
}

impl Holding {
    /// Starts watching the session on behalf of a freshly acquired node.
    pub(crate) fn new(client: &Client, acquired: Acquired, kind: Kind) -> Holding {
        let state = Arc::new(State {
            path: acquired.path.clone(),
            kind,
            owner: acquired.owner,
            token: acquired.token,
            lost: Signal::default(),
            revoked: Signal::default(),
            released: AtomicBool::new(false),
            meter: client.meter().clone(),
            labels: acquired.labels.clone(),
            since: Instant::now(),
            counted: AtomicBool::new(true),
        });
        if let Some(l) = &state.labels {
            client.meter().hold_began(l);
        }
        let sink: Arc<dyn SessionSink> = state.clone();
        let (session, st) = client.subscribe_sink(Arc::downgrade(&sink));
        // Keep the sink alive as long as the state (the list holds it weakly).
        drop(sink);
        if st == SessionState::Closed {
            state.mark_lost(Loss::Closed);
        } else if session != acquired.owner || st == SessionState::Lost {
            state.mark_lost(Loss::SessionLost);
        } else {
            // Sent, not waited for: the acquire costs no extra round trip, and a deletion
            // before the watch is set is answered NoNode, which is a loss all the same.
            let sink: Arc<dyn WatchSink> = state.clone();
            client.keep_sink_watch(
                &acquired.path,
                sink,
                acquired.owner,
                acquired
                    .handed
                    .as_deref()
                    .and_then(|h| h.seen.as_ref())
                    .map(|s| (&s.data[..], &s.stat)),
            );
        }
        Holding {
            client: client.clone(),
            acquired,
            state,
            kind,
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.acquired.path
    }

    /// The client that holds the node.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Whether the node is the single node (an unfair lock's or election's), not a queue's.
    pub(crate) fn single(&self) -> bool {
        self.kind.single()
    }

    pub(crate) fn token(&self) -> u64 {
        self.acquired.token
    }

    /// The ACL the node was created with (what a node made on its behalf gets).
    pub(crate) fn acl(&self) -> &crate::client::NodeAcl {
        &self.acquired.acl
    }

    /// Whether the node is known to be ours no more: lost, released, or its session over
    /// (a suspended connection is not enough: the node may still be ours).
    pub(crate) fn is_gone(&self) -> bool {
        self.state.lost.is_fired()
            || self.state.released.load(Ordering::SeqCst)
            || self.client.session_id() != self.acquired.owner
            || matches!(
                self.client.state(),
                SessionState::Lost | SessionState::Closed
            )
    }

    /// The session that owns the node.
    pub(crate) fn owner(&self) -> i64 {
        self.acquired.owner
    }

    pub(crate) fn is_valid(&self) -> bool {
        !self.state.lost.is_fired()
            && !self.state.released.load(Ordering::SeqCst)
            && self.client.state() == SessionState::Connected
            && self.client.session_id() == self.acquired.owner
    }

    /// A receiver that gets `()` once the node is lost, as `bell` rings.
    pub(crate) fn lost(&self, bell: &Bell) -> Receiver<()> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.state.lost.notify(Ringing::new(tx, Some(bell.clone())));
        rx
    }

    /// `tx` gets `()` once the node is lost.
    pub(crate) fn notify_lost(&self, tx: Sender<()>) {
        self.state.lost.notify(Ringing::new(tx, None));
    }

    /// `tx` gets `()` once someone asks the holder to let go.
    pub(crate) fn notify_revoked(&self, tx: Sender<()>) {
        self.state.revoked.notify(Ringing::new(tx, None));
    }

    /// `tx` gets `()` once someone asks the holder to let go, as `bell` rings.
    pub(crate) fn ring_revoked(&self, tx: Sender<()>, bell: &Bell) {
        self.state
            .revoked
            .notify(Ringing::new(tx, Some(bell.clone())));
    }

    /// Whether someone has asked the holder to let go.
    pub(crate) fn is_revoked(&self) -> bool {
        self.state.revoked.is_fired()
    }

    /// Proves that the node is still ours at this instant. One round trip: a read of our
    /// node that also arms our watch on it (its stat must show our creation zxid and
    /// session: the unfair recipes share one path, so the path alone proves nothing), then,
    /// in the same write, a quorum write that changes nothing: a `multi` that only checks
    /// the node exists (it fires no watch, so the contender watching our node sleeps on).
    /// The server answers in order, and delivers a deletion of our node between the two
    /// before the check's reply. Both are sent on the node's session only. `LockLost` if
    /// the node is gone or not ours or its session ended; a connection error or timeout if
    /// the check could not be made (never a yes).
    pub(crate) fn confirm(&self) -> Result<()> {
        let lock_lost = || Error::LockLost {
            path: self.acquired.path.clone(),
        };
        if self.is_gone() {
            return Err(lock_lost());
        }
        let sink: Arc<dyn WatchSink> = self.state.clone();
        let check = Op::Check {
            path: self.acquired.path.clone(),
            version: None,
        };
        let (read, checked) = self.client.pinned(self.acquired.owner).pipeline(|p| {
            (
                p.get_data_sink(&self.acquired.path, sink),
                p.multi(&[check]),
            )
        });
        match read.wait() {
            Ok((_, stat)) if self.acquired.is(&stat) => {}
            Ok(_) | Err(Error::NoNode { .. }) => {
                self.state.mark_lost(Loss::NodeDeleted);
                return Err(lock_lost());
            }
            Err(Error::SessionExpired) => return Err(lock_lost()),
            Err(e) => return Err(e),
        }
        match checked.wait() {
            Ok(_) if self.is_gone() => Err(lock_lost()),
            Ok(_) => Ok(()),
            Err(Error::Multi { source, .. }) if matches!(*source, Error::NoNode { .. }) => {
                self.state.mark_lost(Loss::NodeDeleted);
                Err(lock_lost())
            }
            Err(Error::SessionExpired) => Err(lock_lost()),
            Err(e) => Err(e),
        }
    }

    /// The error a fenced write gives when the node is gone, noting the loss if the server
    /// says the node is no more.
    fn fence_lost(&self, gone: bool) -> Error {
        if gone {
            self.state.mark_lost(Loss::NodeDeleted);
        }
        Error::LockLost {
            path: self.acquired.path.clone(),
        }
    }

    /// Deletes the node and reports how it went. A delete that fails for connection reasons
    /// is retried in the background.
    pub(crate) fn release(&self) -> Result<()> {
        self.delete(self.client.timeout())
    }

    /// Ends the hold as [`release`](Holding::release) does, the node deleted in one `multi`
    /// behind `before` (sent only on its session): `Ok(true)` if that `multi` was applied.
    /// If it was refused (an op of `before` failed), the node is deleted alone, as
    /// `release` does: `Ok(false)`. The node's ACL goes to no op: `before` must not create.
    pub(crate) fn release_with(&self, before: &[Op]) -> Result<bool> {
        if before.is_empty() {
            return self.release().map(|()| false);
        }
        let mut applied = false;
        let send = || {
            let mut ops = before.to_vec();
            ops.push(Op::Delete {
                path: self.acquired.path.clone(),
                version: None,
            });
            let r = self.client.pinned(self.acquired.owner).multi(&ops);
            applied = r.is_ok();
            // Refused: the node is still there; a lost answer: maybe, the delete finds out.
            r.is_ok()
        };
        self.delete_after(send, self.client.timeout())?;
        Ok(applied)
    }

    fn delete(&self, timeout: Duration) -> Result<()> {
        self.delete_after(|| false, timeout)
    }

    /// The one end of a hold: marked released (so not valid, its fenced writes refused),
    /// then `first` (true: it deleted the node), else the node's delete.
    fn delete_after(&self, first: impl FnOnce() -> bool, timeout: Duration) -> Result<()> {
        if self.state.released.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // Measured once the delete is answered, off the release's path (the hold ended now;
        // a loss meanwhile is not one: the node is released).
        let released_at = Instant::now();
        let was_lost = self.state.lost.is_fired();
        let check = if self.kind.single() {
            Check::Czxid(self.acquired.token)
        } else {
            Check::None
        };
        let lock_lost = || Error::LockLost {
            path: self.acquired.path.clone(),
        };
        let deleted = if first() {
            Ok(true)
        } else {
            self.client
                .delete_owned(&self.acquired.path, check, self.acquired.owner, timeout)
        };
        self.forget_ask();
        self.state.ended(None, released_at);
        match deleted {
            Ok(true) if !was_lost => Ok(()),
            // Not there (or not ours any more), or its session is gone: it was lost.
            Ok(_) | Err(Error::SessionExpired) => Err(lock_lost()),
            // Retried in the background; the caller learns what matters more.
            Err(e) if e.is_connection_error() && was_lost => Err(lock_lost()),
            Err(e) => Err(e),
        }
    }
}

impl Holding {
    /// Deletes the node without reporting, waiting one short request at most (then the
    /// background takes over): what drop does.
    pub(crate) fn release_quietly(&self) {
        let timeout = self.client.timeout().min(Duration::from_secs(1));
        let _ = self.delete(timeout);
    }
}

impl Holding {
    /// Deletes the node without waiting for the answer: invalid at once, the delete written
    /// on the socket (when connected) before this returns, its answer seen to by the
    /// background deletes (`client/janitor.rs`: a failure there is a delete again on the
    /// same session). What drop does for a queue's node. The single node (an unfair
    /// lock's or election's) is deleted only if it is still the one we created, a read
    /// before the delete (its path is shared: a plain delete could take the next holder's
    /// node), so it waits as [`release_quietly`](Holding::release_quietly) does.
    fn release_unwaited(&self) {
        if self.kind.single() {
            return self.release_quietly();
        }
        if self.state.released.swap(true, Ordering::SeqCst) {
            return;
        }
        self.state.ended(None, Instant::now());
        self.client
            .delete_unwaited(&self.acquired.path, Check::None, self.acquired.owner);
        self.forget_ask();
    }

    /// Takes back the `exists` watch an election's waiter kept on its ask path
    /// (`Handed::ask_watch`), without waiting; with its session gone, it went with it.
    fn forget_ask(&self) {
        let handed = self.acquired.handed.as_deref();
        if let Some(ask) = handed.and_then(|h| h.ask_watch.as_ref()) {
            if self.client.session_id() == self.acquired.owner {
                let _ = self.client.pipeline(|p| p.remove_watches(ask));
            }
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.release_unwaited();
    }
}

/// `ops` in one `multi` after a check that each of `nodes` still exists, sent only on
/// their session: applied only while every node is held (see `Guard::fenced_multi`).
pub(crate) fn fenced(nodes: &[&Holding], ops: &[Op]) -> Result<Vec<OpResult>> {
    let Some(first) = nodes.first() else {
        return Err(Error::InvalidArgument {
            name: "fenced write",
            reason: "no lock node to check".into(),
        });
    };
    for n in nodes {
        if n.kind.single() {
            return Err(Error::InvalidArgument {
                name: "fenced write",
                reason: format!(
                    "{} is an unfair lock's or election's node: the next holder creates an \
                     identical node at that path, which ZooKeeper's check cannot tell from \
                     ours; use a fair Mutex or LeaderElection for fenced writes",
                    n.path()
                ),
            });
        }
        if n.acquired.owner != first.acquired.owner {
            return Err(Error::InvalidArgument {
                name: "fenced write",
                reason: format!(
                    "{} and {} are held by different clients; one multi runs on one session",
                    first.path(),
                    n.path()
                ),
            });
        }
        if n.is_gone() {
            return Err(n.fence_lost(false));
        }
    }
    let mut all: Vec<Op> = nodes
        .iter()
        .map(|n| Op::Check {
            path: n.path().to_string(),
            version: None,
        })
        .collect();
    // A create gets the lock's ACL, not the open one.
    all.extend(ops.iter().map(|o| match o {
        Op::Create { path, data, mode } => Op::CreateWithAcl {
            path: path.clone(),
            data: data.clone(),
            mode: *mode,
            acl: first.acquired.acl.entries().to_vec(),
        },
        o => o.clone(),
    }));
    match first.client.pinned(first.acquired.owner).multi(&all) {
        // The server answers in order and delivers our node's deletion (or the session's
        // end) before a later reply: a node known gone now may have been gone when the
        // check ran, and the check then passed on a node someone else put at its path.
        Ok(_) if nodes.iter().any(|n| n.is_gone()) => {
            let gone = nodes.iter().find(|n| n.is_gone()).unwrap_or(first);
            Err(gone.fence_lost(false))
        }
        Ok(mut results) => {
            results.drain(..nodes.len());
            Ok(results)
        }
        Err(Error::Multi { index, source }) if index < nodes.len() => {
            Err(nodes[index].fence_lost(matches!(*source, Error::NoNode { .. })))
        }
        Err(Error::Multi { index, source }) => Err(Error::Multi {
            index: index - nodes.len(),
            source,
        }),
        Err(Error::SessionExpired) => Err(first.fence_lost(false)),
        Err(e) => Err(e),
    }
}

/// The node (or nodes) a guard holds; every [`Guard`](crate::Guard) method reads it.
/// Public in a private module, as `api.rs`'s `Sealed` is: `Guard::core` (hidden) returns it,
/// and nobody outside the crate can name it.
#[doc(hidden)]
pub trait Core {
    fn is_valid(&self) -> bool;
    /// Known lost for good (not merely disconnected): someone else may hold it now.
    fn is_gone(&self) -> bool;
    /// `tx` gets `()` once the lock is lost (once per node).
    fn notify_lost(&self, tx: &Sender<()>);
    /// `tx` gets `()` once a holder is asked to let go (once per node).
    fn notify_revoked(&self, tx: &Sender<()>);
    fn token(&self) -> u64;
    fn path(&self) -> &str;
    fn confirm(&self) -> Result<()>;
    /// Lets go and reports how it went; dropping the guard afterwards does nothing more.
    fn release(&self) -> Result<()>;
    /// The nodes held, each of which a fenced write checks.
    fn holdings(&self) -> Vec<&Holding>;
    /// `ops` in one transaction with a check of every node held.
    fn fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        fenced(&self.holdings(), ops)
    }
}

/// A guard core that is one node underneath: every [`Core`] method is the node's, written
/// once here for the three such cores (the node itself, a reentrant lock's level, an
/// election's term); each says only how it lets go and what the node's errors read as.
pub(crate) trait OneNode {
    /// The node held.
    fn node(&self) -> &Holding;
    /// The node's error as this core says it (an election: "not the leader" for "lock
    /// lost").
    fn rename(&self, e: Error) -> Error {
        e
    }
    /// Lets go (`Core::release`): the node's release, unless the core counts levels.
    fn let_go(&self) -> Result<()> {
        Holding::release(self.node()).map_err(|e| self.rename(e))
    }
}

impl<T: OneNode> Core for T {
    fn is_valid(&self) -> bool {
        Holding::is_valid(self.node())
    }
    fn is_gone(&self) -> bool {
        Holding::is_gone(self.node())
    }
    fn notify_lost(&self, tx: &Sender<()>) {
        Holding::notify_lost(self.node(), tx.clone());
    }
    fn notify_revoked(&self, tx: &Sender<()>) {
        Holding::notify_revoked(self.node(), tx.clone());
    }
    fn token(&self) -> u64 {
        Holding::token(self.node())
    }
    fn path(&self) -> &str {
        Holding::path(self.node())
    }
    fn confirm(&self) -> Result<()> {
        Holding::confirm(self.node()).map_err(|e| self.rename(e))
    }
    fn release(&self) -> Result<()> {
        self.let_go()
    }
    fn holdings(&self) -> Vec<&Holding> {
        vec![self.node()]
    }
    fn fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        fenced(&[self.node()], ops).map_err(|e| self.rename(e))
    }
}

impl OneNode for Holding {
    fn node(&self) -> &Holding {
        self
    }
}
