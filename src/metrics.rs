//! What zkguard measures: the metric names, their labels and meaning, written once here
//! (docs/operations.md links here; a unit test checks this table against what the code
//! records: names, types, label keys and values, and the list of kinds below it).
//!
//! Two ways to read the same measurements:
//!
//! - **[`Client::stats`](crate::Client::stats)**, always: a pull snapshot of one client's
//!   counts and gauges ([`ClientStats`](crate::ClientStats)): of the table below, guards
//!   held, waiters queued, acquires by outcome, losses by reason, reconnects, watch re-arms,
//!   leadership (no histogram, no session state); and beside them counters of the client's
//!   own that the facade does not record (watch notifications, connection attempts,
//!   sessions, requests written).
//! - **The [`metrics`](https://docs.rs/metrics/0.24) facade**, with the cargo feature
//!   `metrics`: zkguard records, the application installs the exporter it likes
//!   (Prometheus, `StatsD`, …; `examples/metrics_prometheus.rs` serves `/metrics`). Without a
//!   recorder installed every call is a no-op; without the feature nothing is compiled in.
//!
//! Labels are bounded: `kind` (the recipe, below) always; the lock's path only when the
//! client was built with [`ClientBuilder::metrics_path_labels`](crate::ClientBuilder)
//! (feature `metrics`), so a daemon with 10,000 locks does not make 10,000 series by
//! default. The one exception is [`LEADING`], which says *which* election this process
//! leads and so is labeled by the election's path always (one series per election the
//! process takes part in).
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `zkguard_acquire_wait_seconds` | histogram | `kind`, `outcome`, (`path`) | how long an acquire call waited, from the call to its end; `outcome`: `acquired`, `busy` (a try found it taken), `timed_out`, `cancelled`, `failed` |
//! | `zkguard_acquires_total` | counter | `kind`, `outcome`, (`path`) | acquire calls ended, by `outcome` (`acquired`, `busy`, `timed_out`, `cancelled`, `failed`) |
//! | `zkguard_hold_seconds` | histogram | `kind`, (`path`) | how long a guard held: from the grant until released, dropped or lost |
//! | `zkguard_handoff_gap_seconds` | histogram | `kind`, (`path`) | from the moment a waiter heard the node ahead of it go to its grant (only when it waited on that node's deletion) |
//! | `zkguard_guards_held` | gauge | `kind`, (`path`) | guards granted and not yet released or lost |
//! | `zkguard_waiters_queued` | gauge | `kind`, (`path`) | acquires whose node is in a queue and not yet granted |
//! | `zkguard_losses_total` | counter | `kind`, `reason`, (`path`) | guards lost; `reason`: `session_lost` (expired, or a new session), `node_deleted` (deleted or replaced by someone else), `closed` (the client was closed while holding) |
//! | `zkguard_leadership_gained_total` | counter | `kind` | terms begun (elections: `election`, `election_unfair`) |
//! | `zkguard_leadership_lost_total` | counter | `kind`, `reason` | terms ended, by `reason`: a loss (`session_lost`, `node_deleted`, `closed`) or `released` (resigned, dropped) |
//! | `zkguard_leading` | gauge | `election` (the path) | how many of this process's participants lead that election now (0 or 1 unless several clients in one process take part) |
//! | `zkguard_session_state` | gauge | `state` | clients in each session state: `connecting`, `connected`, `suspended`, `lost` (closed clients leave the gauge) |
//! | `zkguard_session_transitions_total` | counter | `to` | session state changes, by the state entered: `connected`, `suspended`, `lost`, `closed` |
//! | `zkguard_reconnects_total` | counter | `session` | connections after a client's first: `resumed` (same session) or `new` (after a loss) |
//! | `zkguard_request_seconds` | histogram | `op` | from writing a request to its reply, by the name the request was made with (`create`, `delete`, `exists`, `get_data`, `set_data`, `get_acl`, `set_acl`, `sync`, `get_children`, `multi`, `who_am_i`, `get_config`, `reconfig`, `remove_watches`, `close`); the watches the connection thread re-arms by itself are `get_data` too |
//! | `zkguard_watch_rearms_total` | counter | none | watches re-armed on a resumed session after a reconnect (each SetWatches path) |
//!
//! The `kind` label is the recipe: `mutex`, `reentrant_mutex`, `read_lock`, `write_lock`,
//! `semaphore` (a permit: its wait covers the internal lock's queue, where its waiters
//! queue, and the lease count; the internal lock is no guard of its own), `unfair_mutex`,
//! `election`, `election_unfair`. A [`MultiLock`](crate::MultiLock) is measured per part
//! (each part's own kind).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// `zkguard_acquire_wait_seconds`: see the table in the [module doc](self).
pub const ACQUIRE_WAIT: &str = "zkguard_acquire_wait_seconds";
/// `zkguard_acquires_total`.
pub const ACQUIRES: &str = "zkguard_acquires_total";
/// `zkguard_hold_seconds`.
pub const HOLD: &str = "zkguard_hold_seconds";
/// `zkguard_handoff_gap_seconds`.
pub const HANDOFF_GAP: &str = "zkguard_handoff_gap_seconds";
/// `zkguard_guards_held`.
pub const GUARDS_HELD: &str = "zkguard_guards_held";
/// `zkguard_waiters_queued`.
pub const WAITERS_QUEUED: &str = "zkguard_waiters_queued";
/// `zkguard_losses_total`.
pub const LOSSES: &str = "zkguard_losses_total";
/// `zkguard_leadership_gained_total`.
pub const LEADERSHIP_GAINED: &str = "zkguard_leadership_gained_total";
/// `zkguard_leadership_lost_total`.
pub const LEADERSHIP_LOST: &str = "zkguard_leadership_lost_total";
/// `zkguard_leading`.
pub const LEADING: &str = "zkguard_leading";
/// `zkguard_session_state`.
pub const SESSION_STATE: &str = "zkguard_session_state";
/// `zkguard_session_transitions_total`.
pub const SESSION_TRANSITIONS: &str = "zkguard_session_transitions_total";
/// `zkguard_reconnects_total`.
pub const RECONNECTS: &str = "zkguard_reconnects_total";
/// `zkguard_request_seconds`.
pub const REQUEST: &str = "zkguard_request_seconds";
/// `zkguard_watch_rearms_total`.
pub const WATCH_REARMS: &str = "zkguard_watch_rearms_total";

