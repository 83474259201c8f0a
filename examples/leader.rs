//! A daemon that works only while it leads: three of them elect a leader, hand over when the
//! leader resigns or leaves, and when the leader is cut off from ZooKeeper it stops working
//! at once, before anyone else takes over.
//!
//! With `ZK_CONNECT` unset it starts a throwaway ZooKeeper server on loopback (the
//! `testing` feature's harness). With `ZK_CONNECT=host:port,...` it uses your ensemble, under
//! a fresh `/zkguard-leader-<pid>` path, each daemon through a local fault proxy in front of
//! your servers (nothing of yours is touched).
//!
//! ```text
//! cargo run --example leader --features testing
//! ```

use std::net::ToSocketAddrs;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zkguard::channel::{select, tick, Receiver, Sender};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{Client, LeaderElection, LeaderEvent};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// What the operator (here: `main`) can ask of a daemon.
enum Command {
    Resign,
    Stop,
}

/// What every daemon reports, with the instant it saw it.
#[derive(Default)]
struct Journal {
    lines: Mutex<Vec<(Instant, String, LeaderEvent)>>,
    /// Daemons inside a unit of leader work right now: never more than one.
    working: AtomicUsize,
    most_working: AtomicUsize,
    units: AtomicUsize,
}

impl Journal {
    /// Waits until `name` reports an event matching `pred`; returns when it saw it.
    fn wait_for(&self, name: &str, pred: impl Fn(&LeaderEvent) -> bool) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((at, _, _)) = self
                .lines
                .lock()
                .iter()
                .rev()
                .find(|(_, n, e)| n == name && pred(e))
            {
                return *at;
            }
            assert!(Instant::now() < deadline, "{name} never reported the event");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn clear(&self) {
        self.lines.lock().clear();
    }
}

