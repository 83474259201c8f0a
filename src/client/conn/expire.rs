//! (feature `testing`) The session expired by the server now, and the connection dropped
//! now: what `Client::expire_session` and `Client::drop_connection` (`client/faults.rs`)
//! do inside.

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use super::session::Settled;
use super::Shared;

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
    /// it expired. This is `close_abandoned` (`connect.rs`), which a reconnect uses for a
    /// session it gave up: without credentials the `closeSession` goes out with the
    /// handshake, in one write, so that the client, reconnecting at once, cannot take the
    /// session back in between; if it does all the same (with a login in between, say),
    /// the whole is tried again until `deadline`.
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
            let outcome = self
                .close_abandoned(&host, addr, session_id, passwd, deadline)
                .map_err(|(_, e)| e.to_string());
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
}
