//! The context of one acquire call, shared by every acquire loop: the queue's two phases
//! ([`enqueue`](super::enqueue) and the [`Waiter`](super::waiter::Waiter)), the single node
//! (`single.rs`) and the lease phase behind a gate (`lease.rs`). An [`Attempt`]
//! carries the client, the path errors name, the caller's [`Wait`] and deadline, the cancel
//! and session-event receivers and the back-off of requests that met connection trouble;
//! its methods are the checks every loop makes at the top of a round ([`Attempt::checked`]),
//! its pause after trouble ([`Attempt::pause`]) and its wait ([`Attempt::woke`]). The two
//! rules every loop applies are here, each decided once: what a request's error means
//! ([`Verdict`]) and what a wake-up means ([`Woke`]). Here too the types the loops share:
//! what a recipe asks for ([`Spec`], with its [`Place`]: which queue, from which its node
//! names, its rule and whether a try may wait come), how an attempt ends ([`Next`]), what a session event
//! means to a waiter ([`News`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::cancel::{CancelWait, Canceller, QueueEvent};
use super::held::Acquired;
use super::kind::Kind;
use super::names;
use super::rules::Rule;
use super::wake::{wake, WaitOn, Wake};
use crate::backoff::Backoff;
use crate::client::{Bell, Client, Ringing, SessionSink};
use crate::client::{EventType, NodeAcl, SessionEvent, WatchedEvent};
use crate::error::{Error, Result};
use crate::metrics::{Labels, Outcome};

/// What a recipe asks the queue for: where it queues and what its node is ([`Place`]: its
/// [`Kind`], from which its node names and its rule come, or a semaphore's place at or
/// behind its gate), and what its nodes carry. Every sequential recipe differs from the
/// others only in this.
#[derive(Clone, Copy)]
pub(crate) struct Spec<'a> {
    /// The recipe's own path, the one its errors name (a semaphore queues in directories
    /// under its path; its caller knows only the path).
    pub path: &'a str,
    /// The directory our node queues in (a semaphore's: its `leases`).
    pub dir: &'a str,
    /// Which queue `dir` is, and so what our node is named and waits for.
    pub place: Place<'a>,
    /// Our node's data.
    pub data: &'a [u8],
    /// The ACL of every node this call creates: ours, the directory and its parents. One
    /// that keeps others out also has the directory checked (`tenancy.rs`).
    pub acl: &'a NodeAcl,
}

