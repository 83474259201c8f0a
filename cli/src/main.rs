//! `zkguard`: run a command under a ZooKeeper lock, or only while this process leads an
//! election; show who holds a lock or leads; start throwaway ZooKeeper servers.

mod child;
mod hold;
mod run;
mod server;
mod show;
mod tty;

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand, ValueEnum};
use zkguard::Client;

/// The exit status table, shown by `--help` (and in the README).
const EXIT_CODES: &str = "\
Exit status:
  CMD's status  CMD ran and exited with it (128+N if signal N killed it)
  1             the lock or leadership was not obtained (--nonblock, --timeout);
                --conflict-exit-code changes it
  2             bad input: usage, a bad path, duration, option or credentials
  69            ZooKeeper could not be reached (or started), or failed a request
  70            internal error (signals cannot be handled, CMD cannot be waited for)
  75            the lock or leadership was lost while CMD ran; CMD was terminated
  77            ZooKeeper refused the credentials or the access (ACL)
  126           CMD could not be executed
  127           CMD was not found
  128+N         zkguard got signal N (SIGINT 130, SIGTERM 143) before CMD started";

/// Exit status: bad input.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: ZooKeeper unreachable or failing.
pub const EXIT_UNAVAILABLE: i32 = 69;
/// Exit status: internal error.
pub const EXIT_SOFTWARE: i32 = 70;
/// Exit status: CMD could not be executed.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;
/// Exit status: CMD was not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit status: the lock or leadership was lost while CMD ran.
pub const EXIT_LOST: i32 = 75;
/// Exit status: credentials or ACL refused.
pub const EXIT_NOPERM: i32 = 77;

#[derive(Parser)]
#[command(
    name = "zkguard",
    version,
    about = "Run a command under a ZooKeeper lock, or only while this process leads",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: Command,
}

/// How to reach ZooKeeper (every subcommand but `server`).
#[derive(Args)]
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
    pub auth_file: Option<std::path::PathBuf>,
    /// Connect with TLS (ZooKeeper's secureClientPort), trusting the CA certificates of
    /// this PEM file
    #[arg(long, value_name = "FILE", env = "ZKGUARD_TLS_CA", global = true)]
    pub tls_ca: Option<std::path::PathBuf>,
    /// Connect with TLS, trusting the system's certificate authorities
    #[arg(long, conflicts_with = "tls_ca", global = true)]
    pub tls_platform_roots: bool,
    /// Client certificate chain (PEM) for mutual TLS; needs --tls-key
    #[arg(long, value_name = "FILE", env = "ZKGUARD_TLS_CERT", global = true)]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Private key (PEM) of --tls-cert
    #[arg(long, value_name = "FILE", env = "ZKGUARD_TLS_KEY", global = true)]
    pub tls_key: Option<std::path::PathBuf>,
    /// Name to verify in the servers' certificates (default: each host of --connect)
    #[arg(long, value_name = "NAME", global = true)]
    pub tls_server_name: Option<String>,
    // Plain help text (not a doc comment): the variable's name is not code markup in --help.
    #[arg(
        long,
        value_name = "USER",
        env = "ZKGUARD_SASL_USER",
        global = true,
        help = "Log in with SASL DIGEST-MD5 as USER; the password comes from \
                ZKGUARD_SASL_PASSWORD or --sasl-password-file, not both (never from the command \
                line, which ps shows)"
    )]
    pub sasl_user: Option<String>,
    /// Read the SASL password from this file
    #[arg(long, value_name = "FILE", global = true)]
    pub sasl_password_file: Option<std::path::PathBuf>,
    /// No messages on stderr but errors
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Acquire a lock at PATH, run CMD, release when it exits; exit with CMD's status
    #[command(after_help = EXIT_CODES)]
    Lock(LockArgs),
    /// Run CMD only while this process leads the election at PATH
    #[command(after_help = EXIT_CODES)]
    Elect(ElectArgs),
    /// Show who holds the lock at PATH and who waits
    Holders(ShowArgs),
    /// Show who leads the election at PATH and who waits
    Leader(ShowArgs),
    /// Start real ZooKeeper servers on loopback for local development; print the connect
    /// string; run until Ctrl-C
    Server(ServerArgs),
}

/// How long to wait for the lock or leadership.
#[derive(Args, Clone, Copy)]
pub struct Waiting {
    /// Give up after this long (humantime: 500ms, 30s, 5m)
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub timeout: Option<Duration>,
    /// Do not wait: take it only if free (a try-acquire)
    #[arg(long, short = 'n', conflicts_with = "timeout")]
    pub nonblock: bool,
    /// Exit status when the lock or leadership was not obtained (as flock -E)
    #[arg(long, short = 'E', value_name = "N", default_value_t = 1)]
    pub conflict_exit_code: u8,
}

/// What happens while CMD runs.
#[derive(Args)]
pub struct Supervise {
    /// After SIGTERM (on loss), wait this long for CMD to exit, then SIGKILL its group
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "10s")]
    pub kill_after: Duration,
    /// What to do with CMD while disconnected (the lock may or may not still be held)
    #[arg(long, value_enum, default_value_t = OnSuspend::Stop)]
    pub on_suspend: OnSuspend,
    /// The command and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// The `--on-suspend` policies.
#[derive(ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum OnSuspend {
    /// Let CMD run on
    Ignore,
    /// SIGSTOP CMD's process group; SIGCONT once the lock is proven again with a quorum
    /// round trip; terminate it if the lock is lost
    Stop,
    /// Terminate CMD at once (as on loss) and exit with 75
    Kill,
}

