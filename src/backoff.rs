//! The one retry policy of the crate: exponential back-off with jitter.
//!
//! The connection thread uses it between rounds of failed connects, the queue recipes
//! between requests that met connection trouble, the janitor between passes that left
//! deletes undone, and the election candidate between failed attempts and failed proofs.

use std::time::Duration;

/// Pauses that start at `first`, double after every use up to `max`, and go back to `first`
/// on [`reset`](Backoff::reset). Each pause is drawn from the upper half of the current
/// step (`[step/2, step]`), so clients that failed together do not retry together.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    step: Duration,
    rng: u64,
}

impl Backoff {
    /// A back-off whose first pause is at most `first` and whose pauses never exceed `max`.
    pub(crate) fn new(first: Duration, max: Duration) -> Backoff {
        let first = first.min(max);
        Backoff {
            first,
            max,
            step: first,
            // Any odd seed will do for xorshift; a fresh one per back-off.
            rng: uuid::Uuid::new_v4().as_u128() as u64 | 1,
        }
    }

    /// The pause before the next attempt; the one after it will be about twice as long.
    pub(crate) fn next_pause(&mut self) -> Duration {
        let step = self.step;
        self.step = step.saturating_mul(2).min(self.max);
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let half = step / 2;
        let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
        half + Duration::from_micros(self.rng % spread.saturating_add(1))
    }

    /// Starts again from the first pause (after an attempt that worked).
    pub(crate) fn reset(&mut self) {
        self.step = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap_and_stay_in_the_upper_half() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(40), ms(300));
        let steps = [40, 80, 160, 300, 300, 300];
        for step in steps {
            let p = b.next_pause();
            assert!(
                p >= ms(step) / 2 && p <= ms(step),
                "{p:?} for step {step} ms"
            );
        }
        b.reset();
        let p = b.next_pause();
        assert!(p >= ms(20) && p <= ms(40), "{p:?} after reset");
    }

    #[test]
    fn pauses_are_jittered() {
        let ms = Duration::from_millis;
        let mut a = Backoff::new(ms(1000), ms(1000));
        let mut b = Backoff::new(ms(1000), ms(1000));
        let differ = (0..8).any(|_| a.next_pause() != b.next_pause());
        assert!(differ, "two back-offs drew the same eight pauses");
    }

    #[test]
    fn a_first_pause_above_the_cap_is_capped() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(500), ms(100));
        assert!(b.next_pause() <= ms(100));
    }

    #[test]
    fn a_huge_cap_never_overflows() {
        // Doubling a step past Duration::MAX used to panic (Duration's `*` overflows).
        let mut b = Backoff::new(Duration::MAX / 3, Duration::MAX);
        for _ in 0..4 {
            assert!(b.next_pause() >= Duration::MAX / 6);
        }
    }
}
