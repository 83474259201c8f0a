//! `elect --hand-over-on-exit`: a supervised leader stopped by SIGTERM stops its command,
//! then hands leadership to the next candidate (or, with `--hand-over-to`, the newest or a
//! named one) and waits until it leads; alone, it resigns. And the rolling restart: three
//! daemons restarted one by one, the leadership changes counted, the leaderless time per
//! change printed, never two leaders.

use zkguard::{Client, Error, LeaderChange, LeaderElection, Op};

use crate::common::*;
use crate::setup;

/// One term of a daemon's command, as its lines in the shared log say it.
#[derive(Debug, Clone)]
struct Term {
    id: String,
    token: u64,
    node: String,
    /// `date +%s%N` at its start and (SIGTERMed) end, in nanoseconds.
    start: u128,
    end: Option<u128>,
}

/// The daemons' command: says its start (id, token, node, time) in `log`, writes
/// `w TOKEN` there every 20 ms (the resource: a fenced one refuses a token lower than the
/// highest it has seen), and at SIGTERM says its end and exits 0.
fn daemon_script(log: &str) -> String {
    format!(
        "echo \"start $ZKGUARD_ID $ZKGUARD_TOKEN $ZKGUARD_NODE $(date +%s%N)\" >> {log}; \
         trap 'echo \"end $ZKGUARD_ID $ZKGUARD_TOKEN $(date +%s%N)\" >> {log}; exit 0' TERM; \
         while :; do echo \"w $ZKGUARD_TOKEN\" >> {log}; sleep 0.02; done"
    )
}

/// The terms in `lines`, checked as a fenced resource would: every write's token is its
/// term's, no term starts before the one before it has ended (the old job is stopped
/// first), and tokens only grow (no write would have been refused).
fn terms(lines: &[String]) -> Vec<Term> {
    let mut terms: Vec<Term> = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "start" => {
                if let Some(t) = terms.last() {
                    assert!(
                        t.end.is_some(),
                        "a term started before {t:?} ended: {lines:?}"
                    );
                }
                let token: u64 = f[2].parse().unwrap();
                if let Some(t) = terms.last() {
                    assert!(token > t.token, "tokens go backwards: {lines:?}");
                }
                terms.push(Term {
                    id: f[1].to_string(),
                    token,
                    node: f[3].to_string(),
                    start: f[4].parse().unwrap(),
                    end: None,
                });
            }
            "w" | "end" => {
                let t = terms.last_mut().expect("a write before any start");
                let token: u64 = f[if f[0] == "w" { 1 } else { 2 }].parse().unwrap();
                assert_eq!(
                    token, t.token,
                    "a write of another term inside {t:?}: {lines:?}"
                );
                assert!(t.end.is_none(), "a write after the end of {t:?}: {lines:?}");
                if f[0] == "end" {
                    t.end = Some(f[3].parse().unwrap());
                }
            }
            _ => panic!("a line no command wrote: {line:?}"),
        }
    }
    terms
}

/// Fenced writes into `resource` as each term's holder would make them: refused for every
/// term but the last (its node is gone), accepted for the last, whose token is then the
/// highest the resource holds.
fn fenced_writes(c: &Client, resource: &str, terms: &[Term]) {
    let write = |t: &Term| {
        c.multi(&[
            Op::Check {
                path: t.node.clone(),
                version: None,
            },
            Op::SetData {
                path: resource.to_string(),
                data: t.token.to_string().into_bytes(),
                version: None,
            },
        ])
    };
    let (last, old) = terms.split_last().expect("a term");
    for t in old {
        match write(t) {
            Err(Error::Multi { index: 0, .. }) => {}
            other => panic!("an ended term's fenced write: {other:?} ({t:?})"),
        }
    }
    let before: u64 = String::from_utf8(c.get_data(resource).unwrap().0)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        before <= last.token,
        "the resource saw a higher token: {before} > {last:?}"
    );
    write(last).unwrap_or_else(|e| panic!("the leader's fenced write: {e} ({last:?})"));
}

/// Starts `zkguard elect PATH --id ID [FLAGS] -- sh -c SCRIPT` and waits until the election
/// has `queued` candidates (so that the candidates queue in the order started).
fn start_daemon(
    cs: &str,
    s: &Scratch,
    c: &Client,
    path: &str,
    id: &str,
    flags: &[&str],
    queued: usize,
) -> Running {
    let log = s.path("log").display().to_string();
    let mut args = vec!["elect", path, "--id", id];
    args.extend_from_slice(flags);
    let d = start_sh(cs, s, id, &args, &daemon_script(&log));
    let e = LeaderElection::new(c, path, "test").unwrap();
    wait_count(&format!("candidates at {path}"), queued, || {
        e.participants().map(|p| p.len()).unwrap_or(0)
    });
    d
}

