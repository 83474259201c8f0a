//! Moving leadership on purpose: [`hand_over`] to the next candidate, for both styles.
//!
//! The design (docs/recipes.md, "Moving leadership"): a hand-over is a resign that looks
//! first and watches after. It reads the queue; with nobody behind the leader it does
//! nothing (the leader leads on: no leaderless moment into the void). Otherwise it starts an
//! observer, ends the term (the guard is marked released before the delete is sent, so
//! `is_valid()` is false and fenced writes are refused from then on; the server refuses
//! them once the node is gone), deletes the node, and waits, at most the caller's bound,
//! until the observer says a leader with a larger token: the successor. The next
//! candidate takes over on the deletion's notification as after any resign (a zkguard
//! candidate without a round trip, a Curator `LeaderLatch` after one listing), so nobody is
//! skipped and nothing but the leader's node changes.

use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue::names;

use super::observe::{LeaderChange, LeaderObserver};

/// Who took over from a hand-over ([`Leadership::hand_over`](crate::Leadership::hand_over),
/// [`Candidate::hand_over`](crate::Candidate::hand_over)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Successor {
    /// Its participant id (its node's data), as [`LeaderChange::Leader`] says it.
    pub id: String,
    /// Its term's fencing token: larger than the old leader's.
    pub token: u64,
}

/// The leader's term as a hand-over needs it.
pub(super) struct Term<'a> {
    pub(super) client: &'a Client,
    /// The election's path.
    pub(super) election: &'a str,
    pub(super) fair: bool,
    /// The term's node and token.
    pub(super) node: &'a str,
    pub(super) token: u64,
}

/// Hands `term` over to the next candidate: `Ok(None)` (nothing done) if a fair election's
/// queue has nobody behind it; else `step_down` ends the term and the successor is
/// waited for, `within` at most.
pub(super) fn hand_over(
    term: &Term<'_>,
    within: Duration,
    step_down: impl FnOnce() -> Result<()>,
) -> Result<Option<Successor>> {
    let not_leader = || Error::NotLeader {
        path: term.election.to_string(),
    };
    if term.fair {
        let (names, _) = term.client.get_children(term.election)?;
        let queue = names::order(term.election, names)?;
        match queue.first() {
            Some(first) if names::child(term.election, &first.name) == term.node => {}
            _ => return Err(not_leader()),
        }
        if queue.len() < 2 {
            return Ok(None);
        }
    }
    // Before the step down, so no change after it is missed; it first says this term.
    let observer = LeaderObserver::start(term.client, term.election, term.fair)?;
    step_down()?;
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match observer.events().recv_timeout(left) {
            Ok(LeaderChange::Leader { id, token }) if token > term.token => {
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
