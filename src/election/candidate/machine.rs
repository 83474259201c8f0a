//! The candidate's state: its [`Phase`] (queued, the term's phases, stopping, ended) and
//! the two things the connection thread tells it (the link, a session lost).
//!
//! This file alone moves the phase: every change is one method of [`Machine`] (no lock, no
//! channel: it says its [`LeaderEvent`]s in order, and the model checker runs the same
//! code over its own [`TermNode`]), called by one method of `Shared` below, which takes
//! `Shared::inner`, emits those events (under the same lock, so
//! [`Candidate::events`](super::Candidate::events) misses nothing) and wakes the waiters
//! (the condition variable `changed`). The rest of the candidate reads the phase through
//! [`Inner`]'s accessors. A method given a term's node (`h`) moves only that term: once a
//! resign or a drop has ended it, the thread's late calls change nothing.
//!
//! | from | cause (method) | to | event |
//! |---|---|---|---|
//! | Queued | the thread was granted a node still there ([`begin`]) | Leading, or Suspended if the link is down | `Elected` (then `Suspended`) |
//! | Leading | the connection dropped ([`on_session`]) | Suspended | `Suspended` |
//! | Suspended | leadership proven again, the link up ([`restore`]) | Leading | `Restored` |
//! | Leading, Suspended | the term's session was lost, or the client closed ([`on_session`]) | Lost | `Lost` |
//! | Leading, Suspended, Lost | the thread saw the term end: loss, node deleted ([`finish`]) | Queued | `Lost` unless said |
//! | Leading, Suspended | [`Candidate::resign`] ([`resign`]) | Queued | `Resigned` |
//! | Lost | [`Candidate::resign`] ([`resign`]) | Queued | none (`NotLeader`) |
//! | Queued, Lost | a new session after a session loss ([`on_session`]) | unchanged | `Rejoined` |
//! | any but Ended | the [`Candidate`] is stopped or dropped ([`stop`]) | Stopping | none |
//! | any | the thread ends: stopped, or its client closed ([`end`]) | Ended | `Lost` from Leading or Suspended; the stream ends |
//!
//! Beside the phase, [`on_session`] alone writes the link (`connected`: the connection as
//! the connection thread last reported it; its first value is the state the subscription
//! found, set by [`subscribed`]) and `rejoin` (a session was lost; cleared, saying
//! `Rejoined`, by the next new session: so `Rejoined` comes once the new session exists,
//! its id known to the client, never while the client is still without one): inputs of
//! the table, not states of the term. [`fail`] only reports an error
//! ([`LeaderEvent::Failed`]); the phase stays Queued. [`revoked`] only reports a revocation
//! request to the current term, Leading or Suspended ([`LeaderEvent::Revoked`]); the phase
//! stays.
//!
//! [`begin`]: Shared::begin
//! [`on_session`]: Shared::on_session
//! [`restore`]: Shared::restore
//! [`finish`]: Shared::finish
//! [`resign`]: Shared::resign
//! [`stop`]: Shared::stop
//! [`end`]: Shared::end
//! [`fail`]: Shared::fail
//! [`revoked`]: Shared::revoked
//! [`subscribed`]: Shared::subscribed
//! [`Candidate::resign`]: super::Candidate::resign
//! [`Candidate`]: super::Candidate

use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::client::SessionEvent;
use crate::client::SessionSink;
use crate::error::Error;
use crate::lock::holding::Holding;

use super::{LeaderEvent, Shared};

/// A term's node as the phase machine sees it: the library's is the term's `Holding`, the
/// model checker's its node.
pub(in crate::election) trait TermNode: Clone {
    /// Whether `self` and `other` are the same term.
    fn same(&self, other: &Self) -> bool;
    /// The term's fencing token.
    fn token(&self) -> u64;
    /// The session that owns the term's node.
    fn owner(&self) -> i64;
}

impl TermNode for Arc<Holding> {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(self, other)
    }
    fn token(&self) -> u64 {
        Holding::token(self)
    }
    fn owner(&self) -> i64 {
        Holding::owner(self)
    }
}

