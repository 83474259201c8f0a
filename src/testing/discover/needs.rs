//! What the tests need from the machine, and installing it: the one place that runs
//! `apt-get`.
//!
//! Each [`Need`] is checked by a pure function over a [`Probe`]; [`plan`] decides from the
//! checks and the [`Machine`] whether everything is there, what to install, or what to tell
//! the user, so the rules have plain unit tests. [`ensure`] carries the plan out: one
//! `apt-get install` of every missing package at a time (parallel tests wait for it), each
//! package at most once per process, with apt's output shown as it runs.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{
    distribution, find_classpath, find_curator, find_jdk_tool, find_kerberos_tool, netty_entries,
    Probe, RealProbe, ENV_CURATOR_CLASSPATH, KERBEROS_TOOL_DIRS, NETTY_OTHERWISE, ZOOKEEPER_PLACES,
};

/// Environment variable that forbids the automatic `apt-get install`.
pub(crate) const ENV_NO_INSTALL: &str = "ZKGUARD_NO_INSTALL";

/// Something a test needs from the machine, with the Debian/Ubuntu package that provides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// A ZooKeeper server distribution (`zookeeper`).
    ZooKeeper,
    /// `java`, to run servers and Java peers (`default-jre-headless`).
    Java,
    /// Netty beside the ZooKeeper distribution, for TLS servers (`libnetty-java`).
    Netty,
    /// Apache Curator's recipes, for interop tests (`libcurator-recipes-java`).
    Curator,
    /// A JDK's `javac`, to compile Java peers (`default-jdk-headless`).
    Javac,
    /// MIT Kerberos' KDC, `krb5kdc` and `kdb5_util`, for a `TestKdc` (`krb5-kdc`).
    Kdc,
    /// MIT Kerberos' `kadmin.local`, to make principals and keytabs (`krb5-admin-server`).
    KdcAdmin,
    /// MIT Kerberos' `kinit` and `klist`, for credential caches (`krb5-user`).
    KerberosUser,
}

/// Everything a `TestKdc` needs.
pub(crate) const KERBEROS: &[Need] = &[Need::Kdc, Need::KdcAdmin, Need::KerberosUser];

/// What a [`Need::check`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// It is there.
    Found,
    /// It is missing (what was looked for); its package would provide it.
    Missing(String),
    /// Something is wrong that installing cannot fix (the message says what to do).
    Broken(String),
}

impl Need {
    /// The Debian/Ubuntu package that provides it.
    pub(crate) fn package(self) -> &'static str {
        match self {
            Need::ZooKeeper => "zookeeper",
            Need::Java => "default-jre-headless",
            Need::Netty => "libnetty-java",
            Need::Curator => "libcurator-recipes-java",
            Need::Javac => "default-jdk-headless",
            Need::Kdc => "krb5-kdc",
            Need::KdcAdmin => "krb5-admin-server",
            Need::KerberosUser => "krb5-user",
        }
    }

    /// What a user can do instead of installing the package.
    fn otherwise(self) -> &'static str {
        match self {
            Need::ZooKeeper => {
                "set ZOOKEEPER_HOME to an unpacked Apache ZooKeeper 3.5+ binary release, or \
                 ZKGUARD_ZOOKEEPER_CLASSPATH to a complete Java class path for the ZooKeeper \
                 server"
            }
            Need::Java => "set JAVA_HOME to a Java runtime",
            Need::Netty => NETTY_OTHERWISE,
            Need::Curator => {
                "set ZKGUARD_CURATOR_CLASSPATH to a complete Java class path for Curator's \
                 recipes"
            }
            Need::Javac => "set JAVA_HOME to a JDK",
            Need::Kdc | Need::KdcAdmin | Need::KerberosUser => {
                "install MIT Kerberos (krb5kdc, kdb5_util, kadmin.local, kinit, klist) so that \
                 its tools are on PATH or in /usr/sbin or /usr/bin"
            }
        }
    }

    /// Whether it is there now.
    pub(crate) fn check(self, probe: &dyn Probe) -> Check {
        let tool = |tool: &str| match find_jdk_tool(probe, tool) {
            Some(_) => Check::Found,
            None => Check::Missing(format!(
                "found no `{tool}` (looked at $JAVA_HOME/bin/{tool} and every PATH entry)"
            )),
        };
        match self {
            Need::ZooKeeper => match find_classpath(probe) {
                Ok(Some(_)) => Check::Found,
                Ok(None) => Check::Missing(format!(
                    "found no ZooKeeper distribution (looked at {ZOOKEEPER_PLACES})"
                )),
                Err(msg) => Check::Broken(msg),
            },
            Need::Kdc => kerberos_tools(probe, &["krb5kdc", "kdb5_util"]),
            Need::KdcAdmin => kerberos_tools(probe, &["kadmin.local"]),
            Need::KerberosUser => kerberos_tools(probe, &["kinit", "klist"]),
            Need::Java => tool("java"),
            Need::Javac => tool("javac"),
            Need::Curator => match find_curator(probe) {
                Ok(Some(_)) => Check::Found,
                Err(msg) => Check::Broken(msg),
                Ok(None) => Check::Missing(format!(
                    "found no Apache Curator (looked at {ENV_CURATOR_CLASSPATH} and \
                     {})",
                    super::DEBIAN_CURATOR
                )),
            },
            // Without a distribution there is nothing to add Netty to yet; Debian's
            // `zookeeper` pulls in `libnetty-java` anyway.
            Need::Netty => match distribution(probe) {
                Err(_) => Check::Missing("found no ZooKeeper distribution with Netty".into()),
                Ok(dist) => match netty_entries(probe, &dist) {
                    Ok(_) => Check::Found,
                    Err(e) if e.debian => Check::Missing(e.what),
                    Err(e) => Check::Broken(e.message()),
                },
            },
        }
    }
}

