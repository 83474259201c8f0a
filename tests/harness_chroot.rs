//! `TestChroot`: one server shared by a test binary, a fresh chroot per user, the chroot
//! deleted on drop, the server stopped with its last user. One test, so that no other test
//! of this binary holds the shared server meanwhile.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use common::connect;
use zkguard::testing::TestChroot;
use zkguard::CreateMode;

const PATIENCE: Duration = Duration::from_secs(30);

#[test]
fn chroots_share_one_server_and_the_last_one_stops_it() {
    common::init_log();
    let a = TestChroot::new().expect("a chroot");
    let b = TestChroot::new().expect("another");
    assert_eq!(
        a.cluster().connect_string(),
        b.cluster().connect_string(),
        "one server"
    );
    assert_ne!(a.chroot(), b.chroot());
    assert!(a.chroot().starts_with("/zkguard-test/"), "{}", a.chroot());

    let in_a = connect(&a.connect_string(), PATIENCE);
    let in_b = connect(&b.connect_string(), PATIENCE);
    in_a.create("/job", b"a's", CreateMode::Persistent)
        .expect("create in a");
    in_a.create("/job/deep", b"", CreateMode::Persistent)
        .expect("a child");
    in_a.create("/job/mine", b"", CreateMode::Ephemeral)
        .expect("an ephemeral");
    assert_eq!(
        in_b.exists("/job").expect("exists"),
        None,
        "b sees a's node"
    );
    in_b.create("/job", b"b's", CreateMode::Persistent)
        .expect("the same name in b");

    let server = connect(&a.cluster().connect_string(), PATIENCE);
    let a_root = a.chroot().to_string();
    assert_eq!(
        server.get_data(&format!("{a_root}/job")).expect("read").0,
        b"a's"
    );

    // Dropped while a client still holds an ephemeral in it: everything under it goes.
    drop(a);
    assert_eq!(server.exists(&a_root).expect("exists"), None, "chroot kept");
    assert_eq!(in_b.get_data("/job").expect("b still served").0, b"b's");

    // b gone, another user left: the server stays, b's chroot goes.
    let last = TestChroot::new().expect("a third chroot");
    let addr = b.cluster().client_addr(0);
    let b_root = b.chroot().to_string();
    drop(b);
    assert_eq!(server.exists(&b_root).expect("exists"), None, "chroot kept");
    // The last user gone: the server stops.
    drop(last);
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err(),
        "the shared server still listens after its last user"
    );

    // A new user starts it again.
    let c = TestChroot::new().expect("a chroot on a new server");
    let in_c = connect(&c.connect_string(), PATIENCE);
    in_c.create("/job", b"", CreateMode::Persistent)
        .expect("create in c");
}
