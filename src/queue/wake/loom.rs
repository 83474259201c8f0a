//! `wake` model-checked with loom (`--cfg loom`, see `src/sync.rs`): the waiter in `wake`
//! and a source's ringing sender on another thread, every interleaving of the bell's lock,
//! unlock, wait and notify. `wake` is given no deadline and no tick, so a wake-up lost is
//! loom's "deadlock" (the waiter asleep on the bell, the sender done).

use crossbeam_channel::Receiver;
use loom::thread;

use super::{wake, WaitOn, Wake};
use crate::client::{Bell, EventType, Ringing, SessionEvent, WatchedEvent};

fn event() -> WatchedEvent {
    WatchedEvent {
        event_type: EventType::NodeDeleted,
        path: "/x".into(),
    }
}

/// The sources of one wait: a watch, session events, a cancel; the senders of the last two
/// kept by the test, silent.
struct Sources {
    bell: Bell,
    events: Receiver<SessionEvent>,
    cancel: Receiver<()>,
    _quiet: (
        crossbeam_channel::Sender<SessionEvent>,
        crossbeam_channel::Sender<()>,
    ),
}

fn sources() -> Sources {
    let (etx, events) = crossbeam_channel::unbounded();
    let (ctx, cancel) = crossbeam_channel::unbounded();
    Sources {
        bell: Bell::default(),
        events,
        cancel,
        _quiet: (etx, ctx),
    }
}

/// A watch fired on another thread (as the connection thread fires one) after the wait
/// began, or before, or while it looks: the wait always ends with it. The sender is kept
/// alive past the wait, so only the send's own ring can end it.
#[test]
fn loom_a_watch_fired_from_another_thread_ends_the_wait() {
    loom::model(|| {
        let s = sources();
        let (wtx, w0) = crossbeam_channel::unbounded();
        let wtx = Ringing::new(wtx, Some(s.bell.clone()));
        let fire = thread::spawn(move || {
            wtx.send(event()).expect("the wait's receiver is there");
            wtx
        });
        let woke = wake(WaitOn {
            watches: &[&w0],
            cancel: Some(&s.cancel),
            ..WaitOn::new(&s.bell, &s.events)
        });
        assert!(matches!(woke, Wake::Watch(0, Ok(_))), "told of the watch");
        drop(fire.join().expect("the watch's thread ends"));
    });
}

/// A cancel from another thread ends the wait, and a source's sender dropped there is heard
/// as gone: with two sources, the one that rang is the one told.
#[test]
fn loom_a_cancel_or_a_sender_gone_ends_the_wait() {
    loom::model(|| {
        let s = sources();
        let (ctx, cancel) = crossbeam_channel::unbounded();
        let ctx = Ringing::new(ctx, Some(s.bell.clone()));
        let (wtx, w0) = crossbeam_channel::unbounded::<WatchedEvent>();
        let wtx = Ringing::new(wtx, Some(s.bell.clone()));
        let canceller = thread::spawn(move || {
            ctx.send(()).expect("the wait's receiver is there");
            ctx
        });
        let woke = wake(WaitOn {
            watches: &[&w0],
            cancel: Some(&cancel),
            ..WaitOn::new(&s.bell, &s.events)
        });
        assert!(matches!(woke, Wake::Cancel), "told of the cancel");
        let ctx = canceller.join().expect("the canceller ends");
        let dropper = thread::spawn(move || drop(wtx));
        let woke = wake(WaitOn {
            watches: &[&w0],
            cancel: Some(&s.cancel),
            ..WaitOn::new(&s.bell, &s.events)
        });
        assert!(
            matches!(woke, Wake::Watch(0, Err(_))),
            "told the watch's sender went"
        );
        dropper.join().expect("the dropper ends");
        drop(ctx);
    });
}

/// A leader's wait (the candidate's: its term's loss and its resign channel, no cancel, no
/// deadline): a resign from another thread ends it, and so does the loss rung there after;
/// the wait says which.
#[test]
fn loom_a_resign_or_a_loss_ends_a_leaders_wait() {
    loom::model(|| {
        let s = sources();
        let (rtx, resign) = crossbeam_channel::unbounded();
        let rtx = Ringing::new(rtx, Some(s.bell.clone()));
        let (ltx, lost) = crossbeam_channel::unbounded();
        let ltx = Ringing::new(ltx, Some(s.bell.clone()));
        let on = WaitOn {
            lost: Some(&lost),
            resign: Some(&resign),
            ..WaitOn::new(&s.bell, &s.events)
        };
        let resigner = thread::spawn(move || {
            rtx.send(()).expect("the wait's receiver is there");
            rtx
        });
        assert!(matches!(wake(on), Wake::Resign), "told of the resign");
        let rtx = resigner.join().expect("the resigner ends");
        let loser = thread::spawn(move || {
            ltx.send(()).expect("the wait's receiver is there");
            ltx
        });
        assert!(matches!(wake(on), Wake::Lost), "told of the loss");
        drop((loser.join().expect("the loser ends"), rtx));
    });
}
