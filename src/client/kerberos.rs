//! Kerberos logins (feature `kerberos`): the options a user sets ([`Kerberos`]) and the
//! SASL GSSAPI mechanism (RFC 4752) as ZooKeeper's server runs it, on the platform's GSSAPI
//! (MIT Kerberos' `libgssapi_krb5`), loaded at run time by `gssapi.rs`. The connection layer
//! carries the tokens in `sasl` requests (see `conn/connect.rs`), like DIGEST-MD5's.
//!
//! The exchange: the client's context tokens (the AP-REQ, answered by the server's AP-REP:
//! mutual authentication), then an empty token once the client's context is complete; the
//! server then offers its security layers in a wrapped 4-byte message, the client answers
//! "no security layer" (authentication only, as ZooKeeper's Java client does) wrapped the
//! same way, and the server's last (empty) reply ends it.

use std::ffi::{CStr, CString};
use std::fmt;
use std::path::{Path, PathBuf};

use super::gssapi::{self, Context, Cred, Gss, NameType, Status};
use crate::error::{ConnectFailure, Error, KerberosCause, Result};

/// A Kerberos login (SASL GSSAPI, feature `kerberos`) for
/// [`ClientBuilder::sasl_kerberos`](super::ClientBuilder::sasl_kerberos).
///
/// By default everything comes from the environment, as for every other Kerberos program:
/// `krb5.conf` (or `KRB5_CONFIG`), the credential cache (`KRB5CCNAME`, filled by `kinit`) and
/// a client keytab (`KRB5_CLIENT_KTNAME`). The server principal is named the way ZooKeeper's
/// Java client names it: `zookeeper/<host>`, the host being the one of the connect string the
/// connection goes to (canonicalized by the Kerberos library as `krb5.conf` says:
/// `dns_canonicalize_hostname`, `rdns`), in the realm `krb5.conf` maps the host to.
///
/// The GSSAPI library (MIT Kerberos' `libgssapi_krb5.so.2`, Debian's `libgssapi-krb5-2`,
/// or the one `ZKGUARD_GSSAPI_LIBRARY` names) is loaded at the first login, not linked:
/// without it a login fails with [`KerberosCause::LibraryUnavailable`].
///
/// ```no_run
/// # fn main() -> zkguard::Result<()> {
/// // A daemon with its own keytab; the servers are zookeeper/<host>@EXAMPLE.COM.
/// let login = zkguard::Kerberos::new()
///     .keytab("/etc/myapp/myapp.keytab")
///     .principal("myapp/worker1.example.com@EXAMPLE.COM");
/// let client = zkguard::Client::builder("zk1.example.com:2181,zk2.example.com:2181")
///     .sasl_kerberos(login)
///     .build()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Kerberos {
    service: String,
    host: Option<String>,
    realm: Option<String>,
    principal: Option<String>,
    ccache: Option<String>,
    keytab: Option<PathBuf>,
}

impl Default for Kerberos {
    fn default() -> Self {
        Kerberos::new()
    }
}

impl Kerberos {
    /// A login with the defaults: service `zookeeper`, the host of each server, the realm
    /// and the client's credentials from the environment.
    pub fn new() -> Kerberos {
        Kerberos {
            service: "zookeeper".into(),
            host: None,
            realm: None,
            principal: None,
            ccache: None,
            keytab: None,
        }
    }

    /// The service part of the server principal (the Java client's
    /// `zookeeper.sasl.client.username`); `zookeeper` by default.
    pub fn service(mut self, service: &str) -> Kerberos {
        self.service = service.to_string();
        self
    }

    /// One host part for every server's principal (`zookeeper/<host>`), in place of each
    /// server's own host from the connect string: for ensembles whose servers share one
    /// principal, or a connect string of addresses that do not resolve back to the names
    /// the principals carry.
    pub fn host(mut self, host: &str) -> Kerberos {
        self.host = Some(host.to_string());
        self
    }

