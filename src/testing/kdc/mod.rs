//! A throwaway MIT Kerberos KDC on loopback: [`TestKdc`].

mod setup;

use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use setup::{
    free_kdc_port, kdc_conf_text, krb5_conf_text, other, validate_principal, write, State, Tools,
};

/// The realm of every [`TestKdc`].
const REALM: &str = "ZKGUARD.TEST";
/// How long [`TestKdc::start`] waits for `krb5kdc` to serve.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// What `krb5kdc` logs once its sockets are bound.
const READY_LINE: &str = "commencing operation";
/// Starting is retried with a fresh port this many times when the port was taken.
const START_ATTEMPTS: usize = 3;

/// A throwaway MIT Kerberos KDC on 127.0.0.1 for tests (feature `testing`), with its own
/// realm `ZKGUARD.TEST`, configuration and database in a temporary directory.
///
/// [`start`](Self::start) creates the database (`kdb5_util create -s`, with a random master
/// password) and runs `krb5kdc -n` as a child process serving UDP and TCP on one free
/// loopback port ([`kdc_address`](Self::kdc_address)). The tools come from MIT Kerberos
/// (Debian/Ubuntu packages `krb5-kdc`, `krb5-admin-server`, `krb5-user`), installed when
/// missing like everything else the harness needs (see [Installing what is
/// missing](super#installing-what-is-missing)). The machine's `/etc/krb5.conf` and any
/// system KDC are never used nor touched: the tools run with `KRB5_CONFIG` and
/// `KRB5_KDC_PROFILE` pointing at this KDC's files, set for them alone.
///
/// Dropping the KDC kills `krb5kdc` and removes the directory (it is kept, and its path
/// printed, when the thread is panicking); a watchdog process does the same when the test
/// process exits without dropping it (a `static`, [`shared`](Self::shared), a crash).
///
/// # One KDC per process
///
/// Kerberos client libraries (MIT's libkrb5 and libgssapi, and so a Rust GSSAPI client)
/// read the one configuration file named by the environment variable `KRB5_CONFIG` of
/// their process. [`shared`](Self::shared) gives every test of a test binary the same KDC
/// and sets `KRB5_CONFIG` to its [`krb5_conf`](Self::krb5_conf) once; that is the way for
/// in-process clients. A test that needs a KDC of its own (to [`stop`](Self::stop) it, say)
/// belongs in a test file of its own (a separate process) that sets `KRB5_CONFIG` itself,
/// or uses `shared` there alone. Java processes are told the file with
/// `-Djava.security.krb5.conf` instead, so a [`TestCluster`](super::TestCluster) works with
/// any KDC ([`kerberos`](super::TestClusterBuilder::kerberos)).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use zkguard::testing::TestKdc;
///
/// # fn main() -> std::io::Result<()> {
/// let kdc = TestKdc::shared()?; // sets KRB5_CONFIG for this process
/// let keytab = kdc.add_principal("alice")?; // alice@ZKGUARD.TEST
/// let ccache = kdc.kinit("alice", Some(Duration::from_secs(60)))?;
/// // A client logs in with KRB5_CLIENT_KTNAME=<keytab> or KRB5CCNAME=FILE:<ccache>.
/// assert!(kdc.has_valid_ticket(&ccache)?);
/// # let _ = keytab;
/// # Ok(())
/// # }
/// ```
pub struct TestKdc {
    dir: PathBuf,
    port: Mutex<u16>,
    tools: Tools,
    state: Mutex<State>,
    /// Kills `krb5kdc` and removes `dir` when this process dies; its stdin is our pipe end.
    watchdog: Mutex<Option<(Child, Option<ChildStdin>)>>,
}

impl std::fmt::Debug for TestKdc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestKdc")
            .field("dir", &self.dir)
            .field("realm", &REALM)
            .field("kdc_address", &self.kdc_address())
            .finish_non_exhaustive()
    }
}

