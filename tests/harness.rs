//! The test harness itself, against real ZooKeeper servers: `TestCluster` (start, stop,
//! kill, restart, pause, wipe, the watchdog, ensembles, isolating a server from its peers).
//! The fault proxy: `tests/harness_proxy.rs`; TLS and SASL servers: `tests/harness_secure.rs`.

mod common;

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::raw::{
    create_nodes, four_letter_raw, proc_alive, proc_exists, wait_until, zk_client, zk_handshake,
    zk_ping, zk_retry,
};
use common::unique;
use zkguard::testing::{FaultProxy, TestCluster};

// ------------------------------------------------------------------------------------
// TestCluster
// ------------------------------------------------------------------------------------

#[test]
fn standalone_serves_and_drop_removes_everything() {
    let cluster = TestCluster::start(1).expect("start");
    assert_eq!(cluster.len(), 1);
    assert!(!cluster.is_empty());
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");
    let srvr = cluster.four_letter(0, "srvr").expect("srvr");
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    assert_eq!(cluster.mode(0).expect("mode"), "standalone");
    assert_eq!(cluster.leader(), Some(0));
    let port = cluster.client_addr(0).port();
    assert_eq!(cluster.connect_string(), format!("127.0.0.1:{port}"));
    assert_eq!(cluster.server_connect_string(0), cluster.connect_string());

    // Default settings reach the server.
    let conf = cluster.four_letter(0, "conf").expect("conf");
    for line in [
        "tickTime=100",
        "minSessionTimeout=200",
        "maxSessionTimeout=60000",
    ] {
        assert!(
            conf.lines().any(|l| l == line),
            "missing {line} in:\n{conf}"
        );
    }

    // The server logs into its log file.
    let log = std::fs::read_to_string(cluster.log_path(0)).expect("log file");
    assert!(
        log.contains("ZooKeeperServerMain"),
        "unexpected log:\n{log}"
    );

    // A proxy in front of the cluster forwards the client protocol.
    let proxy = FaultProxy::for_cluster(&cluster).expect("proxy");
    assert_eq!(four_letter_raw(proxy.local_addrs()[0], "ruok"), "imok");

    let pid = cluster.pid(0).expect("pid");
    assert!(proc_exists(pid));
    let dir = cluster.dir().to_path_buf();
    assert!(dir.exists());
    drop(proxy);
    drop(cluster);
    assert!(!proc_exists(pid), "java process {pid} survived the drop");
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn builder_settings_reach_the_server_and_bad_settings_fail_early() {
    let cluster = TestCluster::builder()
        .servers(1)
        .tick_time(Duration::from_millis(200))
        .min_session_timeout(Duration::from_secs(1))
        .max_session_timeout(Duration::from_secs(10))
        .force_sync(true)
        .start()
        .expect("start");
    let conf = cluster.four_letter(0, "conf").expect("conf");
    for line in [
        "tickTime=200",
        "minSessionTimeout=1000",
        "maxSessionTimeout=10000",
    ] {
        assert!(
            conf.lines().any(|l| l == line),
            "missing {line} in:\n{conf}"
        );
    }
    drop(cluster);

    let err = TestCluster::start(0).expect_err("zero servers");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = TestCluster::builder()
        .min_session_timeout(Duration::from_secs(5))
        .max_session_timeout(Duration::from_secs(1))
        .start()
        .expect_err("min > max");
    assert!(err.to_string().contains("min_session_timeout"), "{err}");
}

#[test]
fn stop_kill_and_restart_reuse_the_same_port() {
    let cluster = TestCluster::start(1).expect("start");
    let addr = cluster.client_addr(0);
    let first_pid = cluster.pid(0).expect("pid");

    cluster.stop(0).expect("stop");
    assert!(!cluster.is_running(0));
    assert_eq!(cluster.pid(0), None);
    assert!(!proc_exists(first_pid));
    assert!(cluster.four_letter(0, "ruok").is_err());
    assert!(cluster.leader().is_none());
    cluster
        .stop(0)
        .expect("stopping a stopped server is a no-op");

    cluster.start_server(0).expect("restart after stop");
    assert_eq!(cluster.client_addr(0), addr);
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");
    let err = cluster.start_server(0).expect_err("already running");
    assert!(err.to_string().contains("already running"), "{err}");

    let second_pid = cluster.pid(0).expect("pid");
    assert_ne!(first_pid, second_pid);
    cluster.kill(0).expect("kill");
    assert!(!cluster.is_running(0));
    assert!(!proc_exists(second_pid));
    cluster.start_server(0).expect("restart after kill");
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");
    cluster
        .wait_serving(0, Duration::from_secs(5))
        .expect("serving");

    // The log records every start.
    let log = std::fs::read_to_string(cluster.log_path(0)).expect("log");
    assert_eq!(log.matches("==== zkguard: starting server 0").count(), 3);
}

#[test]
fn pause_and_resume() {
    let cluster = TestCluster::start(1).expect("start");
    cluster.pause(0).expect("pause");
    assert!(cluster.is_paused(0));
    assert!(cluster.is_running(0), "a paused server is still running");
    let err = cluster
        .four_letter_with_timeout(0, "ruok", Duration::from_millis(500))
        .expect_err("a paused server answers nothing");
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
    cluster.resume(0).expect("resume");
    assert!(!cluster.is_paused(0));
    assert_eq!(cluster.four_letter(0, "ruok").expect("ruok"), "imok");

    // Drop kills a paused server too.
    cluster.pause(0).expect("pause again");
    let pid = cluster.pid(0).expect("pid");
    drop(cluster);
    assert!(
        !proc_exists(pid),
        "paused java process {pid} survived the drop"
    );
}

#[test]
fn a_panicking_test_keeps_the_logs() {
    let seen: Arc<Mutex<Option<(PathBuf, u32)>>> = Arc::new(Mutex::new(None));
    let seen2 = Arc::clone(&seen);
    let result = std::panic::catch_unwind(move || {
        let cluster = TestCluster::start(1).expect("start");
        let pid = cluster.pid(0).expect("pid");
        *seen2.lock().expect("lock") = Some((cluster.dir().to_path_buf(), pid));
        panic!("deliberate panic: TestCluster must keep its logs");
    });
    assert!(result.is_err());
    let (dir, pid) = seen.lock().expect("lock").take().expect("cluster started");
    assert!(!proc_exists(pid), "java process {pid} survived the panic");
    assert!(
        dir.join("server-0.log").is_file(),
        "{} not kept",
        dir.display()
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

const CHILD_ENV: &str = "ZKGUARD_HARNESS_WATCHDOG_CHILD";

#[test]
fn servers_die_with_a_test_process_that_is_killed() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // Child: start a server, say where it is, then wait to be SIGKILLed.
        let cluster = TestCluster::start(1).expect("start");
        let pid = cluster.pid(0).expect("pid");
        println!("ZKGUARD-CHILD {pid} {}", cluster.dir().display());
        std::io::stdout().flush().expect("flush");
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "servers_die_with_a_test_process_that_is_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the test binary");
    let stdout = child.stdout.take().expect("stdout");
    let mut found = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read child output");
        // libtest prints "test <name> ... " on the same line first.
        if let Some(rest) = line.split_once("ZKGUARD-CHILD ").map(|(_, rest)| rest) {
            let (pid, dir) = rest.split_once(' ').expect("pid and dir");
            found = Some((pid.parse::<u32>().expect("pid"), PathBuf::from(dir)));
            break;
        }
    }
    let (pid, dir) = found.expect("the child started a server");
    assert!(proc_alive(pid));
    child.kill().expect("SIGKILL the test process");
    child.wait().expect("wait");
    wait_until(
        "the orphaned java process to be killed by the watchdog",
        Duration::from_secs(10),
        || !proc_alive(pid),
    );
    wait_until(
        "the watchdog to remove the orphaned cluster directory",
        Duration::from_secs(10),
        || !dir.exists(),
    );
}

