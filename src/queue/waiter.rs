//! Phase 2 of an attempt (steps 2 to 5 of the algorithm in `acquire.rs`): a waiter whose node
//! is queued lists, arms its watches, and waits, until it holds or the attempt ends. Each
//! step returns the next as a [`Step`]; [`Waiter::run`] drives them.

use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

pub(super) mod decide;

use decide::{listed, Listed, Slot, Then, View, Watches, BLOCKER};

use super::attempt::{Attempt, Fired, Next, Spec, Wait, Woke};
use super::enqueue::{OwnNode, Queued};
use super::held::{Acquired, Handed, Seen};
use super::names;
use crate::client::{Bell, Client, Names};
use crate::client::{EventType, WatchedEvent};
use crate::error::{escape, Error, Result};

/// Where a waiter goes next.
enum Step {
    /// List the directory (again).
    List,
    /// Arm the watches a view asks for: after a listing, or after a watch fired on a data
    /// change (the node is still there, and the view still true).
    Arm(View),
    /// Wait on the armed watches of the view.
    Wait(View),
    /// The attempt ends so.
    End(Next),
}

/// One attempt after its node was made: the call's context, the node, and what it keeps
/// between steps. Between listings it keeps only what the last one told it (a [`View`]: a
/// thousand waiters would each keep a thousand names otherwise) and its unspent watches.
pub(crate) struct Waiter<'a, 's> {
    cx: &'s mut Attempt<'a>,
    spec: &'s Spec<'a>,
    at: OwnNode<'a>,
    /// Our node (also in `at` until granted).
    node: Acquired,
    /// Our node's name.
    me: String,
    /// The listing our create brought back, used by the first `list`.
    listing: Option<Names>,
    watching: Watching,
    /// Our node's data and stat as read when its watch was last armed (the guard takes the
    /// watch over: [`Seen`]).
    seen: Option<Seen>,
    /// How many nodes were ahead of ours at the last listing, less those heard gone since
    /// (what `QueueEvent::Position` says).
    ahead: usize,
    /// The slow re-check's period.
    tick: Duration,
    /// An election's waiter: where a leader asks it to take over (a named hand-over).
    ask: Option<Ask>,
}

/// The index of the ask's watch in a waiter's wait, after the view's (`decide::OWN`).
const ASK: usize = 3;

/// A named hand-over's ask to an election's waiter (docs/recipes.md, "Moving leadership"):
/// the leader creates the node at `path` ([`names::ask`]), the waiter answers by deleting
/// it. Its watch is an `exists` watch, armed in the view's round trip; nobody else watches
/// that path, so an ask wakes this waiter alone.
struct Ask {
    path: String,
    /// The watch while armed; `None`: to be armed in the next round.
    rx: Option<Receiver<WatchedEvent>>,
    /// The last arming found the ask there: answer it.
    asked: bool,
}

impl<'a, 's> Waiter<'a, 's> {
    /// The waiter of a queued node; `None` if the attempt has no node.
    pub(crate) fn new(
        cx: &'s mut Attempt<'a>,
        spec: &'s Spec<'a>,
        queued: Queued<'a>,
    ) -> Option<Waiter<'a, 's>> {
        let node = queued.at.node.clone()?;
        cx.reset_backoff();
        let tick = cx.client.session_timeout().max(Duration::from_secs(1));
        let me = names::base(&node.path).to_string();
        let ask = spec.place.kind().leads().then(|| Ask {
            path: names::ask(spec.dir, &me),
            rx: None,
            asked: false,
        });
        Some(Waiter {
            cx,
            spec,
            me,
            ask,
            watching: Watching::new(node.path.clone()),
            seen: None,
            ahead: 0,
            node,
            at: queued.at,
            listing: queued.listing,
            tick,
        })
    }

    /// Waits for our turn, then takes back the ask's watch if it is still armed (an
    /// `exists` watch on a path nobody creates would stay on the server, and in the client,
    /// until the session ends: one per wait). A granted waiter's goes to the guard instead
    /// ([`Handed::ask_watch`]), which takes it back when the hold ends.
    pub(crate) fn run(mut self) -> Next {
        let next = self.steps();
        if let Some(Ask {
            path, rx: Some(_), ..
        }) = &self.ask
        {
            if self.cx.client.session_id() == self.node.owner {
                // Not waited for: its answer changes nothing.
                let _ = self.cx.client.pipeline(|p| p.remove_watches(path));
            }
        }
        next
    }

    /// Every round starts with the checks (a cancel, our session, the deadline), then lists
    /// unless a view is still true, arms, and waits.
    fn steps(&mut self) -> Next {
        let mut step = Step::List;
        loop {
            let c = match self.cx.checked(Some(self.node.owner)) {
                Ok(c) => c,
                Err(end) => return end,
            };
            if let Step::List = step {
                step = self.list(&c);
            }
            if let Step::Arm(v) = step {
                step = self.arm(&c, v);
            }
            if let Step::Wait(v) = step {
                step = self.wait(&c, v);
            }
            if let Step::End(next) = step {
                return next;
            }
        }
    }

