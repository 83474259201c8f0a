//! Finding what the tests need: a ZooKeeper server distribution, `java`, Netty for TLS
//! servers, Curator's jars and `javac`.
//!
//! The search orders are pure functions over a [`Probe`] (environment variables and a
//! read-only view of the file system), so the ordering rules have plain unit tests. The
//! real probe is [`RealProbe`]. Installing what is missing is [`needs`]' job; [`discover`]
//! asks it for a ZooKeeper server and then finds it.

pub(crate) mod needs;
pub(crate) mod versions;

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

pub(crate) use needs::Need;

/// Environment variable holding a complete Java class path for the ZooKeeper server.
pub(crate) const ENV_CLASSPATH: &str = "ZKGUARD_ZOOKEEPER_CLASSPATH";
/// Environment variable pointing at an unpacked Apache ZooKeeper binary release.
pub(crate) const ENV_HOME: &str = "ZOOKEEPER_HOME";
/// Environment variable holding a complete Java class path for Curator's recipes.
pub(crate) const ENV_CURATOR_CLASSPATH: &str = "ZKGUARD_CURATOR_CLASSPATH";

/// Debian's ZooKeeper server jar (its manifest names Jetty and the rest).
pub(crate) const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";
const DEBIAN_SLF4J_SIMPLE: &str = "/usr/share/java/slf4j-simple.jar";
const DEBIAN_CURATOR: &str = "/usr/share/java/curator-recipes.jar";
const DEBIAN_SLF4J_NOP: &str = "/usr/share/java/slf4j-nop.jar";

/// Where [`find_classpath`] looks, for messages.
pub(crate) const ZOOKEEPER_PLACES: &str = "ZKGUARD_ZOOKEEPER_CLASSPATH, ZOOKEEPER_HOME, \
/usr/share/java/zookeeper.jar, /opt/zookeeper, /opt/apache-zookeeper*-bin, \
/usr/local/zookeeper, /usr/share/zookeeper, Homebrew libexec";

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
/// Order: `ZKGUARD_ZOOKEEPER_CLASSPATH` or `ZKGUARD_ZOOKEEPER_VERSION` (a version
/// `scripts/zk-version.sh` cached; setting both is an error), `ZOOKEEPER_HOME`, the
/// Debian/Ubuntu jar, then unpacked releases in the usual places. `Ok(None)` means nothing
/// was found; an `Err` means an explicit setting is wrong (it is never silently skipped).
pub(crate) fn find_classpath(probe: &dyn Probe) -> Result<Option<FoundClasspath>, String> {
    let version = versions::cached(probe, versions::Product::ZooKeeper)?;
    if version.is_some() && non_empty_var(probe, ENV_CLASSPATH).is_some() {
        return Err(format!(
            "both {ENV_CLASSPATH} and {} are set: set one",
            versions::ENV_VERSION
        ));
    }
    if version.is_some() {
        return Ok(version);
    }
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

/// Finds a JDK tool (`java`, `javac`): `$JAVA_HOME/bin/<tool>` when that exists, else
/// `<tool>` on `PATH`.
pub(crate) fn find_jdk_tool(probe: &dyn Probe, tool: &str) -> Option<PathBuf> {
    if let Some(home) = non_empty_var(probe, "JAVA_HOME") {
        let path = PathBuf::from(home).join("bin").join(tool);
        if probe.is_file(&path) {
            return Some(path);
        }
    }
    let path = probe.var("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(tool))
        .find(|path| probe.is_file(path))
}

/// Directories searched for MIT Kerberos' tools after `PATH` (a non-root `PATH` often lacks
/// the `sbin` ones, where `krb5kdc`, `kdb5_util` and `kadmin.local` live).
pub(crate) const KERBEROS_TOOL_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/sbin",
    "/sbin",
    "/usr/local/bin",
    "/usr/bin",
];

/// Finds a Kerberos tool (`krb5kdc`, `kinit`, …): the first `<tool>` on `PATH`, else in
/// [`KERBEROS_TOOL_DIRS`].
pub(crate) fn find_kerberos_tool(probe: &dyn Probe, tool: &str) -> Option<PathBuf> {
    let path = probe.var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .chain(KERBEROS_TOOL_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|path| probe.is_file(path))
}

/// Curator's class path: `ZKGUARD_CURATOR_CLASSPATH` as given, or the version
/// `ZKGUARD_CURATOR_VERSION` names (cached by `scripts/zk-version.sh --curator`; setting both
/// is an error), else Debian's recipes jar (its manifest names its dependencies) and
/// `slf4j-nop.jar` when present, to keep Curator quiet. `Ok(None)` when none is there; an
/// `Err` when an explicit setting is wrong.
pub(crate) fn find_curator(probe: &dyn Probe) -> Result<Option<OsString>, String> {
    let version = versions::cached(probe, versions::Product::Curator)?;
    let explicit = non_empty_var(probe, ENV_CURATOR_CLASSPATH);
    match (version, explicit) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "both {ENV_CURATOR_CLASSPATH} and {} are set: set one",
                versions::ENV_CURATOR_VERSION
            ))
        }
        (Some(found), None) => {
            return std::env::join_paths(&found.entries)
                .map(Some)
                .map_err(|e| format!("cannot build a Java class path from {}: {e}", found.source))
        }
        (None, Some(cp)) => return Ok(Some(cp)),
        (None, None) => {}
    }
    if !probe.is_file(Path::new(DEBIAN_CURATOR)) {
        return Ok(None);
    }
    let mut cp = OsString::from(DEBIAN_CURATOR);
    if probe.is_file(Path::new(DEBIAN_SLF4J_NOP)) {
        cp.push(":");
        cp.push(DEBIAN_SLF4J_NOP);
    }
    Ok(Some(cp))
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