/// [`Check::Found`] when every one of `tools` is found by [`find_kerberos_tool`].
fn kerberos_tools(probe: &dyn Probe, tools: &[&str]) -> Check {
    match tools
        .iter()
        .find(|t| find_kerberos_tool(probe, t).is_none())
    {
        None => Check::Found,
        Some(tool) => Check::Missing(format!(
            "found no `{tool}` (looked at every PATH entry and {})",
            KERBEROS_TOOL_DIRS.join(", ")
        )),
    }
}

/// Facts about the machine that decide whether an automatic install is allowed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Machine<'a> {
    /// `/etc/debian_version` exists.
    pub(crate) debian: bool,
    /// The process runs as root.
    pub(crate) root: bool,
    /// Packages whose install was already attempted in this process.
    pub(crate) attempted: &'a [&'static str],
}

/// Everything [`ensure`] decided, before any side effect.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Everything is there.
    Ready,
    /// Install these packages (one `apt-get install`), then check again.
    Install(Vec<&'static str>),
    /// Give up with this message.
    Fail(String),
}

/// The command that installs `packages`, as a user should type it.
pub(crate) fn install_command(packages: &[&str], root: bool) -> String {
    let sudo = if root { "" } else { "sudo " };
    format!("{sudo}apt-get install -y {}", packages.join(" "))
}

/// Pure decision: are `needs` met, what to install, or what to tell the user.
///
/// It installs only on a Debian-family machine, as root, when `ZKGUARD_NO_INSTALL` is unset
/// and no missing package was tried before in this process; otherwise the message names
/// what is missing, the exact `apt-get` command, why it did not run, and the alternatives.
pub(crate) fn plan(probe: &dyn Probe, needs: &[Need], machine: Machine) -> Plan {
    let mut missing = Vec::new();
    for &need in needs {
        match need.check(probe) {
            Check::Found => {}
            Check::Missing(what) => missing.push((need, what)),
            Check::Broken(msg) => return Plan::Fail(msg),
        }
    }
    if missing.is_empty() {
        return Plan::Ready;
    }
    let packages: Vec<&'static str> = missing.iter().map(|(need, _)| need.package()).collect();
    let tried: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| machine.attempted.contains(p))
        .collect();
    let refusal = if !machine.debian {
        Some("this is not a Debian-family machine".to_string())
    } else if !machine.root {
        Some("the tests do not run as root".to_string())
    } else if probe.var(ENV_NO_INSTALL).is_some() {
        Some(format!("{ENV_NO_INSTALL} is set"))
    } else if !tried.is_empty() {
        Some(format!(
            "`apt-get install -y {}` already ran in this process and did not provide it",
            tried.join(" ")
        ))
    } else {
        None
    };
    let Some(refusal) = refusal else {
        return Plan::Install(packages);
    };
    let what: Vec<&str> = missing.iter().map(|(_, what)| what.as_str()).collect();
    let otherwise: Vec<&str> = missing.iter().map(|(need, _)| need.otherwise()).collect();
    Plan::Fail(format!(
        "the tests are missing what they need: {}; to fix: run `{}` (Debian/Ubuntu; the \
         tests run it themselves as root on a Debian-family machine unless {ENV_NO_INSTALL} \
         is set, but not here: {refusal}); or else {}",
        what.join("; "),
        install_command(&packages, machine.root),
        otherwise.join("; and ")
    ))
}

#[cfg(unix)]
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = std::fs::metadata("/proc/self") {
        return meta.uid() == 0;
    }
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

