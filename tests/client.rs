//! The client against a real server: every operation and its errors, watches, pipelining,
//! chroot, close, many threads on one client. (Connecting: `tests/connect.rs`.)

mod common;

use std::time::{Duration, Instant};

use common::{client, connect, next_watch, shared_cluster, unique};
use zkguard::{
    Acl, Client, CloseOutcome, CreateMode, Error, EventType, Op, OpResult, Perms, SessionEvent,
    SessionState,
};

const T: Duration = Duration::from_secs(10);

#[test]
fn create_read_update_delete() {
    let c = client();
    let p = unique("crud");
    let created = c.create(&p, b"one", CreateMode::Persistent).unwrap();
    assert_eq!(created.path, p);
    assert!(created.stat.czxid > 0);
    assert_eq!(created.stat.ephemeral_owner, 0);
    assert_eq!(created.stat.data_length, 3);

    let (data, stat) = c.get_data(&p).unwrap();
    assert_eq!(data, b"one");
    assert_eq!(stat, created.stat);

    let st2 = c.set_data(&p, b"two", Some(0)).unwrap();
    assert_eq!(st2.version, 1);
    assert!(st2.mzxid > stat.mzxid);
    assert_eq!(c.exists(&p).unwrap(), Some(st2));

    assert_eq!(
        c.set_data(&p, b"x", Some(0)).unwrap_err(),
        Error::BadVersion { path: p.clone() }
    );
    assert_eq!(
        c.delete(&p, Some(0)).unwrap_err(),
        Error::BadVersion { path: p.clone() }
    );
    c.delete(&p, Some(1)).unwrap();
    assert_eq!(c.exists(&p).unwrap(), None);
}

#[test]
fn create_modes() {
    let c = client();
    let dir = unique("modes");
    c.create(&dir, b"", CreateMode::Persistent).unwrap();

    let e = c
        .create(&format!("{dir}/e"), b"", CreateMode::Ephemeral)
        .unwrap();
    assert_eq!(e.stat.ephemeral_owner, c.session_id());

    let s1 = c
        .create(&format!("{dir}/s-"), b"", CreateMode::PersistentSequential)
        .unwrap();
    let s2 = c
        .create(&format!("{dir}/s-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    let seq = |p: &str| p.rsplit('-').next().unwrap().to_string();
    assert_eq!(seq(&s1.path).len(), 10, "{}", s1.path);
    assert!(seq(&s2.path) > seq(&s1.path));
    assert_eq!(s2.stat.ephemeral_owner, c.session_id());

    // A sequential create may end in '/': the number becomes the name.
    let s3 = c
        .create(&format!("{dir}/"), b"", CreateMode::PersistentSequential)
        .unwrap();
    assert_eq!(s3.path.len(), dir.len() + 11, "{}", s3.path);

    // Ephemeral nodes cannot have children.
    let err = c
        .create(&format!("{dir}/e/child"), b"", CreateMode::Persistent)
        .unwrap_err();
    assert_eq!(
        err,
        Error::NoChildrenForEphemerals {
            path: format!("{dir}/e/child")
        }
    );

    let (mut kids, stat) = c.get_children(&dir).unwrap();
    kids.sort();
    assert_eq!(stat.num_children, 4);
    assert_eq!(kids.len(), 4);
    assert!(kids.contains(&"e".to_string()));
}

#[test]
fn container_is_a_real_container() {
    // A plain create with flag 4 would make a persistent node that is never reaped.
    let c = client();
    let dir = unique("container");
    c.create(&dir, b"", CreateMode::Container).unwrap();
    let child = format!("{dir}/c");
    c.create(&child, b"", CreateMode::Ephemeral).unwrap();
    let (_, watch) = c.exists_w(&dir).unwrap();
    c.delete(&child, None).unwrap();
    // The server reaps the empty container (check interval 100 ms in the harness).
    let ev = watch
        .recv_timeout(Duration::from_secs(20))
        .expect("container reaped");
    assert_eq!(ev.event_type, EventType::NodeDeleted);
    assert_eq!(c.exists(&dir).unwrap(), None);
}

#[test]
fn ttl_nodes_are_created_with_the_ttl_op_and_reaped() {
    let c = client();
    let p = unique("ttl");
    match c.create(
        &p,
        b"",
        CreateMode::PersistentWithTtl(Duration::from_millis(200)),
    ) {
        Ok(created) => {
            assert_eq!(created.path, p);
            let (_, watch) = c.exists_w(&p).unwrap();
            let ev = watch
                .recv_timeout(Duration::from_secs(20))
                .expect("TTL node reaped");
            assert_eq!(ev.event_type, EventType::NodeDeleted);
        }
        // Servers without extendedTypesEnabled refuse TTL nodes: the error must say which op.
        Err(e) => panic!("TTL create failed (harness should enable extended types): {e}"),
    }
    let e = c
        .create(&p, b"", CreateMode::PersistentWithTtl(Duration::ZERO))
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { name: "ttl", .. }),
        "{e}"
    );
}

