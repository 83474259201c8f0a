//! The lock recipes, one file per lock type with its guard.

mod multi;
mod mutex;
mod reentrant;
mod revoke;
mod rwlock;
mod semaphore;
mod unfair;

pub use multi::{MultiLock, MultiLockGuard};
pub use mutex::{Mutex, MutexGuard};
pub use reentrant::{ReentrantMutex, ReentrantMutexGuard};
pub use revoke::revoke;
pub(crate) use revoke::REVOKE_MESSAGE;
pub use rwlock::{ReadGuard, RwLock, WriteGuard};
pub use semaphore::{Permit, Semaphore};
pub use unfair::{UnfairMutex, UnfairMutexGuard};

/// The methods every single-node guard shares (they all wrap a `Holding` in `holding`).
macro_rules! guard_api {
    ($guard:ident) => {
        $crate::lock::guard_api!($guard, holding);
    };
    ($guard:ident, $($field:ident).+) => {
        impl $guard {
            /// Whether the lock is held right now, as far as this process can know without
            /// asking ZooKeeper: the session that created the node is connected, has had
            /// a request answered within the last two thirds of its timeout, and the lock
            /// was not lost. Computed at the call from the monotonic clock, so a process
            /// resumed after a pause longer than that gets `false` at once, before the
            /// client's thread has run. False while disconnected or unanswered (the session
            /// may still be alive; it turns true again if the client gets back in time) and
            /// for good once lost.
            ///
            /// This is local detection. It is enough when the session timeout is well above
            /// the ensemble's `syncLimit × tickTime`: a server cut off from its quorum keeps
            /// answering pings until it notices (up to that long), while the others count
            /// the session's timeout from the cut. Below that, call
            /// [`confirm`](Self::confirm) before acting. (`lost()` counts from the last
            /// answer, so in that case it can fire up to `syncLimit × tickTime` late.)
            pub fn is_valid(&self) -> bool {
                self.$($field).+.is_valid()
            }

            /// A receiver that gets `()` once the lock is lost (at once if it already is):
            /// the session expired (counted by the client itself, so known even with no
            /// server reachable), the client was closed, or the node was deleted by someone
            /// else (the guard keeps a watch on its node from acquire to release, armed
            /// again after every data change and reconnect). Meant for `select!` beside the
            /// work.
            #[must_use = "the receiver is the only way to hear the signal"]
            pub fn lost(&self) -> crossbeam_channel::Receiver<()> {
                self.$($field).+.lost()
            }

            /// The fencing token: the node's creation zxid. It is larger for every later
            /// holder of any lock in the ensemble. Send it with each write to the protected
            /// resource and have the resource refuse tokens lower than the highest seen: a
            /// holder paused past its session's expiry is then stopped by the resource.
            pub fn token(&self) -> u64 {
                self.$($field).+.token()
            }

            /// The full path of the node this guard holds.
            pub fn path(&self) -> &str {
                self.$($field).+.path()
            }

            /// A receiver that gets `()` when someone asks this holder to let go (see
            /// [`revoke`](crate::revoke), compatible with Curator's `Revoker`: the node's
            /// data set to exactly `__REVOKE__`; other writes are not requests). Letting go
            /// is up to the holder.
            #[must_use = "the receiver is the only way to hear the signal"]
            pub fn revocation(&self) -> crossbeam_channel::Receiver<()> {
                self.$($field).+.revocation()
            }

            /// Proves, with ZooKeeper's quorum, that the lock is still ours at this instant
            /// (one round trip: a read of our node and a write that changes nothing).
            /// [`Error::LockLost`](crate::Error) if it is not (the node is gone or replaced,
            /// or its session ended; the guard is lost from then on); a connection error or
            /// timeout if ZooKeeper cannot be asked. Never a false yes.
            ///
            /// Use it before an action that must not run twice when the session timeout is
            /// not comfortably above the ensemble's `syncLimit × tickTime` (see
            /// [`is_valid`](Self::is_valid)).
            pub fn confirm(&self) -> $crate::Result<()> {
                self.$($field).+.confirm()
            }

            /// Releases and reports how the delete went: [`Error::LockLost`](crate::Error)
            /// if the lock had already been lost; on a connection error the delete is
            /// retried in the background (dropping the guard does the same, quietly).
            pub fn release(self) -> $crate::Result<()> {
                self.$($field).+.release()
            }
        }

        impl std::fmt::Debug for $guard {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($guard))
                    .field("path", &self.$($field).+.path())
                    .field("token", &self.$($field).+.token())
                    .field("valid", &self.$($field).+.is_valid())
                    .finish()
            }
        }
    };
}
pub(crate) use guard_api;

#[cfg(test)]
mod tests {
    use super::*;

    fn send<T: Send + 'static>() {}

    #[test]
    fn guards_are_owned_and_send() {
        send::<MutexGuard>();
        send::<ReadGuard>();
        send::<WriteGuard>();
        send::<Permit>();
        send::<UnfairMutexGuard>();
        send::<MultiLockGuard>();
        send::<Mutex>();
        send::<RwLock>();
        send::<Semaphore>();
        send::<UnfairMutex>();
        send::<MultiLock>();
        send::<ReentrantMutex>();
    }
}
