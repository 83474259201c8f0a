//! A throwaway certificate authority and certificates for TLS tests: [`TestPki`].

use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

/// File names written by [`TestPki::generate`], relative to its directory.
const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca-key.pem";
const SERVER_CERT: &str = "server.pem";
const SERVER_KEY: &str = "server-key.pem";
const SERVER_KEYSTORE: &str = "server-keystore.pem";
const CLIENT_CERT: &str = "client.pem";
const CLIENT_KEY: &str = "client-key.pem";
const CLIENT_KEYSTORE: &str = "client-keystore.pem";

/// One certificate and its private key, as PEM text and as files.
#[derive(Clone, Debug)]
pub struct PemPair {
    cert_pem: String,
    key_pem: String,
    cert_path: PathBuf,
    key_path: PathBuf,
    keystore_path: PathBuf,
}

impl PemPair {
    /// The certificate (`-----BEGIN CERTIFICATE-----`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key, PKCS#8 (`-----BEGIN PRIVATE KEY-----`), ECDSA P-256.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The file holding [`cert_pem`](Self::cert_pem).
    pub fn cert_path(&self) -> &Path {
        &self.cert_path
    }

    /// The file holding [`key_pem`](Self::key_pem).
    pub fn key_path(&self) -> &Path {
        &self.key_path
    }

    /// A file holding the certificate followed by the key: what ZooKeeper's
    /// `ssl.keyStore.type=PEM` (and a Java client's `zookeeper.ssl.keyStore.location`)
    /// expects.
    pub fn keystore_path(&self) -> &Path {
        &self.keystore_path
    }
}

/// A throwaway public key infrastructure for TLS tests: a self-signed certificate
/// authority, a server certificate and a client certificate signed by it, all written as
/// PEM files into one directory.
///
/// - The CA (`ca.pem`, key `ca-key.pem`) is the trust anchor for both sides.
/// - The server certificate (`server.pem`, key `server-key.pem`, both in
///   `server-keystore.pem`) names `localhost` and the IP address `127.0.0.1`, and allows
///   server and client authentication.
/// - The client certificate (`client.pem`, key `client-key.pem`, both in
///   `client-keystore.pem`) has the common name `zkguard-test-client`, names `localhost`
///   and `127.0.0.1` too, and allows client authentication: present it for mutual TLS.
///
/// Keys are ECDSA P-256. Every call makes a new, unrelated CA, so a second `TestPki` is
/// the "wrong CA" for tests that expect verification to fail. Certificates are valid from
/// 1975 to 4096, except the server certificate of
/// [`generate_with_expired_server_cert`](Self::generate_with_expired_server_cert).
///
/// [`TestClusterBuilder::tls`](crate::testing::TestClusterBuilder::tls) makes one in the
/// cluster's directory; [`TestCluster::pki`](crate::testing::TestCluster::pki) returns it.
///
/// # Examples
///
/// ```
/// use zkguard::testing::TestPki;
///
/// # fn main() -> std::io::Result<()> {
/// let dir = std::env::temp_dir().join(format!("pki-doc-{}", std::process::id()));
/// let pki = TestPki::generate(&dir)?;
/// assert!(pki.ca_cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// assert_eq!(std::fs::read_to_string(pki.server().cert_path())?, pki.server().cert_pem());
/// assert!(pki.client().key_pem().contains("PRIVATE KEY"));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TestPki {
    dir: PathBuf,
    ca_cert_pem: String,
    ca_key_pem: String,
    server: PemPair,
    client: PemPair,
}

fn rcgen_err(what: &str, e: rcgen::Error) -> io::Error {
    io::Error::other(format!("TestPki: cannot {what}: {e}"))
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    fs::write(path, text)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "zkguard tests");
    dn.push(DnType::CommonName, common_name);
    dn
}

