//! The guard of the guard style: proof of leadership, resigned on drop.

use crate::error::{Error, Result};
use crate::lock::Holding;
use crate::lock::{guard_api, Guard, OneNode};

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
/// It is a [`Guard`](crate::Guard), with the same methods as a lock's guard; where a lock's
/// guard says [`Error::LockLost`](crate::Error::LockLost), `confirm` and `release` (which is
/// [`resign`](Leadership::resign)) say [`Error::NotLeader`](crate::Error::NotLeader).
/// [`revocation`](Leadership::revocation) fires when someone asks the leader to step down
/// with [`revoke`](crate::revoke) on its node; stepping down is up to the leader.
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
    /// [`Error::NotLeader`] if leadership had already been lost.
    pub fn resign(self) -> Result<()> {
        Guard::release(self)
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
