//! A synchronous ZooKeeper client: sessions, requests, watches.
//!
//! One [`Client`] is one ZooKeeper session (replaced by a new one, on its own, if the session
//! is lost) and one background thread. Callers write their requests on the socket themselves
//! and wait on their own channel for the reply; the background thread reads every frame,
//! routes replies and watch events, pings, detects a silent server, reconnects with back-off,
//! re-arms watches and replays credentials.

mod conn;
mod janitor;
pub(crate) mod path;
pub(crate) mod proto;
mod types;

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use parking_lot::Mutex;

use crate::error::{Error, Result};
use conn::{Outgoing, RawReply, ReplyMsg, Shared, WatchKind, WatchReg, WatchTx};
pub(crate) use conn::{SessionSink, WatchSink};
pub(crate) use janitor::{Check, Job};
use proto::{op, Reader, Writer};

pub use types::{
    Acl, CreateMode, Created, EventType, LossReason, Op, OpResult, Perms, SessionEvent,
    SessionState, Stat, WatchedEvent,
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
#[derive(Clone)]
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
}

impl Owner {
    fn close(&self) -> Result<()> {
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
        let _ = self.close();
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("hosts", &self.shared.cfg.hosts)
            .field("chroot", &self.shared.cfg.chroot)
            .field("session_id", &format_args!("0x{:x}", self.session_id()))
            .field("state", &self.state())
            .finish()
    }
}

/// Builds a [`Client`] with settings other than the defaults.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::builder("zk1:2181,zk2:2181,zk3:2181/myapp")
///     .session_timeout(Duration::from_secs(6))
///     .connect_timeout(Duration::from_secs(5))
///     .auth("digest", b"user:secret")
///     .build()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientBuilder {
    connect_string: String,
    session_timeout: Duration,
    connect_timeout: Duration,
    request_timeout: Option<Duration>,
    auth: Vec<(String, Vec<u8>)>,
}

impl ClientBuilder {
    /// The session timeout to ask for (default 10 s). The server clamps it to its
    /// `[minSessionTimeout, maxSessionTimeout]` range; [`Client::session_timeout`] tells the
    /// negotiated value.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`ClientBuilder::build`] may take to establish the first session
    /// (default 15 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The default deadline of each request (default: the session timeout). A request waits
    /// for a connection, and then for its reply, at most this long. See
    /// [`Client::with_timeout`] for a per-call deadline.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Credentials to present (for example `("digest", b"user:password")`), at connect and
    /// again after every reconnect.
    pub fn auth(mut self, scheme: &str, credentials: &[u8]) -> Self {
        self.auth.push((scheme.to_string(), credentials.to_vec()));
        self
    }

    /// Connects: returns once a session exists, or fails by the connect deadline with an
    /// error that names every server tried and what went wrong there. With a chroot in the
    /// connect string, the chroot node must exist: if not, the error is
    /// [`Error::InvalidPath`] naming it.
    pub fn build(self) -> Result<Client> {
        let cs = path::parse_connect_string(&self.connect_string)?;
        let check = |name: &'static str, d: Duration| {
            if d.is_zero() {
                Err(Error::InvalidArgument {
                    name,
                    reason: "must be more than zero".into(),
                })
            } else if d.as_millis() > i32::MAX as u128 {
                Err(Error::InvalidArgument {
                    name,
                    reason: format!("{d:?} is too long"),
                })
            } else {
                Ok(())
            }
        };
        check("session timeout", self.session_timeout)?;
        check("connect timeout", self.connect_timeout)?;
        if let Some(t) = self.request_timeout {
            check("request timeout", t)?;
        }
        for (scheme, _) in &self.auth {
            if scheme.is_empty() {
                return Err(Error::InvalidArgument {
                    name: "auth scheme",
                    reason: "empty".into(),
                });
            }
        }
        // Fail at once when no host of the list can be resolved at all.
        let mut resolve_errors = Vec::new();
        for h in &cs.hosts {
            match std::net::ToSocketAddrs::to_socket_addrs(h.as_str())
                .map(|mut a| a.next().is_some())
            {
                Ok(true) => {}
                Ok(false) => resolve_errors.push(format!("{h} (resolves to no address)")),
                Err(e) => resolve_errors.push(format!("{h} (cannot resolve: {e})")),
            }
        }
        if resolve_errors.len() == cs.hosts.len() {
            return Err(Error::Connect {
                tried: resolve_errors.join(", "),
                after: Duration::ZERO,
            });
        }
        let mut hosts = cs.hosts;
        shuffle(&mut hosts);
        let shared = Arc::new(Shared::new(conn::Config {
            hosts,
            chroot: cs.chroot,
            session_timeout: self.session_timeout,
            auth: self.auth,
        }));
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("zkguard-conn".into())
            .spawn(move || {
                thread_shared.run();
                drop(done_tx);
            })
            .map_err(|e| Error::InvalidArgument {
                name: "thread",
                reason: format!("cannot start the connection thread: {e}"),
            })?;
        let owner = Arc::new(Owner {
            shared: shared.clone(),
            thread: Mutex::new(Some(thread)),
            done: done_rx,
        });
        let deadline = Instant::now() + self.connect_timeout;
        // On failure `owner` drops here, which stops the thread.
        shared.wait_first_session(deadline, self.connect_timeout)?;
        let client = Client {
            timeout: self.request_timeout.unwrap_or(self.session_timeout),
            shared,
            owner,
            pin: None,
        };
        client.check_chroot()?;
        Ok(client)
    }
}

