//! Output: one JSON line per figure, and the percentiles in it.

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

    pub(crate) fn print(self) {
        println!("{}", serde_json::Value::Object(self.0));
    }
}

pub(crate) fn p50(samples: &mut [Duration]) -> f64 {
    samples.sort();
    percentile(samples, 0.5)
}
