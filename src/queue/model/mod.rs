//! The queue algorithm, model-checked: every interleaving of a few processes running a
//! recipe against one ZooKeeper server, with the faults listed below, explored exhaustively
//! by a small breadth-first checker ([`check`]), run by `cargo test`.
//!
//! # What is the library's own code
//!
//! Every decision a waiter takes is made by the library's functions, called by the model,
//! and so are their inputs: the node names (`Node::name` uses `names::node_prefix`), the
//! listing parsed, ordered and judged by `waiter::listed` (`names::order_upto`, our place
//! in it or gone, `View::of`: the blocker by `Rule::blocker`, the node two ahead, the fast
//! path's `grant_when_gone`), the watches a waiter keeps (the library's `Watches` over the
//! model's `Slot`: `keep` says which are gone and which to arm, `after_arm` and `on_watch`
//! decide with what was heard on our own node), what an event means (`waiter::heard`),
//! what a session event means to a waiter (`News::of`), the semaphore's count
//! (`lease_count`), and which nodes hold as `participants()` says (`Rule::holding`, by the
//! recipe's rule: `Exclusive`, `ReadWrite`, `Semaphore(n)`).
//!
//! # What is re-described, and why
//!
//! The I/O around those decisions is re-described here, step for step with the code it
//! mirrors (each function names it): `enqueue` (create and list in one write; a lost reply
//! resolved by `find_by_uuid`), the `Waiter`'s loop (`Attempt::checked`, `list`,
//! `Watching::arm`'s bookkeeping of kept, spent and missing watches, `grant`),
//! `OwnNode::drop`, `Holding::new`, `is_valid`, `release` and the fenced write,
//! `Client::delete_owned` and the janitor, the lease phase's `Lease::run` and `await_leases` (`queue/lease.rs`), and
//! the session's transitions (`conn/session.rs`). They are written against threads, channels and sockets, which a
//! model cannot run; what they decide is small and is kept in the library's functions.
//!
//! # What it assumes of ZooKeeper
//!
//! One linearizable server; per session, replies and watch events in order; watches
//! one-shot, set only on a node that exists (`getData` on a missing node answers `NoNode`
//! and leaves none: `World::watch_data`), fired on deletion to every session that set one,
//! child watches fired on a child's creation or deletion; ephemeral nodes deleted with
//! their session; sequence numbers (and creation zxids, the fencing tokens) increasing.
//! A request is applied by the server when sent (a pipelined create and list, or a
//! `find_by_uuid`'s list and exists, as one step); its reply may be lost with the link.
//! Watch events survive a reconnect to the same session (the client's SetWatches).
//! **The timing rule:** the server expires a session only after its client's loss clock
//! (counted from the send of the last answered request) has declared it lost; the clock
//! runs out only while the link is broken.
//!
//! # The environment's faults (each bounded per test)
//!
//! A link breaks (the client notices later; the reply in flight, a create's included, is
//! lost, the request maybe applied); a loss clock runs out (the guards read invalid, the
//! client's session id is 0, the server may then expire the session, the client reconnects
//! with a new one); another party deletes a node, held or waiting; a waiter gives up (a
//! cancel or its deadline: the same way out). Reconnecting, the server's expiry of a
//! session declared lost, replies, events and the background deletes are progress steps:
//! a fair run takes them.
//!
//! # The properties ([`props`] and the liveness check in [`check`])
//!
//! In every reachable state: at most one valid holder of a mutex or an election; a valid
//! writer holds alone; no more valid permits than the semaphore has; a holder whose node
//! is gone already reads invalid; the fencing tokens the server accepts never go down; a
//! process neither acquiring nor holding, with no background delete pending, has no node
//! in its live session; the fast path is taken exactly where one node blocks a waiter;
//! `participants()` says every valid holder whose node is there holds. A holder whose node another party deleted while it held (by the
//! server's queue) is exempt until it learns: nothing can tell it sooner. And liveness:
//! from every reachable state, progress steps alone reach the state where every process
//! made all its acquisitions.
//!
//! # What it leaves out
//!
//! Several clients per process, the re-entrant count, a multi-lock's order, revocation
//! (data changes), `Wait::Try`, a closing client, container directories, a connection that
//! stays up while its server stops answering (modelled as a broken link), a pause's taking
//! of a session event during step 1, another party deleting a semaphore's lease, and the
//! semaphore's `try` path; a process takes its steps one at a time (no two requests of one
//! process in flight at once), and the semaphore's internal lock watches its node from its
//! grant on (the library arms that watch at the first wait). Bounds are per test (see
//! `tests.rs`): two to four processes, one or two acquisitions each, one of each fault.
//! The single node (the unfair recipes) has its own model beside this one (`single.rs`),
//! and the background `Candidate` its own in `election/candidate/model.rs`.

