//! (feature `testing`) The session expired by the server now, and the connection dropped
//! now: what `Client::expire_session` and `Client::drop_connection` (`client/faults.rs`)
//! do inside.

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use super::frame::FrameReader;
use super::link::Link;
use super::session::Settled;
use super::Shared;
use crate::client::proto::{self, code, op, Reader};

/// The xid of the `closeSession` a second connection sends for the session.
const CLOSE_XID: i32 = 1;
/// The pause before another try, after the client took its session back meanwhile.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

impl Shared {
    /// The current session (id, password) and the server it is connected to, or why
    /// there is none to expire.
    pub fn session_to_expire(&self) -> Result<(i64, Vec<u8>, SocketAddr), &'static str> {
        let (session_id, passwd) = self.session.lock().resume();
        let addr = self.server();
        match (session_id, addr) {
            (0, _) => Err("the client has no session"),
            (_, None) => Err("the client is not connected"),
            (id, Some(addr)) => Ok((id, passwd, addr)),
        }
    }

    /// Cuts the live connection now (as a server or network that drops it would): the
    /// connection thread sees it end and resumes the session, on the next server.
    pub fn cut_now(&self) {
        self.cut();
    }

    /// Has the server end the current session now, as curator-test's `KillSession` does:
    /// a connection of its own resumes the session with its id and password at `addr`
    /// (the server closes this client's connection to it), then sends `closeSession`. The
    /// server deletes the session and its ephemeral nodes; this client, resuming, is told
    /// it expired. Without a SASL login the `closeSession` goes out with the handshake, in
    /// one write, so that the client, reconnecting at once, cannot take the session back
    /// in between; if it does all the same, the whole is tried again until `deadline`.
    ///
    /// `Ok` once the server confirmed the close or said the session is gone.
    pub fn expire_on_server(
        &self,
        addr: SocketAddr,
        session_id: i64,
        passwd: &[u8],
        deadline: Instant,
    ) -> Result<(), String> {
        let host = addr.ip().to_string();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let outcome = if self.cfg.sasl.is_some() {
                // A login first: the close cannot go out with the handshake.
                self.close_abandoned(&host, addr, session_id, passwd, deadline)
                    .map_err(|(_, e)| e.to_string())
            } else {
                self.close_in_one_write(&host, addr, session_id, passwd, deadline)
            };
            match outcome {
                Ok(Settled::Closed | Settled::Gone) => return Ok(()),
                Ok(Settled::Failed) => {}
                Err(why) if Instant::now() + RETRY_PAUSE >= deadline => {
                    return Err(format!(
                        "the server at {addr} did not close session {} ({attempts} attempts; \
                         the last: {why})",
                        crate::client::types::Hex(session_id)
                    ))
                }
                Err(why) => log::debug!(
                    "zkguard: expiring session {} at {addr}: {why}; again",
                    crate::client::types::Hex(session_id)
                ),
            }
            thread::sleep(RETRY_PAUSE);
        }
    }

    /// One try of `expire_on_server` without a login: the handshake resuming the session
    /// and its `closeSession` in one write, then their replies.
    fn close_in_one_write(
        &self,
        host: &str,
        addr: SocketAddr,
        session_id: i64,
        passwd: &[u8],
        deadline: Instant,
    ) -> Result<Settled, String> {
        let stream = Link::connect(addr, host, self.cfg.tls.as_ref(), deadline)
            .map_err(|e| e.to_string())?;
        let timeout_ms = self.cfg.session_timeout.as_millis().min(i32::MAX as u128) as i32;
        // Seen zxid 0: this connection reads nothing, so no server is too far behind for it.
        let mut out = proto::connect_request(0, timeout_ms, session_id, passwd);
        out.extend_from_slice(&proto::request_frame(CLOSE_XID, op::CLOSE, &[]));
        let result = (|| {
            stream.write_all(&out).map_err(|e| e.to_string())?;
            let mut frames = FrameReader::new(self.cfg.max_reply);
            let resp = frames
                .read_frame_by(&stream, deadline)
                .map_err(|e| format!("the handshake's reply: {e}"))?;
            let resp = proto::decode_connect_response(&resp).map_err(|m| m.0)?;
            if resp.timeout_ms <= 0 || resp.session_id != session_id {
                return Ok(Settled::Gone);
            }
            loop {
                let frame = frames
                    .read_frame_by(&stream, deadline)
                    .map_err(|e| format!("closeSession's reply: {e}"))?;
                let h = proto::decode_reply_header(&mut Reader::new(&frame)).map_err(|m| m.0)?;
                if h.xid == CLOSE_XID {
                    return match h.err {
                        code::OK => Ok(Settled::Closed),
                        code::SESSION_EXPIRED => Ok(Settled::Gone),
                        err => Err(format!("the server answered closeSession with error {err}")),
                    };
                }
            }
        })();
        stream.shutdown();
        result
    }
}
