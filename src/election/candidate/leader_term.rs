//! One term of a background candidate, as its caller holds it: [`LeaderTerm`].

use std::sync::Arc;

use crate::client::{Op, OpResult};
use crate::error::Result;
use crate::lock::holding::{fenced, Holding};

use super::super::leadership::not_leader;

/// One term of a [`Candidate`](crate::Candidate)'s leadership, from its election to its end
/// (lost, resigned, or the candidate stopped), got from
/// [`Candidate::term`](crate::Candidate::term) while it leads.
///
/// It is bound to that term: once the term has ended, every method says so
/// ([`is_valid`](LeaderTerm::is_valid) false, [`fenced_multi`](LeaderTerm::fenced_multi)
/// and [`confirm`](LeaderTerm::confirm) [`Error::NotLeader`](crate::Error::NotLeader)),
/// even if the candidate leads again meanwhile in a later term (with another node and a
/// larger token). So a decision taken in one term cannot be written in the next. Keeping it
/// keeps nothing alive: the candidate deletes the term's node when the term ends, whoever
/// holds one of these.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// use zkguard::{LeaderEvent, Op};
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let election = zkguard::LeaderElection::new(&client, "/services/indexer", "host-a")?;
/// let candidate = election.join()?;
/// for event in candidate.events() {
///     if let LeaderEvent::Elected { token } = event {
///         let Some(term) = candidate.term() else { continue }; // over already
///         println!("leading as {} (token {token})", term.path());
///         // Applied only while this term lasts, however long this thread was paused.
///         term.fenced_multi(&[Op::SetData {
///             path: "/services/indexer-owner".into(),
///             data: b"host-a".to_vec(),
///             version: None,
///         }])?;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderTerm {
    node: Arc<Holding>,
    /// The election's path: what `NotLeader` names.
    election: String,
}

impl LeaderTerm {
    pub(super) fn new(node: Arc<Holding>, election: &str) -> LeaderTerm {
        LeaderTerm {
            node,
            election: election.to_string(),
        }
    }

    /// The term's node, as the guard core holds it.
    pub(in crate::election) fn holding(&self) -> &Holding {
        &self.node
    }

    /// The term's fencing token: its node's creation zxid, larger for every later term of
    /// any candidate of the election (as in [`LeaderEvent::Elected`](crate::LeaderEvent)).
    pub fn token(&self) -> u64 {
        self.node.token()
    }

    /// The full path of the term's node in the election's directory: the node
    /// [`LeaderElection::participants`](crate::LeaderElection::participants) lists first
    /// while this term lasts (as Curator's `LeaderLatch.getOurPath()`).
    pub fn path(&self) -> &str {
        self.node.path()
    }

    /// Whether this term goes on right now, as far as this process can know without asking
    /// ZooKeeper (as a guard's [`is_valid`](crate::Guard::is_valid)): false while
    /// disconnected, and for good once the term has ended.
    pub fn is_valid(&self) -> bool {
        self.node.is_valid()
    }

    /// Proves with a quorum write that this term goes on at this instant (see
    /// [`Leadership::confirm`](crate::Leadership::confirm)).
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`](crate::Error::NotLeader) once the term has ended; a connection
    /// error or timeout if ZooKeeper cannot be asked.
    pub fn confirm(&self) -> Result<()> {
        self.node
            .confirm()
            .map_err(|e| not_leader(e, &self.election))
    }

    /// Applies `ops` only while this term lasts: one `multi` that first checks the term's
    /// node still exists, sent only on the session that owns it, as a guard's
    /// [`fenced_multi`](crate::Guard::fenced_multi). Nodes that `ops` create get the
    /// election's ACL. Returns the results of `ops` alone.
    ///
    /// # Errors
    ///
    /// - [`Error::NotLeader`](crate::Error::NotLeader) when the term is known over (lost,
    ///   resigned, the candidate stopped, its session gone) or the server's check of the
    ///   node fails: nothing was applied; also when the server applied the `multi` but the
    ///   term's node was known gone once the reply arrived: `ops` were applied, but not
    ///   provably within the term (as a guard's
    ///   [`fenced_multi`](crate::Guard::fenced_multi) says);
    /// - [`Error::Multi`](crate::Error::Multi) when one of `ops` fails, with its index in
    ///   `ops`: nothing was applied;
    /// - [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an unfair election
    ///   (its node sits at a shared path that a check cannot tell apart);
    /// - a connection error or timeout: as for any write, it may or may not have applied.
    pub fn fenced_multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        fenced(&[self.node.as_ref()], ops).map_err(|e| not_leader(e, &self.election))
    }
}

impl std::fmt::Debug for LeaderTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderTerm")
            .field("path", &self.path())
            .field("token", &self.token())
            .field("valid", &self.is_valid())
            .finish()
    }
}
