//! `holders` and `leader`: who holds (or leads) and who waits, as a table or JSON.

use serde_json::json;
use zkguard::{Client, Error, LeaderElection, Mutex, Participant, RwLock, Semaphore};

use crate::hold::{age, seconds};
use crate::{check_path, Connection, Fail, Say, ShowArgs};

/// The kind of queue at a path, read from what is there (nothing is written).
fn kind(client: &Client, path: &str, election: bool) -> Result<(&'static str, Kind), Fail> {
    let fail = |e| Fail::zk(format_args!("cannot read {path}"), e);
    if election {
        return Ok(("election", Kind::Election));
    }
    let (names, data) = match client.get_children(path) {
        Ok((names, _)) => (names, client.get_data(path).map(|(d, _)| d).ok()),
        Err(Error::NoNode { .. }) => return Ok(("mutex", Kind::Empty)),
        Err(e) => return Err(fail(e)),
    };
    // A semaphore records its permit count as the data of its path.
    let permits = data
        .and_then(|d| String::from_utf8(d).ok())
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|n| *n > 0);
    Ok(if let Some(n) = permits {
        ("semaphore", Kind::Semaphore(n))
    } else if names
        .iter()
        .any(|n| n.contains("__READ__") || n.contains("__WRIT__"))
    {
        ("rwlock", Kind::RwLock)
    } else if names.iter().any(|n| n.contains("-latch-")) {
        ("election", Kind::Election)
    } else {
        ("mutex", Kind::Mutex)
    })
}

enum Kind {
    Empty,
    Mutex,
    RwLock,
    Semaphore(u32),
    Election,
}

fn participants(client: &Client, path: &str, kind: &Kind) -> zkguard::Result<Vec<Participant>> {
    match kind {
        Kind::Empty => Ok(Vec::new()),
        Kind::Mutex => Mutex::new(client, path)?.participants(),
        Kind::RwLock => RwLock::new(client, path)?.participants(),
        Kind::Semaphore(n) => Semaphore::new(client, path, *n)?.participants(),
        Kind::Election => LeaderElection::new(client, path, "observer")?.participants(),
    }
}

/// `zkguard holders PATH` (or `leader PATH` with `election`).
pub fn holders(conn: &Connection, args: &ShowArgs, election: bool, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    let client = conn.connect(say)?;
    let path = args.path.as_str();
    let (name, kind) = kind(&client, path, election)?;
    let list = participants(&client, path, &kind)
        .map_err(|e| Fail::zk(format_args!("cannot list {path}"), e))?;
    let election = matches!(kind, Kind::Election);
    let (holder, waiter) = if election {
        ("leader", "candidate")
    } else {
        ("holder", "waiter")
    };
    let rows: Vec<_> = list
        .iter()
        .map(|p| {
            let role = if p.holds { holder } else { waiter };
            (role, p, age(&client, path, p))
        })
        .collect();
    client.close();
    if args.json {
        let participants: Vec<_> = rows
            .iter()
            .map(|(role, p, age)| {
                json!({
                    "role": role,
                    "holds": p.holds,
                    "node": p.node,
                    "data": p.id(),
                    "age_ms": age.map(|a| a.as_millis() as u64),
                })
            })
            .collect();
        let mut out = json!({ "path": path, "kind": name, "participants": participants });
        if election {
            out["leader"] = rows
                .iter()
                .find(|(_, p, _)| p.holds)
                .map_or(serde_json::Value::Null, |(_, p, _)| json!(p.id()));
        }
        println!("{out}");
        return Ok(0);
    }
    if rows.is_empty() {
        println!("{path}: nobody holds or waits");
        return Ok(0);
    }
    let width = rows.iter().map(|(_, p, _)| p.node.len()).max().unwrap_or(4);
    println!("{:<9}  {:<10}  {:<width$}  DATA", "ROLE", "FOR", "NODE");
    for (role, p, age) in &rows {
        let age = age.map(seconds).unwrap_or_else(|| "-".into());
        println!("{role:<9}  {age:<10}  {:<width$}  {}", p.node, p.id());
    }
    Ok(0)
}
