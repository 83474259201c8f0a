//! The guard of the guard style: proof of leadership, resigned on drop.

use std::time::Duration;

use crate::client::Op;
use crate::error::{Error, Result};
use crate::lock::api::{guard_api, Guard};
use crate::lock::holding::{Holding, OneNode};

use super::hand_over::{hand_over, hand_over_to, Prefer, Successor, Term};

/// Leadership of a [`LeaderElection`](crate::LeaderElection), won by
/// [`lead`](crate::LeaderElection::lead). Dropping it resigns: the node's delete is
/// written and the drop returns (its answer is the background's, docs/semantics.md, "What
/// a returned drop means"), and the next candidate takes over;
/// [`resign`](Leadership::resign) waits for the answer.
///
/// # Valid, suspended, lost
///
/// - [`is_valid`](Leadership::is_valid) is false at once when the connection drops (the
///   session may still be alive, but this process cannot know whether it still leads), true
///   again if the client gets back within the session, and false for good once lost.
/// - Leadership is *lost* when the session expires (counted by the client itself, so a
///   partitioned leader knows before the server can let anyone else lead), the client is
///   closed, or the node is deleted by someone else. [`lost`](Leadership::lost) fires then.
/// - [`confirm`](Leadership::confirm) proves leadership at the instant it runs, with a
///   quorum write: call it before an action that must never be taken by two leaders.
///
/// It is a [`Guard`](crate::Guard), with the same methods as a lock's guard; where a lock's
/// guard says [`Error::LockLost`](crate::Error::LockLost), `confirm` and `release` (which is
/// [`resign`](Leadership::resign)) say [`Error::NotLeader`](crate::Error::NotLeader).
/// [`revocation`](Leadership::revocation) fires when someone asks the leader to step down
/// with [`revoke`](crate::revoke) on its node; stepping down is up to the leader. (The
/// request spends the watch of a Curator `LeaderLatch` right behind the leader, which then
/// does not lead when it resigns: docs/recipes.md, "Revocation".)
///
/// A leader should stop its work as soon as it is not valid (Curator's standard policy),
/// and pass [`token`](Leadership::token) to the resources it writes, so that one paused
/// past its session's expiry is refused by them.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// # let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// use zkguard::channel::{select, tick};
/// let election = zkguard::LeaderElection::new(&client, "/services/compactor", "host-a")?;
/// let leadership = election.lead()?;
/// let lost = leadership.lost();
/// let work = tick(std::time::Duration::from_secs(1));
/// loop {
///     select! {
///         recv(lost) -> _ => break, // stop at once: someone else may lead soon
///         recv(work) -> _ => {
///             leadership.confirm()?; // before the one step that must not run twice
///             // ... compact, sending leadership.token() along
///         }
///     }
/// }
/// # Ok(()) }
/// ```
#[must_use = "leadership is resigned as soon as it is dropped"]
pub struct Leadership {
    term: LeaderNode,
}

guard_api!(Leadership, term);

impl Leadership {
    pub(crate) fn new(holding: Holding, election: &str) -> Leadership {
        Leadership {
            term: LeaderNode {
                holding,
                election: election.to_string(),
            },
        }
    }

