//! What a recipe is, said once: [`Kind`]. Everything else the crate needs to know about a
//! recipe is derived from it here: the marker in its node names, the rule that says which
//! node blocks which, what a log record calls its node, its `kind` label in the metrics,
//! whether it leads (an election), and whether its node sits at one shared path (the
//! single node), where only an owner check tells ours from a later contender's.

use super::names;
use super::rules::Rule;

/// The recipe an acquire is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// [`Mutex`](crate::Mutex) (and a [`MultiLock`](crate::MultiLock)'s parts).
    Mutex,
    /// [`ReentrantMutex`](crate::ReentrantMutex): a mutex's node, measured apart.
    Reentrant,
    /// An [`RwLock`](crate::RwLock)'s read side.
    Read,
    /// An [`RwLock`](crate::RwLock)'s write side.
    Write,
    /// A [`Semaphore`](crate::Semaphore) with this many permits: its lease, taken while
    /// holding its internal lock (the queue's `gate`).
    Semaphore(u32),
    /// [`UnfairMutex`](crate::UnfairMutex): the single node.
    Unfair,
    /// A fair [`LeaderElection`](crate::LeaderElection).
    Election,
    /// An unfair [`LeaderElection`](crate::LeaderElection): the single node.
    UnfairElection,
}

impl Kind {
    /// The marker of its queue nodes' names (Curator's, where Curator has the recipe); the
    /// single node has none.
    pub(crate) fn marker(self) -> &'static str {
        match self {
            Kind::Mutex | Kind::Reentrant => names::LOCK,
            Kind::Read => names::READ,
            Kind::Write => names::WRITE,
            Kind::Semaphore(_) => names::LEASE,
            Kind::Election => names::LATCH,
            Kind::Unfair | Kind::UnfairElection => "",
        }
    }

    /// Which node blocks its node in its queue.
    pub(crate) fn rule(self) -> Rule {
        match self {
            Kind::Read => Rule::Read,
            Kind::Semaphore(n) => Rule::Semaphore(n),
            _ => Rule::Exclusive,
        }
    }

    /// What a log record calls its held node.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Kind::Semaphore(_) => "semaphore lease",
            Kind::Election | Kind::UnfairElection => "election node",
            _ => "lock node",
        }
    }

    /// Its `kind` label in the metrics (`crate::metrics`' table).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::Reentrant => "reentrant_mutex",
            Kind::Read => "read_lock",
            Kind::Write => "write_lock",
            Kind::Semaphore(_) => "semaphore",
            Kind::Unfair => "unfair_mutex",
            Kind::Election => "election",
            Kind::UnfairElection => "election_unfair",
        }
    }

    /// Whether a guard of it is a term of leadership.
    pub(crate) fn leads(self) -> bool {
        matches!(self, Kind::Election | Kind::UnfairElection)
    }

    /// Whether its node is the single node at a shared path: the next holder creates an
    /// identical node there, so a delete checks the node's creation zxid, and a fenced
    /// write, which cannot, is refused.
    pub(crate) fn single(self) -> bool {
        matches!(self, Kind::Unfair | Kind::UnfairElection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Kind; 8] = [
        Kind::Mutex,
        Kind::Reentrant,
        Kind::Read,
        Kind::Write,
        Kind::Semaphore(3),
        Kind::Unfair,
        Kind::Election,
        Kind::UnfairElection,
    ];

    #[test]
    fn every_kind_has_its_own_label() {
        let mut labels: Vec<_> = ALL.iter().map(|k| k.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), ALL.len());
    }

    #[test]
    fn queue_kinds_have_a_marker_and_single_nodes_none() {
        for k in ALL {
            assert_eq!(k.marker().is_empty(), k.single(), "{k:?}");
        }
    }

    #[test]
    fn only_elections_lead_and_only_readers_wait_for_writers_alone() {
        let leading: Vec<_> = ALL.into_iter().filter(|k| k.leads()).collect();
        assert_eq!(leading, [Kind::Election, Kind::UnfairElection]);
        assert_eq!(Kind::Read.rule(), Rule::Read);
        assert_eq!(Kind::Semaphore(3).rule(), Rule::Semaphore(3));
        assert_eq!(Kind::Write.rule(), Rule::Exclusive);
        assert_eq!(Kind::Election.noun(), "election node");
        assert_eq!(Kind::Semaphore(1).noun(), "semaphore lease");
    }
}