    /// The realm of the server principal (the Java client's `zookeeper.server.realm`). The
    /// principal is then exactly `<service>/<host>@<realm>`, the host taken as it is (not
    /// canonicalized). Without it, `krb5.conf`'s `[domain_realm]` (or the default realm)
    /// decides.
    pub fn realm(mut self, realm: &str) -> Kerberos {
        self.realm = Some(realm.to_string());
        self
    }

    /// The client principal to log in as (`alice@EXAMPLE.COM`): the one to take from a
    /// keytab holding several, or from a cache collection. Without it: the credential
    /// cache's principal, or the keytab's first.
    pub fn principal(mut self, principal: &str) -> Kerberos {
        self.principal = Some(principal.to_string());
        self
    }

    /// The credential cache to use in place of `KRB5CCNAME` (`FILE:/path`, `DIR:…`,
    /// `KEYRING:…`, or a plain path, taken as a file).
    pub fn ccache(mut self, ccache: impl AsRef<Path>) -> Kerberos {
        self.ccache = Some(ccache.as_ref().to_string_lossy().into_owned());
        self
    }

    /// A client keytab to get tickets from (and renew them from when they expire), in place
    /// of `KRB5_CLIENT_KTNAME`. Without [`ccache`](Self::ccache), the tickets are kept in
    /// this process's memory (shared by the clients logging in with the same keytab and
    /// principal): the user's own cache is left alone.
    pub fn keytab(mut self, keytab: impl AsRef<Path>) -> Kerberos {
        self.keytab = Some(keytab.as_ref().to_path_buf());
        self
    }

    /// Checks the options (called by the builder): names neither empty nor holding the
    /// separators that would make them another principal; the keytab readable.
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |name: &'static str, reason: String| Err(Error::InvalidArgument { name, reason });
        let part = |name: &'static str, v: &str, seps: &[char]| -> Result<()> {
            if v.is_empty() {
                return bad(name, "empty".into());
            }
            if let Some(c) = v.chars().find(|c| seps.contains(c) || c.is_control()) {
                return bad(name, format!("{v:?} holds {c:?}"));
            }
            Ok(())
        };
        part("Kerberos service", &self.service, &['/', '@'])?;
        if let Some(h) = &self.host {
            part("Kerberos host", h, &['/', '@'])?;
        }
        if let Some(r) = &self.realm {
            part("Kerberos realm", r, &['/', '@'])?;
        }
        if let Some(p) = &self.principal {
            part("Kerberos principal", p, &[])?;
        }
        if let Some(c) = &self.ccache {
            part("Kerberos credential cache", c, &[])?;
        }
        if let Some(k) = &self.keytab {
            if let Err(e) = std::fs::File::open(k) {
                return bad(
                    "Kerberos keytab",
                    format!("cannot read {}: {e}", k.display()),
                );
            }
        }
        Ok(())
    }

    /// The memory credential cache the tickets from a keytab (without a named cache) go to:
    /// one per keytab and principal in the process, so that a reconnect, and every client
    /// logging in with the same keytab, reuse the tickets, and the caches do not grow with
    /// the number of clients.
    pub(crate) fn memory_cache(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.keytab, &self.principal).hash(&mut h);
        format!("MEMORY:zkguard-{:016x}", h.finish())
    }

    /// What the login is, for logs: the client principal or where its credentials come from.
    pub(crate) fn who(&self) -> String {
        match (&self.principal, &self.keytab, &self.ccache) {
            (Some(p), _, _) => p.clone(),
            (None, Some(k), _) => format!("the first principal of {}", k.display()),
            (None, None, Some(c)) => format!("the principal of the credential cache {c}"),
            (None, None, None) => "the default principal".into(),
        }
    }

    /// The server principal's name for a server at `host` (the host part of its connect
    /// string entry), and whether it is a full principal (a realm was set) or a host-based
    /// service name left to the Kerberos library to canonicalize.
    pub(crate) fn target(&self, host: &str) -> (String, bool) {
        let host = self.host.as_deref().unwrap_or(host);
        match &self.realm {
            Some(realm) => (format!("{}/{host}@{realm}", self.service), true),
            None => (format!("{}@{host}", self.service), false),
        }
    }
}

/// A Kerberos failure: why, and GSSAPI's words for it.
#[derive(Debug)]
pub(crate) struct KerberosFailure {
    cause: KerberosCause,
    reason: String,
}

