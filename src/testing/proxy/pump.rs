//! The proxy's inside: its shared state, the accept loop, and the pumps that forward each
//! connection's bytes in the current mode.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle, ScopedJoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};

use super::frames::Frames;

/// How long the proxy waits for an upstream server to accept a connection.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a pump's writer waiting to deliver delayed bytes looks for a close.
const DRAIN_STEP: Duration = Duration::from_millis(20);
/// How long before a delayed chunk is due its writer stops sleeping and spins (yielding).
const LATE_SPIN: Duration = Duration::from_micros(200);
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
pub(super) enum Mode {
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
pub(super) struct Conn {
    client: TcpStream,
    upstream: Mutex<Option<TcpStream>>,
    /// Bytes (or an EOF) were swallowed by a black hole: the streams are no longer intact.
    pub(super) lost: AtomicBool,
    closed: AtomicBool,
}

impl Conn {
    /// Shuts both sockets down in both directions; the pumps see EOF or an error and end.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(up) = self.upstream.lock().as_ref() {
            let _ = up.shutdown(Shutdown::Both);
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

pub(super) struct Shared {
    pub(super) mode: Mutex<Mode>,
    /// Signalled (with `mode` locked) when the mode changes, a connection is closed, or
    /// the proxy shuts down; connections hanging in a black hole wait on it.
    pub(super) changed: Condvar,
    pub(super) shutdown: AtomicBool,
    pub(super) conns: Mutex<HashMap<u64, Arc<Conn>>>,
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(super) next_id: AtomicU64,
    /// Connections accepted so far, on every listener.
    pub(super) accepted: AtomicU64,
    /// Connections closed by [`FaultProxy::flap`](super::FaultProxy::flap) so far.
    pub(super) flapped: AtomicU64,
    /// A cut after the next notification is armed
    /// ([`FaultProxy::cut_after_next_notification`](super::FaultProxy::cut_after_next_notification)).
    pub(super) cut_armed: AtomicBool,
    /// Connections closed by that cut so far.
    pub(super) notification_cuts: AtomicU64,
    /// Listener index -> the address to put into the first message of every ZooKeeper
    /// election connection accepted there (see `rewrite_election_hello`).
    pub(super) hello_rewrites: Mutex<HashMap<usize, String>>,
}

impl Shared {
    /// A proxy's state before its first connection: plain forwarding.
    pub(super) fn new() -> Shared {
        Shared {
            mode: Mutex::new(Mode::Normal),
            changed: Condvar::new(),
            shutdown: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            flapped: AtomicU64::new(0),
            cut_armed: AtomicBool::new(false),
            notification_cuts: AtomicU64::new(0),
            hello_rewrites: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Takes an armed cut (once).
    fn take_cut(&self) -> bool {
        self.cut_armed
            .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    pub(super) fn notify(&self) {
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

pub(super) fn accept_loop(
    shared: Arc<Shared>,
    listener: TcpListener,
    upstream: SocketAddr,
    index: usize,
) {
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

/// A delayed chunk on its way to the writer: when it is due, and its bytes.
type Late = (Instant, Vec<u8>);

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
///
/// The pump's thread reads and stamps each chunk as it arrives. A delayed chunk, and any
/// chunk behind one still delayed (the order is kept), goes to a writer of its own
/// (`deliver_late`, started at the first delayed chunk) that sleeps until the chunk is
/// due and writes it: the delay is measured from the chunk's arrival, with the
/// precision of `thread::sleep` (about a tenth of a millisecond on Linux), not of a
/// socket timeout, which the kernel rounds up to its tick.
fn pump(shared: &Shared, conn: &Conn, dir: Dir, mut src: &TcpStream, mut dst: &TcpStream) {
    let mut buf = vec![0u8; BUF_SIZE];
    let mut first_chunk = true;
    // Server-to-client frames, for a cut after a notification.
    let mut frames = Frames::default();
    // Chunks handed to the writer and not yet written or dropped by it.
    let pending = &AtomicUsize::new(0);
    thread::scope(|scope| {
        let mut late: Option<(Sender<Late>, ScopedJoinHandle<'_, ()>)> = None;
        let at_eof = loop {
            if conn.is_closed() || shared.is_shutdown() {
                break false;
            }
            let n = match src.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(_) => {
                    // In a black hole the peer must not learn about the error either.
                    if shared.mode_for_chunk(conn, dir) != Mode::Blackhole {
                        conn.close();
                    }
                    break false;
                }
            };
            let arrived = Instant::now();
            let mode = shared.mode_for_chunk(conn, dir);
            let behind = pending.load(Ordering::SeqCst) > 0;
            // A cut armed: the chunk ends with the first notification that ends in it, and
            // the connection is closed once that is delivered.
            let (n, cut) = match frames_end(&mut frames, dir, &buf[..n]) {
                Some(end) if mode == Mode::Normal && !behind && shared.take_cut() => (end, true),
                _ => (n, false),
            };
            let flap = dir == Dir::Down && first_chunk && mode == Mode::Flap;
            first_chunk = false;
            if flap && !behind {
                let _ = dst.write_all(&buf[..n]);
                conn.close();
                shared.flapped.fetch_add(1, Ordering::SeqCst);
                log::info!(
                    "zkguard FaultProxy: flap: closed a connection after the server's \
                     first {n} bytes"
                );
                break false;
            }
            let action = match mode {
                Mode::Blackhole => Action::Discard,
                Mode::Normal | Mode::Flap => Action::Now,
                Mode::Delay(d) => Action::At(arrived + d),
                // Down: the stall does not apply. Up: only when the connection or
                // the proxy closed while the chunk was held.
                Mode::StallUpstream if dir == Dir::Down => Action::Now,
                Mode::StallUpstream => Action::Discard,
                Mode::StallDownstream if dir == Dir::Up => Action::Now,
                Mode::StallDownstream => Action::Discard,
            };
            let due = match action {
                Action::Discard => continue,
                Action::Now if !behind => {
                    if dst.write_all(&buf[..n]).is_err() {
                        conn.close();
                        break false;
                    }
                    if cut {
                        conn.close();
                        shared.notification_cuts.fetch_add(1, Ordering::SeqCst);
                        log::info!(
                            "zkguard FaultProxy: closed a connection right after a \
                             notification (and dropped what followed it)"
                        );
                        break false;
                    }
                    continue;
                }
                // Behind bytes still delayed: keep the order.
                Action::Now => arrived,
                Action::At(due) => due,
            };
            if late.is_none() {
                let (tx, rx) = crossbeam_channel::unbounded();
                let spawned = thread::Builder::new()
                    .name("zkguard-proxy-late".to_string())
                    .spawn_scoped(scope, move || {
                        deliver_late(shared, conn, dir, &rx, dst, pending);
                    });
                match spawned {
                    Ok(handle) => late = Some((tx, handle)),
                    Err(e) => {
                        log::warn!("zkguard FaultProxy: cannot spawn a delay thread: {e}");
                        conn.close();
                        break false;
                    }
                }
            }
            pending.fetch_add(1, Ordering::SeqCst);
            let sent = late
                .as_ref()
                .is_some_and(|(tx, _)| tx.send((due, buf[..n].to_vec())).is_ok());
            if !sent {
                // The writer ended: the connection is closed.
                break false;
            }
        };
        // The writer delivers what is still delayed, then ends; the EOF goes after it.
        if let Some((tx, handle)) = late {
            drop(tx);
            let _ = handle.join();
        }
        if at_eof && !conn.is_closed() && shared.mode_for_chunk(conn, dir) != Mode::Blackhole {
            // Pass the EOF on: a half-close.
            let _ = dst.shutdown(Shutdown::Write);
        }
    });
}

/// Where the first notification ending in `chunk` ends, for bytes going down (the frames
/// followed either way).
fn frames_end(frames: &mut Frames, dir: Dir, chunk: &[u8]) -> Option<usize> {
    (dir == Dir::Down).then(|| frames.feed(chunk)).flatten()
}

/// A pump's writer of delayed chunks: writes each when it is due, in order, until the
/// reader drops its sender (and every chunk is written) or the connection closes. A black
/// hole drops what is due and what is queued behind it.
fn deliver_late(
    shared: &Shared,
    conn: &Conn,
    dir: Dir,
    chunks: &Receiver<Late>,
    mut dst: &TcpStream,
    pending: &AtomicUsize,
) {
    for (due, bytes) in chunks.iter() {
        loop {
            if conn.is_closed() || shared.is_shutdown() {
                return;
            }
            let now = Instant::now();
            if due <= now {
                break;
            }
            let left = due - now;
            if left > LATE_SPIN {
                // In steps, so that a close is seen while a long delay runs; woken a little
                // early, as a sleep oversleeps by the timer's slack and the wake-up.
                thread::sleep((left - LATE_SPIN).min(DRAIN_STEP));
            } else {
                thread::yield_now();
            }
        }
        if shared.mode_for_chunk(conn, dir) == Mode::Blackhole {
            let dropped = 1 + chunks.try_iter().count();
            pending.fetch_sub(dropped, Ordering::SeqCst);
            continue;
        }
        if dst.write_all(&bytes).is_err() {
            conn.close();
            return;
        }
        pending.fetch_sub(1, Ordering::SeqCst);
    }
}
