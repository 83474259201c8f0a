//! `revoke` and `break`: clearing a lock from the command line. `revoke` asks the holders
//! to let go (the library's `revoke`, Curator's `Revoker`: `__REVOKE__` written into the
//! node; letting go is up to the holder, `zkguard lock` terminates its command); `break`
//! deletes one node after saying whose it is, and only if it is still that node once the
//! answer is given, and the holder learns of it as of any deletion (a lost lock: `zkguard
//! lock` terminates its command and exits 75). Both find a node only where the listing
//! found it ([`Listing`]'s rows); everything read from ZooKeeper is shown escaped.

use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::RecvTimeoutError;
use zkguard::{Client, Error, Stat};

use crate::args::{check_path, BreakArgs, RevokeArgs};
use crate::conn::Connection;
use crate::fail::{Fail, EXIT_NOPERM, EXIT_SOFTWARE, EXIT_USAGE};
use crate::say::{acl_at, seconds, Say};
use crate::show::{Contender, Listing, UNFAIR};
use crate::watchdog;

/// Exit status of `revoke` and `break` when there was nothing to do (no holder, the node
/// gone) or the user said no.
pub const EXIT_NOTHING: i32 = 1;

/// What `break` says before it deletes: what happens to the holder's command.
const BREAK_WARNING: &str = "its holder's command is told to stop once its zkguard sees the \
    loss: at once if zkguard runs; if zkguard is frozen, its watchdog stops the command \
    within a third of the holder's session timeout of the freeze, which break waits out \
    unless --now; if the holder's whole host is frozen, its command may run on for a \
    moment when the host resumes, beside the next holder's: only writes fenced with \
    ZKGUARD_TOKEN are safe then. `zkguard revoke --wait` lets a running holder finish first";

/// `break --help`: what it does and why it waits.
pub const BREAK_ABOUT: &str = "\
Delete a holder's node at PATH after saying whose it is: its holder loses the lock (asks
first on a terminal; --yes does not ask).