#[test]
fn ensemble_elects_a_new_leader_and_takes_back_a_restarted_server() {
    let cluster = TestCluster::start(3).expect("start ensemble");
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.connect_string().split(',').count(), 3);
    let modes: Vec<String> = (0..3)
        .map(|i| cluster.mode(i).expect("every member serves"))
        .collect();
    assert_eq!(
        modes.iter().filter(|m| *m == "leader").count(),
        1,
        "{modes:?}"
    );
    assert_eq!(
        modes.iter().filter(|m| *m == "follower").count(),
        2,
        "{modes:?}"
    );
    let old = cluster.leader().expect("a leader");
    assert_eq!(modes[old], "leader");

    let started = Instant::now();
    cluster.kill(old).expect("kill leader");
    let mut new = None;
    wait_until("a new leader", Duration::from_secs(30), || {
        new = cluster.leader();
        new.is_some()
    });
    let new = new.expect("new leader");
    assert_ne!(new, old);
    let others: Vec<usize> = (0..3).filter(|&i| i != old && i != new).collect();
    wait_until(
        "the other survivor to follow",
        Duration::from_secs(30),
        || cluster.mode(others[0]).ok().as_deref() == Some("follower"),
    );
    eprintln!("re-election took {:?}", started.elapsed());

    cluster.start_server(old).expect("restart the old leader");
    assert_eq!(cluster.mode(old).expect("mode"), "follower");
    assert_eq!(cluster.leader(), Some(new));
}

