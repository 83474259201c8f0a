//! Settings and the builder.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::security::{validate_sasl_users, ClientAuth};
use super::{ms, TestCluster, START_ATTEMPTS};
use crate::testing::discover;
use crate::testing::TestKdc;

#[derive(Clone, Debug)]
pub(super) struct Settings {
    pub(super) servers: usize,
    pub(super) tick: Duration,
    pub(super) min_session: Option<Duration>,
    pub(super) max_session: Duration,
    pub(super) sync_limit: u32,
    /// `4lw.commands.whitelist`: `*` or the words, comma-separated (always with `srvr`).
    pub(super) four_letter_words: String,
    /// Each server runs the admin server (Jetty) on a free loopback port of its own.
    pub(super) admin_server: bool,
    pub(super) force_sync: bool,
    /// `znode.container.checkIntervalMs`: how often the servers reap empty containers.
    pub(super) container_check: Duration,
    pub(super) full_jit: bool,
    pub(super) isolatable: bool,
    /// `Some`: every server also serves TLS on a `secureClientPort`.
    pub(super) tls: Option<ClientAuth>,
    /// The server certificate expired long ago.
    pub(super) tls_expired_server_cert: bool,
    /// `Some`: SASL DIGEST-MD5 with these users.
    pub(super) sasl_users: Option<Vec<(String, String)>>,
    /// `Some`: SASL GSSAPI (Kerberos) with principals of this KDC.
    pub(super) kerberos: Option<Arc<TestKdc>>,
    /// Whether the servers refuse clients that did not authenticate with SASL.
    pub(super) sasl_required: bool,
    /// `Some`: server `i`'s client port is this plus `i` (else free ports).
    pub(super) client_port: Option<u16>,
    /// `Some(spares)`: dynamic reconfiguration on, with this many servers prepared but not
    /// members (`reconfig.rs`).
    pub(super) reconfig: Option<usize>,
    /// Observers, after the voting servers: servers `servers..servers + observers`.
    pub(super) observers: usize,
    /// `key=value` lines added to every server's `zoo.cfg`, after the harness's own.
    pub(super) properties: Vec<(String, String)>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            servers: 1,
            tick: Duration::from_millis(100),
            min_session: None,
            max_session: Duration::from_secs(60),
            sync_limit: 5,
            four_letter_words: "*".into(),
            admin_server: false,
            force_sync: false,
            container_check: Duration::from_millis(100),
            full_jit: false,
            isolatable: false,
            tls: None,
            tls_expired_server_cert: false,
            sasl_users: None,
            kerberos: None,
            sasl_required: true,
            client_port: None,
            reconfig: None,
            observers: 0,
            properties: Vec::new(),
        }
    }
}

impl Settings {
    /// Every server the cluster prepares: the members, and the spares of `reconfig`.
    pub(super) fn total(&self) -> usize {
        self.members() + self.reconfig.unwrap_or(0)
    }

    /// The servers started at first: the voters, then the observers.
    pub(super) fn members(&self) -> usize {
        self.servers + self.observers
    }

    pub(super) fn min_session(&self) -> Duration {
        self.min_session.unwrap_or(self.tick * 2)
    }

