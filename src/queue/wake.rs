//! The one wait of every loop that waits on ZooKeeper: the queue's waiter, the single-node
//! acquire, the semaphore's count, a retry's pause and a leader's watch all block here, for
//! whichever comes first of the sources they name in a [`WaitOn`]: their watches, a lost
//! lock, a session event, a cancel or a resign, the caller's deadline and a slow tick.
//! What a wake-up means to an acquire loop is decided once, beside `Verdict`
//! (`attempt.rs`, `Woke::of`); a leader's, by the candidate (`election/candidate.rs`).
//!
//! Model-checked with loom for lost wake-ups against a source that rings from another
//! thread (`wake/loom.rs`, under `--cfg loom`: see `src/sync.rs`).

use std::time::Instant;

use crossbeam_channel::{Receiver, RecvError, TryRecvError};

use crate::client::{Bell, SessionEvent, WatchedEvent};

#[cfg(all(test, loom))]
mod loom;

/// What one [`wake`] waits on, each source by name. Every source must ring `bell` when it
/// sends or its sender goes ([`Ringing`](crate::client::Ringing); watches armed in a
/// pipeline given the bell, [`Pipeline::ring`](crate::client::Pipeline::ring)): the wait
/// sleeps on the bell, not on the channels (why: `client/bell.rs`). A source that does not
/// ring is seen at the next ring, the tick or the deadline only.
///
/// [`WaitOn::new`] names the two every wait has (the bell and the session's events), the
/// rest unset: `WaitOn { cancel: Some(rx), ..WaitOn::new(bell, events) }`.
#[derive(Clone, Copy)]
pub(crate) struct WaitOn<'a> {
    /// What every source rings.
    pub bell: &'a Bell,
    /// Watches, told apart by their index in this list ([`Wake::Watch`]).
    pub watches: &'a [&'a Receiver<WatchedEvent>],
    /// A held node's loss (a leader's term: its guard's own-node watch).
    pub lost: Option<&'a Receiver<()>>,
    /// The session's events (`Err`: the client's list of sinks is gone).
    pub events: &'a Receiver<SessionEvent>,
    /// An acquire call's cancel (its `CancelWait`).
    pub cancel: Option<&'a Receiver<()>>,
    /// A leader's resign, its candidate's drop or stop, or a revocation request (the
    /// candidate's own channel).
    pub resign: Option<&'a Receiver<()>>,
    /// The caller's deadline.
    pub deadline: Option<Instant>,
    /// A slow re-check (or a leader's retry of its proof), before the deadline.
    pub tick: Option<Instant>,
}

impl<'a> WaitOn<'a> {
    /// A wait on `bell` for the session's `events`, and nothing else yet.
    pub(crate) fn new(bell: &'a Bell, events: &'a Receiver<SessionEvent>) -> WaitOn<'a> {
        WaitOn {
            bell,
            watches: &[],
            lost: None,
            events,
            cancel: None,
            resign: None,
            deadline: None,
            tick: None,
        }
    }
}

/// What ended a [`wake`]: the source, by the name [`WaitOn`] gave it.
pub(crate) enum Wake {
    /// The watch at this index of `watches` fired (`Err`: its sender is gone).
    Watch(usize, Result<WatchedEvent, RecvError>),
    /// The node given as `lost` was lost.
    Lost,
    /// A session event (`Err`: the client's list of sinks is gone).
    Session(Result<SessionEvent, RecvError>),
    /// A cancel.
    Cancel,
    /// A resign (or a drop, a stop, a revocation request).
    Resign,
    /// The caller's deadline passed.
    Deadline,
    /// The tick passed before the deadline: time for a slow re-check.
    Tick,
}

/// Blocks until one of the sources of `on` is ready, and says which. A source that is ready
/// already is taken before the deadline or the tick, even one passed; when several are,
/// the first in the order of [`WaitOn`]'s fields (the watches in their order, `lost`, the
/// session, the cancel, the resign).
pub(crate) fn wake(on: WaitOn<'_>) -> Wake {
    let WaitOn { deadline, tick, .. } = on;
    let until = match (deadline, tick) {
        (Some(d), Some(t)) => Some(d.min(t)),
        (d, t) => d.or(t),
    };
    loop {
        // Rings from here on end the sleep below, so a send after the look is not missed.
        let mark = on.bell.mark();
        if let Some(w) = ready(&on) {
            return w;
        }
        if !on.bell.wait_past(mark, until) {
            // The tick, unless the deadline has come too.
            if tick.is_some() && deadline.is_none_or(|d| Instant::now() < d) {
                return Wake::Tick;
            }
            return Wake::Deadline;
        }
    }
}

/// The first source with something to take (a message, or its sender gone), taken.
fn ready(on: &WaitOn<'_>) -> Option<Wake> {
    for (i, w) in on.watches.iter().enumerate() {
        if let Some(r) = taken(w) {
            return Some(Wake::Watch(i, r));
        }
    }
    if on.lost.and_then(taken).is_some() {
        return Some(Wake::Lost);
    }
    if let Some(r) = taken(on.events) {
        return Some(Wake::Session(r));
    }
    if on.cancel.and_then(taken).is_some() {
        return Some(Wake::Cancel);
    }
    on.resign.and_then(taken).map(|_| Wake::Resign)
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
        let (rtx, resign) = crossbeam_channel::unbounded();
        let bell = Bell::default();
        let wait = || {
            wake(WaitOn {
                watches: &[&w1, &w0],
                lost: Some(&lost),
                cancel: Some(&cancel),
                resign: Some(&resign),
                deadline: far,
                tick: far,
                ..WaitOn::new(&bell, &events)
            })
        };
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
        rtx.send(()).unwrap();
        assert!(matches!(wait(), Wake::Resign));
        // Several ready: the first in the order of the fields.
        rtx.send(()).unwrap();
        ctx.send(()).unwrap();
        etx.send(SessionEvent::Closed).unwrap();
        ltx.send(()).unwrap();
        assert!(matches!(wait(), Wake::Lost));
        assert!(matches!(wait(), Wake::Session(Ok(SessionEvent::Closed))));
        assert!(matches!(wait(), Wake::Cancel));
        assert!(matches!(wait(), Wake::Resign));
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
        let wait = |deadline, tick| {
            wake(WaitOn {
                cancel: Some(&cancel),
                deadline,
                tick,
                ..WaitOn::new(&bell, &events)
            })
        };
        assert!(matches!(wait(past, later), Wake::Deadline));
        assert!(matches!(wait(past, None), Wake::Deadline));
        assert!(matches!(wait(later, past), Wake::Tick));
        assert!(matches!(wait(None, past), Wake::Tick));
        // A source that is ready wins over a deadline passed.
        let (ctx, cancel) = crossbeam_channel::unbounded();
        ctx.send(()).unwrap();
        assert!(matches!(
            wake(WaitOn {
                cancel: Some(&cancel),
                deadline: past,
                ..WaitOn::new(&bell, &events)
            }),
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
            wake(WaitOn {
                watches: &[&w0],
                cancel: Some(&cancel),
                ..WaitOn::new(&bell, &events)
            }),
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
            let woke = wake(WaitOn {
                watches: &[&w1],
                cancel: Some(&cancel),
                tick,
                ..WaitOn::new(&bell, &events)
            });
            assert!(
                matches!(woke, Wake::Watch(0, Err(_))),
                "not told the sender went"
            );
            t.join().unwrap();
        }
    }
}
