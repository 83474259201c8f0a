//! zkguard's secrets stay with zkguard: the command it runs under `lock` and `elect` does
//! not see the credentials' variables in its environment; the user's own variables pass.

use crate::common::*;
use crate::setup;

/// The environment a `zkguard ARGS -- sh -c 'env > FILE'` command saw, with
/// `ZKGUARD_AUTH` and `ZKGUARD_SASL_PASSWORD` set for zkguard.
fn env_seen(cs: &str, s: &Scratch, name: &str, args: &[&str]) -> Vec<String> {
    let file = s.path(name);
    let (code, _, err) = output(
        zkguard(cs)
            .env("ZKGUARD_AUTH", "alice:s3cret-auth")
            .env("ZKGUARD_SASL_PASSWORD", "s3cret-sasl")
            .env("ZKGUARD_TEST_ORDINARY", "plain-value")
            .args(args)
            .args(["--", "sh", "-c"])
            .arg(format!("env > '{}'", file.display())),
    );
    assert_eq!(code, 0, "{args:?}: {err}");
    s.lines(name)
}

#[test]
fn the_command_does_not_see_the_credentials_variables() {
    let (cs, s, path) = setup("secrets");
    let election = unique("secrets-elect");
    for (name, args) in [
        ("lock.env", vec!["lock", path.as_str()]),
        ("elect.env", vec!["elect", election.as_str(), "--id", "e-1"]),
    ] {
        let env = env_seen(&cs, &s, name, &args);
        assert!(
            env.iter().any(|l| l == "ZKGUARD_TEST_ORDINARY=plain-value"),
            "{args:?}: the user's own variable is missing: {env:?}"
        );
        assert!(
            env.iter().any(|l| l.starts_with("ZKGUARD_TOKEN=")),
            "{args:?}: not the command's environment: {env:?}"
        );
        for secret in ["ZKGUARD_AUTH=", "ZKGUARD_SASL_PASSWORD="] {
            assert!(
                !env.iter().any(|l| l.starts_with(secret)),
                "{args:?}: the command sees {secret}…: {env:?}"
            );
        }
        let all = env.concat();
        assert!(
            !all.contains("s3cret"),
            "{args:?}: a secret reached the command: {env:?}"
        );
    }
}