pub(crate) mod check;
mod client;
mod lease;
mod props;
mod server;
#[cfg(test)]
mod single;
mod state;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;

use check::Model;
pub(crate) use state::{Config, Dir, Faults, Modelled, ProcSpec, Seeded};
use state::{Doing, WStep, World};

use crate::queue::attempt::Place;
use crate::queue::kind::Kind;
use crate::queue::rules::Rule;
use crate::queue::waiter::decide::{BLOCKER, NEXT, OWN};

/// The model of a configuration.
pub(crate) struct Queue {
    pub config: Config,
}

impl Modelled {
    pub(crate) fn is_semaphore(self) -> bool {
        matches!(self, Modelled::Semaphore(_))
    }

    /// The library's `Place` of a node of this recipe in `dir` (a reader's or a writer's
    /// side of an `RwLock`): its marker and rule come from there, as the recipe's do (a
    /// semaphore's internal lock is its gate, `Place::Gate`; its leases are behind it).
    pub(crate) fn place(self, dir: Dir, read: bool) -> Place<'static> {
        let kind = match self {
            Modelled::Mutex => Kind::Mutex,
            Modelled::Election => Kind::Election,
            Modelled::RwLock if read => Kind::Read,
            Modelled::RwLock => Kind::Write,
            Modelled::Semaphore(permits) => {
                return match dir {
                    Dir::Queue => Place::Gate {
                        then: Dir::Leases.path(),
                        permits,
                    },
                    Dir::Leases => Place::Behind {
                        gate: Dir::Queue.path(),
                        permits,
                    },
                }
            }
        };
        Place::Own(kind)
    }
}

/// One step of one process or of the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// An acquire call begins.
    Start(usize),
    /// Step 1's request (create and list, or the uuid search).
    Enqueue(usize),
    /// The head of the inbox: a reply, or a watch event for the connection thread.
    Receive(usize),
    /// The waiter lists (or uses the create's listing).
    List(usize),
    /// A waiter's watch (`BLOCKER`, `NEXT`, `OWN`) heard a deletion.
    Heard(usize, usize),
    /// A waiter (or the lease loop) takes a session event.
    News(usize),
    /// A pause after connection trouble ends (taking a session event, or not).
    PauseEnds(usize, bool),
    /// The slow re-check tick.
    Tick(usize),
    /// The lease loop lists (or uses the create's listing).
    LeaseList(usize),
    /// The lease loop's child watch fired.
    LeaseHeard(usize),
    /// The lease loop finds its internal lock lost.
    LeaseLost(usize),
    Release(usize),
    FencedWrite(usize),
    /// The background deletes one node.
    Janitor(usize),
    // Faults, and the environment.
    GiveUp(usize),
    /// A link breaks; the client does not know yet.
    Partition(usize),
    /// The client notices (its connection breaks).
    Notice(usize),
    ClockOut(usize),
    Reconnect(usize),
    /// The server expires a session.
    Expire(u8),
    /// Another party deletes a held node.
    Tamper(u8),
}

