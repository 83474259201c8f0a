//! The request path: writing requests (under the `io` lock) and the requests in flight.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::hash::FastMap;
use super::link::Link;
use super::reply::ReplyTx;
use super::session::Phase;
use super::watches::{WatchKind, WatchReg, WatchTx};
use super::{NoReply, Shared};
use crate::client::path;
use crate::client::proto::{self, code, op, Name, RawReply, Reader, ReplyHeader};
use crate::client::types::{EventType, WatchedEvent};
use crate::error::Error;

/// A request ready to be written.
pub(crate) struct Outgoing {
    /// What it is called, carried to where its reply is counted (`Meter::request`).
    pub name: Name,
    pub opcode: i32,
    pub body: Vec<u8>,
    pub watch: Option<WatchReg>,
    pub tx: ReplyTx,
}
/// A request written and not answered yet.
pub(super) struct InFlight {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    name: Name,
    opcode: i32,
    watch: Option<WatchReg>,
    tx: ReplyTx,
    /// When it was written (see `Clock::answered`).
    sent_us: u64,
}

/// The requests in flight, by xid (behind `Shared::pending`).
#[derive(Default)]
pub(super) struct InFlightMap {
    by_xid: FastMap<i32, InFlight>,
}

impl InFlightMap {
    fn add(&mut self, xid: i32, r: Outgoing, sent_us: u64) {
        let f = InFlight {
            name: r.name,
            opcode: r.opcode,
            watch: r.watch,
            tx: r.tx,
            sent_us,
        };
        self.by_xid.insert(xid, f);
    }

    fn take(&mut self, xid: i32) -> Option<InFlight> {
        self.by_xid.remove(&xid)
    }

    fn take_all(&mut self) -> Vec<InFlight> {
        self.by_xid.drain().map(|(_, f)| f).collect()
    }
}

/// The write side of the connection (behind `Shared::io`): who holds it writes whole frames.
pub(super) struct Io {
    stream: Option<Link>,
    /// The session `stream` belongs to (requests pinned to a session are written only on
    /// a connection of that session).
    session: i64,
    next_xid: i32,
}

impl Default for Io {
    fn default() -> Io {
        Io {
            stream: None,
            session: 0,
            next_xid: 1,
        }
    }
}

impl Io {
    /// The live connection, if any.
    pub(super) fn stream(&self) -> Option<&Link> {
        self.stream.as_ref()
    }

    /// The session of the live connection.
    pub(super) fn session(&self) -> i64 {
        self.session
    }

    /// Takes the live connection away (writers wait for the next one).
    pub(super) fn take_stream(&mut self) -> Option<Link> {
        self.stream.take()
    }

    /// Makes `stream`, a connection of `session`, the one requests are written on.
    pub(super) fn publish(&mut self, stream: Link, session: i64) {
        self.stream = Some(stream);
        self.session = session;
    }

    /// The next request's xid (they wrap before the reserved negative ones).
    pub(super) fn next_xid(&mut self) -> i32 {
        let x = self.next_xid;
        self.next_xid = if x >= i32::MAX - 1 { 1 } else { x + 1 };
        x
    }
}

impl Shared {
    // ---------------------------------------------------------------- the request path

