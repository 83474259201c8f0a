//! The safety properties, each checked in every reachable state.

use super::state::{Phase, State};
use super::{Queue, Recipe};

type Property = super::check::Property<Queue, State>;

pub(super) const EXCLUSION: &str = "mutual exclusion: at most one valid holder";
pub(super) const READ_WRITE: &str = "a valid writer holds alone (readers and writers excluded)";
pub(super) const PERMITS: &str = "no more valid permits than the semaphore has";
pub(super) const GONE_READS_INVALID: &str =
    "a holder whose node is gone already reads invalid (unless another party deleted it)";
pub(super) const FENCE: &str = "fencing tokens the server accepts never go down";
pub(super) const NOTHING_LEFT: &str =
    "nothing left behind: a process not acquiring or holding, with no background delete \
     pending, has no node in its live session";

pub(super) fn all() -> Vec<Property> {
    vec![
        (EXCLUSION, exclusion),
        (READ_WRITE, read_write),
        (PERMITS, permits),
        (GONE_READS_INVALID, gone_reads_invalid),
        (FENCE, |_, s| !s.fence_broken),
        (NOTHING_LEFT, nothing_left),
    ]
}

/// The valid guards (process, read) whose node was not deleted by another party.
fn holders(m: &Queue, s: &State) -> Vec<(usize, bool)> {
    s.procs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let g = p.guard?;
            (g.is_valid(p) && !s.tampered.contains(&g.seq)).then_some((i, m.config.procs[i].read))
        })
        .collect()
}

fn exclusion(m: &Queue, s: &State) -> bool {
    !matches!(m.config.recipe, Recipe::Mutex | Recipe::Election) || holders(m, s).len() <= 1
}

fn read_write(m: &Queue, s: &State) -> bool {
    if m.config.recipe != Recipe::RwLock {
        return true;
    }
    let h = holders(m, s);
    h.iter().all(|(_, read)| *read) || h.len() <= 1
}

fn permits(m: &Queue, s: &State) -> bool {
    match m.config.recipe {
        Recipe::Semaphore(n) => holders(m, s).len() <= n as usize,
        _ => true,
    }
}

fn gone_reads_invalid(_: &Queue, s: &State) -> bool {
    s.procs.iter().all(|p| {
        [p.guard, p.internal]
            .into_iter()
            .flatten()
            .all(|g| !g.is_valid(p) || s.node(g.seq).is_some() || s.tampered.contains(&g.seq))
    })
}

fn nothing_left(_: &Queue, s: &State) -> bool {
    s.procs.iter().all(|p| {
        !matches!(p.phase, Phase::Idle)
            || !p.janitor.is_empty()
            || s.session_ended(p.sid)
            || s.server.nodes.iter().all(|n| n.owner != p.sid)
    })
}