    /// A request failed: a new round after a pause, or the end ([`Attempt::failed`]: our
    /// node's session or directory gone starts over).
    fn failed(&mut self, e: Error) -> Step {
        match self.cx.failed(e, true) {
            Ok(()) => Step::List,
            Err(end) => Step::End(end),
        }
    }

    /// Our node is gone: deleted by someone, or its session ended.
    fn vanished(&mut self) -> Step {
        self.at.node = None;
        Step::End(Next::Restart)
    }

    /// Steps 1 and 2: the listing (the create's, or a new one), ordered, and the rule's
    /// verdict on it.
    fn list(&mut self, c: &Client) -> Step {
        let names = match self.listing.take() {
            Some(n) => n,
            None => match c.list(self.spec.dir) {
                Ok(n) => n,
                Err(e) => return self.failed(e),
            },
        };
        match listed(
            self.spec.dir,
            self.spec.place.rule(),
            names.iter(),
            &self.me,
        ) {
            Err(e) => Step::End(Next::Done(Err(e))),
            Ok(Listed::Vanished) => self.vanished(),
            Ok(Listed::Holds(ahead)) => {
                self.cx.position(&self.node.path, ahead);
                self.grant()
            }
            Ok(Listed::Waits(ahead, v)) => {
                self.ahead = ahead;
                self.cx.position(&self.node.path, ahead);
                match self.cx.wait {
                    Wait::Try => match self.spec.place.try_waits(c) {
                        Ok(true) => Step::Arm(v),
                        Ok(false) => Step::End(Next::Done(Ok(None))),
                        Err(e) => self.failed(e),
                    },
                    _ => Step::Arm(v),
                }
            }
        }
    }

    /// Steps 3 and 4: the watches the view asks for, in one round trip.
    fn arm(&mut self, c: &Client, v: View) -> Step {
        let armed = self.watching.arm(
            c,
            self.cx.bell(),
            &v,
            &self.node.path,
            &mut self.seen,
            self.ask.as_mut(),
        );
        let gone = match armed {
            Ok(gone) => {
                // The server answers again: the next trouble starts with a short pause.
                self.cx.reset_backoff();
                gone
            }
            Err(e) => return self.failed(e),
        };
        match self.watching.after_arm(&v, &gone) {
            Then::Vanished => self.vanished(),
            Then::Wait if self.ask.as_ref().is_some_and(|a| a.asked) => self.answer(c, v),
            Then::Wait => Step::Wait(v),
            Then::Grant => self.grant(),
            Then::List | Then::Arm | Then::Nearer => Step::List,
        }
    }

    /// Step 5: waits on the watches, the session, a cancel, the deadline and the tick; what
    /// a wake-up means is the attempt's rule ([`Woke::of`](super::attempt::Woke::of)), what
    /// a watch of ours heard the view's ([`Watching::on_watch`]).
    fn wait(&mut self, c: &Client, v: View) -> Step {
        let blocker = self.watching.receiver(&v.blocker);
        let next = v
            .next
            .as_deref()
            .map_or_else(crossbeam_channel::never, |n| self.watching.receiver(n));
        let own = self.watching.receiver(&self.node.path);
        let ask = self
            .ask
            .as_ref()
            .and_then(|a| a.rx.clone())
            .unwrap_or_else(crossbeam_channel::never);
        let tick = Some(Instant::now() + self.tick);
        let (i, fired) = loop {
            match self
                .cx
                .woke(&[&blocker, &next, &own, &ask], tick, Some(self.node.owner))
            {
                Woke::Watch(i, fired) => break (i, fired),
                Woke::Again => continue,
                Woke::List => return Step::List,
                Woke::End(end) => return Step::End(end),
            }
        };
        if i == ASK {
            return self.answer(c, v);
        }
        self.cx
            .heard_release(i == BLOCKER && fired == Fired::Deleted);
        match self.watching.on_watch(fired, i, &v) {
            Then::Grant => self.grant(),
            Then::Vanished => self.vanished(),
            Then::List => Step::List,
            Then::Arm => Step::Arm(v),
            Then::Wait => Step::Wait(v),
            Then::Nearer => {
                // One node fewer ahead than the last listing said, and no listing.
                self.ahead = self.ahead.saturating_sub(1);
                self.cx.position(&self.node.path, self.ahead);
                Step::Wait(v.nearer())
            }
        }
    }

    /// A leader asks us to take over (or its ask went): we answer by deleting the ask
    /// (gone already is fine), so the leader knows this process runs, and arm its watch
    /// again.
    fn answer(&mut self, c: &Client, v: View) -> Step {
        let Some(a) = self.ask.as_mut() else {
            return Step::Wait(v);
        };
        a.rx = None;
        a.asked = false;
        match c.delete(&a.path, None) {
            Ok(()) | Err(Error::NoNode { .. }) => Step::Arm(v),
            Err(e) if e.is_connection_error() || e == Error::SessionExpired => self.failed(e),
            Err(e) => {
                // An ask we may not delete (a node another identity put there, its parent
                // closed to our deletes) is not ours to answer: this wait stops answering
                // asks (a leader then hands over as if we were frozen) rather than fail
                // the acquire, or answer again and again.
                log::warn!(
                    "zkguard: cannot answer the hand-over ask {}: {e}; not answering asks in this wait",
                    escape(&a.path)
                );
                // Its watch, if still armed on that node, taken back (not waited for).
                let _ = c.pipeline(|p| p.remove_watches(&a.path));
                self.ask = None;
                Step::Arm(v)
            }
        }
    }

