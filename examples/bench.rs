//! Benchmark figures, one JSON line each (figures, not assertions).
//!
//! Against a throwaway standalone server from the harness (`forceSync=no`), or the ensemble
//! named by `ZK_CONNECT`. `BENCH_N` sets the samples per figure (default 2000).
//!
//! ```text
//! cargo run --release --example bench --features testing
//! ```
//!
//! Figures: the round trip (median and p99) of create, get_children, exists and delete, and
//! of a create + get_children pair sent back to back on the session (pipelined), next to the
//! same pair sent one after the other.

use std::time::{Duration, Instant};

use zkguard::testing::TestCluster;
use zkguard::{Client, CreateMode};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn report(figure: &str, target: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{{\"figure\":\"{figure}\",\"target\":\"{target}\",\"n\":{},\"p50_us\":{:.1},\"p99_us\":{:.1},\"mean_us\":{:.1}}}",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.iter().map(|d| d.as_secs_f64()).sum::<f64>() / samples.len() as f64 * 1e6
    );
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let cluster;
    let (connect, target) = match std::env::var("ZK_CONNECT") {
        Ok(cs) if !cs.is_empty() => {
            cluster = None;
            (cs, "ZK_CONNECT".to_string())
        }
        _ => {
            let c = TestCluster::start(1)?;
            let cs = c.connect_string();
            cluster = Some(c);
            (cs, "harness standalone, forceSync=no".to_string())
        }
    };
    let client = Client::connect(&connect)?;
    let dir = format!("/zkguard-bench-{}", std::process::id());
    client.create(&dir, b"", CreateMode::Persistent)?;

    // Warm up the JIT of the server and our code paths.
    for i in 0..200 {
        let p = format!("{dir}/warm-{i}");
        client.create(&p, b"", CreateMode::Ephemeral)?;
        client.exists(&p)?;
        client.delete(&p, None)?;
    }

    let (mut create, mut children, mut exists, mut delete) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let p = format!("{dir}/n-{i}");
        let (d, r) = timed(|| client.create(&p, b"payload", CreateMode::Ephemeral));
        r?;
        create.push(d);
        let (d, r) = timed(|| client.get_children(&dir));
        r?;
        children.push(d);
        let (d, r) = timed(|| client.exists(&p));
        r?;
        exists.push(d);
        let (d, r) = timed(|| client.delete(&p, None));
        r?;
        delete.push(d);
    }
    report("create", &target, create);
    report("get_children", &target, children);
    report("exists", &target, exists);
    report("delete", &target, delete);

    let (mut piped, mut serial) = (vec![], vec![]);
    for _ in 0..n {
        let (d, r) = timed(|| {
            let (c, l) = client.pipeline(|p| {
                (
                    p.create(&format!("{dir}/q-"), b"", CreateMode::EphemeralSequential),
                    p.get_children(&dir),
                )
            });
            c.wait().and_then(|c| l.wait().map(|_| c))
        });
        piped.push(d);
        client.delete(&r?.path, None)?;
        let (d, r) = timed(|| {
            let c = client.create(&format!("{dir}/q-"), b"", CreateMode::EphemeralSequential)?;
            client.get_children(&dir)?;
            Ok::<_, zkguard::Error>(c)
        });
        serial.push(d);
        client.delete(&r?.path, None)?;
    }
    report("create+get_children pipelined", &target, piped);
    report("create+get_children sequential", &target, serial);

    client.delete(&dir, None)?;
    client.close()?;
    drop(cluster);
    Ok(())
}
