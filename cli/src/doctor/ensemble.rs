//! `doctor`'s ensemble check: the servers of the ensemble's dynamic configuration
//! (`/zookeeper/config`, ZooKeeper 3.5+) against the servers of the connect string. A
//! server the configuration names and the connect string lacks is one a client can never
//! fail over to; one the connect string names and the configuration does not is no member
//! (removed, or another ensemble's). Either is a warning, with the connect string to use.

use std::collections::BTreeSet;
use std::net::{SocketAddr, ToSocketAddrs};

use zkguard::{escape, Client, EnsembleConfig, Error};

use super::report::{Check, Finding, Numbers, Status};

const CHECK: Check = Check::Ensemble;

/// Reads the configuration through `client` and compares it with `listed` (the connect
/// string's `host:port` entries; `chroot` its chroot, for the fix).
pub fn findings(client: &Client, listed: &[String], chroot: &str, out: &mut Vec<Finding>) {
    let data = match client.get_config() {
        Ok((data, _)) => data,
        Err(Error::NoNode { .. }) => return, // before ZooKeeper 3.5: no dynamic configuration
        Err(e) => {
            out.push(
                Finding::new(
                    CHECK,
                    Status::Warn,
                    format!("cannot read /zookeeper/config: {e}"),
                )
                .fix("check that the session may read /zookeeper/config"),
            );
            return;
        }
    };
    if let Some(f) = judge(&data, listed, chroot, &resolve) {
        out.push(f);
    }
}

/// Whether the servers form an ensemble, as `/zookeeper/config` says through `client`:
/// what the client protocol tells of the servers' mode when no `srvr` could be read.
pub fn is_ensemble(client: &Client) -> Option<bool> {
    let (data, _) = client.get_config().ok()?;
    names_an_ensemble(&data)
}

/// `Some(true)` when configuration `data` names two servers or more; `None` when it
/// cannot tell (empty: a standalone server, or none read; one server).
fn names_an_ensemble(data: &[u8]) -> Option<bool> {
    let config = EnsembleConfig::parse(data).ok()?;
    (config.servers().len() >= 2).then_some(true)
}

/// The addresses `host:port` resolves to (none if it does not).
fn resolve(host: &str) -> BTreeSet<SocketAddr> {
    host.to_socket_addrs()
        .map(|a| a.collect())
        .unwrap_or_default()
}

