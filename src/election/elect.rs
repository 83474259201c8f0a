//! The election itself: who may run, and how to find out who leads.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::lock::api::{lock_api, Lock, Sealed};
use crate::lock::holding::Holding;
use crate::lock::recipe::{recipe_options, Base};
use crate::queue::{self, names, Canceller, Kind, Participant, Rule, Wait};

use super::candidate::Candidate;
use super::leadership::Leadership;
use super::observe::LeaderObserver;

/// Largest participant id accepted: ZooKeeper refuses node data near 1 MB.
const MAX_ID: usize = 512 * 1024;

/// A leader election among every process that uses the same path.
///
/// Two kinds:
///
/// - **Fair** ([`new`](LeaderElection::new)): candidates queue in arrival order. Each
///   creates an ephemeral sequential node under `path` and waits as a [`Mutex`](crate::Mutex)'s
///   contenders do, so a change of leader wakes two candidates (nothing is ever written to
///   a candidate's node). Node names
///   and data follow Apache Curator's `LeaderLatch` (`_c_<uuid>-latch-<seq>`, the
///   participant id as data): Curator `LeaderLatch` participants and zkguard candidates
///   on the same path elect one leader among themselves.
/// - **Unfair** ([`unfair`](LeaderElection::unfair)): every candidate tries to create one
///   ephemeral node *at* `path`; the losers watch it and race again when it goes. There is
///   no queue, so the order is not fair, and each change of leader wakes every waiting
///   candidate (a herd: N candidates cost N notifications and N creates per change). It is
///   the right choice for a handful of candidates (two or three replicas of a daemon), when
///   the node's path should name the leader directly, or when observers only ever read one
///   node; use the fair kind for more.
///
/// Two ways to take part:
///
/// - **Guard style**, for daemons that do their leader work in the calling thread:
///   [`lead`](LeaderElection::lead) blocks until elected and returns a [`Leadership`];
///   dropping it resigns.
/// - **Background style**, for daemons that lead on another thread:
///   [`join`](LeaderElection::join) returns a [`Candidate`] that stays in the election
///   (across session expiry too) and reports through events.
///
/// Anyone can observe with [`leader`](LeaderElection::leader) and
/// [`participants`](LeaderElection::participants) (a read each), or follow who leads with
/// [`observe`](LeaderElection::observe).
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let election = zkguard::LeaderElection::new(&client, "/services/scheduler", "host-a")?;
/// let leadership = election.lead()?; // blocks until this process leads
/// while leadership.is_valid() {
///     // ... do the leader's work, passing leadership.token() to the resources
/// #   break;
/// }
/// drop(leadership); // resign: the next candidate takes over
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderElection {
    /// The base; its data is the participant id.
    base: Base,
    fair: bool,
}

impl LeaderElection {
    /// A fair election at `path` (a directory: the candidates' nodes go under it), where
    /// this process takes part as `id` (stored as its node's data, shown to observers).
    ///
    /// Nothing is sent to ZooKeeper until the first `lead` or `join`. Fails with
    /// [`Error::InvalidPath`] for a relative path, a trailing slash, an empty segment or
    /// the root, and with [`Error::InvalidArgument`] for an id over 512 KiB.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] naming a bad path, [`Error::InvalidArgument`] for an id over
    /// 512 KiB.
    pub fn new(client: &Client, path: &str, id: impl Into<String>) -> Result<LeaderElection> {
        LeaderElection::make(client, path, id.into(), true)
    }

    /// An unfair election: one ephemeral node at `path` itself, holding `id`. See the
    /// type's documentation for when to choose it.
    ///
    /// # Errors
    ///
    /// As [`LeaderElection::new`].
    pub fn unfair(client: &Client, path: &str, id: impl Into<String>) -> Result<LeaderElection> {
        LeaderElection::make(client, path, id.into(), false)
    }

    fn make(client: &Client, path: &str, id: String, fair: bool) -> Result<LeaderElection> {
        if id.len() > MAX_ID {
            return Err(Error::InvalidArgument {
                name: "id",
                reason: format!(
                    "participant id of {} bytes for election {path}; at most {MAX_ID}",
                    id.len()
                ),
            });
        }
        let mut base = Base::new(client, path)?;
        base.data = id.into_bytes();
        Ok(LeaderElection { base, fair })
    }

    /// The client the election runs on.
    pub(crate) fn client(&self) -> &Client {
        &self.base.client
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        // The data was made from a `String` in `make`.
        std::str::from_utf8(&self.base.data).unwrap_or_default()
    }

    /// Whether the election is fair (queued) rather than unfair (racing for one node).
    pub fn is_fair(&self) -> bool {
        self.fair
    }

    /// Joins the election in the background: a thread of the candidate's own queues, leads
    /// when its turn comes, re-enters after a lost session, and reports through
    /// [`Candidate::events`]. Returns at once; [`Error::Closed`] if the client is closed.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] if the client is closed, [`Error::Spawn`] if the candidate's thread
    /// cannot be started.
    pub fn join(&self) -> Result<Candidate> {
        if self.base.client.is_closing() {
            return Err(Error::Closed);
        }
        let mut election = self.clone();
        election.base.canceller = Canceller::default();
        Candidate::start(election)
    }

