//! Real ZooKeeper servers on loopback: [`TestCluster`] and [`TestClusterBuilder`].

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::discover::{self, Distribution};
use super::proxy::FaultProxy;

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// How long [`TestCluster::start`] waits for every server to serve.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// How long [`TestCluster::stop`] waits after SIGTERM before it sends SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Default timeout of [`TestCluster::four_letter`].
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);
/// Per-attempt timeout of the polls inside the waits (a ZooKeeper 3.8.0 bug can leave a
/// connection accepted during startup open and silent forever).
const POLL_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Lines of a server log quoted in error messages.
const LOG_TAIL_LINES: usize = 20;
/// Starting a cluster is retried with fresh ports this many times when a port was taken.
const START_ATTEMPTS: usize = 3;

fn other(msg: String) -> io::Error {
    io::Error::other(msg)
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

// ---------------------------------------------------------------------------------------
// Free ports
// ---------------------------------------------------------------------------------------

/// Ports handed out by this process, never handed out twice.
static HANDED_OUT: Mutex<BTreeSet<u16>> = parking_lot::const_mutex(BTreeSet::new());

/// The first port of the kernel's ephemeral range (source ports of outgoing connections).
fn ephemeral_low() -> u16 {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32768)
}

/// A loopback port that is free now and was never handed out before in this process.
///
/// Ports come from below the kernel's ephemeral range, so a server that is stopped for a
/// while cannot find its port taken by the source port of some client connection when
/// it is restarted. Falls back to asking the kernel (`127.0.0.1:0`) when that range is
/// too small.
pub(crate) fn free_port() -> io::Result<u16> {
    const LOW: u16 = 10_000;
    let high = ephemeral_low();
    let mut handed = HANDED_OUT.lock();
    if high > LOW + 1000 {
        let span = u128::from(high - LOW);
        for _ in 0..200 {
            let port = LOW + (uuid::Uuid::new_v4().as_u128() % span) as u16;
            if handed.contains(&port) {
                continue;
            }
            if TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok() {
                handed.insert(port);
                return Ok(port);
            }
        }
    }
    for _ in 0..200 {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        if handed.insert(port) {
            return Ok(port);
        }
    }
    Err(other(
        "could not find a free loopback TCP port that was not handed out before".to_string(),
    ))
}

// ---------------------------------------------------------------------------------------
// Four-letter words
// ---------------------------------------------------------------------------------------

/// Sends a four-letter command and reads the reply to EOF, all within `timeout`.
pub(crate) fn four_letter_at(addr: SocketAddr, cmd: &str, timeout: Duration) -> io::Result<String> {
    let deadline = Instant::now() + timeout;
    let timed_out = |stage: &str| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "four-letter command `{cmd}` to {addr} timed out after {} ms ({stage})",
                ms(timeout)
            ),
        )
    };
    let remaining = |stage: &str| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| timed_out(stage))
    };
    let mut stream = TcpStream::connect_timeout(&addr, remaining("connecting")?).map_err(|e| {
        if matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        ) {
            timed_out("connecting")
        } else {
            io::Error::new(
                e.kind(),
                format!("four-letter command `{cmd}`: cannot connect to {addr}: {e}"),
            )
        }
    })?;
    stream.set_write_timeout(Some(remaining("writing")?))?;
    stream.write_all(cmd.as_bytes()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("four-letter command `{cmd}` to {addr}: write failed: {e}"),
        )
    })?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        stream.set_read_timeout(Some(remaining("reading the reply")?))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(timed_out("reading the reply"));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("four-letter command `{cmd}` to {addr}: read failed: {e}"),
                ))
            }
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// The `Mode:` of a `srvr` reply (`standalone`, `leader`, `follower`, `observer`).
fn parse_mode(srvr: &str) -> Option<&str> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(str::trim)
}

fn is_serving_mode(mode: &str) -> bool {
    matches!(mode, "standalone" | "leader" | "follower" | "observer")
}

// ---------------------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------------------

/// The last `n` lines of a file (reads at most its last 64 KiB).
fn log_tail(path: &Path, n: usize) -> String {
    let read = || -> io::Result<String> {
        let mut f = File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// Whether every thread of `pid` is stopped (or exiting), from `/proc/<pid>/task/*/stat`;
/// `None` where `/proc` is not available.
fn all_threads_stopped(pid: u32) -> Option<bool> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        let Ok(stat) = fs::read_to_string(task.path().join("stat")) else {
            continue; // the thread has just exited
        };
        // The state follows the command name, which is in parentheses and may hold spaces.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if !matches!(state, Some("T" | "t" | "Z" | "X" | "x")) {
            return Some(false);
        }
    }
    Some(true)
}

fn unix_time() -> String {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => format!("{}.{:03}", d.as_secs(), d.subsec_millis()),
        Err(_) => "?".to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// Settings and builder
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Settings {
    servers: usize,
    tick: Duration,
    min_session: Option<Duration>,
    max_session: Duration,
    force_sync: bool,
    full_jit: bool,
    isolatable: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            servers: 1,
            tick: Duration::from_millis(100),
            min_session: None,
            max_session: Duration::from_secs(60),
            force_sync: false,
            full_jit: false,
            isolatable: false,
        }
    }
}

impl Settings {
    fn min_session(&self) -> Duration {
        self.min_session.unwrap_or(self.tick * 2)
    }

