//! The session: its state and phases, the loss clock, and who hears its events.
//!
//! This file alone moves the phase: every change is one method below, which updates
//! [`SessionInfo`] under its lock, tells the subscribers and wakes the waiters (the
//! condition variable `changed`). The other files read the session through
//! [`SessionInfo`]'s accessors.
//!
//! | from | cause (method) | to | event |
//! |---|---|---|---|
//! | Connecting, Suspended, Lost | a handshake is published ([`enter_connected`]) | Connected | `Connected` (a new session), `Reconnected` (the one asked for) |
//! | Connected | the connection broke ([`enter_suspended`]) | Suspended | `Suspended`, none while closing |
//! | any with a session, not closing | the loss clock ran out, the server said expired, or a handshake gave another session ([`enter_lost`]) | Lost | `Lost` |
//! | any, not closing | [`Client::close`] begins ([`begin_close`]) | unchanged, closing | `Closed` |
//! | closing | the close is done ([`finish_close`]) | Closed | none (said when it began) |
//! | any | the server rejected the credentials ([`fail_auth`]) | Closed, closing | `Closed` |
//!
//! Beside the phase, [`enter_lost`] keeps a session the loss clock gave up as *abandoned*
//! (its id and password): the server may still hold it, with its ephemeral nodes (a
//! standalone server restarted from its data restores its sessions with a fresh timeout).
//! Before the next new session, the connection thread closes it on the server
//! (`connect.rs`, [`abandoned`]) and [`settle_abandoned`] forgets it: closed, found gone,
//! or given up after [`ABANDON_TRIES`] attempts that a server served (one that closes the
//! connection before answering the handshake, as a restarting server or a proxy in front
//! of a stopped one does, does not count). A session the server
//! itself said expired is not kept; the current session never is, so the client never
//! closes a session it still counts live. `Connected` for the new session therefore comes
//! after the old session's nodes are gone (unless the close was given up).
//!
//! Users see `Closed` from the first moment of a close ([`SessionInfo::public_state`]),
//! `Suspended` for Connecting, and, from the loss clock, `Suspended` or `Lost` for a
//! session whose requests have gone unanswered ([`Shared::state`]). Leaving Connected
//! moves nothing else: the connection thread drops the connection and reconnects.
//!
//! [`enter_connected`]: Shared::enter_connected
//! [`enter_suspended`]: Shared::enter_suspended
//! [`enter_lost`]: Shared::enter_lost
//! [`begin_close`]: Shared::begin_close
//! [`finish_close`]: Shared::finish_close
//! [`fail_auth`]: Shared::fail_auth
//! [`abandoned`]: Shared::abandoned
//! [`settle_abandoned`]: Shared::settle_abandoned
//! [`Client::close`]: crate::Client::close

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use super::Shared;
use crate::client::proto::ConnectResponse;
use crate::client::types::{EventType, Hex, LossReason, SessionEvent, SessionState};
use crate::error::{ConnectFailure, Error};

/// Something inside the crate that reacts to session events (guards, waiters). Held
/// weakly: when its owner goes, it drops out of the list. Same rules as [`WatchSink`].
pub(crate) trait SessionSink: Send + Sync {
    fn on_session(&self, ev: &SessionEvent);
}

/// Who hears session events.
pub(super) enum Subscriber {
    Chan(Sender<SessionEvent>),
    Sink(std::sync::Weak<dyn SessionSink>),
}

impl Subscriber {
    /// Delivers; false once the listener is gone.
    fn deliver(&self, ev: &SessionEvent) -> bool {
        match self {
            Subscriber::Chan(tx) => tx.send(*ev).is_ok(),
            Subscriber::Sink(w) => match w.upgrade() {
                Some(s) => {
                    s.on_session(ev);
                    true
                }
                None => false,
            },
        }
    }