impl From<KerberosFailure> for ConnectFailure {
    fn from(f: KerberosFailure) -> ConnectFailure {
        ConnectFailure::Kerberos {
            cause: f.cause,
            reason: f.reason,
        }
    }
}

impl fmt::Display for KerberosFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.cause, self.reason)
    }
}

// MIT Kerberos' error codes (krb5.h), as GSSAPI reports them in its minor status.
const C_PRINCIPAL_UNKNOWN: i32 = -1765328378;
const S_PRINCIPAL_UNKNOWN: i32 = -1765328377;
const TKT_EXPIRED: i32 = -1765328352;
const AP_ERR_SKEW: i32 = -1765328347;
const CC_NOTFOUND: i32 = -1765328243;
const KDCREP_SKEW: i32 = -1765328236;
const KDC_UNREACH: i32 = -1765328228;
const KT_NOTFOUND: i32 = -1765328203;
const FCC_NOFILE: i32 = -1765328189;
const REALM_CANT_RESOLVE: i32 = -1765328164;
const KEY_EXP: i32 = -1765328361;

/// The cause a GSSAPI status names (pure: the minor status is MIT's error code).
pub(crate) fn classify(major: u32, minor: u32) -> KerberosCause {
    // Routine errors are bits 16..24 of the major status (RFC 2744).
    const NO_CRED: u32 = 7 << 16;
    const CREDENTIALS_EXPIRED: u32 = 11 << 16;
    match minor as i32 {
        C_PRINCIPAL_UNKNOWN => KerberosCause::UnknownClient,
        S_PRINCIPAL_UNKNOWN => KerberosCause::UnknownServer,
        TKT_EXPIRED | KEY_EXP => KerberosCause::TicketExpired,
        AP_ERR_SKEW | KDCREP_SKEW => KerberosCause::ClockSkew,
        KDC_UNREACH | REALM_CANT_RESOLVE => KerberosCause::KdcUnreachable,
        CC_NOTFOUND | KT_NOTFOUND | FCC_NOFILE => KerberosCause::NoCredentials,
        _ => match major & (0xff << 16) {
            CREDENTIALS_EXPIRED => KerberosCause::TicketExpired,
            NO_CRED => KerberosCause::NoCredentials,
            _ => KerberosCause::Other,
        },
    }
}

fn failure(gss: &Gss, status: Status, during: &str) -> KerberosFailure {
    KerberosFailure {
        cause: classify(status.major, status.minor),
        reason: format!("{during}: {}", gss.describe(status)),
    }
}

/// The client's credentials: `None` for the environment's defaults, or acquired from the
/// given cache, keytab and principal (`gss_acquire_cred_from`, MIT's credential store).
fn credentials(gss: &Gss, login: &Kerberos) -> Result<Option<Cred>, KerberosFailure> {
    if login.principal.is_none() && login.ccache.is_none() && login.keytab.is_none() {
        return Ok(None);
    }
    let bad_string = |what: &str| KerberosFailure {
        cause: KerberosCause::Other,
        reason: format!("the {what} holds a NUL byte"),
    };
    let mut store: Vec<(&CStr, CString)> = Vec::new();
    let ccache = match (&login.ccache, &login.keytab) {
        (Some(c), _) => Some(c.clone()),
        // Tickets from a keytab go to a cache in this process's memory, not the user's.
        (None, Some(_)) => Some(login.memory_cache()),
        (None, None) => None,
    };
    if let Some(c) = ccache {
        store.push((
            c"ccache",
            CString::new(c).map_err(|_| bad_string("credential cache"))?,
        ));
    }
    if let Some(k) = &login.keytab {
        store.push((
            c"client_keytab",
            CString::new(k.to_string_lossy().into_owned()).map_err(|_| bad_string("keytab"))?,
        ));
    }
    let principal = match &login.principal {
        Some(p) => Some(
            gss.import_name(p, NameType::Principal)
                .map_err(|_| KerberosFailure {
                    cause: KerberosCause::Other,
                    reason: format!("the principal {p:?} is not a Kerberos principal name"),
                })?,
        ),
        None => None,
    };
    match gss.acquire_cred_from(principal.as_ref(), &store) {
        Ok(cred) => Ok(Some(cred)),
        Err(Some(status)) => Err(failure(
            gss,
            status,
            &format!("getting the credentials of {}", login.who()),
        )),
        Err(None) => Err(KerberosFailure {
            cause: KerberosCause::LibraryUnavailable,
            reason: format!(
                "{} has no gss_acquire_cred_from (MIT Kerberos' credential store, which \
                 Heimdal lacks), needed to name a keytab, credential cache or principal: use \
                 MIT Kerberos' GSSAPI library (Debian/Ubuntu: libgssapi-krb5-2; name it in \
                 {}), or let the environment name the credentials (KRB5CCNAME, \
                 KRB5_CLIENT_KTNAME)",
                gss.path(),
                gssapi::LIBRARY_ENV
            ),
        }),
    }
}