impl TestKdc {
    /// Starts a KDC of its own: creates its directory, configuration and database, and
    /// runs `krb5kdc` until it serves. Does not touch the process environment (see
    /// [One KDC per process](Self#one-kdc-per-process) and [`shared`](Self::shared)).
    ///
    /// # Errors
    ///
    /// MIT Kerberos missing (the error names what to install), a tool that fails (the
    /// error names the command and quotes its output), or `krb5kdc` not serving within
    /// 30 s (the error quotes its log).
    pub fn start() -> io::Result<TestKdc> {
        let tools = Tools::find()?;
        let dir = std::env::temp_dir().join(format!("zkguard-kdc-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&dir)
            .map_err(|e| other(format!("cannot create directory {}: {e}", dir.display())))?;
        let kdc = TestKdc {
            dir,
            port: Mutex::new(0),
            tools,
            state: Mutex::new(State::default()),
            watchdog: Mutex::new(None),
        };
        // From here on, Drop removes the directory on an early return.
        kdc.start_watchdog()?;
        write(&kdc.dir.join("kadm5.acl"), "")?;
        let mut attempt = 1;
        loop {
            let port = free_kdc_port()?;
            *kdc.port.lock() = port;
            write(&kdc.krb5_conf(), &krb5_conf_text(&kdc.dir, port))?;
            write(&kdc.kdc_conf(), &kdc_conf_text(&kdc.dir, port))?;
            if attempt == 1 {
                let created = Instant::now();
                let password = uuid::Uuid::new_v4().simple().to_string();
                kdc.run(
                    &kdc.tools.kdb5_util,
                    &["-r", REALM, "create", "-s", "-W", "-P", &password],
                )?;
                log::info!(
                    "zkguard TestKdc: created the database in {} ms",
                    created.elapsed().as_millis()
                );
            }
            match kdc.start_kdc() {
                Ok(()) => return Ok(kdc),
                Err(e) if attempt < START_ATTEMPTS && e.kind() == io::ErrorKind::AddrInUse => {
                    log::warn!("zkguard TestKdc: {e}; retrying with another port");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The KDC every caller in this process shares, started on first use (concurrent
    /// first calls wait for one start; a failed start is tried again by the next call).
    ///
    /// When it starts, it sets the environment variable `KRB5_CONFIG` of this process to
    /// its [`krb5_conf`](Self::krb5_conf) (once, under a lock; a value set before is
    /// replaced), so that Kerberos libraries in this process use it. It is never dropped:
    /// the watchdog kills it and removes its directory when the process exits. Do not
    /// [`stop`](Self::stop) it in one test while others use it. Changing the environment
    /// races with C code reading it in other threads (libkrb5 reads `KRB5_CONFIG` with
    /// `getenv`): call `shared` before anything in the process uses Kerberos.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn shared() -> io::Result<Arc<TestKdc>> {
        static SHARED: Mutex<Option<Arc<TestKdc>>> = parking_lot::const_mutex(None);
        let mut shared = SHARED.lock();
        if let Some(kdc) = &*shared {
            return Ok(kdc.clone());
        }
        let kdc = Arc::new(TestKdc::start()?);
        if let Some(before) = std::env::var_os("KRB5_CONFIG") {
            log::warn!(
                "zkguard TestKdc: replacing KRB5_CONFIG={} with {}",
                Path::new(&before).display(),
                kdc.krb5_conf().display()
            );
        }
        std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
        *shared = Some(kdc.clone());
        Ok(kdc)
    }

    /// The realm, `ZKGUARD.TEST`.
    pub fn realm(&self) -> &str {
        REALM
    }

    /// The `krb5.conf` for clients: `default_realm`, the KDC at
    /// [`kdc_address`](Self::kdc_address) (TCP preferred), `localhost` and `127.0.0.1` in
    /// the realm, no DNS lookups of KDCs or realms, reverse-DNS canonicalization of host
    /// names (so the GSSAPI host-based service `zookeeper@127.0.0.1` is the principal
    /// `zookeeper/localhost@ZKGUARD.TEST`), `kdc_timeout = 2s` and `max_retries = 1` (a
    /// stopped KDC is noticed quickly), `clockskew = 2` (the KDC and the servers refuse an
    /// expired ticket 2 s after its end, not after Kerberos' default 5 minutes), and a
    /// default credential cache and client keytab inside this KDC's directory, not the
    /// machine's.
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.join("krb5.conf")
    }

    /// The KDC's own `kdc.conf` (`KRB5_KDC_PROFILE`): it listens on
    /// [`kdc_address`](Self::kdc_address) only, and tickets may live from one second to
    /// seven days.
    pub fn kdc_conf(&self) -> PathBuf {
        self.dir.join("kdc.conf")
    }

    /// The KDC's address, `127.0.0.1:<port>` (UDP and TCP); the same after a restart.
    pub fn kdc_address(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, *self.port.lock()))
    }

    /// The throwaway directory: configuration, database, keytabs, credential caches and
    /// the KDC's log `kdc.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The full name of a principal: `name@ZKGUARD.TEST`.
    pub fn principal(&self, name: &str) -> String {
        format!("{name}@{REALM}")
    }

    /// Makes the principal `name@ZKGUARD.TEST` with a random key (`kadmin.local addprinc
    /// -randkey`) and exports its key to a keytab file of its own (`ktadd -k`); returns
    /// the keytab's path. Give `name` without realm: `alice`, `zookeeper/localhost`.
    /// Idempotent: a second call with the same name returns the same keytab. Works while
    /// the KDC is stopped too.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] for a name that is not valid (empty, with a realm
    /// or characters other than ASCII letters, digits, `/`, `.`, `-`, `_`); otherwise the
    /// failing `kadmin.local` command with its output.
    pub fn add_principal(&self, name: &str) -> io::Result<PathBuf> {
        validate_principal(name)?;
        let mut state = self.state.lock();
        if let Some(keytab) = state.keytabs.get(name) {
            return Ok(keytab.clone());
        }
        state.files += 1;
        let keytab = self
            .dir
            .join(format!("{}-{}.keytab", name.replace('/', "_"), state.files));
        let full = self.principal(name);
        let query = format!("addprinc -randkey {full}");
        let out = self.run(&self.tools.kadmin, &["-r", REALM, "-q", &query])?;
        // kadmin.local exits 0 even when a query fails.
        if !out.contains(&format!("Principal \"{full}\" created")) {
            return Err(other(format!("kadmin.local -q '{query}' failed: {out}")));
        }
        let query = format!("ktadd -k {} {full}", keytab.display());
        let out = self.run(&self.tools.kadmin, &["-r", REALM, "-q", &query])?;
        if !out.contains("added to keytab") || !keytab.is_file() {
            return Err(other(format!("kadmin.local -q '{query}' failed: {out}")));
        }
        state.keytabs.insert(name.to_string(), keytab.clone());
        Ok(keytab)
    }

    /// A fresh credential cache file (a new path on every call) holding a ticket-granting
    /// ticket for `name@ZKGUARD.TEST`, obtained with its keytab (`kinit -k -t <keytab> -c
    /// FILE:<path> [-l <lifetime>]`); the principal is made first when needed
    /// ([`add_principal`](Self::add_principal)). `lifetime`: how long the ticket lives
    /// (whole seconds, at least one; default 10 h): a few seconds give an expired ticket
    /// soon. Returns the path; clients name it `KRB5CCNAME=FILE:<path>`.
    ///
    /// # Errors
    ///
    /// As [`add_principal`](Self::add_principal); a `lifetime` under a second
    /// ([`io::ErrorKind::InvalidInput`]); `kinit` failing (the error names the command and
    /// quotes its output: with the KDC stopped, `Cannot contact any KDC for realm
    /// 'ZKGUARD.TEST' while getting initial credentials`).
    pub fn kinit(&self, name: &str, lifetime: Option<Duration>) -> io::Result<PathBuf> {
        let secs = match lifetime {
            Some(d) if d.as_secs() == 0 => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("kinit lifetime {d:?} is under a second"),
                ))
            }
            Some(d) => Some(format!("{}s", d.as_secs())),
            None => None,
        };
        let keytab = self.add_principal(name)?;
        let ccache = {
            let mut state = self.state.lock();
            state.files += 1;
            self.dir.join(format!("ccache-{}", state.files))
        };
        let cache = format!("FILE:{}", ccache.display());
        let keytab = keytab.to_string_lossy();
        let full = self.principal(name);
        let mut args = vec!["-k", "-t", &keytab, "-c", &cache];
        if let Some(secs) = &secs {
            args.extend(["-l", secs]);
        }
        args.push(&full);
        self.run(&self.tools.kinit, &args)?;
        Ok(ccache)
    }

