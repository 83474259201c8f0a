//! The safety properties, each checked in every reachable state.

use super::state::{Config, Doing, Reply, WStep, World};
use super::{Modelled, Queue};

type Property = super::check::Property<Queue, World>;

pub(super) const EXCLUSION: &str = "mutual exclusion: at most one valid holder";
pub(super) const READ_WRITE: &str = "a valid writer holds alone (readers and writers excluded)";
pub(super) const PERMITS: &str = "no more valid permits than the semaphore has";
pub(super) const GONE_READS_INVALID: &str =
    "a holder whose node is gone already reads invalid (unless another party deleted it)";
pub(super) const FENCE: &str = "fencing tokens the server accepts never go down";
pub(super) const FAST_PATH: &str =
    "the fast path is taken where it should be: a view lets its blocker's deletion grant \
     exactly when one node blocks us, and a waiter that then hears (or finds) that deletion, \
     its own node's watch quiet, holds without listing again";
pub(super) const PARTICIPANTS: &str =
    "participants() says every valid holder whose node is there holds";
pub(super) const HANDED_VALID: &str =
    "a guard is valid when it is handed out: its node exists in the holder's live session \
     (unless another party deleted it)";
pub(super) const NOTHING_LEFT: &str =
    "nothing left behind: a process not acquiring or holding, with no background delete \
     pending, has no node in its live session";

pub(super) fn all() -> Vec<Property> {
    vec![
        (EXCLUSION, exclusion),
        (READ_WRITE, read_write),
        (PERMITS, permits),
        (GONE_READS_INVALID, gone_reads_invalid),
        (FENCE, |_, s| !s.fence_broken),
        (FAST_PATH, |_, s| !s.fast_missed),
        (HANDED_VALID, |_, s| !s.handed_invalid),
        (PARTICIPANTS, participants),
        (NOTHING_LEFT, nothing_left),
    ]
}

/// The valid guards (process, read) whose node was not deleted by another party.
fn holders(m: &Queue, s: &World) -> Vec<(usize, bool)> {
    s.procs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let g = p.guard?;
            (g.is_valid(p) && !s.tampered.contains(&g.seq)).then_some((i, m.config.procs[i].read))
        })
        .collect()
}

fn exclusion(m: &Queue, s: &World) -> bool {
    !matches!(m.config.recipe, Modelled::Mutex | Modelled::Election) || holders(m, s).len() <= 1
}

fn read_write(m: &Queue, s: &World) -> bool {
    if m.config.recipe != Modelled::RwLock {
        return true;
    }
    let h = holders(m, s);
    h.iter().all(|(_, read)| *read) || h.len() <= 1
}

fn permits(m: &Queue, s: &World) -> bool {
    match m.config.recipe {
        Modelled::Semaphore(n) => holders(m, s).len() <= n as usize,
        _ => true,
    }
}

fn gone_reads_invalid(_: &Queue, s: &World) -> bool {
    s.procs.iter().all(|p| {
        [p.guard, p.internal]
            .into_iter()
            .flatten()
            .all(|g| !g.is_valid(p) || s.node(g.seq).is_some() || s.tampered.contains(&g.seq))
    })
}

/// The situations a configuration must reach: the faults it allows happen, and the
/// algorithm's paths are taken.
pub(super) fn situations(c: &Config) -> Vec<Property> {
    let mut out: Vec<Property> = vec![(
        "a blocker deleted before its watch was set (NoNode, no watch)",
        |_, s| {
            s.procs.iter().any(|p| match (&p.phase, &p.reply) {
                (Doing::Waiter { seq, .. }, Some(Reply::Armed(_, gone))) => {
                    gone.iter().any(|g| g != seq)
                }
                _ => false,
            })
        },
    )];
    out.push((
        "a waiter on the fast path hearing its blocker's deletion, its own watch quiet",
        |_, s| {
            s.procs.iter().any(|p| match &p.phase {
                Doing::Waiter {
                    seq,
                    step: WStep::Wait(v),
                    ..
                } => {
                    let fired = |k: u8| p.recv.get(&k).is_some_and(|f| f.0);
                    v.grant_when_gone && fired(v.blocker) && !fired(*seq)
                }
                _ => false,
            })
        },
    ));
    if c.procs.len() >= 3 {
        out.push((
            "a waiter watching its blocker and the node two ahead",
            |_, s| {
                s.procs.iter().any(|p| {
                matches!(&p.phase, Doing::Waiter { step: WStep::Wait(v), .. } if v.next.is_some())
            })
            },
        ));
    }
    if c.faults.disconnects > 0 {
        out.push(("a lost create reply, our node found by its uuid", |_, s| {
            s.procs.iter().any(|p| {
                matches!(p.phase, Doing::Enqueuing { find: true, .. })
                    && matches!(p.reply, Some(Reply::Found(Some(_))))
            })
        }));
    }
    if c.faults.expiries > 0 {
        out.push(("a session expired by the server", |_, s| {
            s.server.ended != 0
        }));
        out.push(("a holder's guard lost with its session", |_, s| {
            s.procs
                .iter()
                .any(|p| p.clock_out && p.guard.is_some_and(|g| g.lost))
        }));
    }
    if c.faults.tampers > 0 {
        out.push(("a held node deleted by another party", |_, s| {
            !s.tampered.is_empty()
        }));
    }
    if c.recipe == Modelled::RwLock && c.procs.iter().filter(|p| p.read).count() >= 2 {
        out.push(("two readers holding at once", |m, s| {
            holders(m, s).iter().filter(|(_, read)| *read).count() >= 2
        }));
    }
    if let Modelled::Semaphore(n) = c.recipe {
        if n >= 2 && c.procs.len() as u32 > n {
            out.push((
                "every permit held, a contender waiting on the leases",
                |m, s| {
                    matches!(m.config.recipe, Modelled::Semaphore(n) if holders(m, s).len() == n as usize)
                        && s.procs
                            .iter()
                            .any(|p| matches!(p.phase, Doing::Lease { waiting: true, .. }))
                },
            ));
        }
    }
    out
}

fn nothing_left(_: &Queue, s: &World) -> bool {
    s.procs.iter().all(|p| {
        !matches!(p.phase, Doing::Idle)
            || !p.janitor.is_empty()
            || s.session_ended(p.sid)
            || s.server.nodes.iter().all(|n| n.owner != p.sid)
    })
}

fn participants(m: &Queue, s: &World) -> bool {
    holders(m, s).iter().all(|&(p, _)| {
        let g = s.procs[p].guard.expect("a holder's guard");
        s.node(g.seq).is_none() || m.heads(s, g.seq)
    })
}
