//! Following the ensemble ([`ClientBuilder::follow_ensemble`]): the `zkguard-ensemble`
//! thread reads `/zookeeper/config` with a watch, and whenever its version grows, makes
//! the servers it names the client's server list ([`Client::replace_servers`], the same
//! path as [`Client::update_servers`]). What to do with one reading is [`decide`]d without
//! I/O (unit-tested); the thread only reads, logs and applies.
//!
//! A version is the zxid of the reconfiguration that made it (ZooKeeper writes the node
//! with that zxid), so a server that has it has applied that transaction: the reply's
//! header, which carries the server's last applied zxid, is never below it. A version
//! beyond the zxid the same reply reports is no configuration that server committed (a
//! fake server's `version=ffffffffffffffff`, which would have shut out every real one for
//! good): ignored with a warning. A server that lies about both still moves the list once;
//! [`Client::update_servers`] then makes the follower forget every version it applied
//! ([`Trust`]). Following trusts every server in the list: use TLS where the link can be
//! changed.
//!
//! The thread holds the client weakly (it never keeps a session open) and ends when the
//! client is closed or its last handle dropped: the watch and the session events both say
//! `Closed` then.
//!
//! [`ClientBuilder::follow_ensemble`]: crate::ClientBuilder::follow_ensemble
//! [`Client::update_servers`]: crate::Client::update_servers

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::{after, never, select, Receiver};

use super::parse::EnsembleConfig;
use crate::client::conn::Shared;
use crate::client::types::{EventType, SessionEvent, WatchedEvent};
use crate::client::{Client, Owner};
use crate::error::{escape, Error, Result};

/// How long the thread waits before reading again after a failed read.
const RETRY: Duration = Duration::from_secs(1);

/// What to do with one reading of `/zookeeper/config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Leave the list as it is, and say why (at `warn` when the data is unusable).
    Ignore { reason: String, warn: bool },
    /// The configuration is newer but names the servers the client has already.
    Same { version: u64 },
    /// Make `hosts` the server list. `skipped` names the servers left out (no client
    /// address), for the log.
    Apply {
        version: u64,
        hosts: Vec<String>,
        skipped: Vec<String>,
    },
}

/// The versions the follower trusts: the last one applied, forgotten whenever the caller
/// gives a list of its own ([`Client::update_servers`] counts them in `lists_given`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trust {
    /// The last version applied, if any since the last list given.
    last: Option<u64>,
    /// `lists_given` when `last` was set.
    given: u64,
}

impl Trust {
    /// The last version applied, once `given` (the lists given so far) is taken in: a new
    /// list given forgets it.
    pub(crate) fn last(&mut self, given: u64) -> Option<u64> {
        if given != self.given {
            *self = Trust { last: None, given };
        }
        self.last
    }

    /// Records `version` as applied.
    pub(crate) fn applied(&mut self, version: u64) {
        self.last = Some(version);
    }
}

/// What a reading `data` of the configuration means for a client whose list is `current`
/// and which last applied version `last` (`None`: none yet), when the reply that carried
/// it reports `zxid` (its header's: the server's last applied transaction). Never an empty
/// or unparsable list; never an older or the same version; never one beyond `zxid`.
pub(crate) fn decide(last: Option<u64>, current: &[String], data: &[u8], zxid: i64) -> Decision {
    let config = match EnsembleConfig::parse(data) {
        Ok(c) => c,
        Err(e) => {
            return Decision::Ignore {
                reason: e.to_string(),
                warn: true,
            }
        }
    };
    let version = config.version();
    if last.is_some_and(|l| version <= l) {
        return Decision::Ignore {
            reason: format!(
                "version {version:x} is not newer than {:x}",
                last.unwrap_or(0)
            ),
            warn: false,
        };
    }
    let skipped: Vec<String> = config
        .servers()
        .iter()
        .filter(|s| s.client.is_none())
        .map(|s| s.to_string())
        .collect();
    let hosts = config.client_hosts();
    if hosts.is_empty() {
        return Decision::Ignore {
            reason: format!(
                "version {version:x} names no server with a client address ({})",
                skipped.join(", ")
            ),
            warn: true,
        };
    }
    let reported = u64::try_from(zxid).unwrap_or(0);
    if version > reported {
        return Decision::Ignore {
            reason: format!(
                "version {version:x} is beyond the zxid {reported:x} the same server \
                 reports: no configuration it has committed"
            ),
            warn: true,
        };
    }
    let key = |v: &[String]| {
        let mut v: Vec<String> = v.iter().map(|h| h.to_ascii_lowercase()).collect();
        v.sort();
        v.dedup();
        v
    };
    if key(&hosts) == key(current) {
        return Decision::Same { version };
    }
    Decision::Apply {
        version,
        hosts,
        skipped,
    }
}

