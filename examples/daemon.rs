//! A complete daemon, put together: worker threads taking fair mutexes, a background
//! `Candidate` doing leader-only work with fenced writes, creator ACLs under a digest login,
//! the library's `log` records shown, and a clean shutdown.
//!
//! Two instances (`host-a`, `host-b`) run against three real ZooKeeper servers the example
//! starts itself (the `testing` feature's harness). Midway the server under the leader is
//! killed (the leader is suspended, reconnects within its session and is restored); then
//! the leader stops gracefully (its locks' cancellers shut, its candidate stopped, its
//! workers finish their job and return) and the other takes over; then that one stops the
//! quick way (`Client::close`). Each stop prints how long its threads took to return.
//!
//! ```text
//! cargo run --example daemon --features testing
//! ZKGUARD_LOG=debug cargo run --example daemon --features testing   # more of the records
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zkguard::channel::{select, tick};
use zkguard::testing::TestCluster;
use zkguard::{Candidate, Client, CreateMode, Error, LeaderElection, LeaderEvent, Mutex};
use zkguard::{NodeAcl, Op};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Where the daemons keep their state.
const ROOT: &str = "/daemon";
/// The jobs the workers take turns at, one fair mutex each.
const JOBS: usize = 2;
/// Worker threads per daemon.
const WORKERS: usize = 3;