impl Client {
    /// A chroot must exist: every path lives under it, and without it every request would
    /// fail with a `NoNode` naming the caller's path, not the missing chroot.
    fn check_chroot(&self) -> Result<()> {
        let chroot = &self.shared.cfg.chroot;
        if chroot.is_empty() {
            return Ok(());
        }
        // "/" is the chroot itself on the server.
        match self.exists("/") {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(Error::InvalidPath {
                path: chroot.clone(),
                reason: "the chroot of the connect string does not exist on the server \
                         (create it first, with a client connected without the chroot)"
                    .into(),
            }),
            Err(e) => Err(e),
        }
    }
}

fn shuffle(v: &mut [String]) {
    let mut x = uuid::Uuid::new_v4().as_u128() as u64 | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

/// Counters of what the client has done, for tests and benchmarks.
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
}

impl Client {
    /// Connects with default settings (session timeout 10 s, connect timeout 15 s).
    ///
    /// `connect_string` is `host:port[,host:port...][/chroot]`; a host without a port uses
    /// 2181, IPv6 addresses are written `[addr]:port`.
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
        }
    }

    /// The same session, with another default deadline for the requests made through the
    /// returned handle.
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
            timeout,
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

    /// The server this client is connected to, if connected.
    pub fn connected_server(&self) -> Option<SocketAddr> {
        self.shared.server()
    }

    /// Counters of what the client has done.
    pub fn stats(&self) -> ClientStats {
        let c = &self.shared.counters;
        ClientStats {
            watch_events: c.watch_events.load(Ordering::Relaxed),
            connect_attempts: c.connects.load(Ordering::Relaxed),
            sessions: c.sessions.load(Ordering::Relaxed),
            requests: c.requests.load(Ordering::Relaxed),
        }
    }

    /// Ends the session now: the server deletes its ephemeral nodes at once. Every clone of
    /// this client is closed; later requests fail with [`Error::Closed`]. Waits at most about
    /// a second for the server; if it does not confirm, the session expires on its own and
    /// the error says so. Closing twice is fine.
    pub fn close(&self) -> Result<()> {
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
        };
        let r = build(&mut p);
        self.shared.submit(p.out, p.deadline, false, self.pin);
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
    pub(crate) fn keep_sink_watch(&self, path: &str, sink: Arc<dyn WatchSink>, session: i64) {
        let _pending = self.pinned(session).pipeline(|p| {
            p.deadline = Instant::now();
            p.get_data_sink(path, sink)
        });
    }

    fn one<T>(&self, build: impl FnOnce(&mut Pipeline) -> Pending<T>) -> Result<T> {
        self.pipeline(build).wait()
    }

    /// Makes sure `path` exists: creates it and every missing node above it, each
    /// persistent, empty and with the open ACL (what kazoo's `ensure_path` and Curator's
    /// `creatingParentsIfNeeded` do). Nodes already there are left as they are. The nodes on
    /// the way go out in one write, so the whole call is one round trip when the connection
    /// is up.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a bad path (nothing is sent),
    /// [`Error::NoChildrenForEphemerals`] naming the first node that cannot be made because
    /// the one above it is ephemeral,
    /// and connection errors (then some of the nodes may exist; calling again finishes).
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// client.ensure_path("/app/config/feature-flags")?;
    /// assert!(client.exists("/app/config")?.is_some());
    /// # Ok(()) }
    /// ```
    pub fn ensure_path(&self, path: &str) -> Result<()> {
        path::validate_path(path)?;
        let prefixes: Vec<&str> = path
            .match_indices('/')
            .skip(1)
            .map(|(i, _)| &path[..i])
            .chain((path != "/").then_some(path))
            .collect();
        let created = self.pipeline(|p| {
            prefixes
                .iter()
                .map(|node| p.create(node, b"", CreateMode::Persistent))
                .collect::<Vec<_>>()
        });
        for pending in created {
            match pending.wait() {
                Ok(_) | Err(Error::NodeExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Creates a node with the open ACL. For sequential modes `path` may end in `/`.
    pub fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<Created> {
        self.one(|p| p.create(path, data, mode))
    }

    /// Creates a node with the given ACL.
    pub fn create_with_acl(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &[Acl],
    ) -> Result<Created> {
        self.one(|p| p.create_with_acl(path, data, mode, acl))
    }

    /// Deletes a node, if its data version is `version` (`None`: any version).
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        self.one(|p| p.delete(path, version))
    }

    /// The node's metadata, or `None` if it does not exist.
    pub fn exists(&self, path: &str) -> Result<Option<Stat>> {
        self.one(|p| p.exists(path))
    }

    /// Like [`Client::exists`], and leaves a watch that fires once when the node is created,
    /// deleted or its data changes.
    pub fn exists_w(&self, path: &str) -> Result<(Option<Stat>, Receiver<WatchedEvent>)> {
        self.one(|p| p.exists_w(path))
    }

    /// The node's data and metadata.
    pub fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        self.one(|p| p.get_data(path))
    }

    /// Like [`Client::get_data`], and leaves a watch that fires once when the node's data
    /// changes or it is deleted. On [`Error::NoNode`] no watch is left behind.
    pub fn get_data_w(&self, path: &str) -> Result<(Vec<u8>, Stat, Receiver<WatchedEvent>)> {
        self.one(|p| p.get_data_w(path))
    }

    /// Sets the node's data, if its version is `version` (`None`: any version).
    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        self.one(|p| p.set_data(path, data, version))
    }

    /// The node's children (names, not paths, in the server's order) and its metadata.
    pub fn get_children(&self, path: &str) -> Result<(Vec<String>, Stat)> {
        self.one(|p| p.get_children(path))
    }

    /// Like [`Client::get_children`], and leaves a watch that fires once when a child is
    /// added or removed, or the node is deleted.
    pub fn get_children_w(
        &self,
        path: &str,
    ) -> Result<(Vec<String>, Stat, Receiver<WatchedEvent>)> {
        self.one(|p| p.get_children_w(path))
    }

    /// Waits until the server this client talks to has caught up with the leader for `path`.
    pub fn sync(&self, path: &str) -> Result<()> {
        self.one(|p| p.sync(path))
    }

    /// Applies all operations atomically, or none. On failure, [`Error::Multi`] names the
    /// first operation that failed.
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        self.one(|p| p.multi(ops))
    }
}

