//! zkguard's messages and the library's log records, both on stderr: the records through
//! `env_logger`, at the level `-v`/`--quiet` choose unless `RUST_LOG` is set (then it
//! decides, as for every program using `env_logger`).
//!
//! Each message and each record is written to stderr with one `write` under std's stderr
//! lock: the CLI's threads and the library's never split one another's lines, and a line is
//! not cut by what the command writes to the same stderr (a pipe takes a write of up to
//! `PIPE_BUF` bytes whole).

use std::fmt;
use std::io::Write;

use log::LevelFilter;

/// The level of the library's records shown without `RUST_LOG`: warnings by default,
/// errors only with `--quiet`, info, debug, trace with `-v`, `-vv`, `-vvv`.
pub fn level(verbose: u8, quiet: bool) -> LevelFilter {
    match (quiet, verbose) {
        (true, _) => LevelFilter::Error,
        (false, 0) => LevelFilter::Warn,
        (false, 1) => LevelFilter::Info,
        (false, 2) => LevelFilter::Debug,
        (false, _) => LevelFilter::Trace,
    }
}

/// Installs the logger: records as `[LEVEL target] message` on stderr (with a timestamp
/// from `-vv` on, where timing is what one looks for). `RUST_LOG`, if set and not empty,
/// replaces the level of `-v` and `--quiet` with its own filters; `RUST_LOG_STYLE` says
/// whether to colour (by default: when stderr is a terminal).
pub fn init(verbose: u8, quiet: bool) {
    let mut b = env_logger::Builder::new();
    b.target(env_logger::Target::Stderr)
        .format_target(true)
        .format_timestamp(if verbose >= 2 {
            Some(env_logger::TimestampPrecision::Millis)
        } else {
            None
        });
    match std::env::var("RUST_LOG") {
        Ok(filters) if !filters.trim().is_empty() => b.parse_filters(&filters),
        _ => b.filter_level(level(verbose, quiet)),
    };
    b.parse_env(env_logger::Env::new().write_style("RUST_LOG_STYLE"));
    let logger = Logger(b.build());
    let max = logger.0.filter();
    // Fails only if a logger is installed already: then that one stays.
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(max);
    }
}

/// `env_logger`'s logger without the library's warning of a login without TLS: the CLI
/// says that itself, once, with its own options to turn TLS on
/// (`Connection::warn_cleartext`), and the same warning twice would be noise.
struct Logger(env_logger::Logger);

impl Logger {
    /// The library's record of a login without TLS: a warning of the module that logs in,
    /// whose text starts as that warning's does and says so. Not any record with the words
    /// in it: a path or a node's name in another warning (a lost lock's, a failed
    /// delete's) may contain them, and that warning must be shown.
    fn said_by_the_cli(record: &log::Record) -> bool {
        let text = record.args().to_string();
        record.level() == log::Level::Warn
            && record.target() == "zkguard::client::conn::connect"
            && text.starts_with("zkguard: logging in to ")
            && text.contains(" without TLS: ")
    }
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record) {
        if !Self::said_by_the_cli(record) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// Writes `zkguard: MSG` and a newline to stderr in one write.
pub fn line(msg: impl fmt::Display) {
    let text = format!("zkguard: {msg}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::Logger;

    fn left_out(target: &str, msg: &str) -> bool {
        Logger::said_by_the_cli(
            &log::Record::builder()
                .level(log::Level::Warn)
                .target(target)
                .args(format_args!("{msg}"))
                .build(),
        )
    }

    /// Only the library's own warning of a login without TLS is left out (the CLI says it
    /// itself); another warning that happens to contain the words, because a path or a
    /// node's name (the user's, or another identity's) does, is shown.
    #[test]
    fn only_the_library_s_cleartext_warning_is_left_out() {
        assert!(left_out(
            "zkguard::client::conn::connect",
            "zkguard: logging in to 127.0.0.1:2181 without TLS: anyone on the network path \
             can read the digest password (auth sends it in clear)"
        ));
        for (target, msg) in [
            (
                "zkguard::client::janitor",
                "zkguard: background delete of /jobs/without TLS/_c_a-lock-0000000001 failed: \
                 connection lost",
            ),
            (
                "zkguard::queue::enqueue",
                "zkguard: cannot delete abandoned node /x without TLS/_c_a-lock-0000000001: \
                 connection lost",
            ),
            (
                "zkguard::election::candidate",
                "zkguard: candidate \"without TLS\" in /e: connection lost; trying again in 1s",
            ),
        ] {
            assert!(!left_out(target, msg), "{msg}");
        }
    }
}
