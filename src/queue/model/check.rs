//! A small explicit-state model checker: breadth-first over every reachable state, checking
//! safety properties in each, then one liveness property over the whole graph (from every
//! reachable state, a goal state can be reached by progress steps alone), with the shortest
//! counterexample printed as a trace.
//!
//! Why not `stateright`: its `eventually` properties are checked on the paths it explores
//! to their end, and say nothing of a waiter that a cycle keeps waiting forever; the
//! liveness asked of this model ("no waiter left waiting after its turn came, when faults
//! stop and holders release") is a reachability question on the whole graph, which this
//! checker answers exactly. It also adds no dependency to the crate.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fmt::{Debug, Write as _};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// A named safety property of a model.
pub(crate) type Property<M, S> = (&'static str, fn(&M, &S) -> bool);

/// What the checker explores.
pub(crate) trait Model {
    type State: Clone + Hash + Debug;
    type Action: Clone + Debug;

    fn init(&self) -> Vec<Self::State>;
    /// The actions enabled in `s`.
    fn actions(&self, s: &Self::State, out: &mut Vec<Self::Action>);
    /// The state an action leads to.
    fn next(&self, s: &Self::State, a: &Self::Action) -> Self::State;
    /// Whether `a` is a step a run keeps taking once faults stop: everything but the
    /// environment's faults (and the waiters' slow re-check tick).
    fn progress(&self, a: &Self::Action) -> bool;
    /// Safety properties: each must hold in every reachable state.
    fn properties(&self) -> Vec<Property<Self, Self::State>>;
    /// Situations the exploration must reach (else the bounds or the model cannot show what
    /// they claim to): each must hold in some reachable state.
    fn situations(&self) -> Vec<Property<Self, Self::State>>;
    /// The liveness goal: every reachable state must reach one by progress steps.
    fn goal(&self, s: &Self::State) -> bool;
    /// One line per process and the server, for traces.
    fn show(&self, s: &Self::State) -> String;
    /// The liveness property's name (what the goal means).
    fn liveness(&self) -> &'static str {
        LIVENESS
    }
}

/// A property that failed, with the shortest trace that shows it.
pub(crate) struct Counterexample {
    pub property: &'static str,
    pub trace: String,
}

/// What a run of the checker found.
pub(crate) struct Report {
    pub states: usize,
    pub edges: usize,
    pub depth: usize,
    pub elapsed: Duration,
    pub violations: Vec<Counterexample>,
    /// The situations no reachable state is in.
    pub unreached: Vec<&'static str>,
}

impl Report {
    pub(crate) fn found(&self, property: &str) -> Option<&Counterexample> {
        self.violations.iter().find(|c| c.property == property)
    }
}

fn fingerprint<S: Hash>(s: &S) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// Explores every state of `m` reachable from its initial states. With `stop_at`, stops at
/// the first violation of that safety property (the liveness check needs the whole graph:
/// it runs only on a complete exploration).
///
/// Only the states of the level being explored are kept whole; every state seen is kept as
/// its fingerprint, its parent and the action from it (a trace is replayed from an initial
/// state), and the progress edges for the liveness check.
pub(crate) fn check<M: Model>(m: &M, stop_at: Option<&str>) -> Report {
    let start = Instant::now();
    let props = m.properties();
    let situations = m.situations();
    let mut reached = vec![false; situations.len()];
    let inits = m.init();
    let mut seen: HashMap<u64, u32> = HashMap::new();
    // The parent of each state and the action from it (`None` for an initial state).
    let mut parent: Vec<Option<(u32, M::Action)>> = Vec::new();
    let mut goal: Vec<bool> = Vec::new();
    // Progress edges, reversed: (to, from).
    let mut back: Vec<(u32, u32)> = Vec::new();
    let mut edges = 0usize;
    let mut depth = 0usize;
    let mut violations: Vec<Counterexample> = Vec::new();
    let mut level: Vec<(u32, M::State)> = Vec::new();
    for s in &inits {
        if seen.insert(fingerprint(s), parent.len() as u32).is_none() {
            level.push((parent.len() as u32, s.clone()));
            parent.push(None);
            goal.push(m.goal(s));
        }
    }
    let mut actions = Vec::new();
    let mut stopped = false;
    'explore: while !level.is_empty() {
        let mut next_level = Vec::new();
        for (i, s) in &level {
            for (name, holds) in &props {
                if violations.iter().all(|c| c.property != *name) && !holds(m, s) {
                    violations.push(Counterexample {
                        property: name,
                        trace: trace(m, &inits, &parent, *i as usize, None),
                    });
                }
            }
            for (k, (_, seen)) in situations.iter().enumerate() {
                reached[k] = reached[k] || seen(m, s);
            }
            if stop_at.is_some_and(|p| violations.iter().any(|c| c.property == p)) {
                stopped = true;
                break 'explore;
            }
            actions.clear();
            m.actions(s, &mut actions);
            for a in &actions {
                let t = m.next(s, a);
                edges += 1;
                let f = fingerprint(&t);
                let j = match seen.get(&f) {
                    Some(&j) => j,
                    None => {
                        let j = parent.len() as u32;
                        seen.insert(f, j);
                        parent.push(Some((*i, a.clone())));
                        goal.push(m.goal(&t));
                        next_level.push((j, t));
                        j
                    }
                };
                if m.progress(a) {
                    back.push((j, *i));
                }
            }
        }
        if !next_level.is_empty() {
            depth += 1;
        }
        level = next_level;
    }
    if !stopped {
        if let Some(stuck) = unreachable_goal(&goal, &back) {
            violations.push(Counterexample {
                property: m.liveness(),
                trace: trace(m, &inits, &parent, stuck, Some(())),
            });
        }
    }
    Report {
        states: parent.len(),
        edges,
        depth,
        elapsed: start.elapsed(),
        violations,
        unreached: situations
            .iter()
            .zip(&reached)
            .filter(|(_, r)| !**r)
            .map(|((name, _), _)| *name)
            .collect(),
    }
}

