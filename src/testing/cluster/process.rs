//! Starting the servers (data dirs, configuration, the watchdog, the Java processes) and
//! reading their logs.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write as _};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::builder::{Settings, StartError};
use super::four_letter::four_letter_at;
use super::ports::{fixed_ports, free_port};
use super::{
    ms, other, Proc, Server, TestCluster, LOG_TAIL_LINES, POLL_ATTEMPT_TIMEOUT, POLL_INTERVAL,
    QUORUM_MAIN, STANDALONE_MAIN, START_DEADLINE, WATCHDOG_SCRIPT,
};
use super::{reconfig, security};
use crate::admin::Srvr;
use crate::testing::discover::Distribution;
#[cfg(feature = "tls")]
use crate::testing::pki::TestPki;
use crate::testing::proxy::FaultProxy;

/// The last `n` lines of a file (reads at most its last 64 KiB).
pub(super) fn log_tail(path: &Path, n: usize) -> String {
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
pub(super) fn all_threads_stopped(pid: u32) -> Option<bool> {
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

pub(super) fn unix_time() -> String {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => format!("{}.{:03}", d.as_secs(), d.subsec_millis()),
        Err(_) => "?".to_string(),
    }
}

impl TestCluster {
    pub(super) fn try_start(
        settings: &Settings,
        dist: &Distribution,
    ) -> Result<TestCluster, StartError> {
        let plain = |error: io::Error| StartError {
            error,
            port_clash: false,
        };
        let cluster = TestCluster::prepare(settings, dist).map_err(plain)?;
        log::info!(
            "zkguard TestCluster: starting {} server(s) in {} using {}",
            settings.members(),
            cluster.dir.display(),
            dist.source
        );
        let deadline = Instant::now() + START_DEADLINE;
        let result = (|| -> io::Result<()> {
            let members = cluster.members();
            for &i in &members {
                cluster.spawn(&cluster.servers[i])?;
            }
            for server in members.iter().map(|&i| &cluster.servers[i]) {
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
    pub(super) fn prepare(settings: &Settings, dist: &Distribution) -> io::Result<TestCluster> {
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
            isolated: Mutex::new(vec![false; settings.total()]),
            members: Mutex::new((0..settings.members()).collect()),
            watchdog: Mutex::new(None),
            keep_dir: AtomicBool::new(false),
            #[cfg(feature = "tls")]
            pki: None,
            jaas: None,
        };
        #[cfg(feature = "tls")]
        if settings.tls.is_some() {
            let pki_dir = dir.join("pki");
            let pki = if settings.tls_expired_server_cert {
                TestPki::generate_with_expired_server_cert(&pki_dir)
            } else {
                TestPki::generate(&pki_dir)
            };
            cluster.pki = Some(pki.map_err(|e| {
                io::Error::new(e.kind(), format!("cannot make the TLS certificates: {e}"))
            })?);
        }
        let jaas_text = match (&settings.sasl_users, &settings.kerberos) {
            (Some(users), _) => Some(security::jaas_text(users)),
            (None, Some(kdc)) => {
                security::check_loopback_name();
                let keytab = kdc.add_principal(security::KERBEROS_SERVER).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot make the servers' Kerberos principal: {e}"),
                    )
                })?;
                let principal = kdc.principal(security::KERBEROS_SERVER);
                Some(security::kerberos_jaas_text(&principal, &keytab))
            }
            (None, None) => None,
        };
        if let Some(text) = jaas_text {
            let jaas = dir.join("jaas.conf");
            fs::write(&jaas, text)
                .map_err(|e| other(format!("cannot write {}: {e}", jaas.display())))?;
            cluster.jaas = Some(jaas);
        }
        let n = settings.total();
        let ensemble = n > 1;
        let mut client_ports = Vec::with_capacity(n);
        let mut secure_ports = Vec::with_capacity(n);
        let mut admin_ports = Vec::with_capacity(n);
        let mut peer_ports = Vec::with_capacity(n);
        if let Some(first) = settings.client_port {
            client_ports = fixed_ports(first, n)?;
        }
        for _ in 0..n {
            if settings.client_port.is_none() {
                client_ports.push(free_port()?);
            }
            secure_ports.push(match settings.tls {
                Some(_) => Some(free_port()?),
                None => None,
            });
            admin_ports.push(match settings.admin_server {
                true => Some(free_port()?),
                false => None,
            });
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
            let _ = writeln!(cfg, "syncLimit={}", settings.sync_limit);
            let _ = writeln!(cfg, "dataDir={}", data.display());
            let _ = writeln!(cfg, "clientPort={client_port}");
            let _ = writeln!(cfg, "clientPortAddress=127.0.0.1");
            let _ = writeln!(cfg, "minSessionTimeout={}", ms(settings.min_session()));
            let _ = writeln!(cfg, "maxSessionTimeout={}", ms(settings.max_session));
            let _ = writeln!(cfg, "4lw.commands.whitelist={}", settings.four_letter_words);
            match admin_ports[i] {
                Some(port) => {
                    let _ = writeln!(cfg, "admin.enableServer=true");
                    let _ = writeln!(cfg, "admin.serverAddress=127.0.0.1");
                    let _ = writeln!(cfg, "admin.serverPort={port}");
                }
                None => {
                    let _ = writeln!(cfg, "admin.enableServer=false");
                }
            }
            let _ = writeln!(
                cfg,
                "forceSync={}",
                if settings.force_sync { "yes" } else { "no" }
            );
            let _ = writeln!(cfg, "autopurge.purgeInterval=0");
            #[cfg(feature = "tls")]
            if let (Some(auth), Some(pki), Some(port)) =
                (settings.tls, &cluster.pki, secure_ports[i])
            {
                security::tls_config(&mut cfg, port, pki, auth);
            }
            if cluster.jaas.is_some() {
                security::sasl_config(&mut cfg, settings.sasl_required);
            }
            if let (true, Some(_)) = (ensemble, settings.reconfig) {
                let dynamic = dir.join(format!("zoo-{i}.cfg.dynamic"));
                reconfig::static_lines(&mut cfg, &dynamic);
                if i < settings.servers {
                    let lines =
                        reconfig::member_lines(&peer_ports, &client_ports, 0..settings.servers);
                    fs::write(&dynamic, lines)
                        .map_err(|e| other(format!("cannot write {}: {e}", dynamic.display())))?;
                }
            } else if ensemble {
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
                    let observer = if k >= settings.servers {
                        ":observer"
                    } else {
                        ""
                    };
                    let _ = writeln!(
                        cfg,
                        "server.{}=127.0.0.1:{quorum}:{election}{observer}",
                        k + 1
                    );
                }
                if settings.observers > 0 {
                    let _ = writeln!(cfg, "standaloneEnabled=false");
                }
                if i >= settings.servers {
                    let _ = writeln!(cfg, "peerType=observer");
                }
            }
            for (key, value) in &settings.properties {
                let _ = writeln!(cfg, "{key}={value}");
            }
            if ensemble {
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
                secure_port: secure_ports[i],
                admin_port: admin_ports[i],
                config,
                data,
                peer_ports: peer_ports.get(i).copied(),
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
    pub(super) fn peer_proxies(
        peer_ports: &[(u16, u16)],
    ) -> io::Result<Vec<Vec<Option<FaultProxy>>>> {
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

    pub(super) fn start_watchdog(&self) {
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

    pub(super) fn server(&self, i: usize) -> &Server {
        match self.servers.get(i) {
            Some(s) => s,
            None => panic!(
                "zkguard TestCluster: server index {i} out of range (the cluster has {} servers)",
                self.servers.len()
            ),
        }
    }

    pub(super) fn main_class(&self) -> &'static str {
        if self.servers.len() > 1 {
            QUORUM_MAIN
        } else {
            STANDALONE_MAIN
        }
    }

    /// Spawns server `s` (which must not be running).
    pub(super) fn spawn(&self, s: &Server) -> io::Result<()> {
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
            &format!(
                "-Dzookeeper.admin.enableServer={}",
                self.settings.admin_server
            ),
            &format!(
                "-Dzookeeper.4lw.commands.whitelist={}",
                self.settings.four_letter_words
            ),
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
            "-Dznode.container.checkIntervalMs={}",
            self.settings.container_check.as_millis()
        ))
        .arg(format!(
            "-Dzookeeper.forceSync={}",
            if self.settings.force_sync {
                "yes"
            } else {
                "no"
            }
        ))
        .args(self.jaas.as_deref().map(security::jaas_jvm_option))
        .args(
            self.settings
                .reconfig
                .map(|_| reconfig::SUPER_DIGEST_OPTION),
        )
        .args(
            self.settings
                .kerberos
                .as_ref()
                .map(|kdc| format!("-Djava.security.krb5.conf={}", kdc.krb5_conf().display())),
        )
        .arg("-cp")
        .arg(admin_classpath(
            &self.dist.classpath,
            self.settings.admin_server,
        ))
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
    pub(super) fn not_serving(&self, s: &Server, why: &str) -> io::Error {
        other(format!(
            "ZooKeeper server {} (127.0.0.1:{}) {why}; its log is {}; last {LOG_TAIL_LINES} lines:\n{}",
            s.index,
            s.client_port,
            s.log.display(),
            log_tail(&s.log, LOG_TAIL_LINES)
        ))
    }

    /// Polls `srvr` until the server serves (`need_mode`) or just accepts connections.
    pub(super) fn wait_mode(
        &self,
        s: &Server,
        timeout: Duration,
        need_mode: bool,
    ) -> io::Result<()> {
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
                    Ok(reply) => match Srvr::parse(&reply) {
                        srvr if srvr.serving() => match s.secure_addr() {
                            None => return Ok(()),
                            Some(secure) => match TcpStream::connect_timeout(&secure, attempt) {
                                Ok(_) => return Ok(()),
                                Err(e) => {
                                    last =
                                        format!("serving, but its secureClientPort {secure}: {e}")
                                }
                            },
                        },
                        Srvr {
                            mode: Some(mode), ..
                        } => last = format!("srvr said Mode: {mode}"),
                        _ => last = format!("srvr said: {}", reply.trim()),
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
}

/// Debian's servlet API jar: Jetty, which `zookeeper.jar`'s manifest names, needs it for the
/// admin server, and the manifest does not name it (an Apache release has it in `lib/`).
const DEBIAN_SERVLET_API: &str = "/usr/share/java/servlet-api.jar";
/// Debian's Jetty 9 jars the admin server needs, for a class path without Jetty (the jars
/// `scripts/zk-version.sh` caches have none: Spark shades its own).
const DEBIAN_JETTY: &[&str] = &[
    "/usr/share/java/jetty9-server.jar",
    "/usr/share/java/jetty9-servlet.jar",
    "/usr/share/java/jetty9-security.jar",
    "/usr/share/java/jetty9-http.jar",
    "/usr/share/java/jetty9-io.jar",
    "/usr/share/java/jetty9-util.jar",
    "/usr/share/java/jetty9-util-ajax.jar",
];

/// The class path, with Debian's servlet API jar added for the admin server when it is
/// there and not on the path yet, and Debian's Jetty when the path names no Jetty jar.
fn admin_classpath(classpath: &std::ffi::OsStr, admin: bool) -> std::ffi::OsString {
    let entries: Vec<PathBuf> = std::env::split_paths(classpath).collect();
    if !admin {
        return classpath.to_os_string();
    }
    let named = |prefix: &str| {
        entries.iter().any(|e| {
            e.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
    };
    // Debian's zookeeper.jar names Jetty in its manifest; other class paths name its jars.
    let jetty = named("jetty")
        || entries
            .iter()
            .any(|e| e == Path::new(crate::testing::discover::DEBIAN_JAR));
    let mut extra: Vec<&str> = if jetty {
        Vec::new()
    } else {
        DEBIAN_JETTY.to_vec()
    };
    extra.push(DEBIAN_SERVLET_API);
    let extra = extra
        .into_iter()
        .map(PathBuf::from)
        .filter(|j| !entries.contains(j) && j.is_file());
    let all: Vec<PathBuf> = entries.iter().cloned().chain(extra).collect();
    std::env::join_paths(all).unwrap_or_else(|_| classpath.to_os_string())
}
