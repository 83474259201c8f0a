//! The guard of the guard style: proof of leadership, resigned on drop.

use crossbeam_channel::Receiver;

use crate::error::{Error, Result};
use crate::queue::Holding;

/// Leadership of a [`LeaderElection`](crate::LeaderElection), won by
/// [`lead`](crate::LeaderElection::lead). Dropping it resigns: the node is deleted and the
/// next candidate takes over.
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
/// A leader should stop its work as soon as it is not valid (Curator's standard policy),
/// and pass [`token`](Leadership::token) to the resources it writes, so that one paused
/// past its session's expiry is refused by them.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// # let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// use crossbeam_channel::{select, tick};
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
    holding: Holding,
    election: String,
}

impl Leadership {
    pub(crate) fn new(holding: Holding, election: &str) -> Leadership {
        Leadership {
            holding,
            election: election.to_string(),
        }
    }

    /// Whether this process leads right now, as far as it can know without asking
    /// ZooKeeper: its session is connected, has had a request answered within the last two
    /// thirds of its timeout, and leadership was not lost. Computed at the call from the
    /// monotonic clock (a process resumed after a long pause gets `false` at once). False
    /// while disconnected, for good once lost. See
    /// [`MutexGuard::is_valid`](crate::MutexGuard::is_valid) for when local detection is
    /// enough and when to [`confirm`](Self::confirm).
    pub fn is_valid(&self) -> bool {
        self.holding.is_valid()
    }

    /// A receiver that gets `()` once leadership is lost (at once if it already is): the
    /// session expired, the client was closed, or the node was deleted by someone else.
    /// Meant for `select!` beside the leader's work. The leader keeps a watch on its node
    /// from election to resignation, so a deletion by someone else counts at once.
    #[must_use = "the receiver is the only way to hear the signal"]
    pub fn lost(&self) -> Receiver<()> {
        self.holding.lost()
    }

    /// The fencing token: the node's creation zxid, larger for every later leader (and for
    /// every later lock holder in the ensemble). Send it with each write to the resources
    /// the leader controls and have them refuse tokens lower than the highest seen.
    pub fn token(&self) -> u64 {
        self.holding.token()
    }

    /// The full path of this leader's node.
    pub fn path(&self) -> &str {
        self.holding.path()
    }

    /// Proves that this process leads at this instant: a quorum write (a `multi` that only
    /// checks the node exists; it changes nothing and wakes nobody) answered within this
    /// session. [`Error::NotLeader`] if leadership is gone (deposed, expired, deleted,
    /// closed); a connection error or timeout if ZooKeeper could not be asked (a partitioned
    /// leader). Never a false yes. Costs one write round trip.
    pub fn confirm(&self) -> Result<()> {
        self.holding
            .confirm()
            .map_err(|e| not_leader(e, &self.election))
    }

    /// Steps down: deletes the node, so the next candidate leads, and reports how the
    /// delete went. [`Error::NotLeader`] if leadership had already been lost; on a
    /// connection error the delete is retried in the background (dropping does the same,
    /// quietly).
    pub fn resign(self) -> Result<()> {
        self.holding
            .release()
            .map_err(|e| not_leader(e, &self.election))
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

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.election)
            .field("path", &self.holding.path())
            .field("token", &self.holding.token())
            .field("valid", &self.holding.is_valid())
            .finish()
    }
}
