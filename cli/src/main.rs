//! `zkguard`: run a command under a ZooKeeper lock, or only while this process leads an
//! election; show who holds a lock or leads; start throwaway ZooKeeper servers.
//!
//! This file parses and dispatches only: the subcommands' arguments are `args.rs`'s, a
//! failure and the exit statuses `fail.rs`'s, what zkguard writes `say.rs`'s, and each
//! subcommand imports from those, never from here.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod args;
mod child;
mod conn;
mod doctor;
mod fail;
mod hold;
mod logging;
mod mkdir;
mod revoke;
mod run;
mod say;
mod server;
mod show;
mod supervise;
mod tty;
mod usage;
mod watchdog;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use args::{
    BreakArgs, DoctorArgs, ElectArgs, LockArgs, MkdirArgs, RevokeArgs, ServerArgs, ShowArgs,
};
use conn::Connection;
use fail::{Fail, EXIT_USAGE};
use say::Say;

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
    Mkdir(MkdirArgs),
    /// Start real ZooKeeper servers on loopback for local development; print the connect
    /// string; run until Ctrl-C (only in a build with the dev-server feature)
    Server(ServerArgs),
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
