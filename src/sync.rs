//! What the wait plumbing sleeps on: `parking_lot`'s `Mutex` and `Condvar` in every build,
//! and loom's in the unit tests under `--cfg loom`, the model-check build (`RUSTFLAGS="--cfg loom" cargo test
//! --lib loom`, a step of .ci/run), which explores every interleaving of the threads of a
//! test at each lock, unlock, wait and notify.
//!
//! Used by the three pieces the loom tests check for lost wake-ups: a wait's `Bell` and its
//! `Ringing` senders (`client/bell.rs`, tests in `client/bell/loom.rs`), `wake`
//! (`queue/wake.rs`, which sleeps on the bell, tests in `queue/wake/loom.rs`) and a request's
//! reply slot with its `Settled` (`client/conn/reply.rs`, tests in `client/conn/reply/loom.rs`).
//!
//! What the model does not model, and why that is enough for what it checks:
//! - **Channels.** The sources a `wake` looks at are `crossbeam_channel`s, which are not loom
//!   objects (loom has no model of them, and swapping every channel of the crate would change
//!   the client's API under the model). The plumbing never blocks on one: a ringing sender
//!   sends on an unbounded channel or drops it, `wake` only `try_recv`s; a thread sleeps on
//!   the bell's condition variable alone. Under loom the threads run one at a time, so each
//!   channel operation is one indivisible step of its thread. Left at that, loom would not
//!   see it at all: its partial-order reduction tries another order of two steps only if
//!   they touch one of its objects, and a send and a look touch none, so a ring moved
//!   before its send went unseen. So the plumbing says [`channel_step`] right before each
//!   channel operation (a no-op in every other build): under loom, a step on one atomic
//!   that every channel operation shares. Loom then takes any two channel operations as
//!   conflicting (more than they are: two channels' operations commute, so it explores
//!   more orders than it needs, never fewer) and tries each order of them against the
//!   bell's and the slot's lock, wait and notify. The two seeded slips, a ring before its
//!   send and a mark after the look, each fail the model (docs/testing.md). Crossbeam's
//!   own memory ordering (a `try_recv` after a send finds it) is taken as given.
//! - **Time.** Loom has no clock: a timed wait is an untimed one here (it never times out),
//!   so a wake-up lost under a deadline shows as loom's "deadlock" instead of a late
//!   return. The tests give no deadline, or one far off, and the timed-out branches are
//!   left to the ordinary unit tests.

// loom is a dev-dependency: the library itself, even under `--cfg loom`, is built with
// parking_lot's; only its unit tests get loom's.
#[cfg(not(all(loom, test)))]
pub(crate) use parking_lot::{Condvar, Mutex};

#[cfg(all(loom, test))]
pub(crate) use model::{channel_step, Condvar, Mutex};

/// Said right before each channel operation of the plumbing (a ringing sender's send and
/// drop, `wake`'s look): nothing, but under loom a step on one object every channel
/// operation shares (module doc).
#[cfg(not(all(loom, test)))]
#[inline(always)]
pub(crate) fn channel_step() {}

/// loom's mutex and condition variable behind `parking_lot`'s API (no poisoning, `wait`
/// through `&mut` guard), so the code that uses them reads the same in both builds.
#[cfg(all(loom, test))]
mod model {
    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    loom::lazy_static! {
        /// What every channel operation touches under the model.
        static ref CHANNELS: loom::sync::atomic::AtomicUsize =
            loom::sync::atomic::AtomicUsize::new(0);
    }

    /// A scheduling point of loom's on the one object all channel operations share, so that
    /// loom takes any two of them (a send and a look) as conflicting and tries both orders.
    pub(crate) fn channel_step() {
        CHANNELS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[derive(Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(v: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(v))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            // loom's mutex is poisoned only by a panic under it, which ends the model anyway.
            MutexGuard(Some(self.0.lock().unwrap_or_else(|p| p.into_inner())))
        }
    }

    /// `None` only while the guard is handed to the condition variable's wait.
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().expect("guard held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().expect("guard held")
        }
    }

    #[derive(Default)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    /// A timed wait's result: under loom never timed out (no clock).
    pub(crate) struct WaitTimeoutResult;

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(&self) -> bool {
            false
        }
    }

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let g = guard.0.take().expect("guard held");
            guard.0 = Some(self.0.wait(g).unwrap_or_else(|p| p.into_inner()));
        }

        /// An untimed wait: loom cannot model the deadline (module doc).
        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _deadline: Instant,
        ) -> WaitTimeoutResult {
            self.wait(guard);
            WaitTimeoutResult
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}
