//! A process's steps through the queue: step 1 (`enqueue`: create and list, a lost reply
//! recovered by uuid), steps 2 to 5 (the `Waiter`: list, arm, wait), the grant, a give-up,
//! a restart, and the guard's release and fenced write. Every decision is the library's:
//! `names::order_upto`, `View::of` (so `Rule::blocker`), `after_arm`, `on_watch`, the
//! wake-up rule `Woke::of` (with `News::of`); this file only moves the model's state between
//! them.

use super::state::{
    Dir, Doing, Ev, Flag, Held, In, MView, Modelled, Node, Recv, Reply, WStep, World,
};
use super::Queue;
use crate::client::{EventType, SessionEvent, WatchedEvent};
use crate::queue::attempt::{Next, Woke};
use crate::queue::names;
use crate::queue::rules::Rule;
use crate::queue::waiter::decide::{listed, Listed, Then, BLOCKER};
use crate::queue::wake::Wake;

/// The sequence number at the end of a path.
fn seq_of(path: &str) -> u8 {
    names::sequence(names::base(path)).expect("a node the model named") as u8
}

impl Queue {
    /// The rule process `p` queues by (a `Waiter` waits only in `Dir::Queue`: a
    /// semaphore's lease counts).
    pub(super) fn rule(&self, p: usize) -> Rule {
        let read = self.config.procs[p].read;
        self.config.recipe.place(Dir::Queue, read).rule()
    }

    fn read(&self, p: usize, dir: Dir) -> bool {
        dir == Dir::Queue && self.config.recipe == Modelled::RwLock && self.config.procs[p].read
    }

    /// An acquire call begins.
    pub(super) fn start(&self, s: &mut World, p: usize) {
        let proc = &mut s.procs[p];
        proc.events.clear();
        proc.new_attempt(Dir::Queue);
    }

    /// Step 1: the create and its listing in one write, or after a lost reply the search
    /// for our uuid (`find_by_uuid`: a node of ours of an earlier session is deleted).
    pub(super) fn enqueue(&self, s: &mut World, p: usize, dir: Dir, uuid: u8, maybe: bool) {
        s.procs[p].phase = Doing::Enqueuing {
            dir,
            uuid,
            find: maybe,
        };
        let read = self.read(p, dir);
        s.send(p, |s| {
            if !maybe {
                let seq = s.create(p, dir, uuid, read);
                return Reply::Created(seq, s.list(dir));
            }
            let sid = s.procs[p].sid;
            let mut found = None;
            for n in s.list(dir) {
                if n.proc as usize == p && n.uuid == uuid {
                    if found.is_none() && n.owner == sid {
                        found = Some(n.seq);
                    } else {
                        s.delete(n.seq);
                    }
                }
            }
            Reply::Found(found)
        });
    }

    /// Step 1's answer.
    fn enqueued(&self, s: &mut World, p: usize, dir: Dir, uuid: u8, reply: Reply) {
        let proc = &mut s.procs[p];
        let (seq, listing) = match reply {
            Reply::Created(seq, listing) => (seq, Some(listing)),
            Reply::Found(Some(seq)) => (seq, None),
            Reply::Found(None) => {
                proc.phase = Doing::Enqueue {
                    dir,
                    uuid,
                    maybe: false,
                };
                return;
            }
            _ => {
                proc.phase = Doing::Enqueue {
                    dir,
                    uuid,
                    maybe: true,
                };
                return;
            }
        };
        let owner = proc.sid;
        proc.attempt_node = Some((seq, owner));
        proc.phase = match dir {
            Dir::Queue => {
                proc.recv = Recv::new(seq);
                Doing::Waiter {
                    seq,
                    owner,
                    step: WStep::List,
                    listing,
                }
            }
            Dir::Leases => Doing::Lease {
                seq,
                owner,
                want_watch: false,
                listing,
                out: false,
                waiting: false,
            },
        };
    }

