//! A live connection: reading frames, pinging, detecting silence, dispatching replies.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::frame::{is_timeout, FrameReader};
use super::link::Link;
use super::session::Phase;
use super::Shared;
use crate::client::proto::{self, code, op, xid, Malformed, Reader, ReplyHeader};
use crate::error::Error;

/// How much later than asked the connection thread may look again, to spare a
/// `setsockopt` per frame read.
const READ_TIMEOUT_SLACK: Duration = Duration::from_millis(1);

/// Whether the read timeout set last (`current`) will do for a wait of `wanted`: it wakes
/// the thread at most [`READ_TIMEOUT_SLACK`] late, or early but after half of `wanted` (an
/// early wake only runs the loop once more). Under steady traffic the wait asked is the
/// ping interval less a few microseconds every time, so the socket's timeout is set once,
/// not once per frame (a system call per reply, a third of those a request costs).
fn keeps_read_timeout(current: Option<Duration>, wanted: Duration) -> bool {
    current.is_some_and(|c| c <= wanted + READ_TIMEOUT_SLACK && c >= wanted / 2)
}

/// Whether a frame with this xid raises the zxid the session has seen: a reply to a request
/// (SetWatches' included), not a notification, a ping's or an auth reply (see `dispatch`).
fn counts_zxid(frame_xid: i32) -> bool {
    !matches!(frame_xid, xid::WATCH_EVENT | xid::PING | xid::AUTH)
}

impl Shared {
    /// Reads frames until the connection breaks, pinging when idle, and gives up on it when
    /// the server has been silent, or has left our requests (pings included) unanswered, for
    /// two thirds of the session timeout. The loss clock runs here too: once the session may
    /// have expired on the server, it is lost, whatever else still arrives on the socket.
    pub(super) fn serve(&self, stream: Link, mut frames: FrameReader) {
        let t = self.negotiated_timeout();
        let ping_every = t / 3;
        let silence_limit = t * 2 / 3;
        // The read timeout set last on the socket (see `keeps_read_timeout`).
        let mut read_timeout: Option<Duration> = None;
        loop {
            // The clock first: after a pause of this process, nothing read from the socket
            // may count before the loss is told.
            if self.check_timeout_loss() {
                return;
            }
            // Every complete frame in the buffer (some may have come with the handshake).
            loop {
                let handled = frames.pop().and_then(|f| match f {
                    Some(frame) => self.dispatch(frame).map(|()| true),
                    None => Ok(false),
                });
                match handled {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(m) => {
                        log::error!(
                            "zkguard: malformed frame from the server, dropping the connection: {}",
                            m.0
                        );
                        return;
                    }
                }
            }
            if self.session_ended() {
                return;
            }
            // One reading of the clock for this turn (a write since counts as none: idle 0).
            let now = self.clock.now_us();
            let silent = self.clock.silent_at(now);
            if silent >= silence_limit {
                log::warn!("zkguard: no frame from the server for {silent:?}; reconnecting");
                return;
            }
            let unanswered = self.clock.unanswered_at(now);
            if unanswered >= silence_limit {
                log::warn!(
                    "zkguard: no request sent in the last {unanswered:?} was answered; reconnecting"
                );
                return;
            }
            let rearmed = self.flush_rearm();
            if self.clock.idle_at(now) >= ping_every {
                self.send_ping();
            }
            let idle = self.clock.idle_at(now);
            // Zero only if a caller's write held the lock and the ping (or a re-arm) was
            // skipped: look again shortly rather than spin.
            let until_ping = match ping_every.saturating_sub(idle) {
                Duration::ZERO => Duration::from_millis(10),
                d => d,
            };
            let until_silent = silence_limit.saturating_sub(silent);
            let until_unanswered = silence_limit.saturating_sub(unanswered);
            let mut wait = until_ping.min(until_silent).min(until_unanswered);
            if !rearmed {
                wait = wait.min(Duration::from_millis(10));
            }
            let wait = wait.max(Duration::from_millis(1));
            if !keeps_read_timeout(read_timeout, wait) {
                if stream.set_read_timeout(Some(wait)).is_err() {
                    return;
                }
                read_timeout = Some(wait);
            }
            match frames.fill(&mut &stream) {
                // After our own close, the end of the connection is expected: debug.
                Ok(0) => {
                    log::log!(
                        self.quiet_if_closing(),
                        "zkguard: the server closed the connection"
                    );
                    return;
                }
                Ok(_) => self.clock.received(),
                Err(e) if is_timeout(&e) => {}
                Err(e) => {
                    log::log!(self.quiet_if_closing(), "zkguard: connection error: {e}");
                    return;
                }
            }
        }
    }

    /// The level of a record about the connection ending: info, debug once our own close
    /// has begun (then it is the close's doing).
    fn quiet_if_closing(&self) -> log::Level {
        if self.is_closing() {
            log::Level::Debug
        } else {
            log::Level::Info
        }
    }

