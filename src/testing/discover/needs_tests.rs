//! Unit tests of the install planning in `needs.rs` (pure: a fake probe, no apt).

use super::*;
use crate::testing::discover::tests::{debian, with_java, FakeProbe};

const ROOT: Machine = Machine {
    debian: true,
    root: true,
    attempted: &[],
};
const ALL: &[Need] = &[
    Need::ZooKeeper,
    Need::Java,
    Need::Netty,
    Need::Curator,
    Need::Javac,
];

fn netty(mut p: FakeProbe) -> FakeProbe {
    for j in [
        "netty-buffer",
        "netty-codec",
        "netty-common",
        "netty-handler",
        "netty-transport",
    ] {
        p = p.file(&format!("/usr/share/java/{j}.jar"));
    }
    p
}

/// A machine with Debian's ZooKeeper, Netty and a JRE, as the `zookeeper` package
/// leaves it.
fn zookeeper_only() -> FakeProbe {
    netty(with_java(debian()))
}

fn fail(plan: Plan) -> String {
    match plan {
        Plan::Fail(msg) => msg,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_fresh_machine_installs_every_missing_package_in_one_go() {
    let fresh = FakeProbe::default().var("PATH", "/usr/bin");
    assert_eq!(
        plan(&fresh, ALL, ROOT),
        Plan::Install(vec![
            "zookeeper",
            "default-jre-headless",
            "libnetty-java",
            "libcurator-recipes-java",
            "default-jdk-headless",
        ])
    );
    assert_eq!(
        plan(&zookeeper_only(), ALL, ROOT),
        Plan::Install(vec!["libcurator-recipes-java", "default-jdk-headless"])
    );
    assert_eq!(
        plan(&zookeeper_only(), &[Need::ZooKeeper, Need::Java], ROOT),
        Plan::Ready
    );
    let complete = zookeeper_only()
        .file("/usr/share/java/curator-recipes.jar")
        .file("/usr/bin/javac");
    assert_eq!(plan(&complete, ALL, ROOT), Plan::Ready);
}

#[test]
fn curator_and_javac_come_from_the_environment_when_set() {
    let p = zookeeper_only()
        .var(ENV_CURATOR_CLASSPATH, "/curator/*")
        .var("JAVA_HOME", "/jdk")
        .file("/jdk/bin/javac");
    assert_eq!(plan(&p, ALL, ROOT), Plan::Ready);
    // An empty variable counts as unset.
    let p = zookeeper_only()
        .var(ENV_CURATOR_CLASSPATH, "")
        .file("/usr/bin/javac");
    assert_eq!(
        plan(&p, &[Need::Curator], ROOT),
        Plan::Install(vec!["libcurator-recipes-java"])
    );
}

#[test]
fn without_root_debian_or_permission_it_prints_the_exact_command_and_why() {
    let p = zookeeper_only();
    let needs = [Need::Curator, Need::Javac];
    let cases = [
        (
            Machine {
                root: false,
                ..ROOT
            },
            "run `sudo apt-get install -y libcurator-recipes-java default-jdk-headless`",
            "not run as root",
        ),
        (
            Machine {
                debian: false,
                ..ROOT
            },
            "run `apt-get install -y libcurator-recipes-java default-jdk-headless`",
            "not a Debian-family machine",
        ),
        (
            Machine {
                attempted: &["libcurator-recipes-java"],
                ..ROOT
            },
            "run `apt-get install -y libcurator-recipes-java default-jdk-headless`",
            "`apt-get install -y libcurator-recipes-java` already ran",
        ),
    ];
    for (machine, command, why) in cases {
        let msg = fail(plan(&p, &needs, machine));
        assert!(msg.contains(command), "{msg}");
        assert!(msg.contains(why), "{msg}");
        assert!(msg.contains("found no Apache Curator"), "{msg}");
        assert!(msg.contains("found no `javac`"), "{msg}");
        assert!(msg.contains(ENV_CURATOR_CLASSPATH), "{msg}");
        assert!(msg.contains("JAVA_HOME to a JDK"), "{msg}");
    }
    let msg = fail(plan(&p.var(ENV_NO_INSTALL, "1"), &needs, ROOT));
    assert!(msg.contains("ZKGUARD_NO_INSTALL is set"), "{msg}");
    // A package tried before does not stop the install of another one.
    let other = Machine {
        attempted: &["zookeeper"],
        ..ROOT
    };
    assert_eq!(
        plan(&zookeeper_only(), &[Need::Javac], other),
        Plan::Install(vec!["default-jdk-headless"])
    );
}

#[test]
fn zookeeper_and_java_install_only_as_root_on_debian_once_and_when_allowed() {
    let nothing = with_java(FakeProbe::default());
    let needs = [Need::ZooKeeper, Need::Java];
    assert_eq!(
        plan(&nothing, &needs, ROOT),
        Plan::Install(vec!["zookeeper"])
    );
    assert_eq!(
        plan(&debian(), &needs, ROOT),
        Plan::Install(vec!["default-jre-headless"])
    );
    let msg = fail(plan(
        &nothing,
        &needs,
        Machine {
            attempted: &["zookeeper"],
            ..ROOT
        },
    ));
    assert!(msg.contains("apt-get install -y zookeeper`"), "{msg}");
    assert!(msg.contains("ZOOKEEPER_HOME"), "{msg}");
    assert!(msg.contains("ZKGUARD_ZOOKEEPER_CLASSPATH"), "{msg}");
    assert!(msg.contains("/opt/apache-zookeeper*-bin"), "{msg}");
    let msg = fail(plan(
        &debian(),
        &needs,
        Machine {
            root: false,
            ..ROOT
        },
    ));
    assert!(msg.contains("found no `java`"), "{msg}");
    assert!(
        msg.contains("sudo apt-get install -y default-jre-headless`"),
        "{msg}"
    );
    assert!(!msg.contains("zookeeper`"), "{msg}");
}

#[test]
fn the_kdc_installs_only_the_missing_kerberos_packages() {
    let none = FakeProbe::default().var("PATH", "/usr/bin");
    assert_eq!(
        plan(&none, KERBEROS, ROOT),
        Plan::Install(vec!["krb5-kdc", "krb5-admin-server", "krb5-user"])
    );
    // kinit and klist are there (krb5-user), the KDC is not.
    let user = none.file("/usr/bin/kinit").file("/usr/bin/klist");
    assert_eq!(
        plan(&user, KERBEROS, ROOT),
        Plan::Install(vec!["krb5-kdc", "krb5-admin-server"])
    );
    // The sbin tools are found off PATH (a non-root PATH lacks /usr/sbin).
    let all = user
        .file("/usr/sbin/krb5kdc")
        .file("/usr/sbin/kdb5_util")
        .file("/usr/sbin/kadmin.local");
    assert_eq!(plan(&all, KERBEROS, ROOT), Plan::Ready);
    // A KDC without kdb5_util is still missing its package.
    let half = FakeProbe::default()
        .var("PATH", "/opt/krb/bin")
        .file("/opt/krb/bin/krb5kdc");
    assert_eq!(
        plan(&half, &[Need::Kdc], ROOT),
        Plan::Install(vec!["krb5-kdc"])
    );
    let msg = fail(plan(
        &half,
        KERBEROS,
        Machine {
            root: false,
            ..ROOT
        },
    ));
    assert!(
        msg.contains("sudo apt-get install -y krb5-kdc krb5-admin-server krb5-user`"),
        "{msg}"
    );
    assert!(msg.contains("found no `kdb5_util`"), "{msg}");
    assert!(msg.contains("found no `kadmin.local`"), "{msg}");
    assert!(msg.contains("/usr/sbin"), "{msg}");
    let msg = fail(plan(&half.var(ENV_NO_INSTALL, "1"), KERBEROS, ROOT));
    assert!(msg.contains("ZKGUARD_NO_INSTALL is set"), "{msg}");
    assert!(msg.contains("MIT Kerberos"), "{msg}");
}

#[test]
fn only_a_locked_package_list_makes_apt_get_update_try_again() {
    let failed = |tail: &str| io::Error::other(format!("`apt-get update` failed: {tail}"));
    // apt 2.6's words when a second test process runs `apt-get update` at once.
    assert!(lists_locked(&failed(
        "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 7232 \
         (apt-get)\nE: Unable to lock directory /var/lib/apt/lists/"
    )));
    assert!(!lists_locked(&failed(
        "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease"
    )));
}

#[test]
fn what_installing_cannot_fix_fails_even_as_root() {
    let p = with_java(debian()).var("ZOOKEEPER_HOME", "/nowhere");
    let msg = fail(plan(&p, &[Need::ZooKeeper], ROOT));
    assert!(msg.contains("/nowhere"), "{msg}");
    // An Apache release without Netty: Debian's libnetty-java would not be used.
    let p = with_java(FakeProbe::default())
        .file("/zk/lib/zookeeper-3.8.4.jar")
        .var("ZOOKEEPER_HOME", "/zk");
    assert_eq!(plan(&p, &[Need::ZooKeeper, Need::Java], ROOT), Plan::Ready);
    let msg = fail(plan(&p, &[Need::Netty], ROOT));
    assert!(msg.contains("netty-codec*.jar"), "{msg}");
    assert!(!msg.contains("apt-get"), "{msg}");
    // Debian's ZooKeeper without Netty: the package fixes it.
    assert_eq!(
        plan(&with_java(debian()), &[Need::Netty], ROOT),
        Plan::Install(vec!["libnetty-java"])
    );
}
