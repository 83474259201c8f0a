//! The one wait of every loop that waits on ZooKeeper: the queue's waiter, the single-node
//! acquire, the semaphore's count, a retry's pause and a leader's watch all block here, for
//! whichever comes first of their watches, a lost lock, a session event, a cancel, the
//! caller's deadline and a slow tick.
//!
//! Model-checked with loom for lost wake-ups against a source that rings from another
//! thread (`wake/loom.rs`, under `--cfg loom`: see `src/sync.rs`).

use std::time::Instant;

use crossbeam_channel::{Receiver, RecvError, TryRecvError};

use crate::client::{Bell, SessionEvent, WatchedEvent};

#[cfg(all(test, loom))]
mod loom;

/// What ended a [`wake`].
pub(crate) enum Wake {
    /// The watch at this index of the list given fired (`Err`: its sender is gone).
    Watch(usize, Result<WatchedEvent, RecvError>),
    /// The lock given as `lost` was lost.
    Lost,
    /// A session event (`Err`: the client's list of sinks is gone).
    Session(Result<SessionEvent, RecvError>),
    /// A cancel (or, for a leader, a resign or a drop).
    Cancel,
    /// The caller's deadline passed.
    Deadline,
    /// The tick passed before the deadline: time for a slow re-check.
    Tick,
}

/// Blocks until one of the sources is ready, and says which. A source that is ready
/// already is taken before the deadline or the tick, even one passed; when several are,
/// the first in the order of the arguments (the watches in their order, `lost`, the session,
/// the cancel).
///
/// Every source must ring `bell` when it sends or its sender goes
/// ([`Ringing`](crate::client::Ringing); watches armed in a pipeline given the bell,
/// [`Pipeline::ring`](crate::client::Pipeline::ring)): the wait sleeps on the bell, not on
/// the channels (why: `client/bell.rs`). A source that does not ring is seen at the next
/// ring, the tick or the deadline only.
pub(crate) fn wake(
    bell: &Bell,
    watches: &[&Receiver<WatchedEvent>],
    lost: Option<&Receiver<()>>,
    events: &Receiver<SessionEvent>,
    cancel: &Receiver<()>,
    deadline: Option<Instant>,
    tick: Option<Instant>,
) -> Wake {
    let until = match (deadline, tick) {
        (Some(d), Some(t)) => Some(d.min(t)),
        (d, t) => d.or(t),
    };
    loop {
        // Rings from here on end the sleep below, so a send after the look is not missed.
        let mark = bell.mark();
        if let Some(w) = ready(watches, lost, events, cancel) {
            return w;
        }
        if !bell.wait_past(mark, until) {
            // The tick, unless the deadline has come too.
            if tick.is_some() && deadline.is_none_or(|d| Instant::now() < d) {
                return Wake::Tick;
            }
            return Wake::Deadline;
        }
    }
}

/// The first source with something to take (a message, or its sender gone), taken.
fn ready(
    watches: &[&Receiver<WatchedEvent>],
    lost: Option<&Receiver<()>>,
    events: &Receiver<SessionEvent>,
    cancel: &Receiver<()>,
) -> Option<Wake> {
    for (i, w) in watches.iter().enumerate() {
        if let Some(r) = taken(w) {
            return Some(Wake::Watch(i, r));
        }
    }
    if lost.and_then(taken).is_some() {
        return Some(Wake::Lost);
    }
    if let Some(r) = taken(events) {
        return Some(Wake::Session(r));
    }
    taken(cancel).map(|_| Wake::Cancel)
}

