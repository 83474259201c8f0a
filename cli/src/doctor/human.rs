//! `doctor`'s report for people: servers, configuration, session, the path, findings.
//! Every text in it may hold what a server or a node's creator chose (a version, a mode, a
//! figure, an ACL id, a node's data, an error's words): all of it is shown through
//! [`zkguard::escape`], never raw.

use serde_json::Value;

use super::server::Server;
use super::Finding;

/// The report for people: servers, configuration, session, findings.
pub fn print(report: &Value, servers: &[Server], findings: &[Finding]) {
    let text = |v: &Value| match v {
        Value::Null => "?".to_string(),
        Value::String(s) => esc(s),
        other => other.to_string(),
    };
    println!("zkguard doctor: {}", text(&report["connect"]));
    println!("\nServers");
    for s in servers {
        let rtt = match s.rtt_ms.is_empty() {
            true => "rtt -".to_string(),
            false => {
                let avg = s.rtt_ms.iter().sum::<f64>() / s.rtt_ms.len() as f64;
                let max = s.rtt_ms.iter().cloned().fold(0.0, f64::max);
                format!("rtt avg {avg:.2} ms, max {max:.2} ms")
            }
        };
        let from: Vec<String> = s
            .sources
            .iter()
            .map(|(w, r)| format!("{w} {}", r.as_ref().map_or("-", |f| *f)))
            .collect();
        println!(
            "  {:<22} {:<11} {:<7} {:<10} {}  [{}]",
            esc(&s.address),
            match (s.reachable, &s.unreadable) {
                (false, _) => "UNREACHABLE",
                (true, Some(_)) => "UNREADABLE",
                (true, None) => "reachable",
            },
            esc(s.version.as_deref().unwrap_or("?")),
            esc(s.mode.as_deref().unwrap_or("?")),
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
    let sess = &report["session"];
    println!("\nConfiguration");
    println!(
        "  tickTime {} ms, syncLimit {}, initLimit {}, session timeouts {} ms to {} ms",
        text(&sess["tick_time_ms"]),
        text(&sess["sync_limit"]),
        text(&sess["init_limit"]),
        text(&sess["min_session_timeout_ms"]),
        text(&sess["max_session_timeout_ms"])
    );
    println!("\nSession");
    println!(
        "  {}: asked {} ms, granted {} ms; whoami: {}",
        text(&sess["session_id"]),
        text(&sess["requested_timeout_ms"]),
        text(&sess["negotiated_timeout_ms"]),
        sess["identities"]
            .as_array()
            .map(|a| a.iter().map(text).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    );
    if let Some(p) = report["path"].as_object() {
        println!("\nPath {}", text(&p["path"]));
        for row in p["acl"].as_array().into_iter().flatten() {
            let acl = match (&row["acl"], row["missing"].as_bool()) {
                (_, Some(true)) => "(does not exist yet)".to_string(),
                (Value::Array(a), _) => a.iter().map(text).collect::<Vec<_>>().join(", "),
                _ => text(&row["error"]),
            };
            println!("  {:<30} {acl}", text(&row["path"]));
        }
        for part in p["holders"]["participants"]
            .as_array()
            .into_iter()
            .flatten()
        {
            println!(
                "  {:<8} {}  {}",
                text(&part["role"]),
                text(&part["node"]),
                text(&part["data"])
            );
        }
    }
    println!("\nFindings");
    for f in findings {
        println!(
            "  {:<4}  {:<16} {}",
            f.status.name().to_uppercase(),
            f.check,
            esc(&f.message)
        );
        if let Some(fix) = &f.fix {
            println!("  {:<4}  {:<16} fix: {}", "", "", esc(fix));
        }
    }
    println!(
        "\nResult: {} (exit {})",
        text(&report["status"]),
        text(&report["exit"])
    );
}

fn esc(text: &str) -> String {
    zkguard::escape(text).into_owned()
}
