//! The lock recipes, one file per lock type with its guard. This file only declares and
//! re-exports (the public types, for the crate root); everything is defined in the files
//! below, and the recipes (and `election/`) import from those files, never through here.
//! `api`, `holding` and `recipe` are visible to the crate: `election/` uses them, and so do
//! their macros wherever they expand.

pub(crate) mod api;
pub(crate) mod holding;
mod multi;
mod mutex;
pub(crate) mod recipe;
mod reentrant;
mod revoke;
mod rwlock;
mod semaphore;
mod unfair;

pub use api::{BoxedGuard, DynLock, ExclusiveLock, Guard, Lock};
pub use multi::{MultiLock, MultiLockGuard};
pub use mutex::{Mutex, MutexGuard};
pub use recipe::validate_recipe_path;
pub use reentrant::{ReentrantMutex, ReentrantMutexGuard};
pub use revoke::revoke;
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
