//! The session: shared state, the request path callers use, and the one connection thread
//! per client that reads every frame, routes replies and watch events, pings, detects
//! silence, reconnects with back-off, re-arms watches and replays auth.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};

use super::path;
use super::proto::{self, code, op, xid, Malformed, Reader, ReplyHeader};
use super::types::{EventType, LossReason, SessionEvent, SessionState, WatchedEvent};
use crate::error::{Error, Result};

/// What the caller gets back for one request: the raw reply, or why there is none.
pub(crate) type ReplyMsg = Result<RawReply>;

/// A reply as it came from the server: the whole frame, handed over without a copy.
pub(crate) struct RawReply {
    pub err: i32,
    frame: Vec<u8>,
    body_start: usize,
}

impl RawReply {
    /// The reply's body (after the reply header).
    pub fn body(&self) -> &[u8] {
        &self.frame[self.body_start..]
    }
}

/// Which of the server's watch tables a watch lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchKind {
    /// getData, or exists on a node that exists.
    Data,
    /// exists on a node that does not exist.
    Exist,
    /// getChildren.
    Child,
}

/// A watch to register when the reply arrives (and only if it says the server set it).
pub(crate) struct WatchReg {
    pub server_path: String,
    pub kind: WatchKind,
    pub tx: WatchTx,
}

/// Something inside the crate that reacts to a watch event without a thread of its own
/// (a guard watching its own node). Called on the connection thread: it must only flip
/// flags and send into channels, never block.
pub(crate) trait WatchSink: Send + Sync {
    fn on_watch(&self, ev: &WatchedEvent);
    /// The data and stat the request that armed the watch read (a getData reply).
    fn on_data(&self, _data: &[u8], _stat: &crate::Stat) {}
    /// `Some(session)` while the sink wants its data watch kept armed on that session: the
    /// connection thread then re-arms it itself after every data change and after an
    /// arming request died with its connection (a guard watching its own node).
    fn keep(&self) -> Option<i64> {
        None
    }
}

/// The same sink (the data pointer, whatever the vtable).
fn same_sink(a: &Arc<dyn WatchSink>, b: &Arc<dyn WatchSink>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const u8, Arc::as_ptr(b) as *const u8)
}

/// Something inside the crate that reacts to session events (guards, waiters). Held
/// weakly: when its owner goes, it drops out of the list. Same rules as [`WatchSink`].
pub(crate) trait SessionSink: Send + Sync {
    fn on_session(&self, ev: &SessionEvent);
}

/// Where a watch event goes.
#[derive(Clone)]
pub(crate) enum WatchTx {
    /// A channel a caller holds.
    Chan(Sender<WatchedEvent>),
    /// A sink; a data watch on a node that turns out to be missing is told `NodeDeleted`
    /// at once (the reply says the node is gone, and no watch is left on the server).
    Sink(Arc<dyn WatchSink>),
}

impl WatchTx {
    fn deliver(&self, ev: &WatchedEvent) {
        match self {
            WatchTx::Chan(tx) => {
                let _ = tx.send(ev.clone());
            }
            WatchTx::Sink(s) => s.on_watch(ev),
        }
    }
}

/// Who hears session events.
enum Subscriber {
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

/// A request ready to be written.
pub(crate) struct Outgoing {
    pub opcode: i32,
    pub body: Vec<u8>,
    pub watch: Option<WatchReg>,
    pub tx: Sender<ReplyMsg>,
}

struct InFlight {
    opcode: i32,
    watch: Option<WatchReg>,
    tx: Sender<ReplyMsg>,
    /// When it was written (see `last_acked_send_us`).
    sent_us: u64,
}

/// Settings fixed at build time.
pub(crate) struct Config {
    pub hosts: Vec<String>,
    pub chroot: String,
    pub session_timeout: Duration,
    pub auth: Vec<(String, Vec<u8>)>,
}

/// Internal phase; `Connecting` only exists before the first session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Connected,
    Suspended,
    Lost,
    Closed,
}

impl Phase {
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

struct SessionInfo {
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
    /// Per host, the last thing that went wrong there (for the connect error).
    failures: Vec<String>,
}

impl SessionInfo {
    /// The state users see: `Closed` from the first moment of a close (the `Closed` event
    /// goes out then, before the server is asked).
    fn public_state(&self) -> SessionState {
        if self.closing {
            SessionState::Closed
        } else {
            self.phase.public()
        }
    }
}

struct Io {
    stream: Option<TcpStream>,
    /// The session `stream` belongs to (requests pinned to a session are written only on
    /// a connection of that session).
    session: i64,
    next_xid: i32,
}

#[derive(Default)]
struct Watches {
    data: HashMap<String, Vec<WatchTx>>,
    exist: HashMap<String, Vec<WatchTx>>,
    child: HashMap<String, Vec<WatchTx>>,
    closed: bool,
}

impl SessionInfo {
    /// Why requests fail once the client is closed.
    fn closed_error(&self) -> Error {
        if self.auth_failed {
            Error::AuthFailed
        } else {
            Error::Closed
        }
    }
}

/// Counters for tests and benchmarks.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub watch_events: AtomicU64,
    pub connects: AtomicU64,
    pub sessions: AtomicU64,
    pub requests: AtomicU64,
}

