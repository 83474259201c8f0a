//! Blocker rules: which contender ahead of me I must wait for. `None` means I hold.

use super::names::Contender;

/// What a recipe's node waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Exclusive lock, write lock, election: the node right before me.
    Exclusive,
    /// Read lock: the nearest write (non-read) node before me.
    Read,
    /// Semaphore with this many permits: the node that many places before me. (Which
    /// leases hold, for `participants`; a lease itself waits by count: [`lease_count`].)
    Semaphore(u32),
    /// A read/write lock's queue seen whole: each node by its own kind (`Read` for read
    /// nodes, `Exclusive` for write nodes).
    ReadWrite,
}

impl Rule {
    /// The index of the node `me` waits for, if any.
    pub(crate) fn blocker<N>(self, queue: &[Contender<N>], me: usize) -> Option<usize> {
        match self {
            Rule::Exclusive => me.checked_sub(1),
            Rule::Read => queue[..me].iter().rposition(|c| !c.read),
            Rule::Semaphore(n) => me.checked_sub(n as usize),
            Rule::ReadWrite if queue[me].read => Rule::Read.blocker(queue, me),
            Rule::ReadWrite => Rule::Exclusive.blocker(queue, me),
        }
    }

    /// Which nodes of an ordered `queue` hold by this rule (what `participants` says of
    /// each).
    pub(crate) fn holding<N>(self, queue: &[Contender<N>]) -> Vec<bool> {
        (0..queue.len())
            .map(|i| self.blocker(queue, i).is_none())
            .collect()
    }
}

/// What a listing of the leases says to the lease named `me`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// Our lease is not listed.
    Gone,
    /// Every lease, ours included, fits within the permits: ours is a permit.
    Permit,
    /// More leases than permits: wait for one to go.
    Wait,
}

/// The semaphore's lease loop's decision on a listing of its leases (also the model
/// checker's): counting is safe on its own (see `Semaphore`).
pub(crate) fn lease_count<N: PartialEq<str>>(
    leases: &[Contender<N>],
    me: &str,
    permits: u32,
) -> Count {
    if !leases.iter().any(|c| c.name == *me) {
        Count::Gone
    } else if leases.len() <= permits as usize {
        Count::Permit
    } else {
        Count::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::names::tests::queue as q;

    #[test]
    fn exclusive_waits_for_its_predecessor() {
        let queue = q("www");
        assert_eq!(Rule::Exclusive.blocker(&queue, 0), None);
        assert_eq!(Rule::Exclusive.blocker(&queue, 2), Some(1));
        // A writer waits behind readers too.
        assert_eq!(Rule::Exclusive.blocker(&q("rrw"), 2), Some(1));
    }

    #[test]
    fn readers_wait_only_for_the_nearest_writer_before_them() {
        let queue = q("rrwrrw r".replace(' ', "").as_str());
        assert_eq!(Rule::Read.blocker(&queue, 0), None);
        assert_eq!(Rule::Read.blocker(&queue, 1), None);
        assert_eq!(Rule::Read.blocker(&queue, 3), Some(2));
        let rw = q("rrwr");
        assert_eq!(Rule::ReadWrite.blocker(&rw, 1), None);
        assert_eq!(Rule::ReadWrite.blocker(&rw, 2), Some(1));
        assert_eq!(Rule::ReadWrite.blocker(&rw, 3), Some(2));
        assert_eq!(Rule::Read.blocker(&queue, 4), Some(2));
        assert_eq!(Rule::Read.blocker(&queue, 6), Some(5));
    }

    #[test]
    fn a_semaphore_waiter_waits_for_the_node_n_places_ahead() {
        let queue = q("wwwww");
        let rule = Rule::Semaphore(3);
        assert_eq!(rule.blocker(&queue, 0), None);
        assert_eq!(rule.blocker(&queue, 2), None);
        assert_eq!(rule.blocker(&queue, 3), Some(0));
        assert_eq!(rule.blocker(&queue, 4), Some(1));
    }

    fn leases(n: usize) -> Vec<Contender> {
        (0..n)
            .map(|i| Contender {
                name: format!("lease-{i:010}"),
                seq: i as i64,
                read: false,
            })
            .collect()
    }

    #[test]
    fn a_lease_is_a_permit_while_every_lease_fits_within_the_permits() {
        let three = leases(3);
        // Every lease counts, ours wherever it is in the order.
        for me in ["lease-0000000000", "lease-0000000002"] {
            assert_eq!(lease_count(&three, me, 3), Count::Permit);
            assert_eq!(lease_count(&three, me, 4), Count::Permit);
            assert_eq!(lease_count(&three, me, 2), Count::Wait);
        }
        assert_eq!(
            lease_count(&leases(1), "lease-0000000000", 1),
            Count::Permit
        );
    }

    #[test]
    fn a_lease_not_listed_is_gone_whatever_the_count() {
        for permits in [0, 1, 5] {
            assert_eq!(
                lease_count(&leases(2), "lease-0000000009", permits),
                Count::Gone
            );
            assert_eq!(
                lease_count(&leases(0), "lease-0000000000", permits),
                Count::Gone
            );
        }
    }

    #[test]
    fn zero_permits_make_every_lease_wait() {
        assert_eq!(lease_count(&leases(1), "lease-0000000000", 0), Count::Wait);
    }
}
