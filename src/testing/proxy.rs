//! A TCP proxy that can delay, black-hole, stall, flap or reset the traffic it forwards:
//! [`FaultProxy`].

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::cluster::TestCluster;

/// How long the proxy waits for an upstream server to accept a connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a pump that is waiting to deliver delayed bytes after EOF looks for a close.
const DRAIN_STEP: Duration = Duration::from_millis(20);
const BUF_SIZE: usize = 32 * 1024;
/// How often a pump held back by a stall looks for a close it was not woken for.
const STALL_CHECK: Duration = Duration::from_millis(100);
/// How long the proxy waits for the first message of a ZooKeeper election connection.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// ZooKeeper's election protocol versions whose first message carries an address.
const ELECTION_PROTOCOL_V1: i64 = -65536;
const ELECTION_PROTOCOL_V2: i64 = -65535;
/// ZooKeeper's limit on the address in an election connection's first message.
const ELECTION_HELLO_MAX_ADDR: usize = 2048;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Normal,
    Blackhole,
    Delay(Duration),
    /// Client-to-server bytes are held back; server-to-client bytes flow.
    StallUpstream,
    /// Server-to-client bytes are held back; client-to-server bytes flow.
    StallDownstream,
    /// A connection is closed right after the server's first bytes reach the client.
    Flap,
}

/// Which way a pump forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    /// From the accepted (client) socket to the upstream server.
    Up,
    /// From the upstream server back to the client.
    Down,
}

/// One proxied connection: the accepted client socket and, once connected, its upstream.
struct Conn {
    client: TcpStream,
    upstream: Mutex<Option<TcpStream>>,
    /// Bytes (or an EOF) were swallowed by a black hole: the streams are no longer intact.
    lost: AtomicBool,
    closed: AtomicBool,
}

impl Conn {
    /// Shuts both sockets down in both directions; the pumps see EOF or an error and end.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(up) = self.upstream.lock().as_ref() {
            let _ = up.shutdown(Shutdown::Both);
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

struct Shared {
    mode: Mutex<Mode>,
    /// Signalled (with `mode` locked) when the mode changes, a connection is closed, or
    /// the proxy shuts down; connections hanging in a black hole wait on it.
    changed: Condvar,
    shutdown: AtomicBool,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_id: AtomicU64,
    /// Connections accepted so far, on every listener.
    accepted: AtomicU64,
    /// Connections closed by [`FaultProxy::flap`] so far.
    flapped: AtomicU64,
    /// Listener index -> the address to put into the first message of every ZooKeeper
    /// election connection accepted there (see `rewrite_election_hello`).
    hello_rewrites: Mutex<HashMap<usize, String>>,
}

impl Shared {
    fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    fn notify(&self) {
        let _guard = self.mode.lock();
        self.changed.notify_all();
    }

