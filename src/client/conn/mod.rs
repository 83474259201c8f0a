//! The session: shared state, the request path callers use, and the one connection thread
//! per client that reads every frame, routes replies and watch events, pings, detects
//! silence, reconnects with back-off, re-arms watches and replays auth.
//!
//! [`Shared`] (here, with its lock order) is split by what each part owns:
//!
//! - `session.rs` — the session's state and the only place its phase moves (one method per
//!   transition, each telling the subscribers; the table is in its doc), the loss clock;
//! - `requests.rs` — the request path: waiting for a writable connection, writing, the
//!   requests in flight;
//! - `watches.rs` — the watch registry: registering, firing, the re-arm queue of kept
//!   watches, the SetWatches list;
//! - `connect.rs` — the connection thread's outer loop: host rotation, back-off, the
//!   handshake, auth replay, publishing a new connection;
//! - `serve.rs` — a live connection: reading, pinging, silence, dispatching each frame;
//! - `frame.rs` — splitting the byte stream into frames; `link.rs` — the socket (TCP or TLS);
//! - `reply.rs` — the one-shot slot a request's reply is handed over in;
//! - `clock.rs` — when the client last wrote, read, and had an answer (the loss clock's base);
//! - `hash.rs` — the hasher of the maps above (Fx, not `SipHash`: their keys are the client's);
//! - `ranked.rs` — the mutexes that check the lock order in debug builds.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Condvar;

use super::config::Config;
use super::proto::{code, op, Name, RawReply};
use super::types::{CloseOutcome, EventType, Hex};
use crate::error::Error;
use crate::metrics::Meter;

mod clock;
mod connect;
#[cfg(feature = "testing")]
mod expire;
mod frame;
mod hash;
mod link;
mod ranked;
mod reply;
mod requests;
mod serve;
mod servers;
mod session;
mod watches;

use clock::Clock;
use link::Link;
pub(crate) use ranked::{Rank, Ranked};
pub(crate) use reply::{reply_slot, ReplyRx, Settled};
pub(crate) use requests::Outgoing;
use requests::{InFlightMap, Io};
pub(crate) use servers::shuffle;
use servers::Servers;
pub(crate) use session::SessionSink;
use session::{Phase, SessionInfo};
use watches::Watches;
pub(crate) use watches::{WatchKind, WatchReg, WatchSink, WatchTx};

/// What the caller gets back for one request: the raw reply, or why there is none.
pub(crate) type ReplyMsg = std::result::Result<RawReply, NoReply>;

/// Why a request got no reply. Only the caller knows what the request was (its op, path and
/// deadline), so a deadline is reported to it as such, and the caller builds the public
/// [`Error::Timeout`] from it.
#[derive(Debug, Clone)]
pub(crate) enum NoReply {
    /// No connection to write it on came before the caller's deadline; it was not sent.
    Deadline,
    /// It failed: the connection was lost, the session expired, the client was closed.
    Failed(Error),
}

