//! The subcommands' arguments (clap's derive; the connection options are `conn.rs`'s) and
//! the parsers and checks of their values: durations, `--acl` and `--trust`, a lock's path.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, ValueEnum};
use zkguard::NodeAcl;

use crate::fail::{Fail, EXIT_USAGE};

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

/// The ACL of `--acl` (open without it), trusting each `--trust SCHEME:ID`.
pub fn node_acl(acl: Option<&NodeAcl>, trust: &[String]) -> Result<NodeAcl, Fail> {
    let mut acl = acl.cloned().unwrap_or_default();
    for t in trust {
        let (scheme, id) = t.split_once(':').unwrap_or((t, ""));
        acl = acl
            .trusting(scheme, id)
            .map_err(|e| Fail::new(EXIT_USAGE, format!("--trust {t}: {e}")))?;
    }
    Ok(acl)
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
    /// With --hand-over-on-exit, whom to hand leadership to instead of the next candidate:
    /// `newest` (the candidate queued last: in a rolling restart, an instance already
    /// restarted) or `id:ID` (the first candidate with that --id). It is asked first; one
    /// that does not answer within the bound is passed over for the next candidate
    #[arg(
        long,
        value_name = "WHOM",
        requires = "hand_over_on_exit",
        value_parser = prefer
    )]
    pub hand_over_to: Option<zkguard::Prefer>,
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
pub fn duration(s: &str) -> Result<Duration, String> {
    let d = timeout(s)?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

/// `--hand-over-to`'s value: `newest`, or `id:ID` (a non-empty id).
pub fn prefer(s: &str) -> Result<zkguard::Prefer, String> {
    match s.strip_prefix("id:") {
        Some("") => Err("id: needs an id after it".into()),
        Some(id) => Ok(zkguard::Prefer::Id(id.to_string())),
        None if s == "newest" => Ok(zkguard::Prefer::Newest),
        None => Err(format!("{s:?}: want `newest` or `id:ID`")),
    }
}

/// A lock's or an election's path, by the library's own rule
/// ([`zkguard::validate_recipe_path`]: a valid ZooKeeper path, not the root). Checked here so
/// a bad one fails before connecting.
pub fn check_path(path: &str) -> Result<(), Fail> {
    zkguard::validate_recipe_path(path).map_err(|e| {
        // The library's rule and words; the root gets an example of what to give instead.
        let hint = if path == "/" {
            "; give one like /locks/nightly"
        } else {
            ""
        };
        Fail::new(EXIT_USAGE, format!("{e}{hint}"))
    })
}

#[derive(Args)]
pub struct MkdirArgs {
    /// The directory's path (for example /teams/payments); missing parents are made with
    /// the same ACL
    pub path: String,
    #[arg(long, value_name = "ACL", value_parser = parse_acl, help = "ACL of the directory and its marker: creator (only the identity this client logs in as) or creator-read (others may also list it)")]
    pub acl: zkguard::NodeAcl,
    #[arg(
        long,
        value_name = "SCHEME:ID",
        help = "An identity besides this one that an existing directory's ACL may let in (digest:USER:HASH, sasl:PRINCIPAL, x509:DN); repeatable"
    )]
    pub trust: Vec<String>,
}