    pub(super) fn session_ended(&self) -> bool {
        // While closing, keep reading: the reply to the close request must come through. The
        // closer shuts the socket down when it is done.
        self.session.lock().phase() != Phase::Connected
    }

    pub(super) fn send_ping(&self) {
        // Never wait for a caller's write: while it is blocked (a full socket buffer), this
        // thread must keep reading replies, and a caller that is writing needs no ping.
        let Some(mut io) = self.io.try_lock() else {
            return;
        };
        let Some(stream) = io.stream() else {
            return;
        };
        let sent = self.clock.now_us();
        match stream.write_all(&proto::request_frame(xid::PING, op::PING, &[])) {
            Ok(()) => {
                self.pings_sent.lock().push_back(sent);
                self.clock.sent()
            }
            Err(e) => {
                log::info!("zkguard: ping failed: {e}");
                stream.shutdown();
                io.take_stream();
            }
        }
    }

    pub(super) fn after_disconnect(&self) {
        let closing = self.is_closing();
        self.drop_connection(if closing {
            Error::Closed
        } else {
            Error::ConnectionLoss
        });
        self.enter_suspended(closing);
    }

    /// Handles one frame from the server.
    pub(super) fn dispatch(&self, frame: Vec<u8>) -> std::result::Result<(), Malformed> {
        let mut r = Reader::new(&frame);
        let h: ReplyHeader = proto::decode_reply_header(&mut r)?;
        // The zxid this session has seen is raised by the replies to its requests only
        // (SetWatches' included), never by a notification, a ping's or an auth reply: the
        // rule of Apache's client (`ClientCnxn.SendThread.readResponse` returns before it
        // reads `lastZxid` for those three). Since 3.9 (ZOOKEEPER-4655) a notification
        // carries the zxid of the transaction that fired it; one transaction may fire
        // several of our watches (a `multi`, a delete firing a data and a child watch), and
        // if the connection drops between their notifications, a reconnect that says it
        // saw that zxid (ConnectRequest's `lastZxidSeen`, SetWatches' `relativeZxid`) is
        // answered with no re-fire of the rest: they would be lost. A reply to a request
        // comes after every notification of the transactions before it (the server
        // answers a session in order), so its zxid is safe to say we saw.
        if h.zxid > 0 && counts_zxid(h.xid) {
            self.last_zxid.fetch_max(h.zxid, Ordering::Relaxed);
        }
        match h.xid {
            xid::PING => {
                if let Some(sent) = self.pings_sent.lock().pop_front() {
                    self.clock.answered(sent);
                }
                Ok(())
            }
            xid::AUTH => {
                if h.err != code::OK {
                    self.fail_auth();
                }
                Ok(())
            }
            xid::SET_WATCHES => {
                if h.err != code::OK {
                    log::warn!(
                        "zkguard: the server refused to re-arm watches (error {})",
                        h.err
                    );
                }
                Ok(())
            }
            xid::WATCH_EVENT => {
                let ev = proto::decode_watch_event(&mut r)?;
                self.on_watch_event(ev);
                Ok(())
            }
            _ => {
                let body_start = r.position();
                self.on_reply(&h, frame, body_start);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_replies_to_requests_raise_the_zxid_seen() {
        assert!(!counts_zxid(xid::WATCH_EVENT), "a notification");
        assert!(!counts_zxid(xid::PING), "a ping's reply");
        assert!(!counts_zxid(xid::AUTH), "an auth reply");
        assert!(counts_zxid(xid::SET_WATCHES), "SetWatches' reply");
        assert!(counts_zxid(1) && counts_zxid(i32::MAX), "a request's reply");
    }

    #[test]
    fn the_read_timeout_is_set_again_only_when_it_would_wake_too_late_or_too_early() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        // Nothing set yet.
        assert!(!keeps_read_timeout(None, ms(10)));
        // The ping interval, less a few microseconds more or less than last time.
        assert!(keeps_read_timeout(
            Some(ms(3333) - us(20)),
            ms(3333) - us(35)
        ));
        assert!(keeps_read_timeout(
            Some(ms(3333) - us(35)),
            ms(3333) - us(20)
        ));
        // A re-arm pending asks for 10 ms: a long timeout would wake far too late.
        assert!(!keeps_read_timeout(Some(ms(3333)), ms(10)));
        // A short one under a long wait would spin the loop.
        assert!(!keeps_read_timeout(Some(ms(10)), ms(3333)));
        // At most the slack late.
        assert!(keeps_read_timeout(Some(ms(11)), ms(10)));
        assert!(!keeps_read_timeout(Some(ms(11) + us(1)), ms(10)));
        assert!(keeps_read_timeout(Some(ms(5)), ms(10)));
        assert!(!keeps_read_timeout(Some(ms(5) - us(1)), ms(10)));
    }
}
