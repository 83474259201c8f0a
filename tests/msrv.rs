//! The `rust-version` the manifests declare: the same for the library and the command line,
//! and no dependency of either (normal and build dependencies, every feature, this
//! platform's, as Cargo.lock resolves them) declares a newer one. CI's clippy step checks
//! our own use of std against it (`incompatible_msrv`, on by default); neither check sees
//! language or Cargo features newer than it: only a build with that toolchain would, and CI
//! has one toolchain. Pure: `cargo metadata`, no ZooKeeper.

use std::process::Command;

/// A `rust-version` ("1.89", "1.89.0") as numbers, missing parts as 0.
fn version(v: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    parts.resize(3, 0);
    parts
}

/// A package of the resolved graph: its name and version, and the `rust-version` it
/// declares (empty if none).
#[derive(Debug)]
struct Package {
    name: String,
    rust: String,
}

/// The names of the `deps` that need a newer Rust than `ours`.
fn too_new<'a>(ours: &str, deps: &'a [Package]) -> Vec<&'a str> {
    deps.iter()
        .filter(|p| version(&p.rust) > version(ours))
        .map(|p| p.name.as_str())
        .collect()
}

/// This machine's target triple, from `rustc -vV`.
fn host() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

/// The workspace's members, and every package they depend on (normal and build edges).
fn workspace() -> (Vec<Package>, Vec<Package>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--all-features",
        ])
        .args(["--filter-platform", &host()])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let package = |id: &String| {
        let p = meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .find(|p| p["id"] == **id)
            .expect("every resolved id is a package");
        Package {
            name: format!("{} {}", text(&p["name"]), text(&p["version"])),
            rust: text(&p["rust_version"]),
        }
    };
    let members: Vec<String> = meta["workspace_members"]
        .as_array()
        .expect("members")
        .iter()
        .map(text)
        .collect();
    let nodes = meta["resolve"]["nodes"].as_array().expect("a resolve");
    let mut seen: Vec<String> = Vec::new();
    let mut todo = members.clone();
    while let Some(id) = todo.pop() {
        let node = nodes.iter().find(|n| n["id"] == *id).expect("a node");
        for dep in node["deps"].as_array().expect("deps") {
            let shipped = dep["dep_kinds"]
                .as_array()
                .expect("dep_kinds")
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build");
            let dep_id = text(&dep["pkg"]);
            if shipped && !seen.contains(&dep_id) && !members.contains(&dep_id) {
                seen.push(dep_id.clone());
                todo.push(dep_id);
            }
        }
    }
    (
        members.iter().map(package).collect(),
        seen.iter().map(package).collect(),
    )
}

#[test]
fn no_dependency_needs_a_newer_rust_than_the_manifests_declare() {
    let (ours, deps) = workspace();
    assert_eq!(ours.len(), 2, "the library and the command line: {ours:?}");
    let declared = &ours[0].rust;
    assert!(!declared.is_empty(), "no rust-version declared: {ours:?}");
    assert!(
        ours.iter().all(|p| p.rust == *declared),
        "the manifests declare different rust-versions: {ours:?}"
    );
    assert!(deps.len() > 20, "only {} dependencies found", deps.len());
    let newer = too_new(declared, &deps);
    assert!(
        newer.is_empty(),
        "these dependencies declare a rust-version newer than {declared}: {newer:?}"
    );
}

#[test]
fn a_dependency_newer_than_ours_is_named() {
    let dep = |name: &str, rust: &str| Package {
        name: name.to_string(),
        rust: rust.to_string(),
    };
    let deps = [
        dep("old", "1.60"),
        dep("same", "1.89.0"),
        dep("new", "1.89.1"),
        dep("none", ""),
    ];
    assert_eq!(too_new("1.89", &deps), ["new"]);
    assert_eq!(too_new("1.88", &deps), ["same", "new"]);
}
