//! Connecting: host rotation and back-off, the session handshake, auth replay, SetWatches,
//! and closing a session the loss clock gave up before a new one opens (`session.rs`).

use std::cell::Cell;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::frame::FrameReader;
use super::link::Link;
use super::session::Settled;
use super::Shared;
use crate::backoff::Backoff;
use crate::client::proto::{self, code, op, xid, Reader};
use crate::client::sasl::Mechanism;
use crate::client::types::LossReason;
use crate::error::{ConnectAttempt, ConnectFailure};

/// Why one connect attempt failed, and at which address (once the name resolved).
pub(super) type Failed = (Option<SocketAddr>, ConnectFailure);

pub(super) enum Handshake {
    Live(Link, FrameReader),
    Expired,
}

impl Shared {
    // ---------------------------------------------------------------- the connection thread

    /// The connection thread's body. Returns when the client is closed.
    pub fn run(self: Arc<Shared>) {
        let mut failures_in_row: u32 = 0;
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
        loop {
            if self.is_closing() {
                break;
            }
            self.check_timeout_loss();
            let pick = self.servers.lock().next();
            match self.connect_once(&pick.host) {
                Ok(Some((stream, frames))) => {
                    let up = Instant::now();
                    // A new server list asked for a move while this server was being
                    // connected to (`servers.rs`): leave it at once.
                    if self.servers.lock().must_leave(pick.list) {
                        stream.shutdown();
                    }
                    self.serve(stream, frames);
                    let moved = self.servers.lock().must_leave(pick.list);
                    self.after_disconnect();
                    // Reconnect at once (to the next server) after a connection that stayed
                    // up or was left for a new list; one that broke soon after its handshake
                    // (a flapping server or a proxy that drops us) counts as a failure, so
                    // back-off applies.
                    if moved || up.elapsed() >= Self::stayed_up(self.negotiated_timeout()) {
                        failures_in_row = 0;
                        backoff.reset();
                        continue;
                    }
                    log::debug!(
                        "zkguard: the connection to {} broke after {:?}",
                        pick.host,
                        up.elapsed()
                    );
                    failures_in_row += 1;
                }
                Ok(None) => {
                    // Expired session or closing: go round at once.
                    continue;
                }
                Err((addr, why)) => {
                    let attempt = ConnectAttempt::new(&pick.host, addr, why.clone());
                    log::debug!("zkguard: connect failed: {attempt}");
                    if let Some(i) = pick.first_list_index {
                        self.record_failure(i, addr, why);
                    }
                    failures_in_row += 1;
                }
            }
            // After every server of the list failed once in a row, back off (with jitter) so a
            // client waiting for a dead ensemble stays idle.
            let servers = self.servers.lock().len();
            if (failures_in_row as usize).is_multiple_of(servers) {
                let mut pause = backoff.next_pause();
                if let Some(left) = self.time_until_loss() {
                    pause = pause.min(left);
                }
                let _ = self.wake.1.recv_timeout(pause);
            }
        }
        log::debug!("zkguard: connection thread exits");
    }

    /// How long a connection must live to count as one that worked (no back-off after it).
    pub(super) fn stayed_up(negotiated: Duration) -> Duration {
        (negotiated / 3).min(Duration::from_secs(1))
    }

