//! The candidate's thread and its caller, step by step, in the model: which steps are
//! enabled (`proc_actions`), and the thread's decisions through the library's `elected`,
//! `heard` and `proven` with the `Machine`'s transitions.

use super::super::{elected, heard, proven, Elected, Heard, Proof};
use super::{Action, Candidates, ModelNode, Phase, Thread, World};
use crate::error::Error;
use crate::queue::Wake;

impl Candidates {
    pub(super) fn proc_actions(&self, s: &World, p: usize, out: &mut Vec<Action>) {
        let c = &s.cands[p];
        if let Some(&(_, owner)) = c.janitor.first() {
            if owner != c.sid || c.up {
                out.push(Action::Janitor(p));
            }
        }
        match c.thread {
            Thread::Top => out.push(Action::Top(p)),
            Thread::Electing(node) => {
                // A cancel is seen at the top of every round (`Attempt::checked`), before
                // a create.
                let cancelled = c.cancel || c.shut;
                if cancelled {
                    out.push(Action::Cancelled(p));
                }
                match node {
                    None if c.up && !c.clock_out && !cancelled => out.push(Action::Create(p)),
                    None => {}
                    Some(seq) => match s.node(seq) {
                        Some((_, owner)) if owner == c.sid => {
                            let head = s.nodes.first().is_some_and(|n| n.0 == seq);
                            if c.up && (head || self.seeded.lead_without_head) {
                                out.push(Action::Grant(p));
                            }
                        }
                        _ => out.push(Action::Requeue(p)),
                    },
                }
            }
            Thread::Leading(_) => {
                if c.lost {
                    out.push(Action::WokeLost(p));
                }
                if !c.events.is_empty() {
                    out.push(Action::WokeEvent(p));
                }
                if c.wake {
                    out.push(Action::WokeWake(p));
                }
            }
            Thread::Ended => {}
        }
        if !c.stopped {
            if s.faults.resigns > 0
                && matches!(
                    c.m.phase(),
                    Phase::Leading(_) | Phase::Suspended(_) | Phase::Lost(_)
                )
            {
                out.push(Action::Resign(p));
            }
            if s.faults.stops > 0 {
                out.push(Action::Stop(p));
            }
        }
        if c.up && s.faults.disconnects > 0 {
            out.push(Action::Disconnect(p));
        }
        if !c.up && !c.clock_out && s.faults.expiries > 0 {
            out.push(Action::ClockOut(p));
        }
        if !c.up {
            out.push(Action::Reconnect(p));
        }
    }

    /// `run`'s loop reached the election's outcome `r`.
    pub(super) fn elected(
        &self,
        s: &mut World,
        p: usize,
        r: crate::error::Result<Option<ModelNode>>,
    ) {
        match elected(r) {
            Elected::Lead(t) => self.lead(s, p, t),
            Elected::Again => s.top(p),
            Elected::End | Elected::Fail(_) => unreachable!("no error but a cancel is modelled"),
        }
    }

    /// `lead`: subscribe, the guard (`Holding::new`), `begin`.
    pub(super) fn lead(&self, s: &mut World, p: usize, t: ModelNode) {
        let c = &mut s.cands[p];
        c.events.clear();
        c.lost = false;
        let gone = c.sid != t.owner || c.clock_out;
        let mut out = Vec::new();
        let began = c.m.begin(&t, gone, &mut out);
        s.said(p, &out);
        if began {
            s.cands[p].thread = Thread::Leading(t);
        } else {
            s.release(p, t);
            s.top(p);
        }
    }

    /// A leader's wake-up, by `heard`.
    pub(super) fn woke(&self, s: &mut World, p: usize, woke: Wake) {
        let Thread::Leading(t) = s.cands[p].thread else {
            unreachable!()
        };
        let is_term = s.cands[p].m.is_term(&t);
        match heard(woke, || is_term) {
            Heard::Wait => {}
            Heard::Lost => s.finish(p, t, !self.seeded.no_requeue_after_loss),
            Heard::Over => s.top(p),
            Heard::Prove => self.prove(s, p, t),
        }
    }

    /// The proof (`confirm`: a quorum write behind a check of the node, on its session),
    /// by `proven`.
    pub(super) fn prove(&self, s: &mut World, p: usize, t: ModelNode) {
        let c = &s.cands[p];
        let r = if !c.up || c.clock_out {
            Err(Error::ConnectionLoss)
        } else if c.sid == t.owner && s.node(t.seq) == Some((t.seq, t.owner)) {
            Ok(())
        } else {
            Err(Error::LockLost {
                path: "/e".to_string(),
            })
        };
        match proven(r) {
            Proof::Restore => {
                let mut out = Vec::new();
                let restored = s.cands[p].m.restore(&t, &mut out);
                s.said(p, &out);
                if !restored {
                    s.top(p);
                }
            }
            Proof::Lost => s.finish(p, t, !self.seeded.no_requeue_after_loss),
            // Connected: a slow server (not modelled); else the next event decides.
            Proof::Retry => {}
        }
    }
}
