//! The waiter's decisions without their I/O, shared with the model checker's model of the
//! queue: what a listing says to our node ([`listed`], [`View::of`]), what the watches a
//! waiter keeps say once armed and when one fires (the bookkeeping of [`Watches`], over any
//! kind of watch: [`Slot`]), and the verdicts on them ([`after_arm`], [`on_watch`]; what
//! a watch that fired says, [`Fired`], is the wake-up rule's, `attempt.rs`). The waiter (`waiter.rs`) does the I/O around them; the model calls the same
//! functions on its own state.

use crate::error::Result;
use crate::queue::attempt::Fired;
use crate::queue::names;
use crate::queue::rules::Rule;

/// The watches a waiter waits on, by their index in its wait's list
/// ([`WaitOn::watches`](crate::queue::wake::WaitOn::watches)).
pub(in crate::queue) const BLOCKER: usize = 0;
pub(in crate::queue) const NEXT: usize = 1;
pub(in crate::queue) const OWN: usize = 2;

/// What a listing says to our node (step 2).
#[derive(Debug)]
pub(in crate::queue) enum Listed {
    /// Our node is not in it: deleted by someone, or gone with its session.
    Vanished,
    /// Our node holds, with this many nodes ahead of it.
    Holds(usize),
    /// Our node waits, with this many nodes ahead of it, in this view.
    Waits(usize, View),
}

/// Step 2: the listing `names` of `dir`, ordered, and the `rule`'s verdict on it for our
/// node named `me`. An error names a node no lock recipe made.
pub(in crate::queue) fn listed<'n>(
    dir: &str,
    rule: Rule,
    names: impl IntoIterator<Item = &'n str>,
    me: &str,
) -> Result<Listed> {
    let q = names::order_upto(dir, names, me)?;
    // Only nodes up to ours were kept: ours is the last, if it is there.
    let Some(pos) = q.iter().rposition(|x| x.name == me) else {
        return Ok(Listed::Vanished);
    };
    Ok(match View::of(dir, rule, q, pos) {
        None => Listed::Holds(pos),
        Some(v) => Listed::Waits(pos, v),
    })
}

/// What a waiter does next, as decided by [`after_arm`] and [`on_watch`]: the decisions
/// of steps 3 to 5 without their I/O, shared with the model checker's model of the queue.
pub(in crate::queue) enum Then {
    /// Wait on the armed watches.
    Wait,
    /// Our node heads the queue: take it (after `Waiter::grant`'s last checks).
    Grant,
    /// List the directory again.
    List,
    /// Arm the view's watches again (a watch fired on a data change).
    Arm,
    /// Our own node is gone: start over.
    Vanished,
    /// The node that would block us next went, and nothing else can: wait on, in the view
    /// [`View::nearer`] makes (our blocker's deletion lets us in), without listing again.
    Nearer,
}

/// Step 3's verdict once the watches of `v` are armed: whether our own node was found
/// gone (`own_gone`), whether any watched node was (`any_gone`), and whether an event
/// waits on the watch of our own node (`own_heard`).
pub(in crate::queue) fn after_arm<K>(
    v: &View<K>,
    own_gone: bool,
    any_gone: bool,
    own_heard: bool,
) -> Then {
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

/// Step 5's verdict on what the watch at index `which` (`BLOCKER`, `NEXT`, `OWN`) of view
/// `v` said when it fired (`fired`), with `own_heard` saying whether an event waits on our
/// own node's.
pub(in crate::queue) fn on_watch<K>(
    fired: Fired,
    which: usize,
    v: &View<K>,
    own_heard: bool,
) -> Then {
    match (fired, which) {
        // Our blocker went. Unless our own node was deleted before it (that event
        // would have come first: one session's notifications come in order).
        (Fired::Deleted, BLOCKER) if v.grant_when_gone && !own_heard => Then::Grant,
        // Our own node, deleted by someone else: we start over.
        (Fired::Deleted, OWN) => Then::Vanished,
        // The node ahead of our blocker went, and the listing had nothing else that could
        // block us behind our blocker: whether it holds now or gave up, our blocker is the
        // last node ahead that can (nodes only join behind us), and a listing would tell
        // us only that.
        (Fired::Deleted, NEXT) if v.next_is_last => Then::Nearer,
        // Our blocker went, and someone else may be ahead; or the node ahead of our
        // blocker went: our blocker holds now, or the node gave up. Either way, list
        // again while our blocker is still there (its watch is kept), so that its
        // deletion finds us knowing whether we are next.
        (Fired::Deleted, _) => Then::List,
        (Fired::Changed, _) => Then::Arm,
    }
}

/// What a waiter keeps from its last listing: its nodes named by path (`View<String>`, the
/// library's) or otherwise (the model checker's, by sequence number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(in crate::queue) struct View<K = String> {
    /// The node we wait for.
    pub(in crate::queue) blocker: K,
    /// Whether `blocker`'s deletion lets us in without listing again: the rule finds no
    /// other blocker in this listing once `blocker` is struck out. Nodes only ever join
    /// behind us, so the nodes ahead of us from now on are a subset of this listing's, and
    /// a rule that finds no blocker among them finds none later either.
    pub(in crate::queue) grant_when_gone: bool,
    /// Otherwise, the node that blocks us once `blocker` is gone, by the same rule (for a
    /// mutex or an election, the node two places ahead of ours; for a reader, the writer
    /// before the one it waits for). When it goes (our blocker now holds, or it gave up,
    /// timed out, expired or was deleted), we list again at once, during our blocker's
    /// turn: so when our blocker goes we normally know already that we are next, and hold
    /// on its notification alone.
    pub(in crate::queue) next: Option<K>,
    /// Whether, with `next` gone too, the rule finds no other blocker in this listing once
    /// `blocker` is struck out: then `next`'s deletion makes `blocker`'s a grant, with no
    /// listing in between ([`View::nearer`]). For a mutex or an election: we are third in
    /// line.
    pub(in crate::queue) next_is_last: bool,
}

