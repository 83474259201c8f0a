//! `zkguard`: run a command under a ZooKeeper lock, or only while this process leads an
//! election; show who holds a lock or leads; start throwaway ZooKeeper servers.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod child;
mod conn;
mod doctor;
mod hold;
mod logging;
mod mkdir;
mod revoke;
mod run;
mod server;
mod show;
mod supervise;
mod tty;
mod usage;
mod watchdog;

use std::ffi::OsString;
use std::fmt::{self, Write as _};
use std::time::Duration;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

pub use conn::Connection;

/// The exit status table, shown by `--help` (and in docs/operations.md).
const EXIT_CODES: &str = "\
Exit status:
  CMD's status  CMD ran and exited with it (128+N if signal N killed it)
  0             without CMD (or with --watch): ended by SIGINT, SIGTERM or SIGHUP
  1             the lock or leadership was not obtained (--nonblock, --timeout);
                --conflict-exit-code changes it
  2             bad input: usage, a bad path, duration, option or credentials; with
                CMD, a --session-timeout below 2s (the watchdog's floor)
  69            ZooKeeper could not be reached (or started), or failed a request;
                with CMD, the server granted a session timeout below 2s
  70            internal error (signals cannot be handled, CMD cannot be waited for)
  75            the lock or leadership was lost while CMD ran; CMD was terminated
  77            ZooKeeper refused the credentials or the access (ACL), or the lock's
                directory is not safe to queue in: others may delete there, or it
                holds a node no lock made (named)
  126           CMD could not be executed
  127           CMD was not found
  128+N         zkguard got signal N (SIGINT 130, SIGTERM 143) before CMD started
  (doctor, revoke and break have tables of their own: see their --help)";

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
    /// No messages on stderr but errors
    #[arg(long, short, global = true, display_order = 900)]
    quiet: bool,
    // Plain help text (not a doc comment): the variable's name is not code markup in --help.
    #[arg(
        long,
        short,
        action = clap::ArgAction::Count,
        global = true,
        conflicts_with = "quiet",
        display_order = 901,
        help = "Show more of the library's log records on stderr: -v info, -vv debug (with \
                timestamps), -vvv trace [default: warnings; errors only with --quiet]. \
                RUST_LOG, if set, decides instead (env_logger's filters: RUST_LOG=zkguard=debug)"
    )]
    verbose: u8,
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Acquire a lock at PATH, run CMD, release when it exits; exit with CMD's status
    /// (without CMD: hold it until signalled)
    #[command(after_help = EXIT_CODES)]
    Lock(LockArgs),
    /// Run CMD only while this process leads the election at PATH (without CMD: lead
    /// until signalled)
    #[command(after_help = EXIT_CODES)]
    Elect(ElectArgs),
    /// Show who holds the lock at PATH and who waits
    Holders(ShowArgs),
    /// Show who leads the election at PATH and who waits
    Leader(ShowArgs),
    /// Check the ensemble as a lock user sees it: servers, configuration against the
    /// session timeout, latency, fsync, whoami; with --path the lock's ACLs, holders and a
    /// contention probe
    #[command(after_help = doctor::EXIT_CODES)]
    Doctor(DoctorArgs),
    /// Ask the holders of the lock at PATH to let go (Curator's Revoker: `__REVOKE__`
    /// written into their nodes; `zkguard lock` then terminates its command and releases)
    #[command(after_help = revoke::EXIT_CODES)]
    Revoke(RevokeArgs),
    /// Delete a holder's node at PATH after saying whose it is: its holder loses the lock
    /// (asks first on a terminal; --yes does not ask); waits out a frozen holder's
    /// watchdog first (--now does not)
    #[command(long_about = revoke::BREAK_ABOUT, after_help = revoke::EXIT_CODES)]
    Break(BreakArgs),
    /// Make a persistent directory for a team's locks, closed by --acl, that nobody it shuts
    /// out can delete (a marker node with the same ACL stays inside); keeps one that is
    /// closed already, refuses one that is open (77)
    #[command(after_help = mkdir::EXIT_CODES)]
    Mkdir(mkdir::MkdirArgs),
    /// Start real ZooKeeper servers on loopback for local development; print the connect
    /// string; run until Ctrl-C (only in a build with the dev-server feature)
    Server(ServerArgs),
}