    /// Our node heads the queue: the last checks, then it is the caller's. A closing client
    /// grants nothing; a session that changed since our node was made starts over. (Our
    /// node's listing was answered within its session, and an ephemeral node only goes with
    /// its session or by an explicit delete, which a guard's own watch reports.)
    fn grant(&mut self) -> Step {
        if self.cx.client.is_closing() {
            return Step::End(Next::Done(Err(Error::Closed)));
        }
        if self.cx.client.session_id() != self.node.owner {
            return Step::End(Next::Restart);
        }
        let mut acquired = self.at.take();
        if let Some(a) = acquired.as_mut() {
            let handed = Handed {
                seen: self.seen.take(),
                // The guard takes it back, so that nothing is sent on the way to holding.
                ask_watch: self.ask.take().filter(|k| k.rx.is_some()).map(|k| k.path),
            };
            if handed.seen.is_some() || handed.ask_watch.is_some() {
                a.handed = Some(Box::new(handed));
            }
        }
        Step::End(Next::Done(Ok(acquired)))
    }
}

/// The waiter's watches: by path, each its event's receiver.
type Watching = Watches<String, Receiver<WatchedEvent>>;

impl Slot for Receiver<WatchedEvent> {
    fn heard(&self) -> bool {
        !self.is_empty()
    }

    fn take(&self) -> Option<bool> {
        self.try_recv()
            .ok()
            .map(|ev| ev.event_type == EventType::NodeDeleted)
    }
}

impl Watching {
    /// Arms a data watch on each node `v` names and on `own` (our node), each that is not
    /// watched yet, in one round trip, and forgets other watches. Returns the nodes that
    /// are gone already (no watch is left on a missing node). What our own node's arming
    /// read goes to `seen`. An election's `ask`, if its watch is spent, gets an `exists`
    /// watch in the same round trip. The watches ring `bell` (the waiter's
    /// [`Attempt::woke`]).
    fn arm(
        &mut self,
        c: &Client,
        bell: &Bell,
        v: &View,
        own: &str,
        seen: &mut Option<Seen>,
        ask: Option<&mut Ask>,
    ) -> Result<Vec<String>> {
        let (mut gone, missing) = self.keep(v);
        let ask = ask.filter(|a| a.rx.is_none());
        if missing.is_empty() && ask.is_none() {
            return Ok(gone);
        }
        let (pending, asked) = c.pipeline(|p| {
            p.ring(bell);
            let pending = missing
                .iter()
                .map(|path| p.get_data_w(path))
                .collect::<Vec<_>>();
            (pending, ask.as_ref().map(|a| p.exists_w(&a.path)))
        });
        let mut failed = None;
        for (path, p) in missing.into_iter().zip(pending) {
            match p.wait() {
                // A node ahead that no session owns never goes by itself: the queue would
                // wait on it forever. (Its watch stays armed; the error ends the attempt.)
                Ok((_, stat, _)) if stat.ephemeral_owner == 0 && path != own => {
                    failed = Some(Error::ForeignNode {
                        path: names::parent(&path).to_string(),
                        node: names::base(&path).to_string(),
                    })
                }
                Ok((data, stat, rx)) => {
                    if path == own {
                        *seen = Some(Seen { data, stat });
                    }
                    self.armed(path, rx)
                }
                Err(Error::NoNode { .. }) => gone.push(path),
                Err(e) => failed = Some(e),
            }
        }
        if let (Some(a), Some(asked)) = (ask, asked) {
            match asked.wait() {
                Ok((stat, rx)) => {
                    a.rx = Some(rx);
                    a.asked = stat.is_some();
                }
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(gone), Err)
    }

    /// The receiver of the watch on `path` (armed by [`arm`](Watching::arm)).
    fn receiver(&self, path: &str) -> Receiver<WatchedEvent> {
        self.get(path)
            .map_or_else(crossbeam_channel::never, Receiver::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: EventType) -> WatchedEvent {
        WatchedEvent {
            event_type,
            path: "/d/n0".to_string(),
        }
    }

    #[test]
    fn a_watch_receiver_says_whether_an_event_came_and_whether_it_was_a_deletion() {
        let (tx, rx) = crossbeam_channel::unbounded();
        assert!(!rx.heard());
        assert_eq!(rx.take(), None);
        tx.send(event(EventType::NodeDeleted)).unwrap();
        assert!(rx.heard());
        assert_eq!(rx.take(), Some(true));
        assert!(!rx.heard());
        tx.send(event(EventType::NodeDataChanged)).unwrap();
        assert!(rx.heard());
        assert_eq!(rx.take(), Some(false));
    }
}
