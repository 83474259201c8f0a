//! `zkguard mkdir PATH --acl creator|creator-read`: a persistent directory for a team's
//! locks, with the ACL, that stays non-empty so that nobody it shuts out can delete it.
//!
//! ZooKeeper checks a delete against the parent's ACL and deletes only an empty node. On a
//! shared ensemble the root lets anyone delete, so an empty team directory could be deleted
//! and re-created open by any tenant (the locks under it then refuse to run: a denial of
//! service). So the directory is created together with a persistent marker inside it
//! ([`zkguard::DIRECTORY_MARKER`], with the same ACL), in one transaction: from its first
//! moment it holds a node only the ACL's identities may delete. Every recipe accepts the
//! marker in its directory. Idempotent: a directory that exists and whose ACL lets nobody
//! but this identity (and `--trust`'s) create, delete or administer there is kept (its
//! marker added if missing); one whose ACL is open is refused (77), as the locks would.
//! "Kept" is said only of the directory judged: once its marker exists, the directory's ACL
//! and stat are read again, and a directory made again at the path since (same path, other
//! `czxid` or `aversion`, or an ACL that no longer passes) is refused (77) as swapped.

use zkguard::{Acl, Client, CreateMode, Error, NodeAcl, Op, DIRECTORY_MARKER};

