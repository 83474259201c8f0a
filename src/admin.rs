//! Asking a ZooKeeper server about itself, outside any session: the four-letter words
//! (`srvr`, `conf`, `mntr`, `ruok` …) on its client port and the admin server's
//! `/commands/...` over HTTP, with their replies read into figures.
//!
//! Whatever listens on the address chooses what it sends, so every exchange is bounded: it
//! ends within its timeout (a server that trickles bytes or never answers is a
//! [`AdminError::NoAnswer`]) and reads at most [`MAX_REPLY`] bytes (more is
//! [`AdminError::TooLarge`], nothing of it kept). A reply is text the server chose: show it
//! through [`escape`].
//!
//! ```no_run
//! use std::time::Duration;
//! use zkguard::admin;
//!
//! let addr = "127.0.0.1:2181".parse().unwrap();
//! let srvr = admin::Srvr::parse(&admin::four_letter(addr, "srvr", Duration::from_secs(3))?);
//! println!("mode {}", zkguard::escape(srvr.mode.as_deref().unwrap_or("?")));
//! let mntr = admin::parse_mntr(&admin::four_letter(addr, "mntr", Duration::from_secs(3))?);
//! println!("avg latency {:?}", mntr.get("avg_latency"));
//! # Ok::<(), zkguard::admin::AdminError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::error::{escape, IoCause};

/// The most read of one reply: `mntr`, `conf` and `envi` answer a few KiB, `cons` and
/// `dump` on a busy server more, but not a mebibyte.
pub const MAX_REPLY: usize = 1 << 20;

/// Why a server said nothing usable.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminError {
    /// The word or command is not one (a word is four ASCII lowercase letters; a command
    /// ASCII lowercase letters and `_`): nothing was sent.
    InvalidWord {
        /// What was given.
        word: String,
    },
    /// No connection could be made.
    Connect {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: IoCause,
    },
    /// The whole reply did not come within the timeout (nothing, or a trickle): a TLS-only
    /// port answers no plain text either.
    NoAnswer {
        /// The address.
        addr: SocketAddr,
        /// The timeout that passed.
        after: Duration,
    },
    /// The reply went on past its limit ([`MAX_REPLY`] bytes unless the call set another):
    /// not read further.
    TooLarge {
        /// The address.
        addr: SocketAddr,
        /// The limit, in bytes.
        limit: usize,
    },
    /// Sending or reading failed.
    Io {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: IoCause,
    },
    /// The server refused the word: not in its `4lw.commands.whitelist` (or it answered
    /// nothing at all, as a server does with the words turned off).
    NotAllowed {
        /// The word.
        word: String,
        /// What the server said, unescaped (empty when it said nothing).
        reply: String,
    },
    /// The admin server's answer was not a 200 (`status` its status line, escaped), or not
    /// HTTP at all (`status` empty).
    Http {
        /// The command asked.
        command: String,
        /// The status line, through [`escape`].
        status: String,
    },
}

impl fmt::Display for AdminError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminError::InvalidWord { word } => write!(
                f,
                "\"{}\" is not a four-letter word or AdminServer command",
                escape(word)
            ),
            AdminError::Connect { addr, source } => write!(f, "cannot connect to {addr}: {source}"),
            AdminError::NoAnswer { addr, after } => write!(
                f,
                "no whole answer from {addr} within {} ms (a TLS-only port answers no plain text)",
                after.as_millis()
            ),
            AdminError::TooLarge { addr, limit } if limit % (1 << 20) == 0 => write!(
                f,
                "{addr} sent a reply over {} MiB, the most this call reads: not read further",
                limit >> 20
            ),
            AdminError::TooLarge { addr, limit } => write!(
                f,
                "{addr} sent a reply over {limit} bytes, the most this call reads: not read \
                 further"
            ),
            AdminError::Io { addr, source } => write!(f, "{addr}: {source}"),
            AdminError::NotAllowed { word, .. } => write!(
                f,
                "`{}` is not in 4lw.commands.whitelist (the server refused it)",
                escape(word)
            ),
            AdminError::Http { command, status } if status.is_empty() => {
                write!(f, "/commands/{command}: not an HTTP answer")
            }
            AdminError::Http { command, status } => write!(f, "/commands/{command}: {status}"),
        }
    }
}

impl std::error::Error for AdminError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AdminError::Connect { source, .. } | AdminError::Io { source, .. } => {
                Some(source.get_ref())
            }
            _ => None,
        }
    }
}

