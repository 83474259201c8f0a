//! What a test does to single servers: stop, kill, start again, wipe, isolate, pause.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use std::{fs, io};

use super::process::all_threads_stopped;
use super::{other, Server, TestCluster, START_DEADLINE, STOP_GRACE};

impl TestCluster {
    pub(super) fn signal(&self, s: &Server, pid: u32, sig: &str) -> io::Result<()> {
        let out = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                other(format!(
                    "cannot run `kill -{sig} {pid}` for ZooKeeper server {}: {e}",
                    s.index
                ))
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(other(format!(
                "`kill -{sig} {pid}` for ZooKeeper server {} failed ({}): {}",
                s.index,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Stops server `i` gracefully: SIGTERM (and SIGCONT if paused), waits for the
    /// process to exit, and sends SIGKILL if it has not exited after 5 s. Its data
    /// directory and ports are kept for [`start_server`](Self::start_server).
    /// Stopping a server that is not running does nothing.
    ///
    /// # Errors
    ///
    /// The signals cannot be sent or the process cannot be waited for.
    pub fn stop(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if !proc.alive() {
            return Ok(());
        }
        let Some(pid) = proc.child.as_ref().map(Child::id) else {
            return Ok(());
        };
        self.signal(s, pid, "TERM")?;
        if proc.paused {
            self.signal(s, pid, "CONT")?;
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !proc.alive() {
                log::info!("zkguard TestCluster: server {i} stopped");
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        log::warn!(
            "zkguard TestCluster: server {i} (pid {pid}) ignored SIGTERM for {} s; killing it",
            STOP_GRACE.as_secs()
        );
        drop(proc);
        self.kill(i)
    }

    /// Kills server `i` with SIGKILL (a crash) and waits for the process to exit.
    /// Killing a server that is not running does nothing.
    ///
    /// # Errors
    ///
    /// The signal cannot be sent or the process cannot be waited for.
    pub fn kill(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if let Some(child) = proc.child.as_mut() {
            let pid = child.id();
            // Fails only when the child was already reaped, which `wait` then reports.
            let _ = child.kill();
            child.wait().map_err(|e| {
                other(format!(
                    "waiting for ZooKeeper server {i} (pid {pid}) after SIGKILL failed: {e}"
                ))
            })?;
            proc.clear();
            log::info!("zkguard TestCluster: server {i} killed");
        }
        Ok(())
    }

    /// Starts a stopped (or killed, or crashed) server again with the same config,
    /// ports and data directory, and waits until it serves: for an ensemble member until
    /// `srvr` reports leader or follower — when a quorum of running, unpaused servers
    /// exists with it; otherwise only until its client port accepts connections.
    /// Isolated servers (see [`isolate`](Self::isolate)) count as missing from the quorum.
    /// Fails if the server is already running.
    ///
    /// # Errors
    ///
    /// The server is already running, its process cannot be started, or it does not
    /// serve within 60 s (the error quotes its log tail).
    pub fn start_server(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        self.spawn(s)?;
        let members = self.members();
        let n = members.len();
        let isolated = self.isolated.lock().clone();
        let live = members
            .into_iter()
            .filter(|&k| {
                let mut p = self.servers[k].proc.lock();
                p.alive() && !p.paused && !isolated[k]
            })
            .count();
        let quorum = n == 1 || (live > n / 2 && !isolated[i]);
        self.wait_mode(s, START_DEADLINE, quorum)
    }

    /// Kills server `i` (SIGKILL) if it is running and deletes everything in its data
    /// directory — snapshots, transaction logs, epoch files — except `myid`, which an
    /// ensemble member needs to start again as the same member. (The servers keep their
    /// transaction logs in the data directory; there is no separate log directory.)
    ///
    /// [`start_server`](Self::start_server) then starts it empty: a standalone server, or
    /// an ensemble whose members were all wiped, holds only the built-in nodes
    /// (`/zookeeper`) and counts zxids from the start again (a standalone server from 0;
    /// a fresh ensemble from epoch 1, counter 0, i.e. `0x1_0000_0000`) — clients that saw
    /// a higher zxid are talking to a server that lost everything. A wiped member of an ensemble that
    /// still has a quorum syncs the data back from the leader when it starts. Its client
    /// port, config and log file stay the same.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::start(1)?;
    /// // ... clients write data ...
    /// cluster.wipe(0)?;
    /// cluster.start_server(0)?; // an empty server at the same address
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The server is running (stop or kill it first), or its data directory cannot be
    /// removed and made again.
    pub fn wipe(&self, i: usize) -> io::Result<()> {
        self.kill(i)?;
        let s = self.server(i);
        let entries = fs::read_dir(&s.data).map_err(|e| {
            other(format!(
                "cannot wipe ZooKeeper server {i}: cannot list its data directory {}: {e}",
                s.data.display()
            ))
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| {
                other(format!(
                    "cannot wipe ZooKeeper server {i}: cannot list its data directory {}: {e}",
                    s.data.display()
                ))
            })?;
            if entry.file_name() == "myid" {
                continue;
            }
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let removed = if is_dir {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            removed.map_err(|e| {
                other(format!(
                    "cannot wipe ZooKeeper server {i}: cannot delete {}: {e}",
                    path.display()
                ))
            })?;
        }
        log::info!(
            "zkguard TestCluster: server {i} wiped ({})",
            s.data.display()
        );
        Ok(())
    }

    /// Cuts server `i` off from the rest of the ensemble: all quorum and leader-election
    /// traffic between it and every other server is black-holed (see
    /// [`FaultProxy::blackhole`](crate::testing::FaultProxy::blackhole): bytes in both directions are discarded and nothing is
    /// closed, so each side only notices silence). Client connections to server `i` are
    /// untouched, and the process keeps running.
    ///
    /// ZooKeeper then does what it does in a real partition: an isolated follower stops
    /// hearing its leader and, after `syncLimit` ticks (half a second with the default
    /// 100 ms tick), drops out and stays looking for a leader; an isolated leader loses its
    /// quorum and steps down; the other servers, if they still form a quorum, keep or elect
    /// a leader and serve. Until the isolated server notices, it goes on answering its
    /// clients (pings, reads). Undo with [`rejoin`](Self::rejoin). The isolation lasts
    /// across restarts of the server. Isolating an isolated server does nothing.
    ///
    /// Needs a cluster built with [`TestClusterBuilder::isolatable`](crate::testing::TestClusterBuilder::isolatable); otherwise fails with
    /// [`io::ErrorKind::Unsupported`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zkguard::testing::TestCluster;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let cluster = TestCluster::builder().servers(3).isolatable(true).start()?;
    /// cluster.isolate(0)?;
    /// // Server 0 soon says "not currently serving requests"; 1 and 2 serve.
    /// cluster.rejoin(0)?;
    /// cluster.wait_serving(0, Duration::from_secs(30))?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Unsupported`] if the cluster was not built
    /// [`isolatable`](crate::testing::TestClusterBuilder::isolatable).
    pub fn isolate(&self, i: usize) -> io::Result<()> {
        self.check_isolatable("isolate", i)?;
        let mut isolated = self.isolated.lock();
        isolated[i] = true;
        for (a, b) in self.pairs_of(i) {
            if let Some(proxy) = &self.peers[a][b] {
                proxy.blackhole();
            }
        }
        log::info!("zkguard TestCluster: server {i} isolated from its peers");
        Ok(())
    }

    /// Ends [`isolate`](Self::isolate) for server `i`: traffic to and from the peers that
    /// are not isolated themselves flows again. Peer connections that lost bytes while
    /// isolated are closed (both servers see the connection end and reconnect at once);
    /// connections opened meanwhile go through. The server then finds the leader and
    /// syncs with it; wait for that with [`wait_serving`](Self::wait_serving). Rejoining
    /// a server that is not isolated does nothing.
    ///
    /// Needs a cluster built with [`TestClusterBuilder::isolatable`](crate::testing::TestClusterBuilder::isolatable); otherwise fails with
    /// [`io::ErrorKind::Unsupported`].
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Unsupported`] if the cluster was not built
    /// [`isolatable`](crate::testing::TestClusterBuilder::isolatable).
    pub fn rejoin(&self, i: usize) -> io::Result<()> {
        self.check_isolatable("rejoin", i)?;
        let mut isolated = self.isolated.lock();
        isolated[i] = false;
        for (a, b) in self.pairs_of(i) {
            let other = if a == i { b } else { a };
            if isolated[other] {
                continue;
            }
            if let Some(proxy) = &self.peers[a][b] {
                proxy.heal();
            }
        }
        log::info!("zkguard TestCluster: server {i} rejoined its peers");
        Ok(())
    }

    /// Whether server `i` is cut off by [`isolate`](Self::isolate).
    pub fn is_isolated(&self, i: usize) -> bool {
        self.isolated.lock().get(i).copied().unwrap_or(false)
    }

    /// The ordered pairs `(i, j)` and `(j, i)` for every other server `j`.
    pub(super) fn pairs_of(&self, i: usize) -> Vec<(usize, usize)> {
        (0..self.servers.len())
            .filter(|&j| j != i)
            .flat_map(|j| [(i, j), (j, i)])
            .collect()
    }

    pub(super) fn check_isolatable(&self, what: &str, i: usize) -> io::Result<()> {
        let _ = self.server(i);
        if self.peers.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "cannot {what} ZooKeeper server {i}: the cluster was not built with \
                     TestCluster::builder().isolatable(true)"
                ),
            ));
        }
        Ok(())
    }

    /// Waits until server `i` serves requests (`srvr` reports standalone, leader,
    /// follower or observer), or fails after `timeout` with the server's log tail.
    ///
    /// # Errors
    ///
    /// The server does not serve within `timeout`; the error quotes the server's log
    /// tail.
    pub fn wait_serving(&self, i: usize, timeout: Duration) -> io::Result<()> {
        let s = self.server(i);
        self.wait_mode(s, timeout, true)
    }

    /// Freezes server `i` with SIGSTOP: its sockets stay open but it answers nothing,
    /// like a long GC pause. Returns once every thread of the process has stopped (on
    /// Linux; elsewhere once the signal is sent). Undo with [`resume`](Self::resume).
    ///
    /// # Errors
    ///
    /// The server is not running, the signal cannot be sent, or its threads do not all stop
    /// within 5 s.
    pub fn pause(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if !proc.alive() {
            return Err(other(format!(
                "cannot pause ZooKeeper server {i}: it is not running"
            )));
        }
        let pid = proc.child.as_ref().map_or(0, Child::id);
        self.signal(s, pid, "STOP")?;
        proc.paused = true;
        // SIGSTOP is asynchronous: a thread that is on a CPU right now may still answer a
        // request before it stops.
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            match all_threads_stopped(pid) {
                None | Some(true) => return Ok(()),
                Some(false) if Instant::now() >= deadline => {
                    return Err(other(format!(
                        "ZooKeeper server {i} (pid {pid}) got SIGSTOP but not all of its \
                         threads stopped within {} s",
                        STOP_GRACE.as_secs()
                    )))
                }
                Some(false) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Resumes a paused server with SIGCONT.
    ///
    /// # Errors
    ///
    /// The server is not running or the signal cannot be sent.
    pub fn resume(&self, i: usize) -> io::Result<()> {
        let s = self.server(i);
        let mut proc = s.proc.lock();
        if !proc.alive() {
            return Err(other(format!(
                "cannot resume ZooKeeper server {i}: it is not running"
            )));
        }
        let pid = proc.child.as_ref().map_or(0, Child::id);
        self.signal(s, pid, "CONT")?;
        proc.paused = false;
        Ok(())
    }
}
