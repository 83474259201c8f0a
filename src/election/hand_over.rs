//! Moving leadership on purpose, for both styles: [`hand_over`] to the next candidate, and
//! [`hand_over_to`] a named one.
//!
//! The design (docs/recipes.md, "Moving leadership"). A hand-over to the next candidate is
//! a resign that looks first and watches after. It reads the queue; with nobody behind the
//! leader it does nothing (the leader leads on: no leaderless moment into the void).
//! Otherwise it starts an observer, ends the term (the guard is marked released before the
//! delete is sent, so `is_valid()` is false and fenced writes are refused from then on; the
//! server refuses them once the node is gone), deletes the node, and waits, at most the
//! caller's bound, until the observer says a leader with a larger token: the successor.
//! The next candidate takes over on the deletion's notification as after any resign (a
//! zkguard candidate without a round trip, a Curator `LeaderLatch` after one listing), so
//! nobody is skipped and nothing but the leader's node changes.
//!
//! To a named candidate T: the leader asks T first (it creates the ask node beside the
//! election's directory, `names::ask`, which T's waiter alone watches; T answers by
//! deleting it), so a T that is gone, frozen or cut off is found out while the term goes
//! on. Answered: one `multi` [T's node exists, delete each node between the leader and T,
//! delete the leader's node] ends the term and makes T the head at once; the candidates
//! between find their node gone and queue again at the back (zkguard's waiter and Curator's
//! `LeaderLatch` both do, woken by their predecessor's deletion). Not answered within the
//! bound, T gone, or the `multi` refused (T went meanwhile): a hand-over to the next
//! candidate, as above.

use std::time::{Duration, Instant};

use crossbeam_channel::{never, select, Receiver};

use crate::client::{Client, CreateMode, EventType, Op, WatchedEvent};
use crate::error::{escape, Error, Result};
use crate::lock::holding::Holding;
use crate::queue::names::{self, Contender};

use super::observe::{LeaderChange, LeaderObserver};

/// Who took over from a hand-over ([`Leadership::hand_over`](crate::Leadership::hand_over),
/// [`Candidate::hand_over`](crate::Candidate::hand_over), and their `hand_over_to`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Successor {
    /// Its participant id (its node's data), as [`LeaderChange::Leader`] says it.
    pub id: String,
    /// Its term's fencing token: larger than the old leader's.
    pub token: u64,
}

/// Whom a hand-over by choice ([`Leadership::hand_over_to`](crate::Leadership::hand_over_to),
/// [`Candidate::hand_over_to`](crate::Candidate::hand_over_to)) gives leadership to. A
/// `&str` or a `String` is an [`Id`](Prefer::Id).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Prefer {
    /// The first candidate queued behind the leader whose participant id is this.
    Id(String),
    /// The candidate queued last: the one that joined most recently. In a rolling deploy
    /// that is an instance already restarted, as soon as there is one, so leadership, once
    /// on a new instance, stays there for the rest of the deploy; before any is restarted,
    /// it is the old instance started last (restarted last in a deploy that goes in start
    /// order).
    Newest,
}

impl From<&str> for Prefer {
    fn from(id: &str) -> Prefer {
        Prefer::Id(id.to_string())
    }
}

impl From<String> for Prefer {
    fn from(id: String) -> Prefer {
        Prefer::Id(id)
    }
}

/// The leader's term as a hand-over needs it.
pub(super) struct Term<'a> {
    pub(super) holding: &'a Holding,
    /// The election's path.
    pub(super) election: &'a str,
}

impl Term<'_> {
    fn client(&self) -> &Client {
        self.holding.client()
    }

    fn not_leader(&self) -> Error {
        Error::NotLeader {
            path: self.election.to_string(),
        }
    }

    /// The queue, read now: the term's node must head it.
    fn queue(&self) -> Result<Vec<Contender>> {
        let (names, _) = self.client().get_children(self.election)?;
        let queue = names::order(self.election, names)?;
        match queue.first() {
            Some(first) if names::child(self.election, &first.name) == self.holding.path() => {
                Ok(queue)
            }
            _ => Err(self.not_leader()),
        }
    }
}

/// Hands `term` over to the next candidate: `Ok(None)` (nothing done) if a fair election's
/// queue has nobody behind it; else `step_down` (with no ops: a resign) ends the term and
/// the successor is waited for, `within` at most.
pub(super) fn hand_over(
    term: &Term<'_>,
    within: Duration,
    step_down: impl FnOnce(&[Op]) -> Result<()>,
) -> Result<Option<Successor>> {
    if !term.holding.single() && term.queue()?.len() < 2 {
        return Ok(None);
    }
    successor(term, within, || step_down(&[]))
}