    /// Writes the requests back to back (one write) once connected, or hands each its error.
    /// The server applies requests of one session in order, so this is how a caller pipelines.
    /// With `pin`, they are written only on a connection of that session (else they fail
    /// with `SessionExpired`): a request about a node of session S never goes out on
    /// another session.
    pub fn submit(
        &self,
        reqs: Vec<Outgoing>,
        deadline: Instant,
        closing_ok: bool,
        pin: Option<i64>,
    ) {
        if reqs.is_empty() {
            return;
        }
        let fail = |reqs: Vec<Outgoing>, e: NoReply| {
            for r in reqs {
                self.unarmed(r.watch);
                r.tx.send(Err(e.clone()));
            }
        };
        let mut io = loop {
            let generation = match self.wait_writable(deadline, closing_ok) {
                Ok(g) => g,
                Err(e) => return fail(reqs, e),
            };
            // Bounded: a caller's write blocked on a full socket holds `io` until the write
            // ends or the connection is cut; this request gives up at its deadline.
            let Some(io) = self.io.try_lock_until(deadline) else {
                return fail(reqs, NoReply::Deadline);
            };
            if io.stream.is_some() {
                break io;
            }
            // The connection broke after the wait; its thread is about to say so.
            drop(io);
            self.wait_connection_change(generation, deadline);
        };
        if let Some(session) = pin {
            if io.session != session {
                drop(io);
                return fail(reqs, Error::SessionExpired.into());
            }
        }
        let n = reqs.len() as u64;
        if self.write_locked(&mut io, reqs) {
            self.counters.requests.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Writes requests on the connection `io` holds (under its lock, so frames of different
    /// writers never interleave) and registers them as in flight. A failed write finishes
    /// the connection and fails the requests. True if written.
    pub(super) fn write_locked(&self, io: &mut Io, reqs: Vec<Outgoing>) -> bool {
        // Each frame: its length, xid and op code (12 bytes), then the body.
        let mut bytes = Vec::with_capacity(reqs.iter().map(|r| 12 + r.body.len()).sum());
        let mut xids = Vec::with_capacity(reqs.len());
        let sent_us = self.clock.now_us();
        {
            let mut pending = self.pending.lock();
            for r in reqs {
                let x = io.next_xid();
                proto::append_request_frame(&mut bytes, x, r.opcode, &r.body);
                xids.push(x);
                pending.add(x, r, sent_us);
            }
        }
        let written = match io.stream.as_ref() {
            Some(stream) => stream.write_all(&bytes),
            None => Err(io::ErrorKind::NotConnected.into()),
        };
        match written {
            Ok(()) => {
                self.clock.sent();
                true
            }
            Err(e) => {
                // A partial frame may be on the wire: this connection is finished.
                log::info!("zkguard: write failed, dropping the connection: {e}");
                if let Some(stream) = io.stream.take() {
                    stream.shutdown();
                }
                let failed: Vec<InFlight> = {
                    let mut pending = self.pending.lock();
                    xids.iter().filter_map(|x| pending.take(*x)).collect()
                };
                for f in failed {
                    self.unarmed(f.watch);
                    f.tx.send(Err(Error::ConnectionLoss.into()));
                }
                false
            }
        }
    }

    /// Waits until requests can be written on the current session; returns the connection's
    /// generation, or why they cannot be ([`NoReply::Deadline`] if the deadline passed).
    pub(super) fn wait_writable(
        &self,
        deadline: Instant,
        closing_ok: bool,
    ) -> std::result::Result<u64, NoReply> {
        let mut s = self.session.lock();
        let epoch = s.epoch();
        let had_session = matches!(s.phase(), Phase::Connected | Phase::Suspended);
        loop {
            if s.phase() == Phase::Closed || (s.closing() && !closing_ok) {
                return Err(s.closed_error().into());
            }
            if had_session && s.epoch() != epoch {
                return Err(Error::SessionExpired.into());
            }
            if s.phase() == Phase::Connected {
                return Ok(s.generation());
            }
            if s.closing() {
                // Only the close request gets here; no point waiting to close a lost link.
                return Err(Error::ConnectionLoss.into());
            }
            if Instant::now() >= deadline {
                // The caller, who knows the op, path and deadline, reports the timeout.
                return Err(NoReply::Deadline);
            }
            s.wait_until(&self.changed, deadline);
        }
    }

    /// Waits until the connection of `generation` is replaced or declared broken.
    pub(super) fn wait_connection_change(&self, generation: u64, deadline: Instant) {
        let mut s = self.session.lock();
        while s.phase() == Phase::Connected && s.generation() == generation {
            if s.wait_until(&self.changed, deadline).timed_out() {
                return;
            }
        }
    }

    /// Cuts the live connection's socket without waiting for the `io` lock: a caller's
    /// write blocked on it fails at once (and lets `io` go).
    pub(super) fn cut(&self) {
        if let Some(link) = self.link.lock().take() {
            link.shutdown();
        }
    }

    /// Closes the current connection (if any) and fails every request in flight.
    pub(super) fn drop_connection(&self, why: Error) {
        // The socket first: a caller blocked writing on it holds `io`, which is needed
        // next; until then neither `Suspended` nor the loss clock could be told.
        self.cut();
        if let Some(s) = self.io.lock().take_stream() {
            s.shutdown();
        }
        let drained = self.pending.lock().take_all();
        for f in drained {
            self.unarmed(f.watch);
            f.tx.send(Err(NoReply::Failed(why.clone())));
        }
    }
    /// Routes the server's reply to request `h.xid` (the reply's body starts at `body_start`
    /// in `frame`) to its caller, and registers the watch it armed.
    pub(super) fn on_reply(&self, h: &ReplyHeader, frame: Vec<u8>, body_start: usize) {
        let Some(f) = self.pending.lock().take(h.xid) else {
            // The caller gave up (timeout); nothing waits for this reply.
            log::debug!("zkguard: reply for xid {} that nobody waits for", h.xid);
            return;
        };
        self.clock.answered(f.sent_us);
        #[cfg(feature = "metrics")]
        self.meter.request(
            f.name.as_str(),
            std::time::Duration::from_micros(self.clock.now_us().saturating_sub(f.sent_us)),
        );
        if let Some(w) = f.watch {
            // The server sets the watch on success, and exists sets one on a
            // missing node too (in its exists table).
            let missing = f.opcode == op::EXISTS && h.err == code::NO_NODE;
            if h.err == code::OK || missing {
                let kind = if missing { WatchKind::Exist } else { w.kind };
                if let (WatchTx::Sink(sink), WatchKind::Data) = (&w.tx, kind) {
                    let mut body = Reader::new(&frame[body_start..]);
                    if let (Ok(data), Ok(stat)) = (body.buffer(), body.stat()) {
                        sink.on_data(&data, &stat);
                    }
                }
                self.register_watch(w.server_path, kind, w.tx);
            } else if let (WatchTx::Sink(sink), code::NO_NODE) = (&w.tx, h.err) {
                sink.on_watch(&WatchedEvent {
                    event_type: EventType::NodeDeleted,
                    path: path::from_server(&self.cfg.chroot, &w.server_path),
                });
            } else {
                self.unarmed(Some(w));
            }
        }
        f.tx.send(Ok(RawReply::new(h.err, frame, body_start)));
    }
}
