//! Dynamic reconfiguration: an ensemble started with `reconfigEnabled=true` and a dynamic
//! configuration file, spare servers prepared beside it, and `reconfig` run from a test
//! ([`TestCluster::add_server`], [`TestCluster::remove_servers`]).
//!
//! The `reconfig` request is sent by a zkguard [`Client`] logged in as the servers'
//! superuser ([`TestCluster::SUPERUSER`]: the servers of such a cluster run with
//! `zookeeper.DigestAuthenticationProvider.superDigest` naming it), not with `skipACL`: the
//! ACLs of the cluster's other nodes stay enforced.

use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{other, TestCluster, TestClusterBuilder, START_DEADLINE};
use crate::client::Client;
use crate::error::{Error, ErrorCode};

/// The JVM option naming the superuser: `super`, password `zkguard-test-super` (the digest
/// is base64 of SHA-1 of `super:zkguard-test-super`).
pub(super) const SUPER_DIGEST_OPTION: &str =
    "-Dzookeeper.DigestAuthenticationProvider.superDigest=super:zIsYPnYI0q6yED0hIKuFzDMlJcE=";

/// How long a reconfiguration is retried while the servers are not ready for it.
const RECONFIG_DEADLINE: Duration = Duration::from_secs(60);

/// The lines of a server's static configuration that turn reconfiguration on and point to
/// its dynamic file (which holds the `server.N` lines).
pub(super) fn static_lines(cfg: &mut String, dynamic: &Path) {
    let _ = writeln!(cfg, "reconfigEnabled=true");
    let _ = writeln!(cfg, "standaloneEnabled=false");
    let _ = writeln!(cfg, "dynamicConfigFile={}", dynamic.display());
}

/// The `server.N` line of server `i` (id `i + 1`), a participant.
fn line(i: usize, (quorum, election): (u16, u16), client_port: u16) -> String {
    format!(
        "server.{}=127.0.0.1:{quorum}:{election}:participant;127.0.0.1:{client_port}",
        i + 1
    )
}

/// The dynamic configuration naming servers `members`.
pub(super) fn member_lines(
    peer_ports: &[(u16, u16)],
    client_ports: &[u16],
    members: impl IntoIterator<Item = usize>,
) -> String {
    members
        .into_iter()
        .map(|i| line(i, peer_ports[i], client_ports[i]) + "\n")
        .collect()
}

impl TestClusterBuilder {
    /// Dynamic reconfiguration (needs an ensemble): every server runs with
    /// `reconfigEnabled=true` and a dynamic configuration file (its `server.N` lines, each
    /// with the client address `127.0.0.1:port`), and `spares` more servers are prepared
    /// (ports, data directory, configuration) but neither started nor members: server
    /// indexes `servers..servers + spares`. [`TestCluster::add_server`] starts one and adds
    /// it, [`TestCluster::remove_servers`] takes members out; both run `reconfig` as the
    /// servers' superuser ([`TestCluster::SUPERUSER`]). Cannot be combined with
    /// [`isolatable`](Self::isolatable).
    ///
    /// ```no_run
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::builder().servers(3).reconfig(2).start()?;
    /// cluster.add_server(3)?;
    /// cluster.add_server(4)?;
    /// cluster.remove_servers(&[0, 1, 2])?;
    /// assert_eq!(cluster.members(), vec![3, 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn reconfig(mut self, spares: usize) -> Self {
        self.settings.reconfig = Some(spares);
        self
    }
}

impl TestCluster {
    /// The superuser of a [`reconfig`](TestClusterBuilder::reconfig) cluster, as a `digest`
    /// scheme's credentials (for [`ClientBuilder::auth`](crate::ClientBuilder::auth)).
    pub const SUPERUSER: &'static [u8] = b"super:zkguard-test-super";

    /// The servers of the ensemble's configuration, by index, in the order they joined.
    pub fn members(&self) -> Vec<usize> {
        self.members.lock().clone()
    }

    /// Server `i`'s line of the dynamic configuration:
    /// `server.<i+1>=127.0.0.1:quorum:election:participant;127.0.0.1:clientPort`.
    ///
    /// # Panics
    ///
    /// If `i` is not below [`len`](Self::len), or the cluster is a standalone server (no
    /// quorum ports).
    pub fn config_line(&self, i: usize) -> String {
        let s = self.server(i);
        let ports = s
            .peer_ports
            .expect("zkguard TestCluster: a standalone server has no configuration line");
        line(i, ports, s.client_port)
    }

