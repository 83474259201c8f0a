//! TLS and SASL settings of the servers: [`ClientAuth`], the JAAS file, the `zoo.cfg` lines.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

#[cfg(feature = "tls")]
use crate::testing::pki::TestPki;

/// Whether a TLS server asks clients for a certificate: ZooKeeper's `ssl.clientAuth`.
///
/// Used with `TestClusterBuilder::tls` (with the `tls` feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientAuth {
    /// `ssl.clientAuth=none`: the server does not ask; plain server-authenticated TLS.
    None,
    /// `ssl.clientAuth=want`: the server asks; a client without a certificate is still
    /// accepted, a client with one must present one signed by the test CA.
    Want,
    /// `ssl.clientAuth=need`: mutual TLS; the handshake fails unless the client presents a
    /// certificate signed by the test CA (such as `TestPki::client`).
    Need,
}

impl ClientAuth {
    /// The value of ZooKeeper's `ssl.clientAuth`.
    pub fn as_zookeeper_value(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Want => "want",
            ClientAuth::Need => "need",
        }
    }
}

/// The connection factory that serves `secureClientPort` (the default NIO one cannot).
#[cfg(feature = "tls")]
pub(super) const NETTY_FACTORY: &str = "org.apache.zookeeper.server.NettyServerCnxnFactory";
/// The SASL authentication provider.
pub(super) const SASL_PROVIDER: &str =
    "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";
/// The JAAS login module holding DIGEST-MD5 users.
pub(super) const DIGEST_LOGIN_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";

/// The principal (without realm) of every server of a Kerberos cluster.
pub(super) const KERBEROS_SERVER: &str = "zookeeper/localhost";
/// The JAAS login module for Kerberos.
const KRB5_LOGIN_MODULE: &str = "com.sun.security.auth.module.Krb5LoginModule";

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Checks SASL DIGEST-MD5 users: names non-empty, made of ASCII letters, digits, `_` and
/// `-` (they become JAAS option names `user_<name>`), unique; passwords non-empty, without
/// `"`, `\` or control characters (they are quoted JAAS option values).
pub(super) fn validate_sasl_users(users: &[(String, String)]) -> io::Result<()> {
    if users.is_empty() {
        return Err(invalid(
            "sasl_digest_users needs at least one user (an empty list was given)".into(),
        ));
    }
    for (k, (name, password)) in users.iter().enumerate() {
        if name.is_empty() {
            return Err(invalid(format!("SASL user #{} has an empty name", k + 1)));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(invalid(format!(
                "SASL user name {name:?} contains {bad:?}; names may hold only ASCII letters, \
                 digits, '_' and '-' (they become JAAS options user_<name>)"
            )));
        }
        if users[..k].iter().any(|(other, _)| other == name) {
            return Err(invalid(format!("SASL user {name:?} is listed twice")));
        }
        if password.is_empty() {
            return Err(invalid(format!("SASL user {name:?} has an empty password")));
        }
        if let Some(bad) = password
            .chars()
            .find(|c| *c == '"' || *c == '\\' || c.is_control())
        {
            return Err(invalid(format!(
                "the password of SASL user {name:?} contains {bad:?}, which the JAAS file \
                 cannot hold (no '\"', '\\' or control characters)"
            )));
        }
    }
    Ok(())
}

/// The JAAS file: a `Server` section with one `user_<name>="<password>"` per user.
pub(super) fn jaas_text(users: &[(String, String)]) -> String {
    let mut s = String::from("// written by zkguard::testing::TestCluster\nServer {\n");
    let _ = write!(s, "    {DIGEST_LOGIN_MODULE} required");
    for (name, password) in users {
        let _ = write!(s, "\n    user_{name}=\"{password}\"");
    }
    s.push_str(";\n};\n");
    s
}

/// The JAAS file for Kerberos: a `Server` section logging in as `principal` (with realm)
/// with `keytab`, as an acceptor only (`isInitiator=false`: no ticket-granting ticket is
/// fetched, so a server starts while the KDC is down).
pub(super) fn kerberos_jaas_text(principal: &str, keytab: &Path) -> String {
    format!(
        "// written by zkguard::testing::TestCluster\nServer {{\n    {KRB5_LOGIN_MODULE} required\n    \
         useKeyTab=true\n    keyTab=\"{}\"\n    storeKey=true\n    useTicketCache=false\n    isInitiator=false\n    \
         principal=\"{principal}\";\n}};\n",
        keytab.display()
    )
}

/// Warns when Kerberos clients of a server at `127.0.0.1` would not ask for
/// [`KERBEROS_SERVER`]: libkrb5 (`rdns = true` in the `TestKdc`'s `krb5.conf`) and Java
/// resolve `127.0.0.1` back to a host name, which must be `localhost`. `getent hosts
/// 127.0.0.1` makes the same lookup; when it cannot run (not a glibc system), nothing is
/// checked. A warning, not an error: clients that name the host (`Kerberos::host`) work.
pub(super) fn check_loopback_name() {
    let getent = std::process::Command::new("getent")
        .args(["hosts", "127.0.0.1"])
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned());
    if let Err(e) = loopback_name_check(getent.as_deref()) {
        log::warn!("zkguard TestCluster: {e} (or have clients name the host: Kerberos::host(\"localhost\"))");
    }
}

