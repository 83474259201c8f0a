//! Leader election under churn, against real servers: a hundred rounds (resign, client
//! close, server kill, partition of the leader) checked for overlapping leaders by the churn
//! checker (`tests/common/churn.rs`), and that checker's own test.
//!
//! Assertions are about orderings (who led before whom, what was reported before what), with
//! generous deadlines only to turn a hang into a failure.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::churn::{batch_of, spawn_monitor, spawn_recorder, Phase, Referee, Seen};
use common::partition::proxied_server;
use common::{connect, init_log, queue, unique, wait_until, WITHIN};
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex as PlMutex;
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Candidate, Client, LeaderElection, LeaderEvent};

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
enum Ending {
    Resign,
    Close,
    Kill,
    Partition,
}

/// The endings in round order. A partition round waits out a session timeout; a kill round
/// restarts the killed server in the background (joined before the next kill, so a
/// quorum always stands).
const PATTERN: [Ending; 4] = [
    Ending::Resign,
    Ending::Kill,
    Ending::Close,
    Ending::Partition,
];
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
    ending: Ending,
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
        let ending = PATTERN[n % PATTERN.len()];
        let what = format!("round {n} ({ending:?})");
        let old = (churn.slots[li].id, token);
        let mark = churn.mark(old.0);
        let started = Instant::now();
        let (ni, ntoken) = match ending {
            Ending::Resign => {
                if let Err(e) = churn.slots[li].cand.resign() {
                    panic!("{what}: the leader was not leading when asked to resign: {e}");
                }
                churn.settled(Some(old.0), &what)
            }
            Ending::Close => {
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
            Ending::Kill => {
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
            Ending::Partition => {
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
        match ending {
            Ending::Resign => {
                said(|e| e.first() == Some(&Some(Resigned)));
            }
            Ending::Close => {
                said(|e| e == [Some(Lost), None]);
            }
            Ending::Partition => {
                said(|e| e.starts_with(&[Some(Suspended), Some(Lost), Some(Rejoined)]));
            }
            Ending::Kill if new.0 == old.0 => {
                // Suspended (again if a reconnect dropped before the proof), then Restored.
                let evs = said(|e| e.contains(&Some(Restored)) || e.contains(&Some(Lost)));
                let restored = evs.iter().position(|e| *e == Some(Restored));
                assert!(
                    restored
                        .is_some_and(|i| i > 0 && evs[..i].iter().all(|e| *e == Some(Suspended))),
                    "{what}: the leader kept its term but said {evs:?}"
                );
            }
            Ending::Kill => {
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
                if ending != Ending::Kill {
                    wait_until(WITHIN, &format!("{what}: the handover in the log"), || {
                        handover().is_some()
                    });
                }
                handover()
            })
            .flatten();
        rounds.push(Round {
            ending,
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
    for ending in [
        Ending::Resign,
        Ending::Close,
        Ending::Kill,
        Ending::Partition,
    ] {
        let of: Vec<&Round> = rounds.iter().filter(|x| x.ending == ending).collect();
        let mut took: Vec<Duration> = of.iter().map(|x| x.took).collect();
        took.sort();
        let mut valid_gaps: Vec<Duration> = of.iter().filter_map(|x| x.gaps.map(|g| g.0)).collect();
        valid_gaps.sort();
        let mut end_gaps: Vec<Duration> = of.iter().filter_map(|x| x.gaps.map(|g| g.1)).collect();
        end_gaps.sort();
        let mid = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
        summary.push_str(&format!(
            "\n  {ending:?}: {} rounds, median {:?} (max {:?}); leader changes {}; \
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
            .filter(|x| x.ending != Ending::Kill)
            .all(|x| x.gaps.is_some()),
        "a handover missing from the log: {rounds:?}"
    );
}