/// Requests collected by [`Client::pipeline`], written together when the closure returns.
pub struct Pipeline<'a> {
    client: &'a Client,
    deadline: Instant,
    out: Vec<Outgoing>,
}

impl fmt::Debug for Pipeline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("requests", &self.out.len())
            .finish_non_exhaustive()
    }
}

/// The reply to come for one pipelined request.
#[must_use = "a pending request does nothing unless waited for"]
pub struct Pending<T> {
    state: std::result::Result<Receiver<ReplyMsg>, Error>,
    decode: Box<dyn FnOnce(RawReply) -> Result<T> + Send>,
    op: &'static str,
    path: String,
    deadline: Instant,
    timeout: Duration,
}

impl<T> Pending<T> {
    /// Waits for the reply (until the deadline set when the pipeline was sent).
    pub fn wait(self) -> Result<T> {
        let rx = self.state?;
        let timeout_err = || Error::Timeout {
            op: self.op,
            path: self.path.clone(),
            after: self.timeout,
        };
        match rx.recv_deadline(self.deadline) {
            Ok(Ok(raw)) => (self.decode)(raw),
            // No connection before the deadline, or no reply before it.
            Ok(Err(Error::Timeout { .. })) | Err(RecvTimeoutError::Timeout) => Err(timeout_err()),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Disconnected) => Err(Error::ConnectionLoss),
        }
    }
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending")
            .field("op", &self.op)
            .field("path", &self.path)
            .finish()
    }
}

