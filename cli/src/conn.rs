//! How to reach ZooKeeper: the connection, TLS and SASL options, and the connect itself.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use zkguard::{Client, NodeAcl};

use crate::args::duration;
use crate::fail::{Fail, EXIT_USAGE};
use crate::say::Say;

/// How to reach ZooKeeper (every subcommand but `server`, whose help hides them). Global:
/// they may come before or after the subcommand.
#[derive(Args, Clone)]
#[command(next_help_heading = "Connection")]
pub struct Connection {
    /// ZooKeeper connect string: host:port[,host:port...][/chroot]
    #[arg(
        long,
        env = "ZK_CONNECT",
        default_value = "127.0.0.1:2181",
        global = true
    )]
    pub connect: String,
    /// Session timeout to ask for (the server may clamp it)
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "10s", global = true)]
    pub session_timeout: Duration,
    /// How long to try to establish the first session
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "15s", global = true)]
    pub connect_timeout: Duration,
    /// Digest credentials user:password (shown by ps: prefer --auth-file or ZKGUARD_AUTH)
    #[arg(
        long,
        value_name = "USER:PASSWORD",
        env = "ZKGUARD_AUTH",
        hide_env_values = true,
        global = true
    )]
    pub auth: Option<String>,
    /// Read the digest credentials user:password from this file
    #[arg(long, value_name = "FILE", conflicts_with = "auth", global = true)]
    pub auth_file: Option<PathBuf>,
    /// Connect with TLS (ZooKeeper's secureClientPort), trusting the CA certificates of
    /// this PEM file
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKGUARD_TLS_CA",
        global = true,
        help_heading = "TLS"
    )]
    pub tls_ca: Option<PathBuf>,
    /// Connect with TLS, trusting the system's certificate authorities
    #[arg(long, conflicts_with = "tls_ca", global = true, help_heading = "TLS")]
    pub tls_platform_roots: bool,
    /// Client certificate chain (PEM) for mutual TLS; needs --tls-key
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKGUARD_TLS_CERT",
        global = true,
        help_heading = "TLS"
    )]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKGUARD_TLS_KEY",
        global = true,
        help_heading = "TLS"
    )]
    pub tls_key: Option<PathBuf>,
    /// Name to verify in the servers' certificates (default: each host of --connect)
    #[arg(long, value_name = "NAME", global = true, help_heading = "TLS")]
    pub tls_server_name: Option<String>,
    // Plain help text (not a doc comment): the variable's name is not code markup in --help.
    #[arg(
        long,
        value_name = "USER",
        env = "ZKGUARD_SASL_USER",
        global = true,
        help_heading = "SASL",
        help = "Log in with SASL DIGEST-MD5 as USER; the password comes from \
                ZKGUARD_SASL_PASSWORD or --sasl-password-file, not both (never from the command \
                line, which ps shows). With --sasl-mechanism gssapi: the Kerberos principal to \
                log in as (default: the credential cache's, or the keytab's first)"
    )]
    pub sasl_user: Option<String>,
    /// Read the SASL password from this file
    #[arg(long, value_name = "FILE", global = true, help_heading = "SASL")]
    pub sasl_password_file: Option<PathBuf>,
    #[arg(
        long,
        value_name = "MECHANISM",
        env = "ZKGUARD_SASL_MECHANISM",
        value_parser = ["digest", "gssapi"],
        global = true,
        help_heading = "SASL",
        help = "The SASL mechanism: digest (DIGEST-MD5, with --sasl-user) or gssapi (Kerberos: \
                the ticket from kinit, KRB5CCNAME or KRB5_CLIENT_KTNAME, or the --sasl-keytab, \
                --sasl-ccache, --sasl-service, --sasl-host and --sasl-realm options)"
    )]
    pub sasl_mechanism: Option<String>,
    /// Kerberos: the client keytab to get tickets from (they stay in this process's memory)
    #[arg(long, value_name = "FILE", global = true, help_heading = "SASL")]
    pub sasl_keytab: Option<PathBuf>,
    /// Kerberos: the credential cache to use in place of KRB5CCNAME
    #[arg(long, value_name = "CACHE", global = true, help_heading = "SASL")]
    pub sasl_ccache: Option<PathBuf>,
    /// Kerberos: the service of the server principal SERVICE/HOST (default zookeeper)
    #[arg(long, value_name = "SERVICE", global = true, help_heading = "SASL")]
    pub sasl_service: Option<String>,
    /// Kerberos: the host of the server principal (default: each host of --connect)
    #[arg(long, value_name = "HOST", global = true, help_heading = "SASL")]
    pub sasl_host: Option<String>,
    /// Kerberos: the realm of the server principal, taken as SERVICE/HOST@REALM (default:
    /// krb5.conf's mapping of the host)
    #[arg(long, value_name = "REALM", global = true, help_heading = "SASL")]
    pub sasl_realm: Option<String>,
}

