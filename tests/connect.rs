//! Connecting, against a real server and against fakes: a live session, deadlines and
//! errors naming each server with its own cause, unresolvable hosts, bad arguments, a
//! malformed handshake reply, rejected credentials. (A first connect while no server listens
//! yet: `tests/connect_wait.rs`; the rest of the client: `tests/client.rs`.)

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{attempts, client, connect, shared_cluster};
use zkguard::{Client, ConnectFailure, Error, SessionState};

const T: Duration = Duration::from_secs(10);

/// The kind of the I/O error a connect error gives as its `source`.
fn source_io_kind(err: &Error) -> Option<std::io::ErrorKind> {
    std::error::Error::source(err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind)
}

/// A loopback port nobody listens on.
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn connect_reports_a_live_session() {
    let c = client();
    assert_eq!(c.state(), SessionState::Connected);
    assert_ne!(c.session_id(), 0);
    assert_eq!(c.session_timeout(), T, "server grants 10 s (max is 60 s)");
    assert_eq!(c.connected_server(), Some(shared_cluster().client_addr(0)));
    assert_eq!(c.stats().sessions, 1);
    // A clone is the same session.
    assert_eq!(c.clone().session_id(), c.session_id());
}

#[test]
fn connect_to_a_port_nobody_listens_on_fails_by_the_deadline_naming_it() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let err = Client::builder(&format!("127.0.0.1:{port}"))
        .connect_timeout(Duration::from_millis(800))
        .build()
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    // Structured: the one server, the address tried, the refusal as an io::Error.
    let tried = attempts(&err);
    assert_eq!(tried.len(), 1, "{err}");
    assert_eq!(tried[0].host, format!("127.0.0.1:{port}"));
    assert_eq!(tried[0].addr, Some(([127, 0, 0, 1], port).into()));
    match &tried[0].reason {
        ConnectFailure::Io { during, source } => {
            assert_eq!(*during, "connect");
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        r => panic!("expected a refused TCP connect, got {r:?}"),
    }
    assert_eq!(
        source_io_kind(&err),
        Some(std::io::ErrorKind::ConnectionRefused),
        "{err:?}"
    );
    assert!(
        took >= Duration::from_millis(800),
        "gave up early: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "deadline not kept: {took:?}");
}

#[test]
fn a_connect_error_names_each_server_with_its_own_cause() {
    let (a, b) = (dead_port(), dead_port());
    let err = Client::builder(&format!("127.0.0.1:{a},localhost:{b}"))
        .connect_timeout(Duration::from_millis(800))
        .build()
        .unwrap_err();
    let tried = attempts(&err);
    let mut hosts: Vec<&str> = tried.iter().map(|t| t.host.as_str()).collect();
    hosts.sort();
    let (ha, hb) = (format!("127.0.0.1:{a}"), format!("localhost:{b}"));
    assert_eq!(hosts, [ha.as_str(), hb.as_str()], "{err}");
    for t in tried {
        // Both were tried (the back-off leaves time for several rounds) and refused.
        assert!(t.addr.is_some(), "{t}");
        assert!(
            matches!(&t.reason, ConnectFailure::Io { during: "connect", source }
                if source.kind() == std::io::ErrorKind::ConnectionRefused),
            "{t}"
        );
    }
    let msg = err.to_string();
    assert!(msg.contains(&ha) && msg.contains(&hb), "{msg}");
    assert!(msg.matches("refused").count() >= 2, "{msg}");
    assert_eq!(
        source_io_kind(&err),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
}

#[test]
fn connect_to_a_server_that_never_answers_fails_by_the_deadline() {
    // Accepts the TCP connection and then says nothing: the handshake must time out.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let hold = std::thread::spawn(move || {
        let mut conns = Vec::new();
        listener.set_nonblocking(false).unwrap();
        for s in listener.incoming().take(3).flatten() {
            conns.push(s);
        }
        conns.len()
    });
    let started = Instant::now();
    let err = Client::builder(&addr.to_string())
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let tried = attempts(&err);
    assert_eq!(tried.len(), 1, "{err}");
    assert_eq!(tried[0].host, addr.to_string());
    // The TCP connect worked: no refusal; the handshake got no answer (or the deadline
    // came first).
    assert!(
        matches!(&tried[0].reason, ConnectFailure::NotReached)
            || matches!(&tried[0].reason, ConnectFailure::Io { during: "handshake", source }
                if source.kind() == std::io::ErrorKind::TimedOut),
        "{err:?}"
    );
    drop(hold);
}

