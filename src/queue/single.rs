//! The other acquire algorithm: one ephemeral node at a fixed path, no queue. Under the
//! unfair lock and the unfair election.
//!
//! Every contender tries to create the node; the losers set a data watch on it and race
//! again when it changes or goes (a herd, by design: few contenders). The node's data is a
//! value unique to the call, so a create whose reply was lost is resolved by reading the
//! node back: it is ours only if it carries our value and belongs to the current session.

use std::time::Instant;

use super::attempt::{Attempt, Fired, Next, Verdict, Wait, Woke};
use super::cancel::Canceller;
use super::create::{Create, Failed};
use super::held::Acquired;
use super::kind::Kind;
use super::{names, tenancy};
use crate::client::{Check, Client, Job};
use crate::client::{CreateMode, NodeAcl};
use crate::error::{escape, Error, Result};

/// Takes the single node at `path`, writing `data` (unique to this call) into it; the node
/// and any parent this call creates get `acl`. `Ok(None)`: not acquired within `wait`,
/// nothing left behind.
pub(crate) fn acquire(
    client: &Client,
    (path, kind): (&str, Kind),
    data: &[u8],
    acl: &NodeAcl,
    wait: Wait,
    canceller: &Canceller,
) -> Result<Option<Acquired>> {
    let mut cx = Attempt::new(client, (path, kind), wait, canceller);
    let r = race(&mut cx, client, path, data, acl);
    cx.end(r)
}

/// The races of one acquire (see [`acquire`]).
fn race(
    cx: &mut Attempt<'_>,
    client: &Client,
    path: &str,
    data: &[u8],
    acl: &NodeAcl,
) -> Result<Option<Acquired>> {
    let wait = cx.wait;
    // Set while a create's outcome is unknown; cleared by the next clear answer.
    let mut unsure = false;
    // The session of the last create (its clean-up goes out on that session only).
    let mut session = client.session_id();
    let give_up = |unsure: bool, session: i64| {
        if unsure {
            client.delete_in_background(Job::Path {
                path: path.to_string(),
                check: Check::Data(data.to_vec()),
                session,
            });
        }
    };
    loop {
        let c = match cx.checked(None) {
            Ok(c) => c,
            Err(end) => {
                give_up(unsure, session);
                return done(end);
            }
        };
        session = client.session_id();
        let tried = try_once((&c.pinned(session), session), path, data, acl);
        unsure = matches!(&tried, Err(e) if trouble(e));
        match tried {
            Ok(Some(a)) => return Ok(Some(a)),
            Ok(None) if matches!(wait, Wait::Try) => return Ok(None),
            Ok(None) => cx.reset_backoff(),
            Err(e) => match cx.failed(e, false) {
                Ok(()) => continue,
                Err(end) => {
                    give_up(unsure, session);
                    return done(end);
                }
            },
        }
        // Held by someone else: wait for it to go, then race again.
        if let Err(end) = await_release(cx, &c, path) {
            return done(end);
        }
    }
}

/// How the race ends: a loop with no node of its session never restarts (its verdicts,
/// [`Verdict::of`] with `holds` false, are retry or fail), so a restart is only a retry
/// that came out of time.
fn done(end: Next) -> Result<Option<Acquired>> {
    match end {
        Next::Done(r) => r,
        Next::Restart => Ok(None),
    }
}

/// Whether a request's error leaves its outcome unknown (connection trouble, or a session
/// that expired under it): the race goes on after a pause, and a create may have happened.
/// The waiting loops' one rule ([`Verdict::of`]) for a loop with no node yet.
pub(super) fn trouble(e: &Error) -> bool {
    Verdict::of(e, false) == Verdict::Retry
}

/// Whose the node at the path is, by a read of it: its data `read`, its ephemeral owner
/// `owner`; ours carry our `data` in our `session`.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Whose {
    Ours,
    /// A persistent node: nobody's, in the way.
    InTheWay,
    Someone,
}

pub(super) fn whose(read: &[u8], owner: i64, data: &[u8], session: i64) -> Whose {
    if read == data && owner == session {
        Whose::Ours
    } else if owner == 0 {
        Whose::InTheWay
    } else {
        Whose::Someone
    }
}

/// What a wait for the holder's node to go ends in (`woke`: the wake-up rule's word, for a
/// loop with no node): race again (`Ok(true)` if the node's deletion was heard: the handoff
/// gap starts), or the acquire ends (`Err`).
pub(super) fn waited(woke: Woke) -> std::result::Result<bool, Next> {
    match woke {
        Woke::Watch(_, Fired::Deleted) => Ok(true),
        Woke::Watch(_, Fired::Changed) | Woke::Again | Woke::List => Ok(false),
        Woke::End(end) => Err(end),
    }
}

