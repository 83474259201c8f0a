//! The second waiting phase, beside the [`Waiter`](super::waiter::Waiter): a node that
//! waits by count while its recipe holds a gate (Apache Curator's
//! `InterProcessSemaphoreV2`, the one gated recipe: its internal lock is the gate, its
//! leases are counted). [`acquire`](super::acquire::acquire) takes the gate's queue first
//! (an exclusive lock, enqueue and a `Waiter` as for a `Mutex`), then enqueues our lease
//! and runs [`Lease::run`]: list the leases, count them ([`lease_count`]: a permit when
//! every lease, ours included, fits within the permits), else wait on a watch of the lease
//! list and of our gate node, the session, a cancel and the deadline, and count again. The
//! gate is let go (in the background) as the phase ends, whichever way.
//!
//! Counting is safe on its own: a lease counted within the permits in a listing taken
//! after it was made never makes more than the permits hold. The gate is what keeps
//! waiters from blocking one another: only its holder waits by count, watching the whole
//! lease list, so a release wakes it alone; one that loses its gate node (deleted, or its
//! session gone) deletes its lease and queues again.

use crossbeam_channel::Receiver;

use super::attempt::{Attempt, Fired, Next, Spec, Wait, Woke};
use super::enqueue::{OwnNode, Queued};
use super::held::Acquired;
use super::names;
use super::rules::{lease_count, Count};
use crate::client::{Check, Client, Names, Pending, WatchedEvent};
use crate::error::{escape, Error};

/// The gate while we hold it (a semaphore's internal lock). Dropping it lets go in the
/// background, off the caller's path: the acquire returns as soon as its lease is counted.
pub(super) struct Gate {
    client: Client,
    node: Acquired,
}

impl Gate {
    pub(super) fn new(client: &Client, node: Acquired) -> Gate {
        Gate {
            client: client.clone(),
            node,
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.client
            .delete_unwaited(&self.node.path, Check::None, self.node.owner);
    }
}

/// A listing of the leases under way, with a watch or without.
enum Listing {
    Watched(Pending<(Names, Receiver<WatchedEvent>)>),
    Plain(Pending<Names>),
}

/// What the lease phase has armed to wait on.
struct Armed {
    /// The lease list (set by a listing that asked for it).
    leases: Option<Receiver<WatchedEvent>>,
    /// Our gate node, armed with the first listing that leaves a watch: its deletion is
    /// the gate's loss.
    gate: Option<Receiver<WatchedEvent>>,
}

/// The lease phase of one attempt: holding `gate`, our lease (`queued`) waits by count.
pub(super) struct Lease<'a, 's> {
    cx: &'s mut Attempt<'a>,
    spec: &'s Spec<'a>,
    at: OwnNode<'a>,
    listing: Option<Names>,
    gate: Gate,
}

impl<'a, 's> Lease<'a, 's> {
    pub(super) fn new(
        cx: &'s mut Attempt<'a>,
        spec: &'s Spec<'a>,
        queued: Queued<'a>,
        gate: Gate,
    ) -> Lease<'a, 's> {
        Lease {
            cx,
            spec,
            at: queued.at,
            listing: queued.listing,
            gate,
        }
    }