#[test]
fn unresolvable_hosts_fail_at_once_naming_them() {
    let started = Instant::now();
    let err = Client::connect("no-such-host.invalid:2181,other.invalid").unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("no-such-host.invalid:2181") && msg.contains("other.invalid:2181"),
        "{msg}"
    );
    // One attempt per host, in the order given, each a resolution failure with no address.
    let tried = attempts(&err);
    let hosts: Vec<&str> = tried.iter().map(|t| t.host.as_str()).collect();
    assert_eq!(hosts, ["no-such-host.invalid:2181", "other.invalid:2181"]);
    for t in tried {
        assert_eq!(t.addr, None, "{t}");
        assert!(
            matches!(
                t.reason,
                ConnectFailure::Resolve(_) | ConnectFailure::NoAddress
            ),
            "{t:?}"
        );
    }
    assert!(matches!(err, Error::Connect { after, .. } if after == Duration::ZERO));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn one_unresolvable_host_among_good_ones_is_skipped() {
    let cs = format!(
        "no-such-host.invalid:2181,{}",
        shared_cluster().connect_string()
    );
    let c = connect(&cs, T);
    assert_eq!(c.state(), SessionState::Connected);
}

#[test]
fn bad_arguments_are_named() {
    for cs in ["", "host:notaport", "a,,b", "h:2181/bad/"] {
        let e = Client::connect(cs).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidArgument {
                    name: "connect string",
                    ..
                }
            ),
            "{cs:?}: {e}"
        );
    }
    let e = Client::builder("127.0.0.1:1")
        .session_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("session timeout"), "{e}");
    let e = Client::builder("127.0.0.1:1")
        .connect_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("connect timeout"), "{e}");
}

#[test]
fn a_silent_fake_server_handshake_reply_is_checked() {
    // A "server" that answers the handshake with a frame too short to be one.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Answers every attempt the same way (the thread ends with the test process).
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            let _ = std::io::Write::write_all(&mut s, &[0, 0, 0, 3, 1, 2, 3]);
        }
    });
    let err = Client::builder(&addr.to_string())
        .connect_timeout(Duration::from_millis(1500))
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    assert!(err.to_string().contains("malformed"), "{err}");
    let tried = attempts(&err);
    assert_eq!(tried.len(), 1, "{err}");
    assert_eq!(tried[0].addr, Some(addr));
    assert!(
        matches!(&tried[0].reason, ConnectFailure::Malformed(why) if !why.is_empty()),
        "{err:?}"
    );
    // The cause is the malformed handshake itself (no I/O error behind it).
    let cause = std::error::Error::source(&err).expect("a cause");
    assert!(
        matches!(
            cause.downcast_ref::<ConnectFailure>(),
            Some(ConnectFailure::Malformed(_))
        ),
        "{cause}"
    );
}

#[test]
fn rejected_credentials_fail_the_build_with_auth_failed() {
    // The server knows no such scheme and refuses the credentials.
    let err = Client::builder(&shared_cluster().connect_string())
        .connect_timeout(Duration::from_secs(5))
        .auth("no-such-scheme", b"x")
        .build()
        .unwrap_err();
    assert_eq!(err, Error::AuthFailed);
    let e = Client::builder("127.0.0.1:1")
        .auth("", b"x")
        .build()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                name: "auth scheme",
                ..
            }
        ),
        "{e}"
    );
}
