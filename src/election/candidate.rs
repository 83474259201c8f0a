//! The background style: a candidacy kept alive by a thread of its own, reporting events.
//!
//! The candidate's state is one phase (queued; leading, suspended or lost in a term;
//! stopping; ended), moved only by the transitions in [`term`], each emitting its
//! [`LeaderEvent`]; the transition table is that module's doc.

mod leader_term;
mod machine;
#[cfg(test)]
mod model;

use crate::error::escape;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::{Condvar, Mutex};

use crate::backoff::Backoff;
use crate::client::{Bell, Ringing, SessionSink};
use crate::client::{Op, OpResult, SessionEvent, SessionState};
use crate::error::{Error, Result};
use crate::lock::holding::Holding;
use crate::queue::{self, SessionEvents, Wait, WaitOn, Wake};

pub use self::leader_term::LeaderTerm;
use self::machine::Inner;

use super::elect::LeaderElection;
use super::hand_over;

/// What happened to a [`Candidate`], in order.
///
/// A candidate that leads sees `Elected`, then possibly `Suspended` and `Restored` while
/// its connection comes and goes, and finally `Lost` or `Resigned`; after either it is a
/// candidate again and may be `Elected` later. After its session is lost it also says
/// `Rejoined` once the client has a new session (never before: while the servers are
/// unreachable it says nothing more), in which it queues again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderEvent {
    /// This candidate leads. `token` is the fencing token of this term (its node's
    /// creation zxid; larger for every later leader).
    Elected {
        /// The fencing token of this term.
        token: u64,
    },
    /// The connection dropped while leading: the session may still be alive, but this
    /// process cannot know whether it still leads. Stop acting as leader.
    Suspended,
    /// Back within the same session, and leadership was proven again with a quorum write:
    /// the term (and its token) goes on.
    Restored,
    /// Leadership is gone: the session expired, the node was deleted, or the client was
    /// closed. Reported before anyone else can be elected (the client counts the session
    /// timeout itself).
    Lost,
    /// [`Candidate::resign`] stepped down; the candidate is queued again at the back.
    Resigned,
    /// Someone asked this leader to step down: [`revoke`](crate::revoke) on its term's node
    /// ([`LeaderTerm::path`]), as `zkguard revoke` does. Said once per term, while it
    /// leads; the term goes on: stepping down ([`Candidate::resign`]) is up to the caller. A
    /// receiver taken after it was said does not hear it. (A Curator `LeaderLatch` right
    /// behind this leader loses its watch to the request and does not lead when it
    /// resigns: see docs/recipes.md, "Revocation".)
    Revoked,
    /// The session was lost, and the client now has a new session (its id is
    /// [`Client::session_id`](crate::Client::session_id) when this is said), in which the
    /// candidate queues again. Said once per new session after a loss.
    Rejoined,
    /// An error that is not about the connection (an ACL refusing the create, a foreign
    /// node in the election's directory). The candidate tries again after a pause.
    Failed {
        /// What went wrong.
        error: Error,
    },
}