/// The environment variables zkguard reads that hold a secret: the digest credentials
/// `user:password` (`ZKGUARD_AUTH`, `--auth`'s variable) and the DIGEST-MD5 password
/// (`ZKGUARD_SASL_PASSWORD`). They are removed from the environment of the command zkguard
/// runs (and so of its children): it needs none of them, and any of them would let it, or
/// anything it runs, log in as the lock's owner and break the lock. The other variables name
/// no secret and stay: `ZK_CONNECT`, `ZKGUARD_SASL_USER`, `ZKGUARD_SASL_MECHANISM`, and the
/// paths `ZKGUARD_TLS_CA`, `ZKGUARD_TLS_CERT`, `ZKGUARD_TLS_KEY` (a file's name, not its
/// contents; Kerberos' `KRB5CCNAME` and `KRB5_CLIENT_KTNAME` likewise).
pub const SECRET_ENV: [&str; 2] = ["ZKGUARD_AUTH", "ZKGUARD_SASL_PASSWORD"];

/// Whether the cleartext warning ([`Connection::warn_cleartext`]) was said: once a run,
/// however many sessions the command makes (`doctor` makes several).
static CLEARTEXT_SAID: AtomicBool = AtomicBool::new(false);

/// The SASL login the options ask for.
enum Sasl {
    Digest(String, String),
    Gssapi,
}

