//! `doctor --path`: the ACL of the lock's directory and of every parent (judged by the
//! library's own rule, `NodeAcl::untrusted`), who holds and waits, and a contention probe:
//! two sessions handing a scratch lock back and forth with fenced writes.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zkguard::{Acl, Client, Error, Mutex, NodeAcl, Op};

use super::report::{AclRow, Check, Finding, Holders, Probe, Spread, Status};
use crate::conn::Connection;
use crate::say::{acl_entry, Say};
use crate::show::Listing;

/// The path and each parent, the root first, each with its ACL (or why it is unread),
/// judged from the path up as the recipes' tenancy rule judges a directory: a node that
/// lets another identity create, delete or change the ACL there is a warning, until a
/// closed node that nobody else can delete (it holds the marker of `zkguard mkdir`, a
/// persistent node that only its ACL's identities may delete: see [`holds_marker`]): then
/// the check ends there (a pass), and an open node above it (the root of a shared
/// ensemble) is a note.
pub fn acls(client: &Client, path: &str, ours: &[Acl], out: &mut Vec<Finding>) -> Vec<AclRow> {
    let rule = NodeAcl::open();
    let mut prefixes = vec!["/".to_string()];
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        at = format!("{at}/{part}");
        prefixes.push(at.clone());
    }
    let mut rows = Vec::new();
    // The closed node nobody else can delete, once found (walking up from the path).
    let mut anchor: Option<String> = None;
    for node in prefixes.iter().rev() {
        let node = node.as_str();
        match client.get_acl(node) {
            Ok((acl, _)) => {
                let open = rule.untrusted(&acl, ours);
                let entries: Vec<String> = acl.iter().map(acl_entry).collect();
                let named: Vec<String> = open.iter().map(acl_entry).collect();
                if let Some(anchor) = &anchor {
                    if !open.is_empty() {
                        out.push(Finding::new(Check::Acl, Status::Note, format!(
                            "{node} lets other identities create or delete children ({}), above {anchor}, which they cannot delete: no effect on the lock", named.join(", ")
                        )).about(node));
                    }
                } else if !open.is_empty() {
                    out.push(open_finding(node, node == path, &named));
                } else if holds_marker(client, node, &rule, ours) {
                    out.push(Finding::new(Check::Acl, Status::Pass, format!(
                        "{node} is closed to other identities and holds its zkguard mkdir marker, a persistent node only its ACL's identities may delete: nobody else can delete or replace it, so the ACLs above it do not matter"
                    )).about(node));
                    anchor = Some(node.to_string());
                }
                rows.push(AclRow::Read {
                    path: node.to_string(),
                    acl: entries,
                    open_to_others: named,
                });
            }
            Err(Error::NoNode { .. }) => {
                rows.push(AclRow::Missing {
                    path: node.to_string(),
                    missing: true,
                });
            }
            Err(e) => {
                if anchor.is_none() {
                    out.push(
                        Finding::new(
                            Check::Acl,
                            Status::Warn,
                            format!("cannot read the ACL of {node}: {e}"),
                        )
                        .about(node),
                    );
                }
                rows.push(AclRow::Unread {
                    path: node.to_string(),
                    error: e.to_string(),
                });
            }
        }
    }
    rows.reverse();
    rows
}

/// The warning for `node` (the lock's directory, or a parent not below a closed node that
/// nobody else can delete) open to the identities `named`.
fn open_finding(node: &str, is_path: bool, named: &[String]) -> Finding {
    let what = match is_path {
        true => "the lock's directory: they may delete a holder's node and let a second holder in",
        false => "a parent of the lock: they may add nodes there, or delete and recreate an empty lock directory with an ACL of their own",
    };
    Finding::new(
        Check::Acl,
        Status::Warn,
        format!("{node} lets other identities create or delete children ({}): {what}", named.join(", ")),
    )
    .fix(match is_path {
        true => format!("let only the lock's users create and delete there: lock with --acl creator, or setAcl {node} sasl:USER:cdrwa,world:anyone:r"),
        false => format!("keep locks in a directory made with `zkguard mkdir DIR --acl creator` (closed, and nobody else can delete it), or setAcl {node} to the lock users and administrators (world:anyone:r keeps it readable)"),
    })
    .about(node)
}

