//! Connect strings and node paths: parsed and checked on the client, so a bad one gets an
//! error naming it instead of a server round trip (or a dropped connection).

use crate::error::{Error, Result};

/// A connect string as the client reads it: `host1:2181,host2:2181/optional/chroot`, split
/// into its servers (`host:port` each, 2181 where no port is given) and its chroot.
///
/// [`Client::builder`](crate::Client::builder) checks its connect string with this same
/// parse; use it to check one before building a client, or to reach each server of an
/// ensemble alone (as `zkguard doctor` does).
///
/// ```
/// use zkguard::ConnectString;
///
/// let cs = ConnectString::parse("zk1:2181,zk2,[::1]:2182/app/locks")?;
/// assert_eq!(cs.hosts(), ["zk1:2181", "zk2:2181", "[::1]:2182"]);
/// assert_eq!(cs.chroot(), "/app/locks");
///
/// let err = ConnectString::parse("zk1:2181,zk2:0").unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     r#"invalid connect string: bad port "0" in host "zk2:0" of "zk1:2181,zk2:0""#
/// );
/// # Ok::<(), zkguard::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectString {
    /// `host:port` entries (port defaulted to 2181), in the given order.
    pub(crate) hosts: Vec<String>,
    /// Chroot prefix without trailing slash, or empty.
    pub(crate) chroot: String,
}

impl ConnectString {
    /// Parses and checks `s`: `host:port[,host:port...][/chroot]`, a host an IPv6 address
    /// only in brackets (`[::1]:2181`), a port 1 to 65535 (2181 when left out), the chroot
    /// a valid node path ([`validate_path`]; `/` alone is no chroot).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] named `"connect string"`, saying what is wrong and
    /// quoting the host entry and the string: an empty string or host entry, a missing
    /// host, a bad port, an unclosed `[`, an unbracketed IPv6 address, a URL scheme
    /// (`zk://`), a bad chroot.
    pub fn parse(s: &str) -> Result<ConnectString> {
        parse_connect_string(s)
    }