/// A candidacy kept alive in the background by [`LeaderElection::join`].
///
/// A thread of the candidate's own (named `zkguard-candidate`) queues in the election,
/// leads when its turn comes, steps down when leadership is lost, and queues again, after a
/// session expiry too: a daemon stays a candidate until the `Candidate` is dropped or the
/// client is closed. Dropping it (or [`stop`](Candidate::stop), from any thread) leaves the
/// election (its node is deleted at once if the connection is up).
///
/// While it leads, [`term`](Candidate::term) is the term: its node's path, its token, and
/// [fenced writes](LeaderTerm::fenced_multi) that apply only while that term lasts.
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// use zkguard::LeaderEvent;
/// let client = zkguard::Client::connect("127.0.0.1:2181")?;
/// let election = zkguard::LeaderElection::new(&client, "/services/indexer", "host-a")?;
/// let candidate = election.join()?;
/// for event in candidate.events() {
///     match event {
///         LeaderEvent::Elected { token } => println!("leading (token {token})"),
///         LeaderEvent::Suspended | LeaderEvent::Lost => println!("stop leading now"),
///         LeaderEvent::Restored => println!("leading again"),
///         other => println!("{other:?}"),
///     }
/// }
/// # Ok(()) }
/// ```
///
/// The candidate must be kept: `election.join()?;` on its own would leave the election
/// at once, so it is `#[must_use]` (a warning, an error here):
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn stand(election: &zkguard::LeaderElection) -> zkguard::Result<()> {
///     election.join()?; // dropped at once: not a candidate any more
///     Ok(())
/// }
/// ```
#[must_use = "dropping the candidate leaves the election at once; keep it (let candidate = ...) for as long as this process stands"]
pub struct Candidate {
    shared: Arc<Shared>,
}

struct Shared {
    election: LeaderElection,
    /// Never held while calling the client or waiting for anything: the connection thread
    /// takes it too (in `on_session`), to report a suspension or loss the moment it
    /// happens. Moved only by the transitions in [`term`].
    inner: Mutex<Inner>,
    /// Signalled at every transition (waiters look whether the candidate leads, or ended).
    changed: Condvar,
    /// Wakes the thread out of its leading phase (a resign, a drop), ringing `bell`: the
    /// leading phase's `resign` source.
    wake: Ringing<()>,
    /// The same channel's sender, for a term's revocation request to wake the thread with.
    wake_tx: crossbeam_channel::Sender<()>,
    /// What the leading phase's sources ring (its [`queue::wake`]).
    bell: Bell,
}

impl Candidate {
    pub(crate) fn start(election: LeaderElection) -> Result<Candidate> {
        let (wake, wake_rx) = crossbeam_channel::unbounded();
        let bell = Bell::default();
        let shared = Arc::new(Shared {
            election,
            inner: Mutex::new(Inner::new()),
            changed: Condvar::new(),
            wake: Ringing::new(wake.clone(), Some(bell.clone())),
            wake_tx: wake,
            bell,
        });
        let sink: Arc<dyn SessionSink> = shared.clone();
        let (_, state) = shared
            .election
            .client()
            .subscribe_sink(Arc::downgrade(&sink));
        shared.subscribed(state == SessionState::Connected);
        let run = shared.clone();
        std::thread::Builder::new()
            .name("zkguard-candidate".into())
            .spawn(move || run.run(&wake_rx))
            .map_err(|e| Error::spawn("candidate thread", e))?;
        Ok(Candidate { shared })
    }

    /// Whether this candidate leads right now: elected, and its session connected with
    /// leadership not lost. False from the moment the connection drops until leadership is
    /// proven again after the reconnect ([`LeaderEvent::Restored`]).
    pub fn is_leader(&self) -> bool {
        let term = self.shared.inner.lock().leading().cloned();
        term.is_some_and(|h| h.is_valid())
    }

    /// A new receiver of the candidate's events from now on, in order. As with
    /// [`Client::events`](crate::Client::events) and a guard's `lost()`, every call returns
    /// a receiver of its own that gets every later event (several threads can each follow
    /// the candidate). So that one taken after [`join`](LeaderElection::join) misses
    /// nothing it needs, a receiver taken while the candidate leads starts with that term's
    /// [`LeaderEvent::Elected`] (and [`LeaderEvent::Suspended`] if it is suspended now).
    /// Events wait in the receiver until read (an unread receiver grows; drop it when
    /// done). The stream ends (receivers see a disconnect) once the candidate has stopped
    /// for good: dropped, or its client closed; a receiver taken after that is already
    /// disconnected.
    ///
    /// Changed since 0.1.0: every call used to return a handle on one shared queue of every
    /// event since the join, each event received by one of the handles (see the
    /// changelog).
    #[must_use = "the receiver is the only way to hear the events"]
    pub fn events(&self) -> Receiver<LeaderEvent> {
        let (tx, rx) = crossbeam_channel::unbounded();
        // Under the lock the transitions emit with, so nothing falls between the two.
        self.shared.inner.lock().listen(tx);
        rx
    }

    /// Where this candidate stands in the election's queue whenever it queues (after a
    /// join, a resign, a loss): its node once made, then its place in line as it moves (see
    /// [`QueueEvent`](crate::QueueEvent)); an unfair election has no queue and sends nothing.
    #[must_use = "the receiver is the only way to hear the events"]
    pub fn queue_events(&self) -> Receiver<crate::queue::QueueEvent> {
        self.shared.election.canceller().queue_events()
    }

    /// Blocks until this candidate leads, and returns the term's fencing token
    /// (`Ok(Some(token))`), or `Ok(None)` once `timeout` passes, as the locks'
    /// `acquire_timeout` and [`LeaderElection::lead_timeout`] do.
    ///
    /// It returns as soon as the term begins: the term's [`LeaderEvent::Elected`] is
    /// already in every receiver of [`events`](Self::events) taken before, but what comes
    /// next (a suspension, the term's end, a new term) may arrive right after it returns,
    /// so a term can end before the caller uses the token. Read the receiver, or check
    /// [`term`](Self::term) where it matters.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the candidate has stopped for good (its client was closed, or
    /// [`stop`](Candidate::stop) was called).
    pub fn wait_for_leadership(&self, timeout: Duration) -> Result<Option<u64>> {
        let deadline = Instant::now().checked_add(timeout);
        let mut inner = self.shared.inner.lock();
        loop {
            if let Some(h) = inner.leading() {
                return Ok(Some(h.token()));
            }
            if inner.ended() || inner.stopping() {
                return Err(Error::Closed);
            }
            match deadline {
                Some(d) => {
                    if self.shared.changed.wait_until(&mut inner, d).timed_out() {
                        return Ok(inner.leading().map(|h| h.token()));
                    }
                }
                None => self.shared.changed.wait(&mut inner),
            }
        }
    }

    /// The fencing token of the current term, while leading (suspended included).
    pub fn token(&self) -> Option<u64> {
        self.shared.inner.lock().term().map(|h| h.token())
    }

    /// The current term while this candidate leads (suspended included), bound to that
    /// term: its node's [`path`](LeaderTerm::path) and [`token`](LeaderTerm::token), and
    /// [fenced writes](LeaderTerm::fenced_multi) that cannot apply once the term has ended,
    /// even if a later term has begun. `None` when not leading.
    pub fn term(&self) -> Option<LeaderTerm> {
        let term = self.shared.inner.lock().term().cloned();
        term.map(|h| LeaderTerm::new(h, self.shared.election.path()))
    }

    /// Proves that this candidate leads at this instant, with a quorum write (see
    /// [`Leadership::confirm`](crate::Leadership::confirm)). [`Error::NotLeader`] if it does
    /// not lead.
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] if it does not lead (the term is then over); a connection error or
    /// timeout if ZooKeeper cannot be asked.
    pub fn confirm(&self) -> Result<()> {
        self.current()?.confirm()
    }

    /// Applies `ops` only while this candidate leads: the current term's
    /// [`LeaderTerm::fenced_multi`] (one `multi` behind a check of the term's node, on the
    /// session that owns it). To make sure a write belongs to the term a decision was taken
    /// in, keep that term's [`term`](Candidate::term) and write through it instead.
    ///
    /// ```no_run
    /// # fn f(candidate: &zkguard::Candidate) -> zkguard::Result<()> {
    /// use zkguard::Op;
    /// candidate.fenced_multi(&[Op::SetData {
    ///     path: "/app/assignment".into(),
    ///     data: b"shard-7=host-a".to_vec(),
    ///     version: None,
    /// }])?; // Error::NotLeader if this candidate does not lead: nothing applied
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] if it does not lead, and the errors of
    /// [`LeaderTerm::fenced_multi`].
    pub fn fenced_multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        self.current()?.fenced_multi(ops)
    }

    /// The current term, or `NotLeader`.
    fn current(&self) -> Result<LeaderTerm> {
        self.term().ok_or_else(|| Error::NotLeader {
            path: self.shared.election.path().to_string(),
        })
    }

    /// Steps down if leading and queues again at the back ([`LeaderEvent::Resigned`]). When
    /// it returns, this candidate no longer leads and its node is deleted (or, on connection
    /// trouble, its deletion is under way in the background). As
    /// [`Leadership::resign`](crate::Leadership::resign): `Ok(())` if it led,
    /// [`Error::NotLeader`] if it did not (or had just lost leadership).
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`] if it was not leading; the errors every request can return (see
    /// [`Client`](crate::Client#errors-every-request-can-return)) from the delete of its
    /// node, other than connection errors (the delete is retried in the background then):
    /// [`Error::NoAuth`] if the election's directory does not let this identity delete its
    /// node (the node stays until its session ends, and the candidate queues again behind
    /// it).
    pub fn resign(&self) -> Result<()> {
        self.resign_with(&[])
    }

    /// [`resign`](Candidate::resign), the node deleted in one `multi` behind `before`
    /// ([`Holding::release_with`]; a resign without ops).
    fn resign_with(&self, before: &[Op]) -> Result<()> {
        let (term, was_lost) = self.shared.resign();
        let not_leader = || Error::NotLeader {
            path: self.shared.election.path().to_string(),
        };
        let Some(h) = term else {
            return Err(not_leader());
        };
        let released = h.release_with(before).map(|_| ());
        // Queue again only now, so the new node's create does not race the delete that
        // lets the successor in.
        let _ = self.shared.wake.send(());
        match released {
            _ if was_lost => Err(not_leader()),
            Ok(()) | Err(Error::LockLost { .. }) => Ok(()),
            Err(e) if e.is_connection_error() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Hands leadership to the next candidate in the queue and says who took over, as
    /// [`Leadership::hand_over`](crate::Leadership::hand_over) does; the term ends as a
    /// [`resign`](Candidate::resign) ends it ([`LeaderEvent::Resigned`], this candidate
    /// queued again at the back), and only if someone is queued behind it: `Ok(None)`, with
    /// nothing done, if nobody is. The successor is the one behind, unless it left
    /// meanwhile (then whoever leads next, this candidate again if it is alone).
    ///
    /// ```no_run
    /// # fn f(candidate: &zkguard::Candidate) -> zkguard::Result<()> {
    /// use std::time::Duration;
    /// match candidate.hand_over(Duration::from_secs(10))? {
    ///     Some(s) => println!("{} leads now (token {})", zkguard::escape(&s.id), s.token),
    ///     None => println!("nobody to hand over to: still leading"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Leadership::hand_over`](crate::Leadership::hand_over): [`Error::NotLeader`] if
    /// it does not lead, [`Error::Timeout`] if the term ended and no successor was seen
    /// within `within`.
    pub fn hand_over(&self, within: Duration) -> Result<Option<hand_over::Successor>> {
        let term = self.current()?;
        let t = self.handing(&term);
        hand_over::hand_over(&t, within, |ops| self.resign_with(ops))
    }

    /// Hands leadership to the candidate `to` names (an id, or [`Prefer::Newest`](crate::Prefer::Newest)), as
    /// [`Leadership::hand_over_to`](crate::Leadership::hand_over_to) does (asked first,
    /// `within` at most; else to the next candidate); the term ends as a
    /// [`resign`](Candidate::resign) ends it, this candidate queued again at the back.
    ///
    /// # Errors
    ///
    /// As [`Leadership::hand_over_to`](crate::Leadership::hand_over_to): [`Error::NotLeader`]
    /// if it does not lead, [`Error::InvalidArgument`] if no candidate with that id is queued
    /// behind it (nothing done).
    pub fn hand_over_to(
        &self,
        to: impl Into<hand_over::Prefer>,
        within: Duration,
    ) -> Result<Option<hand_over::Successor>> {
        let to = to.into();
        let term = self.current()?;
        let t = self.handing(&term);
        hand_over::hand_over_to(&t, &to, within, |ops| self.resign_with(ops))
    }

    /// A hand-over's view of `term`.
    fn handing<'t>(&'t self, term: &'t LeaderTerm) -> hand_over::Term<'t> {
        hand_over::Term {
            holding: term.holding(),
            election: self.shared.election.path(),
        }
    }

    /// The election this candidate takes part in.
    pub fn election(&self) -> &LeaderElection {
        &self.shared.election
    }

    /// Leaves the election for good, as dropping the candidate does, but through a shared
    /// reference: for a daemon whose threads share the candidate (in an `Arc`) and one of
    /// which stops it. When it returns the candidate no longer leads (its node is deleted,
    /// in the background on connection trouble), [`wait_for_leadership`] returns
    /// [`Error::Closed`], and every [`events`](Candidate::events) receiver sees its stream
    /// end once the candidate's thread has wound down (no `Lost` or `Resigned` for the
    /// term it ends). Calling it again does nothing.
    ///
    /// [`wait_for_leadership`]: Candidate::wait_for_leadership
    pub fn stop(&self) {
        let term = self.shared.stop();
        self.shared.election.canceller().shut();
        let _ = self.shared.wake.send(());
        if let Some(h) = term {
            h.release_quietly();
        }
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate")
            .field("election", &self.shared.election)
            .field("leader", &self.is_leader())
            .finish()
    }
}

