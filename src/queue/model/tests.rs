//! The model checked: each recipe under its bounds (every property must hold), and each
//! seeded fault (its counterexample must be found). Run with `--nocapture` to see the
//! states explored and the traces.

use super::check::{self, LIVENESS};
use super::props::{
    EXCLUSION, FAST_PATH, FENCE, GONE_READS_INVALID, HANDED_VALID, NOTHING_LEFT, PARTICIPANTS,
    PERMITS, READ_WRITE,
};
use super::{Config, Faults, Modelled, ProcSpec, Queue, Seeded};

fn procs(kinds: &str, acquisitions: u8) -> Vec<ProcSpec> {
    kinds
        .chars()
        .map(|k| ProcSpec {
            read: k == 'r',
            acquisitions,
        })
        .collect()
}

fn config(recipe: Modelled, procs: Vec<ProcSpec>, faults: Faults) -> Config {
    Config {
        recipe,
        procs,
        faults,
        seeded: Seeded::default(),
        tick: false,
        fenced_writes: false,
    }
}

/// Every property holds.
fn holds(name: &str, config: Config) {
    check::holds(name, &Queue { config });
}

/// The seeded fault is caught by `property`; its trace is printed.
fn caught(name: &str, config: Config, property: &str) {
    check::caught(name, &Queue { config }, property);
}

fn faults(disconnects: u8, expiries: u8, tampers: u8, give_ups: u8) -> Faults {
    Faults {
        disconnects,
        expiries,
        tampers,
        give_ups,
    }
}

#[test]
fn mutex_three_processes_two_acquisitions_each() {
    let mut c = config(Modelled::Mutex, procs("www", 2), Faults::default());
    c.fenced_writes = true;
    holds("mutex 3x2", c);
}

#[test]
fn mutex_four_processes() {
    holds(
        "mutex 4x1",
        config(Modelled::Mutex, procs("wwww", 1), Faults::default()),
    );
}

#[test]
fn mutex_with_a_lost_link() {
    holds(
        "mutex 3x1, a lost link",
        config(Modelled::Mutex, procs("www", 1), faults(1, 0, 0, 0)),
    );
}

#[test]
fn mutex_with_a_deleted_node_and_a_give_up() {
    let mut c = config(Modelled::Mutex, procs("www", 1), faults(0, 0, 1, 1));
    c.fenced_writes = true;
    holds(
        "mutex 3x1, a node deleted by another party and a give-up",
        c,
    );
}

#[test]
fn mutex_two_processes_with_every_fault() {
    let mut c = config(Modelled::Mutex, procs("ww", 1), faults(1, 1, 1, 1));
    c.fenced_writes = true;
    holds("mutex 2x1, every fault", c);
}

#[test]
fn mutex_waiters_that_re_check_on_their_tick() {
    let mut c = config(Modelled::Mutex, procs("www", 1), faults(0, 0, 0, 1));
    c.tick = true;
    holds("mutex 3x1, ticks and a give-up", c);
}

#[test]
fn election_with_a_give_up() {
    holds(
        "election 3x1, a give-up",
        config(Modelled::Election, procs("www", 1), faults(0, 0, 0, 1)),
    );
}

#[test]
fn election_with_lost_replies_and_session_expiry() {
    holds(
        "election 2x2, a lost link and an expiry",
        config(Modelled::Election, procs("ww", 2), faults(1, 1, 0, 0)),
    );
}

#[test]
fn rwlock_readers_and_writers() {
    let mut c = config(Modelled::RwLock, procs("rwr", 2), Faults::default());
    c.fenced_writes = true;
    holds("rwlock r-w-r x2", c);
}

#[test]
fn rwlock_with_faults() {
    holds(
        "rwlock w-r-r x1, a deleted node and a give-up",
        config(Modelled::RwLock, procs("wrr", 1), faults(0, 0, 1, 1)),
    );
    holds(
        "rwlock w-r x2, a lost link and an expiry",
        config(Modelled::RwLock, procs("wr", 2), faults(1, 1, 0, 0)),
    );
}

#[test]
fn semaphore_two_permits_three_processes() {
    holds(
        "semaphore(2) 3x1",
        config(Modelled::Semaphore(2), procs("www", 1), Faults::default()),
    );
}

