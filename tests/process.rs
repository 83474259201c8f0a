//! Process-wide measurements (CPU time, thread count). The tests of this file run one at a
//! time, so nothing else in the process disturbs the figures.

mod common;

use std::time::{Duration, Instant};

use common::{connect, init_log, wait_event, wait_until, WITHIN};
use parking_lot::Mutex;
use zkguard::testing::TestCluster;
use zkguard::SessionEvent;

static SERIAL: Mutex<()> = Mutex::new(());

/// User + system CPU time of this process, from /proc/self/stat (clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the ")" that ends the command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// The task ids of this process now.
fn tasks() -> std::collections::HashSet<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn no_busy_loop_while_every_server_is_down() {
    let _serial = SERIAL.lock();
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let c = connect(&cluster.connect_string(), Duration::from_secs(2));
    let events = c.events();
    cluster.stop(0).unwrap();
    wait_event(&events, Duration::from_secs(10), "suspended", |e| {
        matches!(e, SessionEvent::Suspended { .. })
    });
    let before = cpu_time();
    let started = Instant::now();
    // Four seconds of outage: the session is lost on the way, and the client keeps trying.
    wait_event(&events, Duration::from_secs(10), "lost", |e| {
        matches!(e, SessionEvent::Lost { .. })
    });
    while started.elapsed() < Duration::from_secs(4) {
        let _ = events.recv_timeout(Duration::from_millis(200));
    }
    let used = cpu_time() - before;
    let wall = started.elapsed();
    // A busy loop would burn a whole core (4 s); allow 5 %.
    assert!(
        used < wall / 20,
        "used {used:?} of CPU in {wall:?} of outage"
    );
    assert!(c.stats().connect_attempts > 3, "the client stopped trying");
}

#[test]
fn one_thread_per_client_and_none_left_after_drop() {
    let _serial = SERIAL.lock();
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let baseline = thread_count();
    let clients: Vec<_> = (0..5)
        .map(|_| connect(&cluster.connect_string(), Duration::from_secs(5)))
        .collect();
    // Many requests, watches and clones still cost no extra thread.
    let clones = clients.to_vec();
    let mut watches = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        c.create(
            &format!("/threads-{i}-{}", uuid::Uuid::new_v4()),
            b"",
            zkguard::CreateMode::Ephemeral,
        )
        .unwrap();
        for _ in 0..20 {
            watches.push(c.exists_w("/threads-none").unwrap().1);
        }
    }
    assert_eq!(thread_count(), baseline + 5);
    drop(clones);
    drop(clients);
    // Close joins the connection thread; the kernel may take a moment to reap it (and a
    // loaded machine a while longer).
    wait_until(WITHIN, "no thread left behind", || {
        thread_count() == baseline
    });
    // Every watch heard that its client closed.
    for w in watches {
        assert_eq!(
            w.recv_timeout(Duration::from_secs(1)).unwrap().event_type,
            zkguard::EventType::Closed
        );
    }
}

#[test]
fn many_drops_in_a_row_start_no_thread_each() {
    let _serial = SERIAL.lock();
    init_log();
    let cluster = TestCluster::start(1).unwrap();
    let path = format!("/release-many-{}", uuid::Uuid::new_v4().simple());
    let a = connect(&cluster.connect_string(), Duration::from_secs(10));
    let lock = zkguard::Mutex::new(&a, &path).unwrap();
    // One cycle first: whatever a release starts once (the background deletes' thread,
    // which lingers) is counted in.
    drop(lock.acquire().unwrap());
    let before = tasks();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        drop(lock.acquire().unwrap());
        seen.extend(tasks().difference(&before).cloned());
    }
    // At most the background deletes' one thread, should it have ended and started again
    // (it lingers ten seconds idle); a thread per drop would show up by the hundred.
    assert!(
        seen.len() <= 2,
        "{} new threads during 200 drops: {seen:?}",
        seen.len()
    );
    // And the last drop's delete is done: the next holder (another client) gets the lock.
    let b = connect(&cluster.connect_string(), Duration::from_secs(10));
    let g = zkguard::Mutex::new(&b, &path)
        .unwrap()
        .acquire_timeout(WITHIN)
        .unwrap()
        .expect("the next holder waited: the last node stayed");
    assert!(g.is_valid());
}