impl Queue {
    fn proc_actions(&self, s: &World, p: usize, out: &mut Vec<Action>) {
        let proc = &s.procs[p];
        if let Some(&(_, owner)) = proc.janitor.first() {
            if owner != proc.sid || proc.reaches() {
                out.push(Action::Janitor(p));
            }
        }
        if let Some(m) = proc.inbox.first() {
            if (proc.up && proc.link) || *m == state::In::Reply {
                out.push(Action::Receive(p));
            }
        }
        let giving_up = s.faults.give_ups > 0;
        match &proc.phase {
            Doing::Idle if proc.left > 0 => out.push(Action::Start(p)),
            Doing::Idle => {}
            Doing::Enqueue { .. } => out.push(Action::Enqueue(p)),
            Doing::Waiter { step, .. } => match step {
                WStep::List => out.push(Action::List(p)),
                WStep::Pause => {
                    out.push(Action::PauseEnds(p, false));
                    if !proc.events.is_empty() {
                        out.push(Action::PauseEnds(p, true));
                    }
                }
                WStep::Wait(v) => {
                    let fired = |seq: u8| proc.recv.get(&seq).is_some_and(|f| f.0);
                    if fired(v.blocker) {
                        out.push(Action::Heard(p, BLOCKER));
                    }
                    if v.next.is_some_and(fired) {
                        out.push(Action::Heard(p, NEXT));
                    }
                    if let Doing::Waiter { seq, .. } = proc.phase {
                        if fired(seq) {
                            out.push(Action::Heard(p, OWN));
                        }
                    }
                    if !proc.events.is_empty() {
                        out.push(Action::News(p));
                    }
                    if self.config.tick {
                        out.push(Action::Tick(p));
                    }
                    if giving_up {
                        out.push(Action::GiveUp(p));
                    }
                }
                WStep::Listing | WStep::Arming(_) => {}
            },
            Doing::Enqueuing { .. } | Doing::Releasing => {}
            Doing::Lease {
                out: asked,
                waiting,
                listing,
                ..
            } => {
                if *waiting {
                    if proc.lease_watch == Some(true) {
                        out.push(Action::LeaseHeard(p));
                    }
                    if proc.internal.is_some_and(|g| g.lost) {
                        out.push(Action::LeaseLost(p));
                    }
                    if !proc.events.is_empty() {
                        out.push(Action::News(p));
                    }
                    if giving_up {
                        out.push(Action::GiveUp(p));
                    }
                } else if !asked
                    && ((proc.up && !proc.clock_out)
                        || listing.is_some()
                        || proc.session_id() != Some(self.lease_owner(proc)))
                {
                    out.push(Action::LeaseList(p));
                }
            }
            Doing::Held => {
                out.push(Action::Release(p));
                let exclusive = match self.config.recipe {
                    Modelled::Mutex | Modelled::Election => true,
                    Modelled::RwLock => !self.config.procs[p].read,
                    Modelled::Semaphore(_) => false,
                };
                if self.config.fenced_writes
                    && exclusive
                    && proc.guard.is_some_and(|g| g.is_valid(proc))
                {
                    out.push(Action::FencedWrite(p));
                }
            }
        }
        // The environment.
        if proc.link && s.faults.disconnects > 0 {
            out.push(Action::Partition(p));
        }
        if !proc.link && proc.up {
            out.push(Action::Notice(p));
        }
        if !proc.link && !proc.clock_out && s.faults.expiries > 0 {
            out.push(Action::ClockOut(p));
        }
        if !proc.up {
            out.push(Action::Reconnect(p));
        }
    }

    /// Whether node `seq` holds by the server's queue: what `participants` says of it
    /// (`names::order` and `Rule::holding`, by the rule the recipe's `participants` uses).
    pub(super) fn heads(&self, s: &World, seq: u8) -> bool {
        let Some(dir) = s.node(seq).map(|n| n.dir) else {
            return false;
        };
        let listing = s.list(dir);
        let names: Vec<String> = listing.iter().map(|n| n.name(self.config.recipe)).collect();
        let q = crate::queue::names::order(dir.path(), names)
            .expect("the model names its nodes as the recipes do");
        // The rule of the recipe's `participants`: its place's (the kind's on the leases,
        // the gate's, exclusive, on a semaphore's internal lock), the whole queue's for an
        // `RwLock`.
        let rule = match self.config.recipe {
            Modelled::RwLock => Rule::ReadWrite,
            recipe => recipe.place(dir, false).rule(),
        };
        let me = s.node(seq).map(|n| n.name(self.config.recipe));
        let i = q
            .iter()
            .position(|c| Some(&c.name) == me.as_ref())
            .expect("listed");
        rule.holding(&q)[i]
    }

    fn lease_owner(&self, proc: &state::Proc) -> u8 {
        match proc.phase {
            Doing::Lease { owner, .. } => owner,
            _ => proc.sid,
        }
    }
}

impl Model for Queue {
    type State = World;
    type Action = Action;

    fn init(&self) -> Vec<World> {
        vec![World::initial(&self.config)]
    }

    fn actions(&self, s: &World, out: &mut Vec<Action>) {
        for p in 0..s.procs.len() {
            self.proc_actions(s, p, out);
        }
        for sid in 0..s.next_sid {
            if s.may_expire(sid, self.config.seeded.early_expiry).is_some()
                && s.server.nodes.iter().any(|n| n.owner == sid)
            {
                out.push(Action::Expire(sid));
            }
        }
        if s.faults.tampers > 0 {
            out.extend(
                s.server
                    .nodes
                    .iter()
                    .filter(|n| n.dir == Dir::Queue)
                    .map(|n| Action::Tamper(n.seq)),
            );
        }
    }