/// Waits until the node at `path`, held by someone else, changes or goes (no watch is left
/// if it already has), or the tick, or a session event; then the caller races again.
/// `Err`: the acquire ends so.
fn await_release(cx: &mut Attempt<'_>, c: &Client, path: &str) -> std::result::Result<(), Next> {
    let watch = c.pipeline(|p| {
        p.ring(cx.bell());
        p.get_data_w(path)
    });
    let watch = match watch.wait() {
        Ok((_, stat, _)) if stat.ephemeral_owner == 0 => {
            return Err(Next::Done(Err(in_the_way(path))))
        }
        Ok((_, _, w)) => w,
        // Gone already: race again.
        Err(Error::NoNode { .. }) => return Ok(()),
        // Paused after trouble: race again.
        Err(e) => {
            return match cx.failed(e, false) {
                Err(end @ Next::Done(Err(_))) => Err(end),
                _ => Ok(()),
            }
        }
    };
    // Without a deadline, a slow re-check every session timeout.
    let tick = cx
        .deadline
        .is_none()
        .then(|| Instant::now() + cx.client.session_timeout());
    if waited(cx.woke(&[&watch], tick, None))? {
        cx.heard_release(true);
    }
    Ok(())
}

/// The data of the node at `path` when someone holds it, `None` when nobody does; a
/// persistent node there is nobody's: it is refused as an acquire refuses it.
pub(crate) fn holder(client: &Client, path: &str) -> Result<Option<Vec<u8>>> {
    match client.get_data(path) {
        Ok((_, stat)) if stat.ephemeral_owner == 0 => Err(in_the_way(path)),
        Ok((data, _)) => Ok(Some(data)),
        Err(Error::NoNode { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A persistent node sits where the single ephemeral node belongs.
fn in_the_way(path: &str) -> Error {
    Error::InvalidPath {
        path: path.to_string(),
        reason: "a persistent node (a lock or election directory?) is at this path; an \
                 unfair lock or election needs the path for its own ephemeral node"
            .into(),
    }
}

/// One create; a lost reply is resolved by reading the node back. A missing parent is made
/// with the node in one `multi` (`create.rs`), as a queue's directory. With an ACL that
/// keeps others out, the parent's ACL is read behind the create and judged (`tenancy.rs`):
/// fully once the node is ours (which is deleted again if the parent is refused), and for
/// unauthenticated writers also when another holds it.
/// `c` is pinned to `session`.
fn try_once(
    (c, session): (&Client, i64),
    path: &str,
    data: &[u8],
    acl: &NodeAcl,
) -> Result<Option<Acquired>> {
    let parent = names::parent(path);
    let guard = acl.keeps_others_out();
    let mut create = Create::new(parent, path, data, CreateMode::Ephemeral, acl);
    loop {
        let (created, read_acl) = c.pipeline(|p| {
            let created = create.send(p);
            (created, guard.then(|| p.get_acl(parent)))
        });
        let won = match create.wait(c, created, session) {
            Ok(node) => Some(node),
            Err(Failed::Again) => continue,
            Err(Failed::Nothing(e)) => return Err(e),
            Err(Failed::Node(Error::NodeExists { .. })) => ours(c, path, data, acl)?,
            // Did the create happen? Read the node back; if that fails too, the caller
            // retries with the same data, and a node of ours found by a later create
            // (NodeExists) is recognised by it.
            Err(Failed::Node(e)) if e.is_connection_error() => ours(c, path, data, acl)?,
            Err(Failed::Node(e)) => return Err(e),
        };
        if !guard {
            return Ok(won);
        }
        let judged = match read_acl {
            Some(p) => p.wait(),
            None => c.get_acl(parent),
        }
        .and_then(|(a, _)| tenancy::check(c, acl, parent, &a, won.as_ref()));
        if let Err(e) = judged {
            if let Some(node) = &won {
                release(c, node);
            }
            return Err(e);
        }
        return Ok(won);
    }
}

/// Deletes our node, which we may not keep (in the background on trouble); a node someone
/// else put at its path is left alone.
fn release(c: &Client, node: &Acquired) {
    let check = Check::Czxid(node.token);
    if let Err(e) = c.delete_owned(&node.path, check, node.owner, c.timeout()) {
        log::warn!(
            "zkguard: cannot delete {} after a refused check: {e}",
            escape(&node.path)
        );
    }
}

/// The node at the path, if it is ours (our data, our session).
fn ours(c: &Client, path: &str, data: &[u8], acl: &NodeAcl) -> Result<Option<Acquired>> {
    match c.get_data(path) {
        Ok((d, stat)) => match whose(&d, stat.ephemeral_owner, data, c.session_id()) {
            Whose::Ours => Ok(Some(Acquired::of(path.to_string(), &stat, acl))),
            Whose::InTheWay => Err(in_the_way(path)),
            Whose::Someone => Ok(None),
        },
        Err(Error::NoNode { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}
