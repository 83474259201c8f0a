//! A new server list for a running client: [`Client::update_servers`] and
//! [`Client::servers`]. The list and the rule that decides a move live with the connection
//! (`conn/servers.rs`); here are the checks of the caller's input.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;

use super::{builder, path, Client, Hex};
use crate::error::{Error, Result};

impl Client {
    /// Replaces the servers this client connects to, without a restart: the session, its
    /// ephemeral nodes, watches and guards carry on. `connect_string` is written as for
    /// [`Client::connect`]; its chroot may be left out (the client keeps its own) but, if
    /// given, must be the client's.
    ///
    /// The new list is used from the next connect on. If the server the client is connected
    /// to is not in it, the client moves now: it drops the connection and resumes the same
    /// session on a server of the new list (a session move: `Suspended`, then `Reconnected`
    /// with the same session id; requests in flight fail with
    /// [`Error::ConnectionLoss`], and guards stay valid as they do across any reconnect).
    /// If its server is in the new list, the client moves only with the probability that
    /// spreads the clients of the ensemble evenly over its servers, as ZooKeeper's Java
    /// client does (`updateServerList`): when the list grows from `old` to `new` servers, a
    /// client moves to one of the added servers with probability `1 − old/new`; when it
    /// does not grow, a client whose server stays, stays. `docs/client.md` ("When the
    /// ensemble changes") has the whole rule and why it is that one.
    ///
    /// With [`ClientBuilder::follow_ensemble`](crate::ClientBuilder::follow_ensemble), a
    /// list given here also makes the follower forget the configuration versions it has
    /// applied: the next configuration read is taken on its own merits (its version not
    /// beyond the answering server's zxid), not only if it is newer than one a lying server
    /// may have published.
    ///
    /// Returns whether the client moves now.
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// // zk1..zk3 replaced by zk4..zk6: the client moves to one of them.
    /// client.update_servers("zk4:2181,zk5:2181,zk6:2181")?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Nothing changes on an error:
    ///
    /// - [`Error::InvalidArgument`] for a connect string that cannot be read (empty, a bad
    ///   host or port, naming it) or whose chroot is not the client's;
    /// - [`Error::Connect`] when no host of the list resolves to an address;
    /// - [`Error::Closed`] when the client is closed.
    pub fn update_servers(&self, connect_string: &str) -> Result<bool> {
        let hosts = self.checked_servers(connect_string)?;
        let moves = self.replace_servers(hosts);
        // A list given: the ensemble follower trusts no version it applied before.
        self.shared.lists_given.fetch_add(1, Ordering::Relaxed);
        Ok(moves)
    }

    /// The servers this client connects to, in the order it tries them (`host:port`): the
    /// connect string's, shuffled, until [`Client::update_servers`] (or the ensemble
    /// followed) changes them.
    pub fn servers(&self) -> Vec<String> {
        self.shared.servers()
    }

    /// The hosts of `connect_string`, checked as [`Client::update_servers`] says.
    pub(crate) fn checked_servers(&self, connect_string: &str) -> Result<Vec<String>> {
        if self.is_closing() {
            return Err(Error::Closed);
        }
        let cs = path::parse_connect_string(connect_string)?;
        let ours = &self.shared.cfg.chroot;
        if !cs.chroot.is_empty() && &cs.chroot != ours {
            return Err(Error::InvalidArgument {
                name: "connect string",
                reason: format!(
                    "the chroot {:?} of {connect_string:?} is not the client's ({}); a \
                     client's chroot cannot change (leave it out to keep the client's)",
                    cs.chroot,
                    if ours.is_empty() {
                        "none".to_string()
                    } else {
                        format!("{ours:?}")
                    }
                ),
            });
        }
        builder::any_resolves(&cs.hosts)?;
        Ok(cs.hosts)
    }

    /// Replaces the list with `hosts` (checked), moving the session if the rule says so.
    pub(crate) fn replace_servers(&self, hosts: Vec<String>) -> bool {
        let server = self
            .connected_server()
            .map(|addr| (addr, hosts.iter().any(|h| resolves_to(h, addr))));
        self.shared.update_servers(hosts, server)
    }
}

/// Shows the server list as it is now (see [`Client::servers`]).
impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("hosts", &self.shared.servers())
            .field("chroot", &self.shared.cfg.chroot)
            .field("session_id", &Hex(self.session_id()))
            .field("state", &self.state())
            .finish()
    }
}

/// Whether `host` (`host:port`) resolves to `addr`.
fn resolves_to(host: &str, addr: SocketAddr) -> bool {
    host.to_socket_addrs()
        .is_ok_and(|mut addrs| addrs.any(|a| a == addr))
}