/// Where the candidate is. A term (from election until it ends) is Leading, Suspended or
/// Lost, and carries its node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(in crate::election) enum Phase<T> {
    /// Not leading: queueing in the election, or pausing after an error.
    Queued,
    /// Leading, with the connection up.
    Leading(T),
    /// Leading, but the connection dropped (reported): waiting for leadership to be proven
    /// again.
    Suspended(T),
    /// The term is lost (reported); the thread ends it.
    Lost(T),
    /// The `Candidate` was stopped or dropped: the thread is winding down.
    Stopping,
    /// The thread has ended (dropped, or its client closed); the event stream is over.
    Ended,
}

/// The phase machine without its lock, listeners and condition variable: the phase, the
/// link and `rejoin`, and every transition of the table, each pushing the events it says
/// onto `out` in order. Shared with the model checker (over its own `TermNode`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(in crate::election) struct Machine<T> {
    phase: Phase<T>,
    /// The client's connection is up, as `on_session` last heard.
    connected: bool,
    /// A session was lost and no new one exists yet.
    rejoin: bool,
}

impl<T: TermNode> Machine<T> {
    /// Queued, the link down until [`Machine::subscribed`] says otherwise.
    pub(in crate::election) fn new() -> Machine<T> {
        Machine {
            phase: Phase::Queued,
            connected: false,
            rejoin: false,
        }
    }

    /// The phase.
    #[cfg(test)]
    pub(in crate::election) fn phase(&self) -> &Phase<T> {
        &self.phase
    }

    /// The current term, if it is neither suspended nor lost.
    pub(in crate::election) fn leading(&self) -> Option<&T> {
        match &self.phase {
            Phase::Leading(h) => Some(h),
            _ => None,
        }
    }

    /// The current term, suspended or not, unless lost.
    pub(in crate::election) fn term(&self) -> Option<&T> {
        match &self.phase {
            Phase::Leading(h) | Phase::Suspended(h) => Some(h),
            _ => None,
        }
    }

    pub(in crate::election) fn suspended(&self) -> bool {
        matches!(self.phase, Phase::Suspended(_))
    }

    pub(in crate::election) fn ended(&self) -> bool {
        matches!(self.phase, Phase::Ended)
    }

    pub(in crate::election) fn stopping(&self) -> bool {
        matches!(self.phase, Phase::Stopping)
    }

    pub(in crate::election) fn connected(&self) -> bool {
        self.connected
    }

    /// Whether `h`'s term is the current one (not resigned or dropped meanwhile).
    pub(in crate::election) fn is_term(&self, h: &T) -> bool {
        match &self.phase {
            Phase::Leading(x) | Phase::Suspended(x) | Phase::Lost(x) => x.same(h),
            _ => false,
        }
    }

    /// To `phase`, saying so with `ev`.
    fn go(&mut self, phase: Phase<T>, ev: LeaderEvent, out: &mut Vec<LeaderEvent>) {
        self.phase = phase;
        out.push(ev);
    }

    /// Leading or Suspended to Lost, saying so (once).
    fn lose(&mut self, out: &mut Vec<LeaderEvent>) {
        if let Phase::Leading(h) | Phase::Suspended(h) = &self.phase {
            let h = h.clone();
            self.go(Phase::Lost(h), LeaderEvent::Lost, out);
        }
    }

    /// Ends the current term (reported already); its node, for the caller to release
    /// outside the lock.
    fn take_term(&mut self, to: Phase<T>) -> Option<T> {
        match std::mem::replace(&mut self.phase, to) {
            Phase::Leading(h) | Phase::Suspended(h) | Phase::Lost(h) => Some(h),
            _ => None,
        }
    }

    /// The link as the subscription to session events found it.
    pub(in crate::election) fn subscribed(&mut self, connected: bool) {
        self.connected = connected;
    }

    /// Queued to Leading (or on to Suspended if the link is already down), with `h`:
    /// false, changing nothing, if the candidate is stopping or the node went (`gone`)
    /// before the term began (a new session came up between the grant and the guard).
    pub(in crate::election) fn begin(
        &mut self,
        h: &T,
        gone: bool,
        out: &mut Vec<LeaderEvent>,
    ) -> bool {
        if !matches!(self.phase, Phase::Queued) || gone {
            return false;
        }
        let elected = LeaderEvent::Elected { token: h.token() };
        self.go(Phase::Leading(h.clone()), elected, out);
        // Cut off already: `on_session` saw the drop before the term began.
        if !self.connected {
            self.go(Phase::Suspended(h.clone()), LeaderEvent::Suspended, out);
        }
        true
    }