/// A message, or `Err` if the sender is gone; `None` if neither yet.
fn taken<T>(rx: &Receiver<T>) -> Option<Result<T, RecvError>> {
    crate::sync::channel_step();
    match rx.try_recv() {
        Ok(v) => Some(Ok(v)),
        Err(TryRecvError::Disconnected) => Some(Err(RecvError)),
        Err(TryRecvError::Empty) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::EventType;

    fn event(t: EventType) -> WatchedEvent {
        WatchedEvent {
            event_type: t,
            path: "/x".into(),
        }
    }

    #[test]
    fn says_which_source_woke_it() {
        let (wtx, w0) = crossbeam_channel::unbounded();
        let w1 = crossbeam_channel::never();
        let (ltx, lost) = crossbeam_channel::unbounded();
        let (etx, events) = crossbeam_channel::unbounded();
        let (ctx, cancel) = crossbeam_channel::unbounded();
        let far = Some(Instant::now() + Duration::from_secs(600));
        let bell = Bell::default();
        let wait = || wake(&bell, &[&w1, &w0], Some(&lost), &events, &cancel, far, far);
        wtx.send(event(EventType::NodeDeleted)).unwrap();
        assert!(
            matches!(wait(), Wake::Watch(1, Ok(ev)) if ev.event_type == EventType::NodeDeleted)
        );
        ltx.send(()).unwrap();
        assert!(matches!(wait(), Wake::Lost));
        etx.send(SessionEvent::Closed).unwrap();
        assert!(matches!(wait(), Wake::Session(Ok(SessionEvent::Closed))));
        ctx.send(()).unwrap();
        assert!(matches!(wait(), Wake::Cancel));
        drop(wtx);
        assert!(matches!(wait(), Wake::Watch(1, Err(_))));
    }

    #[test]
    fn tells_the_deadline_from_the_tick() {
        let (_etx, events) = crossbeam_channel::unbounded::<SessionEvent>();
        let (_ctx, cancel) = crossbeam_channel::unbounded::<()>();
        let now = Instant::now();
        let later = Some(now + Duration::from_secs(600));
        let past = Some(now);
        let bell = Bell::default();
        let wait = |deadline, tick| wake(&bell, &[], None, &events, &cancel, deadline, tick);
        assert!(matches!(wait(past, later), Wake::Deadline));
        assert!(matches!(wait(past, None), Wake::Deadline));
        assert!(matches!(wait(later, past), Wake::Tick));
        assert!(matches!(wait(None, past), Wake::Tick));
        // A source that is ready wins over a deadline passed.
        let (ctx, cancel) = crossbeam_channel::unbounded();
        ctx.send(()).unwrap();
        assert!(matches!(
            wake(&bell, &[], None, &events, &cancel, past, None),
            Wake::Cancel
        ));
    }

    /// Asleep, it wakes when a source rings its bell (a watch fired on another thread, as
    /// the connection thread does) and when a ringing sender goes unsent.
    #[test]
    fn a_ring_wakes_it_for_the_source_that_rang() {
        use crate::client::Ringing;
        let bell = Bell::default();
        let (_etx, events) = crossbeam_channel::unbounded::<SessionEvent>();
        let (_ctx, cancel) = crossbeam_channel::unbounded::<()>();
        let (wtx, w0) = crossbeam_channel::unbounded();
        let wtx = Ringing::new(wtx, Some(bell.clone()));
        let t = std::thread::spawn(move || wtx.send_last(event(EventType::NodeDeleted)));
        assert!(matches!(
            wake(&bell, &[&w0], None, &events, &cancel, None, None),
            Wake::Watch(0, Ok(ev)) if ev.event_type == EventType::NodeDeleted
        ));
        t.join().unwrap();
        // A sender dropped on another thread, many times over: the ring must come after
        // the channel is disconnected, or a waiter woken in between finds it still
        // connected, sleeps again and is never rung (it would wake only at the tick).
        for _ in 0..300 {
            let (wtx, w1) = crossbeam_channel::unbounded::<WatchedEvent>();
            let wtx = Ringing::new(wtx, Some(bell.clone()));
            let t = std::thread::spawn(move || drop(wtx));
            let tick = Some(Instant::now() + Duration::from_secs(60));
            let woke = wake(&bell, &[&w1], None, &events, &cancel, None, tick);
            assert!(
                matches!(woke, Wake::Watch(0, Err(_))),
                "not told the sender went"
            );
            t.join().unwrap();
        }
    }
}
