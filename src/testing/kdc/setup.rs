//! Setting the KDC up: finding the tools, its configuration files, running `krb5kdc`
//! and the tools.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{TestKdc, READY_LINE, REALM, START_DEADLINE};
use crate::testing::cluster::{free_port, WATCHDOG_SCRIPT};
use crate::testing::discover::{self, needs, RealProbe};

/// The paths of MIT Kerberos' tools.
#[derive(Debug)]
pub(super) struct Tools {
    pub(super) krb5kdc: PathBuf,
    pub(super) kdb5_util: PathBuf,
    pub(super) kadmin: PathBuf,
    pub(super) kinit: PathBuf,
    pub(super) klist: PathBuf,
}

impl Tools {
    pub(super) fn find() -> io::Result<Tools> {
        needs::ensure(needs::KERBEROS)?;
        let find = |tool: &str| {
            discover::find_kerberos_tool(&RealProbe, tool).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("`{tool}` was found a moment ago and is gone"),
                )
            })
        };
        Ok(Tools {
            krb5kdc: find("krb5kdc")?,
            kdb5_util: find("kdb5_util")?,
            kadmin: find("kadmin.local")?,
            kinit: find("kinit")?,
            klist: find("klist")?,
        })
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The running `krb5kdc`.
    pub(super) kdc: Option<Child>,
    /// Keytab of each principal made by [`TestKdc::add_principal`], by name.
    pub(super) keytabs: HashMap<String, PathBuf>,
    /// Files handed out so far (keytabs and credential caches), for unique names.
    pub(super) files: u64,
}
pub(super) fn other(msg: String) -> io::Error {
    io::Error::other(msg)
}

pub(super) fn write(path: &Path, text: &str) -> io::Result<()> {
    fs::write(path, text).map_err(|e| other(format!("cannot write {}: {e}", path.display())))
}

/// `krb5.conf` for clients of the KDC at `127.0.0.1:port`, with everything else in `dir`.
pub(super) fn krb5_conf_text(dir: &Path, port: u16) -> String {
    let mut s = String::from("# written by zkguard::testing::TestKdc\n[libdefaults]\n");
    for line in [
        format!("default_realm = {REALM}"),
        "dns_lookup_kdc = false".into(),
        "dns_lookup_realm = false".into(),
        // zookeeper@127.0.0.1 becomes zookeeper/localhost@ZKGUARD.TEST.
        "rdns = true".into(),
        "dns_canonicalize_hostname = true".into(),
        // A stopped KDC is noticed at once (TCP is refused) or within 2 s.
        "kdc_timeout = 2s".into(),
        "max_retries = 1".into(),
        "udp_preference_limit = 1".into(),
        "ticket_lifetime = 10h".into(),
        // An expired ticket is refused 2 s after its end (Kerberos' default tolerance,
        // 5 minutes, would keep it working that long): tests of expiry wait seconds.
        "clockskew = 2".into(),
        "forwardable = false".into(),
        // Not the machine's default credential cache and client keytab.
        format!(
            "default_ccache_name = FILE:{}/ccache-default",
            dir.display()
        ),
        format!(
            "default_client_keytab_name = FILE:{}/client-default.keytab",
            dir.display()
        ),
    ] {
        let _ = writeln!(s, "    {line}");
    }
    let _ = write!(
        s,
        "[realms]\n    {REALM} = {{\n        kdc = 127.0.0.1:{port}\n    }}\n\
         [domain_realm]\n    localhost = {REALM}\n    127.0.0.1 = {REALM}\n"
    );
    s
}

/// `kdc.conf`: listen on `127.0.0.1:port` only (UDP and TCP), the database in `dir`.
pub(super) fn kdc_conf_text(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "# written by zkguard::testing::TestKdc\n\
         [kdcdefaults]\n    kdc_listen = 127.0.0.1:{port}\n    kdc_tcp_listen = 127.0.0.1:{port}\n\
         [realms]\n    {REALM} = {{\n        database_name = {d}/principal\n        \
         key_stash_file = {d}/stash\n        acl_file = {d}/kadm5.acl\n        \
         max_life = 7d\n        max_renewable_life = 7d\n    }}\n\
         [logging]\n    kdc = FILE:{d}/kdc.log\n    admin_server = FILE:{d}/kadmin.log\n    \
         default = FILE:{d}/krb5lib.log\n"
    )
}

/// Checks a principal name given without realm: `alice`, `zookeeper/localhost`.
pub(super) fn validate_principal(name: &str) -> io::Result<()> {
    let bad = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_')));
    if name.is_empty() || name.starts_with('/') || name.ends_with('/') || bad.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "principal name {name:?} is not valid: give it without realm (`alice`, \
                 `zookeeper/localhost`), made of ASCII letters, digits, '/', '.', '-' and '_'"
            ),
        ));
    }
    Ok(())
}

/// The last lines of a file, for error messages.
fn tail(path: &Path, n: usize) -> String {
    match fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// A free loopback port for both TCP and UDP.
pub(super) fn free_kdc_port() -> io::Result<u16> {
    for _ in 0..20 {
        let port = free_port()?;
        if UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(port);
        }
    }
    Err(other(
        "found no loopback port free for both TCP and UDP for the KDC".into(),
    ))
}