/// Which queue a [`Spec`]'s directory is: a recipe's own, or one of a semaphore's two (the
/// one gated recipe: `lease.rs`). A gate and the directory after it are only ever the
/// semaphore's, so its variants carry its permit count, and no other kind has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place<'a> {
    /// The recipe's own queue, by its kind's marker and rule (every recipe but the
    /// semaphore).
    Own(Kind),
    /// A semaphore's lease: the queue in `gate` (its internal lock, `locks`, Curator's
    /// layout) is taken first and held while our lease waits by count for one of
    /// `permits`.
    Behind { gate: &'a str, permits: u32 },
    /// A gate's own queue, taken first by a lease [`Behind`](Place::Behind) it: an
    /// exclusive lock (Curator's `InterProcessMutex` nodes) whose head goes on to queue in
    /// `then`, the leases of a semaphore of `permits`.
    Gate { then: &'a str, permits: u32 },
}

impl Place<'_> {
    /// The recipe our node is for (the semaphore, at either of its places).
    pub(crate) fn kind(self) -> Kind {
        match self {
            Place::Own(kind) => kind,
            Place::Behind { permits, .. } | Place::Gate { permits, .. } => Kind::Semaphore(permits),
        }
    }

    /// The marker of our node's name (`lock-`, `__READ__`, …): the kind's, but in a gate's
    /// queue, Curator's lock nodes'.
    pub(crate) fn marker(self) -> &'static str {
        match self {
            Place::Gate { .. } => names::LOCK,
            _ => self.kind().marker(),
        }
    }

    /// Which node blocks ours: the kind's, but in a gate's queue, the exclusive lock's.
    pub(crate) fn rule(self) -> Rule {
        match self {
            Place::Gate { .. } => Rule::Exclusive,
            _ => self.kind().rule(),
        }
    }

    /// Whether a try blocked in this queue waits for its turn (up to its deadline: one
    /// request timeout): only in a gate's queue, and only while a permit is free after it,
    /// as the gate's holder is then taking it and lets go within a round trip or two; in
    /// any other queue (or with no permit free) it says no at once.
    pub(crate) fn try_waits(self, c: &Client) -> Result<bool> {
        let Place::Gate { then, permits } = self else {
            return Ok(false);
        };
        match c.get_children(then) {
            Ok((names, _)) => Ok(names.len() < permits as usize),
            Err(Error::NoNode { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }
}

impl<'a> Spec<'a> {
    /// A recipe at `path` queueing in `dir` at `place`, its nodes carrying `data` with
    /// `acl`.
    pub(crate) fn new(
        place: Place<'a>,
        path: &'a str,
        dir: &'a str,
        data: &'a [u8],
        acl: &'a NodeAcl,
    ) -> Spec<'a> {
        Spec {
            path,
            dir,
            place,
            data,
            acl,
        }
    }
}

/// How long an acquire may wait. (`pub` only to appear in `Lock`'s hidden method; the
/// module is private.)
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    /// Not at all: take it now or leave nothing behind.
    Try,
    /// Until this instant.
    Until(Instant),
    /// Until acquired, cancelled, or the client is closed.
    Forever,
}

impl Wait {
    pub(crate) fn timeout(d: Duration) -> Wait {
        match Instant::now().checked_add(d) {
            Some(t) => Wait::Until(t),
            None => Wait::Forever,
        }
    }

    /// When the call gives up. A try waits for nothing, connection trouble included: it
    /// gets one request timeout.
    pub(crate) fn deadline(self, client: &Client) -> Option<Instant> {
        match self {
            Wait::Until(t) => Some(t),
            Wait::Try => Some(Instant::now() + client.timeout()),
            Wait::Forever => None,
        }
    }
}

/// Why the current attempt ends.
pub(crate) enum Next {
    /// Start over with a new node (the session changed or our node vanished).
    Restart,
    /// Give up: deadline passed (`Ok(None)`), or an error.
    Done(Result<Option<Acquired>>),
}

/// What an error of a request means to a waiting loop: the one rule of every acquire loop
/// (enqueue's create, its lost-reply recovery and its directory check; the `Waiter`'s
/// listing and watches; the lease phase's listing; the single node's race and wait; the
/// semaphore's count record). [`Attempt::failed`] applies it.
///
/// The one difference between loops is intended and is its input, `holds`: whether the
/// loop has a node made in a session it depends on. For such a loop (the `Waiter`, the
/// lease phase, the directory check behind a create) the end of that session, or of the
/// directory its node is in (`NoNode`), means the node is gone: the attempt starts over
/// with a new node. For a loop with no node yet (a create, its recovery, the single node,
/// the count record) an expired session is only connection trouble: the next session
/// comes, and the request is made again in it. Errors a loop expects as an answer (a
/// create's `NoNode` for a missing parent, `NodeExists`, a `BadVersion` of the count
/// record, the single node's `NoNode`) are its own and never reach the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The request's outcome is unknown (connection trouble, or a session that expired
    /// under a loop with no node): pause, then try again.
    Retry,
    /// Our node is gone, or the session it was made in: start over with a new node.
    Restart,
    /// The call ends with the error.
    Fail,
}

