//! The single node (`queue::single`: the unfair lock and the unfair election),
//! model-checked with the same checker: every interleaving of a few processes racing to
//! create one ephemeral node, with faults (a create applied whose reply is lost, a broken
//! link, a loss clock running out and the server's expiry, another party deleting the node,
//! a call given up, a reconnect whose close of the given-up session failed: its node stays
//! until the server expires it).
//!
//! The library's decisions are called: whose a node read back is (`single::whose`), which
//! errors leave a create's outcome unknown (`single::trouble`) and what a wait for the
//! holder ends in (`single::waited`). Re-described: `race` (a round: create, read back on
//! `NodeExists` or a lost reply, wait on the holder's node), `give_up`'s background delete
//! checked by our data, and the guard (valid while not lost, connected in its node's
//! session; handed out only with its node there in the holder's live session). Left out: parents, ACLs and the tenancy check, `Wait::Try`, the tick.

use std::fmt::Write as _;

use super::check::{caught, holds, Model, Property, LIVENESS};
use crate::client::{EventType, WatchedEvent};
use crate::error::Error;
use crate::queue::attempt::Woke;
use crate::queue::single::{trouble, waited, whose, Whose};
use crate::queue::wake::Wake;

/// The node at the path: its data (process, call) and its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Node {
    data: (u8, u8),
    owner: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Doing {
    Idle,
    /// The top of a round of `race`.
    Race,
    /// Waiting on the holder's node (its watch armed).
    Waiting,
    Held,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Proc {
    sid: u8,
    up: bool,
    clock_out: bool,
    phase: Doing,
    left: u8,
    /// Calls made (the data of the current one is (process, calls)).
    calls: u8,
    /// A create's outcome is unknown.
    unsure: bool,
    /// The watch on the holder's node heard its deletion.
    heard: bool,
    /// The guard: its node's session, and lost.
    guard: Option<(u8, bool)>,
    /// The guard's node was found ours by reading it back.
    read_back: bool,
    /// Background deletes: the data they check, the session they go out on.
    janitor: Vec<((u8, u8), u8)>,
}

impl Proc {
    /// The data of the current call of process `p`: unique to the call.
    fn data(&self, p: usize) -> (u8, u8) {
        (p as u8, self.calls)
    }

    fn valid(&self) -> bool {
        self.guard
            .is_some_and(|(owner, lost)| !lost && self.up && !self.clock_out && owner == self.sid)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct World {
    node: Option<Node>,
    next_sid: u8,
    declared: u16,
    procs: Vec<Proc>,
    faults: Faults,
    /// A guard was handed out invalid: its node not there in the holder's live session.
    handed_invalid: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Faults {
    lost_replies: u8,
    expiries: u8,
    tampers: u8,
    give_ups: u8,
    /// Reconnects whose close of the given-up session failed (`close_abandoned` gave up):
    /// the old session's node stays until the server expires it.
    unclosed: u8,
}

/// Deliberate mistakes (in the model, never in the library): each must be caught.
#[derive(Debug, Clone, Copy, Default)]
struct Seeded {
    /// A node read back after `NodeExists` or a lost reply is never taken for ours.
    no_read_back: bool,
    /// A call given up with a create's outcome unknown leaves no background delete.
    give_up_forgets: bool,
    /// A create answered `NodeExists` is taken as our own create, won.
    exists_is_won: bool,
    /// The read back asks `whose` with the node's session taken for ours (`whose` without
    /// its session check).
    whose_blind_to_session: bool,
}

struct Single {
    procs: usize,
    acquisitions: u8,
    faults: Faults,
    seeded: Seeded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Start(usize),
    /// A round's create (and read back); `bool`: its reply is lost (a fault).
    Create(usize, bool),
    Heard(usize),
    Release(usize),
    Janitor(usize),
    GiveUp(usize),
    /// The link breaks and the loss clock runs out (the client calls the session lost).
    ClockOut(usize),
    /// A new session; `bool`: the given-up session's close failed, its node left to the
    /// server's expiry (a fault).
    Reconnect(usize, bool),
    Expire(u8),
    Tamper,
}

const EXCLUSION: &str = "mutual exclusion: at most one valid holder of the single node";
const HANDED_VALID: &str = "a guard is valid when it is handed out: its node exists in the \
                            holder's live session";
const NOTHING_LEFT: &str = "nothing left behind: an idle process with no background delete \
                            pending has no node in its live session";

impl World {
    /// The node goes: every waiter's watch hears it.
    fn delete_node(&mut self) {
        self.node = None;
        for q in &mut self.procs {
            q.heard |= q.phase == Doing::Waiting;
        }
    }
}

impl Single {
    /// A round of `race`: the create; on `NodeExists` the node read back (`ours`, by
    /// `whose`); a create whose reply is lost (`lost_reply`, the read back failing too)
    /// leaves its outcome unknown (`trouble`): a pause, and the race again.
    fn round(&self, s: &mut World, p: usize, lost_reply: bool) {
        let sid = s.procs[p].sid;
        let data = s.procs[p].data(p);
        let r: Result<(), Error> = match s.node {
            None => {
                s.node = Some(Node { data, owner: sid });
                Ok(())
            }
            Some(_) => Err(Error::NodeExists {
                path: "/u".to_string(),
            }),
        };
        let proc = &mut s.procs[p];
        if lost_reply {
            proc.unsure = trouble(&Error::ConnectionLoss);
            return;
        }
        proc.unsure = false;
        let won = match r {
            Ok(()) => true,
            Err(_) if self.seeded.exists_is_won => true,
            Err(_) if self.seeded.no_read_back => false,
            // Session ids are shifted by one: the library reads owner 0 as "persistent".
            Err(_) => s.node.is_some_and(|n| {
                let owner = if self.seeded.whose_blind_to_session {
                    sid
                } else {
                    n.owner
                };
                whose(
                    &[n.data.0, n.data.1],
                    i64::from(owner) + 1,
                    &[data.0, data.1],
                    i64::from(sid) + 1,
                ) == Whose::Ours
            }),
        };
        if won {
            // The guard's session is the node's (`Acquired::of` its stat); the seeded
            // fault takes the answer for our own create.
            let owner = match s.node {
                Some(n) if !self.seeded.exists_is_won => n.owner,
                _ => sid,
            };
            proc.read_back = r.is_err();
            proc.guard = Some((owner, false));
            let there = s.node.is_some_and(|n| n.owner == owner);
            s.handed_invalid |= !there || !proc.up || proc.clock_out || owner != proc.sid;
            proc.phase = Doing::Held;
        } else {
            // Someone else holds it: wait on its node.
            proc.heard = false;
            proc.phase = Doing::Waiting;
        }
    }

    fn finish_call(&self, s: &mut World, p: usize) {
        let proc = &mut s.procs[p];
        proc.phase = Doing::Idle;
        proc.left -= 1;
        proc.calls += 1;
        proc.guard = None;
        proc.read_back = false;
    }
}

impl Model for Single {
    type State = World;
    type Action = Action;

    fn init(&self) -> Vec<World> {
        let procs = (0..self.procs)
            .map(|i| Proc {
                sid: i as u8,
                up: true,
                clock_out: false,
                phase: Doing::Idle,
                left: self.acquisitions,
                calls: 0,
                unsure: false,
                heard: false,
                guard: None,
                read_back: false,
                janitor: Vec::new(),
            })
            .collect();
        vec![World {
            node: None,
            next_sid: self.procs as u8,
            declared: 0,
            procs,
            faults: self.faults,
            handed_invalid: false,
        }]
    }

    fn actions(&self, s: &World, out: &mut Vec<Action>) {
        for (p, proc) in s.procs.iter().enumerate() {
            if let Some(&(_, owner)) = proc.janitor.first() {
                if owner != proc.sid || proc.up {
                    out.push(Action::Janitor(p));
                }
            }
            match proc.phase {
                Doing::Idle if proc.left > 0 => out.push(Action::Start(p)),
                Doing::Idle => {}
                Doing::Race if proc.up => {
                    out.push(Action::Create(p, false));
                    if s.faults.lost_replies > 0 {
                        out.push(Action::Create(p, true));
                    }
                }
                Doing::Race => {}
                Doing::Waiting if proc.heard => out.push(Action::Heard(p)),
                Doing::Waiting => {}
                Doing::Held => out.push(Action::Release(p)),
            }
            if matches!(proc.phase, Doing::Race | Doing::Waiting) && s.faults.give_ups > 0 {
                out.push(Action::GiveUp(p));
            }
            if proc.up && s.faults.expiries > 0 {
                out.push(Action::ClockOut(p));
            }
            if !proc.up {
                out.push(Action::Reconnect(p, false));
                if s.faults.unclosed > 0 {
                    out.push(Action::Reconnect(p, true));
                }
            }
        }
        if let Some(n) = s.node {
            if s.declared & (1 << n.owner) != 0 {
                out.push(Action::Expire(n.owner));
            }
            if s.faults.tampers > 0 {
                out.push(Action::Tamper);
            }
        }
    }

    fn next(&self, s: &World, a: &Action) -> World {
        let mut s = s.clone();
        let t = &mut s;
        match *a {
            Action::Start(p) => t.procs[p].phase = Doing::Race,
            Action::Create(p, lost) => {
                if lost {
                    t.faults.lost_replies -= 1;
                }
                self.round(t, p, lost);
            }
            Action::Heard(p) => {
                let ev = WatchedEvent {
                    event_type: EventType::NodeDeleted,
                    path: String::new(),
                };
                let again = waited(Woke::of(Wake::Watch(0, Ok(ev)), None, "/u"));
                assert!(matches!(again, Ok(true)), "a deletion races again");
                t.procs[p].phase = Doing::Race;
            }
            Action::Release(p) => {
                let proc = &t.procs[p];
                let (owner, _) = proc.guard.expect("held");
                if proc.sid == owner && !proc.clock_out {
                    if proc.up {
                        if t.node.is_some_and(|n| n.owner == owner) {
                            t.delete_node();
                        }
                    } else {
                        let d = proc.data(p);
                        t.procs[p].janitor.push((d, owner));
                    }
                }
                self.finish_call(t, p);
            }
            Action::Janitor(p) => {
                let proc = &mut t.procs[p];
                let (data, owner) = proc.janitor.remove(0);
                if owner == proc.sid && t.node == Some(Node { data, owner }) {
                    t.delete_node();
                }
            }
            Action::GiveUp(p) => {
                t.faults.give_ups -= 1;
                let proc = &t.procs[p];
                if proc.unsure && !self.seeded.give_up_forgets {
                    let d = proc.data(p);
                    let sid = proc.sid;
                    t.procs[p].janitor.push((d, sid));
                }
                t.procs[p].unsure = false;
                self.finish_call(t, p);
            }
            Action::ClockOut(p) => {
                t.faults.expiries -= 1;
                let proc = &mut t.procs[p];
                proc.up = false;
                proc.clock_out = true;
                if let Some(g) = proc.guard.as_mut() {
                    g.1 = true;
                }
                t.declared |= 1 << proc.sid;
            }
            Action::Reconnect(p, unclosed) => {
                let old = t.procs[p].sid;
                // The given-up session is closed first (its node goes), then the new one;
                // unless the close failed (the fault): its node waits for the expiry.
                if unclosed {
                    t.faults.unclosed -= 1;
                } else if t.node.is_some_and(|n| n.owner == old) {
                    t.delete_node();
                }
                let proc = &mut t.procs[p];
                proc.up = true;
                proc.clock_out = false;
                proc.sid = t.next_sid;
                t.next_sid += 1;
                // A waiter's watch went with its session: it races again.
                if proc.phase == Doing::Waiting {
                    proc.phase = Doing::Race;
                }
            }
            Action::Expire(sid) => {
                t.delete_node();
                for q in &mut t.procs {
                    if let Some(g) = q.guard.as_mut().filter(|g| g.0 == sid) {
                        g.1 = true;
                    }
                }
            }
            Action::Tamper => {
                t.faults.tampers -= 1;
                let owner = t.node.expect("a node").owner;
                t.delete_node();
                for q in &mut t.procs {
                    if let Some(g) = q.guard.as_mut().filter(|g| g.0 == owner) {
                        g.1 = true;
                    }
                }
            }
        }
        s
    }

    fn progress(&self, a: &Action) -> bool {
        !matches!(
            a,
            Action::Create(_, true)
                | Action::GiveUp(_)
                | Action::ClockOut(_)
                | Action::Reconnect(_, true)
                | Action::Tamper
        )
    }

    fn properties(&self) -> Vec<Property<Self, World>> {
        vec![
            (EXCLUSION, |_, s| {
                s.procs.iter().filter(|p| p.valid()).count() <= 1
            }),
            (HANDED_VALID, |_, s| !s.handed_invalid),
            (NOTHING_LEFT, |_, s| {
                s.procs.iter().all(|p| {
                    p.phase != Doing::Idle
                        || !p.janitor.is_empty()
                        || s.node
                            .is_none_or(|n| n.owner != p.sid || s.declared & (1 << p.sid) != 0)
                })
            }),
        ]
    }

    fn situations(&self) -> Vec<Property<Self, World>> {
        let mut out: Vec<Property<Self, World>> =
            vec![("a waiter on the holder's node", |_, s| {
                s.procs.iter().any(|p| p.phase == Doing::Waiting)
            })];
        if self.faults.lost_replies > 0 {
            out.push((
                "a create whose reply was lost, then won by reading back",
                |_, s| s.procs.iter().any(|p| p.valid() && p.read_back),
            ));
        }
        out
    }

    fn goal(&self, s: &World) -> bool {
        s.procs.iter().all(|p| p.left == 0)
    }

    fn show(&self, s: &World) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "    server: node {:?}", s.node);
        for (i, p) in s.procs.iter().enumerate() {
            let _ = writeln!(
                out,
                "    p{i}: session {} {}, {:?}{}{}{}",
                p.sid,
                if p.up { "up" } else { "declared lost" },
                p.phase,
                if p.unsure { " (a create unsure)" } else { "" },
                p.guard
                    .map(|g| format!(
                        " guard of session {}{}",
                        g.0,
                        if g.1 { " lost" } else { "" }
                    ))
                    .unwrap_or_default(),
                if p.valid() { " VALID" } else { "" },
            );
        }
        out
    }
}

fn single(procs: usize, acquisitions: u8, faults: Faults) -> Single {
    Single {
        procs,
        acquisitions,
        faults,
        seeded: Seeded::default(),
    }
}

#[test]
fn single_node_three_processes_two_acquisitions_each() {
    holds("single 3x2", &single(3, 2, Faults::default()));
}

#[test]
fn single_node_with_every_fault() {
    holds(
        "single 3x1, a lost reply, a session loss, a deleted node, a give-up",
        &single(
            3,
            1,
            Faults {
                lost_replies: 1,
                expiries: 1,
                tampers: 1,
                give_ups: 1,
                ..Faults::default()
            },
        ),
    );
}

/// A create's reply lost, the session given up, the new one made without closing it.
fn abandoned() -> Faults {
    Faults {
        lost_replies: 1,
        expiries: 1,
        unclosed: 1,
        ..Faults::default()
    }
}

#[test]
fn single_node_with_a_session_left_unclosed() {
    holds(
        "single 2x1, a lost reply, a session loss, its close failed",
        &single(2, 1, abandoned()),
    );
}

#[test]
fn seeded_single_node_faults_are_caught() {
    let lost = Faults {
        lost_replies: 1,
        ..Faults::default()
    };
    let mut m = single(1, 1, lost);
    m.seeded.no_read_back = true;
    caught("seeded: single, no read back", &m, LIVENESS);
    let mut m = single(
        1,
        1,
        Faults {
            lost_replies: 1,
            give_ups: 1,
            ..Faults::default()
        },
    );
    m.seeded.give_up_forgets = true;
    caught(
        "seeded: single, a give-up forgets its unsure create",
        &m,
        NOTHING_LEFT,
    );
    let mut m = single(2, 1, Faults::default());
    m.seeded.exists_is_won = true;
    caught("seeded: single, NodeExists taken as won", &m, EXCLUSION);
    // Our create's reply lost, the session given up and its close failed: the new session
    // finds our own call's node, of the old session, and must not take it for its own.
    let mut m = single(1, 1, abandoned());
    m.seeded.whose_blind_to_session = true;
    caught(
        "seeded: single, whose blind to the session",
        &m,
        HANDED_VALID,
    );
}