    /// The reply at the head of the inbox, taken by the step that waits for it.
    pub(super) fn answered(&self, s: &mut World, p: usize) {
        let reply = s.procs[p].reply.take().expect("a reply to a request");
        match s.procs[p].phase.clone() {
            Doing::Enqueuing { dir, uuid, .. } => self.enqueued(s, p, dir, uuid, reply),
            Doing::Waiter {
                seq, owner, step, ..
            } => match (step, reply) {
                (WStep::Listing, Reply::Listed(l)) => self.decide(s, p, seq, owner, l),
                (WStep::Arming(v), Reply::Armed(armed, gone)) => {
                    for a in armed {
                        s.procs[p].recv.armed(a, Flag(false));
                    }
                    self.armed(s, p, seq, v, &gone);
                }
                _ => self.set_step(s, p, WStep::Pause),
            },
            Doing::Lease { .. } => self.lease_answered(s, p, reply),
            Doing::Releasing => {
                let proc = &mut s.procs[p];
                let g = proc.guard.take().expect("a guard being released");
                if reply == Reply::Loss && !self.config.seeded.release_drops_failed_delete {
                    proc.janitor.push((g.seq, g.owner));
                }
                proc.phase = Doing::Idle;
                proc.left -= 1;
            }
            other => unreachable!("a reply in phase {other:?}"),
        }
    }

    /// Hands the head of the inbox on: a reply to its step, a watch event to the watches
    /// and guards that wait for it (the connection thread's dispatch).
    pub(super) fn receive(&self, s: &mut World, p: usize) {
        let m = s.procs[p].inbox.remove(0);
        let proc = &mut s.procs[p];
        match m {
            In::Reply => self.answered(s, p),
            In::Deleted(seq) => {
                if let Some(f) = proc.recv.get_mut(&seq) {
                    f.0 = true;
                }
                for g in [&mut proc.guard, &mut proc.internal].into_iter().flatten() {
                    if g.seq == seq && !g.released {
                        g.lost = true;
                    }
                }
            }
            In::Children(_) => {
                if let Some(w) = proc.lease_watch.as_mut() {
                    *w = true;
                }
            }
        }
    }

    fn set_step(&self, s: &mut World, p: usize, to: WStep) {
        if let Doing::Waiter { step, .. } = &mut s.procs[p].phase {
            *step = to;
        }
    }

    /// Steps 1 and 2 of a round (`Attempt::checked` and `Waiter::list`): our session, then
    /// the create's listing or a new one.
    pub(super) fn list(&self, s: &mut World, p: usize) {
        let Doing::Waiter { seq, owner, .. } = s.procs[p].phase else {
            unreachable!()
        };
        let Some(listing) = self.round(s, p, owner) else {
            return;
        };
        if let Some(l) = listing {
            return self.decide(s, p, seq, owner, l);
        }
        self.set_step(s, p, WStep::Listing);
        s.send(p, |s| Reply::Listed(s.list(Dir::Queue)));
    }

    /// The top of a round (`Attempt::checked`, and the lease loop's `Attempt::live`):
    /// `None` if our session changed (the attempt starts over); else the create's listing,
    /// if it is still unused.
    pub(super) fn round(&self, s: &mut World, p: usize, owner: u8) -> Option<Option<Vec<Node>>> {
        if s.procs[p].session_id() != Some(owner) {
            self.restart(s, p);
            return None;
        }
        Some(match &mut s.procs[p].phase {
            Doing::Waiter { listing, .. } | Doing::Lease { listing, .. } => listing.take(),
            _ => None,
        })
    }