impl<K: Clone> View<K> {
    /// The nodes a waiter watches in this view: the blocker, the next node, and its own
    /// node `own`.
    pub(in crate::queue) fn wants(&self, own: K) -> Vec<K> {
        std::iter::once(self.blocker.clone())
            .chain(self.next.clone())
            .chain(std::iter::once(own))
            .collect()
    }
}

impl<K> View<K> {
    /// The node of the watch at index `which` (`BLOCKER`, `NEXT`, `OWN`; our own node is
    /// `own`).
    pub(in crate::queue) fn watched<'k>(&'k self, which: usize, own: &'k K) -> Option<&'k K> {
        match which {
            BLOCKER => Some(&self.blocker),
            NEXT => self.next.as_ref(),
            _ => Some(own),
        }
    }

    /// The same view, its nodes named by `f`.
    #[cfg(test)]
    pub(in crate::queue) fn map<L>(self, f: impl Fn(K) -> L) -> View<L> {
        View {
            blocker: f(self.blocker),
            grant_when_gone: self.grant_when_gone,
            next: self.next.map(f),
            next_is_last: self.next_is_last,
        }
    }

    /// The view once `next` is gone, if [`next_is_last`](View::next_is_last): the same
    /// blocker, whose deletion now lets us in.
    pub(in crate::queue) fn nearer(self) -> View<K> {
        View {
            blocker: self.blocker,
            grant_when_gone: true,
            next: None,
            next_is_last: false,
        }
    }
}

impl View {
    /// What a listing `queue` (ordered) says to the node at `me`; `None`: it holds.
    pub(in crate::queue) fn of<N: AsRef<str>>(
        dir: &str,
        rule: Rule,
        mut queue: Vec<names::Contender<N>>,
        me: usize,
    ) -> Option<View> {
        let b = rule.blocker(&queue, me)?;
        let blocker = queue.remove(b).name;
        // The blocker is always ahead of us: without it, we are one place further up.
        let then = rule.blocker(&queue, me - 1);
        let next = then.map(|i| queue.remove(i).name);
        // So is the next node: without both, one place more.
        let next_is_last = next.is_some() && rule.blocker(&queue, me - 2).is_none();
        Some(View {
            blocker: names::child(dir, blocker.as_ref()),
            grant_when_gone: then.is_none(),
            next: next.map(|n| names::child(dir, n.as_ref())),
            next_is_last,
        })
    }
}

/// One watch as a waiter keeps it: the library's is its event's receiver, the model
/// checker's what the model's connection delivered to it.
pub(in crate::queue) trait Slot {
    /// Whether an event came on it that is not taken yet.
    fn heard(&self) -> bool;
    /// Takes the event that came on it, if one did: `Some(true)` if it says the node was
    /// deleted.
    fn take(&self) -> Option<bool>;
}

/// The data watches a waiter holds (at most three: its blocker, the node before it, and its
/// own node), by node, kept across listings while unspent. A watch armed before a listing
/// and not yet fired is still armed when the listing is taken (ZooKeeper delivers a watch's
/// event before the reply to any later request of the session), so its node's deletion
/// after the listing is still ours to hear.
///
/// The watch on our own node tells a deletion of it by someone else apart before a grant
/// that lists nothing: without it, a waiter whose node was deleted would take its turn
/// with a guard that is lost one round trip later, beside a waiter behind it that took
/// the same turn.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(in crate::queue) struct Watches<K, W> {
    /// Our own node: fixed for the waiter's life, so no caller names it wrong.
    own: K,
    list: Vec<(K, W)>,
}