    fn validate(&self) -> io::Result<()> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        if self.servers == 0 {
            return Err(invalid(
                "TestCluster needs at least one server (servers(0) was requested)".into(),
            ));
        }
        if self.isolatable && self.servers < 2 {
            return Err(invalid(
                "isolatable(true) needs an ensemble (servers(2) or more): a standalone server \
                 has no peers to be cut off from"
                    .into(),
            ));
        }
        if self.servers > 255 {
            return Err(invalid(format!(
                "TestCluster supports at most 255 servers ({} were requested)",
                self.servers
            )));
        }
        let tick = ms(self.tick);
        if tick == 0 || tick > i32::MAX as u128 {
            return Err(invalid(format!(
                "tick_time must be between 1 ms and {} ms (got {:?})",
                i32::MAX,
                self.tick
            )));
        }
        let (min, max) = (ms(self.min_session()), ms(self.max_session));
        if max > i32::MAX as u128 {
            return Err(invalid(format!(
                "max_session_timeout must be at most {} ms (got {:?})",
                i32::MAX,
                self.max_session
            )));
        }
        if min > max {
            return Err(invalid(format!(
                "min_session_timeout ({min} ms) is larger than max_session_timeout ({max} ms)"
            )));
        }
        Ok(())
    }
}

/// Configures a [`TestCluster`] before starting it; made by [`TestCluster::builder`].
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct TestClusterBuilder {
    settings: Settings,
}

impl TestClusterBuilder {
    /// Number of servers: 1 (the default) runs a standalone server
    /// (`ZooKeeperServerMain`), 2 or more an ensemble (`QuorumPeerMain`).
    pub fn servers(mut self, n: usize) -> Self {
        self.settings.servers = n;
        self
    }

    /// The servers' `tickTime` (default 100 ms). Session timeouts a server grants are
    /// clamped to its minimum and maximum session timeout.
    pub fn tick_time(mut self, d: Duration) -> Self {
        self.settings.tick = d;
        self
    }

    /// `minSessionTimeout` (default two ticks, ZooKeeper's own default).
    pub fn min_session_timeout(mut self, d: Duration) -> Self {
        self.settings.min_session = Some(d);
        self
    }

    /// `maxSessionTimeout` (default 60 s, so tests may request anything in between).
    pub fn max_session_timeout(mut self, d: Duration) -> Self {
        self.settings.max_session = d;
        self
    }

    /// Whether the servers fsync their transaction log (default `false`: `forceSync=no`,
    /// fast functional tests; benchmarks should say which they used).
    pub fn force_sync(mut self, on: bool) -> Self {
        self.settings.force_sync = on;
        self
    }

    /// Whether the server JVMs use the full JIT (C2). Off by default: with the quick C1
    /// compiler only, servers start faster, which is what tests want; a server serving real
    /// traffic runs C2, so benchmarks turn this on (and say so).
    pub fn full_jit(mut self, on: bool) -> Self {
        self.settings.full_jit = on;
        self
    }

    /// Whether single servers of the ensemble can be cut off from the others with
    /// [`TestCluster::isolate`] (default `false`).
    ///
    /// When on, the servers do not talk to each other directly: every server's config
    /// names each peer's quorum and election ports by the address of a [`FaultProxy`]
    /// that forwards to that peer (one proxy per ordered pair of servers, so each server
    /// gets its own config; its own entry keeps its real ports, which it binds). Costs
    /// two listeners and their threads per ordered pair (12 for three servers), plus two
    /// threads per peer connection. Client ports are not proxied. Needs two servers or
    /// more: starting fails with [`io::ErrorKind::InvalidInput`] otherwise.
    ///
    /// A ZooKeeper server that accepts an election connection from a peer with a lower
    /// id closes it and connects back to the address the peer announced in its first
    /// message; the proxies rewrite that address to the proxy leading back to the peer,
    /// so no election connection bypasses them.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::builder().servers(3).isolatable(true).start()?;
    /// let leader = cluster.leader().expect("a leader");
    /// cluster.isolate(leader)?; // it loses its quorum; the other two elect a new leader
    /// cluster.rejoin(leader)?;
    /// cluster.wait_serving(leader, Duration::from_secs(30))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn isolatable(mut self, on: bool) -> Self {
        self.settings.isolatable = on;
        self
    }

    /// Starts the servers and waits (at most 60 s) until every one of them serves.
    ///
    /// On failure every started process is killed, the temporary directory is kept, and
    /// the error names the failing server's log file and quotes its last lines.
    pub fn start(self) -> io::Result<TestCluster> {
        self.settings.validate()?;
        let dist = discover::discover()?;
        let mut attempt = 1;
        loop {
            match TestCluster::try_start(&self.settings, &dist) {
                Ok(cluster) => return Ok(cluster),
                Err(StartError { error, port_clash }) => {
                    if port_clash && attempt < START_ATTEMPTS {
                        log::warn!(
                            "zkguard TestCluster: a port was taken while starting ({error}); \
                             retrying with fresh ports"
                        );
                        attempt += 1;
                        continue;
                    }
                    return Err(error);
                }
            }
        }
    }
}

struct StartError {
    error: io::Error,
    port_clash: bool,
}

// ---------------------------------------------------------------------------------------
// The cluster
// ---------------------------------------------------------------------------------------

struct Proc {
    child: Option<Child>,
    paused: bool,
    /// Holds the pid of `child` for the watchdog while it is alive.
    pid_file: PathBuf,
}

