//! Server and Curator versions other than the installed ones: the jars
//! `scripts/zk-version.sh` fetched once and cached, named by `ZKGUARD_ZOOKEEPER_VERSION`
//! and `ZKGUARD_CURATOR_VERSION`.
//!
//! Nothing is fetched here: a named version that is not cached is an error saying which
//! command fetches it, never a quiet fall back to another server.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{jars_in, non_empty_var, FoundClasspath, Probe};

/// Environment variable naming a ZooKeeper server version cached by `scripts/zk-version.sh`.
pub(crate) const ENV_VERSION: &str = "ZKGUARD_ZOOKEEPER_VERSION";
/// Environment variable naming a Curator version cached by `scripts/zk-version.sh --curator`.
pub(crate) const ENV_CURATOR_VERSION: &str = "ZKGUARD_CURATOR_VERSION";
/// Environment variable moving the cache (the script honours it too).
pub(crate) const ENV_VERSIONS_DIR: &str = "ZKGUARD_VERSIONS_DIR";
/// The cache's default place: this repository's `target/zk-versions`.
const DEFAULT_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/zk-versions");

/// What a cached version is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Product {
    /// A ZooKeeper server.
    ZooKeeper,
    /// Curator's recipes with a ZooKeeper client.
    Curator,
}

impl Product {
    /// The variable that names a version, the cache directory's prefix, the jar whose
    /// presence shows the version is cached, and the script's option.
    fn parts(self, version: &str) -> (&'static str, String, String, &'static str) {
        match self {
            Product::ZooKeeper => (
                ENV_VERSION,
                format!("zookeeper-{version}"),
                format!("zookeeper-{version}.jar"),
                "",
            ),
            Product::Curator => (
                ENV_CURATOR_VERSION,
                format!("curator-{version}"),
                format!("curator-recipes-{version}.jar"),
                "--curator ",
            ),
        }
    }
}

/// Where the cache is: `ZKGUARD_VERSIONS_DIR`, else `target/zk-versions` in this repository.
fn cache_dir(probe: &dyn Probe) -> PathBuf {
    non_empty_var(probe, ENV_VERSIONS_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR))
}

/// The class path of the version of `product` the environment names: `Ok(None)` when none
/// is named, an error naming the command to run when it is not cached (or the name is not a
/// version).
pub(crate) fn cached(
    probe: &dyn Probe,
    product: Product,
) -> Result<Option<FoundClasspath>, String> {
    let var = product.parts("").0;
    let Some(version) = non_empty_var(probe, var) else {
        return Ok(None);
    };
    let version = version.to_string_lossy().into_owned();
    if !version
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        || !version.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!(
            "{var}={} is not a version (like 3.9.3)",
            crate::error::escape(&version)
        ));
    }
    let (_, name, marker, option) = product.parts(&version);
    let dir = cache_dir(probe).join(name);
    let lib = dir.join("lib");
    if !probe.is_file(&lib.join(&marker)) {
        return Err(format!(
            "{var}={version}: {} holds no {marker}; run scripts/zk-version.sh {option}{version} \
             once to fetch it ({ENV_VERSIONS_DIR} moves the cache)",
            lib.display()
        ));
    }
    Ok(Some(FoundClasspath {
        entries: classpath(probe, &dir),
        source: format!("{var}={version} ({})", dir.display()),
    }))
}

/// A cached directory's class path: `conf/` (its logging configuration) then `lib/*.jar`.
fn classpath(probe: &dyn Probe, dir: &Path) -> Vec<OsString> {
    let mut entries = vec![dir.join("conf").into_os_string()];
    entries.extend(
        jars_in(probe, &dir.join("lib"))
            .into_iter()
            .map(PathBuf::into_os_string),
    );
    entries
}