/// A leaf certificate for `localhost` / 127.0.0.1 signed by the CA.
fn leaf(
    common_name: &str,
    usages: Vec<ExtendedKeyUsagePurpose>,
    expired: bool,
    ca: &Certificate,
    ca_key: &KeyPair,
) -> io::Result<(String, String)> {
    let what = format!("make the certificate {common_name}");
    let key = KeyPair::generate().map_err(|e| rcgen_err(&what, e))?;
    let mut params =
        CertificateParams::new(vec!["localhost".to_string()]).map_err(|e| rcgen_err(&what, e))?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params.distinguished_name = dn(common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = usages;
    params.use_authority_key_identifier_extension = true;
    if expired {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let cert = params
        .signed_by(&key, ca, ca_key)
        .map_err(|e| rcgen_err(&what, e))?;
    Ok((cert.pem(), key.serialize_pem()))
}

impl TestPki {
    /// Makes a new CA, a server and a client certificate, and writes them as PEM files into
    /// `dir` (created if missing; existing files of the same names are replaced).
    ///
    /// # Errors
    ///
    /// A key or certificate cannot be made, or a file cannot be written (the error names it).
    pub fn generate(dir: &Path) -> io::Result<TestPki> {
        TestPki::generate_inner(dir, false)
    }

    /// As [`generate`](Self::generate), but the server certificate expired long ago (valid
    /// during the year 2000 only), for tests that expect a client to refuse the server.
    ///
    /// # Errors
    ///
    /// As [`generate`](Self::generate).
    pub fn generate_with_expired_server_cert(dir: &Path) -> io::Result<TestPki> {
        TestPki::generate_inner(dir, true)
    }

    fn generate_inner(dir: &Path, expired_server: bool) -> io::Result<TestPki> {
        fs::create_dir_all(dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("TestPki: cannot create {}: {e}", dir.display()),
            )
        })?;
        let what = "make the CA certificate";
        let ca_key = KeyPair::generate().map_err(|e| rcgen_err(what, e))?;
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| rcgen_err(what, e))?;
        params.distinguished_name = dn(&format!(
            "zkguard test CA {}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params
            .self_signed(&ca_key)
            .map_err(|e| rcgen_err(what, e))?;
        let (server_cert, server_key) = leaf(
            "localhost",
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
            expired_server,
            &ca,
            &ca_key,
        )?;
        let (client_cert, client_key) = leaf(
            "zkguard-test-client",
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            false,
            &ca,
            &ca_key,
        )?;
        let pair = |cert: String, key: String, c: &str, k: &str, ks: &str| -> io::Result<PemPair> {
            let p = PemPair {
                cert_path: dir.join(c),
                key_path: dir.join(k),
                keystore_path: dir.join(ks),
                cert_pem: cert,
                key_pem: key,
            };
            write(&p.cert_path, &p.cert_pem)?;
            write(&p.key_path, &p.key_pem)?;
            write(&p.keystore_path, &format!("{}{}", p.cert_pem, p.key_pem))?;
            Ok(p)
        };
        let pki = TestPki {
            dir: dir.to_path_buf(),
            ca_cert_pem: ca.pem(),
            ca_key_pem: ca_key.serialize_pem(),
            server: pair(
                server_cert,
                server_key,
                SERVER_CERT,
                SERVER_KEY,
                SERVER_KEYSTORE,
            )?,
            client: pair(
                client_cert,
                client_key,
                CLIENT_CERT,
                CLIENT_KEY,
                CLIENT_KEYSTORE,
            )?,
        };
        write(&pki.ca_cert_path(), &pki.ca_cert_pem)?;
        write(&pki.dir.join(CA_KEY), &pki.ca_key_pem)?;
        Ok(pki)
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate: trust this to accept the server (and the server trusts it to
    /// accept the client).
    pub fn ca_cert_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// The file holding [`ca_cert_pem`](Self::ca_cert_pem) (`ca.pem`).
    pub fn ca_cert_path(&self) -> PathBuf {
        self.dir.join(CA_CERT)
    }

    /// The CA's private key (PKCS#8 PEM; also in `ca-key.pem`), for tests that sign
    /// certificates of their own.
    pub fn ca_key_pem(&self) -> &str {
        &self.ca_key_pem
    }

    /// The server certificate (for `localhost` and 127.0.0.1) and its key.
    pub fn server(&self) -> &PemPair {
        &self.server
    }

    /// The client certificate (common name `zkguard-test-client`) and its key, for mutual
    /// TLS.
    pub fn client(&self) -> &PemPair {
        &self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_and_distinct_cas() {
        let dir = std::env::temp_dir().join(format!("zkguard-pki-{}", uuid::Uuid::new_v4()));
        let a = TestPki::generate(&dir.join("a")).expect("pki a");
        let b = TestPki::generate(&dir.join("b")).expect("pki b");
        assert_ne!(a.ca_cert_pem(), b.ca_cert_pem());
        for p in [a.server(), a.client()] {
            assert_eq!(
                fs::read_to_string(p.cert_path()).expect("cert"),
                p.cert_pem()
            );
            assert_eq!(fs::read_to_string(p.key_path()).expect("key"), p.key_pem());
            let ks = fs::read_to_string(p.keystore_path()).expect("keystore");
            assert!(ks.contains("BEGIN CERTIFICATE") && ks.contains("BEGIN PRIVATE KEY"));
        }
        assert_eq!(
            fs::read_to_string(a.ca_cert_path()).expect("ca"),
            a.ca_cert_pem()
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
