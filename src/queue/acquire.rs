//! The one acquire algorithm under every sequential recipe.
//!
//! 1. Create `<dir>/_c_<uuid>-<marker><seq>` (ephemeral, sequential) and list `dir` in the
//!    same write: one round trip when nobody else is there. Missing parents are created as
//!    containers. If the create's reply is lost, look for our uuid before creating again,
//!    and keep only a node whose ephemeral owner is the current session.
//! 2. Order the listing by sequence and ask the recipe's rule which node blocks us.
//! 3. Arm a data watch on the blocker (`get_data_w`: a missing node answers `NoNode` and
//!    leaves no watch behind). Nodes only ever join behind us, so if the rule finds no
//!    blocker in our listing once the blocker is struck from it, the blocker's deletion
//!    lets us in without listing again; otherwise its deletion means "list again".
//! 4. In that second case, also watch the node that would block us once the blocker is
//!    gone (for a mutex or an election, the node two places ahead; for a reader, the
//!    writer before the one it waits for), in the same round trip. Its deletion (our
//!    blocker now holds, or that node gave up) makes us list again at once, during our
//!    blocker's turn, keeping the blocker's unspent watch: so when the blocker goes we
//!    usually know already that nothing else is ahead, and hold on its notification alone,
//!    with no round trip after it. The price is a second notification per release (to the
//!    waiter two places behind), never more per node: each node is watched by at most two
//!    waiters of a mutex or an election.
//! 5. While waiting, also wake on session events (a reconnect re-lists, a new session
//!    starts over), the caller's deadline, a cancel, and a slow re-check tick.
//! 6. On every way out that is not success, our node is deleted (in the background if the
//!    connection is in trouble).
//!
//! A gated recipe (the semaphore: `lease.rs`) runs these steps in its gate's queue first,
//! then, holding the gate, step 1 for its own node, whose turn is counted by the
//! [`Lease`] instead of steps 2 to 5.
//!
//! Here: the caller's side ([`acquire`], restarting attempts) and the listing of
//! [`participants`]. Step 1 (and 6) is [`enqueue`] in `enqueue.rs`; steps 2 to 5 are the
//! [`Waiter`] in `waiter.rs`, whose steps (list, arm, wait) each return the next. All of
//! them run in the call's one [`Attempt`] (`attempt.rs`: the call's client, wait, deadline,
//! cancel, session events and back-off, with the checks at the top of every round, and the
//! one rule for a request's error), as does the single node (`single.rs`). Every wait, step 5's and a pause after
//! connection trouble alike (and the other loops' that wait on ZooKeeper: the single
//! node's, the lease phase's, a leader's), goes through one [`wake`](super::wake::wake).

use super::attempt::{Attempt, Next, Place, Spec, Wait};
use super::cancel::Canceller;
use super::enqueue::enqueue;
use super::held::{Acquired, Participant};
use super::lease::{Gate, Lease};
use super::names;
use super::rules::Rule;
use super::waiter::Waiter;
use crate::client::Client;
use crate::error::escape;
use crate::error::{Error, Result};

/// Acquires a place at the head of the queue by its place's rule (behind its gate, if it
/// has one: see `lease.rs`). `Ok(None)`: not acquired within `wait` (nothing left behind).
pub(crate) fn acquire(
    client: &Client,
    spec: &Spec<'_>,
    wait: Wait,
    canceller: &Canceller,
) -> Result<Option<Acquired>> {
    acquire_after(client, spec, wait, canceller, |_| Ok(()))
}

/// [`acquire`], with `first` run in the call's context before its first attempt (a
/// semaphore records its permit count there): the call's wait, deadline, cancel and
/// measurements cover it too. `first`'s `Err(Next::Done(..))` ends the call so.
pub(crate) fn acquire_after(
    client: &Client,
    spec: &Spec<'_>,
    wait: Wait,
    canceller: &Canceller,
    first: impl FnOnce(&mut Attempt<'_>) -> std::result::Result<(), Next>,
) -> Result<Option<Acquired>> {
    let mut cx = Attempt::new(client, (spec.path, spec.place.kind()), wait, canceller);
    if let Err(Next::Done(r)) = first(&mut cx) {
        return cx.end(r);
    }
    loop {
        match attempt(&mut cx, spec) {
            Next::Restart => {
                log::info!(
                    "zkguard: {}: session changed or node vanished; queueing again",
                    escape(spec.path)
                );
                continue;
            }
            Next::Done(r) => return cx.end(r),
        }
    }
}

/// One attempt: our node (phase 1, [`enqueue`]), then our turn (phase 2, a [`Waiter`]);
/// for a lease [`Behind`](Place::Behind) a gate, first the gate's queue the same way
/// ([`Place::Gate`]), then, holding the gate, our lease and its count (the [`Lease`]).
fn attempt<'a>(cx: &mut Attempt<'a>, spec: &Spec<'a>) -> Next {
    let Place::Behind { gate, permits } = spec.place else {
        return queue_in(cx, spec);
    };
    let at_gate = Spec {
        dir: gate,
        place: Place::Gate {
            then: spec.dir,
            permits,
        },
        ..*spec
    };
    let gate = match queue_in(cx, &at_gate) {
        Next::Done(Ok(Some(node))) => Gate::new(cx.client, node),
        end => return end,
    };
    match enqueue(cx, spec) {
        Ok(queued) => Lease::new(cx, spec, queued, gate).run(permits),
        Err(next) => next,
    }
}

/// Our node in `spec`'s queue until its turn: [`enqueue`], then a [`Waiter`].
fn queue_in<'a>(cx: &mut Attempt<'a>, spec: &Spec<'a>) -> Next {
    match enqueue(cx, spec) {
        Ok(queued) => match Waiter::new(cx, spec, queued) {
            Some(waiter) => waiter.run(),
            None => Next::Restart,
        },
        Err(next) => next,
    }
}

/// The queue's contenders with their data, in order, and which of them hold it by `rule`
/// (nodes that go while we read are skipped).
pub(crate) fn participants(client: &Client, dir: &str, rule: Rule) -> Result<Vec<Participant>> {
    let names = match client.get_children(dir) {
        Ok((n, _)) => n,
        Err(Error::NoNode { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let q = names::order(dir, names)?;
    let holds = rule.holding(&q);
    let pending = client.pipeline(|p| {
        q.iter()
            .map(|x| p.get_data(&names::child(dir, &x.name)))
            .collect::<Vec<_>>()
    });
    let mut out = Vec::with_capacity(q.len());
    for ((x, p), holds) in q.into_iter().zip(pending).zip(holds) {
        match p.wait() {
            Ok((data, _)) => out.push(Participant {
                node: x.name,
                data,
                holds,
            }),
            Err(Error::NoNode { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