#[test]
fn errors_name_the_path_and_nothing_is_sent_for_bad_paths() {
    let c = client();
    let p = unique("errs");
    assert_eq!(
        c.get_data(&p).unwrap_err(),
        Error::NoNode { path: p.clone() }
    );
    assert_eq!(
        c.set_data(&p, b"", None).unwrap_err(),
        Error::NoNode { path: p.clone() }
    );
    assert_eq!(
        c.delete(&p, None).unwrap_err(),
        Error::NoNode { path: p.clone() }
    );
    assert_eq!(
        c.get_children(&p).unwrap_err(),
        Error::NoNode { path: p.clone() }
    );
    let orphan = format!("{p}/child");
    assert_eq!(
        c.create(&orphan, b"", CreateMode::Persistent).unwrap_err(),
        Error::NoNode {
            path: orphan.clone()
        }
    );
    c.create(&p, b"", CreateMode::Persistent).unwrap();
    assert_eq!(
        c.create(&p, b"", CreateMode::Persistent).unwrap_err(),
        Error::NodeExists { path: p.clone() }
    );
    c.create(&orphan, b"", CreateMode::Persistent).unwrap();
    assert_eq!(
        c.delete(&p, None).unwrap_err(),
        Error::NotEmpty { path: p.clone() }
    );
    assert!(Error::NotEmpty { path: p.clone() }.to_string().contains(&p));

    for bad in ["relative", "/trailing/", "/a//b", "/a/./b", "/a/../b", ""] {
        let e = c.get_data(bad).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidPath { path, .. } if path == bad),
            "{bad:?}: {e}"
        );
        assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
    }
    assert!(matches!(
        c.delete("/", None).unwrap_err(),
        Error::InvalidPath { .. }
    ));
    // Still connected and working after all that.
    assert_eq!(c.state(), SessionState::Connected);
    assert!(c.exists(&p).unwrap().is_some());
}

