//! What the queue hands out: the node an acquire got, and a contender as `participants()`
//! lists it. (The guard built on an acquired node, `Holding`, lives beside the lock
//! traits: lock/holding.rs; the canceller of blocked acquires and their queue events in
//! `cancel.rs`.)

use std::sync::Arc;

use crate::client::{NodeAcl, Stat};
use crate::metrics::Labels;

/// A node that was acquired: the queue's answer to a recipe.
#[derive(Debug, Clone)]
pub(crate) struct Acquired {
    pub path: String,
    /// The node's creation zxid.
    pub token: u64,
    /// The session that created it (the node's ephemeral owner).
    pub owner: i64,
    /// The ACL it was created with (a fenced write's creates get it too).
    pub acl: NodeAcl,
    /// What the guard's measurements are labeled with (set by the acquire that ends with
    /// it: `Attempt::end`).
    pub labels: Option<Arc<Labels>>,
    /// What a waiter hands the guard with its grant (set by `Waiter::grant`; boxed: an
    /// acquire that did not wait has none).
    pub handed: Option<Box<Handed>>,
}

/// What a waiter hands the guard with its grant.
#[derive(Debug, Clone)]
pub(crate) struct Handed {
    /// Its last read of the node with its data watch: the guard takes that watch over
    /// instead of arming its own (see [`Seen`]).
    pub seen: Option<Seen>,
    /// An election waiter's ask path whose `exists` watch is still armed: the guard takes
    /// the watch back when the hold ends, off the way to leading (`Holding::forget_ask`).
    pub ask_watch: Option<String>,
}

/// The node's data and stat as the waiter read them with the data watch that is still
/// armed when it is granted. While the client still holds that watch, nothing changed
/// since (a change fires it, which takes it out of the client's registry), so the guard
/// judges this read as it would the reply to its own `getData` and keeps that watch: one
/// request less for every acquire that waited, and none on the successor's way to
/// knowing it holds.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub data: Vec<u8>,
    pub stat: Stat,
}

impl Acquired {
    /// The node at `path` as `stat` describes it.
    pub(crate) fn of(path: String, stat: &Stat, acl: &NodeAcl) -> Acquired {
        Acquired {
            path,
            token: token_of(stat),
            owner: stat.ephemeral_owner,
            acl: acl.clone(),
            labels: None,
            handed: None,
        }
    }

    /// Whether `stat` describes this very node (not a later one at the same path).
    pub(crate) fn is(&self, stat: &Stat) -> bool {
        token_of(stat) == self.token && stat.ephemeral_owner == self.owner
    }
}

/// A node's fencing token: its creation zxid ([`Stat::token`]).
pub(crate) fn token_of(stat: &Stat) -> u64 {
    stat.token()
}

/// One contender in a lock's queue, in queue order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participant {
    /// The contender's node name (its last path component).
    pub node: String,
    /// The node's data: by default the host and process id of the contender; for an
    /// election, the participant id.
    pub data: Vec<u8>,
    /// Whether it holds the lock now (for an election: whether it leads), by the queue's
    /// rule: the first node of a mutex or an election, every reader ahead of the first
    /// writer, the first N of a semaphore.
    pub holds: bool,
}

impl Participant {
    /// The node's data as text (for an election, the participant id); invalid UTF-8 is
    /// replaced.
    pub fn id(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::{Acquired, NodeAcl, Stat};

    /// A node is this very node only if both its creation zxid (the token) and its
    /// session are ours: a later node at the same path, of our session or another, is not.
    #[test]
    fn a_node_is_the_one_acquired_only_with_its_token_and_its_session() {
        let stat = Stat {
            czxid: 7,
            ephemeral_owner: 42,
            ..Stat::default()
        };
        let node = Acquired::of("/q/lock-0000000001".into(), &stat, &NodeAcl::open());
        assert!(node.is(&stat));
        let later = Stat { czxid: 9, ..stat };
        assert!(!node.is(&later), "a later node of our session");
        let theirs = Stat {
            ephemeral_owner: 43,
            ..stat
        };
        assert!(!node.is(&theirs), "another session's node of the same zxid");
        let both = Stat {
            czxid: 9,
            ephemeral_owner: 43,
            ..stat
        };
        assert!(!node.is(&both), "another session's later node");
    }
}
