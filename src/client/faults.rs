//! (feature `testing`) Faults a test inflicts on a client without a proxy:
//! [`Client::expire_session`] (the server expires the session now) and
//! [`Client::drop_connection`] (the connection drops now, the session lives on). The
//! protocol they run is in `conn/expire.rs`.

use std::time::{Duration, Instant};

use super::{Client, Hex, SessionEvent};
use crate::error::{Error, Result};

/// The least time `expire_session` allows itself, on a client with a short session.
const EXPIRE_AT_LEAST: Duration = Duration::from_secs(10);

impl Client {
    /// (feature `testing`) Has the server expire this client's session now, as
    /// curator-test's `KillSession` and kazoo's `expire_session` do, with no proxy and
    /// no wait for the session timeout: a second connection resumes the session with its
    /// id and password, which takes it over (the server closes this client's
    /// connection), and closes it. The server deletes the session's ephemeral nodes at
    /// once, every server of the ensemble drops the session, and this client, resuming,
    /// is told by the server that it expired: [`SessionEvent::Lost`] with
    /// [`LossReason::Expired`](crate::LossReason::Expired) (not its own loss clock's
    /// [`LossReason::Timeout`](crate::LossReason::Timeout)); then it
    /// opens a new session, as on any expiry. Works on every supported server (3.6 to
    /// 3.9), for a SASL client too (it logs in first).
    ///
    /// Returns once the client has heard the loss (its `Lost` event is sent to every
    /// receiver of [`Client::events`] before this returns), so that a test can check what
    /// its guards and candidates make of it right away.
    ///
    /// ```
    /// use zkguard::{LossReason, SessionEvent};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = zkguard::testing::TestCluster::start(1)?;
    /// let client = zkguard::Client::connect(&cluster.connect_string())?;
    /// let guard = zkguard::Mutex::new(&client, "/doc/expire")?.acquire()?;
    /// let events = client.events();
    /// client.expire_session()?;
    /// assert!(!guard.is_valid());
    /// let lost = events.iter().find(|e| matches!(e, SessionEvent::Lost { .. }));
    /// assert!(matches!(lost, Some(SessionEvent::Lost { reason: LossReason::Expired, .. })));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::ConnectionLoss`] when the client has no session or is not connected
    ///   now (wait for [`SessionState::Connected`](crate::SessionState::Connected) first);
    /// - [`Error::Closed`] when the client is closed;
    /// - [`Error::Io`] when the server did not close the session, or the client did not
    ///   hear the loss, within the session timeout (at least 10 s), naming what failed.
    pub fn expire_session(&self) -> Result<()> {
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let events = self.events();
        let (session_id, passwd, addr) = self.shared.session_to_expire().map_err(|why| {
            log::info!("zkguard: cannot expire the session now: {why}");
            Error::ConnectionLoss
        })?;
        let allow = self.session_timeout().max(EXPIRE_AT_LEAST);
        let deadline = Instant::now() + allow;
        self.shared
            .expire_on_server(addr, session_id, &passwd, deadline)
            .map_err(|why| Error::from(std::io::Error::other(why)))?;
        log::info!(
            "zkguard: session {} closed on the server at {addr} (expire_session)",
            Hex(session_id)
        );
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match events.recv_timeout(left) {
                Ok(SessionEvent::Lost { session_id: id, .. }) if id == session_id => {
                    return Ok(());
                }
                Ok(SessionEvent::Closed) => return Err(Error::Closed),
                Ok(_) => {}
                Err(_) => {
                    return Err(Error::from(std::io::Error::other(format!(
                        "the server closed session {} but the client did not hear it \
                         within {allow:?}",
                        Hex(session_id)
                    ))))
                }
            }
        }
    }

    /// (feature `testing`) Drops this client's connection now, as a server or a network
    /// that cuts it would, without a proxy: the socket is shut down, requests in flight
    /// fail with [`Error::ConnectionLoss`], and the client reconnects at once (to the next
    /// server of its list) and resumes the same session: [`SessionEvent::Suspended`],
    /// then [`SessionEvent::Reconnected`] with the same session id, watches re-armed.
    /// Nothing happens when the client is not connected. Returns at once.
    ///
    /// ```
    /// use zkguard::SessionEvent;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = zkguard::testing::TestCluster::start(1)?;
    /// let client = zkguard::Client::connect(&cluster.connect_string())?;
    /// let events = client.events();
    /// client.drop_connection();
    /// assert!(matches!(events.recv()?, SessionEvent::Suspended { .. }));
    /// assert!(matches!(events.recv()?, SessionEvent::Reconnected { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn drop_connection(&self) {
        self.shared.cut_now();
    }
}
