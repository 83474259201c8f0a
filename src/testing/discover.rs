//! Finding a ZooKeeper server distribution and a `java` binary.
//!
//! The search order is a pure function over a [`Probe`] (environment variables and a
//! read-only view of the file system), so the ordering rules have plain unit tests. The
//! real probe is [`RealProbe`]; [`discover`] adds the one side effect: installing the
//! Debian package when nothing is found and that is allowed.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable holding a complete Java class path for the ZooKeeper server.
pub(crate) const ENV_CLASSPATH: &str = "ZKGUARD_ZOOKEEPER_CLASSPATH";
/// Environment variable pointing at an unpacked Apache ZooKeeper binary release.
pub(crate) const ENV_HOME: &str = "ZOOKEEPER_HOME";
/// Environment variable that forbids the automatic `apt-get install zookeeper`.
pub(crate) const ENV_NO_INSTALL: &str = "ZKGUARD_NO_INSTALL";

const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";
const DEBIAN_SLF4J_SIMPLE: &str = "/usr/share/java/slf4j-simple.jar";

/// What to tell a user who has no ZooKeeper at all.
pub(crate) const INSTALL_HINT: &str =
    "install Debian/Ubuntu package `zookeeper` (apt-get install zookeeper), \
or set ZOOKEEPER_HOME to an unpacked Apache ZooKeeper 3.5+ binary release, \
or ZKGUARD_ZOOKEEPER_CLASSPATH to a complete Java class path for the ZooKeeper server";

/// A ZooKeeper server class path and the `java` that runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Distribution {
    /// The `java` executable.
    pub(crate) java: PathBuf,
    /// The class path, already joined with the platform separator.
    pub(crate) classpath: OsString,
    /// Where the class path came from, for log lines and error messages.
    pub(crate) source: String,
}

/// A class path found by [`find_classpath`], not yet joined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FoundClasspath {
    /// Class path entries in order (or the verbatim value of `ZKGUARD_ZOOKEEPER_CLASSPATH`).
    pub(crate) entries: Vec<OsString>,
    /// Where it came from.
    pub(crate) source: String,
}

/// Read-only view of the environment and the file system used by discovery.
pub(crate) trait Probe {
    /// An environment variable; `None` when unset.
    fn var(&self, key: &str) -> Option<OsString>;
    /// Whether `path` is an existing regular file (following symlinks).
    fn is_file(&self, path: &Path) -> bool;
    /// Whether `path` is an existing directory (following symlinks).
    fn is_dir(&self, path: &Path) -> bool;
    /// The entries of directory `path` as full paths; empty when it cannot be read.
    fn list_dir(&self, path: &Path) -> Vec<PathBuf>;
}

/// The probe that looks at the real process environment and file system.
pub(crate) struct RealProbe;

