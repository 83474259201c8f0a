//! Leader election under faults, against real servers: a hundred rounds of churn (resign,
//! client close, server kill, partition of the leader) checked for overlapping leaders;
//! failover after a leader goes silent and after its client is closed (fair and unfair
//! elections); a candidate that survives its session's expiry; a leader whose server is
//! killed; confirm during a partition.
//!
//! Every test starts its own cluster. Assertions are about orderings (who led before whom,
//! what was reported before what), with generous deadlines only to turn a hang into a
//! failure; the few durations asserted have bounds a loaded machine cannot break in the
//! direction asserted (a session cannot expire early on the server).

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, Sender, TryRecvError};
use parking_lot::Mutex as PlMutex;

use common::{connect, init_log, unique, wait_event, wait_until, WITHIN};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Candidate, Client, Error, LeaderElection, LeaderEvent, SessionEvent};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// The next event of a candidate, waiting at most `within`.
fn next_event(events: &Receiver<LeaderEvent>, within: Duration, who: &str) -> LeaderEvent {
    events
        .recv_timeout(within)
        .unwrap_or_else(|e| panic!("{who}: no event within {within:?} ({e})"))
}

/// Every event already queued for a candidate, without waiting.
fn queued_events(events: &Receiver<LeaderEvent>) -> Vec<LeaderEvent> {
    events.try_iter().collect()
}

/// The participant ids of an election in queue order, with node names.
fn queue(observer: &LeaderElection) -> Vec<(String, String)> {
    match observer.participants() {
        Ok(ps) => ps.into_iter().map(|p| (p.id(), p.node)).collect(),
        Err(e) => {
            log::info!("participants: {e}");
            Vec::new()
        }
    }
}

/// Waits until the election's queue holds exactly `ids`, in this order.
fn wait_queue(observer: &LeaderElection, ids: &[&str], what: &str) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let last = queue(observer);
        if last
            .iter()
            .map(|(id, _)| id.as_str())
            .eq(ids.iter().copied())
        {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: queue is {last:?}, want {ids:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// The index of the server `client` talks to through `proxy`, if connected.
fn proxied_server(proxy: &FaultProxy, client: &Client) -> Option<usize> {
    let addr = client.connected_server()?;
    proxy.local_addrs().iter().position(|a| *a == addr)
}

/// The index of the server `client` talks to directly, if connected.
fn direct_server(cluster: &TestCluster, client: &Client) -> Option<usize> {
    let addr = client.connected_server()?;
    (0..cluster.len()).find(|&i| cluster.client_addr(i) == addr)
}

/// What a guard-style `lead()` on another thread reports.
struct Led {
    /// When `lead` returned.
    at: Instant,
    result: zkguard::Result<zkguard::Leadership>,
    /// Whether the previous leader's `lost()` had fired by the time `lead` returned.
    previous_lost: bool,
}

/// Runs `election.lead()` on a thread; the moment it returns, it looks whether
/// `previous_lost` (a `lost()` receiver of the current leader) has fired.
fn spawn_lead(election: LeaderElection, previous_lost: Receiver<()>) -> Receiver<Led> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    thread::spawn(move || {
        let result = election.lead();
        let at = Instant::now();
        let previous_lost = previous_lost.try_recv().is_ok();
        let _ = tx.send(Led {
            at,
            result,
            previous_lost,
        });
    });
    rx
}

// ---------------------------------------------------------------------------------------
// The referee: every candidate's events, merged into one causal log
// ---------------------------------------------------------------------------------------

/// Where a candidate stands, by its own events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// In the election, not leading.
    Queued,
    /// Elected or restored: a valid leader.
    Leading,
    /// Leading, but its connection dropped: not valid, yet still holding its node.
    Suspended,
    /// Its event stream ended (client closed, candidate dropped).
    Ended,
}

struct Tracked {
    /// The candidate, for `is_leader()` samples, while its stream runs.
    handle: Option<Arc<Candidate>>,
    phase: Phase,
    /// The token of the current term.
    term: Option<u64>,
}

/// One event in the merged log; `ev` is `None` when the candidate's stream ended.
#[derive(Debug, Clone)]
struct Record {
    /// When the recorder found it in the candidate's channel (after it was emitted).
    at: Instant,
    cand: usize,
    ev: Option<LeaderEvent>,
}

/// An event as the recorder found it.
#[derive(Debug)]
struct Found {
    at: Instant,
    /// The sweep of its batch that found it (0 first), and its channel's place in every
    /// sweep. A sweep drains the channels in place order, so the check of (sweep, place)
    /// happened after that of every smaller pair: an event found at (s, p) was emitted
    /// before the check (s, p), and, if s > 0, after the check (s - 1, p), which found
    /// nothing more.
    sweep: u32,
    place: u32,
    /// `None`: the stream ended.
    ev: Option<LeaderEvent>,
}

/// What the recorder found in one wake-up: per candidate, its events in order.
type Batch = Vec<(usize, VecDeque<Found>)>;

fn is_start(ev: &Option<LeaderEvent>) -> bool {
    matches!(
        ev,
        Some(LeaderEvent::Elected { .. }) | Some(LeaderEvent::Restored)
    )
}

/// An event that ends a valid leadership (or the stream).
fn is_end(ev: &Option<LeaderEvent>) -> bool {
    matches!(
        ev,
        None | Some(LeaderEvent::Suspended) | Some(LeaderEvent::Lost) | Some(LeaderEvent::Resigned)
    )
}

/// Referee of the churn test.
///
/// One recorder thread owns every candidate's event receiver. When any channel has an
/// event it sweeps all channels, again and again until a sweep finds nothing, and only
/// then merges what it found into the log. An event found in a sweep was emitted before
/// that sweep; so every event emitted before a leader's `Elected` is in hand when that
/// `Elected` is merged, whatever the scheduling delays. Within one batch, each
/// candidate's own order is kept, endings (and `Rejoined`, `Failed`) go before starts, and
/// starts go in term-token order (tokens only grow). So the merged order never shows an
/// overlap that did not happen. Where one batch holds a start and another candidate's
/// ending, the order is still certain when the ending was found by a later check of its
/// channel than the check that found the start (see [`Found`]); such an ending is a
/// violation too. What remains unjudged is an ending and a start found so close together
/// that no check fell between them (within one wake-up of the recorder); batches holding
/// both are counted (`contested`), and the `is_leader()` samples cover that window
/// independently.
///
/// The rule checked at every start (`Elected` or `Restored`) of a candidate: every other
/// candidate has ended its term (`Lost`, `Resigned`, stream end) — not merely suspended,
/// since a suspended leader still holds the head node until its session is gone, and the
/// library promises to report `Lost` before anyone else can be elected.
#[derive(Default)]
struct Referee {
    tracked: BTreeMap<usize, Tracked>,
    log: Vec<Record>,
    last_token: u64,
    violations: Vec<String>,
    /// `Failed` events (none are expected: churn causes only connection trouble).
    failed: Vec<String>,
    batches: u64,
    /// Batches where one candidate's ending and another's start were merged together
    /// (their order decided by the merge rule, not by separate wake-ups).
    contested: u64,
    /// `is_leader()` sandwich samples taken.
    samples: u64,
    /// The test is over: candidates are being dropped, nothing is checked any more.
    teardown: bool,
}

