//! Connect strings and node paths: parsed and checked on the client, so a bad one gets an
//! error naming it instead of a server round trip (or a dropped connection).

use crate::error::{Error, Result};

/// A parsed connect string: `host1:2181,host2:2181/optional/chroot`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    /// `host:port` entries (port defaulted to 2181), in the given order.
    pub hosts: Vec<String>,
    /// Chroot prefix without trailing slash, or empty.
    pub chroot: String,
}

pub(crate) fn parse_connect_string(s: &str) -> Result<ConnectString> {
    let bad = |reason: String| Error::InvalidArgument {
        name: "connect string",
        reason: format!("{reason} in {s:?}"),
    };
    // `zk://host:2181` (a URL, as some tools write it) would otherwise read as host "zk:"
    // with the chroot "//host:2181".
    if let Some((scheme, _)) = s.split_once("://") {
        if !scheme.is_empty() && !scheme.contains([',', '/']) {
            return Err(Error::InvalidArgument {
                name: "connect string",
                reason: format!(
                    "{s:?} starts with the URL scheme \"{scheme}://\"; a connect string is \
                     host:port[,host:port...][/chroot], with no scheme"
                ),
            });
        }
    }
    // A fault in one host entry names the entry, and the whole string only if it has more.
    let bad_entry = |entry: &str, reason: String| {
        if entry == s {
            bad(reason)
        } else {
            Error::InvalidArgument {
                name: "connect string",
                reason: format!("{reason} in host {entry:?} of {s:?}"),
            }
        }
    };
    let (hosts_part, chroot) = match s.find('/') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let chroot = if chroot == "/" { "" } else { chroot };
    if !chroot.is_empty() {
        validate_path(chroot).map_err(|e| bad(format!("bad chroot ({e})")))?;
    }
    let mut hosts = Vec::new();
    for entry in hosts_part.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(bad("empty host entry".into()));
        }
        let with_port = match split_host_port(entry) {
            Err(reason) => return Err(bad_entry(entry, reason)),
            Ok(("", _)) => return Err(bad_entry(entry, "missing host".into())),
            Ok((_, Some(port))) => {
                check_port(port).map_err(|r| bad_entry(entry, r))?;
                entry.to_string()
            }
            Ok((_, None)) => format!("{entry}:2181"),
        };
        hosts.push(with_port);
    }
    Ok(ConnectString {
        hosts,
        chroot: chroot.to_string(),
    })
}

/// The host and the port of a connect-string entry: `zk1:2181`, `zk1`, `[::1]:2181` or
/// `[::1]` (the port `None` when the entry has none). The one place `host:port` is taken
/// apart: the connect-string check, TLS's server name and Kerberos' server principal use it.
pub(crate) fn split_host_port(entry: &str) -> std::result::Result<(&str, Option<&str>), String> {
    if let Some(rest) = entry.strip_prefix('[') {
        let close = rest.find(']').ok_or_else(|| "unclosed '['".to_string())?;
        let (host, after) = (&rest[..close], &rest[close + 1..]);
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err("unexpected text after ']'".into()),
            },
        };
    }
    match entry.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => {
            Err("an IPv6 address must be written as [addr]:port".into())
        }
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((entry, None)),
    }
}

/// The host of a connect-string entry (one the connect-string check passed): `zk1` of
/// `zk1:2181`, `::1` of `[::1]:2181`.
#[cfg(any(feature = "kerberos", feature = "tls", test))]
pub(crate) fn host_of(entry: &str) -> &str {
    split_host_port(entry).map_or(entry, |(host, _)| host)
}

fn check_port(port: &str) -> std::result::Result<(), String> {
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("bad port {port:?}")),
    }
}

/// Checks a node path the way the server would (`PathUtils.validatePath`).
pub(crate) fn validate_path(path: &str) -> Result<()> {
    validate(path, false)
}

/// Like [`validate_path`], but a trailing `/` is allowed (a sequential create appends the
/// sequence number right after it).
pub(crate) fn validate_sequential_path(path: &str) -> Result<()> {
    validate(path, true)
}

fn validate(path: &str, sequential: bool) -> Result<()> {
    let err = |reason: &str| {
        Err(Error::InvalidPath {
            path: path.to_string(),
            reason: reason.to_string(),
        })
    };
    if path.is_empty() {
        return err("empty path");
    }
    if !path.starts_with('/') {
        return err("must start with '/' (paths are absolute)");
    }
    if path == "/" {
        return Ok(());
    }
    let body = if sequential {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    };
    if body.len() > 1 && body.ends_with('/') {
        return err("must not end with '/'");
    }
    for seg in body.split('/').skip(1) {
        if seg.is_empty() {
            return err("empty segment ('//')");
        }
        if seg == "." || seg == ".." {
            return err("relative segment ('.' or '..')");
        }
        if seg.chars().any(|c| {
            c == '\0'
                || ('\u{1}'..='\u{1f}').contains(&c)
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || ('\u{e000}'..='\u{f8ff}').contains(&c)
                || ('\u{fff0}'..='\u{ffff}').contains(&c)
        }) {
            return err("contains a character ZooKeeper does not allow");
        }
    }
    Ok(())
}

