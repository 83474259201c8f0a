//! Phase 2 of an attempt (steps 2 to 5 of the algorithm in `acquire.rs`): a waiter whose node
//! is queued lists, arms its watches, and waits, until it holds or the attempt ends. Each
//! step returns the next as a [`Step`]; [`Waiter::run`] drives them.

use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::attempt::{Attempt, News, Next, Spec, Wait};
use super::enqueue::{OwnNode, Queued};
use super::held::Acquired;
use super::names;
use super::rules::Rule;
use super::wake::Wake;
use crate::client::{Client, Names};
use crate::client::{EventType, WatchedEvent};
use crate::error::{Error, Result};

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

/// The watches a waiter waits on, by their index in [`wake`](super::wake::wake)'s list.
pub(super) const BLOCKER: usize = 0;
pub(super) const NEXT: usize = 1;
pub(super) const OWN: usize = 2;

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
    /// The slow re-check's period.
    tick: Duration,
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
        Some(Waiter {
            cx,
            spec,
            me: names::base(&node.path).to_string(),
            node,
            at: queued.at,
            listing: queued.listing,
            watching: Watching::default(),
            tick,
        })
    }

    /// Waits for our turn. Every round starts with the checks (a cancel, our session, the
    /// deadline), then lists unless a view is still true, arms, and waits.
    pub(crate) fn run(mut self) -> Next {
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
                step = self.wait(v);
            }
            if let Step::End(next) = step {
                return next;
            }
        }
    }

    /// Connection trouble: a pause, then a new round.
    fn trouble(&mut self) -> Step {
        self.cx.pause();
        Step::List
    }

    /// Our node is gone: deleted by someone, or its session ended.
    fn vanished(&mut self) -> Step {
        self.at.node = None;
        Step::End(Next::Restart)
    }

    /// Steps 1 and 2: the listing (the create's, or a new one), ordered, and the rule's
    /// verdict on it.
    fn list(&mut self, c: &Client) -> Step {
        let listed = match self.listing.take() {
            Some(n) => n,
            None => match c.list(self.spec.dir) {
                Ok(n) => n,
                Err(e) if e.is_connection_error() => return self.trouble(),
                Err(Error::SessionExpired) | Err(Error::NoNode { .. }) => {
                    return Step::End(Next::Restart)
                }
                Err(e) => return Step::End(Next::Done(Err(e))),
            },
        };
        let q = match names::order_upto(self.spec.dir, listed.iter(), &self.me) {
            Ok(q) => q,
            Err(e) => return Step::End(Next::Done(Err(e))),
        };
        // Only nodes up to ours were kept: ours is the last, if it is there.
        let Some(pos) = q.iter().rposition(|x| x.name == self.me) else {
            return self.vanished();
        };
        self.cx.position(&self.node.path, pos);
        match View::of(self.spec.dir, self.spec.rule, q, pos) {
            None => self.grant(),
            Some(_) if matches!(self.cx.wait, Wait::Try) => Step::End(Next::Done(Ok(None))),
            Some(v) => Step::Arm(v),
        }
    }

    /// Steps 3 and 4: the watches the view asks for, in one round trip.
    fn arm(&mut self, c: &Client, v: View) -> Step {
        let gone = match self.watching.arm(c, &v, &self.node.path) {
            Ok(gone) => {
                // The server answers again: the next trouble starts with a short pause.
                self.cx.reset_backoff();
                gone
            }
            Err(e) if e.is_connection_error() => return self.trouble(),
            Err(Error::SessionExpired) => return Step::End(Next::Restart),
            Err(e) => return Step::End(Next::Done(Err(e))),
        };
        let own_gone = gone.contains(&self.node.path.as_str());
        let own_heard = !self.watching.receiver(&self.node.path).is_empty();
        match after_arm(&v, own_gone, !gone.is_empty(), own_heard) {
            Then::Vanished => self.vanished(),
            Then::Wait => Step::Wait(v),
            Then::Grant => self.grant(),
            Then::List | Then::Arm | Then::End(_) => Step::List,
        }
    }

    /// Step 5: waits on the watches, the session, a cancel, the deadline and the tick.
    fn wait(&mut self, v: View) -> Step {
        let blocker = self.watching.receiver(&v.blocker);
        let next = v
            .next
            .as_deref()
            .map_or_else(crossbeam_channel::never, |n| self.watching.receiver(n));
        let own = self.watching.receiver(&self.node.path);
        let tick = Some(Instant::now() + self.tick);
        loop {
            let woken = self.cx.wake(&[&blocker, &next, &own], None, tick);
            let (i, ev) = match woken {
                Wake::Watch(i, ev) => (i, ev),
                Wake::Session(ev) => match News::of(ev, self.node.owner) {
                    News::Wait => continue,
                    News::Relist => return Step::List,
                    News::Restart => return Step::End(Next::Restart),
                    News::Closed => return Step::End(Next::Done(Err(Error::Closed))),
                },
                Wake::Cancel => return Step::End(self.cx.cancelled()),
                Wake::Deadline => return Step::End(Next::Done(Ok(None))),
                Wake::Tick | Wake::Lost => return Step::List, // the slow re-check
            };
            let path = match i {
                BLOCKER => v.blocker.as_str(),
                NEXT => v.next.as_deref().unwrap_or_default(),
                _ => self.node.path.as_str(),
            };
            self.watching.spent(path);
            let deleted = matches!(&ev, Ok(e) if e.event_type == EventType::NodeDeleted);
            self.cx.heard_release(i == BLOCKER && deleted);
            return match on_watch(heard(ev), i, &v, !own.is_empty()) {
                Then::Grant => self.grant(),
                Then::Vanished => self.vanished(),
                Then::List => Step::List,
                Then::Arm => Step::Arm(v),
                Then::Wait => Step::Wait(v),
                Then::End(end) => Step::End(end),
            };
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
        Step::End(Next::Done(Ok(self.at.take())))
    }
}