    /// Counts the leases until ours is one of the `permits`, or the attempt ends.
    pub(super) fn run(mut self, permits: u32) -> Next {
        let Some(node) = self.at.node.clone() else {
            return Next::Restart;
        };
        let me = names::base(&node.path).to_string();
        // A listing leaves a watch only when we are about to wait: a contender that gets
        // in leaves no watch behind to be woken by later leases.
        let mut armed = Armed {
            leases: None,
            gate: None,
        };
        let mut want_watch = false;
        self.cx.reset_backoff();
        loop {
            if let Err(end) = self.cx.live(Some(node.owner)) {
                return end;
            }
            let names = match self.listing.take() {
                Some(names) => names,
                None => match self.list(want_watch, &mut armed) {
                    Ok(Some(names)) => names,
                    Ok(None) => continue, // connection trouble, paused
                    Err(end) => return end,
                },
            };
            let leases = match names::order(self.spec.dir, names.iter()) {
                Ok(q) => q,
                Err(e) => return Next::Done(Err(e)),
            };
            match lease_count(&leases, &me, permits) {
                Count::Gone => {
                    // Our lease is gone: deleted by someone, or its session ended.
                    self.at.node = None;
                    return Next::Restart;
                }
                Count::Permit if self.cx.client.is_closing() => {
                    return Next::Done(Err(Error::Closed))
                }
                Count::Permit => return Next::Done(Ok(self.at.take())),
                Count::Wait => {}
            }
            if matches!(self.cx.wait, Wait::Try) {
                return Next::Done(Ok(None));
            }
            let Some(w) = armed.leases.take() else {
                want_watch = true; // listed without a watch: list again, leaving one
                continue;
            };
            want_watch = false;
            if let Some(end) = self.await_leases(&w, &mut armed.gate, node.owner) {
                return end;
            }
        }
    }

    /// The lease list, with a watch on it (and on our gate node, unless watched) if
    /// `want_watch`; `Ok(None)`: connection trouble (after a pause), `Err`: the attempt
    /// ends so.
    fn list(
        &mut self,
        want_watch: bool,
        armed: &mut Armed,
    ) -> std::result::Result<Option<Names>, Next> {
        let c = self.cx.bounded()?;
        let (dir, gate) = (self.spec.dir, self.gate.node.path.as_str());
        let arm_gate = want_watch && armed.gate.is_none();
        let (listing, gate_read) = c.pipeline(|p| {
            p.ring(self.cx.bell());
            let listing = if want_watch {
                Listing::Watched(p.list_w(dir))
            } else {
                Listing::Plain(p.list(dir))
            };
            (listing, arm_gate.then(|| p.get_data_w(gate)))
        });
        let listed = match listing {
            Listing::Watched(p) => p.wait().map(|(names, w)| (names, Some(w))),
            Listing::Plain(p) => p.wait().map(|names| (names, None)),
        };
        let outcome = listed.and_then(|listed| match gate_read.map(|p| p.wait()) {
            Some(Ok((_, _, w))) => Ok((listed, Some(w))),
            Some(Err(e)) => {
                if matches!(e, Error::NoNode { .. }) {
                    self.gate_lost();
                }
                Err(e)
            }
            None => Ok((listed, None)),
        });
        match outcome {
            Ok(((names, leases), gate)) => {
                self.cx.reset_backoff();
                armed.leases = leases;
                if gate.is_some() {
                    armed.gate = gate;
                }
                Ok(Some(names))
            }
            // Our gate node missing (`NoNode`, logged above) restarts as our lease would.
            Err(e) => self.cx.failed(e, true).map(|()| None),
        }
    }

    /// Waits, holding the gate, until a lease comes or goes or the connection comes back
    /// (`None`: count again), or the attempt ends (the wake-up rule, [`Woke::of`]). A
    /// change of our gate node's data spends its watch: the next listing arms it again.
    fn await_leases(
        &self,
        leases: &Receiver<WatchedEvent>,
        gate: &mut Option<Receiver<WatchedEvent>>,
        owner: i64,
    ) -> Option<Next> {
        const GATE: usize = 1;
        let gate_rx = gate.clone().unwrap_or_else(crossbeam_channel::never);
        loop {
            return match self.cx.woke(&[leases, &gate_rx], None, Some(owner)) {
                Woke::Watch(GATE, Fired::Deleted) => {
                    self.gate_lost();
                    Some(Next::Restart)
                }
                Woke::Watch(GATE, Fired::Changed) => {
                    *gate = None;
                    None
                }
                // A lease came or went, or the connection came back: count again.
                Woke::Watch(..) | Woke::List => None,
                Woke::Again => continue,
                Woke::End(end) => Some(end),
            };
        }
    }

    fn gate_lost(&self) {
        log::info!(
            "zkguard: {}: internal lock lost while waiting for a permit",
            escape(self.spec.path)
        );
    }
}
