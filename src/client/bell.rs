//! One waiting thread's doorbell: every source a wait looks at rings it when it has news, so
//! the wait sleeps on one condition variable instead of a select over its channels.
//!
//! Why not `crossbeam_channel::Select`: a select registers with every channel it waits on,
//! and once woken unregisters from each under that channel's lock. The connection thread
//! that sent the event still holds that lock while it wakes the waiter, so the waiter,
//! woken on the other core, found it taken in about 4 of 5 wake-ups in the bench's W2:8
//! (`strace -f -k -e trace=futex`: `SyncWaker::unregister` → `lock_contended`), slept again
//! and was woken a second time: two more system calls and a context switch per watch event.
//! Here the sender rings after its send and has let go of everything when the waiter runs.
//!
//! The rule that makes it work: every source a [`wake`](crate::queue::wake) waits on sends
//! through a [`Ringing`] of the wait's bell (a watch armed in a pipeline given the bell by
//! [`Pipeline::ring`](crate::client::Pipeline::ring), session events, the cancel, a lost
//! lock, a candidate's wake). A source that does not ring is seen only at the next ring, the
//! tick or the deadline.
//!
//! The bell's mutex is a leaf of the lock order: held only to count a ring or read the
//! count, with nothing else taken under it.
//!
//! Model-checked with loom for lost wake-ups (`bell/loom.rs`, under `--cfg loom`: see
//! `src/sync.rs`).

use std::sync::Arc;
use std::time::Instant;

use crate::sync::{Condvar, Mutex};
use crossbeam_channel::{SendError, Sender};

/// A doorbell: a count of rings and the condition variable its one waiter sleeps on.
/// Clones ring the same bell.
#[derive(Clone, Default)]
pub(crate) struct Bell(Arc<Inner>);

#[derive(Default)]
struct Inner {
    rings: Mutex<u64>,
    rung: Condvar,
}

impl Bell {
    /// Counts a ring and wakes the waiter, if one sleeps.
    pub(crate) fn ring(&self) {
        *self.0.rings.lock() += 1;
        self.0.rung.notify_all();
    }

    /// The rings so far: take it before looking at the sources, then [`wait_past`] it.
    ///
    /// [`wait_past`]: Bell::wait_past
    pub(crate) fn mark(&self) -> u64 {
        *self.0.rings.lock()
    }

    /// Sleeps until a ring after `mark`, or until `until`; false if `until` came first.
    pub(crate) fn wait_past(&self, mark: u64, until: Option<Instant>) -> bool {
        let mut rings = self.0.rings.lock();
        while *rings == mark {
            match until {
                None => self.0.rung.wait(&mut rings),
                Some(t) => {
                    if self.0.rung.wait_until(&mut rings, t).timed_out() {
                        return *rings != mark;
                    }
                }
            }
        }
        true
    }
}

/// A channel's sending end that rings a bell (if it has one) after each send and once more
/// when dropped, so that a waiter hears a sender gone as it would in a select.
pub(crate) struct Ringing<T> {
    /// `None` only while dropped: the channel's sender goes before the last ring, so the
    /// waiter that the ring wakes finds the channel disconnected.
    tx: Option<Sender<T>>,
    bell: Option<Bell>,
}

impl<T> Ringing<T> {
    pub(crate) fn new(tx: Sender<T>, bell: Option<Bell>) -> Ringing<T> {
        Ringing { tx: Some(tx), bell }
    }

    /// Sends and rings.
    pub(crate) fn send(&self, v: T) -> Result<(), SendError<T>> {
        let sent = match &self.tx {
            Some(tx) => {
                crate::sync::channel_step();
                tx.send(v)
            }
            None => Err(SendError(v)),
        };
        self.ring();
        sent
    }

    /// Sends a sender's last message: it rings once, as it goes.
    pub(crate) fn send_last(self, v: T) {
        if let Some(tx) = &self.tx {
            crate::sync::channel_step();
            let _ = tx.send(v);
        }
    }

    fn ring(&self) {
        if let Some(b) = &self.bell {
            b.ring();
        }
    }
}

impl<T> Drop for Ringing<T> {
    fn drop(&mut self) {
        crate::sync::channel_step();
        drop(self.tx.take());
        self.ring();
    }
}

#[cfg(all(test, loom))]
mod loom;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_ring_after_the_mark_ends_the_wait_and_one_before_does_not() {
        let bell = Bell::default();
        bell.ring();
        let mark = bell.mark();
        let soon = Some(Instant::now() + Duration::from_millis(20));
        assert!(!bell.wait_past(mark, soon), "no ring after the mark");
        bell.ring();
        assert!(bell.wait_past(mark, None), "a ring after the mark");
    }

    #[test]
    fn a_sender_rings_on_each_send_and_as_it_goes_and_wakes_a_sleeper() {
        let bell = Bell::default();
        let (tx, rx) = crossbeam_channel::unbounded();
        let tx = Ringing::new(tx, Some(bell.clone()));
        let mark = bell.mark();
        tx.send(1).unwrap();
        assert_eq!(bell.mark(), mark + 1);
        assert_eq!(rx.try_recv(), Ok(1));
        // Another thread's last send wakes this one, asleep on the bell.
        let mark = bell.mark();
        let t = std::thread::spawn(move || tx.send_last(2));
        assert!(bell.wait_past(mark, None));
        t.join().unwrap();
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(bell.mark(), mark + 1, "the last send rings once");
        // A sender dropped unsent rings too (its receiver is disconnected now).
        let (tx, rx) = crossbeam_channel::unbounded::<()>();
        let mark = bell.mark();
        drop(Ringing::new(tx, Some(bell.clone())));
        assert!(bell.wait_past(mark, None));
        assert_eq!(
            rx.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        );
    }
}