/// Sends the four-letter word `word` (`srvr`, `mntr`, `conf`, `ruok` …) to the client port
/// at `addr` and returns its reply (invalid UTF-8 replaced), read to the end within
/// `timeout`, at most [`MAX_REPLY`] bytes.
///
/// # Errors
///
/// [`AdminError::InvalidWord`] for anything but four ASCII lowercase letters,
/// [`AdminError::NotAllowed`] when the server refuses it (not whitelisted) or answers
/// nothing, and the exchange's errors: [`AdminError::Connect`], [`AdminError::NoAnswer`],
/// [`AdminError::TooLarge`], [`AdminError::Io`].
pub fn four_letter(addr: SocketAddr, word: &str, timeout: Duration) -> Result<String, AdminError> {
    four_letter_up_to(addr, word, timeout, MAX_REPLY)
}

/// [`four_letter`] reading at most `limit` bytes instead of [`MAX_REPLY`]: for the words
/// whose reply grows with the server's load (`wchc` and `wchp` list every watch, `cons`
/// every connection, `dump` every session's ephemeral nodes), on a server known to be
/// large.
///
/// # Errors
///
/// As [`four_letter`]; [`AdminError::TooLarge`] past `limit`.
///
/// ```no_run
/// use std::time::Duration;
/// let addr = "127.0.0.1:2181".parse().unwrap();
/// let watches = zkguard::admin::four_letter_up_to(addr, "wchp", Duration::from_secs(10), 64 << 20)?;
/// println!("{} watched paths", watches.lines().filter(|l| l.starts_with('/')).count());
/// # Ok::<(), zkguard::admin::AdminError>(())
/// ```
pub fn four_letter_up_to(
    addr: SocketAddr,
    word: &str,
    timeout: Duration,
    limit: usize,
) -> Result<String, AdminError> {
    if word.len() != 4 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(AdminError::InvalidWord { word: word.into() });
    }
    let reply = exchange(addr, word.as_bytes(), timeout, limit)?;
    if reply.contains("is not executed because it is not in the whitelist")
        || reply.trim().is_empty()
    {
        return Err(AdminError::NotAllowed {
            word: word.into(),
            reply,
        });
    }
    Ok(reply)
}

/// `GET /commands/COMMAND` of the admin server at `addr` (HTTP/1.0, port 8080 unless
/// `admin.serverPort` says otherwise): the body of a 200 answer, JSON, read to the end
/// within `timeout`, at most [`MAX_REPLY`] bytes in all.
///
/// # Errors
///
/// [`AdminError::InvalidWord`] for a command that is not ASCII lowercase letters and `_`,
/// [`AdminError::Http`] for an answer other than a 200, and the exchange's errors:
/// [`AdminError::Connect`], [`AdminError::NoAnswer`], [`AdminError::TooLarge`],
/// [`AdminError::Io`].
pub fn admin_command(
    addr: SocketAddr,
    command: &str,
    timeout: Duration,
) -> Result<String, AdminError> {
    if command.is_empty() || !command.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(AdminError::InvalidWord {
            word: command.into(),
        });
    }
    let req = format!("GET /commands/{command} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let reply = exchange(addr, req.as_bytes(), timeout, MAX_REPLY)?;
    let http = |status: &str| AdminError::Http {
        command: command.into(),
        status: escape(status).into_owned(),
    };
    let (head, body) = reply.split_once("\r\n\r\n").ok_or_else(|| http(""))?;
    let status = head.lines().next().unwrap_or_default();
    match status.split(' ').nth(1) {
        Some("200") if status.starts_with("HTTP/") => Ok(body.to_string()),
        _ if !status.starts_with("HTTP/") => Err(http("")),
        _ => Err(http(status)),
    }
}

