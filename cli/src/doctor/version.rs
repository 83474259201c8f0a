//! The server's release, what zkguard uses that it lacks, and its known data-loss bugs and
//! vulnerabilities: one `server_version` finding per server whose version was read, one
//! `known_issue` finding per issue of its release, and the `whoami` finding when the server
//! is too old to answer it.
//!
//! The releases CI tests are named in the README ("Supported servers"); what an older
//! release lacks is written once, in [`LATER`], and what it is known to get wrong in
//! [`KNOWN`] (from ZooKeeper's release notes and security page: `FIELD_NOTES.md` §5, §9).

use zkguard::admin::Srvr;
use zkguard::Error;

use super::report::{Check, Finding, Numbers, Status};
use super::server::Server;

/// A release as (major, minor, patch).
type Release = (u32, u32, u32);

/// A bug or vulnerability of some releases.
struct Known {
    /// The JIRA issue or the CVE.
    id: &'static str,
    /// The releases that have it: `[from, to)` ranges.
    affected: &'static [(Release, Release)],
    /// The first releases without it, as shown (one per maintained line).
    fixed_in: &'static str,
    /// What it does, and what it means for a lock user.
    what: &'static str,
    /// `fail` for data loss (what the locks stand on), `warn` for a hole an operator must
    /// close, `note` for one zkguard's recipes do not meet.
    status: Status,
}

/// What some releases are known to get wrong.
const KNOWN: &[Known] = &[
    Known {
        id: "ZOOKEEPER-4925",
        affected: &[((3, 9, 3), (3, 9, 4))],
        fixed_in: "3.9.4",
        what: "loses data: a diff sync can leave holes in a stale follower's committed log, so \
               a committed write (a lock's node, its deletion) can be missing on that server",
        status: Status::Fail,
    },
    Known {
        id: "CVE-2025-58457",
        affected: &[((3, 9, 0), (3, 9, 4))],
        fixed_in: "3.9.4",
        what: "the AdminServer's snapshot and restore commands check permissions \
               insufficiently (with the AdminServer on)",
        status: Status::Warn,
    },
    Known {
        id: "CVE-2024-51504",
        affected: &[((3, 9, 0), (3, 9, 3))],
        fixed_in: "3.9.3",
        what: "the AdminServer's IP authentication can be bypassed by spoofing (with the \
               AdminServer on)",
        status: Status::Warn,
    },
    Known {
        id: "CVE-2024-23944",
        affected: &[((3, 6, 0), (3, 8, 4)), ((3, 9, 0), (3, 9, 2))],
        fixed_in: "3.8.4 / 3.9.2",
        what: "persistent watchers learn the paths of children they may not read (zkguard's \
               recipes set no persistent watch; another client's can see lock node names: \
               do not put secrets in paths)",
        status: Status::Note,
    },
];

/// The issues of [`KNOWN`] that `release` has.
fn known(release: Release) -> impl Iterator<Item = &'static Known> {
    KNOWN.iter().filter(move |k| {
        k.affected
            .iter()
            .any(|(from, to)| *from <= release && release < *to)
    })
}

/// One `known_issue` finding per issue of `s`'s release; a note when the release could
/// not be read (the issues cannot be named).
pub fn known_issues(s: &Server) -> Vec<Finding> {
    let a = s.address.as_str();
    let Some(version) = s.version.as_deref() else {
        if !s.reachable || s.unreadable.is_some() {
            return Vec::new();
        }
        return vec![Finding::new(
            Check::KnownIssue,
            Status::Note,
            format!("{a}: its release is not known, so its known data-loss bugs and CVEs cannot be named"),
        )
        .fix("let the doctor read srvr: 4lw.commands.whitelist=srvr (ZooKeeper's default), or the AdminServer (admin.enableServer=true; doctor --admin-port PORT)")
        .about(a)];
    };
    let Some(release) = Srvr::new(Some(version.to_string()), None).release() else {
        return Vec::new(); // `server_version` says it cannot read it
    };
    let shown = zkguard::escape(version).into_owned();
    known(release)
        .map(|k| {
            let (x, y, z) = release;
            Finding::new(
                Check::KnownIssue,
                k.status,
                format!(
                    "{a}: ZooKeeper {shown} has {} ({}), fixed in {}",
                    k.id, k.what, k.fixed_in
                ),
            )
            .fix(format!(
                "upgrade the ensemble from {x}.{y}.{z} to {} or later",
                k.fixed_in
            ))
            .numbers(Numbers::KnownIssue {
                id: k.id,
                version: shown.clone(),
                fixed_in: k.fixed_in,
            })
            .about(a)
        })
        .collect()
}

