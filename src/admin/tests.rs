//! The exchange against hostile listeners (silent, trickling, flooding, lying), and the
//! parsers. The real servers' answers are tested in `tests/admin.rs`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use super::*;

/// Short: each case that expects no answer waits for it to pass; never asserted on.
const SHORT: Duration = Duration::from_millis(300);
/// Long: a case that expects an answer gets it long before.
const LONG: Duration = Duration::from_secs(60);

/// A listener on loopback that takes one connection, reads what the client sends (up to
/// its first write's worth), then behaves as `then` says. The thread ends when `then` does.
fn hostile(then: impl FnOnce(TcpStream) + Send + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf);
            then(s);
        }
    });
    addr
}

/// Keeps the connection open, saying nothing, until the client hangs up.
fn silent(mut s: TcpStream) {
    let _ = io::copy(&mut s, &mut io::sink());
}

/// Answers `text` and closes.
fn answer(text: &'static [u8]) -> impl FnOnce(TcpStream) {
    move |mut s| {
        let _ = s.write_all(text);
    }
}

#[test]
fn a_server_that_never_answers_is_no_answer_within_the_timeout() {
    let addr = hostile(silent);
    let e = four_letter(addr, "srvr", SHORT).unwrap_err();
    assert!(matches!(e, AdminError::NoAnswer { .. }), "{e:?}");
    assert!(e.to_string().contains("no whole answer"), "{e}");
}

/// One byte every 20 ms, forever: each read returns in time, the whole never ends. The
/// deadline is the exchange's, not a read's.
#[test]
fn a_trickle_is_no_answer_within_the_timeout() {
    let addr = hostile(|mut s| {
        while s.write_all(b"x").is_ok() {
            thread::sleep(Duration::from_millis(20));
        }
    });
    let e = four_letter(addr, "mntr", SHORT).unwrap_err();
    assert!(matches!(e, AdminError::NoAnswer { .. }), "{e:?}");
}

/// 10 MB, as fast as it goes: read up to `MAX_REPLY`, then given up.
#[test]
fn ten_megabytes_are_too_large_and_not_kept() {
    for ask in [
        |a| four_letter(a, "mntr", LONG),
        |a| admin_command(a, "monitor", LONG),
    ] as [fn(SocketAddr) -> Result<String, AdminError>; 2]
    {
        let addr = hostile(|mut s| {
            let chunk = vec![b'a'; 64 * 1024];
            for _ in 0..160 {
                if s.write_all(&chunk).is_err() {
                    return;
                }
            }
        });
        let e = ask(addr).unwrap_err();
        assert_eq!(
            e,
            AdminError::TooLarge {
                addr,
                limit: MAX_REPLY
            }
        );
    }
}

/// A reply of exactly `MAX_REPLY` bytes is read whole.
#[test]
fn a_reply_of_the_limit_is_read() {
    let addr = hostile(|mut s| {
        let _ = s.write_all(&vec![b'a'; MAX_REPLY]);
    });
    let reply = four_letter(addr, "dump", LONG).expect("read");
    assert_eq!(reply.len(), MAX_REPLY);
}

#[test]
fn a_refused_or_empty_answer_is_not_allowed() {
    let addr = hostile(answer(
        b"conf is not executed because it is not in the whitelist.\n",
    ));
    let e = four_letter(addr, "conf", LONG).unwrap_err();
    assert!(
        matches!(&e, AdminError::NotAllowed { word, reply } if word == "conf" && reply.contains("whitelist")),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "`conf` is not in 4lw.commands.whitelist (the server refused it)"
    );
    let addr = hostile(answer(b" \n"));
    let e = four_letter(addr, "envi", LONG).unwrap_err();
    assert!(matches!(e, AdminError::NotAllowed { .. }), "{e:?}");
}

