//! Watching who leads without taking part: [`LeaderObserver`] and its [`LeaderChange`]s.
//!
//! One thread per observer reads who leads and arms one watch (the fair election's
//! directory's children, or the unfair election's node), sleeps until that watch, a
//! session event or the observer's drop, and reads again. What it says is filtered by
//! [`Seen`] (pure): a leader only if its token is larger than every token said before, a
//! `NoLeader` only after a leader. So a read after a gap (a reconnect, a new session) that
//! finds the leader already said says nothing, and nothing older is ever said.

use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::backoff::Backoff;
use crate::client::{Client, SessionEvent, WatchedEvent};
use crate::error::{escape, Error, Result};
use crate::queue::{names, token_of};

use super::elect::unfair_id;

/// Who leads an election, as a [`LeaderObserver`] sees it change.
///
/// In the order ZooKeeper made the changes, and never backwards: a `Leader`'s `token` is
/// larger than every `Leader` said before it (a leader's token is its node's creation
/// zxid: in a fair election the head of the queue is always a node created after every
/// earlier head, in an unfair one each node at the path is created after the last), and
/// `NoLeader` comes only after a `Leader` (or first, when nobody leads when observing
/// starts). Changes that come and go between two reads are not all said (after a
/// reconnect, only who leads then): an observer says who leads now, not every term.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderChange {
    /// This participant leads.
    Leader {
        /// Its id: its node's data (the id after the call value for an unfair election),
        /// invalid UTF-8 replaced. Chosen by whoever created the node: escape it
        /// ([`escape`](crate::escape)) before showing it on a terminal.
        id: String,
        /// Its term's fencing token, as its own [`LeaderEvent::Elected`](crate::LeaderEvent)
        /// says: its node's creation zxid.
        token: u64,
    },
    /// Nobody leads: the last candidate left (or none had come yet).
    NoLeader,
}

/// An observer of a [`LeaderElection`](crate::LeaderElection), from
/// [`observe`](crate::LeaderElection::observe): who leads, as [`LeaderChange`]s on
/// [`events`](LeaderObserver::events).
///
/// It takes no part (it creates nothing), works on any election at the path (zkguard's or
/// Curator `LeaderLatch`'s, fair or unfair as the election it was made from), keeps one
/// watch, and goes on across reconnects and session expiry: after either it reads again and
/// says who leads if that changed. A thread of its own (`zkguard-observer`) does the
/// reading; dropping the observer ends it. The stream also ends when the client is closed.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// use zkguard::LeaderChange;
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let election = zkguard::LeaderElection::new(&client, "/services/indexer", "router")?;
/// let observer = election.observe()?;
/// for change in observer.events() {
///     match change {
///         LeaderChange::Leader { id, token } => {
///             println!("route to {} (term {token})", zkguard::escape(&id))
///         }
///         LeaderChange::NoLeader => println!("nobody leads: hold requests"),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping the observer stops it"]
pub struct LeaderObserver {
    events: Receiver<LeaderChange>,
    /// Dropped with the observer: the thread sees the disconnect and ends.
    _stop: Sender<()>,
}

impl LeaderObserver {
    pub(super) fn start(client: &Client, path: &str, fair: bool) -> Result<LeaderObserver> {
        if client.is_closing() {
            return Err(Error::Closed);
        }
        let (tx, events) = crossbeam_channel::unbounded();
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let run = Run {
            client: client.clone(),
            path: path.to_string(),
            fair,
            // Subscribed before the first read, so no session event after it is missed.
            session: client.events(),
            stopped,
            tx,
        };
        std::thread::Builder::new()
            .name("zkguard-observer".into())
            .spawn(move || run.run())
            .map_err(|e| Error::spawn("observer thread", e))?;
        Ok(LeaderObserver {
            events,
            _stop: stop,
        })
    }

    /// The changes, in order, from who leads when observing began. Events wait until read;
    /// the stream ends (a disconnect) once the client is closed.
    pub fn events(&self) -> &Receiver<LeaderChange> {
        &self.events
    }
}

impl std::fmt::Debug for LeaderObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderObserver")
            .field("unread", &self.events.len())
            .finish()
    }
}

/// What has been said: the filter that keeps the stream in order (pure).
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// The largest token said.
    top: Option<u64>,
    /// Whether the last thing said was `NoLeader` (`None`: nothing said yet).
    none_last: Option<bool>,
}

impl Seen {
    /// What to say after a read that found `now` (the leader's id and token, or nobody).
    pub(super) fn after(&mut self, now: Option<(String, u64)>) -> Option<LeaderChange> {
        match now {
            Some((id, token)) if self.top.is_none_or(|t| token > t) => {
                self.top = Some(token);
                self.none_last = Some(false);
                Some(LeaderChange::Leader { id, token })
            }
            // Said already, or older than what was said: a read after a gap.
            Some(_) => None,
            None if self.none_last == Some(true) => None,
            None => {
                self.none_last = Some(true);
                Some(LeaderChange::NoLeader)
            }
        }
    }
}

/// What a read found: the leader's id and token (or nobody), and the watch that fires at
/// the next change.
type Read = (Option<(String, u64)>, Receiver<WatchedEvent>);

/// The observer's thread.
struct Run {
    client: Client,
    path: String,
    fair: bool,
    session: Receiver<SessionEvent>,
    stopped: Receiver<()>,
    tx: Sender<LeaderChange>,
}

