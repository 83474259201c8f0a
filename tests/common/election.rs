//! Helpers for the election tests (`tests/election*.rs`, `tests/candidate.rs`).

use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use zkguard::{Error, LeaderElection, Leadership, Participant};

use super::{recv, spawn, WITHIN};

/// The ids of the participants, in queue order.
pub fn ids(p: &[Participant]) -> Vec<String> {
    p.iter().map(|x| x.id()).collect()
}

/// Waits until the election lists exactly these ids, in this order.
pub fn wait_ids(election: &LeaderElection, want: &[&str]) {
    let mut seen = Vec::new();
    let deadline = Instant::now() + WITHIN;
    while Instant::now() < deadline {
        seen = ids(&election.participants().unwrap());
        if seen == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!(
        "participants of {}: {seen:?}, want {want:?}",
        election.path()
    );
}

/// `lead()` on its own thread; the receiver gets the result.
pub fn spawn_lead(election: &LeaderElection) -> Receiver<zkguard::Result<Leadership>> {
    let election = election.clone();
    spawn(move || election.lead())
}

/// Leadership from a background `lead()`, failing the test on an error or a hang.
pub fn led(rx: &Receiver<zkguard::Result<Leadership>>, who: &str) -> Leadership {
    match recv(rx, WITHIN, &format!("{who} elected")) {
        Ok(l) => l,
        Err(e) => panic!("{who}: lead failed: {e}"),
    }
}

pub fn assert_not_leader<T: std::fmt::Debug>(r: zkguard::Result<T>, path: &str, what: &str) {
    match r {
        Err(Error::NotLeader { path: p }) => assert_eq!(p, path, "{what}"),
        other => panic!("{what}: expected NotLeader for {path}, got {other:?}"),
    }
}