    /// One attempt at one server: TCP connect, session handshake, auth, SetWatches, publish.
    /// `Ok(Some(..))` is a live connection, `Ok(None)` an attempt to repeat at once.
    pub(super) fn connect_once(
        &self,
        host: &str,
    ) -> std::result::Result<Option<(Link, FrameReader)>, Failed> {
        let (session_id, passwd) = self.session.lock().resume();
        let requested = self.cfg.session_timeout;
        // One attempt gets a third of the session timeout (at most 2 s, at least 250 ms), and
        // never runs past the moment the current session would count as lost.
        let mut budget = (requested / 3).clamp(Duration::from_millis(250), Duration::from_secs(2));
        if let Some(left) = self.time_until_loss() {
            budget = budget.min(left.max(Duration::from_millis(1)));
        }
        let mut deadline = Instant::now() + budget;
        let addrs: Vec<SocketAddr> = host
            .to_socket_addrs()
            .map_err(|e| (None, ConnectFailure::Resolve(e.into())))?
            .collect();
        if addrs.is_empty() {
            return Err((None, ConnectFailure::NoAddress));
        }
        let mut last_err = (None, ConnectFailure::NotReached);
        for addr in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if last_err.0.is_none() {
                    let e = io::Error::new(io::ErrorKind::TimedOut, "no time left in this attempt");
                    last_err = (Some(addr), ConnectFailure::io("connect", e));
                }
                break;
            }
            // A new session: first close the one the loss clock gave up, if the server
            // still holds it, so its nodes go now rather than a session timeout later.
            if session_id == 0 {
                if let Some((old, old_passwd)) = self.abandoned() {
                    match self.close_abandoned(host, addr, old, &old_passwd, deadline) {
                        Ok(how) => self.settle_abandoned(old, how),
                        Err((reached, why)) => {
                            if reached {
                                self.settle_abandoned(old, Settled::Failed);
                            }
                            last_err = (Some(addr), why);
                            continue;
                        }
                    }
                    // The new session's handshake gets a budget of its own.
                    deadline = deadline.max(Instant::now() + budget);
                }
            }
            match self.handshake(host, addr, session_id, &passwd, deadline) {
                Ok(Handshake::Live(stream, frames)) => return Ok(Some((stream, frames))),
                Ok(Handshake::Expired) => return Ok(None),
                Err(e) => last_err = (Some(addr), e),
            }
        }
        Err(last_err)
    }

    pub(super) fn handshake(
        &self,
        host: &str,
        addr: SocketAddr,
        session_id: i64,
        passwd: &[u8],
        deadline: Instant,
    ) -> std::result::Result<Handshake, ConnectFailure> {
        self.counters.connects.fetch_add(1, Ordering::Relaxed);
        let stream = Link::connect(addr, host, self.cfg.tls.as_ref(), deadline)?;
        let io_err = |e: io::Error| super::link::failure("handshake", e);
        let connect_sent_us = self.clock.now_us();
        // A new session has seen nothing: a server rebuilt from empty data (its zxids
        // restarted) must not refuse it for what an old session saw.
        let seen = if session_id == 0 {
            0
        } else {
            self.last_zxid.load(Ordering::Relaxed)
        };
        let hello = self.hello(seen, session_id, passwd);
        let (mut frames, resp) = self.greet(&stream, &hello, deadline, io_err)?;
        if resp.timeout_ms <= 0 {
            stream.shutdown();
            if session_id == 0 {
                return Err(ConnectFailure::SessionRefused);
            }
            self.enter_lost(LossReason::Expired);
            return Ok(Handshake::Expired);
        }
        let negotiated = Duration::from_millis(resp.timeout_ms as u64);
        if session_id != 0 && resp.session_id != session_id {
            // Not the session we asked to resume: ours is gone.
            self.enter_lost(LossReason::Expired);
        }
        // Log in (SASL) and replay auth before anyone else can write, and wait for the
        // verdicts.
        let early = self.login(&stream, host, &mut frames, deadline)?;
        // Re-arm every watch of this session (none for a new session).
        let frames_out = if session_id == resp.session_id {
            self.set_watches_frames()
        } else {
            Vec::new()
        };
        for f in &frames_out {
            stream.write_all(f).map_err(io_err)?;
        }
        let write_timeout = (negotiated / 3).max(Duration::from_millis(100));
        stream
            .set_write_timeout(Some(write_timeout))
            .map_err(io_err)?;
        // Publish.
        if !self.publish(&stream, addr, session_id, resp, connect_sent_us) {
            return Ok(Handshake::Expired);
        }
        for frame in early {
            if let Err(m) = self.dispatch(frame) {
                // Published already: callers may have written on it. Take it down the way
                // a broken live connection is (fail what is in flight, say Suspended), or
                // it would stay the current one with nobody reading it.
                self.after_disconnect();
                return Err(ConnectFailure::Malformed(format!(
                    "frame after it: {}",
                    m.0
                )));
            }
        }
        Ok(Handshake::Live(stream, frames))
    }

    /// The handshake asking for `session_id` (0: a new one) with its password, as a client
    /// that has seen zxid `seen`: a `ConnectRequest` frame.
    fn hello(&self, seen: i64, session_id: i64, passwd: &[u8]) -> Vec<u8> {
        let timeout_ms = self.cfg.session_timeout.as_millis().min(i32::MAX as u128) as i32;
        proto::connect_request(seen, timeout_ms, session_id, passwd)
    }

    /// The session handshake on a fresh `stream`: writes `out` (a `hello`, perhaps with
    /// requests after it, in one write) and reads the server's answer. `io_err` names what
    /// the connection was for in an I/O failure.
    fn greet(
        &self,
        stream: &Link,
        out: &[u8],
        deadline: Instant,
        io_err: impl Fn(io::Error) -> ConnectFailure,
    ) -> std::result::Result<(FrameReader, proto::ConnectResponse), ConnectFailure> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        stream.set_write_timeout(Some(left)).map_err(&io_err)?;
        stream.write_all(out).map_err(&io_err)?;
        let mut frames = FrameReader::new(self.cfg.max_reply);
        let resp = frames.read_frame_by(stream, deadline).map_err(&io_err)?;
        let resp =
            proto::decode_connect_response(&resp).map_err(|m| ConnectFailure::Malformed(m.0))?;
        Ok((frames, resp))
    }

    /// Closes abandoned session `session_id` (see `session.rs`) on the server at `addr`: a
    /// connection of its own resumes it with its password, logs in as this client does,
    /// and sends `closeSession`, waiting for the reply (the server has deleted the session's
    /// ephemeral nodes by then). `Gone` if the server no longer has the session. An error
    /// says whether a server was reached and served the attempt (`true`: it counts as a
    /// failed close); a connection closed before the handshake's answer is `false`.
    ///
    /// Without credentials there is no login, and the `closeSession` goes out with the
    /// handshake, in one write: a client that still holds the session and reconnects at
    /// once cannot take it back in between (what `expire_on_server`, the harness's expiry,
    /// relies on; with credentials it tries again instead).
    pub(super) fn close_abandoned(
        &self,
        host: &str,
        addr: SocketAddr,
        session_id: i64,
        passwd: &[u8],
        deadline: Instant,
    ) -> std::result::Result<Settled, (bool, ConnectFailure)> {
        const CLOSE_XID: i32 = 1;
        let stream =
            Link::connect(addr, host, self.cfg.tls.as_ref(), deadline).map_err(|e| (false, e))?;
        let reached = |e: ConnectFailure| (true, e);
        let failure = |e: io::Error| super::link::failure("close of a given-up session", e);
        let io_err = |e: io::Error| reached(failure(e));
        let close = proto::request_frame(CLOSE_XID, op::CLOSE, &[]);
        let one_write = self.cfg.sasl.is_none() && self.cfg.auth.is_empty();
        // Seen zxid 0: this connection reads nothing, so no server is too far behind for it.
        let mut out = self.hello(0, session_id, passwd);
        if one_write {
            out.extend_from_slice(&close);
        }
        // A server that closes the connection before it answers the handshake has not
        // served it (a restarted server accepts before it serves; a proxy or a load
        // balancer in front of a server that is down accepts and closes): no close was
        // refused, so it does not count toward giving the session up, or the client would
        // give up after three such connections and start its new session beside the old
        // one, which the server may still hold with its nodes.
        let unserved = Cell::new(false);
        let greeted = self.greet(&stream, &out, deadline, |e: io::Error| {
            unserved.set(closed_unanswered(&e));
            failure(e)
        });
        let (mut frames, resp) = match greeted {
            Ok(greeted) => greeted,
            Err(e) => {
                stream.shutdown();
                return Err((!unserved.get(), e));
            }
        };
        if resp.timeout_ms <= 0 || resp.session_id != session_id {
            stream.shutdown();
            return Ok(Settled::Gone);
        }
        let closed = (|| {
            if !one_write {
                self.login(&stream, host, &mut frames, deadline)
                    .map_err(reached)?;
                stream.write_all(&close).map_err(io_err)?;
            }
            loop {
                let frame = frames.read_frame_by(&stream, deadline).map_err(io_err)?;
                let h = proto::decode_reply_header(&mut Reader::new(&frame))
                    .map_err(|m| reached(ConnectFailure::Malformed(m.0)))?;
                if h.xid == CLOSE_XID {
                    break Ok(h.err);
                }
            }
        })();
        stream.shutdown();
        match closed? {
            code::OK => Ok(Settled::Closed),
            code::SESSION_EXPIRED => Ok(Settled::Gone),
            err => Err(io_err(io::Error::other(format!(
                "the server answered closeSession with error {err}"
            )))),
        }
    }

    /// Logs in with SASL (DIGEST-MD5 or Kerberos) when the client has a SASL login, as
    /// ZooKeeper's own client does: `sasl` requests carrying the mechanism's tokens until it is done,
    /// on every connection (a resumed session must log in again), before anything else is
    /// sent. A rejection closes the client ([`Error::AuthFailed`]). Returns the frames that
    /// came in meanwhile.
    ///
    /// [`Error::AuthFailed`]: crate::Error::AuthFailed
    fn sasl_login(
        &self,
        stream: &Link,
        host: &str,
        frames: &mut FrameReader,
        deadline: Instant,
    ) -> std::result::Result<Vec<Vec<u8>>, ConnectFailure> {
        let Some(creds) = &self.cfg.sasl else {
            return Ok(Vec::new());
        };
        let io_err = |e: io::Error| super::link::failure("SASL login", e);
        let (mut mech, mut token) = match Mechanism::start(creds, host) {
            Ok(started) => started,
            Err(why) => {
                stream.shutdown();
                return Err(why);
            }
        };
        let mut early = Vec::new();
        // Bounded by the mechanism (two round trips for DIGEST-MD5, three for Kerberos); a
        // server that never says "done" is malformed, not a reason to loop.
        for _round in 0..8 {
            let x = self.io.lock().next_xid();
            let mut w = proto::Writer::default();
            w.buffer(&token);
            stream
                .write_all(&proto::request_frame(x, op::SASL, &w.buf))
                .map_err(io_err)?;
            let frame = loop {
                let frame = frames.read_frame_by(stream, deadline).map_err(io_err)?;
                let mut r = Reader::new(&frame);
                let h = proto::decode_reply_header(&mut r)
                    .map_err(|m| ConnectFailure::Malformed(m.0))?;
                if h.xid != x {
                    early.push(frame);
                    continue;
                }
                if h.err != code::OK {
                    log::error!(
                        "zkguard: the server rejected the SASL login of {} (error {})",
                        creds.who(),
                        h.err
                    );
                    stream.shutdown();
                    self.fail_auth();
                    return Err(ConnectFailure::AuthFailed);
                }
                break frame;
            };
            let mut r = Reader::new(&frame);
            let challenge = proto::decode_reply_header(&mut r)
                .and_then(|_| r.buffer())
                .map_err(|m| ConnectFailure::Malformed(format!("SASL reply: {}", m.0)))?;
            match mech.step(&challenge) {
                Ok(Some(next)) => token = next,
                Ok(None) => return Ok(early),
                Err(why) => {
                    // The server could not prove it knows the password or holds the
                    // principal's key (or speaks another mechanism): not a server to trust
                    // with the session.
                    stream.shutdown();
                    return Err(why);
                }
            }
        }
        stream.shutdown();
        Err(ConnectFailure::Sasl {
            reason: "the server never finished the exchange".into(),
        })
    }

    /// Logs in on a fresh connection: SASL, then every `auth` credential (each waits for its
    /// verdict). Returns the frames that came in meanwhile. The first login of a client
    /// without TLS warns, once per client (see [`warn_cleartext`](Shared::warn_cleartext)).
    fn login(
        &self,
        stream: &Link,
        host: &str,
        frames: &mut FrameReader,
        deadline: Instant,
    ) -> std::result::Result<Vec<Vec<u8>>, ConnectFailure> {
        self.warn_cleartext(host);
        let mut early = self.sasl_login(stream, host, frames, deadline)?;
        early.extend(self.replay_auth(stream, frames, deadline)?);
        Ok(early)
    }

    /// Warns, the first time this client logs in (once per client, whatever the
    /// connections and sessions after), that it sends credentials without TLS: what an
    /// on-path observer can do with them, and how to turn TLS on. Nothing without
    /// credentials, or with TLS.
    fn warn_cleartext(&self, host: &str) {
        let mut sent = Vec::new();
        if self.cfg.auth.iter().any(|(scheme, _)| scheme == "digest") {
            sent.push("the digest password (auth sends it in clear)");
        } else if !self.cfg.auth.is_empty() {
            sent.push("the auth credentials");
        }
        if self.cfg.sasl.is_some() {
            sent.push("the SASL exchange");
        }
        if self.cfg.tls.is_some() || sent.is_empty() {
            return;
        }
        if self.cleartext_warned.swap(true, Ordering::Relaxed) {
            return;
        }
        log::warn!(
            "zkguard: logging in to {host} without TLS: anyone on the network path can read \
             {} and the session's id and password, and with those close this session, which \
             deletes every node it holds (a held lock's too: a second holder can get in); \
             connect with TLS to the servers' secureClientPort (ClientBuilder::tls, feature \
             tls; zkguard --tls-ca). Said once per client",
            sent.join(" and ")
        );
    }

    /// Sends every credential and waits for each verdict; a rejection closes the client.
    /// Returns the frames that came in meanwhile (dispatched once the connection is live).
    fn replay_auth(
        &self,
        stream: &Link,
        frames: &mut FrameReader,
        deadline: Instant,
    ) -> std::result::Result<Vec<Vec<u8>>, ConnectFailure> {
        for (scheme, auth) in &self.cfg.auth {
            let mut w = proto::Writer::default();
            w.int(0).string(scheme).buffer(auth);
            stream
                .write_all(&proto::request_frame(xid::AUTH, op::AUTH, &w.buf))
                .map_err(|e| super::link::failure("auth", e))?;
        }
        let mut auth_left = self.cfg.auth.len();
        let mut early = Vec::new();
        while auth_left > 0 {
            let frame = frames
                .read_frame_by(stream, deadline)
                .map_err(|e| super::link::failure("auth", e))?;
            let mut r = Reader::new(&frame);
            let h =
                proto::decode_reply_header(&mut r).map_err(|m| ConnectFailure::Malformed(m.0))?;
            if h.xid == xid::AUTH {
                if h.err != code::OK {
                    stream.shutdown();
                    self.fail_auth();
                    return Err(ConnectFailure::AuthFailed);
                }
                auth_left -= 1;
            } else {
                early.push(frame);
            }
        }
        Ok(early)
    }

    /// Makes a connection that passed its handshake the current one: resets the clocks,
    /// hands the socket to writers, moves the phase and generation, and tells subscribers
    /// (`Connected` for a new session, `Reconnected` for the same one). False if the client
    /// began closing meanwhile (the session is closed on the server instead).
    fn publish(
        &self,
        stream: &Link,
        addr: SocketAddr,
        session_id: i64,
        resp: proto::ConnectResponse,
        connect_sent_us: u64,
    ) -> bool {
        self.clock.connected(connect_sent_us);
        self.pings_sent.lock().clear();
        let mut s = self.session.lock();
        if s.closing() {
            // Closed while we were connecting: do not leave this session behind.
            let _ = stream.write_all(&proto::request_frame(1, op::CLOSE, &[]));
            stream.shutdown();
            return false;
        }
        let same = session_id != 0 && session_id == resp.session_id;
        if !same {
            // The zxids this session sees start from the server's, whatever the old
            // session saw (the ensemble may have been rebuilt from nothing).
            self.last_zxid.store(0, Ordering::Relaxed);
        }
        self.io.lock().publish(stream.clone(), resp.session_id);
        *self.link.lock() = Some(stream.clone());
        self.enter_connected(&mut s, addr, resp, same);
        true
    }
}

/// Whether `e` says the peer closed the connection (an EOF where a reply was due, a reset,
/// a broken pipe): nothing was answered.
fn closed_unanswered(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection counts as one that worked once it has lived a third of the session
    /// timeout, at most a second.
    #[test]
    fn a_connection_worked_after_a_third_of_the_timeout_at_most_a_second() {
        let ms = Duration::from_millis;
        assert_eq!(Shared::stayed_up(ms(1500)), ms(500));
        assert_eq!(Shared::stayed_up(ms(30_000)), ms(1000));
    }
}