impl Verdict {
    /// The verdict on `e` for a loop that `holds` a node of its session, or not yet.
    pub(crate) fn of(e: &Error, holds: bool) -> Verdict {
        match e {
            e if e.is_connection_error() => Verdict::Retry,
            Error::SessionExpired if !holds => Verdict::Retry,
            Error::SessionExpired | Error::NoNode { .. } if holds => Verdict::Restart,
            _ => Verdict::Fail,
        }
    }
}

/// What a wake-up of an acquire loop's wait ([`Attempt::woke`]) means to the loop: the one
/// rule of every acquire loop's wait (the `Waiter`'s, the lease phase's, the single
/// node's), as [`Verdict`] is of its requests' errors. Each loop handles only what its own
/// watches heard; the rest, the end of the attempt above all, is decided here once.
pub(crate) enum Woke {
    /// The watch at this index of the wait's list fired, and its node is gone or still
    /// there ([`Fired`]).
    Watch(usize, Fired),
    /// Nothing for the loop: wait on (a suspension; news from before our node was made).
    Again,
    /// Look again: list (a reconnect, the slow tick), or for a loop with no node yet, race
    /// again (any session news but the client's close, its watch's session lost).
    List,
    /// The attempt ends so: cancelled, the deadline passed (`Ok(None)`), our node's session
    /// gone (`Restart`), the client closed.
    End(Next),
}

/// What a watch that fired says of its node (an event that ends the wait is
/// [`Woke::End`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fired {
    /// The node was deleted.
    Deleted,
    /// The node is still there (its data or its children changed, or the watch's sender
    /// went); the watch is spent.
    Changed,
}

impl Woke {
    /// The meaning of `w` to a loop whose node belongs to session `owner` (`None`: a loop
    /// with no node yet, the single node's); an end by cancel names `path`. The one input
    /// besides the wake-up is `owner`, as `holds` is [`Verdict::of`]'s: a loop with a node
    /// starts over when its session ends; one with none only races again.
    pub(crate) fn of(w: Wake, owner: Option<i64>, path: &str) -> Woke {
        let closed = || Woke::End(Next::Done(Err(Error::Closed)));
        match w {
            Wake::Watch(i, ev) => match ev.map(|e| e.event_type) {
                Ok(EventType::NodeDeleted) => Woke::Watch(i, Fired::Deleted),
                Ok(EventType::Closed) => closed(),
                Ok(EventType::SessionLost) if owner.is_some() => Woke::End(Next::Restart),
                Ok(EventType::SessionLost) => Woke::List,
                _ => Woke::Watch(i, Fired::Changed),
            },
            Wake::Session(ev) => match owner {
                Some(owner) => match News::of(ev, owner) {
                    News::Wait => Woke::Again,
                    News::Relist => Woke::List,
                    News::Restart => Woke::End(Next::Restart),
                    News::Closed => closed(),
                },
                None => match ev {
                    Ok(SessionEvent::Closed) | Err(_) => closed(),
                    Ok(_) => Woke::List,
                },
            },
            Wake::Cancel => Woke::End(Next::Done(Err(Error::cancelled(path)))),
            Wake::Deadline => Woke::End(Next::Done(Ok(None))),
            // The slow re-check; `lost` and `resign` are a leader's, never an attempt's.
            Wake::Tick | Wake::Lost | Wake::Resign => Woke::List,
        }
    }
}

/// One acquire call's context: what every round of its loops checks, pauses and waits on.
pub(crate) struct Attempt<'a> {
    pub client: &'a Client,
    /// The path the call's errors name (the recipe's, `Spec::path`).
    pub path: &'a str,
    pub wait: Wait,
    /// When the call gives up (`Wait::deadline`, taken when the context is made).
    pub deadline: Option<Instant>,
    /// The cancel registration, the session's events and the bell they and the call's
    /// watches ring ([`wake`]).
    sources: Sources,
    /// The pauses after connection trouble; each loop starts it afresh. Made at the first
    /// pause: its seed is a random number (a system call), which a call that meets no
    /// trouble, nearly every one, never needs.
    backoff: Option<Backoff>,
    /// What the call's measurements are labeled with.
    labels: Arc<Labels>,
    /// When the call began (its wait is measured from here).
    began: Instant,
    /// Whether the call has a node in a queue (counted in the waiters gauge).
    queued: bool,
    /// The place in line last told (`QueueEvent::Position`).
    ahead: Option<usize>,
    /// When the waiter heard the node it waited on go (the handoff gap's start).
    heard: Option<Instant>,
}