impl Referee {
    fn register(&mut self, id: usize, handle: Option<Arc<Candidate>>) {
        self.tracked.insert(
            id,
            Tracked {
                handle,
                phase: Phase::Queued,
                term: None,
            },
        );
    }

    /// The candidates whose streams still run.
    fn live(&self) -> Vec<(usize, Arc<Candidate>)> {
        self.tracked
            .iter()
            .filter_map(|(id, t)| t.handle.clone().map(|h| (*id, h)))
            .collect()
    }

    fn phase(&self, id: usize) -> Phase {
        self.tracked.get(&id).map_or(Phase::Ended, |t| t.phase)
    }

    /// Merges one batch (each candidate's events in its own order).
    fn merge(&mut self, mut batch: Batch) {
        self.batches += 1;
        let with = |pred: fn(&Option<LeaderEvent>) -> bool| -> Vec<usize> {
            batch
                .iter()
                .filter(|(_, q)| q.iter().any(|f| pred(&f.ev)))
                .map(|(id, _)| *id)
                .collect()
        };
        let starters = with(is_start);
        let enders = with(is_end);
        if starters.iter().any(|j| enders.iter().any(|i| i != j)) {
            self.contested += 1;
        }
        // Where in this batch each candidate's term was ended, for the certain orders.
        let mut ended_at: BTreeMap<usize, (u32, u32)> = BTreeMap::new();
        loop {
            batch.retain(|(_, q)| !q.is_empty());
            if batch.is_empty() {
                return;
            }
            let pick = match batch.iter().position(|(_, q)| !is_start(&q[0].ev)) {
                Some(i) => i,
                None => (0..batch.len())
                    .min_by_key(|&i| {
                        let (id, q) = &batch[i];
                        match &q[0].ev {
                            Some(LeaderEvent::Elected { token }) => *token,
                            _ => self.tracked.get(id).and_then(|t| t.term).unwrap_or(0),
                        }
                    })
                    .unwrap_or(0),
            };
            let id = batch[pick].0;
            let Some(f) = batch[pick].1.pop_front() else {
                continue;
            };
            if is_start(&f.ev) {
                // The merge puts endings first; but an ending found in a later sweep, at a
                // check made after the one that found this start, was certainly emitted
                // after it.
                for (other, &(sweep, place)) in &ended_at {
                    if *other != id && sweep > 0 && (sweep - 1, place) > (f.sweep, f.place) {
                        let v = format!(
                            "c{id} {:?} was emitted before c{other} ended its term (found \
                             at sweep/place {:?} and {:?}); log tail:\n{}",
                            f.ev,
                            (f.sweep, f.place),
                            (sweep, place),
                            self.tail(12)
                        );
                        self.violations.push(v);
                    }
                }
                ended_at.remove(&id);
            } else if matches!(
                f.ev,
                None | Some(LeaderEvent::Lost) | Some(LeaderEvent::Resigned)
            ) && matches!(self.phase(id), Phase::Leading | Phase::Suspended)
            {
                ended_at.insert(id, (f.sweep, f.place));
            }
            self.apply(id, f.at, f.ev);
        }
    }

    fn apply(&mut self, id: usize, at: Instant, ev: Option<LeaderEvent>) {
        if is_start(&ev) && !self.teardown {
            for (other, t) in &self.tracked {
                if *other != id && matches!(t.phase, Phase::Leading | Phase::Suspended) {
                    let v = format!(
                        "c{id} {ev:?} while c{other} was still {:?} (term {:?}); log tail:\n{}",
                        t.phase,
                        t.term,
                        self.tail(12)
                    );
                    self.violations.push(v);
                }
            }
        }
        let last_token = self.last_token;
        let Some(t) = self.tracked.get_mut(&id) else {
            self.violations
                .push(format!("event of unknown candidate c{id}: {ev:?}"));
            return;
        };
        let mut bad = None;
        let mut failed = None;
        let mut token_seen = None;
        let next = match (t.phase, &ev) {
            (Phase::Queued, Some(LeaderEvent::Elected { token })) => {
                if *token <= last_token {
                    bad = Some(format!(
                        "c{id} elected with token {token}, not above the last one {last_token}"
                    ));
                }
                token_seen = Some(*token);
                t.term = Some(*token);
                Phase::Leading
            }
            (Phase::Leading | Phase::Suspended, Some(LeaderEvent::Suspended)) => Phase::Suspended,
            (Phase::Suspended, Some(LeaderEvent::Restored)) => Phase::Leading,
            (
                Phase::Leading | Phase::Suspended,
                Some(LeaderEvent::Lost) | Some(LeaderEvent::Resigned),
            ) => {
                t.term = None;
                Phase::Queued
            }
            (Phase::Queued, Some(LeaderEvent::Rejoined)) => Phase::Queued,
            (Phase::Queued, Some(LeaderEvent::Failed { error })) => {
                failed = Some(format!("c{id}: {error}"));
                Phase::Queued
            }
            (Phase::Ended, _) => {
                bad = Some(format!("c{id}: {ev:?} after its stream ended"));
                Phase::Ended
            }
            (_, None) => {
                t.handle = None;
                t.term = None;
                Phase::Ended
            }
            (phase, ev) => {
                bad = Some(format!("c{id}: {ev:?} while {phase:?}"));
                phase
            }
        };
        t.phase = next;
        if let Some(token) = token_seen {
            self.last_token = self.last_token.max(token);
        }
        if let Some(b) = bad {
            let b = format!("malformed: {b}; log tail:\n{}", self.tail(12));
            self.violations.push(b);
        }
        if let Some(f) = failed {
            self.failed.push(f);
        }
        self.log.push(Record { at, cand: id, ev });
    }

