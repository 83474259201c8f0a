//! `holders` and `leader`: who holds (or leads) and who waits, as a table or JSON.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, TryRecvError};

use serde_json::json;
use zkguard::{
    Client, Error, LeaderChange, LeaderElection, Mutex, Participant, RwLock, Semaphore, Stat,
    UnfairMutex, WatchedEvent,
};

use crate::args::{check_path, ShowArgs};
use crate::conn::Connection;
use crate::fail::Fail;
use crate::say::{json_line, seconds, Say};

/// The kind of queue at a path, read from what is there (nothing is written): its name
/// for [`Listing::kind`] and what was found.
fn found_at(client: &Client, path: &str, election: bool) -> Result<(&'static str, Found), Fail> {
    let fail = |e| Fail::zk(format_args!("cannot read {path}"), e);
    if election {
        return Ok(("election", Found::Election));
    }
    let (names, data) = match client.get_children(path) {
        Ok((names, _)) => (names, client.get_data(path).ok()),
        Err(Error::NoNode { .. }) => return Ok(("mutex", Found::Empty)),
        Err(e) => return Err(fail(e)),
    };
    // An ephemeral node at the path itself: the one node of an unfair lock (or election).
    if data.as_ref().is_some_and(|(_, st)| st.ephemeral_owner != 0) {
        return Ok((UNFAIR, Found::Single));
    }
    // A semaphore records its permit count as the data of its path.
    let permits = data
        .and_then(|(d, _)| String::from_utf8(d).ok())
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|n| *n > 0);
    Ok(if let Some(n) = permits {
        ("semaphore", Found::Semaphore(n))
    } else if names
        .iter()
        .any(|n| n.contains("__READ__") || n.contains("__WRIT__"))
    {
        ("rwlock", Found::RwLock)
    } else if names.iter().any(|n| n.contains("-latch-")) {
        ("election", Found::Election)
    } else {
        ("mutex", Found::Mutex)
    })
}

/// The kind [`Listing`] names an unfair lock's (or election's) one node by.
pub const UNFAIR: &str = "unfair lock";

/// Which recipe's nodes [`found_at`] finds at a path.
enum Found {
    Empty,
    Mutex,
    RwLock,
    Semaphore(u32),
    Election,
    /// One ephemeral node at the path itself (`UnfairMutex`, the unfair election).
    Single,
}

fn participants(client: &Client, path: &str, found: &Found) -> zkguard::Result<Vec<Participant>> {
    match found {
        Found::Empty => Ok(Vec::new()),
        Found::Mutex => Mutex::new(client, path)?.participants(),
        Found::RwLock => RwLock::new(client, path)?.participants(),
        Found::Semaphore(n) => Semaphore::new(client, path, *n)?.participants(),
        Found::Election => LeaderElection::new(client, path, "observer")?.participants(),
        Found::Single => Ok(UnfairMutex::new(client, path)?
            .holder()?
            .into_iter()
            .collect()),
    }
}

/// Where a recipe's contenders' nodes are, so a listed node is found where it was listed
/// and nowhere else (a same-named node in another directory is another node).
#[derive(Clone, Copy)]
pub enum Layout {
    /// In the recipe's directory (mutex, read/write lock, election).
    Flat,
    /// A semaphore's: its leases in `/leases`, its internal lock's queue in `/locks` (told
    /// apart by the node names' markers, `lease-` and `lock-`, as the library writes them).
    Semaphore,
    /// The recipe's path is the node itself (an unfair lock or election).
    Single,
}

impl Layout {
    /// The full path of the contender node `node` of the recipe at `dir`.
    pub fn full(self, dir: &str, node: &str) -> String {
        match (self, node.contains("-lease-")) {
            (Layout::Flat, _) => format!("{dir}/{node}"),
            (Layout::Semaphore, true) => format!("{dir}/leases/{node}"),
            (Layout::Semaphore, false) => format!("{dir}/locks/{node}"),
            (Layout::Single, _) => dir.to_string(),
        }
    }
}

/// A contender as `holders` shows it: once, whatever nodes it has.
pub struct Contender {
    pub p: Participant,
    /// Its node's full path, in the directory it was listed from ([`Layout::full`]).
    pub full: String,
    /// Of a semaphore: waits for the next free permit with the internal lock held (its
    /// node there is `internal`).
    pub next: bool,
    /// Its internal-lock node, when it is listed under its lease (`next`).
    pub internal: Option<String>,
    /// How long its node has existed (None if it is gone or cannot be read).
    pub age: Option<Duration>,
}