impl<'a> Attempt<'a> {
    /// The context of an acquire of recipe `kind` at `path` (a queue's: its
    /// [`Spec::path`] and its [`Place::kind`]), registered with `canceller` and the client's
    /// session events until it is dropped.
    pub(crate) fn new(
        client: &'a Client,
        (path, kind): (&'a str, Kind),
        wait: Wait,
        canceller: &Canceller,
    ) -> Attempt<'a> {
        Attempt {
            client,
            path,
            wait,
            deadline: wait.deadline(client),
            sources: Sources::new(client, canceller),
            backoff: None,
            labels: Arc::new(Labels::new(
                client.meter(),
                (kind.label(), kind.leads()),
                path,
            )),
            began: Instant::now(),
            queued: false,
            ahead: None,
            heard: None,
        }
    }

    /// Our node `node` was created: the call is in line (and told so).
    pub(crate) fn enqueued(&mut self, node: &str) {
        if !self.queued {
            self.queued = true;
            self.client.meter().queued(&self.labels, true);
        }
        self.ahead = None;
        self.heard = None;
        self.sources.cancel.tell(QueueEvent::Queued {
            node: node.to_string(),
        });
    }

    /// A listing found `ahead` nodes ahead of our `node`: told if that changed.
    pub(crate) fn position(&mut self, node: &str, ahead: usize) {
        if self.ahead != Some(ahead) {
            self.ahead = Some(ahead);
            self.sources.cancel.tell(QueueEvent::Position {
                node: node.to_string(),
                ahead,
            });
        }
    }

    /// The node we waited on went (`true`: just now, the handoff gap starts), or we wait
    /// again (`false`).
    pub(crate) fn heard_release(&mut self, now: bool) {
        self.heard = now.then(Instant::now);
    }

    /// Out of line (granted or given up).
    fn dequeued(&mut self) {
        if std::mem::take(&mut self.queued) {
            self.client.meter().queued(&self.labels, false);
        }
    }

    /// The call ends with `r`: measured (its outcome, its wait, the handoff gap of a
    /// grant), and a node acquired gets the labels its guard is measured with.
    pub(crate) fn end(&mut self, mut r: Result<Option<Acquired>>) -> Result<Option<Acquired>> {
        self.dequeued();
        let outcome = match &mut r {
            Ok(Some(a)) => {
                if self.ahead.is_some() {
                    self.position(&a.path, 0);
                }
                a.labels = Some(self.labels.clone());
                Outcome::Acquired
            }
            Ok(None) if matches!(self.wait, Wait::Try) => Outcome::Busy,
            Ok(None) => Outcome::TimedOut,
            Err(Error::Cancelled { .. }) => Outcome::Cancelled,
            // A try that could not reach the server within its one request timeout.
            Err(Error::Timeout { .. }) => Outcome::TimedOut,
            Err(_) => Outcome::Failed,
        };
        let meter = self.client.meter();
        meter.acquire_ended(&self.labels, outcome, self.began.elapsed());
        if let (Outcome::Acquired, Some(heard)) = (outcome, self.heard) {
            meter.handoff(&self.labels, heard.elapsed());
        }
        r
    }

    /// The checks at the top of a round: a cancel ends the attempt (`Cancelled`); so does,
    /// for a loop whose node belongs to session `owner`, another session (`Restart`); and
    /// then the deadline ([`bounded`](Attempt::bounded)).
    pub(crate) fn checked(&self, owner: Option<i64>) -> std::result::Result<Client, Next> {
        self.live(owner)?;
        self.bounded()
    }

