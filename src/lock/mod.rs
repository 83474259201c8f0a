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
            /// Whether the lock is certainly held right now: the session that created the
            /// node is connected and the lock was not lost. False while disconnected (the
            /// session may still be alive; it turns true again if the client gets back in
            /// time) and for good once lost.
            pub fn is_valid(&self) -> bool {
                self.$($field).+.is_valid()
            }

            /// A receiver that gets `()` once the lock is lost (at once if it already is):
            /// the session expired (counted by the client itself, so known even with no
            /// server reachable), the client was closed, or the node was deleted by someone
            /// else. Meant for `select!` beside the work.
            ///
            /// The first call also arms a watch on the node (without waiting for it), so a
            /// deletion by someone else counts as a loss from then on.
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
            /// [`revoke`](crate::revoke), compatible with Curator's `Revoker`: any change of
            /// the node's data counts as a request). Letting go is up to the holder.
            pub fn revocation(&self) -> crossbeam_channel::Receiver<()> {
                self.$($field).+.revocation()
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
