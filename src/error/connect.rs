//! The record of a failed connect: each server ([`ConnectAttempt`]) and what went wrong
//! there ([`ConnectFailure`]).

use std::fmt;
use std::io;
use std::net::SocketAddr;

use super::escape::escape;
use super::IoCause;

/// One server of a failed connect ([`Error::Connect`](crate::Error::Connect)) and what went wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectAttempt {
    /// The server as written in the connect string (`host:port`).
    pub host: String,
    /// The address the failure happened at, once the name was resolved.
    pub addr: Option<SocketAddr>,
    /// What went wrong.
    pub reason: ConnectFailure,
}

impl ConnectAttempt {
    pub(crate) fn new(host: &str, addr: Option<SocketAddr>, reason: ConnectFailure) -> Self {
        ConnectAttempt {
            host: host.to_string(),
            addr,
            reason,
        }
    }
}

impl fmt::Display for ConnectAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            // The address only when it says more than the host.
            Some(addr) if addr.to_string() != self.host => {
                write!(f, "{} ({addr}: {})", self.host, self.reason)
            }
            Some(_) => write!(f, "{} ({})", self.host, self.reason),
            None => write!(f, "{} ({})", self.host, self.reason),
        }
    }
}

/// Why one server of a connect gave no session ([`ConnectAttempt::reason`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// No attempt at this server had failed by the connect deadline: it was not tried yet,
    /// or its attempt (TCP connect or handshake) was still under way.
    NotReached,
    /// Its name could not be resolved.
    Resolve(IoCause),
    /// Its name resolves to no address.
    NoAddress,
    /// An I/O error: the TCP connect was refused or timed out, or the connection broke
    /// during the handshake.
    Io {
        /// The step that failed (`"connect"`, `"handshake"`, `"auth"`, …).
        during: &'static str,
        /// The I/O error.
        source: IoCause,
    },
    /// The server's handshake reply (or a frame right after it) could not be decoded.
    Malformed(String),
    /// The server refused to open a new session (a zero session timeout in its reply).
    SessionRefused,
    /// The server rejected the credentials (the client is closed then).
    AuthFailed,
    /// The TLS handshake failed: the server's certificate is not signed by a trusted
    /// authority, is for another name or has expired; the server refused ours (mutual
    /// TLS); or the port does not speak TLS. The reason says which.
    Tls {
        /// What went wrong, in words.
        reason: String,
    },
    /// The SASL login could not be carried out with this server: it does not offer
    /// DIGEST-MD5 (no JAAS `Server` section), or it could not prove that it knows the
    /// password. (A server that refuses the password is [`ConnectFailure::AuthFailed`].)
    Sasl {
        /// What went wrong, in words.
        reason: String,
    },
    /// The Kerberos login (feature `kerberos`) could not be carried out: the cause, and the
    /// Kerberos library's words for it.
    Kerberos {
        /// Why, as far as the Kerberos library's status tells.
        cause: KerberosCause,
        /// What went wrong, in the Kerberos library's words.
        reason: String,
    },
}

/// Why a Kerberos login failed ([`ConnectFailure::Kerberos`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KerberosCause {
    /// No ticket to log in with: no credential cache (run `kinit`), no entry for the
    /// principal in the cache or keytab.
    NoCredentials,
    /// The ticket (or the password's key) has expired: `kinit` again, or use a keytab,
    /// from which tickets are renewed.
    TicketExpired,
    /// The KDC does not know the server principal (`zookeeper/<host>`): a wrong service,
    /// host or realm, or a connect string of addresses whose names are not the principals'.
    UnknownServer,
    /// The KDC does not know the client principal.
    UnknownClient,
    /// This machine's clock and the KDC's (or the server's) differ by more than Kerberos
    /// allows (5 minutes by default).
    ClockSkew,
    /// No KDC of the realm answered (down, unreachable, or none configured). The only
    /// cause that may pass by itself: the client keeps trying until the connect deadline.
    KdcUnreachable,
    /// No usable GSSAPI library in this process: MIT Kerberos' `libgssapi_krb5.so.2` is
    /// not installed (Debian/Ubuntu `libgssapi-krb5-2`, Fedora/RHEL `krb5-libs`), or the
    /// library loaded lacks what the login needs. The reason names the library and the
    /// package. The library is loaded at the first Kerberos login; other logins are not
    /// affected.
    LibraryUnavailable,
    /// Anything else; the reason says what.
    Other,
}