    /// The rule's verdict on a listing: `waiter::listed` (`order_upto`, our place,
    /// `View::of`).
    fn decide(&self, s: &mut World, p: usize, seq: u8, owner: u8, listing: Vec<Node>) {
        let recipe = self.config.recipe;
        let names: Vec<String> = listing.iter().map(|n| n.name(recipe)).collect();
        let me = s.node_name(seq, &listing, recipe);
        let verdict = listed(
            Dir::Queue.path(),
            self.rule(p),
            names.iter().map(String::as_str),
            &me,
        )
        .expect("the model names its nodes as the recipes do");
        match verdict {
            Listed::Vanished => self.vanished(s, p),
            Listed::Holds(_) => self.grant(s, p, seq, owner),
            Listed::Waits(_, v) => {
                let mut v = v.map(|path| seq_of(&path));
                // The fast path's spec, counted here: one node ahead blocks us by kind.
                let blocking = listing
                    .iter()
                    .filter(|n| n.seq < seq && (self.rule(p) == Rule::Exclusive || !n.read))
                    .count();
                s.fast_missed |= v.grant_when_gone != (blocking == 1);
                if self.config.seeded.no_two_ahead {
                    v.grant_when_gone = true;
                }
                if self.config.seeded.next_always_last {
                    v.next_is_last = v.next.is_some();
                }
                self.arm(s, p, seq, v)
            }
        }
    }

    /// Steps 3 and 4 (`Watching::arm`): `Watches::keep` on the watches the view wants,
    /// then those not armed, in one round trip (a missing node is gone, no watch left).
    fn arm(&self, s: &mut World, p: usize, seq: u8, v: MView) {
        let proc = &mut s.procs[p];
        let (mut gone, missing) = proc.recv.keep(&v);
        if missing.is_empty() {
            return self.armed(s, p, seq, v, &gone);
        }
        let sid = proc.sid;
        self.set_step(s, p, WStep::Arming(v));
        s.send(p, |s| {
            let mut armed = Vec::new();
            for w in missing {
                if s.watch_data(sid, w) {
                    armed.push(w);
                } else {
                    gone.push(w);
                }
            }
            Reply::Armed(armed, gone)
        });
    }

    /// The watches are armed, these nodes were found `gone`: `Watches::after_arm` decides.
    fn armed(&self, s: &mut World, p: usize, seq: u8, v: MView, gone: &[u8]) {
        let quiet = !s.procs[p].recv.get(&seq).is_some_and(|f| f.0);
        let then = self.hiding_own(s, p, seq, |w| w.after_arm(&v, gone));
        let fast = v.grant_when_gone && gone.contains(&v.blocker) && !gone.contains(&seq);
        s.fast_missed |= fast && quiet && !matches!(then, Then::Grant);
        self.then(s, p, then, v);
    }

    /// `decide` on the waiter's watches; the seeded fault `ignore_own_watch` hides the
    /// watch on our own node `seq` from it.
    fn hiding_own<T>(
        &self,
        s: &mut World,
        p: usize,
        seq: u8,
        decide: impl FnOnce(&mut Recv) -> T,
    ) -> T {
        let recv = &mut s.procs[p].recv;
        let hidden = if self.config.seeded.ignore_own_watch {
            recv.spent(&seq)
        } else {
            None
        };
        let out = decide(recv);
        if let Some(w) = hidden {
            recv.armed(seq, w);
        }
        out
    }

    /// Where a decision of the library's leads.
    fn then(&self, s: &mut World, p: usize, then: Then, v: MView) {
        let Doing::Waiter { seq, owner, .. } = s.procs[p].phase else {
            unreachable!()
        };
        match then {
            Then::Wait => self.set_step(s, p, WStep::Wait(v)),
            Then::Nearer => self.set_step(s, p, WStep::Wait(v.nearer())),
            Then::Grant => self.grant(s, p, seq, owner),
            Then::List | Then::Arm => self.set_step(s, p, WStep::List),
            Then::Vanished => self.vanished(s, p),
        }
    }