    fn alive(&self) -> bool {
        match self {
            Subscriber::Chan(_) => true,
            Subscriber::Sink(w) => w.strong_count() > 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Connecting,
    Connected,
    Suspended,
    Lost,
    Closed,
}

impl Phase {
    /// The `state` label of `zkguard_session_state` (`crate::metrics`).
    pub(super) fn label(self) -> &'static str {
        match self {
            Phase::Connecting => "connecting",
            Phase::Connected => "connected",
            Phase::Suspended => "suspended",
            Phase::Lost => "lost",
            Phase::Closed => "closed",
        }
    }

    /// What callers are told.
    fn public(self) -> SessionState {
        match self {
            Phase::Connected => SessionState::Connected,
            Phase::Suspended | Phase::Connecting => SessionState::Suspended,
            Phase::Lost => SessionState::Lost,
            Phase::Closed => SessionState::Closed,
        }
    }
}

/// The session's state, behind `Shared::session`. Its fields are written only by the
/// transitions in this file (and the first connect's `failures` by `session/first.rs`).
pub(super) struct SessionInfo {
    phase: Phase,
    session_id: i64,
    passwd: Vec<u8>,
    negotiated: Duration,
    /// Moves every time a session is lost, so waiters can tell "same session" from "new one".
    epoch: u64,
    /// Moves with every new connection.
    generation: u64,
    closing: bool,
    /// The server rejected the credentials (the client closed itself).
    auth_failed: bool,
    server: Option<SocketAddr>,
    subscribers: Vec<Subscriber>,
    /// Per host, the last thing that went wrong there (for the connect error), numbered in
    /// the order the failures happened.
    failures: Vec<Option<(u64, Option<SocketAddr>, ConnectFailure)>>,
    /// The number of the next failure in `failures`.
    failures_seen: u64,
    /// A session the loss clock gave up, to close on the server before the next new one.
    abandoned: Option<Abandoned>,
}

/// A session the client gave up on its own (the loss clock ran out): the server may still
/// hold it. Never the current session.
struct Abandoned {
    session_id: i64,
    passwd: Vec<u8>,
    /// Attempts to close it that reached a server and failed.
    tries: u32,
}

/// How a close of an abandoned session went ([`Shared::settle_abandoned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settled {
    /// The server closed it (its ephemeral nodes are deleted).
    Closed,
    /// The server no longer had it.
    Gone,
    /// A server was reached but the close failed (counts toward [`ABANDON_TRIES`]).
    Failed,
}

/// Failed closes of an abandoned session (each at a server that was reached) before the
/// client gives up and leaves it to expire on the server.
pub(super) const ABANDON_TRIES: u32 = 3;

mod first;

impl SessionInfo {
    /// No session yet, connecting to one of `hosts` servers.
    pub(super) fn new(hosts: usize) -> SessionInfo {
        SessionInfo {
            phase: Phase::Connecting,
            session_id: 0,
            passwd: Vec::new(),
            negotiated: Duration::ZERO,
            epoch: 0,
            generation: 0,
            closing: false,
            auth_failed: false,
            server: None,
            subscribers: Vec::new(),
            failures: vec![None; hosts],
            failures_seen: 0,
            abandoned: None,
        }
    }

    pub(super) fn phase(&self) -> Phase {
        self.phase
    }

    /// The session's loss count (see `epoch`).
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The connection's number (see `generation`).
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// A close has begun (or the credentials were rejected).
    pub(super) fn closing(&self) -> bool {
        self.closing
    }

    /// What a handshake asks to resume: the session id (0 for a new one) and its password.
    pub(super) fn resume(&self) -> (i64, Vec<u8>) {
        (self.session_id, self.passwd.clone())
    }

    /// The state users see: `Closed` from the first moment of a close (the `Closed` event
    /// goes out then, before the server is asked).
    pub(super) fn public_state(&self) -> SessionState {
        if self.closing {
            SessionState::Closed
        } else {
            self.phase.public()
        }
    }

