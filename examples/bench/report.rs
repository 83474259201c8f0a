//! Output: one JSON line per figure, and the percentiles in it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::*;

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

pub(crate) fn report(figure: &str, target: &str, mut samples: Vec<Duration>) {
    let mean = samples.iter().map(|d| d.as_secs_f64()).sum::<f64>() / samples.len() as f64 * 1e6;
    Line::new(figure, target)
        .u("n", samples.len() as u64)
        .lat("", &mut samples)
        .f("mean_us", mean)
        .print();
}

pub(crate) fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

/// One JSON object, fields in insertion order (`serde_json` with `preserve_order`).
pub(crate) struct Line(serde_json::Map<String, serde_json::Value>);

impl Line {
    pub(crate) fn new(figure: &str, target: &str) -> Line {
        Line(serde_json::Map::new())
            .s("figure", figure)
            .s("target", target)
    }

    pub(crate) fn put(mut self, k: &str, v: serde_json::Value) -> Line {
        self.0.insert(k.to_string(), v);
        self
    }

    pub(crate) fn s(self, k: &str, v: &str) -> Line {
        self.put(k, v.into())
    }

    /// A float rounded to 3 decimals; NaN and infinities are `null`.
    pub(crate) fn f(self, k: &str, v: f64) -> Line {
        let v = if v.is_finite() {
            serde_json::Value::from((v * 1000.0).round() / 1000.0)
        } else {
            serde_json::Value::Null
        };
        self.put(k, v)
    }

    pub(crate) fn u(self, k: &str, v: u64) -> Line {
        self.put(k, v.into())
    }

    pub(crate) fn b(self, k: &str, v: bool) -> Line {
        self.put(k, v.into())
    }

    /// p50 and p99 in µs of `samples` (sorted here) under `prefix`.
    pub(crate) fn lat(self, prefix: &str, samples: &mut [Duration]) -> Line {
        samples.sort();
        self.f(&format!("{prefix}p50_us"), percentile(samples, 0.5))
            .f(&format!("{prefix}p99_us"), percentile(samples, 0.99))
    }

    /// p50, p90 and max in µs of `samples` (sorted here) under `prefix`.
    pub(crate) fn dist(self, prefix: &str, samples: &mut [Duration]) -> Line {
        samples.sort();
        self.f(&format!("{prefix}p50_us"), percentile(samples, 0.5))
            .f(&format!("{prefix}p90_us"), percentile(samples, 0.9))
            .f(&format!("{prefix}max_us"), percentile(samples, 1.0))
    }

    /// Printed; in a run through a delaying proxy (`BENCH_RTT`), every time in µs (a key
    /// ending `_us`) is also given in round trips (`…_rtt`: the time over the measured
    /// round trip of a bare request, `rtt_us`).
    pub(crate) fn print(self) {
        let mut line = self.0;
        if let Some(rtt) = rtt_us() {
            let in_rtt: Vec<(String, f64)> = line
                .iter()
                .filter_map(|(k, v)| {
                    let stem = k.strip_suffix("_us")?;
                    Some((format!("{stem}_rtt"), v.as_f64()? / rtt))
                })
                .collect();
            for (k, v) in in_rtt {
                line.insert(k, serde_json::Value::from((v * 100.0).round() / 100.0));
            }
            line.insert("rtt_us".into(), serde_json::Value::from(rtt.round()));
        }
        println!("{}", serde_json::Value::Object(line));
    }
}

/// The measured round trip of the run through a delaying proxy, in µs (bits of an `f64`;
/// 0: none).
static RTT_US: AtomicU64 = AtomicU64::new(0);

/// The round trip lines are expressed in from now on (`None`: not a proxied run).
pub(crate) fn set_rtt_us(rtt: Option<f64>) {
    RTT_US.store(
        rtt.filter(|r| *r > 0.0).map_or(0, f64::to_bits),
        Ordering::Relaxed,
    );
}

pub(crate) fn rtt_us() -> Option<f64> {
    let bits = RTT_US.load(Ordering::Relaxed);
    (bits != 0).then(|| f64::from_bits(bits))
}

