//! `revoke` and `break`: clearing a lock from the command line. `revoke` asks the holders
//! to let go (the library's `revoke`, Curator's `Revoker`: `__REVOKE__` written into the
//! node; letting go is up to the holder, `zkguard lock` terminates its command); `break`
//! deletes one node after saying whose it is, and the holder learns of it as of any
//! deletion (a lost lock: `zkguard lock` terminates its command and exits 75).

use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zkguard::{Client, Error, Stat};

use crate::hold::seconds;
use crate::show::{locate, Listing};
use crate::{check_path, BreakArgs, Connection, Fail, RevokeArgs, Say, EXIT_NOPERM, EXIT_USAGE};

/// Exit status of `revoke` and `break` when there was nothing to do (no holder, the node
/// gone) or the user said no.
pub const EXIT_NOTHING: i32 = 1;

/// `revoke` and `break`'s exit status table.
pub const EXIT_CODES: &str = "\
Exit status:
  0   done: the request written (revoke) or the node deleted (break)
  1   nothing to do: nobody holds PATH, the node is gone, or the answer was not yes
  2   bad input: a path, a node not at PATH, no --yes without a terminal
  69  ZooKeeper could not be reached or failed a request
  77  ZooKeeper refused: the ACL (named) does not let this identity write or delete";

/// The failure for a refused request: exit 77 naming the ACL that refused (ZooKeeper
/// checks a delete against the parent's ACL, a write against the node's).
fn refused(client: &Client, what: &str, acl_of: &str, e: Error) -> Fail {
    Fail::new(
        EXIT_NOPERM,
        format!("{what}: {e}; {}", acl_text(client, acl_of)),
    )
}

/// "the ACL of PATH is [ENTRIES]" (or that this identity may not read it).
fn acl_text(client: &Client, path: &str) -> String {
    match client.get_acl(path) {
        Ok((acl, _)) => {
            let entries: Vec<String> = acl.iter().map(ToString::to_string).collect();
            format!("the ACL of {path} is [{}]", entries.join(", "))
        }
        Err(e) => format!("the ACL of {path} is unreadable to this identity ({e})"),
    }
}

/// A listing of `path` refused: exit 77 (as [`Fail::zk`] made it), with the ACL named.
fn listing(client: &Client, path: &str) -> Result<Listing, Fail> {
    Listing::read(client, path, false).map_err(|f| match f.code {
        EXIT_NOPERM => Fail::new(
            EXIT_NOPERM,
            format!("{}; {}", f.msg, acl_text(client, path)),
        ),
        _ => f,
    })
}

/// "session 0x1000…, data host-a pid 42, for 12 s".
fn owner(stat: &Stat, data: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let age = now.saturating_sub(Duration::from_millis(stat.ctime.max(0) as u64));
    format!(
        "session 0x{:x}, data {data:?}, created {} ago",
        stat.ephemeral_owner,
        seconds(age)
    )
}

/// `zkguard revoke PATH`: `__REVOKE__` into each holder's node (or `--node`'s).
pub fn revoke(conn: &Connection, args: &RevokeArgs, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    let client = conn.connect(say)?;
    let result = revoke_on(&client, args, say);
    client.close();
    result
}

fn revoke_on(client: &Client, args: &RevokeArgs, say: Say) -> Result<i32, Fail> {
    let path = args.path.as_str();
    let nodes: Vec<(String, String)> = match &args.node {
        Some(n) => vec![(node_path(client, path, n)?.0, String::new())],
        None => listing(client, path)?
            .rows
            .into_iter()
            .filter(|(_, c)| c.p.holds)
            .filter_map(|(_, c)| Some((locate(client, path, &c.p.node)?.1, c.p.id())))
            .collect(),
    };
    if nodes.is_empty() {
        say.say(format!("nobody holds {path}: nothing to revoke"));
        return Ok(EXIT_NOTHING);
    }
    for (node, data) in nodes {
        match zkguard::revoke(client, &node) {
            Ok(()) if data.is_empty() => say.say(format!("asked {node} to let go")),
            Ok(()) => say.say(format!("asked {node} ({data}) to let go")),
            Err(Error::NoNode { .. }) => say.say(format!("{node} is gone already")),
            Err(e @ Error::NoAuth { .. }) => {
                return Err(refused(client, &format!("cannot revoke {node}"), &node, e))
            }
            Err(e) => return Err(Fail::zk(format_args!("cannot revoke {node}"), e)),
        }
    }
    Ok(0)
}