/// Whether `node` holds the marker of `zkguard mkdir` and it is
/// [`lasting`](crate::mkdir::lasting) (judged by `rule` with `ours`): then it is never
/// empty, and only those its ACL lets delete can make it so. No other child counts: a
/// lock's directory is a container, which the server deletes once its last lock node is
/// gone, and a client's stat shows a container as persistent. Nor does a marker whose ACL
/// this identity may not read (a `--trust`ed identity's doctor, where another made the
/// marker): its ACL cannot be judged, so the walk goes on (warnings, the safe side).
fn holds_marker(client: &Client, node: &str, rule: &NodeAcl, ours: &[Acl]) -> bool {
    let marker = match node {
        "/" => format!("/{}", zkguard::DIRECTORY_MARKER),
        _ => format!("{node}/{}", zkguard::DIRECTORY_MARKER),
    };
    matches!(client.get_acl(&marker), Ok((acl, stat))
        if crate::mkdir::lasting(&stat, &acl, |a| rule.untrusted(a, ours)))
}

/// This session's identities as ACL entries name them, learned by the library's own code
/// (`Client::own_identities`: an ephemeral node with the `auth` ACL made beside the lock, or
/// beside the nearest parent that exists, its ACL read back only if it is still our node,
/// the node deleted). `None` when no such node can be made (no credentials, or no right to
/// create there), or when the node read back was not ours (a finding says so): then
/// `whoami`'s names serve, which for `digest` lack the password's hash and so match no ACL
/// entry.
pub fn learn_ours(client: &Client, path: &str, out: &mut Vec<Finding>) -> Option<Vec<Acl>> {
    let mut at = path;
    while let Some(i) = at.rfind('/') {
        at = &at[..i];
        let dir = if at.is_empty() { "/" } else { at };
        match client.own_identities(dir) {
            Ok(ours) => return Some(ours),
            Err(Error::NoNode { .. }) if !at.is_empty() => continue,
            Err(e @ Error::NotOurNode { .. }) => {
                out.push(Finding::new(Check::Acl, Status::Warn, e.to_string()).about(dir));
                return None;
            }
            Err(_) => return None,
        }
    }
    None
}

pub fn nanos() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

/// Who holds the lock at `path` and who waits (as `zkguard holders --json` shows them).
pub fn holders(client: &Client, path: &str, out: &mut Vec<Finding>) -> Holders {
    match Listing::read(client, path, false) {
        Ok(l) => Holders {
            json: l.json(path, true),
            rows: (l.rows.iter())
                .map(|(role, c)| (*role, c.p.node.clone(), c.p.id()))
                .collect(),
        },
        Err(f) => {
            out.push(Finding::new(Check::Holders, Status::Warn, f.msg.clone()).about(path));
            Holders {
                json: serde_json::json!({ "error": f.msg }),
                rows: Vec::new(),
            }
        }
    }
}

/// `path`'s parent, "" for the root's children (scratch nodes go in `{parent}/...`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "",
        Some(i) => &path[..i],
    }
}

