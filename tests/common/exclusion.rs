//! The mutual-exclusion checker of `tests/lock_faults.rs`: a detector every holder enters
//! the moment it holds a valid guard (no two valid holders at once, tokens rise), and
//! workers that contend for a mutex through it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::Mutex as PlMutex;
use zkguard::{Mutex, MutexGuard};

use super::wait_until;

/// An in-process referee: nobody may count as holder unless its guard is valid, no two
/// valid holders at once, and every new holder's token is above the previous holder's.
#[derive(Default)]
pub struct Detector {
    pub state: PlMutex<DetectorState>,
}

#[derive(Default)]
pub struct DetectorState {
    pub holders: Vec<(usize, Arc<MutexGuard>)>,
    pub last_token: u64,
    pub violations: Vec<String>,
}

impl Detector {
    /// Registers `g` as holder `id` if it is valid right now; false (nothing registered)
    /// if it is not.
    pub fn enter(&self, id: usize, g: &Arc<MutexGuard>) -> bool {
        let mut s = self.state.lock();
        if !g.is_valid() {
            return false;
        }
        let overlaps: Vec<String> = s
            .holders
            .iter()
            .filter(|(_, og)| og.is_valid())
            .map(|(other, og)| {
                format!("two valid holders: {id} {g:?} entered while {other} {og:?}")
            })
            .collect();
        s.violations.extend(overlaps);
        if g.token() <= s.last_token {
            let v = format!(
                "token did not rise: {id} holds {} after {}",
                g.token(),
                s.last_token
            );
            s.violations.push(v);
        }
        s.last_token = s.last_token.max(g.token());
        s.holders.push((id, g.clone()));
        true
    }

    /// While `id` holds validly, nobody else may.
    pub fn check(&self, id: usize, g: &MutexGuard) {
        let mut s = self.state.lock();
        if !g.is_valid() {
            return;
        }
        let overlaps: Vec<String> = s
            .holders
            .iter()
            .filter(|(other, og)| *other != id && og.is_valid())
            .map(|(other, og)| format!("{id} {g:?} and {other} {og:?} both valid"))
            .collect();
        s.violations.extend(overlaps);
    }

    pub fn leave(&self, id: usize) {
        self.state.lock().holders.retain(|(other, _)| *other != id);
    }

    pub fn violations(&self) -> Vec<String> {
        self.state.lock().violations.clone()
    }
}

/// What the contending threads share.
#[derive(Default)]
pub struct Arena {
    pub detector: Detector,
    /// Completed valid holds, all threads together.
    pub holds: AtomicU64,
    pub stop: AtomicBool,
    /// A `lost()` receiver of the holder the workers queue behind, if any.
    pub previous_lost: PlMutex<Option<Receiver<()>>>,
    /// When a worker first returned from an acquire with a guard, and whether the previous
    /// holder's `lost()` had fired by then.
    pub first_acquired: PlMutex<Option<(Instant, Option<bool>)>>,
}

#[derive(Debug, Default)]
pub struct WorkerStats {
    pub holds: u64,
    /// Acquires that returned a guard that was already not valid.
    pub invalid: u64,
    pub errors: u64,
    pub timeouts: u64,
}

/// Holds `g` (already registered) for a few milliseconds, checking for overlap, and stops
/// early if the lock is lost.
pub fn hold_briefly(arena: &Arena, id: usize, g: &MutexGuard) {
    let lost = g.lost();
    for _ in 0..3 {
        // The work done under the lock: a few milliseconds, cut short by a loss.
        if lost.recv_timeout(Duration::from_millis(3)).is_ok() {
            break;
        }
        arena.detector.check(id, g);
    }
}

/// Acquires, holds briefly and releases, `cycles` times (or until `arena.stop` when
/// `None`). Errors are retried; only valid holds count.
pub fn worker(id: usize, lock: Mutex, arena: Arc<Arena>, cycles: Option<u64>) -> WorkerStats {
    let mut st = WorkerStats::default();
    let give_up = Instant::now() + Duration::from_secs(150);
    loop {
        let more = match cycles {
            Some(n) => st.holds < n,
            None => !arena.stop.load(Ordering::SeqCst),
        };
        if !more {
            return st;
        }
        assert!(
            Instant::now() < give_up,
            "worker {id} stuck: {st:?} after 150 s"
        );
        let g = match lock.acquire_timeout(Duration::from_secs(10)) {
            Ok(Some(g)) => g,
            Ok(None) => {
                st.timeouts += 1;
                continue;
            }
            Err(e) => {
                log::info!("worker {id}: acquire failed ({e}); retrying");
                st.errors += 1;
                thread::sleep(Duration::from_millis(50)); // back off before retrying
                continue;
            }
        };
        {
            let now = Instant::now();
            let mut first = arena.first_acquired.lock();
            if first.is_none() {
                let knew = arena
                    .previous_lost
                    .lock()
                    .as_ref()
                    .map(|l| l.try_recv().is_ok());
                *first = Some((now, knew));
            }
        }
        let g = Arc::new(g);
        if arena.detector.enter(id, &g) {
            hold_briefly(&arena, id, &g);
            arena.detector.leave(id);
            st.holds += 1;
            arena.holds.fetch_add(1, Ordering::SeqCst);
        } else {
            st.invalid += 1;
        }
        let g = Arc::try_unwrap(g).expect("the detector let go of the guard");
        if let Err(e) = g.release() {
            log::info!("worker {id}: release: {e}");
        }
    }
}

/// Waits until the arena counted at least `n` valid holds.
pub fn wait_holds(arena: &Arena, n: u64, what: &str) {
    wait_until(Duration::from_secs(90), what, || {
        arena.holds.load(Ordering::SeqCst) >= n
    });
}
