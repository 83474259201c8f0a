//! The lock recipes, one file per lock type with its guard.

mod api;
mod holding;
mod multi;
mod mutex;
mod recipe;
mod reentrant;
mod revoke;
mod rwlock;
mod semaphore;
mod unfair;

pub(crate) use api::{boxed, guard_api, lock_api, Core, Part, Sealed};
pub use api::{BoxedGuard, DynLock, ExclusiveLock, Guard, Lock};
pub(crate) use holding::{fenced, Holding, OneNode};
pub use multi::{MultiLock, MultiLockGuard};
pub use mutex::{Mutex, MutexGuard};
pub use recipe::validate_recipe_path;
pub(crate) use recipe::{recipe_options, Based, Recipe};
pub use reentrant::{ReentrantMutex, ReentrantMutexGuard};
pub use revoke::revoke;
pub(crate) use revoke::REVOKE_MESSAGE;
pub use rwlock::{ReadGuard, ReadLock, RwLock, WriteGuard, WriteLock};
pub use semaphore::{Permit, Semaphore};
pub use unfair::{UnfairMutex, UnfairMutexGuard};

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
        // Not `MultiLockGuard` (nor `ReentrantMutexGuard`): a re-entrant level inside
        // belongs to the thread that took it.
        send::<Mutex>();
        send::<RwLock>();
        send::<Semaphore>();
        send::<UnfairMutex>();
        send::<MultiLock>();
        send::<ReentrantMutex>();
        send::<ReadLock>();
        send::<WriteLock>();
    }
}
