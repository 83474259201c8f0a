//! The candidate's model checked: two bounds (every property must hold) and the seeded
//! faults (each must be caught, its trace printed).

use super::{Candidates, Faults, Seeded, LEADER_LIVENESS, NO_EVENT_AFTER_STOP, ONE_LEADER};
use crate::queue::check::{caught, holds};

fn candidates(n: usize, faults: Faults) -> Candidates {
    Candidates {
        n,
        faults,
        seeded: Seeded::default(),
    }
}

#[test]
fn three_candidates_resigning_and_stopping() {
    holds(
        "candidate 3, two resigns and a stop",
        &candidates(
            3,
            Faults {
                resigns: 2,
                stops: 1,
                ..Faults::default()
            },
        ),
    );
}

#[test]
fn two_candidates_with_every_fault() {
    holds(
        "candidate 2, a resign, a stop, a dropped link, a session loss, a deleted node",
        &candidates(
            2,
            Faults {
                resigns: 1,
                stops: 1,
                disconnects: 1,
                expiries: 1,
                tampers: 1,
            },
        ),
    );
}

#[test]
fn seeded_candidate_faults_are_caught() {
    let few = Faults {
        resigns: 1,
        stops: 1,
        ..Faults::default()
    };
    let mut m = candidates(2, Faults::default());
    m.seeded.lead_without_head = true;
    caught(
        "seeded: candidate leads without heading the queue",
        &m,
        ONE_LEADER,
    );
    let mut m = candidates(2, few);
    m.seeded.resign_keeps_node = true;
    caught("seeded: a resign keeps its node", &m, LEADER_LIVENESS);
    let mut m = candidates(
        1,
        Faults {
            tampers: 1,
            ..Faults::default()
        },
    );
    m.seeded.no_requeue_after_loss = true;
    caught("seeded: no re-queue after a loss", &m, LEADER_LIVENESS);
    let mut m = candidates(
        2,
        Faults {
            stops: 1,
            disconnects: 1,
            ..Faults::default()
        },
    );
    m.seeded.stop_leaves_phase = true;
    caught(
        "seeded: a stop that leaves the phase",
        &m,
        NO_EVENT_AFTER_STOP,
    );
}