#[test]
fn acls_open_read_only_creator_all_and_custom() {
    let c = client();
    let p = unique("acl");
    c.create_with_acl(&p, b"ro", CreateMode::Persistent, &Acl::read_unsafe())
        .unwrap();
    assert_eq!(c.get_data(&p).unwrap().0, b"ro");
    assert_eq!(
        c.set_data(&p, b"x", None).unwrap_err(),
        Error::NoAuth {
            path: p.clone(),
            op: "set_data"
        }
    );

    // creator_all needs an authenticated identity.
    let q = unique("acl-creator");
    assert_eq!(
        c.create_with_acl(&q, b"", CreateMode::Persistent, &Acl::creator_all())
            .unwrap_err(),
        Error::InvalidAcl { path: q.clone() }
    );
    let authed = Client::builder(&shared_cluster().connect_string())
        .auth("digest", b"alice:secret")
        .build()
        .unwrap();
    authed
        .create_with_acl(&q, b"mine", CreateMode::Persistent, &Acl::creator_all())
        .unwrap();
    assert_eq!(authed.get_data(&q).unwrap().0, b"mine");
    assert_eq!(
        c.get_data(&q).unwrap_err(),
        Error::NoAuth {
            path: q.clone(),
            op: "get_data"
        }
    );

    // A custom ACL: world may read and create children, nothing else.
    let r = unique("acl-custom");
    c.create_with_acl(
        &r,
        b"",
        CreateMode::Persistent,
        &[Acl::new(Perms::READ | Perms::CREATE, "world", "anyone")],
    )
    .unwrap();
    c.create(&format!("{r}/kid"), b"", CreateMode::Persistent)
        .unwrap();
    // A refused delete (and create) names the parent, whose ACL said no, and the operation.
    let refused = c.delete(&format!("{r}/kid"), None).unwrap_err();
    assert_eq!(
        refused,
        Error::NoAuth {
            path: r.clone(),
            op: "delete"
        }
    );
    assert!(
        refused.to_string().contains(&format!("ACL of node {r} "))
            && refused.to_string().contains("deleting children"),
        "{refused}"
    );
    let ro = unique("acl-ro-dir");
    c.create_with_acl(&ro, b"", CreateMode::Persistent, &Acl::read_unsafe())
        .unwrap();
    let refused = c
        .create(&format!("{ro}/kid-"), b"", CreateMode::EphemeralSequential)
        .unwrap_err();
    assert_eq!(
        refused,
        Error::NoAuth {
            path: ro.clone(),
            op: "create"
        }
    );
    assert!(
        refused.to_string().contains("creating children"),
        "{refused}"
    );
    // Inside a multi too.
    let refused = c
        .multi(&[Op::Create {
            path: format!("{ro}/m"),
            data: vec![],
            mode: CreateMode::Persistent,
        }])
        .unwrap_err();
    assert!(
        matches!(&refused, Error::Multi { index: 0, source } if **source == Error::NoAuth { path: ro.clone(), op: "create" }),
        "{refused:?}"
    );
    assert!(matches!(
        c.create_with_acl(&unique("acl-empty"), b"", CreateMode::Persistent, &[])
            .unwrap_err(),
        Error::InvalidArgument { name: "acl", .. }
    ));
}

#[test]
fn sync_and_large_values() {
    let c = client();
    let p = unique("big");
    let big: Vec<u8> = (0..900_000u32).map(|i| (i % 251) as u8).collect();
    c.create(&p, &big, CreateMode::Persistent).unwrap();
    c.sync(&p).unwrap();
    let (data, stat) = c.get_data(&p).unwrap();
    assert_eq!(stat.data_length as usize, big.len());
    assert!(data == big, "900 kB value came back different");
    // Many children: a reply larger than one read.
    for i in 0..300 {
        c.create(
            &format!("{p}/child-with-a-longish-name-{i:05}"),
            b"",
            CreateMode::Persistent,
        )
        .unwrap();
    }
    assert_eq!(c.get_children(&p).unwrap().0.len(), 300);
}

/// A create body is the path and the data (each with a 4-byte length), the open ACL (27
/// bytes) and the flags; the frame adds the xid and op code.
fn create_frame_len(path: &str, data_len: usize) -> usize {
    8 + (4 + path.len()) + (4 + data_len) + 27 + 4
}

