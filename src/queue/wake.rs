//! The one wait of every loop that waits on ZooKeeper: the queue's waiter, the single-node
//! acquire, the semaphore's count, a retry's pause and a leader's watch all block here, for
//! whichever comes first of their watches, a lost lock, a session event, a cancel, the
//! caller's deadline and a slow tick.

use std::time::Instant;

use crossbeam_channel::{Receiver, RecvError, Select};

use crate::client::{SessionEvent, WatchedEvent};

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
/// one of them is taken at random.
pub(crate) fn wake(
    watches: &[&Receiver<WatchedEvent>],
    lost: Option<&Receiver<()>>,
    events: &Receiver<SessionEvent>,
    cancel: &Receiver<()>,
    deadline: Option<Instant>,
    tick: Option<Instant>,
) -> Wake {
    let mut sel = Select::new();
    for w in watches {
        sel.recv(w);
    }
    let lost_at = lost.map(|rx| (sel.recv(rx), rx));
    let events_at = sel.recv(events);
    sel.recv(cancel);
    let until = match (deadline, tick) {
        (Some(d), Some(t)) => Some(d.min(t)),
        (d, t) => d.or(t),
    };
    let op = match until {
        None => sel.select(),
        Some(t) => match sel.select_deadline(t) {
            Ok(op) => op,
            // The tick, unless the deadline has come too.
            Err(_) if tick.is_some() && deadline.is_none_or(|d| Instant::now() < d) => {
                return Wake::Tick
            }
            Err(_) => return Wake::Deadline,
        },
    };
    let i = op.index();
    if let Some(w) = watches.get(i) {
        return Wake::Watch(i, op.recv(w));
    }
    match lost_at {
        Some((at, rx)) if at == i => {
            let _ = op.recv(rx);
            Wake::Lost
        }
        _ if i == events_at => Wake::Session(op.recv(events)),
        _ => {
            let _ = op.recv(cancel);
            Wake::Cancel
        }
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
        let wait = || wake(&[&w1, &w0], Some(&lost), &events, &cancel, far, far);
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
        let wait = |deadline, tick| wake(&[], None, &events, &cancel, deadline, tick);
        assert!(matches!(wait(past, later), Wake::Deadline));
        assert!(matches!(wait(past, None), Wake::Deadline));
        assert!(matches!(wait(later, past), Wake::Tick));
        assert!(matches!(wait(None, past), Wake::Tick));
        // A source that is ready wins over a deadline passed.
        let (ctx, cancel) = crossbeam_channel::unbounded();
        ctx.send(()).unwrap();
        assert!(matches!(
            wake(&[], None, &events, &cancel, past, None),
            Wake::Cancel
        ));
    }
}
