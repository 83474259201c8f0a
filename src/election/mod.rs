//! Leader election, fair (the lock queue with Curator `LeaderLatch` node names) and unfair
//! (one node), in a guard style and a background style.

mod candidate;
mod elect;
mod hand_over;
mod leadership;
mod observe;

pub use candidate::{Candidate, LeaderEvent, LeaderTerm};
pub use elect::LeaderElection;
pub use hand_over::{Prefer, Successor};
pub use leadership::Leadership;
pub use observe::{LeaderChange, LeaderObserver};