impl Shared {
    /// The candidate's thread: queue, lead, queue again, until dropped or closed.
    fn run(&self, wake: &Receiver<()>) {
        let mut backoff = Backoff::new(
            Duration::from_millis(100),
            self.election.client().session_timeout(),
        );
        while !self.inner.lock().stopping() {
            let r = self
                .election
                .elect(Wait::Forever, &self.election.canceller());
            match elected(r) {
                Elected::Lead(h) => {
                    backoff.reset();
                    self.lead(h, wake);
                }
                Elected::Again => {}
                Elected::End => break,
                Elected::Fail(e) => {
                    let pause = backoff.next_pause();
                    log::warn!(
                        "zkguard: candidate {:?} in {}: {e}; trying again in {pause:?}",
                        self.election.id(),
                        escape(self.election.path())
                    );
                    self.fail(e);
                    let _ = wake.recv_timeout(pause);
                }
            }
        }
        if let Some(h) = self.end() {
            h.release_quietly();
        }
    }

    /// One term: from election until leadership is lost, resigned, or the candidate goes.
    fn lead(&self, holding: Holding, wake: &Receiver<()>) {
        let h = Arc::new(holding);
        let events = SessionEvents::new(self.election.client(), &self.bell);
        // Stopping, or the term ended before it began: no Elected for it; the loop queues
        // again.
        if !self.begin(&h) {
            h.release_quietly();
            return;
        }
        // The guard keeps a watch on our node from the grant on, so its deletion by someone
        // else ends the term.
        let lost = h.lost(&self.bell);
        // A revocation request wakes the thread as a resign would; it tells it apart by
        // asking the node (once per term).
        h.ring_revoked(self.wake_tx.clone(), &self.bell);
        let mut revoked = false;
        // While suspended on a live connection whose proof failed (a slow server): when to
        // try the proof again.
        let mut retry: Option<Instant> = None;
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
        loop {
            // No deadline; `retry` as the tick.
            let woke = queue::wake(WaitOn {
                lost: Some(&lost),
                resign: Some(wake),
                tick: retry,
                ..WaitOn::new(&self.bell, &events.rx)
            });
            if !revoked && h.is_revoked() {
                revoked = true;
                self.revoked(&h);
            }
            match heard(woke, || self.inner.lock().is_term(&h)) {
                Heard::Wait => continue,
                Heard::Prove => {}
                Heard::Lost => break,
                Heard::Over => return,
            }
            retry = None;
            match proven(h.confirm()) {
                Proof::Restore => {
                    backoff.reset();
                    if !self.restore(&h) {
                        return;
                    }
                }
                Proof::Lost => break,
                Proof::Retry => {
                    if self.inner.lock().connected() {
                        retry = Some(Instant::now() + backoff.next_pause());
                    }
                }
            }
        }
        // Lost (reported already if the session went; not yet if the node was deleted).
        if !self.finish(&h) {
            return;
        }
        // Nothing to delete if the session is gone, or someone deleted the node; if a
        // watch report cannot be trusted, this makes sure.
        h.release_quietly();
    }
}