/// The liveness property's name.
pub(crate) const LIVENESS: &str =
    "liveness: every waiter is granted once faults stop and holders release";

/// The first state (in exploration order, so one of the closest to an initial state) from
/// which no goal state can be reached by progress steps.
fn unreachable_goal(goal: &[bool], back: &[(u32, u32)]) -> Option<usize> {
    let n = goal.len();
    // Reverse adjacency in compressed form.
    let mut start = vec![0u32; n + 1];
    for &(to, _) in back {
        start[to as usize + 1] += 1;
    }
    for k in 0..n {
        start[k + 1] += start[k];
    }
    let mut fill = start.clone();
    let mut from = vec![0u32; back.len()];
    for &(to, f) in back {
        from[fill[to as usize] as usize] = f;
        fill[to as usize] += 1;
    }
    let mut good = goal.to_vec();
    let mut todo: Vec<usize> = (0..n).filter(|&k| goal[k]).collect();
    while let Some(k) = todo.pop() {
        for &f in &from[start[k] as usize..start[k + 1] as usize] {
            if !good[f as usize] {
                good[f as usize] = true;
                todo.push(f as usize);
            }
        }
    }
    good.iter().position(|g| !g)
}

/// The path from an initial state to state `to`, one step a line with the state after it
/// (replayed from the initial state). For a liveness failure, also the progress steps
/// enabled there.
fn trace<M: Model>(
    m: &M,
    inits: &[M::State],
    parent: &[Option<(u32, M::Action)>],
    to: usize,
    stuck: Option<()>,
) -> String {
    let mut steps = Vec::new();
    let mut k = to;
    while let Some((p, a)) = &parent[k] {
        steps.push(a.clone());
        k = *p as usize;
    }
    steps.reverse();
    // Initial states are numbered first, in order, when distinct.
    let mut s = inits[k.min(inits.len() - 1)].clone();
    let mut out = String::new();
    let _ = writeln!(out, "initial state:\n{}", m.show(&s));
    for (n, a) in steps.iter().enumerate() {
        s = m.next(&s, a);
        let _ = writeln!(out, "step {}: {a:?}\n{}", n + 1, m.show(&s));
    }
    if stuck.is_some() {
        let mut next = Vec::new();
        m.actions(&s, &mut next);
        next.retain(|a| m.progress(a));
        let _ = writeln!(
            out,
            "from here no run of progress steps reaches the goal; the progress steps enabled: {next:?}"
        );
    }
    out
}

/// Runs the checker on `m`, printing the states explored and the time taken.
pub(crate) fn run<M: Model>(name: &str, m: &M, stop_at: Option<&str>) -> Report {
    let r = check(m, stop_at);
    eprintln!(
        "model {name}: {} states, {} transitions, depth {}, {:.1?}",
        r.states, r.edges, r.depth, r.elapsed
    );
    r
}

/// Every property of `m` holds, and every situation is reached.
pub(crate) fn holds<M: Model>(name: &str, m: &M) {
    let r = run(name, m, None);
    if let Some(c) = r.violations.first() {
        panic!("{name}: {} fails:\n{}", c.property, c.trace);
    }
    assert!(
        r.unreached.is_empty(),
        "{name}: never reached: {:?}",
        r.unreached
    );
}

/// The seeded fault in `m` is caught by `property`; its trace is printed.
pub(crate) fn caught<M: Model>(name: &str, m: &M, property: &str) {
    let r = run(name, m, (property != m.liveness()).then_some(property));
    let Some(c) = r.found(property) else {
        let others: Vec<&str> = r.violations.iter().map(|c| c.property).collect();
        panic!("{name}: the seeded fault was not caught by {property:?} (found: {others:?})");
    };
    eprintln!("{name}: counterexample to {property:?}:\n{}", c.trace);
}