impl Probe for RealProbe {
    fn var(&self, key: &str) -> Option<OsString> {
        std::env::var_os(key)
    }
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn list_dir(&self, path: &Path) -> Vec<PathBuf> {
        match std::fs::read_dir(path) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn non_empty_var(probe: &dyn Probe, key: &str) -> Option<OsString> {
    probe.var(key).filter(|v| !v.is_empty())
}

/// Splits a file name into text and number runs so that `3.10` sorts after `3.9`.
fn natural_key(name: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut digits = String::new();
    let mut text = String::new();
    for ch in name.chars() {
        if ch.is_ascii_digit() {
            if !text.is_empty() {
                out.push((0, std::mem::take(&mut text)));
            }
            digits.push(ch);
        } else {
            if !digits.is_empty() {
                out.push((digits.parse().unwrap_or(u64::MAX), String::new()));
                digits.clear();
            }
            text.push(ch);
        }
    }
    if !digits.is_empty() {
        out.push((digits.parse().unwrap_or(u64::MAX), String::new()));
    }
    if !text.is_empty() {
        out.push((0, text));
    }
    out
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether `name` is the ZooKeeper server jar (`zookeeper-3.8.0.jar`, `zookeeper.jar`),
/// not one of its companions (`zookeeper-jute-…`, `zookeeper-recipes-…`).
fn is_server_jar(name: &str) -> bool {
    if name == "zookeeper.jar" {
        return true;
    }
    match name.strip_prefix("zookeeper-") {
        Some(rest) => rest.starts_with(|c: char| c.is_ascii_digit()) && rest.ends_with(".jar"),
        None => false,
    }
}

fn jars_in(probe: &dyn Probe, dir: &Path) -> Vec<PathBuf> {
    let mut jars: Vec<PathBuf> = probe
        .list_dir(dir)
        .into_iter()
        .filter(|p| file_name(p).ends_with(".jar") && probe.is_file(p))
        .collect();
    jars.sort_by_key(|p| natural_key(&file_name(p)));
    jars
}

/// The class path of an unpacked Apache binary release (`lib/*.jar` then `*.jar`, with
/// `conf/` first so its logging configuration is found), or `None` when `home` holds no
/// ZooKeeper server jar.
pub(crate) fn release_classpath(probe: &dyn Probe, home: &Path) -> Option<Vec<OsString>> {
    let mut jars = jars_in(probe, &home.join("lib"));
    jars.extend(jars_in(probe, home));
    if !jars.iter().any(|j| is_server_jar(&file_name(j))) {
        return None;
    }
    let mut entries = Vec::new();
    let conf = home.join("conf");
    if probe.is_dir(&conf) {
        entries.push(conf.into_os_string());
    }
    entries.extend(jars.into_iter().map(PathBuf::into_os_string));
    Some(entries)
}

/// The usual places an unpacked release lives, in search order.
fn release_candidates(probe: &dyn Probe) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/opt/zookeeper")];
    let mut versioned: Vec<PathBuf> = probe
        .list_dir(Path::new("/opt"))
        .into_iter()
        .filter(|p| {
            let n = file_name(p);
            n.starts_with("apache-zookeeper") && n.ends_with("-bin")
        })
        .collect();
    // Newest release first.
    versioned.sort_by_key(|p| std::cmp::Reverse(natural_key(&file_name(p))));
    out.extend(versioned);
    out.extend(
        [
            "/usr/local/zookeeper",
            "/usr/share/zookeeper",
            "/opt/homebrew/opt/zookeeper/libexec",
            "/usr/local/opt/zookeeper/libexec",
        ]
        .iter()
        .map(PathBuf::from),
    );
    out
}

/// Finds the ZooKeeper server class path.
///
/// Order: `ZKGUARD_ZOOKEEPER_CLASSPATH`, `ZOOKEEPER_HOME`, the Debian/Ubuntu jar, then
/// unpacked releases in the usual places. `Ok(None)` means nothing was found; an `Err`
/// means an explicit setting is wrong (it is never silently skipped).
pub(crate) fn find_classpath(probe: &dyn Probe) -> Result<Option<FoundClasspath>, String> {
    if let Some(cp) = non_empty_var(probe, ENV_CLASSPATH) {
        return Ok(Some(FoundClasspath {
            entries: vec![cp],
            source: format!("environment variable {ENV_CLASSPATH}"),
        }));
    }
    if let Some(home) = non_empty_var(probe, ENV_HOME) {
        let home = PathBuf::from(home);
        return match release_classpath(probe, &home) {
            Some(entries) => Ok(Some(FoundClasspath {
                entries,
                source: format!("{ENV_HOME}={}", home.display()),
            })),
            None => Err(format!(
                "{ENV_HOME}={} is not an unpacked Apache ZooKeeper binary release: \
                 found no zookeeper-<version>.jar in {} or {}",
                home.display(),
                home.join("lib").display(),
                home.display()
            )),
        };
    }
    let debian = Path::new(DEBIAN_JAR);
    if probe.is_file(debian) {
        let mut entries = vec![debian.as_os_str().to_owned()];
        let simple = Path::new(DEBIAN_SLF4J_SIMPLE);
        if probe.is_file(simple) {
            entries.push(simple.as_os_str().to_owned());
        }
        return Ok(Some(FoundClasspath {
            entries,
            source: format!("Debian/Ubuntu package ({DEBIAN_JAR})"),
        }));
    }
    for dir in release_candidates(probe) {
        if let Some(entries) = release_classpath(probe, &dir) {
            return Ok(Some(FoundClasspath {
                entries,
                source: format!("unpacked release at {}", dir.display()),
            }));
        }
    }
    Ok(None)
}

/// Finds `java`: `$JAVA_HOME/bin/java` when that exists, else `java` on `PATH`.
pub(crate) fn find_java(probe: &dyn Probe) -> Option<PathBuf> {
    if let Some(home) = non_empty_var(probe, "JAVA_HOME") {
        let java = PathBuf::from(home).join("bin").join("java");
        if probe.is_file(&java) {
            return Some(java);
        }
    }
    let path = probe.var("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join("java"))
        .find(|java| probe.is_file(java))
}

/// Debian's Netty jars that ZooKeeper's `NettyServerCnxnFactory` needs for a
/// `secureClientPort` (the server jar's manifest names all but `netty-codec`, whose
/// absence shows only at the first TLS connection: `NoClassDefFoundError:
/// io/netty/handler/codec/ByteToMessageDecoder`).
const DEBIAN_NETTY_REQUIRED: &[&str] = &[
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-common.jar",
    "netty-handler.jar",
    "netty-transport.jar",
];
/// Debian Netty jars added when present (native transport helpers, the resolver).
const DEBIAN_NETTY_OPTIONAL: &[&str] = &[
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
];
const DEBIAN_JAVA_DIR: &str = "/usr/share/java";

/// What to tell a user whose ZooKeeper has no Netty.
const NETTY_HINT: &str = "install Debian/Ubuntu package `libnetty-java` (apt-get install \
libnetty-java), or use an Apache ZooKeeper binary release (ZOOKEEPER_HOME), whose lib/ \
holds Netty";

/// The jar file names a class path names, with `dir/*` entries expanded.
fn classpath_jar_names(probe: &dyn Probe, classpath: &OsString) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::env::split_paths(classpath) {
        if file_name(&entry) == "*" {
            if let Some(parent) = entry.parent() {
                names.extend(jars_in(probe, parent).iter().map(|j| file_name(j)));
            }
        } else {
            names.push(file_name(&entry));
        }
    }
    names
}

/// The class path entries to append to `dist` so that its server can serve TLS (Netty's
/// codec, handler, buffer, transport and common jars), or an error saying what to install.
///
/// A `ZKGUARD_ZOOKEEPER_CLASSPATH` is used as given (nothing is added). A class path that
/// already names `netty-codec*.jar` and `netty-handler*.jar`, or `netty-all*.jar`, needs
/// nothing. The Debian package gets its pieces from `/usr/share/java`.
pub(crate) fn netty_entries(
    probe: &dyn Probe,
    dist: &Distribution,
) -> Result<Vec<OsString>, String> {
    if non_empty_var(probe, ENV_CLASSPATH).is_some() {
        return Ok(Vec::new());
    }
    let names = classpath_jar_names(probe, &dist.classpath);
    let has = |prefix: &str| {
        names
            .iter()
            .any(|n| n.starts_with(prefix) && n.ends_with(".jar"))
    };
    if (has("netty-codec") && has("netty-handler")) || has("netty-all") {
        return Ok(Vec::new());
    }
    let debian = std::env::split_paths(&dist.classpath).any(|e| e == Path::new(DEBIAN_JAR));
    if debian {
        let dir = Path::new(DEBIAN_JAVA_DIR);
        let missing: Vec<String> = DEBIAN_NETTY_REQUIRED
            .iter()
            .map(|j| dir.join(j))
            .filter(|p| !probe.is_file(p))
            .map(|p| p.display().to_string())
            .collect();
        if missing.is_empty() {
            let mut out: Vec<OsString> = DEBIAN_NETTY_REQUIRED
                .iter()
                .chain(DEBIAN_NETTY_OPTIONAL)
                .map(|j| dir.join(j))
                .filter(|p| probe.is_file(p))
                .map(PathBuf::into_os_string)
                .collect();
            out.sort();
            return Ok(out);
        }
        let all = dir.join("netty-all.jar");
        if probe.is_file(&all) {
            return Ok(vec![all.into_os_string()]);
        }
        return Err(format!(
            "a TLS test server needs Netty (ZooKeeper's NettyServerCnxnFactory serves the \
             secureClientPort), but {} missing; to fix: {NETTY_HINT}",
            if missing.len() == 1 {
                format!("{} is", missing[0])
            } else {
                format!("{} are", missing.join(", "))
            }
        ));
    }
    Err(format!(
        "a TLS test server needs Netty (ZooKeeper's NettyServerCnxnFactory serves the \
         secureClientPort), but the class path from {} names no netty-codec*.jar and \
         netty-handler*.jar (nor netty-all*.jar); to fix: {NETTY_HINT}, or set \
         {ENV_CLASSPATH} to a class path that includes Netty",
        dist.source
    ))
}

/// `dist` with the Netty jars TLS needs appended to its class path ([`netty_entries`]).
pub(crate) fn with_netty(probe: &dyn Probe, dist: &Distribution) -> io::Result<Distribution> {
    let extra =
        netty_entries(probe, dist).map_err(|m| io::Error::new(io::ErrorKind::NotFound, m))?;
    if extra.is_empty() {
        return Ok(dist.clone());
    }
    let mut entries: Vec<OsString> = std::env::split_paths(&dist.classpath)
        .map(PathBuf::into_os_string)
        .collect();
    entries.extend(extra);
    let classpath = std::env::join_paths(&entries).map_err(|e| {
        io::Error::other(format!(
            "cannot add Netty to the Java class path from {}: {e}",
            dist.source
        ))
    })?;
    Ok(Distribution {
        java: dist.java.clone(),
        classpath,
        source: format!("{} with Netty from {DEBIAN_JAVA_DIR}", dist.source),
    })
}

/// Everything [`discover`] decided, before any side effect.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Use this distribution.
    Use(Distribution),
    /// Nothing found, but `apt-get install zookeeper` is allowed and may fix it.
    Install,
    /// Give up with this message.
    Fail(String),
}

/// Facts about the machine that decide whether an automatic install is allowed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Machine {
    /// `/etc/debian_version` exists.
    pub(crate) debian: bool,
    /// The process runs as root.
    pub(crate) root: bool,
    /// An install was already attempted in this process (and evidently did not help).
    pub(crate) install_attempted: bool,
}

