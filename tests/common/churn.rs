//! The churn checker of `tests/election_churn.rs`: a referee that merges every candidate's
//! events into one causal log and checks that no two candidates ever lead at once, a recorder
//! thread feeding it, and a monitor sampling `is_leader()`. Its own test is
//! `the_churn_referee_catches_overlaps_and_malformed_streams` in that file.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, TryRecvError};
use parking_lot::Mutex as PlMutex;
use zkguard::{Candidate, LeaderEvent};

/// Where a candidate stands, by its own events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// In the election, not leading.
    Queued,
    /// Elected or restored: a valid leader.
    Leading,
    /// Leading, but its connection dropped: not valid, yet still holding its node.
    Suspended,
    /// Its event stream ended (client closed, candidate dropped).
    Ended,
}

pub struct Tracked {
    /// The candidate, for `is_leader()` samples, while its stream runs.
    pub handle: Option<Arc<Candidate>>,
    pub phase: Phase,
    /// The token of the current term.
    pub term: Option<u64>,
}

/// One event in the merged log; `ev` is `None` when the candidate's stream ended.
#[derive(Debug, Clone)]
pub struct Record {
    /// When the recorder found it in the candidate's channel (after it was emitted).
    pub at: Instant,
    pub cand: usize,
    pub ev: Option<LeaderEvent>,
}

/// An event as the recorder found it.
#[derive(Debug)]
pub struct Found {
    pub at: Instant,
    /// The sweep of its batch that found it (0 first), and its channel's place in every
    /// sweep. A sweep drains the channels in place order, so the check of (sweep, place)
    /// happened after that of every smaller pair: an event found at (s, p) was emitted
    /// before the check (s, p), and, if s > 0, after the check (s - 1, p), which found
    /// nothing more.
    pub sweep: u32,
    pub place: u32,
    /// `None`: the stream ended.
    pub ev: Option<LeaderEvent>,
}

/// What the recorder found in one wake-up: per candidate, its events in order.
pub type Batch = Vec<(usize, VecDeque<Found>)>;

pub fn is_start(ev: &Option<LeaderEvent>) -> bool {
    matches!(
        ev,
        Some(LeaderEvent::Elected { .. }) | Some(LeaderEvent::Restored)
    )
}

/// An event that ends a valid leadership (or the stream).
pub fn is_end(ev: &Option<LeaderEvent>) -> bool {
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
pub struct Referee {
    pub tracked: BTreeMap<usize, Tracked>,
    pub log: Vec<Record>,
    pub last_token: u64,
    pub violations: Vec<String>,
    /// `Failed` events (none are expected: churn causes only connection trouble).
    pub failed: Vec<String>,
    pub batches: u64,
    /// Batches where one candidate's ending and another's start were merged together
    /// (their order decided by the merge rule, not by separate wake-ups).
    pub contested: u64,
    /// `is_leader()` sandwich samples taken.
    pub samples: u64,
    /// The test is over: candidates are being dropped, nothing is checked any more.
    pub teardown: bool,
}

impl Referee {
    pub fn register(&mut self, id: usize, handle: Option<Arc<Candidate>>) {
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
    pub fn live(&self) -> Vec<(usize, Arc<Candidate>)> {
        self.tracked
            .iter()
            .filter_map(|(id, t)| t.handle.clone().map(|h| (*id, h)))
            .collect()
    }

    pub fn phase(&self, id: usize) -> Phase {
        self.tracked.get(&id).map_or(Phase::Ended, |t| t.phase)
    }

    /// Merges one batch (each candidate's events in its own order).
    pub fn merge(&mut self, mut batch: Batch) {
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

    pub fn apply(&mut self, id: usize, at: Instant, ev: Option<LeaderEvent>) {
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
    pub fn tail(&self, n: usize) -> String {
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
    pub fn handover(&self, old: usize, new: usize) -> Option<(Duration, Duration)> {
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
pub fn steady_leaders(handles: &[(usize, Arc<Candidate>)]) -> Vec<usize> {
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
pub fn spawn_recorder(
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
pub fn spawn_monitor(referee: Arc<PlMutex<Referee>>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
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
pub type Seen = (usize, u32, u32, Option<LeaderEvent>);

/// A batch for the referee's own test.
pub fn batch_of(events: &[Seen]) -> Batch {
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
