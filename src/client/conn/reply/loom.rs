//! The reply slot model-checked with loom (`--cfg loom`, see `src/sync.rs`): the
//! connection thread's put and the caller's take, and a pipeline caller's wait for the last
//! reply through a `Settled`, on their own threads, every interleaving of the slot's lock,
//! unlock, wait and notify. The waits' deadlines are far off (loom has no clock: a timed
//! wait never times out here), so a wake-up lost is loom's "deadlock".

use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use loom::thread;

use super::reply_slot;
use crate::client::conn::NoReply;
use crate::error::Error;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

fn reply() -> super::ReplyMsg {
    Err(NoReply::from(Error::Closed))
}

/// A reply put on another thread, before the caller waits or while it does, is taken.
#[test]
fn loom_a_reply_put_is_taken() {
    loom::model(|| {
        let (tx, rx) = reply_slot();
        let conn = thread::spawn(move || tx.send(reply()));
        assert!(matches!(rx.recv_deadline(far()), Ok(Err(_))), "the reply");
        conn.join().expect("the connection thread ends");
    });
}

/// A sender dropped on another thread without a reply is told as disconnected.
#[test]
fn loom_a_sender_dropped_is_disconnected() {
    loom::model(|| {
        let (tx, rx) = reply_slot();
        let conn = thread::spawn(move || drop(tx));
        assert!(matches!(
            rx.recv_deadline(far()),
            Err(RecvTimeoutError::Disconnected)
        ));
        conn.join().expect("the connection thread ends");
    });
}

/// A pipeline: the connection thread puts the first reply, then the last; one caller waits
/// for the last through a `Settled` and then takes the first, while the last's own caller
/// waits on the same slot. Both wake, whatever the order: one put wakes every waiter of its
/// slot.
#[test]
fn loom_settled_and_take_on_one_slot_both_wake() {
    loom::model(|| {
        let (first_tx, first_rx) = reply_slot();
        let (last_tx, last_rx) = reply_slot();
        let settled = last_rx.settled();
        let conn = thread::spawn(move || {
            first_tx.send(reply());
            last_tx.send(reply());
        });
        let last_caller = thread::spawn(move || {
            assert!(
                matches!(last_rx.recv_deadline(far()), Ok(Err(_))),
                "the last reply"
            );
        });
        settled.wait(far());
        assert!(
            matches!(first_rx.recv_deadline(far()), Ok(Err(_))),
            "the first reply, in before the last"
        );
        conn.join().expect("the connection thread ends");
        last_caller.join().expect("the last reply's caller ends");
    });
}
