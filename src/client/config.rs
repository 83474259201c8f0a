//! The settings a client is built with ([`Config`]): made by the builder, read by the
//! connection. Its own module so that neither has to import the other's.

use std::time::Duration;

use super::NodeAcl;

/// Settings fixed at build time.
pub(crate) struct Config {
    pub hosts: Vec<String>,
    pub chroot: String,
    pub session_timeout: Duration,
    pub auth: Vec<(String, Vec<u8>)>,
    /// The largest request frame to send (see [`ClientBuilder::max_request_size`](super::ClientBuilder::max_request_size)).
    pub max_request: usize,
    /// The largest reply kept (see [`ClientBuilder::max_reply_size`](super::ClientBuilder::max_reply_size)).
    pub max_reply: usize,
    /// TLS to every server (feature `tls`).
    pub tls: Option<super::TlsSetup>,
    /// The SASL login (DIGEST-MD5 or Kerberos), on every connection.
    pub sasl: Option<SaslLogin>,
    /// The ACL of the nodes the recipes create (see [`ClientBuilder::node_acl`](super::ClientBuilder::node_acl)).
    pub node_acl: NodeAcl,
    /// Whether the session has an identity a creator ACL can name.
    pub identity: bool,
    /// Whether recipe metrics carry the lock path (`ClientBuilder::metrics_path_labels`).
    pub metrics_path_labels: bool,
}

/// What `Debug` shows in place of a secret.
pub(crate) const REDACTED: &str = "<redacted>";

/// `Debug` of the `auth` credentials (scheme, data): the scheme, and for `digest`
/// (`user:password`) the user with the password redacted (`alice:<redacted>`); every other
/// scheme's data redacted whole (what part of it is secret is the scheme's business).
pub(crate) struct AuthDebug<'a>(pub &'a [(String, Vec<u8>)]);

impl std::fmt::Debug for AuthDebug<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for (scheme, data) in self.0 {
            let shown = match data.iter().position(|&b| b == b':') {
                Some(colon) if scheme == "digest" => {
                    format!("{}:{REDACTED}", String::from_utf8_lossy(&data[..colon]))
                }
                _ => REDACTED.to_string(),
            };
            list.entry(&(scheme, shown));
        }
        list.finish()
    }
}

/// A SASL login: a DIGEST-MD5 user and password (the password is redacted in `Debug`), or
/// Kerberos.
#[derive(Clone)]
pub(crate) enum SaslLogin {
    Digest {
        user: String,
        password: String,
    },
    #[cfg(feature = "kerberos")]
    Kerberos(super::Kerberos),
}

impl SaslLogin {
    /// Who logs in, for logs.
    pub fn who(&self) -> String {
        match self {
            SaslLogin::Digest { user, .. } => format!("{user:?}"),
            #[cfg(feature = "kerberos")]
            SaslLogin::Kerberos(login) => login.who(),
        }
    }
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SaslLogin::Digest { user, .. } => f
                .debug_struct("Digest")
                .field("user", user)
                .field("password", &format_args!("{REDACTED}"))
                .finish(),
            #[cfg(feature = "kerberos")]
            SaslLogin::Kerberos(login) => f.debug_tuple("Kerberos").field(login).finish(),
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