#[test]
fn semaphore_with_faults() {
    holds(
        "semaphore(1) 2x1, a lost link, an expiry, a give-up",
        config(Modelled::Semaphore(1), procs("ww", 1), faults(1, 1, 0, 1)),
    );
    holds(
        "semaphore(1) 2x2, a deleted node",
        config(Modelled::Semaphore(1), procs("ww", 2), faults(0, 0, 1, 0)),
    );
}

// The negative controls.

#[test]
fn seeded_no_relist_after_the_blockers_deletion_is_caught() {
    let mut c = config(Modelled::Mutex, procs("www", 1), faults(0, 0, 0, 1));
    c.seeded.no_relist = true;
    caught("seeded: no re-list", c, EXCLUSION);
}

#[test]
fn seeded_fast_path_without_the_two_ahead_check_is_caught() {
    let mut c = config(Modelled::Mutex, procs("www", 1), Faults::default());
    c.seeded.no_two_ahead = true;
    caught("seeded: no two-ahead check", c, EXCLUSION);
}

#[test]
fn seeded_next_node_always_taken_for_the_last_ahead_is_caught() {
    // Fourth in line, the next node's deletion (a waiter ahead gave up) taken to leave the
    // blocker last: when the blocker goes too, the fourth takes the lock beside the head.
    let mut c = config(Modelled::Mutex, procs("wwww", 1), faults(0, 0, 0, 2));
    c.seeded.next_always_last = true;
    caught("seeded: next always last", c, EXCLUSION);
}

#[test]
fn seeded_fast_path_without_the_two_ahead_check_breaks_the_fence() {
    let mut c = config(Modelled::Mutex, procs("www", 1), Faults::default());
    c.seeded.no_two_ahead = true;
    c.fenced_writes = true;
    caught("seeded: no two-ahead check, fenced", c, FENCE);
}

#[test]
fn seeded_release_that_drops_its_failed_delete_is_caught() {
    let mut c = config(Modelled::Mutex, procs("ww", 1), faults(1, 0, 0, 0));
    c.seeded.release_drops_failed_delete = true;
    caught(
        "seeded: release drops its failed delete",
        c.clone(),
        NOTHING_LEFT,
    );
    caught(
        "seeded: release drops its failed delete (liveness)",
        c,
        LIVENESS,
    );
}

#[test]
fn seeded_grant_blind_to_its_session_is_caught() {
    // The waiter's session declared lost while it waits: granted anyway, its guard is of a
    // session the client has given up.
    let mut c = config(Modelled::Mutex, procs("ww", 1), faults(1, 1, 0, 0));
    c.seeded.grant_blind_to_session = true;
    caught("seeded: grant blind to its session", c, HANDED_VALID);
}

#[test]
fn seeded_expiry_before_the_loss_clock_is_caught() {
    let mut c = config(Modelled::Mutex, procs("ww", 1), faults(1, 0, 0, 0));
    c.seeded.early_expiry = true;
    caught("seeded: early expiry", c, GONE_READS_INVALID);
}

#[test]
fn seeded_grant_that_ignores_the_own_node_watch_is_caught() {
    let mut c = config(Modelled::Mutex, procs("www", 1), faults(0, 0, 1, 0));
    c.seeded.ignore_own_watch = true;
    caught("seeded: own watch ignored", c, EXCLUSION);
}

#[test]
fn seeded_faults_break_the_rwlock_and_the_semaphore_too() {
    let mut c = config(Modelled::RwLock, procs("wwr", 1), Faults::default());
    c.seeded.no_two_ahead = true;
    caught("seeded: rwlock, no two-ahead check", c, READ_WRITE);
    let mut c = config(Modelled::Semaphore(1), procs("ww", 1), Faults::default());
    c.seeded.count_off_by_one = true;
    caught("seeded: semaphore, a count off by one", c.clone(), PERMITS);
    caught(
        "seeded: semaphore, a count off by one (participants)",
        c,
        PARTICIPANTS,
    );
}

#[test]
fn seeded_fast_path_never_taken_is_caught() {
    let mut c = config(Modelled::Mutex, procs("ww", 1), Faults::default());
    c.seeded.no_fast_path = true;
    caught("seeded: no fast path", c, FAST_PATH);
}