    fn next(&self, s: &World, a: &Action) -> World {
        let mut s = s.clone();
        let t = &mut s;
        match *a {
            Action::Start(p) => self.start(t, p),
            Action::Enqueue(p) => {
                let Doing::Enqueue { dir, uuid, maybe } = t.procs[p].phase else {
                    unreachable!()
                };
                self.enqueue(t, p, dir, uuid, maybe);
            }
            Action::Receive(p) => self.receive(t, p),
            Action::List(p) => self.list(t, p),
            Action::Heard(p, which) => {
                let Doing::Waiter {
                    step: WStep::Wait(v),
                    ..
                } = t.procs[p].phase
                else {
                    unreachable!()
                };
                self.heard(t, p, which, v);
            }
            Action::News(p) if matches!(t.procs[p].phase, Doing::Lease { .. }) => {
                self.lease_news(t, p)
            }
            Action::News(p) => self.news(t, p),
            Action::PauseEnds(p, take) => {
                if take {
                    t.procs[p].events.remove(0);
                }
                if let Doing::Waiter { step, .. } = &mut t.procs[p].phase {
                    *step = WStep::List;
                }
            }
            Action::Tick(p) => {
                if let Doing::Waiter { step, .. } = &mut t.procs[p].phase {
                    *step = WStep::List;
                }
            }
            Action::LeaseList(p) => self.lease_list(t, p),
            Action::LeaseHeard(p) => self.lease_heard(t, p),
            Action::LeaseLost(p) => self.lease_lost(t, p),
            Action::Release(p) => self.release(t, p),
            Action::FencedWrite(p) => self.fenced_write(t, p),
            Action::Janitor(p) => t.janitor(p),
            Action::GiveUp(p) => self.give_up(t, p),
            Action::Partition(p) => t.partition(p),
            Action::Notice(p) => t.notice(p),
            Action::ClockOut(p) => t.clock_out(p),
            Action::Reconnect(p) => t.reconnect(p),
            Action::Expire(sid) => t.expire(sid),
            Action::Tamper(seq) => {
                let held = self.heads(t, seq);
                t.tamper(seq, held);
            }
        }
        s
    }

    fn progress(&self, a: &Action) -> bool {
        !matches!(
            a,
            Action::Tick(_)
                | Action::GiveUp(_)
                | Action::Partition(_)
                | Action::ClockOut(_)
                | Action::Tamper(_)
        )
    }

    fn properties(&self) -> Vec<check::Property<Self, World>> {
        props::all()
    }

    fn situations(&self) -> Vec<check::Property<Self, World>> {
        props::situations(&self.config)
    }

    fn goal(&self, s: &World) -> bool {
        s.procs
            .iter()
            .all(|p| p.left == 0 && matches!(p.phase, Doing::Idle))
    }

    fn show(&self, s: &World) -> String {
        let mut out = String::new();
        let nodes: Vec<String> = s
            .server
            .nodes
            .iter()
            .map(|n| {
                let kind = match (n.dir, n.read) {
                    (Dir::Leases, _) => "lease",
                    (_, true) => "read",
                    _ => "node",
                };
                format!("{kind} {} of p{} (session {})", n.seq, n.proc, n.owner)
            })
            .collect();
        let _ = writeln!(
            out,
            "    server: [{}] ended sessions {:#b}",
            nodes.join(", "),
            s.server.ended
        );
        for (i, p) in s.procs.iter().enumerate() {
            let conn = match (p.link, p.up, p.clock_out) {
                (true, true, _) => "up",
                (false, true, false) => "link broken (not noticed)",
                (_, false, false) => "down",
                (_, _, true) => "declared lost",
            };
            let guard = p.guard.map(|g| {
                format!(
                    " guard on {}{}",
                    g.seq,
                    if g.is_valid(p) {
                        " (valid)"
                    } else {
                        " (invalid)"
                    }
                )
            });
            let _ = writeln!(
                out,
                "    p{i}: session {} {conn}, {:?}{}{}",
                p.sid,
                p.phase,
                guard.unwrap_or_default(),
                if p.inbox.is_empty() {
                    String::new()
                } else {
                    format!(" inbox {:?}", p.inbox)
                }
            );
        }
        out
    }
}