    /// Step 5: the watch at `which` (`BLOCKER`, `NEXT`, `OWN`) heard its node's deletion:
    /// `Woke::of` and `Watches::on_watch` decide.
    pub(super) fn heard(&self, s: &mut World, p: usize, which: usize, v: MView) {
        let Doing::Waiter { seq, owner, .. } = s.procs[p].phase else {
            unreachable!()
        };
        let ev = WatchedEvent {
            event_type: EventType::NodeDeleted,
            path: String::new(),
        };
        let Woke::Watch(which, fired) =
            Woke::of(Wake::Watch(which, Ok(ev)), Some(i64::from(owner)), "/q")
        else {
            unreachable!("a deletion is its watch's")
        };
        let quiet = !s.procs[p].recv.get(&seq).is_some_and(|f| f.0);
        let mut then = self.hiding_own(s, p, seq, |w| w.on_watch(fired, which, &v));
        if self.config.seeded.no_relist && which == BLOCKER && matches!(then, Then::List) {
            then = Then::Grant;
        }
        if self.config.seeded.no_fast_path && matches!(then, Then::Grant) {
            then = Then::List;
        }
        let fast = which == BLOCKER && v.grant_when_gone;
        s.fast_missed |= fast && quiet && !matches!(then, Then::Grant);
        self.then(s, p, then, v);
    }

    /// Step 5: the next session event, by `Woke::of` (so `News::of`).
    pub(super) fn news(&self, s: &mut World, p: usize) {
        let Doing::Waiter { owner, .. } = s.procs[p].phase else {
            unreachable!()
        };
        let ev = session_event(s.procs[p].events.remove(0), owner);
        match Woke::of(Wake::Session(Ok(ev)), Some(i64::from(owner)), "/q") {
            Woke::Again => {}
            Woke::List => self.set_step(s, p, WStep::List),
            Woke::End(Next::Restart) => self.restart(s, p),
            Woke::End(Next::Done(_)) => unreachable!("the model never closes a client"),
            Woke::Watch(..) => unreachable!("a session event is no watch's"),
        }
    }

    /// `Waiter::grant`: a session that changed starts over; else the guard (`Holding::new`:
    /// lost at once if the session is lost, else its own-node watch is armed).
    fn grant(&self, s: &mut World, p: usize, seq: u8, owner: u8) {
        if s.procs[p].session_id() != Some(owner) && !self.config.seeded.grant_blind_to_session {
            return self.restart(s, p);
        }
        let proc = &mut s.procs[p];
        proc.recv = Recv::default();
        proc.attempt_node = None;
        if self.config.recipe.is_semaphore() && proc.internal.is_none() {
            // The gate, the semaphore's internal lock (`lease::Gate`, its node watched from
            // the first listing that waits): now the lease.
            s.procs[p].internal = Some(holding(s, p, seq, owner));
            return s.procs[p].new_attempt(Dir::Leases);
        }
        self.hold(s, p, seq, owner);
    }

    /// The acquire returns a guard; a semaphore lets its internal lock go in the
    /// background.
    pub(super) fn hold(&self, s: &mut World, p: usize, seq: u8, owner: u8) {
        // Handed out valid: its node there, in the holder's live session (or deleted by
        // another party, which nothing can tell sooner).
        let there = s.node(seq).is_some_and(|n| n.owner == owner) || s.tampered.contains(&seq);
        s.handed_invalid |= !there || s.procs[p].session_id() != Some(owner);
        s.procs[p].guard = Some(holding(s, p, seq, owner));
        let proc = &mut s.procs[p];
        proc.events.clear();
        proc.phase = Doing::Held;
        if let Some(internal) = proc.internal.take() {
            s.delete_owned(p, internal.seq, internal.owner, false);
        }
    }

    /// Our node is gone (`Waiter::vanished`): start over, nothing to delete.
    fn vanished(&self, s: &mut World, p: usize) {
        s.procs[p].attempt_node = None;
        self.restart(s, p);
    }

    /// The attempt ends (its node deleted, `OwnNode::drop`); a semaphore also lets its
    /// internal lock go. With `again`, a new attempt starts; else the call returns.
    fn end_attempt(&self, s: &mut World, p: usize, again: bool) {
        if let Some((seq, owner)) = s.procs[p].attempt_node.take() {
            s.delete_owned(p, seq, owner, false);
        }
        if let Some(internal) = s.procs[p].internal.take() {
            s.delete_owned(p, internal.seq, internal.owner, false);
        }
        let proc = &mut s.procs[p];
        proc.recv = Recv::default();
        proc.lease_watch = None;
        if again {
            proc.new_attempt(Dir::Queue);
        } else {
            proc.events.clear();
            proc.phase = Doing::Idle;
            proc.left -= 1;
        }
    }