// ------------------------------------------------------------------------------------
// TestCluster: wipe
// ------------------------------------------------------------------------------------

#[test]
fn wipe_restarts_a_standalone_server_empty() {
    let cluster = TestCluster::start(1).expect("start");
    let c = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    let (paths, zxid) = create_nodes(&c, "wipe", 40);
    assert!(zxid > 0x20, "zxid {zxid:#x}");
    c.close().into_result().expect("close");

    cluster.wipe(0).expect("wipe");
    assert!(!cluster.is_running(0));
    cluster.start_server(0).expect("start after wipe");
    cluster
        .wait_serving(0, Duration::from_secs(30))
        .expect("serving");

    let fresh = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    for p in &paths {
        assert!(fresh.exists(p).expect("exists").is_none(), "{p} survived");
    }
    let again = fresh
        .create(&unique("fresh"), b"", zkguard::CreateMode::Persistent)
        .expect("create")
        .stat
        .czxid;
    assert!(again < 0x20, "zxid after the wipe {again:#x}");

    // Not isolatable: isolate says so instead of doing nothing.
    let err = cluster.isolate(0).expect_err("not isolatable");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let err = TestCluster::builder()
        .servers(1)
        .isolatable(true)
        .start()
        .expect_err("a standalone server cannot be isolated");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

#[test]
fn wipe_every_member_of_an_ensemble_starts_it_empty() {
    let cluster = TestCluster::start(3).expect("start ensemble");
    let c = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    let (paths, zxid) = create_nodes(&c, "wipe3", 40);
    assert!(zxid & 0xffff_ffff > 0x20, "zxid {zxid:#x}");
    c.close().into_result().expect("close");

    for i in 0..3 {
        cluster.wipe(i).expect("wipe");
    }
    for i in 0..3 {
        cluster.start_server(i).expect("start after wipe");
    }
    for i in 0..3 {
        cluster
            .wait_serving(i, Duration::from_secs(60))
            .expect("serving");
    }
    // The same three members (each kept its myid) formed a new, empty ensemble.
    assert!(cluster.leader().is_some());
    let fresh = zk_client(&cluster.connect_string(), Duration::from_secs(10));
    for p in &paths {
        let gone = zk_retry(Duration::from_secs(20), || fresh.exists(p));
        assert!(gone.is_none(), "{p} survived");
    }
    let again = zk_retry(Duration::from_secs(20), || {
        fresh.create(&unique("fresh"), b"", zkguard::CreateMode::Persistent)
    })
    .stat
    .czxid;
    assert!(
        again & 0xffff_ffff < 0x20,
        "zxid after the wipe {again:#x} (before {zxid:#x})"
    );
}

// ------------------------------------------------------------------------------------
// TestCluster: isolating one server from its peers
// ------------------------------------------------------------------------------------

fn isolatable_ensemble() -> TestCluster {
    let _ = env_logger::builder().is_test(true).try_init();
    TestCluster::builder()
        .servers(3)
        .tick_time(Duration::from_millis(100))
        .isolatable(true)
        .start()
        .expect("start an isolatable ensemble")
}

/// Asserts server `i` says it is not serving, and stays so for a while (no path around
/// the isolation lets it find a quorum).
fn assert_stays_not_serving(cluster: &TestCluster, i: usize) {
    let srvr = cluster.four_letter(i, "srvr").expect("srvr");
    assert!(
        srvr.contains("not currently serving requests"),
        "srvr of isolated server {i}: {srvr}"
    );
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        assert!(cluster.mode(i).is_err(), "isolated server {i} serves again");
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn isolating_the_leader_moves_leadership_and_rejoin_brings_it_back() {
    let cluster = isolatable_ensemble();
    let old = cluster.leader().expect("a leader");
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let started = Instant::now();
    cluster.isolate(old).expect("isolate");
    assert!(cluster.is_isolated(old));
    assert!(!cluster.is_isolated(others[0]));
    wait_until(
        "the isolated leader to stop serving",
        Duration::from_secs(20),
        || cluster.mode(old).is_err(),
    );
    eprintln!(
        "isolated leader stopped serving after {:?}",
        started.elapsed()
    );
    wait_until(
        "the other two to elect a leader",
        Duration::from_secs(30),
        || {
            let modes: Vec<_> = others.iter().map(|&j| cluster.mode(j).ok()).collect();
            modes.iter().all(Option::is_some)
                && modes.iter().any(|m| m.as_deref() == Some("leader"))
        },
    );
    eprintln!("new leader after {:?}", started.elapsed());
    assert_stays_not_serving(&cluster, old);
    assert!(cluster.isolate(old).is_ok(), "isolating twice is a no-op");

    // The majority serves a client.
    let majority = others
        .iter()
        .map(|&j| cluster.server_connect_string(j))
        .collect::<Vec<_>>()
        .join(",");
    let c = zk_client(&majority, Duration::from_secs(10));
    let p = unique("during-isolation");
    zk_retry(Duration::from_secs(20), || {
        c.create(&p, b"", zkguard::CreateMode::Persistent)
    });

    cluster.rejoin(old).expect("rejoin");
    assert!(!cluster.is_isolated(old));
    cluster
        .wait_serving(old, Duration::from_secs(30))
        .expect("serving again after rejoin");
    eprintln!("rejoined and serving after {:?}", started.elapsed());
    let mut mode = String::new();
    wait_until("the old leader to follow", Duration::from_secs(30), || {
        mode = cluster.mode(old).unwrap_or_default();
        mode == "follower"
    });
    // It synced what was written while it was cut off.
    let d = zk_client(&cluster.server_connect_string(old), Duration::from_secs(10));
    assert!(zk_retry(Duration::from_secs(20), || d.exists(&p)).is_some());
}

#[test]
fn a_client_of_an_isolated_follower_is_answered_until_the_follower_notices() {
    // A 400 ms tick: the follower notices after syncLimit (5) ticks, so this test's first
    // ping after the cut has 2 s to be answered instead of 0.5 s, which a loaded machine
    // (a slow isolate(), this thread or the server scheduled late) could miss.
    let _ = env_logger::builder().is_test(true).try_init();
    let cluster = TestCluster::builder()
        .servers(3)
        .tick_time(Duration::from_millis(400))
        .isolatable(true)
        .start()
        .expect("start an isolatable ensemble");
    let f = (0..3)
        .find(|&i| cluster.mode(i).ok().as_deref() == Some("follower"))
        .expect("a follower");
    let mut s = TcpStream::connect(cluster.client_addr(f)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    assert_ne!(zk_handshake(&mut s).expect("handshake"), 0);
    zk_ping(&mut s).expect("ping");

    let cut = Instant::now();
    cluster.isolate(f).expect("isolate");
    // ZooKeeper's behaviour: the follower answers pings on its own until it notices the
    // leader is gone. The harness must leave the client connection alone meanwhile.
    let mut answered = 0;
    let mut last_answer = Duration::ZERO;
    while cut.elapsed() < Duration::from_secs(20) {
        match zk_ping(&mut s) {
            Ok(()) => {
                answered += 1;
                last_answer = cut.elapsed();
            }
            Err(e) => {
                eprintln!("ping failed after {:?}: {e}", cut.elapsed());
                break;
            }
        }
        thread::sleep(Duration::from_millis(20)); // pacing, like a client's ping interval
    }
    eprintln!(
        "isolated follower answered {answered} ping(s), the last {last_answer:?} after the cut"
    );
    assert!(answered >= 1, "no ping answered after the isolation");
    wait_until(
        "the isolated follower to stop serving",
        Duration::from_secs(20),
        || cluster.mode(f).is_err(),
    );
    assert_stays_not_serving(&cluster, f);
    // The other two keep a leader and a follower.
    let others: Vec<usize> = (0..3).filter(|&i| i != f).collect();
    wait_until("the majority to serve", Duration::from_secs(30), || {
        others.iter().all(|&j| cluster.mode(j).is_ok())
    });

    cluster.rejoin(f).expect("rejoin");
    cluster
        .wait_serving(f, Duration::from_secs(30))
        .expect("serving again after rejoin");
}

/// Socket inodes of the open TCP sockets of process `pid` (from `/proc/<pid>/fd`).
fn socket_inodes(pid: &str) -> std::collections::HashSet<u64> {
    let mut inodes = std::collections::HashSet::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return inodes;
    };
    for fd in fds.flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let t = target.to_string_lossy();
            if let Some(inode) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                if let Ok(inode) = inode.parse() {
                    inodes.insert(inode);
                }
            }
        }
    }
    inodes
}

