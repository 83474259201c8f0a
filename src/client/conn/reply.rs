//! The reply to one request: a one-shot slot the connection thread fills and the caller
//! waits on.
//!
//! What a `bounded(1)` channel did before, for less: a channel's receiver spins and calls
//! `sched_yield` a few times before it sleeps, and a request's reply comes a network round
//! trip later, so every wait burnt those system calls for nothing (the bench's W1 and W2
//! under `strace -c`: about two `sched_yield` per request). Here the caller sleeps at once
//! on a condition variable, and the channel's allocation is one `Arc` of a mutex.
//!
//! A [`Settled`] of a slot waits for its reply without taking it: a pipeline's callers wait
//! for its last reply through one before they take their own (`client/pipeline.rs`).
//!
//! The slot's mutex is a leaf of the lock order: held only to put or take the reply, with
//! nothing else taken under it, and the sender never waits on it but for that moment.
//!
//! Model-checked with loom for lost wake-ups (`reply/loom.rs`, under `--cfg loom`: see
//! `src/sync.rs`).

use std::sync::Arc;
use std::time::Instant;

use crate::sync::{Condvar, Mutex};
use crossbeam_channel::RecvTimeoutError;

use super::ReplyMsg;

/// A new slot: the sending end (kept with the request in flight) and the waiting end.
pub(crate) fn reply_slot() -> (ReplyTx, ReplyRx) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Waiting),
        ready: Condvar::new(),
    });
    (ReplyTx(Some(slot.clone())), ReplyRx(slot))
}

struct Slot {
    state: Mutex<State>,
    ready: Condvar,
}

enum State {
    /// Nothing yet.
    Waiting,
    /// The reply (or why there is none), not taken yet.
    Done(ReplyMsg),
    /// The sender was dropped without a reply, or the reply was taken.
    Gone,
}

/// Where the reply goes; dropping it unsent tells the waiter there will be none (as a
/// dropped channel sender does).
pub(crate) struct ReplyTx(Option<Arc<Slot>>);

impl ReplyTx {
    /// Hands the reply over and wakes its waiters (if they are still there).
    pub(crate) fn send(mut self, msg: ReplyMsg) {
        if let Some(slot) = self.0.take() {
            slot.put(State::Done(msg));
        }
    }
}

impl Drop for ReplyTx {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.put(State::Gone);
        }
    }
}

impl Slot {
    fn put(&self, s: State) {
        *self.state.lock() = s;
        // All: a pipeline's caller may wait for the last reply's news through a [`Settled`].
        self.ready.notify_all();
    }
}

/// The caller's end of a [`reply_slot`].
pub(crate) struct ReplyRx(Arc<Slot>);

/// A second look at a [`reply_slot`]: whether its reply (or the news of none) came, without
/// taking it.
#[derive(Clone)]
pub(crate) struct Settled(Arc<Slot>);

impl Settled {
    /// Waits until the slot is no longer waiting, or until `deadline`.
    pub(crate) fn wait(&self, deadline: Instant) {
        let mut state = self.0.state.lock();
        while matches!(*state, State::Waiting) {
            if self.0.ready.wait_until(&mut state, deadline).timed_out() {
                return;
            }
        }
    }
}

impl ReplyRx {
    /// Whether the reply (or the news of none) came: never waits.
    pub(crate) fn is_done(&self) -> bool {
        !matches!(*self.0.state.lock(), State::Waiting)
    }

    /// A [`Settled`] of the same slot.
    pub(crate) fn settled(&self) -> Settled {
        Settled(self.0.clone())
    }

    /// The reply, waiting until `deadline` at most; `Disconnected` if the sender was
    /// dropped without one (or it was taken before), as a channel says.
    pub(crate) fn recv_deadline(&self, deadline: Instant) -> Result<ReplyMsg, RecvTimeoutError> {
        let mut state = self.0.state.lock();
        loop {
            match std::mem::replace(&mut *state, State::Gone) {
                State::Done(msg) => return Ok(msg),
                State::Gone => return Err(RecvTimeoutError::Disconnected),
                State::Waiting => *state = State::Waiting,
            }
            if self.0.ready.wait_until(&mut state, deadline).timed_out() {
                return match std::mem::replace(&mut *state, State::Gone) {
                    State::Done(msg) => Ok(msg),
                    State::Gone => Err(RecvTimeoutError::Disconnected),
                    State::Waiting => {
                        *state = State::Waiting;
                        Err(RecvTimeoutError::Timeout)
                    }
                };
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn a_reply_sent_before_or_during_the_wait_arrives() {
        let (tx, rx) = reply_slot();
        tx.send(Err(Error::Closed.into()));
        assert!(matches!(rx.recv_deadline(soon()), Ok(Err(_))));
        // Taken once: a second wait finds nothing to come.
        assert!(matches!(
            rx.recv_deadline(soon()),
            Err(RecvTimeoutError::Disconnected)
        ));

        let (tx, rx) = reply_slot();
        let sender = std::thread::spawn(move || tx.send(Err(Error::ConnectionLoss.into())));
        assert!(matches!(rx.recv_deadline(soon()), Ok(Err(_))));
        assert!(sender.join().is_ok());
    }

    #[test]
    fn a_dropped_sender_is_disconnected_and_a_silent_one_a_timeout() {
        let (tx, rx) = reply_slot();
        let dropper = std::thread::spawn(move || drop(tx));
        assert!(matches!(
            rx.recv_deadline(soon()),
            Err(RecvTimeoutError::Disconnected)
        ));
        assert!(dropper.join().is_ok());

        let (tx, rx) = reply_slot();
        let past = Instant::now();
        assert!(matches!(
            rx.recv_deadline(past),
            Err(RecvTimeoutError::Timeout)
        ));
        // The sender is still there: a later reply is still delivered.
        tx.send(Err(Error::Closed.into()));
        assert!(matches!(rx.recv_deadline(past), Ok(Err(_))));
    }

    #[test]
    fn a_send_after_the_waiter_left_is_harmless() {
        let (tx, rx) = reply_slot();
        drop(rx);
        tx.send(Err(Error::Closed.into()));
    }
}