fn version_arg(v: Option<i32>) -> i32 {
    v.unwrap_or(-1)
}

fn create_body(w: &mut Writer, server_path: &str, data: &[u8], mode: CreateMode, acl: &[Acl]) {
    w.string(server_path)
        .buffer(data)
        .acls(acl)
        .int(mode.flag());
    if let Some(ttl) = mode.ttl() {
        w.long(ttl.as_millis() as i64);
    }
}

fn create_opcode(mode: CreateMode) -> i32 {
    match mode {
        CreateMode::Container => op::CREATE_CONTAINER,
        CreateMode::PersistentWithTtl(_) | CreateMode::PersistentSequentialWithTtl(_) => {
            op::CREATE_TTL
        }
        _ => op::CREATE2,
    }
}

fn check_create(path: &str, mode: CreateMode, acl: &[Acl]) -> Result<()> {
    if mode.is_sequential() {
        path::validate_sequential_path(path)?;
    } else {
        path::validate_path(path)?;
    }
    if path == "/" && !mode.is_sequential() {
        return Err(Error::NodeExists { path: "/".into() });
    }
    if acl.is_empty() {
        return Err(Error::InvalidArgument {
            name: "acl",
            reason: format!("empty ACL list for {path}"),
        });
    }
    if let Some(ttl) = mode.ttl() {
        // The server keeps TTLs in 40 bits of milliseconds.
        if ttl.is_zero() || ttl.as_millis() > (1u128 << 40) - 1 {
            return Err(Error::InvalidArgument {
                name: "ttl",
                reason: format!("{ttl:?} for {path} is outside 1 ms ..= 2^40-1 ms"),
            });
        }
    }
    Ok(())
}

/// What [`Pipeline::push`] needs to know of a request besides its body and decoder.
struct Req<'p> {
    op: &'static str,
    path: &'p str,
    /// The client-side check of the arguments; on error nothing is sent.
    checked: Result<()>,
    opcode: i32,
    watch: Option<WatchKind>,
    /// The watch goes to this sink instead of a new channel.
    sink: Option<Arc<dyn WatchSink>>,
}

impl<'p> Req<'p> {
    /// A request on one node whose path is checked the usual way.
    fn on(op: &'static str, path: &'p str, opcode: i32) -> Req<'p> {
        Req {
            op,
            path,
            checked: path::validate_path(path),
            opcode,
            watch: None,
            sink: None,
        }
    }

    fn watch(self, watch: bool, kind: WatchKind) -> Req<'p> {
        Req {
            watch: watch.then_some(kind),
            ..self
        }
    }
}

/// A pending reply and, for watched requests, the watch's receiver.
type Watched<T> = (Pending<T>, Option<Receiver<WatchedEvent>>);