    pub(super) fn restart(&self, s: &mut World, p: usize) {
        self.end_attempt(s, p, true);
    }

    /// A cancel or the deadline: the call returns, leaving nothing behind.
    pub(super) fn give_up(&self, s: &mut World, p: usize) {
        s.faults.give_ups -= 1;
        self.end_attempt(s, p, false);
    }

    /// `Holding::release`: marked released at once, then the delete, waited for; a delete
    /// that fails for connection reasons goes to the background.
    pub(super) fn release(&self, s: &mut World, p: usize) {
        let proc = &mut s.procs[p];
        let g = proc.guard.as_mut().expect("a guard");
        g.released = true;
        let g = *g;
        if proc.sid != g.owner {
            // Not sent on another session: the server deletes the node with its session.
            proc.guard = None;
            proc.phase = Doing::Idle;
            proc.left -= 1;
            return;
        }
        proc.phase = Doing::Releasing;
        s.send(p, |s| {
            s.delete(g.seq);
            Reply::Deleted
        });
    }

    /// `fenced_multi`: a check of the node and a write, on the node's session; the server
    /// takes it only while the node exists.
    pub(super) fn fenced_write(&self, s: &mut World, p: usize) {
        let g = s.procs[p].guard.expect("a guard");
        if !s.procs[p].reaches() {
            // Not answered: a connection error, nothing learnt.
            return;
        }
        if s.node(g.seq).is_some_and(|n| n.owner == g.owner) {
            if g.seq < s.fence {
                s.fence_broken = true;
            }
            s.fence = s.fence.max(g.seq);
        } else if let Some(g) = s.procs[p].guard.as_mut() {
            g.lost = true;
        }
    }
}

/// `Holding::new` on node `seq` of session `owner`: lost at once if the session is lost,
/// else its own-node watch is armed (a missing node is a loss, one notification later).
/// After a wait the library's guard joins the waiter's watch instead while the client
/// still holds it: at the server that is the same watch, armed while the node was there,
/// whose deletion is told to the guard, so the model's one step stands for both.
fn holding(s: &mut World, p: usize, seq: u8, owner: u8) -> Held {
    let proc = &s.procs[p];
    let g = Held {
        seq,
        owner,
        lost: proc.clock_out,
        released: false,
    };
    if proc.reaches() && !s.watch_data(owner, seq) {
        s.procs[p].inbox.push(In::Deleted(seq));
    }
    g
}

impl super::state::Proc {
    /// A new attempt (a new uuid) queues in `dir`.
    fn new_attempt(&mut self, dir: Dir) {
        self.phase = Doing::Enqueue {
            dir,
            uuid: self.attempts,
            maybe: false,
        };
        self.attempts += 1;
    }
}

/// The library's `SessionEvent` of a model's event (`owner`: the waiter's session).
pub(super) fn session_event(ev: Ev, owner: u8) -> SessionEvent {
    match ev {
        Ev::Suspended => SessionEvent::Suspended {
            session_id: i64::from(owner),
        },
        Ev::Reconnected => SessionEvent::Reconnected {
            session_id: i64::from(owner),
        },
        Ev::Lost(sid) => SessionEvent::Lost {
            session_id: i64::from(sid),
            reason: crate::client::LossReason::Timeout,
        },
        Ev::Connected(sid) => SessionEvent::Connected {
            session_id: i64::from(sid),
        },
    }
}

impl World {
    /// The name of our node `seq` (in the listing, or on the server).
    fn node_name(&self, seq: u8, listing: &[Node], recipe: Modelled) -> String {
        listing
            .iter()
            .chain(self.server.nodes.iter())
            .find(|n| n.seq == seq)
            .map(|n| n.name(recipe))
            .unwrap_or_else(|| format!("gone{seq:010}"))
    }
}