/// No node yet (the model checker's idle process).
#[cfg(test)]
impl<K: Default, W> Default for Watches<K, W> {
    fn default() -> Self {
        Watches::new(K::default())
    }
}

impl<K, W> Watches<K, W> {
    /// The watches of the waiter of our node `own`: none armed yet.
    pub(in crate::queue) fn new(own: K) -> Watches<K, W> {
        Watches {
            own,
            list: Vec::new(),
        }
    }
}

impl<K: PartialEq + Clone, W: Slot> Watches<K, W> {
    /// Step 3's bookkeeping before its round trip, for the nodes view `v` wants
    /// ([`View::wants`], with our own node): forgets the watches of other nodes; a kept watch whose
    /// event has come (but was not taken) is spent, and if the event says the node was
    /// deleted, the node is gone: no need to ask (the common case of a listing answered
    /// just before our blocker's deletion, whose notification then came while we read the
    /// listing); any other event, it is armed again. Returns the nodes gone and the nodes
    /// to arm.
    pub(in crate::queue) fn keep(&mut self, v: &View<K>) -> (Vec<K>, Vec<K>) {
        let want = v.wants(self.own.clone());
        let mut gone_at = Vec::new();
        self.list.retain(|(node, w)| {
            let Some(i) = want.iter().position(|x| x == node) else {
                return false;
            };
            match w.take() {
                None => true,
                Some(deleted) => {
                    if deleted {
                        gone_at.push(i);
                    }
                    false
                }
            }
        });
        let (mut gone, mut missing) = (Vec::new(), Vec::new());
        for (i, node) in want.into_iter().enumerate() {
            if gone_at.contains(&i) {
                gone.push(node);
            } else if !self.list.iter().any(|(k, _)| *k == node) {
                missing.push(node);
            }
        }
        (gone, missing)
    }

    /// A watch on `node` was armed.
    pub(in crate::queue) fn armed(&mut self, node: K, w: W) {
        self.list.push((node, w));
    }

    /// The watch on `node`, if one is kept.
    pub(in crate::queue) fn get<Q: ?Sized>(&self, node: &Q) -> Option<&W>
    where
        K: PartialEq<Q>,
    {
        self.list.iter().find(|(k, _)| k == node).map(|(_, w)| w)
    }

    /// The watch on `node` fired, or is not wanted: forgotten (and returned).
    pub(in crate::queue) fn spent(&mut self, node: &K) -> Option<W> {
        let i = self.list.iter().position(|(k, _)| k == node)?;
        Some(self.list.remove(i).1)
    }

    /// The watch on `node`, to deliver its event (the model checker's connection).
    #[cfg(test)]
    pub(in crate::queue) fn get_mut(&mut self, node: &K) -> Option<&mut W> {
        self.list
            .iter_mut()
            .find(|(k, _)| k == node)
            .map(|(_, w)| w)
    }

    /// Whether an event waits on the watch of our own node.
    fn own_heard(&self) -> bool {
        self.get(&self.own).is_some_and(Slot::heard)
    }

    /// Step 3's verdict ([`after_arm`]) once the watches of `v` are armed, these nodes
    /// found `gone`.
    pub(in crate::queue) fn after_arm(&self, v: &View<K>, gone: &[K]) -> Then {
        after_arm(
            v,
            gone.contains(&self.own),
            !gone.is_empty(),
            self.own_heard(),
        )
    }