impl<'a> Pipeline<'a> {
    /// Queues a request whose reply is decoded only when the server says OK; any other code
    /// becomes the error naming the path, and an undecodable body a marshalling error.
    fn push<T: 'static>(
        &mut self,
        req: Req<'_>,
        body: impl FnOnce(&mut Writer, &str),
        decode: impl FnOnce(&mut Reader<'_>) -> proto::DecodeResult<T> + Send + 'static,
    ) -> Watched<T> {
        let (op_name, p) = (req.op, req.path.to_string());
        self.push_raw(req, body, move |raw| {
            if raw.err != proto::code::OK {
                return Err(Error::from_code(raw.err, &p));
            }
            decode(&mut Reader::new(raw.body())).map_err(|m| malformed(op_name, &p, &m.0))
        })
    }

    /// Queues a request with a decoder that sees the raw reply.
    fn push_raw<T: 'static>(
        &mut self,
        req: Req<'_>,
        body: impl FnOnce(&mut Writer, &str),
        decode: impl FnOnce(RawReply) -> Result<T> + Send + 'static,
    ) -> Watched<T> {
        let mut pending = Pending {
            state: Err(Error::Closed),
            decode: Box::new(decode),
            op: req.op,
            path: req.path.to_string(),
            deadline: self.deadline,
            timeout: self.client.timeout,
        };
        if let Err(e) = req.checked {
            pending.state = Err(e);
            return (pending, None);
        }
        let server_path = path::to_server(&self.client.shared.cfg.chroot, req.path);
        let mut w = Writer::default();
        body(&mut w, &server_path);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (watch, watch_rx) = match (req.watch, req.sink) {
            (Some(kind), Some(sink)) => {
                let reg = WatchReg {
                    server_path,
                    kind,
                    tx: WatchTx::Sink(sink),
                };
                (Some(reg), None)
            }
            (Some(kind), None) => {
                let (wtx, wrx) = crossbeam_channel::unbounded();
                let reg = WatchReg {
                    server_path,
                    kind,
                    tx: WatchTx::Chan(wtx),
                };
                (Some(reg), Some(wrx))
            }
            (None, _) => (None, None),
        };
        self.out.push(Outgoing {
            opcode: req.opcode,
            body: w.buf,
            watch,
            tx,
        });
        pending.state = Ok(rx);
        (pending, watch_rx)
    }

    fn chroot(&self) -> Arc<str> {
        Arc::from(self.client.shared.cfg.chroot.as_str())
    }

    /// See [`Client::create`].
    pub fn create(&mut self, path: &str, data: &[u8], mode: CreateMode) -> Pending<Created> {
        self.create_with_acl(path, data, mode, &Acl::open_unsafe())
    }

    /// See [`Client::create_with_acl`].
    pub fn create_with_acl(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &[Acl],
    ) -> Pending<Created> {
        let chroot = self.chroot();
        let req = Req {
            checked: check_create(path, mode, acl),
            ..Req::on("create", path, create_opcode(mode))
        };
        let body = |w: &mut Writer, sp: &str| create_body(w, sp, data, mode, acl);
        self.push(req, body, move |r| {
            Ok(Created {
                path: path::from_server(&chroot, &r.string()?),
                stat: r.stat()?,
            })
        })
        .0
    }

    /// See [`Client::delete`].
    pub fn delete(&mut self, path: &str, version: Option<i32>) -> Pending<()> {
        let mut req = Req::on("delete", path, op::DELETE);
        if path == "/" {
            req.checked = Err(Error::InvalidPath {
                path: "/".into(),
                reason: "the root cannot be deleted".into(),
            });
        }
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).int(version_arg(version));
        };
        self.push(req, body, |_| Ok(())).0
    }

    fn exists_inner(&mut self, path: &str, watch: bool) -> Watched<Option<Stat>> {
        let req = Req::on("exists", path, op::EXISTS).watch(watch, WatchKind::Data);
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        let (pending, w) = self.push(req, body, |r| r.stat());
        // A missing node is an answer, not an error (and leaves an exists watch behind).
        let pending = pending.map(|r| match r {
            Ok(stat) => Ok(Some(stat)),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(e) => Err(e),
        });
        (pending, w)
    }

    /// See [`Client::exists`].
    pub fn exists(&mut self, path: &str) -> Pending<Option<Stat>> {
        self.exists_inner(path, false).0
    }

    /// See [`Client::exists_w`].
    pub fn exists_w(&mut self, path: &str) -> Pending<(Option<Stat>, Receiver<WatchedEvent>)> {
        let (p, w) = self.exists_inner(path, true);
        with_watch(p, w, |s, w| (s, w))
    }

    fn get_data_inner(&mut self, path: &str, watch: bool) -> Watched<(Vec<u8>, Stat)> {
        let req = Req::on("get_data", path, op::GET_DATA).watch(watch, WatchKind::Data);
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        self.push(req, body, |r| Ok((r.buffer()?, r.stat()?)))
    }

    /// `get_data` with a data watch that goes to a crate-internal sink.
    pub(crate) fn get_data_sink(
        &mut self,
        path: &str,
        sink: Arc<dyn WatchSink>,
    ) -> Pending<(Vec<u8>, Stat)> {
        let req = Req {
            sink: Some(sink),
            ..Req::on("get_data", path, op::GET_DATA).watch(true, WatchKind::Data)
        };
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(true);
        };
        self.push(req, body, |r| Ok((r.buffer()?, r.stat()?))).0
    }

    /// See [`Client::get_data`].
    pub fn get_data(&mut self, path: &str) -> Pending<(Vec<u8>, Stat)> {
        self.get_data_inner(path, false).0
    }

    /// See [`Client::get_data_w`].
    pub fn get_data_w(&mut self, path: &str) -> Pending<(Vec<u8>, Stat, Receiver<WatchedEvent>)> {
        let (p, w) = self.get_data_inner(path, true);
        with_watch(p, w, |(d, s), w| (d, s, w))
    }

    /// See [`Client::set_data`].
    pub fn set_data(&mut self, path: &str, data: &[u8], version: Option<i32>) -> Pending<Stat> {
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).buffer(data).int(version_arg(version));
        };
        self.push(Req::on("set_data", path, op::SET_DATA), body, |r| r.stat())
            .0
    }

    fn get_children_inner(&mut self, path: &str, watch: bool) -> Watched<(Vec<String>, Stat)> {
        let req = Req::on("get_children", path, op::GET_CHILDREN2).watch(watch, WatchKind::Child);
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp).bool(watch);
        };
        self.push(req, body, |r| Ok((r.strings()?, r.stat()?)))
    }

    /// See [`Client::get_children`].
    pub fn get_children(&mut self, path: &str) -> Pending<(Vec<String>, Stat)> {
        self.get_children_inner(path, false).0
    }

    /// See [`Client::get_children_w`].
    pub fn get_children_w(
        &mut self,
        path: &str,
    ) -> Pending<(Vec<String>, Stat, Receiver<WatchedEvent>)> {
        let (p, w) = self.get_children_inner(path, true);
        with_watch(p, w, |(c, s), w| (c, s, w))
    }

    /// See [`Client::sync`].
    pub fn sync(&mut self, path: &str) -> Pending<()> {
        let body = |w: &mut Writer, sp: &str| {
            w.string(sp);
        };
        self.push(Req::on("sync", path, op::SYNC), body, |_| Ok(()))
            .0
    }

    /// See [`Client::multi`].
    pub fn multi(&mut self, ops: &[Op]) -> Pending<Vec<OpResult>> {
        let chroot = self.chroot();
        let label = ops.first().map(|o| o.path()).unwrap_or("");
        let paths: Vec<String> = ops.iter().map(|o| o.path().to_string()).collect();
        let req = Req {
            checked: check_multi(ops),
            ..Req::on("multi", label, op::MULTI)
        };
        let cr = chroot.clone();
        let body = |w: &mut Writer, _: &str| encode_multi(w, &cr, ops);
        self.push_raw(req, body, move |raw| decode_multi(&raw, &chroot, &paths))
            .0
    }
}