/// The oldest release zkguard supports (containers, `create2`, `multi` with a check).
const OLDEST: (u32, u32, u32) = (3, 5, 0);

/// What zkguard uses that came after [`OLDEST`]: the operation, the release that brought
/// it, and what is missing without it.
const LATER: &[(&str, (u32, u32, u32), &str)] = &[(
    "whoAmI",
    (3, 7, 0),
    "the doctor cannot check that the server sees the login (locks and elections do not use it)",
)];

/// The finding for one server's release: a failure below [`OLDEST`], else a pass that
/// names what the release lacks of [`LATER`]. `None` when its version was not read (the
/// server's own findings say why).
pub fn finding(s: &Server) -> Option<Finding> {
    let shown = zkguard::escape(s.version.as_deref()?).into_owned();
    let a = s.address.as_str();
    let Some(release) = Srvr::new(s.version.clone(), None).release() else {
        return Some(
            Finding::new(
                Check::ServerVersion,
                Status::Warn,
                format!("{a}: cannot read the release in version {shown:?}"),
            )
            .about(a),
        );
    };
    if release < OLDEST {
        return Some(
            Finding::new(
                Check::ServerVersion,
                Status::Fail,
                format!("{a}: ZooKeeper {shown} is older than 3.5.0, the oldest zkguard supports"),
            )
            .fix("upgrade the ensemble to ZooKeeper 3.8 or 3.9")
            .about(a),
        );
    }
    let lacks: Vec<String> = LATER
        .iter()
        .filter(|(_, since, _)| release < *since)
        .map(|(op, (x, y, z), without)| format!("{op} (ZooKeeper {x}.{y}.{z}+): {without}"))
        .collect();
    let message = if lacks.is_empty() {
        format!("{a}: ZooKeeper {shown} has every operation zkguard uses")
    } else {
        format!("{a}: ZooKeeper {shown} lacks {}", lacks.join("; "))
    };
    Some(Finding::new(Check::ServerVersion, Status::Pass, message).about(a))
}

