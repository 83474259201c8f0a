use super::*;
use std::collections::HashMap;

/// A fake probe for unit tests: a set of files and environment variables.
#[derive(Default)]
pub(super) struct FakeProbe {
    vars: HashMap<String, OsString>,
    files: Vec<PathBuf>,
}

impl FakeProbe {
    pub(super) fn var(mut self, k: &str, v: &str) -> Self {
        self.vars.insert(k.to_string(), v.into());
        self
    }
    pub(super) fn file(mut self, p: &str) -> Self {
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

fn entries(p: &FakeProbe) -> Vec<String> {
    find_classpath(p)
        .expect("no error")
        .expect("found")
        .entries
        .iter()
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

pub(super) fn with_java(p: FakeProbe) -> FakeProbe {
    p.var("PATH", "/nonexistent:/usr/bin").file("/usr/bin/java")
}

pub(super) fn debian() -> FakeProbe {
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
    assert_eq!(
        find_jdk_tool(&p, "java"),
        Some(PathBuf::from("/jdk/bin/java"))
    );
    let p = FakeProbe::default()
        .var("JAVA_HOME", "/broken")
        .var("PATH", "/a:/usr/bin")
        .file("/usr/bin/java");
    assert_eq!(
        find_jdk_tool(&p, "java"),
        Some(PathBuf::from("/usr/bin/java"))
    );
    let p = FakeProbe::default().var("PATH", "/a:/b");
    assert_eq!(find_jdk_tool(&p, "java"), None);
}

#[test]
fn distribution_uses_what_it_finds_or_says_what_is_missing() {
    let d = distribution(&with_java(debian())).expect("found");
    assert_eq!(d.java, PathBuf::from("/usr/bin/java"));
    assert_eq!(
        d.classpath,
        OsString::from(format!("{DEBIAN_JAR}:{DEBIAN_SLF4J_SIMPLE}"))
    );
    let err = distribution(&debian()).expect_err("no java");
    assert!(err.contains("found no `java`"), "{err}");
    let err = distribution(&with_java(FakeProbe::default())).expect_err("no ZooKeeper");
    assert!(err.contains("found no ZooKeeper distribution"), "{err}");
}

#[test]
fn curator_from_the_environment_or_debian_with_slf4j_nop_when_present() {
    let found = |p: &FakeProbe| find_curator(p).expect("no error");
    let p = FakeProbe::default().file(DEBIAN_CURATOR);
    assert_eq!(found(&p), Some(OsString::from(DEBIAN_CURATOR)));
    let p = p.file(DEBIAN_SLF4J_NOP);
    assert_eq!(
        found(&p),
        Some(OsString::from(format!(
            "{DEBIAN_CURATOR}:{DEBIAN_SLF4J_NOP}"
        )))
    );
    let p = p.var(ENV_CURATOR_CLASSPATH, "/c/*");
    assert_eq!(found(&p), Some(OsString::from("/c/*")));
    assert_eq!(found(&FakeProbe::default()), None);
}

#[test]
fn a_named_version_is_its_cached_jars_with_conf_first_and_wins_over_debian() {
    let p = with_java(debian())
        .var(versions::ENV_VERSIONS_DIR, "/cache")
        .var(versions::ENV_VERSION, "3.6.3")
        .file("/cache/zookeeper-3.6.3/conf/log4j2.properties")
        .file("/cache/zookeeper-3.6.3/lib/zookeeper-3.6.3.jar")
        .file("/cache/zookeeper-3.6.3/lib/netty-codec-4.1.96.Final.jar");
    assert_eq!(
        entries(&p),
        [
            "/cache/zookeeper-3.6.3/conf",
            "/cache/zookeeper-3.6.3/lib/netty-codec-4.1.96.Final.jar",
            "/cache/zookeeper-3.6.3/lib/zookeeper-3.6.3.jar",
        ]
    );
    let d = distribution(&p).expect("found");
    assert!(
        d.source.contains("ZKGUARD_ZOOKEEPER_VERSION=3.6.3"),
        "{}",
        d.source
    );

    let p = p
        .var(ENV_CURATOR_CLASSPATH, "")
        .var(versions::ENV_CURATOR_VERSION, "5.7.1")
        .file("/cache/curator-5.7.1/lib/curator-recipes-5.7.1.jar");
    assert_eq!(
        find_curator(&p).expect("no error"),
        Some(OsString::from(
            "/cache/curator-5.7.1/conf:/cache/curator-5.7.1/lib/curator-recipes-5.7.1.jar"
        ))
    );
}

#[test]
fn a_named_version_not_cached_fails_naming_the_command_never_falls_back() {
    // Debian's server is there: a missing 3.9.3 must not quietly become 3.8.0.
    let p = with_java(debian())
        .var(versions::ENV_VERSIONS_DIR, "/cache")
        .var(versions::ENV_VERSION, "3.9.3")
        // Another version cached does not count.
        .file("/cache/zookeeper-3.6.3/lib/zookeeper-3.6.3.jar");
    let err = find_classpath(&p).expect_err("must fail");
    assert!(err.contains("scripts/zk-version.sh 3.9.3"), "{err}");
    assert!(err.contains("/cache/zookeeper-3.9.3/lib"), "{err}");
    assert!(matches!(
        super::needs::Need::ZooKeeper.check(&p),
        super::needs::Check::Broken(_)
    ));

    let p = FakeProbe::default()
        .file(DEBIAN_CURATOR)
        .var(versions::ENV_VERSIONS_DIR, "/cache")
        .var(versions::ENV_CURATOR_VERSION, "5.7.1");
    let err = find_curator(&p).expect_err("must fail");
    assert!(
        err.contains("scripts/zk-version.sh --curator 5.7.1"),
        "{err}"
    );
    assert!(matches!(
        super::needs::Need::Curator.check(&p),
        super::needs::Check::Broken(_)
    ));
}

#[test]
fn a_named_version_refuses_both_variables_and_what_is_not_a_version() {
    let p = FakeProbe::default()
        .var(versions::ENV_VERSIONS_DIR, "/cache")
        .var(versions::ENV_VERSION, "3.9.3")
        .var(ENV_CLASSPATH, "/x.jar")
        .file("/cache/zookeeper-3.9.3/lib/zookeeper-3.9.3.jar");
    let err = find_classpath(&p).expect_err("must fail");
    assert!(err.contains("set one"), "{err}");
    for bad in ["../../etc", "3.9.3/../x", "latest", "3.9.3\u{1b}[2J"] {
        let p = FakeProbe::default().var(versions::ENV_VERSION, bad);
        let err = find_classpath(&p).expect_err(bad);
        assert!(err.contains("is not a version"), "{err}");
        assert!(!err.contains('\u{1b}'), "{err:?}");
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
    assert!(err.debian, "{err:?}");
    let msg = err.message();
    assert!(msg.contains("netty-codec.jar"), "{msg}");
    assert!(msg.contains("apt-get install -y libnetty-java"), "{msg}");
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
    assert!(!err.debian, "{err:?}");
    let msg = err.message();
    assert!(msg.contains("netty-codec"), "{msg}");
    assert!(msg.contains("ZOOKEEPER_HOME"), "{msg}");
    let explicit = FakeProbe::default().var(ENV_CLASSPATH, "/x.jar");
    assert!(netty_entries(&explicit, &dist("/x.jar"))
        .expect("as given")
        .is_empty());
}