A holder whose zkguard is frozen (SIGSTOP, a debugger, a cgroup freeze) has its command
stopped by its watchdog a third of its session timeout after the freeze; deleted sooner,
the next holder's command would run beside it. So break waits until that bound (plus 2 s)
has passed since break started, then deletes the node if it is still the one shown. The
bound comes from the holder's session timeout, which `zkguard lock` records in its node's
data (\"host pid N (zkguard: session timeout 10000 ms)\"); a node without it (an
election, --data, another client, an older zkguard) gets a third of the longest session
this ensemble grants (learned from break's own session). --now deletes at once: for a
holder known dead, its host gone, or its command seen stopped. If the node goes while
break waits (its session expired), nothing is deleted.";

/// `revoke` and `break`'s exit status table.
pub const EXIT_CODES: &str = "\
Exit status:
  0   done: the request written (revoke; with --wait: and every holder asked let go)
      or the node deleted (break)
  1   nothing done: nobody holds PATH, the node is gone, the answer was not yes, or
      (break) the node changed hands or was written since it was shown
  2   bad input: a path, a node not at PATH, no --yes without a terminal
  69  ZooKeeper could not be reached or failed a request
  75  (revoke --wait) a holder asked did not let go in time: its node is named, with
      its session and age
  77  ZooKeeper refused: the ACL (named) does not let this identity write or delete";

/// Exit status of `revoke --wait` when a holder did not let go in time.
pub const EXIT_HELD_ON: i32 = 75;

/// The failure for a refused request: exit 77 naming the ACL that refused (ZooKeeper
/// checks a delete against the parent's ACL, a write against the node's).
fn refused(client: &Client, what: &str, acl_of: &str, e: Error) -> Fail {
    Fail::new(
        EXIT_NOPERM,
        format!("{what}: {e}; {}", acl_at(client, acl_of)),
    )
}

/// A listing of `path` refused: exit 77 (as [`Fail::zk`] made it), with the ACL named.
fn listing(client: &Client, path: &str) -> Result<Listing, Fail> {
    Listing::read(client, path, false).map_err(|f| match f.code {
        EXIT_NOPERM => Fail::new(EXIT_NOPERM, format!("{}; {}", f.msg, acl_at(client, path))),
        _ => f,
    })
}

/// "session 0x1000…, data "host-a pid 42", created 12 s ago" (the data escaped).
fn owner(stat: &Stat, data: &[u8]) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let age = now.saturating_sub(Duration::from_millis(stat.ctime.max(0) as u64));
    format!(
        "session 0x{:x}, data \"{}\", created {} ago",
        stat.ephemeral_owner,
        zkguard::escape_bytes(data),
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
    let list = listing(client, path)?;
    if list.kind == UNFAIR {
        // Its node's data is the holder's owner id, which its release compares: a request
        // written there would take its holder's own node from it, and nobody listens.
        return Err(Fail::new(
            EXIT_USAGE,
            format!(
                "{path} is an unfair lock's node: unfair locks take no revocation requests \
                 (its data is the holder's owner id); `zkguard break {path} --holder` deletes it"
            ),
        ));
    }
    let rows: Vec<&Contender> = match &args.node {
        Some(n) => vec![row(&list, path, n)?],
        None => list
            .rows
            .iter()
            .map(|(_, c)| c)
            .filter(|c| c.p.holds)
            .collect(),
    };
    if rows.is_empty() {
        say.say(format!("nobody holds {path}: nothing to revoke"));
        return Ok(EXIT_NOTHING);
    }
    if list.kind == "election" {
        // A data change on the leader's node spends the one-shot watch of a Curator
        // LeaderLatch right behind it, which acts on NodeDeleted alone (tests/curator.rs).
        say.say(format!(
            "warning: a Curator LeaderLatch queued right behind the leader of {path} stops \
             watching it on this request and does not lead when it resigns (until its \
             connection resets); zkguard candidates are not affected"
        ));
    }
    let mut asked = Vec::new();
    for c in rows {
        let node = zkguard::escape(&c.full);
        match zkguard::revoke(client, &c.full) {
            Ok(()) => {
                say.say(format!(
                    "asked {node} (data \"{}\") to let go",
                    zkguard::escape_bytes(&c.p.data)
                ));
                asked.push(c.full.as_str());
            }
            Err(Error::NoNode { .. }) => say.say(format!("{node} is gone already")),
            Err(e @ Error::NoAuth { .. }) => {
                return Err(refused(
                    client,
                    &format!("cannot revoke {node}"),
                    &c.full,
                    e,
                ))
            }
            Err(e) => return Err(Fail::zk(format_args!("cannot revoke {node}"), e)),
        }
    }
    match args.wait {
        Some(wait) => wait_let_go(client, &asked, wait, say),
        None => Ok(0),
    }
}

/// `revoke --wait`: waits until every node in `asked` is gone (its holder let go), for
/// `wait` in all. 0 if they all went; [`EXIT_HELD_ON`] naming each node still there, with
/// its session and age, if not.
fn wait_let_go(client: &Client, asked: &[&str], wait: Duration, say: Say) -> Result<i32, Fail> {
    let started = std::time::Instant::now();
    let deadline = started + wait;
    let mut held_on = Vec::new();
    for full in asked {
        if let Some(stat) = gone_by(client, full, deadline)? {
            let data = client.get_data(full).map(|(d, _)| d).unwrap_or_default();
            held_on.push(format!(
                "{} ({})",
                zkguard::escape(full),
                owner(&stat, &data)
            ));
        }
    }
    if held_on.is_empty() {
        say.say(format!(
            "every holder asked let go (within {:.1} s)",
            started.elapsed().as_secs_f64()
        ));
        return Ok(0);
    }
    Err(Fail::new(
        EXIT_HELD_ON,
        format!(
            "still held after {}: {}. Its holder did not let go: a zkguard whose command \
             ignores SIGTERM lets go after --kill-after; one that is frozen, or its host, \
             does not until its session expires (a frozen zkguard's watchdog has stopped its \
             command); `zkguard break` deletes the node",
            humantime::format_duration(wait),
            held_on.join("; ")
        ),
    ))
}

/// The row of the listing of `path` that `--node` names (its name, or its full path as
/// the listing has it). The node's place is the row's (the sub-directory it was listed
/// from), never looked for elsewhere: a same-named node in another directory is not it.
fn row<'l>(list: &'l Listing, path: &str, node: &str) -> Result<&'l Contender, Fail> {
    let shown = zkguard::escape(node);
    let found = if node.starts_with('/') {
        if node != path && !node.starts_with(&format!("{path}/")) {
            return Err(Fail::new(
                EXIT_USAGE,
                format!("--node {shown} is not under {path}"),
            ));
        }
        list.rows.iter().map(|(_, c)| c).find(|c| c.full == node)
    } else if node.is_empty() || node.contains('/') {
        return Err(Fail::new(
            EXIT_USAGE,
            format!("--node \"{shown}\": give a node's name, as `zkguard holders {path}` shows it"),
        ));
    } else {
        list.rows.iter().map(|(_, c)| c).find(|c| c.p.node == node)
    };
    found.ok_or_else(|| {
        Fail::new(
            EXIT_NOTHING,
            format!(
                "{path} has no node {shown} among its contenders (gone already? `zkguard \
                 holders {path}` lists them)"
            ),
        )
    })
}