/// What ended the thread's sleep.
enum Woke {
    /// Read again.
    Read,
    /// The observer was dropped, or the client closed: end.
    End,
}

impl Run {
    fn run(self) {
        let mut seen = Seen::default();
        let mut backoff = Backoff::new(
            Duration::from_millis(100),
            self.client.session_timeout().max(Duration::from_secs(1)),
        );
        loop {
            let woke = match self.read() {
                Ok((now, watch)) => {
                    backoff.reset();
                    if let Some(change) = seen.after(now) {
                        if self.tx.send(change).is_err() {
                            return;
                        }
                    }
                    self.sleep(Some(&watch), None)
                }
                Err(Error::Closed) => return,
                Err(e) => {
                    let pause = backoff.next_pause();
                    if !e.is_connection_error() {
                        log::warn!(
                            "zkguard: observing the election {}: {e}; reading again in {pause:?}",
                            escape(&self.path)
                        );
                    }
                    self.sleep(None, Some(pause))
                }
            };
            if let Woke::End = woke {
                return;
            }
        }
    }

    /// Until the watch fires, a session event that calls for a read, `pause`, or the end.
    fn sleep(&self, watch: Option<&Receiver<WatchedEvent>>, pause: Option<Duration>) -> Woke {
        let never = crossbeam_channel::never();
        let watch = watch.unwrap_or(&never);
        let timer = pause.map_or_else(crossbeam_channel::never, crossbeam_channel::after);
        loop {
            crossbeam_channel::select! {
                recv(self.stopped) -> _ => return Woke::End,
                // Fired, or dropped by the client: either way read again (a read while
                // disconnected waits or fails, and the failure's pause follows).
                recv(watch) -> _ => return Woke::Read,
                recv(timer) -> _ => return Woke::Read,
                recv(self.session) -> ev => match ev {
                    Ok(SessionEvent::Connected { .. }) | Ok(SessionEvent::Reconnected { .. }) => {
                        return Woke::Read
                    }
                    Ok(SessionEvent::Suspended { .. }) | Ok(SessionEvent::Lost { .. }) => {}
                    Ok(SessionEvent::Closed) | Err(_) => return Woke::End,
                },
            }
        }
    }

    /// Who leads now (id and token), and the one watch that fires at the next change.
    fn read(&self) -> Result<Read> {
        if !self.fair {
            return self.read_single();
        }
        let (client, path) = (&self.client, &self.path);
        loop {
            let (names, watch) = match client.get_children_w(path) {
                Ok((names, _, watch)) => (names, watch),
                Err(Error::NoNode { .. }) => match client.exists_w(path)? {
                    // Made meanwhile: list it.
                    (Some(_), _) => continue,
                    (None, watch) => return Ok((None, watch)),
                },
                Err(e) => return Err(e),
            };
            let Some(first) = names::order(path, names)?.into_iter().next() else {
                return Ok((None, watch));
            };
            match client.get_data(&names::child(path, &first.name)) {
                Ok((data, stat)) => {
                    let id = String::from_utf8_lossy(&data).into_owned();
                    return Ok((Some((id, token_of(&stat))), watch));
                }
                // Gone since the listing (its deletion fires the watch too): list again.
                Err(Error::NoNode { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The unfair election's one node: an `exists` watch on it, then its data.
    fn read_single(&self) -> Result<Read> {
        let (client, path) = (&self.client, &self.path);
        loop {
            let (stat, watch) = client.exists_w(path)?;
            if stat.is_none() {
                return Ok((None, watch));
            }
            match client.get_data(path) {
                Ok((_, stat)) if stat.ephemeral_owner == 0 => {
                    return Err(Error::InvalidPath {
                        path: path.clone(),
                        reason: "a persistent node is at this path; an unfair election \
                                 needs the path for its own ephemeral node"
                            .into(),
                    })
                }
                Ok((data, stat)) => {
                    let id = String::from_utf8_lossy(unfair_id(&data)).into_owned();
                    return Ok((Some((id, token_of(&stat))), watch));
                }
                Err(Error::NoNode { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LeaderChange, Seen};

    fn leader(id: &str, token: u64) -> Option<LeaderChange> {
        Some(LeaderChange::Leader {
            id: id.into(),
            token,
        })
    }

    /// The stream never goes back: an older or repeated leader is not said, `NoLeader` is
    /// said once after a leader, and a newer leader after `NoLeader` is.
    #[test]
    fn the_filter_says_each_change_once_and_never_an_older_leader() {
        let mut s = Seen::default();
        assert_eq!(s.after(None), Some(LeaderChange::NoLeader));
        assert_eq!(s.after(None), None);
        assert_eq!(s.after(Some(("a".into(), 10))), leader("a", 10));
        assert_eq!(s.after(Some(("a".into(), 10))), None, "repeated");
        assert_eq!(s.after(Some(("b".into(), 20))), leader("b", 20));
        assert_eq!(s.after(Some(("a".into(), 10))), None, "older");
        assert_eq!(s.after(None), Some(LeaderChange::NoLeader));
        assert_eq!(s.after(Some(("b".into(), 20))), None, "said before the gap");
        assert_eq!(s.after(Some(("c".into(), 30))), leader("c", 30));
    }
}
