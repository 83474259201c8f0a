//! `zkguard doctor` on whichever ZooKeeper release the harness runs
//! (`ZKGUARD_ZOOKEEPER_VERSION`; CI runs this file on 3.6.3, 3.8.0 and 3.9.3): it names the
//! server's release and what that release lacks, and a release zkguard supports passes.
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
    // Nothing a lock user needs is missing on any supported release: no warning.
    assert_eq!((code, &v["status"]), (0, &"pass".into()), "{err}\n{v:#}");
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