/// Starts the `zkguard-ensemble` thread for `client`.
pub(crate) fn start(client: &Client) -> Result<()> {
    let owner = Arc::downgrade(&client.owner);
    let shared = client.shared.clone();
    let timeout = client.timeout;
    // Subscribed before the thread runs: no event between the build and its first read
    // is missed.
    let events = shared.subscribe();
    std::thread::Builder::new()
        .name("zkguard-ensemble".into())
        .spawn(move || run(&owner, &shared, timeout, &events))
        .map(drop)
        .map_err(|e| Error::spawn("ensemble follower", e))
}

/// The thread's body: read with a watch, apply, wait for the watch (or, after a failed
/// read, a session event or a pause), again; until the client is closed.
fn run(
    owner: &Weak<Owner>,
    shared: &Arc<Shared>,
    timeout: Duration,
    events: &Receiver<SessionEvent>,
) {
    let mut trust = Trust::default();
    loop {
        let Some(owner) = owner.upgrade() else { return };
        let client = Client {
            shared: shared.clone(),
            owner,
            timeout,
            pin: None,
        };
        let watch = match client.one(|p| p.config_reading_w()) {
            Ok((data, zxid, watch)) => {
                let last = trust.last(shared.lists_given.load(Ordering::Relaxed));
                if let Some(v) = apply(&client, last, &data, zxid) {
                    trust.applied(v);
                }
                Some(watch)
            }
            Err(Error::Closed | Error::AuthFailed) => return,
            Err(Error::NoNode { .. }) => {
                log::info!(
                    "zkguard: the servers publish no ensemble configuration (ZooKeeper before \
                     3.5); not following it"
                );
                return;
            }
            Err(e) => {
                log::debug!("zkguard: reading the ensemble's configuration failed: {e}");
                None
            }
        };
        // Never hold the client while waiting: the last handle may go meanwhile.
        drop(client);
        if !wait(watch.as_ref(), events) {
            return;
        }
    }
}

/// Waits for a reason to read again: the watch fired, or (with no watch) a new connection
/// or a pause. False once the client is closed.
fn wait(watch: Option<&Receiver<WatchedEvent>>, events: &Receiver<SessionEvent>) -> bool {
    let none = never();
    let retrying = watch.is_none();
    let (watch, pause) = match watch {
        Some(w) => (w, never()),
        None => (&none, after(RETRY)),
    };
    loop {
        select! {
            recv(watch) -> ev => {
                return !matches!(ev, Ok(WatchedEvent { event_type: EventType::Closed, .. }));
            }
            recv(events) -> ev => match ev {
                Ok(SessionEvent::Closed) | Err(_) => return false,
                Ok(SessionEvent::Connected { .. } | SessionEvent::Reconnected { .. })
                    if retrying => return true,
                Ok(_) => {}
            },
            recv(pause) -> _ => return true,
        }
    }
}