    /// The last `n` records, for messages.
    fn tail(&self, n: usize) -> String {
        let start = self.log.first().map(|r| r.at);
        self.log[self.log.len().saturating_sub(n)..]
            .iter()
            .map(|r| {
                let ms = start.map_or(0.0, |s| (r.at - s).as_secs_f64() * 1e3);
                format!("  {ms:10.3} ms  c{} {:?}", r.cand, r.ev)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// For the handover from `old` to `new` (the latest `Elected` of `new`): how long after
    /// `old` stopped being a valid leader, and after `old`'s term ended, `new` was found
    /// elected (by the recorder's timestamps).
    fn handover(&self, old: usize, new: usize) -> Option<(Duration, Duration)> {
        let e = self
            .log
            .iter()
            .rposition(|r| r.cand == new && matches!(r.ev, Some(LeaderEvent::Elected { .. })))?;
        let elected = self.log[e].at;
        let before = &self.log[..e];
        let start = before
            .iter()
            .rposition(|r| r.cand == old && is_start(&r.ev))?;
        let invalid = before[start..].iter().find(|r| {
            r.cand == old
                && matches!(
                    r.ev,
                    None | Some(LeaderEvent::Suspended)
                        | Some(LeaderEvent::Lost)
                        | Some(LeaderEvent::Resigned)
                )
        })?;
        let ended = before[start..].iter().find(|r| {
            r.cand == old
                && matches!(
                    r.ev,
                    None | Some(LeaderEvent::Lost) | Some(LeaderEvent::Resigned)
                )
        })?;
        Some((
            elected.saturating_duration_since(invalid.at),
            elected.saturating_duration_since(ended.at),
        ))
    }
}

/// Candidates that lead throughout a sandwich of two passes over `handles`: `is_leader()`
/// true with the same term in both. Any two of them led at one same instant.
fn steady_leaders(handles: &[(usize, Arc<Candidate>)]) -> Vec<usize> {
    let pass = || -> Vec<Option<u64>> {
        handles
            .iter()
            .map(|(_, c)| {
                let before = c.token();
                let leads = c.is_leader();
                let after = c.token();
                (leads && before == after).then_some(after).flatten()
            })
            .collect()
    };
    let first = pass();
    let second = pass();
    handles
        .iter()
        .zip(first.iter().zip(&second))
        .filter(|(_, (a, b))| a.is_some() && a == b)
        .map(|((id, _), _)| *id)
        .collect()
}

/// Runs the recorder: see [`Referee`]. Ends once `stop` is set (after a last sweep).
fn spawn_recorder(
    referee: Arc<PlMutex<Referee>>,
    register: Receiver<(usize, Receiver<LeaderEvent>)>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut rxs: Vec<(usize, Receiver<LeaderEvent>)> = Vec::new();
        let mut registering = true;
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            if !stopping {
                let mut sel = Select::new();
                if registering {
                    sel.recv(&register);
                }
                for (_, rx) in &rxs {
                    sel.recv(rx);
                }
                // The timeout only lets the loop see `stop`.
                let _ = sel.ready_timeout(Duration::from_millis(50));
            }
            loop {
                match register.try_recv() {
                    Ok(r) => rxs.push(r),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        registering = false;
                        break;
                    }
                }
            }
            let mut batch: Batch = rxs.iter().map(|(id, _)| (*id, VecDeque::new())).collect();
            let mut gone = vec![false; rxs.len()];
            let mut sweep = 0u32;
            loop {
                let mut found = false;
                for (i, (_, rx)) in rxs.iter().enumerate() {
                    if gone[i] {
                        continue;
                    }
                    loop {
                        let (ev, end) = match rx.try_recv() {
                            Ok(ev) => (Some(ev), false),
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => (None, true),
                        };
                        batch[i].1.push_back(Found {
                            at: Instant::now(),
                            sweep,
                            place: i as u32,
                            ev,
                        });
                        found = true;
                        if end {
                            gone[i] = true;
                            break;
                        }
                    }
                }
                if !found {
                    break;
                }
                sweep += 1;
            }
            let mut i = 0;
            rxs.retain(|_| {
                i += 1;
                !gone[i - 1]
            });
            batch.retain(|(_, q)| !q.is_empty());
            if !batch.is_empty() {
                let had_start = batch.iter().any(|(_, q)| q.iter().any(|f| is_start(&f.ev)));
                let mut r = referee.lock();
                r.merge(batch);
                if had_start {
                    // Right after a start was merged: nobody else may lead now.
                    let handles = r.live();
                    drop(r);
                    let steady = steady_leaders(&handles);
                    let mut r = referee.lock();
                    r.samples += 1;
                    if steady.len() > 1 && !r.teardown {
                        let v = format!(
                            "is_leader() true at once for {steady:?} (right after a start); \
                             log tail:\n{}",
                            r.tail(12)
                        );
                        r.violations.push(v);
                    }
                }
            }
            if stopping {
                return;
            }
        }
    })
}

/// Samples `is_leader()` of every live candidate until `stop`: never two at once.
fn spawn_monitor(referee: Arc<PlMutex<Referee>>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let handles = referee.lock().live();
            let steady = steady_leaders(&handles);
            drop(handles);
            let mut r = referee.lock();
            r.samples += 1;
            if steady.len() > 1 {
                let v = format!(
                    "is_leader() true at once for {steady:?}; log tail:\n{}",
                    r.tail(12)
                );
                r.violations.push(v);
            }
            drop(r);
            // A sampling period, not a wait for an event.
            thread::sleep(Duration::from_millis(2));
        }
    })
}

/// An event for the referee's own test: `(candidate, sweep, place, event)`.
type Seen = (usize, u32, u32, Option<LeaderEvent>);

/// A batch for the referee's own test.
fn batch_of(events: &[Seen]) -> Batch {
    let mut batch: Batch = Vec::new();
    for (id, sweep, place, ev) in events {
        let found = Found {
            at: Instant::now(),
            sweep: *sweep,
            place: *place,
            ev: ev.clone(),
        };
        match batch.iter_mut().find(|(c, _)| c == id) {
            Some((_, q)) => q.push_back(found),
            None => batch.push((*id, VecDeque::from([found]))),
        }
    }
    batch
}

/// The referee can fail: overlaps, late endings, malformed streams and falling tokens are
/// caught, and a handover merged in one batch is not held against anyone.
#[test]
fn the_churn_referee_catches_overlaps_and_malformed_streams() {
    use LeaderEvent::{Elected, Lost, Resigned, Restored, Suspended};
    let referee = |batches: &[&[Seen]]| {
        let mut r = Referee::default();
        for id in 0..3 {
            r.register(id, None);
        }
        for b in batches {
            r.merge(batch_of(b));
        }
        r.violations
    };
    let ok: &[&[_]] = &[
        &[(0, 0, 0, Some(Elected { token: 1 }))],
        &[(0, 0, 0, Some(Suspended))],
        &[(0, 0, 0, Some(Restored))],
        &[(0, 0, 0, Some(Resigned))],
        &[(1, 0, 1, Some(Elected { token: 2 }))],
        // One wake-up found the next leader's election before the old one's loss (the
        // channels are swept in place order): nothing certain, no violation.
        &[(2, 0, 2, Some(Elected { token: 3 })), (1, 1, 1, Some(Lost))],
        &[(2, 0, 2, None)],
        &[(0, 0, 0, Some(Elected { token: 4 }))],
    ];
    assert_eq!(referee(ok), Vec::<String>::new());
    let bad: &[(&str, &[&[_]])] = &[
        (
            "overlap",
            &[
                &[(0, 0, 0, Some(Elected { token: 1 }))],
                &[(1, 0, 1, Some(Elected { token: 2 }))],
            ],
        ),
        (
            "elected while the old leader is only suspended",
            &[
                &[(0, 0, 0, Some(Elected { token: 1 }))],
                &[(0, 0, 0, Some(Suspended))],
                &[(1, 0, 1, Some(Elected { token: 2 }))],
            ],
        ),
        (
            "an ending certainly emitted after the start, merged in one batch",
            &[
                &[(1, 0, 1, Some(Elected { token: 1 }))],
                &[(0, 0, 0, Some(Elected { token: 2 })), (1, 2, 1, Some(Lost))],
            ],
        ),
        (
            "restored without suspended",
            &[
                &[(0, 0, 0, Some(Elected { token: 1 }))],
                &[(0, 0, 0, Some(Restored))],
            ],
        ),
        (
            "elected twice",
            &[
                &[(0, 0, 0, Some(Elected { token: 1 }))],
                &[(0, 0, 0, Some(Elected { token: 2 }))],
            ],
        ),
        (
            "token not rising",
            &[
                &[(0, 0, 0, Some(Elected { token: 5 }))],
                &[(0, 0, 0, Some(Lost))],
                &[(1, 0, 1, Some(Elected { token: 5 }))],
            ],
        ),
        ("lost while queued", &[&[(0, 0, 0, Some(Lost))]]),
    ];
    for (what, batches) in bad {
        assert!(!referee(batches).is_empty(), "not caught: {what}");
    }
}

