//! A synchronous ZooKeeper client: sessions, requests, watches.
//!
//! One [`Client`] is one ZooKeeper session (replaced by a new one, on its own, if the session
//! is lost) and one connection thread (plus, only while deletes wait to be retried, the
//! janitor's; see ARCHITECTURE.md for every thread). Callers write their requests on the socket themselves
//! and wait on their own channel for the reply; the background thread reads every frame,
//! routes replies and watch events, pings, detects a silent server, reconnects with back-off,
//! re-arms watches and replays credentials.

mod acl;
mod bell;
mod builder;
mod config;
mod conn;
mod ensemble;
mod ensure;
#[cfg(feature = "testing")]
mod faults;
#[cfg(feature = "kerberos")]
#[allow(unsafe_code)] // the RFC 2744 FFI and the run-time loading: the crate's only unsafe code
mod gssapi;
mod identity;
mod janitor;
#[cfg(feature = "kerberos")]
mod kerberos;
pub(crate) mod path;
mod pipeline;
pub(crate) mod proto;
mod sasl;
mod servers;
mod stats;
#[cfg(feature = "tls")]
mod tls;
mod types;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
pub(crate) use acl::unauthenticated;
pub use acl::NodeAcl;
pub(crate) use bell::{Bell, Ringing};
pub use builder::ClientBuilder;
pub use ensemble::{EnsembleConfig, EnsembleServer, CONFIG_NODE};
#[cfg(feature = "kerberos")]
pub use kerberos::Kerberos;
/// The TLS settings the connection layer uses (none without the `tls` feature).
#[cfg(feature = "tls")]
pub(crate) use tls::Tls as TlsSetup;
#[cfg(feature = "tls")]
pub use tls::TlsConfig;
/// Without the `tls` feature there is no TLS setting to hold.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum TlsSetup {}
use conn::{Ranked, Shared};
pub(crate) use conn::{SessionSink, WatchSink};
pub(crate) use janitor::{Check, Job};
pub use path::{validate_path, ConnectString, MAX_PATH_LEN};
pub use pipeline::{Pending, Pipeline};
pub(crate) use proto::Names;
pub use stats::ClientStats;
pub(crate) use types::Hex;

pub use types::{
    Acl, CloseOutcome, CreateMode, Created, EventType, Identity, LossReason, Op, OpResult, Perms,
    SessionEvent, SessionState, Stat, WatchedEvent,
};

/// A handle to one ZooKeeper session. Cheap to clone; every clone shares the session and the
/// background thread. The session ends when [`Client::close`] is called or the last clone is
/// dropped.
///
/// ```no_run
/// use zkguard::{Client, CreateMode};
/// # fn main() -> zkguard::Result<()> {
/// let client = Client::connect("127.0.0.1:2181")?;
/// client.create("/app", b"config", CreateMode::Persistent)?;
/// let (data, stat) = client.get_data("/app")?;
/// assert_eq!(data, b"config");
/// client.set_data("/app", b"v2", Some(stat.version))?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors every request can return
///
/// Besides its own errors (each method lists them), every request can fail with:
///
/// - [`Error::InvalidPath`] or [`Error::InvalidArgument`]: caught before sending; nothing
///   was sent.
/// - [`Error::ConnectionLoss`] or [`Error::Timeout`]: the connection dropped before the
///   reply, or no reply (or no connection) came by the request's deadline. The request may
///   or may not have been applied ([`Error::is_connection_error`]).
/// - [`Error::SessionExpired`]: the session it belonged to is gone.
/// - [`Error::Closed`]: the client was closed.
/// - [`Error::NoAuth`]: the node's ACL does not allow it for this session.
/// - [`Error::Malformed`]: the body of the server's reply to this request could not be
///   read; only this request fails, the connection stays. (A frame the connection itself
///   cannot read, a bad header or watch event, drops the connection instead: requests in
///   flight then fail with [`Error::ConnectionLoss`], and it is made again.)
#[derive(Clone)]
#[must_use = "the session ends as soon as the last handle on the client is dropped"]
pub struct Client {
    shared: Arc<Shared>,
    owner: Arc<Owner>,
    timeout: Duration,
    /// Requests through this handle go out only on this session (see [`Client::pinned`]).
    pin: Option<i64>,
}

