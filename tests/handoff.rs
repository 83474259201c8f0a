//! The contended handoff's fast path, against a real server: a waiter watches its
//! predecessor and the node before it, lists again when that one goes (during its
//! predecessor's turn), and then takes over on its predecessor's deletion alone. Each test
//! breaks one assumption the fast path could wrongly make — a node ahead gives up, expires,
//! or is deleted by someone else, before or after the waiter learned it is next — and
//! checks that no two contenders ever hold at once and that the right one gets in.
//!
//! Mutual exclusion is judged by a referee entered from the acquiring thread the moment an
//! acquire returns a valid guard; waiting for a state of a waiter is done by asking the
//! server which nodes its session watches (`wchp`) or by counting its requests, never by
//! sleeping.

mod common;

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use crossbeam_channel::Receiver;

use common::{
    assert_quiet, children, connect, recv, shared_cluster, spawn, unique, wait_until,
    watches_by_path, WITHIN,
};
use zkguard::testing::FaultProxy;
use zkguard::{Client, CreateMode, Error, Mutex, MutexGuard, QueueEvent, RwLock};

/// Sessions long enough that a waiter's slow re-check tick (one session timeout) never
/// fires during a test: every listing a test sees is one the fast path made.
const SESSION: Duration = Duration::from_secs(30);

/// Who holds, as the acquiring threads report it; a second holder is a violation.
#[derive(Default)]
struct Referee {
    holders: StdMutex<Vec<String>>,
    violations: StdMutex<Vec<String>>,
}

impl Referee {
    fn enter(&self, who: &str) {
        let mut holders = self.holders.lock().unwrap();
        if !holders.is_empty() {
            self.violations
                .lock()
                .unwrap()
                .push(format!("{who} got in while {holders:?} held"));
        }
        holders.push(who.to_string());
    }

    fn leave(&self, who: &str) {
        self.holders.lock().unwrap().retain(|h| h != who);
    }

    fn assert_clean(&self) {
        let v = self.violations.lock().unwrap();
        assert!(v.is_empty(), "mutual exclusion violated: {v:?}");
    }
}

/// A test's queue: an observer client, the lock path and the referee.
struct Queue {
    observer: Client,
    path: String,
    referee: Arc<Referee>,
}

type Acquire = Receiver<zkguard::Result<Option<MutexGuard>>>;

impl Queue {
    fn new(prefix: &str) -> Queue {
        Queue {
            observer: connect(&shared_cluster().connect_string(), SESSION),
            path: unique(prefix),
            referee: Arc::default(),
        }
    }

    /// The contenders' node paths, in queue order.
    fn nodes(&self) -> Vec<String> {
        let mut names = children(&self.observer, &self.path);
        names.sort_by_key(|n| n[n.len() - 10..].to_string());
        names
            .into_iter()
            .map(|n| format!("{}/{n}", self.path))
            .collect()
    }

    fn wait_len(&self, n: usize, what: &str) {
        wait_until(WITHIN, what, || self.nodes().len() == n);
    }

    /// Takes the lock on `client` as `who` (it must be free) and enters the referee.
    fn hold(&self, client: &Client, who: &str) -> MutexGuard {
        let g = Mutex::new(client, &self.path).unwrap().acquire().unwrap();
        self.referee.enter(who);
        g
    }

    /// Releases `who`'s guard, leaving the referee first.
    fn release(&self, who: &str, g: MutexGuard) {
        self.referee.leave(who);
        g.release().unwrap();
    }

    /// `lock.acquire` on a thread of its own as `who`, queued behind the `n - 1` nodes
    /// already there (waits until it is). The acquiring thread enters the referee the
    /// moment it returns a valid guard.
    fn queue(&self, lock: &Mutex, who: &'static str, n: usize) -> Acquire {
        let (lock, referee) = (lock.clone(), self.referee.clone());
        let rx = spawn(move || {
            let r = lock.acquire_timeout(WITHIN * 3);
            if let Ok(Some(g)) = &r {
                if g.is_valid() {
                    referee.enter(who);
                }
            }
            r
        });
        self.wait_len(n, &format!("{who} queued"));
        rx
    }

