//! TLS settings: whom to trust, which certificate to show, which name to verify.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

use crate::error::{Error, Result};

/// TLS to ZooKeeper's `secureClientPort` (feature `tls`), for [`ClientBuilder::tls`].
///
/// Built from the certificate authorities to trust (a PEM bundle, or the platform's
/// roots), optionally a client certificate and key (mutual TLS, which ZooKeeper requires
/// unless the server sets `ssl.clientAuth=none`), and optionally the name to verify in the
/// server's certificate (by default the host of each server in the connect string).
/// rustls does the TLS (1.2 and 1.3, no OpenSSL).
///
/// Everything the client promises holds over TLS too: the one connection thread, deadlines,
/// silence detection, reconnects with back-off, re-armed watches, a bounded close. A failed
/// handshake (a certificate not signed by a trusted authority, issued for another name or
/// expired, a client certificate the server refuses, a port that does not speak TLS) counts
/// as that server failing: the client tries the next one, and
/// [`ClientBuilder::build`] reports each server with [`ConnectFailure::Tls`] and the
/// reason. When every server fails that way, `build` returns at once rather than waiting
/// out the connect timeout.
///
/// ```no_run
/// use zkguard::{Client, TlsConfig};
/// # fn main() -> zkguard::Result<()> {
/// let tls = TlsConfig::ca_file("/etc/zookeeper/ca.pem")?
///     .client_cert_files("/etc/myapp/client.pem", "/etc/myapp/client.key")?;
/// let client = Client::builder("zk1:2281,zk2:2281,zk3:2281").tls(tls).build()?;
/// # Ok(())
/// # }
/// ```
///
/// [`ClientBuilder::tls`]: crate::ClientBuilder::tls
/// [`ClientBuilder::build`]: crate::ClientBuilder::build
/// [`ConnectFailure::Tls`]: crate::ConnectFailure::Tls
#[derive(Clone)]
pub struct TlsConfig {
    roots: Arc<RootCertStore>,
    client: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
    server_name: Option<String>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("trusted_roots", &self.roots.len())
            .field("client_certificate", &self.client.is_some())
            .field("server_name", &self.server_name)
            .finish()
    }
}

fn invalid(name: &'static str, reason: String) -> Error {
    Error::InvalidArgument { name, reason }
}

fn read_file(name: &'static str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| invalid(name, format!("cannot read {}: {e}", path.display())))
}

/// The certificates of a PEM text; `what` names it in errors.
fn certs_of(name: &'static str, what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid(name, format!("{what}: not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(
            name,
            format!("{what}: no CERTIFICATE block in the PEM text"),
        ));
    }
    Ok(certs)
}

impl TlsConfig {
    /// Trusts the certificate authorities of a PEM bundle (one or more `CERTIFICATE`
    /// blocks).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`"CA certificates"`) when the text holds no certificate
    /// or one that cannot be parsed.
    pub fn ca_pem(pem: &[u8]) -> Result<TlsConfig> {
        Self::with_roots("the CA PEM text", pem)
    }

    /// Trusts the certificate authorities of a PEM file.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`"CA certificates"`) naming the file when it cannot be
    /// read, holds no certificate or one that cannot be parsed.
    pub fn ca_file(path: impl AsRef<Path>) -> Result<TlsConfig> {
        let path = path.as_ref();
        let pem = read_file("CA certificates", path)?;
        Self::with_roots(&path.display().to_string(), &pem)
    }

    fn with_roots(what: &str, pem: &[u8]) -> Result<TlsConfig> {
        let mut roots = RootCertStore::empty();
        for cert in certs_of("CA certificates", what, pem)? {
            roots.add(cert).map_err(|e| {
                invalid(
                    "CA certificates",
                    format!("{what}: not a usable CA certificate: {e}"),
                )
            })?;
        }
        Ok(TlsConfig {
            roots: Arc::new(roots),
            client: None,
            server_name: None,
        })
    }