/// Closes the session when the last [`Client`] clone goes.
struct Owner {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    done: Receiver<()>,
    /// Deletes waiting to be retried or answered (see `janitor.rs`). Taken with no other
    /// lock held; nothing taken under it but a reply slot's mutex (a leaf: `conn/reply.rs`),
    /// to read a sent delete's answer.
    janitor: Ranked<janitor::Janitor>,
    /// What the co-tenant check learned (see `queue/tenancy.rs`).
    tenancy: acl::Tenancy,
}

impl Owner {
    fn close(&self) -> CloseOutcome {
        let r = self.shared.close(&self.done);
        if let Some(t) = self.thread.lock().take() {
            // `close` waited (bounded) for the thread to finish. Join only if it did, so a
            // close never blocks for long; otherwise it is inside a connect attempt (bounded)
            // and exits right after it, without reconnecting.
            if t.is_finished() {
                let _ = t.join();
            }
        }
        r
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let me = std::thread::current().id();
        let thread = {
            let mut t = self.thread.lock();
            if t.as_ref().is_some_and(|t| t.thread().id() == me) {
                t.take()
            } else {
                None
            }
        };
        if thread.is_some() {
            // The last handle went on the connection thread itself (a session sink held
            // it): that thread may hold the session lock, and a close waits for that very
            // thread. Close from a thread of its own instead.
            let (shared, done) = (self.shared.clone(), self.done.clone());
            let closer = std::thread::Builder::new()
                .name("zkguard-close".into())
                .spawn(move || {
                    shared.close(&done);
                    if let Some(t) = thread.filter(|t| t.is_finished()) {
                        let _ = t.join();
                    }
                });
            if let Err(e) = closer {
                log::warn!("zkguard: cannot start a thread to close the client: {e}");
            }
            return;
        }
        self.close();
    }
}

impl Client {
    /// Connects with default settings (session timeout 10 s, connect timeout 15 s).
    ///
    /// `connect_string` is `host:port[,host:port...][/chroot]`; a host without a port uses
    /// 2181, IPv6 addresses are written `[addr]:port`.
    ///
    /// With no server answering (nothing listening: a wrong address, or servers still
    /// starting) it keeps trying, with back-off, until the connect timeout, and logs a
    /// warning (with the `log` crate) as soon as every server has
    /// failed once, naming each failure and saying it goes on trying; see
    /// [`ClientBuilder::connect_timeout`] to wait less (or longer).
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::build`]: [`Error::Connect`] (naming every server and its
    /// failure) when no session exists within the connect timeout.
    pub fn connect(connect_string: &str) -> Result<Client> {
        Client::builder(connect_string).build()
    }

    /// A builder for other settings.
    pub fn builder(connect_string: &str) -> ClientBuilder {
        ClientBuilder {
            connect_string: connect_string.to_string(),
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(15),
            request_timeout: None,
            auth: Vec::new(),
            max_request: proto::DEFAULT_MAX_REQUEST,
            max_reply: proto::MAX_FRAME,
            #[cfg(feature = "tls")]
            tls: None,
            sasl: None,
            node_acl: NodeAcl::open(),
            metrics_path_labels: false,
            follow_ensemble: false,
        }
    }

    /// The same session, with another default deadline for the requests made through the
    /// returned handle. A timeout beyond a year is taken as a year (`Duration::MAX` means
    /// "as long as it takes", not an overflow).
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// use std::time::Duration;
    /// let exists = client.with_timeout(Duration::from_millis(200)).exists("/app")?;
    /// # Ok(()) }
    /// ```
    #[must_use = "with_timeout returns a new handle; the original keeps its timeout"]
    pub fn with_timeout(&self, timeout: Duration) -> Client {
        Client {
            timeout: timeout.min(Duration::from_secs(365 * 24 * 3600)),
            ..self.clone()
        }
    }

    /// The same client, whose requests are written only on a connection of session
    /// `session`: once that session is gone they fail with [`Error::SessionExpired`]
    /// instead of going out on the next one. For work about ephemeral nodes of `session`
    /// (deleting a node we own must never reach the server on another session, where the
    /// node at that path may already be someone else's).
    pub(crate) fn pinned(&self, session: i64) -> Client {
        Client {
            pin: Some(session),
            ..self.clone()
        }
    }

    /// The ACL the recipes give the nodes they create, unless a recipe instance overrides it
    /// (see [`ClientBuilder::node_acl`]).
    pub fn node_acl(&self) -> &NodeAcl {
        &self.shared.cfg.node_acl
    }

