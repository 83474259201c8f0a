//! The platform's GSSAPI (feature `kerberos`), loaded at run time: the few functions of
//! RFC 2744's C binding the Kerberos mechanism uses, and MIT Kerberos' credential-store
//! extension `gss_acquire_cred_from`. The only `unsafe` code of the crate is here.
//!
//! Nothing is linked at build time (no headers, no libclang, no pkg-config): the library is
//! loaded with `libloading` at the first Kerberos login and kept for the process, from
//! `ZKGUARD_GSSAPI_LIBRARY` when that is set, else `libgssapi_krb5.so.2` then
//! `libgssapi_krb5.so` (MIT Kerberos; Debian/Ubuntu `libgssapi-krb5-2`, Fedora/RHEL
//! `krb5-libs`). A process without it fails each Kerberos login with
//! `KerberosCause::LibraryUnavailable`, naming the package (and tries to load it again at
//! the next login); nothing else is affected.
//!
//! The safe handles ([`Name`], [`Cred`], [`Context`]) release what they hold on drop. The
//! loaded library is never unloaded (it lives in a `static`), so the function pointers taken
//! from it stay valid for the life of the process.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

use libloading::Library;

/// The environment variable naming the GSSAPI library to load instead of the default names
/// (a path, or a name the dynamic loader searches for), read when the library is loaded.
pub(crate) const LIBRARY_ENV: &str = "ZKGUARD_GSSAPI_LIBRARY";

/// The names tried in turn when [`LIBRARY_ENV`] is not set: MIT Kerberos' GSSAPI library
/// (its runtime name, then the development symlink).
const DEFAULT_NAMES: &[&str] = &["libgssapi_krb5.so.2", "libgssapi_krb5.so"];

/// What to install when the library is missing.
const PACKAGE_HINT: &str = "install MIT Kerberos' GSSAPI library (Debian/Ubuntu: \
    libgssapi-krb5-2; Fedora/RHEL: krb5-libs), or name the library in ZKGUARD_GSSAPI_LIBRARY";

// RFC 2744's C types, as MIT's gssapi.h declares them on Unix.
type OmUint32 = u32;
type RawName = *mut c_void;
type RawCred = *mut c_void;
type RawCtx = *mut c_void;

#[repr(C)]
struct OidDesc {
    length: OmUint32,
    elements: *mut c_void,
}

#[repr(C)]
struct BufferDesc {
    length: usize,
    value: *mut c_void,
}

/// MIT's `gss_key_value_element_desc` (a credential-store entry).
#[repr(C)]
struct KeyValueElement {
    key: *const c_char,
    value: *const c_char,
}

/// MIT's `gss_key_value_set_desc`.
#[repr(C)]
struct KeyValueSet {
    count: OmUint32,
    elements: *mut KeyValueElement,
}

const GSS_S_COMPLETE: OmUint32 = 0;
const GSS_S_CONTINUE_NEEDED: OmUint32 = 1;
/// The calling and routine error bits of a major status (RFC 2744 §3.9.1).
const ERROR_MASK: OmUint32 = 0xffff_0000;
const GSS_C_INDEFINITE: OmUint32 = 0xffff_ffff;
const GSS_C_INITIATE: c_int = 1;
const GSS_C_GSS_CODE: c_int = 1;
const GSS_C_MECH_CODE: c_int = 2;
const GSS_C_QOP_DEFAULT: OmUint32 = 0;
/// `GSS_C_MUTUAL_FLAG | GSS_C_INTEG_FLAG`: the server proves itself; wrap may sign.
const CONTEXT_FLAGS: OmUint32 = 2 | 32;

/// `GSS_C_NT_HOSTBASED_SERVICE`, 1.2.840.113554.1.2.1.4 (RFC 2744 §4).
const NT_HOSTBASED_SERVICE: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x04";
/// `GSS_KRB5_NT_PRINCIPAL_NAME`, 1.2.840.113554.1.2.2.1 (RFC 1964 §2.1.1).
const NT_KRB5_PRINCIPAL: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01";
/// The Kerberos V5 mechanism, 1.2.840.113554.1.2.2 (RFC 1964 §1).
const MECH_KRB5: &[u8] = b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02";