/// How long to wait for the lock or leadership.
#[derive(Args, Clone, Copy)]
#[command(next_help_heading = "Waiting")]
pub struct Waiting {
    /// Give up after this long: seconds (as flock -w: 5, 0.5) or with a unit (500ms, 5m);
    /// 0 is --nonblock
    #[arg(long, short = 'w', visible_alias = "wait", value_parser = timeout, value_name = "DURATION")]
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
#[command(next_help_heading = "While CMD runs")]
pub struct Supervise {
    /// After SIGTERM (on loss), wait this long for CMD to exit, then SIGKILL its group
    #[arg(long, value_parser = duration, value_name = "DURATION", default_value = "10s")]
    pub kill_after: Duration,
    /// What to do with CMD while disconnected (the lock may or may not still be held)
    #[arg(long, value_enum, default_value_t = OnSuspend::Stop)]
    pub on_suspend: OnSuspend,
    /// The command and its arguments, after `--`; without one, hold until SIGINT, SIGTERM
    /// or SIGHUP (exit 0) or until lost (exit 75)
    #[arg(last = true, value_name = "CMD", help_heading = None)]
    pub command: Vec<OsString>,
    /// Run this shell command line with sh -c (as flock -c) instead of CMD after --
    #[arg(
        short = 'c',
        long = "command",
        value_name = "COMMAND LINE",
        conflicts_with = "command"
    )]
    pub shell: Option<OsString>,
}

impl Supervise {
    /// The command to run (empty: none, hold until signalled).
    pub fn argv(&self) -> Vec<OsString> {
        match &self.shell {
            Some(line) => vec!["sh".into(), "-c".into(), line.clone()],
            None => self.command.clone(),
        }
    }
}

/// The `--on-suspend` policies.
#[derive(ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum OnSuspend {
    /// Let CMD run on (but a frozen zkguard's watchdog still stops it)
    Ignore,
    /// SIGSTOP CMD's process group; SIGCONT once the lock is proven again with a quorum
    /// round trip; terminate it if the lock is lost
    Stop,
    /// Terminate CMD at once (as on loss) and exit with 75
    Kill,
}

/// `--acl`'s help (for `lock` and `elect`), short (`-h`) and long (`--help`). Plain help
/// text, not doc comments: ZooKeeper's ACL notation is not code markup in --help.
const ACL_HELP: &str = "ACL of the nodes it creates: open (the default: anyone may do \
    anything), creator (only the identity this client logs in as may touch them), or \
    creator-read (others may also read: holders and leader stay visible)";
const ACL_LONG_HELP: &str = "ACL of the nodes it creates: open (the default: anyone may do \
    anything, delete a held lock node too; with credentials given and no --acl, zkguard \
    warns), creator (only the identity this client logs in as may touch them), or \
    creator-read (others may also read: holders and leader stay visible).\n\n\
    With digest credentials (--auth, ZKGUARD_AUTH, --auth-file) the ACL entry is \
    digest:USER:base64(sha1(USER:PASSWORD)), an unsalted hash from which a weak password \
    can be guessed offline. ZooKeeper before 3.4.14 and 3.5.5 shows it to every reader of \
    the ACL (with creator-read: everyone); later versions show it only to sessions with \
    ADMIN on the node (the creator), others see digest:USER:x. Use a long random password, \
    or SASL (--sasl-user) or Kerberos identities, whose ACL entries hold no password hash";

/// `--trust`'s help.
const TRUST_HELP: &str = "With --acl creator or creator-read: also trust this identity \
    (as ZooKeeper writes it in an ACL, e.g. digest:admin:BASE64HASH or sasl:ops@REALM) to \
    create and delete in the lock's directory; a digest entry needs its real hash; repeat \
    for several";