impl fmt::Display for KerberosCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KerberosCause::NoCredentials => {
                "no Kerberos credentials (no ticket: run kinit, or give a keytab)"
            }
            KerberosCause::TicketExpired => "the Kerberos ticket has expired",
            KerberosCause::UnknownServer => "the KDC does not know the server principal",
            KerberosCause::UnknownClient => "the KDC does not know the client principal",
            KerberosCause::ClockSkew => "the clocks differ too much (Kerberos clock skew)",
            KerberosCause::KdcUnreachable => "no KDC of the realm can be reached",
            KerberosCause::LibraryUnavailable => "no usable GSSAPI library (MIT Kerberos)",
            KerberosCause::Other => "Kerberos error",
        })
    }
}

impl ConnectFailure {
    /// A failure that retrying the same server cannot cure (a rejected certificate or
    /// credentials), as opposed to one that may pass (a refused or broken connection).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            ConnectFailure::Tls { .. } | ConnectFailure::Sasl { .. } | ConnectFailure::AuthFailed
        ) || matches!(self, ConnectFailure::Kerberos { cause, .. } if *cause != KerberosCause::KdcUnreachable)
    }
}

impl ConnectFailure {
    /// A login's failure (credentials rejected, SASL or Kerberos), not the connection's.
    pub(crate) fn is_login(&self) -> bool {
        matches!(
            self,
            ConnectFailure::AuthFailed
                | ConnectFailure::Sasl { .. }
                | ConnectFailure::Kerberos { .. }
        )
    }

    pub(crate) fn io(during: &'static str, e: io::Error) -> Self {
        ConnectFailure::Io {
            during,
            source: e.into(),
        }
    }
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectFailure::NotReached => write!(f, "not reached before the deadline"),
            ConnectFailure::Resolve(e) => write!(f, "cannot resolve: {e}"),
            ConnectFailure::NoAddress => write!(f, "resolves to no address"),
            ConnectFailure::Io {
                during: "connect",
                source,
            } => write!(f, "{source}"),
            ConnectFailure::Io { during, source } => write!(f, "during the {during}: {source}"),
            ConnectFailure::Malformed(why) => {
                write!(f, "malformed handshake reply: {}", escape(why))
            }
            ConnectFailure::SessionRefused => write!(f, "server refused a new session"),
            ConnectFailure::AuthFailed => write!(f, "authentication failed"),
            ConnectFailure::Tls { reason } => {
                write!(f, "TLS handshake failed: {}", escape(reason))
            }
            ConnectFailure::Sasl { reason } => {
                write!(f, "SASL login failed: {}", escape(reason))
            }
            ConnectFailure::Kerberos { cause, reason } => {
                write!(f, "Kerberos login failed: {cause}: {}", escape(reason))
            }
        }
    }
}