/// Established loopback TCP connections as (local port, remote port, inode).
fn established_tcp() -> Vec<(u16, u16, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap_or(""), 16).ok();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // 01 = ESTABLISHED
            if f.len() < 10 || f[3] != "01" {
                return None;
            }
            Some((port(f[1])?, port(f[2])?, f[9].parse().ok()?))
        })
        .collect()
}

/// Server `i`'s own quorum and election ports, from its `conf` (its own `server.N` line).
/// A server that is not serving at the moment (still syncing after the elections this
/// test forces, which a loaded machine stretches) answers `conf` without it: asked again.
fn own_peer_ports(cluster: &TestCluster, i: usize) -> (u16, u16) {
    let want = format!("server.{}=", i + 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    let line = loop {
        let conf = cluster.four_letter(i, "conf").unwrap_or_default();
        if let Some(line) = conf.lines().find(|l| l.starts_with(&want)) {
            break line.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no {want} line in server {i}'s conf within 30 s; last:\n{conf}"
        );
        thread::sleep(Duration::from_millis(50));
    };
    // server.N=127.0.0.1:Q:E:participant;...
    let parts: Vec<&str> = line.split(['=', ':', ';']).collect();
    (
        parts[2].parse().expect("quorum port"),
        parts[3].parse().expect("election port"),
    )
}

#[test]
fn isolatable_servers_never_connect_to_each_other_directly() {
    if !Path::new("/proc/net/tcp").exists() {
        eprintln!("no /proc/net/tcp: skipped");
        return;
    }
    let cluster = isolatable_ensemble();
    // Force elections in which higher ids connect back to lower ones.
    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader).expect("kill the leader");
    cluster.start_server(leader).expect("restart it");
    let lowest = 0;
    cluster.isolate(lowest).expect("isolate");
    wait_until("server 0 to drop out", Duration::from_secs(20), || {
        cluster.mode(lowest).is_err()
    });
    cluster.rejoin(lowest).expect("rejoin");
    cluster
        .wait_serving(lowest, Duration::from_secs(30))
        .expect("serving");

    let real: Vec<(u16, u16)> = (0..3).map(|i| own_peer_ports(&cluster, i)).collect();
    let real_ports: Vec<u16> = real.iter().flat_map(|&(q, e)| [q, e]).collect();
    let ours = socket_inodes("self");
    let conns = established_tcp();
    // Every connection to a server's real quorum or election port comes from a proxy.
    let direct: Vec<_> = conns
        .iter()
        .filter(|(_, remote, inode)| real_ports.contains(remote) && !ours.contains(inode))
        .collect();
    assert!(
        direct.is_empty(),
        "servers connected to a peer's real port, bypassing the proxies: {direct:?} \
         (real ports {real:?})"
    );
    // And the peers do talk, through the proxies.
    let proxied = conns
        .iter()
        .filter(|(_, remote, inode)| real_ports.contains(remote) && ours.contains(inode))
        .count();
    assert!(proxied >= 3, "only {proxied} proxied peer connections");
}
