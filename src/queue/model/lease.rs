//! The semaphore's lease phase (`Lease::run` in queue/lease.rs), run while the process
//! holds the gate (the semaphore's internal lock): list the leases (with a child watch only when about to
//! wait), count them by the library's `lease_count`, and wait for a lease to come or go, the
//! internal lock to be lost, or a session event (`Woke::of`, so `News::of`).

use super::state::{Dir, Doing, Node, Reply, World};
use super::Queue;
use crate::queue::attempt::{Next, Woke};
use crate::queue::names;
use crate::queue::rules::{lease_count, Count};
use crate::queue::wake::Wake;

impl Queue {
    fn permits(&self) -> u32 {
        match self.config.recipe {
            super::Modelled::Semaphore(n) => n,
            _ => unreachable!("a lease loop outside a semaphore"),
        }
    }

    /// The top of the loop: our session, then the create's listing or a new one.
    pub(super) fn lease_list(&self, s: &mut World, p: usize) {
        let Doing::Lease {
            owner, want_watch, ..
        } = s.procs[p].phase
        else {
            unreachable!()
        };
        let Some(listing) = self.round(s, p, owner) else {
            return;
        };
        if let Some(l) = listing {
            return self.count(s, p, l, false);
        }
        if let Doing::Lease { out, .. } = &mut s.procs[p].phase {
            *out = true;
        }
        let sid = s.procs[p].sid;
        s.send(p, |s| {
            if want_watch {
                s.watch_children(sid, Dir::Leases);
            }
            Reply::Listed(s.list(Dir::Leases))
        });
    }

    pub(super) fn lease_answered(&self, s: &mut World, p: usize, reply: Reply) {
        let Doing::Lease { want_watch, .. } = s.procs[p].phase else {
            unreachable!()
        };
        if let Doing::Lease { out, .. } = &mut s.procs[p].phase {
            *out = false;
        }
        // Else connection trouble: a pause, then the loop again.
        if let Reply::Listed(l) = reply {
            self.count(s, p, l, want_watch);
        }
    }

    /// `lease_count` on a listing, and where it leads.
    fn count(&self, s: &mut World, p: usize, listing: Vec<Node>, watched: bool) {
        let Doing::Lease { seq, owner, .. } = s.procs[p].phase else {
            unreachable!()
        };
        let recipe = self.config.recipe;
        let names: Vec<String> = listing.iter().map(|n| n.name(recipe)).collect();
        let leases = names::order(Dir::Leases.path(), names.iter().map(String::as_str))
            .expect("the model names its nodes as the recipes do");
        let me = s
            .server
            .nodes
            .iter()
            .chain(listing.iter())
            .find(|n| n.seq == seq)
            .map(|n| n.name(recipe))
            .unwrap_or_default();
        if watched {
            s.procs[p].lease_watch = Some(false);
        }
        let permits = self.permits() + u32::from(self.config.seeded.count_off_by_one);
        match lease_count(&leases, &me, permits) {
            Count::Gone => {
                s.procs[p].attempt_node = None;
                self.restart(s, p);
            }
            Count::Permit => {
                let proc = &mut s.procs[p];
                proc.attempt_node = None;
                proc.lease_watch = None;
                self.hold(s, p, seq, owner);
            }
            Count::Wait => {
                let proc = &mut s.procs[p];
                let Doing::Lease {
                    want_watch,
                    waiting,
                    ..
                } = &mut proc.phase
                else {
                    unreachable!()
                };
                if proc.lease_watch.is_none() {
                    // Listed without a watch: list again, leaving one.
                    *want_watch = true;
                } else {
                    *want_watch = false;
                    *waiting = true;
                }
            }
        }
    }

    /// `await_leases`: the child watch fired (count again; the watch is spent).
    pub(super) fn lease_heard(&self, s: &mut World, p: usize) {
        let proc = &mut s.procs[p];
        proc.lease_watch = None;
        if let Doing::Lease { waiting, .. } = &mut proc.phase {
            *waiting = false;
        }
    }

    /// `await_leases`: the internal lock was lost.
    pub(super) fn lease_lost(&self, s: &mut World, p: usize) {
        self.restart(s, p);
    }

    /// `await_leases`: a session event, by `Woke::of` (so `News::of`).
    pub(super) fn lease_news(&self, s: &mut World, p: usize) {
        let Doing::Lease { owner, .. } = s.procs[p].phase else {
            unreachable!()
        };
        let ev = super::client::session_event(s.procs[p].events.remove(0), owner);
        match Woke::of(Wake::Session(Ok(ev)), Some(i64::from(owner)), "/s") {
            Woke::Again => {}
            Woke::List => {
                s.procs[p].lease_watch = None;
                if let Doing::Lease { waiting, .. } = &mut s.procs[p].phase {
                    *waiting = false;
                }
            }
            Woke::End(Next::Restart) => self.restart(s, p),
            Woke::End(Next::Done(_)) => unreachable!("the model never closes a client"),
            Woke::Watch(..) => unreachable!("a session event is no watch's"),
        }
    }
}