/// How an acquire call ended (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    /// A try found it taken.
    Busy,
    TimedOut,
    Cancelled,
    Failed,
}

impl Outcome {
    #[cfg(feature = "metrics")]
    fn label(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Busy => "busy",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
            Outcome::Failed => "failed",
        }
    }
}

/// Why a guard was lost (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    SessionLost,
    NodeDeleted,
    Closed,
}

impl Loss {
    #[cfg(feature = "metrics")]
    fn label(self) -> &'static str {
        match self {
            Loss::SessionLost => "session_lost",
            Loss::NodeDeleted => "node_deleted",
            Loss::Closed => "closed",
        }
    }
}

/// What an acquire and the guard it makes are labeled with: the recipe's kind and (with
/// the feature) the lock's path, shown only if the client opted in.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    /// The recipe (the `kind` label: `queue::Kind::label`).
    #[cfg(feature = "metrics")]
    kind: &'static str,
    /// Whether a guard of the recipe is a term of leadership (an election).
    leads: bool,
    #[cfg(feature = "metrics")]
    path: std::sync::Arc<str>,
    #[cfg(feature = "metrics")]
    by_path: bool,
}

impl Labels {
    /// The labels of recipe `kind` (its label, and whether it leads) at `path`, for
    /// `meter`'s client.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn new(meter: &Meter, (kind, leads): (&'static str, bool), path: &str) -> Labels {
        Labels {
            #[cfg(feature = "metrics")]
            kind,
            leads,
            #[cfg(feature = "metrics")]
            path: path.into(),
            #[cfg(feature = "metrics")]
            by_path: meter.path_labels,
        }
    }

    /// `kind`, the extra labels, and `path` if the client opted in.
    #[cfg(feature = "metrics")]
    fn with(&self, extra: &[(&'static str, &'static str)]) -> Vec<::metrics::Label> {
        let mut v = Vec::with_capacity(extra.len() + 2);
        v.push(::metrics::Label::from_static_parts("kind", self.kind));
        v.extend(
            extra
                .iter()
                .map(|(k, x)| ::metrics::Label::from_static_parts(k, x)),
        );
        if self.by_path {
            v.push(::metrics::Label::new("path", self.path.to_string()));
        }
        v
    }
}