/// The finding for configuration `data` against the connect string's servers `listed`;
/// `None` when there is nothing to compare (a standalone server's empty configuration,
/// or one without client addresses: `reconfigEnabled=false` with `clientPort` apart).
/// Two entries are the same server when their text matches (case aside) or they resolve
/// to a common address (`resolve`, passed in for the tests).
fn judge(
    data: &[u8],
    listed: &[String],
    chroot: &str,
    resolve: &dyn Fn(&str) -> BTreeSet<SocketAddr>,
) -> Option<Finding> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let config = match EnsembleConfig::parse(data) {
        Ok(c) => c,
        Err(e) => {
            return Some(
                Finding::new(
                    CHECK,
                    Status::Warn,
                    format!("/zookeeper/config cannot be read: {e}"),
                )
                .fix("look at the servers' dynamic configuration files"),
            )
        }
    };
    let members = config.client_hosts();
    if members.is_empty() {
        return None;
    }
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b) || !resolve(a).is_disjoint(&resolve(b));
    let lacking: Vec<&String> = (members.iter())
        .filter(|m| !listed.iter().any(|l| same(m, l)))
        .collect();
    let extra: Vec<&String> = (listed.iter())
        .filter(|l| !members.iter().any(|m| same(m, l)))
        .collect();
    let version = config.version();
    let numbers = Numbers::Ensemble {
        version: format!("{version:x}"),
        configured: members.clone(),
        listed: listed.to_vec(),
        lacking: lacking.iter().map(|s| s.to_string()).collect(),
        not_members: extra.iter().map(|s| s.to_string()).collect(),
    };
    let shown = |v: &[&String]| {
        escape(&v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")).into_owned()
    };
    if lacking.is_empty() && extra.is_empty() {
        return Some(
            Finding::new(
                CHECK,
                Status::Pass,
                format!(
                    "the connect string names the {} servers of the ensemble's configuration \
                     (version {version:x})",
                    members.len()
                ),
            )
            .numbers(numbers),
        );
    }
    let mut said = Vec::new();
    if !lacking.is_empty() {
        said.push(format!(
            "the ensemble's configuration (version {version:x}) has servers the connect \
             string lacks: {} (a client cannot fail over to them)",
            shown(&lacking)
        ));
    }
    if !extra.is_empty() {
        said.push(format!(
            "the connect string names servers that are not in the ensemble's configuration: \
             {} (removed, or another ensemble's)",
            shown(&extra)
        ));
    }
    let fix = format!(
        "connect with {}{chroot} (or build clients with follow_ensemble(true), which keeps \
         the list the configuration's)",
        escape(&members.join(","))
    );
    Some(
        Finding::new(CHECK, Status::Warn, said.join("; "))
            .fix(fix)
            .numbers(numbers),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resolution without DNS: `127.0.0.1:p` and `localhost:p` are one address.
    fn loopback(host: &str) -> BTreeSet<SocketAddr> {
        let host = host.replace("localhost", "127.0.0.1");
        host.parse().into_iter().collect()
    }

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Without `srvr`, the configuration tells an ensemble (servers without client
    /// addresses count: `reconfigEnabled=false`); it cannot tell a standalone server.
    #[test]
    fn the_configuration_tells_an_ensemble_when_srvr_cannot() {
        let three = b"server.1=a:1:2\nserver.2=b:1:2\nserver.3=c:1:2;c:2181\nversion=0";
        assert_eq!(names_an_ensemble(three), Some(true));
        assert_eq!(names_an_ensemble(b"server.1=a:1:2;a:2181\nversion=0"), None);
        assert_eq!(names_an_ensemble(b""), None);
        assert_eq!(names_an_ensemble(b"garbage"), None);
    }

    const CONFIG: &[u8] = b"server.1=127.0.0.1:1:2;127.0.0.1:2181\n\
        server.2=127.0.0.1:3:4:observer;127.0.0.1:2182\nversion=10";

    #[test]
    fn the_same_servers_pass_whatever_their_names() {
        let f = judge(
            CONFIG,
            &list(&["localhost:2182", "127.0.0.1:2181"]),
            "",
            &loopback,
        )
        .unwrap();
        assert_eq!(f.status, Status::Pass, "{}", f.message);
    }

    #[test]
    fn lacking_and_extra_servers_warn_with_the_connect_string_to_use() {
        let f = judge(
            CONFIG,
            &list(&["127.0.0.1:2181", "127.0.0.1:2999"]),
            "/app",
            &loopback,
        )
        .unwrap();
        assert_eq!(f.status, Status::Warn);
        assert!(f.message.contains("lacks: 127.0.0.1:2182"), "{}", f.message);
        assert!(
            f.message
                .contains("not in the ensemble's configuration: 127.0.0.1:2999"),
            "{}",
            f.message
        );
        assert!(
            f.fix
                .as_deref()
                .unwrap()
                .contains("127.0.0.1:2181,127.0.0.1:2182/app"),
            "{:?}",
            f.fix
        );
    }

    #[test]
    fn nothing_to_compare_is_no_finding_and_garbage_is_a_warning() {
        assert!(judge(b"", &list(&["a:1"]), "", &loopback).is_none());
        assert!(judge(
            b"server.1=a:1:2:participant\nversion=0",
            &list(&["a:1"]),
            "",
            &loopback
        )
        .is_none());
        let f = judge(b"garbage\x1b[2J", &list(&["a:1"]), "", &loopback).unwrap();
        assert_eq!(f.status, Status::Warn);
        assert!(!f.message.contains('\x1b'), "{}", f.message);
    }
}