// ---------------------------------------------------------------------------------------
// 1. Churn: exactly one valid leader at any instant
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Resign,
    Close,
    Kill,
    Partition,
}

/// The kinds in round order. A partition round waits out a session timeout; a kill round
/// restarts the killed server in the background (joined before the next kill, so a
/// quorum always stands).
const PATTERN: [Kind; 4] = [Kind::Resign, Kind::Kill, Kind::Close, Kind::Partition];
const CHURN_ROUNDS: usize = 100;

/// One candidate of the churn test: its own proxy (so it alone can be cut off), client
/// and candidacy.
struct Slot {
    proxy: FaultProxy,
    client: Client,
    cand: Arc<Candidate>,
    id: usize,
}

struct Churn {
    path: String,
    t: Duration,
    referee: Arc<PlMutex<Referee>>,
    register: Sender<(usize, Receiver<LeaderEvent>)>,
    slots: Vec<Slot>,
    next_id: usize,
}

impl Churn {
    /// A new candidate behind `proxy`, registered with the recorder.
    fn join(&mut self, proxy: FaultProxy) -> Slot {
        let client = connect(&proxy.connect_string(), self.t);
        let id = self.next_id;
        self.next_id += 1;
        let election = LeaderElection::new(&client, &self.path, format!("c{id}")).unwrap();
        let cand = Arc::new(election.join().unwrap());
        self.referee.lock().register(id, Some(cand.clone()));
        self.register.send((id, cand.events())).unwrap();
        Slot {
            proxy,
            client,
            cand,
            id,
        }
    }

