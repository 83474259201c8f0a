//! `zkguard doctor`: checks what the safety argument (docs/semantics.md) assumes of an
//! ensemble, with the numbers, as a lock user connects (the same connection, TLS and SASL
//! options).
//!
//! Per server (`server.rs`): reachable, version, mode, round trips, configuration and
//! figures from the four-letter words or the admin server. For the session: the granted
//! timeout against the asked one and against `syncLimit × tickTime`, and `whoami`. With
//! `--path` (`path.rs`): the ACLs from the root down to the lock, holders and waiters, a
//! contention probe. Each release's known data-loss bugs and CVEs (`version.rs`); where no
//! server's `mntr` figures could be read (ZooKeeper 3.10's defaults), a timed write
//! through the client protocol (`write.rs`). Each finding is pass, warn or fail; the exit status is the worst.
//! The report is typed (`report.rs`); `--json` is it serialized.

mod ensemble;
mod human;
mod limits;
mod path;
mod report;
mod server;
mod version;
mod write;

use std::time::{Duration, Instant};

use zkguard::channel::Receiver;
use zkguard::{Acl, Client, ConnectString, NodeAcl, Perms, SessionEvent};

use crate::args::{check_path, DoctorArgs};
use crate::conn::Connection;
use crate::fail::{Fail, EXIT_NOPERM, EXIT_SOFTWARE, EXIT_USAGE};
use crate::say::{json_line, Say};
use limits::{AVG_FSYNC_MS, AVG_LATENCY_MS, MAX_FSYNC_MS, MAX_LATENCY_MS};
use report::{Check, Finding, Numbers, Status};
use report::{PathReport, Report, SessionReport};
use server::Server;