    pub(super) fn validate(&self) -> io::Result<()> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        if self.servers == 0 {
            return Err(invalid(
                "TestCluster needs at least one server (servers(0) was requested)".into(),
            ));
        }
        if self.reconfig.is_some() && self.isolatable {
            return Err(invalid(
                "reconfig(..) and isolatable(true) cannot be combined: the peer proxies are \
                 made for a fixed membership"
                    .into(),
            ));
        }
        if self.isolatable && self.servers < 2 {
            return Err(invalid(
                "isolatable(true) needs an ensemble (servers(2) or more): a standalone server \
                 has no peers to be cut off from"
                    .into(),
            ));
        }
        if self.observers > 0 && self.reconfig.is_some() {
            return Err(invalid(
                "observers(..) and reconfig(..) cannot be combined: the dynamic \
                 configuration's members are all participants"
                    .into(),
            ));
        }
        for (key, value) in &self.properties {
            let bad = |c: char| c.is_control() || c == '=' || c == ':' || c.is_whitespace();
            if key.is_empty() || key.chars().any(bad) || key.starts_with('#') {
                return Err(invalid(format!(
                    "property({key:?}, ..): a zoo.cfg key must be non-empty, without \
                     whitespace, '=', ':' or control characters, and not start with '#'"
                )));
            }
            if value.chars().any(|c| c == '\n' || c == '\r' || c == '\\') {
                return Err(invalid(format!(
                    "property({key:?}, {value:?}): a zoo.cfg value must be one line, \
                     without a backslash"
                )));
            }
        }
        if self.total() > 255 {
            return Err(invalid(format!(
                "TestCluster supports at most 255 servers ({} were requested)",
                self.total()
            )));
        }
        if let Some(port) = self.client_port {
            if port == 0 || usize::from(port) + self.total() - 1 > usize::from(u16::MAX) {
                return Err(invalid(format!(
                    "client_port({port}) with {} servers: the ports must be 1 to 65535",
                    self.servers
                )));
            }
        }
        if let Some(users) = &self.sasl_users {
            validate_sasl_users(users)?;
            if self.kerberos.is_some() {
                return Err(invalid(
                    "kerberos(..) and sasl_digest_users(..) cannot be combined: a ZooKeeper \
                     server whose JAAS Server section logs in with Kerberos offers only GSSAPI"
                        .into(),
                ));
            }
        }
        if self.sync_limit == 0 {
            return Err(invalid("sync_limit must be at least 1 tick".into()));
        }
        if self.tls_expired_server_cert && self.tls.is_none() {
            return Err(invalid(
                "tls_expired_server_cert(true) needs tls(..) as well".into(),
            ));
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
    pub(super) settings: Settings,
}

impl TestClusterBuilder {
    /// Number of servers: 1 (the default) runs a standalone server
    /// (`ZooKeeperServerMain`), 2 or more an ensemble (`QuorumPeerMain`).
    pub fn servers(mut self, n: usize) -> Self {
        self.settings.servers = n;
        self
    }

    /// Observers beside the [`servers`](Self::servers) (default 0): servers that follow
    /// the leader and serve clients but do not vote, so they neither count towards a
    /// quorum nor can become leader (`peerType=observer`, `server.N=…:observer`). They
    /// are servers `servers..servers + n` of the cluster (the voters come first), in
    /// [`connect_string`](TestCluster::connect_string) and every per-server method;
    /// [`mode`](TestCluster::mode) says `"observer"`. With observers a single voter runs
    /// as an ensemble too (`standaloneEnabled=false`). Starting fails with
    /// [`io::ErrorKind::InvalidInput`] combined with [`reconfig`](Self::reconfig).
    pub fn observers(mut self, n: usize) -> Self {
        self.settings.observers = n;
        self
    }

    /// Adds `key=value` to every server's `zoo.cfg`, after the lines the harness writes,
    /// so it overrides them (ZooKeeper reads `zoo.cfg` as Java properties: the last line
    /// of a key wins): any server setting the builder has no method for, such as
    /// `maxClientCnxns`, `globalOutstandingLimit`, `snapCount` or `jute.maxbuffer`. Called
    /// again with the same key, the last value wins. The harness relies on its
    /// `clientPort`, `dataDir`, `server.N` and `4lw.commands.whitelist` lines (`srvr` is
    /// how it sees a server serve): override those and the start may fail.
    ///
    /// Starting fails with [`io::ErrorKind::InvalidInput`] for an empty key, a key with
    /// whitespace, `=`, `:` or control characters, or a value of more than one line.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = zkguard::testing::TestCluster::builder()
    ///     .property("maxClientCnxns", "2")
    ///     .start()?;
    /// assert!(cluster.four_letter(0, "conf")?.contains("maxClientCnxns=2"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn property(mut self, key: &str, value: &str) -> Self {
        self.settings
            .properties
            .push((key.to_string(), value.to_string()));
        self
    }

