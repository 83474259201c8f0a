//! The server's release and what zkguard uses that it lacks: one finding per server whose
//! version was read, and the `whoami` finding when the server is too old to answer it.
//!
//! The releases CI tests are named in the README ("Supported servers"); what an older
//! release lacks is written once, in [`LATER`].

use zkguard::admin::Srvr;
use zkguard::Error;

use super::server::Server;
use super::{Check, Finding, Status};

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
