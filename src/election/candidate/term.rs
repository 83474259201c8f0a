//! The candidate's state: its [`Phase`] (queued, the term's phases, stopping, ended) and
//! the two things the connection thread tells it (the link, a session lost).
//!
//! This file alone moves the phase: every change is one method below, which takes
//! `Shared::inner`, moves the phase, emits the [`LeaderEvent`] that says so (under the same
//! lock, so [`Candidate::events`](super::Candidate::events) misses nothing) and wakes the
//! waiters (the condition variable `changed`). The rest of the candidate reads the phase
//! through [`Inner`]'s accessors. A method given a term's node (`h`) moves only that term:
//! once a resign or a drop has ended it, the thread's late calls change nothing.
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
//! ([`LeaderEvent::Failed`]); the phase stays Queued.
//!
//! [`begin`]: Shared::begin
//! [`on_session`]: Shared::on_session
//! [`restore`]: Shared::restore
//! [`finish`]: Shared::finish
//! [`resign`]: Shared::resign
//! [`stop`]: Shared::stop
//! [`end`]: Shared::end
//! [`fail`]: Shared::fail
//! [`subscribed`]: Shared::subscribed
//! [`Candidate::resign`]: super::Candidate::resign
//! [`Candidate`]: super::Candidate

use std::sync::Arc;

use crossbeam_channel::Sender;
use parking_lot::MutexGuard;

use crate::client::SessionEvent;
use crate::client::SessionSink;
use crate::error::Error;
use crate::lock::Holding;

use super::{LeaderEvent, Shared};

/// Where the candidate is. A term (from election until it ends) is Leading, Suspended or
/// Lost, and carries its node.
enum Phase {
    /// Not leading: queueing in the election, or pausing after an error.
    Queued,
    /// Leading, with the connection up.
    Leading(Arc<Holding>),
    /// Leading, but the connection dropped (reported): waiting for leadership to be proven
    /// again.
    Suspended(Arc<Holding>),
    /// The term is lost (reported); the thread ends it.
    Lost(Arc<Holding>),
    /// The `Candidate` was stopped or dropped: the thread is winding down.
    Stopping,
    /// The thread has ended (dropped, or its client closed); the event stream is over.
    Ended,
}

/// The candidate's state, behind `Shared::inner`. Its fields are written only by the
/// transitions in this file.
pub(super) struct Inner {
    phase: Phase,
    /// The client's connection is up, as `on_session` last heard.
    connected: bool,
    /// A session was lost and no new one exists yet.
    rejoin: bool,
    /// One per [`Candidate::events`](super::Candidate::events) receiver still open (a
    /// closed one goes at the next event). Dropped when the candidate ends, so receivers
    /// see the stream end.
    listeners: Vec<Sender<LeaderEvent>>,
}

impl Inner {
    /// Queued, the link down until [`Shared::subscribed`] says otherwise.
    pub(super) fn new() -> Inner {
        Inner {
            phase: Phase::Queued,
            connected: false,
            rejoin: false,
            listeners: Vec::new(),
        }
    }

    fn emit(&mut self, ev: LeaderEvent) {
        self.listeners.retain(|tx| tx.send(ev.clone()).is_ok());
    }

    /// To `phase`, saying so with `ev`.
    fn go(&mut self, phase: Phase, ev: LeaderEvent) {
        self.phase = phase;
        self.emit(ev);
    }

    /// The current term, if it is neither suspended nor lost.
    pub(super) fn leading(&self) -> Option<&Arc<Holding>> {
        match &self.phase {
            Phase::Leading(h) => Some(h),
            _ => None,
        }
    }

    /// The current term, suspended or not, unless lost.
    pub(super) fn term(&self) -> Option<&Arc<Holding>> {
        match &self.phase {
            Phase::Leading(h) | Phase::Suspended(h) => Some(h),
            _ => None,
        }
    }

    pub(super) fn suspended(&self) -> bool {
        matches!(self.phase, Phase::Suspended(_))
    }

    pub(super) fn ended(&self) -> bool {
        matches!(self.phase, Phase::Ended)
    }

    pub(super) fn stopping(&self) -> bool {
        matches!(self.phase, Phase::Stopping)
    }

    pub(super) fn connected(&self) -> bool {
        self.connected
    }

    /// Whether `h`'s term is the current one (not resigned or dropped meanwhile).
    pub(super) fn is_term(&self, h: &Arc<Holding>) -> bool {
        match &self.phase {
            Phase::Leading(x) | Phase::Suspended(x) | Phase::Lost(x) => Arc::ptr_eq(x, h),
            _ => false,
        }
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

    /// Leading or Suspended to Lost, saying so (once).
    fn lose(&mut self) {
        if let Phase::Leading(h) | Phase::Suspended(h) = &self.phase {
            self.go(Phase::Lost(h.clone()), LeaderEvent::Lost);
        }
    }

    /// Ends the current term (reported already); its node, for the caller to release
    /// outside the lock.
    fn take_term(&mut self, to: Phase) -> Option<Arc<Holding>> {
        match std::mem::replace(&mut self.phase, to) {
            Phase::Leading(h) | Phase::Suspended(h) | Phase::Lost(h) => Some(h),
            _ => None,
        }
    }
}

impl Shared {
    /// The state, locked, if `h`'s term is the current one.
    fn term_of(&self, h: &Arc<Holding>) -> Option<MutexGuard<'_, Inner>> {
        Some(self.inner.lock()).filter(|inner| inner.is_term(h))
    }

