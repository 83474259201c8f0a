//! `zkguard doctor`'s ensemble finding against real servers: the connect string against the
//! ensemble's dynamic configuration (a harness ensemble with reconfiguration on).

mod common;

use common::*;
use serde_json::Value;
use zkguard::testing::TestCluster;

/// `zkguard doctor --json` against `cs`: the report's `ensemble` findings.
fn ensemble_findings(cs: &str) -> Vec<Value> {
    let (_, out, err) = output(zkguard(cs).arg("doctor").arg("--json"));
    let v: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("doctor --json: {e}; stdout {out:?}, stderr {err}"));
    let all = v["findings"].as_array().unwrap().clone();
    all.into_iter()
        .filter(|f| f["check"] == "ensemble")
        .collect()
}

/// The full list passes; a list lacking a member, or naming a server that is not one, is
/// a warning naming them, whose fix is the configuration's servers (with the chroot).
#[test]
fn the_connect_string_is_compared_with_the_ensembles_configuration() {
    let cluster = TestCluster::builder()
        .servers(3)
        .reconfig(1)
        .start()
        .unwrap();
    let s = |i: usize| cluster.server_connect_string(i);
    let full = ensemble_findings(&cluster.connect_string());
    assert_eq!(full.len(), 1, "{full:?}");
    assert_eq!(full[0]["status"], "pass", "{:#}", full[0]);

    // Server 2 missing, spare server 3 (not a member) named instead; a chroot (which must
    // exist for the session doctor makes).
    client(&cluster.connect_string())
        .create("/app", b"", zkguard::CreateMode::Persistent)
        .unwrap();
    let partial = format!("{},{},{}", s(0), s(1), s(3));
    let f = ensemble_findings(&format!("{partial}/app"));
    assert_eq!(f.len(), 1, "{f:?}");
    let (message, fix) = (
        f[0]["message"].as_str().unwrap(),
        f[0]["fix"].as_str().unwrap(),
    );
    assert_eq!(f[0]["status"], "warn");
    assert!(message.contains(&format!("lacks: {}", s(2))), "{message}");
    assert!(
        message.contains(&format!("configuration: {}", s(3))),
        "{message}"
    );
    for i in 0..3 {
        assert!(fix.contains(&s(i)), "{fix}");
    }
    assert!(fix.contains("/app") && !fix.contains(&s(3)), "{fix}");
}

/// A standalone server publishes no configuration with client addresses: no finding.
#[test]
fn a_standalone_server_gives_no_ensemble_finding() {
    assert_eq!(
        ensemble_findings(&cluster().connect_string()),
        Vec::<Value>::new()
    );
}