#[test]
fn a_request_over_the_servers_jute_maxbuffer_is_refused_before_it_is_sent() {
    // Measured on ZooKeeper 3.8: a 1,048,575-byte frame is taken, one byte more and the
    // server drops the connection (every request in flight would see ConnectionLoss).
    let c = client();
    let session = c.session_id();
    let connects = c.stats().connect_attempts;
    let p = unique("huge");
    let fits = 1_048_575 - create_frame_len(&p, 0);
    let err = c
        .create(&p, &vec![1u8; fits + 1], CreateMode::Persistent)
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { name: "request size", reason }
            if reason.contains(&p) && reason.contains("1048576 bytes")),
        "{err}"
    );
    // Nothing went out: same connection, same session, no node.
    assert_eq!(c.exists(&p).unwrap(), None);
    assert_eq!(c.session_id(), session);
    assert_eq!(c.stats().connect_attempts, connects);
    // The largest frame the server takes goes through.
    c.create(&p, &vec![2u8; fits], CreateMode::Persistent)
        .unwrap();
    assert_eq!(c.get_data(&p).unwrap().1.data_length as usize, fits);
    // The same holds inside a multi, and for set_data.
    let err = c
        .multi(&[Op::SetData {
            path: p.clone(),
            data: vec![3u8; fits + 100],
            version: None,
        }])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    let err = c.set_data(&p, &vec![3u8; fits + 100], None).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert_eq!(c.stats().connect_attempts, connects);
    // A client told the servers take more may send more (here the server refuses it: the
    // connection drops, which is what the default limit saves everyone from).
    let loose = Client::builder(&shared_cluster().connect_string())
        .max_request_size(2 << 20)
        .build()
        .unwrap();
    let err = loose
        .create(
            &unique("huge"),
            &vec![1u8; fits + 1],
            CreateMode::Persistent,
        )
        .unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    loose.close();
}

#[test]
fn multi_applies_all_or_nothing() {
    let c = client();
    let p = unique("multi");
    c.create(&p, b"", CreateMode::Persistent).unwrap();
    let res = c
        .multi(&[
            Op::Check {
                path: p.clone(),
                version: Some(0),
            },
            Op::Create {
                path: format!("{p}/a"),
                data: b"1".to_vec(),
                mode: CreateMode::Persistent,
            },
            Op::SetData {
                path: p.clone(),
                data: b"v".to_vec(),
                version: None,
            },
            Op::Create {
                path: format!("{p}/s-"),
                data: vec![],
                mode: CreateMode::EphemeralSequential,
            },
        ])
        .unwrap();
    assert_eq!(res.len(), 4);
    assert_eq!(res[0], OpResult::Check);
    assert_eq!(
        res[1],
        OpResult::Create {
            path: format!("{p}/a"),
            stat: None,
        }
    );
    assert!(matches!(res[2], OpResult::SetData { stat } if stat.version == 1));
    assert!(
        matches!(&res[3], OpResult::Create { path, .. } if path.starts_with(&format!("{p}/s-")))
    );

    // The third op fails: nothing is applied, and the error says which one and why.
    let err = c
        .multi(&[
            Op::Create {
                path: format!("{p}/b"),
                data: vec![],
                mode: CreateMode::Persistent,
            },
            Op::Delete {
                path: format!("{p}/a"),
                version: None,
            },
            Op::Check {
                path: p.clone(),
                version: Some(0),
            },
        ])
        .unwrap_err();
    match err {
        Error::Multi { index, source } => {
            assert_eq!(index, 2);
            assert_eq!(*source, Error::BadVersion { path: p.clone() });
        }
        e => panic!("unexpected {e}"),
    }
    assert_eq!(c.exists(&format!("{p}/b")).unwrap(), None);
    assert!(c.exists(&format!("{p}/a")).unwrap().is_some());
    assert_eq!(c.multi(&[]).unwrap(), vec![]);
}

#[test]
fn pipeline_sends_in_order_and_fails_requests_one_by_one() {
    let c = client();
    let dir = unique("pipe");
    c.create(&dir, b"", CreateMode::Persistent).unwrap();
    let (created, bad, listing) = c.pipeline(|p| {
        (
            p.create(&format!("{dir}/n-"), b"", CreateMode::EphemeralSequential),
            p.get_data("not/absolute"),
            p.get_children(&dir),
        )
    });
    let me = created.wait().unwrap();
    assert!(matches!(bad.wait().unwrap_err(), Error::InvalidPath { .. }));
    let (kids, _) = listing.wait().unwrap();
    // The listing was applied after the create: it contains our node.
    assert_eq!(kids, vec![me.path.rsplit('/').next().unwrap().to_string()]);
}