impl Connection {
    /// The credentials the options give, named for messages (`None`: no identity to log in
    /// with): digest (`--auth`, `ZKGUARD_AUTH`, `--auth-file`), a SASL or Kerberos login,
    /// or a TLS client certificate.
    pub fn credentials_given(&self) -> Option<&'static str> {
        if self.auth.is_some() || self.auth_file.is_some() {
            Some("digest credentials (--auth, ZKGUARD_AUTH or --auth-file)")
        } else if self.sasl_mechanism.as_deref() == Some("gssapi") {
            Some("Kerberos (--sasl-mechanism gssapi)")
        } else if self.sasl_user.is_some() {
            Some("SASL (--sasl-user)")
        } else if self.tls_cert.is_some() {
            Some("a TLS client certificate (--tls-cert)")
        } else {
            None
        }
    }

    /// Whether TLS is on (`--tls-ca` or `--tls-platform-roots`).
    fn tls_on(&self) -> bool {
        self.tls_ca.is_some() || self.tls_platform_roots
    }

    /// Credentials, or an ACL that keeps others out (`acl`), without TLS: says once a run
    /// (unless `--quiet`) what anyone on the network path can then do, and how to turn TLS
    /// on. The library logs a warning of its own at such a login; `logging` leaves that
    /// record out, so this line is the one shown.
    pub fn warn_cleartext(&self, acl: Option<&NodeAcl>, say: Say) {
        let kept_out = acl.is_some_and(NodeAcl::keeps_others_out);
        let creds = self.credentials_given();
        if say.quiet || self.tls_on() || (creds.is_none() && !kept_out) {
            return;
        }
        if !CLEARTEXT_SAID.swap(true, Ordering::Relaxed) {
            say.say(cleartext_warning(creds, self.sasl_mechanism.as_deref()));
        }
    }

    /// The digest credentials, from `--auth`, `ZKGUARD_AUTH` or `--auth-file`.
    fn credentials(&self) -> Result<Option<String>, Fail> {
        let cred = match (&self.auth, &self.auth_file) {
            (Some(a), _) => a.clone(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .map_err(|e| {
                    Fail::new(
                        EXIT_USAGE,
                        format!("cannot read --auth-file {}: {e}", file.display()),
                    )
                })?
                .trim_end_matches(['\r', '\n'])
                .to_string(),
            (None, None) => return Ok(None),
        };
        match cred.split_once(':') {
            Some((user, _)) if !user.is_empty() => Ok(Some(cred)),
            _ => Err(Fail::new(
                EXIT_USAGE,
                "credentials must be user:password (digest)",
            )),
        }
    }

    /// The TLS settings, if TLS is on (`--tls-ca` or `--tls-platform-roots`).
    fn tls(&self) -> Result<Option<zkguard::TlsConfig>, Fail> {
        let usage = |msg: String| Fail::new(EXIT_USAGE, msg);
        let on = self.tls_ca.is_some() || self.tls_platform_roots;
        if !on {
            let stray = [
                (self.tls_cert.is_some(), "--tls-cert"),
                (self.tls_key.is_some(), "--tls-key"),
                (self.tls_server_name.is_some(), "--tls-server-name"),
            ];
            if let Some((_, flag)) = stray.iter().find(|(set, _)| *set) {
                return Err(usage(format!(
                    "{flag} needs TLS: give --tls-ca FILE or --tls-platform-roots"
                )));
            }
            return Ok(None);
        }
        let bad = |flag: &str, e: zkguard::Error| usage(format!("{flag}: {e}"));
        let mut tls = match &self.tls_ca {
            Some(ca) => zkguard::TlsConfig::ca_file(ca).map_err(|e| bad("--tls-ca", e))?,
            None => {
                zkguard::TlsConfig::platform_roots().map_err(|e| bad("--tls-platform-roots", e))?
            }
        };
        tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => tls
                .client_cert_files(cert, key)
                .map_err(|e| bad("--tls-cert/--tls-key", e))?,
            (None, None) => tls,
            (Some(_), None) => return Err(usage("--tls-cert needs --tls-key".into())),
            (None, Some(_)) => return Err(usage("--tls-key needs --tls-cert".into())),
        };
        if let Some(name) = &self.tls_server_name {
            tls = tls
                .server_name(name)
                .map_err(|e| bad("--tls-server-name", e))?;
        }
        Ok(Some(tls))
    }

    /// The SASL login: DIGEST-MD5 (`--sasl-user` with `ZKGUARD_SASL_PASSWORD` or
    /// `--sasl-password-file`) or Kerberos (`--sasl-mechanism gssapi`).
    fn sasl(&self) -> Result<Option<Sasl>, Fail> {
        let usage = |msg: String| Fail::new(EXIT_USAGE, msg);
        let kerberos_flags = [
            (self.sasl_keytab.is_some(), "--sasl-keytab"),
            (self.sasl_ccache.is_some(), "--sasl-ccache"),
            (self.sasl_service.is_some(), "--sasl-service"),
            (self.sasl_host.is_some(), "--sasl-host"),
            (self.sasl_realm.is_some(), "--sasl-realm"),
        ];
        if self.sasl_mechanism.as_deref() == Some("gssapi") {
            if self.sasl_password_file.is_some() {
                return Err(usage(
                    "--sasl-password-file is for DIGEST-MD5: a Kerberos login takes no password \
                     (kinit, or --sasl-keytab)"
                        .into(),
                ));
            }
            return Ok(Some(Sasl::Gssapi));
        }
        if let Some((_, flag)) = kerberos_flags.iter().find(|(set, _)| *set) {
            return Err(usage(format!(
                "{flag} is a Kerberos option: give --sasl-mechanism gssapi"
            )));
        }
        let Some(user) = &self.sasl_user else {
            if self.sasl_mechanism.is_some() {
                return Err(usage("--sasl-mechanism digest needs --sasl-user".into()));
            }
            if self.sasl_password_file.is_some() {
                return Err(usage("--sasl-password-file needs --sasl-user".into()));
            }
            return Ok(None);
        };
        if user.is_empty() {
            return Err(usage("--sasl-user is empty".into()));
        }
        let from_env = std::env::var_os("ZKGUARD_SASL_PASSWORD").is_some();
        if from_env && self.sasl_password_file.is_some() {
            return Err(usage(
                "--sasl-user: the password is given twice, by --sasl-password-file and by \
                 ZKGUARD_SASL_PASSWORD: give it one way"
                    .into(),
            ));
        }
        let password = match &self.sasl_password_file {
            Some(file) => std::fs::read_to_string(file)
                .map_err(|e| {
                    usage(format!(
                        "cannot read --sasl-password-file {}: {e}",
                        file.display()
                    ))
                })?
                .trim_end_matches(['\r', '\n'])
                .to_string(),
            None => std::env::var("ZKGUARD_SASL_PASSWORD").map_err(|_| {
                usage(format!(
                    "--sasl-user {user} needs a password: set ZKGUARD_SASL_PASSWORD or give \
                     --sasl-password-file FILE"
                ))
            })?,
        };
        Ok(Some(Sasl::Digest(user.clone(), password)))
    }

    /// The Kerberos login of `--sasl-mechanism gssapi`.
    #[cfg(feature = "kerberos")]
    fn kerberos(&self) -> Result<zkguard::Kerberos, Fail> {
        let mut k = zkguard::Kerberos::new();
        if let Some(p) = &self.sasl_user {
            k = k.principal(p);
        }
        if let Some(f) = &self.sasl_keytab {
            k = k.keytab(f);
        }
        if let Some(c) = &self.sasl_ccache {
            k = k.ccache(c);
        }
        if let Some(s) = &self.sasl_service {
            k = k.service(s);
        }
        if let Some(h) = &self.sasl_host {
            k = k.host(h);
        }
        if let Some(r) = &self.sasl_realm {
            k = k.realm(r);
        }
        Ok(k)
    }

    /// Without the `kerberos` feature there is no Kerberos login to make.
    #[cfg(not(feature = "kerberos"))]
    fn kerberos(&self) -> Result<std::convert::Infallible, Fail> {
        Err(Fail::new(
            EXIT_USAGE,
            "--sasl-mechanism gssapi: this zkguard was built without Kerberos (with \
             --no-default-features); install it with `cargo install --path cli`, where Kerberos \
             is a default feature",
        ))
    }

    /// Connects, or fails with a one-line error. If there is no session after a second
    /// (and the connect timeout is longer), says so on stderr: with nothing listening the
    /// client keeps trying for the whole connect timeout.
    pub fn connect(&self, say: Say) -> Result<Client, Fail> {
        self.connect_to(&self.connect, say)
    }

    /// [`connect`](Connection::connect) to `connect` in place of `--connect`, with every
    /// other option (`doctor` reaches each server of the ensemble alone this way).
    pub fn connect_to(&self, connect: &str, say: Say) -> Result<Client, Fail> {
        let mut b = Client::builder(connect)
            .session_timeout(self.session_timeout)
            .connect_timeout(self.connect_timeout);
        if let Some(cred) = self.credentials()? {
            b = b.auth("digest", cred.as_bytes());
        }
        if let Some(tls) = self.tls()? {
            b = b.tls(tls);
        }
        match self.sasl()? {
            Some(Sasl::Digest(user, password)) => b = b.sasl_digest(&user, &password),
            #[cfg(feature = "kerberos")]
            Some(Sasl::Gssapi) => b = b.sasl_kerberos(self.kerberos()?),
            #[cfg(not(feature = "kerberos"))]
            Some(Sasl::Gssapi) => match self.kerberos()? {},
            None => {}
        }
        // The options are good: about to log in.
        self.warn_cleartext(None, say);
        let (done, finished) = crossbeam_channel::bounded::<()>(0);
        if self.connect_timeout >= NOTICE_AFTER * 2 && !say.quiet {
            let (cs, timeout) = (connect.to_string(), self.connect_timeout);
            std::thread::spawn(move || {
                if finished
                    .recv_timeout(NOTICE_AFTER)
                    .is_err_and(|e| e.is_timeout())
                {
                    say.say(no_answer(&cs, timeout));
                }
            });
        }
        let client = b.build();
        drop(done);
        client.map_err(|e| Fail::zk(format_args!("cannot connect to {connect}"), e))
    }
}

