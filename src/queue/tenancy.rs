//! Co-tenants: the check a recipe whose ACL keeps others out makes of the directory its node
//! goes into.
//!
//! ZooKeeper checks a create and a delete against the *parent's* ACL. A creator-only node in
//! a directory that others may delete in is therefore theirs to delete: a co-tenant of a
//! shared ensemble who squats the directory (creates it `world:anyone` before us, or again
//! after the server reaped our empty container) deletes the holder's node and lets the next
//! waiter in while the holder still works. So before a recipe acts on its place, it reads the
//! directory's ACL and refuses a directory whose ACL lets an identity it does not trust
//! create, delete or change the ACL there ([`NodeAcl::untrusted`] decides).
//!
//! The check cannot be raced: it is made after our node exists in the directory (the
//! `getACL` goes out right behind the create, in the same write, so it costs no round trip),
//! and a directory with a child can be neither deleted nor replaced; its ACL can only change
//! by someone with ADMIN on it, which the check refuses too. A directory found trusted is
//! remembered with its `czxid` and `aversion`: a later acquire whose listing (taken after
//! its create, so of the directory holding its node) shows both unchanged is the same node
//! with the same ACL, and sends no `getACL` (`enqueue.rs`).
//!
//! Who "we" are is what the server recorded for our `auth` entries: our node's own ACL, read
//! back once per client (the credentials are fixed at build) and kept. It is learned only
//! from a node proven ours: the read-back's stat must show our create's zxid and our session
//! (`Client::identities_from`), because the directory has not been judged yet and whoever
//! may delete and create in it could swap our node for one of theirs between the create and
//! the read, and so choose whom we trust. A swapped node is refused
//! (`Error::NotOurNode`, naming the directory) and teaches nothing.
//!
//! ZooKeeper (3.4.14, 3.5.5 and later) shows a digest identity as `digest:user:x` to a
//! session without ADMIN on the node. Such an entry is never taken for ours, and cannot be
//! trusted (`NodeAcl::trusting` wants a digest entry's real hash: a digest user name is no
//! identity), so a directory that gives us no ADMIN and others rights is refused.

use super::held::Acquired;
use crate::client::{unauthenticated, Acl, Client, NodeAcl};
use crate::error::{Error, Result};

/// Judges the ACL `dir_acl` of directory `dir` for a recipe with ACL `acl`. `node` is our
/// node in it, as our create (or the read that found it ours) described it: our identities
/// are read from it if not known yet, and only if it is still that node; without one (an
/// unfair contender that lost the race) only unauthenticated identities can be judged
/// before we hold, and the full check is made when we do.
pub(crate) fn check(
    c: &Client,
    acl: &NodeAcl,
    dir: &str,
    dir_acl: &[Acl],
    node: Option<&Acquired>,
) -> Result<()> {
    if !acl.keeps_others_out() {
        return Ok(());
    }
    let ours: Option<std::sync::Arc<[Acl]>> = if !acl.needs_identity() {
        Some(Vec::new().into())
    } else if let Some(known) = c.tenancy().identities() {
        Some(known)
    } else if let Some(node) = node {
        let stored = c.identities_from(dir, &node.path, node.token, node.owner)?;
        let own: Vec<Acl> = stored
            .into_iter()
            .filter(|a| {
                !acl.entries()
                    .iter()
                    .any(|e| e.scheme == a.scheme && e.id == a.id)
            })
            .collect();
        Some(c.tenancy().learned(own))
    } else {
        None
    };
    let mut untrusted = acl.untrusted(dir_acl, ours.as_deref().unwrap_or_default());
    if ours.is_none() {
        untrusted.retain(|a| unauthenticated(&a.scheme));
    }
    if untrusted.is_empty() {
        return Ok(());
    }
    Err(Error::UntrustedDirectory {
        path: dir.to_string(),
        acl: dir_acl.iter().map(Acl::to_string).collect(),
        untrusted: untrusted.iter().map(Acl::to_string).collect(),
    })
}