/// A request of a pipeline goes out only when the pipeline's closure returns, so waiting
/// for its reply inside the closure can never succeed. It must fail at once, not sit out
/// the whole request timeout (a year for a `Duration::MAX` handle) and then be sent anyway
/// behind the caller's back.
#[test]
fn waiting_for_a_reply_inside_the_pipeline_closure_fails_at_once() {
    let c = client().with_timeout(Duration::from_secs(5));
    let p = unique("inside");
    let started = Instant::now();
    let r = c.pipeline(|pl| pl.create(&p, b"", CreateMode::Persistent).wait());
    let took = started.elapsed();
    assert!(
        matches!(r, Err(Error::InvalidArgument { .. })),
        "expected a misuse error, got {r:?}"
    );
    assert!(took < Duration::from_secs(2), "waited {took:?}");
    // And the request the caller was told failed was not sent after all (requests of one
    // session are applied in order: this read comes after it).
    assert_eq!(c.exists(&p).unwrap(), None);
}

#[test]
fn watches_fire_once_with_the_right_event() {
    let c = client();
    let other = client();
    let p = unique("watch");

    // exists on a missing node: NodeCreated.
    let (none, created_w) = c.exists_w(&p).unwrap();
    assert_eq!(none, None);
    other.create(&p, b"0", CreateMode::Persistent).unwrap();
    let ev = created_w.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (EventType::NodeCreated, p.as_str())
    );

    // get_data: NodeDataChanged, once.
    let (_, _, data_w) = c.get_data_w(&p).unwrap();
    let (_, _, kids_w) = c.get_children_w(&p).unwrap();
    other.set_data(&p, b"1", None).unwrap();
    let ev = data_w.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(ev.event_type, EventType::NodeDataChanged);
    other.set_data(&p, b"2", None).unwrap();
    // Our next reply shows the second change; any event for it would have come before.
    assert_eq!(c.get_data(&p).unwrap().0, b"2");
    assert!(data_w.try_recv().is_err(), "a watch fired twice");
    assert!(
        kids_w.try_recv().is_err(),
        "child watch fired on a data change"
    );

    // get_children: NodeChildrenChanged.
    other
        .create(&format!("{p}/k"), b"", CreateMode::Persistent)
        .unwrap();
    let ev = kids_w.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(ev.event_type, EventType::NodeChildrenChanged);

    // exists on an existing node and get_data: both see NodeDeleted.
    other.delete(&format!("{p}/k"), None).unwrap();
    let (_, exists_w) = c.exists_w(&p).unwrap();
    let (_, _, data_w) = c.get_data_w(&p).unwrap();
    let (_, _, kids_w) = c.get_children_w(&p).unwrap();
    other.delete(&p, None).unwrap();
    for w in [exists_w, data_w, kids_w] {
        let ev = w.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(ev.event_type, EventType::NodeDeleted);
    }
    // Counted once per notification frame (3.6+ sends one NodeDeleted frame per session).
    assert!(c.stats().watch_events >= 4);
}

#[test]
fn get_data_w_on_a_missing_node_leaves_no_watch() {
    let c = client();
    let other = client();
    let p = unique("nowatch");
    assert_eq!(
        c.get_data_w(&p).unwrap_err(),
        Error::NoNode { path: p.clone() }
    );
    let before = c.stats().watch_events;
    other.create(&p, b"", CreateMode::Persistent).unwrap();
    other.delete(&p, None).unwrap();
    // A round trip after the changes: an event would have arrived before its reply.
    c.exists(&p).unwrap();
    assert_eq!(c.stats().watch_events, before);
}