    /// The checks of [`checked`](Attempt::checked) without the deadline's.
    pub(crate) fn live(&self, owner: Option<i64>) -> std::result::Result<(), Next> {
        // The state, not the channel: a pause may have taken the cancel's message.
        if self.sources.cancel.is_cancelled() {
            return Err(self.cancelled());
        }
        match owner {
            Some(owner) if self.client.session_id() != owner => Err(Next::Restart),
            _ => Ok(()),
        }
    }

    /// A handle whose requests end by the deadline; once it has passed, the attempt ends
    /// (`Ok(None)`, or for a try, which waits for nothing, the timeout of the request that
    /// could not be made).
    pub(crate) fn bounded(&self) -> std::result::Result<Client, Next> {
        bounded(self.client, self.deadline).ok_or_else(|| {
            Next::Done(match self.wait {
                Wait::Try => Err(Error::Timeout {
                    op: "try_acquire",
                    path: self.path.to_string(),
                    after: self.client.timeout(),
                }),
                _ => Ok(None),
            })
        })
    }

    /// A request of a loop failed with `e`: [`Verdict::of`] says what that means (`holds`:
    /// whether the loop has a node of its session). `Ok`: retry, after a pause; `Err`: the
    /// attempt ends so.
    pub(crate) fn failed(&mut self, e: Error, holds: bool) -> std::result::Result<(), Next> {
        match Verdict::of(&e, holds) {
            Verdict::Retry => {
                self.pause();
                Ok(())
            }
            Verdict::Restart => Err(Next::Restart),
            Verdict::Fail => Err(Next::Done(Err(e))),
        }
    }

    /// Waits on `watches`, the session's events, a cancel, the deadline and `tick`, and
    /// says what the wake-up means to a loop whose node belongs to session `owner` (`None`:
    /// a loop with no node yet): [`Woke::of`], the one rule.
    pub(crate) fn woke(
        &self,
        watches: &[&Receiver<WatchedEvent>],
        tick: Option<Instant>,
        owner: Option<i64>,
    ) -> Woke {
        Woke::of(self.wake(watches, tick), owner, self.path)
    }

    /// The attempt ends cancelled.
    pub(crate) fn cancelled(&self) -> Next {
        Next::Done(Err(Error::cancelled(self.path)))
    }

    /// Starts the back-off afresh (a new loop, or the server answers again).
    pub(crate) fn reset_backoff(&mut self) {
        if let Some(b) = &mut self.backoff {
            b.reset();
        }
    }

    /// Waits a little after connection trouble: until the session changes, a cancel, the
    /// deadline, or the back-off's next pause.
    pub(crate) fn pause(&mut self) {
        let pause = self.backoff.get_or_insert_with(retry_backoff).next_pause();
        let until = Instant::now() + pause;
        // What woke it is left to the next round's checks (a cancel is state: `live`).
        let _ = self.wake(&[], Some(until));
    }

    /// The bell of the call's waits: a watch they wait on is armed in a pipeline given it
    /// ([`Pipeline::ring`](crate::client::Pipeline::ring)).
    pub(crate) fn bell(&self) -> &Bell {
        &self.sources.bell
    }

    /// [`wake`] on `watches`, the session's events, a cancel, the deadline and `tick`.
    fn wake(&self, watches: &[&Receiver<WatchedEvent>], tick: Option<Instant>) -> Wake {
        let Sources {
            bell,
            cancel,
            events,
        } = &self.sources;
        wake(WaitOn {
            watches,
            cancel: Some(&cancel.rx),
            deadline: self.deadline,
            tick,
            ..WaitOn::new(bell, &events.rx)
        })
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        self.dequeued();
    }
}