/// What `break` asks for as its own session timeout: more than any server grants, so that
/// the timeout granted is the longest the server gives any session (its
/// `maxSessionTimeout`), a bound on the holder's.
const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// `zkguard break PATH --node NODE | --holder`.
pub fn break_lock(conn: &Connection, args: &BreakArgs, say: Say) -> Result<i32, Fail> {
    // A frozen holder froze before break started: its watchdog's bound counts from here.
    let started = Instant::now();
    check_path(&args.path)?;
    if !args.yes && !std::io::stdin().is_terminal() {
        return Err(Fail::new(
            EXIT_USAGE,
            "break: stdin is not a terminal to ask on: give --yes to delete without asking",
        ));
    }
    let mut conn = conn.clone();
    conn.session_timeout = LONGEST;
    let client = conn.connect(say)?;
    let result = break_on(&client, args, started, say);
    client.close();
    result
}

fn break_on(client: &Client, args: &BreakArgs, started: Instant, say: Say) -> Result<i32, Fail> {
    let path = args.path.as_str();
    let list = listing(client, path)?;
    let c = match &args.node {
        Some(n) => row(&list, path, n)?,
        None => {
            let holders: Vec<&Contender> = list
                .rows
                .iter()
                .map(|(_, c)| c)
                .filter(|c| c.p.holds)
                .collect();
            match holders.as_slice() {
                [] => {
                    say.say(format!("nobody holds {path}: nothing to break"));
                    return Ok(EXIT_NOTHING);
                }
                [one] => *one,
                many => {
                    let names: Vec<_> = many.iter().map(|c| zkguard::escape(&c.p.node)).collect();
                    return Err(Fail::new(
                        EXIT_USAGE,
                        format!(
                            "{path} has {} holders ({}): name one with --node",
                            many.len(),
                            names.join(", ")
                        ),
                    ));
                }
            }
        }
    };
    let (full, node) = (c.full.as_str(), zkguard::escape(&c.full));
    // What is shown is one read: the data and the stat of one version of the node.
    let (data, shown) = match client.get_data(full) {
        Ok(read) => read,
        Err(Error::NoNode { .. }) => {
            say.say(format!("{node} is gone already"));
            return Ok(EXIT_NOTHING);
        }
        Err(e) => return Err(Fail::zk(format_args!("cannot read {node}"), e)),
    };
    if shown.ephemeral_owner == 0 {
        return Err(Fail::new(
            EXIT_USAGE,
            format!("{node} is not a lock node (not ephemeral): not deleting it"),
        ));
    }
    say.say(format!("{node}: {}", owner(&shown, &data)));
    say.say(BREAK_WARNING);
    let wait = (!args.now).then(|| watchdog_wait(client, &data));
    if let Some((_, why)) = &wait {
        say.say(why);
    }
    if !args.yes && !ask(&format!("delete {node}? Its holder loses the lock [y/N] "))? {
        say.say("not deleted");
        return Ok(EXIT_NOTHING);
    }
    if let Some((wait, _)) = wait {
        if gone_by(client, full, started + wait)?.is_none() {
            say.say(format!(
                "{node} is gone already (its session ended while break waited): nothing \
                 deleted"
            ));
            return Ok(EXIT_NOTHING);
        }
    }
    delete_shown(client, full, &shown, say)
}

