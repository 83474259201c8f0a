//! The connection's clocks: when the client last wrote, last read, and when the latest
//! request the server answered was sent (the loss clock counts from there). Stamps are
//! microseconds since the client started, in atomics: the connection thread and the
//! callers stamp them without a lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(super) struct Clock {
    base: Instant,
    last_send_us: AtomicU64,
    last_recv_us: AtomicU64,
    /// When the latest request the server has answered was sent. The server renews the
    /// session when a request arrives, which is after this; so the session cannot expire on
    /// the server before this + the session timeout, and the client's own loss clock counts
    /// from here (counting from the reply's arrival would be late by the server's and the
    /// network's delay).
    last_acked_send_us: AtomicU64,
}

impl Clock {
    pub(super) fn new() -> Clock {
        Clock {
            base: Instant::now(),
            last_send_us: AtomicU64::new(0),
            last_recv_us: AtomicU64::new(0),
            last_acked_send_us: AtomicU64::new(0),
        }
    }

    /// A clock started `ago`: to the loss clock, a client whose requests have gone
    /// unanswered that long (the unit tests read the state against it).
    #[cfg(test)]
    pub(super) fn started_ago(ago: Duration) -> Clock {
        let mut c = Clock::new();
        c.base = Instant::now()
            .checked_sub(ago)
            .expect("the machine has been up longer than the clock's age");
        c
    }

    /// Now, as a stamp.
    pub(super) fn now_us(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }

    /// From `stamp` to `now` (a stamp taken before it counts as zero).
    fn since(stamp: &AtomicU64, now: u64) -> Duration {
        Duration::from_micros(now.saturating_sub(stamp.load(Ordering::Relaxed)))
    }

    /// Something was written just now.
    pub(super) fn sent(&self) {
        self.last_send_us.store(self.now_us(), Ordering::Relaxed);
    }

    /// Something was read just now.
    pub(super) fn received(&self) {
        self.last_recv_us.store(self.now_us(), Ordering::Relaxed);
    }

    /// The server answered a request sent at `sent_us`.
    pub(super) fn answered(&self, sent_us: u64) {
        self.last_acked_send_us
            .fetch_max(sent_us, Ordering::Relaxed);
    }

    /// A new connection is live: it was written to and read from just now, and its
    /// handshake, sent at `connect_sent_us`, was answered.
    pub(super) fn connected(&self, connect_sent_us: u64) {
        let now = self.now_us();
        self.last_recv_us.store(now, Ordering::Relaxed);
        self.last_send_us.store(now, Ordering::Relaxed);
        self.answered(connect_sent_us);
    }

    /// From the last write to `now` (a stamp: the connection thread reads the clock once
    /// per turn of its loop, where each of these read it again).
    pub(super) fn idle_at(&self, now: u64) -> Duration {
        Self::since(&self.last_send_us, now)
    }

    /// From the last read to `now`.
    pub(super) fn silent_at(&self, now: u64) -> Duration {
        Self::since(&self.last_recv_us, now)
    }

    /// Since the send of the latest request the server answered.
    pub(super) fn unanswered(&self) -> Duration {
        self.unanswered_at(self.now_us())
    }

    /// From the send of the latest request the server answered to `now`.
    pub(super) fn unanswered_at(&self, now: u64) -> Duration {
        Self::since(&self.last_acked_send_us, now)
    }
}
