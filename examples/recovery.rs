//! Recovery after a standalone server restart (issue 36): how long after the client's new
//! session exists does it get back a lock (and leadership) that its lost session held?
//!
//! A client holds a mutex and leads an election; the standalone server is stopped for
//! longer than the session timeout (the client declares the session lost) and started
//! again from its data, which restores the old session with its nodes. Each round prints,
//! counted from the `Connected` event of the new session: when the next `acquire` of the
//! mutex returned, when the candidate was `Elected` again, and when it said `Rejoined`
//! (negative: before the new session existed). Figures, not assertions.
//!
//! ```text
//! cargo run --release --example recovery --features testing -- [rounds] [session timeout ms]
//! ```

use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use zkguard::testing::TestCluster;
use zkguard::{Client, LeaderElection, LeaderEvent, Mutex, SessionEvent};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> BoxResult<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let timeout = Duration::from_millis(args.next().map_or(Ok(4000), |a| a.parse())?);
    let cluster = TestCluster::start(1)?;
    let client = Client::builder(&cluster.connect_string())
        .session_timeout(timeout)
        .connect_timeout(Duration::from_secs(30))
        .build()?;
    let root = format!("/zkguard-recovery-{}", std::process::id());
    let lock = Mutex::new(&client, &format!("{root}/lock"))?;
    let candidate = LeaderElection::new(&client, &format!("{root}/election"), "a")?.join()?;
    let said = stamped(candidate.events());
    wait_for(&said, |e| matches!(e, LeaderEvent::Elected { .. }))?;
    println!(
        "session timeout {:?} (negotiated {:?}); {rounds} rounds",
        timeout,
        client.session_timeout()
    );
    println!("round  re-acquire  re-elected  rejoined   (ms after the new session's Connected)");
    let (mut acquire_ms, mut elect_ms) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let guard = lock.acquire()?;
        let events = stamped(client.events());
        cluster.stop(0)?;
        wait_session(&events, |e| matches!(e, SessionEvent::Lost { .. }))?;
        cluster.start_server(0)?;
        let connected = wait_session(&events, |e| matches!(e, SessionEvent::Connected { .. }))?;
        drop(guard);
        let again = lock.acquire()?;
        let acquired = connected.elapsed();
        drop(again);
        let mut rejoined = None;
        loop {
            let (at, ev) = said.recv_timeout(Duration::from_secs(120))?;
            match ev {
                LeaderEvent::Rejoined => rejoined = Some(at),
                LeaderEvent::Elected { .. } => break,
                _ => {}
            }
        }
        let elected = connected.elapsed();
        let rejoined = rejoined.map_or("never".to_string(), |at| {
            // Said on the connection thread while it tells every subscriber of the new
            // session: a few ms either way are the stamping threads' scheduling, shown as 0.
            match connected.checked_duration_since(at) {
                Some(early) if early > Duration::from_millis(5) => {
                    format!("-{:.0}", early.as_secs_f64() * 1e3)
                }
                _ => format!(
                    "{:.0}",
                    at.saturating_duration_since(connected).as_secs_f64() * 1e3
                ),
            }
        });
        println!(
            "{round:>5}  {:>10.0}  {:>10.0}  {rejoined:>8}",
            acquired.as_secs_f64() * 1e3,
            elected.as_secs_f64() * 1e3
        );
        acquire_ms.push(acquired.as_secs_f64() * 1e3);
        elect_ms.push(elected.as_secs_f64() * 1e3);
    }
    println!(
        "median: re-acquire {:.0} ms, re-elected {:.0} ms",
        median(&mut acquire_ms),
        median(&mut elect_ms)
    );
    Ok(())
}

/// Events, each with the instant a thread of its own received it (this program may be
/// busy elsewhere, starting the server, when one comes).
fn stamped<T: Send + 'static>(events: Receiver<T>) -> Receiver<(Instant, T)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for ev in events {
            if tx.send((Instant::now(), ev)).is_err() {
                return;
            }
        }
    });
    rx
}

/// The first candidate event matching `pred` (two minutes at most).
fn wait_for(
    rx: &Receiver<(Instant, LeaderEvent)>,
    pred: impl Fn(&LeaderEvent) -> bool,
) -> BoxResult<()> {
    loop {
        if pred(&rx.recv_timeout(Duration::from_secs(120))?.1) {
            return Ok(());
        }
    }
}

/// When the first session event matching `pred` was received (two minutes at most).
fn wait_session(
    rx: &Receiver<(Instant, SessionEvent)>,
    pred: impl Fn(&SessionEvent) -> bool,
) -> BoxResult<Instant> {
    loop {
        let (at, ev) = rx.recv_timeout(Duration::from_secs(120))?;
        if pred(&ev) {
            return Ok(at);
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