impl std::error::Error for ConnectFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectFailure::Resolve(e) | ConnectFailure::Io { source: e, .. } => Some(e.get_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::error::Error;

    fn refused() -> io::Error {
        io::Error::new(io::ErrorKind::ConnectionRefused, "Connection refused")
    }

    #[test]
    fn a_connect_every_server_refused_says_refused_not_a_deadline() {
        let sasl = |host: &str| {
            ConnectAttempt::new(
                host,
                None,
                ConnectFailure::Sasl {
                    reason: "SASL is not set up".into(),
                },
            )
        };
        let tls = |host: &str| {
            ConnectAttempt::new(
                host,
                None,
                ConnectFailure::Tls {
                    reason: "unknown issuer".into(),
                },
            )
        };
        let e = Error::Connect {
            attempts: vec![sasl("zk1:2181"), tls("zk2:2181")],
            after: Duration::from_micros(14_660),
        };
        assert_eq!(
            e.to_string(),
            "ZooKeeper refused the login; servers tried: zk1:2181 (SASL login failed: SASL is \
             not set up), zk2:2181 (TLS handshake failed: unknown issuer)"
        );
        let e = Error::Connect {
            attempts: vec![tls("zk2:2181")],
            after: Duration::from_millis(3),
        };
        assert!(e
            .to_string()
            .starts_with("every server refused the TLS handshake;"));
        // One server that may pass (not reached): a deadline after all.
        let e = Error::Connect {
            attempts: vec![
                sasl("zk1:2181"),
                ConnectAttempt::new("zk3:2181", None, ConnectFailure::NotReached),
            ],
            after: Duration::from_secs(2),
        };
        assert!(e.to_string().starts_with("no ZooKeeper session within 2s;"));
    }

    #[test]
    fn connect_error_names_every_server_and_gives_the_last_cause() {
        use std::error::Error as _;
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let e = Error::Connect {
            attempts: vec![
                ConnectAttempt::new("zk3:2181", None, ConnectFailure::NotReached),
                ConnectAttempt::new("zk2:2181", None, ConnectFailure::SessionRefused),
                ConnectAttempt::new(
                    "localhost:1",
                    Some(addr),
                    ConnectFailure::io("connect", refused()),
                ),
            ],
            after: Duration::from_secs(2),
        };
        assert_eq!(
            e.to_string(),
            "no ZooKeeper session within 2s; servers tried: zk3:2181 (not reached before the \
             deadline), zk2:2181 (server refused a new session), localhost:1 (127.0.0.1:1: \
             Connection refused)"
        );
        let cause = e.source().expect("a cause");
        let io = cause.downcast_ref::<io::Error>().expect("an io::Error");
        assert_eq!(io.kind(), io::ErrorKind::ConnectionRefused);

        // A host that is its address is not repeated; names that resolve nowhere are not
        // a deadline that passed.
        let e = Error::Connect {
            attempts: vec![ConnectAttempt::new(
                "127.0.0.1:1",
                Some(addr),
                ConnectFailure::io("connect", refused()),
            )],
            after: Duration::from_secs(15),
        };
        assert_eq!(
            e.to_string(),
            "no ZooKeeper session within 15s; servers tried: 127.0.0.1:1 (Connection refused)"
        );
        let e = Error::Connect {
            attempts: vec![
                ConnectAttempt::new(
                    "nosuch.invalid:2181",
                    None,
                    ConnectFailure::Resolve(
                        Arc::new(io::Error::other("Name or service not known")).into(),
                    ),
                ),
                ConnectAttempt::new("empty.invalid:2181", None, ConnectFailure::NoAddress),
            ],
            after: Duration::ZERO,
        };
        assert_eq!(
            e.to_string(),
            "no server of the connect string resolves to an address: nosuch.invalid:2181 \
             (cannot resolve: Name or service not known), empty.invalid:2181 (resolves to no \
             address)"
        );

        // A last attempt without an I/O cause gives the failure itself.
        let e = Error::Connect {
            attempts: vec![ConnectAttempt::new(
                "zk:2181",
                None,
                ConnectFailure::SessionRefused,
            )],
            after: Duration::from_secs(1),
        };
        let cause = e.source().expect("a cause");
        assert!(matches!(
            cause.downcast_ref::<ConnectFailure>(),
            Some(ConnectFailure::SessionRefused)
        ));

        // Handshake-phase failures say which step broke.
        let f = ConnectFailure::io(
            "handshake",
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ),
        );
        assert_eq!(
            f.to_string(),
            "during the handshake: the server closed the connection"
        );
        assert_eq!(
            f.source()
                .and_then(|s| s.downcast_ref::<io::Error>())
                .map(io::Error::kind),
            Some(io::ErrorKind::UnexpectedEof)
        );
        assert!(ConnectFailure::Malformed("x".into()).source().is_none());
    }
}