/// Adds the chroot prefix to a (validated) path.
pub(crate) fn to_server(chroot: &str, path: &str) -> String {
    if chroot.is_empty() {
        path.to_string()
    } else if path == "/" {
        chroot.to_string()
    } else {
        format!("{chroot}{path}")
    }
}

/// Removes the chroot prefix from a path the server sent.
pub(crate) fn from_server(chroot: &str, path: &str) -> String {
    if chroot.is_empty() {
        return path.to_string();
    }
    match path.strip_prefix(chroot) {
        Some("") => "/".to_string(),
        Some(rest) if rest.starts_with('/') => rest.to_string(),
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_taken_from_host_port() {
        assert_eq!(host_of("zk1.example.com:2181"), "zk1.example.com");
        assert_eq!(host_of("127.0.0.1:2281"), "127.0.0.1");
        assert_eq!(host_of("[::1]:2281"), "::1");
        assert_eq!(host_of("[::1]"), "::1");
        assert_eq!(host_of("zk1"), "zk1");
        assert_eq!(split_host_port("zk1:x"), Ok(("zk1", Some("x"))));
        assert!(split_host_port("[::1").is_err());
        assert!(split_host_port("[::1]x").is_err());
        assert!(split_host_port("::1:2181").is_err());
    }

    #[test]
    fn connect_strings() -> Result<()> {
        let c = parse_connect_string("a:1,b,127.0.0.1:3/app/x")?;
        assert_eq!(c.hosts, vec!["a:1", "b:2181", "127.0.0.1:3"]);
        assert_eq!(c.chroot, "/app/x");
        let c = parse_connect_string("[::1]:5,[::1]/")?;
        assert_eq!(c.hosts, vec!["[::1]:5", "[::1]:2181"]);
        assert_eq!(c.chroot, "");
        for bad in [
            "", "a:,b", "a:0", "a:99999", ":1", "a,,b", "::1:5", "[::1", "h/app/", "h/a//b",
        ] {
            let e = parse_connect_string(bad).expect_err("must be rejected");
            assert!(
                matches!(
                    e,
                    Error::InvalidArgument {
                        name: "connect string",
                        ..
                    }
                ),
                "{bad}: {e}"
            );
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        Ok(())
    }

    #[test]
    fn connect_string_errors_say_what_is_wrong_once() {
        let text = |s: &str| parse_connect_string(s).expect_err(s).to_string();
        assert_eq!(
            text("127.0.0.1:99999"),
            r#"invalid connect string: bad port "99999" in "127.0.0.1:99999""#
        );
        assert_eq!(
            text("a:1,b:0/app"),
            r#"invalid connect string: bad port "0" in host "b:0" of "a:1,b:0/app""#
        );
        assert_eq!(
            text("::1:5"),
            r#"invalid connect string: an IPv6 address must be written as [addr]:port in "::1:5""#
        );
        for url in ["zk://127.0.0.1:2181", "zk://127.0.0.1:2181/app"] {
            assert_eq!(
                text(url),
                format!(
                    "invalid connect string: {url:?} starts with the URL scheme \"zk://\"; a \
                     connect string is host:port[,host:port...][/chroot], with no scheme"
                )
            );
        }
        // A chroot that merely contains "://" further on is a chroot problem.
        assert!(
            text("h:1/a://b").contains("bad chroot"),
            "{}",
            text("h:1/a://b")
        );
    }

    #[test]
    fn paths() -> Result<()> {
        for ok in ["/", "/a", "/a/b", "/a.b/c-d_e", "/zookeeper"] {
            validate_path(ok)?;
        }
        for bad in [
            "", "a", "a/b", "/a/", "//", "/a//b", "/a/./b", "/a/..", "/a\0b", "/a\u{1}",
        ] {
            let e = validate_path(bad).expect_err("must be rejected");
            assert!(matches!(e, Error::InvalidPath { .. }), "{bad:?}");
        }
        validate_sequential_path("/a/")?;
        validate_sequential_path("/a/b-")?;
        assert!(validate_sequential_path("/a//").is_err());
        Ok(())
    }

    #[test]
    fn chroot_mapping() {
        assert_eq!(to_server("", "/a"), "/a");
        assert_eq!(to_server("/app", "/"), "/app");
        assert_eq!(to_server("/app", "/a"), "/app/a");
        assert_eq!(from_server("/app", "/app"), "/");
        assert_eq!(from_server("/app", "/app/a"), "/a");
        assert_eq!(from_server("/app", "/apple"), "/apple");
        assert_eq!(from_server("", "/a"), "/a");
    }
}