    /// The link as the subscription to session events found it.
    pub(super) fn subscribed(&self, connected: bool) {
        self.inner.lock().connected = connected;
    }

    /// Queued to Leading (or on to Suspended if the link is already down), with `h`:
    /// false, changing nothing, if the candidate is stopping or the node went before the
    /// term began (a new session came up between the grant and the guard); the caller
    /// releases it then.
    pub(super) fn begin(&self, h: &Arc<Holding>) -> bool {
        let mut inner = self.inner.lock();
        if !matches!(inner.phase, Phase::Queued) || h.is_gone() {
            return false;
        }
        let elected = LeaderEvent::Elected { token: h.token() };
        inner.go(Phase::Leading(h.clone()), elected);
        // Cut off already: `on_session` saw the drop before the term began.
        if !inner.connected {
            inner.go(Phase::Suspended(h.clone()), LeaderEvent::Suspended);
        }
        self.changed.notify_all();
        true
    }

    /// Suspended to Leading, after leadership was proven, unless the connection dropped
    /// again since. False if `h`'s term is over.
    pub(super) fn restore(&self, h: &Arc<Holding>) -> bool {
        let Some(mut inner) = self.term_of(h) else {
            return false;
        };
        if inner.suspended() && inner.connected {
            inner.go(Phase::Leading(h.clone()), LeaderEvent::Restored);
            self.changed.notify_all();
        }
        true
    }

    /// `h`'s term ended on loss (reported already if the session went; not yet if the node
    /// was deleted): to Queued. False if it was over already (resigned, dropped).
    pub(super) fn finish(&self, h: &Arc<Holding>) -> bool {
        let Some(mut inner) = self.term_of(h) else {
            return false;
        };
        inner.lose();
        inner.take_term(Phase::Queued);
        self.changed.notify_all();
        true
    }

    /// Ends the term by a resign: its node, if there was a term, and whether it had been
    /// lost already.
    pub(super) fn resign(&self) -> (Option<Arc<Holding>>, bool) {
        let mut inner = self.inner.lock();
        let was_lost = match inner.phase {
            Phase::Leading(_) | Phase::Suspended(_) => {
                inner.emit(LeaderEvent::Resigned);
                false
            }
            Phase::Lost(_) => true,
            Phase::Queued | Phase::Stopping | Phase::Ended => return (None, false),
        };
        let term = inner.take_term(Phase::Queued);
        self.changed.notify_all();
        (term, was_lost)
    }

    /// An error that is not about the connection; the thread pauses, then queues again.
    pub(super) fn fail(&self, error: Error) {
        self.inner.lock().emit(LeaderEvent::Failed { error });
    }

    /// The `Candidate` is going: to Stopping, with no event; the term's node, if any, for
    /// the caller to release.
    pub(super) fn stop(&self) -> Option<Arc<Holding>> {
        let mut inner = self.inner.lock();
        if inner.ended() {
            return None;
        }
        let term = inner.take_term(Phase::Stopping);
        self.changed.notify_all();
        term
    }

    /// The thread ends: a term still on is lost; to Ended, closing every receiver. The
    /// term's node, if any, for the caller to release.
    pub(super) fn end(&self) -> Option<Arc<Holding>> {
        let mut inner = self.inner.lock();
        inner.lose();
        let term = inner.take_term(Phase::Ended);
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
        let mut inner = self.inner.lock();
        match *ev {
            SessionEvent::Suspended { .. } => {
                inner.connected = false;
                if let Phase::Leading(h) = &inner.phase {
                    let h = h.clone();
                    inner.go(Phase::Suspended(h), LeaderEvent::Suspended);
                }
            }
            SessionEvent::Connected { .. } => {
                inner.connected = true;
                // The new session after a loss: the thread queues in it (its enqueue
                // waited for it).
                if std::mem::take(&mut inner.rejoin) && !inner.stopping() && !inner.ended() {
                    inner.emit(LeaderEvent::Rejoined);
                }
            }
            SessionEvent::Reconnected { .. } => {
                inner.connected = true;
            }
            SessionEvent::Lost { session_id, .. } => {
                inner.connected = false;
                inner.rejoin = true;
                if inner.term().is_some_and(|h| h.owner() == session_id) {
                    inner.lose();
                }
                drop(inner);
                // A waiting candidate stops waiting, says so, and queues again.
                self.election.canceller().cancel();
            }
            SessionEvent::Closed => {
                inner.connected = false;
                inner.lose();
                drop(inner);
                self.election.canceller().cancel();
            }
        }
    }
}