const TRUST_LONG_HELP: &str = "With --acl creator or creator-read, zkguard refuses (exit 77) \
    to queue in a directory whose ACL lets any other identity create or delete nodes there \
    or change its ACL: whoever may delete in the directory may delete a held node and let a \
    second holder in while the first still runs. A directory an administrator prepared for \
    several identities is used when each of them is trusted: --trust SCHEME:ID, as ZooKeeper \
    writes the identity in an ACL (digest:admin:BASE64HASH, sasl:ops@EXAMPLE.COM, \
    x509:CN=ops); repeat for several. world and ip identities are never trusted.\n\n\
    A digest entry must be given whole, with its real hash: digest user names are not \
    identities (ZooKeeper keeps no list of users, so anyone can log in as admin with a \
    password of their own, and sessions without ADMIN on a node are shown every digest \
    entry as digest:USER:x), so --trust digest:admin:x is refused (exit 2, usage). Give \
    digest:USER:BASE64HASH, the 28-character base64 SHA-1 of USER:PASSWORD: \
    printf %s 'USER:PASSWORD' | openssl dgst -binary -sha1 | base64 (or read it with getAcl \
    as a session with ADMIN on the directory)";

/// `--acl`: a preset's name (`open`, `creator`, `creator-read`).
pub fn parse_acl(s: &str) -> Result<zkguard::NodeAcl, String> {
    s.parse()
        .map_err(|_| format!("{s:?}: use open, creator or creator-read"))
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
    /// Data of this contender's node, shown by `holders` [default: host and pid, and the
    /// granted session timeout, which `break` reads to wait out the watchdog's bound]
    #[arg(long, value_name = "TEXT")]
    pub data: Option<String>,
    #[arg(long, value_name = "ACL", value_parser = parse_acl, help = ACL_HELP, long_help = ACL_LONG_HELP)]
    pub acl: Option<zkguard::NodeAcl>,
    #[arg(long, value_name = "SCHEME:ID", requires = "acl", help = TRUST_HELP, long_help = TRUST_LONG_HELP)]
    pub trust: Vec<String>,
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
    #[arg(long, value_name = "ACL", value_parser = parse_acl, help = ACL_HELP, long_help = ACL_LONG_HELP)]
    pub acl: Option<zkguard::NodeAcl>,
    #[arg(long, value_name = "SCHEME:ID", requires = "acl", help = TRUST_HELP, long_help = TRUST_LONG_HELP)]
    pub trust: Vec<String>,
    /// Queue again after CMD exits or leadership is lost, until signalled
    #[arg(long = "loop")]
    pub repeat: bool,
    /// As zkguard exits leading (signalled, or CMD done without --loop; after CMD has
    /// exited), hand leadership to the next candidate and wait up to DURATION [default: 10s]
    /// until it leads, instead of resigning; with nobody queued behind, resign
    #[arg(
        long,
        value_name = "DURATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "10s",
        value_parser = duration
    )]
    pub hand_over_on_exit: Option<Duration>,
    /// Do not stand: print each new leader's id until Ctrl-C (as etcdctl elect -l; the
    /// same as `zkguard leader PATH --watch`)
    #[arg(
        long,
        short = 'l',
        visible_alias = "listen",
        conflicts_with_all = ["id", "repeat", "command", "shell", "hand_over_on_exit"]
    )]
    pub watch: bool,
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
    /// Keep watching: print again at each change (`leader`: each new leader's id, as
    /// etcdctl elect -l; with --json one object per line), until Ctrl-C
    #[arg(long)]
    pub watch: bool,
}

#[derive(Args)]
pub struct DoctorArgs {
    /// Also check this lock's path: the ACL of it and of every parent, its holders and
    /// waiters, and a contention probe on a scratch lock beside it. It writes beside the
    /// path: an ephemeral node (this session's identities as an ACL records them, deleted
    /// at once) and the probe's lock (deleted after)
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// One JSON object on stdout, for scripts
    #[arg(long)]
    pub json: bool,
    // Plain help text (not a doc comment): AdminServer is ZooKeeper's name, not code markup.
    #[arg(
        long,
        value_name = "PORT",
        default_value_t = 8080,
        help = "The AdminServer's port on each host (http://HOST:PORT/commands/...), asked \
                for what the four-letter words do not answer (not whitelisted)"
    )]
    pub admin_port: u16,
    /// Handoffs of the contention probe (with --path; 0 leaves the probe out)
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub probe_rounds: u32,
}