    /// Adds server `i` (a spare, or a member removed and stopped before) to the ensemble:
    /// writes its dynamic configuration (the members and itself), starts it, waits until it
    /// serves, then runs `reconfig` to add it. Returns the new configuration, as
    /// `/zookeeper/config` holds it.
    ///
    /// # Errors
    ///
    /// The cluster was not built with [`reconfig`](TestClusterBuilder::reconfig), `i` is a
    /// member or running, the server does not serve within 60 s, or the reconfiguration
    /// fails (retried for 60 s while the ensemble is not ready for it).
    pub fn add_server(&self, i: usize) -> io::Result<String> {
        let s = self.server(i);
        if self.settings.reconfig.is_none() {
            return Err(other(
                "add_server needs a cluster built with reconfig(..)".to_string(),
            ));
        }
        let mut members = self.members();
        if members.contains(&i) || self.is_running(i) {
            return Err(other(format!(
                "server {i} is a member already, or running: stop and remove it first"
            )));
        }
        members.push(i);
        let lines: String = members
            .iter()
            .map(|&k| self.config_line(k) + "\n")
            .collect();
        let dynamic = self.dir.join(format!("zoo-{i}.cfg.dynamic"));
        std::fs::write(&dynamic, lines)
            .map_err(|e| other(format!("cannot write {}: {e}", dynamic.display())))?;
        self.spawn(s)?;
        self.wait_mode(s, START_DEADLINE, true)?;
        let config = self.run_reconfig(&[&self.config_line(i)], &[])?;
        self.members.lock().push(i);
        Ok(config)
    }

    /// Removes servers `gone` from the ensemble by `reconfig` (they keep running, outside
    /// the ensemble: stop them next). Returns the new configuration.
    ///
    /// # Errors
    ///
    /// The cluster was not built with [`reconfig`](TestClusterBuilder::reconfig), a server
    /// is not a member, or the reconfiguration fails (retried for 60 s while the ensemble is
    /// not ready for it).
    pub fn remove_servers(&self, gone: &[usize]) -> io::Result<String> {
        let members = self.members();
        if self.settings.reconfig.is_none() {
            return Err(other(
                "remove_servers needs a cluster built with reconfig(..)".to_string(),
            ));
        }
        if let Some(i) = gone.iter().find(|i| !members.contains(i)) {
            return Err(other(format!("server {i} is not a member")));
        }
        let ids: Vec<u64> = gone.iter().map(|&i| i as u64 + 1).collect();
        // Through the servers that stay: the leaving ones may drop their clients.
        let config = self.run_reconfig(&[], &ids)?;
        self.members.lock().retain(|i| !gone.contains(i));
        Ok(config)
    }

    /// Runs one `reconfig` as the superuser through the members, retrying while the
    /// ensemble is not ready (a new server not yet connected to the leader, another
    /// reconfiguration in progress, a connection lost). Returns the new configuration.
    fn run_reconfig(&self, joining: &[&str], leaving: &[u64]) -> io::Result<String> {
        let members = self.members();
        let staying: Vec<String> = members
            .iter()
            .filter(|&&i| !leaving.contains(&(i as u64 + 1)))
            .map(|&i| format!("127.0.0.1:{}", self.server(i).client_port))
            .collect();
        let connect = if staying.is_empty() {
            self.connect_string()
        } else {
            staying.join(",")
        };
        let failed = |e: Error| {
            other(format!(
                "reconfig (add {joining:?}, remove {leaving:?}): {e}"
            ))
        };
        let admin = Client::builder(&connect)
            .auth("digest", Self::SUPERUSER)
            .connect_timeout(RECONFIG_DEADLINE)
            .build()
            .map_err(failed)?;
        let deadline = Instant::now() + RECONFIG_DEADLINE;
        loop {
            match admin.reconfig(joining, leaving, None) {
                Ok((data, _)) => {
                    let config = String::from_utf8_lossy(&data).into_owned();
                    log::info!(
                        "zkguard TestCluster: reconfigured: {}",
                        config.replace('\n', " ")
                    );
                    return Ok(config);
                }
                Err(e)
                    if Instant::now() < deadline
                        && (e.is_connection_error()
                            || matches!(
                                e,
                                Error::Zk {
                                    code: ErrorCode::NewConfigNoQuorum
                                        | ErrorCode::ReconfigInProgress,
                                    ..
                                }
                            )) =>
                {
                    log::debug!("zkguard TestCluster: reconfig not ready yet: {e}");
                    // The ensemble tells no one when it is ready: poll.
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(failed(e)),
            }
        }
    }
}