fn resource(c: &Client) -> String {
    let r = unique("resource");
    c.create(&r, b"0", zkguard::CreateMode::Persistent).unwrap();
    r
}

/// A leader SIGTERMed with `--hand-over-on-exit`: its command is stopped first (its end
/// before the next term's start), leadership goes to the next candidate, which zkguard
/// names before it exits with the command's status; the old term's fenced writes are
/// refused from then on. The last candidate, alone, resigns.
#[test]
fn sigterm_hands_over_to_the_next_candidate() {
    let (cs, s, path) = setup("hand-over");
    let c = client(&cs);
    let res = resource(&c);
    let flag = ["--hand-over-on-exit=30s"];
    let mut a = start_daemon(&cs, &s, &c, &path, "a", &flag, 1);
    s.wait_lines("log", "a leading", |l| {
        l.iter().any(|l| l.starts_with("w "))
    });
    let mut b = start_daemon(&cs, &s, &c, &path, "b", &flag, 2);
    let mut d = start_daemon(&cs, &s, &c, &path, "c", &flag, 3);
    fenced_writes(&c, &res, &terms(&s.lines("log")));

    for (i, (p, next)) in [(&mut a, "b"), (&mut b, "c")].into_iter().enumerate() {
        p.signal(libc::SIGTERM);
        assert_eq!(p.wait(PATIENCE), 0, "the command's status: {}", p.stderr());
        s.wait_lines("log", "the next term", |l| {
            l.iter().filter(|l| l.starts_with("start ")).count() == i + 2
        });
        let t = terms(&s.lines("log"));
        assert_eq!(t.len(), i + 2, "{t:?}");
        assert_eq!(t[i + 1].id, next, "{t:?}");
        let said = format!(
            "handed the leadership of {path} over to {next} (token {})",
            t[i + 1].token
        );
        assert!(p.stderr().contains(&said), "{}", p.stderr());
        fenced_writes(&c, &res, &t);
    }

    d.signal(libc::SIGTERM);
    assert_eq!(d.wait(PATIENCE), 0, "{}", d.stderr());
    assert!(
        d.stderr().contains("nobody is queued behind"),
        "{}",
        d.stderr()
    );
    let t = terms(&s.lines("log"));
    assert!(t.iter().all(|t| t.end.is_some()), "{t:?}");
    let e = LeaderElection::new(&c, &path, "test").unwrap();
    assert_eq!(e.participants().unwrap().len(), 0, "the last one resigned");
}