    /// `contenders` (client, name) queue in that order behind the holder: their locks, their
    /// acquires, and the queue's nodes, once the last one watches the two nodes ahead of it.
    fn line_up<const N: usize>(
        &self,
        contenders: [(&Client, &'static str); N],
    ) -> ([Mutex; N], [Acquire; N], Vec<String>) {
        let ahead = self.nodes().len();
        let mut locks = Vec::new();
        let mut acquires = Vec::new();
        for (i, (c, who)) in contenders.iter().enumerate() {
            let lock = Mutex::new(c, &self.path).unwrap();
            acquires.push(self.queue(&lock, who, ahead + i + 1));
            locks.push(lock);
        }
        let nodes = self.nodes();
        let (last, who) = contenders[N - 1];
        let n = nodes.len();
        wait_watching(
            last,
            &[&nodes[n - 3], &nodes[n - 2]],
            &format!("{who} watching the two nodes ahead"),
        );
        let (Ok(locks), Ok(acquires)) = (locks.try_into(), acquires.try_into()) else {
            unreachable!("one lock and one acquire per contender")
        };
        (locks, acquires, nodes)
    }
}

/// The session id of `c` as `wchp` prints it.
fn hex(c: &Client) -> String {
    format!("0x{:x}", c.session_id() as u64)
}

/// Waits until the server says `c`'s session watches every one of `paths`.
fn wait_watching(c: &Client, paths: &[&String], what: &str) {
    wait_until(WITHIN, what, || paths.iter().all(|p| watches(c, p)));
}

/// After the two nodes ahead of waiter `w` went while `holder` (a node) still holds: waits
/// until `w` waits for the holder (it listed again, two requests or more since `before`
/// counting the listing and the holder's watch, and watches the holder) or got in, then
/// checks that it did not get in.
fn assert_waits_for(w: &Client, w_rx: &Acquire, holder: &str, before: u64) {
    wait_until(WITHIN, "W waiting for the holder (or in)", || {
        !w_rx.is_empty() || (w.stats().requests >= before + 2 && watches(w, holder))
    });
    assert_quiet(w_rx, "W got in while H holds");
}

/// Whether the server says `c`'s session watches `path`.
fn watches(c: &Client, path: &str) -> bool {
    watches_by_path()
        .get(path)
        .is_some_and(|s| s.contains(&hex(c)))
}

/// The fast path, seen from waiter client `w`, third in line (watching the two nodes ahead
/// of it; `w_places`: its lock's queue events, subscribed after it queued): `first_turn`
/// ends the holder's turn and returns once the next one holds; meanwhile `w` hears the
/// holder go, knows from that alone that it is next (its place is told: 1 ahead), sends
/// nothing and stays out. `end_turn` ends that turn: `w` gets in having sent nothing in
/// between either (no listing after the notification; its guard keeps the watch its
/// waiter armed on its own node).
fn assert_takes_over_on_the_notification<T: std::fmt::Debug, G>(
    w: &Client,
    w_rx: &Receiver<T>,
    w_places: &Receiver<QueueEvent>,
    first_turn: impl FnOnce() -> G,
    end_turn: impl FnOnce(G),
) -> T {
    let before = w.stats().requests;
    let next = first_turn();
    // (Events from before this turn, if the receiver was subscribed before `w` queued:
    // its node made, its place at its first listing.)
    loop {
        match recv(w_places, WITHIN, "W's place after the holder went") {
            QueueEvent::Position { ahead: 1, .. } => break,
            QueueEvent::Queued { .. } | QueueEvent::Position { ahead: 2, .. } => {}
            other => panic!("W: expected 1 ahead, got {other:?}"),
        }
    }
    assert_quiet(w_rx, "W got in during the next one's turn");
    assert_eq!(
        w.stats().requests,
        before,
        "W sent requests during the next one's turn"
    );
    end_turn(next);
    let got = recv(w_rx, WITHIN, "W's turn");
    assert_eq!(
        w.stats().requests - before,
        0,
        "W sent requests between the end of the turn and its grant"
    );
    got
}

fn expect_cancelled(rx: &Acquire, who: &str) {
    match recv(rx, WITHIN, &format!("{who} cancelled")) {
        Err(Error::Cancelled { .. }) => {}
        other => panic!("{who}: expected Cancelled, got {other:?}"),
    }
}

fn expect_guard(rx: &Acquire, who: &str) -> MutexGuard {
    match recv(rx, WITHIN, &format!("{who} acquired")) {
        Ok(Some(g)) => {
            assert!(g.is_valid(), "{who}: an invalid guard");
            g
        }
        other => panic!("{who}: expected a guard, got {other:?}"),
    }
}

fn clients(n: usize) -> Vec<Client> {
    let cs = shared_cluster().connect_string();
    (0..n).map(|_| connect(&cs, SESSION)).collect()
}

// ---------------------------------------------------------------------------------------
// 1. A node two ahead gives up while the holder still holds
// ---------------------------------------------------------------------------------------

/// The key case. Queue H (holds), A, P, W: W watches P and A. A gives up (cancel): W must
/// not conclude that P holds now (it would take over as soon as P goes); it lists again,
/// finds H, and watches H. Then P gives up too: W lists again and waits for H.
#[test]
fn a_waiter_whose_node_two_ahead_gives_up_lists_again_and_waits_for_the_holder() {
    let q = Queue::new("ho-two-ahead-gives-up");
    let [h, a, p, w] = <[Client; 4]>::try_from(clients(4)).ok().unwrap();
    let gh = q.hold(&h, "H");
    let ([al, pl, _], [a_rx, p_rx, w_rx], nodes) = q.line_up([(&a, "A"), (&p, "P"), (&w, "W")]);

    let (before, heard) = (w.stats().requests, w.stats().watch_events);
    al.canceller().cancel();
    expect_cancelled(&a_rx, "A");
    // A's deletion is W's cue to list again (it finds the holder ahead of P), not a sign
    // that P holds now.
    wait_until(WITHIN, "W heard A go", || w.stats().watch_events > heard);
    pl.canceller().cancel();
    expect_cancelled(&p_rx, "P");
    assert_waits_for(&w, &w_rx, &nodes[0], before);

    q.release("H", gh);
    let gw = expect_guard(&w_rx, "W");
    assert_eq!(
        q.nodes(),
        vec![gw.path().to_string()],
        "the queue after W got in"
    );
    q.referee.assert_clean();
    q.release("W", gw);
}

// ---------------------------------------------------------------------------------------
// 2. The fast path itself: no listing between the predecessor's release and the grant
// ---------------------------------------------------------------------------------------

/// Queue H, P, W. H releases: P gets in, and W (which watched H too) knows from H's
/// deletion that it is next (nothing else was ahead in its listing). P releases: W holds,
/// having sent no request since H's release. Without the fast path W lists after P's
/// release; without its two-ahead knowledge, after H's.
#[test]
fn a_waiter_that_knows_it_is_next_takes_over_on_the_notification_alone() {
    let q = Queue::new("ho-fast");
    let [h, p, w] = <[Client; 3]>::try_from(clients(3)).ok().unwrap();
    let gh = q.hold(&h, "H");
    let ([_, wl], [p_rx, w_rx], _) = q.line_up([(&p, "P"), (&w, "W")]);
    let heard = w.stats().watch_events;
    let w_places = wl.canceller().queue_events();

    let got = assert_takes_over_on_the_notification(
        &w,
        &w_rx,
        &w_places,
        || {
            q.release("H", gh);
            let gp = expect_guard(&p_rx, "P");
            // W's notification comes on its own session, and may reach it after P (another
            // session) already holds: wait for it, then check it was the only one.
            wait_until(WITHIN, "W heard of H's release", || {
                w.stats().watch_events > heard
            });
            assert_eq!(w.stats().watch_events, heard + 1, "W heard of H's release");
            gp
        },
        |gp| q.release("P", gp),
    );
    let gw = got.unwrap().expect("W acquired");
    assert!(gw.is_valid());
    q.referee.assert_clean();
    q.release("W", gw);
}

/// The read rule's "two ahead": a reader behind two writers watches the nearer writer and
/// the one before it; when the first goes, it knows it is next (its listing had nothing
/// else ahead), and takes over from the second on its notification alone.
#[test]
fn a_reader_behind_two_writers_takes_over_from_the_second_on_the_notification_alone() {
    let q = Queue::new("ho-read");
    let [w0, w1, r] = <[Client; 3]>::try_from(clients(3)).ok().unwrap();
    let g0 = RwLock::new(&w0, &q.path).unwrap().write().unwrap();
    let l1 = RwLock::new(&w1, &q.path).unwrap();
    let w1_rx = spawn(move || l1.write());
    q.wait_len(2, "the second writer queued");
    let lr = RwLock::new(&r, &q.path).unwrap();
    let r_places = lr.canceller().queue_events();
    let r_rx = spawn(move || lr.read());
    q.wait_len(3, "the reader queued");
    let nodes = q.nodes();
    wait_watching(
        &r,
        &[&nodes[0], &nodes[1]],
        "the reader watching both writers",
    );

    let gr = assert_takes_over_on_the_notification(
        &r,
        &r_rx,
        &r_places,
        || {
            g0.release().unwrap();
            recv(&w1_rx, WITHIN, "the second writer").unwrap()
        },
        |g1| g1.release().unwrap(),
    )
    .unwrap();
    assert!(gr.is_valid());
    gr.release().unwrap();
}

// ---------------------------------------------------------------------------------------
// 3. The predecessor gives up after the waiter learned it is next
// ---------------------------------------------------------------------------------------

/// Queue H, P, W, P on a path whose replies are stalled. H releases: on the server P heads
/// the queue, but P cannot hear it; W hears H go and knows it is next. P gives up
/// (cancel): its delete still reaches the server, and W takes over on that deletion. P
/// never held.
#[test]
fn a_predecessor_that_gives_up_before_it_noticed_its_turn_hands_over_to_the_next() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let q = Queue::new("ho-pred-gives-up");
    let [h, w] = <[Client; 2]>::try_from(clients(2)).ok().unwrap();
    let p = connect(&proxy.connect_string(), SESSION);
    let gh = q.hold(&h, "H");
    let ([pl, wl], [p_rx, w_rx], nodes) = q.line_up([(&p, "P"), (&w, "W")]);
    wait_watching(&p, &[&nodes[0]], "P watching H");
    let w_places = wl.canceller().queue_events();

    proxy.stall_server_to_client();
    q.release("H", gh);
    match recv(&w_places, WITHIN, "W's place after H went") {
        QueueEvent::Position { ahead: 1, .. } => {}
        other => panic!("W: expected 1 ahead, got {other:?}"),
    }
    assert_quiet(&w_rx, "W got in while P heads the queue");

    pl.canceller().cancel();
    expect_cancelled(&p_rx, "P");
    let gw = expect_guard(&w_rx, "W");
    assert_eq!(
        q.nodes(),
        vec![gw.path().to_string()],
        "the queue after W got in"
    );
    q.referee.assert_clean();
    proxy.heal();
    q.release("W", gw);
}

// ---------------------------------------------------------------------------------------
// 4. A node two ahead expires
// ---------------------------------------------------------------------------------------

/// Queue H, A (its session expires), P, W. A's node goes with its session: W lists again
/// and watches H. P gives up: W waits for H. After the partition heals, A queues again
/// with a new session and gets in after W.
#[test]
fn a_waiter_whose_node_two_ahead_expires_lists_again_and_waits_for_the_holder() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let q = Queue::new("ho-two-ahead-expires");
    let [h, p, w] = <[Client; 3]>::try_from(clients(3)).ok().unwrap();
    let a = connect(&proxy.connect_string(), Duration::from_secs(2));
    let gh = q.hold(&h, "H");
    let ([_, pl, _], [a_rx, p_rx, w_rx], nodes) = q.line_up([(&a, "A"), (&p, "P"), (&w, "W")]);

