//! The bell model-checked with loom (`--cfg loom`, see `src/sync.rs`): a waiter and a
//! ringing sender on two threads, every interleaving of the bell's lock, unlock, wait and
//! notify. A wake-up lost is loom's "deadlock" (the waiter asleep, the sender done) or a
//! failed assertion (woken, and the news not there).

use crossbeam_channel::TryRecvError;
use loom::thread;

use super::{Bell, Ringing};

/// The waiter's side of the rule: mark, look, sleep past the mark, look again. Each look
/// is a channel step for the model, as `wake`'s are (`src/sync.rs`).
fn heard<T>(bell: &Bell, rx: &crossbeam_channel::Receiver<T>) -> Result<T, TryRecvError> {
    let look = || {
        crate::sync::channel_step();
        rx.try_recv()
    };
    let mark = bell.mark();
    match look() {
        Err(TryRecvError::Empty) => {
            assert!(
                bell.wait_past(mark, None),
                "no deadline: only a ring ends it"
            );
            look()
        }
        other => other,
    }
}

/// A send is rung after it is in the channel: a waiter that marked before the ring finds
/// the message when the ring wakes it. The sender is kept (returned by its thread) so that
/// its drop's ring cannot cover a send that was not rung.
#[test]
fn loom_a_send_after_the_mark_is_heard() {
    loom::model(|| {
        let bell = Bell::default();
        let (tx, rx) = crossbeam_channel::unbounded();
        let tx = Ringing::new(tx, Some(bell.clone()));
        let sender = thread::spawn(move || {
            tx.send(7).expect("the receiver is there");
            tx
        });
        assert_eq!(heard(&bell, &rx), Ok(7));
        drop(sender.join().expect("the sender ends"));
    });
}

/// A `Ringing` dropped unsent rings after its channel is disconnected: the waiter it wakes
/// always finds it so (never still connected, to sleep again with no ring to come).
#[test]
fn loom_a_dropped_ringing_is_heard_as_disconnected() {
    loom::model(|| {
        let bell = Bell::default();
        let (tx, rx) = crossbeam_channel::unbounded::<u8>();
        let tx = Ringing::new(tx, Some(bell.clone()));
        let sender = thread::spawn(move || drop(tx));
        assert_eq!(heard(&bell, &rx), Err(TryRecvError::Disconnected));
        sender.join().expect("the sender ends");
    });
}

/// A last send rings once, as the sender goes: the waiter finds the message (and, looking
/// once more after a second ring-free look, the channel disconnected).
#[test]
fn loom_a_last_send_is_heard() {
    loom::model(|| {
        let bell = Bell::default();
        let (tx, rx) = crossbeam_channel::unbounded();
        let tx = Ringing::new(tx, Some(bell.clone()));
        let sender = thread::spawn(move || tx.send_last(3));
        assert_eq!(heard(&bell, &rx), Ok(3));
        sender.join().expect("the sender ends");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}