/// Pure decision: what to use, or whether to install, or what to tell the user.
pub(crate) fn plan(probe: &dyn Probe, machine: Machine) -> Plan {
    let found = match find_classpath(probe) {
        Err(msg) => return Plan::Fail(msg),
        Ok(found) => found,
    };
    let java = find_java(probe);
    match (found, java) {
        (Some(found), Some(java)) => match std::env::join_paths(&found.entries) {
            Ok(classpath) => Plan::Use(Distribution {
                java,
                classpath,
                source: found.source,
            }),
            Err(e) => Plan::Fail(format!(
                "cannot build a Java class path from {}: {e}",
                found.source
            )),
        },
        (found, java) => {
            let may_install = machine.debian
                && machine.root
                && !machine.install_attempted
                && probe.var(ENV_NO_INSTALL).is_none();
            if may_install {
                return Plan::Install;
            }
            let mut msg = String::from("cannot start a ZooKeeper test server: ");
            match (&found, &java) {
                (None, None) => msg.push_str("found neither a ZooKeeper distribution nor java"),
                (None, Some(_)) => msg.push_str("found no ZooKeeper distribution"),
                _ => msg.push_str(
                    "found no `java` (looked at $JAVA_HOME/bin/java and every PATH entry)",
                ),
            }
            if found.is_none() {
                msg.push_str(&format!(
                    " (looked at {ENV_CLASSPATH}, {ENV_HOME}, {DEBIAN_JAR}, /opt/zookeeper, \
                     /opt/apache-zookeeper*-bin, /usr/local/zookeeper, /usr/share/zookeeper, \
                     Homebrew libexec)"
                ));
            }
            msg.push_str("; to fix: ");
            if found.is_none() {
                msg.push_str(INSTALL_HINT);
                if java.is_none() {
                    msg.push_str("; and ");
                }
            }
            if java.is_none() {
                msg.push_str("install a Java runtime (Debian/Ubuntu: apt-get install default-jre-headless) or set JAVA_HOME");
            }
            if machine.install_attempted {
                msg.push_str(" (an automatic `apt-get install zookeeper` was already tried in this process and did not help)");
            }
            Plan::Fail(msg)
        }
    }
}