    /// The JVM options that make a Java ZooKeeper client (or Curator) log in as
    /// `name@ZKGUARD.TEST` with its keytab: `-Dzookeeper.sasl.client=true`, a JAAS file
    /// (written in this KDC's directory) whose `Client` section is `Krb5LoginModule` with
    /// the keytab, and `-Djava.security.krb5.conf` naming [`krb5_conf`](Self::krb5_conf).
    /// The principal is made first when needed ([`add_principal`](Self::add_principal)).
    ///
    /// # Errors
    ///
    /// As [`add_principal`](Self::add_principal); the JAAS file cannot be written.
    pub fn java_client_options(&self, name: &str) -> io::Result<Vec<String>> {
        let keytab = self.add_principal(name)?;
        let jaas = self.dir.join(format!(
            "client-jaas-{}-{}.conf",
            name.replace('/', "_"),
            uuid::Uuid::new_v4().simple()
        ));
        let section = format!(
            "Client {{\n  com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
             keyTab=\"{}\" storeKey=true useTicketCache=false principal=\"{}\";\n}};\n",
            keytab.display(),
            self.principal(name)
        );
        write(&jaas, &section)?;
        Ok(vec![
            "-Dzookeeper.sasl.client=true".into(),
            format!("-Djava.security.auth.login.config={}", jaas.display()),
            format!("-Djava.security.krb5.conf={}", self.krb5_conf().display()),
        ])
    }