/// [`check_loopback_name`] over the output of `getent hosts 127.0.0.1` (`None`: it could
/// not run). The first name after the address is the one clients use.
pub(super) fn loopback_name_check(getent: Option<&str>) -> io::Result<()> {
    let Some(out) = getent else { return Ok(()) };
    let found = match out.split_whitespace().nth(1) {
        Some("localhost") => return Ok(()),
        Some(name) => format!("to `{name}`"),
        None => "to no name".to_string(),
    };
    Err(io::Error::other(format!(
        "a Kerberized TestCluster needs 127.0.0.1 to resolve back to `localhost`, but \
         `getent hosts 127.0.0.1` resolves it {found}: Kerberos clients would ask for a ticket \
         to zookeeper/<that name> instead of the servers' {KERBEROS_SERVER}; add the line \
         `127.0.0.1 localhost` to /etc/hosts, before any other line for 127.0.0.1"
    )))
}

/// `zoo.cfg` lines for a `secureClientPort` with the PKI's server certificate.
#[cfg(feature = "tls")]
pub(super) fn tls_config(cfg: &mut String, secure_port: u16, pki: &TestPki, auth: ClientAuth) {
    let _ = writeln!(cfg, "serverCnxnFactory={NETTY_FACTORY}");
    let _ = writeln!(cfg, "secureClientPort={secure_port}");
    let _ = writeln!(cfg, "secureClientPortAddress=127.0.0.1");
    // Unknown keys become `zookeeper.<key>` system properties, which X509Util reads.
    let _ = writeln!(
        cfg,
        "ssl.keyStore.location={}",
        pki.server().keystore_path().display()
    );
    let _ = writeln!(cfg, "ssl.keyStore.type=PEM");
    let _ = writeln!(
        cfg,
        "ssl.trustStore.location={}",
        pki.ca_cert_path().display()
    );
    let _ = writeln!(cfg, "ssl.trustStore.type=PEM");
    let _ = writeln!(cfg, "ssl.clientAuth={}", auth.as_zookeeper_value());
}

/// `zoo.cfg` lines for SASL (the JAAS file itself is a JVM option).
pub(super) fn sasl_config(cfg: &mut String, required: bool) {
    let _ = writeln!(cfg, "authProvider.sasl={SASL_PROVIDER}");
    if required {
        let _ = writeln!(cfg, "enforce.auth.enabled=true");
        let _ = writeln!(cfg, "enforce.auth.schemes=sasl");
        let _ = writeln!(cfg, "sessionRequireClientSASLAuth=true");
    }
}

/// The JVM option naming the JAAS file.
pub(super) fn jaas_jvm_option(path: &Path) -> String {
    format!("-Djava.security.auth.login.config={}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(u, p)| (u.to_string(), p.to_string()))
            .collect()
    }

    #[test]
    fn sasl_user_validation() {
        validate_sasl_users(&users(&[("alice", "alice-secret"), ("bob_2", "x y!")]))
            .expect("valid");
        for (bad, needle) in [
            (users(&[]), "at least one"),
            (users(&[("", "p")]), "empty name"),
            (users(&[("al\"ice", "p")]), "al\\\"ice"),
            (users(&[("a b", "p")]), "\"a b\""),
            (users(&[("bob", "p\\q")]), "\"bob\""),
            (users(&[("bob", "p\"q")]), "\"bob\""),
            (users(&[("bob", "")]), "empty password"),
            (users(&[("bob", "1"), ("bob", "2")]), "twice"),
        ] {
            let e = validate_sasl_users(&bad).expect_err("invalid");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
        }
    }

    #[test]
    fn kerberos_servers_need_127_0_0_1_to_be_localhost() {
        for good in [
            None,
            Some("127.0.0.1       localhost\n"),
            Some("127.0.0.1 localhost vm\n"),
        ] {
            loopback_name_check(good).expect("127.0.0.1 is localhost");
        }
        for (bad, needle) in [
            (Some(""), "to no name"),
            (Some("127.0.0.1 vm localhost\n"), "to `vm`"),
            (
                Some("127.0.0.1 localhost.localdomain localhost"),
                "to `localhost.localdomain`",
            ),
        ] {
            let e = loopback_name_check(bad).expect_err("127.0.0.1 is not localhost");
            let msg = e.to_string();
            assert!(msg.contains(needle), "{msg} lacks {needle}");
            assert!(msg.contains("`127.0.0.1 localhost` to /etc/hosts"), "{msg}");
        }
    }

    #[test]
    fn kerberos_jaas_file_layout() {
        let text = kerberos_jaas_text("zookeeper/localhost@R.TEST", Path::new("/k/zk.keytab"));
        assert!(text.contains(
            "Server {\n    com.sun.security.auth.module.Krb5LoginModule required\n    \
             useKeyTab=true\n    keyTab=\"/k/zk.keytab\"\n    storeKey=true\n    \
             useTicketCache=false\n    isInitiator=false\n    \
             principal=\"zookeeper/localhost@R.TEST\";\n};\n"
        ));
    }

    #[test]
    fn jaas_file_layout() {
        let text = jaas_text(&users(&[("alice", "a-s"), ("bob", "b")]));
        assert!(text.contains(
            "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
             user_alice=\"a-s\"\n    user_bob=\"b\";\n};\n"
        ));
    }
}