    /// Suspended to Leading, after leadership was proven, unless the connection dropped
    /// again since. False if `h`'s term is over.
    pub(in crate::election) fn restore(&mut self, h: &T, out: &mut Vec<LeaderEvent>) -> bool {
        if !self.is_term(h) {
            return false;
        }
        if self.suspended() && self.connected {
            self.go(Phase::Leading(h.clone()), LeaderEvent::Restored, out);
        }
        true
    }

    /// `h`'s term ended on loss (reported already if the session went; not yet if the node
    /// was deleted): to Queued. False if it was over already (resigned, dropped).
    pub(in crate::election) fn finish(&mut self, h: &T, out: &mut Vec<LeaderEvent>) -> bool {
        if !self.is_term(h) {
            return false;
        }
        self.lose(out);
        self.take_term(Phase::Queued);
        true
    }

    /// Ends the term by a resign: its node, if there was a term, and whether it had been
    /// lost already.
    pub(in crate::election) fn resign(&mut self, out: &mut Vec<LeaderEvent>) -> (Option<T>, bool) {
        let was_lost = match self.phase {
            Phase::Leading(_) | Phase::Suspended(_) => {
                out.push(LeaderEvent::Resigned);
                false
            }
            Phase::Lost(_) => true,
            Phase::Queued | Phase::Stopping | Phase::Ended => return (None, false),
        };
        (self.take_term(Phase::Queued), was_lost)
    }

    /// The `Candidate` is going: to Stopping, with no event; the term's node, if any, for
    /// the caller to release.
    pub(in crate::election) fn stop(&mut self) -> Option<T> {
        if self.ended() {
            return None;
        }
        self.take_term(Phase::Stopping)
    }

    /// The thread ends: a term still on is lost; to Ended. The term's node, if any, for
    /// the caller to release.
    pub(in crate::election) fn end(&mut self, out: &mut Vec<LeaderEvent>) -> Option<T> {
        self.lose(out);
        self.take_term(Phase::Ended)
    }

    /// A session event, as the connection thread reports it: whether the election's
    /// blocked waits are to be cancelled (a waiting candidate stops waiting and queues
    /// again).
    pub(in crate::election) fn on_session(
        &mut self,
        ev: &SessionEvent,
        out: &mut Vec<LeaderEvent>,
    ) -> bool {
        match *ev {
            SessionEvent::Suspended { .. } => {
                self.connected = false;
                if let Phase::Leading(h) = &self.phase {
                    let h = h.clone();
                    self.go(Phase::Suspended(h), LeaderEvent::Suspended, out);
                }
                false
            }
            SessionEvent::Connected { .. } => {
                self.connected = true;
                // The new session after a loss: the thread queues in it (its enqueue
                // waited for it).
                if std::mem::take(&mut self.rejoin) && !self.stopping() && !self.ended() {
                    out.push(LeaderEvent::Rejoined);
                }
                false
            }
            SessionEvent::Reconnected { .. } => {
                self.connected = true;
                false
            }
            SessionEvent::Lost { session_id, .. } => {
                self.connected = false;
                self.rejoin = true;
                if self.term().is_some_and(|h| h.owner() == session_id) {
                    self.lose(out);
                }
                true
            }
            SessionEvent::Closed => {
                self.connected = false;
                self.lose(out);
                true
            }
        }
    }
}

/// The candidate's state, behind `Shared::inner`: the [`Machine`] and the listeners its
/// events go to. Its fields are written only by the transitions in this file.
pub(super) struct Inner {
    m: Machine<Arc<Holding>>,
    /// One per [`Candidate::events`](super::Candidate::events) receiver still open (a
    /// closed one goes at the next event). Dropped when the candidate ends, so receivers
    /// see the stream end.
    listeners: Vec<Sender<LeaderEvent>>,
}