impl Proc {
    /// Reaps the child if it has exited on its own; true when it is still alive.
    fn alive(&mut self) -> bool {
        match &mut self.child {
            None => false,
            Some(child) => match child.try_wait() {
                Ok(None) => true,
                Ok(Some(_)) | Err(_) => {
                    self.clear();
                    false
                }
            },
        }
    }

    /// Forgets a reaped child.
    fn clear(&mut self) {
        self.child = None;
        self.paused = false;
        let _ = fs::remove_file(&self.pid_file);
    }
}

struct Server {
    index: usize,
    client_port: u16,
    config: PathBuf,
    /// `dataDir` (snapshots, transaction logs, `myid`).
    data: PathBuf,
    log: PathBuf,
    proc: Mutex<Proc>,
}

impl Server {
    fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.client_port))
    }
}

/// One standalone ZooKeeper server or an ensemble of them, on free loopback ports with
/// throwaway data directories, for tests.
///
/// Every server is a real `java` process running Apache ZooKeeper (found by the rules in
/// the [module documentation](crate::testing)). Servers are numbered `0..len()`; a
/// server's ZooKeeper `myid` is its index plus one. Each server writes its output to
/// [`log_path`](Self::log_path).
///
/// Dropping the cluster kills every server process and waits for it, then deletes the
/// temporary directory — unless the thread is panicking (a failing test): then the
/// directory is kept and its path printed to stderr, so the server logs can be read.
/// A watchdog process also kills the servers if the test process dies without
/// unwinding (SIGKILL, abort, Ctrl-C).
///
/// All methods take `&self`; the cluster is `Send + Sync` and can be shared between
/// threads (e.g. in an `Arc`).
///
/// Methods that take a server index panic if it is not below [`len`](Self::len), like
/// slice indexing; all other failures are returned as errors.
pub struct TestCluster {
    dir: PathBuf,
    dist: Distribution,
    settings: Settings,
    servers: Vec<Server>,
    /// With `isolatable(true)`: `peers[i][j]` carries server `i`'s quorum and election
    /// connections to server `j` (listener 0: quorum port, 1: election port); `None` on
    /// the diagonal. Empty otherwise.
    peers: Vec<Vec<Option<FaultProxy>>>,
    /// Which servers [`isolate`](Self::isolate) cut off.
    isolated: Mutex<Vec<bool>>,
    /// Kills the servers when this process dies; its stdin is our end of a pipe.
    watchdog: Mutex<Option<(Child, Option<ChildStdin>)>>,
    keep_dir: AtomicBool,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("dir", &self.dir)
            .field("connect_string", &self.connect_string())
            .finish_non_exhaustive()
    }
}

