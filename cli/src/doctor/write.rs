//! `doctor`'s write probe, for servers that say little of themselves (ZooKeeper 3.10's
//! defaults: the admin server off, `srvr` the only four-letter word): what the client
//! protocol itself shows of the write path. A create and a delete of an ephemeral scratch
//! node, each timed: every lock's acquire and handoff is such a quorum write. Run only when
//! no server's `mntr` figures (request latency, fsync times) could be read.

use std::time::{Duration, Instant};

use zkguard::{Client, CreateMode, Error};

use super::limits::MAX_LATENCY_MS;
use super::report::{Check, Finding, Numbers, Status};

/// What to set on the servers for the figures this probe stands in for.
const SEE_MORE: &str = "for the servers' own request latency and fsync figures, add mntr to \
    4lw.commands.whitelist (zoo.cfg: 4lw.commands.whitelist=srvr,conf,mntr,envi,ruok) or turn \
    the AdminServer on (admin.enableServer=true; doctor --admin-port PORT)";

/// Creates and deletes `{parent}/zkguard-doctor-PID-N-write` (`parent` "" for the root),
/// timing each; the findings say how long, or why it could not.
pub fn probe(client: &Client, parent: &str, out: &mut Vec<Finding>) {
    let node = format!(
        "{parent}/zkguard-doctor-{}-{}-write",
        std::process::id(),
        super::path::nanos()
    );
    let timed = |f: &dyn Fn() -> zkguard::Result<()>| -> zkguard::Result<Duration> {
        let t = Instant::now();
        f()?;
        Ok(t.elapsed())
    };
    let created = timed(&|| client.create(&node, b"", CreateMode::Ephemeral).map(drop));
    let result = created.and_then(|c| Ok((c, timed(&|| client.delete(&node, None))?)));
    match result {
        Ok((c, d)) => {
            let (c, d) = (ms(c), ms(d));
            out.push(
                Finding::new(
                    Check::WriteProbe,
                    Status::Pass,
                    format!("a create and a delete of {node} (a quorum write each, as every acquire and handoff is) took {c:.1} ms and {d:.1} ms; {SEE_MORE}"),
                )
                .numbers(Numbers::WriteProbe { create_ms: c, delete_ms: d })
                .about(&node),
            );
            if c.max(d) > MAX_LATENCY_MS {
                out.push(
                    Finding::new(Check::Latency, Status::Warn, format!("a write through the client protocol took {:.1} ms (over {MAX_LATENCY_MS} ms)", c.max(d)))
                        .fix("a stall of this length counts against every session's timeout: look at the servers' load, GC pauses and fsync")
                        .about(&node),
                );
            }
        }
        Err(e) => {
            let fix = match e {
                Error::NoAuth { .. } => format!("the ACL of {} refuses this identity: give --path a lock whose parent it may create in", if parent.is_empty() { "/" } else { parent }),
                _ => SEE_MORE.to_string(),
            };
            out.push(
                Finding::new(
                    Check::WriteProbe,
                    Status::Note,
                    format!("the write path was not measured: a create and delete of {node}: {e}"),
                )
                .fix(fix)
                .about(&node),
            );
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