pub(crate) fn p50(samples: &mut [Duration]) -> f64 {
    samples.sort();
    percentile(samples, 0.5)
}

/// The CPU time this process has used so far, user and system apart
/// (`getrusage(RUSAGE_SELF)`: every thread of the process, none of the servers, which run as
/// processes of their own).
///
/// Differences over a workload are the client's CPU: the library's threads and the bench's
/// own (its workers, the watchdog waiting, the in-run delete + watch sampler where a
/// workload runs one). The harness runs nothing in this process but a fault proxy, which
/// no workload here uses.
#[derive(Clone, Copy)]
pub(crate) struct Cpu {
    user: Duration,
    sys: Duration,
    /// Context switches: voluntary (a thread went to sleep: a wait, a blocking read) and
    /// involuntary (preempted), summed over the threads.
    switches: (u64, u64),
}

/// What a process used between two [`Cpu`] readings.
#[derive(Clone, Copy, Default)]
pub(crate) struct CpuUsed {
    pub(crate) user: Duration,
    pub(crate) sys: Duration,
    pub(crate) voluntary: u64,
    pub(crate) involuntary: u64,
}

impl std::ops::Add for CpuUsed {
    type Output = CpuUsed;
    fn add(self, o: CpuUsed) -> CpuUsed {
        CpuUsed {
            user: self.user + o.user,
            sys: self.sys + o.sys,
            voluntary: self.voluntary + o.voluntary,
            involuntary: self.involuntary + o.involuntary,
        }
    }
}

impl Cpu {
    pub(crate) fn now() -> Cpu {
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `usage` is valid for writes of one `rusage`, which getrusage fills; it is
        // read only after getrusage says it succeeded.
        #[allow(unsafe_code)]
        let got = unsafe {
            (libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) == 0)
                .then(|| usage.assume_init())
        };
        match got {
            Some(u) => Cpu {
                user: tv(u.ru_utime),
                sys: tv(u.ru_stime),
                switches: (u.ru_nvcsw.max(0) as u64, u.ru_nivcsw.max(0) as u64),
            },
            // Cannot fail with these arguments; zero makes the figures visibly absurd.
            None => Cpu {
                user: Duration::ZERO,
                sys: Duration::ZERO,
                switches: (0, 0),
            },
        }
    }

    /// What was used since `self`.
    pub(crate) fn since(self) -> CpuUsed {
        let now = Cpu::now();
        CpuUsed {
            user: now.user.saturating_sub(self.user),
            sys: now.sys.saturating_sub(self.sys),
            voluntary: now.switches.0.saturating_sub(self.switches.0),
            involuntary: now.switches.1.saturating_sub(self.switches.1),
        }
    }
}

impl Line {
    /// The client CPU used since `since`, in µs per one of `units` (`cpu_us_per_<unit>`,
    /// and its user and system parts), and the context switches per unit
    /// (`switches_per_<unit>`: voluntary, a thread going to sleep; `preempted_per_<unit>`:
    /// involuntary). The switches are the steadier figure on a loaded machine: the
    /// system time of each grows with the load, their number hardly.
    pub(crate) fn cpu(self, unit: &str, since: Cpu, units: usize) -> Line {
        self.cpu_used(unit, since.since(), units)
    }

    /// [`Line::cpu`] for a difference taken earlier.
    pub(crate) fn cpu_used(self, unit: &str, used: CpuUsed, units: usize) -> Line {
        let units = units.max(1) as f64;
        let per = |d: Duration| d.as_secs_f64() * 1e6 / units;
        self.f(&format!("cpu_us_per_{unit}"), per(used.user + used.sys))
            .f(&format!("cpu_user_us_per_{unit}"), per(used.user))
            .f(&format!("cpu_sys_us_per_{unit}"), per(used.sys))
            .f(
                &format!("switches_per_{unit}"),
                used.voluntary as f64 / units,
            )
            .f(
                &format!("preempted_per_{unit}"),
                used.involuntary as f64 / units,
            )
    }
}
