//! `ClientStats`: what a client has done and holds: its connection's counters and its
//! `Meter`'s snapshot (`crate::metrics`).

/// Counters of what the client has done, and gauges of what it holds and waits for now
/// (always there, with or without the `metrics` feature), for tests, benchmarks and programs
/// without a metrics pipeline. Counts are since the client was built.
///
/// Two parts: the counts and gauges of the table in [`zkguard::metrics`](crate::metrics)
/// (`guards_held` to `acquire_failed`, the losses, `reconnects`, `watch_rearms`, the
/// leadership counts: the same events, not its histograms or session states), and the
/// connection's own counters, which the `metrics` facade does not record (`watch_events`,
/// `connect_attempts`, `sessions`, `requests`).
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let lock = zkguard::Mutex::new(&client, "/locks/report")?;
/// let guard = lock.acquire()?;
/// let s = client.stats();
/// assert_eq!((s.guards_held, s.acquired), (1, 1));
/// drop(guard);
/// assert_eq!(client.stats().guards_held, 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClientStats {
    /// Watch notifications received from the server (one per notification frame, however
    /// many local receivers it was delivered to).
    pub watch_events: u64,
    /// TCP connection attempts made.
    pub connect_attempts: u64,
    /// Sessions established (1 until a session is lost and replaced).
    pub sessions: u64,
    /// Requests written to a server by callers, including the own-node watch a guard sends
    /// when it is granted (pings, the handshake, and the watch re-arming the connection
    /// thread does by itself are not counted).
    pub requests: u64,
    /// Guards held now: granted by an acquire on this client and not yet released,
    /// dropped or lost (a semaphore's internal lock counts while it is held).
    pub guards_held: u64,
    /// Acquires whose node is queued now, not yet granted or given up.
    pub waiters_queued: u64,
    /// Acquire calls that got the lock (or leadership, or a permit).
    pub acquired: u64,
    /// Tries (`try_acquire`, `try_lead`) that found it taken.
    pub acquire_busy: u64,
    /// Acquires whose timeout passed first.
    pub acquire_timed_out: u64,
    /// Acquires ended by a [`Canceller`](crate::Canceller).
    pub acquire_cancelled: u64,
    /// Acquires that ended with another error.
    pub acquire_failed: u64,
    /// Guards lost because their session ended (expired, or a new one began).
    pub lost_session: u64,
    /// Guards lost because someone deleted (or replaced) their node.
    pub lost_node_deleted: u64,
    /// Guards lost because the client was closed while they held.
    pub lost_closed: u64,
    /// Connections made after the first (to the same session or, after a loss, a new one).
    pub reconnects: u64,
    /// Watches re-armed on a resumed session after a reconnect.
    pub watch_rearms: u64,
    /// Terms of leadership begun (elections, both styles).
    pub leadership_gained: u64,
    /// Terms of leadership ended: lost, resigned or dropped.
    pub leadership_lost: u64,
}

impl ClientStats {
    /// The client's counters and its meter's snapshot, together.
    pub(crate) fn of(c: &super::conn::Counters, m: crate::metrics::Snapshot) -> ClientStats {
        use std::sync::atomic::Ordering::Relaxed;
        let [acquired, acquire_busy, acquire_timed_out, acquire_cancelled, acquire_failed] =
            m.acquires;
        let [lost_session, lost_node_deleted, lost_closed] = m.losses;
        ClientStats {
            watch_events: c.watch_events.load(Relaxed),
            connect_attempts: c.connects.load(Relaxed),
            sessions: c.sessions.load(Relaxed),
            requests: c.requests.load(Relaxed),
            guards_held: m.guards_held,
            waiters_queued: m.waiters_queued,
            acquired,
            acquire_busy,
            acquire_timed_out,
            acquire_cancelled,
            acquire_failed,
            lost_session,
            lost_node_deleted,
            lost_closed,
            reconnects: m.reconnects,
            watch_rearms: m.rearms,
            leadership_gained: m.gained,
            leadership_lost: m.lost_leadership,
        }
    }
}