/// Hands `term` (a fair election's) over to the candidate `to` prefers: asks it and waits
/// `within` at most for its answer; answered, `step_down` ends the term with the ops that
/// make it the head (its node's check, the deletes of the nodes between) before the
/// leader's delete, in one `multi`; else as [`hand_over`]. Then the successor is waited
/// for, `within` at most. [`Prefer::Newest`] with nobody behind: `Ok(None)`, nothing done.
pub(super) fn hand_over_to(
    term: &Term<'_>,
    to: &Prefer,
    within: Duration,
    step_down: impl FnOnce(&[Op]) -> Result<()>,
) -> Result<Option<Successor>> {
    if term.holding.single() {
        return Err(Error::InvalidArgument {
            name: "hand-over target",
            reason: format!(
                "{} is an unfair election: it has no queue, so leadership can only go to \
                 whoever is fastest (use hand_over)",
                escape(term.election)
            ),
        });
    }
    let queue = term.queue()?;
    let target = match to {
        Prefer::Id(id) => find(term, &queue[1..], id)?,
        Prefer::Newest if queue.len() < 2 => return Ok(None),
        Prefer::Newest => queue[queue.len() - 1].name.clone(),
    };
    if !answered(term, &target, within)? {
        return hand_over(term, within, step_down);
    }
    // Read again: between the ask and the answer candidates may have left (never joined
    // ahead of the target: nodes only join at the back).
    let queue = term.queue()?;
    let Some(at) = queue.iter().position(|c| c.name == target) else {
        return hand_over(term, within, step_down);
    };
    let path = |c: &Contender| names::child(term.election, &c.name);
    let mut ops = vec![Op::Check {
        path: path(&queue[at]),
        version: None,
    }];
    ops.extend(queue[1..at].iter().map(|c| Op::Delete {
        path: path(c),
        version: None,
    }));
    successor(term, within, || step_down(&ops))
}

/// The name of the first node of `behind` whose data is `id`; none is bad input (or, if
/// the term ended meanwhile, `NotLeader`).
fn find(term: &Term<'_>, behind: &[Contender], id: &str) -> Result<String> {
    let dir = term.election;
    let reads = term.client().pipeline(|p| {
        behind
            .iter()
            .map(|c| p.get_data(&names::child(dir, &c.name)))
            .collect::<Vec<_>>()
    });
    let mut found = None;
    for (c, read) in behind.iter().zip(reads) {
        match read.wait() {
            Ok((data, _)) if found.is_none() && data == id.as_bytes() => {
                found = Some(c.name.clone())
            }
            Ok(_) | Err(Error::NoNode { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    found.ok_or_else(|| match term.holding.is_gone() {
        // Ended meanwhile (another hand-over of this term, whose `multi` may have deleted
        // the node sought): not an unknown id.
        true => term.not_leader(),
        false => Error::InvalidArgument {
            name: "hand-over target",
            reason: format!(
                "no candidate with id {} is queued behind the leader of {}",
                escape(id),
                escape(dir)
            ),
        },
    })
}

/// Asks the candidate whose node is `target` to take over (the ask node, created with the
/// term's ACL, ephemeral), and waits `within` at most for its answer (the ask deleted):
/// whether it came. Its node's deletion ends the wait at once (false). An ask left
/// unanswered is deleted (else it would go with the session).
fn answered(term: &Term<'_>, target: &str, within: Duration) -> Result<bool> {
    let c = term.client();
    let ask = names::ask(term.election, target);
    let node = names::child(term.election, target);
    let data = term.holding.token().to_string();
    let (created, ask_w, node_w) = c.pipeline(|p| {
        (
            p.create_with_acl(
                &ask,
                data.as_bytes(),
                CreateMode::Ephemeral,
                term.holding.acl(),
            ),
            p.exists_w(&ask),
            p.exists_w(&node),
        )
    });
    match created.wait() {
        // Another hand-over of this term asked already: its answer does for both.
        Ok(_) | Err(Error::NodeExists { .. }) => {}
        Err(e) => return Err(e),
    }
    let (ask_there, ask_rx) = ask_w.wait()?;
    let (node_there, node_rx) = node_w.wait()?;
    let answered = match (ask_there, node_there) {
        (None, _) => true,
        (_, None) => false,
        _ => answer_within(&ask_rx, node_rx, within),
    };
    if !answered {
        let _ = c.delete(&ask, None);
    }
    Ok(answered)
}

/// Waits for the ask's deletion (`ask`), or the target node's (`node`: false), `within`
/// at most.
fn answer_within(
    ask: &Receiver<WatchedEvent>,
    node: Receiver<WatchedEvent>,
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    let mut node = node;
    loop {
        select! {
            recv(ask) -> ev => return matches!(ev, Ok(ev) if ev.event_type == EventType::NodeDeleted),
            recv(node) -> ev => match ev {
                Ok(ev) if ev.event_type == EventType::NodeDeleted => return false,
                // A data change (a revocation request): its watch is spent; the ask's goes on.
                Ok(_) => node = never(),
                Err(_) => return false,
            },
            recv(crossbeam_channel::at(deadline)) -> _ => return false,
        }
    }
}

/// Starts an observer, ends the term with `step_down`, and waits `within` at most for the
/// observer to say a leader with a larger token.
fn successor(
    term: &Term<'_>,
    within: Duration,
    step_down: impl FnOnce() -> Result<()>,
) -> Result<Option<Successor>> {
    // Before the step down, so no change after it is missed; it first says this term.
    let observer = LeaderObserver::start(term.client(), term.election, !term.holding.single())?;
    step_down()?;
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match observer.events().recv_timeout(left) {
            Ok(LeaderChange::Leader { id, token }) if token > term.holding.token() => {
                return Ok(Some(Successor { id, token }))
            }
            Ok(_) => {}
            Err(_) => {
                return Err(Error::Timeout {
                    op: "hand over (no successor seen leading)",
                    path: term.election.to_string(),
                    after: within,
                })
            }
        }
    }
}