    /// The current mode for a chunk going `dir`; in a black hole, also marks `conn` as
    /// having lost bytes (under the mode lock, so `heal` cannot miss it).
    ///
    /// While client-to-server traffic is stalled, an `Up` caller waits here (holding its
    /// chunk) until the stall ends or the connection or proxy closes; it gets
    /// `StallUpstream` back only in the latter case.
    fn mode_for_chunk(&self, conn: &Conn, dir: Dir) -> Mode {
        let mut mode = self.mode.lock();
        let stalled = |m: Mode| match dir {
            Dir::Up => m == Mode::StallUpstream,
            Dir::Down => m == Mode::StallDownstream,
        };
        while stalled(*mode) && !conn.is_closed() && !self.is_shutdown() {
            // Timed: a pump closing the connection does not signal the condvar.
            self.changed.wait_for(&mut mode, STALL_CHECK);
        }
        if *mode == Mode::Blackhole {
            conn.lost.store(true, Ordering::SeqCst);
        }
        *mode
    }
}

/// A loopback TCP proxy in front of one or more servers that injects network faults on
/// command: delays, black holes (a partition that neither side can see), one-way stalls,
/// flapping connections and resets.
///
/// [`start`](Self::start) opens one listener on `127.0.0.1` per upstream address; every
/// connection accepted on a listener is forwarded to that listener's upstream. Hand
/// [`connect_string`](Self::connect_string) to the client under test instead of the
/// servers' own addresses. The faults apply to every connection of the proxy; use one
/// proxy per client to break one client's traffic only.
///
/// The proxy is in one mode at a time: plain forwarding, [`blackhole`](Self::blackhole),
/// [`delay`](Self::delay), [`stall_client_to_server`](Self::stall_client_to_server) or
/// [`flap`](Self::flap). Each of these replaces the one before; [`heal`](Self::heal)
/// returns to plain forwarding. [`reset`](Self::reset) closes the current connections
/// in any mode.
///
/// The proxy runs two threads per connection and one per listener, all blocked in the
/// kernel while idle. All methods take `&self`; it is `Send + Sync`. Dropping it closes
/// every socket and joins every thread.
///
/// # Examples
///
/// A partition: the client cannot tell the server went quiet, and its guard stops being
/// valid at once (this runs a real server):
///
/// ```
/// use std::time::Duration;
/// use zkguard::testing::{FaultProxy, TestCluster};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = TestCluster::start(1)?;
/// let proxy = FaultProxy::for_cluster(&cluster)?;
/// let client = zkguard::Client::builder(&proxy.connect_string())
///     .session_timeout(Duration::from_secs(4))
///     .build()?;
/// let guard = zkguard::Mutex::new(&client, "/doc/proxy")?.acquire()?;
/// let events = client.events();
/// proxy.blackhole();
/// // Suspended once the server has been silent for two thirds of the session timeout.
/// while !matches!(events.recv()?, zkguard::SessionEvent::Suspended { .. }) {}
/// assert!(!guard.is_valid());
/// proxy.heal();
/// # Ok(())
/// # }
/// ```
#[must_use = "the proxy stops (and cuts its connections) as soon as it is dropped"]
pub struct FaultProxy {
    shared: Arc<Shared>,
    addrs: Vec<SocketAddr>,
    acceptors: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("listeners", &self.addrs)
            .field("mode", &*self.shared.mode.lock())
            .field("connections", &self.connections())
            .field("accepted", &self.accepted())
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy with one loopback listener (`127.0.0.1`, a free port) per upstream
    /// address, in the same order.
    ///
    /// # Errors
    ///
    /// A listener cannot be bound or its thread cannot be started.
    pub fn start(upstreams: &[SocketAddr]) -> io::Result<FaultProxy> {
        if upstreams.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "FaultProxy::start needs at least one upstream address",
            ));
        }
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Normal),
            changed: Condvar::new(),
            shutdown: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            flapped: AtomicU64::new(0),
            hello_rewrites: Mutex::new(HashMap::new()),
        });
        let mut listeners = Vec::with_capacity(upstreams.len());
        let mut addrs = Vec::with_capacity(upstreams.len());
        for up in upstreams {
            let listener =
                TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("FaultProxy: cannot bind a loopback listener for {up}: {e}"),
                    )
                })?;
            addrs.push(listener.local_addr()?);
            listeners.push((listener, *up));
        }
        let proxy = FaultProxy {
            shared,
            addrs,
            acceptors: Mutex::new(Vec::new()),
        };
        for (index, (listener, upstream)) in listeners.into_iter().enumerate() {
            let shared = Arc::clone(&proxy.shared);
            let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
            let handle = thread::Builder::new()
                .name(format!("zkguard-proxy-accept-{port}"))
                .spawn(move || accept_loop(shared, listener, upstream, index))
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("FaultProxy: cannot spawn the accept thread for {upstream}: {e}"),
                    )
                })?;
            // On an early return, Drop stops the acceptors started so far.
            proxy.acceptors.lock().push(handle);
        }
        log::info!(
            "zkguard FaultProxy: {} -> {}",
            proxy.connect_string(),
            upstreams
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        Ok(proxy)
    }

    /// A proxy in front of every server of `cluster`, in server order.
    ///
    /// # Errors
    ///
    /// As [`FaultProxy::start`]: a listener cannot be bound or its thread started.
    pub fn for_cluster(cluster: &TestCluster) -> io::Result<FaultProxy> {
        let upstreams: Vec<SocketAddr> =
            (0..cluster.len()).map(|i| cluster.client_addr(i)).collect();
        FaultProxy::start(&upstreams)
    }

    /// A proxy in front of every server's TLS `secureClientPort`, in server order (a
    /// cluster started with [`tls`](crate::testing::TestClusterBuilder::tls)). The proxy
    /// forwards bytes, so TLS passes through it untouched; a client verifying the server
    /// certificate should expect the name `localhost` or `127.0.0.1`, as without a proxy.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] when the cluster has no TLS ports; otherwise as
    /// [`FaultProxy::start`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use zkguard::testing::{ClientAuth, FaultProxy, TestCluster};
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::builder().servers(3).tls(ClientAuth::None).start()?;
    /// let proxy = FaultProxy::for_cluster_secure(&cluster)?;
    /// // A TLS client connects to `proxy.connect_string()`; one server's alone:
    /// let one = FaultProxy::start(&[cluster.secure_client_addr(1).expect("tls")])?;
    /// # let _ = (proxy, one);
    /// # Ok(())
    /// # }
    /// ```
    pub fn for_cluster_secure(cluster: &TestCluster) -> io::Result<FaultProxy> {
        let upstreams = (0..cluster.len())
            .map(|i| cluster.secure_client_addr(i))
            .collect::<Option<Vec<SocketAddr>>>()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "FaultProxy::for_cluster_secure needs a cluster started with tls(..)",
                )
            })?;
        FaultProxy::start(&upstreams)
    }

    /// The connect string of the listeners: `"127.0.0.1:l1,127.0.0.1:l2,…"`.
    pub fn connect_string(&self) -> String {
        self.addrs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The listeners' addresses, in upstream order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    fn set_mode(&self, mode: Mode) {
        let mut m = self.shared.mode.lock();
        *m = mode;
        self.shared.changed.notify_all();
        log::info!("zkguard FaultProxy {}: {mode:?}", self.connect_string());
    }

    /// Starts a partition: from now on bytes in both directions are read and discarded,
    /// and nothing is closed (no FIN or RST reaches either side). New connections are
    /// accepted but neither connected upstream nor answered: they hang until
    /// [`heal`](Self::heal). Bytes still queued by [`delay`](Self::delay) are dropped.
    pub fn blackhole(&self) {
        self.set_mode(Mode::Blackhole);
    }

    /// Closes every current connection at once (both directions of both sockets); new
    /// connections are handled in the current mode.
    pub fn reset(&self) {
        let conns: Vec<Arc<Conn>> = self.shared.conns.lock().values().cloned().collect();
        for conn in &conns {
            conn.close();
        }
        self.shared.notify();
        log::info!(
            "zkguard FaultProxy {}: reset {} connection(s)",
            self.connect_string(),
            conns.len()
        );
    }

    /// Forwards every chunk `d` late, in both directions, keeping the order. Replaces a
    /// black hole (the connections that lost bytes stay open until [`heal`](Self::heal)
    /// or [`reset`](Self::reset); hanging new connections are connected).
    pub fn delay(&self, d: Duration) {
        self.set_mode(Mode::Delay(d));
    }

    /// Stalls one direction: from now on bytes from the clients to the servers are held
    /// back — neither delivered nor discarded — while bytes from the servers to the
    /// clients keep flowing at once. Nothing is closed and no FIN or RST reaches either
    /// side. To a ZooKeeper client this looks like a path that lost its way out: its
    /// requests and pings go unanswered, yet the server's watch events, and replies to
    /// requests sent before the stall, still arrive. The server hears nothing, so it
    /// expires the session after its timeout.
    ///
    /// The proxy holds at most one chunk per connection; what a client keeps sending
    /// waits in the kernel's socket buffers, and once those are full (far more than
    /// pings and small requests need) the client's writes block, as on a real stalled
    /// path. A client's EOF is held back too. New connections are connected upstream,
    /// but their first bytes (a ZooKeeper handshake) are held as well.
    ///
    /// [`heal`](Self::heal) ends the stall and delivers everything held back, in order:
    /// nothing is lost or corrupted, so the connections stay open.
    /// [`blackhole`](Self::blackhole) instead discards what was held;
    /// [`delay`](Self::delay) delivers it late.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zkguard::testing::{FaultProxy, TestCluster};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = TestCluster::start(1)?;
    /// let proxy = FaultProxy::for_cluster(&cluster)?;
    /// let client = zkguard::Client::connect(&proxy.connect_string())?;
    /// let (_, watch) = client.exists_w("/config")?;
    /// proxy.stall_client_to_server();
    /// // A write through another client still triggers the watch...
    /// let other = zkguard::Client::connect(&cluster.connect_string())?;
    /// other.create("/config", b"", zkguard::CreateMode::Persistent)?;
    /// assert!(watch.recv_timeout(Duration::from_secs(10)).is_ok());
    /// // ...while this client's own requests go unanswered.
    /// assert!(client.with_timeout(Duration::from_millis(500)).exists("/").is_err());
    /// proxy.heal();
    /// # Ok(())
    /// # }
    /// ```
    pub fn stall_client_to_server(&self) {
        self.set_mode(Mode::StallUpstream);
    }

    /// Stalls the other direction: bytes from the servers to the clients are held back
    /// (delivered in order on [`heal`](Self::heal)) while bytes from the clients reach the
    /// servers at once. To a ZooKeeper client this is a path that lost its way back: its
    /// pings and requests reach the server, which keeps the session alive and applies the
    /// requests, but no reply or event comes back. The client must count its session lost
    /// although the server still has it: the case where a request about the old session's
    /// nodes must never go out on the client's next session.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use zkguard::testing::{FaultProxy, TestCluster};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = TestCluster::start(1)?;
    /// let proxy = FaultProxy::for_cluster(&cluster)?;
    /// let client = zkguard::Client::connect(&proxy.connect_string())?;
    /// proxy.stall_server_to_client();
    /// // Sent and applied on the server, but the reply never comes back.
    /// let r = client
    ///     .with_timeout(std::time::Duration::from_millis(500))
    ///     .create("/made-in-the-dark", b"", zkguard::CreateMode::Persistent);
    /// assert!(r.is_err());
    /// proxy.heal();
    /// # Ok(())
    /// # }
    /// ```
    pub fn stall_server_to_client(&self) {
        self.set_mode(Mode::StallDownstream);
    }

    /// Makes connections flap: every connection is forwarded normally until the server
    /// has sent its first bytes back (for ZooKeeper, the handshake reply that
    /// establishes or renews the session), then those bytes are delivered to the client
    /// and both sockets are closed at once (a FIN to each side). A client therefore sees
    /// each connection attempt succeed and fail right away, and keeps reconnecting:
    /// count the attempts with [`accepted`](Self::accepted) and the closes with
    /// [`flapped`](Self::flapped).
    ///
    /// Only connections whose first reply arrives in this mode flap; a connection that
    /// got its first reply before stays as it is. Call [`reset`](Self::reset) after this
    /// to send the current clients into the flapping. [`heal`](Self::heal) returns to
    /// plain forwarding. The "first bytes" are what one read returns; ZooKeeper writes
    /// its handshake reply in one piece, and on loopback it arrives in one piece.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use zkguard::testing::{FaultProxy, TestCluster};
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::start(1)?;
    /// let proxy = FaultProxy::for_cluster(&cluster)?;
    /// // Connect the client under test to `proxy.connect_string()`, then:
    /// proxy.flap();
    /// proxy.reset(); // the client reconnects, and is cut off after every handshake
    /// let before = proxy.accepted();
    /// // ... later: how many times did it try?
    /// let attempts = proxy.accepted() - before;
    /// # let _ = attempts;
    /// proxy.heal();
    /// # Ok(())
    /// # }
    /// ```
    pub fn flap(&self) {
        self.set_mode(Mode::Flap);
    }

    /// Number of connections accepted so far on all listeners, in every mode (including
    /// ones that hung in a black hole, flapped, or could not reach their server). It only
    /// grows: a test can count a client's connection attempts with it.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Number of connections closed by [`flap`](Self::flap) mode so far.
    pub fn flapped(&self) -> u64 {
        self.shared.flapped.load(Ordering::SeqCst)
    }

    /// For connections accepted on listener `listener` from now on: treat the first bytes
    /// from the client as a ZooKeeper election connection's first message (protocol
    /// version, server id, election address) and replace the address in it by
    /// `advertise` before passing it on. Anything else is passed on unchanged.
    ///
    /// A ZooKeeper server that receives an election connection from a peer with a lower
    /// id closes it and connects back to the address in that message. [`TestCluster`]'s
    /// isolatable ensembles point that address at the proxy that leads back to the
    /// peer, so the connection back goes through a proxy as well.
    pub(crate) fn rewrite_election_hello(&self, listener: usize, advertise: SocketAddr) {
        self.shared
            .hello_rewrites
            .lock()
            .insert(listener, advertise.to_string());
    }

    /// Back to plain forwarding. Connections that lost bytes in a black hole are closed
    /// (their streams are corrupt); connections that hung in the black hole are now
    /// connected upstream, and whatever their clients sent meanwhile is delivered.
    /// Bytes already delayed are still delivered at their due time; bytes held back by
    /// [`stall_client_to_server`](Self::stall_client_to_server) are delivered now.
    pub fn heal(&self) {
        self.set_mode(Mode::Normal);
        let conns: Vec<Arc<Conn>> = self.shared.conns.lock().values().cloned().collect();
        let mut closed = 0;
        for conn in conns.iter().filter(|c| c.lost.load(Ordering::SeqCst)) {
            conn.close();
            closed += 1;
        }
        if closed > 0 {
            self.shared.notify();
        }
        log::info!(
            "zkguard FaultProxy {}: healed, closed {closed} connection(s) that lost bytes",
            self.connect_string()
        );
    }

    /// Number of open proxied connections (including ones hanging in a black hole).
    pub fn connections(&self) -> usize {
        self.shared
            .conns
            .lock()
            .values()
            .filter(|c| !c.is_closed())
            .count()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        {
            let conns = self.shared.conns.lock();
            for conn in conns.values() {
                conn.close();
            }
        }
        self.shared.notify();
        // Wake every acceptor blocked in accept().
        for addr in &self.addrs {
            let _ = TcpStream::connect_timeout(addr, Duration::from_millis(200));
        }
        for handle in self.acceptors.lock().drain(..) {
            let _ = handle.join();
        }
        loop {
            let handles: Vec<JoinHandle<()>> = self.shared.threads.lock().drain(..).collect();
            if handles.is_empty() {
                break;
            }
            for handle in handles {
                let _ = handle.join();
            }
        }
    }
}