/// State shared between the client handles and the connection thread.
pub(crate) struct Shared {
    pub cfg: Config,
    io: Mutex<Io>,
    pending: Mutex<HashMap<i32, InFlight>>,
    watches: Mutex<Watches>,
    session: Mutex<SessionInfo>,
    changed: Condvar,
    base: Instant,
    last_send_us: AtomicU64,
    last_recv_us: AtomicU64,
    /// When the latest request the server has answered was sent. The server renews the
    /// session when a request arrives, which is after this; so the session cannot expire on
    /// the server before this + the session timeout, and the client's own loss clock counts
    /// from here (counting from the reply's arrival would be late by the server's and the
    /// network's delay).
    last_acked_send_us: AtomicU64,
    /// Send times of the pings not answered yet (answers come back in order).
    pings_sent: Mutex<std::collections::VecDeque<u64>>,
    last_zxid: AtomicI64,
    wake: (Sender<()>, Receiver<()>),
    pub counters: Counters,
    /// Deletes waiting to be retried (see `janitor.rs`).
    pub janitor: Mutex<super::janitor::Janitor>,
    /// Kept watches to arm again (see [`WatchSink::keep`]): server path and sink. Written
    /// by the connection thread itself, on the session the sink names. Taken on its own,
    /// never while `io`, `pending`, `watches` or `session` is held by the same thread.
    rearm: Mutex<Vec<(String, Arc<dyn WatchSink>)>>,
}

/// The most the client declares a silent session lost ahead of its timeout.
const LOSS_MARGIN: Duration = Duration::from_millis(250);

/// How long a close waits for the server to confirm.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(1);

impl Shared {
    pub fn new(cfg: Config) -> Shared {
        let hosts = cfg.hosts.len();
        Shared {
            cfg,
            io: Mutex::new(Io {
                stream: None,
                session: 0,
                next_xid: 1,
            }),
            pending: Mutex::new(HashMap::new()),
            watches: Mutex::new(Watches::default()),
            session: Mutex::new(SessionInfo {
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
                failures: vec![String::new(); hosts],
            }),
            changed: Condvar::new(),
            base: Instant::now(),
            last_send_us: AtomicU64::new(0),
            last_recv_us: AtomicU64::new(0),
            last_acked_send_us: AtomicU64::new(0),
            pings_sent: Mutex::new(Default::default()),
            last_zxid: AtomicI64::new(0),
            wake: crossbeam_channel::unbounded(),
            counters: Counters::default(),
            janitor: Mutex::new(Default::default()),
            rearm: Mutex::new(Vec::new()),
        }
    }

    /// A watch's arming request failed (nothing was set): a sink that wants its watch kept
    /// is queued to be armed again.
    fn unarmed(&self, watch: Option<WatchReg>) {
        if let Some(WatchReg {
            server_path,
            tx: WatchTx::Sink(sink),
            ..
        }) = watch
        {
            if sink.keep().is_some() {
                self.queue_rearm(server_path, sink);
            }
        }
    }

    fn queue_rearm(&self, server_path: String, sink: Arc<dyn WatchSink>) {
        let mut q = self.rearm.lock();
        if !q
            .iter()
            .any(|(p, s)| *p == server_path && same_sink(s, &sink))
        {
            q.push((server_path, sink));
        }
    }

    fn now_us(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }

    fn since(&self, stamp: &AtomicU64) -> Duration {
        Duration::from_micros(self.now_us().saturating_sub(stamp.load(Ordering::Relaxed)))
    }

    // ---------------------------------------------------------------- public views

    /// The state, read at the call against the clock as well as the phase the connection
    /// thread last wrote (which may be stale: this process may have been paused, or that
    /// thread not scheduled): a session whose requests have gone unanswered for two thirds
    /// of its timeout is `Suspended`, and once it may have expired on the server, `Lost`.
    pub fn state(&self) -> SessionState {
        let s = self.session.lock();
        self.state_now(&s)
    }