    let (before, heard) = (w.stats().requests, w.stats().watch_events);
    proxy.blackhole();
    wait_until(WITHIN, "W heard A's node go with its session", || {
        w.stats().watch_events > heard
    });
    pl.canceller().cancel();
    expect_cancelled(&p_rx, "P");
    assert_waits_for(&w, &w_rx, &nodes[0], before);

    q.release("H", gh);
    let gw = expect_guard(&w_rx, "W");
    proxy.heal();
    // A waits it out and queues again, behind W.
    q.wait_len(2, "A queued again");
    assert_quiet(&a_rx, "A got in while W holds");
    q.release("W", gw);
    let ga = expect_guard(&a_rx, "A");
    q.referee.assert_clean();
    q.release("A", ga);
}

/// Queue H, P (on a partitionable path), W. H releases: P holds, W lists again and knows
/// it is next. P is cut off: its guard is lost as soon as its client counts the session
/// gone, before the server expires it; then W takes over on the deletion alone.
#[test]
fn a_holder_that_expires_hands_over_to_the_waiter_that_knew_it_was_next_only_after_losing() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let q = Queue::new("ho-holder-expires");
    let [h, w] = <[Client; 2]>::try_from(clients(2)).ok().unwrap();
    let p = connect(&proxy.connect_string(), Duration::from_secs(2));
    let gh = q.hold(&h, "H");
    let p_rx = q.queue(&Mutex::new(&p, &q.path).unwrap(), "P", 2);
    let wl = Mutex::new(&w, &q.path).unwrap();
    let w_places = wl.canceller().queue_events();
    let nodes = q.nodes();
    // W's acquire looks, the moment it returns, whether P's guard had reported lost.
    let (lost_tx, lost_rx) = crossbeam_channel::bounded::<Receiver<()>>(1);
    let w_rx = spawn(move || {
        let r = wl.acquire_timeout(WITHIN * 3);
        let p_lost = lost_rx.recv().unwrap().try_recv().is_ok();
        (r, p_lost)
    });
    q.wait_len(3, "W queued");
    wait_watching(&w, &[&nodes[0], &nodes[1]], "W watching P and H");

    let mut held = None;
    let (r, p_lost) = assert_takes_over_on_the_notification(
        &w,
        &w_rx,
        &w_places,
        || {
            q.release("H", gh);
            let gp = expect_guard(&p_rx, "P");
            lost_tx.send(gp.lost()).unwrap();
            held = Some(gp);
        },
        // P is cut off: its session expires, and its node goes with it.
        |()| proxy.blackhole(),
    );
    let gp = held.expect("P held");
    let gw = r.unwrap().expect("W acquired");
    assert!(
        p_lost,
        "W got in before the partitioned holder's guard reported lost"
    );
    assert!(!gp.is_valid(), "P still valid beside W");
    assert!(gw.is_valid());
    q.referee.assert_clean();
    proxy.heal();
    drop(gp);
    q.release("W", gw);
}