    /// Why requests fail once the client is closed.
    pub(super) fn closed_error(&self) -> Error {
        if self.auth_failed {
            Error::AuthFailed
        } else {
            Error::Closed
        }
    }
}

/// The most the client declares a silent session lost ahead of its timeout.
const LOSS_MARGIN: Duration = Duration::from_millis(250);

impl Shared {
    // ---------------------------------------------------------------- public views

    /// The state, read at the call against the clock as well as the phase the connection
    /// thread last wrote (which may be stale: this process may have been paused, or that
    /// thread not scheduled): a session whose requests have gone unanswered for two thirds
    /// of its timeout is `Suspended`, and once it may have expired on the server, `Lost`.
    pub fn state(&self) -> SessionState {
        let s = self.session.lock();
        self.state_now(&s)
    }

    pub(super) fn state_now(&self, s: &SessionInfo) -> SessionState {
        let st = s.public_state();
        if s.session_id == 0 || !matches!(st, SessionState::Connected | SessionState::Suspended) {
            return st;
        }
        let unanswered = self.clock.unanswered();
        if unanswered >= Self::loss_after(s.negotiated) {
            SessionState::Lost
        } else if unanswered >= s.negotiated * 2 / 3 {
            SessionState::Suspended
        } else {
            st
        }
    }

    pub fn session_id(&self) -> i64 {
        self.session.lock().session_id
    }

    pub fn negotiated_timeout(&self) -> Duration {
        let s = self.session.lock();
        if s.negotiated.is_zero() {
            self.cfg.session_timeout
        } else {
            s.negotiated
        }
    }

    pub fn server(&self) -> Option<SocketAddr> {
        let s = self.session.lock();
        if s.phase == Phase::Connected {
            s.server
        } else {
            None
        }
    }