/// Writes `msg` to `addr` and reads the answer to its end: all within `timeout`, at most
/// `limit` bytes.
fn exchange(
    addr: SocketAddr,
    msg: &[u8],
    timeout: Duration,
    limit: usize,
) -> Result<String, AdminError> {
    let deadline = Instant::now() + timeout;
    let no_answer = || AdminError::NoAnswer {
        addr,
        after: timeout,
    };
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(no_answer)
    };
    let io = |e: io::Error| AdminError::Io {
        addr,
        source: e.into(),
    };
    let timed_out = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    };
    let mut s = TcpStream::connect_timeout(&addr, left()?).map_err(|e| match timed_out(&e) {
        true => no_answer(),
        false => AdminError::Connect {
            addr,
            source: e.into(),
        },
    })?;
    s.set_write_timeout(Some(left()?)).map_err(io)?;
    s.write_all(msg).map_err(|e| match timed_out(&e) {
        true => no_answer(),
        false => io(e),
    })?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        s.set_read_timeout(Some(left()?)).map_err(io)?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if out.len() + n > limit => return Err(AdminError::TooLarge { addr, limit }),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if timed_out(&e) => return Err(no_answer()),
            // A server that closes with a reset after its answer: keep what came.
            Err(_) if !out.is_empty() => break,
            Err(e) => return Err(io(e)),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// What `srvr` says of the server (the `stat` word's first lines say the same).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Srvr {
    /// The `Zookeeper version:` line's text, whole (`3.8.4-9316c2a7…, built on …`).
    pub version: Option<String>,
    /// `standalone`, `leader`, `follower` or `observer` (or what a server that does not
    /// serve says in their place).
    pub mode: Option<String>,
}

impl Srvr {
    /// Reads a `srvr` reply; a line it does not know is skipped.
    ///
    /// ```
    /// let s = zkguard::admin::Srvr::parse(
    ///     "Zookeeper version: 3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c, built on 2024\n\
    ///      Latency min/avg/max: 0/0.1/3\nMode: follower\n",
    /// );
    /// assert_eq!(s.release(), Some((3, 8, 4)));
    /// assert_eq!(s.short_version().as_deref(), Some("3.8.4"));
    /// assert_eq!(s.mode.as_deref(), Some("follower"));
    /// ```
    pub fn parse(text: &str) -> Srvr {
        let line = |prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(|v| v.trim().to_string())
        };
        Srvr {
            version: line("Zookeeper version:"),
            mode: line("Mode:"),
        }
    }

    /// A `Srvr` of the given version text and mode (the admin server's `server_stats` says
    /// both, in JSON).
    pub fn new(version: Option<String>, mode: Option<String>) -> Srvr {
        Srvr { version, mode }
    }

    /// The release alone: `3.8.4` of `3.8.4-9316c2a…, built on …`.
    pub fn short_version(&self) -> Option<String> {
        let v = self.version.as_deref()?;
        v.split(['-', ',', ' ']).next().map(str::to_string)
    }

    /// The release as numbers, `(3, 8, 4)`; `None` when the version is missing or not
    /// `MAJOR.MINOR.PATCH` (trailing letters of a part are ignored: `3.9.0a` is 3.9.0).
    pub fn release(&self) -> Option<(u32, u32, u32)> {
        let short = self.short_version()?;
        let mut parts = short.split('.').map(|n| {
            let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        Some((parts.next()??, parts.next()??, parts.next()??))
    }

    /// Whether the mode is one of a server that serves clients: `standalone`, `leader`,
    /// `follower` or `observer`.
    pub fn serving(&self) -> bool {
        matches!(
            self.mode.as_deref(),
            Some("standalone" | "leader" | "follower" | "observer")
        )
    }
}

/// `mntr`'s figures, `zk_avg_latency\t0.1` as `avg_latency` → `0.1` (the `zk_` prefix
/// dropped, as the admin server's `monitor` names them). Lines without a tab are skipped.
///
/// ```
/// let m = zkguard::admin::parse_mntr("zk_version\t3.8.4\nzk_avg_latency\t0.25\n");
/// assert_eq!(m["avg_latency"], "0.25");
/// ```
pub fn parse_mntr(text: &str) -> BTreeMap<String, String> {
    key_values(text, '\t', |k| {
        k.strip_prefix("zk_").unwrap_or(k).to_string()
    })
}

/// `conf`'s settings, `tickTime=2000` as `tickTime` → `2000`. Lines without `=` are skipped.
///
/// ```
/// let c = zkguard::admin::parse_conf("clientPort=2181\ntickTime=2000\nsyncLimit=5\n");
/// assert_eq!(c["tickTime"], "2000");
/// ```
pub fn parse_conf(text: &str) -> BTreeMap<String, String> {
    key_values(text, '=', str::to_string)
}

/// The `key SEP value` lines of `text`, trimmed, the key through `name`.
fn key_values(text: &str, sep: char, name: impl Fn(&str) -> String) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(sep))
        .map(|(k, v)| (name(k.trim()), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests;
