//! `doctor`'s report for people: servers, configuration, session, the path, findings.
//! Every text in it may hold what a server or a node's creator chose (a version, a mode, a
//! figure, an ACL id, a node's data, an error's words): all of it is shown through
//! [`zkguard::escape`], never raw.

use super::report::{AclRow, Report, SessionReport};

/// The report for people: servers, configuration, session, findings.
pub fn print(report: &Report) {
    println!("zkguard doctor: {}", esc(report.connect));
    println!("\nServers");
    for s in &report.servers {
        let rtt = match &s.rtt_ms {
            None => "rtt -".to_string(),
            Some(r) => format!("rtt avg {:.2} ms, max {:.2} ms", r.spread.avg, r.spread.max),
        };
        let from: Vec<String> = (s.read_from.iter())
            .map(|(w, from)| format!("{w} {}", from.unwrap_or("-")))
            .collect();
        println!(
            "  {:<22} {:<11} {:<7} {:<10} {}  [{}]",
            esc(s.address),
            match (s.reachable, s.unreadable) {
                (false, _) => "UNREACHABLE",
                (true, Some(_)) => "UNREADABLE",
                (true, None) => "reachable",
            },
            esc(s.version.unwrap_or("?")),
            esc(s.mode.unwrap_or("?")),
            rtt,
            from.join(", ")
        );
        let figures: Vec<String> = [
            "avg_latency",
            "max_latency",
            "outstanding_requests",
            "avg_fsynctime",
            "max_fsynctime",
            "fsync_threshold_exceed_count",
        ]
        .iter()
        .filter_map(|k| s.mntr.get(*k).map(|v| format!("{k} {}", esc(v))))
        .collect();
        if !figures.is_empty() {
            println!("  {:<22} mntr: {}", "", figures.join(", "));
        }
    }
    let sess = report.session.as_ref();
    let n = |f: fn(&SessionReport) -> Option<u64>| {
        sess.and_then(f).map_or("?".to_string(), |v| v.to_string())
    };
    println!("\nConfiguration");
    println!(
        "  tickTime {} ms, syncLimit {}, initLimit {}, session timeouts {} ms to {} ms",
        n(|s| s.tick_time_ms),
        n(|s| s.sync_limit),
        n(|s| s.init_limit),
        n(|s| s.min_session_timeout_ms),
        n(|s| s.max_session_timeout_ms)
    );
    println!("\nSession");
    match sess {
        Some(s) => println!(
            "  {}: asked {} ms, granted {} ms; whoami: {}",
            s.session_id,
            s.requested_timeout_ms,
            s.negotiated_timeout_ms,
            esc(&s.identities.join(", "))
        ),
        None => println!("  ?: asked ? ms, granted ? ms; whoami: "),
    }
    if let Some(p) = &report.path {
        println!("\nPath {}", esc(&p.path));
        for row in &p.acl {
            let (path, acl) = match row {
                AclRow::Read { path, acl, .. } => (path, esc(&acl.join(", "))),
                AclRow::Missing { path, .. } => (path, "(does not exist yet)".to_string()),
                AclRow::Unread { path, error } => (path, esc(error)),
            };
            println!("  {:<30} {acl}", esc(path));
        }
        for (role, node, data) in &p.holders.rows {
            println!("  {role:<8} {}  {}", esc(node), esc(data));
        }
    }
    println!("\nFindings");
    for f in &report.findings {
        println!(
            "  {:<4}  {:<16} {}",
            f.status.name().to_uppercase(),
            f.check.name(),
            esc(&f.message)
        );
        if let Some(fix) = &f.fix {
            println!("  {:<4}  {:<16} fix: {}", "", "", esc(fix));
        }
    }
    println!("\nResult: {} (exit {})", report.status.name(), report.exit);
}

fn esc(text: &str) -> String {
    zkguard::escape(text).into_owned()
}