/// What the candidate's thread does with what an election returned.
enum Elected<H> {
    /// Lead with this node.
    Lead(H),
    /// Queue again: a cancel (the candidate is going away, or a session was lost: the loop
    /// says so and queues again).
    Again,
    /// The candidate ends: its client closed, by its owner or because the ensemble refused
    /// its credentials (then every request says `AuthFailed`).
    End,
    /// Any other error: said, then a pause, then queue again.
    Fail(Error),
}

/// The decision on an election's outcome `r` (shared with the model checker).
fn elected<H>(r: Result<Option<H>>) -> Elected<H> {
    match r {
        Ok(Some(h)) => Elected::Lead(h),
        Ok(None) | Err(Error::Cancelled { .. }) => Elected::Again,
        Err(Error::Closed) | Err(Error::AuthFailed) => Elected::End,
        Err(e) => Elected::Fail(e),
    }
}

/// What a term's wake-up `woke` means; `is_term` says whether the term is still the
/// current one (asked only on a resign). Shared with the model checker.
fn heard(woke: Wake, is_term: impl FnOnce() -> bool) -> Heard {
    match woke {
        Wake::Lost => Heard::Lost,
        Wake::Session(ev) => match ev {
            // Suspensions are reported by `on_session` as they happen.
            Ok(SessionEvent::Suspended { .. }) | Ok(SessionEvent::Connected { .. }) => Heard::Wait,
            Ok(SessionEvent::Reconnected { .. }) => Heard::Prove,
            Ok(SessionEvent::Lost { .. }) | Ok(SessionEvent::Closed) | Err(_) => Heard::Lost,
        },
        Wake::Tick | Wake::Deadline => Heard::Prove,
        // Not ours any more: resigned or dropped meanwhile.
        Wake::Resign if !is_term() => Heard::Over,
        // A revocation request (told apart by asking the node, before this).
        Wake::Resign => Heard::Wait,
        // No watch or cancel is given.
        Wake::Cancel | Wake::Watch(..) => Heard::Wait,
    }
}