    fn state_now(&self, s: &SessionInfo) -> SessionState {
        let st = s.public_state();
        if s.session_id == 0 || !matches!(st, SessionState::Connected | SessionState::Suspended) {
            return st;
        }
        let unanswered = self.since(&self.last_acked_send_us);
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

    /// Blocks until the first session exists, or fails naming every server tried.
    pub fn wait_first_session(&self, deadline: Instant, connect_timeout: Duration) -> Result<()> {
        let mut s = self.session.lock();
        loop {
            match s.phase {
                Phase::Connected => return Ok(()),
                Phase::Closed => return Err(s.closed_error()),
                _ => {}
            }
            if self.changed.wait_until(&mut s, deadline).timed_out() && s.phase != Phase::Connected
            {
                let tried = self
                    .cfg
                    .hosts
                    .iter()
                    .zip(&s.failures)
                    .map(|(h, f)| {
                        if f.is_empty() {
                            format!("{h} (not reached before the deadline)")
                        } else {
                            format!("{h} ({f})")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Error::Connect {
                    tried,
                    after: connect_timeout,
                });
            }
        }
    }

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
        let fail = |reqs: Vec<Outgoing>, e: Error| {
            for r in reqs {
                self.unarmed(r.watch);
                let _ = r.tx.send(Err(e.clone()));
            }
        };
        let mut io = loop {
            let generation = match self.wait_writable(deadline, closing_ok) {
                Ok(g) => g,
                Err(e) => return fail(reqs, e),
            };
            let io = self.io.lock();
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
                return fail(reqs, Error::SessionExpired);
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
    fn write_locked(&self, io: &mut Io, reqs: Vec<Outgoing>) -> bool {
        let mut bytes = Vec::new();
        let mut xids = Vec::with_capacity(reqs.len());
        let sent_us = self.now_us();
        {
            let mut pending = self.pending.lock();
            for r in reqs {
                let x = io.next_xid;
                io.next_xid = if x >= i32::MAX - 1 { 1 } else { x + 1 };
                proto::append_request_frame(&mut bytes, x, r.opcode, &r.body);
                xids.push(x);
                pending.insert(
                    x,
                    InFlight {
                        opcode: r.opcode,
                        watch: r.watch,
                        tx: r.tx,
                        sent_us,
                    },
                );
            }
        }
        let written = match io.stream.as_ref() {
            Some(mut stream) => stream.write_all(&bytes),
            None => Err(io::ErrorKind::NotConnected.into()),
        };
        match written {
            Ok(()) => {
                self.last_send_us.store(self.now_us(), Ordering::Relaxed);
                true
            }
            Err(e) => {
                // A partial frame may be on the wire: this connection is finished.
                log::warn!("zkguard: write failed, dropping the connection: {e}");
                if let Some(stream) = io.stream.take() {
                    let _ = stream.shutdown(Shutdown::Both);
                }
                let failed: Vec<InFlight> = {
                    let mut pending = self.pending.lock();
                    xids.iter().filter_map(|x| pending.remove(x)).collect()
                };
                for f in failed {
                    self.unarmed(f.watch);
                    let _ = f.tx.send(Err(Error::ConnectionLoss));
                }
                false
            }
        }
    }

    /// Arms the kept watches queued for re-arming (see [`WatchSink::keep`]) on the current
    /// connection, if it belongs to the session each sink names; sinks of another session
    /// are forgotten (their node went with it). Never waits for a caller's write: if one
    /// holds the socket, the queue stays for the next turn. False if work was left.
    fn flush_rearm(&self) -> bool {
        if self.rearm.lock().is_empty() {
            return true;
        }
        let Some(mut io) = self.io.try_lock() else {
            return false;
        };
        if io.stream.is_none() {
            return true;
        }
        let session = io.session;
        let queued = std::mem::take(&mut *self.rearm.lock());
        let mut reqs = Vec::new();
        for (server_path, sink) in queued {
            if sink.keep() != Some(session) {
                continue;
            }
            let mut w = proto::Writer::default();
            w.string(&server_path).bool(true);
            let (tx, _rx) = crossbeam_channel::bounded(1);
            reqs.push(Outgoing {
                opcode: op::GET_DATA,
                body: w.buf,
                watch: Some(WatchReg {
                    server_path,
                    kind: WatchKind::Data,
                    tx: WatchTx::Sink(sink),
                }),
                tx,
            });
        }
        if !reqs.is_empty() {
            log::debug!("zkguard: re-arming {} kept watch(es)", reqs.len());
            self.write_locked(&mut io, reqs);
        }
        true
    }

    /// Waits until requests can be written on the current session; returns the connection's
    /// generation.
    fn wait_writable(&self, deadline: Instant, closing_ok: bool) -> Result<u64> {
        let mut s = self.session.lock();
        let epoch = s.epoch;
        let had_session = matches!(s.phase, Phase::Connected | Phase::Suspended);
        loop {
            if s.phase == Phase::Closed || (s.closing && !closing_ok) {
                return Err(s.closed_error());
            }
            if had_session && s.epoch != epoch {
                return Err(Error::SessionExpired);
            }
            if s.phase == Phase::Connected {
                return Ok(s.generation);
            }
            if s.closing {
                // Only the close request gets here; no point waiting to close a lost link.
                return Err(Error::ConnectionLoss);
            }
            if Instant::now() >= deadline {
                // The caller's Pending fills in the op, path and deadline.
                return Err(Error::Timeout {
                    op: "",
                    path: String::new(),
                    after: Duration::ZERO,
                });
            }
            self.changed.wait_until(&mut s, deadline);
        }
    }

    /// Waits until the connection of `generation` is replaced or declared broken.
    fn wait_connection_change(&self, generation: u64, deadline: Instant) {
        let mut s = self.session.lock();
        while s.phase == Phase::Connected && s.generation == generation {
            if self.changed.wait_until(&mut s, deadline).timed_out() {
                return;
            }
        }
    }

    // ---------------------------------------------------------------- closing

    /// Ends the session: asks the server to close it (bounded wait), then stops everything.
    pub fn close(&self, done: &Receiver<()>) -> Result<()> {
        let was_connected = {
            let mut s = self.session.lock();
            if s.phase == Phase::Closed || s.closing {
                return Ok(());
            }
            s.closing = true;
            // Said first, before the server is asked: once it closes the session it deletes
            // our ephemeral nodes, and another client may take a lock or leadership of ours
            // at once. Our guards must have been told by then.
            self.emit(&mut s, SessionEvent::Closed);
            s.phase == Phase::Connected
        };
        let mut result = Ok(());
        // One bound for the whole close: the server's confirmation and the thread's exit.
        let deadline = Instant::now() + CLOSE_WAIT;
        if was_connected {
            let (tx, rx) = crossbeam_channel::bounded(1);
            self.submit(
                vec![Outgoing {
                    opcode: op::CLOSE,
                    body: Vec::new(),
                    watch: None,
                    tx,
                }],
                deadline,
                true,
                None,
            );
            result = match rx.recv_deadline(deadline) {
                Ok(Ok(r)) if r.err == code::OK => Ok(()),
                Ok(Ok(r)) => Err(Error::from_code(r.err, "")),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(Error::Timeout {
                    op: "close",
                    path: String::new(),
                    after: CLOSE_WAIT,
                }),
            };
        }
        {
            let mut s = self.session.lock();
            s.phase = Phase::Closed;
            s.session_id = 0;
            self.changed.notify_all();
        }
        self.fire_all_watches(EventType::Closed, true);
        self.drop_connection(Error::Closed);
        let _ = self.wake.0.send(());
        // The connection thread exits at once unless it is inside a connect attempt (bounded).
        let _ = done.recv_deadline(deadline);
        if result.is_err() {
            log::info!("zkguard: close was not confirmed by the server ({result:?}); the session will expire on its own");
        }
        result
    }

    pub fn is_closing(&self) -> bool {
        let s = self.session.lock();
        s.closing || s.phase == Phase::Closed
    }

    // ---------------------------------------------------------------- events

    fn emit(&self, s: &mut SessionInfo, ev: SessionEvent) {
        log::debug!("zkguard: session event {ev:?}");
        s.subscribers.retain(|sub| sub.deliver(&ev));
    }

    /// Every watch receives `kind` and is forgotten.
    fn fire_all_watches(&self, kind: EventType, close: bool) {
        let mut w = self.watches.lock();
        if close {
            w.closed = true;
        }
        let maps = [
            std::mem::take(&mut w.data),
            std::mem::take(&mut w.exist),
            std::mem::take(&mut w.child),
        ];
        drop(w);
        for map in maps {
            for (p, senders) in map {
                let ev = WatchedEvent {
                    event_type: kind,
                    path: path::from_server(&self.cfg.chroot, &p),
                };
                for tx in senders {
                    tx.deliver(&ev);
                }
            }
        }
    }

    /// Closes the current connection (if any) and fails every request in flight.
    fn drop_connection(&self, why: Error) {
        if let Some(s) = self.io.lock().stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let drained: Vec<InFlight> = self.pending.lock().drain().map(|(_, f)| f).collect();
        for f in drained {
            self.unarmed(f.watch);
            let _ = f.tx.send(Err(why.clone()));
        }
    }

    /// The session is gone: tell everyone, forget its watches, start over with a new one.
    fn lose(&self, reason: LossReason) {
        {
            let mut s = self.session.lock();
            if s.session_id == 0 || s.closing {
                return;
            }
            let session_id = s.session_id;
            log::warn!("zkguard: session 0x{session_id:x} lost ({reason:?})");
            s.session_id = 0;
            s.passwd.clear();
            s.epoch += 1;
            s.phase = Phase::Lost;
            self.emit(&mut s, SessionEvent::Lost { session_id, reason });
            self.changed.notify_all();
        }
        self.fire_all_watches(EventType::SessionLost, false);
    }

    // ---------------------------------------------------------------- the connection thread

    /// The connection thread's body. Returns when the client is closed.
    pub fn run(self: Arc<Shared>) {
        let mut next_host = 0usize;
        let mut failures_in_row: u32 = 0;
        let mut rng = uuid::Uuid::new_v4().as_u128() as u64 | 1;
        loop {
            if self.is_closing() {
                break;
            }
            self.check_timeout_loss();
            let host_idx = next_host % self.cfg.hosts.len();
            next_host += 1;
            match self.connect_once(host_idx) {
                Ok(Some((stream, frames))) => {
                    let up = Instant::now();
                    self.serve(stream, frames);
                    self.after_disconnect();
                    // Reconnect at once (to the next server) after a connection that stayed
                    // up; one that broke soon after its handshake (a flapping server or a
                    // proxy that drops us) counts as a failure, so back-off applies.
                    if up.elapsed() >= Self::stayed_up(self.negotiated_timeout()) {
                        failures_in_row = 0;
                        continue;
                    }
                    log::debug!(
                        "zkguard: the connection to {} broke after {:?}",
                        self.cfg.hosts[host_idx],
                        up.elapsed()
                    );
                    failures_in_row += 1;
                }
                Ok(None) => {
                    // Expired session or closing: go round at once.
                    continue;
                }
                Err(why) => {
                    log::debug!(
                        "zkguard: connect to {} failed: {why}",
                        self.cfg.hosts[host_idx]
                    );
                    self.session.lock().failures[host_idx] = why;
                    self.changed.notify_all();
                    failures_in_row += 1;
                }
            }
            // After every server of the list failed once in a row, back off (with jitter) so a
            // client waiting for a dead ensemble stays idle.
            if (failures_in_row as usize).is_multiple_of(self.cfg.hosts.len()) {
                let rounds = failures_in_row as usize / self.cfg.hosts.len();
                let base =
                    Duration::from_millis(25u64 << rounds.min(6)).min(Duration::from_secs(1));
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let jitter = Duration::from_micros(rng % (base.as_micros() as u64 / 2 + 1));
                let mut pause = base / 2 + jitter;
                if let Some(left) = self.time_until_loss() {
                    pause = pause.min(left);
                }
                let _ = self.wake.1.recv_timeout(pause);
            }
        }
        log::debug!("zkguard: connection thread exits");
    }

    /// How long a connection must live to count as one that worked (no back-off after it).
    fn stayed_up(negotiated: Duration) -> Duration {
        (negotiated / 3).min(Duration::from_secs(1))
    }

    /// How long after the send of the last request the server answered the session counts
    /// as lost: the session timeout, less a margin so that a late wake-up of the connection
    /// thread (a loaded machine) still reports the loss before the server can expire it.
    fn loss_after(negotiated: Duration) -> Duration {
        negotiated.saturating_sub((negotiated / 10).min(LOSS_MARGIN))
    }

    /// Time left before the current session counts as lost, if there is one. Counted the
    /// same way connected or not: the server renews a session only when a request arrives.
    fn time_until_loss(&self) -> Option<Duration> {
        let s = self.session.lock();
        if s.session_id == 0 || s.closing {
            return None;
        }
        Some(Self::loss_after(s.negotiated).saturating_sub(self.since(&self.last_acked_send_us)))
    }

    /// Declares the session lost if its time is up; true if it did (or it was already gone).
    fn check_timeout_loss(&self) -> bool {
        if self.time_until_loss() == Some(Duration::ZERO) {
            self.lose(LossReason::Timeout);
            return true;
        }
        false
    }

    /// One attempt at one server: TCP connect, session handshake, auth, SetWatches, publish.
    /// `Ok(Some(..))` is a live connection, `Ok(None)` an attempt to repeat at once.
    fn connect_once(
        &self,
        host_idx: usize,
    ) -> std::result::Result<Option<(TcpStream, FrameReader)>, String> {
        let host = &self.cfg.hosts[host_idx];
        let (session_id, passwd, requested) = {
            let s = self.session.lock();
            (s.session_id, s.passwd.clone(), self.cfg.session_timeout)
        };
        // One attempt gets a third of the session timeout (at most 2 s, at least 250 ms), and
        // never runs past the moment the current session would count as lost.
        let mut budget = (requested / 3).clamp(Duration::from_millis(250), Duration::from_secs(2));
        if let Some(left) = self.time_until_loss() {
            budget = budget.min(left.max(Duration::from_millis(1)));
        }
        let deadline = Instant::now() + budget;
        let addrs: Vec<SocketAddr> = host
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve: {e}"))?
            .collect();
        if addrs.is_empty() {
            return Err("resolves to no address".into());
        }
        let mut last_err = String::new();
        for addr in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                last_err = format!("{addr}: no time left in this attempt");
                break;
            }
            match self.handshake(addr, session_id, &passwd, deadline) {
                Ok(Handshake::Live(stream, frames)) => return Ok(Some((stream, frames))),
                Ok(Handshake::Expired) => return Ok(None),
                Err(e) => last_err = format!("{addr}: {e}"),
            }
        }
        Err(last_err)
    }

    fn handshake(
        &self,
        addr: SocketAddr,
        session_id: i64,
        passwd: &[u8],
        deadline: Instant,
    ) -> std::result::Result<Handshake, String> {
        self.counters.connects.fetch_add(1, Ordering::Relaxed);
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let mut stream = TcpStream::connect_timeout(&addr, left).map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let io_err = |e: io::Error| e.to_string();
        let timeout_ms = self.cfg.session_timeout.as_millis().min(i32::MAX as u128) as i32;
        stream.set_write_timeout(Some(left)).map_err(io_err)?;
        let connect_sent_us = self.now_us();
        stream
            .write_all(&proto::connect_request(
                // A new session has seen nothing: a server rebuilt from empty data (its zxids
                // restarted) must not refuse it for what an old session saw.
                if session_id == 0 {
                    0
                } else {
                    self.last_zxid.load(Ordering::Relaxed)
                },
                timeout_ms,
                session_id,
                passwd,
            ))
            .map_err(io_err)?;
        let mut frames = FrameReader::default();
        let resp = frames
            .read_frame_by(&mut stream, deadline)
            .map_err(|e| format!("during the handshake: {e}"))?;
        let resp = proto::decode_connect_response(&resp)
            .map_err(|m| format!("malformed handshake reply: {}", m.0))?;
        if resp.timeout_ms <= 0 {
            let _ = stream.shutdown(Shutdown::Both);
            if session_id == 0 {
                return Err("server refused a new session".into());
            }
            self.lose(LossReason::Expired);
            return Ok(Handshake::Expired);
        }
        let negotiated = Duration::from_millis(resp.timeout_ms as u64);
        if session_id != 0 && resp.session_id != session_id {
            // Not the session we asked to resume: ours is gone.
            self.lose(LossReason::Expired);
        }
        // Replay auth before anyone else can write, and wait for the verdict.
        for (scheme, auth) in &self.cfg.auth {
            let mut w = proto::Writer::default();
            w.int(0).string(scheme).buffer(auth);
            stream
                .write_all(&proto::request_frame(xid::AUTH, op::AUTH, &w.buf))
                .map_err(io_err)?;
        }
        let mut auth_left = self.cfg.auth.len();
        let mut early = Vec::new();
        while auth_left > 0 {
            let frame = frames
                .read_frame_by(&mut stream, deadline)
                .map_err(|e| format!("waiting for the auth reply: {e}"))?;
            let mut r = Reader::new(&frame);
            let h = proto::decode_reply_header(&mut r).map_err(|m| m.0)?;
            if h.xid == xid::AUTH {
                if h.err != code::OK {
                    let _ = stream.shutdown(Shutdown::Both);
                    self.fail_auth();
                    return Err("authentication failed".into());
                }
                auth_left -= 1;
            } else {
                early.push(frame);
            }
        }
        // Re-arm every watch of this session (none for a new session).
        let frames_out = {
            let w = self.watches.lock();
            let keys = |m: &HashMap<String, Vec<WatchTx>>| m.keys().cloned().collect::<Vec<_>>();
            if session_id == resp.session_id {
                proto::set_watches_frames(
                    self.last_zxid.load(Ordering::Relaxed),
                    &keys(&w.data),
                    &keys(&w.exist),
                    &keys(&w.child),
                )
            } else {
                Vec::new()
            }
        };
        for f in &frames_out {
            stream.write_all(f).map_err(io_err)?;
        }
        let write_timeout = (negotiated / 3).max(Duration::from_millis(100));
        stream
            .set_write_timeout(Some(write_timeout))
            .map_err(io_err)?;
        let clone = stream.try_clone().map_err(io_err)?;
        // Publish.
        let now = self.now_us();
        self.last_recv_us.store(now, Ordering::Relaxed);
        self.last_send_us.store(now, Ordering::Relaxed);
        self.last_acked_send_us
            .fetch_max(connect_sent_us, Ordering::Relaxed);
        self.pings_sent.lock().clear();
        {
            let mut s = self.session.lock();
            if s.closing {
                // Closed while we were connecting: do not leave this session behind.
                let _ = stream.write_all(&proto::request_frame(1, op::CLOSE, &[]));
                let _ = stream.shutdown(Shutdown::Both);
                return Ok(Handshake::Expired);
            }
            let same = session_id != 0 && session_id == resp.session_id;
            if !same {
                // The zxids this session sees start from the server's, whatever the old
                // session saw (the ensemble may have been rebuilt from nothing).
                self.last_zxid.store(0, Ordering::Relaxed);
            }
            {
                let mut io = self.io.lock();
                io.stream = Some(clone);
                io.session = resp.session_id;
            }
            s.session_id = resp.session_id;
            s.passwd = resp.passwd;
            s.negotiated = negotiated;
            s.server = Some(addr);
            s.phase = Phase::Connected;
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
            log::info!("zkguard: {ev:?} via {addr}, session timeout {negotiated:?}");
            self.emit(&mut s, ev);
            self.changed.notify_all();
        }
        for frame in early {
            if let Err(m) = self.dispatch(frame) {
                return Err(format!("malformed frame: {}", m.0));
            }
        }
        Ok(Handshake::Live(stream, frames))
    }

    fn fail_auth(&self) {
        log::error!("zkguard: the server rejected the client's credentials; closing the client");
        {
            let mut s = self.session.lock();
            s.closing = true;
            s.auth_failed = true;
            s.phase = Phase::Closed;
            self.emit(&mut s, SessionEvent::Closed);
            self.changed.notify_all();
        }
        self.fire_all_watches(EventType::Closed, true);
    }

    /// Reads frames until the connection breaks, pinging when idle, and gives up on it when
    /// the server has been silent, or has left our requests (pings included) unanswered, for
    /// two thirds of the session timeout. The loss clock runs here too: once the session may
    /// have expired on the server, it is lost, whatever else still arrives on the socket.
    fn serve(&self, mut stream: TcpStream, mut frames: FrameReader) {
        let t = self.negotiated_timeout();
        let ping_every = t / 3;
        let silence_limit = t * 2 / 3;
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
            let silent = self.since(&self.last_recv_us);
            if silent >= silence_limit {
                log::warn!("zkguard: no frame from the server for {silent:?}; reconnecting");
                return;
            }
            let unanswered = self.since(&self.last_acked_send_us);
            if unanswered >= silence_limit {
                log::warn!(
                    "zkguard: no request sent in the last {unanswered:?} was answered; reconnecting"
                );
                return;
            }
            let rearmed = self.flush_rearm();
            let idle = self.since(&self.last_send_us);
            if idle >= ping_every {
                self.send_ping();
            }
            let idle = self.since(&self.last_send_us);
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
            if stream.set_read_timeout(Some(wait)).is_err() {
                return;
            }
            match frames.fill(&mut stream) {
                Ok(0) => {
                    log::info!("zkguard: the server closed the connection");
                    return;
                }
                Ok(_) => self.last_recv_us.store(self.now_us(), Ordering::Relaxed),
                Err(e) if is_timeout(&e) => {}
                Err(e) => {
                    log::info!("zkguard: connection error: {e}");
                    return;
                }
            }
        }
    }

    fn session_ended(&self) -> bool {
        // While closing, keep reading: the reply to the close request must come through. The
        // closer shuts the socket down when it is done.
        self.session.lock().phase != Phase::Connected
    }

    fn send_ping(&self) {
        // Never wait for a caller's write: while it is blocked (a full socket buffer), this
        // thread must keep reading replies, and a caller that is writing needs no ping.
        let Some(mut io) = self.io.try_lock() else {
            return;
        };
        let Some(stream) = io.stream.as_mut() else {
            return;
        };
        let sent = self.now_us();
        match stream.write_all(&proto::request_frame(xid::PING, op::PING, &[])) {
            Ok(()) => {
                self.pings_sent.lock().push_back(sent);
                self.last_send_us.store(self.now_us(), Ordering::Relaxed)
            }
            Err(e) => {
                log::info!("zkguard: ping failed: {e}");
                let _ = stream.shutdown(Shutdown::Both);
                io.stream = None;
            }
        }
    }

    fn after_disconnect(&self) {
        let closing = self.is_closing();
        self.drop_connection(if closing {
            Error::Closed
        } else {
            Error::ConnectionLoss
        });
        let mut s = self.session.lock();
        if closing {
            if s.phase == Phase::Connected {
                s.phase = Phase::Suspended;
                self.changed.notify_all();
            }
            return;
        }
        if s.phase == Phase::Connected {
            s.phase = Phase::Suspended;
            s.server = None;
            let session_id = s.session_id;
            self.emit(&mut s, SessionEvent::Suspended { session_id });
            self.changed.notify_all();
        }
    }

    /// Handles one frame from the server.
    fn dispatch(&self, frame: Vec<u8>) -> std::result::Result<(), Malformed> {
        let mut r = Reader::new(&frame);
        let h: ReplyHeader = proto::decode_reply_header(&mut r)?;
        if h.zxid > 0 {
            self.last_zxid.fetch_max(h.zxid, Ordering::Relaxed);
        }
        match h.xid {
            xid::PING => {
                if let Some(sent) = self.pings_sent.lock().pop_front() {
                    self.last_acked_send_us.fetch_max(sent, Ordering::Relaxed);
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
            x => {
                let Some(f) = self.pending.lock().remove(&x) else {
                    // The caller gave up (timeout); nothing waits for this reply.
                    log::debug!("zkguard: reply for xid {x} that nobody waits for");
                    return Ok(());
                };
                self.last_acked_send_us
                    .fetch_max(f.sent_us, Ordering::Relaxed);
                if let Some(w) = f.watch {
                    // The server sets the watch on success, and exists sets one on a
                    // missing node too (in its exists table).
                    let missing = f.opcode == op::EXISTS && h.err == code::NO_NODE;
                    if h.err == code::OK || missing {
                        let kind = if missing { WatchKind::Exist } else { w.kind };
                        if let (WatchTx::Sink(sink), WatchKind::Data) = (&w.tx, kind) {
                            let mut body = Reader::new(&frame[r.position()..]);
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
                let body_start = r.position();
                let _ = f.tx.send(Ok(RawReply {
                    err: h.err,
                    frame,
                    body_start,
                }));
                Ok(())
            }
        }
    }

    fn register_watch(&self, server_path: String, kind: WatchKind, tx: WatchTx) {
        let mut w = self.watches.lock();
        if w.closed {
            drop(w);
            tx.deliver(&WatchedEvent {
                event_type: EventType::Closed,
                path: path::from_server(&self.cfg.chroot, &server_path),
            });
            return;
        }
        let map = match kind {
            WatchKind::Data => &mut w.data,
            WatchKind::Exist => &mut w.exist,
            WatchKind::Child => &mut w.child,
        };
        let list = map.entry(server_path).or_default();
        // A sink armed twice (a re-arm and a confirm crossing) is told once.
        if let WatchTx::Sink(new) = &tx {
            if list
                .iter()
                .any(|t| matches!(t, WatchTx::Sink(old) if same_sink(old, new)))
            {
                return;
            }
        }
        list.push(tx);
    }

    fn on_watch_event(&self, ev: proto::RawWatchEvent) {
        // Type -1 is a session-state notification.
        if ev.kind == -1 {
            if ev.state == code::SESSION_EXPIRED {
                self.lose(LossReason::Expired);
            }
            return;
        }
        self.counters.watch_events.fetch_add(1, Ordering::Relaxed);
        let (event_type, from) = match ev.kind {
            1 => (EventType::NodeCreated, [true, true, false]),
            2 => (EventType::NodeDeleted, [true, true, true]),
            3 => (EventType::NodeDataChanged, [true, true, false]),
            4 => (EventType::NodeChildrenChanged, [false, false, true]),
            other => {
                log::debug!("zkguard: ignoring watch event type {other} for {}", ev.path);
                return;
            }
        };
        let mut senders = Vec::new();
        {
            let mut guard = self.watches.lock();
            let w = &mut *guard;
            let maps = [&mut w.data, &mut w.exist, &mut w.child];
            for (map, take) in maps.into_iter().zip(from) {
                if take {
                    if let Some(v) = map.remove(&ev.path) {
                        senders.extend(v);
                    }
                }
            }
        }
        let out = WatchedEvent {
            event_type,
            path: path::from_server(&self.cfg.chroot, &ev.path),
        };
        // A data change spends the watch; sinks that keep theirs get it back (armed by this
        // thread right after, on this connection: a deletion in between is answered NoNode).
        let rearm = matches!(
            event_type,
            EventType::NodeDataChanged | EventType::NodeCreated
        );
        for tx in senders {
            tx.deliver(&out);
            if let (true, WatchTx::Sink(sink)) = (rearm, &tx) {
                if sink.keep().is_some() {
                    self.queue_rearm(ev.path.clone(), sink.clone());
                }
            }
        }
    }
}

/// A read that timed out (or was interrupted): nothing wrong with the connection.
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

enum Handshake {
    Live(TcpStream, FrameReader),
    Expired,
}

/// Splits a byte stream into length-prefixed frames, tolerating read timeouts mid-frame.
/// Reads into one reused buffer (`buf[start..end]` holds the unread bytes).
pub(crate) struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        }
    }
}

impl FrameReader {
    /// Reads what is available into the buffer.
    pub fn fill(&mut self, stream: &mut impl Read) -> io::Result<usize> {
        if self.end == self.buf.len() {
            // Move the unread bytes to the front; grow if a frame is larger than the buffer.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = stream.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Takes one complete frame off the buffer, if there is one.
    pub fn pop(&mut self) -> std::result::Result<Option<Vec<u8>>, Malformed> {
        let avail = &self.buf[self.start..self.end];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
        if len < 0 || len as usize > proto::MAX_FRAME {
            return Err(Malformed(format!("frame length {len}")));
        }
        let len = len as usize;
        if avail.len() < 4 + len {
            return Ok(None);
        }
        let frame = avail[4..4 + len].to_vec();
        self.start += 4 + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(Some(frame))
    }

    /// Reads until one frame is complete or the deadline passes.
    fn read_frame_by(&mut self, stream: &mut TcpStream, deadline: Instant) -> io::Result<Vec<u8>> {
        loop {
            match self.pop() {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(m) => return Err(io::Error::new(io::ErrorKind::InvalidData, m.0)),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no reply before the attempt's deadline",
                ));
            }
            stream.set_read_timeout(Some(left))?;
            match self.fill(stream) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ))
                }
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_reads() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut fr = FrameReader::default();
        let mut data: Vec<u8> = Vec::new();
        data.extend_from_slice(&3u32.to_be_bytes());
        data.extend_from_slice(&[1, 2, 3]);
        data.extend_from_slice(&0u32.to_be_bytes());
        data.extend_from_slice(&2u32.to_be_bytes());
        data.extend_from_slice(&[9]);
        fr.fill(&mut &data[..])?;
        assert_eq!(fr.pop()?, Some(vec![1, 2, 3]));
        assert_eq!(fr.pop()?, Some(vec![]));
        assert_eq!(fr.pop()?, None);
        fr.fill(&mut &[8u8][..])?;
        assert_eq!(fr.pop()?, Some(vec![9, 8]));
        Ok(())
    }

    #[test]
    fn hostile_frame_lengths_are_errors() -> io::Result<()> {
        let mut fr = FrameReader::default();
        fr.fill(&mut &(-5i32).to_be_bytes()[..])?;
        assert!(fr.pop().is_err());
        let mut fr = FrameReader::default();
        fr.fill(&mut &(i32::MAX).to_be_bytes()[..])?;
        assert!(fr.pop().is_err());
        Ok(())
    }
}