    /// Steps down: deletes the node, so the next candidate leads, and reports how the
    /// delete went. [`Error::NotLeader`] if leadership had already been lost; on a
    /// connection error the delete is retried in the background (dropping does the same,
    /// quietly). The same as [`release`](Leadership::release).
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] if leadership had already been lost; the errors every request
    /// can return (see [`Client`](crate::Client#errors-every-request-can-return)) from the
    /// delete, other than connection errors: [`Error::NoAuth`] if the election's directory
    /// does not let this identity delete its node (the node stays until its session ends).
    pub fn resign(self) -> Result<()> {
        Guard::release(self)
    }

    /// Hands leadership to the next candidate in the queue, and says who took over.
    ///
    /// With nobody queued behind this leader (a fair election), it does nothing and returns
    /// `Ok(None)`: this process still leads (a resign would leave nobody leading). Otherwise
    /// the term ends first, before anything is sent: from then on
    /// [`is_valid`](Leadership::is_valid) is false and [`fenced_multi`](Leadership::fenced_multi)
    /// is refused ([`Error::NotLeader`]); then the node is deleted, exactly as
    /// [`resign`](Leadership::resign) does (the next candidate, zkguard's or a Curator
    /// `LeaderLatch`, takes over on the deletion's notification, as after a resign: nobody
    /// is skipped, and there are never two valid leaders), and it waits, at most
    /// `within`, until a successor is seen leading: `Ok(Some(successor))`, its token larger
    /// than this term's. An unfair election has no queue: there the term always ends and
    /// the fastest candidate is the successor.
    ///
    /// ```
    /// # #[cfg(feature = "testing")]
    /// # fn main() -> zkguard::Result<()> {
    /// # let cluster = zkguard::testing::TestCluster::start(1)?;
    /// # let client = zkguard::Client::connect(&cluster.connect_string())?;
    /// use std::time::Duration;
    /// let a = zkguard::LeaderElection::new(&client, "/doc/hand-over", "host-a")?;
    /// let leadership = a.lead()?;
    /// // Alone in the queue: nothing to hand over to; still leading.
    /// assert_eq!(leadership.hand_over(Duration::from_secs(30))?, None);
    /// assert!(leadership.is_valid());
    /// let b = zkguard::LeaderElection::new(&client, "/doc/hand-over", "host-b")?.join()?;
    /// # while a.participants()?.len() < 2 { std::thread::sleep(Duration::from_millis(10)) }
    /// let successor = leadership.hand_over(Duration::from_secs(30))?.expect("b queued");
    /// assert_eq!(successor.id, "host-b");
    /// assert!(successor.token > leadership.token());
    /// assert!(!leadership.is_valid()); // this term is over
    /// # Ok(()) }
    /// # #[cfg(not(feature = "testing"))] fn main() {}
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] if leadership had been lost already (nothing done);
    /// [`Error::Timeout`] if the term ended but no successor was seen leading within
    /// `within` (the one behind left meanwhile, or is slow); the errors every request can
    /// return (see [`Client`](crate::Client#errors-every-request-can-return)) from the
    /// queue's read (nothing done).
    pub fn hand_over(&self, within: Duration) -> Result<Option<Successor>> {
        self.handing(|term, step_down| hand_over(term, within, step_down))
    }

    /// Hands leadership to the candidate `to` names, and says who took over: the one whose
    /// participant id is given (`"host-c"`, [`Prefer::Id`]: the first queued behind this
    /// leader with that id), or the one queued last ([`Prefer::Newest`]: in a rolling
    /// deploy, an instance already restarted). The candidates between them queue again at
    /// the back, behind it; nobody behind it is moved. [`Prefer::Newest`] with nobody
    /// queued behind does nothing and returns `Ok(None)`, as
    /// [`hand_over`](Leadership::hand_over) does.
    ///
    /// It asks that candidate first, while this term goes on, and waits `within` at most
    /// for its answer (a zkguard candidate answers from its waiter, without a round trip of
    /// its own to wait for; a Curator `LeaderLatch` cannot). Answered, the term ends as
    /// [`hand_over`](Leadership::hand_over)'s does ([`is_valid`](Leadership::is_valid)
    /// false and fenced writes refused before anything is sent), and one `multi` deletes this
    /// leader's node and the nodes between, only while the named candidate's node exists:
    /// it is the head, and leads, on that one write's notification. Not answered within
    /// `within` (it is frozen, cut off, slow, gone, or a `LeaderLatch`), or gone before the
    /// `multi`: leadership moves as [`hand_over`](Leadership::hand_over) moves it, to the
    /// next candidate, and the returned [`Successor`] says who (compare its `id`). Either
    /// way the successor is waited for `within` at most again, so the call takes at most
    /// about twice `within`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if no candidate with the id is queued behind this leader
    /// (its own id included), or the election is unfair (it has no queue): nothing done,
    /// still leading. Otherwise as [`hand_over`](Leadership::hand_over): before the term
    /// ends (the reads, the ask's create: nothing done, still leading) or after (a
    /// [`Error::Timeout`] waiting for the successor).
    pub fn hand_over_to(
        &self,
        to: impl Into<Prefer>,
        within: Duration,
    ) -> Result<Option<Successor>> {
        let to = to.into();
        self.handing(|term, step_down| hand_over_to(term, &to, within, step_down))
    }

    /// Runs a hand-over on this term: `Error::NotLeader` if it is over; its step down
    /// deletes the node behind the ops given, in one `multi` ([`Holding::release_with`]).
    fn handing(
        &self,
        hand: impl FnOnce(&Term<'_>, &dyn Fn(&[Op]) -> Result<()>) -> Result<Option<Successor>>,
    ) -> Result<Option<Successor>> {
        let h = &self.term.holding;
        let election = &self.term.election;
        if h.is_gone() {
            return Err(not_leader(
                Error::LockLost {
                    path: h.path().to_string(),
                },
                election,
            ));
        }
        let term = Term {
            holding: h,
            election,
        };
        hand(&term, &|ops| match h.release_with(ops) {
            Ok(_) => Ok(()),
            Err(e) if e.is_connection_error() => Ok(()), // deleted in the background
            Err(e) => Err(not_leader(e, election)),
        })
    }
}

/// A leader's node, and the election it leads (what its errors name).
struct LeaderNode {
    holding: Holding,
    election: String,
}

/// As a lock's node, but a "lock lost" is, for an election, [`Error::NotLeader`]: `confirm`
/// proves leadership with a quorum write (a `multi` that only checks the node exists; it
/// changes nothing and wakes nobody), `release` resigns.
impl OneNode for LeaderNode {
    fn node(&self) -> &Holding {
        &self.holding
    }
    fn rename(&self, e: Error) -> Error {
        not_leader(e, &self.election)
    }
}

/// A guard's "lock lost" is, for an election, "not the leader" (of the election's path).
pub(super) fn not_leader(e: Error, election: &str) -> Error {
    match e {
        Error::LockLost { .. } => Error::NotLeader {
            path: election.to_string(),
        },
        e => e,
    }
}
