//! Real ZooKeeper servers and network faults for tests (feature `testing`).
//!
//! - [`TestCluster`] starts one standalone server or an ensemble of real Apache ZooKeeper
//!   servers on free loopback ports with throwaway data directories, can stop, kill,
//!   restart, pause, resume and [`wipe`](TestCluster::wipe) single servers, can cut one
//!   server off from its peers ([`isolate`](TestCluster::isolate), with
//!   [`isolatable`](TestClusterBuilder::isolatable) ensembles), and kills everything on
//!   drop.
//! - [`FaultProxy`] sits between a client and the servers and delays, black-holes,
//!   stalls one way ([`stall_client_to_server`](FaultProxy::stall_client_to_server),
//!   [`stall_server_to_client`](FaultProxy::stall_server_to_client)),
//!   flaps ([`flap`](FaultProxy::flap)) or resets the client's traffic on command:
//!   partitions and session expiry on demand.
//! - Without a proxy: [`Client::expire_session`](crate::Client::expire_session) has the
//!   server expire a client's session now (the client hears the server say so), and
//!   [`Client::drop_connection`](crate::Client::drop_connection) cuts its connection (the
//!   session is resumed); [`TestCluster::server_of`] says which server a client is on.
//! - [`TestChroot`]: a fresh chroot per test on one server shared by the test binary.
//! - Server settings: [`observers`](TestClusterBuilder::observers), any `zoo.cfg` line
//!   ([`property`](TestClusterBuilder::property)), session bounds, `syncLimit`.
//! - Secured servers (TLS with the `tls` feature as well): `TestClusterBuilder::tls` adds a
//!   TLS `secureClientPort` to every server, with certificates from a throwaway `TestPki`
//!   (mutual TLS with [`ClientAuth::Need`]); [`sasl_digest_users`](TestClusterBuilder::sasl_digest_users)
//!   makes the servers require SASL DIGEST-MD5 logins.
//! - Kerberos: [`TestKdc`] is a throwaway MIT KDC on loopback, and
//!   [`kerberos`](TestClusterBuilder::kerberos) makes the servers require SASL GSSAPI
//!   (Kerberos) logins; see [Kerberos](#kerberos).
//!
//! ```no_run
//! use zkguard::testing::{FaultProxy, TestCluster};
//!
//! # fn main() -> std::io::Result<()> {
//! let cluster = TestCluster::start(3)?;
//! let proxy = FaultProxy::for_cluster(&cluster)?;
//! // Connect the client under test to `proxy.connect_string()`, then:
//! proxy.blackhole(); // the client's session will expire
//! proxy.heal();
//! let leader = cluster.leader().expect("an ensemble has a leader");
//! cluster.kill(leader)?; // the others elect a new leader
//! # Ok(())
//! # }
//! ```
//!
//! # Testing locks with ACLs
//!
//! Digest identities need no server configuration: give each client of your test its
//! credentials with [`ClientBuilder::auth`](crate::ClientBuilder::auth) and the recipes a
//! creator ACL ([`NodeAcl`](crate::NodeAcl)); then attack them from a client with other
//! credentials, or none. (For SASL identities, start the cluster with
//! [`sasl_digest_users`](TestClusterBuilder::sasl_digest_users).)
//!
//! ```no_run
//! use zkguard::testing::TestCluster;
//! use zkguard::{Client, Error, Mutex, NodeAcl};
//!
//! # fn main() -> zkguard::Result<()> {
//! let cluster = TestCluster::start(1)?;
//! let as_user = |user: &str| {
//!     Client::builder(&cluster.connect_string())
//!         .auth("digest", format!("{user}:{user}-password").as_bytes())
//!         .node_acl(NodeAcl::creator())
//!         .build()
//! };
//! let (app, intruder) = (as_user("app")?, as_user("intruder")?);
//! let guard = Mutex::new(&app, "/locks/job")?.acquire()?;
//! // Another identity can neither delete the held node nor queue for the lock.
//! assert!(matches!(intruder.delete(guard.path(), None), Err(Error::NoAuth { .. })));
//! assert!(matches!(
//!     Mutex::new(&intruder, "/locks/job")?.try_acquire(),
//!     Err(Error::NoAuth { .. })
//! ));
//! assert!(guard.is_valid());
//! # Ok(())
//! # }
//! ```
//!
//! # Kerberos
//!
//! [`TestKdc::shared`] starts one MIT KDC for the whole test process (realm
//! `ZKGUARD.TEST`, on a free port of 127.0.0.1, everything in a temporary directory; the
//! machine's `/etc/krb5.conf` is not used) and points the process's `KRB5_CONFIG` at its
//! `krb5.conf`, because Kerberos libraries read one configuration per process: a test
//! that needs a KDC of its own (to stop it, say) goes into a test file of its own, which
//! is a process of its own. [`TestClusterBuilder::kerberos`] starts servers that log in
//! as `zookeeper/localhost@ZKGUARD.TEST` and, unless
//! [`sasl_required(false)`](TestClusterBuilder::sasl_required), refuse clients that did
//! not log in. A client principal gets a keytab from [`TestKdc::add_principal`], or a
//! credential cache holding a ticket (of a chosen lifetime) from [`TestKdc::kinit`]; it
//! then logs in to the service `zookeeper` on host `127.0.0.1`, which the KDC's
//! `krb5.conf` canonicalizes to `localhost` (by a reverse lookup: `/etc/hosts` must name
//! 127.0.0.1 `localhost` first, as Debian's does). Its ACL identity is
//! `sasl:<name>@ZKGUARD.TEST`. [`TestKdc::stop`] and [`TestKdc::start_again`] take the KDC
//! down and back up on the same port.
//!
//! ```no_run
//! use std::time::Duration;
//! use zkguard::testing::{TestCluster, TestKdc};
//!
//! # fn main() -> std::io::Result<()> {
//! let kdc = TestKdc::shared()?; // also sets KRB5_CONFIG for this process
//! let cluster = TestCluster::builder().kerberos(&kdc).start()?;
//! let keytab = kdc.add_principal("alice")?; // alice@ZKGUARD.TEST
//! let ccache = kdc.kinit("alice", Some(Duration::from_secs(5)))?; // expires in 5 s
//! // Log in as alice with KRB5_CLIENT_KTNAME=<keytab> or KRB5CCNAME=FILE:<ccache>, to
//! // `cluster.connect_string()`; the servers are cluster.kerberos_principal().
//! # let _ = (keytab, ccache);
//! # Ok(())
//! # }
//! ```
//!
//! # Finding ZooKeeper
//!
//! The server class path is taken from, in this order:
//!
//! 1. `ZKGUARD_ZOOKEEPER_CLASSPATH`: a complete Java class path, used as given;
//! 2. `ZOOKEEPER_HOME`: an unpacked Apache ZooKeeper 3.5+ binary release
//!    (`conf/`, `lib/*.jar`, `*.jar`); an error if it holds no server jar;
//! 3. the Debian/Ubuntu package: `/usr/share/java/zookeeper.jar` (its manifest names its
//!    dependencies), plus `/usr/share/java/slf4j-simple.jar` when present so the server
//!    logs to its log file;
//! 4. unpacked releases at `/opt/zookeeper`, `/opt/apache-zookeeper*-bin` (newest first),
//!    `/usr/local/zookeeper`, `/usr/share/zookeeper`, and Homebrew's
//!    `/opt/homebrew/opt/zookeeper/libexec` and `/usr/local/opt/zookeeper/libexec`.
//!
//! `java` is `$JAVA_HOME/bin/java` when that exists, else `java` on `PATH`.
//!
//! TLS servers also need Netty's jars: an Apache release has them in `lib/`; with the
//! Debian package they come from `/usr/share/java` (package `libnetty-java`).
//!
//! # Installing what is missing
//!
//! Everything the tests need is found or installed by one mechanism: ZooKeeper
//! (Debian/Ubuntu package `zookeeper`), `java` (`default-jre-headless`), Netty for TLS
//! servers (`libnetty-java`), for [`CuratorJava`] Curator's recipes
//! (`libcurator-recipes-java`) and `javac` (`default-jdk-headless`), and for [`TestKdc`]
//! MIT Kerberos (`krb5-kdc`, `krb5-admin-server`, `krb5-user`; its tools are looked for on
//! `PATH`, then in `/usr/local/sbin`, `/usr/sbin`, `/sbin`, `/usr/local/bin`, `/usr/bin`). When something is
//! missing on a Debian-family machine and the tests run as root (a CI container, a fresh
//! machine), all the missing packages are installed with one `apt-get update` and
//! `apt-get install -y …`, at most once per package and process, while parallel tests wait
//! (and test processes running at once, such as doctests, wait up to 10 minutes for each
//! other's `apt-get`);
//! `apt-get`'s output is shown on standard error as it runs (written to the process's
//! standard error, not through `eprintln!`, so `cargo test` shows it for passing tests too;
//! on a fresh Debian 12 about 250 MB, under a minute on a fast mirror). Set `ZKGUARD_NO_INSTALL` to forbid this. Otherwise, or if the install did not
//! help, starting a cluster fails with an error naming what is missing, the exact
//! `apt-get install` command, and the environment variables that point elsewhere.
//!
//! # Server settings
//!
//! Every server gets `tickTime` 100 ms (configurable), `initLimit=10`, `syncLimit=5`
//! (configurable), session timeouts from two ticks to 60 s (configurable), all four-letter
//! words enabled (configurable; `srvr` always), no admin server (configurable), `forceSync=no` (configurable), no autopurge, containers
//! checked every 100 ms (`znode.container.checkIntervalMs`, configurable: `container_check_interval`), TTL nodes enabled
//! (`zookeeper.extendedTypesEnabled`) and a small JVM
//! (`-Xmx256m`, serial GC, C1 only). Ensembles are static (`reconfigEnabled=false`).
//!
//! With `TestClusterBuilder::tls`, every server also gets
//! `serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory`, a
//! `secureClientPort` on 127.0.0.1, `ssl.keyStore.location` / `ssl.trustStore.location`
//! with `ssl.keyStore.type=PEM` and `ssl.trustStore.type=PEM` (the files of a `TestPki`
//! in the cluster's `pki` folder) and `ssl.clientAuth` from [`ClientAuth`]; `zoo.cfg` keys
//! ZooKeeper does not know become `zookeeper.<key>` system properties, which is how the
//! `ssl.*` keys reach the server. The plaintext `clientPort` stays: readiness checks and
//! four-letter words use it. With
//! [`sasl_digest_users`](TestClusterBuilder::sasl_digest_users), a JAAS file `jaas.conf`
//! (`-Djava.security.auth.login.config`),
//! `authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider` and,
//! unless [`sasl_required(false)`](TestClusterBuilder::sasl_required),
//! `enforce.auth.enabled=true`, `enforce.auth.schemes=sasl` and
//! `sessionRequireClientSASLAuth=true` (the older 3.6 spelling of the same). With
//! [`kerberos`](TestClusterBuilder::kerberos), the same, with a Kerberos `Server` section
//! in `jaas.conf` and `-Djava.security.krb5.conf` naming the KDC's `krb5.conf`.
//!
//! # Platform
//!
//! Unix only in practice: servers are signalled with the `kill` command and a `sh`
//! watchdog kills them if the test process dies without unwinding.

mod cluster;
mod curator;
mod discover;
mod kdc;
#[cfg(feature = "tls")]
mod pki;
mod proxy;
mod shared;

pub use cluster::{ClientAuth, TestCluster, TestClusterBuilder};
pub use curator::CuratorJava;
pub use kdc::TestKdc;
#[cfg(feature = "tls")]
pub use pki::{PemPair, TestPki};
pub use proxy::FaultProxy;
pub use shared::TestChroot;