/// What a waiter does next, as decided by [`after_arm`] and [`on_watch`]: the decisions
/// of steps 3 to 5 without their I/O, shared with the model checker's model of the queue.
pub(super) enum Then {
    /// Wait on the armed watches.
    Wait,
    /// Our node heads the queue: take it (after [`Waiter::grant`]'s last checks).
    Grant,
    /// List the directory again.
    List,
    /// Arm the view's watches again (a watch fired on a data change).
    Arm,
    /// Our own node is gone: start over.
    Vanished,
    /// The attempt ends so.
    End(Next),
}

/// Step 3's verdict once the watches of `v` are armed: whether our own node was found
/// gone (`own_gone`), whether any watched node was (`any_gone`), and whether an event
/// waits on the watch of our own node (`own_heard`).
pub(super) fn after_arm(v: &View, own_gone: bool, any_gone: bool, own_heard: bool) -> Then {
    if own_gone {
        // Deleted by someone else while we waited.
        return Then::Vanished;
    }
    if !any_gone {
        return Then::Wait;
    }
    // The blocker is gone already and nothing else blocks us: ours, unless our own
    // node went before it (its event would have come before the answer).
    if v.grant_when_gone && !own_heard {
        return Then::Grant;
    }
    Then::List
}

/// Step 5's verdict on an event `heard` on the watch at index `which` (`BLOCKER`, `NEXT`,
/// `OWN`) of view `v`, with `own_heard` saying whether an event waits on our own node's.
pub(super) fn on_watch(heard: Heard, which: usize, v: &View, own_heard: bool) -> Then {
    match (heard, which) {
        // Our blocker went. Unless our own node was deleted before it (that event
        // would have come first: one session's notifications come in order).
        (Heard::Deleted, BLOCKER) if v.grant_when_gone && !own_heard => Then::Grant,
        // Our own node, deleted by someone else: we start over.
        (Heard::Deleted, OWN) => Then::Vanished,
        // Our blocker went, and someone else may be ahead; or the node ahead of our
        // blocker went: our blocker holds now, or the node gave up. Either way, list
        // again while our blocker is still there (its watch is kept), so that its
        // deletion finds us knowing whether we are next.
        (Heard::Deleted, _) => Then::List,
        (Heard::Changed, _) => Then::Arm,
        (Heard::End(end), _) => Then::End(end),
    }
}

