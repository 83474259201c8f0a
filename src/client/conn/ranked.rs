//! Mutexes that check the client's lock order (written on [`Shared`]) in debug builds.
//!
//! A [`Ranked`] is a `parking_lot` mutex that knows its place in the order ([`Rank`]). In
//! debug builds (tests included) each thread keeps the ranks it holds, and taking a lock
//! the order forbids under one of them panics, naming both, before it can deadlock. In
//! release builds it is the plain mutex: no rank stored, nothing checked.
//!
//! [`Shared`]: super::Shared

use std::ops::{Deref, DerefMut};
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard, WaitTimeoutResult};

/// A lock's place in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rank {
    /// 1. `session`: taken under none of these.
    Session,
    /// 2. `io`.
    Io,
    /// 3. `pending`.
    Pending,
    /// 4. `pings_sent`.
    PingsSent,
    /// 5. `rearm`.
    Rearm,
    /// `link`, a leaf: taken under any of them, nothing taken under it.
    Link,
    /// `watches`, a leaf: taken with none of them held, nothing taken under it.
    Watches,
    /// The janitor's list (the client's `Owner`): a leaf like `watches`.
    Janitor,
    /// `servers`, the server list: a leaf like `watches`.
    Servers,
}

// Read by the checks, which release builds leave out.
#[cfg_attr(not(debug_assertions), allow(dead_code))]
impl Rank {
    fn name(self) -> &'static str {
        match self {
            Rank::Session => "session",
            Rank::Io => "io",
            Rank::Pending => "pending",
            Rank::PingsSent => "pings_sent",
            Rank::Rearm => "rearm",
            Rank::Link => "link",
            Rank::Watches => "watches",
            Rank::Janitor => "janitor",
            Rank::Servers => "servers",
        }
    }

    /// Whether `next` may be taken while `self` is held.
    fn allows(self, next: Rank) -> bool {
        use Rank::*;
        match (self, next) {
            // Nothing under a leaf; the lone leaves under nothing.
            (Link | Watches | Janitor | Servers, _) | (_, Watches | Janitor | Servers) => false,
            (_, Link) => true,
            // The numbered ones: only those listed above.
            (held, next) => (held as u8) < (next as u8),
        }
    }
}

#[cfg(debug_assertions)]
mod held {
    use super::Rank;
    use std::cell::RefCell;

    thread_local! {
        /// The ranked locks this thread holds, in the order taken.
        static HELD: RefCell<Vec<Rank>> = const { RefCell::new(Vec::new()) };
    }

    /// Panics if the order forbids taking `next` now.
    pub(super) fn check(next: Rank) {
        let _ = HELD.try_with(|held| {
            if let Some(h) = held.borrow().iter().find(|h| !h.allows(next)) {
                panic!(
                    "zkguard: lock order broken: `{}` taken while holding `{}` (see the lock \
                     order on client/conn's Shared)",
                    next.name(),
                    h.name()
                );
            }
        });
    }

    pub(super) fn push(rank: Rank) {
        let _ = HELD.try_with(|held| held.borrow_mut().push(rank));
    }

    /// Guards may go in any order: the last one of this rank is forgotten.
    pub(super) fn pop(rank: Rank) {
        let _ = HELD.try_with(|held| {
            let mut held = held.borrow_mut();
            if let Some(i) = held.iter().rposition(|h| *h == rank) {
                held.remove(i);
            }
        });
    }
}

/// A mutex with a place in the lock order (checked in debug builds).
pub(crate) struct Ranked<T> {
    #[cfg(debug_assertions)]
    rank: Rank,
    inner: Mutex<T>,
}

impl<T> Ranked<T> {
    pub(crate) fn new(rank: Rank, value: T) -> Ranked<T> {
        #[cfg(not(debug_assertions))]
        let _ = rank;
        Ranked {
            #[cfg(debug_assertions)]
            rank,
            inner: Mutex::new(value),
        }
    }

    pub(crate) fn lock(&self) -> RankedGuard<'_, T> {
        self.before();
        self.guard(self.inner.lock())
    }

    pub(crate) fn try_lock(&self) -> Option<RankedGuard<'_, T>> {
        self.before();
        self.inner.try_lock().map(|g| self.guard(g))
    }

    pub(crate) fn try_lock_until(&self, deadline: Instant) -> Option<RankedGuard<'_, T>> {
        self.before();
        self.inner.try_lock_until(deadline).map(|g| self.guard(g))
    }

    #[inline]
    fn before(&self) {
        #[cfg(debug_assertions)]
        held::check(self.rank);
    }

    #[inline]
    fn guard<'a>(&'a self, guard: MutexGuard<'a, T>) -> RankedGuard<'a, T> {
        #[cfg(debug_assertions)]
        held::push(self.rank);
        RankedGuard {
            guard,
            #[cfg(debug_assertions)]
            rank: self.rank,
        }
    }
}

/// A held [`Ranked`].
pub(crate) struct RankedGuard<'a, T> {
    guard: MutexGuard<'a, T>,
    #[cfg(debug_assertions)]
    rank: Rank,
}

