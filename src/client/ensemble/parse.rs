//! The ensemble's dynamic configuration, as `/zookeeper/config` holds it: parsed, and turned
//! into the servers a client may use. Pure: no I/O.

use std::fmt;

use crate::error::escape;
use crate::error::{Error, Result};

/// The ensemble's dynamic configuration, as ZooKeeper 3.5+ publishes it in
/// `/zookeeper/config` ([`Client::get_config`](crate::Client::get_config)): its version and
/// its servers, one `server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]`
/// line each.
///
/// ```
/// let config = zkguard::EnsembleConfig::parse(
///     b"server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
///       server.2=10.0.0.2:2888:3888:observer;10.0.0.2:2181\n\
///       version=100000003",
/// )?;
/// assert_eq!(config.version(), 0x1_0000_0003);
/// // A wildcard client address means the server's own host.
/// assert_eq!(config.client_hosts(), vec!["10.0.0.1:2181", "10.0.0.2:2181"]);
/// # Ok::<(), zkguard::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleConfig {
    version: u64,
    servers: Vec<EnsembleServer>,
}

/// One `server.N=` line of an [`EnsembleConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnsembleServer {
    /// Its id, the `N` of `server.N` (the server's `myid`).
    pub id: u64,
    /// The host of its quorum address.
    pub host: String,
    /// Whether it is an observer (`false`: a participant, the default).
    pub observer: bool,
    /// Where clients connect to it (`host:port`); `None` when the line names no client
    /// port. A wildcard host (`0.0.0.0`, `::`) is replaced by the quorum address's host.
    pub client: Option<String>,
}

impl fmt::Display for EnsembleServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server.{} ({})", self.id, escape(&self.host))
    }
}

impl EnsembleConfig {
    /// Parses the data of `/zookeeper/config`. `group.`/`weight.` lines (hierarchical
    /// quorums) and other `key=value` lines are passed over.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming what is wrong: empty data, text that is not UTF-8,
    /// a line that is not `key=value`, a bad `server.N` line (its id, addresses, ports or
    /// role), the same id twice, no `version=` or one that is not hexadecimal, or no server
    /// at all.
    pub fn parse(data: &[u8]) -> Result<EnsembleConfig> {
        let bad = |reason: String| Error::InvalidArgument {
            name: "ensemble config",
            reason,
        };
        let text = std::str::from_utf8(data).map_err(|_| {
            bad(format!(
                "{} is not UTF-8 text",
                crate::error::escape_bytes(data)
            ))
        })?;
        if text.trim().is_empty() {
            return Err(bad(
                "it is empty (a standalone server, or reconfiguration off?)".into(),
            ));
        }
        let mut version = None;
        let mut servers: Vec<EnsembleServer> = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let Some((key, value)) = line.split_once('=') else {
                return Err(bad(format!("line {} is not key=value", escape(line))));
            };
            let (key, value) = (key.trim(), value.trim());
            if key == "version" {
                let v = u64::from_str_radix(value, 16)
                    .map_err(|_| bad(format!("version {} is not hexadecimal", escape(value))))?;
                version = Some(v);
            } else if let Some(id) = key.strip_prefix("server.") {
                let server = server_line(id, value)
                    .map_err(|why| bad(format!("line {}: {why}", escape(line))))?;
                if servers.iter().any(|s| s.id == server.id) {
                    return Err(bad(format!("server.{} is listed twice", server.id)));
                }
                servers.push(server);
            }
        }
        let version = version.ok_or_else(|| bad("it has no version= line".into()))?;
        if servers.is_empty() {
            return Err(bad("it lists no server".into()));
        }
        Ok(EnsembleConfig { version, servers })
    }

    /// The configuration's version (the zxid of the reconfiguration that made it: it grows
    /// with every change).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Its servers, participants and observers, in the order listed.
    pub fn servers(&self) -> &[EnsembleServer] {
        &self.servers
    }

    /// Where clients may connect (`host:port`), observers included, in the order listed;
    /// servers without a client address are left out (see [`EnsembleConfig::servers`]).
    pub fn client_hosts(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter_map(|s| s.client.clone())
            .collect()
    }
}

/// `server.<id>=<value>`, the value being `host:quorum:election[:role][;client]`.
fn server_line(id: &str, value: &str) -> std::result::Result<EnsembleServer, String> {
    let id: u64 = id
        .parse()
        .map_err(|_| format!("server id {} is not a number", escape(id)))?;
    let (quorum, client) = match value.split_once(';') {
        Some((q, c)) => (q.trim(), Some(c.trim())),
        None => (value, None),
    };
    let (host, rest) = split_host(quorum)?;
    let mut parts = rest.split(':');
    let (Some(q), Some(e)) = (parts.next(), parts.next()) else {
        return Err("the quorum address must be host:quorumPort:electionPort".into());
    };
    port(q)?;
    port(e)?;
    let observer = match parts.next() {
        None | Some("participant") => false,
        Some("observer") => true,
        Some(other) => return Err(format!("unknown role {}", escape(other))),
    };
    if parts.next().is_some() {
        return Err("too many fields in the quorum address".into());
    }
    let client = match client {
        None | Some("") => None,
        Some(c) => Some(client_addr(c, host)?),
    };
    Ok(EnsembleServer {
        id,
        host: host.to_string(),
        observer,
        client,
    })
}