/// What a waiter makes of an event on one of its watches.
pub(super) enum Heard {
    /// The node was deleted.
    Deleted,
    /// The node is still there (its data changed: a revocation request, say); the watch
    /// is spent, so it is armed again.
    Changed,
    /// The client was closed or the session lost: the attempt ends so.
    End(Next),
}

pub(super) fn heard(ev: Result<WatchedEvent, crossbeam_channel::RecvError>) -> Heard {
    match ev.map(|e| e.event_type) {
        Ok(EventType::NodeDeleted) => Heard::Deleted,
        Ok(EventType::Closed) => Heard::End(Next::Done(Err(Error::Closed))),
        Ok(EventType::SessionLost) => Heard::End(Next::Restart),
        _ => Heard::Changed,
    }
}

/// What a waiter keeps from its last listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct View {
    /// The node we wait for (a path).
    pub(super) blocker: String,
    /// Whether `blocker`'s deletion lets us in without listing again: the rule finds no
    /// other blocker in this listing once `blocker` is struck out. Nodes only ever join
    /// behind us, so the nodes ahead of us from now on are a subset of this listing's, and
    /// a rule that finds no blocker among them finds none later either.
    pub(super) grant_when_gone: bool,
    /// Otherwise, the node that blocks us once `blocker` is gone, by the same rule (for a
    /// mutex or an election, the node two places ahead of ours; for a reader, the writer
    /// before the one it waits for). When it goes (our blocker now holds, or it gave up,
    /// timed out, expired or was deleted), we list again at once, during our blocker's
    /// turn: so when our blocker goes we normally know already that we are next, and hold
    /// on its notification alone.
    pub(super) next: Option<String>,
}

impl View {
    /// What a listing `queue` (ordered) says to the node at `me`; `None`: it holds.
    pub(super) fn of<N: AsRef<str>>(
        dir: &str,
        rule: Rule,
        mut queue: Vec<names::Contender<N>>,
        me: usize,
    ) -> Option<View> {
        let b = rule.blocker(&queue, me)?;
        let blocker = queue.remove(b).name;
        // The blocker is always ahead of us: without it, we are one place further up.
        let then = rule.blocker(&queue, me - 1);
        let next = then.map(|i| names::child(dir, queue[i].name.as_ref()));
        Some(View {
            blocker: names::child(dir, blocker.as_ref()),
            grant_when_gone: then.is_none(),
            next,
        })
    }
}

/// The data watches a waiter holds (at most three: its blocker, the node before it, and its
/// own node), kept across listings while unspent. A watch armed before a listing and not
/// yet fired is still armed when the listing is taken (ZooKeeper delivers a watch's event
/// before the reply to any later request of the session), so its node's deletion after
/// the listing is still ours to hear.
///
/// The watch on our own node tells a deletion of it by someone else apart before a grant
/// that lists nothing: without it, a waiter whose node was deleted would take its turn
/// with a guard that is lost one round trip later, beside a waiter behind it that took
/// the same turn.
#[derive(Default)]
struct Watching(Vec<(String, Receiver<WatchedEvent>)>);

