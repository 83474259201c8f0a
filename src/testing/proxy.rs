//! A TCP proxy that can delay, black-hole or reset the traffic it forwards: [`FaultProxy`].

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Normal,
    Blackhole,
    Delay(Duration),
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
}

impl Shared {
    fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    fn notify(&self) {
        let _guard = self.mode.lock();
        self.changed.notify_all();
    }

    /// The current mode; in a black hole, also marks `conn` as having lost bytes (under the
    /// mode lock, so `heal` cannot miss it).
    fn mode_for_chunk(&self, conn: &Conn) -> Mode {
        let mode = self.mode.lock();
        if *mode == Mode::Blackhole {
            conn.lost.store(true, Ordering::SeqCst);
        }
        *mode
    }
}

/// A loopback TCP proxy in front of one or more servers that injects network faults on
/// command: delays, black holes (a partition that neither side can see) and resets.
///
/// [`start`](Self::start) opens one listener on `127.0.0.1` per upstream address; every
/// connection accepted on a listener is forwarded to that listener's upstream. Hand
/// [`connect_string`](Self::connect_string) to the client under test instead of the
/// servers' own addresses. The faults apply to every connection of the proxy; use one
/// proxy per client to break one client's traffic only.
///
/// The proxy runs two threads per connection and one per listener, all blocked in the
/// kernel while idle. All methods take `&self`; it is `Send + Sync`. Dropping it closes
/// every socket and joins every thread.
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
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy with one loopback listener (`127.0.0.1`, a free port) per upstream
    /// address, in the same order.
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
        for (listener, upstream) in listeners {
            let shared = Arc::clone(&proxy.shared);
            let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
            let handle = thread::Builder::new()
                .name(format!("zkguard-proxy-accept-{port}"))
                .spawn(move || accept_loop(shared, listener, upstream))
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
    pub fn for_cluster(cluster: &TestCluster) -> io::Result<FaultProxy> {
        let upstreams: Vec<SocketAddr> =
            (0..cluster.len()).map(|i| cluster.client_addr(i)).collect();
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

    /// Back to plain forwarding. Connections that lost bytes in a black hole are closed
    /// (their streams are corrupt); connections that hung in the black hole are now
    /// connected upstream, and whatever their clients sent meanwhile is delivered.
    /// Bytes already delayed are still delivered at their due time.
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

fn accept_loop(shared: Arc<Shared>, listener: TcpListener, upstream: SocketAddr) {
    for incoming in listener.incoming() {
        if shared.is_shutdown() {
            return;
        }
        match incoming {
            Ok(client) => handle_accepted(&shared, client, upstream),
            Err(e) => {
                log::warn!("zkguard FaultProxy: accept failed (upstream {upstream}): {e}");
                // E.g. out of file descriptors: do not spin.
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn handle_accepted(shared: &Arc<Shared>, client: TcpStream, upstream: SocketAddr) {
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
            run_conn(&shared2, &conn2, client, upstream);
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

fn run_conn(shared: &Shared, conn: &Conn, client: TcpStream, upstream_addr: SocketAddr) {
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
    thread::scope(|scope| {
        let back = thread::Builder::new()
            .name("zkguard-proxy-pump".to_string())
            .spawn_scoped(scope, || pump(shared, conn, &upstream, &client));
        match back {
            Ok(_) => pump(shared, conn, &client, &upstream),
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

/// Forwards `src` to `dst` until EOF, an error, or a close; obeys the mode per chunk.
fn pump(shared: &Shared, conn: &Conn, mut src: &TcpStream, mut dst: &TcpStream) {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; BUF_SIZE];
    let mut read_timeout: Option<Duration> = None;
    loop {
        if conn.is_closed() || shared.is_shutdown() {
            return;
        }
        if !queue.is_empty() {
            if shared.mode_for_chunk(conn) == Mode::Blackhole {
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
                finish_at_eof(shared, conn, queue, dst);
                return;
            }
            Ok(n) => {
                let action = match shared.mode_for_chunk(conn) {
                    Mode::Blackhole => Action::Discard,
                    Mode::Normal => Action::Now,
                    Mode::Delay(d) => Action::At(Instant::now() + d),
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
                if shared.mode_for_chunk(conn) != Mode::Blackhole {
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
        if shared.mode_for_chunk(conn) == Mode::Blackhole {
            return;
        }
        if dst.write_all(&bytes).is_err() {
            conn.close();
            return;
        }
    }
    if shared.mode_for_chunk(conn) == Mode::Blackhole {
        return;
    }
    let _ = dst.shutdown(Shutdown::Write);
}