// ---------------------------------------------------------------------------------------
// 5. Nodes deleted by another client
// ---------------------------------------------------------------------------------------

/// A node made the way Curator's `InterProcessMutex` makes its nodes, by hand.
fn foreign_node(c: &Client, path: &str) -> String {
    let prefix = format!("{path}/_c_{}-lock-", uuid::Uuid::new_v4());
    c.create(&prefix, b"by hand", CreateMode::EphemeralSequential)
        .unwrap()
        .path
}

/// Queue H, A and P (made by another client, by hand), W. That client deletes A (W lists
/// again and watches H), then P: W waits for H all the same.
#[test]
fn a_waiter_whose_node_two_ahead_is_deleted_by_another_client_waits_for_the_holder() {
    let q = Queue::new("ho-two-ahead-deleted");
    let [h, x, w] = <[Client; 3]>::try_from(clients(3)).ok().unwrap();
    let gh = q.hold(&h, "H");
    let a = foreign_node(&x, &q.path);
    let p = foreign_node(&x, &q.path);
    let w_rx = q.queue(&Mutex::new(&w, &q.path).unwrap(), "W", 4);
    let nodes = q.nodes();
    assert_eq!((&nodes[1], &nodes[2]), (&a, &p));
    wait_watching(&w, &[&a, &p], "W watching P and A");

    let (before, heard) = (w.stats().requests, w.stats().watch_events);
    x.delete(&a, None).unwrap();
    wait_until(WITHIN, "W heard A go", || w.stats().watch_events > heard);
    x.delete(&p, None).unwrap();
    assert_waits_for(&w, &w_rx, &nodes[0], before);

    q.release("H", gh);
    let gw = expect_guard(&w_rx, "W");
    q.referee.assert_clean();
    q.release("W", gw);
}