    /// Whether the credential cache file holds a ticket that has not expired (`klist -s`).
    ///
    /// # Errors
    ///
    /// `klist` cannot be run.
    pub fn has_valid_ticket(&self, ccache: &Path) -> io::Result<bool> {
        let status = self
            .command(&self.tools.klist)
            .arg("-s")
            .arg("-c")
            .arg(format!("FILE:{}", ccache.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| other(format!("cannot run {}: {e}", self.tools.klist.display())))?;
        Ok(status.success())
    }

    /// Whether `krb5kdc` is running.
    pub fn is_running(&self) -> bool {
        let mut state = self.state.lock();
        match state.kdc.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                state.kdc = None;
                false
            }
            None => false,
        }
    }

    /// Kills `krb5kdc` (SIGKILL) and waits for it: clients now get "Cannot contact any
    /// KDC" (TCP connections are refused). Principals, keytabs and credential caches stay.
    /// Does nothing when it is not running.
    ///
    /// # Errors
    ///
    /// Waiting for the process fails.
    pub fn stop(&self) -> io::Result<()> {
        let mut state = self.state.lock();
        if let Some(mut child) = state.kdc.take() {
            let _ = child.kill();
            child
                .wait()
                .map_err(|e| other(format!("waiting for krb5kdc failed: {e}")))?;
        }
        let _ = fs::remove_file(self.dir.join("kdc.pid"));
        Ok(())
    }

    /// Runs `krb5kdc` again after [`stop`](Self::stop), on the same port, and waits until
    /// it serves. Does nothing when it is running.
    ///
    /// # Errors
    ///
    /// The port was taken meanwhile ([`io::ErrorKind::AddrInUse`]), or `krb5kdc` does not
    /// serve within 30 s (the error quotes its log).
    pub fn start_again(&self) -> io::Result<()> {
        if self.is_running() {
            return Ok(());
        }
        self.start_kdc()
    }
}

impl Drop for TestKdc {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            log::warn!("zkguard TestKdc: {e}");
        }
        let panicking = std::thread::panicking();
        if panicking {
            // The watchdog must not remove what we keep.
            let _ = fs::write(self.dir.join("keep"), b"");
            eprintln!("zkguard TestKdc: keeping {}", self.dir.display());
        }
        if let Some((mut child, stdin)) = self.watchdog.lock().take() {
            drop(stdin);
            let _ = child.wait();
        }
        if !panicking {
            if let Err(e) = fs::remove_dir_all(&self.dir) {
                if e.kind() != io::ErrorKind::NotFound {
                    log::warn!("zkguard TestKdc: cannot remove {}: {e}", self.dir.display());
                }
            }
        }
    }
}