enum Stage {
    /// Establishing the security context.
    Context,
    /// Context complete: waiting for the server's security-layer offer.
    Layer,
    /// Answered the offer: waiting for the server's last reply.
    Final,
    Done,
}

/// One GSSAPI login with one server.
pub(crate) struct GssapiClient {
    gss: &'static Gss,
    ctx: Context,
    target: String,
    stage: Stage,
}

impl GssapiClient {
    /// Starts a login with the server at `host`: the first token to send (the AP-REQ, which
    /// already needed a service ticket: most failures show here).
    pub(crate) fn start(
        login: &Kerberos,
        host: &str,
    ) -> Result<(GssapiClient, Vec<u8>), KerberosFailure> {
        let gss = gssapi::library().map_err(|reason| KerberosFailure {
            cause: KerberosCause::LibraryUnavailable,
            reason,
        })?;
        let (target, full) = login.target(host);
        let kind = if full {
            NameType::Principal
        } else {
            NameType::HostBasedService
        };
        let name = gss
            .import_name(&target, kind)
            .map_err(|e| KerberosFailure {
                cause: KerberosCause::Other,
                reason: format!("the server principal {target:?}: {}", gss.describe(e)),
            })?;
        let cred = credentials(gss, login)?;
        let mut ctx = Context::new(gss, name, cred);
        let first = ctx.step(None).map_err(|e| {
            failure(
                gss,
                e,
                &format!("logging in as {} to {}", login.who(), display(&target)),
            )
        })?;
        let stage = if ctx.is_complete() {
            Stage::Layer
        } else {
            Stage::Context
        };
        Ok((
            GssapiClient {
                gss,
                ctx,
                target,
                stage,
            },
            first,
        ))
    }

    /// Answers one token of the server: `Some(reply)` to send, or `None` when the login is
    /// complete.
    pub(crate) fn step(
        &mut self,
        token: &[u8],
    ) -> std::result::Result<Option<Vec<u8>>, ConnectFailure> {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Context => {
                let out = self.ctx.step(Some(token)).map_err(|e| {
                    ConnectFailure::from(failure(
                        self.gss,
                        e,
                        &format!("the reply of {}", display(&self.target)),
                    ))
                })?;
                self.stage = if self.ctx.is_complete() {
                    Stage::Layer
                } else {
                    Stage::Context
                };
                // Complete with nothing to send: an empty token asks for the offer.
                Ok(Some(out))
            }
            Stage::Layer => {
                let offer = self.ctx.unwrap(token).map_err(|e| {
                    sasl(format!(
                        "the server's security-layer offer cannot be unwrapped: {}",
                        self.gss.describe(e)
                    ))
                })?;
                let reply = layer_reply(&offer)?;
                let wrapped = self
                    .ctx
                    .wrap(&reply)
                    .map_err(|e| sasl(format!("wrapping the reply: {}", self.gss.describe(e))))?;
                self.stage = Stage::Final;
                Ok(Some(wrapped))
            }
            Stage::Final if token.is_empty() => Ok(None),
            Stage::Final => Err(sasl(
                "the server sent a token after the login was complete".into(),
            )),
            Stage::Done => Err(sasl(
                "the server sent a token after the login was complete".into(),
            )),
        }
    }
}