    /// Whether the session logs in with an identity (digest or other `auth` credentials, a
    /// SASL login or a TLS client certificate) that a creator ACL could name.
    pub(crate) fn has_identity(&self) -> bool {
        self.shared.cfg.identity
    }

    /// What the co-tenant check learned for this client.
    pub(crate) fn tenancy(&self) -> &acl::Tenancy {
        &self.owner.tenancy
    }

    /// This handle's default request deadline.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The current session's id, 0 while there is none (after a loss, before the next one).
    pub fn session_id(&self) -> i64 {
        self.shared.session_id()
    }

    /// The session timeout the server granted (the requested one before the first session).
    pub fn session_timeout(&self) -> Duration {
        self.shared.negotiated_timeout()
    }

    /// The session's state as the client knows it now.
    pub fn state(&self) -> SessionState {
        self.shared.state()
    }

    /// A new receiver of every session event from now on, in order. Never blocks the client;
    /// a receiver that is dropped is forgotten.
    ///
    /// Subscribe first, then read [`Client::state`]: no change can slip between the two.
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) {
    /// use zkguard::{SessionEvent, SessionState};
    /// let events = client.events();
    /// if client.state() == SessionState::Connected {
    ///     for ev in events.iter() {
    ///         match ev {
    ///             SessionEvent::Suspended { .. } => eprintln!("stop trusting what we hold"),
    ///             SessionEvent::Lost { .. } | SessionEvent::Closed => break,
    ///             _ => {}
    ///         }
    ///     }
    /// }
    /// # }
    /// ```
    #[must_use = "the receiver is the only way to hear the events"]
    pub fn events(&self) -> Receiver<SessionEvent> {
        self.shared.subscribe()
    }

    /// The measurements of this client's recipes (`crate::metrics`).
    pub(crate) fn meter(&self) -> &Arc<crate::metrics::Meter> {
        &self.shared.meter
    }

    /// The server this client is connected to, if connected.
    pub fn connected_server(&self) -> Option<SocketAddr> {
        self.shared.server()
    }

    /// Counters of what the client has done, and gauges of the guards it holds and the
    /// acquires it has queued (see [`ClientStats`]).
    pub fn stats(&self) -> ClientStats {
        ClientStats::of(&self.shared.counters, self.shared.meter.snapshot())
    }

    /// Ends the session now: the server deletes its ephemeral nodes at once. Every clone of
    /// this client is closed; later requests fail with [`Error::Closed`]. Waits at most about
    /// a second for the server. The outcome tells whether the server confirmed; if it did
    /// not ([`CloseOutcome::Unconfirmed`]), the client is closed all the same and the
    /// session's ephemeral nodes go when the server expires it. Closing twice is fine
    /// ([`CloseOutcome::AlreadyClosed`]). There is nothing to handle in the usual case, so
    /// `client.close();` is enough; `client.close().into_result()?` treats an unconfirmed
    /// close as an error.
    ///
    /// # The way to end every blocked call
    ///
    /// Closing is how a program stops everything that waits on this client, on every
    /// thread: every blocked acquire of every lock ([`Error::Closed`]), every
    /// [`lead`](crate::LeaderElection::lead), every request waiting for its reply, and every
    /// [`Candidate`](crate::Candidate) (its [`events`](crate::Candidate::events) streams end
    /// after a last `Lost` if it led, [`wait_for_leadership`](crate::Candidate::wait_for_leadership)
    /// says `Closed`). Every guard still held is lost (its `lost()` fires; the server has
    /// deleted its node). The usual end of a daemon: shut the locks' cancellers
    /// ([`Canceller::shut`](crate::Canceller::shut)) and stop the candidates
    /// ([`Candidate::stop`](crate::Candidate::stop)) so the workers finish what they hold
    /// and return, join them, then close. Closing first is the quick stop: nothing is
    /// released one by one, the session's end deletes every node at once.
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let client = zkguard::Client::connect("127.0.0.1:2181")?;
    /// let lock = zkguard::Mutex::new(&client, "/locks/jobs")?;
    /// let worker = std::thread::spawn(move || lock.acquire().map(drop));
    /// client.close(); // the worker's acquire returns Err(Closed)
    /// assert!(worker.join().unwrap().is_err());
    /// # Ok(()) }
    /// ```
    pub fn close(&self) -> CloseOutcome {
        self.owner.close()
    }

    /// Sends several requests back to back before waiting for any reply: the server applies
    /// them in order, and the whole batch costs one round trip.
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// use zkguard::CreateMode;
    /// let (created, children) = client.pipeline(|p| {
    ///     (
    ///         p.create("/queue/item-", b"", CreateMode::EphemeralSequential),
    ///         p.get_children("/queue"),
    ///     )
    /// });
    /// let me = created.wait()?.path;
    /// let (names, _) = children.wait()?;
    /// # Ok(()) }
    /// ```
    pub fn pipeline<R>(&self, build: impl FnOnce(&mut Pipeline) -> R) -> R {
        let mut p = Pipeline {
            client: self,
            deadline: Instant::now() + self.timeout,
            out: Vec::new(),
            sending: Default::default(),
            last: None,
            bell: None,
        };
        let r = build(&mut p);
        let out = p.sending.take(p.out, p.last);
        self.shared.submit(out, p.deadline, false, self.pin);
        r
    }

    /// Registers a crate-internal listener for session events (see [`SessionSink`]) and
    /// returns the session id and state read at that moment.
    pub(crate) fn subscribe_sink(
        &self,
        sink: std::sync::Weak<dyn SessionSink>,
    ) -> (i64, SessionState) {
        self.shared.subscribe_sink(sink)
    }

    /// Whether the client is closed or closing (no new lock may be granted on it).
    pub(crate) fn is_closing(&self) -> bool {
        self.shared.is_closing()
    }

    /// Arms a data watch on `path` for a crate-internal sink that keeps it (see
    /// [`WatchSink::keep`]), on `session` only, without waiting for the reply. A missing
    /// node is reported to the sink as `NodeDeleted`. With no live connection of `session`
    /// right now, the connection thread arms it once there is one.
    ///
    /// With `seen` (what a read that armed this session's data watch on `path` returned):
    /// if the client still holds that watch (not fired since), the sink joins it and is
    /// given `seen` as the reply, and nothing is sent.
    pub(crate) fn keep_sink_watch(
        &self,
        path: &str,
        sink: Arc<dyn WatchSink>,
        session: i64,
        seen: Option<(&[u8], &Stat)>,
    ) {
        if let Some((data, stat)) = seen {
            if self.shared.session_id() == session
                && self
                    .shared
                    .join_data_watch(&path::to_server(&self.shared.cfg.chroot, path), &sink)
            {
                sink.on_data(data, stat);
                return;
            }
        }
        let _pending = self.pinned(session).pipeline(|p| {
            p.deadline = Instant::now();
            p.get_data_sink(path, sink)
        });
    }

    fn one<T>(&self, build: impl FnOnce(&mut Pipeline) -> Pending<T>) -> Result<T> {
        self.pipeline(build).wait()
    }

    /// Creates a node with the open ACL. For sequential modes `path` may end in `/`.
    ///
    /// # Errors
    ///
    /// [`Error::NodeExists`], [`Error::NoNode`] if the parent is missing,
    /// [`Error::NoChildrenForEphemerals`] under an ephemeral parent, and
    /// the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<Created> {
        self.one(|p| p.create(path, data, mode))
    }

    /// Creates a node with the given ACL: entries (`&[Acl]`, `&Vec<Acl>`) or one of the
    /// recipes' presets (a [`NodeAcl`], as the recipes' nodes get).
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// use zkguard::{Acl, CreateMode, NodeAcl};
    /// client.create_with_acl("/app/a", b"", CreateMode::Persistent, &Acl::read_unsafe())?;
    /// client.create_with_acl("/app/b", b"", CreateMode::Persistent, &NodeAcl::creator_read())?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Client::create`], and [`Error::InvalidAcl`] for an ACL the server rejects (such
    /// as [`Acl::creator_all`] on a session without credentials).
    pub fn create_with_acl(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &(impl AsRef<[Acl]> + ?Sized),
    ) -> Result<Created> {
        self.one(|p| p.create_with_acl(path, data, mode, acl))
    }

    /// Deletes a node, if its data version is `version` (`None`: any version).
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`], [`Error::BadVersion`], [`Error::NotEmpty`] if it has children, and
    /// the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        self.one(|p| p.delete(path, version))
    }

    /// The node's metadata, or `None` if it does not exist.
    ///
    /// # Errors
    ///
    /// Only the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn exists(&self, path: &str) -> Result<Option<Stat>> {
        self.one(|p| p.exists(path))
    }

    /// Like [`Client::exists`], and leaves a watch that fires once when the node is created,
    /// deleted or its data changes.
    ///
    /// # Errors
    ///
    /// Only the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)). On an error no watch is left.
    pub fn exists_w(&self, path: &str) -> Result<(Option<Stat>, Receiver<WatchedEvent>)> {
        self.one(|p| p.exists_w(path))
    }

    /// The node's data and metadata.
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`], and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        self.one(|p| p.get_data(path))
    }

    /// Like [`Client::get_data`], and leaves a watch that fires once when the node's data
    /// changes or it is deleted. On [`Error::NoNode`] no watch is left behind.
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`] (no watch is left), and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn get_data_w(&self, path: &str) -> Result<(Vec<u8>, Stat, Receiver<WatchedEvent>)> {
        self.one(|p| p.get_data_w(path))
    }

    /// Sets the node's data, if its version is `version` (`None`: any version).
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`], [`Error::BadVersion`], and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        self.one(|p| p.set_data(path, data, version))
    }

    /// The node's children (names, not paths, in the server's order) and its metadata.
    ///
    /// A listing of more than 1 048 576 names (2<sup>20</sup>, the most entries zkguard
    /// decodes from one reply, whatever [`ClientBuilder::max_reply_size`] allows) is
    /// refused with [`Error::Malformed`]: a hostile server's 64 MiB of empty names would
    /// otherwise take about 400 MB.
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`], [`Error::Malformed`] over that many names, and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn get_children(&self, path: &str) -> Result<(Vec<String>, Stat)> {
        self.one(|p| p.get_children(path))
    }

    /// [`Client::get_children`] for the queue recipes: the names without a string allocated
    /// for each, and no stat.
    pub(crate) fn list(&self, path: &str) -> Result<Names> {
        self.one(|p| p.list(path))
    }

    /// Like [`Client::get_children`], and leaves a watch that fires once when a child is
    /// added or removed, or the node is deleted.
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`] (no watch is left), and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn get_children_w(
        &self,
        path: &str,
    ) -> Result<(Vec<String>, Stat, Receiver<WatchedEvent>)> {
        self.one(|p| p.get_children_w(path))
    }

    /// The node's ACL as the server keeps it (an `auth` entry reads as the identities it
    /// stood for) and its metadata.
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`], [`Error::NoAuth`] without READ on it (ZooKeeper 3.6+), and the errors every request can return.
    pub fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        self.one(|p| p.get_acl(path))
    }

    /// Replaces the node's ACL, if its ACL version (`Stat::aversion`) is `version`.
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`], [`Error::BadVersion`], [`Error::NoAuth`] without ADMIN on it,
    /// [`Error::InvalidAcl`], and the errors every request can return.
    pub fn set_acl(&self, path: &str, acl: &[Acl], version: Option<i32>) -> Result<Stat> {
        self.one(|p| p.set_acl(path, acl, version))
    }

    /// The identities this session carries as the server sees them (`whoAmI`, ZooKeeper
    /// 3.7+): its address (`ip:127.0.0.1`) and each login (`digest`, `sasl`, `x509` …).
    ///
    /// # Errors
    ///
    /// [`Error::ServerTooOld`] from a server before 3.7, which does not know the request.
    /// Such a server (seen on 3.6.3) then also closes the connection: the session survives
    /// and is resumed on a new connection, but every guard of this client sees a suspension
    /// ([`SessionEvent::Suspended`](crate::SessionEvent::Suspended), then `Reconnected`)
    /// and a request sent meanwhile may fail with a connection loss. Do not call it on a
    /// client that holds locks against a server that may be older than 3.7.
    pub fn who_am_i(&self) -> Result<Vec<Identity>> {
        self.one(|p| p.who_am_i())
    }

    /// Waits until the server this client talks to has caught up with the leader for `path`.
    ///
    /// # Errors
    ///
    /// [`Error::NoNode`] on older servers, and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn sync(&self, path: &str) -> Result<()> {
        self.one(|p| p.sync(path))
    }

    /// Applies all operations atomically, or none. On failure, [`Error::Multi`] names the
    /// first operation that failed.
    ///
    /// # Errors
    ///
    /// [`Error::Multi`] with the index and error of the first operation that failed (nothing
    /// was applied), and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        self.one(|p| p.multi(ops))
    }
}
