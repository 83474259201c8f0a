//! `zkguard::admin` (the four-letter words, the admin server) and the public input checks
//! (`ConnectString`, `validate_path`) against real servers: what a server answers is read
//! into its figures, a word off its whitelist is refused, and a server whose answer never
//! comes (a black hole, a stalled path) ends the exchange at its timeout. Hostile
//! listeners that trickle or flood: the unit tests in `src/admin/tests.rs`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use zkguard::admin::{self, AdminError, Srvr};
use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::{validate_path, Client, ConnectString, Error};

/// Long: a live server answers within it.
const ANSWERS: Duration = Duration::from_secs(30);
/// Short: waited for in full when nothing answers; never asserted on.
const SILENT: Duration = Duration::from_millis(500);

/// The first server of a connect string, as the library parses it.
fn first(connect: &str) -> SocketAddr {
    let cs = ConnectString::parse(connect).expect("the harness's connect string parses");
    cs.hosts()[0].parse().expect("a loopback address")
}

#[test]
fn a_servers_words_read_into_figures() {
    let cluster = common::shared_cluster();
    let addr = first(&cluster.connect_string());
    assert_eq!(addr, cluster.client_addr(0));
    assert_eq!(
        admin::four_letter(addr, "ruok", ANSWERS).expect("ruok"),
        "imok"
    );
    let srvr = Srvr::parse(&admin::four_letter(addr, "srvr", ANSWERS).expect("srvr"));
    assert_eq!(srvr.mode.as_deref(), Some("standalone"));
    assert!(srvr.serving());
    assert_eq!(
        srvr.release(),
        Some(cluster.version(0).expect("the harness reads it"))
    );
    let conf = admin::parse_conf(&admin::four_letter(addr, "conf", ANSWERS).expect("conf"));
    assert_eq!(conf["tickTime"], "100", "{conf:?}");
    let mntr = admin::parse_mntr(&admin::four_letter(addr, "mntr", ANSWERS).expect("mntr"));
    assert_eq!(mntr["server_state"], "standalone", "{mntr:?}");
    assert!(mntr["avg_latency"].parse::<f64>().is_ok(), "{mntr:?}");
}

/// ZooKeeper's default whitelist (`srvr` alone): the others are refused, by name.
#[test]
fn a_word_off_the_whitelist_is_not_allowed() {
    let cluster = TestCluster::builder()
        .four_letter_words(&["srvr"])
        .start()
        .expect("start");
    let addr = cluster.client_addr(0);
    assert!(admin::four_letter(addr, "srvr", ANSWERS).is_ok());
    for word in ["conf", "mntr", "envi"] {
        match admin::four_letter(addr, word, ANSWERS) {
            Err(AdminError::NotAllowed { word: w, reply }) => {
                assert_eq!(w, word);
                assert!(reply.contains("not in the whitelist"), "{reply}");
            }
            other => panic!("{word}: {other:?}"),
        }
    }
}

/// The admin server says in JSON what `mntr` says in lines.
#[test]
fn the_admin_server_answers_its_commands() {
    let cluster = TestCluster::builder()
        .admin_server(true)
        .start()
        .expect("start");
    let port = cluster.admin_port(0).expect("an AdminServer port");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let body = admin::admin_command(addr, "monitor", ANSWERS).expect("monitor");
    assert!(body.contains("\"server_state\""), "{body}");
    let e = admin::admin_command(addr, "../../etc", ANSWERS).unwrap_err();
    assert!(matches!(e, AdminError::InvalidWord { .. }), "{e:?}");
}

/// Through a proxy that swallows everything, or that holds the server's answer back, the
/// word ends at its timeout as `NoAnswer`; healed, the same proxy answers again.
#[test]
fn a_black_hole_or_a_stalled_answer_is_no_answer() {
    let cluster = common::shared_cluster();
    let proxy = FaultProxy::for_cluster(cluster).expect("proxy");
    let addr = first(&proxy.connect_string());
    assert!(admin::four_letter(addr, "srvr", ANSWERS).is_ok());
    proxy.blackhole();
    let e = admin::four_letter(addr, "srvr", SILENT).unwrap_err();
    assert!(matches!(e, AdminError::NoAnswer { .. }), "{e:?}");
    proxy.heal();
    proxy.stall_server_to_client();
    let e = admin::four_letter(addr, "mntr", SILENT).unwrap_err();
    assert!(matches!(e, AdminError::NoAnswer { .. }), "{e:?}");
    proxy.heal();
    assert!(admin::four_letter(addr, "srvr", ANSWERS).is_ok());
}

/// What the checks refuse never reaches a server: a client built on a bad connect string
/// is refused at build, a bad path at the request, both with the error the public check
/// gives.
#[test]
fn the_public_checks_are_the_clients() {
    let cs = common::shared_cluster().connect_string();
    for bad in [
        format!("{cs},"),
        format!("{cs}:1"),
        format!("{cs}/app//x"),
        format!("zk://{cs}"),
    ] {
        let said = ConnectString::parse(&bad).unwrap_err();
        let built = Client::builder(&bad).build().map(|_| ()).unwrap_err();
        assert_eq!(built, said, "{bad}");
    }
    let with_chroot = ConnectString::parse(&format!("{cs}/admin-tests")).expect("parses");
    assert_eq!(with_chroot.chroot(), "/admin-tests");
    let client = Client::connect(&cs).expect("connect");
    for bad in ["/a/", "/a//b", "/a/./b", "/a/\u{1b}[2J", "a"] {
        let said = validate_path(bad).unwrap_err();
        assert!(matches!(said, Error::InvalidPath { .. }), "{said:?}");
        assert_eq!(client.exists(bad).unwrap_err(), said, "{bad:?}");
    }
}
