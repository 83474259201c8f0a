//! Apache Curator and a JDK, for interop tests that run Curator beside zkguard.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use super::discover::{self, Need, RealProbe};

/// Apache Curator's recipes and a JDK to compile and run Java code against them, found or
/// installed like ZooKeeper itself (see [Installing what is
/// missing](super#installing-what-is-missing)):
/// what this crate's `tests/curator.rs` uses to run Curator's recipes on the same servers
/// and paths as zkguard's.
///
/// - `classpath`: `ZKGUARD_CURATOR_CLASSPATH` when set, used as given, or the version
///   `ZKGUARD_CURATOR_VERSION` names (`5.7.1`: its jars as `scripts/zk-version.sh --curator`
///   cached them, with the ZooKeeper client of its release; never fetched here); else Debian's
///   `/usr/share/java/curator-recipes.jar` (its manifest names Curator's framework, client
///   and ZooKeeper's jars), plus `/usr/share/java/slf4j-nop.jar` when present so Curator
///   logs nothing;
/// - `java` and `javac`: `$JAVA_HOME/bin/…` when present, else on `PATH`.
///
/// ```no_run
/// let curator = zkguard::testing::CuratorJava::find()?;
/// std::process::Command::new(&curator.javac)
///     .arg("-cp")
///     .arg(&curator.classpath)
///     .arg("Peer.java")
///     .status()?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CuratorJava {
    /// The `java` executable.
    pub java: PathBuf,
    /// The `javac` executable.
    pub javac: PathBuf,
    /// Curator's recipes and what they need, as a Java class path.
    pub classpath: OsString,
}

impl CuratorJava {
    /// Finds Curator, `java` and `javac`, first installing what is missing with one
    /// `apt-get install` (`libcurator-recipes-java`, `default-jdk-headless`) when the process
    /// runs as root on a Debian-family machine and `ZKGUARD_NO_INSTALL` is unset.
    ///
    /// # Errors
    ///
    /// `NotFound` naming what is missing, the exact `apt-get` command to run and the
    /// environment variables that point elsewhere; or the install's failure, quoting the
    /// last lines of `apt-get`'s output.
    pub fn find() -> io::Result<CuratorJava> {
        discover::needs::ensure(&[Need::Curator, Need::Java, Need::Javac])?;
        let probe = RealProbe;
        let missing = |what: &str| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{what} was found a moment ago and is gone"),
            )
        };
        Ok(CuratorJava {
            java: discover::find_jdk_tool(&probe, "java").ok_or_else(|| missing("java"))?,
            javac: discover::find_jdk_tool(&probe, "javac").ok_or_else(|| missing("javac"))?,
            classpath: discover::find_curator(&probe)
                .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))?
                .ok_or_else(|| missing("Curator"))?,
        })
    }
}
