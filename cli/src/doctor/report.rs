//! `doctor`'s report as types: each finding (its check, its level, what was seen, the fix,
//! the server or node it is about, its numbers), and the servers', the session's and the
//! path's parts. `--json` is these types serialized; the report for people (`human.rs`)
//! reads the same types.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Exit status of `doctor` (0 when every check passed).
pub const EXIT_WARN: i32 = 1;
/// Exit status of `doctor` when a check failed.
pub const EXIT_FAIL: i32 = 3;

/// How a check came out; ordered, so the worst is the largest. Its JSON is its name.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Status {
    /// Worth knowing, nothing to fix (exit 0; a report of passes and notes passes).
    Note,
    Pass,
    Warn,
    Fail,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Note => "note",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }

    /// The exit status a report whose worst finding is this one ends with.
    pub fn code(self) -> i32 {
        match self {
            Status::Pass | Status::Note => 0,
            Status::Warn => EXIT_WARN,
            Status::Fail => EXIT_FAIL,
        }
    }
}

/// Which check a finding is of (docs/operations.md describes each). Its JSON (`check`) is
/// its name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Check {
    Reachable,
    Readable,
    ConfigReadable,
    Latency,
    Fsync,
    Session,
    SessionTimeout,
    SyncWindow,
    DeadHolder,
    Whoami,
    ServerVersion,
    KnownIssue,
    WriteProbe,
    Ensemble,
    Acl,
    Holders,
    Probe,
}

impl Check {
    /// The name, as the JSON says it.
    pub fn name(self) -> &'static str {
        match self {
            Check::Reachable => "reachable",
            Check::Readable => "readable",
            Check::ConfigReadable => "config_readable",
            Check::Latency => "latency",
            Check::Fsync => "fsync",
            Check::Session => "session",
            Check::SessionTimeout => "session_timeout",
            Check::SyncWindow => "sync_window",
            Check::DeadHolder => "dead_holder",
            Check::Whoami => "whoami",
            Check::ServerVersion => "server_version",
            Check::KnownIssue => "known_issue",
            Check::WriteProbe => "write_probe",
            Check::Ensemble => "ensemble",
            Check::Acl => "acl",
            Check::Holders => "holders",
            Check::Probe => "probe",
        }
    }
}

/// Each of `Status` and `Check` is its name in the JSON.
macro_rules! by_name {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    )*};
}

by_name!(Status, Check);

/// One finding: which check, how it came out, what was seen, how to fix it.
#[derive(Debug, Serialize)]
pub struct Finding {
    pub check: Check,
    pub status: Status,
    pub message: String,
    pub fix: Option<String>,
    /// The server or node it is about.
    pub about: Option<String>,
    pub numbers: Numbers,
}

impl Finding {
    pub fn new(check: Check, status: Status, message: impl Into<String>) -> Finding {
        Finding {
            check,
            status,
            message: message.into(),
            fix: None,
            about: None,
            numbers: Numbers::None,
        }
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }

    pub fn about(mut self, what: &str) -> Finding {
        self.about = Some(what.to_string());
        self
    }

    pub fn numbers(mut self, n: Numbers) -> Finding {
        self.numbers = n;
        self
    }
}

/// The figures a finding was judged by (JSON `null` when it has none).
#[derive(Debug, Default, Serialize)]
#[serde(untagged)]
pub enum Numbers {
    #[default]
    None,
    /// `session_timeout`: the timeout asked for and granted, and the servers' bounds.
    SessionTimeout {
        asked_ms: u64,
        granted_ms: u64,
        min_ms: Option<u64>,
        max_ms: Option<u64>,
    },
    /// `sync_window`: the granted timeout against `syncLimit × tickTime`.
    SyncWindow {
        session_timeout_ms: u64,
        tick_time_ms: Option<u64>,
        sync_limit: Option<u64>,
        sync_window_ms: Option<u64>,
        /// Several servers, or one in a quorum mode (`None`: its mode was not read).
        ensemble: Option<bool>,
    },
    /// `dead_holder`: how long a dead holder keeps the lock, how soon the watchdog acts.
    DeadHolder {
        session_timeout_ms: u64,
        watchdog_ms: u64,
    },
    /// `known_issue`: the bug or vulnerability, and the releases that fix it.
    KnownIssue {
        id: &'static str,
        version: String,
        fixed_in: &'static str,
    },
    /// `write_probe`: a create and a delete through the client protocol, timed.
    WriteProbe { create_ms: f64, delete_ms: f64 },
    /// `ensemble`: the configuration's servers against the connect string's.
    Ensemble {
        /// The configuration's version, in hex.
        version: String,
        configured: Vec<String>,
        listed: Vec<String>,
        lacking: Vec<String>,
        not_members: Vec<String>,
    },
}

/// The whole report.
#[derive(Serialize)]
pub struct Report<'a> {
    /// The connect string, as given.
    pub connect: &'a str,
    /// The worst finding's status.
    pub status: Status,
    pub exit: i32,
    pub servers: Vec<ServerReport<'a>>,
    /// `None` when no session could be made.
    pub session: Option<SessionReport>,
    /// With `--path`.
    pub path: Option<PathReport>,
    pub findings: Vec<Finding>,
}