#[derive(Args)]
pub struct RevokeArgs {
    /// The lock's path
    pub path: String,
    /// Ask only this node (its name, as `zkguard holders` shows it) [default: every holder]
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Then wait this long for each holder asked to let go (its node deleted); exit 75
    /// naming each that did not
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub wait: Option<Duration>,
}

#[derive(Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["node", "holder"]))]
pub struct BreakArgs {
    /// The lock's path
    pub path: String,
    /// The node to delete (its name, as `zkguard holders` shows it)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Delete the holder's node (refused when several hold: name one with --node)
    #[arg(long)]
    pub holder: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal)
    #[arg(long, short)]
    pub yes: bool,
    /// Delete at once, without waiting out a frozen holder's watchdog (see below): for a
    /// holder known dead, its host gone, or its command seen stopped
    #[arg(long)]
    pub now: bool,
}

#[derive(Args)]
pub struct ServerArgs {
    /// How many servers (1 is standalone; 3 or 5 make an ensemble)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub servers: u16,
    /// The first server's client port (the others take the next ones) [default: a free
    /// one]; 2181 is what the other subcommands connect to by default
    #[arg(long, short, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
}

/// A duration: bare seconds (`5`, `0.5`) or humantime (`500ms`, `30s`, `5m`); zero allowed.
fn timeout(s: &str) -> Result<Duration, String> {
    let seconds = s.parse::<f64>().ok().filter(|n| n.is_finite());
    match seconds {
        Some(n) if n >= 0.0 => Duration::try_from_secs_f64(n).map_err(|e| e.to_string()),
        Some(_) => Err("must not be negative".into()),
        None => humantime::parse_duration(s).map_err(|e| format!("{e} (try 5, 500ms, 30s, 5m)")),
    }
}

/// A duration as [`timeout`] takes it, more than zero.
fn duration(s: &str) -> Result<Duration, String> {
    let d = timeout(s)?;
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
            // A node no lock made in the lock's directory is a co-tenant's: refused tenancy,
            // as an untrusted directory is (the error names the node).
            E::ForeignNode { .. } => EXIT_NOPERM,
            E::InvalidPath { .. } | E::InvalidArgument { .. } | E::PermitMismatch { .. } => {
                EXIT_USAGE
            }
            E::AuthFailed
            | E::NoAuth { .. }
            | E::InvalidAcl { .. }
            | E::UntrustedDirectory { .. }
            | E::NotOurNode { .. } => EXIT_NOPERM,
            E::Spawn { .. } => EXIT_SOFTWARE,
            _ => EXIT_UNAVAILABLE,
        };
        let hint = match e {
            E::UntrustedDirectory { .. } => {
                " (`zkguard mkdir DIR --acl creator` makes a directory only this identity may \
                 change, which nobody else can delete)"
            }
            _ => "",
        };
        Fail::new(code, format!("{context}: {e}{hint}"))
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
            logging::line(msg);
        }
    }
}

