//! The byte stream to one server: plain TCP, or TLS over it (feature `tls`).
//!
//! One [`Link`] is shared by the connection thread, which alone reads, and the callers, who
//! write their own frames under the `io` lock. Over TCP both use the socket directly. Over
//! TLS one rustls session serves both directions, so its state sits behind a lock of its
//! own, and nobody holds that lock across a blocking read: the reader reads raw bytes from
//! the socket without it, then takes it briefly to decrypt them. A writer holds it while it
//! encrypts and writes (bounded by the socket's write timeout); meanwhile the reader keeps
//! draining the socket into its own buffer, so a writer blocked on a full socket cannot stall
//! the replies that would free it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "tls")]
use parking_lot::Mutex;

use crate::error::ConnectFailure;

/// A connection to one server (cheap to clone: clones share it).
#[derive(Clone)]
pub(crate) struct Link {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Plain(Arc<TcpStream>),
    #[cfg(feature = "tls")]
    Tls(Arc<tls::TlsLink>),
}

impl Link {
    /// Connects to `addr` (TLS with `tls`, verifying the name `host` stands for) by the
    /// deadline.
    pub fn connect(
        addr: SocketAddr,
        host: &str,
        tls: Option<&crate::client::TlsSetup>,
        deadline: Instant,
    ) -> Result<Link, ConnectFailure> {
        let left = left_until(deadline);
        let stream = TcpStream::connect_timeout(&addr, left)
            .map_err(|e| ConnectFailure::io("connect", e))?;
        let _ = stream.set_nodelay(true);
        match tls {
            None => {
                let _ = host;
                Ok(Link {
                    inner: Inner::Plain(Arc::new(stream)),
                })
            }
            #[cfg(feature = "tls")]
            Some(t) => Ok(Link {
                inner: Inner::Tls(Arc::new(tls::TlsLink::handshake(
                    stream, host, t, deadline,
                )?)),
            }),
            #[cfg(not(feature = "tls"))]
            Some(t) => match *t {},
        }
    }

    fn socket(&self) -> &TcpStream {
        match &self.inner {
            Inner::Plain(s) => s,
            #[cfg(feature = "tls")]
            Inner::Tls(t) => &t.sock,
        }
    }

    /// Writes all of `bytes` (callers hold the `io` lock, so frames never interleave).
    pub fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        match &self.inner {
            Inner::Plain(s) => (&**s).write_all(bytes),
            #[cfg(feature = "tls")]
            Inner::Tls(t) => t.write_all(bytes),
        }
    }

    /// Reads what is there (only the connection thread reads), waiting at most the read
    /// timeout set last; a timeout is an error of kind `WouldBlock` or `TimedOut`.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.inner {
            Inner::Plain(s) => (&**s).read(buf),
            #[cfg(feature = "tls")]
            Inner::Tls(t) => t.read(buf),
        }
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match &self.inner {
            Inner::Plain(s) => s.set_read_timeout(t),
            #[cfg(feature = "tls")]
            Inner::Tls(l) => {
                *l.read_timeout.lock() = t;
                Ok(())
            }
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.socket().set_write_timeout(t)
    }

    /// Ends the connection in both directions (a blocked reader or writer returns).
    pub fn shutdown(&self) {
        let _ = self.socket().shutdown(Shutdown::Both);
    }
}

impl Read for &Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Link::read(self, buf)
    }
}

/// A failure of the session handshake over this link: a TLS error (with TLS 1.3 the server
/// judges our certificate after our side of the handshake is done, so its refusal arrives
/// with the first reply) is [`ConnectFailure::Tls`], anything else an I/O failure `during`.
pub(super) fn failure(during: &'static str, e: io::Error) -> ConnectFailure {
    #[cfg(feature = "tls")]
    if e.get_ref()
        .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some())
    {
        return ConnectFailure::Tls {
            reason: tls::explain(&e),
        };
    }
    ConnectFailure::io(during, e)
}