/// The smallest, mean and largest of some times (milliseconds).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Spread {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no times.
    pub fn of(ms: &[f64]) -> Option<Spread> {
        if ms.is_empty() {
            return None;
        }
        Some(Spread {
            min: ms.iter().cloned().fold(f64::INFINITY, f64::min),
            avg: ms.iter().sum::<f64>() / ms.len() as f64,
            max: ms.iter().cloned().fold(0.0, f64::max),
        })
    }
}

/// Round trips of a session to one server alone.
#[derive(Serialize)]
pub struct RoundTrips {
    #[serde(flatten)]
    pub spread: Spread,
    pub count: usize,
}

/// A word nobody answered, with why.
#[derive(Serialize)]
pub struct Unread<'a> {
    pub word: &'static str,
    pub why: &'a str,
}

/// One server as the JSON shows it (see `server::Server`).
#[derive(Serialize)]
pub struct ServerReport<'a> {
    pub address: &'a str,
    pub reachable: bool,
    pub error: Option<&'a str>,
    pub version: Option<&'a str>,
    pub mode: Option<&'a str>,
    pub rtt_ms: Option<RoundTrips>,
    /// Each word: `4lw`, `admin`, or `null` (unread).
    pub read_from: BTreeMap<&'static str, Option<&'static str>>,
    pub unread: Vec<Unread<'a>>,
    pub unreadable: Option<&'a str>,
    pub conf: &'a BTreeMap<String, String>,
    pub mntr: &'a BTreeMap<String, String>,
    pub java_version: Option<&'a str>,
}

/// The session a lock user gets, and the servers' settings that bear on it.
#[derive(Serialize)]
pub struct SessionReport {
    pub session_id: String,
    pub requested_timeout_ms: u64,
    pub negotiated_timeout_ms: u64,
    /// As `whoami` names them (`ip:127.0.0.1`, `digest:alice`).
    pub identities: Vec<String>,
    pub tick_time_ms: Option<u64>,
    pub sync_limit: Option<u64>,
    pub init_limit: Option<u64>,
    pub min_session_timeout_ms: Option<u64>,
    pub max_session_timeout_ms: Option<u64>,
}

/// `--path`: the ACLs from the path up to the root, holders and waiters, the probe.
#[derive(Serialize)]
pub struct PathReport {
    pub path: String,
    /// The root first.
    pub acl: Vec<AclRow>,
    pub holders: Holders,
    /// `None` with `--probe-rounds 0`.
    pub probe: Option<Probe>,
}

/// One node's ACL, as read (entries shown by `show::acl_entry`).
#[derive(Serialize)]
#[serde(untagged)]
pub enum AclRow {
    Read {
        path: String,
        acl: Vec<String>,
        /// The entries that let another identity in.
        open_to_others: Vec<String>,
    },
    Missing {
        path: String,
        /// Always true.
        missing: bool,
    },
    Unread {
        path: String,
        error: String,
    },
}

/// Holders and waiters: the JSON is `zkguard holders --json`'s; the rows the report for
/// people shows.
#[derive(Default, Serialize)]
#[serde(transparent)]
pub struct Holders {
    pub json: Value,
    /// Role, node name, data: as the server sent them, not escaped.
    #[serde(skip)]
    pub rows: Vec<(&'static str, String, String)>,
}

/// The contention probe's outcome.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Probe {
    /// Its two sessions could not be made.
    NoSessions { dir: String, error: String },
    /// Every handoff kept exclusion.
    Held {
        dir: String,
        handoffs: usize,
        exclusion: bool,
        handoff_ms: Spread,
        cleaned_up: bool,
    },
    /// A handoff broke, or a request failed: exclusion not known (`null`).
    Broken {
        dir: String,
        exclusion: Option<bool>,
        error: String,
        cleaned_up: bool,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The JSON keeps the shape `doctor --json` had when it was built by hand.
    #[test]
    fn findings_and_parts_serialize_as_before() {
        let f = Finding::new(Check::Whoami, Status::Pass, "seen").about("x");
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"check": "whoami", "status": "pass", "message": "seen", "fix": null,
                   "about": "x", "numbers": null})
        );
        let f = Finding::new(Check::DeadHolder, Status::Note, "m").numbers(Numbers::DeadHolder {
            session_timeout_ms: 900,
            watchdog_ms: 300,
        });
        assert_eq!(
            serde_json::to_value(&f).unwrap()["numbers"],
            json!({"session_timeout_ms": 900, "watchdog_ms": 300})
        );
        let broken = Probe::Broken {
            dir: "/d".into(),
            exclusion: None,
            error: "e".into(),
            cleaned_up: true,
        };
        assert_eq!(
            serde_json::to_value(&broken).unwrap(),
            json!({"dir": "/d", "exclusion": null, "error": "e", "cleaned_up": true})
        );
        let rows = [
            AclRow::Missing {
                path: "/a".into(),
                missing: true,
            },
            AclRow::Unread {
                path: "/".into(),
                error: "no".into(),
            },
        ];
        assert_eq!(
            serde_json::to_value(&rows).unwrap(),
            json!([{"path": "/a", "missing": true}, {"path": "/", "error": "no"}])
        );
        let rtt = RoundTrips {
            spread: Spread::of(&[1.0, 3.0]).unwrap(),
            count: 2,
        };
        assert_eq!(
            serde_json::to_value(&rtt).unwrap(),
            json!({"min": 1.0, "avg": 2.0, "max": 3.0, "count": 2})
        );
        assert!(Spread::of(&[]).is_none());
    }
}