#[cfg(unix)]
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = std::fs::metadata("/proc/self") {
        return meta.uid() == 0;
    }
    id_u_is_zero()
}

#[cfg(not(unix))]
fn running_as_root() -> bool {
    false
}

#[cfg(unix)]
fn id_u_is_zero() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

struct InstallState {
    attempted: bool,
}

static DISCOVERY: parking_lot::Mutex<InstallState> =
    parking_lot::const_mutex(InstallState { attempted: false });

fn run_logged(cmd: &mut Command, what: &str) -> io::Result<()> {
    let out = cmd.output().map_err(|e| {
        io::Error::other(format!(
            "could not run `{what}`: {e}; to fix: {INSTALL_HINT}"
        ))
    })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(10).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(io::Error::other(format!(
        "`{what}` failed ({}): {}; to fix: {INSTALL_HINT}",
        out.status,
        tail.join("\n")
    )))
}

fn apt_install() -> io::Result<()> {
    log::warn!(
        "zkguard: no ZooKeeper distribution found; running `apt-get update` and \
         `apt-get install -y zookeeper` (set {ENV_NO_INSTALL}=1 to forbid this)"
    );
    run_logged(
        Command::new("apt-get")
            .arg("update")
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get update",
    )?;
    run_logged(
        Command::new("apt-get")
            .args(["install", "-y", "zookeeper"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "DEBIAN_FRONTEND=noninteractive apt-get install -y zookeeper",
    )?;
    log::warn!("zkguard: installed Debian package `zookeeper`");
    Ok(())
}

/// Finds a ZooKeeper distribution and `java`, installing the Debian package once per
/// process when nothing is found, the machine is Debian-family, we are root and
/// `ZKGUARD_NO_INSTALL` is unset.
pub(crate) fn discover() -> io::Result<Distribution> {
    // One discovery at a time, so parallel tests install at most once.
    let mut state = DISCOVERY.lock();
    loop {
        let machine = Machine {
            debian: Path::new("/etc/debian_version").exists(),
            root: running_as_root(),
            install_attempted: state.attempted,
        };
        match plan(&RealProbe, machine) {
            Plan::Use(dist) => return Ok(dist),
            Plan::Fail(msg) => return Err(io::Error::new(io::ErrorKind::NotFound, msg)),
            Plan::Install => {
                state.attempted = true;
                apt_install()?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A fake probe for unit tests: a set of files and environment variables.
    #[derive(Default)]
    struct FakeProbe {
        vars: HashMap<String, OsString>,
        files: Vec<PathBuf>,
    }

    impl FakeProbe {
        fn var(mut self, k: &str, v: &str) -> Self {
            self.vars.insert(k.to_string(), v.into());
            self
        }
        fn file(mut self, p: &str) -> Self {
            self.files.push(PathBuf::from(p));
            self
        }
    }

    impl Probe for FakeProbe {
        fn var(&self, key: &str) -> Option<OsString> {
            self.vars.get(key).cloned()
        }
        fn is_file(&self, path: &Path) -> bool {
            self.files.iter().any(|f| f == path)
        }
        fn is_dir(&self, path: &Path) -> bool {
            self.files.iter().any(|f| f.starts_with(path) && f != path)
        }
        fn list_dir(&self, path: &Path) -> Vec<PathBuf> {
            let mut out: Vec<PathBuf> = Vec::new();
            for f in &self.files {
                if let Ok(rest) = f.strip_prefix(path) {
                    if let Some(first) = rest.components().next() {
                        let p = path.join(first);
                        if !out.contains(&p) {
                            out.push(p);
                        }
                    }
                }
            }
            out
        }
    }

    const NOT_ROOT: Machine = Machine {
        debian: true,
        root: false,
        install_attempted: false,
    };
    const ROOT: Machine = Machine {
        debian: true,
        root: true,
        install_attempted: false,
    };

    fn entries(p: &FakeProbe) -> Vec<String> {
        find_classpath(p)
            .expect("no error")
            .expect("found")
            .entries
            .iter()
            .map(|e| e.to_string_lossy().into_owned())
            .collect()
    }

    fn with_java(p: FakeProbe) -> FakeProbe {
        p.var("PATH", "/nonexistent:/usr/bin").file("/usr/bin/java")
    }

    fn debian() -> FakeProbe {
        FakeProbe::default()
            .file(DEBIAN_JAR)
            .file(DEBIAN_SLF4J_SIMPLE)
    }

    fn release(p: FakeProbe, home: &str) -> FakeProbe {
        p.file(&format!("{home}/lib/zookeeper-3.8.4.jar"))
            .file(&format!("{home}/lib/zookeeper-jute-3.8.4.jar"))
            .file(&format!("{home}/lib/netty-handler-4.1.105.Final.jar"))
            .file(&format!("{home}/conf/logback.xml"))
    }

    #[test]
    fn explicit_classpath_wins_over_everything() {
        let p = release(debian(), "/zk")
            .var(ENV_HOME, "/zk")
            .var(ENV_CLASSPATH, "/a.jar:/b/*");
        assert_eq!(entries(&p), vec!["/a.jar:/b/*"]);
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let p = debian().var(ENV_CLASSPATH, "").var(ENV_HOME, "");
        assert_eq!(entries(&p), vec![DEBIAN_JAR, DEBIAN_SLF4J_SIMPLE]);
    }

    #[test]
    fn zookeeper_home_beats_debian_and_lists_conf_lib_then_top_level() {
        let p = release(debian(), "/zk")
            .file("/zk/zookeeper-extra.jar")
            .var(ENV_HOME, "/zk");
        assert_eq!(
            entries(&p),
            vec![
                "/zk/conf",
                "/zk/lib/netty-handler-4.1.105.Final.jar",
                "/zk/lib/zookeeper-3.8.4.jar",
                "/zk/lib/zookeeper-jute-3.8.4.jar",
                "/zk/zookeeper-extra.jar",
            ]
        );
    }

    #[test]
    fn old_layout_with_top_level_server_jar_is_accepted() {
        let p = FakeProbe::default()
            .file("/zk/zookeeper-3.4.14.jar")
            .file("/zk/lib/slf4j-api-1.7.25.jar")
            .var(ENV_HOME, "/zk");
        assert_eq!(
            entries(&p),
            vec!["/zk/lib/slf4j-api-1.7.25.jar", "/zk/zookeeper-3.4.14.jar"]
        );
    }

    #[test]
    fn wrong_zookeeper_home_is_an_error_not_a_fallthrough() {
        let p = debian()
            .file("/zk/lib/zookeeper-jute-3.8.4.jar")
            .var(ENV_HOME, "/zk");
        let err = find_classpath(&p).expect_err("must fail");
        assert!(err.contains("ZOOKEEPER_HOME=/zk"), "{err}");
        assert!(err.contains("/zk/lib"), "{err}");
    }

    #[test]
    fn debian_without_slf4j_simple() {
        let p = FakeProbe::default().file(DEBIAN_JAR);
        assert_eq!(entries(&p), vec![DEBIAN_JAR]);
    }

    #[test]
    fn debian_beats_unpacked_releases() {
        let p = release(debian(), "/opt/zookeeper");
        assert_eq!(entries(&p)[0], DEBIAN_JAR);
    }

    #[test]
    fn newest_versioned_release_in_opt_is_chosen_after_opt_zookeeper() {
        let p = release(
            release(FakeProbe::default(), "/opt/apache-zookeeper-3.9.2-bin"),
            "/opt/apache-zookeeper-3.10.0-bin",
        )
        .file("/opt/apache-zookeeper-3.11.0/lib/zookeeper-3.11.0.jar");
        let e = entries(&p);
        assert_eq!(e[0], "/opt/apache-zookeeper-3.10.0-bin/conf");

        let p = release(p, "/opt/zookeeper");
        assert_eq!(entries(&p)[0], "/opt/zookeeper/conf");
    }

    #[test]
    fn share_zookeeper_without_lib_is_skipped_and_homebrew_is_found() {
        let p = FakeProbe::default()
            .file("/usr/share/zookeeper/bin/zkServer.sh")
            .file("/opt/homebrew/opt/zookeeper/libexec/lib/zookeeper-3.9.1.jar");
        assert_eq!(
            entries(&p),
            vec!["/opt/homebrew/opt/zookeeper/libexec/lib/zookeeper-3.9.1.jar"]
        );
        let p = p.file("/usr/share/zookeeper/lib/zookeeper-3.4.13.jar");
        assert_eq!(
            entries(&p),
            vec!["/usr/share/zookeeper/lib/zookeeper-3.4.13.jar"]
        );
    }

    #[test]
    fn server_jar_names() {
        assert!(is_server_jar("zookeeper-3.8.0.jar"));
        assert!(is_server_jar("zookeeper.jar"));
        assert!(!is_server_jar("zookeeper-jute-3.8.0.jar"));
        assert!(!is_server_jar("zookeeper-recipes-lock.jar"));
        assert!(!is_server_jar("zookeeper-3.8.0.pom"));
    }

    #[test]
    fn java_home_first_then_path() {
        let p = FakeProbe::default()
            .var("JAVA_HOME", "/jdk")
            .file("/jdk/bin/java")
            .var("PATH", "/usr/bin")
            .file("/usr/bin/java");
        assert_eq!(find_java(&p), Some(PathBuf::from("/jdk/bin/java")));
        let p = FakeProbe::default()
            .var("JAVA_HOME", "/broken")
            .var("PATH", "/a:/usr/bin")
            .file("/usr/bin/java");
        assert_eq!(find_java(&p), Some(PathBuf::from("/usr/bin/java")));
        let p = FakeProbe::default().var("PATH", "/a:/b");
        assert_eq!(find_java(&p), None);
    }

    #[test]
    fn plan_uses_what_it_finds() {
        match plan(&with_java(debian()), ROOT) {
            Plan::Use(d) => {
                assert_eq!(d.java, PathBuf::from("/usr/bin/java"));
                assert_eq!(
                    d.classpath,
                    OsString::from(format!("{DEBIAN_JAR}:{DEBIAN_SLF4J_SIMPLE}"))
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn plan_installs_only_as_root_on_debian_once_and_when_allowed() {
        let nothing = with_java(FakeProbe::default());
        assert_eq!(plan(&nothing, ROOT), Plan::Install);
        // Missing java alone also triggers the install (the package pulls in a JRE).
        assert_eq!(plan(&debian(), ROOT), Plan::Install);
        for machine in [
            NOT_ROOT,
            Machine {
                debian: false,
                ..ROOT
            },
            Machine {
                install_attempted: true,
                ..ROOT
            },
        ] {
            match plan(&nothing, machine) {
                Plan::Fail(msg) => {
                    assert!(msg.contains("apt-get install zookeeper"), "{msg}");
                    assert!(msg.contains("ZOOKEEPER_HOME"), "{msg}");
                    assert!(msg.contains(ENV_CLASSPATH), "{msg}");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        let forbidden = with_java(FakeProbe::default()).var(ENV_NO_INSTALL, "1");
        assert!(matches!(plan(&forbidden, ROOT), Plan::Fail(_)));
    }

    #[test]
    fn plan_reports_missing_java() {
        match plan(&debian(), NOT_ROOT) {
            Plan::Fail(msg) => {
                assert!(msg.contains("found no `java`"), "{msg}");
                assert!(msg.contains("JAVA_HOME"), "{msg}");
                assert!(!msg.contains("apt-get install zookeeper"), "{msg}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    fn dist(classpath: &str) -> Distribution {
        Distribution {
            java: PathBuf::from("/usr/bin/java"),
            classpath: classpath.into(),
            source: "test".into(),
        }
    }

    #[test]
    fn netty_from_debian_pieces_or_netty_all() {
        let mut p = debian();
        for j in DEBIAN_NETTY_REQUIRED.iter().chain(DEBIAN_NETTY_OPTIONAL) {
            p = p.file(&format!("{DEBIAN_JAVA_DIR}/{j}"));
        }
        let cp = format!("{DEBIAN_JAR}:{DEBIAN_SLF4J_SIMPLE}");
        let extra = netty_entries(&p, &dist(&cp)).expect("found");
        assert_eq!(extra.len(), 8);
        assert!(extra.contains(&OsString::from("/usr/share/java/netty-codec.jar")));
        let only_all = debian().file("/usr/share/java/netty-all.jar");
        assert_eq!(
            netty_entries(&only_all, &dist(&cp)).expect("all"),
            vec![OsString::from("/usr/share/java/netty-all.jar")]
        );
        let err = netty_entries(&debian(), &dist(&cp)).expect_err("missing");
        assert!(err.contains("netty-codec.jar"), "{err}");
        assert!(err.contains("libnetty-java"), "{err}");
    }

    #[test]
    fn netty_in_a_release_or_explicit_classpath_is_used_as_is() {
        let p = release(FakeProbe::default(), "/zk").file("/zk/lib/netty-codec-4.1.105.Final.jar");
        let cp = "/zk/conf:/zk/lib/netty-codec-4.1.105.Final.jar:/zk/lib/netty-handler-4.1.105.Final.jar:/zk/lib/zookeeper-3.8.4.jar";
        assert!(netty_entries(&p, &dist(cp)).expect("ok").is_empty());
        assert!(netty_entries(&p, &dist("/zk/lib/*"))
            .expect("wildcard")
            .is_empty());
        let err = netty_entries(&p, &dist("/zk/lib/zookeeper-3.8.4.jar")).expect_err("none");
        assert!(err.contains("netty-codec"), "{err}");
        let explicit = FakeProbe::default().var(ENV_CLASSPATH, "/x.jar");
        assert!(netty_entries(&explicit, &dist("/x.jar"))
            .expect("as given")
            .is_empty());
    }

    #[test]
    fn plan_fails_on_bad_zookeeper_home_even_as_root() {
        let p = with_java(debian()).var(ENV_HOME, "/nowhere");
        assert!(matches!(plan(&p, ROOT), Plan::Fail(m) if m.contains("/nowhere")));
    }
}