/// `v` as one line of JSON that is safe on a terminal: serde escapes the C0 controls, and
/// every other character [`zkguard::escape`] would escape (DEL, C1 controls, bidirectional
/// overrides, line separators) is written as a JSON `\uXXXX` escape, which decodes to the
/// same string. (A backslash is JSON's own escape: serde has written it as `\\` already.)
pub fn json_line(v: &serde_json::Value) -> String {
    let text = v.to_string();
    let mut out = String::with_capacity(text.len());
    let mut buf = [0u8; 4];
    for c in text.chars() {
        let one: &str = c.encode_utf8(&mut buf);
        if c != '\\' && zkguard::escape(one) != one {
            for unit in c.encode_utf16(&mut [0u16; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A lock or election path given on the command line: a valid node path
/// ([`zkguard::validate_path`], the client's own check) and not the root. Checked here so
/// a bad one fails before connecting.
pub fn check_path(path: &str) -> Result<(), Fail> {
    zkguard::validate_path(path).map_err(|e| Fail::new(EXIT_USAGE, e.to_string()))?;
    if path == "/" {
        return Err(Fail::new(
            EXIT_USAGE,
            "invalid path \"/\": the root cannot be a lock or an election; give one like \
             /locks/nightly",
        ));
    }
    Ok(())
}

/// The connection options (`server` hides them and refuses them).
fn connection_args() -> Vec<clap::Arg> {
    Connection::augment_args(clap::Command::new("zkguard"))
        .get_arguments()
        .cloned()
        .collect()
}

/// The parser: `Cli`'s, with the connection options (global, so they may come before the
/// subcommand) hidden from `server`'s help, where they do not apply: `server` has hidden
/// copies of its own, which the global ones do not replace.
fn command() -> clap::Command {
    let hidden = connection_args()
        .into_iter()
        .map(|a| a.hide(true).global(false));
    Cli::command().mut_subcommand("server", |server| server.args(hidden))
}

/// `--connect` and the other connection options given to `server`: a usage error, not
/// silently ignored (their environment variables are fine: they are meant for the others).
fn check_server_args(matches: &clap::ArgMatches) -> Result<(), Fail> {
    let Some(("server", m)) = matches.subcommand() else {
        return Ok(());
    };
    let given = |a: &clap::Arg| {
        [matches, m]
            .iter()
            .any(|m| m.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
    };
    match connection_args().into_iter().find(given) {
        Some(a) => Err(Fail::new(
            EXIT_USAGE,
            format!(
                "--{} does not apply to `zkguard server` (see zkguard server --help)",
                a.get_long().unwrap_or_default()
            ),
        )),
        None => Ok(()),
    }
}

fn main() {
    // Not `args()`: the gate's command may be any bytes.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some(watchdog::ARG) => {
            let rest: Vec<String> = args[1..]
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            std::process::exit(watchdog::main(&rest));
        }
        Some(child::GATE_ARG) => std::process::exit(child::gate(&args[1..])),
        _ => {}
    }
    let parsed = command().try_get_matches().and_then(|m| {
        let cli = Cli::from_arg_matches(&m)?;
        Ok((cli, m))
    });
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
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
            logging::line(usage::usage_error(&e));
            std::process::exit(EXIT_USAGE);
        }
    };
    logging::init(cli.verbose, cli.quiet);
    let say = Say { quiet: cli.quiet };
    let result = check_server_args(&matches).and_then(|()| match &cli.command {
        Command::Lock(args) => run::lock(&cli.conn, args, say),
        Command::Elect(args) if args.watch => {
            let show = ShowArgs {
                path: args.path.clone(),
                json: false,
                watch: true,
            };
            show::holders(&cli.conn, &show, true, say)
        }
        Command::Elect(args) => run::elect(&cli.conn, args, say),
        Command::Holders(args) => show::holders(&cli.conn, args, false, say),
        Command::Leader(args) => show::holders(&cli.conn, args, true, say),
        Command::Doctor(args) => doctor::run(&cli.conn, args, say),
        Command::Revoke(args) => revoke::revoke(&cli.conn, args, say),
        Command::Break(args) => revoke::break_lock(&cli.conn, args, say),
        Command::Mkdir(args) => mkdir::mkdir(&cli.conn, args, say),
        Command::Server(args) => server::run(args, say),
    });
    let code = match result {
        Ok(code) => code,
        Err(f) => {
            logging::line(&f.msg);
            f.code
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    /// `json_line` leaves nothing a terminal acts on (C0 and C1 controls, DEL, a bidi
    /// override, a line separator) and still decodes to the same strings.
    #[test]
    fn json_lines_are_json_and_safe_on_a_terminal() {
        let nasty = "x\x1b[2J\nHOLDER forged\u{9b}31m\u{7f}\u{202e}\u{2028}\\ é";
        let v = json!({ "data": nasty, "plain": "host-a pid 42" });
        let line = super::json_line(&v);
        assert!(
            line.chars()
                .all(|c| c == '\\' || zkguard::escape(&c.to_string()) == c.to_string()),
            "{line}"
        );
        assert!(
            line.contains("é") && line.contains("host-a pid 42"),
            "{line}"
        );
        let back: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back, v);
    }
}