use crate::args::{check_path, node_acl, MkdirArgs};
use crate::conn::Connection;
use crate::fail::{Fail, EXIT_NOPERM, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::say::{acl_at, acl_text, Say};

/// `mkdir`'s exit status table.
pub const EXIT_CODES: &str = "\
Exit status:
  0   made, or there already with an ACL that keeps others out (kept)
  2   bad input: a path, --acl open, a --trust entry
  69  ZooKeeper could not be reached or failed a request
  77  refused: the ACL (named) does not let this identity create there, or the directory
      exists and its ACL lets others create, delete or change the ACL there, or its
      marker has children (it could go and leave the directory empty), or it was
      swapped (deleted and made again) while mkdir added its marker";

/// `zkguard mkdir PATH --acl ACL [--trust SCHEME:ID]...`.
pub fn mkdir(conn: &Connection, args: &MkdirArgs, say: Say) -> Result<i32, Fail> {
    let path = args.path.as_str();
    check_path(path)?;
    let acl = node_acl(Some(&args.acl), &args.trust)?;
    if !acl.keeps_others_out() {
        return Err(Fail::new(
            EXIT_USAGE,
            format!(
                "--acl {}: a directory anyone may create and delete in keeps nobody out; \
                 give --acl creator or --acl creator-read",
                acl.name()
            ),
        ));
    }
    let client = conn.connect(say)?;
    conn.warn_cleartext(Some(&acl), say);
    let result = make(&client, path, &acl, say);
    client.close();
    result
}

fn make(client: &Client, path: &str, acl: &NodeAcl, say: Say) -> Result<i32, Fail> {
    let marker = format!("{path}/{DIRECTORY_MARKER}");
    let parent = &path[..path.rfind('/').unwrap_or(0)];
    if !parent.is_empty() {
        client
            .ensure_path_with_acl(parent, acl)
            .map_err(|e| refused(client, format_args!("cannot make {parent}"), parent, e))?;
    }
    let create = |p: &str| persistent(p, acl);
    match client.multi(&[create(path), create(&marker)]) {
        Ok(_) => {
            let (entries, _) = client
                .get_acl(path)
                .map_err(|e| Fail::zk(format_args!("cannot read the ACL of {path}"), e))?;
            say.say(format!(
                "made {path} with ACL {} and its marker {DIRECTORY_MARKER}: only those may \
                 create, delete or change the ACL there, and nobody can delete the directory",
                acl_text(&entries)
            ));
            return Ok(0);
        }
        Err(Error::Multi { index: 0, source }) if matches!(*source, Error::NodeExists { .. }) => {}
        Err(Error::Multi { source, .. }) => {
            return Err(refused(
                client,
                format_args!("cannot make {path}"),
                parent,
                *source,
            ))
        }
        Err(e) => {
            return Err(refused(
                client,
                format_args!("cannot make {path}"),
                parent,
                e,
            ))
        }
    }
    // It exists: kept only if its ACL keeps out whom the locks would refuse.
    let (entries, judged) = client
        .get_acl(path)
        .map_err(|e| Fail::zk(format_args!("cannot read the ACL of {path}"), e))?;
    let ours = match client.own_identities(path) {
        Ok(ours) => ours,
        Err(e @ Error::NoAuth { .. }) => {
            return Err(Fail::new(
                EXIT_NOPERM,
                format!(
                    "{path} exists and is not this identity's: its ACL {} does not let it \
                     create there ({e})",
                    acl_text(&entries)
                ),
            ))
        }
        Err(e) => {
            return Err(Fail::zk(
                format_args!("cannot learn who we are in {path}"),
                e,
            ))
        }
    };
    let open = acl.untrusted(&entries, &ours);
    if !open.is_empty() {
        return Err(Fail::new(
            EXIT_NOPERM,
            format!(
                "{path} exists and its ACL {} lets {} create, delete or change the ACL there: \
                 not a protected directory. Delete it (if it is yours to delete) and run \
                 mkdir again, or choose another path",
                acl_text(&entries),
                acl_text(&open)
            ),
        ));
    }
    let kept = match client.multi(&[create(&marker)]) {
        Ok(_) => format!(
            "{path} exists with ACL {}: kept; added its marker {DIRECTORY_MARKER}",
            acl_text(&entries)
        ),
        Err(Error::Multi { source, .. }) if matches!(*source, Error::NodeExists { .. }) => {
            keep_marker(client, path, &entries, acl, &ours)?
        }
        Err(e) => {
            return Err(refused(
                client,
                format_args!("cannot make {marker}"),
                path,
                e,
            ))
        }
    };
    still_judged(client, path, &judged, acl, &ours)?;
    say.say(kept);
    Ok(0)
}

/// After the marker exists: the directory is still the one judged (`judged`, its stat
/// when its ACL was read and passed), not another made at its path since (deleted and
/// made again open by someone the old ACL's parent let in, between the judging and the
/// marker's create, which is not bound to it): the same creation (`czxid`) and ACL
/// version (`aversion`), and an ACL that still passes. Otherwise 77, naming the swap:
/// never "kept".
fn still_judged(
    client: &Client,
    path: &str,
    judged: &zkguard::Stat,
    acl: &NodeAcl,
    ours: &[Acl],
) -> Result<(), Fail> {
    let (entries, now) = match client.get_acl(path) {
        Ok(read) => read,
        Err(Error::NoNode { .. }) => {
            return Err(Fail::new(
                EXIT_NOPERM,
                format!(
                    "{path} was deleted while mkdir added its marker (someone may delete it: \
                     its parent's ACL lets them): not kept; look at who can, then run mkdir \
                     again"
                ),
            ))
        }
        Err(e) => {
            return Err(Fail::zk(
                format_args!("cannot read the ACL of {path} again"),
                e,
            ))
        }
    };
    let open = acl.untrusted(&entries, ours);
    if (now.czxid, now.aversion) == (judged.czxid, judged.aversion) && open.is_empty() {
        return Ok(());
    }
    Err(Fail::new(
        EXIT_NOPERM,
        format!(
            "{path} was swapped while mkdir added its marker: the directory judged (created at \
             zxid 0x{:x}, ACL version {}) is not the one there now (created at zxid 0x{:x}, ACL \
             version {}, ACL {}{}): not kept. Someone its parent's ACL lets in deleted and \
             made it again; look at who, then delete it and run mkdir again, or choose \
             another path",
            judged.czxid,
            judged.aversion,
            now.czxid,
            now.aversion,
            acl_text(&entries),
            if open.is_empty() {
                String::new()
            } else {
                format!(", which lets {} in", acl_text(&open))
            }
        ),
    ))
}

/// Whether a directory's marker, as `get_acl` read it (`acl`, `stat`), keeps the directory
/// from ever being empty, whoever else uses the ensemble: not ephemeral (it would go with
/// its session); no child ever made in it (a container, which ZooKeeper deletes once a
/// child has come and gone, shows `ephemeralOwner` 0 to a client like a persistent node:
/// its stat cannot tell them apart, but one nobody has made a child in is kept either
/// way); and its ACL lets nobody `open_to` names (the identities the directory's rule does
/// not trust) make a child in it or change its ACL. `zkguard mkdir` keeps a marker only if
/// this holds, and `doctor` ends its walk up at a closed directory only if its marker does.
pub fn lasting(stat: &zkguard::Stat, acl: &[Acl], open_to: impl Fn(&[Acl]) -> Vec<Acl>) -> bool {
    stat.ephemeral_owner == 0
        && stat.cversion == 0
        && stat.num_children == 0
        && open_to(acl).is_empty()
}

/// The marker exists: kept if it is [`lasting`]; else (an ephemeral node, left by whoever
/// could create there before the ACL was closed, which goes with its session; a node
/// with a child or that had one, perhaps a container, which the server deletes once empty;
/// one whose ACL lets others in) replaced by a persistent one with the ACL, in one
/// transaction that deletes it only at the version read. Returns what to say once the
/// directory is known to be the one judged.
fn keep_marker(
    client: &Client,
    path: &str,
    entries: &[Acl],
    acl: &NodeAcl,
    ours: &[Acl],
) -> Result<String, Fail> {
    let marker = format!("{path}/{DIRECTORY_MARKER}");
    let gone = || {
        Fail::new(
            EXIT_UNAVAILABLE,
            format!("{marker} was deleted while mkdir looked at it: run mkdir again"),
        )
    };
    // Its ACL, if this identity may read it (one it may not read is no marker it made).
    let (marker_acl, stat) = match client.get_acl(&marker) {
        Ok((a, stat)) => (Some(a), stat),
        Err(Error::NoAuth { .. }) => match client.exists(&marker) {
            Ok(Some(stat)) => (None, stat),
            Ok(None) => return Err(gone()),
            Err(e) => return Err(Fail::zk(format_args!("cannot read {marker}"), e)),
        },
        // Deleted since (by an identity the ACL lets in): made again by the next run.
        Err(Error::NoNode { .. }) => return Err(gone()),
        Err(e) => return Err(Fail::zk(format_args!("cannot read {marker}"), e)),
    };
    if let Some(a) = &marker_acl {
        if lasting(&stat, a, |a| acl.untrusted(a, ours)) {
            return Ok(format!(
                "{path} exists with ACL {} and its marker: nothing to do",
                acl_text(entries)
            ));
        }
    }
    let delete = Op::Delete {
        path: marker.clone(),
        version: Some(stat.version),
    };
    match client.multi(&[delete, persistent(&marker, acl)]) {
        Ok(_) => {}
        Err(Error::Multi { source, .. }) if matches!(*source, Error::NotEmpty { .. }) => {
            return Err(Fail::new(
                EXIT_NOPERM,
                format!(
                    "{marker} is no marker mkdir keeps (owner 0x{:x}, {} children made in \
                     it, ACL {}) and cannot be replaced: it has children (a container, \
                     perhaps, which the server deletes once they are gone, leaving {path} \
                     empty). Delete them, or choose another path",
                    stat.ephemeral_owner,
                    stat.cversion,
                    marker_acl.as_deref().map_or("unreadable".into(), acl_text)
                ),
            ))
        }
        Err(e) => {
            return Err(refused(
                client,
                format_args!("cannot replace {marker}"),
                path,
                e,
            ))
        }
    }
    Ok(format!(
        "{path} exists with ACL {}: kept; replaced its marker {DIRECTORY_MARKER} (owner \
         0x{:x}, {} children made in it, ACL {}), which could have gone and left the \
         directory empty, with a persistent one",
        acl_text(entries),
        stat.ephemeral_owner,
        stat.cversion,
        marker_acl.as_deref().map_or("unreadable".into(), acl_text)
    ))
}

/// A persistent node at `p` with `acl`, as a `multi`'s op.
fn persistent(p: &str, acl: &NodeAcl) -> Op {
    Op::CreateWithAcl {
        path: p.to_string(),
        data: Vec::new(),
        mode: CreateMode::Persistent,
        acl: acl.entries().to_vec(),
    }
}

/// A failed create: 77 with the ACL that refused (a create is checked against the parent's
/// ACL) for a refusal, the exit status of its kind otherwise.
fn refused(client: &Client, what: std::fmt::Arguments, acl_of: &str, e: Error) -> Fail {
    let e = match e {
        Error::Multi { source, .. } => *source,
        e => e,
    };
    if !matches!(e, Error::NoAuth { .. }) {
        return Fail::zk(what, e);
    }
    let acl_of = if acl_of.is_empty() { "/" } else { acl_of };
    Fail::new(
        EXIT_NOPERM,
        format!("{what}: {e}; {}", acl_at(client, acl_of)),
    )
}