fn main() -> BoxResult<()> {
    Logger::install();
    let cluster = TestCluster::start(3)?;
    let servers = cluster.connect_string();
    log::info!("three ZooKeeper servers at {servers}");

    // The shared state, made once with a creator ACL: only the daemons' identity may write.
    let admin = login(&servers)?;
    admin.ensure_path_with_acl(&format!("{ROOT}/state"), &NodeAcl::creator_read())?;
    for node in (0..JOBS).map(job_state).chain([leader_state()]) {
        admin.create_with_acl(&node, b"", CreateMode::Persistent, &NodeAcl::creator_read())?;
    }
    // Anyone may read, nobody else may write.
    let outsider = Client::connect(&servers)?;
    let refused = outsider.set_data(&leader_state(), b"outsider", None);
    log::info!("an outsider's write: {}", refused.unwrap_err());

    let a = Daemon::start("host-a", &servers)?;
    let b = Daemon::start("host-b", &servers)?;
    let (leader, follower) = loop {
        if a.candidate.is_leader() {
            break (a, b);
        }
        if b.candidate.is_leader() {
            break (b, a);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    std::thread::sleep(Duration::from_millis(800));

    // A server dies under the leader: suspended, then restored within its session.
    if let Some(i) = (0..cluster.len())
        .find(|&i| leader.client.connected_server() == Some(cluster.client_addr(i)))
    {
        log::info!(
            "killing server {i}, the one {} is connected to",
            leader.name
        );
        cluster.kill(i)?;
    }
    std::thread::sleep(Duration::from_millis(1500));

    // The leader stops gracefully; the other takes over and writes in its own term.
    leader.stop_gracefully();
    follower
        .candidate
        .wait_for_leadership(Duration::from_secs(30))?;
    std::thread::sleep(Duration::from_millis(600));
    follower.stop_by_close();

    let (state, _) = admin.get_data(&leader_state())?;
    println!("last leader state: {}", String::from_utf8_lossy(&state));
    for k in 0..JOBS {
        let (done, _) = admin.get_data(&job_state(k))?;
        println!("job {k}: {}", String::from_utf8_lossy(&done));
    }
    admin.close();
    Ok(())
}

fn job_state(k: usize) -> String {
    format!("{ROOT}/state/job-{k}")
}

fn leader_state() -> String {
    format!("{ROOT}/state/leader")
}

/// A client logged in as the daemons' identity; the nodes its recipes create get a creator
/// ACL (the identity may do everything, everyone else may read).
fn login(servers: &str) -> zkguard::Result<Client> {
    Client::builder(servers)
        .auth("digest", b"daemon:a-long-random-secret")
        .node_acl(NodeAcl::creator_read())
        .session_timeout(Duration::from_secs(6))
        .build()
}

/// One daemon: its client, its job locks, its candidate, and the threads using them.
struct Daemon {
    name: &'static str,
    client: Client,
    locks: Vec<Mutex>,
    candidate: Arc<Candidate>,
    threads: Vec<JoinHandle<()>>,
}

impl Daemon {
    fn start(name: &'static str, servers: &str) -> zkguard::Result<Daemon> {
        let client = login(servers)?;
        let locks = (0..JOBS)
            .map(|k| Mutex::new(&client, &format!("{ROOT}/jobs/{k}")))
            .collect::<zkguard::Result<Vec<_>>>()?;
        let election = LeaderElection::new(&client, &format!("{ROOT}/leader"), name)?;
        let candidate = Arc::new(election.join()?);
        let done = Arc::new(AtomicU64::new(0));
        let mut threads: Vec<JoinHandle<()>> = (0..WORKERS)
            .map(|w| {
                // Clones share the lock's canceller, which the stop shuts.
                let lock = locks[w % JOBS].clone();
                let done = done.clone();
                let state = job_state(w % JOBS);
                std::thread::spawn(move || work(name, w, &lock, &state, &done))
            })
            .collect();
        let c = candidate.clone();
        threads.push(std::thread::spawn(move || lead(name, &c)));
        Ok(Daemon {
            name,
            client,
            locks,
            candidate,
            threads,
        })
    }

    /// The graceful stop: no acquire may start or go on (the cancellers are shut, so a
    /// worker between two jobs cannot slip past), the candidate leaves the election (its
    /// events end), every worker finishes the job it holds and returns; then the session
    /// ends. Prints how long the threads took to return.
    fn stop_gracefully(self) {
        log::info!("{}: stopping", self.name);
        let started = Instant::now();
        for lock in &self.locks {
            lock.canceller().shut();
        }
        self.candidate.stop();
        self.join(started, "graceful stop");
    }

    /// The quick stop: closing the client ends every blocked call at once (acquires with
    /// `Closed`, the candidate's events after a last `Lost`); held locks are lost, and the
    /// session's end deletes every node.
    fn stop_by_close(self) {
        log::info!("{}: closing its client", self.name);
        let started = Instant::now();
        let outcome = self.client.close();
        log::info!(
            "{}: close returned after {:.1} ms: {outcome:?}",
            self.name,
            started.elapsed().as_secs_f64() * 1e3
        );
        self.join(started, "stop by close");
    }

    fn join(self, started: Instant, how: &str) {
        for t in self.threads {
            t.join().expect("a daemon thread panicked");
        }
        let took = started.elapsed();
        println!(
            "{}: {how}: every thread returned {:.1} ms after the stop began",
            self.name,
            took.as_secs_f64() * 1e3
        );
        self.client.close();
    }
}

/// A worker: takes its job's fair mutex, records the job with a fenced write (applied only
/// while the lock is held; `fenced_multi` is inherent, no trait import), lets go, again.
fn work(name: &str, w: usize, lock: &Mutex, state: &str, done: &AtomicU64) {
    loop {
        let guard = match lock.acquire() {
            Ok(guard) => guard,
            Err(Error::Cancelled { .. }) | Err(Error::Closed) => return, // stopped
            Err(e) => {
                log::warn!("{name} worker {w}: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        let record = format!("{name} worker {w}, job {n}, token {}", guard.token());
        match guard.fenced_multi(&[Op::SetData {
            path: state.to_string(),
            data: record.into_bytes(),
            version: None,
        }]) {
            Ok(_) => std::thread::sleep(Duration::from_millis(20)), // the job itself
            Err(e) => log::warn!("{name} worker {w}: not recorded: {e}"),
        }
        drop(guard); // released; `release()` would also say whether it was held throughout
    }
}

/// The leader's work: while a term lasts and the connection is up, a fenced write every
/// 200 ms through that term (refused once the term is over, even if a later one began).
fn lead(name: &str, candidate: &Candidate) {
    let events = candidate.events();
    let work = tick(Duration::from_millis(200));
    let mut term = None;
    let mut ticks = 0u64;
    loop {
        select! {
            recv(events) -> ev => match ev {
                Err(_) => return, // the candidate stopped, or its client closed
                Ok(LeaderEvent::Elected { token }) => {
                    term = candidate.term();
                    if let Some(t) = &term {
                        log::info!("{name}: leading, token {token}, node {}", t.path());
                    }
                }
                Ok(LeaderEvent::Lost) | Ok(LeaderEvent::Resigned) => {
                    log::info!("{name}: no longer leading");
                    term = None;
                }
                Ok(other) => log::info!("{name}: {other:?}"),
            },
            recv(work) -> _ => {
                let Some(t) = term.as_ref().filter(|t| t.is_valid()) else { continue };
                ticks += 1;
                let state = format!("{name}, token {}, tick {ticks}", t.token());
                if let Err(e) = t.fenced_multi(&[Op::SetData {
                    path: leader_state(),
                    data: state.into_bytes(),
                    version: None,
                }]) {
                    log::warn!("{name}: leader write refused: {e}");
                }
            }
        }
    }
}

/// A logger of a few lines: the library logs through `log` and ships none (a daemon brings
/// its own: `env_logger`, syslog, …). `ZKGUARD_LOG=debug` shows more.
struct Logger {
    started: Instant,
    level: log::LevelFilter,
}

impl Logger {
    fn install() {
        let level = match std::env::var("ZKGUARD_LOG").as_deref() {
            Ok("debug") => log::LevelFilter::Debug,
            Ok("warn") => log::LevelFilter::Warn,
            _ => log::LevelFilter::Info,
        };
        let logger = Logger {
            started: Instant::now(),
            level,
        };
        if log::set_logger(Box::leak(Box::new(logger))).is_ok() {
            log::set_max_level(level);
        }
    }
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "{:7.3}s {:5} {}: {}",
                self.started.elapsed().as_secs_f64(),
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}