impl From<Error> for NoReply {
    fn from(e: Error) -> NoReply {
        NoReply::Failed(e)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub watch_events: AtomicU64,
    pub connects: AtomicU64,
    pub sessions: AtomicU64,
    pub requests: AtomicU64,
}

/// State shared between the client handles and the connection thread.
///
/// # Lock order
///
/// The one place it is written; every function that takes two of these locks obeys it, and
/// debug builds (the tests) check it: each lock is a [`Ranked`] mutex, and taking one the
/// order forbids panics, naming both (`ranked.rs`; release builds check nothing). A lock
/// may be taken while holding only locks listed *above* it:
///
/// 1. `session` — phase, ids, epoch, subscribers. Held while session events are emitted:
///    [`SessionSink`]s run under it and may take only their own locks, never one of these.
/// 2. `io` — the socket for writing and the next xid. Held across a write (frames of
///    different writers never interleave), bounded by the socket's write timeout. Taken
///    under `session` only where a handshake publishes its connection. The connection
///    thread takes it with `try_lock` only (a ping or a re-arm never waits for a caller's
///    write, so replies keep being read).
/// 3. `pending` — requests in flight by xid. Under `io` while requests are written.
/// 4. `pings_sent` — send times of unanswered pings. Under `io` when a ping goes out.
/// 5. `rearm` — kept watches to arm again. Under `io` when they are flushed, or when a
///    failed write hands a kept watch back (`pending` released first).
///
/// `watches` (the watch registry) is a leaf: taken with no other of these locks held, and
/// nothing taken under it (so are `servers`, the server list, and the janitor's list of
/// background deletes, which the client's `Owner` keeps, outside this struct). `link` (the live
/// socket, for cutting it) is a leaf too, taken under any of them and never held across
/// anything but a `shutdown`; so is each request's reply slot (`reply.rs`: a mutex of its
/// own, held only to put or take the reply). Nobody waits for `io` without a deadline but to drop a
/// connection, and that cuts the socket first, which ends a blocked write at once.
///
/// No lock is held across a blocking read (the connection thread reads with none held), a
/// wait on a reply, or a [`WatchSink`] callback or channel send of a watch event: those run
/// after the registry's lock is released. `changed` is the condition variable of `session`.
///
/// # Threads
///
/// - **Callers**, any thread using a [`Client`](crate::Client): write their own requests
///   (`session` to wait for a connection, then `io` and under it `pending`, and `rearm` if
///   the write fails), wait on their replies' slots (no lock of these held), cut a connection (`link`), close (`session`, then the request path,
///   `watches` to tell every watch `Closed`), hand deletes to the janitor (`janitor`).
///   Each owns its reply channel.
/// - **`zkguard-conn`**, one per client from connect to close (`builder.rs`, running
///   [`Shared::run`]): owns the read side of the socket (the frame buffer), the host
///   rotation and back-off, the loss clock, and every session transition but a close's;
///   dispatches replies and watch events and runs the [`SessionSink`] and [`WatchSink`]
///   callbacks. Takes `session`; `io` with `try_lock` for pings and re-arms, and with
///   `lock` under `session` to publish a connection and alone to drop one; `pending`,
///   `pings_sent`, `rearm`, `link` and `watches` as above.
/// - **`zkguard-janitor`**, one per client while background deletes wait (`janitor.rs`):
///   owns the jobs it took from the list. Takes `janitor` alone; otherwise a caller.
/// - **`zkguard-close`**, short-lived: when the last handle goes on the connection thread
///   itself (a sink held it), the close runs here instead, with a caller's locks.
/// - **`zkguard-candidate`**, one per election `Candidate` (`election/candidate.rs`): runs
///   its campaign; takes its own `inner` lock, none of these but as a caller.
/// - With the `testing` feature, the fault proxy's `zkguard-proxy-accept-<port>`,
///   `zkguard-proxy-conn-<id>` and `zkguard-proxy-pump`: none of these locks.
pub(crate) struct Shared {
    pub cfg: Config,
    io: Ranked<Io>,
    pending: Ranked<InFlightMap>,
    watches: Ranked<Watches>,
    session: Ranked<SessionInfo>,
    changed: Condvar,
    /// When the client last wrote, read, and had an answer (the loss clock).
    clock: Clock,
    /// Send times of the pings not answered yet (answers come back in order).
    pings_sent: Ranked<std::collections::VecDeque<u64>>,
    last_zxid: AtomicI64,
    wake: (Sender<()>, Receiver<()>),
    pub counters: Counters,
    /// The recipes' and the session's measurements (`crate::metrics`).
    pub meter: Arc<Meter>,
    /// Kept watches to arm again (see [`WatchSink::keep`]): server path and sink. Written
    /// by the connection thread itself, on the session the sink names. Last in the lock
    /// order (see above).
    rearm: Ranked<Vec<(String, Arc<dyn WatchSink>)>>,
    /// The live connection's socket, to cut it without waiting for the `io` lock: a caller
    /// blocked in a write holds that lock, and cutting the socket is what frees it. A leaf.
    link: Ranked<Option<Link>>,
    /// Whether the warning of a login without TLS was given (once per client).
    cleartext_warned: AtomicBool,
    /// The server list the connection thread picks from (`servers.rs`); a leaf, like
    /// `watches`.
    servers: Ranked<Servers>,
    /// How many lists the caller has given (`Client::update_servers`): the ensemble
    /// follower forgets the versions it trusted when this moves.
    pub lists_given: AtomicU64,
}

/// A client's shared state with nothing behind it (no connection thread; its one host
/// is a port nobody listens on): the unit tests drive its watch tables and session
/// transitions by hand.
#[cfg(test)]
pub(super) fn unconnected() -> Shared {
    Shared::new(Config {
        metrics_path_labels: false,
        hosts: vec!["127.0.0.1:1".into()],
        chroot: String::new(),
        session_timeout: Duration::from_secs(10),
        auth: Vec::new(),
        max_request: super::proto::DEFAULT_MAX_REQUEST,
        max_reply: super::proto::MAX_FRAME,
        tls: None,
        sasl: None,
        node_acl: crate::client::NodeAcl::open(),
        identity: false,
    })
}

/// How long a close waits for the server to confirm.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(1);

impl Shared {
    pub fn new(cfg: Config) -> Shared {
        let hosts = cfg.hosts.len();
        let servers = Ranked::new(Rank::Servers, Servers::new(cfg.hosts.clone()));
        let meter = Meter::new(cfg.metrics_path_labels);
        meter.session(None, Phase::Connecting.label());
        Shared {
            cfg,
            io: Ranked::new(Rank::Io, Io::default()),
            pending: Ranked::new(Rank::Pending, InFlightMap::default()),
            watches: Ranked::new(Rank::Watches, Watches::default()),
            session: Ranked::new(Rank::Session, SessionInfo::new(hosts)),
            changed: Condvar::new(),
            clock: Clock::new(),
            pings_sent: Ranked::new(Rank::PingsSent, Default::default()),
            last_zxid: AtomicI64::new(0),
            wake: crossbeam_channel::unbounded(),
            counters: Counters::default(),
            meter: Arc::new(meter),
            rearm: Ranked::new(Rank::Rearm, Vec::new()),
            link: Ranked::new(Rank::Link, None),
            cleartext_warned: AtomicBool::new(false),
            servers,
            lists_given: AtomicU64::new(0),
        }
    }