/// Waits until the participant `name` is in line (listed by `participants()`).
fn wait_queued(election: &LeaderElection, name: &str) -> zkguard::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !election.participants()?.iter().any(|p| p.id() == name) {
        assert!(Instant::now() < deadline, "{name} never queued");
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// The daemon: a candidate in the background, leader work on a timer, and only while it
/// leads. It stops the work the moment it is suspended, loses, or resigns.
fn daemon(
    name: &'static str,
    client: Client,
    path: String,
    commands: Receiver<Command>,
    journal: Arc<Journal>,
) -> JoinHandle<zkguard::Result<()>> {
    std::thread::spawn(move || {
        let election = LeaderElection::new(&client, &path, name)?;
        let candidate = election.join()?;
        let events = candidate.events();
        let work = tick(Duration::from_millis(20));
        let mut leading = None;
        loop {
            select! {
                recv(events) -> ev => {
                    let Ok(ev) = ev else { break }; // the client was closed
                    match ev {
                        LeaderEvent::Elected { token } => leading = Some(token),
                        LeaderEvent::Restored => leading = candidate.token(),
                        LeaderEvent::Suspended | LeaderEvent::Lost | LeaderEvent::Resigned => {
                            leading = None
                        }
                        _ => {}
                    }
                    println!("  {name}: {ev:?}");
                    journal.lines.lock().push((Instant::now(), name.to_string(), ev));
                }
                recv(work) -> _ => {
                    // The leader's work: a real daemon passes `token` to what it writes.
                    if let Some(_token) = leading {
                        let now = journal.working.fetch_add(1, Ordering::SeqCst) + 1;
                        journal.most_working.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        journal.working.fetch_sub(1, Ordering::SeqCst);
                        journal.units.fetch_add(1, Ordering::SeqCst);
                    }
                }
                recv(commands) -> cmd => match cmd {
                    Ok(Command::Resign) => {
                        leading = None; // stop the work first, then step down
                        candidate.resign()?;
                    }
                    Ok(Command::Stop) | Err(_) => break,
                },
            }
        }
        Ok(()) // dropping the candidate leaves the election
    })
}

fn main() -> BoxResult<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let (_cluster, connect) = match std::env::var("ZK_CONNECT") {
        Ok(cs) if !cs.is_empty() => (None, cs),
        _ => {
            println!("starting a throwaway ZooKeeper server on loopback ...");
            let c = TestCluster::start(1)?;
            let cs = c.connect_string();
            (Some(c), cs)
        }
    };
    let path = format!("/zkguard-leader-{}", std::process::id());
    let addrs: Vec<_> = connect
        .split('/')
        .next()
        .unwrap_or_default()
        .split(',')
        .filter_map(|h| h.to_socket_addrs().ok()?.next())
        .collect();
    let journal = Arc::new(Journal::default());
    let session_timeout = Duration::from_secs(4);

    // An observer: it lists the participants, never joins.
    let observer = Client::connect(&connect)?;
    let election = LeaderElection::new(&observer, &path, "observer")?;

    // Three daemons, each with its own session through its own fault proxy, joining in
    // order: a, then b, then c. Each is queued (listed) before the next one starts, so the
    // order in line is the order they joined; started back to back, b and c would race.
    let mut daemons: Vec<(&str, FaultProxy, Sender<Command>, JoinHandle<_>)> = Vec::new();
    for name in ["a", "b", "c"] {
        let proxy = FaultProxy::start(&addrs)?;
        let client = Client::builder(&proxy.connect_string())
            .session_timeout(session_timeout)
            .build()?;
        let (tx, rx) = zkguard::channel::unbounded();
        let handle = daemon(name, client, path.clone(), rx, journal.clone());
        wait_queued(&election, name)?;
        daemons.push((name, proxy, tx, handle));
    }
    journal.wait_for("a", |e| matches!(e, LeaderEvent::Elected { .. }));
    let ids: Vec<String> = election
        .participants()?
        .iter()
        .map(|p| format!("{}{}", p.id(), if p.holds { " (leads)" } else { "" }))
        .collect();
    println!("election {path}: participants in order: {}", ids.join(", "));
    assert_eq!(
        ids,
        ["a (leads)", "b", "c"],
        "the line is the order they joined"
    );

    // 1. The leader resigns: the next in line takes over; a queues again at the back.
    println!("a resigns:");
    let asked = Instant::now();
    daemons[0].2.send(Command::Resign)?;
    let b_elected = journal.wait_for("b", |e| matches!(e, LeaderEvent::Elected { .. }));
    journal.wait_for("a", |e| *e == LeaderEvent::Resigned);
    println!(
        "  b leads {:?} after a was told to resign",
        b_elected - asked
    );

    // 2. The leader leaves (its daemon stops): c takes over.
    println!("b stops:");
    daemons[1].2.send(Command::Stop)?;
    journal.wait_for("c", |e| matches!(e, LeaderEvent::Elected { .. }));
    println!("  leader now: {:?}", election.leader()?.map(|p| p.id()));

    // 3. The leader is cut off from ZooKeeper: it stops working at once (suspended), learns
    //    that it lost leadership when its session times out, and only then does a lead.
    journal.clear();
    println!("c is cut off from ZooKeeper (session timeout {session_timeout:?}):");
    let cut_at = Instant::now();
    daemons[2].1.blackhole();
    let suspended = journal.wait_for("c", |e| *e == LeaderEvent::Suspended);
    let lost = journal.wait_for("c", |e| *e == LeaderEvent::Lost);
    let a_elected = journal.wait_for("a", |e| matches!(e, LeaderEvent::Elected { .. }));
    println!(
        "  c stopped working {:?} after the cut, lost leadership at {:?}, a leads at {:?}",
        suspended - cut_at,
        lost - cut_at,
        a_elected - cut_at
    );
    assert!(
        lost < a_elected,
        "the old leader knew before the new one was elected"
    );
    daemons[2].1.heal();
    // Said once c has its new session.
    journal.wait_for("c", |e| *e == LeaderEvent::Rejoined);
    wait_queued(&election, "c")?;
    println!("  healed: c has a new session and is queued again, behind a");

    for (_, _, tx, _) in &daemons {
        let _ = tx.send(Command::Stop);
    }
    for (name, _, _, handle) in daemons {
        handle
            .join()
            .map_err(|_| format!("daemon {name} panicked"))??;
    }
    let most = journal.most_working.load(Ordering::SeqCst);
    println!(
        "{} units of leader work done, at most {most} daemon working at any instant",
        journal.units.load(Ordering::SeqCst)
    );
    assert_eq!(most, 1, "never two leaders at work");
    let _ = observer.delete(&path, None);
    println!("done");
    Ok(())
}