/// The cleartext warning: what is given (`creds`, as [`Connection::credentials_given`]
/// names it; `None`: only an ACL that keeps others out) and what an on-path observer can
/// do with it, then how to turn TLS on.
fn cleartext_warning(creds: Option<&str>, mechanism: Option<&str>) -> String {
    let (given, reads) = match creds {
        Some(c) if c.starts_with("digest") => (
            format!("you log in with {c}"),
            "read the password, which a digest login sends as it is typed, and log in as you; ",
        ),
        Some(c) if mechanism != Some("gssapi") && c.starts_with("SASL") => (
            format!("you log in with {c}"),
            "record the DIGEST-MD5 exchange and try passwords against it offline; ",
        ),
        Some(c) => (format!("you log in with {c}"), ""),
        None => ("the nodes get an ACL that keeps others out".to_string(), ""),
    };
    format!(
        "warning: {given}, without TLS: anyone on the network path to ZooKeeper can {reads}\
         and can take this session's password from its handshake, resume the session from \
         elsewhere and close it, which deletes the held node: another process then takes the \
         lock while the command here still runs. Turn TLS on: --tls-ca FILE (the servers' CA, \
         or ZKGUARD_TLS_CA) or --tls-platform-roots, with --connect naming the servers' \
         secureClientPort (--tls-cert and --tls-key for mutual TLS)"
    )
}