impl<T: 'static> Pending<T> {
    /// The same request, its outcome passed through `f`.
    fn map<U: 'static>(
        self,
        f: impl FnOnce(Result<T>) -> Result<U> + Send + 'static,
    ) -> Pending<U> {
        let Pending {
            state,
            decode,
            op,
            path,
            deadline,
            timeout,
        } = self;
        Pending {
            state,
            decode: Box::new(move |raw| f(decode(raw))),
            op,
            path,
            deadline,
            timeout,
        }
    }
}

fn with_watch<A: 'static, B: 'static>(
    p: Pending<A>,
    w: Option<Receiver<WatchedEvent>>,
    join: impl FnOnce(A, Receiver<WatchedEvent>) -> B + Send + 'static,
) -> Pending<B> {
    p.map(move |r| Ok(join(r?, w.ok_or(Error::Closed)?)))
}

fn malformed(op: &str, path: &str, why: &str) -> Error {
    log::error!("zkguard: malformed {op} reply for {path}: {why}");
    Error::Zk {
        code: -5,
        path: path.to_string(),
    }
}

fn check_multi(ops: &[Op]) -> Result<()> {
    for o in ops {
        match o {
            Op::Create { path, mode, .. } => {
                if mode.ttl().is_some() {
                    return Err(Error::InvalidArgument {
                        name: "multi op",
                        reason: format!("TTL create of {path} inside a multi is not supported"),
                    });
                }
                check_create(path, *mode, &Acl::open_unsafe())?
            }
            Op::Delete { path, .. } | Op::Check { path, .. } | Op::SetData { path, .. } => {
                path::validate_path(path)?
            }
        }
    }
    Ok(())
}