/// What a leader's proof (`confirm`) says.
enum Proof {
    /// Proven: restore the term.
    Restore,
    /// The node is gone: the term is lost.
    Lost,
    /// Cut off again (the next session event decides), or a slow server: try again later
    /// if the link is up.
    Retry,
}

/// The decision on a proof's outcome `r` (shared with the model checker).
fn proven(r: Result<()>) -> Proof {
    match r {
        Ok(()) => Proof::Restore,
        Err(Error::LockLost { .. }) => Proof::Lost,
        Err(_) => Proof::Retry,
    }
}

/// What the leading loop does after a wake-up.
enum Heard {
    /// Nothing to do: wait again.
    Wait,
    /// Prove leadership (after a reconnect, or the retry's time came).
    Prove,
    /// The term is lost: end it.
    Lost,
    /// The term was ended meanwhile (a resign, a drop): leave.
    Over,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proof that finds the node gone (or the session over, which `confirm` reports as
    /// lost too) ends the term; anything else is tried again. Reading "gone" as a retry
    /// (M16 of the mutation table) would keep proving a term that can never come back.
    #[test]
    fn a_proof_that_finds_the_node_gone_ends_the_term() {
        assert!(matches!(proven(Ok(())), Proof::Restore));
        let lost = Error::LockLost {
            path: "/e/n".into(),
        };
        assert!(matches!(proven(Err(lost)), Proof::Lost));
        assert!(matches!(proven(Err(Error::ConnectionLoss)), Proof::Retry));
        let slow = Error::Timeout {
            op: "confirm",
            path: "/e/n".into(),
            after: Duration::from_secs(1),
        };
        assert!(matches!(proven(Err(slow)), Proof::Retry));
    }
}