/// Acts on one reading; returns the last version applied.
fn apply(client: &Client, last: Option<u64>, data: &[u8], zxid: i64) -> Option<u64> {
    match decide(last, &client.servers(), data, zxid) {
        Decision::Ignore { reason, warn } => {
            if warn {
                log::warn!("zkguard: the ensemble's configuration is ignored: {reason}");
            } else {
                log::debug!("zkguard: the ensemble's configuration is ignored: {reason}");
            }
            last
        }
        Decision::Same { version } => Some(version),
        Decision::Apply {
            version,
            hosts,
            skipped,
        } => {
            for s in skipped {
                log::info!(
                    "zkguard: {s} of the ensemble's configuration has no client address; \
                     not a server this client can use"
                );
            }
            match client.checked_servers(&hosts.join(",")) {
                Ok(hosts) => {
                    log::info!(
                        "zkguard: the ensemble's configuration {version:x} names {}",
                        escape(&hosts.join(","))
                    );
                    client.replace_servers(hosts);
                    Some(version)
                }
                Err(e) => {
                    log::warn!("zkguard: the ensemble's configuration {version:x} is ignored: {e}");
                    last
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(hosts: &[&str]) -> Vec<String> {
        hosts.iter().map(|h| h.to_string()).collect()
    }

    const V2: &[u8] = b"server.1=a:1:2;a:2181\nserver.2=b:1:2:observer;b:2181\nversion=2";
    /// A reply's zxid beyond every version of these tests.
    const Z: i64 = 0x1_0000_0000;

    #[test]
    fn a_version_beyond_the_servers_own_zxid_is_ignored_with_a_warning() {
        let huge = b"server.1=a:1:2;a:2181\nversion=ffffffffffffffff";
        for zxid in [0x1_0000_0005, i64::MAX, 0, -1] {
            match decide(None, &list(&["x:2181"]), huge, zxid) {
                Decision::Ignore { warn: true, reason } => {
                    assert!(reason.contains("beyond the zxid"), "{reason}")
                }
                d => panic!("{zxid:x}: {d:?}"),
            }
        }
        // Version 0x100000005 at zxid 0x100000004: one transaction ahead, still beyond.
        let v = b"server.1=a:1:2;a:2181\nversion=100000005";
        assert!(matches!(
            decide(None, &list(&["x:2181"]), v, 0x1_0000_0004),
            Decision::Ignore { warn: true, .. }
        ));
        // At the zxid itself (the reply right after the reconfig) and below it: applied.
        for zxid in [0x1_0000_0005, 0x1_0000_0009] {
            assert!(matches!(
                decide(None, &list(&["x:2181"]), v, zxid),
                Decision::Apply {
                    version: 0x1_0000_0005,
                    ..
                }
            ));
        }
    }

    #[test]
    fn a_list_given_forgets_the_versions_trusted() {
        let mut t = Trust::default();
        assert_eq!(t.last(0), None);
        t.applied(u64::MAX);
        assert_eq!(t.last(0), Some(u64::MAX));
        // update_servers: the huge version is forgotten, and a later one is kept again.
        assert_eq!(t.last(1), None);
        t.applied(7);
        assert_eq!(t.last(1), Some(7));
        assert_eq!(t.last(3), None);
    }

    #[test]
    fn a_newer_version_with_other_servers_is_applied_observers_included() {
        let d = decide(Some(1), &list(&["x:2181"]), V2, Z);
        assert_eq!(
            d,
            Decision::Apply {
                version: 2,
                hosts: list(&["a:2181", "b:2181"]),
                skipped: vec![],
            }
        );
        // The first reading: no version applied yet.
        assert!(matches!(
            decide(None, &list(&["x:2181"]), V2, Z),
            Decision::Apply { version: 2, .. }
        ));
    }

    #[test]
    fn an_old_or_equal_version_is_ignored_quietly() {
        for last in [2, 3] {
            assert!(matches!(
                decide(Some(last), &list(&["x:2181"]), V2, Z),
                Decision::Ignore { warn: false, .. }
            ));
        }
    }

    #[test]
    fn the_same_servers_in_another_order_only_record_the_version() {
        let d = decide(None, &list(&["B:2181", "a:2181"]), V2, Z);
        assert_eq!(d, Decision::Same { version: 2 });
    }

    #[test]
    fn garbage_empty_and_clientless_configs_are_ignored_with_a_warning() {
        for data in [
            &b""[..],
            b"garbage",
            b"version=5",
            b"server.1=a:1:2\nserver.2=b:1:2;\nversion=5",
        ] {
            match decide(Some(1), &list(&["a:2181"]), data, Z) {
                Decision::Ignore { warn: true, reason } => assert!(!reason.is_empty()),
                d => panic!("{data:?}: {d:?}"),
            }
        }
    }

    #[test]
    fn servers_without_a_client_address_are_skipped_and_named() {
        let d = decide(
            None,
            &list(&["x:2181"]),
            b"server.1=a:1:2\nserver.2=b:1:2;b:2181\nversion=5",
            Z,
        );
        assert_eq!(
            d,
            Decision::Apply {
                version: 5,
                hosts: list(&["b:2181"]),
                skipped: vec!["server.1 (a)".into()],
            }
        );
    }
}