/// `--hand-over-on-exit=0` is refused: a hand-over needs time to be seen.
#[test]
fn hand_over_on_exit_needs_a_bound() {
    let (code, _, err) = output(zkguard("127.0.0.1:1").args([
        "elect",
        "/cli/x",
        "--hand-over-on-exit=0",
        "--",
        "true",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--hand-over-on-exit") && err.contains("more than zero"),
        "{err}"
    );
}

/// `--hand-over-to` takes `newest` or `id:ID`, and only with `--hand-over-on-exit`.
#[test]
fn hand_over_to_takes_newest_or_an_id_with_hand_over_on_exit() {
    for (args, want) in [
        (&["--hand-over-to", "newest"][..], "--hand-over-on-exit"),
        (
            &["--hand-over-on-exit", "--hand-over-to", "host-c"][..],
            "`newest` or `id:ID`",
        ),
        (
            &["--hand-over-on-exit", "--hand-over-to", "id:"][..],
            "needs an id",
        ),
    ] {
        let mut all = vec!["elect", "/cli/x"];
        all.extend_from_slice(args);
        all.extend(["--", "true"]);
        let (code, _, err) = output(zkguard("127.0.0.1:1").args(&all));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A rolling restart of three `zkguard elect` daemons, one by one in `order` (indexes of
/// the running daemons, by start), each SIGTERMed, awaited, and started again (`gN+1` in
/// its id) at the back of the queue. Returns, per restart, whether the restarted daemon
/// led and the terms it began (the leadership changes) and the leaderless time of each
/// change (the old command's end to the new one's start, in ms). Checks at every step: no
/// two terms overlap, tokens grow, fenced writes of ended terms refused; and the observer
/// (one watch, in the test) saw every change and never "no leader".
fn rolling_restart(flags: &[&str], order: [usize; 3]) -> Vec<(bool, usize, Vec<f64>)> {
    let (cs, s, path) = setup("rolling");
    let c = client(&cs);
    let res = resource(&c);
    let observer = LeaderElection::new(&c, &path, "observer")
        .unwrap()
        .observe()
        .unwrap();
    let mut daemons: Vec<(String, Running)> = (0..3)
        .map(|i| {
            let id = format!("d{i}-g1");
            (
                id.clone(),
                start_daemon(&cs, &s, &c, &path, &id, flags, i + 1),
            )
        })
        .collect();
    s.wait_lines("log", "d0 leading", |l| {
        l.iter().any(|l| l.starts_with("w "))
    });
    let mut seen = 0; // terms seen so far
    let mut led_by_observer = Vec::new();
    let mut restarts = Vec::new();
    for (n, &i) in order.iter().enumerate() {
        let before = terms(&s.lines("log"));
        seen = seen.max(before.len());
        let leader = before.last().unwrap().id.clone();
        let (id, p) = &mut daemons[i];
        let was_leader = *id == leader;
        p.signal(libc::SIGTERM);
        assert_eq!(
            p.wait(PATIENCE),
            if was_leader { 0 } else { 143 },
            "{}",
            p.stderr()
        );
        let new_id = format!("d{i}-g{}", n + 2);
        let fresh = start_daemon(&cs, &s, &c, &path, &new_id, flags, 3);
        *id = new_id;
        *p = fresh;
        if was_leader {
            s.wait_lines("log", "the next term", |l| {
                l.iter().filter(|l| l.starts_with("start ")).count() > seen
            });
        }
        let after = terms(&s.lines("log"));
        fenced_writes(&c, &res, &after);
        let gaps = after[seen - 1..]
            .windows(2)
            .map(|w| (w[1].start as i128 - w[0].end.unwrap() as i128) as f64 / 1e6)
            .collect();
        restarts.push((was_leader, after.len() - seen, gaps));
        // The observer has said every leader so far, in order, and nothing else.
        let last = after.last().unwrap().token;
        while led_by_observer.last().map(|l: &(String, u64)| l.1) != Some(last) {
            match observer.events().recv_timeout(PATIENCE) {
                Ok(LeaderChange::Leader { id, token }) => {
                    led_by_observer.push((id, token));
                }
                // Observing began before anyone led (the docs: "or none has come yet").
                Ok(LeaderChange::NoLeader) if led_by_observer.is_empty() => {}
                other => panic!(
                    "the observer said {other:?} after {led_by_observer:?}, restart {n} of {order:?}, flags {flags:?}; log {:?}",
                    s.lines("log").iter().filter(|l| !l.starts_with("w ")).collect::<Vec<_>>()
                ),
            }
        }
        seen = after.len();
    }
    let all = terms(&s.lines("log"));
    let said: Vec<(String, u64)> = all.iter().map(|t| (t.id.clone(), t.token)).collect();
    assert_eq!(led_by_observer, said, "the observer against the terms");
    let last = &all.last().unwrap().id;
    assert!(
        !last.ends_with("-g1"),
        "an old instance leads at the end: {last}"
    );
    assert!(
        observer.events().try_recv().is_err(),
        "a change no term shows"
    );
    for (_, p) in &mut daemons {
        p.signal(libc::SIGTERM);
    }
    for (_, p) in &mut daemons {
        p.wait(PATIENCE);
    }
    restarts
}

/// The rolling restart with `--hand-over-on-exit`, twice: in the order started (each
/// restart is then the leader's: one change each, leadership bouncing from old instance to
/// old instance), and followers first (no change for a follower's restart, one for the
/// leader's, which ends on a restarted instance); with `--hand-over-to newest` (in the
/// order started: the first leader hands over to the old instance started last, which
/// hands over to a restarted one when its turn comes, and the restart between moves
/// nothing: two changes, not three; followers first: one); and with plain resigns for
/// comparison. The counts are asserted, and that the deploy ends with a restarted leader;
/// the leaderless times printed (docs/recipes.md, "Moving leadership").
#[test]
fn rolling_restart_with_hand_over() {
    for (what, flags, leaders) in [
        ("hand-over", &["--hand-over-on-exit=30s"][..], [3, 1]),
        (
            "hand-over to newest",
            &["--hand-over-on-exit=30s", "--hand-over-to", "newest"][..],
            [2, 1],
        ),
        ("resign", &[][..], [3, 1]),
    ] {
        for (order, leaders) in [[0, 1, 2], [1, 2, 0]].into_iter().zip(leaders) {
            let restarts = rolling_restart(flags, order);
            let mut gaps: Vec<f64> = Vec::new();
            for (n, (was_leader, changes, g)) in restarts.iter().enumerate() {
                let expected = usize::from(*was_leader);
                assert_eq!(
                    *changes, expected,
                    "{what} {order:?}, restart {n}: {restarts:?}"
                );
                gaps.extend(g);
            }
            let restarted_leaders = restarts.iter().filter(|r| r.0).count();
            assert_eq!(restarted_leaders, leaders, "{what} {order:?}: {restarts:?}");
            let shown: Vec<String> = gaps.iter().map(|g| format!("{g:.1}")).collect();
            println!(
                "rolling restart, {what}, order {order:?}: {} changes; leaderless ms (old \
                 command's end to new command's start): {}",
                gaps.len(),
                shown.join(" ")
            );
        }
    }
}