/// How long after its start `break` waits before deleting (a frozen holder's watchdog has
/// acted by then: [`watchdog::acted_within`] the holder's session timeout, recorded in its
/// node's `data`, else the longest this ensemble grants), and the line that says so.
fn watchdog_wait(client: &Client, data: &[u8]) -> (Duration, String) {
    let longest = client.session_timeout();
    let secs =
        |d: Duration| humantime::format_duration(Duration::from_millis(d.as_millis() as u64));
    let (timeout, whose) = match watchdog::recorded(data) {
        Some(t) => (
            t.min(longest),
            format!(
                "the holder's session timeout, {}, recorded in its node",
                secs(t)
            ),
        ),
        None => (
            longest,
            format!(
                "its node records no session timeout (an election, --data, another client or \
                 an older zkguard): the longest session this ensemble grants, {}",
                secs(longest)
            ),
        ),
    };
    let wait = watchdog::acted_within(timeout);
    (
        wait,
        format!(
            "waiting until {} after break started (a third of {whose}, plus {}) so that a \
             frozen holder's watchdog has stopped its command; --now deletes at once",
            secs(wait),
            secs(watchdog::MARGIN)
        ),
    )
}

/// Waits until `full` is gone or `deadline` passes: None if it went, else its last stat.
fn gone_by(client: &Client, full: &str, deadline: Instant) -> Result<Option<Stat>, Fail> {
    loop {
        let seen = client
            .exists_w(full)
            .map_err(|e| Fail::zk(format_args!("cannot look at {}", zkguard::escape(full)), e))?;
        match seen {
            (None, _) => return Ok(None),
            (Some(stat), watch) => match watch.recv_deadline(deadline) {
                Err(RecvTimeoutError::Timeout) => return Ok(Some(stat)),
                // An event (looked at again), or the watch dropped with its session: the
                // next `exists_w` says what is so (or fails).
                Ok(_) | Err(RecvTimeoutError::Disconnected) => {}
            },
        }
    }
}

/// Deletes `full` only if it is still the node shown: the same creation (`czxid`) and
/// owner (`ephemeralOwner`) when read again after the answer, and the data version shown.
/// A node made again at the same path since (a fixed-name node that changed hands while
/// the question waited: its version starts at 0 again) is another's, and is left alone.
fn delete_shown(client: &Client, full: &str, shown: &Stat, say: Say) -> Result<i32, Fail> {
    let node = zkguard::escape(full);
    let dir = &full[..full.rfind('/').unwrap_or(0)];
    let now = match client.exists(full) {
        Ok(Some(now)) => now,
        Ok(None) => {
            say.say(format!("{node} is gone already: nothing deleted"));
            return Ok(EXIT_NOTHING);
        }
        Err(e) => return Err(Fail::zk(format_args!("cannot read {node} again"), e)),
    };
    // Said even with --quiet: what was asked for was not done.
    if (now.czxid, now.ephemeral_owner) != (shown.czxid, shown.ephemeral_owner) {
        return Err(Fail::new(
            EXIT_NOTHING,
            format!(
                "not deleted: {node} changed hands since it was shown (now created by session \
                 0x{:x} at zxid 0x{:x}; shown: session 0x{:x} at zxid 0x{:x}): the node shown \
                 is gone, this one is another holder's",
                now.ephemeral_owner, now.czxid, shown.ephemeral_owner, shown.czxid
            ),
        ));
    }
    match client.delete(full, Some(shown.version)) {
        Ok(()) => {
            say.say(format!("deleted {node}: its holder loses the lock"));
            Ok(0)
        }
        Err(Error::NoNode { .. }) => {
            say.say(format!("{node} is gone already: nothing deleted"));
            Ok(EXIT_NOTHING)
        }
        Err(Error::BadVersion { .. }) => Err(Fail::new(
            EXIT_NOTHING,
            format!(
                "not deleted: {node}'s data changed since it was shown (version {} then): \
                 look again (zkguard holders)",
                shown.version
            ),
        )),
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
        .map_err(|e| Fail::new(EXIT_SOFTWARE, format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
