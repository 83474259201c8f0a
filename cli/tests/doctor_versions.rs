//! `zkguard doctor` on whichever ZooKeeper release the harness runs
//! (`ZKGUARD_ZOOKEEPER_VERSION`; CI runs this file on 3.6.3, 3.8.0 and 3.9.3; 3.9.5's
//! expectations are written too): it
//! names the server's release, what that release lacks and its known data-loss bugs and
//! CVEs with the release that fixes each, and otherwise a release zkguard supports passes.
//! Assertions read `--json`'s fields.

mod common;

use std::collections::BTreeMap;

use common::*;
use serde_json::Value;

#[test]
fn doctor_names_the_release_and_what_it_lacks_and_a_supported_one_passes() {
    let cluster = cluster();
    let (x, y, z) = cluster.version(0).unwrap();
    let (code, out, err) = output(
        zkguard(&cluster.connect_string())
            .arg("doctor")
            .arg("--json"),
    );
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("doctor --json: {e}; stdout {out:?}, stderr {err}"));
    let mut by_check: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for f in v["findings"].as_array().unwrap() {
        by_check
            .entry(f["check"].as_str().unwrap())
            .or_default()
            .push(f);
    }
    let of = |check: &str| by_check.get(check).cloned().unwrap_or_default();
    // The release's known issues, written here apart from the doctor's table: (id,
    // status, the release that fixes it).
    let expected: &[(&str, &str, &str)] = match (x, y, z) {
        (3, 6, 3) | (3, 8, 0) => &[("CVE-2024-23944", "note", "3.8.4 / 3.9.2")],
        (3, 9, 3) => &[
            ("CVE-2025-58457", "warn", "3.9.4"),
            ("ZOOKEEPER-4925", "fail", "3.9.4"),
        ],
        (3, 9, 5) => &[],
        _ => panic!("{x}.{y}.{z}: say which known issues this release has"),
    };
    let mut issues: Vec<(&str, &str, &str)> = of("known_issue")
        .iter()
        .map(|f| {
            let n = &f["numbers"];
            let message = f["message"].as_str().unwrap();
            let id = n["id"].as_str().unwrap();
            let fixed = n["fixed_in"].as_str().unwrap();
            assert!(
                message.contains(id) && message.contains(&format!("fixed in {fixed}")),
                "{message}"
            );
            (id, f["status"].as_str().unwrap(), fixed)
        })
        .collect();
    issues.sort();
    eprintln!("ZooKeeper {x}.{y}.{z}: exit {code}, known issues {issues:?}");
    assert_eq!(issues, expected, "{v:#}");
    if (x, y, z) == (3, 9, 3) {
        let loss = of("known_issue")
            .into_iter()
            .find(|f| f["numbers"]["id"] == "ZOOKEEPER-4925")
            .unwrap();
        assert!(
            loss["message"].as_str().unwrap().contains("loses data"),
            "{loss}"
        );
    }
    // Nothing else a lock user needs is missing on any supported release: no warning but
    // a known issue's, and the exit status is the worst of those.
    for (check, fs) in &by_check {
        for f in fs {
            assert!(
                *check == "known_issue" || f["status"] == "pass" || f["status"] == "note",
                "{f}"
            );
        }
    }
    let worst = if issues.iter().any(|i| i.1 == "fail") {
        (3, "fail")
    } else if issues.iter().any(|i| i.1 == "warn") {
        (1, "warn")
    } else {
        (0, "pass")
    };
    assert_eq!(
        (code, &v["status"]),
        (worst.0, &worst.1.into()),
        "{err}\n{v:#}"
    );
    let version = of("server_version");
    assert_eq!(version.len(), 1, "{v:#}");
    let message = version[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("ZooKeeper {x}.{y}.{z}")),
        "{message}"
    );
    let whoami = of("whoami");
    assert_eq!(whoami.len(), 1, "{v:#}");
    let said = whoami[0]["message"].as_str().unwrap();
    if (x, y, z) < (3, 7, 0) {
        assert!(
            message.contains("lacks whoAmI (ZooKeeper 3.7.0+)"),
            "{message}"
        );
        assert!(
            said.contains("not checked: whoAmI needs ZooKeeper 3.7.0"),
            "{said}"
        );
    } else {
        assert!(
            message.contains("has every operation zkguard uses"),
            "{message}"
        );
        assert!(said.contains("the server sees this session as"), "{said}");
    }
}
