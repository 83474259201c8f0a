//! The library's `log` records captured in memory (a logger written here: no new
//! dependency), for the binaries that read them. A process has one logger: a binary that
//! captures calls [`capture`] before anything else could install one, and keeps its tests
//! from reading one another's records (one test, or records told apart by what they name).

use std::sync::{Mutex as StdMutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// One captured record.
#[derive(Debug, Clone)]
pub struct Rec {
    pub level: Level,
    pub target: String,
    pub msg: String,
}

/// Keeps every record of the library (the harness's own, under `zkguard::testing`, and
/// other crates' are left out), in order.
pub struct Capture(StdMutex<Vec<Rec>>);

impl Log for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn log(&self, r: &Record<'_>) {
        let target = r.target();
        if !target.starts_with("zkguard") || target.starts_with("zkguard::testing") {
            return;
        }
        self.0.lock().unwrap().push(Rec {
            level: r.level(),
            target: target.to_string(),
            msg: r.args().to_string(),
        });
    }

    fn flush(&self) {}
}

/// Installs the capturing logger (once per process) and returns it.
pub fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let c: &'static Capture = Box::leak(Box::new(Capture(StdMutex::new(Vec::new()))));
        log::set_logger(c).expect("the only logger of this test binary");
        log::set_max_level(LevelFilter::Trace);
        c
    })
}

/// Every record captured so far, in order.
pub fn records() -> Vec<Rec> {
    capture().0.lock().unwrap().clone()
}

/// The records whose message contains `needle`.
pub fn saying(recs: &[Rec], needle: &str) -> Vec<Rec> {
    recs.iter()
        .filter(|r| r.msg.contains(needle))
        .cloned()
        .collect()
}

/// The one level of the records saying `needle` (there must be some).
pub fn level_of(recs: &[Rec], needle: &str) -> Level {
    let found = saying(recs, needle);
    assert!(!found.is_empty(), "no record says {needle:?}: {recs:#?}");
    let level = found[0].level;
    assert!(
        found.iter().all(|r| r.level == level),
        "records saying {needle:?} at several levels: {found:#?}"
    );
    level
}