#[test]
fn dropped_watch_receivers_do_not_disturb_delivery() {
    let c = client();
    let other = client();
    let p = unique("dropped");
    c.create(&p, b"", CreateMode::Persistent).unwrap();
    for _ in 0..50 {
        let (_, _, w) = c.get_data_w(&p).unwrap();
        drop(w);
    }
    let (_, _, kept) = c.get_data_w(&p).unwrap();
    other.set_data(&p, b"x", None).unwrap();
    assert_eq!(next_watch(&kept), EventType::NodeDataChanged);
    assert_eq!(c.get_data(&p).unwrap().0, b"x");
}

#[test]
fn chroot_is_invisible_to_the_caller() {
    let root = client();
    let base = unique("chroot");
    root.create(&base, b"", CreateMode::Persistent).unwrap();
    let c = connect(&format!("{}{base}", shared_cluster().connect_string()), T);
    let created = c.create("/a", b"x", CreateMode::Persistent).unwrap();
    assert_eq!(created.path, "/a");
    assert_eq!(root.get_data(&format!("{base}/a")).unwrap().0, b"x");
    assert_eq!(c.get_children("/").unwrap().0, vec!["a"]);
    let (_, _, w) = c.get_data_w("/a").unwrap();
    root.set_data(&format!("{base}/a"), b"y", None).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_secs(10)).unwrap().path, "/a");
    let s = c
        .create("/q-", b"", CreateMode::PersistentSequential)
        .unwrap();
    assert!(s.path.starts_with("/q-"), "{}", s.path);
    assert_eq!(
        c.get_data("/b").unwrap_err(),
        Error::NoNode { path: "/b".into() }
    );
}

#[test]
fn a_missing_chroot_is_an_error_naming_it() {
    let missing = unique("no-such-chroot");
    let err = Client::builder(&format!("{}{missing}", shared_cluster().connect_string()))
        .session_timeout(T)
        .build()
        .unwrap_err();
    match &err {
        Error::InvalidPath { path, .. } => assert_eq!(path, &missing),
        other => panic!("expected InvalidPath naming the chroot, got {other:?}"),
    }
    assert!(err.to_string().contains(&missing), "{err}");
    assert!(err.to_string().contains("chroot"), "{err}");
}

#[test]
fn close_ends_the_session_at_once() {
    let observer = client();
    let c = client();
    let events = c.events();
    let p = unique("close");
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    let (_, _, own_w) = c.get_data_w(&p).unwrap();
    let q = unique("close-other");
    observer.create(&q, b"", CreateMode::Persistent).unwrap();
    let (_, _, w) = c.get_data_w(&q).unwrap();
    let clone = c.clone();
    let outcome = c.close();
    assert!(matches!(outcome, CloseOutcome::Confirmed), "{outcome:?}");
    assert!(outcome.is_clean());
    // The ephemeral node went with the session, not after a timeout.
    assert_eq!(observer.exists(&p).unwrap(), None);
    assert_eq!(clone.state(), SessionState::Closed);
    // No session and no server once closed.
    assert_eq!((clone.session_id(), clone.connected_server()), (0, None));
    assert_eq!(clone.get_data(&p).unwrap_err(), Error::Closed);
    assert_eq!(
        events.recv_timeout(Duration::from_secs(1)).unwrap(),
        SessionEvent::Closed
    );
    // The server deleted our ephemeral node as the session closed, and said so first.
    assert_eq!(
        own_w
            .recv_timeout(Duration::from_secs(1))
            .unwrap()
            .event_type,
        EventType::NodeDeleted
    );
    // Every other watch learns that it will never fire.
    assert_eq!(
        w.recv_timeout(Duration::from_secs(1)).unwrap().event_type,
        EventType::Closed
    );
    assert!(matches!(clone.close(), CloseOutcome::AlreadyClosed));
}