/// `doctor`'s exit status table, shown by `zkguard doctor --help`.
pub const EXIT_CODES: &str = "\
Exit status:
  0   every check passed
  1   a warning: a finding to look at (an open ACL, a clamped session timeout, figures
      that could not be read, high latency or slow fsyncs, a release with a known CVE)
  3   a check failed: a server unreachable, the session timeout not above
      syncLimit × tickTime, a login the server does not see, the contention probe, a
      release with a known data-loss bug
  2   bad input (a path, an option, credentials)
  69  no session could be made with ZooKeeper (the servers' findings are still shown)
  77  ZooKeeper refused the credentials";

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// `zkguard doctor`.
pub fn run(conn: &Connection, args: &DoctorArgs, say: Say) -> Result<i32, Fail> {
    if let Some(p) = &args.path {
        check_path(p)?;
    }
    // The client's own parse: a bad connect string is bad input before anything is asked.
    let cs = ConnectString::parse(&conn.connect)
        .map_err(|e| Fail::new(EXIT_USAGE, format!("--connect: {e}")))?;
    let quiet = Say { quiet: true };
    let mut findings = Vec::new();
    let mut servers: Vec<Server> = (cs.hosts().iter())
        .map(|a| Server::probe(a, args.admin_port))
        .collect();
    for s in &mut servers {
        round_trips(conn, s, quiet);
        server_findings(s, &mut findings);
        findings.extend(version::finding(s));
        findings.extend(version::known_issues(s));
    }
    // The session a lock user gets: through the whole connect string, with every option.
    // Without one the servers' findings are still reported, with the session's failure.
    let (session, path, code) = match conn.connect(say) {
        Ok(client) => {
            let (session, path) = with_session(conn, args, &cs, &client, &servers, &mut findings);
            client.close();
            (Some(session), path, None)
        }
        Err(f) => {
            let fix = match f.code {
                EXIT_NOPERM => "check the credentials (the server's log says why it refused them)",
                _ => "check the connect string, and that a quorum of the ensemble is up",
            };
            findings.push(Finding::new(Check::Session, Status::Fail, f.msg).fix(fix));
            (None, None, Some(f.code))
        }
    };
    let worst = findings
        .iter()
        .map(|f| f.status)
        .max()
        .unwrap_or(Status::Pass);
    let report = Report {
        connect: &conn.connect,
        status: worst,
        exit: code.unwrap_or(worst.code()),
        servers: servers.iter().map(Server::report).collect(),
        session,
        path,
        findings,
    };
    if args.json {
        let v = serde_json::to_value(&report)
            .map_err(|e| Fail::new(EXIT_SOFTWARE, format!("doctor's report: {e}")))?;
        println!("{}", json_line(&v));
    } else {
        human::print(&report);
    }
    Ok(report.exit)
}

/// What needs the session: its checks, and with `--path` the path's.
fn with_session(
    conn: &Connection,
    args: &DoctorArgs,
    cs: &ConnectString,
    client: &Client,
    servers: &[Server],
    findings: &mut Vec<Finding>,
) -> (SessionReport, Option<PathReport>) {
    let (session, identities) = session_findings(conn, client, servers, findings);
    ensemble::findings(client, cs.hosts(), cs.chroot(), findings);
    // No server said how fast it writes: the client protocol's own measure.
    if servers.iter().all(|s| s.mntr.is_empty()) {
        let parent = args.path.as_deref().map_or("", path::parent);
        write::probe(client, parent, findings);
    }
    let path = args.path.as_deref().map(|p| {
        let ours = path::learn_ours(client, p, findings).unwrap_or_else(|| {
            (identities.iter())
                .map(|i| Acl::new(Perms::ALL, i.scheme.clone(), i.id.clone()))
                .collect()
        });
        PathReport {
            path: p.to_string(),
            acl: path::acls(client, p, &ours, findings),
            holders: path::holders(client, p, findings),
            probe: match args.probe_rounds {
                0 => None,
                n => Some(path::probe(conn, p, n, findings)),
            },
        }
    });
    (session, path)
}

/// A few round trips of a session to `s` alone (requests a server answers itself).
fn round_trips(conn: &Connection, s: &mut Server, quiet: Say) {
    if !s.reachable || s.unreadable.is_some() {
        return;
    }
    match conn.connect_to(&s.address, quiet) {
        Ok(c) => {
            for _ in 0..5 {
                let t = Instant::now();
                if c.exists("/").is_err() {
                    break;
                }
                s.rtt_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            c.close();
        }
        Err(f) => s.error = Some(format!("no session with this server alone: {}", f.msg)),
    }
}

/// Reachability, what could not be read, latency and fsync figures of one server.
fn server_findings(s: &Server, out: &mut Vec<Finding>) {
    let a = s.address.as_str();
    if !s.reachable {
        out.push(
            Finding::new(
                Check::Reachable,
                Status::Fail,
                format!("{a}: {}", s.error.as_deref().unwrap_or("unreachable")),
            )
            .fix("start it, or fix the connect string: every listed server should be up")
            .about(a),
        );
        return;
    }
    if let Some(e) = &s.error {
        out.push(Finding::new(Check::Reachable, Status::Fail, format!("{a}: {e}")).about(a));
    }
    if let Some(e) = &s.unreadable {
        out.push(
            Finding::new(Check::Readable, Status::Fail, format!("{a}: unreadable: {e}"))
                .fix("check that every address of the connect string is a ZooKeeper server's client port (or its AdminServer's port is --admin-port)")
                .about(a),
        );
        return;
    }
    let unread = s.unread();
    if !unread.is_empty() {
        let words: Vec<&str> = unread.iter().map(|(w, _)| *w).collect();
        let why: Vec<String> = unread.iter().map(|(w, e)| format!("{w}: {e}")).collect();
        out.push(
            Finding::new(
                Check::ConfigReadable,
                Status::Warn,
                format!("{a}: could not read {} ({})", words.join(", "), why.join("; ")),
            )
            .fix(
                "add them to the servers' 4lw.commands.whitelist (zoo.cfg: 4lw.commands.whitelist=srvr,conf,mntr,envi,ruok; since 3.5.3 only srvr is on by default), or enable the AdminServer (admin.enableServer=true, port 8080; doctor --admin-port PORT)"
            )
            .about(a),
        );
    }
    if let Some(avg) = s.mntr_f64("avg_latency").filter(|v| *v > AVG_LATENCY_MS) {
        out.push(
            Finding::new(Check::Latency, Status::Warn, format!("{a}: average request latency {avg} ms (over {AVG_LATENCY_MS} ms): every acquire and handoff waits on it"))
                .fix("look at the server's load (mntr outstanding_requests), its disk and its GC")
                .about(a),
        );
    }
    if let Some(max) = s.mntr_f64("max_latency").filter(|v| *v > MAX_LATENCY_MS) {
        out.push(
            Finding::new(Check::Latency, Status::Warn, format!("{a}: largest request latency {max} ms (over {MAX_LATENCY_MS} ms)"))
                .fix("a stall of this length counts against every session's timeout: look at GC pauses and fsync")
                .about(a),
        );
    }
    let fsync = (s.mntr_f64("avg_fsynctime"), s.mntr_f64("max_fsynctime"));
    if let (Some(avg), Some(max)) = fsync {
        if avg > AVG_FSYNC_MS || max > MAX_FSYNC_MS {
            out.push(
                Finding::new(Check::Fsync, Status::Warn, format!("{a}: fsync of the transaction log takes {avg} ms on average, {max} ms at most (flagged over {AVG_FSYNC_MS} ms on average or {MAX_FSYNC_MS} ms at most): every write waits for it, every lock's handoff too"))
                    .fix("give the transaction log a dedicated, fast disk (dataLogDir)")
                    .about(a),
            );
        }
    }
    if let Some(n) = s
        .mntr_f64("fsync_threshold_exceed_count")
        .filter(|n| *n > 0.0)
    {
        out.push(
            Finding::new(Check::Fsync, Status::Warn, format!("{a}: {n} fsyncs of the transaction log took longer than fsync.warningthresholdms (1 s by default): a slow disk stretches every write, every lock's handoff"))
                .fix("give the transaction log a dedicated, fast disk (dataLogDir)")
                .about(a),
        );
    }
}

/// The session's timeouts against the servers' bounds and `syncLimit × tickTime`, and
/// whoami.
/// A server older than 3.7 answers `whoAmI` with "unimplemented" and then closes the
/// connection (seen on 3.6.3: the session survives, the client resumes it on a new
/// connection). The checks after it need the session, so wait for that: for the close (up to
/// a second; a server that keeps the connection open is not waited for again) and then for
/// the resumed session (up to the session timeout). Without this the next request of the
/// doctor failed with a connection loss (5 runs of 8 of `doctor_versions` on 3.6.3).
fn await_reconnect_after_unimplemented(client: &Client, events: &Receiver<SessionEvent>) {
    let suspended = |e: &SessionEvent| matches!(e, SessionEvent::Suspended { .. });
    let back = |e: &SessionEvent| {
        matches!(
            e,
            SessionEvent::Reconnected { .. } | SessionEvent::Connected { .. }
        )
    };
    let wait_for = |pred: &dyn Fn(&SessionEvent) -> bool, within: Duration| {
        let deadline = Instant::now() + within;
        while let Ok(e) = events.recv_deadline(deadline) {
            if pred(&e) {
                return true;
            }
        }
        false
    };
    if wait_for(&suspended, Duration::from_secs(1)) {
        wait_for(&back, client.session_timeout());
    }
}

/// The session's findings; its report and the identities `whoami` named.
fn session_findings(
    conn: &Connection,
    client: &Client,
    servers: &[Server],
    out: &mut Vec<Finding>,
) -> (SessionReport, Vec<zkguard::Identity>) {
    let (asked, granted) = (ms(conn.session_timeout), ms(client.session_timeout()));
    let conf = |key: &'static str| servers.iter().filter_map(move |s| s.conf_u64(key));
    // The server that keeps serving longest when cut off (the largest syncLimit × tickTime)
    // is the one the condition is judged by; the timeouts every server grants are between
    // the largest minimum and the smallest maximum.
    let widest = servers
        .iter()
        .filter_map(|s| Some((s.conf_u64("tickTime")?, s.conf_u64("syncLimit")?)))
        .max_by_key(|(t, s)| t * s);
    let tick = widest.map(|w| w.0).or_else(|| conf("tickTime").max());
    let (sync, init) = (widest.map(|w| w.1), conf("initLimit").max());
    let (min, max) = (
        conf("minSessionTimeout").max(),
        conf("maxSessionTimeout").min(),
    );
    // An ensemble: several servers listed, or one in a quorum mode; standalone: every
    // mode read says so; else what /zookeeper/config says (unknown when it cannot tell).
    let quorum_mode =
        |s: &Server| matches!(s.mode.as_deref(), Some("leader" | "follower" | "observer"));
    let ensemble = if servers.len() > 1 || servers.iter().any(quorum_mode) {
        Some(true)
    } else if servers
        .iter()
        .all(|s| s.mode.as_deref() == Some("standalone"))
    {
        Some(false)
    } else {
        // No mode read (no srvr, no AdminServer): the client protocol's configuration.
        ensemble::is_ensemble(client)
    };
    if asked != granted {
        let bounds = match (min, max) {
            (Some(lo), Some(hi)) => format!(" (the servers grant {lo} ms to {hi} ms)"),
            _ => String::new(),
        };
        out.push(
            Finding::new(Check::SessionTimeout, Status::Warn, format!("asked for a {asked} ms session, the server granted {granted} ms{bounds}"))
                .fix("ask within minSessionTimeout..maxSessionTimeout (--session-timeout), or change those bounds in zoo.cfg")
                .numbers(Numbers::SessionTimeout { asked_ms: asked, granted_ms: granted, min_ms: min, max_ms: max }),
        );
    }
    let condition = sync_window(granted, tick, sync, max, ensemble);
    out.push(condition.numbers(Numbers::SyncWindow {
        session_timeout_ms: granted,
        tick_time_ms: tick,
        sync_limit: sync,
        sync_window_ms: tick.zip(sync).map(|(t, s)| t * s),
        ensemble,
    }));
    out.push(Finding::new(Check::DeadHolder, Status::Note, format!("with this {granted} ms session timeout, a holder that dies (zkguard killed, its host gone) keeps the lock for up to {granted} ms, until its session expires; a frozen zkguard's watchdog stops (--on-suspend kill: terminates) its command within {} ms; `zkguard break` frees it after waiting out that bound plus 2 s (`--now`: at once)", granted / 3))
        .numbers(Numbers::DeadHolder { session_timeout_ms: granted, watchdog_ms: granted / 3 }));
    let events = client.events();
    let identities = match client.who_am_i() {
        Ok(ids) => ids,
        Err(e) => {
            let too_old = version::too_old_for_whoami(&e);
            if too_old.is_some() {
                await_reconnect_after_unimplemented(client, &events);
            }
            out.push(too_old.unwrap_or_else(|| {
                Finding::new(Check::Whoami, Status::Warn, format!("whoami failed ({e})"))
            }));
            Vec::new()
        }
    };
    let logins: Vec<String> = identities
        .iter()
        .filter(|i| !NodeAcl::unauthenticated(&i.scheme))
        .map(ToString::to_string)
        .collect();
    let names: Vec<String> = identities.iter().map(ToString::to_string).collect();
    if let (Some(given), true) = (
        conn.credentials_given(),
        logins.is_empty() && !identities.is_empty(),
    ) {
        out.push(
            Finding::new(Check::Whoami, Status::Fail, format!("credentials given ({given}), but the server sees only {}", names.join(", ")))
                .fix("check the server's authProvider settings and the login (its logs say why it was not accepted)"),
        );
    } else if !identities.is_empty() {
        out.push(Finding::new(
            Check::Whoami,
            Status::Pass,
            format!("the server sees this session as {}", names.join(", ")),
        ));
    }
    let report = SessionReport {
        session_id: format!("0x{:x}", client.session_id()),
        requested_timeout_ms: asked,
        negotiated_timeout_ms: granted,
        identities: names,
        tick_time_ms: tick,
        sync_limit: sync,
        init_limit: init,
        min_session_timeout_ms: min,
        max_session_timeout_ms: max,
    };
    (report, identities)
}

/// The session timeout `granted` judged against `syncLimit × tickTime` (ms), with `max`
/// the servers' `maxSessionTimeout`. A follower cut off from the quorum goes on answering
/// its sessions for up to `syncLimit × tickTime`, while the ensemble may expire one once its
/// timeout has passed and give its lock to another: only a timeout well above that window
/// lets `zkguard lock` stop its command (as `--on-suspend` says) before another holds
/// (docs/semantics.md, "When local detection is enough").
fn sync_window(
    granted: u64,
    tick: Option<u64>,
    sync: Option<u64>,
    max: Option<u64>,
    ensemble: Option<bool>,
) -> Finding {
    const CANNOT: &str = "cannot judge the session timeout against syncLimit × tickTime (how \
        long a follower cut off from the quorum goes on answering)";
    let window = tick.zip(sync).map(|(t, s)| t * s);
    match (ensemble, window) {
        (None, _) => Finding::new(
            Check::SyncWindow,
            Status::Warn,
            format!("{CANNOT}: the server's mode (standalone or in an ensemble) could not be read"),
        )
        .fix("let the doctor read srvr and conf: 4lw.commands.whitelist=srvr,conf,mntr,envi,ruok, or the AdminServer (admin.enableServer=true; doctor --admin-port PORT)"),
        (Some(false), _) => Finding::new(
            Check::SyncWindow,
            Status::Pass,
            "standalone server: no follower can be cut off from a quorum and go on answering, so \
             the session timeout need not exceed syncLimit × tickTime (an ensemble's must)",
        ),
        (Some(true), None) => Finding::new(
            Check::SyncWindow,
            Status::Warn,
            format!("{CANNOT}: tickTime and syncLimit could not be read"),
        )
        .fix("let the doctor read conf: add it to 4lw.commands.whitelist (zoo.cfg: 4lw.commands.whitelist=srvr,conf,mntr,envi,ruok), or turn the AdminServer on (admin.enableServer=true; doctor --admin-port PORT)"),
        (Some(true), Some(w)) => {
            let ratio = granted as f64 / w.max(1) as f64;
            let said = format!("session timeout {granted} ms against syncLimit × tickTime = {} × {} ms = {w} ms ({ratio:.1}×)", sync.unwrap_or(0), tick.unwrap_or(0));
            let status = if granted <= w {
                Status::Fail
            } else if granted < 2 * w {
                Status::Warn
            } else {
                Status::Pass
            };
            let mut f = Finding::new(Check::SyncWindow, status, match status {
                Status::Fail => format!("{said}: not above it. A follower cut off from the quorum may go on answering this session after the ensemble expired it and gave the lock to another: zkguard lock can go on running its command while another holds"),
                Status::Warn => format!("{said}: above it, but less than twice. A follower cut off from the quorum stops answering only shortly before the ensemble may expire the session: commands that write shared state should fence their writes with ZKGUARD_TOKEN"),
                Status::Pass | Status::Note => format!("{said}: at least twice. A follower cut off from the quorum stops answering well before the ensemble may expire the session, so zkguard lock stops its command (as --on-suspend says) before another can hold the lock"),
            });
            if status != Status::Pass {
                let need = 2 * w;
                let room = match max {
                    Some(hi) if hi < need => format!(" (and raise maxSessionTimeout, now {hi} ms, to at least that)"),
                    _ => String::new(),
                };
                f = f.fix(format!("ask for a session of at least {need} ms (--session-timeout {need}ms){room}, or lower syncLimit × tickTime"));
            }
            f
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The boundaries: at the window fails, just above warns, twice passes; standalone
    /// passes whatever the numbers; unreadable numbers warn. The fix asks for twice the
    /// window, and for a larger maxSessionTimeout when that is below it.
    #[test]
    fn the_sync_window_boundaries() {
        let judge = |granted, max| sync_window(granted, Some(100), Some(10), max, Some(true));
        assert_eq!(judge(1000, None).status, Status::Fail);
        assert_eq!(judge(1001, None).status, Status::Warn);
        assert_eq!(judge(1999, None).status, Status::Warn);
        assert_eq!(judge(2000, None).status, Status::Pass);
        assert_eq!(judge(2000, None).fix, None);
        let fix = judge(400, Some(1500)).fix.unwrap();
        assert!(
            fix.contains("--session-timeout 2000ms")
                && fix.contains("maxSessionTimeout, now 1500 ms"),
            "{fix}"
        );
        assert!(!judge(400, Some(60000))
            .fix
            .unwrap()
            .contains("maxSessionTimeout"));
        assert_eq!(
            sync_window(10, Some(100), Some(10), None, Some(false)).status,
            Status::Pass
        );
        assert_eq!(
            sync_window(5000, None, Some(10), None, Some(true)).status,
            Status::Warn
        );
        let unknown = sync_window(5000, Some(100), Some(10), None, None);
        assert_eq!(unknown.status, Status::Warn);
    }

    /// Latency and fsync figures are flagged above their thresholds, not at or below.
    #[test]
    fn high_latency_and_slow_fsync_are_flagged() {
        let checks = |figures: &[(&str, &str)]| {
            let mut s = Server {
                address: "zk1:2181".into(),
                reachable: true,
                ..Server::default()
            };
            for (k, v) in figures {
                s.mntr.insert(k.to_string(), v.to_string());
            }
            let mut out = Vec::new();
            server_findings(&s, &mut out);
            out.iter()
                .map(|f| (f.check.name(), f.status))
                .collect::<Vec<_>>()
        };
        let quiet = [
            ("avg_latency", "50"),
            ("max_latency", "1000"),
            ("avg_fsynctime", "20"),
            ("max_fsynctime", "1000"),
            ("fsync_threshold_exceed_count", "0"),
        ];
        assert_eq!(checks(&quiet), []);
        assert_eq!(
            checks(&[("avg_latency", "50.5")]),
            [("latency", Status::Warn)]
        );
        assert_eq!(
            checks(&[("max_latency", "1001")]),
            [("latency", Status::Warn)]
        );
        assert_eq!(
            checks(&[("avg_fsynctime", "21"), ("max_fsynctime", "30")]),
            [("fsync", Status::Warn)]
        );
        assert_eq!(
            checks(&[("avg_fsynctime", "1"), ("max_fsynctime", "1500")]),
            [("fsync", Status::Warn)]
        );
        assert_eq!(
            checks(&[("fsync_threshold_exceed_count", "2")]),
            [("fsync", Status::Warn)]
        );
    }
}