#[cfg(not(unix))]
fn running_as_root() -> bool {
    false
}

/// Packages whose install was attempted in this process. Held for a whole [`ensure`], so
/// parallel tests check and install one at a time.
static ATTEMPTED: parking_lot::Mutex<Vec<&'static str>> = parking_lot::const_mutex(Vec::new());

/// Makes sure `needs` are met: installs the missing packages with one `apt-get install`
/// when [`plan`] allows it, else fails saying what to install or set.
pub(crate) fn ensure(needs: &[Need]) -> io::Result<()> {
    let mut attempted = ATTEMPTED.lock();
    loop {
        let machine = Machine {
            debian: Path::new("/etc/debian_version").exists(),
            root: running_as_root(),
            attempted: &attempted,
        };
        match plan(&RealProbe, needs, machine) {
            Plan::Ready => return Ok(()),
            Plan::Fail(msg) => return Err(io::Error::new(io::ErrorKind::NotFound, msg)),
            Plan::Install(packages) => {
                attempted.extend(&packages);
                apt_install(&packages)?;
            }
        }
    }
}

/// A line on the process's real standard error. Not `eprintln!`: the test harness
/// captures that for passing tests, and an install must show while it runs.
fn progress(line: &str) {
    let _ = writeln!(io::stderr().lock(), "zkguard: {line}");
}

/// How long an install waits for another `apt-get` or `dpkg` holding apt's locks.
const APT_LOCK_WAIT: Duration = Duration::from_secs(600);

/// Whether a failed `apt-get update` found the package lists locked by another apt: its
/// message names the lock file (a path, the same in every language).
fn lists_locked(e: &io::Error) -> bool {
    e.to_string().contains("/var/lib/apt/lists/lock")
}

fn apt_install(packages: &[&str]) -> io::Result<()> {
    let start = Instant::now();
    progress(&format!(
        "installing Debian packages the test harness needs: {} (`apt-get update`, then \
         `apt-get install -y`; on a fresh machine up to about 250 MB; set {ENV_NO_INSTALL}=1 \
         to forbid this)",
        packages.join(" ")
    ));
    // Wait for another apt (a second test process, an upgrade) rather than fail at once:
    // `DPkg::Lock::Timeout` makes `install` wait for dpkg's lock, but `update` never waits
    // for the lock of the package lists (apt 2.6), so it is tried again while that is held.
    let deadline = Instant::now() + APT_LOCK_WAIT;
    while let Err(e) = apt_get(&["update"]) {
        if !lists_locked(&e) || Instant::now() >= deadline {
            return Err(e);
        }
        progress("another apt-get holds the package lists' lock; trying again in 1 s");
        std::thread::sleep(Duration::from_secs(1));
    }
    let timeout = format!("DPkg::Lock::Timeout={}", APT_LOCK_WAIT.as_secs());
    let mut install = vec!["-o", &timeout, "install", "-y"];
    install.extend(packages);
    apt_get(&install)?;
    progress(&format!(
        "installed {} in {} s",
        packages.join(" "),
        start.elapsed().as_secs()
    ));
    Ok(())
}

/// Runs `apt-get <args>` non-interactively, showing each line of its output as it comes
/// ([`progress`]) and quoting its last lines when it fails.
fn apt_get(args: &[&str]) -> io::Result<()> {
    let shown = format!("apt-get {}", args.join(" "));
    let mut child = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::other(format!("could not run `{shown}`: {e}")))?;
    let show = |out: Box<dyn Read + Send>| {
        let mut tail = Vec::new();
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            // dpkg redraws "(Reading database ... 5%" with carriage returns: show the end.
            let line = line
                .rsplit('\r')
                .find(|l| !l.is_empty())
                .unwrap_or_default();
            progress(&format!("apt-get: {line}"));
            tail.push(line.to_string());
        }
        tail
    };
    let stdout: Box<dyn Read + Send> = Box::new(child.stdout.take().expect("piped"));
    let stderr: Box<dyn Read + Send> = Box::new(child.stderr.take().expect("piped"));
    let (mut tail, errors) = std::thread::scope(|s| {
        let errors = s.spawn(|| show(stderr));
        let tail = show(stdout);
        (tail, errors.join().unwrap_or_default())
    });
    let status = child.wait()?;
    if status.success() {
        return Ok(());
    }
    tail.extend(errors);
    let keep = tail.len().saturating_sub(10);
    Err(io::Error::other(format!(
        "`{shown}` failed ({status}): {}",
        tail[keep..].join("\n")
    )))
}

#[cfg(test)]
#[path = "needs_tests.rs"]
mod tests;