#[derive(Args)]
pub struct LockArgs {
    /// The lock's path (a ZooKeeper directory, for example /locks/nightly)
    pub path: String,
    /// Take the read side of a read/write lock (shared with other readers)
    #[arg(long, conflicts_with_all = ["write", "permits"])]
    pub read: bool,
    /// Take the write side of a read/write lock
    #[arg(long, conflicts_with = "permits")]
    pub write: bool,
    /// A semaphore: at most N holders at once (the count is recorded at PATH)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub permits: Option<u32>,
    /// Data of this contender's node, shown by `holders` [default: host and pid]
    #[arg(long, value_name = "TEXT")]
    pub data: Option<String>,
    #[command(flatten)]
    pub waiting: Waiting,
    #[command(flatten)]
    pub supervise: Supervise,
}

#[derive(Args)]
pub struct ElectArgs {
    /// The election's path (a ZooKeeper directory)
    pub path: String,
    /// This candidate's id, shown by `leader` [default: host and pid]
    #[arg(long)]
    pub id: Option<String>,
    /// Queue again after CMD exits or leadership is lost, until signalled
    #[arg(long = "loop")]
    pub repeat: bool,
    #[command(flatten)]
    pub waiting: Waiting,
    #[command(flatten)]
    pub supervise: Supervise,
}

#[derive(Args)]
pub struct ShowArgs {
    /// The lock's or election's path
    pub path: String,
    /// One JSON object on stdout, for scripts
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ServerArgs {
    /// How many servers (1 is standalone; 3 or 5 make an ensemble)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub servers: u16,
}

fn duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (try 500ms, 30s, 5m)"))?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

/// A failure: one line on stderr and an exit status.
#[derive(Debug)]
pub struct Fail {
    pub code: i32,
    pub msg: String,
}

impl Fail {
    pub fn new(code: i32, msg: impl Into<String>) -> Fail {
        Fail {
            code,
            msg: msg.into(),
        }
    }

    /// A ZooKeeper error, with the exit status its kind calls for.
    pub fn zk(context: impl fmt::Display, e: zkguard::Error) -> Fail {
        use zkguard::Error as E;
        let code = match e {
            E::InvalidPath { .. }
            | E::InvalidArgument { .. }
            | E::PermitMismatch { .. }
            | E::ForeignNode { .. } => EXIT_USAGE,
            E::AuthFailed | E::NoAuth { .. } | E::InvalidAcl { .. } => EXIT_NOPERM,
            E::Spawn { .. } => EXIT_SOFTWARE,
            _ => EXIT_UNAVAILABLE,
        };
        Fail::new(code, format!("{context}: {e}"))
    }
}

/// Messages on stderr, unless `--quiet`.
#[derive(Clone, Copy)]
pub struct Say {
    pub quiet: bool,
}

impl Say {
    pub fn say(&self, msg: impl fmt::Display) {
        if !self.quiet {
            eprintln!("zkguard: {msg}");
        }
    }
}

impl Connection {
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

    /// The SASL user and password (`--sasl-user` with `ZKGUARD_SASL_PASSWORD` or
    /// `--sasl-password-file`).
    fn sasl(&self) -> Result<Option<(String, String)>, Fail> {
        let usage = |msg: String| Fail::new(EXIT_USAGE, msg);
        let Some(user) = &self.sasl_user else {
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
        Ok(Some((user.clone(), password)))
    }

    /// Connects, or fails with a one-line error.
    pub fn connect(&self) -> Result<Client, Fail> {
        let mut b = Client::builder(&self.connect)
            .session_timeout(self.session_timeout)
            .connect_timeout(self.connect_timeout);
        if let Some(cred) = self.credentials()? {
            b = b.auth("digest", cred.as_bytes());
        }
        if let Some(tls) = self.tls()? {
            b = b.tls(tls);
        }
        if let Some((user, password)) = self.sasl()? {
            b = b.sasl_digest(&user, &password);
        }
        b.build()
            .map_err(|e| Fail::zk(format_args!("cannot connect to {}", self.connect), e))
    }
}

/// A path the library will look at again; caught here so a bad one fails before connecting.
pub fn check_path(path: &str) -> Result<(), Fail> {
    if !path.starts_with('/') || path == "/" || path.ends_with('/') || path.contains("//") {
        return Err(Fail::new(
            EXIT_USAGE,
            format!("invalid path {path:?}: a lock or election path is absolute, like /locks/nightly, not the root, without empty segments or a trailing slash"),
        ));
    }
    Ok(())
}

/// Clap's error as one line (the first paragraph, without the usage that follows).
fn one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.split("\n\n").next().unwrap_or_default();
    let joined = first.split_whitespace().collect::<Vec<_>>().join(" ");
    joined
        .strip_prefix("error: ")
        .unwrap_or(&joined)
        .to_string()
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            eprintln!("zkguard: {} (see zkguard --help)", one_line(&e));
            std::process::exit(EXIT_USAGE);
        }
    };
    let result = match &cli.command {
        Command::Lock(args) => run::lock(&cli.conn, args),
        Command::Elect(args) => run::elect(&cli.conn, args),
        Command::Holders(args) => show::holders(&cli.conn, args, false),
        Command::Leader(args) => show::holders(&cli.conn, args, true),
        Command::Server(args) => server::run(
            args,
            Say {
                quiet: cli.conn.quiet,
            },
        ),
    };
    let code = match result {
        Ok(code) => code,
        Err(f) => {
            eprintln!("zkguard: {}", f.msg);
            f.code
        }
    };
    std::process::exit(code);
}