impl Watching {
    /// Arms a data watch on each node `v` names and on `own` (our node), each that is not
    /// watched yet, in one round trip, and forgets other watches. Returns the nodes that
    /// are gone already (no watch is left on a missing node).
    fn arm<'v>(&mut self, c: &Client, v: &'v View, own: &'v str) -> Result<Vec<&'v str>> {
        let want: Vec<&str> = std::iter::once(v.blocker.as_str())
            .chain(v.next.as_deref())
            .chain(std::iter::once(own))
            .collect();
        // A watch whose event has come (but was not taken) is spent. If the event says the
        // node was deleted, it is gone: no need to ask (this is the common case of a
        // listing answered just before our blocker's deletion, whose notification then
        // came while we read the listing). Any other event: arm it again.
        let mut gone: Vec<&'v str> = Vec::new();
        self.0.retain(|(path, rx)| {
            let Some(w) = want.iter().find(|w| **w == path.as_str()) else {
                return false;
            };
            match rx.try_recv() {
                Err(_) => true,
                Ok(ev) if ev.event_type == EventType::NodeDeleted => {
                    gone.push(w);
                    false
                }
                Ok(_) => false,
            }
        });
        let missing: Vec<&str> = want
            .into_iter()
            .filter(|w| !gone.contains(w) && !self.0.iter().any(|(path, _)| path == w))
            .collect();
        if missing.is_empty() {
            return Ok(gone);
        }
        let pending = c.pipeline(|p| {
            missing
                .iter()
                .map(|path| p.get_data_w(path))
                .collect::<Vec<_>>()
        });
        let mut failed = None;
        for (path, p) in missing.into_iter().zip(pending) {
            match p.wait() {
                // A node ahead that no session owns never goes by itself: the queue would
                // wait on it forever. (Its watch stays armed; the error ends the attempt.)
                Ok((_, stat, _)) if stat.ephemeral_owner == 0 && path != own => {
                    failed = Some(Error::ForeignNode {
                        path: names::parent(path).to_string(),
                        node: names::base(path).to_string(),
                    })
                }
                Ok((_, _, rx)) => self.0.push((path.to_string(), rx)),
                Err(Error::NoNode { .. }) => gone.push(path),
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(gone), Err)
    }

    /// The receiver of the watch on `path` (armed by [`arm`](Watching::arm)).
    fn receiver(&self, path: &str) -> Receiver<WatchedEvent> {
        self.0
            .iter()
            .find(|(p, _)| p == path)
            .map_or_else(crossbeam_channel::never, |(_, rx)| rx.clone())
    }

    /// The watch on `path` fired: forget it.
    fn spent(&mut self, path: &str) {
        self.0.retain(|(p, _)| p != path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::names::tests::queue as q;

    /// The blocker, whether its deletion lets `me` in, and the next node watched.
    fn view(rule: Rule, kinds: &str, me: usize) -> Option<(String, bool, Option<String>)> {
        View::of("/d", rule, q(kinds), me).map(|v| (v.blocker, v.grant_when_gone, v.next))
    }

    fn some(blocker: &str, next: Option<&str>) -> Option<(String, bool, Option<String>)> {
        Some((
            blocker.to_string(),
            next.is_none(),
            next.map(str::to_string),
        ))
    }

    #[test]
    fn an_exclusive_waiter_watches_its_predecessor_and_the_node_before_it() {
        assert_eq!(view(Rule::Exclusive, "w", 0), None);
        // Right behind the head: the head's deletion lets it in.
        assert_eq!(view(Rule::Exclusive, "ww", 1), some("/d/n0", None));
        assert_eq!(
            view(Rule::Exclusive, "www", 2),
            some("/d/n1", Some("/d/n0"))
        );
        assert_eq!(
            view(Rule::Exclusive, "wwwww", 4),
            some("/d/n3", Some("/d/n2"))
        );
        // Readers ahead block a writer like writers do.
        assert_eq!(
            view(Rule::Exclusive, "rrw", 2),
            some("/d/n1", Some("/d/n0"))
        );
    }

    #[test]
    fn a_reader_watches_the_nearest_writer_and_the_writer_before_it() {
        assert_eq!(view(Rule::Read, "rrr", 2), None);
        assert_eq!(view(Rule::Read, "wrr", 2), some("/d/n0", None));
        assert_eq!(view(Rule::Read, "rwrr", 3), some("/d/n1", None));
        assert_eq!(view(Rule::Read, "wrrwrr", 5), some("/d/n3", Some("/d/n0")));
        assert_eq!(view(Rule::Read, "wwr", 2), some("/d/n1", Some("/d/n0")));
    }
}