/// Queue H, P, W. Another client deletes P's node before P ever held. W lists again and
/// waits for H; P learns of its own node's deletion (it watches it) and queues again,
/// behind W, instead of taking H's turn with a node that is gone.
#[test]
fn a_predecessor_deleted_by_another_client_before_it_held_takes_no_turn() {
    let q = Queue::new("ho-pred-deleted");
    let [h, p, w, x] = <[Client; 4]>::try_from(clients(4)).ok().unwrap();
    let gh = q.hold(&h, "H");
    let (_, [p_rx, w_rx], nodes) = q.line_up([(&p, "P"), (&w, "W")]);
    wait_watching(&p, &[&nodes[0], &nodes[1]], "P watching H and its own node");

    x.delete(&nodes[1], None).unwrap();
    // P queues again, with a new node behind W's.
    wait_until(WITHIN, "P queued again behind W", || {
        let now = q.nodes();
        now.len() == 3 && now[..2] == [nodes[0].clone(), nodes[2].clone()]
    });
    assert_quiet(&w_rx, "W got in while H holds");
    assert_quiet(&p_rx, "P got in while H holds");

    q.release("H", gh);
    let gw = expect_guard(&w_rx, "W");
    assert_quiet(&p_rx, "P got in while W holds");
    q.release("W", gw);
    let gp = expect_guard(&p_rx, "P");
    q.referee.assert_clean();
    q.release("P", gp);
}

