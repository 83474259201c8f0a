//! Building a client: the settings, connect-string checks, and starting the connection thread.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::config::{AuthDebug, Config, SaslLogin};
use super::conn::{Rank, Ranked, Shared};
use super::{path, Client, NodeAcl, Owner};
use crate::error::{ConnectAttempt, ConnectFailure, Error, Result};

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
///
/// Its `Debug` shows no secret: the `auth` data as `digest` `user:<redacted>` (other
/// schemes' data `<redacted>` whole), a SASL DIGEST-MD5 login's user without its password.
#[derive(Clone)]
#[must_use]
pub struct ClientBuilder {
    pub(super) connect_string: String,
    pub(super) session_timeout: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) request_timeout: Option<Duration>,
    pub(super) auth: Vec<(String, Vec<u8>)>,
    pub(super) max_request: usize,
    pub(super) max_reply: usize,
    #[cfg(feature = "tls")]
    pub(super) tls: Option<super::TlsConfig>,
    pub(super) sasl: Option<SaslLogin>,
    pub(super) node_acl: NodeAcl,
    pub(super) metrics_path_labels: bool,
    pub(super) follow_ensemble: bool,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ClientBuilder");
        d.field("connect_string", &self.connect_string)
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("auth", &AuthDebug(&self.auth))
            .field("max_request", &self.max_request);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.field("sasl", &self.sasl)
            .field("node_acl", &self.node_acl)
            .field("metrics_path_labels", &self.metrics_path_labels)
            .field("follow_ensemble", &self.follow_ensemble)
            .finish()
    }
}