/// A handle whose requests end by the caller's deadline; `None` once it has passed.
fn bounded(client: &Client, deadline: Option<Instant>) -> Option<Client> {
    match deadline {
        None => Some(client.clone()),
        Some(d) => {
            let left = d.checked_duration_since(Instant::now())?;
            if left.is_zero() {
                return None;
            }
            Some(client.with_timeout(left.min(client.timeout())))
        }
    }
}

/// The back-off of a recipe's requests that met connection trouble.
fn retry_backoff() -> Backoff {
    Backoff::new(Duration::from_millis(50), Duration::from_secs(1))
}

/// What an acquire call's waits listen to besides their watches, made once per call with
/// its [`Attempt`]: its cancel registration, the session's events, and the bell both ring.
struct Sources {
    bell: Bell,
    cancel: CancelWait,
    events: SessionEvents,
}

impl Sources {
    fn new(client: &Client, canceller: &Canceller) -> Sources {
        let bell = Bell::default();
        Sources {
            cancel: canceller.register(&bell),
            events: SessionEvents::new(client, &bell),
            bell,
        }
    }
}

/// Forwards session events into a waiter's channel, ringing its bell.
struct Forward(Ringing<SessionEvent>);

impl SessionSink for Forward {
    fn on_session(&self, ev: &SessionEvent) {
        let _ = self.0.send(*ev);
    }
}

/// A channel of session events for one waiting call. Unlike `Client::events`, it leaves
/// the client's list as soon as it is dropped (the list holds it weakly).
pub(crate) struct SessionEvents {
    _sink: Arc<dyn SessionSink>,
    pub rx: Receiver<SessionEvent>,
}

impl SessionEvents {
    /// Events that ring `bell` as they come.
    pub(crate) fn new(client: &Client, bell: &Bell) -> SessionEvents {
        let (tx, rx) = crossbeam_channel::unbounded();
        let sink: Arc<dyn SessionSink> = Arc::new(Forward(Ringing::new(tx, Some(bell.clone()))));
        client.subscribe_sink(Arc::downgrade(&sink));
        SessionEvents { _sink: sink, rx }
    }
}

/// What a waiter whose node belongs to session `owner` makes of a session event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum News {
    /// Nothing to do: wait on.
    Wait,
    /// Same session, new connection: list again.
    Relist,
    /// Our session is gone (or another began): start over.
    Restart,
    /// The client was closed.
    Closed,
}