/// A gauge of the snapshot: up and down.
fn step(g: &AtomicU64, up: bool) {
    if up {
        g.fetch_add(1, Ordering::Relaxed);
    } else {
        // Never below zero (a decrement always follows its increment).
        let _ = g.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn read(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// One client's measurements: the pull snapshot's counts (always), and the calls into the
/// `metrics` facade (feature `metrics`). Every place that measures calls one method here.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    /// Whether the lock path is a label (`ClientBuilder::metrics_path_labels`).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    path_labels: bool,
    guards_held: AtomicU64,
    waiters_queued: AtomicU64,
    acquires: [AtomicU64; 5],
    losses: [AtomicU64; 3],
    reconnects: AtomicU64,
    rearms: AtomicU64,
    gained: AtomicU64,
    lost_leadership: AtomicU64,
}

/// The snapshot of a [`Meter`], for `ClientStats`.
pub(crate) struct Snapshot {
    pub guards_held: u64,
    pub waiters_queued: u64,
    /// By [`Outcome`], in its order.
    pub acquires: [u64; 5],
    /// By [`Loss`], in its order.
    pub losses: [u64; 3],
    pub reconnects: u64,
    pub rearms: u64,
    pub gained: u64,
    pub lost_leadership: u64,
}

impl Meter {
    pub(crate) fn new(path_labels: bool) -> Meter {
        Meter {
            path_labels,
            ..Meter::default()
        }
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot {
            guards_held: read(&self.guards_held),
            waiters_queued: read(&self.waiters_queued),
            acquires: self.acquires.each_ref().map(read),
            losses: self.losses.each_ref().map(read),
            reconnects: read(&self.reconnects),
            rearms: read(&self.rearms),
            gained: read(&self.gained),
            lost_leadership: read(&self.lost_leadership),
        }
    }

    /// A waiter's node joined a queue (`true`) or left it: granted, or given up.
    pub(crate) fn queued(&self, l: &Labels, up: bool) {
        step(&self.waiters_queued, up);
        #[cfg(feature = "metrics")]
        {
            let g = ::metrics::gauge!(WAITERS_QUEUED, l.with(&[]));
            if up {
                g.increment(1.0)
            } else {
                g.decrement(1.0)
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = l;
    }

    /// An acquire call ended so, after waiting `waited`.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn acquire_ended(&self, l: &Labels, outcome: Outcome, waited: Duration) {
        bump(&self.acquires[outcome as usize]);
        #[cfg(feature = "metrics")]
        {
            let labels = l.with(&[("outcome", outcome.label())]);
            ::metrics::histogram!(ACQUIRE_WAIT, labels.clone()).record(waited.as_secs_f64());
            ::metrics::counter!(ACQUIRES, labels).increment(1);
        }
    }

    /// A waiter was granted `gap` after it heard the node ahead of it go.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn handoff(&self, l: &Labels, gap: Duration) {
        #[cfg(feature = "metrics")]
        ::metrics::histogram!(HANDOFF_GAP, l.with(&[])).record(gap.as_secs_f64());
    }

    /// A guard began to hold (a term to lead, for an election).
    pub(crate) fn hold_began(&self, l: &Labels) {
        step(&self.guards_held, true);
        let election = l.leads;
        if election {
            bump(&self.gained);
        }
        #[cfg(feature = "metrics")]
        {
            ::metrics::gauge!(GUARDS_HELD, l.with(&[])).increment(1.0);
            if election {
                ::metrics::counter!(LEADERSHIP_GAINED, "kind" => l.kind).increment(1);
                ::metrics::gauge!(LEADING, "election" => l.path.to_string()).increment(1.0);
            }
        }
    }

    /// A guard stopped holding after `held`: released (`None`) or lost.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn hold_ended(&self, l: &Labels, held: Duration, loss: Option<Loss>) {
        step(&self.guards_held, false);
        if let Some(why) = loss {
            bump(&self.losses[why as usize]);
        }
        let election = l.leads;
        if election {
            bump(&self.lost_leadership);
        }
        #[cfg(feature = "metrics")]
        {
            ::metrics::gauge!(GUARDS_HELD, l.with(&[])).decrement(1.0);
            ::metrics::histogram!(HOLD, l.with(&[])).record(held.as_secs_f64());
            if let Some(why) = loss {
                ::metrics::counter!(LOSSES, l.with(&[("reason", why.label())])).increment(1);
            }
            if election {
                let reason = loss.map_or("released", Loss::label);
                ::metrics::counter!(LEADERSHIP_LOST, "kind" => l.kind, "reason" => reason)
                    .increment(1);
                ::metrics::gauge!(LEADING, "election" => l.path.to_string()).decrement(1.0);
            }
        }
    }

    /// The session went from state `from` (`None`: the client is new) to `to` (see
    /// [`SESSION_STATE`]).
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn session(&self, from: Option<&'static str>, to: &'static str) {
        #[cfg(feature = "metrics")]
        {
            if let Some(from) = from {
                ::metrics::gauge!(SESSION_STATE, "state" => from).decrement(1.0);
            }
            if to != "closed" {
                ::metrics::gauge!(SESSION_STATE, "state" => to).increment(1.0);
            }
            if from.is_some() {
                ::metrics::counter!(SESSION_TRANSITIONS, "to" => to).increment(1);
            }
        }
    }

    /// A connection after the first: to the same session (`resumed`) or a new one.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn reconnected(&self, resumed: bool) {
        bump(&self.reconnects);
        #[cfg(feature = "metrics")]
        ::metrics::counter!(RECONNECTS, "session" => if resumed { "resumed" } else { "new" })
            .increment(1);
    }

    /// `n` watches are re-armed on a resumed session.
    pub(crate) fn rearmed(&self, n: u64) {
        self.rearms.fetch_add(n, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        ::metrics::counter!(WATCH_REARMS).increment(n);
    }

    /// A request named `op` (the name its request was made with, `client::proto::Name`) was
    /// answered `took` after it was written.
    #[cfg(feature = "metrics")]
    pub(crate) fn request(&self, op: &'static str, took: Duration) {
        ::metrics::histogram!(REQUEST, "op" => op).record(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_counts_each_outcome_and_loss_and_gauges_never_go_below_zero() {
        let m = Meter::new(false);
        let l = Labels::new(&m, ("election", true), "/e");
        m.acquire_ended(&l, Outcome::Cancelled, Duration::ZERO);
        m.acquire_ended(&l, Outcome::Acquired, Duration::ZERO);
        m.hold_began(&l);
        assert_eq!(m.snapshot().guards_held, 1);
        m.hold_ended(&l, Duration::ZERO, Some(Loss::NodeDeleted));
        m.queued(&l, false); // a stray decrement stays at zero
        let s = m.snapshot();
        assert_eq!(s.acquires, [1, 0, 0, 1, 0]);
        assert_eq!(s.losses, [0, 1, 0]);
        assert_eq!((s.guards_held, s.waiters_queued), (0, 0));
        assert_eq!((s.gained, s.lost_leadership), (1, 1));
    }
}

/// The table of the module doc checked against what a [`Meter`] records (feature `metrics`):
/// every metric's name, type, label keys and label values, and the list of recipe kinds
/// below the table. docs/ links to that table rather than copying it, so it is the one.
#[cfg(all(test, feature = "metrics"))]
mod table {
    use super::*;
    use crate::client::proto::Name;
    use crate::queue::Kind;
    use metrics_util::debugging::DebuggingRecorder;
    use metrics_util::MetricKind;
    use std::collections::{BTreeMap, BTreeSet};

    /// Every metric recorded: its type and, by label key, the values it took.
    type Recorded = BTreeMap<String, (MetricKind, BTreeMap<String, BTreeSet<String>>)>;

    const OUTCOMES: [Outcome; 5] = [
        Outcome::Acquired,
        Outcome::Busy,
        Outcome::TimedOut,
        Outcome::Cancelled,
        Outcome::Failed,
    ];
    const LOSSES: [Loss; 3] = [Loss::SessionLost, Loss::NodeDeleted, Loss::Closed];
    /// Every recipe, as the queue names it; a new `Kind` fails to compile in `whole` below
    /// until it is listed here.
    const KINDS: [Kind; 8] = [
        Kind::Mutex,
        Kind::Reentrant,
        Kind::Read,
        Kind::Write,
        Kind::Semaphore(1),
        Kind::Unfair,
        Kind::Election,
        Kind::UnfairElection,
    ];
    /// The session's way through its states, as `client::conn::session` reports it.
    const SESSION: [&str; 5] = ["connecting", "connected", "suspended", "lost", "closed"];

    /// A new variant of any of these enums fails to compile here until the lists above (and
    /// `Name::ALL`) have it.
    #[allow(dead_code)]
    fn lists_are_whole(o: Outcome, l: Loss, k: Kind, n: Name) {
        match n {
            Name::Create
            | Name::Delete
            | Name::Exists
            | Name::GetData
            | Name::SetData
            | Name::GetAcl
            | Name::SetAcl
            | Name::GetChildren
            | Name::Sync
            | Name::Multi
            | Name::WhoAmI
            | Name::GetConfig
            | Name::Reconfig
            | Name::RemoveWatches
            | Name::Close => {}
        }
        match k {
            Kind::Mutex
            | Kind::Reentrant
            | Kind::Read
            | Kind::Write
            | Kind::Semaphore(_)
            | Kind::Unfair
            | Kind::Election
            | Kind::UnfairElection => {}
        }
        match o {
            Outcome::Acquired
            | Outcome::Busy
            | Outcome::TimedOut
            | Outcome::Cancelled
            | Outcome::Failed => {}
        }
        match l {
            Loss::SessionLost | Loss::NodeDeleted | Loss::Closed => {}
        }
    }

    /// Everything a client's [`Meter`] can record, each way, into a recorder of its own.
    fn recorded() -> Recorded {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        ::metrics::with_local_recorder(&recorder, || {
            let m = Meter::new(true);
            for k in KINDS {
                let l = Labels::new(&m, (k.label(), k.leads()), "/p");
                m.queued(&l, true);
                m.queued(&l, false);
                for o in OUTCOMES {
                    m.acquire_ended(&l, o, Duration::ZERO);
                }
                m.handoff(&l, Duration::ZERO);
                for loss in LOSSES.map(Some).into_iter().chain([None]) {
                    m.hold_began(&l);
                    m.hold_ended(&l, Duration::ZERO, loss);
                }
            }
            m.session(None, SESSION[0]);
            for w in SESSION.windows(2) {
                m.session(Some(w[0]), w[1]);
            }
            m.reconnected(true);
            m.reconnected(false);
            m.rearmed(1);
            // Every request's name (pings are no request with a reply waiter: `conn::serve`
            // writes and reads them itself, never recorded).
            for op in Name::ALL {
                m.request(op.as_str(), Duration::ZERO);
            }
        });
        let mut seen = Recorded::new();
        for (key, _, _, _) in snapshotter.snapshot().into_vec() {
            let (kind, key) = key.into_parts();
            let entry = seen
                .entry(key.name().to_string())
                .or_insert((kind, BTreeMap::new()));
            for label in key.labels() {
                entry
                    .1
                    .entry(label.key().to_string())
                    .or_default()
                    .insert(label.value().to_string());
            }
        }
        seen
    }

    /// The words in backticks of `text`.
    fn quoted(text: &str) -> BTreeSet<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    /// How `doc` (a module doc, as in this file) disagrees with `recorded`: one line each.
    fn disagreements(doc: &str, recorded: &Recorded) -> Vec<String> {
        let mut wrong = Vec::new();
        let prose: String = doc
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut rows = BTreeMap::new();
        for line in prose.lines().filter(|l| l.starts_with(" | `zkguard_")) {
            let cells: Vec<&str> = line.trim().trim_matches('|').split(" | ").collect();
            let [name, kind, labels, meaning] = cells[..] else {
                wrong.push(format!("a row that is not four cells: {line}"));
                continue;
            };
            let name = quoted(name).into_iter().next().unwrap_or_default();
            rows.insert(name, (kind.trim(), quoted(labels), quoted(meaning)));
        }
        let all_kinds: BTreeSet<String> = prose
            .split("The `kind` label is the recipe:")
            .nth(1)
            .and_then(|rest| rest.split(". ").next())
            .map(quoted)
            .unwrap_or_default();
        let mut kinds_seen = BTreeSet::new();
        for name in recorded.keys().filter(|n| !rows.contains_key(*n)) {
            wrong.push(format!("{name}: recorded, not in the table"));
        }
        for (name, (kind, labels, words)) in &rows {
            let Some((recorded_kind, values)) = recorded.get(name) else {
                wrong.push(format!("{name}: in the table, never recorded"));
                continue;
            };
            let kind_name = format!("{recorded_kind:?}").to_lowercase();
            if *kind != kind_name {
                wrong.push(format!(
                    "{name}: a {kind} in the table, a {kind_name} recorded"
                ));
            }
            let keys: BTreeSet<String> = values.keys().cloned().collect();
            if *labels != keys {
                wrong.push(format!(
                    "{name}: labels {labels:?} in the table, {keys:?} recorded"
                ));
            }
            // The meaning names each value of the labels it lists (a `kind`, a path excepted),
            // and nothing else in backticks but label keys.
            for (key, vals) in values {
                if key == "kind" {
                    kinds_seen.extend(vals.iter().cloned());
                }
                if matches!(key.as_str(), "kind" | "path" | "election") {
                    continue;
                }
                for v in vals.iter().filter(|v| !words.contains(*v)) {
                    wrong.push(format!("{name}: {key}={v} recorded, not in its meaning"));
                }
            }
            let known =
                |w: &String| values.contains_key(w) || values.values().any(|vals| vals.contains(w));
            for w in words.iter().filter(|w| !known(w)) {
                wrong.push(format!(
                    "{name}: `{w}` in its meaning, no label or value of it"
                ));
            }
        }
        if all_kinds != kinds_seen {
            wrong.push(format!(
                "the kinds listed: {all_kinds:?}, the kinds recorded: {kinds_seen:?}"
            ));
        }
        wrong
    }

    #[test]
    fn the_table_of_the_module_doc_is_what_a_meter_records() {
        let recorded = recorded();
        assert!(recorded.len() >= 15, "recorded only {recorded:?}");
        let wrong = disagreements(include_str!("metrics.rs"), &recorded);
        assert!(
            wrong.is_empty(),
            "the table disagrees:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn a_table_that_disagrees_is_told_how() {
        let recorded = recorded();
        let doc = include_str!("metrics.rs");
        let change = |from: &str, to: &str| {
            assert!(doc.contains(from), "{from}");
            disagreements(&doc.replacen(from, to, 1), &recorded)
        };
        let hold = "//! | `zkguard_hold_seconds` | histogram | `kind`, (`path`) |";
        let cases = [
            (hold, ""),
            (
                hold,
                "//! | `zkguard_hold_seconds` | gauge | `kind`, (`path`) |",
            ),
            (hold, "//! | `zkguard_hold_seconds` | histogram | `kind` |"),
            ("`timed_out`, ", ""),
            ("`released` (resigned", "`resigned` (resigned"),
            ("`read_lock`, ", ""),
        ];
        let expected = [
            "zkguard_hold_seconds: recorded, not in the table",
            "zkguard_hold_seconds: a gauge in the table, a histogram recorded",
            "zkguard_hold_seconds: labels {\"kind\"} in the table",
            "zkguard_acquire_wait_seconds: outcome=timed_out recorded, not in its meaning",
            "zkguard_leadership_lost_total: `resigned` in its meaning, no label or value of it",
            "the kinds listed:",
        ];
        for ((from, to), expected) in cases.into_iter().zip(expected) {
            let wrong = change(from, to);
            assert!(
                wrong.iter().any(|w| w.starts_with(expected)),
                "{from:?} -> {to:?}: {wrong:?}"
            );
        }
    }
}