fn left_until(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

#[cfg(feature = "tls")]
mod tls {
    use super::*;

    use rustls::ClientConnection;

    /// How long the reader waits for the session lock before it reads more from the socket.
    const LOCK_SLICE: Duration = Duration::from_millis(1);
    /// Raw bytes the reader keeps while a writer holds the session, before it waits.
    const RAW_CAP: usize = 16 * 1024 * 1024;

    pub(crate) struct TlsLink {
        pub(super) sock: TcpStream,
        session: Mutex<ClientConnection>,
        /// The reader's own state (only the connection thread reads).
        reader: Mutex<ReaderState>,
        pub(super) read_timeout: Mutex<Option<Duration>>,
    }

    /// What one look at the session gave.
    enum Plain {
        /// Plaintext, this many bytes.
        Data(usize),
        /// None: everything the reader had is decrypted and handed out.
        Empty,
        /// A writer holds the session.
        Busy,
    }

    #[derive(Default)]
    struct ReaderState {
        /// Bytes read from the socket and not yet given to the session.
        raw: Vec<u8>,
        /// The last read filled the caller's buffer: the session may hold more plaintext.
        more: bool,
    }

    /// The handshake error as the user should read it.
    pub(super) fn explain(e: &io::Error) -> String {
        let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
        match inner {
            Some(rustls::Error::InvalidCertificate(c)) => {
                use rustls::CertificateError as C;
                let what = match c {
                    C::UnknownIssuer => "is not signed by a trusted certificate authority".into(),
                    C::NotValidForName | C::NotValidForNameContext { .. } => {
                        format!("is not valid for the name verified ({c})")
                    }
                    C::Expired | C::ExpiredContext { .. } => "has expired".into(),
                    C::NotValidYet | C::NotValidYetContext { .. } => "is not valid yet".into(),
                    C::Revoked => "is revoked".into(),
                    other => format!("was rejected: {other}"),
                };
                format!("the server's certificate {what}")
            }
            Some(rustls::Error::AlertReceived(a)) => {
                format!("the server refused the handshake (alert {a:?}; with mutual TLS: is the client certificate missing or not trusted by the server?)")
            }
            Some(rustls::Error::InvalidMessage(m)) => {
                format!("the server does not speak TLS on this port ({m:?})")
            }
            Some(other) => other.to_string(),
            None if e.kind() == io::ErrorKind::UnexpectedEof
                || e.kind() == io::ErrorKind::ConnectionReset =>
            {
                format!("the server closed the connection during the handshake ({e}): is this port a TLS port (secureClientPort), and does it accept our certificate?")
            }
            None => e.to_string(),
        }
    }

    impl TlsLink {
        pub(super) fn handshake(
            sock: TcpStream,
            host: &str,
            t: &crate::client::TlsSetup,
            deadline: Instant,
        ) -> Result<TlsLink, ConnectFailure> {
            let name = t
                .name_for(host)
                .map_err(|reason| ConnectFailure::Tls { reason })?;
            let mut session =
                ClientConnection::new(t.config.clone(), name).map_err(|e| ConnectFailure::Tls {
                    reason: e.to_string(),
                })?;
            // Frames are bounded by the request size check; rustls need not bound them again.
            session.set_buffer_limit(None);
            let mut s = &sock;
            while session.is_handshaking() {
                let left = left_until(deadline);
                sock.set_read_timeout(Some(left))
                    .and_then(|()| sock.set_write_timeout(Some(left)))
                    .map_err(|e| ConnectFailure::io("TLS handshake", e))?;
                if let Err(e) = session.complete_io(&mut s) {
                    if super::super::frame::is_timeout(&e) {
                        return Err(ConnectFailure::io("TLS handshake", e));
                    }
                    // Tell the server why, if it is still listening.
                    let _ = session.write_tls(&mut s);
                    // Only what TLS itself decided is a TLS failure (permanent); a
                    // connection closed or reset mid-handshake may pass on a retry (a
                    // restarting server, a proxy whose backend is not up yet).
                    let from_tls = e
                        .get_ref()
                        .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some());
                    if !from_tls {
                        let why = explain(&e);
                        return Err(ConnectFailure::io(
                            "TLS handshake",
                            io::Error::new(e.kind(), why),
                        ));
                    }
                    return Err(ConnectFailure::Tls {
                        reason: explain(&e),
                    });
                }
                if Instant::now() >= deadline && session.is_handshaking() {
                    return Err(ConnectFailure::io(
                        "TLS handshake",
                        io::Error::new(io::ErrorKind::TimedOut, "no time left for the handshake"),
                    ));
                }
            }
            Ok(TlsLink {
                sock,
                session: Mutex::new(session),
                reader: Mutex::new(ReaderState::default()),
                read_timeout: Mutex::new(None),
            })
        }

        pub(super) fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
            let mut session = self.session.lock();
            session.writer().write_all(bytes)?;
            Self::flush(&mut session, &self.sock)
        }

        /// Writes what the session has to send (under its lock).
        fn flush(session: &mut ClientConnection, mut sock: &TcpStream) -> io::Result<()> {
            while session.wants_write() {
                if session.write_tls(&mut sock)? == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
            }
            Ok(())
        }

        /// Decrypts what the reader has and hands out plaintext. `None` if there is none yet,
        /// or the session is busy (a writer holds it).
        fn plaintext(&self, raw: &mut Vec<u8>, out: &mut [u8], wait: bool) -> io::Result<Plain> {
            let mut session = if wait && raw.len() >= RAW_CAP {
                self.session.lock()
            } else if wait {
                match self.session.try_lock_for(LOCK_SLICE) {
                    Some(s) => s,
                    None => return Ok(Plain::Busy),
                }
            } else {
                match self.session.try_lock() {
                    Some(s) => s,
                    None => return Ok(Plain::Busy),
                }
            };
            let mut fed = 0;
            loop {
                match session.reader().read(out) {
                    Ok(n) => {
                        raw.drain(..fed);
                        return Ok(Plain::Data(n));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if fed == raw.len() {
                    raw.clear();
                    return Ok(Plain::Empty);
                }
                let n = session.read_tls(&mut &raw[fed..])?;
                fed += n;
                let processed = session.process_new_packets();
                // Alerts, key updates: whatever the session must say goes out now.
                if session.wants_write() {
                    Self::flush(&mut session, &self.sock)?;
                }
                processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                if n == 0 {
                    raw.drain(..fed);
                    return Ok(Plain::Empty);
                }
            }
        }

        pub(super) fn read(&self, out: &mut [u8]) -> io::Result<usize> {
            if out.is_empty() {
                return Ok(0);
            }
            let timeout = *self.read_timeout.lock();
            let deadline = timeout.map(|t| Instant::now() + t);
            let mut state = self.reader.lock();
            let ReaderState { raw, more } = &mut *state;
            let mut chunk = [0u8; 16 * 1024];
            let mut eof = false;
            loop {
                // Something may be waiting for the session: wait for it a little rather
                // than block on the socket while a writer holds it.
                let pending = !raw.is_empty() || *more;
                match self.plaintext(raw, out, pending)? {
                    Plain::Data(n) => {
                        // Reads drain the session's plaintext up to the caller's buffer.
                        *more = n == out.len();
                        return Ok(n);
                    }
                    Plain::Empty => *more = false,
                    Plain::Busy => {}
                }
                let pending = !raw.is_empty() || *more;
                if eof {
                    if !pending {
                        return Ok(0);
                    }
                    continue;
                }
                let mut wait = match deadline {
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return Err(io::ErrorKind::WouldBlock.into());
                        }
                        left
                    }
                    None => Duration::from_secs(3600),
                };
                if pending {
                    // The session was busy: come back for it soon.
                    wait = wait.min(LOCK_SLICE);
                }
                self.sock.set_read_timeout(Some(wait))?;
                match (&self.sock).read(&mut chunk) {
                    Ok(0) => eof = true,
                    Ok(n) => raw.extend_from_slice(&chunk[..n]),
                    Err(e) if super::super::frame::is_timeout(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
}