/// The watchdog: waits for EOF on stdin (our end closes when this process dies, however it
/// dies), then SIGKILLs every server whose pid file still exists and removes the throwaway
/// directory, unless [`TestCluster::keep_logs`] left a `keep` marker in it. (A cluster in a
/// `static` is never dropped; this is what cleans up after it.)
const WATCHDOG_SCRIPT: &str = r#"while read -r _line; do :; done
for f in "$1"/*.pid; do
  [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
done
[ -e "$1/keep" ] || rm -rf "$1"
exit 0"#;

impl TestCluster {
    /// Starts `n` real servers with default settings: 1 is a standalone server, 2 or more
    /// an ensemble. Waits until every server serves. See [`TestClusterBuilder::start`].
    pub fn start(n: usize) -> io::Result<TestCluster> {
        TestCluster::builder().servers(n).start()
    }

    /// A builder for non-default settings.
    pub fn builder() -> TestClusterBuilder {
        TestClusterBuilder::default()
    }

    /// Keeps the throwaway directory (server logs, data) when the cluster goes away, and
    /// returns its path. A cluster dropped while its thread panics keeps it anyway; call
    /// this from a panic hook for a cluster shared through a `static`, which is never
    /// dropped.
    ///
    /// ```no_run
    /// use std::sync::OnceLock;
    /// use zkguard::testing::TestCluster;
    ///
    /// fn shared() -> &'static TestCluster {
    ///     static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    ///     CLUSTER.get_or_init(|| {
    ///         let default_hook = std::panic::take_hook();
    ///         std::panic::set_hook(Box::new(move |info| {
    ///             if let Some(c) = CLUSTER.get() {
    ///                 eprintln!("server logs kept at {}", c.keep_logs().display());
    ///             }
    ///             default_hook(info);
    ///         }));
    ///         TestCluster::start(1).expect("ZooKeeper")
    ///     })
    /// }
    /// ```
    pub fn keep_logs(&self) -> &Path {
        self.keep_dir.store(true, Ordering::SeqCst);
        if let Err(e) = fs::write(self.dir.join("keep"), b"") {
            log::warn!(
                "zkguard TestCluster: cannot mark {} to be kept: {e}",
                self.dir.display()
            );
        }
        &self.dir
    }

    fn try_start(settings: &Settings, dist: &Distribution) -> Result<TestCluster, StartError> {
        let plain = |error: io::Error| StartError {
            error,
            port_clash: false,
        };
        let cluster = TestCluster::prepare(settings, dist).map_err(plain)?;
        log::info!(
            "zkguard TestCluster: starting {} server(s) in {} using {}",
            settings.servers,
            cluster.dir.display(),
            dist.source
        );
        let deadline = Instant::now() + START_DEADLINE;
        let result = (|| -> io::Result<()> {
            for server in &cluster.servers {
                cluster.spawn(server)?;
            }
            for server in &cluster.servers {
                let left = deadline.saturating_duration_since(Instant::now());
                cluster.wait_mode(server, left, true)?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                log::info!(
                    "zkguard TestCluster: serving at {} (logs in {})",
                    cluster.connect_string(),
                    cluster.dir.display()
                );
                Ok(cluster)
            }
            Err(error) => {
                let port_clash = cluster.servers.iter().any(|s| {
                    let tail = log_tail(&s.log, 200);
                    tail.contains("BindException") || tail.contains("Address already in use")
                });
                // Kill everything now; keep the logs the error points to, unless we retry.
                cluster.keep_dir.store(!port_clash, Ordering::SeqCst);
                let error = if port_clash {
                    error
                } else {
                    io::Error::new(
                        error.kind(),
                        format!("{error}\n(kept {} for inspection)", cluster.dir.display()),
                    )
                };
                drop(cluster);
                Err(StartError { error, port_clash })
            }
        }
    }

    /// Creates the directory, configs and watchdog; starts no server.
    fn prepare(settings: &Settings, dist: &Distribution) -> io::Result<TestCluster> {
        let dir = std::env::temp_dir().join(format!("zkguard-test-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&dir).map_err(|e| {
            other(format!(
                "cannot create temporary directory {}: {e}",
                dir.display()
            ))
        })?;
        // From here on, Drop removes the directory on an early return.
        let mut cluster = TestCluster {
            dir: dir.clone(),
            dist: dist.clone(),
            settings: settings.clone(),
            servers: Vec::new(),
            peers: Vec::new(),
            isolated: Mutex::new(vec![false; settings.servers]),
            watchdog: Mutex::new(None),
            keep_dir: AtomicBool::new(false),
        };
        let n = settings.servers;
        let ensemble = n > 1;
        let mut client_ports = Vec::with_capacity(n);
        let mut peer_ports = Vec::with_capacity(n);
        for _ in 0..n {
            client_ports.push(free_port()?);
            if ensemble {
                peer_ports.push((free_port()?, free_port()?));
            }
        }
        if settings.isolatable {
            cluster.peers = TestCluster::peer_proxies(&peer_ports)?;
        }
        let mut servers = Vec::with_capacity(n);
        for (i, &client_port) in client_ports.iter().enumerate() {
            let data = dir.join(format!("data-{i}"));
            fs::create_dir_all(&data).map_err(|e| {
                other(format!(
                    "cannot create data directory {}: {e}",
                    data.display()
                ))
            })?;
            let mut cfg = String::new();
            let _ = writeln!(
                cfg,
                "# written by zkguard::testing::TestCluster (server {i})"
            );
            let _ = writeln!(cfg, "tickTime={}", ms(settings.tick));
            let _ = writeln!(cfg, "initLimit=10");
            let _ = writeln!(cfg, "syncLimit=5");
            let _ = writeln!(cfg, "dataDir={}", data.display());
            let _ = writeln!(cfg, "clientPort={client_port}");
            let _ = writeln!(cfg, "clientPortAddress=127.0.0.1");
            let _ = writeln!(cfg, "minSessionTimeout={}", ms(settings.min_session()));
            let _ = writeln!(cfg, "maxSessionTimeout={}", ms(settings.max_session));
            let _ = writeln!(cfg, "4lw.commands.whitelist=*");
            let _ = writeln!(cfg, "admin.enableServer=false");
            let _ = writeln!(
                cfg,
                "forceSync={}",
                if settings.force_sync { "yes" } else { "no" }
            );
            let _ = writeln!(cfg, "autopurge.purgeInterval=0");
            if ensemble {
                let _ = writeln!(cfg, "reconfigEnabled=false");
                for (k, &(quorum, election)) in peer_ports.iter().enumerate() {
                    // Server i reaches peer k through the proxy for the pair (i, k), if any.
                    let (quorum, election) = match cluster.peers.get(i).and_then(|r| r[k].as_ref())
                    {
                        Some(proxy) => {
                            (proxy.local_addrs()[0].port(), proxy.local_addrs()[1].port())
                        }
                        None => (quorum, election),
                    };
                    let _ = writeln!(cfg, "server.{}=127.0.0.1:{quorum}:{election}", k + 1);
                }
                let myid = data.join("myid");
                fs::write(&myid, format!("{}\n", i + 1))
                    .map_err(|e| other(format!("cannot write {}: {e}", myid.display())))?;
            }
            let config = dir.join(format!("zoo-{i}.cfg"));
            fs::write(&config, cfg)
                .map_err(|e| other(format!("cannot write {}: {e}", config.display())))?;
            servers.push(Server {
                index: i,
                client_port,
                config,
                data,
                log: dir.join(format!("server-{i}.log")),
                proc: Mutex::new(Proc {
                    child: None,
                    paused: false,
                    pid_file: dir.join(format!("server-{i}.pid")),
                }),
            });
        }
        cluster.servers = servers;
        cluster.start_watchdog();
        Ok(cluster)
    }

    /// One proxy per ordered pair of servers `(i, j)`, forwarding to `j`'s real quorum and
    /// election ports; the election listener of `(i, j)` tells `j` to connect back to `i`
    /// through the election listener of `(j, i)`.
    fn peer_proxies(peer_ports: &[(u16, u16)]) -> io::Result<Vec<Vec<Option<FaultProxy>>>> {
        let n = peer_ports.len();
        let real = |port: u16| SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        let mut peers: Vec<Vec<Option<FaultProxy>>> = Vec::with_capacity(n);
        for i in 0..n {
            let mut row = Vec::with_capacity(n);
            for (j, &(quorum, election)) in peer_ports.iter().enumerate() {
                if i == j {
                    row.push(None);
                    continue;
                }
                let proxy = FaultProxy::start(&[real(quorum), real(election)]).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot start the peer proxy from server {i} to server {j}: {e}"),
                    )
                })?;
                row.push(Some(proxy));
            }
            peers.push(row);
        }
        for (i, row) in peers.iter().enumerate() {
            for (j, there) in row.iter().enumerate() {
                if let (Some(there), Some(back)) = (there, &peers[j][i]) {
                    there.rewrite_election_hello(1, back.local_addrs()[1]);
                }
            }
        }
        Ok(peers)
    }

    fn start_watchdog(&self) {
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("zkguard-watchdog")
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(mut child) => {
                let stdin = child.stdin.take();
                *self.watchdog.lock() = Some((child, stdin));
            }
            Err(e) => log::warn!(
                "zkguard TestCluster: cannot start the watchdog shell (`sh`): {e}; servers \
                 will only be stopped by Drop"
            ),
        }
    }

    fn server(&self, i: usize) -> &Server {
        match self.servers.get(i) {
            Some(s) => s,
            None => panic!(
                "zkguard TestCluster: server index {i} out of range (the cluster has {} servers)",
                self.servers.len()
            ),
        }
    }

    fn main_class(&self) -> &'static str {
        if self.servers.len() > 1 {
            QUORUM_MAIN
        } else {
            STANDALONE_MAIN
        }
    }

    /// Spawns server `s` (which must not be running).
    fn spawn(&self, s: &Server) -> io::Result<()> {
        let mut proc = s.proc.lock();
        if proc.alive() {
            let pid = proc.child.as_ref().map_or(0, Child::id);
            return Err(other(format!(
                "ZooKeeper server {} is already running (pid {pid})",
                s.index
            )));
        }
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&s.log)
            .map_err(|e| other(format!("cannot open log file {}: {e}", s.log.display())))?;
        let _ = writeln!(
            log,
            "==== zkguard: starting server {} ({}) on 127.0.0.1:{} at unix time {} ====",
            s.index,
            self.main_class(),
            s.client_port,
            unix_time()
        );
        let log_err = log.try_clone().map_err(|e| {
            other(format!(
                "cannot duplicate log file handle {}: {e}",
                s.log.display()
            ))
        })?;
        let mut cmd = Command::new(&self.dist.java);
        if !self.settings.full_jit {
            cmd.arg("-XX:TieredStopAtLevel=1");
        }
        cmd.args([
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=*",
            "-Dznode.container.checkIntervalMs=100",
            // TTL nodes (CreateMode::PersistentWithTtl) need the extended session-id layout.
            "-Dzookeeper.extendedTypesEnabled=true",
            // Re-elections converge in about a second even when peers start at different times.
            "-Dzookeeper.fastleader.maxNotificationInterval=1000",
            // Preallocate transaction logs in 1 MiB steps, not 64 MiB.
            "-Dzookeeper.preAllocSize=1024",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        ])
        .arg(format!(
            "-Dzookeeper.forceSync={}",
            if self.settings.force_sync {
                "yes"
            } else {
                "no"
            }
        ))
        .arg("-cp")
        .arg(&self.dist.classpath)
        .arg(self.main_class())
        .arg(&s.config)
        .current_dir(&self.dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
        let child = cmd.spawn().map_err(|e| {
            other(format!(
                "cannot run {} for ZooKeeper server {}: {e}",
                self.dist.java.display(),
                s.index
            ))
        })?;
        let pid = child.id();
        if let Err(e) = fs::write(&proc.pid_file, pid.to_string()) {
            log::warn!(
                "zkguard TestCluster: cannot write {}: {e} (the watchdog will not know this server)",
                proc.pid_file.display()
            );
        }
        log::info!(
            "zkguard TestCluster: server {} started (pid {pid}, port {})",
            s.index,
            s.client_port
        );
        proc.child = Some(child);
        proc.paused = false;
        Ok(())
    }

    /// Error for a server that is not serving, with its log tail.
    fn not_serving(&self, s: &Server, why: &str) -> io::Error {
        other(format!(
            "ZooKeeper server {} (127.0.0.1:{}) {why}; its log is {}; last {LOG_TAIL_LINES} lines:\n{}",
            s.index,
            s.client_port,
            s.log.display(),
            log_tail(&s.log, LOG_TAIL_LINES)
        ))
    }

    /// Polls `srvr` until the server serves (`need_mode`) or just accepts connections.
    fn wait_mode(&self, s: &Server, timeout: Duration, need_mode: bool) -> io::Result<()> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut last;
        loop {
            if !s.proc.lock().alive() {
                return Err(self.not_serving(s, "is not running (its process exited)"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt = left
                .min(POLL_ATTEMPT_TIMEOUT)
                .max(Duration::from_millis(10));
            if need_mode {
                match four_letter_at(s.addr(), "srvr", attempt) {
                    Ok(reply) => match parse_mode(&reply) {
                        Some(mode) if is_serving_mode(mode) => return Ok(()),
                        Some(mode) => last = format!("srvr said Mode: {mode}"),
                        None => last = format!("srvr said: {}", reply.trim()),
                    },
                    Err(e) => last = e.to_string(),
                }
            } else {
                match TcpStream::connect_timeout(&s.addr(), attempt) {
                    Ok(_) => return Ok(()),
                    Err(e) => last = format!("connect failed: {e}"),
                }
            }
            if Instant::now() >= deadline {
                let what = if need_mode {
                    "serve"
                } else {
                    "accept connections"
                };
                return Err(self.not_serving(
                    s,
                    &format!(
                        "did not {what} within {} ms (last check: {last})",
                        ms(timeout)
                    ),
                ));
            }
            std::thread::sleep(
                POLL_INTERVAL.min(deadline.saturating_duration_since(Instant::now())),
            );
        }
    }

    /// The connect string naming every server: `"127.0.0.1:p1,127.0.0.1:p2,…"`.
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The connect string of server `i` alone: `"127.0.0.1:p"`.
    pub fn server_connect_string(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.server(i).client_port)
    }

    /// The client address of server `i` (it stays the same across restarts).
    pub fn client_addr(&self, i: usize) -> SocketAddr {
        self.server(i).addr()
    }

    /// Number of servers (running or not).
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Always `false`: a cluster has at least one server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The throwaway directory holding configs, data directories and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file receiving server `i`'s stdout and stderr (appended to across restarts).
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.server(i).log.clone()
    }

    /// The process id of server `i`, or `None` when it is not running.
    pub fn pid(&self, i: usize) -> Option<u32> {
        let s = self.servers.get(i)?;
        let mut proc = s.proc.lock();
        if proc.alive() {
            proc.child.as_ref().map(Child::id)
        } else {
            None
        }
    }

    /// Whether server `i`'s process is alive (a paused server counts as running).
    pub fn is_running(&self, i: usize) -> bool {
        self.pid(i).is_some()
    }

    /// Whether server `i` is paused by [`pause`](Self::pause).
    pub fn is_paused(&self, i: usize) -> bool {
        self.servers.get(i).is_some_and(|s| s.proc.lock().paused)
    }

    fn signal(&self, s: &Server, pid: u32, sig: &str) -> io::Result<()> {
        let out = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                other(format!(
                    "cannot run `kill -{sig} {pid}` for ZooKeeper server {}: {e}",
                    s.index
                ))
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(other(format!(
                "`kill -{sig} {pid}` for ZooKeeper server {} failed ({}): {}",
                s.index,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Stops server `i` gracefully: SIGTERM (and SIGCONT if paused), waits for the
    /// process to exit, and sends SIGKILL if it has not exited after 5 s. Its data
    /// directory and ports are kept for [`start_server`](Self::start_server).
    /// Stopping a server that is not running does nothing.
    pub fn stop(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if !proc.alive() {
            return Ok(());
        }
        let Some(pid) = proc.child.as_ref().map(Child::id) else {
            return Ok(());
        };
        self.signal(s, pid, "TERM")?;
        if proc.paused {
            self.signal(s, pid, "CONT")?;
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !proc.alive() {
                log::info!("zkguard TestCluster: server {i} stopped");
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        log::warn!(
            "zkguard TestCluster: server {i} (pid {pid}) ignored SIGTERM for {} s; killing it",
            STOP_GRACE.as_secs()
        );
        drop(proc);
        self.kill(i)
    }

    /// Kills server `i` with SIGKILL (a crash) and waits for the process to exit.
    /// Killing a server that is not running does nothing.
    pub fn kill(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if let Some(child) = proc.child.as_mut() {
            let pid = child.id();
            // Fails only when the child was already reaped, which `wait` then reports.
            let _ = child.kill();
            child.wait().map_err(|e| {
                other(format!(
                    "waiting for ZooKeeper server {i} (pid {pid}) after SIGKILL failed: {e}"
                ))
            })?;
            proc.clear();
            log::info!("zkguard TestCluster: server {i} killed");
        }
        Ok(())
    }

    /// Starts a stopped (or killed, or crashed) server again with the same config,
    /// ports and data directory, and waits until it serves: for an ensemble member until
    /// `srvr` reports leader or follower — when a quorum of running, unpaused servers
    /// exists with it; otherwise only until its client port accepts connections.
    /// Isolated servers (see [`isolate`](Self::isolate)) count as missing from the quorum.
    /// Fails if the server is already running.
    pub fn start_server(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        self.spawn(s)?;
        let n = self.servers.len();
        let isolated = self.isolated.lock().clone();
        let live = (0..n)
            .filter(|&k| {
                let mut p = self.servers[k].proc.lock();
                p.alive() && !p.paused && !isolated[k]
            })
            .count();
        let quorum = n == 1 || (live > n / 2 && !isolated[i]);
        self.wait_mode(s, START_DEADLINE, quorum)
    }

    /// Kills server `i` (SIGKILL) if it is running and deletes everything in its data
    /// directory — snapshots, transaction logs, epoch files — except `myid`, which an
    /// ensemble member needs to start again as the same member. (The servers keep their
    /// transaction logs in the data directory; there is no separate log directory.)
    ///
    /// [`start_server`](Self::start_server) then starts it empty: a standalone server, or
    /// an ensemble whose members were all wiped, holds only the built-in nodes
    /// (`/zookeeper`) and counts zxids from the start again (a standalone server from 0;
    /// a fresh ensemble from epoch 1, counter 0, i.e. `0x1_0000_0000`) — clients that saw
    /// a higher zxid are talking to a server that lost everything. A wiped member of an ensemble that
    /// still has a quorum syncs the data back from the leader when it starts. Its client
    /// port, config and log file stay the same.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::start(1)?;
    /// // ... clients write data ...
    /// cluster.wipe(0)?;
    /// cluster.start_server(0)?; // an empty server at the same address
    /// # Ok(())
    /// # }
    /// ```
    pub fn wipe(&self, i: usize) -> io::Result<()> {
        self.kill(i)?;
        let s = self.server(i);
        let entries = fs::read_dir(&s.data).map_err(|e| {
            other(format!(
                "cannot wipe ZooKeeper server {i}: cannot list its data directory {}: {e}",
                s.data.display()
            ))
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| {
                other(format!(
                    "cannot wipe ZooKeeper server {i}: cannot list its data directory {}: {e}",
                    s.data.display()
                ))
            })?;
            if entry.file_name() == "myid" {
                continue;
            }
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let removed = if is_dir {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            removed.map_err(|e| {
                other(format!(
                    "cannot wipe ZooKeeper server {i}: cannot delete {}: {e}",
                    path.display()
                ))
            })?;
        }
        log::info!(
            "zkguard TestCluster: server {i} wiped ({})",
            s.data.display()
        );
        Ok(())
    }

    /// Cuts server `i` off from the rest of the ensemble: all quorum and leader-election
    /// traffic between it and every other server is black-holed (see
    /// [`FaultProxy::blackhole`]: bytes in both directions are discarded and nothing is
    /// closed, so each side only notices silence). Client connections to server `i` are
    /// untouched, and the process keeps running.
    ///
    /// ZooKeeper then does what it does in a real partition: an isolated follower stops
    /// hearing its leader and, after `syncLimit` ticks (half a second with the default
    /// 100 ms tick), drops out and stays looking for a leader; an isolated leader loses its
    /// quorum and steps down; the other servers, if they still form a quorum, keep or elect
    /// a leader and serve. Until the isolated server notices, it goes on answering its
    /// clients (pings, reads). Undo with [`rejoin`](Self::rejoin). The isolation lasts
    /// across restarts of the server. Isolating an isolated server does nothing.
    ///
    /// Needs a cluster built with [`TestClusterBuilder::isolatable`]; otherwise fails with
    /// [`io::ErrorKind::Unsupported`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::builder().servers(3).isolatable(true).start()?;
    /// cluster.isolate(0)?;
    /// // Server 0 soon says "not currently serving requests"; 1 and 2 serve.
    /// cluster.rejoin(0)?;
    /// cluster.wait_serving(0, Duration::from_secs(30))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn isolate(&self, i: usize) -> io::Result<()> {
        self.check_isolatable("isolate", i)?;
        let mut isolated = self.isolated.lock();
        isolated[i] = true;
        for (a, b) in self.pairs_of(i) {
            if let Some(proxy) = &self.peers[a][b] {
                proxy.blackhole();
            }
        }
        log::info!("zkguard TestCluster: server {i} isolated from its peers");
        Ok(())
    }

    /// Ends [`isolate`](Self::isolate) for server `i`: traffic to and from the peers that
    /// are not isolated themselves flows again. Peer connections that lost bytes while
    /// isolated are closed (both servers see the connection end and reconnect at once);
    /// connections opened meanwhile go through. The server then finds the leader and
    /// syncs with it; wait for that with [`wait_serving`](Self::wait_serving). Rejoining
    /// a server that is not isolated does nothing.
    ///
    /// Needs a cluster built with [`TestClusterBuilder::isolatable`]; otherwise fails with
    /// [`io::ErrorKind::Unsupported`].
    pub fn rejoin(&self, i: usize) -> io::Result<()> {
        self.check_isolatable("rejoin", i)?;
        let mut isolated = self.isolated.lock();
        isolated[i] = false;
        for (a, b) in self.pairs_of(i) {
            let other = if a == i { b } else { a };
            if isolated[other] {
                continue;
            }
            if let Some(proxy) = &self.peers[a][b] {
                proxy.heal();
            }
        }
        log::info!("zkguard TestCluster: server {i} rejoined its peers");
        Ok(())
    }

    /// Whether server `i` is cut off by [`isolate`](Self::isolate).
    pub fn is_isolated(&self, i: usize) -> bool {
        self.isolated.lock().get(i).copied().unwrap_or(false)
    }

    /// The ordered pairs `(i, j)` and `(j, i)` for every other server `j`.
    fn pairs_of(&self, i: usize) -> Vec<(usize, usize)> {
        (0..self.servers.len())
            .filter(|&j| j != i)
            .flat_map(|j| [(i, j), (j, i)])
            .collect()
    }

    fn check_isolatable(&self, what: &str, i: usize) -> io::Result<()> {
        let _ = self.server(i);
        if self.peers.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "cannot {what} ZooKeeper server {i}: the cluster was not built with \
                     TestCluster::builder().isolatable(true)"
                ),
            ));
        }
        Ok(())
    }

    /// Waits until server `i` serves requests (`srvr` reports standalone, leader,
    /// follower or observer), or fails after `timeout` with the server's log tail.
    pub fn wait_serving(&self, i: usize, timeout: Duration) -> io::Result<()> {
        let s = self.server(i);
        self.wait_mode(s, timeout, true)
    }

    /// Freezes server `i` with SIGSTOP: its sockets stay open but it answers nothing,
    /// like a long GC pause. Returns once every thread of the process has stopped (on
    /// Linux; elsewhere once the signal is sent). Undo with [`resume`](Self::resume).
    pub fn pause(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if !proc.alive() {
            return Err(other(format!(
                "cannot pause ZooKeeper server {i}: it is not running"
            )));
        }
        let pid = proc.child.as_ref().map_or(0, Child::id);
        self.signal(s, pid, "STOP")?;
        proc.paused = true;
        // SIGSTOP is asynchronous: a thread that is on a CPU right now may still answer a
        // request before it stops.
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            match all_threads_stopped(pid) {
                None | Some(true) => return Ok(()),
                Some(false) if Instant::now() >= deadline => {
                    return Err(other(format!(
                        "ZooKeeper server {i} (pid {pid}) got SIGSTOP but not all of its \
                         threads stopped within {} s",
                        STOP_GRACE.as_secs()
                    )))
                }
                Some(false) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Resumes a paused server with SIGCONT.
    pub fn resume(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if !proc.alive() {
            return Err(other(format!(
                "cannot resume ZooKeeper server {i}: it is not running"
            )));
        }
        let pid = proc.child.as_ref().map_or(0, Child::id);
        self.signal(s, pid, "CONT")?;
        proc.paused = false;
        Ok(())
    }

    /// Sends a four-letter command (`"ruok"`, `"srvr"`, `"mntr"`, `"wchs"`, `"cons"`, …) to
    /// server `i` and returns the whole reply; fails after 5 s.
    pub fn four_letter(&self, i: usize, cmd: &str) -> io::Result<String> {
        self.four_letter_with_timeout(i, cmd, FOUR_LETTER_TIMEOUT)
    }

    /// [`four_letter`](Self::four_letter) with a custom timeout for the whole exchange.
    pub fn four_letter_with_timeout(
        &self,
        i: usize,
        cmd: &str,
        timeout: Duration,
    ) -> io::Result<String> {
        four_letter_at(self.server(i).addr(), cmd, timeout)
            .map_err(|e| io::Error::new(e.kind(), format!("ZooKeeper server {i}: {e}")))
    }

    /// Server `i`'s mode from `srvr`: `"standalone"`, `"leader"`, `"follower"` or
    /// `"observer"`; an error when it is not serving (the error quotes its reply).
    pub fn mode(&self, i: usize) -> io::Result<String> {
        let reply = self.four_letter_with_timeout(i, "srvr", POLL_ATTEMPT_TIMEOUT)?;
        match parse_mode(&reply) {
            Some(mode) if is_serving_mode(mode) => Ok(mode.to_string()),
            _ => Err(other(format!(
                "ZooKeeper server {i} is not serving; srvr said: {}",
                reply.trim()
            ))),
        }
    }

    /// The index of the server whose `srvr` reports `Mode: leader` (or `standalone`),
    /// asking running, unpaused servers in order; `None` when there is none right now.
    pub fn leader(&self) -> Option<usize> {
        (0..self.servers.len()).find(|&i| {
            let asking = {
                let mut p = self.servers[i].proc.lock();
                p.alive() && !p.paused
            };
            asking && matches!(self.mode(i).as_deref(), Ok("leader" | "standalone"))
        })
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for s in &self.servers {
            let mut proc = s.proc.lock();
            if let Some(child) = proc.child.as_mut() {
                let _ = child.kill();
                if let Err(e) = child.wait() {
                    log::warn!(
                        "zkguard TestCluster: waiting for server {} (pid {}) failed: {e}",
                        s.index,
                        child.id()
                    );
                }
            }
            proc.clear();
        }
        if let Some((mut child, stdin)) = self.watchdog.lock().take() {
            let _ = child.kill();
            drop(stdin);
            let _ = child.wait();
        }
        if std::thread::panicking() || self.keep_dir.load(Ordering::SeqCst) {
            if std::thread::panicking() {
                eprintln!(
                    "zkguard TestCluster: keeping server logs at {}",
                    self.dir.display()
                );
            }
            return;
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            log::warn!(
                "zkguard TestCluster: cannot remove {}: {e}",
                self.dir.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_parsing() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(parse_mode(srvr), Some("follower"));
        assert_eq!(
            parse_mode("This ZooKeeper instance is not currently serving requests\n"),
            None
        );
        assert!(is_serving_mode("standalone"));
        assert!(!is_serving_mode("looking"));
    }

    #[test]
    fn free_ports_are_unique_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().expect("port")).collect();
        let set: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(set.len(), ports.len());
        if ephemeral_low() > 11_000 {
            assert!(ports.iter().all(|&p| p < ephemeral_low()), "{ports:?}");
        }
    }

    #[test]
    fn settings_validation() {
        let s = Settings {
            servers: 0,
            ..Settings::default()
        };
        assert!(s.validate().is_err());
        let s = Settings {
            min_session: Some(Duration::from_secs(10)),
            max_session: Duration::from_secs(5),
            ..Settings::default()
        };
        let e = s.validate().expect_err("min > max");
        assert!(e.to_string().contains("10000 ms"), "{e}");
        let s = Settings {
            tick: Duration::from_micros(10),
            ..Settings::default()
        };
        assert!(s.validate().is_err());
        assert_eq!(
            Settings::default().min_session(),
            Duration::from_millis(200)
        );
        Settings::default().validate().expect("defaults are valid");
    }

    #[test]
    fn log_tail_takes_the_last_lines() {
        let path = std::env::temp_dir().join(format!("zkguard-tail-{}", uuid::Uuid::new_v4()));
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        fs::write(&path, text).expect("write");
        let tail = log_tail(&path, 3);
        let _ = fs::remove_file(&path);
        assert_eq!(tail, "line 97\nline 98\nline 99");
        assert!(log_tail(Path::new("/nonexistent/zk.log"), 3).contains("cannot read"));
    }
}