    // ---------------------------------------------------------------- closing

    /// Ends the session: asks the server to close it (bounded wait), then stops everything.
    pub fn close(&self, done: &Receiver<()>) -> CloseOutcome {
        let session_id = self.session_id();
        let Some((was_connected, had_session)) = self.begin_close() else {
            return CloseOutcome::AlreadyClosed;
        };
        let mut outcome = if had_session {
            CloseOutcome::Unconfirmed {
                reason: Error::ConnectionLoss,
            }
        } else {
            CloseOutcome::NoSession
        };
        // One bound for the whole close: the server's confirmation and the thread's exit.
        let deadline = Instant::now() + CLOSE_WAIT;
        if was_connected {
            let (tx, rx) = reply_slot();
            self.submit(
                vec![Outgoing {
                    name: Name::Close,
                    opcode: op::CLOSE,
                    body: Vec::new(),
                    watch: None,
                    tx,
                }],
                deadline,
                true,
                None,
            );
            let refused = |reason| CloseOutcome::Unconfirmed { reason };
            outcome = match rx.recv_deadline(deadline) {
                Ok(Ok(r)) if r.err == code::OK => CloseOutcome::Confirmed,
                Ok(Ok(r)) => refused(Error::from_code(r.err, "")),
                Ok(Err(NoReply::Failed(e))) => refused(e),
                Ok(Err(NoReply::Deadline)) | Err(_) => refused(Error::Timeout {
                    op: "close",
                    path: String::new(),
                    after: CLOSE_WAIT,
                }),
            };
        }
        self.finish_close();
        self.fire_all_watches(EventType::Closed, true);
        self.drop_connection(Error::Closed);
        let _ = self.wake.0.send(());
        // The connection thread exits at once unless it is inside a connect attempt (bounded).
        let _ = done.recv_deadline(deadline);
        if let CloseOutcome::Unconfirmed { reason } = &outcome {
            log::info!(
                "zkguard: the close of session {} was not confirmed by the server ({reason}); \
                 it will expire on its own",
                Hex(session_id)
            );
        }
        outcome
    }
}