    /// Trusts the platform's certificate authorities (on Linux, the system bundle such as
    /// `/etc/ssl/certs`; `SSL_CERT_FILE` / `SSL_CERT_DIR` override it), for servers whose
    /// certificates a public or company-wide authority installed on the machine signed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`"CA certificates"`) when the platform has no usable
    /// certificate authority.
    pub fn platform_roots() -> Result<TlsConfig> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _ignored) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let why = found
                .errors
                .first()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "none found".into());
            return Err(invalid(
                "CA certificates",
                format!("the platform's certificate authorities: {why}"),
            ));
        }
        Ok(TlsConfig {
            roots: Arc::new(roots),
            client: None,
            server_name: None,
        })
    }

    /// Shows this certificate chain (PEM, the client's certificate first) and private key
    /// (PEM: PKCS#8, PKCS#1 or SEC1) to servers that ask for one: mutual TLS.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`"client certificate"` or `"client key"`) when either
    /// text cannot be parsed.
    pub fn client_cert_pem(mut self, cert_chain: &[u8], key: &[u8]) -> Result<TlsConfig> {
        self.client = Some(Self::client_pair(
            "the client certificate PEM text",
            cert_chain,
            "the client key PEM text",
            key,
        )?);
        Ok(self)
    }

    /// As [`client_cert_pem`](Self::client_cert_pem), reading both from files.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`"client certificate"` or `"client key"`) naming the
    /// file when it cannot be read or parsed.
    pub fn client_cert_files(
        mut self,
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsConfig> {
        let (cert_path, key_path) = (cert_chain.as_ref(), key.as_ref());
        let cert = read_file("client certificate", cert_path)?;
        let key = read_file("client key", key_path)?;
        self.client = Some(Self::client_pair(
            &cert_path.display().to_string(),
            &cert,
            &key_path.display().to_string(),
            &key,
        )?);
        Ok(self)
    }

    fn client_pair(
        cert_what: &str,
        cert: &[u8],
        key_what: &str,
        key: &[u8],
    ) -> Result<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)> {
        let chain = certs_of("client certificate", cert_what, cert)?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
            invalid(
                "client key",
                format!("{key_what}: no usable PRIVATE KEY block: {e}"),
            )
        })?;
        // Check that the pair fits together now, not at the first handshake.
        ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("client certificate", e.to_string()))?
            .with_root_certificates(RootCertStore::empty())
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(|e| {
                invalid(
                    "client key",
                    format!("{key_what} does not fit {cert_what}: {e}"),
                )
            })?;
        Ok((chain, Arc::new(key)))
    }

    /// Verifies this name in every server's certificate, instead of the host each server
    /// has in the connect string (for servers reached by address, or through a proxy or a
    /// tunnel).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`"TLS server name"`) when `name` is neither a DNS name
    /// nor an IP address.
    pub fn server_name(mut self, name: &str) -> Result<TlsConfig> {
        ServerName::try_from(name.to_string()).map_err(|e| {
            invalid(
                "TLS server name",
                format!("{name:?} is not a DNS name or an IP address: {e}"),
            )
        })?;
        self.server_name = Some(name.to_string());
        Ok(self)
    }

    /// The rustls configuration, built once per client.
    /// Whether a client certificate is presented (mutual TLS).
    pub(crate) fn has_client_cert(&self) -> bool {
        self.client.is_some()
    }

    pub(crate) fn build(&self) -> Result<Tls> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS", e.to_string()))?
            .with_root_certificates(self.roots.clone());
        let config = match &self.client {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| invalid("client certificate", e.to_string()))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Tls {
            config: Arc::new(config),
            server_name: self.server_name.clone(),
        })
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What the connection layer uses: the rustls configuration and the name override.
#[derive(Clone, Debug)]
pub(crate) struct Tls {
    pub config: Arc<ClientConfig>,
    pub server_name: Option<String>,
}

impl Tls {
    /// The name to verify for a server of the connect string (`host:port`).
    pub fn name_for(&self, host: &str) -> std::result::Result<ServerName<'static>, String> {
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => super::path::host_of(host).to_string(),
        };
        ServerName::try_from(name.clone())
            .map_err(|e| format!("{name:?} cannot be verified as a server name: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pem_is_an_error_naming_the_argument() {
        match TlsConfig::ca_pem(b"not pem at all") {
            Err(Error::InvalidArgument { name, reason }) => {
                assert_eq!(name, "CA certificates");
                assert!(reason.contains("no CERTIFICATE"), "{reason}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        match TlsConfig::ca_file("/nonexistent/ca.pem") {
            Err(Error::InvalidArgument { name, reason }) => {
                assert_eq!(name, "CA certificates");
                assert!(reason.contains("/nonexistent/ca.pem"), "{reason}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}