/// The contention probe: a scratch lock beside `path` (a child of its parent: a child of
/// the lock's directory would be a foreign node to the lock's own contenders), taken by
/// two sessions in turn, `rounds` handoffs. Each holder writes through its fence; after
/// each handoff the old holder's node must be gone, the new one the only holder, with a
/// larger token. The scratch directory is deleted at the end.
pub fn probe(conn: &Connection, path: &str, rounds: u32, out: &mut Vec<Finding>) -> Probe {
    let parent = parent(path);
    let dir = format!("{parent}/zkguard-doctor-{}-{}", std::process::id(), nanos());
    let quiet = Say { quiet: true };
    let sessions = conn
        .connect(quiet)
        .and_then(|a| Ok((a, conn.connect(quiet)?)));
    let (a, b) = match sessions {
        Ok(ab) => ab,
        Err(f) => {
            out.push(
                Finding::new(
                    Check::Probe,
                    Status::Fail,
                    format!("probe sessions: {}", f.msg),
                )
                .about(&dir),
            );
            return Probe::NoSessions { dir, error: f.msg };
        }
    };
    let result = handoffs(&a, &b, &dir, rounds);
    // The holder released; the directory goes (a container would go by itself, later).
    let _ = a.delete(&dir, None);
    let cleaned = matches!(a.exists(&dir), Ok(None));
    a.close();
    b.close();
    match result {
        Ok(ms) => {
            // At least one handoff: `probe` runs with a round or more.
            let spread = Spread::of(&ms).unwrap_or_default();
            let Spread { min, avg, max } = spread;
            out.push(Finding::new(
                Check::Probe,
                Status::Pass,
                format!("{} fenced handoffs between two sessions at {dir}: exclusion held (one holder each time, the old node gone, tokens rising); handoff {min:.1}/{avg:.1}/{max:.1} ms min/avg/max", ms.len()),
            ).about(&dir));
            Probe::Held {
                dir,
                handoffs: ms.len(),
                exclusion: true,
                handoff_ms: spread,
                cleaned_up: cleaned,
            }
        }
        Err(e) => {
            let fix = match &e {
                Why::Zk(Error::NoAuth { .. }) => Some(format!("the ACL of {parent} refuses this identity: the probe needs create and delete there")),
                _ => None,
            };
            let mut f = Finding::new(
                Check::Probe,
                Status::Fail,
                format!("contention probe at {dir}: {e}"),
            )
            .about(&dir);
            if let Some(fix) = fix {
                f = f.fix(fix);
            }
            out.push(f);
            Probe::Broken {
                dir,
                exclusion: None,
                error: e.to_string(),
                cleaned_up: cleaned,
            }
        }
    }
}

/// Why the probe failed: a request refused or failing, or the lock not behaving.
enum Why {
    Zk(Error),
    Broken(String),
}

impl From<Error> for Why {
    fn from(e: Error) -> Why {
        Why::Zk(e)
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Zk(e) => e.fmt(f),
            Why::Broken(s) => f.write_str(s),
        }
    }
}

/// `rounds` handoffs between the sessions `a` and `b`; each one's time in milliseconds
/// (from the holder's release call to the waiter's acquire returning).
fn handoffs(a: &Client, b: &Client, dir: &str, rounds: u32) -> Result<Vec<f64>, Why> {
    let locks = [Mutex::new(a, dir)?, Mutex::new(b, dir)?];
    let mut held = locks[0].acquire()?;
    let mut times = Vec::new();
    for round in 0..rounds as usize {
        let next = &locks[(round + 1) % 2];
        let (tx, rx) = crossbeam_channel::bounded(1);
        let taken = std::thread::scope(|s| {
            s.spawn(move || {
                let g = next.acquire();
                let _ = tx.send((Instant::now(), g));
            });
            // The waiter is queued: two contenders listed.
            let queued = Instant::now();
            while locks[0].participants()?.len() < 2 {
                if queued.elapsed() > Duration::from_secs(20) {
                    return Err(Why::Broken(
                        "the second session was not queued within 20 s".into(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let data = format!("round {round}").into_bytes();
            held.fenced_multi(&[Op::SetData {
                path: dir.to_string(),
                data,
                version: None,
            }])?;
            let (old_node, old_token) = (held.path().to_string(), held.token());
            let released = Instant::now();
            held.release()?;
            let (at, g) = rx
                .recv()
                .map_err(|_| Why::Broken("the waiter's thread ended".into()))?;
            let g = g.map_err(Why::Zk)?;
            let ms = at.saturating_duration_since(released).as_secs_f64() * 1000.0;
            // Exclusion: the old fence is dead, one holder (the new one), a larger token.
            let old_gone = a.exists(&old_node)?.is_none();
            let list = locks[0].participants()?;
            let holders: Vec<_> = list.iter().filter(|p| p.holds).collect();
            let one = holders.len() == 1 && g.path().ends_with(&holders[0].node);
            if !(old_gone && one && g.token() > old_token) {
                return Err(Why::Broken(format!(
                    "exclusion not confirmed after handoff {round}: old node gone {old_gone}, holders {}, token {} after {old_token}",
                    holders.len(),
                    g.token()
                )));
            }
            Ok((g, ms))
        })?;
        held = taken.0;
        times.push(taken.1);
    }
    held.fenced_multi(&[Op::Check {
        path: dir.to_string(),
        version: None,
    }])?;
    held.release()?;
    Ok(times)
}