    /// Waits until exactly one candidate leads, other than `not` if given, and proves it
    /// with `confirm()`; returns its slot index and token.
    fn settled(&self, not: Option<usize>, what: &str) -> (usize, u64) {
        let within = Duration::from_secs(40);
        let deadline = Instant::now() + within;
        loop {
            let leaders: Vec<usize> = (0..self.slots.len())
                .filter(|&i| self.slots[i].cand.is_leader())
                .collect();
            if let [i] = leaders[..] {
                let s = &self.slots[i];
                if Some(s.id) != not {
                    if let (Ok(()), Some(token)) = (s.cand.confirm(), s.cand.token()) {
                        return (i, token);
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "{what}: no settled leader within {within:?} (leading now: {:?}); log tail:\n{}",
                leaders
                    .iter()
                    .map(|&i| self.slots[i].id)
                    .collect::<Vec<_>>(),
                self.referee.lock().tail(20)
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Where the round of leader `id` starts in the log: once the recorder has merged its
    /// latest start, the events after that are the round's.
    fn mark(&self, id: usize) -> usize {
        let mut mark = 0;
        wait_until(Duration::from_secs(10), "the recorder caught up", || {
            let r = self.referee.lock();
            mark = r.log.len();
            r.phase(id) == Phase::Leading
        });
        mark
    }

    /// Waits until `id`'s events from `mark` on are complete by `done`; returns them.
    fn events_since(
        &self,
        id: usize,
        mark: usize,
        what: &str,
        done: impl Fn(&[Option<LeaderEvent>]) -> bool,
    ) -> Vec<Option<LeaderEvent>> {
        let within = Duration::from_secs(20);
        let deadline = Instant::now() + within;
        loop {
            let evs: Vec<Option<LeaderEvent>> = self.referee.lock().log[mark..]
                .iter()
                .filter(|r| r.cand == id)
                .map(|r| r.ev.clone())
                .collect();
            if done(&evs) {
                return evs;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the old leader c{id} said only {evs:?} within {within:?}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until every live candidate has a node in the election.
    fn all_queued(&self, observer: &LeaderElection, what: &str) {
        let mut want: Vec<String> = self.slots.iter().map(|s| format!("c{}", s.id)).collect();
        want.sort();
        wait_until(Duration::from_secs(40), what, || {
            let mut ids: Vec<String> = queue(observer).into_iter().map(|(id, _)| id).collect();
            ids.sort();
            ids == want
        });
    }
}

#[derive(Debug)]
struct Round {
    kind: Kind,
    took: Duration,
    old: (usize, u64),
    new: (usize, u64),
    /// Handover gaps (see `Referee::handover`), for rounds that changed the leader.
    gaps: Option<(Duration, Duration)>,
}

#[test]
fn exactly_one_valid_leader_at_any_instant_under_churn() {
    init_log();
    let began = Instant::now();
    let cluster = Arc::new(TestCluster::start(3).unwrap());
    let t = Duration::from_secs(3);
    let path = unique("el-churn");
    let referee = Arc::new(PlMutex::new(Referee::default()));
    let (stop_recorder, stop_monitor) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (register, registered) = crossbeam_channel::unbounded();
    let recorder = spawn_recorder(referee.clone(), registered, stop_recorder.clone());
    let monitor = spawn_monitor(referee.clone(), stop_monitor.clone());
    let observer_client = connect(&cluster.connect_string(), Duration::from_secs(10));
    let observer = LeaderElection::new(&observer_client, &path, "observer").unwrap();

    let mut churn = Churn {
        path: path.clone(),
        t,
        referee: referee.clone(),
        register,
        slots: Vec::new(),
        next_id: 0,
    };
    for _ in 0..5 {
        let slot = churn.join(FaultProxy::for_cluster(&cluster).unwrap());
        churn.slots.push(slot);
    }
    churn.all_queued(&observer, "five candidates queued");
    let (mut li, mut token) = churn.settled(None, "first leader");
    log::info!("churn: set up in {:?}", began.elapsed());

    let mut rounds: Vec<Round> = Vec::new();
    let mut restarting: Option<JoinHandle<std::io::Result<()>>> = None;
    let mut kept_in_kills = 0;
    let churn_began = Instant::now();
    for n in 0..CHURN_ROUNDS {
        let kind = PATTERN[n % PATTERN.len()];
        let what = format!("round {n} ({kind:?})");
        let old = (churn.slots[li].id, token);
        let mark = churn.mark(old.0);
        let started = Instant::now();
        let (ni, ntoken) = match kind {
            Kind::Resign => {
                assert!(
                    churn.slots[li].cand.resign().unwrap(),
                    "{what}: the leader was not leading when asked to resign"
                );
                churn.settled(Some(old.0), &what)
            }
            Kind::Close => {
                if let Err(e) = churn.slots[li].client.close().into_result() {
                    log::info!("{what}: close: {e}");
                }
                let found = churn.settled(Some(old.0), &what);
                // The closed candidate makes room for a fresh one behind the same proxy.
                let new_id = churn.slots[found.0].id;
                let closed = churn.slots.swap_remove(li);
                let Slot { proxy, cand, .. } = closed;
                drop(cand);
                let fresh = churn.join(proxy);
                churn.slots.push(fresh);
                let at = churn
                    .slots
                    .iter()
                    .position(|s| s.id == new_id)
                    .unwrap_or_default();
                (at, found.1)
            }
            Kind::Kill => {
                if let Some(h) = restarting.take() {
                    h.join().unwrap().unwrap();
                }
                let leader = &churn.slots[li];
                let mut server = None;
                wait_until(Duration::from_secs(30), "leader connected", || {
                    server = proxied_server(&leader.proxy, &leader.client);
                    server.is_some()
                });
                let s = server.unwrap_or_default();
                let session = leader.client.session_id();
                cluster.kill(s).unwrap();
                wait_until(
                    Duration::from_secs(30),
                    "the leader's client off the killed server",
                    || {
                        proxied_server(&leader.proxy, &leader.client).is_some_and(|x| x != s)
                            || leader.client.session_id() != session
                    },
                );
                let found = churn.settled(None, &what);
                let c = cluster.clone();
                restarting = Some(thread::spawn(move || c.start_server(s)));
                if churn.slots[found.0].id == old.0 && found.1 == old.1 {
                    kept_in_kills += 1;
                } else {
                    log::warn!("{what}: the leader changed ({old:?} -> {found:?})");
                }
                found
            }
            Kind::Partition => {
                churn.slots[li].proxy.blackhole();
                let found = churn.settled(Some(old.0), &what);
                churn.slots[li].proxy.heal();
                churn.all_queued(&observer, &format!("{what}: the cut-off candidate back"));
                found
            }
        };
        let new = (churn.slots[ni].id, ntoken);
        // What the old leader said during the round, in its own order.
        let said =
            |done: fn(&[Option<LeaderEvent>]) -> bool| churn.events_since(old.0, mark, &what, done);
        use LeaderEvent::{Lost, Rejoined, Resigned, Restored, Suspended};
        match kind {
            Kind::Resign => {
                said(|e| e.first() == Some(&Some(Resigned)));
            }
            Kind::Close => {
                said(|e| e == [Some(Lost), None]);
            }
            Kind::Partition => {
                said(|e| e.starts_with(&[Some(Suspended), Some(Lost), Some(Rejoined)]));
            }
            Kind::Kill if new.0 == old.0 => {
                // Suspended (again if a reconnect dropped before the proof), then Restored.
                let evs = said(|e| e.contains(&Some(Restored)) || e.contains(&Some(Lost)));
                let restored = evs.iter().position(|e| *e == Some(Restored));
                assert!(
                    restored
                        .is_some_and(|i| i > 0 && evs[..i].iter().all(|e| *e == Some(Suspended))),
                    "{what}: the leader kept its term but said {evs:?}"
                );
            }
            Kind::Kill => {
                said(|e| e.contains(&Some(Lost)));
            }
        }
        if new.0 != old.0 {
            assert!(ntoken > old.1, "{what}: token {ntoken} after {}", old.1);
        }
        // The new leader can be found (its `is_leader()`) before the recorder has logged
        // its `Elected`: wait for that entry before measuring the handover (a kill may
        // legitimately leave none to measure, so it gets one look).
        let gaps = (new.0 != old.0)
            .then(|| {
                let handover = || referee.lock().handover(old.0, new.0);
                if kind != Kind::Kill {
                    wait_until(WITHIN, &format!("{what}: the handover in the log"), || {
                        handover().is_some()
                    });
                }
                handover()
            })
            .flatten();
        rounds.push(Round {
            kind,
            took: started.elapsed(),
            old,
            new,
            gaps,
        });
        log::info!("{what}: {old:?} -> {new:?} in {:?}", started.elapsed());
        li = ni;
        token = ntoken;
    }
    let churn_took = churn_began.elapsed();
    if let Some(h) = restarting.take() {
        h.join().unwrap().unwrap();
    }

    // Tear down (not checked: a dropped leader's successor may be elected before its
    // stream ends): the streams end once the candidates are dropped.
    stop_monitor.store(true, Ordering::SeqCst);
    monitor.join().unwrap();
    {
        let mut r = referee.lock();
        r.teardown = true;
        for t in r.tracked.values_mut() {
            t.handle = None;
        }
    }
    let ids: Vec<usize> = churn.slots.iter().map(|s| s.id).collect();
    for s in churn.slots.drain(..) {
        drop(s.cand);
        s.client.close();
        drop(s.proxy);
    }
    wait_until(Duration::from_secs(30), "every stream ended", || {
        let r = referee.lock();
        ids.iter().all(|id| r.phase(*id) == Phase::Ended)
    });
    stop_recorder.store(true, Ordering::SeqCst);
    drop(churn.register);
    recorder.join().unwrap();

    // The report.
    let r = referee.lock();
    let mut summary = String::new();
    for kind in [Kind::Resign, Kind::Close, Kind::Kill, Kind::Partition] {
        let of: Vec<&Round> = rounds.iter().filter(|x| x.kind == kind).collect();
        let mut took: Vec<Duration> = of.iter().map(|x| x.took).collect();
        took.sort();
        let mut valid_gaps: Vec<Duration> = of.iter().filter_map(|x| x.gaps.map(|g| g.0)).collect();
        valid_gaps.sort();
        let mut end_gaps: Vec<Duration> = of.iter().filter_map(|x| x.gaps.map(|g| g.1)).collect();
        end_gaps.sort();
        let mid = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
        summary.push_str(&format!(
            "\n  {kind:?}: {} rounds, median {:?} (max {:?}); leader changes {}; \
             invalid->elected min {:?} median {:?}; ended->elected min {:?} median {:?}",
            of.len(),
            mid(&took),
            took.last().copied().unwrap_or_default(),
            of.iter().filter(|x| x.new.0 != x.old.0).count(),
            valid_gaps.first().copied().unwrap_or_default(),
            mid(&valid_gaps),
            end_gaps.first().copied().unwrap_or_default(),
            mid(&end_gaps),
        ));
    }
    log::info!(
        "churn: {} rounds in {churn_took:?} (test {:?}); kills that kept the leader {kept_in_kills}; \
         {} events in {} batches ({} contested); {} is_leader samples{summary}",
        rounds.len(),
        began.elapsed(),
        r.log.len(),
        r.batches,
        r.contested,
        r.samples,
    );
    assert!(
        r.violations.is_empty(),
        "{} violation(s):\n{}",
        r.violations.len(),
        r.violations.join("\n")
    );
    assert!(r.failed.is_empty(), "Failed events: {:?}", r.failed);
    assert_eq!(rounds.len(), CHURN_ROUNDS);
    // Every leader change was seen by the recorder as well.
    let elected = r
        .log
        .iter()
        .filter(|x| matches!(x.ev, Some(LeaderEvent::Elected { .. })))
        .count();
    let changes = rounds.iter().filter(|x| x.new.0 != x.old.0).count();
    assert!(
        elected > changes,
        "{elected} Elected events for {changes} leader changes"
    );
    assert!(
        rounds
            .iter()
            .filter(|x| x.kind != Kind::Kill)
            .all(|x| x.gaps.is_some()),
        "a handover missing from the log: {rounds:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 2. Failover after the leader goes silent
// ---------------------------------------------------------------------------------------

/// A fair or an unfair election at a fresh path.
fn election(client: &Client, path: &str, id: &str, fair: bool) -> LeaderElection {
    if fair {
        LeaderElection::new(client, path, id).unwrap()
    } else {
        LeaderElection::unfair(client, path, id).unwrap()
    }
}

/// Waits until the standalone server of `cluster` holds at least `n` watches (the unfair
/// election's waiters are seen only as watches on its node).
fn wait_watches(cluster: &TestCluster, n: usize, what: &str) {
    wait_until(Duration::from_secs(20), what, || {
        let reply = cluster.four_letter(0, "wchs").unwrap_or_default();
        reply
            .lines()
            .find_map(|l| l.strip_prefix("Total watches:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .is_some_and(|v| v >= n)
    });
}

/// The leader (guard style) goes silent; a waiter (guard style) takes over once the server
/// expires the leader's session.
fn silent_leader_failover(fair: bool) {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let a = connect(&proxy.connect_string(), Duration::from_secs(3));
    let b = connect(&cluster.connect_string(), Duration::from_secs(3));
    let t = a.session_timeout();
    let path = unique("el-silent");
    let ea = election(&a, &path, "a", fair);
    let la = ea.lead().unwrap();
    let lost = la.lost();
    let successor = spawn_lead(election(&b, &path, "b", fair), la.lost());
    if fair {
        wait_queue(&ea, &["a", "b"], "b queued");
    } else {
        // a's own watch (armed by lost()) and b's.
        wait_watches(&cluster, 2, "b waiting");
    }
    let a_events = a.events();

    // The server hears from the leader now, and then never again. The server renews the
    // session when the confirm arrives, after `heard`; `cut` is taken after its reply has
    // come back, which on a loaded machine may be well after that.
    let heard = Instant::now();
    la.confirm().unwrap();
    let cut = Instant::now();
    proxy.blackhole();
    wait_event(&a_events, t * 2, "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    let suspended = cut.elapsed();
    assert!(!la.is_valid(), "valid while suspended");
    lost.recv_timeout(WITHIN).expect("lost never fired");
    let lost_after = cut.elapsed();
    assert!(!la.is_valid());
    let led = successor
        .recv_timeout(t + WITHIN)
        .expect("no successor after the session timeout");
    let lb = led.result.unwrap();
    let failover = led.at - cut;
    log::info!(
        "silent leader (fair {fair}, session {t:?}): suspended after {suspended:?}, lost \
         after {lost_after:?}, successor elected after {failover:?}"
    );
    assert!(
        led.previous_lost,
        "the successor was elected {failover:?} after the cut, before the old leader's lost() \
         fired"
    );
    // The server keeps the silent session for its whole timeout from when it last heard
    // from it: no sooner, whatever the load (counted from before the confirm was sent, as
    // the server may have heard it well before `cut`). No upper bound: how fast the server
    // expires a session and the successor reacts is not a promise of ours.
    let since_heard = led.at - heard;
    assert!(
        since_heard + Duration::from_millis(100) >= t,
        "successor elected {since_heard:?} after the leader's last confirm: sooner than the \
         session timeout {t:?}"
    );
    // The silent leader stopped counting as leader before its session could expire: the
    // promise is two thirds of the timeout (README); the last third is slack for the
    // client's thread on a loaded machine. Timing-sensitive by design.
    assert!(suspended < t, "suspended only {suspended:?} after the cut");
    assert!(lb.is_valid());
    lb.confirm().unwrap();
    assert!(lb.token() > la.token());
    proxy.heal();
    drop(la);
    lb.resign().unwrap();
}

#[test]
fn failover_after_the_leader_goes_silent_takes_about_the_session_timeout() {
    silent_leader_failover(true);
}

#[test]
fn unfair_failover_after_the_leader_goes_silent_takes_about_the_session_timeout() {
    silent_leader_failover(false);
}

// ---------------------------------------------------------------------------------------
// 3. Failover after the leader's client is closed
// ---------------------------------------------------------------------------------------

/// A guard-style leader closes its client, then the background-style leader elected after
/// it does the same.
fn closed_leader_failover(fair: bool) {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    // A long session: a failover within half of it cannot be the session expiring (that
    // takes at least two thirds of it after the last ping), and half of it is ample for a
    // prompt handover on a loaded machine. (With 6 s, "fast" meant within 3 s.)
    let t = Duration::from_secs(30);
    let a = connect(&cluster.connect_string(), t);
    let path = unique("el-close");
    let ea = election(&a, &path, "a", fair);
    let la = ea.lead().unwrap();
    let a_lost = la.lost();
    let mut others = Vec::new();
    for id in ["b", "c"] {
        let client = connect(&cluster.connect_string(), t);
        let cand = election(&client, &path, id, fair).join().unwrap();
        let events = cand.events();
        others.push((id, client, cand, events));
        if fair {
            let ids: Vec<&str> = std::iter::once("a")
                .chain(others.iter().map(|o| o.0))
                .collect();
            wait_queue(&ea, &ids, "queued");
        }
    }
    if !fair {
        wait_watches(&cluster, 3, "b and c waiting");
    }

    // Whichever of b and c is elected next (the unfair kind has no order).
    let next_elected = |others: &[(&str, Client, Candidate, Receiver<LeaderEvent>)],
                        skip: Option<usize>|
     -> (usize, LeaderEvent) {
        let mut sel = Select::new();
        let idx: Vec<usize> = (0..others.len()).filter(|&i| Some(i) != skip).collect();
        for &i in &idx {
            sel.recv(&others[i].3);
        }
        let op = sel
            .select_timeout(t)
            .unwrap_or_else(|_| panic!("nobody elected within {t:?}"));
        let i = idx[op.index()];
        let ev = op.recv(&others[i].3).unwrap();
        (i, ev)
    };

    // A guard-style leader closes its client: its lost() fires before anyone else leads.
    let closed = Instant::now();
    if let Err(e) = a.close().into_result() {
        log::info!("close: {e}");
    }
    let (w, ev) = next_elected(&others, None);
    let first = closed.elapsed();
    let a_knew = a_lost.try_recv().is_ok();
    assert!(
        matches!(ev, LeaderEvent::Elected { .. }),
        "{}: {ev:?}",
        others[w].0
    );
    assert!(
        a_knew,
        "{} was elected before a's lost() fired",
        others[w].0
    );
    assert!(!la.is_valid());
    assert!(
        first < t / 2,
        "failover after close took {first:?} (session timeout {t:?})"
    );

    // A background-style leader closes its client: it reports Lost before anyone else
    // is elected, and is_leader() is false by then.
    others[w].2.confirm().unwrap();
    let closed = Instant::now();
    if let Err(e) = others[w].1.close().into_result() {
        log::info!("close: {e}");
    }
    let (v, ev) = next_elected(&others, Some(w));
    let second = closed.elapsed();
    let w_said = queued_events(&others[w].3);
    let w_leads = others[w].2.is_leader();
    assert!(
        matches!(ev, LeaderEvent::Elected { .. }),
        "{}: {ev:?}",
        others[v].0
    );
    assert!(
        w_said.contains(&LeaderEvent::Lost),
        "{} was elected {second:?} after {}'s client was closed, which had reported only \
         {w_said:?}",
        others[v].0,
        others[w].0
    );
    assert!(!w_leads, "the closed leader still said it leads");
    assert!(
        second < t / 2,
        "failover after close took {second:?} (session timeout {t:?})"
    );
    log::info!("failover after close (fair {fair}): guard {first:?}, candidate {second:?}");
    others[v].2.confirm().unwrap();
    // The closed candidate's stream ends.
    assert_eq!(
        others[w].3.recv_timeout(Duration::from_secs(10)),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected),
        "events after Lost"
    );
    assert_eq!(
        others[w].2.wait_for_leadership(Duration::from_secs(1)),
        Err(Error::Closed)
    );
    drop(la);
}

#[test]
fn failover_after_the_leaders_client_is_closed_is_fast_and_reported_first() {
    closed_leader_failover(true);
}

#[test]
fn unfair_failover_after_the_leaders_client_is_closed_is_fast_and_reported_first() {
    closed_leader_failover(false);
}

// ---------------------------------------------------------------------------------------
// 4. A candidate survives its session's expiry
// ---------------------------------------------------------------------------------------

#[test]
fn candidates_survive_their_sessions_expiry_and_are_elected_again() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let t = Duration::from_secs(3);
    let (pa, pc) = (
        FaultProxy::for_cluster(&cluster).unwrap(),
        FaultProxy::for_cluster(&cluster).unwrap(),
    );
    let a = connect(&pa.connect_string(), t);
    let b = connect(&cluster.connect_string(), t);
    let c = connect(&pc.connect_string(), t);
    let path = unique("el-expire");
    let observer = LeaderElection::new(&b, &path, "observer").unwrap();
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let a_events = ca.events();
    let a_token = match next_event(&a_events, Duration::from_secs(20), "a") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("a: {ev:?}"),
    };
    let cb = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    let b_events = cb.events();
    wait_queue(&observer, &["a", "b"], "b queued");
    let cc = LeaderElection::new(&c, &path, "c").unwrap().join().unwrap();
    let c_events = cc.events();
    let before = wait_queue(&observer, &["a", "b", "c"], "c queued");
    let (a_session, c_session) = (a.session_id(), c.session_id());

    // The leader and a follower are cut off long enough for their sessions to expire.
    pa.blackhole();
    pc.blackhole();
    let b_token = match next_event(&b_events, Duration::from_secs(30), "b") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("b: {ev:?}"),
    };
    // Reported by a before b was elected.
    let a_said = queued_events(&a_events);
    assert_eq!(
        a_said[..a_said.len().min(2)],
        [LeaderEvent::Suspended, LeaderEvent::Lost],
        "a's events when b was elected"
    );
    assert!(b_token > a_token);
    let mut a_said = a_said;
    while a_said.len() < 3 {
        a_said.push(next_event(&a_events, Duration::from_secs(20), "a"));
    }
    assert_eq!(
        a_said,
        [
            LeaderEvent::Suspended,
            LeaderEvent::Lost,
            LeaderEvent::Rejoined
        ]
    );
    assert_eq!(
        next_event(&c_events, Duration::from_secs(20), "c"),
        LeaderEvent::Rejoined
    );
    wait_queue(&observer, &["b"], "the expired sessions' nodes gone");
    assert!(!ca.is_leader());
    assert!(cb.is_leader());

    // Back: each gets a new session on its own and queues again behind b.
    pa.heal();
    let after_a = wait_queue(&observer, &["b", "a"], "a queued again");
    assert_ne!(after_a[1].1, before[0].1, "a's node is not new");
    pc.heal();
    let after = wait_queue(&observer, &["b", "a", "c"], "c queued again");
    assert_ne!(after[2].1, before[2].1, "c's node is not new");
    assert_ne!(a.session_id(), a_session);
    assert_ne!(c.session_id(), c_session);
    assert!(queued_events(&a_events).is_empty());
    assert!(queued_events(&c_events).is_empty());

    // b resigns: a leads again, with a larger token; then a resigns: c leads.
    assert!(cb.resign().unwrap());
    assert_eq!(
        next_event(&b_events, Duration::from_secs(10), "b"),
        LeaderEvent::Resigned
    );
    let a_token2 = match next_event(&a_events, Duration::from_secs(20), "a") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("a: {ev:?}"),
    };
    assert!(a_token2 > b_token && a_token2 > a_token);
    assert_eq!(ca.token(), Some(a_token2));
    ca.confirm().unwrap();
    assert!(ca.resign().unwrap());
    let c_token = match next_event(&c_events, Duration::from_secs(20), "c") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("c: {ev:?}"),
    };
    assert!(c_token > a_token2);
    cc.confirm().unwrap();
    assert_eq!(observer.leader().unwrap().map(|p| p.id()), Some("c".into()));
}

// ---------------------------------------------------------------------------------------
// 5. A leader whose server is killed keeps its term
// ---------------------------------------------------------------------------------------

#[test]
fn a_leader_whose_server_is_killed_is_suspended_then_restored_with_the_same_token() {
    init_log();
    let cluster = TestCluster::start(3).unwrap();
    // Long enough to outlast a leader election of the ensemble on a loaded machine.
    let t = Duration::from_secs(6);
    let a = connect(&cluster.connect_string(), t);
    let b = connect(&cluster.connect_string(), t);
    let c = connect(&cluster.connect_string(), t);
    let path = unique("el-kill");
    let ca = LeaderElection::new(&a, &path, "a").unwrap().join().unwrap();
    let a_events = ca.events();
    let token = match next_event(&a_events, Duration::from_secs(20), "a") {
        LeaderEvent::Elected { token } => token,
        ev => panic!("a: {ev:?}"),
    };
    let observer = LeaderElection::new(&b, &path, "observer").unwrap();
    let cb = LeaderElection::new(&b, &path, "b").unwrap().join().unwrap();
    wait_queue(&observer, &["a", "b"], "b queued");
    let cc = LeaderElection::new(&c, &path, "c").unwrap().join().unwrap();
    let before = wait_queue(&observer, &["a", "b", "c"], "all queued");
    let (b_events, c_events) = (cb.events(), cc.events());
    let session = a.session_id();

    // First a's own server, then whichever server leads the ensemble.
    for phase in ["a's server", "the ensemble's leader"] {
        ca.confirm().unwrap();
        let victim = if phase == "a's server" {
            let mut s = None;
            wait_until(Duration::from_secs(20), "a connected", || {
                s = direct_server(&cluster, &a);
                s.is_some()
            });
            s.unwrap_or_default()
        } else {
            cluster.leader().expect("the ensemble has a leader")
        };
        let killed = Instant::now();
        cluster.kill(victim).unwrap();
        assert_eq!(
            next_event(&a_events, Duration::from_secs(20), "a"),
            LeaderEvent::Suspended,
            "{phase}"
        );
        // Suspended again if a reconnect drops before leadership is proven.
        loop {
            match next_event(&a_events, Duration::from_secs(30), "a") {
                LeaderEvent::Restored => break,
                LeaderEvent::Suspended => continue,
                ev => panic!("{phase}: a: {ev:?}"),
            }
        }
        log::info!(
            "{phase} (server {victim}) killed: a restored after {:?}",
            killed.elapsed()
        );
        assert!(ca.is_leader());
        ca.confirm().unwrap();
        assert_eq!(ca.token(), Some(token));
        assert_eq!(a.session_id(), session);
        assert!(queued_events(&b_events).is_empty(), "{phase}: b");
        assert!(queued_events(&c_events).is_empty(), "{phase}: c");
        assert!(!cb.is_leader() && !cc.is_leader());
        cluster.start_server(victim).unwrap();
    }
    let after = wait_queue(&observer, &["a", "b", "c"], "nobody moved");
    assert_eq!(after, before);
    assert!(queued_events(&a_events).is_empty());
    assert!(queued_events(&b_events).is_empty());
    assert!(queued_events(&c_events).is_empty());
}

// ---------------------------------------------------------------------------------------
// 6. confirm() during a partition
// ---------------------------------------------------------------------------------------

#[test]
fn a_partitioned_leaders_confirm_never_says_yes() {
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    let t = Duration::from_secs(3);
    let a = connect(&proxy.connect_string(), t);
    let b = connect(&cluster.connect_string(), t);
    // a leads two elections, one in each style; b waits in both.
    let (p1, p2) = (unique("el-confirm-guard"), unique("el-confirm-cand"));
    let la = LeaderElection::new(&a, &p1, "a").unwrap().lead().unwrap();
    let ca = LeaderElection::new(&a, &p2, "a").unwrap().join().unwrap();
    assert!(ca.wait_for_leadership(Duration::from_secs(20)).unwrap());
    let cb1 = LeaderElection::new(&b, &p1, "b").unwrap().join().unwrap();
    let cb2 = LeaderElection::new(&b, &p2, "b").unwrap().join().unwrap();
    wait_queue(
        &LeaderElection::new(&b, &p1, "o").unwrap(),
        &["a", "b"],
        "b queued (guard)",
    );
    wait_queue(
        &LeaderElection::new(&b, &p2, "o").unwrap(),
        &["a", "b"],
        "b queued (candidate)",
    );
    la.confirm().unwrap();
    ca.confirm().unwrap();

    // The first question goes out while the client still believes it is connected.
    assert_eq!(a.state(), zkguard::SessionState::Connected);
    proxy.blackhole();
    let cut = Instant::now();
    // Ask both, again and again, until b leads both elections, and once more after.
    let mut answers: Vec<(&str, Duration, Duration, Error)> = Vec::new();
    loop {
        let b_leads = cb1.is_leader() && cb2.is_leader();
        for who in ["guard", "candidate"] {
            let asked = cut.elapsed();
            let r = if who == "guard" {
                la.confirm()
            } else {
                ca.confirm()
            };
            match r {
                Ok(()) => panic!(
                    "{who}: confirm asked {asked:?} into the partition said yes (answers so \
                     far: {answers:?})"
                ),
                Err(e) => answers.push((who, asked, cut.elapsed(), e)),
            }
        }
        if b_leads {
            break;
        }
        assert!(
            cut.elapsed() < t * 10,
            "b not leading both within {:?}",
            t * 10
        );
        // Pacing: once the terms are known lost, the answers come at once.
        thread::sleep(Duration::from_millis(20));
    }
    let firsts: Vec<_> = answers.iter().take(4).collect();
    log::info!(
        "confirm during the partition: {} answers, all errors; the first: {firsts:?}",
        answers.len()
    );
    for who in ["guard", "candidate"] {
        assert!(
            answers
                .iter()
                .any(|(w, _, _, e)| *w == who && matches!(e, Error::NotLeader { .. })),
            "{who}: never NotLeader during the partition: {answers:?}"
        );
    }
    assert!(!la.is_valid());
    assert!(!ca.is_leader());
    proxy.heal();
    cb1.confirm().unwrap();
    cb2.confirm().unwrap();
    // Healed, the old terms stay gone.
    assert!(
        matches!(la.confirm(), Err(Error::NotLeader { .. })),
        "{:?}",
        la.confirm()
    );
    assert!(!la.is_valid());
}

/// A leader back within its session proves leadership before `Restored`. When the proof
/// cannot be made in time although the connection is up (a slow link: every reply takes
/// longer than the request timeout, yet the connection is not silent long enough to be
/// dropped), the candidate stays suspended and tries again, and is restored once the link
/// is fast again, with nobody else elected meanwhile.
#[test]
fn a_leader_whose_proof_is_slow_stays_suspended_until_it_is_proven() {
    init_log();
    let cluster = TestCluster::start(1).expect("start a ZooKeeper server");
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    let t = Duration::from_secs(4);
    let slow = Client::builder(&proxy.connect_string())
        .session_timeout(t)
        .request_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_secs(20))
        .build()
        .expect("connect through the proxy");
    let other = connect(&cluster.connect_string(), t);
    let path = unique("el-slow-proof");
    let a = LeaderElection::new(&slow, &path, "a")
        .unwrap()
        .join()
        .unwrap();
    let ev = a.events();
    assert!(matches!(
        next_event(&ev, Duration::from_secs(10), "a"),
        LeaderEvent::Elected { .. }
    ));
    let token = a.token().unwrap();
    let b = LeaderElection::new(&other, &path, "b")
        .unwrap()
        .join()
        .unwrap();
    let ev_b = b.events();
    let session = slow.session_id();
    let session_events = slow.events();

    // Every byte 400 ms late each way: the handshake fits in a connect attempt, the proof
    // (one request, 800 ms round trip) does not fit in 300 ms.
    proxy.delay(Duration::from_millis(400));
    proxy.reset();
    assert_eq!(next_event(&ev, t, "a"), LeaderEvent::Suspended);
    wait_event(&session_events, t * 3, "reconnected", |e| {
        matches!(e, SessionEvent::Reconnected { .. })
    });
    assert_eq!(slow.session_id(), session, "the session must survive");
    // Proofs keep timing out: still suspended, nothing else happened.
    match ev.recv_timeout(Duration::from_millis(1500)) {
        Err(_) => {}
        Ok(e) => panic!("a said {e:?} while its proofs cannot be made"),
    }
    assert!(!a.is_leader());
    assert!(ev_b.try_recv().is_err(), "b must not be elected");

    proxy.heal();
    assert_eq!(next_event(&ev, t * 3, "a"), LeaderEvent::Restored);
    assert!(a.is_leader());
    assert_eq!(a.token(), Some(token), "the same term");
    a.confirm().unwrap();
    assert!(ev_b.try_recv().is_err(), "b must not be elected");
    drop(b);
    drop(a);
}
