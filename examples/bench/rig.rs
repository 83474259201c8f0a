//! Threads, the watchdog, process figures, and running workers together.

use crate::*;

// ---------------------------------------------------------------------------------------
// Threads, watchdog, process figures
// ---------------------------------------------------------------------------------------

/// Threads this program started that are still running.
pub(crate) static BENCH_THREADS: AtomicUsize = AtomicUsize::new(0);

pub(crate) struct ThreadCount;

impl Drop for ThreadCount {
    fn drop(&mut self) {
        BENCH_THREADS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Spawns a counted thread (small stack: the workers only wait and keep a few buffers).
pub(crate) fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> Res<JoinHandle<T>> {
    BENCH_THREADS.fetch_add(1, Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name(name)
        .stack_size(256 * 1024)
        .spawn(move || {
            let _count = ThreadCount;
            f()
        });
    spawned.map_err(|e| {
        BENCH_THREADS.fetch_sub(1, Ordering::SeqCst);
        format!("cannot spawn a thread: {e}").into()
    })
}

/// Joins every handle; the first error (or panic) wins.
pub(crate) fn join_all<T>(handles: Vec<JoinHandle<Res<T>>>) -> Res<Vec<T>> {
    let mut out = Vec::with_capacity(handles.len());
    let mut first_err: Option<BoxError> = None;
    for h in handles {
        match h.join() {
            Ok(Ok(v)) => out.push(v),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert_with(|| "a worker thread panicked".into());
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Ends the process loudly if a workload outlives its budget.
pub(crate) struct Watchdog {
    pub(crate) tx: Sender<Option<(String, Instant)>>,
}

pub(crate) struct Armed<'a>(&'a Watchdog);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        let _ = self.0.tx.send(None);
    }
}

impl Watchdog {
    pub(crate) fn start(target: String) -> Res<Watchdog> {
        let (tx, rx) = crossbeam_channel::unbounded::<Option<(String, Instant)>>();
        spawn("bench-watchdog".into(), move || {
            let mut armed: Option<(String, Instant)> = None;
            loop {
                let msg = match &armed {
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    Some((_, deadline)) => rx.recv_deadline(*deadline),
                };
                match msg {
                    Ok(m) => armed = m,
                    Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => {
                        let name = armed.map(|(n, _)| n).unwrap_or_default();
                        Line::new(&name, &target)
                            .s("error", "timed out: the workload outlived its budget")
                            .print();
                        eprintln!("bench: workload {name} timed out; exiting");
                        std::process::exit(2);
                    }
                }
            }
        })?;
        Ok(Watchdog { tx })
    }

    pub(crate) fn arm(&self, name: &str, budget: Duration) -> Armed<'_> {
        let _ = self
            .tx
            .send(Some((name.to_string(), Instant::now() + budget)));
        Armed(self)
    }
}

/// A field of `/proc/self/status` (the number before any unit).
pub(crate) fn proc_status(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub(crate) fn close_all(clients: &[Client]) {
    for c in clients {
        c.close();
    }
}

/// Runs one thread per step function, all started together once every thread exists:
/// each calls its step until `stop` is set; a step that fails sets `stop` for everyone, and
/// the first error is returned. `Ok`: the instant they were started.
pub(crate) fn run_workers<F>(name: &str, steps: Vec<F>, stop: &Arc<AtomicBool>) -> Res<Instant>
where
    F: FnMut() -> Res<()> + Send + 'static,
{
    let (start_tx, start_rx) = crossbeam_channel::bounded::<()>(0);
    let mut handles = Vec::new();
    for (i, mut step) in steps.into_iter().enumerate() {
        let (stop_w, start_rx) = (stop.clone(), start_rx.clone());
        let h = spawn(format!("bench-{name}-{i}"), move || -> Res<()> {
            // Everyone starts when the sender is dropped.
            let _ = start_rx.recv();
            let r = (|| -> Res<()> {
                while !stop_w.load(Ordering::SeqCst) {
                    step()?;
                }
                Ok(())
            })();
            if r.is_err() {
                stop_w.store(true, Ordering::SeqCst);
            }
            r
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                drop(start_tx);
                let _ = join_all(handles);
                return Err(e);
            }
        }
    }
    drop(start_tx);
    let start = Instant::now();
    join_all(handles).map(|_| start)
}

/// Counts one acquisition; the one that reaches `total` stops everyone.
pub(crate) fn count(
    acquired: &AtomicUsize,
    total: usize,
    stop: &AtomicBool,
    done_at: &PlMutex<Option<Instant>>,
) {
    if acquired.fetch_add(1, Ordering::SeqCst) + 1 == total {
        *done_at.lock() = Some(Instant::now());
        stop.store(true, Ordering::SeqCst);
    }
}