/// The recipe's participants at `dir`, each contender once. A semaphore lists its leases,
/// then the queue on its internal lock; the first of that queue, which holds the internal
/// lock, also has the lease that waits for a permit (Curator's `InterProcessSemaphoreV2`
/// protocol): those two nodes (same session, same data) are one contender, shown by its
/// lease as `next`.
pub fn contenders(
    client: &Client,
    dir: &str,
    list: Vec<Participant>,
    layout: Layout,
) -> Vec<Contender> {
    // A semaphore's nodes are one level down, in its `leases` and `locks` directories.
    let found: Vec<(Participant, String, Option<Stat>)> = list
        .into_iter()
        .map(|p| {
            let full = layout.full(dir, &p.node);
            let stat = client.exists(&full).ok().flatten();
            (p, full, stat)
        })
        .collect();
    // Listed and still there, in the internal lock's queue or among the leases.
    let listed_in = |i: usize, sub: &str| {
        let (_, full, stat) = &found[i];
        stat.is_some() && full.starts_with(&format!("{dir}{sub}/"))
    };
    let owner = |i: usize| {
        let (p, _, stat) = &found[i];
        stat.map(|st| (st.ephemeral_owner, &p.data))
    };
    let first_queued =
        (0..found.len()).find(|&i| matches!(layout, Layout::Semaphore) && listed_in(i, "/locks"));
    let waiting_lease = first_queued.and_then(|q| {
        (0..found.len())
            .find(|&i| listed_in(i, "/leases") && !found[i].0.holds && owner(i) == owner(q))
    });
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok();
    let mut out: Vec<Contender> = Vec::with_capacity(found.len());
    for (i, (p, full, stat)) in found.iter().enumerate() {
        if waiting_lease.is_some() && Some(i) == first_queued {
            continue;
        }
        let next = Some(i) == waiting_lease;
        out.push(Contender {
            full: full.clone(),
            p: p.clone(),
            next,
            internal: next.then(|| found[first_queued.expect("paired")].0.node.clone()),
            age: stat.and_then(|st| {
                Some(now?.saturating_sub(Duration::from_millis(st.ctime.max(0) as u64)))
            }),
        });
    }
    out
}

/// A contender's node name and data as a terminal may show them ([`zkguard::escape`]): a
/// node's name and data are chosen by whoever created it.
fn shown_node(c: &Contender) -> (String, String) {
    (
        zkguard::escape(&c.p.node).into_owned(),
        zkguard::escape_bytes(&c.p.data).into_owned(),
    )
}

/// What `holders` shows.
pub struct Listing {
    /// "mutex", "semaphore", "election" …
    pub kind: &'static str,
    election: bool,
    /// Each contender with its role.
    pub rows: Vec<(&'static str, Contender)>,
}

impl Listing {
    /// The contenders of the recipe at `path` (an election's with `election`), read only.
    pub fn read(client: &Client, path: &str, election: bool) -> Result<Listing, Fail> {
        let (name, found) = found_at(client, path, election)?;
        let list = participants(client, path, &found)
            .map_err(|e| Fail::zk(format_args!("cannot list {path}"), e))?;
        let election = matches!(found, Found::Election);
        let (holder, waiter) = if election {
            ("leader", "candidate")
        } else {
            ("holder", "waiter")
        };
        let layout = match found {
            Found::Semaphore(_) => Layout::Semaphore,
            Found::Single => Layout::Single,
            _ => Layout::Flat,
        };
        let rows = contenders(client, path, list, layout)
            .into_iter()
            .map(|c| {
                let role = match (c.p.holds, c.next) {
                    (true, _) => holder,
                    (false, true) => "next",
                    (false, false) => waiter,
                };
                (role, c)
            })
            .collect();
        Ok(Listing {
            kind: name,
            election,
            rows,
        })
    }

    /// The leader's id (its node's data) as ZooKeeper has it: raw, for JSON.
    fn leader(&self) -> Option<String> {
        self.rows
            .iter()
            .find(|(_, c)| c.p.holds)
            .map(|(_, c)| c.p.id())
    }

    /// One JSON object; `ages` false leaves out how long each node has existed (what
    /// `--watch` compares).
    pub fn json(&self, path: &str, ages: bool) -> serde_json::Value {
        let participants: Vec<_> = self
            .rows
            .iter()
            .map(|(role, c)| {
                let mut row = json!({
                    "role": role,
                    "holds": c.p.holds,
                    "node": c.p.node,
                    "data": c.p.id(),
                });
                if ages {
                    row["age_ms"] = json!(c.age.map(|a| a.as_millis() as u64));
                    // From the node's ctime: a holder has held for at most its node's age
                    // (it may have waited part of it), a waiter has waited that long.
                    let key = match c.p.holds {
                        true => "held_for_s",
                        false => "waiting_for_s",
                    };
                    row[key] = json!(c.age.map(|a| a.as_secs()));
                }
                if let Some(internal) = &c.internal {
                    row["internal_lock_node"] = json!(internal);
                }
                row
            })
            .collect();
        let mut out = json!({ "path": path, "kind": self.kind, "participants": participants });
        if self.election {
            out["leader"] = json!(self.leader());
        }
        out
    }

