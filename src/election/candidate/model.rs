//! The background [`Candidate`](super::Candidate), model-checked with the queue's checker
//! (`queue::model::check`): every interleaving of a few candidates, their callers (resign,
//! stop) and the environment (a dropped connection, a loss clock running out, the server's
//! expiry, another party deleting a leader's node).
//!
//! # What is the library's own code
//!
//! The candidate's phase and every transition of its table are the library's
//! [`Machine`] (`machine.rs`), over the model's [`TermNode`] (a node number and its session):
//! `begin`, `restore`, `finish`, `resign`, `stop`, `end` and `on_session` (what a session
//! event means to the phase, and whether it cancels the election's waits). The thread's
//! decisions are the library's functions: `elected` (what the election's outcome means),
//! `heard` (what a wake-up means to a leader) and `proven` (what a proof's outcome
//! means).
//!
//! # What is re-described
//!
//! The thread's loop (`Shared::run` and `lead`: which wake-ups a leader waits on, the proof
//! as a request), the caller's `Candidate::resign` and `stop` (a release, the wake, the
//! canceller's `shut`), the session as the client sees it (the connection thread calls
//! `on_session` at once), the guard's own lost signal (`Holding`: its node's deletion, its
//! session's loss) and the janitor. The election itself is abstract: a candidate's node is
//! granted when it heads the server's queue in the candidate's live session (the queue
//! algorithm that decides that is checked by the queue's model); an election whose node or
//! session went queues again inside `elect`.
//!
//! # What it leaves out
//!
//! A server that answers slowly (the proof's retry tick), `Failed` (errors not about the
//! connection), a closing client, the delay of a watch notification (a deleted node's
//! holder learns at once, so another party's delete cannot make two valid leaders here:
//! the queue's model checks that lag), and `Candidate::events`' listeners (the events a
//! transition says are checked, not delivered).

use std::fmt::Write as _;

use super::machine::{Machine, Phase, TermNode};
use super::LeaderEvent;
use crate::client::{LossReason, SessionEvent};
use crate::error::Error;
use crate::queue::check::{Model, Property};
use crate::queue::Wake;

/// A term's node in the model: its sequence number (the token) and its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ModelNode {
    seq: u8,
    owner: u8,
}

impl TermNode for ModelNode {
    fn same(&self, other: &Self) -> bool {
        self == other
    }
    fn token(&self) -> u64 {
        u64::from(self.seq)
    }
    fn owner(&self) -> i64 {
        i64::from(self.owner)
    }
}

/// Where the candidate's thread is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Thread {
    /// The top of `run`'s loop (`while !stopping`).
    Top,
    /// In `elect`, its node made or not yet.
    Electing(Option<u8>),
    /// In `lead`, waiting on its wake-ups.
    Leading(ModelNode),
    /// `run` returned.
    Ended,
}

/// A session event as the model has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Ev {
    Suspended,
    Reconnected,
    Lost(u8),
    Connected(u8),
}