impl<T> RankedGuard<'_, T> {
    /// Waits on `cv` (whose mutex this is) until notified or `deadline`.
    pub(crate) fn wait_until(&mut self, cv: &Condvar, deadline: Instant) -> WaitTimeoutResult {
        cv.wait_until(&mut self.guard, deadline)
    }

    /// Runs `f` with the lock released, and takes it again.
    pub(crate) fn unlocked<U>(&mut self, f: impl FnOnce() -> U) -> U {
        #[cfg(debug_assertions)]
        held::pop(self.rank);
        let out = MutexGuard::unlocked(&mut self.guard, f);
        #[cfg(debug_assertions)]
        {
            held::check(self.rank);
            held::push(self.rank);
        }
        out
    }
}

impl<T> Deref for RankedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for RankedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(debug_assertions)]
impl<T> Drop for RankedGuard<'_, T> {
    fn drop(&mut self) {
        held::pop(self.rank);
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;
    use std::time::Duration;

    fn all() -> Vec<Ranked<()>> {
        use Rank::*;
        [
            Session, Io, Pending, PingsSent, Rearm, Link, Watches, Janitor, Servers,
        ]
        .into_iter()
        .map(|r| Ranked::new(r, ()))
        .collect()
    }

    #[test]
    fn the_documented_order_passes() {
        let l = all();
        // Every numbered lock under those above it, and the link under all of them.
        {
            let _s = l[0].lock();
            let _i = l[1].try_lock().expect("free");
            let _p = l[2].lock();
            let _g = l[3].try_lock_until(Instant::now() + Duration::from_secs(1));
            let _r = l[4].lock();
            let _k = l[5].lock();
        }
        // Any subset in order: io, then rearm, then link.
        {
            let _i = l[1].lock();
            let _r = l[4].lock();
            let _k = l[5].lock();
        }
        // The link under the session alone; the lone leaves with nothing held.
        drop((l[0].lock(), l[5].lock()));
        drop(l[6].lock());
        drop(l[7].lock());
        drop(l[8].lock());
    }

    #[test]
    fn released_locks_are_forgotten_whatever_the_order_they_go_in() {
        let l = all();
        let s = l[0].lock();
        let i = l[1].lock();
        drop(s);
        drop(i);
        // Nothing held any more: the session and the lone leaves may be taken again.
        drop(l[6].lock());
        let mut s = l[0].lock();
        // Released while unlocked: the registry may be taken meanwhile.
        s.unlocked(|| drop(l[6].lock()));
        let cv = Condvar::new();
        assert!(s
            .wait_until(&cv, Instant::now() + Duration::from_millis(1))
            .timed_out());
        drop(l[1].lock());
    }

    /// The panic message of taking `then` while holding `first` (with `try_lock` if
    /// `tried`), on a thread of its own; `None` if it was allowed.
    fn taking(first: Rank, then: Rank, tried: bool) -> Option<String> {
        let run = move || {
            let (a, b) = (Ranked::new(first, ()), Ranked::new(then, ()));
            let _a = a.lock();
            let _b = if tried { b.try_lock() } else { Some(b.lock()) };
        };
        let payload = std::thread::spawn(run).join().err()?;
        Some(
            payload
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default(),
        )
    }

    #[test]
    fn a_lock_the_order_forbids_panics_naming_both() {
        use Rank::*;
        let forbidden = [
            // Above one held, by lock and by try_lock.
            (Io, Session, false),
            (Pending, Io, true),
            // Two of one rank.
            (Io, Io, false),
            // The registry and the janitor's list under anything, anything under them.
            (Rearm, Watches, false),
            (Session, Janitor, false),
            (Watches, Pending, false),
            (Janitor, Watches, true),
            (Session, Servers, false),
            (Servers, Link, false),
            // Anything under the link.
            (Link, Rearm, false),
            (Link, Link, false),
        ];
        for (first, then, tried) in forbidden {
            let said = taking(first, then, tried);
            let want = format!("`{}` taken while holding `{}`", then.name(), first.name());
            assert!(
                said.as_deref().is_some_and(|m| m.contains(&want)),
                "{first:?} then {then:?}: {said:?}"
            );
        }
        assert_eq!(taking(Session, Io, true), None);
        assert_eq!(taking(Pending, Link, false), None);
    }

    #[test]
    fn every_pair_is_judged_as_documented() {
        use Rank::*;
        let numbered = [Session, Io, Pending, PingsSent, Rearm];
        for (i, a) in numbered.iter().enumerate() {
            for (j, b) in numbered.iter().enumerate() {
                assert_eq!(a.allows(*b), i < j, "{a:?} then {b:?}");
            }
            assert!(a.allows(Link), "{a:?} then link");
            for leaf in [Link, Watches, Janitor, Servers] {
                assert!(!leaf.allows(*a), "{leaf:?} then {a:?}");
            }
        }
        for a in [
            Session, Io, Pending, PingsSent, Rearm, Link, Watches, Janitor, Servers,
        ] {
            for alone in [Watches, Janitor, Servers] {
                assert!(!a.allows(alone), "{a:?} then {alone:?}");
            }
        }
    }
}