    /// The servers, `host:port` each (2181 where the string gave no port), in the order
    /// given. Never empty.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The chroot without a trailing slash (`/app`), or `""` when there is none.
    pub fn chroot(&self) -> &str {
        &self.chroot
    }
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

/// The longest path [`validate_path`] accepts, in bytes (1 MiB): a request holding a longer
/// one cannot fit in what a server reads at most by default (`jute.maxbuffer`, 1 MiB less
/// one byte). It holds whatever [`ClientBuilder::max_request_size`] says: a path this long
/// is a mistake, not a name.
///
/// [`ClientBuilder::max_request_size`]: crate::ClientBuilder::max_request_size
pub const MAX_PATH_LEN: usize = 1 << 20;

/// Checks a node path the way the server would (`PathUtils.validatePath`), before anything
/// is sent: absolute, no empty segment (`//`, a trailing `/`), no `.` or `..` segment, no
/// character ZooKeeper refuses (NUL, the C0 and C1 controls, DEL, U+E000–U+F8FF,
/// U+FFF0–U+FFFF), and at most [`MAX_PATH_LEN`] bytes. The root `/` is a valid path.
///
/// Every request of the client checks its path this way; use it to check a path given
/// by a user before connecting.
///
/// ```
/// use zkguard::{validate_path, Error};
///
/// validate_path("/locks/nightly")?;
/// let err = validate_path("/locks//nightly").unwrap_err();
/// assert!(matches!(err, Error::InvalidPath { .. }));
/// assert_eq!(
///     err.to_string(),
///     r#"invalid path "/locks//nightly": empty segment ('//')"#
/// );
/// # Ok::<(), zkguard::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::InvalidPath`] with the path and what is wrong with it (its `Display` shows
/// the path through [`escape`](crate::escape)).
pub fn validate_path(path: &str) -> Result<()> {
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
    if path.len() > MAX_PATH_LEN {
        return Err(Error::InvalidPath {
            // Not the whole path in the error: a megabyte in a message helps nobody.
            path: format!("{}…", path.chars().take(64).collect::<String>()),
            reason: format!(
                "{} bytes long, more than the {MAX_PATH_LEN} a request can carry",
                path.len()
            ),
        });
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
    match refused_segment(body) {
        Some(reason) => err(reason),
        None => Ok(()),
    }
}

/// What is wrong with the first bad segment of `body` (after its leading '/'), if any.
///
/// Every request checks its path, so this is written for speed (a char-wise loop was a
/// sixth of a lock cycle's instructions, callgrind): a path of printable ASCII, nearly
/// every one, can only have a bad segment, found in one pass over the bytes after a check
/// the compiler vectorizes; anything else goes through the segments char by char.
fn refused_segment(body: &str) -> Option<&'static str> {
    let bytes = body.as_bytes();
    let bad = |seg: &[u8]| match seg {
        b"" => Some("empty segment ('//')"),
        b"." | b".." => Some("relative segment ('.' or '..')"),
        _ => None,
    };
    // No early exit, so that it runs many bytes at a time.
    let printable = bytes
        .iter()
        .fold(true, |ok, &b| ok & (0x20..0x7f).contains(&b));
    if printable {
        // A bad segment is empty or relative, so a '/' comes before a '/' or a '.', or ends
        // the path: without either (nearly every path) there is none, found in one more
        // pass the compiler vectorizes.
        let next = bytes.get(1..).unwrap_or_default();
        let suspect = bytes.ends_with(b"/")
            || bytes.iter().zip(next).fold(false, |s, (&a, &b)| {
                s | ((a == b'/') & ((b == b'/') | (b == b'.')))
            });
        if !suspect {
            return None;
        }
        let mut start = 1;
        for (i, &b) in bytes.iter().enumerate().skip(1) {
            if b == b'/' {
                if let Some(reason) = bad(&bytes[start..i]) {
                    return Some(reason);
                }
                start = i + 1;
            }
        }
        return bad(&bytes[start..]);
    }
    for seg in body.split('/').skip(1) {
        if let Some(reason) = bad(seg.as_bytes()) {
            return Some(reason);
        }
        if seg.chars().any(refused_char) {
            return Some("contains a character ZooKeeper does not allow");
        }
    }
    None
}

/// A character ZooKeeper refuses in a path segment.
fn refused_char(c: char) -> bool {
    c == '\0'
        || ('\u{1}'..='\u{1f}').contains(&c)
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || ('\u{e000}'..='\u{f8ff}').contains(&c)
        || ('\u{fff0}'..='\u{ffff}').contains(&c)
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
            "", "a:,b", "a:0", "a:99999", ":1", "a,,b", "::1:5", "[::1", "h/app/", "h/a//b", ",a",
            "a,", "a:-1", "a:x", "a:2181:2", "[::1]x", "h/a/../b", "h/a\0", "/app",
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
        for ok in [
            "/",
            "/a",
            "/a/b",
            "/a.b/c-d_e",
            "/zookeeper",
            "/é/ü~",
            "/a/\u{a0}\u{ffef}x",
        ] {
            validate_path(ok)?;
        }
        for bad in [
            "",
            "a",
            "a/b",
            "/a/",
            "//",
            "/a//b",
            "/a/./b",
            "/a/..",
            "/a\0b",
            "/a\u{1}",
            "/a\u{7f}b",
            "/é/\u{9f}",
            "/a/\u{e000}",
            "/ü\u{1f}",
        ] {
            let e = validate_path(bad).expect_err("must be rejected");
            assert!(matches!(e, Error::InvalidPath { .. }), "{bad:?}");
        }
        // What a user may type by mistake or an attacker on purpose: each named.
        for (bad, says) in [
            ("", "empty path"),
            ("locks/x", "must start with '/'"),
            ("/locks/x/", "must not end with '/'"),
            ("/locks//x", "empty segment ('//')"),
            ("/locks/./x", "relative segment"),
            ("/locks/..", "relative segment"),
            ("/locks/x\0", "a character ZooKeeper does not allow"),
            ("/locks/\u{1b}[2Jx", "a character ZooKeeper does not allow"),
            ("/locks/\u{85}", "a character ZooKeeper does not allow"),
            ("/locks/\u{fffe}", "a character ZooKeeper does not allow"),
        ] {
            let text = validate_path(bad).expect_err(bad).to_string();
            assert!(text.contains(says), "{bad:?}: {text}");
            // The path is shown, and escaped: no control character reaches a terminal.
            assert!(text.starts_with("invalid path \""), "{text}");
            assert!(!text.contains(['\0', '\u{1b}', '\u{85}']), "{text:?}");
        }
        let long = format!("/{}", "a".repeat(MAX_PATH_LEN));
        let text = validate_path(&long).expect_err("too long").to_string();
        assert!(
            text.contains("more than the 1048576 a request can carry"),
            "{text}"
        );
        assert!(
            text.len() < 300,
            "the error quotes a megabyte: {} bytes",
            text.len()
        );
        validate_path(&format!("/{}", "a".repeat(MAX_PATH_LEN - 1)))?;
        validate_sequential_path("/a/")?;
        validate_sequential_path("/a/b-")?;
        assert!(validate_sequential_path("/a//").is_err());
        Ok(())
    }

    /// The fast path against the plain rule (each segment: not empty, not relative, no
    /// refused character) on every string of up to 5 of these pieces after a '/'.
    #[test]
    fn the_fast_segment_check_agrees_with_the_plain_rule() {
        fn plain(body: &str) -> Option<&'static str> {
            for seg in body.split('/').skip(1) {
                if seg.is_empty() {
                    return Some("empty segment ('//')");
                }
                if seg == "." || seg == ".." {
                    return Some("relative segment ('.' or '..')");
                }
                if seg.chars().any(refused_char) {
                    return Some("contains a character ZooKeeper does not allow");
                }
            }
            None
        }
        let pieces = [
            "a", "/", ".", "\0", "\u{1f}", "\u{7f}", "~", "é", "\u{85}", "\u{e000}",
        ];
        let mut bodies = vec![String::from("/")];
        for _ in 0..5 {
            let longer: Vec<String> = bodies
                .iter()
                .flat_map(|b| pieces.iter().map(move |p| format!("{b}{p}")))
                .collect();
            for body in &longer {
                assert_eq!(refused_segment(body), plain(body), "{body:?}");
            }
            bodies = longer;
        }
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
