//! A TCP proxy that can delay, black-hole, stall, flap or reset the traffic it forwards,
//! or cut a connection right after a notification: [`FaultProxy`], its public face here;
//! its state, accept loop and pumps in `pump.rs`; ZooKeeper's framing in `frames.rs`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::Mutex;

use super::cluster::TestCluster;

mod frames;
mod pump;
use pump::{accept_loop, Conn, Mode, Shared};

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
        let shared = Arc::new(Shared::new());
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
    #[cfg(feature = "tls")]
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

    /// Forwards every chunk `d` late, in both directions, keeping the order: a round trip
    /// through the proxy takes `2 d` more. The delay is counted from the chunk's arrival
    /// at the proxy and kept to about a tenth of a millisecond on an idle Linux machine
    /// (a thread per direction sleeps until the chunk is due), from microseconds to
    /// seconds, so `delay(Duration::from_millis(1))` emulates a 1 ms network. Never less
    /// than `d`; a loaded machine may add its scheduling latency. Replaces a
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

    /// Arms a one-shot cut: the next notification (a watch event) that a server sends
    /// through the proxy, on any of its connections, is delivered whole, and then that
    /// connection is closed at once, in both directions; whatever the server sent behind
    /// the notification (in the same write or later) is dropped. The proxy reads
    /// ZooKeeper's framing to find where the notification ends, so this is for plaintext
    /// client connections (not TLS), and it takes effect in plain forwarding (not while
    /// delayed, stalled or in a black hole: it waits for plain forwarding). It fires once;
    /// arm it again for another cut. [`heal`](Self::heal) disarms it.
    ///
    /// This is the worst moment for a client's watch bookkeeping: one transaction that
    /// fires two of a session's watches (a `multi` writing two watched nodes, a delete
    /// firing a node's data watch and its parent's child watch) has its first notification
    /// delivered and the second lost with the connection. The client must still hear the
    /// second after it reconnects (ZooKeeper re-fires a watch for a change after the zxid
    /// the client says it saw). [`notification_cuts`](Self::notification_cuts) counts the
    /// cuts made.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkguard::testing::{FaultProxy, TestCluster};
    /// use zkguard::{Client, CreateMode, Op};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = TestCluster::start(1)?;
    /// let proxy = FaultProxy::for_cluster(&cluster)?;
    /// let client = Client::connect(&proxy.connect_string())?;
    /// let other = Client::connect(&cluster.connect_string())?;
    /// other.create("/cut-a", b"", CreateMode::Persistent)?;
    /// other.create("/cut-b", b"", CreateMode::Persistent)?;
    /// let (_, _, a) = client.get_data_w("/cut-a")?;
    /// let (_, _, b) = client.get_data_w("/cut-b")?;
    /// proxy.cut_after_next_notification();
    /// // One transaction fires both watches; the connection is cut between the two.
    /// other.multi(&[
    ///     Op::SetData { path: "/cut-a".into(), data: b"1".to_vec(), version: None },
    ///     Op::SetData { path: "/cut-b".into(), data: b"1".to_vec(), version: None },
    /// ])?;
    /// // Both are heard: the second after the client's reconnect.
    /// assert!(a.recv_timeout(Duration::from_secs(30)).is_ok());
    /// assert!(b.recv_timeout(Duration::from_secs(30)).is_ok());
    /// assert_eq!(proxy.notification_cuts(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cut_after_next_notification(&self) {
        self.shared.cut_armed.store(true, Ordering::SeqCst);
        log::info!(
            "zkguard FaultProxy {}: a cut after the next notification armed",
            self.connect_string()
        );
    }

    /// Number of connections closed so far by
    /// [`cut_after_next_notification`](Self::cut_after_next_notification).
    pub fn notification_cuts(&self) -> u64 {
        self.shared.notification_cuts.load(Ordering::SeqCst)
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
        self.shared.cut_armed.store(false, Ordering::SeqCst);
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
