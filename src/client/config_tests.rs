//! `Debug` of everything holding a secret shows who, never the secret.

use super::*;

/// The secret in every form `Debug` could have shown it: as text, and as the list of
/// bytes a derived `Debug` of a `Vec<u8>` prints.
fn leaks(shown: &str, secret: &str) -> bool {
    let bytes = format!("{:?}", secret.as_bytes().to_vec());
    let inner = bytes.trim_start_matches('[').trim_end_matches(']');
    shown.contains(secret) || shown.contains(inner)
}

#[test]
fn the_builders_debug_shows_the_users_and_redacts_the_passwords() {
    let b = crate::client::Client::builder("127.0.0.1:2181")
        .auth("digest", b"alice:s3cret-digest")
        .auth("digest", b"no-colon-s3cret")
        .auth("custom", b"whole-s3cret-token")
        .sasl_digest("bob", "s3cret-sasl");
    let shown = format!("{b:?}");
    assert!(shown.contains("alice:<redacted>"), "{shown}");
    assert!(shown.contains("\"digest\""), "{shown}");
    assert!(shown.contains("\"custom\""), "{shown}");
    assert!(shown.contains("bob"), "{shown}");
    assert!(shown.contains("127.0.0.1:2181"), "{shown}");
    for secret in [
        "s3cret-digest",
        "alice:s3cret-digest",
        "no-colon-s3cret",
        "whole-s3cret-token",
        "s3cret-sasl",
    ] {
        assert!(!leaks(&shown, secret), "{secret} in {shown}");
    }
    // The alternate (pretty) form too.
    let pretty = format!("{b:#?}");
    assert!(pretty.contains("alice:<redacted>"), "{pretty}");
    assert!(!pretty.contains("s3cret"), "{pretty}");
}

#[test]
fn a_sasl_digest_logins_debug_shows_the_user_only() {
    let login = SaslLogin::Digest {
        user: "carol".into(),
        password: "s3cret-carol".into(),
    };
    let shown = format!("{login:?}");
    assert!(shown.contains("carol"), "{shown}");
    assert!(shown.contains(REDACTED), "{shown}");
    assert!(!leaks(&shown, "s3cret-carol"), "{shown}");
}

#[test]
fn the_auth_lists_debug_redacts_each_entry() {
    let auth = vec![
        ("digest".to_string(), b"dave:pw:with:colons".to_vec()),
        ("digest".to_string(), b":only-password".to_vec()),
        ("ip".to_string(), b"10.0.0.1".to_vec()),
    ];
    let shown = format!("{:?}", AuthDebug(&auth));
    assert_eq!(
        shown,
        r#"[("digest", "dave:<redacted>"), ("digest", ":<redacted>"), ("ip", "<redacted>")]"#
    );
}

/// A Kerberos login holds no secret (a keytab is named by its path, not read into it): its
/// `Debug` shows the principal and the keytab's path, and a builder's shows them too.
#[cfg(feature = "kerberos")]
#[test]
fn a_kerberos_logins_debug_shows_the_principal_and_the_keytab_path() {
    let login = crate::client::Kerberos::new()
        .principal("erin@EXAMPLE.COM")
        .keytab("/etc/erin.keytab");
    let shown = format!("{login:?}");
    assert!(shown.contains("erin@EXAMPLE.COM"), "{shown}");
    assert!(shown.contains("/etc/erin.keytab"), "{shown}");
    let b = crate::client::Client::builder("127.0.0.1:2181").sasl_kerberos(login);
    let shown = format!("{b:?}");
    assert!(shown.contains("erin@EXAMPLE.COM"), "{shown}");
}