impl TestKdc {
    /// A command for a Kerberos tool, with this KDC's configuration.
    pub(super) fn command(&self, tool: &Path) -> Command {
        let mut cmd = Command::new(tool);
        cmd.env("KRB5_CONFIG", self.krb5_conf())
            .env("KRB5_KDC_PROFILE", self.kdc_conf())
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs a tool to its end; its output (stdout and stderr) when it succeeds, else an
    /// error naming the command and quoting the output.
    pub(super) fn run(&self, tool: &Path, args: &[&str]) -> io::Result<String> {
        let shown = || {
            let name = tool.file_name().map(OsString::from).unwrap_or_default();
            format!("{} {}", name.to_string_lossy(), args.join(" "))
        };
        let out = self
            .command(tool)
            .args(args)
            .output()
            .map_err(|e| other(format!("cannot run `{}`: {e}", shown())))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(other(format!(
                "`{}` failed ({}): {}",
                shown(),
                out.status,
                text.trim()
            )))
        }
    }

    /// Spawns `krb5kdc -n` and waits for its "commencing operation" log line.
    pub(super) fn start_kdc(&self) -> io::Result<()> {
        let started = Instant::now();
        let log = self.dir.join("kdc.log");
        let out = self.dir.join("krb5kdc.out");
        let offset = fs::metadata(&log).map_or(0, |m| m.len());
        let out_file = fs::File::create(&out)
            .map_err(|e| other(format!("cannot create {}: {e}", out.display())))?;
        let err_file = out_file
            .try_clone()
            .map_err(|e| other(format!("cannot duplicate {}: {e}", out.display())))?;
        let mut state = self.state.lock();
        let child = self
            .command(&self.tools.krb5kdc)
            .arg("-n")
            .arg("-r")
            .arg(REALM)
            .arg("-P")
            .arg(self.dir.join("kdc.pid"))
            .stdout(out_file)
            .stderr(err_file)
            .spawn()
            .map_err(|e| other(format!("cannot run {}: {e}", self.tools.krb5kdc.display())))?;
        // The watchdog kills the pid in this file; krb5kdc writes it too, later.
        write(&self.dir.join("kdc.pid"), &child.id().to_string())?;
        let child = state.kdc.insert(child);
        let port = *self.port.lock();
        let failure = |why: String| {
            let log_tail = tail(&log, 10);
            let kind = if log_tail.contains("Address already in use") {
                io::ErrorKind::AddrInUse
            } else {
                io::ErrorKind::Other
            };
            io::Error::new(
                kind,
                format!(
                    "krb5kdc on 127.0.0.1:{port} {why}; its output: {}; last lines of {}:\n{log_tail}",
                    tail(&out, 10),
                    log.display()
                ),
            )
        };
        loop {
            let fresh = fs::read(&log)
                .ok()
                .and_then(|b| b.get(offset as usize..).map(|b| b.to_vec()))
                .unwrap_or_default();
            if String::from_utf8_lossy(&fresh).contains(READY_LINE) {
                log::info!(
                    "zkguard TestKdc: krb5kdc serves {REALM} on 127.0.0.1:{port} after {} ms",
                    started.elapsed().as_millis()
                );
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                state.kdc = None;
                return Err(failure(format!("exited ({status})")));
            }
            if started.elapsed() > START_DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                state.kdc = None;
                return Err(failure(format!(
                    "did not serve within {} s",
                    START_DEADLINE.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(super) fn start_watchdog(&self) -> io::Result<()> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("zkguard-kdc-watchdog")
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| other(format!("cannot start the watchdog shell (`sh`): {e}")))?;
        let stdin = child.stdin.take();
        *self.watchdog.lock() = Some((child, stdin));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_files() {
        let dir = Path::new("/tmp/k");
        let krb5 = krb5_conf_text(dir, 7088);
        for line in [
            "default_realm = ZKGUARD.TEST",
            "dns_lookup_kdc = false",
            "rdns = true",
            "dns_canonicalize_hostname = true",
            "udp_preference_limit = 1",
            "default_ccache_name = FILE:/tmp/k/ccache-default",
            "kdc = 127.0.0.1:7088",
            "localhost = ZKGUARD.TEST",
            "127.0.0.1 = ZKGUARD.TEST",
        ] {
            assert!(krb5.contains(line), "{krb5} lacks {line}");
        }
        let kdc = kdc_conf_text(dir, 7088);
        for line in [
            "kdc_listen = 127.0.0.1:7088",
            "kdc_tcp_listen = 127.0.0.1:7088",
            "database_name = /tmp/k/principal",
            "max_life = 7d",
            "kdc = FILE:/tmp/k/kdc.log",
        ] {
            assert!(kdc.contains(line), "{kdc} lacks {line}");
        }
        // No per-realm ports: they would add wildcard listeners.
        assert!(!kdc.contains("kdc_ports"), "{kdc}");
    }

    #[test]
    fn principal_names() {
        for good in ["alice", "zookeeper/localhost", "svc-1/host.example_2"] {
            validate_principal(good).expect(good);
        }
        for bad in ["", "alice@ZKGUARD.TEST", "a b", "/x", "x/", "al'ice"] {
            let e = validate_principal(bad).expect_err(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