    pub fn subscribe(&self) -> Receiver<SessionEvent> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.session.lock().subscribers.push(Subscriber::Chan(tx));
        rx
    }

    /// Adds a sink for session events (dead ones are pruned here) and returns, read under
    /// the same lock, the session id and whether that session is still alive, so a caller
    /// can't miss a loss that happened just before.
    pub fn subscribe_sink(&self, sink: std::sync::Weak<dyn SessionSink>) -> (i64, SessionState) {
        let mut s = self.session.lock();
        s.subscribers.retain(Subscriber::alive);
        s.subscribers.push(Subscriber::Sink(sink));
        let st = self.state_now(&s);
        (s.session_id, st)
    }

    pub fn is_closing(&self) -> bool {
        let s = self.session.lock();
        s.closing || s.phase == Phase::Closed
    }

    // ---------------------------------------------------------------- transitions

    /// The phase moves to `to` (measured: `crate::metrics`).
    fn go(&self, s: &mut SessionInfo, to: Phase) {
        if s.phase != to {
            self.meter.session(Some(s.phase.label()), to.label());
        }
        s.phase = to;
    }

    fn emit(&self, s: &mut SessionInfo, ev: SessionEvent) {
        log::debug!("zkguard: session event {ev:?}");
        s.subscribers.retain(|sub| sub.deliver(&ev));
    }

    /// Connecting, Suspended or Lost → Connected: a connection that passed its handshake is
    /// the current one (the caller holds `s` across handing it to writers). `Reconnected`
    /// if it resumed the session asked for (`same`), else `Connected` to a new one.
    pub(super) fn enter_connected(
        &self,
        s: &mut SessionInfo,
        addr: SocketAddr,
        resp: ConnectResponse,
        same: bool,
    ) {
        let negotiated = Duration::from_millis(resp.timeout_ms as u64);
        s.session_id = resp.session_id;
        s.passwd = resp.passwd;
        s.negotiated = negotiated;
        s.server = Some(addr);
        self.go(s, Phase::Connected);
        if s.generation > 0 {
            self.meter.reconnected(same);
        }
        s.generation += 1;
        let ev = if same {
            SessionEvent::Reconnected {
                session_id: resp.session_id,
            }
        } else {
            self.counters.sessions.fetch_add(1, Ordering::Relaxed);
            SessionEvent::Connected {
                session_id: resp.session_id,
            }
        };
        let how = if same { "resumed" } else { "new" };
        log::info!(
            "zkguard: {how} session {} via {addr}, session timeout {negotiated:?}",
            Hex(resp.session_id)
        );
        self.emit(s, ev);
        self.changed.notify_all();
    }

    /// Connected → Suspended: the connection broke. Told as `Suspended` unless the client
    /// was `closing` when it broke (then it is only noted, for the waiters).
    pub(super) fn enter_suspended(&self, closing: bool) {
        let mut s = self.session.lock();
        if s.phase != Phase::Connected {
            return;
        }
        self.go(&mut s, Phase::Suspended);
        if !closing {
            s.server = None;
            let session_id = s.session_id;
            self.emit(&mut s, SessionEvent::Suspended { session_id });
        }
        self.changed.notify_all();
    }

    /// → Lost: the session is gone. Tell everyone, forget its watches; the connection
    /// thread starts over with a new one. Nothing if there is no session or the client is
    /// closing.
    pub(super) fn enter_lost(&self, reason: LossReason) {
        {
            let mut s = self.session.lock();
            if s.session_id == 0 || s.closing {
                return;
            }
            let session_id = s.session_id;
            log::warn!(
                "zkguard: session {} lost: {}",
                Hex(session_id),
                match reason {
                    LossReason::Expired => "the server said it expired",
                    LossReason::Timeout => "no server answered within its timeout",
                }
            );
            s.session_id = 0;
            let passwd = std::mem::take(&mut s.passwd);
            // Given up by our clock alone: the server may still hold it (closed before the
            // next new session). One the server said expired has nothing left to close.
            if reason == LossReason::Timeout {
                s.abandoned = Some(Abandoned {
                    session_id,
                    passwd,
                    tries: 0,
                });
            }
            s.epoch += 1;
            self.go(&mut s, Phase::Lost);
            self.emit(&mut s, SessionEvent::Lost { session_id, reason });
            self.changed.notify_all();
        }
        self.fire_all_watches(EventType::SessionLost, false);
    }

    /// A close begins: `Closed` is said now, the phase stays. `None` if the client is
    /// closed or closing already, else whether it is connected and whether it has a session
    /// to close.
    pub(super) fn begin_close(&self) -> Option<(bool, bool)> {
        let mut s = self.session.lock();
        if s.phase == Phase::Closed || s.closing {
            return None;
        }
        s.closing = true;
        match s.session_id {
            0 => log::debug!("zkguard: closing the client (it has no session)"),
            id => log::debug!("zkguard: closing session {}", Hex(id)),
        }
        // Said first, before the server is asked: once it closes the session it deletes
        // our ephemeral nodes, and another client may take a lock or leadership of ours
        // at once. Our guards must have been told by then.
        self.emit(&mut s, SessionEvent::Closed);
        Some((
            s.phase == Phase::Connected,
            s.session_id != 0 && s.phase != Phase::Lost,
        ))
    }

    /// The abandoned session to close on the server before a new session is opened (its
    /// id and password), if there is one. Never the current session.
    pub(super) fn abandoned(&self) -> Option<(i64, Vec<u8>)> {
        let s = self.session.lock();
        s.abandoned
            .as_ref()
            .filter(|a| a.session_id != s.session_id)
            .map(|a| (a.session_id, a.passwd.clone()))
    }

    /// A close of abandoned session `session_id` went as `how`: forgotten once closed, found
    /// gone, or failed [`ABANDON_TRIES`] times (then it expires on the server on its own).
    pub(super) fn settle_abandoned(&self, session_id: i64, how: Settled) {
        let mut s = self.session.lock();
        let Some(a) = s.abandoned.as_mut().filter(|a| a.session_id == session_id) else {
            return;
        };
        let id = Hex(session_id);
        match how {
            Settled::Closed => {
                log::info!("zkguard: closed session {id}, given up earlier (its nodes are deleted)")
            }
            Settled::Gone => log::debug!("zkguard: session {id}, given up earlier, had expired"),
            Settled::Failed => {
                a.tries += 1;
                if a.tries < ABANDON_TRIES {
                    return;
                }
                log::warn!(
                    "zkguard: could not close session {id}, given up earlier, in {ABANDON_TRIES} \
                     tries; its nodes stay until the server expires it"
                );
            }
        }
        s.abandoned = None;
    }

    /// Closing → Closed: the close is done (its event went out when it began).
    pub(super) fn finish_close(&self) {
        let mut s = self.session.lock();
        self.go(&mut s, Phase::Closed);
        s.session_id = 0;
        self.changed.notify_all();
    }

    /// → Closed: the server rejected the client's credentials; the client closes itself,
    /// and every watch is told `Closed`.
    pub(super) fn fail_auth(&self) {
        log::error!("zkguard: the server rejected the client's credentials; closing the client");
        {
            let mut s = self.session.lock();
            s.closing = true;
            s.auth_failed = true;
            self.go(&mut s, Phase::Closed);
            self.emit(&mut s, SessionEvent::Closed);
            self.changed.notify_all();
        }
        self.fire_all_watches(EventType::Closed, true);
    }

    // ---------------------------------------------------------------- the loss clock

    /// How long after the send of the last request the server answered the session counts
    /// as lost: the session timeout, less a margin so that a late wake-up of the connection
    /// thread (a loaded machine) still reports the loss before the server can expire it.
    pub(super) fn loss_after(negotiated: Duration) -> Duration {
        negotiated.saturating_sub((negotiated / 10).min(LOSS_MARGIN))
    }

    /// Time left before the current session counts as lost, if there is one. Counted the
    /// same way connected or not: the server renews a session only when a request arrives.
    pub(super) fn time_until_loss(&self) -> Option<Duration> {
        let s = self.session.lock();
        if s.session_id == 0 || s.closing {
            return None;
        }
        Some(Self::loss_after(s.negotiated).saturating_sub(self.clock.unanswered()))
    }

    /// Declares the session lost if its time is up; true if it did (or it was already gone).
    pub(super) fn check_timeout_loss(&self) -> bool {
        if self.time_until_loss() == Some(Duration::ZERO) {
            self.enter_lost(LossReason::Timeout);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::client::conn::clock::Clock;
    use crate::client::conn::unconnected;

    /// A handshake for session `id` published, as the connection thread does; `same` if it
    /// resumed the session asked for.
    fn publish(sh: &Shared, id: i64, same: bool) {
        let resp = ConnectResponse {
            timeout_ms: 60_000,
            session_id: id,
            passwd: vec![7; 16],
        };
        let mut s = sh.session.lock();
        sh.enter_connected(&mut s, "127.0.0.1:2181".parse().unwrap(), resp, same);
    }

    struct Deaf;

    impl SessionSink for Deaf {
        fn on_session(&self, _ev: &SessionEvent) {}
    }

    /// A sink whose owner is gone is dropped from the list when another subscribes, not
    /// only at the next event: a client that makes guards for hours on a quiet session
    /// would otherwise keep every one it ever made.
    #[test]
    fn a_dead_sink_leaves_the_list_when_another_subscribes() {
        let sh = unconnected();
        let live: Arc<dyn SessionSink> = Arc::new(Deaf);
        sh.subscribe_sink(Arc::downgrade(&live));
        for _ in 0..3 {
            let gone: Arc<dyn SessionSink> = Arc::new(Deaf);
            sh.subscribe_sink(Arc::downgrade(&gone));
        }
        sh.subscribe_sink(Arc::downgrade(&live));
        let s = sh.session.lock();
        assert_eq!(s.subscribers.len(), 2, "the live sink twice, no dead one");
        assert!(s.subscribers.iter().all(Subscriber::alive));
    }

    /// A request that found its connection broken waits for the next one; once a new
    /// connection is up it goes on, though the phase reads `Connected` as it did before the
    /// break (its waiter woke only after the reconnect: the generation moved).
    #[test]
    fn a_request_waiting_for_its_broken_connection_goes_on_once_another_is_up() {
        let sh = Arc::new(unconnected());
        publish(&sh, 0x51, false);
        let broken = sh.session.lock().generation();
        sh.enter_suspended(false);
        publish(&sh, 0x51, true);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let waiter = Arc::clone(&sh);
        std::thread::spawn(move || {
            let hour = std::time::Instant::now() + Duration::from_secs(3600);
            waiter.wait_connection_change(broken, hour);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(20)).is_ok(),
            "the waiter still waiting for a connection change 20s after the reconnect"
        );
    }

    /// The state is read against the loss clock: a session whose requests have gone
    /// unanswered for two thirds of its (60 s) timeout reads `Suspended`, and from its loss
    /// time on `Lost`, though the phase still says `Connected`; a session silent a little
    /// reads the phase, and a closing client `Closed`, however silent.
    #[test]
    fn the_state_is_read_against_the_loss_clock() {
        use SessionState::*;
        for (silent, closing, want) in [
            (0, false, Connected),
            (30, false, Connected),
            (50, false, Suspended),
            (70, false, Lost),
            (50, true, Closed),
        ] {
            let mut sh = unconnected();
            sh.clock = Clock::started_ago(Duration::from_secs(silent));
            publish(&sh, 0x5e, false);
            if closing {
                sh.begin_close();
            }
            assert_eq!(sh.state(), want, "silent {silent}s, closing {closing}");
        }
    }

    /// A session counts as lost a tenth of its timeout early, at most `LOSS_MARGIN`.
    #[test]
    fn the_loss_margin_is_a_tenth_of_the_timeout_at_most_a_quarter_second() {
        let ms = Duration::from_millis;
        assert_eq!(Shared::loss_after(ms(1000)), ms(900));
        assert_eq!(Shared::loss_after(ms(60_000)), ms(59_750));
        assert_eq!(Shared::loss_after(Duration::ZERO), Duration::ZERO);
    }

    /// A session the loss clock gave up is kept to close on the server, and forgotten once
    /// closed, found gone, or failed `ABANDON_TRIES` times; a settle naming another
    /// session leaves it, and a session the server said expired is not kept at all.
    #[test]
    fn a_given_up_session_is_kept_until_closed_gone_or_failed_three_times() {
        let given_up = |sh: &Shared, id: i64| {
            publish(sh, id, false);
            sh.enter_lost(LossReason::Timeout);
            assert_eq!(sh.abandoned(), Some((id, vec![7; 16])), "{id:#x} kept");
        };
        for how in [Settled::Closed, Settled::Gone] {
            let sh = unconnected();
            given_up(&sh, 0xa1);
            sh.settle_abandoned(0xb2, how);
            assert!(sh.abandoned().is_some(), "{how:?} of another session");
            sh.settle_abandoned(0xa1, how);
            assert_eq!(sh.abandoned(), None, "{how:?}");
        }
        let sh = unconnected();
        given_up(&sh, 0xa1);
        for tries in 1..ABANDON_TRIES {
            sh.settle_abandoned(0xa1, Settled::Failed);
            assert!(
                sh.abandoned().is_some(),
                "given up after {tries} failed closes"
            );
        }
        sh.settle_abandoned(0xa1, Settled::Failed);
        assert_eq!(
            sh.abandoned(),
            None,
            "kept after {ABANDON_TRIES} failed closes"
        );
        publish(&sh, 0xc3, false);
        sh.enter_lost(LossReason::Expired);
        assert_eq!(sh.abandoned(), None, "an expired session kept");
    }
}