/// What else to do about a missing Netty (besides Debian's `libnetty-java`).
pub(crate) const NETTY_OTHERWISE: &str = "use an Apache ZooKeeper binary release \
(ZOOKEEPER_HOME), whose lib/ holds Netty, or set ZKGUARD_ZOOKEEPER_CLASSPATH to a class path \
that includes Netty";

/// Why a ZooKeeper distribution cannot serve TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NoNetty {
    /// Debian's `libnetty-java` provides what is missing (the distribution is Debian's).
    pub(crate) debian: bool,
    /// What is missing, without a fix.
    pub(crate) what: String,
}

impl NoNetty {
    /// What is missing and how to fix it.
    pub(crate) fn message(&self) -> String {
        if self.debian {
            format!(
                "{}; to fix: apt-get install -y libnetty-java, or {NETTY_OTHERWISE}",
                self.what
            )
        } else {
            format!("{}; to fix: {NETTY_OTHERWISE}", self.what)
        }
    }
}

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
/// codec, handler, buffer, transport and common jars), or what is missing.
///
/// A `ZKGUARD_ZOOKEEPER_CLASSPATH` is used as given (nothing is added). A class path that
/// already names `netty-codec*.jar` and `netty-handler*.jar`, or `netty-all*.jar`, needs
/// nothing. The Debian package gets its pieces from `/usr/share/java`.
pub(crate) fn netty_entries(
    probe: &dyn Probe,
    dist: &Distribution,
) -> Result<Vec<OsString>, NoNetty> {
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
        return Err(NoNetty {
            debian: true,
            what: format!(
                "a TLS test server needs Netty (ZooKeeper's NettyServerCnxnFactory serves \
                 the secureClientPort), but {} missing",
                if missing.len() == 1 {
                    format!("{} is", missing[0])
                } else {
                    format!("{} are", missing.join(", "))
                }
            ),
        });
    }
    Err(NoNetty {
        debian: false,
        what: format!(
            "a TLS test server needs Netty (ZooKeeper's NettyServerCnxnFactory serves the \
             secureClientPort), but the class path from {} names no netty-codec*.jar and \
             netty-handler*.jar (nor netty-all*.jar)",
            dist.source
        ),
    })
}

/// `dist` with the Netty jars TLS needs appended to its class path ([`netty_entries`]).
pub(crate) fn with_netty(probe: &dyn Probe, dist: &Distribution) -> io::Result<Distribution> {
    let extra = netty_entries(probe, dist)
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e.message()))?;
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

/// The ZooKeeper distribution and `java` found now, or what is missing (no side effects;
/// [`needs::ensure`] installs).
pub(crate) fn distribution(probe: &dyn Probe) -> Result<Distribution, String> {
    let found = find_classpath(probe)?
        .ok_or_else(|| format!("found no ZooKeeper distribution (looked at {ZOOKEEPER_PLACES})"))?;
    let java = find_jdk_tool(probe, "java")
        .ok_or("found no `java` (looked at $JAVA_HOME/bin/java and every PATH entry)")?;
    let classpath = std::env::join_paths(&found.entries)
        .map_err(|e| format!("cannot build a Java class path from {}: {e}", found.source))?;
    Ok(Distribution {
        java,
        classpath,
        source: found.source,
    })
}

/// Finds a ZooKeeper distribution and `java` (and Netty when `tls`), installing what is
/// missing first when that is allowed ([`needs::ensure`]).
pub(crate) fn discover(tls: bool) -> io::Result<Distribution> {
    let needs: &[Need] = if tls {
        &[Need::ZooKeeper, Need::Java, Need::Netty]
    } else {
        &[Need::ZooKeeper, Need::Java]
    };
    needs::ensure(needs)?;
    let dist = distribution(&RealProbe).map_err(|m| io::Error::new(io::ErrorKind::NotFound, m))?;
    if tls {
        with_netty(&RealProbe, &dist)
    } else {
        Ok(dist)
    }
}

#[cfg(test)]
mod tests;