    /// The current leader, if there is one: the first node of the queue (fair), or the
    /// node at the path (unfair). Works for any client, candidate or not.
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`] if a fair election's directory holds a node no recipe made;
    /// [`Error::InvalidPath`] if a persistent node is at an unfair election's path (as
    /// [`lead`](LeaderElection::lead) says); and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
    pub fn leader(&self) -> Result<Option<Participant>> {
        if !self.fair {
            let data = queue::single_holder(&self.base.client, &self.base.path)?;
            return Ok(data.map(|data| Participant {
                node: names::base(&self.base.path).to_string(),
                data: unfair_id(&data).to_vec(),
                holds: true,
            }));
        }
        // The head of the queue; if it goes while we read it, look again.
        loop {
            let (client, path) = (&self.base.client, &self.base.path);
            let names = match client.get_children(path) {
                Ok((names, _)) => names,
                Err(Error::NoNode { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let Some(first) = names::order(path, names)?.into_iter().next() else {
                return Ok(None);
            };
            match client.get_data(&names::child(path, &first.name)) {
                Ok((data, _)) => {
                    return Ok(Some(Participant {
                        node: first.name,
                        data,
                        holds: true,
                    }))
                }
                Err(Error::NoNode { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Follows who leads, without taking part: a [`LeaderObserver`] whose
    /// [`events`](LeaderObserver::events) say each new leader (with its token) and when
    /// nobody leads, in order, never an older leader after a newer one (see
    /// [`LeaderChange`](crate::LeaderChange)). Works for any client, and on a Curator
    /// `LeaderLatch` election at the same path; the id given to
    /// [`new`](LeaderElection::new) is not used. One watch per observer; it goes on across
    /// reconnects and session expiry.
    ///
    /// ```
    /// # #[cfg(feature = "testing")]
    /// # fn main() -> zkguard::Result<()> {
    /// # let cluster = zkguard::testing::TestCluster::start(1)?;
    /// # let client = zkguard::Client::connect(&cluster.connect_string())?;
    /// use std::time::Duration;
    /// use zkguard::LeaderChange;
    /// let election = zkguard::LeaderElection::new(&client, "/doc/observe", "host-a")?;
    /// let observer = election.observe()?;
    /// let next = || observer.events().recv_timeout(Duration::from_secs(60));
    /// assert_eq!(next(), Ok(LeaderChange::NoLeader));
    /// let leadership = election.lead()?;
    /// let token = leadership.token();
    /// assert_eq!(next(), Ok(LeaderChange::Leader { id: "host-a".into(), token }));
    /// drop(leadership); // the last candidate leaves
    /// assert_eq!(next(), Ok(LeaderChange::NoLeader));
    /// # Ok(()) }
    /// # #[cfg(not(feature = "testing"))] fn main() {}
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] if the client is closed, [`Error::Spawn`] if the observer's thread
    /// cannot be started.
    pub fn observe(&self) -> Result<LeaderObserver> {
        LeaderObserver::start(&self.base.client, &self.base.path, self.fair)
    }

    /// This participant's node, once it leads (for both styles).
    pub(crate) fn elect(&self, wait: Wait, canceller: &Canceller) -> Result<Option<Holding>> {
        if self.fair {
            self.base.queue(Kind::Election, wait, canceller)
        } else {
            // The node's data is the id and a value unique to this call, which tells our
            // node from another's after a lost create reply.
            let data = format!("{}\n{}", self.id(), uuid::Uuid::new_v4());
            self.base
                .single(Kind::UnfairElection, data.as_bytes(), wait, canceller)
        }
    }
}

// No `with_data`: a candidate's node carries its id.
recipe_options!(
    LeaderElection { base },
    "election",
    "its candidate nodes, its directory (fair) or single node (unfair), and the parents it \
     makes on the way",
    "LeaderElection::new(&client, \"/elections/billing\", \"host-a\")"
);

/// The id in an unfair election node's data (`<id>\n<uuid>`); other data is shown whole.
pub(super) fn unfair_id(data: &[u8]) -> &[u8] {
    match data.iter().rposition(|&b| b == b'\n') {
        Some(i) => &data[..i],
        None => data,
    }
}

impl Sealed for LeaderElection {}

/// As a [`Lock`], acquiring is leading: `acquire` is [`lead`](LeaderElection::lead), and
/// the guard a [`Leadership`].
impl Lock for LeaderElection {
    type Guard = Leadership;

    fn hold(&self, wait: Wait, cancel: &Canceller) -> Result<Option<Leadership>> {
        Ok(self
            .elect(wait, cancel)?
            .map(|holding| Leadership::new(holding, &self.base.path)))
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        if self.fair {
            queue::participants(&self.base.client, &self.base.path, Rule::Exclusive)
        } else {
            Ok(self.leader()?.into_iter().collect())
        }
    }
}

lock_api!(LeaderElection => Leadership, "leadership": lead, try_lead, lead_timeout);
lock_api!(LeaderElection: common [id, is_fair]
    /// Every candidate in queue order, the leader first (`holds` is true for it alone),
    /// with its id as data. An unfair election has no queue: only the leader is listed.
    /// See [`Lock::participants`].
    ///
    /// # Errors
    ///
    /// [`Error::ForeignNode`] if the directory holds a node no recipe made, [`Error::InvalidPath`]
    /// as for [`leader`](LeaderElection::leader), and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
);

#[cfg(test)]
mod tests {
    use super::unfair_id;

    #[test]
    fn unfair_node_data_shows_the_id_without_the_call_value() {
        assert_eq!(unfair_id(b"host-a\n1b4e28ba"), b"host-a");
        assert_eq!(unfair_id(b"multi\nline\n1b4e28ba"), b"multi\nline");
        assert_eq!(
            unfair_id(b"written by someone else"),
            b"written by someone else"
        );
    }
}