fn session_event(ev: Ev) -> SessionEvent {
    match ev {
        Ev::Suspended => SessionEvent::Suspended { session_id: 0 },
        Ev::Reconnected => SessionEvent::Reconnected { session_id: 0 },
        Ev::Lost(sid) => SessionEvent::Lost {
            session_id: i64::from(sid),
            reason: LossReason::Timeout,
        },
        Ev::Connected(sid) => SessionEvent::Connected {
            session_id: i64::from(sid),
        },
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Cand {
    /// The client's session.
    sid: u8,
    /// The client is connected.
    up: bool,
    /// The loss clock ran out for `sid`.
    clock_out: bool,
    /// The library's phase machine.
    m: Machine<ModelNode>,
    thread: Thread,
    /// The leader's session events (`lead` subscribes as it begins).
    events: Vec<Ev>,
    /// The term's guard said lost (its node's deletion, its session's loss).
    lost: bool,
    /// A message on the wake channel (a resign, a stop).
    wake: bool,
    /// A cancel reached the election's wait.
    cancel: bool,
    /// The canceller was shut (`stop`): every wait of the election, now and later.
    shut: bool,
    /// `Candidate::stop` was called.
    stopped: bool,
    /// Background deletes: (node, its session).
    janitor: Vec<(u8, u8)>,
}

impl Cand {
    /// `Candidate::is_leader`: leading, and the term's guard valid (not lost, connected in
    /// the node's session).
    fn is_leader(&self) -> bool {
        self.m
            .leading()
            .is_some_and(|t| !self.lost && self.up && !self.clock_out && self.sid == t.owner)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct World {
    /// The election's nodes (sequence, session), in order.
    nodes: Vec<(u8, u8)>,
    next_seq: u8,
    next_sid: u8,
    /// Sessions their client declared lost (the server may expire them), a bit each.
    declared: u16,
    cands: Vec<Cand>,
    faults: Faults,
    /// An event was said after its candidate's `stop`.
    after_stop: bool,
}

/// The caller's and the environment's moves, each at most so many times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Faults {
    resigns: u8,
    stops: u8,
    disconnects: u8,
    expiries: u8,
    tampers: u8,
}

/// Deliberate mistakes (in the model, never in the library): each must be caught.
#[derive(Debug, Clone, Copy, Default)]
struct Seeded {
    /// A candidate leads once its node exists, heading the queue or not.
    lead_without_head: bool,
    /// After a lost term the thread ends instead of queueing again.
    no_requeue_after_loss: bool,
    /// A resign does not delete the term's node.
    resign_keeps_node: bool,
    /// `stop` shuts the canceller and wakes the thread but leaves the phase (no Stopping).
    stop_leaves_phase: bool,
}

struct Candidates {
    n: usize,
    faults: Faults,
    seeded: Seeded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Top(usize),
    Create(usize),
    Grant(usize),
    /// The election starts over inside `elect` (its node or session went).
    Requeue(usize),
    Cancelled(usize),
    WokeLost(usize),
    WokeEvent(usize),
    WokeWake(usize),
    Janitor(usize),
    Resign(usize),
    Stop(usize),
    Disconnect(usize),
    ClockOut(usize),
    Reconnect(usize),
    Expire(u8),
    Tamper(u8),
}

const ONE_LEADER: &str = "at most one valid leader";
const NO_EVENT_AFTER_STOP: &str = "no event after stop";
const LEADER_LIVENESS: &str =
    "liveness: while candidates remain, progress steps alone elect a valid leader";

impl World {
    fn node(&self, seq: u8) -> Option<(u8, u8)> {
        self.nodes.iter().copied().find(|n| n.0 == seq)
    }

    fn delete(&mut self, seq: u8) {
        self.nodes.retain(|n| n.0 != seq);
    }

    /// Events a transition said: none may follow a stop.
    fn said(&mut self, p: usize, out: &[LeaderEvent]) {
        if self.cands[p].stopped && !out.is_empty() {
            self.after_stop = true;
        }
    }

    /// A session event: the connection thread's `on_session` (a cancel reaches an
    /// election under way), then the leader's subscription.
    fn session(&mut self, p: usize, ev: Ev) {
        let mut out = Vec::new();
        let c = &mut self.cands[p];
        if c.m.on_session(&session_event(ev), &mut out) && matches!(c.thread, Thread::Electing(_)) {
            c.cancel = true;
        }
        if matches!(c.thread, Thread::Leading(_)) {
            c.events.push(ev);
        }
        self.said(p, &out);
    }

    /// `Holding::release` / `release_quietly` of node `t`: deleted now if connected in its
    /// session, in the background if only the link is down, left to the server otherwise.
    fn release(&mut self, p: usize, t: ModelNode) {
        let c = &mut self.cands[p];
        if c.sid != t.owner || c.clock_out {
            return;
        }
        if c.up {
            self.delete(t.seq);
        } else {
            c.janitor.push((t.seq, t.owner));
        }
    }

    /// The thread back at the top of its loop.
    fn top(&mut self, p: usize) {
        self.cands[p].thread = Thread::Top;
    }

    /// `lead`'s end of a lost term: `finish`, then the node released.
    fn finish(&mut self, p: usize, t: ModelNode, requeue: bool) {
        let mut out = Vec::new();
        let finished = self.cands[p].m.finish(&t, &mut out);
        self.said(p, &out);
        if finished {
            self.release(p, t);
        }
        if requeue {
            self.top(p);
        } else {
            self.cands[p].thread = Thread::Ended;
        }
    }
}

impl Model for Candidates {
    type State = World;
    type Action = Action;

    fn init(&self) -> Vec<World> {
        let cands = (0..self.n)
            .map(|i| {
                let mut m = Machine::new();
                m.subscribed(true);
                Cand {
                    sid: i as u8,
                    up: true,
                    clock_out: false,
                    m,
                    thread: Thread::Top,
                    events: Vec::new(),
                    lost: false,
                    wake: false,
                    cancel: false,
                    shut: false,
                    stopped: false,
                    janitor: Vec::new(),
                }
            })
            .collect();
        vec![World {
            nodes: Vec::new(),
            next_seq: 0,
            next_sid: self.n as u8,
            declared: 0,
            cands,
            faults: self.faults,
            after_stop: false,
        }]
    }

    fn actions(&self, s: &World, out: &mut Vec<Action>) {
        for p in 0..s.cands.len() {
            self.proc_actions(s, p, out);
        }
        for sid in 0..s.next_sid {
            if s.declared & (1 << sid) != 0 && s.nodes.iter().any(|n| n.1 == sid) {
                out.push(Action::Expire(sid));
            }
        }
        if s.faults.tampers > 0 {
            out.extend(s.nodes.iter().map(|n| Action::Tamper(n.0)));
        }
    }

    fn next(&self, s: &World, a: &Action) -> World {
        let mut s = s.clone();
        let t = &mut s;
        match *a {
            Action::Top(p) => {
                let c = &mut t.cands[p];
                if c.m.stopping() {
                    let mut out = Vec::new();
                    let term = c.m.end(&mut out);
                    c.thread = Thread::Ended;
                    t.said(p, &out);
                    if let Some(term) = term {
                        t.release(p, term);
                    }
                } else {
                    // A new acquire: a cancel reaches only the waits under way.
                    c.cancel = false;
                    c.thread = Thread::Electing(None);
                }
            }
            Action::Create(p) => {
                let seq = t.next_seq;
                t.next_seq += 1;
                t.nodes.push((seq, t.cands[p].sid));
                t.cands[p].thread = Thread::Electing(Some(seq));
            }
            Action::Grant(p) => {
                let c = &t.cands[p];
                let Thread::Electing(Some(seq)) = c.thread else {
                    unreachable!()
                };
                let term = ModelNode { seq, owner: c.sid };
                self.elected(t, p, Ok(Some(term)));
            }
            Action::Requeue(p) => t.cands[p].thread = Thread::Electing(None),
            Action::Cancelled(p) => {
                let c = &mut t.cands[p];
                c.cancel = false;
                if let Thread::Electing(Some(seq)) = c.thread {
                    let owner = c.sid;
                    if t.node(seq) == Some((seq, owner)) {
                        t.release(p, ModelNode { seq, owner });
                    }
                }
                self.elected(t, p, Err(Error::cancelled("/e")));
            }
            Action::WokeLost(p) => self.woke(t, p, Wake::Lost),
            Action::WokeEvent(p) => {
                let ev = t.cands[p].events.remove(0);
                self.woke(t, p, Wake::Session(Ok(session_event(ev))));
            }
            Action::WokeWake(p) => {
                t.cands[p].wake = false;
                self.woke(t, p, Wake::Resign);
            }
            Action::Janitor(p) => {
                let c = &mut t.cands[p];
                let (seq, owner) = c.janitor.remove(0);
                if owner == c.sid && t.node(seq) == Some((seq, owner)) {
                    t.delete(seq);
                }
            }
            Action::Resign(p) => {
                t.faults.resigns -= 1;
                let mut out = Vec::new();
                let (term, _) = t.cands[p].m.resign(&mut out);
                t.said(p, &out);
                if let Some(term) = term {
                    if !self.seeded.resign_keeps_node {
                        t.release(p, term);
                    }
                    t.cands[p].wake = true;
                }
            }
            Action::Stop(p) => {
                t.faults.stops -= 1;
                let c = &mut t.cands[p];
                c.stopped = true;
                let term = if self.seeded.stop_leaves_phase {
                    None
                } else {
                    c.m.stop()
                };
                c.shut = true;
                c.wake = true;
                if let Some(term) = term {
                    t.release(p, term);
                }
            }
            Action::Disconnect(p) => {
                t.faults.disconnects -= 1;
                t.cands[p].up = false;
                t.session(p, Ev::Suspended);
            }
            Action::ClockOut(p) => {
                t.faults.expiries -= 1;
                let c = &mut t.cands[p];
                c.clock_out = true;
                let sid = c.sid;
                // The guard's own subscription.
                if let Thread::Leading(term) = c.thread {
                    c.lost |= term.owner == sid;
                }
                t.declared |= 1 << sid;
                t.session(p, Ev::Lost(sid));
            }
            Action::Reconnect(p) => {
                let c = &mut t.cands[p];
                c.up = true;
                if c.clock_out {
                    // The given-up session is closed first (its nodes go), then the new
                    // one's `Connected`.
                    let old = c.sid;
                    c.clock_out = false;
                    c.sid = t.next_sid;
                    t.next_sid += 1;
                    t.nodes.retain(|n| n.1 != old);
                    let sid = t.cands[p].sid;
                    t.session(p, Ev::Connected(sid));
                } else {
                    t.session(p, Ev::Reconnected);
                }
            }
            Action::Expire(sid) => t.nodes.retain(|n| n.1 != sid),
            Action::Tamper(seq) => {
                t.faults.tampers -= 1;
                t.delete(seq);
                for c in &mut t.cands {
                    if matches!(c.thread, Thread::Leading(term) if term.seq == seq) {
                        c.lost = true;
                    }
                }
            }
        }
        s
    }

    fn progress(&self, a: &Action) -> bool {
        !matches!(
            a,
            Action::Resign(_)
                | Action::Stop(_)
                | Action::Disconnect(_)
                | Action::ClockOut(_)
                | Action::Tamper(_)
        )
    }

    fn properties(&self) -> Vec<Property<Self, World>> {
        vec![
            (ONE_LEADER, |_, s| {
                s.cands.iter().filter(|c| c.is_leader()).count() <= 1
            }),
            (NO_EVENT_AFTER_STOP, |_, s| !s.after_stop),
        ]
    }

    fn situations(&self) -> Vec<Property<Self, World>> {
        let mut out: Vec<Property<Self, World>> = vec![(
            "a second term: a leader with a token above the first's",
            |_, s| {
                s.cands
                    .iter()
                    .any(|c| c.is_leader() && c.m.leading().is_some_and(|t| t.seq > 0))
            },
        )];
        if self.faults.disconnects > 0 {
            out.push(("a leader suspended", |_, s| {
                s.cands.iter().any(|c| c.m.suspended())
            }));
        }
        if self.faults.expiries > 0 {
            out.push(("a term lost with its session", |_, s| {
                s.cands.iter().any(
                    |c| matches!(c.m.phase(), Phase::Lost(t) if t.owner != c.sid || c.clock_out),
                )
            }));
        }
        if self.faults.stops > 0 {
            out.push(("a stopped candidate's thread ended", |_, s| {
                s.cands
                    .iter()
                    .any(|c| c.stopped && c.thread == Thread::Ended && c.m.ended())
            }));
        }
        out
    }

    fn goal(&self, s: &World) -> bool {
        s.cands.iter().all(|c| c.stopped) || s.cands.iter().any(|c| !c.stopped && c.is_leader())
    }

    fn show(&self, s: &World) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "    server: nodes (seq, session) {:?}", s.nodes);
        for (i, c) in s.cands.iter().enumerate() {
            let _ = writeln!(
                out,
                "    c{i}: session {} {}{}, {:?}, thread {:?}{}{}{}",
                c.sid,
                if c.up { "up" } else { "down" },
                if c.clock_out { " (declared lost)" } else { "" },
                c.m.phase(),
                c.thread,
                if c.lost { ", guard lost" } else { "" },
                if c.stopped { ", stopped" } else { "" },
                if c.is_leader() { ", LEADER" } else { "" },
            );
        }
        out
    }

    fn liveness(&self) -> &'static str {
        LEADER_LIVENESS
    }
}

mod steps;
#[cfg(test)]
mod tests;
