//! The ordered queue of contenders: one algorithm under every sequential recipe. A recipe
//! gives its directory and its place there (its [`Kind`], from which its node names and
//! blocker rule come, or for the semaphore's lease its gate and permits); the rest is here.

mod acquire;
mod attempt;
mod cancel;
mod create;
mod enqueue;
mod held;
mod kind;
mod lease;
#[cfg(test)]
mod model;
pub(crate) mod names;
mod rules;
mod single;
mod tenancy;
mod waiter;
mod wake;

pub(crate) use acquire::{acquire, acquire_after, participants};
pub(crate) use attempt::{Attempt, Next, Place, SessionEvents, Spec, Wait};
pub use cancel::{Canceller, QueueEvent};
pub(crate) use create::create_dir;
pub use held::Participant;
pub(crate) use held::{token_of, Acquired};
pub(crate) use kind::Kind;
pub use names::DIRECTORY_MARKER;
pub(crate) use rules::Rule;
pub(crate) use single::{acquire as single, holder as single_holder};
pub(crate) use wake::{wake, WaitOn, Wake};

use crate::error::{Error, Result};

/// Checks a lock path the caller gave: absolute, no trailing slash, no empty segments, not
/// the root (a lock needs a directory of its own).
pub(crate) fn check_lock_path(path: &str) -> Result<()> {
    crate::client::path::validate_path(path)?;
    if path == "/" {
        return Err(Error::InvalidPath {
            path: path.into(),
            reason: "a lock or an election needs a directory of its own, not the root".into(),
        });
    }
    Ok(())
}
#[cfg(test)]
pub(crate) use model::check;