type ImportName =
    unsafe extern "C" fn(*mut OmUint32, *mut BufferDesc, *mut OidDesc, *mut RawName) -> OmUint32;
/// `gss_release_name` and `gss_release_cred`.
type ReleaseHandle = unsafe extern "C" fn(*mut OmUint32, *mut *mut c_void) -> OmUint32;
type AcquireCredFrom = unsafe extern "C" fn(
    *mut OmUint32,
    RawName,
    OmUint32,
    *mut c_void,
    c_int,
    *const KeyValueSet,
    *mut RawCred,
    *mut *mut c_void,
    *mut OmUint32,
) -> OmUint32;
type InitSecContext = unsafe extern "C" fn(
    *mut OmUint32,
    RawCred,
    *mut RawCtx,
    RawName,
    *mut OidDesc,
    OmUint32,
    OmUint32,
    *mut c_void,
    *mut BufferDesc,
    *mut *mut OidDesc,
    *mut BufferDesc,
    *mut OmUint32,
    *mut OmUint32,
) -> OmUint32;
type DeleteSecContext =
    unsafe extern "C" fn(*mut OmUint32, *mut RawCtx, *mut BufferDesc) -> OmUint32;
type Wrap = unsafe extern "C" fn(
    *mut OmUint32,
    RawCtx,
    c_int,
    OmUint32,
    *mut BufferDesc,
    *mut c_int,
    *mut BufferDesc,
) -> OmUint32;
type Unwrap = unsafe extern "C" fn(
    *mut OmUint32,
    RawCtx,
    *mut BufferDesc,
    *mut BufferDesc,
    *mut c_int,
    *mut OmUint32,
) -> OmUint32;
type ReleaseBuffer = unsafe extern "C" fn(*mut OmUint32, *mut BufferDesc) -> OmUint32;
type DisplayStatus = unsafe extern "C" fn(
    *mut OmUint32,
    OmUint32,
    c_int,
    *mut OidDesc,
    *mut OmUint32,
    *mut BufferDesc,
) -> OmUint32;

/// The loaded library and its functions.
pub(crate) struct Gss {
    /// Where it was loaded from, for messages.
    path: String,
    import_name: ImportName,
    release_name: ReleaseHandle,
    /// MIT's extension: absent from Heimdal's GSSAPI.
    acquire_cred_from: Option<AcquireCredFrom>,
    release_cred: ReleaseHandle,
    init_sec_context: InitSecContext,
    delete_sec_context: DeleteSecContext,
    wrap: Wrap,
    unwrap: Unwrap,
    release_buffer: ReleaseBuffer,
    display_status: DisplayStatus,
    /// Kept so that the functions above stay mapped (never dropped: it lives in a static).
    _library: Library,
}

/// A GSSAPI status: the major (GSSAPI's) and minor (the mechanism's, MIT's error code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

/// The kinds of names the mechanism imports.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NameType {
    /// `service@host`, left to the library to canonicalize.
    HostBasedService,
    /// A Kerberos principal, `service/host@REALM` or `alice@REALM`.
    Principal,
}

/// The GSSAPI of this process: loaded once, at the first call that finds it, and the same
/// library every later call. A failure (a sentence naming the package to install) is not
/// kept: the next login tries again, so a daemon recovers once the package is installed.
pub(crate) fn library() -> Result<&'static Gss, String> {
    static LOADED: OnceLock<Gss> = OnceLock::new();
    if let Some(gss) = LOADED.get() {
        return Ok(gss);
    }
    let gss = match std::env::var_os(LIBRARY_ENV) {
        Some(named) if !named.is_empty() => load(&[&named.to_string_lossy()])?,
        _ => load(DEFAULT_NAMES)?,
    };
    // Two threads may both have loaded it: one `Gss` is kept, the other dropped (the
    // library stays loaded: the dynamic loader counts its references).
    Ok(LOADED.get_or_init(|| gss))
}