/// Nothing is sent for what is not a word or a command (a newline would end a request
/// early; a path would ask the admin server for something else).
#[test]
fn bad_words_are_refused_before_connecting() {
    // Nothing listens on port 1: a connect would fail with `Connect`, not `InvalidWord`.
    let addr: SocketAddr = "127.0.0.1:1".parse().expect("addr");
    for word in ["", "srv", "srvrx", "SRVR", "sr\nv", "mnt\0", "ruök"] {
        let e = four_letter(addr, word, SHORT).unwrap_err();
        assert!(
            matches!(e, AdminError::InvalidWord { .. }),
            "{word:?}: {e:?}"
        );
    }
    for command in ["", "../x", "monitor?x", "Monitor", "monitor\r\nHost: x"] {
        let e = admin_command(addr, command, SHORT).unwrap_err();
        assert!(
            matches!(e, AdminError::InvalidWord { .. }),
            "{command:?}: {e:?}"
        );
    }
    let e = four_letter(addr, "x\u{1b}[2J", SHORT).unwrap_err();
    assert!(!e.to_string().contains('\u{1b}'), "{e}");
}

#[test]
fn nothing_listening_is_a_connect_error() {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    drop(l);
    let e = four_letter(addr, "ruok", LONG).unwrap_err();
    assert!(matches!(e, AdminError::Connect { .. }), "{e:?}");
}

/// The admin server's status line is the server's text: escaped in the error.
#[test]
fn admin_server_answers_are_checked_and_escaped() {
    let addr = hostile(answer(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"x\": 1}",
    ));
    assert_eq!(
        admin_command(addr, "monitor", LONG).expect("200"),
        "{\"x\": 1}"
    );
    let addr = hostile(answer(b"HTTP/1.1 404 \x1b[31mNot\x07 Found\r\n\r\n"));
    let e = admin_command(addr, "monitor", LONG).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, AdminError::Http { .. }), "{e:?}");
    assert!(
        text.contains("404") && !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text}"
    );
    let addr = hostile(answer(b"imok"));
    let e = admin_command(addr, "monitor", LONG).unwrap_err();
    assert_eq!(e.to_string(), "/commands/monitor: not an HTTP answer");
}

#[test]
fn srvr_of_each_release_line_tested() {
    let at = |v: &str| Srvr::parse(&format!("Zookeeper version: {v}\nMode: standalone\n"));
    // 3.6.3's, 3.8.0's (Debian) and 3.9.3's lines, as their servers answer.
    let s = at("3.6.3--6401e4ad2087061bc6b9f80dec2d69f2e3c8660a, built on 04/08/2021 16:35 GMT");
    assert_eq!(s.release(), Some((3, 6, 3)));
    assert_eq!(s.short_version().as_deref(), Some("3.6.3"));
    assert_eq!(
        at("3.8.0-5a02a05, built on 2022").release(),
        Some((3, 8, 0))
    );
    assert_eq!(
        at("3.9.3-c26634f, built on 2024").release(),
        Some((3, 9, 3))
    );
    assert_eq!(at("3.10.0, built on 2026").release(), Some((3, 10, 0)));
    assert_eq!(at("unknown").release(), None);
    assert_eq!(Srvr::parse("Mode: standalone\n").release(), None);
    assert!(at("3.8.0").serving());
    let idle = Srvr::parse("This ZooKeeper instance is not currently serving requests\n");
    assert_eq!(idle, Srvr::default());
    assert!(!idle.serving());
    assert!(!Srvr::new(None, Some("looking".into())).serving());
}

#[test]
fn mntr_and_conf_lines() {
    let m = parse_mntr("zk_avg_latency\t0.5\nzk_server_state\tleader\ngarbage\nnot_zk\t1\n");
    assert_eq!(m.len(), 3);
    assert_eq!(m["avg_latency"], "0.5");
    assert_eq!(m["server_state"], "leader");
    assert_eq!(m["not_zk"], "1");
    let c = parse_conf("tickTime=2000\n syncLimit = 5 \nserver.1=a:2888:3888:participant\n");
    assert_eq!(c["tickTime"], "2000");
    assert_eq!(c["syncLimit"], "5");
    assert_eq!(c["server.1"], "a:2888:3888:participant");
}