    /// Step 5's verdict ([`on_watch`]) on what the watch at index `which` of view `v`
    /// said (`fired`): that watch is spent (forgotten) first.
    pub(in crate::queue) fn on_watch(&mut self, fired: Fired, which: usize, v: &View<K>) -> Then {
        if let Some(node) = v.watched(which, &self.own).cloned() {
            self.spent(&node);
        }
        on_watch(fired, which, v, self.own_heard())
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

    /// Third in line (nothing ahead but the blocker and the next node), the next node's
    /// deletion leaves the blocker the last that can block: `next_is_last`. Further back,
    /// or with another writer ahead of a reader's two, it does not.
    #[test]
    fn the_next_nodes_deletion_leaves_the_blocker_last_only_when_nothing_else_is_ahead() {
        let last = |rule, kinds, me| View::of("/d", rule, q(kinds), me).map(|v| v.next_is_last);
        assert_eq!(last(Rule::Exclusive, "ww", 1), Some(false), "no next node");
        assert_eq!(last(Rule::Exclusive, "www", 2), Some(true));
        assert_eq!(last(Rule::Exclusive, "rrw", 2), Some(true));
        assert_eq!(last(Rule::Exclusive, "wwww", 3), Some(false));
        assert_eq!(last(Rule::Read, "wrrwrr", 5), Some(true));
        assert_eq!(last(Rule::Read, "wwrwr", 4), Some(false));
        assert_eq!(last(Rule::ReadWrite, "wrwr", 3), Some(true));
        assert_eq!(last(Rule::ReadWrite, "wwwr", 3), Some(false));
    }

    #[test]
    fn the_next_nodes_deletion_waits_on_nearer_when_it_was_last_and_lists_when_not() {
        let v = View {
            blocker: 2,
            grant_when_gone: false,
            next: Some(1),
            next_is_last: true,
        };
        let mut w = watches(&[(1, true), (2, false), (9, false)]);
        assert!(matches!(w.on_watch(Fired::Deleted, NEXT, &v), Then::Nearer));
        assert!(w.get(&1).is_none(), "the next node's watch is spent");
        let near = v.nearer();
        assert_eq!(near, fast(2));
        // Then the blocker's deletion lets us in, unless our own node went first.
        let mut w = watches(&[(2, true), (9, false)]);
        assert!(matches!(
            w.on_watch(Fired::Deleted, BLOCKER, &near),
            Then::Grant
        ));
        let mut w = watches(&[(2, true), (9, true)]);
        assert!(matches!(
            w.on_watch(Fired::Deleted, BLOCKER, &near),
            Then::List
        ));
        // Not last: list again.
        let v = View {
            next_is_last: false,
            ..v
        };
        let mut w = watches(&[(1, true), (2, false), (9, false)]);
        assert!(matches!(w.on_watch(Fired::Deleted, NEXT, &v), Then::List));
    }

    /// A watch in these tests: whether a deletion came on it.
    #[derive(Debug, Clone, Copy)]
    struct Came(bool);

    impl Slot for Came {
        fn heard(&self) -> bool {
            self.0
        }
        fn take(&self) -> Option<bool> {
            self.0.then_some(true)
        }
    }

    /// The watches of our node 9.
    fn watches(w: &[(u8, bool)]) -> Watches<u8, Came> {
        let mut out = Watches::new(9);
        for &(k, came) in w {
            out.armed(k, Came(came));
        }
        out
    }

    fn fast(blocker: u8) -> View<u8> {
        View {
            blocker,
            grant_when_gone: true,
            next: None,
            next_is_last: false,
        }
    }

    #[test]
    fn keeping_watches_forgets_the_unwanted_spends_the_fired_and_asks_for_the_rest() {
        // 1 fired (gone), 2 armed and kept, 5 no longer wanted; our own 9 not watched yet.
        let mut w = watches(&[(1, true), (2, false), (5, false)]);
        let v = View {
            blocker: 1,
            grant_when_gone: false,
            next: Some(2),
            next_is_last: false,
        };
        let (gone, missing) = w.keep(&v);
        assert_eq!((gone, missing), (vec![1], vec![9]));
        assert!(w.get(&2).is_some());
        assert!(w.get(&1).is_none() && w.get(&5).is_none());
    }

    #[test]
    fn a_blockers_deletion_grants_on_the_fast_path_unless_our_own_node_went_first() {
        let v = fast(1);
        let mut w = watches(&[(1, true), (9, false)]);
        assert!(matches!(
            w.on_watch(Fired::Deleted, BLOCKER, &v),
            Then::Grant
        ));
        // The blocker's watch is spent.
        assert!(w.get(&1).is_none());
        let mut w = watches(&[(1, true), (9, true)]);
        assert!(matches!(
            w.on_watch(Fired::Deleted, BLOCKER, &v),
            Then::List
        ));
        let mut w = watches(&[(9, true)]);
        assert!(matches!(
            w.on_watch(Fired::Deleted, OWN, &v),
            Then::Vanished
        ));
    }

    #[test]
    fn armed_watches_say_gone_blockers_grant_and_a_gone_own_node_vanishes() {
        let v = fast(1);
        assert!(matches!(
            watches(&[(9, false)]).after_arm(&v, &[1]),
            Then::Grant
        ));
        assert!(matches!(
            watches(&[(9, true)]).after_arm(&v, &[1]),
            Then::List
        ));
        assert!(matches!(
            watches(&[(1, false)]).after_arm(&v, &[9]),
            Then::Vanished
        ));
        assert!(matches!(
            watches(&[(1, false), (9, false)]).after_arm(&v, &[]),
            Then::Wait
        ));
    }

    #[test]
    fn a_listing_without_our_node_says_it_vanished() -> Result<()> {
        let names = ["lock-0000000001", "lock-0000000003"];
        assert!(matches!(
            listed("/d", Rule::Exclusive, names, "lock-0000000002")?,
            Listed::Vanished
        ));
        assert!(matches!(
            listed("/d", Rule::Exclusive, names, "lock-0000000001")?,
            Listed::Holds(0)
        ));
        assert!(matches!(
            listed("/d", Rule::Exclusive, names, "lock-0000000003")?,
            Listed::Waits(
                1,
                View {
                    grant_when_gone: true,
                    ..
                }
            )
        ));
        Ok(())
    }
}
