//! `holders` on a semaphore: each contender once, whatever nodes it has, with how long it has
//! held or waited.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::setup;

/// One permit, held by `a`; `b` waits for it holding the semaphore's internal lock (a
/// lease node and an internal-lock node), `c` queues on the internal lock. `holders`
/// lists three contenders (holder, next, waiter), in JSON and as a table, and a refused
/// try counts two others waiting.
#[test]
fn holders_lists_a_semaphore_waiter_once() {
    let (cs, s, path) = setup("sem-holders");
    let c = client(&cs);
    let go = until_file(&s.path("go"));
    let start = |name: &str| {
        let args = ["lock", &path, "--permits", "1", "--data", name];
        start_sh(&cs, &s, name, &args, &go)
    };
    let mut procs = vec![start("a")];
    let sem = zkguard::Semaphore::new(&c, &path, 1).unwrap();
    let wait_nodes = |n: usize| {
        wait_count("nodes", n, || {
            sem.participants().map(|p| p.len()).unwrap_or(0)
        })
    };
    wait_nodes(1);
    procs.push(start("b"));
    // b's internal-lock node and its lease.
    wait_nodes(3);
    procs.push(start("c"));
    wait_nodes(4);

    let (code, out, err) = output(zkguard(&cs).args(["holders", &path, "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let rows: Vec<(String, String)> = v["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["data"].as_str().unwrap().into(),
                p["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want = [("a", "holder"), ("b", "next"), ("c", "waiter")];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(d, r)| (d.to_string(), r.to_string()))
        .collect();
    assert_eq!(rows, want, "{v}");
    assert!(
        v["participants"][1]["internal_lock_node"].is_string(),
        "{v}"
    );
    // How long, from each node's ctime: the holder has held, the others have waited (and
    // only that: one key each).
    for (i, (key, not)) in [
        ("held_for_s", "waiting_for_s"),
        ("waiting_for_s", "held_for_s"),
        ("waiting_for_s", "held_for_s"),
    ]
    .into_iter()
    .enumerate()
    {
        let p = &v["participants"][i];
        assert!(p[key].is_u64() && p.get(not).is_none(), "{v}");
    }

    let (code, out, _) = output(zkguard(&cs).args(["holders", &path]));
    assert_eq!(code, 0);
    assert_eq!(out.matches("  b\n").count(), 1, "{out}");
    let line = |data: &str| out.lines().find(|l| l.ends_with(data)).unwrap_or_default();
    assert!(line("  a").contains(" held "), "{out}");
    assert!(
        line("  b").contains(" waiting ") && line("  c").contains(" waiting "),
        "{out}"
    );
    let (code, _, err) =
        output(zkguard(&cs).args(["lock", &path, "--permits", "1", "-n", "--", "true"]));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("held by a for") && err.contains("(2 others waiting)"),
        "{err}"
    );

    s.touch("go");
    for p in &mut procs {
        assert_eq!(p.wait(PATIENCE), 0, "{}", p.stderr());
    }
}

/// `leader --watch` and `elect -l` print each change of leader (as `etcdctl elect -l`):
/// none, `a`, then `b` once `a`'s command ends (not again when `b` queues), none once
/// `b`'s ends; they stop on SIGINT with 0.
#[test]
fn leader_watch_prints_each_change_of_leader() {
    let (cs, s, path) = setup("leader-watch");
    // `leader --watch`, and `elect -l` as etcdctl users know it.
    let mut watchers: Vec<_> = [["leader", &path, "--watch"], ["elect", &path, "-l"]]
        .iter()
        .enumerate()
        .map(|(i, args)| {
            let out = std::fs::File::create(s.path(&format!("watch{i}"))).unwrap();
            let err = std::fs::File::create(s.path(&format!("watch{i}.stderr"))).unwrap();
            zkguard(&cs)
                .args(args)
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap()
        })
        .collect();
    let watched = |want: &[&str]| {
        for i in 0..2 {
            let name = format!("watch{i}");
            s.wait_lines(&name, &format!("{name}: the leaders {want:?}"), |l| {
                l == want
            });
        }
    };
    watched(&["(no leader)"]);
    let candidate = |id: &str| {
        let args = ["elect", &path, "--id", id];
        start_sh(
            &cs,
            &s,
            id,
            &args,
            &until_file(&s.path(&format!("go-{id}"))),
        )
    };
    let mut a = candidate("a");
    watched(&["(no leader)", "a"]);
    let mut b = candidate("b");
    wait_contenders(&client(&cs), &path, 2);
    s.touch("go-a");
    assert_eq!(a.wait(PATIENCE), 0, "{}", a.stderr());
    watched(&["(no leader)", "a", "b"]);
    s.touch("go-b");
    assert_eq!(b.wait(PATIENCE), 0, "{}", b.stderr());
    watched(&["(no leader)", "a", "b", "(no leader)"]);

    for (i, watcher) in watchers.iter_mut().enumerate() {
        // SAFETY: a plain kill(2) of our own child.
        unsafe {
            libc::kill(watcher.id() as i32, libc::SIGINT);
        }
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(st) = watcher.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "watcher {i} did not stop on SIGINT"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = s.lines(&format!("watch{i}.stderr"));
        assert_eq!(exit_code(status), 0, "{err:?}");
    }
}