/// How long a connect may take before the user is told that nothing answers yet.
const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// The notice for a connect without a session after [`NOTICE_AFTER`].
fn no_answer(cs: &str, timeout: Duration) -> String {
    format!(
        "no ZooKeeper answers at {cs} yet; still trying for up to {} (--connect-timeout). \
         Is this the right address? Set ZK_CONNECT or --connect; `zkguard server` starts a \
         local one",
        humantime::format_duration(timeout)
    )
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::Connection;

    fn parsed(args: &[&str]) -> Connection {
        // Without the variables (ZKGUARD_AUTH …) of whoever runs the tests.
        let cmd = Connection::augment_args(clap::Command::new("zkguard"))
            .mut_args(|a| a.env(None::<&str>));
        let m = cmd
            .try_get_matches_from([&["zkguard"], args].concat())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        Connection::from_arg_matches(&m).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// Every way of logging in counts as credentials for the open-ACL warning; TLS without
    /// a client certificate, or a SASL mechanism alone, does not.
    #[test]
    fn every_kind_of_credentials_is_seen() {
        for (args, kind) in [
            (&["--auth", "alice:pw"][..], "digest"),
            (&["--auth-file", "/some/file"], "digest"),
            (&["--sasl-user", "alice"], "SASL"),
            (&["--sasl-mechanism", "gssapi"], "Kerberos"),
            (
                &[
                    "--tls-ca",
                    "ca.pem",
                    "--tls-cert",
                    "c.pem",
                    "--tls-key",
                    "k.pem",
                ],
                "TLS client certificate",
            ),
        ] {
            let said = parsed(args).credentials_given();
            assert!(said.is_some_and(|s| s.contains(kind)), "{args:?}: {said:?}");
        }
        for args in [
            &[][..],
            &["--tls-ca", "ca.pem"],
            &["--sasl-mechanism", "digest"],
        ] {
            assert_eq!(parsed(args).credentials_given(), None, "{args:?}");
        }
    }
}