#[test]
fn dropping_the_last_handle_closes_the_session() {
    let observer = client();
    let p = unique("drop");
    let c = connect(&shared_cluster().connect_string(), Duration::from_secs(30));
    c.create(&p, b"", CreateMode::Ephemeral).unwrap();
    let (_, w) = observer.exists_w(&p).unwrap();
    let clone = c.clone();
    drop(c);
    // Still open: a clone lives.
    assert!(clone.exists(&p).unwrap().is_some());
    let started = Instant::now();
    drop(clone);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "drop blocked {:?}",
        started.elapsed()
    );
    // Deleted well before the 30 s session timeout could have done it.
    assert_eq!(next_watch(&w), EventType::NodeDeleted);
}

#[test]
fn many_threads_share_one_client_without_mixing_replies() {
    let c = client();
    let dir = unique("threads");
    c.create(&dir, b"", CreateMode::Persistent).unwrap();
    let workers: Vec<_> = (0..8)
        .map(|t| {
            let c = c.clone();
            let p = format!("{dir}/t{t}");
            std::thread::spawn(move || {
                c.create(&p, b"", CreateMode::Persistent).unwrap();
                for i in 0..150u32 {
                    let value = format!("{t}-{i}");
                    let stat = c.set_data(&p, value.as_bytes(), Some(i as i32)).unwrap();
                    assert_eq!(stat.version, i as i32 + 1);
                    // Pipelined and plain requests from all threads interleave on one socket.
                    let (a, b) = c.pipeline(|q| (q.get_data(&p), q.exists(&p)));
                    assert_eq!(a.wait().unwrap().0, value.as_bytes());
                    assert_eq!(b.wait().unwrap().unwrap().version, i as i32 + 1);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(c.get_children(&dir).unwrap().1.num_children, 8);
}

/// `ensure_path` makes every missing node on the way (persistent, empty), leaves existing
/// ones alone, says which node an ephemeral one stops, and sends nothing for a bad path.
#[test]
fn ensure_path_creates_what_is_missing_and_leaves_the_rest() {
    let cs = shared_cluster().connect_string();
    let c = connect(&cs, Duration::from_secs(10));
    let top = unique("ensure");
    let deep = format!("{top}/a/b/c");
    c.ensure_path(&deep).unwrap();
    for node in [
        top.clone(),
        format!("{top}/a"),
        format!("{top}/a/b"),
        deep.clone(),
    ] {
        let (data, stat) = c.get_data(&node).unwrap();
        assert!(data.is_empty(), "{node}: {data:?}");
        assert_eq!(stat.ephemeral_owner, 0, "{node} is not persistent");
    }
    // Again, and with data already at a node on the way: nothing changes.
    c.set_data(&format!("{top}/a"), b"kept", None).unwrap();
    c.ensure_path(&deep).unwrap();
    c.ensure_path(&format!("{top}/a")).unwrap();
    assert_eq!(c.get_data(&format!("{top}/a")).unwrap().0, b"kept");
    c.ensure_path("/").unwrap();
    // An ephemeral node on the way.
    let eph = format!("{top}/eph");
    c.create(&eph, b"", CreateMode::Ephemeral).unwrap();
    match c.ensure_path(&format!("{eph}/x/y")) {
        Err(Error::NoChildrenForEphemerals { path }) => assert_eq!(path, format!("{eph}/x")),
        other => panic!("expected NoChildrenForEphemerals, got {other:?}"),
    }
    // A bad path is refused before anything is sent.
    let before = c.stats().requests;
    common::assert_invalid_path(c.ensure_path("relative/x"), "relative/x", "ensure_path");
    common::assert_invalid_path(
        c.ensure_path(&format!("{top}/")),
        &format!("{top}/"),
        "ensure_path",
    );
    assert_eq!(c.stats().requests, before, "requests sent for a bad path");
}

/// A handle with an unbounded timeout works (it used to panic adding `Duration::MAX` to
/// the clock).
#[test]
fn a_handle_with_duration_max_as_its_timeout_works() {
    let c = connect(&shared_cluster().connect_string(), Duration::from_secs(10));
    let forever = c.with_timeout(Duration::MAX);
    assert!(forever.exists("/").unwrap().is_some());
}