// ---------------------------------------------------------------------------------------
// 6. The predecessor goes while the waiter reads its listing
// ---------------------------------------------------------------------------------------

/// The last operation the server processed on `c`'s connection (`cons`: `lop=`).
fn last_op(c: &Client) -> Option<String> {
    let out = shared_cluster().four_letter(0, "cons").expect("cons");
    let sid = format!("sid={}", hex(c));
    out.lines()
        .find(|l| l.contains(&sid))
        .and_then(|l| l.split("lop=").nth(1))
        .map(|rest| rest.split([',', ')']).next().unwrap_or("").to_string())
}

/// Queue H, A, P, W (W through a proxy). H releases, then A: P holds, and W's listing
/// (sent on A's deletion: W's listing had H ahead of A, so A's deletion alone does not
/// tell W it is next) is answered before P releases, but the answer reaches W only
/// together with the notification of P's deletion. The listing shows P as the only node
/// ahead and P's deletion is already in: W takes over without asking the server again (no
/// request after the listing; its guard keeps the watch its waiter armed on its own node).
/// Before, W dropped the fired watch and armed it again, learning with one more round
/// trip that P was gone.
#[test]
fn a_waiter_whose_predecessor_went_while_it_read_its_listing_takes_over_without_asking_again() {
    let proxy = FaultProxy::for_cluster(shared_cluster()).unwrap();
    let q = Queue::new("ho-listing-in-flight");
    let [h, a, p] = <[Client; 3]>::try_from(clients(3)).ok().unwrap();
    let w = connect(&proxy.connect_string(), SESSION);
    let gh = q.hold(&h, "H");
    // Fourth in line, W watches P and A; H's release is not W's to hear.
    let (_, [a_rx, p_rx, w_rx], _) = q.line_up([(&a, "A"), (&p, "P"), (&w, "W")]);
    q.release("H", gh);
    let ga = expect_guard(&a_rx, "A");

    // W's listing, sent when it hears of A's release (its listing had H ahead of A, so it
    // must ask), is held on its way to the server...
    proxy.stall_client_to_server();
    let before = w.stats().requests;
    q.release("A", ga);
    let gp = expect_guard(&p_rx, "P");
    wait_until(WITHIN, "W listing again", || w.stats().requests > before);
    assert_eq!(w.stats().requests, before + 1, "W: one listing");
    // ...then let through, while the answer is held on its way back.
    proxy.stall_server_to_client();
    wait_until(WITHIN, "the server answering W's listing", || {
        last_op(&w).as_deref() == Some("GETC")
    });
    // P goes: the notification queues behind the listing's answer.
    q.release("P", gp);
    let listed = w.stats().requests;
    proxy.heal();
    let gw = expect_guard(&w_rx, "W");
    assert_eq!(
        w.stats().requests - listed,
        0,
        "W asked the server again after its listing"
    );
    q.referee.assert_clean();
    q.release("W", gw);
}