/// The client address `[host:]port` as `host:port`; a missing or wildcard host is the
/// quorum address's host (`quorum_host`), as Curator's `EnsembleTracker` does.
fn client_addr(c: &str, quorum_host: &str) -> std::result::Result<String, String> {
    let (host, p) = match c.rsplit_once(':') {
        // `[::1]:2181`, `10.0.0.1:2181`; a bare IPv6 address without brackets is refused
        // by `split_host` below.
        Some(_) => {
            let (h, rest) = split_host(c)?;
            (h, rest)
        }
        None => ("", c),
    };
    port(p)?;
    let host = match host {
        "" | "0.0.0.0" | "::" | "[::]" | "0:0:0:0:0:0:0:0" => quorum_host,
        h => h,
    };
    Ok(format!("{host}:{p}"))
}

/// `host:rest`, the host possibly `[v6]`.
fn split_host(s: &str) -> std::result::Result<(&str, &str), String> {
    let (host, rest) = if s.starts_with('[') {
        let end = s
            .find(']')
            .ok_or_else(|| format!("unclosed [ in {}", escape(s)))?;
        let rest = s[end + 1..]
            .strip_prefix(':')
            .ok_or_else(|| format!("no port after {}", escape(&s[..=end])))?;
        (&s[..=end], rest)
    } else {
        s.split_once(':')
            .ok_or_else(|| format!("no port in {}", escape(s)))?
    };
    if host.is_empty() {
        return Err(format!("no host in {}", escape(s)));
    }
    Ok((host, rest))
}

fn port(p: &str) -> std::result::Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("bad port {}", escape(p))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE: &[u8] = b"server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
        server.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\n\
        server.3=zk3:2890:3890:observer;2183\n\
        version=100000002\n";

    #[test]
    fn servers_roles_and_client_addresses() {
        let c = EnsembleConfig::parse(THREE).unwrap();
        assert_eq!(c.version(), 0x1_0000_0002);
        assert_eq!(
            c.client_hosts(),
            vec!["127.0.0.1:2181", "127.0.0.1:2182", "zk3:2183"]
        );
        let s = &c.servers()[2];
        assert_eq!((s.id, s.observer, s.host.as_str()), (3, true, "zk3"));
        assert!(!c.servers()[0].observer);
    }

    #[test]
    fn a_server_without_a_client_address_is_kept_but_not_a_client_host() {
        let c = EnsembleConfig::parse(
            b"server.1=a:1:2\nserver.2=b:1:2:participant;\nserver.3=c:1:2;c:5\nversion=1",
        )
        .unwrap();
        assert_eq!(c.servers().len(), 3);
        assert_eq!(c.servers()[0].client, None);
        assert_eq!(c.client_hosts(), vec!["c:5"]);
    }

    #[test]
    fn ipv6_hosts_and_wildcards() {
        let c = EnsembleConfig::parse(
            b"server.1=[::1]:1:2;[::1]:2181\nserver.2=[fe80::2]:1:2;[::]:2182\nversion=a",
        )
        .unwrap();
        assert_eq!(c.client_hosts(), vec!["[::1]:2181", "[fe80::2]:2182"]);
        assert_eq!(c.version(), 10);
    }

    #[test]
    fn other_keys_are_passed_over() {
        let c = EnsembleConfig::parse(b"group.1=1:2\nweight.1=1\nserver.1=a:1:2;a:3\nversion=5\n")
            .unwrap();
        assert_eq!(c.client_hosts(), vec!["a:3"]);
    }

    #[test]
    fn garbage_is_refused_naming_what_is_wrong() {
        for (data, says) in [
            (&b""[..], "empty"),
            (b"  \n", "empty"),
            (b"\xff\xfe", "not UTF-8"),
            (b"hello world", "not key=value"),
            (b"server.1=a:1:2;a:3", "no version"),
            (b"version=1", "no server"),
            (b"server.x=a:1:2\nversion=1", "not a number"),
            (b"server.1=a:1\nversion=1", "host:quorumPort:electionPort"),
            (b"server.1=a:1:0\nversion=1", "bad port"),
            (b"server.1=a:1:2:leader\nversion=1", "unknown role"),
            (b"server.1=a:1:2;a:99999\nversion=1", "bad port"),
            (b"server.1=a:1:2\nserver.1=b:1:2\nversion=1", "twice"),
            (b"server.1=a:1:2\nversion=xyz", "not hexadecimal"),
            (b"server.1=[::1:1:2\nversion=1", "unclosed"),
            (b"server.1=:1:2\nversion=1", "no host"),
        ] {
            let e = EnsembleConfig::parse(data).expect_err(&format!("{data:?}"));
            assert!(
                matches!(
                    e,
                    Error::InvalidArgument {
                        name: "ensemble config",
                        ..
                    }
                ),
                "{e:?}"
            );
            assert!(e.to_string().contains(says), "{data:?}: {e}");
        }
    }

    #[test]
    fn server_sent_text_in_errors_is_escaped() {
        let e = EnsembleConfig::parse(b"server.1=a\x1b[31m:1:x\nversion=1").unwrap_err();
        assert!(!e.to_string().contains('\x1b'), "{e}");
    }
}