impl ClientBuilder {
    /// Connects with TLS (feature `tls`): every server of the connect string must be a
    /// TLS port (ZooKeeper's `secureClientPort`). See [`TlsConfig`](super::TlsConfig) for
    /// what to trust, mutual TLS and the name verified.
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let tls = zkguard::TlsConfig::ca_file("/etc/zookeeper/ca.pem")?;
    /// let client = zkguard::Client::builder("zk1:2281,zk2:2281").tls(tls).build()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: super::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Logs in with SASL DIGEST-MD5 as `user` (ZooKeeper's `DigestLoginModule`, the
    /// `user_<name>="<password>"` lines of the server's JAAS `Server` section), as
    /// ZooKeeper's own clients do: after the session handshake, on every connection, before
    /// any request is sent. Servers that require SASL (`sessionRequireClientSASLAuth` or
    /// `enforce.auth.schemes=sasl`) refuse every request of a client that has not logged in.
    ///
    /// The ACL identity of the session is then `sasl:<user>`. A wrong user or password
    /// makes [`build`](Self::build) fail with [`Error::AuthFailed`] (and closes a client
    /// whose password stops working later); it never loops. A server without SASL set up
    /// (no JAAS `Server` section), or one that cannot prove it knows the password, is that
    /// server failing with [`ConnectFailure::Sasl`].
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let client = zkguard::Client::builder("zk1:2181,zk2:2181")
    ///     .sasl_digest("alice", "alice-secret")
    ///     .build()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn sasl_digest(mut self, user: &str, password: &str) -> Self {
        self.sasl = Some(SaslLogin::Digest {
            user: user.to_string(),
            password: password.to_string(),
        });
        self
    }

    /// Logs in with Kerberos (SASL GSSAPI, feature `kerberos`), as ZooKeeper's Java client
    /// does with a JAAS `Client` section: after the session handshake, on every connection
    /// (a reconnect to another server logs in to that server), before any request is sent.
    /// One SASL login per client: this replaces a [`sasl_digest`](Self::sasl_digest) login,
    /// and the other way round. See [`Kerberos`](super::Kerberos) for the server principal
    /// and where credentials come from.
    ///
    /// The ACL identity of the session is then `sasl:<principal>` (ZooKeeper's default keeps
    /// the realm: `sasl:alice@EXAMPLE.COM`; the server's `kerberos.removeRealmFromPrincipal`
    /// drops it). A login that cannot be made makes [`build`](Self::build) fail at once with
    /// [`Error::Connect`] whose attempts say [`ConnectFailure::Kerberos`] and the
    /// [`KerberosCause`](crate::KerberosCause): no ticket, an expired ticket, an unknown
    /// server or client principal, clock skew, no GSSAPI library in this process (MIT
    /// Kerberos' `libgssapi_krb5.so.2`, loaded at the first login: Debian's
    /// `libgssapi-krb5-2`). A KDC that cannot be reached is the one cause
    /// that is retried until the connect deadline. A live client whose ticket expires keeps
    /// its session; if it has to reconnect meanwhile, it keeps trying (a `kinit` or the
    /// keytab renews the ticket) until the session expires.
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// // After `kinit alice@EXAMPLE.COM`: the ticket in the default credential cache.
    /// let client = zkguard::Client::builder("zk1.example.com:2181,zk2.example.com:2181")
    ///     .sasl_kerberos(zkguard::Kerberos::new())
    ///     .build()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "kerberos")]
    pub fn sasl_kerberos(mut self, login: super::Kerberos) -> Self {
        self.sasl = Some(SaslLogin::Kerberos(login));
        self
    }

    /// The ACL of every node the recipes of this client create (lock and election nodes,
    /// their directories, and the parents and containers made on the way), unless a recipe
    /// instance sets its own with `with_acl`. The default is [`NodeAcl::open`], everyone
    /// everything, so processes with different identities can share a lock; see
    /// [`NodeAcl`] for the presets and what a creator ACL implies. Plain
    /// [`Client::create`] calls are not affected.
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let client = zkguard::Client::builder("127.0.0.1:2181")
    ///     .sasl_digest("alice", "alice-secret")
    ///     .node_acl(zkguard::NodeAcl::creator_read())
    ///     .build()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn node_acl(mut self, acl: NodeAcl) -> Self {
        self.node_acl = acl;
        self
    }

    /// Whether the metrics of the recipes on this client carry the lock's `path` label
    /// (default false: the recipe `kind` only). Each lock path is then a series of its own:
    /// turn it on for a process with a few locks, not for one that makes a lock per job.
    /// See [`zkguard::metrics`](crate::metrics) for the metrics and their labels.
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let client = zkguard::Client::builder("127.0.0.1:2181")
    ///     .metrics_path_labels(true)
    ///     .build()?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "metrics")]
    pub fn metrics_path_labels(mut self, on: bool) -> Self {
        self.metrics_path_labels = on;
        self
    }

    /// Follows the ensemble (default off): a thread of the client (`zkguard-ensemble`)
    /// reads the ensemble's dynamic configuration ([`Client::get_config`], with a watch)
    /// and, each time its version grows, makes the servers it names the client's server
    /// list, as [`Client::update_servers`] does (moving the session if its server left, or
    /// with the probability that rebalances a grown ensemble). Observers count as servers
    /// the client may use; a server listed with no client address is left out (logged at
    /// `info`). A configuration that cannot be read, is empty or names no usable server is
    /// ignored (logged at `warn`), never applied. So is one whose version (the zxid of the
    /// reconfiguration that made it) is beyond the zxid the same server reports in its
    /// reply: no configuration that server has committed (a fake server's
    /// `version=ffffffffffffffff` would otherwise shut out every real one for good).
    /// [`Client::update_servers`] makes the thread forget the versions it applied. Servers
    /// older than 3.5 have no configuration to follow: the thread says so (at `info`) and
    /// ends.
    ///
    /// Following trusts every server in the list: a fake server in it, or a man in the
    /// middle on a cleartext link, can publish a list of its own. Use TLS
    /// ([`ClientBuilder::tls`](Self::tls)) where the link can be changed.
    ///
    /// Off by default because it trusts the ensemble's view of where clients connect: a
    /// client that reaches the servers through addresses other than the ones they publish
    /// (a proxy, NAT, a load balancer, a tunnel) would be moved off its working path. Turn
    /// it on when the configuration's client addresses are the ones this client can reach.
    /// See `docs/client.md`, "When the ensemble changes".
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let client = zkguard::Client::builder("zk1:2181,zk2:2181,zk3:2181")
    ///     .follow_ensemble(true)
    ///     .build()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn follow_ensemble(mut self, on: bool) -> Self {
        self.follow_ensemble = on;
        self
    }

    /// The session timeout to ask for (default 10 s). The server clamps it to its
    /// `[minSessionTimeout, maxSessionTimeout]` range; [`Client::session_timeout`] tells the
    /// negotiated value.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`ClientBuilder::build`] may take to establish the first session
    /// (default 15 s, as Curator's and kazoo's). Until then a server that refuses the
    /// connection or does not answer is tried again (servers that are starting are a
    /// reason to wait), and a warning is logged once every server has failed once; only a
    /// failure that retrying cannot cure (a certificate or credentials rejected by every
    /// server, or no name resolving at all) ends the wait early. A program that would
    /// rather give up soon on a wrong address sets a shorter timeout.
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

    /// The largest request the client sends, in bytes (default 1,048,575: the server's
    /// default `jute.maxbuffer`). A server closes the connection on a larger one, which
    /// every request in flight would see as a connection loss; the client refuses it
    /// instead, with [`Error::InvalidArgument`] naming the node and the size, and sends
    /// nothing. Raise it only together with the servers' `jute.maxbuffer`.
    pub fn max_request_size(mut self, bytes: usize) -> Self {
        // Lengths on the wire are signed 32-bit.
        self.max_request = bytes.min(i32::MAX as usize);
        self
    }

    /// The largest reply the client accepts, in bytes (default 64 MiB). ZooKeeper sends
    /// replies larger than its own `jute.maxbuffer` (a listing of a directory with many or
    /// long children); one over this limit is read and dropped, and only its request fails,
    /// with [`Error::Malformed`] saying so: the connection and the session go on. (A client
    /// that dropped the connection instead would list again after reconnecting, and again.)
    pub fn max_reply_size(mut self, bytes: usize) -> Self {
        self.max_reply = bytes.min(i32::MAX as usize);
        self
    }

    /// Connects: returns once a session exists, or fails by the connect deadline with an
    /// error that names every server tried and what went wrong there. With a chroot in the
    /// connect string, the chroot node must exist: if not, the error is
    /// [`Error::InvalidPath`] naming it.
    ///
    /// # Errors
    ///
    /// - [`Error::Connect`] when no session exists by the connect deadline (at once when no
    ///   server name resolves): its `attempts` hold each server with what went wrong there
    ///   ([`ConnectFailure`]), and its [`source`](std::error::Error::source) is the cause
    ///   of the last failed attempt (for a refused TCP connect, the `io::Error`);
    /// - [`Error::AuthFailed`] when the server rejects the credentials;
    /// - [`Error::InvalidArgument`] for a bad connect string (naming what is wrong in it), a
    ///   zero or overlong timeout, an empty auth scheme, or a creator
    ///   [`node_acl`](Self::node_acl) on a client without credentials; [`Error::InvalidPath`]
    ///   for a missing chroot node;
    /// - [`Error::Spawn`] when the connection thread (or, following the ensemble, its
    ///   thread) cannot be started.
    pub fn build(self) -> Result<Client> {
        let cs = path::parse_connect_string(&self.connect_string)?;
        let identity = self.check()?;
        any_resolves(&cs.hosts)?;
        #[cfg(feature = "tls")]
        let tls = match &self.tls {
            Some(t) => Some(t.build()?),
            None => None,
        };
        #[cfg(not(feature = "tls"))]
        let tls = None;
        let hosts = super::conn::shuffle(cs.hosts);
        let shared = Arc::new(Shared::new(Config {
            hosts,
            chroot: cs.chroot,
            session_timeout: self.session_timeout,
            auth: self.auth,
            max_request: self.max_request,
            max_reply: self.max_reply,
            tls,
            sasl: self.sasl,
            node_acl: self.node_acl,
            identity,
            metrics_path_labels: self.metrics_path_labels,
        }));
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("zkguard-conn".into())
            .spawn(move || {
                thread_shared.run();
                drop(done_tx);
            })
            .map_err(|e| Error::spawn("connection thread", e))?;
        let owner = Arc::new(Owner {
            shared: shared.clone(),
            thread: Mutex::new(Some(thread)),
            done: done_rx,
            janitor: Ranked::new(Rank::Janitor, Default::default()),
            tenancy: Default::default(),
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
        if self.follow_ensemble {
            super::ensemble::follow(&client)?;
        }
        Ok(client)
    }

    /// The checks of the settings, before anything is sent; whether the client has an
    /// identity (credentials, a SASL login or a client certificate).
    fn check(&self) -> Result<bool> {
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
        match &self.sasl {
            Some(SaslLogin::Digest { user, .. }) if user.is_empty() => {
                return Err(Error::InvalidArgument {
                    name: "SASL user",
                    reason: "empty".into(),
                });
            }
            #[cfg(feature = "kerberos")]
            Some(SaslLogin::Kerberos(login)) => login.check()?,
            _ => {}
        }
        if self.auth.iter().any(|(scheme, _)| scheme.is_empty()) {
            return Err(Error::InvalidArgument {
                name: "auth scheme",
                reason: "empty".into(),
            });
        }
        #[cfg(feature = "tls")]
        let cert = self.tls.as_ref().is_some_and(|t| t.has_client_cert());
        #[cfg(not(feature = "tls"))]
        let cert = false;
        let identity = !self.auth.is_empty() || self.sasl.is_some() || cert;
        self.node_acl.check_identity(
            identity,
            "every recipe of this client (ClientBuilder::node_acl)",
        )?;
        Ok(identity)
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

/// Fails at once when no host of the list can be resolved at all.
pub(super) fn any_resolves(hosts: &[String]) -> Result<()> {
    let mut failed = Vec::new();
    for h in hosts {
        match std::net::ToSocketAddrs::to_socket_addrs(h.as_str()).map(|mut a| a.next().is_some()) {
            Ok(true) => return Ok(()),
            Ok(false) => failed.push(ConnectAttempt::new(h, None, ConnectFailure::NoAddress)),
            Err(e) => failed.push(ConnectAttempt::new(
                h,
                None,
                ConnectFailure::Resolve(e.into()),
            )),
        }
    }
    Err(Error::Connect {
        attempts: failed,
        after: Duration::ZERO,
    })
}
