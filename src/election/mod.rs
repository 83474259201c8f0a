//! Leader election, fair (the lock queue with Curator `LeaderLatch` node names) and unfair
//! (one node), in a guard style and a background style.

mod candidate;
mod elect;
mod leadership;

pub use candidate::{Candidate, LeaderEvent, LeaderTerm};
pub use elect::LeaderElection;
pub use leadership::Leadership;
