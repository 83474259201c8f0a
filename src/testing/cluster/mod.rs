//! Real ZooKeeper servers on loopback: [`TestCluster`] and [`TestClusterBuilder`].
//!
//! One file per part: `ports` (free loopback ports), `four_letter` (asking a server),
//! `builder` (settings), `process` (starting servers, the watchdog, logs), `faults` (what
//! a test does to one server); the cluster itself and its accessors are here.

mod builder;
mod faults;
mod four_letter;
mod ports;
mod process;
mod reconfig;
mod security;

use crate::admin::Srvr;
use builder::Settings;
pub use builder::TestClusterBuilder;
use four_letter::four_letter_at;
pub(crate) use ports::free_port;
pub use security::ClientAuth;

use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::discover::Distribution;
#[cfg(feature = "tls")]
use super::pki::TestPki;
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
    /// `secureClientPort`, with TLS.
    secure_port: Option<u16>,
    /// The admin server's port, with `admin_server(true)`.
    admin_port: Option<u16>,
    config: PathBuf,
    /// In an ensemble: its quorum and election ports.
    peer_ports: Option<(u16, u16)>,
    /// `dataDir` (snapshots, transaction logs, `myid`).
    data: PathBuf,
    log: PathBuf,
    proc: Mutex<Proc>,
}

impl Server {
    fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.client_port))
    }

    fn secure_addr(&self) -> Option<SocketAddr> {
        self.secure_port
            .map(|p| SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, p)))
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
///
/// # Examples
///
/// A lock that survives the loss of one server of three (this runs real servers):
///
/// ```
/// use std::time::Duration;
/// use zkguard::testing::TestCluster;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = TestCluster::start(3)?;
/// let client = zkguard::Client::builder(&cluster.connect_string())
///     .session_timeout(Duration::from_secs(10))
///     .build()?;
/// let lock = zkguard::Mutex::new(&client, "/doc/cluster")?;
/// let guard = lock.acquire()?;
/// let serving = (0..cluster.len())
///     .find(|&i| client.connected_server() == Some(cluster.client_addr(i)))
///     .expect("connected to one of them");
/// let events = client.events();
/// cluster.kill(serving)?; // the client moves to another server, same session
/// // (A request sent before it noticed the kill fails with ConnectionLoss: wait.)
/// while !matches!(events.recv()?, zkguard::SessionEvent::Reconnected { .. }) {}
/// guard.confirm()?; // still ours, proven with the quorum
/// cluster.start_server(serving)?;
/// drop(guard);
/// # Ok(())
/// # }
/// ```
#[must_use = "the servers are stopped as soon as the cluster is dropped"]
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
    /// The servers of the ensemble's configuration: all of them, unless
    /// [`reconfig`](TestClusterBuilder::reconfig) made spares (then changed by
    /// [`add_server`](Self::add_server) and [`remove_servers`](Self::remove_servers)).
    members: Mutex<Vec<usize>>,
    /// Kills the servers when this process dies; its stdin is our end of a pipe.
    watchdog: Mutex<Option<(Child, Option<ChildStdin>)>>,
    keep_dir: AtomicBool,
    /// With TLS: the certificates, in `dir/pki`.
    #[cfg(feature = "tls")]
    pki: Option<TestPki>,
    /// With SASL: the JAAS file.
    jaas: Option<PathBuf>,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("dir", &self.dir)
            .field("connect_string", &self.connect_string())
            .field("secure_connect_string", &self.secure_connect_string())
            .field("sasl", &self.jaas.is_some())
            .finish_non_exhaustive()
    }
}

