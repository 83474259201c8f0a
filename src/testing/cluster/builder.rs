//! Settings and the builder.

use std::io;
use std::time::Duration;

use super::{ms, TestCluster, START_ATTEMPTS};
use crate::testing::discover;

#[derive(Clone, Debug)]
pub(super) struct Settings {
    pub(super) servers: usize,
    pub(super) tick: Duration,
    pub(super) min_session: Option<Duration>,
    pub(super) max_session: Duration,
    pub(super) force_sync: bool,
    pub(super) full_jit: bool,
    pub(super) isolatable: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            servers: 1,
            tick: Duration::from_millis(100),
            min_session: None,
            max_session: Duration::from_secs(60),
            force_sync: false,
            full_jit: false,
            isolatable: false,
        }
    }
}

impl Settings {
    pub(super) fn min_session(&self) -> Duration {
        self.min_session.unwrap_or(self.tick * 2)
    }

    pub(super) fn validate(&self) -> io::Result<()> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        if self.servers == 0 {
            return Err(invalid(
                "TestCluster needs at least one server (servers(0) was requested)".into(),
            ));
        }
        if self.isolatable && self.servers < 2 {
            return Err(invalid(
                "isolatable(true) needs an ensemble (servers(2) or more): a standalone server \
                 has no peers to be cut off from"
                    .into(),
            ));
        }
        if self.servers > 255 {
            return Err(invalid(format!(
                "TestCluster supports at most 255 servers ({} were requested)",
                self.servers
            )));
        }
        let tick = ms(self.tick);
        if tick == 0 || tick > i32::MAX as u128 {
            return Err(invalid(format!(
                "tick_time must be between 1 ms and {} ms (got {:?})",
                i32::MAX,
                self.tick
            )));
        }
        let (min, max) = (ms(self.min_session()), ms(self.max_session));
        if max > i32::MAX as u128 {
            return Err(invalid(format!(
                "max_session_timeout must be at most {} ms (got {:?})",
                i32::MAX,
                self.max_session
            )));
        }
        if min > max {
            return Err(invalid(format!(
                "min_session_timeout ({min} ms) is larger than max_session_timeout ({max} ms)"
            )));
        }
        Ok(())
    }
}

/// Configures a [`TestCluster`] before starting it; made by [`TestCluster::builder`].
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct TestClusterBuilder {
    pub(super) settings: Settings,
}

impl TestClusterBuilder {
    /// Number of servers: 1 (the default) runs a standalone server
    /// (`ZooKeeperServerMain`), 2 or more an ensemble (`QuorumPeerMain`).
    pub fn servers(mut self, n: usize) -> Self {
        self.settings.servers = n;
        self
    }

    /// The servers' `tickTime` (default 100 ms). Session timeouts a server grants are
    /// clamped to its minimum and maximum session timeout.
    pub fn tick_time(mut self, d: Duration) -> Self {
        self.settings.tick = d;
        self
    }

    /// `minSessionTimeout` (default two ticks, ZooKeeper's own default).
    pub fn min_session_timeout(mut self, d: Duration) -> Self {
        self.settings.min_session = Some(d);
        self
    }

    /// `maxSessionTimeout` (default 60 s, so tests may request anything in between).
    pub fn max_session_timeout(mut self, d: Duration) -> Self {
        self.settings.max_session = d;
        self
    }

    /// Whether the servers fsync their transaction log (default `false`: `forceSync=no`,
    /// fast functional tests; benchmarks should say which they used).
    pub fn force_sync(mut self, on: bool) -> Self {
        self.settings.force_sync = on;
        self
    }

    /// Whether the server JVMs use the full JIT (C2). Off by default: with the quick C1
    /// compiler only, servers start faster, which is what tests want; a server serving real
    /// traffic runs C2, so benchmarks turn this on (and say so).
    pub fn full_jit(mut self, on: bool) -> Self {
        self.settings.full_jit = on;
        self
    }

    /// Whether single servers of the ensemble can be cut off from the others with
    /// [`TestCluster::isolate`] (default `false`).
    ///
    /// When on, the servers do not talk to each other directly: every server's config
    /// names each peer's quorum and election ports by the address of a [`FaultProxy`](crate::testing::FaultProxy)
    /// that forwards to that peer (one proxy per ordered pair of servers, so each server
    /// gets its own config; its own entry keeps its real ports, which it binds). Costs
    /// two listeners and their threads per ordered pair (12 for three servers), plus two
    /// threads per peer connection. Client ports are not proxied. Needs two servers or
    /// more: starting fails with [`io::ErrorKind::InvalidInput`] otherwise.
    ///
    /// A ZooKeeper server that accepts an election connection from a peer with a lower
    /// id closes it and connects back to the address the peer announced in its first
    /// message; the proxies rewrite that address to the proxy leading back to the peer,
    /// so no election connection bypasses them.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::builder().servers(3).isolatable(true).start()?;
    /// let leader = cluster.leader().expect("a leader");
    /// cluster.isolate(leader)?; // it loses its quorum; the other two elect a new leader
    /// cluster.rejoin(leader)?;
    /// cluster.wait_serving(leader, Duration::from_secs(30))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn isolatable(mut self, on: bool) -> Self {
        self.settings.isolatable = on;
        self
    }

    /// Starts the servers and waits (at most 60 s) until every one of them serves.
    ///
    /// On failure every started process is killed, the temporary directory is kept, and
    /// the error names the failing server's log file and quotes its last lines.
    ///
    /// # Errors
    ///
    /// A server that does not serve within 60 s (the error names its log file and quotes
    /// its last lines), no ZooKeeper installation found, or no free ports after three tries.
    pub fn start(self) -> io::Result<TestCluster> {
        self.settings.validate()?;
        let dist = discover::discover()?;
        let mut attempt = 1;
        loop {
            match TestCluster::try_start(&self.settings, &dist) {
                Ok(cluster) => return Ok(cluster),
                Err(StartError { error, port_clash }) => {
                    if port_clash && attempt < START_ATTEMPTS {
                        log::warn!(
                            "zkguard TestCluster: a port was taken while starting ({error}); \
                             retrying with fresh ports"
                        );
                        attempt += 1;
                        continue;
                    }
                    return Err(error);
                }
            }
        }
    }
}

pub(super) struct StartError {
    pub(super) error: io::Error,
    pub(super) port_clash: bool,
}