    fn print_table(&self, path: &str) {
        if self.rows.is_empty() {
            println!("{path}: nobody holds or waits");
            return;
        }
        // Names and data are anyone's who may create there: escaped, never raw.
        let shown: Vec<_> = self.rows.iter().map(|(_, c)| shown_node(c)).collect();
        let width = shown.iter().map(|(node, _)| node.chars().count()).max();
        let width = width.unwrap_or(4);
        println!("{:<9}  {:<18}  {:<width$}  DATA", "ROLE", "FOR", "NODE");
        for ((role, c), (node, data)) in self.rows.iter().zip(&shown) {
            let how = if c.p.holds { "held" } else { "waiting" };
            let age = match c.age {
                Some(a) => format!("{how} {}", seconds(a)),
                None => "-".into(),
            };
            println!("{role:<9}  {age:<18}  {node:<width$}  {data}");
        }
        if self.rows.iter().any(|(_, c)| c.next) {
            println!("(next: holds the semaphore's internal lock and takes the next free permit)");
        }
    }
}

/// `zkguard holders PATH` (or `leader PATH` with `election`).
pub fn holders(conn: &Connection, args: &ShowArgs, election: bool, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    let client = conn.connect(say)?;
    let path = args.path.as_str();
    let result = if args.watch && election && !args.json {
        watch_leader(&client, path)
    } else if args.watch {
        watch_listing(&client, args, election, say)
    } else {
        Listing::read(&client, path, election).map(|l| {
            match args.json {
                true => println!("{}", json_line(&l.json(path, true))),
                false => l.print_table(path),
            }
            0
        })
    };
    client.close();
    result
}

/// `--watch` (but `leader --watch` without `--json`: [`watch_leader`]): prints the listing
/// again after each change, until SIGINT, SIGTERM or SIGHUP (exit 0).
/// A failed read is said on stderr; the next event (a change, the session's) reads again.
fn watch_listing(client: &Client, args: &ShowArgs, election: bool, say: Say) -> Result<i32, Fail> {
    let path = args.path.as_str();
    let signals = crate::child::signals()?;
    let session = client.events();
    let mut last = None;
    loop {
        // Watches first, then the read: a change after the read fires one of them.
        let changed = watches(client, path);
        match Listing::read(client, path, election) {
            Ok(l) => {
                let key = l.json(path, false);
                if last.as_ref() != Some(&key) {
                    match args.json {
                        true => println!("{}", json_line(&l.json(path, true))),
                        false => {
                            l.print_table(path);
                            println!();
                        }
                    }
                    let _ = std::io::stdout().flush();
                    last = Some(key);
                }
            }
            Err(f) => say.say(format!("{}; watching on", f.msg)),
        }
        let mut sel = crossbeam_channel::Select::new();
        for rx in &changed {
            sel.recv(rx);
        }
        let on_session = sel.recv(&session);
        let on_signal = sel.recv(&signals);
        let ready = sel.ready();
        if ready == on_signal {
            if let Ok(sig) = signals.try_recv() {
                if sig != crate::child::RESUMED {
                    return Ok(0);
                }
            }
        } else if ready == on_session {
            while session.try_recv().is_ok() {}
        } else if changed[ready].try_recv() == Err(TryRecvError::Disconnected) {
            // A watch the client dropped (disconnected): read again after the session's
            // next event, not at once.
            crossbeam_channel::select! {
                recv(session) -> _ => {}
                recv(signals) -> sig => if sig.is_ok_and(|s| s != crate::child::RESUMED) {
                    return Ok(0);
                },
            }
        }
    }
}

/// `leader --watch` (and `elect -l`): the library's observer (`LeaderElection::observe`),
/// one line per change (each new term's leader id, `(no leader)` when nobody leads), in
/// order and never an older leader after a newer one, across reconnects and expiry; until
/// SIGINT, SIGTERM or SIGHUP (exit 0).
fn watch_leader(client: &Client, path: &str) -> Result<i32, Fail> {
    let signals = crate::child::signals()?;
    // An unfair election's node is the path itself; anything else is watched as a queue.
    let unfair = matches!(found_at(client, path, false), Ok((_, Found::Single)));
    let election = match unfair {
        true => LeaderElection::unfair(client, path, "observer"),
        false => LeaderElection::new(client, path, "observer"),
    };
    let fail = |e| Fail::zk(format_args!("cannot watch {path}"), e);
    let observer = election.and_then(|e| e.observe()).map_err(fail)?;
    loop {
        crossbeam_channel::select! {
            recv(observer.events()) -> change => match change {
                Ok(LeaderChange::Leader { id, .. }) => println!("{}", zkguard::escape(&id)),
                Ok(_) => println!("(no leader)"),
                Err(_) => return Err(fail(Error::Closed)),
            },
            recv(signals) -> sig => if sig.is_ok_and(|s| s != crate::child::RESUMED) {
                return Ok(0);
            },
        }
        let _ = std::io::stdout().flush();
    }
}

/// One-shot watches on `path` and on a semaphore's two directories below it: a child
/// added or removed, or the directory created or deleted.
fn watches(client: &Client, path: &str) -> Vec<Receiver<WatchedEvent>> {
    ["", "/leases", "/locks"]
        .iter()
        .filter_map(|sub| {
            let dir = format!("{path}{sub}");
            match client.get_children_w(&dir) {
                Ok((_, _, rx)) => Some(rx),
                Err(Error::NoNode { .. }) => client.exists_w(&dir).ok().map(|(_, rx)| rx),
                Err(_) => None,
            }
        })
        .collect()
}
