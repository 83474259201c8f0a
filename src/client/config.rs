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
}

/// A SASL login: a DIGEST-MD5 user and password (the password is kept out of `Debug`), or
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
                .finish_non_exhaustive(),
            #[cfg(feature = "kerberos")]
            SaslLogin::Kerberos(login) => f.debug_tuple("Kerberos").field(login).finish(),
        }
    }
}