    /// Fixed client ports: server `i` listens on `port + i` (on 127.0.0.1) instead of on a
    /// free port picked at random; for a server at a well-known address, such as
    /// `zkguard server --port 2181`. A port that is taken fails the start (`AddrInUse`,
    /// naming it) instead of being replaced.
    pub fn client_port(mut self, port: u16) -> Self {
        self.settings.client_port = Some(port);
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

    /// `syncLimit` in ticks (default 5): how long a follower may lag the leader, and so how
    /// long a follower cut off from the quorum keeps serving its clients (`syncLimit ×
    /// tickTime`). Starting fails with [`io::ErrorKind::InvalidInput`] for 0.
    pub fn sync_limit(mut self, ticks: u32) -> Self {
        self.settings.sync_limit = ticks;
        self
    }

    /// The four-letter words the servers answer (`4lw.commands.whitelist`; default every
    /// one, `*`). `srvr` is always added: the harness asks it to see that a server serves.
    /// `&["srvr"]` is ZooKeeper's own default since 3.5.3, where `conf`, `mntr` and `envi`
    /// are refused ("… is not executed because it is not in the whitelist").
    pub fn four_letter_words(mut self, words: &[&str]) -> Self {
        let mut list: Vec<&str> = words.to_vec();
        if !list.contains(&"srvr") && !list.contains(&"*") {
            list.push("srvr");
        }
        self.settings.four_letter_words = list.join(",");
        self
    }

    /// Whether each server runs the admin server (default `false`): `admin.enableServer=true`
    /// on 127.0.0.1 and a free port of its own, [`TestCluster::admin_port`], serving
    /// `http://127.0.0.1:PORT/commands/...` (JSON). It needs Jetty on the class path: an
    /// Apache release has it in `lib/`; Debian's `zookeeper.jar` names Debian's Jetty jars
    /// in its manifest. Without Jetty the server starts without it.
    pub fn admin_server(mut self, on: bool) -> Self {
        self.settings.admin_server = on;
        self
    }

    /// Whether the servers fsync their transaction log (default `false`: `forceSync=no`,
    /// fast functional tests; benchmarks should say which they used).
    pub fn force_sync(mut self, on: bool) -> Self {
        self.settings.force_sync = on;
        self
    }

    /// How often the servers look for empty containers to delete
    /// (`znode.container.checkIntervalMs`; default 100 ms, so that a test sees an emptied
    /// lock directory go at once). ZooKeeper's own default is 60 s: give that to measure
    /// what a production server does between a lock's uses (a directory reaped while it
    /// is empty costs the next acquire its create again: docs/performance.md). At least
    /// 1 ms.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use std::time::Duration;
    /// let cluster = zkguard::testing::TestCluster::builder()
    ///     .container_check_interval(Duration::from_secs(60))
    ///     .start()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn container_check_interval(mut self, d: Duration) -> Self {
        self.settings.container_check = d.max(Duration::from_millis(1));
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
    /// names each peer's quorum and election ports by the address of a [`FaultProxy`](crate::testing::FaultProxy)
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

    /// Every server also serves TLS on a `secureClientPort` of its own, with certificates
    /// from a throwaway [`TestPki`](crate::testing::TestPki) made in the cluster's
    /// directory; `client_auth` says whether the servers demand client certificates
    /// (mutual TLS with [`ClientAuth::Need`]).
    ///
    /// The plaintext `clientPort` stays open as well: [`connect_string`](TestCluster::connect_string),
    /// the four-letter words and the readiness checks use it. TLS clients use
    /// [`secure_connect_string`](TestCluster::secure_connect_string) or
    /// [`secure_client_addr`](TestCluster::secure_client_addr) and trust
    /// [`pki`](TestCluster::pki)`().ca_cert_pem()`; the server certificate names
    /// `localhost` and `127.0.0.1`. A [`FaultProxy`](crate::testing::FaultProxy) forwards
    /// TLS like any TCP: see [`FaultProxy::for_cluster_secure`](crate::testing::FaultProxy::for_cluster_secure).
    ///
    /// The servers run ZooKeeper's `NettyServerCnxnFactory` (for both ports), with
    /// `ssl.keyStore.type=PEM` and `ssl.trustStore.type=PEM`, so Netty must be on the
    /// class path: an unpacked Apache release has it in `lib/`; with the Debian package,
    /// the jars `netty-buffer`, `netty-codec`, `netty-common`, `netty-handler` and
    /// `netty-transport` (package `libnetty-java`) are taken from `/usr/share/java`
    /// (`netty-all.jar` if the pieces are missing); a `ZKGUARD_ZOOKEEPER_CLASSPATH` is used
    /// as given. Starting fails with [`io::ErrorKind::NotFound`] naming what is missing.
    /// Kills, restarts, pauses and wipes keep the TLS settings (and the ports).
    ///
    /// # Examples
    ///
    /// ```
    /// use zkguard::testing::{ClientAuth, TestCluster};
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::builder().tls(ClientAuth::Need).start()?;
    /// let pki = cluster.pki().expect("a TLS cluster has a PKI");
    /// let addr = cluster.secure_client_addr(0).expect("a secure port");
    /// // A TLS client connects to `addr`, trusts `pki.ca_cert_pem()` and presents
    /// // `pki.client().cert_pem()` with `pki.client().key_pem()`.
    /// # let _ = (pki, addr);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls(mut self, client_auth: ClientAuth) -> Self {
        self.settings.tls = Some(client_auth);
        self
    }