/// Loads the first of `names` that loads and has every function (pure but for the loading:
/// the unit tests call it with names that fail).
pub(crate) fn load(names: &[&str]) -> Result<Gss, String> {
    let mut first_error = None;
    for name in names {
        // SAFETY: loading runs the library's initializers; MIT's (and any GSSAPI library's)
        // are safe to run in any process, on any thread.
        match unsafe { Library::new(name) } {
            Ok(lib) => return resolve(name, lib),
            Err(e) => {
                first_error.get_or_insert(e.to_string());
            }
        }
    }
    Err(format!(
        "cannot load {}: {}; {PACKAGE_HINT}",
        names.join(" or "),
        first_error.unwrap_or_else(|| "no name to try".into())
    ))
}

/// Takes every function out of a loaded library.
fn resolve(name: &str, lib: Library) -> Result<Gss, String> {
    fn get<T: Copy>(lib: &Library, name: &str, symbol: &str) -> Result<T, String> {
        // SAFETY: every `T` used is the RFC 2744 (or MIT) prototype of `symbol`, copied
        // from gssapi.h; the pointer is used only while `lib` is loaded (it is kept in the
        // same `Gss`, which is never dropped once in the static).
        unsafe { lib.get::<T>(symbol.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| {
                format!("{name} is not a usable GSSAPI library ({symbol}: {e}); {PACKAGE_HINT}")
            })
    }
    Ok(Gss {
        path: name.to_string(),
        import_name: get(&lib, name, "gss_import_name")?,
        release_name: get(&lib, name, "gss_release_name")?,
        acquire_cred_from: get(&lib, name, "gss_acquire_cred_from").ok(),
        release_cred: get(&lib, name, "gss_release_cred")?,
        init_sec_context: get(&lib, name, "gss_init_sec_context")?,
        delete_sec_context: get(&lib, name, "gss_delete_sec_context")?,
        wrap: get(&lib, name, "gss_wrap")?,
        unwrap: get(&lib, name, "gss_unwrap")?,
        release_buffer: get(&lib, name, "gss_release_buffer")?,
        display_status: get(&lib, name, "gss_display_status")?,
        _library: lib,
    })
}

/// An OID descriptor pointing at one of the constant OIDs above (GSSAPI only reads it).
fn oid(bytes: &'static [u8]) -> OidDesc {
    OidDesc {
        length: bytes.len() as OmUint32,
        elements: bytes.as_ptr().cast_mut().cast(),
    }
}

/// A buffer descriptor lending `bytes` to a call that only reads it.
fn lend(bytes: &[u8]) -> BufferDesc {
    BufferDesc {
        length: bytes.len(),
        value: bytes.as_ptr().cast_mut().cast(),
    }
}

fn empty_buffer() -> BufferDesc {
    BufferDesc {
        length: 0,
        value: ptr::null_mut(),
    }
}

fn check(major: OmUint32, minor: OmUint32) -> Result<(), Status> {
    if major & ERROR_MASK == 0 {
        Ok(())
    } else {
        Err(Status { major, minor })
    }
}

impl Gss {
    /// Copies a buffer GSSAPI allocated and releases it.
    fn take(&self, mut buf: BufferDesc) -> Vec<u8> {
        let bytes = if buf.value.is_null() || buf.length == 0 {
            Vec::new()
        } else {
            // SAFETY: GSSAPI filled `buf` with `length` readable bytes at `value`.
            unsafe { std::slice::from_raw_parts(buf.value.cast::<u8>(), buf.length) }.to_vec()
        };
        let mut minor = 0;
        // SAFETY: a buffer GSSAPI allocated (or empty), released once.
        unsafe { (self.release_buffer)(&mut minor, &mut buf) };
        bytes
    }

    /// GSSAPI's words for a status: the major status's messages, then the mechanism's.
    pub(crate) fn describe(&self, status: Status) -> String {
        let mut words = Vec::new();
        for (code, kind) in [
            (status.major, GSS_C_GSS_CODE),
            (status.minor, GSS_C_MECH_CODE),
        ] {
            if code == 0 {
                continue;
            }
            let mut context: OmUint32 = 0;
            // A status has a few messages; the bound guards against a library that loops.
            for _ in 0..8 {
                let (mut minor, mut out) = (0, empty_buffer());
                // SAFETY: every pointer is valid for the call; `out` is released by `take`.
                let major = unsafe {
                    (self.display_status)(
                        &mut minor,
                        code,
                        kind,
                        ptr::null_mut(),
                        &mut context,
                        &mut out,
                    )
                };
                if major != GSS_S_COMPLETE {
                    words.push(format!("GSSAPI status {code:#x}"));
                    break;
                }
                words.push(String::from_utf8_lossy(&self.take(out)).trim().to_string());
                if context == 0 {
                    break;
                }
            }
        }
        // A major status of "see the minor code" says nothing the minor's words do not.
        words.retain(|w| !w.is_empty() && !w.starts_with("Unspecified GSS failure"));
        words.join(": ")
    }

    /// Imports a name of the given type.
    pub(crate) fn import_name(&self, name: &str, kind: NameType) -> Result<Name, Status> {
        let mut oid = oid(match kind {
            NameType::HostBasedService => NT_HOSTBASED_SERVICE,
            NameType::Principal => NT_KRB5_PRINCIPAL,
        });
        let mut buf = lend(name.as_bytes());
        let (mut minor, mut raw) = (0, ptr::null_mut());
        // SAFETY: the buffer and OID point at live memory for the call (GSSAPI copies
        // both); the name made is owned by the returned `Name`.
        let major = unsafe { (self.import_name)(&mut minor, &mut buf, &mut oid, &mut raw) };
        check(major, minor)?;
        Ok(Name(Owned {
            raw,
            release: self.release_name,
        }))
    }

    /// Acquires initiator credentials from a credential store (`ccache`, `client_keytab`
    /// entries), for `name` or the store's default principal. `Err(None)` when the library
    /// lacks `gss_acquire_cred_from` (Heimdal).
    pub(crate) fn acquire_cred_from(
        &self,
        name: Option<&Name>,
        store: &[(&CStr, CString)],
    ) -> Result<Cred, Option<Status>> {
        let acquire = self.acquire_cred_from.ok_or(None)?;
        let mut elements: Vec<KeyValueElement> = store
            .iter()
            .map(|(k, v)| KeyValueElement {
                key: k.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let set = KeyValueSet {
            count: elements.len() as OmUint32,
            elements: elements.as_mut_ptr(),
        };
        let (mut minor, mut raw) = (0, ptr::null_mut());
        // SAFETY: every pointer is valid for the call (the strings and elements outlive
        // it); the credential made is owned by the returned `Cred`.
        let major = unsafe {
            acquire(
                &mut minor,
                name.map_or(ptr::null_mut(), |n| n.0.raw),
                GSS_C_INDEFINITE,
                ptr::null_mut(),
                GSS_C_INITIATE,
                &set,
                &mut raw,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        check(major, minor).map_err(Some)?;
        Ok(Cred(Owned {
            raw,
            release: self.release_cred,
        }))
    }

    /// Where the library was loaded from.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }
}

/// A GSSAPI object made for us (a name, credentials), released on drop by its release
/// function (`gss_release_name`, `gss_release_cred`: the same prototype).
struct Owned {
    raw: *mut c_void,
    release: ReleaseHandle,
}

impl Drop for Owned {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: an object the matching GSSAPI call made, owned by nobody else, released
        // once, by the release function of its kind.
        unsafe { (self.release)(&mut minor, &mut self.raw) };
    }
}

/// An imported name, released on drop.
pub(crate) struct Name(Owned);

/// Credentials, released on drop.
pub(crate) struct Cred(Owned);

/// An initiator's security context with one server (Kerberos V5, mutual authentication
/// and integrity requested), deleted on drop.
pub(crate) struct Context {
    gss: &'static Gss,
    raw: RawCtx,
    target: Name,
    /// `None`: the environment's default credentials.
    cred: Option<Cred>,
    complete: bool,
}

impl Context {
    /// A context to establish with `target`.
    pub(crate) fn new(gss: &'static Gss, target: Name, cred: Option<Cred>) -> Context {
        Context {
            gss,
            raw: ptr::null_mut(),
            target,
            cred,
            complete: false,
        }
    }

    /// One call of `gss_init_sec_context`: the server's token (none the first time) in,
    /// the token to send out (empty when there is nothing to send).
    pub(crate) fn step(&mut self, token: Option<&[u8]>) -> Result<Vec<u8>, Status> {
        let mut mech = oid(MECH_KRB5);
        let mut input = token.map(lend);
        let (mut minor, mut out) = (0, empty_buffer());
        // SAFETY: every pointer is valid for the call (the input token, the OID and the
        // handles outlive it); `self.raw` is the context the previous calls made (or none);
        // `out` is released by `take`.
        let major = unsafe {
            (self.gss.init_sec_context)(
                &mut minor,
                self.cred.as_ref().map_or(ptr::null_mut(), |c| c.0.raw),
                &mut self.raw,
                self.target.0.raw,
                &mut mech,
                CONTEXT_FLAGS,
                GSS_C_INDEFINITE,
                ptr::null_mut(),
                input
                    .as_mut()
                    .map_or(ptr::null_mut(), |b| b as *mut BufferDesc),
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let out = self.gss.take(out);
        check(major, minor)?;
        self.complete = major & GSS_S_CONTINUE_NEEDED == 0;
        Ok(out)
    }

    /// Whether the context is established.
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// `gss_wrap` without confidentiality (integrity only).
    pub(crate) fn wrap(&self, message: &[u8]) -> Result<Vec<u8>, Status> {
        let mut input = lend(message);
        let (mut minor, mut out) = (0, empty_buffer());
        // SAFETY: an established context; the input is read only; `out` released by `take`.
        let major = unsafe {
            (self.gss.wrap)(
                &mut minor,
                self.raw,
                0,
                GSS_C_QOP_DEFAULT,
                &mut input,
                ptr::null_mut(),
                &mut out,
            )
        };
        let out = self.gss.take(out);
        exactly_complete(major, minor)?;
        Ok(out)
    }

    /// `gss_unwrap`: the message a wrapped token carries.
    pub(crate) fn unwrap(&self, token: &[u8]) -> Result<Vec<u8>, Status> {
        let mut input = lend(token);
        let (mut minor, mut out) = (0, empty_buffer());
        // SAFETY: an established context; the input is read only; `out` released by `take`.
        let major = unsafe {
            (self.gss.unwrap)(
                &mut minor,
                self.raw,
                &mut input,
                &mut out,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let out = self.gss.take(out);
        exactly_complete(major, minor)?;
        Ok(out)
    }
}

/// Wrap and unwrap accept no supplementary status either (a replayed or out-of-order
/// token is refused).
fn exactly_complete(major: OmUint32, minor: OmUint32) -> Result<(), Status> {
    if major == GSS_S_COMPLETE {
        Ok(())
    } else {
        Err(Status { major, minor })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        let mut minor = 0;
        // SAFETY: a context gss_init_sec_context made, owned by nobody else, deleted once
        // (no output token asked for).
        unsafe { (self.gss.delete_sec_context)(&mut minor, &mut self.raw, ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_the_package() {
        let e = load(&["/nonexistent/libgssapi_krb5.so.2"])
            .err()
            .unwrap_or_default();
        assert!(e.contains("/nonexistent/libgssapi_krb5.so.2"), "{e}");
        assert!(e.contains("libgssapi-krb5-2"), "{e}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_library_without_gssapi_is_refused_by_name() {
        let e = load(&["libc.so.6"]).err().unwrap_or_default();
        assert!(e.contains("gss_import_name"), "{e}");
        assert!(e.contains("libgssapi-krb5-2"), "{e}");
    }
}