/// A node of the recipe at `path` named by `--node` (its name, or its full path under
/// `path`): its full path and stat.
fn node_path(client: &Client, path: &str, node: &str) -> Result<(String, Stat), Fail> {
    let name = match node.strip_prefix(&format!("{path}/")) {
        Some(rest) => rest.rsplit('/').next().unwrap_or(rest),
        None if node.starts_with('/') => {
            return Err(Fail::new(
                EXIT_USAGE,
                format!("--node {node} is not under {path}"),
            ))
        }
        None => node,
    };
    if name.is_empty() || name.contains('/') {
        return Err(Fail::new(
            EXIT_USAGE,
            format!("--node {node:?}: give a node's name, as `zkguard holders {path}` shows it"),
        ));
    }
    locate(client, path, name)
        .map(|(_, full, stat)| (full, stat))
        .ok_or_else(|| {
            Fail::new(
                EXIT_NOTHING,
                format!("{path} has no node {name} (gone already?)"),
            )
        })
}

/// `zkguard break PATH --node NODE | --holder`.
pub fn break_lock(conn: &Connection, args: &BreakArgs, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    if !args.yes && !std::io::stdin().is_terminal() {
        return Err(Fail::new(
            EXIT_USAGE,
            "break: stdin is not a terminal to ask on: give --yes to delete without asking",
        ));
    }
    let client = conn.connect(say)?;
    let result = break_on(&client, args, say);
    client.close();
    result
}

fn break_on(client: &Client, args: &BreakArgs, say: Say) -> Result<i32, Fail> {
    let path = args.path.as_str();
    let name = match &args.node {
        Some(n) => n.clone(),
        None => {
            let holders: Vec<String> = listing(client, path)?
                .rows
                .iter()
                .filter(|(_, c)| c.p.holds)
                .map(|(_, c)| c.p.node.clone())
                .collect();
            match holders.as_slice() {
                [] => {
                    say.say(format!("nobody holds {path}: nothing to break"));
                    return Ok(EXIT_NOTHING);
                }
                [one] => one.clone(),
                many => {
                    return Err(Fail::new(
                        EXIT_USAGE,
                        format!(
                            "{path} has {} holders ({}): name one with --node",
                            many.len(),
                            many.join(", ")
                        ),
                    ))
                }
            }
        }
    };
    let (node, stat) = node_path(client, path, &name)?;
    let data = client
        .get_data(&node)
        .map(|(d, _)| String::from_utf8_lossy(&d).into_owned())
        .unwrap_or_default();
    if stat.ephemeral_owner == 0 {
        return Err(Fail::new(
            EXIT_USAGE,
            format!("{node} is not a lock node (not ephemeral): not deleting it"),
        ));
    }
    say.say(format!("{node}: {}", owner(&stat, &data)));
    if !args.yes && !ask(&format!("delete {node}? Its holder loses the lock [y/N] "))? {
        say.say("not deleted");
        return Ok(EXIT_NOTHING);
    }
    let dir = &node[..node.rfind('/').unwrap_or(0)];
    // Only this node, as it was shown: a node made again since is another's.
    match client.delete(&node, Some(stat.version)) {
        Ok(()) => {
            say.say(format!("deleted {node}: its holder loses the lock"));
            Ok(0)
        }
        Err(Error::NoNode { .. }) => {
            say.say(format!("{node} is gone already"));
            Ok(EXIT_NOTHING)
        }
        Err(e @ Error::NoAuth { .. }) => {
            Err(refused(client, &format!("cannot delete {node}"), dir, e))
        }
        Err(e) => Err(Fail::zk(format_args!("cannot delete {node}"), e)),
    }
}

/// Asks on the terminal (stderr, stdin); yes only for `y` or `yes`.
fn ask(question: &str) -> Result<bool, Fail> {
    let mut err = std::io::stderr();
    let _ = write!(err, "{question}");
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Fail::new(crate::EXIT_SOFTWARE, format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