/// The watchdog: waits for EOF on stdin (our end closes when this process dies, however it
/// dies), then SIGKILLs every server whose pid file still exists and removes the throwaway
/// directory, unless [`TestCluster::keep_logs`] left a `keep` marker in it. (A cluster in a
/// `static` is never dropped; this is what cleans up after it.)
pub(crate) const WATCHDOG_SCRIPT: &str = r#"while read -r _line; do :; done
for f in "$1"/*.pid; do
  [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
done
[ -e "$1/keep" ] || rm -rf "$1"
exit 0"#;

impl TestCluster {
    /// Starts `n` real servers with default settings: 1 is a standalone server, 2 or more
    /// an ensemble. Waits until every server serves. See [`TestClusterBuilder::start`].
    ///
    /// # Errors
    ///
    /// As [`TestClusterBuilder::start`]: a server that does not serve in time (with its log
    /// tail), no ZooKeeper installation found, or no free ports.
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

    /// The connect string naming every server: `"127.0.0.1:p1,127.0.0.1:p2,…"` (with
    /// [`reconfig`](TestClusterBuilder::reconfig), every [member](Self::members)).
    pub fn connect_string(&self) -> String {
        self.members()
            .iter()
            .map(|&i| format!("127.0.0.1:{}", self.servers[i].client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The connect string of server `i` alone: `"127.0.0.1:p"`.
    pub fn server_connect_string(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.server(i).client_port)
    }

    /// Which server of this cluster `client` is connected to now (by its client or TLS
    /// port), or `None` when it is not connected, or connected elsewhere (through a
    /// [`FaultProxy`](crate::testing::FaultProxy), say: ask the proxy's upstream then).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = zkguard::testing::TestCluster::start(3)?;
    /// let client = zkguard::Client::connect(&cluster.connect_string())?;
    /// if let Some(i) = cluster.server_of(&client) {
    ///     cluster.kill(i)?; // the client's own server
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn server_of(&self, client: &crate::Client) -> Option<usize> {
        let on = client.connected_server()?;
        (0..self.servers.len())
            .find(|&i| self.client_addr(i) == on || self.secure_client_addr(i) == Some(on))
    }

    /// The client address of server `i` (it stays the same across restarts).
    pub fn client_addr(&self, i: usize) -> SocketAddr {
        self.server(i).addr()
    }

    /// With [`tls`](TestClusterBuilder::tls): the throwaway CA and certificates the servers
    /// use (in the `pki` folder of [`dir`](Self::dir)); `None` otherwise.
    #[cfg(feature = "tls")]
    pub fn pki(&self) -> Option<&TestPki> {
        self.pki.as_ref()
    }

    /// With `tls`: the connect string naming every server's
    /// `secureClientPort`, `"127.0.0.1:s1,127.0.0.1:s2,…"`; `None` otherwise.
    /// ([`connect_string`](Self::connect_string) always names the plaintext ports.)
    pub fn secure_connect_string(&self) -> Option<String> {
        self.servers
            .iter()
            .map(|s| s.secure_port.map(|p| format!("127.0.0.1:{p}")))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(","))
    }

    /// With [`admin_server`](TestClusterBuilder::admin_server): server `i`'s admin server
    /// port on 127.0.0.1 (the same across restarts); `None` otherwise.
    pub fn admin_port(&self, i: usize) -> Option<u16> {
        self.server(i).admin_port
    }

    /// With `tls`: server `i`'s `secureClientPort` address (it
    /// stays the same across restarts); `None` otherwise.
    pub fn secure_client_addr(&self, i: usize) -> Option<SocketAddr> {
        self.server(i).secure_addr()
    }

    /// With [`sasl_digest_users`](TestClusterBuilder::sasl_digest_users) or
    /// [`kerberos`](TestClusterBuilder::kerberos): the JAAS file the servers read their
    /// SASL users or Kerberos login from; `None` otherwise.
    pub fn jaas_path(&self) -> Option<&Path> {
        self.jaas.as_deref()
    }

    /// With [`kerberos`](TestClusterBuilder::kerberos): the servers' Kerberos principal,
    /// `zookeeper/localhost@ZKGUARD.TEST` (service `zookeeper`, host `localhost`); `None`
    /// otherwise.
    pub fn kerberos_principal(&self) -> Option<String> {
        let kdc = self.settings.kerberos.as_ref()?;
        Some(kdc.principal(security::KERBEROS_SERVER))
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

    /// Sends a four-letter command (`"ruok"`, `"srvr"`, `"mntr"`, `"wchs"`, `"cons"`, …) to
    /// server `i` and returns the whole reply; fails after 5 s.
    ///
    /// # Errors
    ///
    /// The server cannot be reached, or does not answer in full within 5 s; the error names
    /// the server.
    pub fn four_letter(&self, i: usize, cmd: &str) -> io::Result<String> {
        self.four_letter_with_timeout(i, cmd, FOUR_LETTER_TIMEOUT)
    }

    /// [`four_letter`](Self::four_letter) with a custom timeout for the whole exchange.
    ///
    /// # Errors
    ///
    /// The server cannot be reached, or does not answer in full within `timeout`.
    pub fn four_letter_with_timeout(
        &self,
        i: usize,
        cmd: &str,
        timeout: Duration,
    ) -> io::Result<String> {
        four_letter_at(self.server(i).addr(), cmd, timeout)
            .map_err(|e| io::Error::new(e.kind(), format!("ZooKeeper server {i}: {e}")))
    }

    /// Server `i`'s ZooKeeper release from `srvr`, as `(major, minor, patch)`: `(3, 6, 3)`
    /// when the harness runs 3.6.3 (`ZKGUARD_ZOOKEEPER_VERSION`, see docs/testing.md), so a
    /// test can tell what the server it runs on implements.
    ///
    /// ```no_run
    /// let cluster = zkguard::testing::TestCluster::start(1)?;
    /// if cluster.version(0)? < (3, 7, 0) {
    ///     println!("no whoAmI here");
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The server cannot be reached, or its reply has no version (the error quotes it).
    pub fn version(&self, i: usize) -> io::Result<(u32, u32, u32)> {
        let reply = self.four_letter(i, "srvr")?;
        Srvr::parse(&reply).release().ok_or_else(|| {
            io::Error::other(format!(
                "ZooKeeper server {i}: no version in its srvr reply {reply:?}"
            ))
        })
    }

    /// Server `i`'s mode from `srvr`: `"standalone"`, `"leader"`, `"follower"` or
    /// `"observer"`; an error when it is not serving (the error quotes its reply).
    ///
    /// # Errors
    ///
    /// The server cannot be reached, or it is not serving (the error quotes its reply).
    pub fn mode(&self, i: usize) -> io::Result<String> {
        let reply = self.four_letter_with_timeout(i, "srvr", POLL_ATTEMPT_TIMEOUT)?;
        let srvr = Srvr::parse(&reply);
        match (srvr.serving(), srvr.mode) {
            (true, Some(mode)) => Ok(mode),
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
    use std::collections::BTreeSet;

    use super::ports::{ephemeral_low, free_port};
    use super::process::log_tail;
    use super::*;

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
    fn fixed_client_ports_are_checked_and_never_handed_out_again() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = super::ports::fixed_ports(port, 1).expect_err("a taken port");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains(&port.to_string()), "{e}");
        drop(taken);
        assert_eq!(super::ports::fixed_ports(port, 1).unwrap(), [port]);
        assert!((0..50).all(|_| free_port().unwrap() != port));
        let s = Settings {
            servers: 3,
            client_port: Some(u16::MAX - 1),
            ..Settings::default()
        };
        assert!(s.validate().is_err(), "ports past 65535");
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
