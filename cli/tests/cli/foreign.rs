//! A node no lock made in a lock's directory is a co-tenant's: refused tenancy (77).

use crate::common::*;
use crate::setup;

/// A node no lock made in the lock's directory (a co-tenant's, or another program's) is
/// refused tenancy: `lock` exits 77 naming it, without running the command, and so does
/// `holders`.
#[test]
fn a_foreign_node_in_the_lock_directory_is_refused_with_77() {
    let (cs, s, path) = setup("foreign");
    let c = client(&cs);
    c.ensure_path(&format!("{path}/not-a-lock-node")).unwrap();
    let ran = s.path("ran");
    let (code, _, err) = output(zkguard(&cs).args(["lock", &path, "--", "touch"]).arg(&ran));
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("\"not-a-lock-node\""), "{err}");
    assert!(!ran.exists(), "the command ran");
    let (code, _, err) = output(zkguard(&cs).args(["holders", &path]));
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("\"not-a-lock-node\""), "{err}");
}