fn encode_multi(w: &mut Writer, chroot: &str, ops: &[Op]) {
    for o in ops {
        let sp = path::to_server(chroot, o.path());
        match o {
            Op::Check { version, .. } => {
                w.int(op::CHECK).bool(false).int(-1);
                w.string(&sp).int(version_arg(*version));
            }
            Op::Create { data, mode, .. } => {
                let code = if *mode == CreateMode::Container {
                    op::CREATE_CONTAINER
                } else {
                    op::CREATE
                };
                w.int(code).bool(false).int(-1);
                create_body(w, &sp, data, *mode, &Acl::open_unsafe());
            }
            Op::Delete { version, .. } => {
                w.int(op::DELETE).bool(false).int(-1);
                w.string(&sp).int(version_arg(*version));
            }
            Op::SetData { data, version, .. } => {
                w.int(op::SET_DATA).bool(false).int(-1);
                w.string(&sp).buffer(data).int(version_arg(*version));
            }
        }
    }
    w.int(-1).bool(true).int(-1);
}

fn decode_multi(raw: &RawReply, chroot: &str, paths: &[String]) -> Result<Vec<OpResult>> {
    let label = paths.first().map(String::as_str).unwrap_or("");
    let mut r = Reader::new(raw.body());
    let mut results = Vec::new();
    let mut errors = Vec::new();
    let bad = |m: proto::Malformed| malformed("multi", label, &m.0);
    loop {
        let kind = r.int().map_err(bad)?;
        let done = r.bool().map_err(bad)?;
        let _err = r.int().map_err(bad)?;
        if done {
            break;
        }
        match kind {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                let p = r.string().map_err(bad)?;
                if kind != op::CREATE {
                    r.stat().map_err(bad)?;
                }
                results.push(OpResult::Create {
                    path: path::from_server(chroot, &p),
                });
            }
            op::DELETE => results.push(OpResult::Delete),
            op::CHECK => results.push(OpResult::Check),
            op::SET_DATA => results.push(OpResult::SetData {
                stat: r.stat().map_err(bad)?,
            }),
            op::ERROR => errors.push((results.len() + errors.len(), r.int().map_err(bad)?)),
            other => return Err(malformed("multi", label, &format!("result type {other}"))),
        }
    }
    if raw.err != proto::code::OK || !errors.is_empty() {
        // The failing op carries its own code; the others OK or runtime-inconsistency.
        let (index, code) = errors
            .iter()
            .copied()
            .find(|&(_, c)| c != proto::code::OK && c != proto::code::RUNTIME_INCONSISTENCY)
            .or_else(|| errors.first().copied())
            .unwrap_or((0, raw.err));
        let path = paths.get(index).map(String::as_str).unwrap_or(label);
        return Err(Error::Multi {
            index,
            source: Box::new(Error::from_code(code, path)),
        });
    }
    Ok(results)
}