impl std::ops::Deref for Inner {
    type Target = Machine<Arc<Holding>>;
    fn deref(&self) -> &Self::Target {
        &self.m
    }
}

impl Inner {
    /// Queued, the link down until [`Shared::subscribed`] says otherwise.
    pub(super) fn new() -> Inner {
        Inner {
            m: Machine::new(),
            listeners: Vec::new(),
        }
    }

    fn emit(&mut self, ev: LeaderEvent) {
        self.listeners.retain(|tx| tx.send(ev.clone()).is_ok());
    }

    /// A transition of the machine; its events are sent to the listeners in order (under
    /// the lock, so a listener misses nothing).
    fn moved<R>(
        &mut self,
        f: impl FnOnce(&mut Machine<Arc<Holding>>, &mut Vec<LeaderEvent>) -> R,
    ) -> R {
        let mut out = Vec::new();
        let r = f(&mut self.m, &mut out);
        for ev in out {
            self.emit(ev);
        }
        r
    }

    /// A new listener; one that joins during a term hears of it first.
    pub(super) fn listen(&mut self, tx: Sender<LeaderEvent>) {
        if self.ended() {
            return; // `tx` dropped: disconnected
        }
        if let Some(h) = self.term() {
            let _ = tx.send(LeaderEvent::Elected { token: h.token() });
            if self.suspended() {
                let _ = tx.send(LeaderEvent::Suspended);
            }
        }
        self.listeners.push(tx);
    }
}

impl Shared {
    /// The link as the subscription to session events found it.
    pub(super) fn subscribed(&self, connected: bool) {
        self.inner.lock().m.subscribed(connected);
    }

    /// [`Machine::begin`]; the caller releases `h` if it says false.
    pub(super) fn begin(&self, h: &Arc<Holding>) -> bool {
        let began = self
            .inner
            .lock()
            .moved(|m, out| m.begin(h, h.is_gone(), out));
        if began {
            self.changed.notify_all();
        }
        began
    }

    /// [`Machine::restore`].
    pub(super) fn restore(&self, h: &Arc<Holding>) -> bool {
        let r = self.inner.lock().moved(|m, out| m.restore(h, out));
        self.changed.notify_all();
        r
    }

    /// [`Machine::finish`].
    pub(super) fn finish(&self, h: &Arc<Holding>) -> bool {
        let r = self.inner.lock().moved(|m, out| m.finish(h, out));
        self.changed.notify_all();
        r
    }

    /// [`Machine::resign`].
    pub(super) fn resign(&self) -> (Option<Arc<Holding>>, bool) {
        let r = self.inner.lock().moved(|m, out| m.resign(out));
        self.changed.notify_all();
        r
    }

    /// `h`'s term was asked to step down ([`LeaderEvent::Revoked`]), if it is still the
    /// current term: said, the phase unchanged.
    pub(super) fn revoked(&self, h: &Arc<Holding>) {
        let mut inner = self.inner.lock();
        if inner.term().is_some_and(|t| t.same(h)) {
            inner.emit(LeaderEvent::Revoked);
        }
    }

    /// An error that is not about the connection; the thread pauses, then queues again.
    pub(super) fn fail(&self, error: Error) {
        self.inner.lock().emit(LeaderEvent::Failed { error });
    }

    /// [`Machine::stop`].
    pub(super) fn stop(&self) -> Option<Arc<Holding>> {
        let term = self.inner.lock().m.stop();
        self.changed.notify_all();
        term
    }

    /// [`Machine::end`], closing every receiver.
    pub(super) fn end(&self) -> Option<Arc<Holding>> {
        let mut inner = self.inner.lock();
        let term = inner.moved(|m, out| m.end(out));
        inner.listeners.clear();
        self.changed.notify_all();
        term
    }
}

impl SessionSink for Shared {
    // On the connection thread, so a leader hears of trouble before anyone else can be
    // elected. It only moves the phase, sends into channels and takes `inner` (which
    // nobody holds while waiting), and never drops the last handle on a node.
    fn on_session(&self, ev: &SessionEvent) {
        let cancel = self.inner.lock().moved(|m, out| m.on_session(ev, out));
        if cancel {
            self.election.canceller().cancel();
        }
    }
}