fn accept_loop(shared: Arc<Shared>, listener: TcpListener, upstream: SocketAddr, index: usize) {
    for incoming in listener.incoming() {
        if shared.is_shutdown() {
            return;
        }
        match incoming {
            Ok(client) => {
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                handle_accepted(&shared, client, upstream, index);
            }
            Err(e) => {
                log::warn!("zkguard FaultProxy: accept failed (upstream {upstream}): {e}");
                // E.g. out of file descriptors: do not spin.
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn handle_accepted(shared: &Arc<Shared>, client: TcpStream, upstream: SocketAddr, index: usize) {
    let _ = client.set_nodelay(true);
    let handle = match client.try_clone() {
        Ok(h) => h,
        Err(e) => {
            log::warn!("zkguard FaultProxy: cannot clone an accepted socket: {e}");
            return;
        }
    };
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let conn = Arc::new(Conn {
        client: handle,
        upstream: Mutex::new(None),
        lost: AtomicBool::new(false),
        closed: AtomicBool::new(false),
    });
    {
        let mut conns = shared.conns.lock();
        if shared.is_shutdown() {
            return;
        }
        conns.insert(id, Arc::clone(&conn));
    }
    let shared2 = Arc::clone(shared);
    let conn2 = Arc::clone(&conn);
    let spawned = thread::Builder::new()
        .name(format!("zkguard-proxy-conn-{id}"))
        .spawn(move || {
            run_conn(&shared2, &conn2, client, upstream, index);
            conn2.close();
            shared2.conns.lock().remove(&id);
        });
    match spawned {
        Ok(h) => {
            let mut threads = shared.threads.lock();
            threads.retain(|t| !t.is_finished());
            threads.push(h);
        }
        Err(e) => {
            log::warn!("zkguard FaultProxy: cannot spawn a connection thread: {e}");
            conn.close();
            shared.conns.lock().remove(&id);
        }
    }
}

fn run_conn(
    shared: &Shared,
    conn: &Conn,
    client: TcpStream,
    upstream_addr: SocketAddr,
    index: usize,
) {
    // A connection accepted inside a black hole hangs until the partition ends.
    {
        let mut mode = shared.mode.lock();
        while *mode == Mode::Blackhole && !conn.is_closed() && !shared.is_shutdown() {
            shared.changed.wait(&mut mode);
        }
    }
    if conn.is_closed() || shared.is_shutdown() {
        return;
    }
    let upstream = match TcpStream::connect_timeout(&upstream_addr, UPSTREAM_CONNECT_TIMEOUT) {
        Ok(u) => u,
        Err(e) => {
            log::info!("zkguard FaultProxy: cannot connect to {upstream_addr}: {e}; closing the client connection");
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    match upstream.try_clone() {
        Ok(handle) => *conn.upstream.lock() = Some(handle),
        Err(e) => {
            log::warn!("zkguard FaultProxy: cannot clone an upstream socket: {e}");
            return;
        }
    }
    // `close` may have run before the upstream was registered.
    if conn.is_closed() || shared.is_shutdown() {
        return;
    }
    let rewrite = shared.hello_rewrites.lock().get(&index).cloned();
    if let Some(advertise) = rewrite {
        if let Err(e) = forward_election_hello(shared, conn, &client, &upstream, &advertise) {
            log::info!(
                "zkguard FaultProxy: election connection to {upstream_addr}: {e}; closing it"
            );
            return;
        }
    }
    thread::scope(|scope| {
        let back = thread::Builder::new()
            .name("zkguard-proxy-pump".to_string())
            .spawn_scoped(scope, || pump(shared, conn, Dir::Down, &upstream, &client));
        match back {
            Ok(_) => pump(shared, conn, Dir::Up, &client, &upstream),
            Err(e) => log::warn!("zkguard FaultProxy: cannot spawn a pump thread: {e}"),
        }
        // The scope joins the other pump; the caller then closes both sockets.
    });
}

enum Action {
    Discard,
    Now,
    At(Instant),
}

/// Reads the first message of a ZooKeeper election connection from `client`, puts
/// `advertise` in place of the address it carries, and writes it to `upstream` (unless a
/// black hole swallows it). A message of another shape is passed on unchanged.
fn forward_election_hello(
    shared: &Shared,
    conn: &Conn,
    mut client: &TcpStream,
    mut upstream: &TcpStream,
    advertise: &str,
) -> io::Result<()> {
    let named = |what: &str, e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("reading the first message ({what}) failed: {e}"),
        )
    };
    client.set_read_timeout(Some(HELLO_TIMEOUT))?;
    let mut version = [0u8; 8];
    client
        .read_exact(&mut version)
        .map_err(|e| named("protocol version", e))?;
    let mut out = version.to_vec();
    let v = i64::from_be_bytes(version);
    if v == ELECTION_PROTOCOL_V1 || v == ELECTION_PROTOCOL_V2 {
        let mut sid_len = [0u8; 12];
        client
            .read_exact(&mut sid_len)
            .map_err(|e| named("server id", e))?;
        let len = i32::from_be_bytes([sid_len[8], sid_len[9], sid_len[10], sid_len[11]]);
        out.extend_from_slice(&sid_len[..8]);
        match usize::try_from(len) {
            Ok(n) if (1..=ELECTION_HELLO_MAX_ADDR).contains(&n) => {
                let mut addr = vec![0u8; n];
                client
                    .read_exact(&mut addr)
                    .map_err(|e| named("address", e))?;
                let new = advertise.as_bytes();
                // `advertise` is a socket address: far below ZooKeeper's 2048-byte limit.
                out.extend_from_slice(&(new.len() as i32).to_be_bytes());
                out.extend_from_slice(new);
            }
            // Not a valid message: pass it on and let the server refuse it.
            _ => out.extend_from_slice(&sid_len[8..]),
        }
    }
    client.set_read_timeout(None)?;
    if shared.mode_for_chunk(conn, Dir::Up) == Mode::Blackhole {
        return Ok(());
    }
    upstream
        .write_all(&out)
        .map_err(|e| io::Error::new(e.kind(), format!("forwarding the first message: {e}")))
}

/// Forwards `src` to `dst` (direction `dir`) until EOF, an error, or a close; obeys the
/// mode per chunk.
fn pump(shared: &Shared, conn: &Conn, dir: Dir, mut src: &TcpStream, mut dst: &TcpStream) {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; BUF_SIZE];
    let mut read_timeout: Option<Duration> = None;
    let mut first_chunk = true;
    loop {
        if conn.is_closed() || shared.is_shutdown() {
            return;
        }
        if !queue.is_empty() {
            if shared.mode_for_chunk(conn, dir) == Mode::Blackhole {
                queue.clear();
            }
            let now = Instant::now();
            while queue.front().is_some_and(|(due, _)| *due <= now) {
                if let Some((_, bytes)) = queue.pop_front() {
                    if dst.write_all(&bytes).is_err() {
                        conn.close();
                        return;
                    }
                }
            }
        }
        // Block until data arrives, or until the next delayed chunk is due.
        let want = queue.front().map(|(due, _)| {
            due.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        });
        if want != read_timeout {
            if src.set_read_timeout(want).is_err() {
                conn.close();
                return;
            }
            read_timeout = want;
        }
        match src.read(&mut buf) {
            Ok(0) => {
                finish_at_eof(shared, conn, dir, queue, dst);
                return;
            }
            Ok(n) => {
                let mode = shared.mode_for_chunk(conn, dir);
                let flap = dir == Dir::Down && first_chunk && mode == Mode::Flap;
                first_chunk = false;
                if flap && queue.is_empty() {
                    let _ = dst.write_all(&buf[..n]);
                    conn.close();
                    shared.flapped.fetch_add(1, Ordering::SeqCst);
                    log::info!(
                        "zkguard FaultProxy: flap: closed a connection after the server's \
                         first {n} bytes"
                    );
                    return;
                }
                let action = match mode {
                    Mode::Blackhole => Action::Discard,
                    Mode::Normal | Mode::Flap => Action::Now,
                    Mode::Delay(d) => Action::At(Instant::now() + d),
                    // Down: the stall does not apply. Up: only when the connection or
                    // the proxy closed while the chunk was held.
                    Mode::StallUpstream if dir == Dir::Down => Action::Now,
                    Mode::StallUpstream => Action::Discard,
                    Mode::StallDownstream if dir == Dir::Up => Action::Now,
                    Mode::StallDownstream => Action::Discard,
                };
                match action {
                    Action::Discard => {}
                    Action::Now if queue.is_empty() => {
                        if dst.write_all(&buf[..n]).is_err() {
                            conn.close();
                            return;
                        }
                    }
                    // Behind bytes still delayed: keep the order.
                    Action::Now => queue.push_back((Instant::now(), buf[..n].to_vec())),
                    Action::At(due) => queue.push_back((due, buf[..n].to_vec())),
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => {
                // In a black hole the peer must not learn about the error either.
                if shared.mode_for_chunk(conn, dir) != Mode::Blackhole {
                    conn.close();
                }
                return;
            }
        }
    }
}

/// The source sent EOF: deliver what is still delayed, then pass the EOF on (a
/// half-close), unless a black hole swallows it.
fn finish_at_eof(
    shared: &Shared,
    conn: &Conn,
    dir: Dir,
    mut queue: VecDeque<(Instant, Vec<u8>)>,
    mut dst: &TcpStream,
) {
    while let Some((due, bytes)) = queue.pop_front() {
        loop {
            if conn.is_closed() || shared.is_shutdown() {
                return;
            }
            let now = Instant::now();
            if due <= now {
                break;
            }
            thread::sleep((due - now).min(DRAIN_STEP));
        }
        if shared.mode_for_chunk(conn, dir) == Mode::Blackhole {
            return;
        }
        if dst.write_all(&bytes).is_err() {
            conn.close();
            return;
        }
    }
    if shared.mode_for_chunk(conn, dir) == Mode::Blackhole || conn.is_closed() {
        return;
    }
    let _ = dst.shutdown(Shutdown::Write);
}