impl News {
    pub(crate) fn of(ev: Result<SessionEvent, crossbeam_channel::RecvError>, owner: i64) -> News {
        match ev {
            Ok(SessionEvent::Suspended { .. }) => News::Wait,
            Ok(SessionEvent::Closed) | Err(_) => News::Closed,
            Ok(SessionEvent::Reconnected { .. }) => News::Relist,
            // News from before our node was made, read only now (the events that came
            // while we queued, or while a recipe took its internal lock, wait in the
            // channel): the start of the session our node belongs to, or the end of an
            // earlier one. Starting over for them would put us at the back for nothing.
            Ok(SessionEvent::Connected { session_id }) if session_id == owner => News::Wait,
            Ok(SessionEvent::Lost { session_id, .. }) if session_id != owner => News::Wait,
            Ok(_) => News::Restart,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Fired, News, Next, Place, Verdict, Woke};
    use crate::client::{EventType, LossReason, SessionEvent, WatchedEvent};
    use crate::error::Error;
    use crate::queue::kind::Kind;
    use crate::queue::names;
    use crate::queue::rules::Rule;
    use crate::queue::wake::Wake;

    /// A place's kind, marker and rule: its kind's in a recipe's own queue and behind a
    /// gate; at the gate, still the semaphore (its labels), but Curator's lock nodes and
    /// the exclusive rule.
    #[test]
    fn a_place_gives_its_kind_marker_and_rule() {
        let own = Place::Own(Kind::Read);
        assert_eq!(
            (own.kind(), own.marker(), own.rule()),
            (Kind::Read, names::READ, Rule::Read)
        );
        let behind = Place::Behind {
            gate: "/s/locks",
            permits: 3,
        };
        assert_eq!(
            (behind.kind(), behind.marker(), behind.rule()),
            (Kind::Semaphore(3), names::LEASE, Rule::Semaphore(3))
        );
        let gate = Place::Gate {
            then: "/s/leases",
            permits: 3,
        };
        assert_eq!(
            (gate.kind(), gate.marker(), gate.rule()),
            (Kind::Semaphore(3), names::LOCK, Rule::Exclusive)
        );
    }

    fn watch(t: EventType) -> Wake {
        Wake::Watch(
            2,
            Ok(WatchedEvent {
                event_type: t,
                path: "/d/n".into(),
            }),
        )
    }

    /// What the wake-up rule makes of each event a watch can bring: only a deletion is a
    /// deletion, a lost session starts over a loop with a node and a close ends the call;
    /// the rest (a data change, a dropped watch) is a change (re-armed, or counted again).
    /// Reading a lost session as a data change (M6 of the mutation table) would re-arm a
    /// watch that never fires and wait for nothing.
    #[test]
    fn a_watch_event_is_told_apart() {
        let of = |w| Woke::of(w, Some(OURS), "/d");
        assert!(matches!(
            of(watch(EventType::NodeDeleted)),
            Woke::Watch(2, Fired::Deleted)
        ));
        assert!(matches!(
            of(watch(EventType::SessionLost)),
            Woke::End(Next::Restart)
        ));
        assert!(matches!(
            of(watch(EventType::Closed)),
            Woke::End(Next::Done(Err(Error::Closed)))
        ));
        for t in [
            EventType::NodeDataChanged,
            EventType::NodeCreated,
            EventType::NodeChildrenChanged,
        ] {
            assert!(
                matches!(of(watch(t)), Woke::Watch(2, Fired::Changed)),
                "{t:?}"
            );
        }
        assert!(matches!(
            of(Wake::Watch(0, Err(crossbeam_channel::RecvError))),
            Woke::Watch(0, Fired::Changed)
        ));
    }

    /// The ends every loop shares: a cancel (naming the path), the deadline (not acquired),
    /// and the slow tick, which looks again.
    #[test]
    fn a_cancel_the_deadline_and_the_tick_mean_the_same_to_every_loop() {
        for owner in [Some(OURS), None] {
            assert!(matches!(
                Woke::of(Wake::Cancel, owner, "/d"),
                Woke::End(Next::Done(Err(Error::Cancelled { path }))) if path == "/d"
            ));
            assert!(matches!(
                Woke::of(Wake::Deadline, owner, "/d"),
                Woke::End(Next::Done(Ok(None)))
            ));
            assert!(matches!(Woke::of(Wake::Tick, owner, "/d"), Woke::List));
        }
    }

    /// A loop with a node reads session events by `News::of`.
    #[test]
    fn a_loop_with_a_node_reads_session_events_as_news() {
        let of = |ev| Woke::of(Wake::Session(Ok(ev)), Some(OURS), "/d");
        let suspended = SessionEvent::Suspended { session_id: OURS };
        assert!(matches!(of(suspended), Woke::Again));
        let reconnected = SessionEvent::Reconnected { session_id: OURS };
        assert!(matches!(of(reconnected), Woke::List));
        let other = SessionEvent::Connected { session_id: OTHER };
        assert!(matches!(of(other), Woke::End(Next::Restart)));
        assert!(matches!(
            of(SessionEvent::Closed),
            Woke::End(Next::Done(Err(Error::Closed)))
        ));
    }

    /// A loop with no node yet (the single node's) races again at any news but the close,
    /// its watch's lost session included: it has nothing to start over.
    #[test]
    fn a_loop_with_no_node_races_again_but_at_a_close() {
        let of = |w| Woke::of(w, None, "/u");
        let lost = SessionEvent::Lost {
            session_id: OURS,
            reason: LossReason::Expired,
        };
        for ev in [
            SessionEvent::Suspended { session_id: OURS },
            SessionEvent::Reconnected { session_id: OURS },
            SessionEvent::Connected { session_id: OTHER },
            lost,
        ] {
            assert!(matches!(of(Wake::Session(Ok(ev))), Woke::List), "{ev:?}");
        }
        assert!(matches!(of(watch(EventType::SessionLost)), Woke::List));
        assert!(matches!(
            of(Wake::Session(Ok(SessionEvent::Closed))),
            Woke::End(Next::Done(Err(Error::Closed)))
        ));
        assert!(matches!(
            of(Wake::Session(Err(crossbeam_channel::RecvError))),
            Woke::End(Next::Done(Err(Error::Closed)))
        ));
        assert!(matches!(
            of(watch(EventType::Closed)),
            Woke::End(Next::Done(Err(Error::Closed)))
        ));
    }

    #[test]
    fn connection_trouble_is_retried_by_every_loop() {
        let e = Error::ConnectionLoss;
        assert_eq!(Verdict::of(&e, true), Verdict::Retry);
        assert_eq!(Verdict::of(&e, false), Verdict::Retry);
    }

    #[test]
    fn an_expired_session_restarts_a_loop_with_a_node_and_is_retried_by_one_without() {
        assert_eq!(Verdict::of(&Error::SessionExpired, true), Verdict::Restart);
        assert_eq!(Verdict::of(&Error::SessionExpired, false), Verdict::Retry);
    }

    #[test]
    fn a_missing_node_restarts_a_loop_with_a_node_and_ends_one_without() {
        let e = Error::NoNode { path: "/d".into() };
        assert_eq!(Verdict::of(&e, true), Verdict::Restart);
        assert_eq!(Verdict::of(&e, false), Verdict::Fail);
    }

    #[test]
    fn any_other_error_ends_the_call() {
        let e = Error::NoAuth {
            path: "/d".into(),
            op: "create",
        };
        assert_eq!(Verdict::of(&e, true), Verdict::Fail);
        assert_eq!(Verdict::of(&Error::Closed, false), Verdict::Fail);
    }

    const OURS: i64 = 7;
    const OTHER: i64 = 9;

    fn news(ev: SessionEvent) -> News {
        News::of(Ok(ev), OURS)
    }

    #[test]
    fn a_waiter_waits_on_a_suspension_and_lists_again_on_a_reconnect() {
        assert_eq!(
            news(SessionEvent::Suspended { session_id: OURS }),
            News::Wait
        );
        assert_eq!(
            news(SessionEvent::Reconnected { session_id: OURS }),
            News::Relist
        );
    }

    #[test]
    fn the_end_of_our_session_or_the_start_of_another_starts_over() {
        for reason in [LossReason::Expired, LossReason::Timeout] {
            let lost = SessionEvent::Lost {
                session_id: OURS,
                reason,
            };
            assert_eq!(news(lost), News::Restart);
        }
        let other = SessionEvent::Connected { session_id: OTHER };
        assert_eq!(news(other), News::Restart);
    }

    #[test]
    fn news_from_before_our_node_was_made_is_ignored() {
        // The start of the session our node belongs to, read late.
        let ours = SessionEvent::Connected { session_id: OURS };
        assert_eq!(news(ours), News::Wait);
        // The end of an earlier session, read late.
        let earlier = SessionEvent::Lost {
            session_id: OTHER,
            reason: LossReason::Timeout,
        };
        assert_eq!(news(earlier), News::Wait);
    }

    #[test]
    fn a_closed_client_or_a_dropped_channel_ends_the_wait() {
        assert_eq!(news(SessionEvent::Closed), News::Closed);
        assert_eq!(
            News::of(Err(crossbeam_channel::RecvError), OURS),
            News::Closed
        );
    }
}
