//! The first connect: what failed at each server, the warning once every one has failed,
//! and the error naming them all. Reads the session's fields (a child of `session.rs`),
//! moves no phase.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::super::Shared;
use super::Phase;
use crate::error::{ConnectAttempt, ConnectFailure, Error, Result};

impl Shared {
    /// Blocks until the first session exists, or fails naming every server tried. Once
    /// every server has failed once (nothing listening, say), it warns that it keeps trying
    /// until the deadline: a server that is starting is a reason to wait, silence is not.
    pub fn wait_first_session(&self, deadline: Instant, connect_timeout: Duration) -> Result<()> {
        let mut s = self.session.lock();
        let mut warned = false;
        loop {
            match s.phase {
                Phase::Connected => return Ok(()),
                Phase::Closed => return Err(s.closed_error()),
                _ => {}
            }
            // Every server refused us for good (a certificate or credentials rejected):
            // waiting out the deadline cannot help.
            let hopeless = s
                .failures
                .iter()
                .all(|f| matches!(f, Some((_, _, why)) if why.is_permanent()));
            if !warned && !hopeless && s.failures.iter().all(Option::is_some) {
                warned = true;
                let failed: Vec<ConnectAttempt> = (self.cfg.hosts.iter().zip(&s.failures))
                    .filter_map(|(h, f)| {
                        let (_, addr, why) = f.as_ref()?;
                        Some(ConnectAttempt::new(h, *addr, why.clone()))
                    })
                    .collect();
                let left = deadline.saturating_duration_since(Instant::now());
                s.unlocked(|| {
                    log::warn!("{}", still_trying(&failed, left));
                });
                continue;
            }
            if hopeless
                || (s.wait_until(&self.changed, deadline).timed_out()
                    && s.phase != Phase::Connected)
            {
                // Servers never reached first, then in the order they failed: the last
                // attempt is the one that failed last (the error's `source`).
                let mut tried: Vec<(u64, ConnectAttempt)> = self
                    .cfg
                    .hosts
                    .iter()
                    .zip(&s.failures)
                    .map(|(h, f)| match f {
                        None => (0, ConnectAttempt::new(h, None, ConnectFailure::NotReached)),
                        Some((seq, addr, why)) => {
                            (seq + 1, ConnectAttempt::new(h, *addr, why.clone()))
                        }
                    })
                    .collect();
                tried.sort_by_key(|(seq, _)| *seq);
                return Err(Error::Connect {
                    attempts: tried.into_iter().map(|(_, a)| a).collect(),
                    after: if hopeless {
                        connect_timeout
                            .saturating_sub(deadline.saturating_duration_since(Instant::now()))
                    } else {
                        connect_timeout
                    },
                });
            }
        }
    }

    /// Notes why connecting to host `host_idx` failed (for the first connect's error).
    pub(in crate::client::conn) fn record_failure(
        &self,
        host_idx: usize,
        addr: Option<SocketAddr>,
        why: ConnectFailure,
    ) {
        let mut s = self.session.lock();
        let seq = s.failures_seen;
        s.failures_seen += 1;
        s.failures[host_idx] = Some((seq, addr, why));
        drop(s);
        self.changed.notify_all();
    }
}

/// The warning of a first connect at which every server has failed once, while it keeps
/// trying until its deadline.
fn still_trying(failed: &[ConnectAttempt], left: Duration) -> String {
    let failed: Vec<String> = failed.iter().map(ToString::to_string).collect();
    format!(
        "zkguard: no ZooKeeper session yet, every server failed: {}; trying again until the \
         connect timeout ({:.1} s from now), in case a server is starting",
        failed.join(", "),
        left.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_still_trying_warning_names_every_server_and_the_time_left() {
        let refused = || {
            ConnectFailure::io(
                "connect",
                std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused"),
            )
        };
        let addr: SocketAddr = "127.0.0.1:2181".parse().unwrap();
        let failed = [
            ConnectAttempt::new("127.0.0.1:2181", Some(addr), refused()),
            ConnectAttempt::new("zk2:2181", None, ConnectFailure::NoAddress),
        ];
        assert_eq!(
            still_trying(&failed, Duration::from_millis(14_960)),
            "zkguard: no ZooKeeper session yet, every server failed: 127.0.0.1:2181 \
             (Connection refused), zk2:2181 (resolves to no address); trying again until the \
             connect timeout (15.0 s from now), in case a server is starting"
        );
    }
}