    /// With [`tls`](Self::tls): the servers present a certificate that expired long ago
    /// ([`TestPki::generate_with_expired_server_cert`](crate::testing::TestPki::generate_with_expired_server_cert)),
    /// for tests that expect a client to refuse them (default `false`). Starting fails
    /// with [`io::ErrorKind::InvalidInput`] without `tls`.
    #[cfg(feature = "tls")]
    pub fn tls_expired_server_cert(mut self, on: bool) -> Self {
        self.settings.tls_expired_server_cert = on;
        self
    }

    /// The servers authenticate clients with SASL DIGEST-MD5 against these
    /// `(user, password)` pairs, and by default refuse clients that do not (see
    /// [`sasl_required`](Self::sasl_required)).
    ///
    /// The users go into a JAAS file (`jaas.conf` in the cluster's directory) with a
    /// `Server` section for `org.apache.zookeeper.server.auth.DigestLoginModule`
    /// (`user_<name>="<password>"`), passed to the servers with
    /// `-Djava.security.auth.login.config`; `zoo.cfg` gets
    /// `authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider`.
    /// Only client-to-server authentication is configured, not quorum SASL.
    ///
    /// User names may hold only ASCII letters, digits, `_` and `-`; passwords must not be
    /// empty nor hold `"`, `\` or control characters; names must be unique and the list
    /// non-empty. Otherwise [`start`](Self::start) fails with
    /// [`io::ErrorKind::InvalidInput`] naming the user.
    ///
    /// # Examples
    ///
    /// ```
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let err = TestCluster::builder()
    ///     .sasl_digest_users(&[("alice", "alice-secret"), ("bo\"b", "x")])
    ///     .start()
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// assert!(err.to_string().contains("bo\\\"b"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn sasl_digest_users(mut self, users: &[(&str, &str)]) -> Self {
        self.settings.sasl_users = Some(
            users
                .iter()
                .map(|(u, p)| ((*u).to_string(), (*p).to_string()))
                .collect(),
        );
        self
    }

    /// The servers authenticate clients with SASL GSSAPI (Kerberos) against `kdc`, and by
    /// default refuse clients that do not (see [`sasl_required`](Self::sasl_required)).
    ///
    /// At [`start`](Self::start), the principal `zookeeper/localhost@ZKGUARD.TEST` and its
    /// keytab are made with [`TestKdc::add_principal`] (see
    /// [`TestCluster::kerberos_principal`]); the servers log in with it through a JAAS file
    /// (`jaas.conf` in the cluster's directory) whose `Server` section is
    /// `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true
    /// keyTab="<keytab>" storeKey=true useTicketCache=false isInitiator=false
    /// principal="zookeeper/localhost@ZKGUARD.TEST";`, and find the KDC with
    /// `-Djava.security.krb5.conf=<kdc.krb5_conf()>`; `zoo.cfg` gets the SASL
    /// authentication provider. Every server listens on 127.0.0.1, which a client's
    /// Kerberos library canonicalizes to `localhost` by a reverse lookup (MIT's with the
    /// KDC's `krb5.conf`, `rdns = true`; Java's ZooKeeper client by default), so the one
    /// principal serves every server. That needs the machine to name 127.0.0.1 `localhost`
    /// first, as Debian's `/etc/hosts` does; elsewhere (`start` logs a warning saying so) a
    /// client names the server's host explicitly (`Kerberos::host("localhost")`). The
    /// cluster keeps the KDC alive.
    ///
    /// `isInitiator=false` (the servers only accept logins; ZooKeeper's usual JAAS
    /// section leaves it out) means a server needs no ticket of its own: it starts,
    /// restarts and accepts logins from clients that already hold a service ticket while
    /// the KDC is [stopped](TestKdc::stop). With the default `isInitiator=true` a server
    /// fetches a ticket-granting ticket when it starts and fails to start without a KDC
    /// (`LoginException: Connection refused`).
    ///
    /// A Kerberos login has the ACL identity `sasl:<principal with realm>`, e.g.
    /// `sasl:alice@ZKGUARD.TEST` (ZooKeeper's defaults
    /// `kerberos.removeHostFromPrincipal` and `kerberos.removeRealmFromPrincipal` are
    /// unset, so nothing is removed).
    ///
    /// Combines with `tls` (Kerberos logins over TLS). It cannot be combined
    /// with [`sasl_digest_users`](Self::sasl_digest_users): a ZooKeeper server whose
    /// `Server` login holds a Kerberos principal offers GSSAPI only, so
    /// [`start`](Self::start) fails with [`io::ErrorKind::InvalidInput`].
    ///
    /// # Examples
    ///
    /// ```
    /// use zkguard::testing::{TestCluster, TestKdc};
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let kdc = TestKdc::shared()?;
    /// let cluster = TestCluster::builder().kerberos(&kdc).start()?;
    /// let keytab = kdc.add_principal("alice")?;
    /// assert!(keytab.is_file());
    /// // A client logs in as alice@ZKGUARD.TEST with `keytab` to the service `zookeeper`
    /// // at 127.0.0.1, which is this principal:
    /// assert_eq!(
    ///     cluster.kerberos_principal().as_deref(),
    ///     Some("zookeeper/localhost@ZKGUARD.TEST")
    /// );
    /// # Ok(())
    /// # }
    /// ```
    pub fn kerberos(mut self, kdc: &Arc<TestKdc>) -> Self {
        self.settings.kerberos = Some(kdc.clone());
        self
    }

    /// With [`sasl_digest_users`](Self::sasl_digest_users) or [`kerberos`](Self::kerberos):
    /// whether the servers refuse every request of a client that has not authenticated with
    /// SASL (default `true`).
    ///
    /// When on, `zoo.cfg` has `enforce.auth.enabled=true`, `enforce.auth.schemes=sasl`
    /// and `sessionRequireClientSASLAuth=true`: ZooKeeper 3.8 answers the first request
    /// of an unauthenticated session with the error `SessionClosedRequireSaslAuth` (-124)
    /// and closes the connection. When off, unauthenticated clients are served and SASL
    /// only adds the `sasl` identity for ACLs.
    pub fn sasl_required(mut self, on: bool) -> Self {
        self.settings.sasl_required = on;
        self
    }

    /// Starts the servers and waits (at most 60 s) until every one of them serves.
    ///
    /// On failure every started process is killed, the temporary directory is kept, and
    /// the error names the failing server's log file and quotes its last lines.
    ///
    /// # Errors
    ///
    /// A server that does not serve within 60 s (the error names its log file and quotes
    /// its last lines), no ZooKeeper installation found, or no free ports after three tries.
    pub fn start(self) -> io::Result<TestCluster> {
        self.settings.validate()?;
        let dist = discover::discover(self.settings.tls.is_some())?;
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

pub(super) struct StartError {
    pub(super) error: io::Error,
    pub(super) port_clash: bool,
}