/// The `whoami` finding when the session's server is too old to answer it: not a warning
/// (nothing zkguard's recipes need is missing), but said.
pub fn too_old_for_whoami(e: &Error) -> Option<Finding> {
    match e {
        Error::ServerTooOld { needs, .. } => Some(Finding::new(
            Check::Whoami,
            Status::Pass,
            format!(
                "not checked: whoAmI needs ZooKeeper {needs} or later, so the doctor cannot \
                 say which identities the server sees (locks and elections do not use it)"
            ),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str) -> Finding {
        let s = Server {
            address: "127.0.0.1:2181".into(),
            version: Some(version.into()),
            ..Server::default()
        };
        finding(&s).expect("a version")
    }

    #[test]
    fn each_release_says_what_it_lacks() {
        let old = at("3.6.3");
        assert_eq!(old.status, Status::Pass);
        assert!(
            old.message
                .contains("ZooKeeper 3.6.3 lacks whoAmI (ZooKeeper 3.7.0+)"),
            "{}",
            old.message
        );
        for v in ["3.7.0", "3.8.0", "3.9.3", "3.10.1"] {
            let f = at(v);
            assert_eq!(f.status, Status::Pass, "{v}");
            assert!(
                f.message.contains("has every operation"),
                "{v}: {}",
                f.message
            );
        }
        assert_eq!(at("3.4.14").status, Status::Fail);
        assert_eq!(at("x.y").status, Status::Warn);
        assert!(finding(&Server::default()).is_none());
    }

    #[test]
    fn a_version_with_controls_is_shown_escaped() {
        let f = at("3.9.3\u{1b}[2J");
        assert!(!f.message.contains('\u{1b}'), "{:?}", f.message);
        for f in issues("3.9.3\u{1b}[2J") {
            assert!(!f.message.contains('\u{1b}'), "{:?}", f.message);
        }
    }

    fn issues(version: &str) -> Vec<Finding> {
        let s = Server {
            address: "127.0.0.1:2181".into(),
            reachable: true,
            version: Some(version.into()),
            ..Server::default()
        };
        known_issues(&s)
    }

    /// The ids of the issues of `version`, with their statuses.
    fn ids(version: &str) -> Vec<(&'static str, Status)> {
        let mut v = Vec::new();
        for f in issues(version) {
            match f.numbers {
                Numbers::KnownIssue { id, .. } => v.push((id, f.status)),
                _ => panic!("{}: no numbers", f.message),
            }
        }
        v.sort();
        v
    }

    /// Each release's issues, at the bounds of each range: the last affected release has
    /// it, the release that fixes it has not.
    #[test]
    fn the_release_table() {
        use Status::{Fail, Note, Warn};
        let cve = "CVE-2024-23944";
        assert_eq!(ids("3.5.10"), []);
        assert_eq!(ids("3.6.0"), [(cve, Note)]);
        assert_eq!(ids("3.6.3"), [(cve, Note)]);
        assert_eq!(ids("3.8.0"), [(cve, Note)]);
        assert_eq!(ids("3.8.3"), [(cve, Note)]);
        assert_eq!(ids("3.8.4"), []);
        assert_eq!(ids("3.8.6"), []);
        assert_eq!(
            ids("3.9.0"),
            [
                ("CVE-2024-23944", Note),
                ("CVE-2024-51504", Warn),
                ("CVE-2025-58457", Warn)
            ]
        );
        assert_eq!(
            ids("3.9.2"),
            [("CVE-2024-51504", Warn), ("CVE-2025-58457", Warn)]
        );
        assert_eq!(
            ids("3.9.3"),
            [("CVE-2025-58457", Warn), ("ZOOKEEPER-4925", Fail)]
        );
        assert_eq!(ids("3.9.4"), []);
        assert_eq!(ids("3.9.5"), []);
        assert_eq!(ids("3.10.0"), []);
        // Each names the release that fixes it, in the message and the fix.
        let loss = issues("3.9.3")
            .into_iter()
            .find(|f| f.message.contains("ZOOKEEPER-4925"))
            .unwrap();
        assert!(
            loss.message.contains("loses data") && loss.message.contains("fixed in 3.9.4"),
            "{}",
            loss.message
        );
        assert!(loss.fix.unwrap().contains("to 3.9.4 or later"));
        let old = &issues("3.8.0")[0];
        assert!(
            old.message.contains("fixed in 3.8.4 / 3.9.2"),
            "{}",
            old.message
        );
    }

    /// A release not read is said, with the setting that would show it; an unreadable
    /// version is `server_version`'s to say.
    #[test]
    fn an_unknown_release_names_the_setting_to_read_it() {
        let s = Server {
            address: "127.0.0.1:2181".into(),
            reachable: true,
            ..Server::default()
        };
        let f = known_issues(&s);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].status, Status::Note);
        let fix = f[0].fix.as_deref().unwrap();
        assert!(
            fix.contains("4lw.commands.whitelist") && fix.contains("admin.enableServer"),
            "{fix}"
        );
        assert!(known_issues(&Server::default()).is_empty());
        assert!(issues("x.y").is_empty());
    }

    #[test]
    fn only_a_server_too_old_for_whoami_is_said_so() {
        let e = Error::ServerTooOld {
            op: "who_am_i",
            needs: "3.7.0",
        };
        let f = too_old_for_whoami(&e).expect("a finding");
        assert_eq!(f.status, Status::Pass);
        assert!(f.message.contains("3.7.0"), "{}", f.message);
        assert!(too_old_for_whoami(&Error::ConnectionLoss).is_none());
    }
}