fn sasl(reason: String) -> ConnectFailure {
    ConnectFailure::Sasl { reason }
}

fn display(target: &str) -> String {
    format!("the server principal {target}")
}

/// RFC 4752 §3.1: the server's offer is 4 bytes, a bit mask of the security layers it
/// supports (1 = none) and its largest buffer; the client answers the layer it picks (none:
/// authentication only) with a zero buffer size and no authorization identity (the server
/// then uses the authenticated principal).
pub(crate) fn layer_reply(offer: &[u8]) -> std::result::Result<Vec<u8>, ConnectFailure> {
    if offer.len() != 4 {
        return Err(sasl(format!(
            "the server's security-layer offer is {} bytes, not 4",
            offer.len()
        )));
    }
    if offer[0] & 1 == 0 {
        return Err(sasl(format!(
            "the server requires a security layer (offer mask {:#04x}); zkguard speaks \
             authentication only",
            offer[0]
        )));
    }
    Ok(vec![1, 0, 0, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_principal_follows_the_java_client() {
        let k = Kerberos::new();
        assert_eq!(
            k.target("zk1.example.com"),
            ("zookeeper@zk1.example.com".into(), false)
        );
        let k = Kerberos::new().service("zk").realm("EXAMPLE.COM");
        assert_eq!(k.target("zk1"), ("zk/zk1@EXAMPLE.COM".into(), true));
        let k = Kerberos::new().host("zk.example.com");
        assert_eq!(
            k.target("10.0.0.1"),
            ("zookeeper@zk.example.com".into(), false)
        );
    }

    #[test]
    fn bad_options_are_named() {
        let e = Kerberos::new().service("").check().unwrap_err();
        assert_eq!(
            e.to_string(),
            Error::InvalidArgument {
                name: "Kerberos service",
                reason: "empty".into()
            }
            .to_string()
        );
        let e = Kerberos::new().host("zk/1").check().unwrap_err();
        assert!(e.to_string().contains("Kerberos host"), "{e}");
        let e = Kerberos::new().realm("A@B").check().unwrap_err();
        assert!(e.to_string().contains("Kerberos realm"), "{e}");
        let e = Kerberos::new()
            .keytab("/nonexistent/zk.keytab")
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/zk.keytab"), "{e}");
        Kerberos::new()
            .principal("alice@EXAMPLE.COM")
            .check()
            .unwrap();
    }

    #[test]
    fn every_named_cause_is_recognized() {
        assert_eq!(
            classify(0, C_PRINCIPAL_UNKNOWN as u32),
            KerberosCause::UnknownClient
        );
        assert_eq!(
            classify(0, S_PRINCIPAL_UNKNOWN as u32),
            KerberosCause::UnknownServer
        );
        assert_eq!(
            classify(0, TKT_EXPIRED as u32),
            KerberosCause::TicketExpired
        );
        assert_eq!(classify(0, AP_ERR_SKEW as u32), KerberosCause::ClockSkew);
        assert_eq!(classify(0, KDCREP_SKEW as u32), KerberosCause::ClockSkew);
        assert_eq!(
            classify(0, KDC_UNREACH as u32),
            KerberosCause::KdcUnreachable
        );
        assert_eq!(classify(0, FCC_NOFILE as u32), KerberosCause::NoCredentials);
        assert_eq!(classify(7 << 16, 0), KerberosCause::NoCredentials);
        assert_eq!(classify(11 << 16, 0), KerberosCause::TicketExpired);
        assert_eq!(classify(13 << 16, 12345), KerberosCause::Other);
    }

    #[test]
    fn the_security_layer_reply_picks_none() {
        assert_eq!(
            layer_reply(&[0x07, 0x01, 0x00, 0x00]).unwrap(),
            vec![1, 0, 0, 0]
        );
        assert!(layer_reply(&[0x06, 0, 0, 0])
            .unwrap_err()
            .to_string()
            .contains("security layer"));
        assert!(layer_reply(&[1, 0, 0])
            .unwrap_err()
            .to_string()
            .contains("3 bytes"));
    }
}
