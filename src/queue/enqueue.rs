//! Phase 1 of an attempt (step 1 of the algorithm in `acquire.rs`): our node in the queue,
//! made once even when a create's reply is lost, and deleted on every way out that is not
//! success.

use crate::error::escape;
use std::time::Duration;

use super::attempt::{Attempt, Next, Spec};
use super::held::Acquired;
use super::names;
use super::tenancy;
use crate::client::{Acl, CreateMode, Op, OpResult, SessionState, Stat};
use crate::client::{Check, Client, Created, Job, Names, Pending, Pipeline};
use crate::error::{Error, Result};

/// Our node during one attempt; deletes it on drop unless it was handed to a guard.
pub(crate) struct OwnNode<'a> {
    client: &'a Client,
    dir: &'a str,
    uuid: String,
    /// The session the attempt started in.
    session: i64,
    pub node: Option<Acquired>,
    /// A create whose reply never came may have made a node.
    maybe_created: bool,
}

impl OwnNode<'_> {
    pub(crate) fn take(&mut self) -> Option<Acquired> {
        self.maybe_created = false;
        self.node.take()
    }

    /// After a create whose reply was lost: looks for the node it may have made (then the
    /// next round creates again, or goes on with the node found).
    fn recover(
        &mut self,
        cx: &mut Attempt<'_>,
        c: &Client,
        spec: &Spec<'_>,
    ) -> std::result::Result<(), Next> {
        match find_by_uuid(c, spec, &self.uuid) {
            Ok(found) => {
                if let Some(node) = &found {
                    cx.enqueued(&node.path);
                }
                self.maybe_created = false;
                self.node = found;
                Ok(())
            }
            Err(e) => {
                // A node the lost create made went with its session.
                if e == Error::SessionExpired {
                    self.maybe_created = false;
                }
                cx.failed(e, false)
            }
        }
    }
}

impl Drop for OwnNode<'_> {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            // Bounded: one short request at most, then the background takes over.
            let timeout = self.client.timeout().min(Duration::from_secs(1));
            match self
                .client
                .delete_owned(&node.path, Check::None, node.owner, timeout)
            {
                Err(e) if !e.is_connection_error() && e != Error::SessionExpired => {
                    log::warn!(
                        "zkguard: cannot delete abandoned node {}: {e}",
                        escape(&node.path)
                    );
                }
                _ => {}
            }
        } else if self.maybe_created && self.client.state() != SessionState::Closed {
            self.client.delete_in_background(Job::Uuid {
                dir: self.dir.to_string(),
                uuid: self.uuid.clone(),
                session: self.session,
            });
        }
    }
}

/// A node in a queue, with the listing its create brought back.
pub(crate) struct Queued<'a> {
    pub at: OwnNode<'a>,
    pub listing: Option<Names>,
}

/// Our node's create as sent: by itself, or, when the last create found no directory, in one
/// `multi` behind the directory's (a container with the recipe's ACL, as `create_dir` makes
/// it): one quorum write for both, where the directory by itself and then our node were two.
enum Create {
    Alone(Pending<Created>),
    WithDir(Pending<Vec<OpResult>>),
}

impl Create {
    fn send(p: &mut Pipeline, spec: &Spec<'_>, prefix: &str, dir_missing: bool) -> Create {
        let (mode, acl) = (CreateMode::EphemeralSequential, spec.acl.entries());
        if !dir_missing {
            return Create::Alone(p.create_with_acl(prefix, spec.data, mode, acl));
        }
        Create::WithDir(p.multi(&[
            Op::CreateWithAcl {
                path: spec.dir.to_string(),
                data: Vec::new(),
                mode: CreateMode::Container,
                acl: acl.to_vec(),
            },
            Op::CreateWithAcl {
                path: prefix.to_string(),
                data: spec.data.to_vec(),
                mode,
                acl: acl.to_vec(),
            },
        ]))
    }

    /// Our node, made in `session` (the session the pipeline was pinned to). A failed
    /// multi's error names the op that failed (`Error::Multi`, index 0 the directory's).
    ///
    /// ZooKeeper answers a create inside a multi with its path alone, but a container's
    /// with its stat too: the directory's `czxid` is the multi's zxid, so our node's (its
    /// token), and an ephemeral node's owner is the session that sent the request.
    fn wait(self, session: i64, spec: &Spec<'_>) -> Result<Acquired> {
        let acl = spec.acl;
        match self {
            Create::Alone(p) => p.wait().map(|cr| Acquired::of(cr.path, &cr.stat, acl)),
            Create::WithDir(p) => match p.wait()?.as_slice() {
                [OpResult::Create {
                    stat: Some(dir), ..
                }, OpResult::Create { path, .. }] => {
                    let mut node = Acquired::of(path.clone(), dir, acl);
                    node.owner = session;
                    Ok(node)
                }
                other => Err(Error::Malformed {
                    op: "multi",
                    path: spec.dir.to_string(),
                    reason: format!("a directory and our node made, answered {other:?}"),
                }),
            },
        }
    }
}

/// Phase 1 of an attempt: our node, and (usually) a listing of the directory taken right
/// after it, in the same write. `Err` says how the attempt ends instead.
pub(crate) fn enqueue<'a, 's: 'a>(
    cx: &mut Attempt<'a>,
    spec: &Spec<'s>,
) -> std::result::Result<Queued<'a>, Next> {
    let client = cx.client;
    let mut at = OwnNode {
        client,
        dir: spec.dir,
        uuid: uuid::Uuid::new_v4().to_string(),
        session: client.session_id(),
        node: None,
        maybe_created: false,
    };
    let prefix = names::node_prefix(spec.dir, &at.uuid, spec.marker);
    cx.reset_backoff();
    let mut parent_tries = 0;
    let mut listing: Option<Names> = None;
    let guard = spec.acl.keeps_others_out();
    let mut dir_acl: Option<(Vec<Acl>, Stat)> = None;
    // The last create said the directory is missing.
    let mut dir_missing = false;
    while at.node.is_none() {
        let c = cx.checked(None)?;
        if at.maybe_created {
            at.recover(cx, &c, spec)?;
            continue;
        }
        at.session = client.session_id();
        // Pinned: a create that may have happened (a lost reply) happened in `at.session`,
        // the session its clean-up is pinned to.
        // The directory's ACL, read behind our create when it has to keep others out,
        // unless the directory was judged before (then the listing's stat tells whether it
        // is still that node with that ACL).
        let read = guard && !client.tenancy().known(spec.dir, spec.acl);
        let (created, listed, read_acl) = c.pinned(at.session).pipeline(|p| {
            (
                Create::send(p, spec, &prefix, dir_missing),
                p.list(spec.dir),
                read.then(|| p.get_acl(spec.dir)),
            )
        });
        match created.wait(at.session, spec) {
            Ok(node) => {
                cx.enqueued(&node.path);
                at.node = Some(node);
                listing = listed.wait().ok();
                dir_acl = read_acl.and_then(|p| p.wait().ok());
            }
            // No directory: the next round makes it and our node in one write.
            Err(Error::NoNode { .. }) if parent_tries < 10 => {
                parent_tries += 1;
                dir_missing = true;
            }
            // The directory's create failed, so nothing was made.
            Err(Error::Multi { index: 0, source }) => {
                dir_missing = false;
                let made = match *source {
                    // Made meanwhile (by anyone: the check behind our node judges it).
                    Error::NodeExists { .. } => Ok(()),
                    // Its parent is missing too: the parents first, then the multi again.
                    Error::NoNode { .. } if parent_tries < 10 => {
                        parent_tries += 1;
                        dir_missing = true;
                        match names::parent(spec.dir) {
                            // The root always exists: a NoNode below it is the server's word.
                            "/" => Err(*source),
                            parent => create_dir(&c, parent, b"", spec.acl.entries()),
                        }
                    }
                    // The directory by itself, as `create_dir` makes it (it steps over a
                    // directory made meanwhile under a parent we may not create in).
                    _ => create_dir(&c, spec.dir, b"", spec.acl.entries()),
                };
                if let Err(e) = made {
                    cx.failed(e, false)?;
                }
            }
            // Our node's create failed in the multi: its own error.
            Err(Error::Multi { source, .. }) => cx.failed(*source, false)?,
            Err(e) => {
                at.maybe_created = e.is_connection_error();
                cx.failed(e, false)?;
            }
        }
    }
    let judged_before = |stat: &Stat| client.tenancy().trusted(spec.dir, spec.acl, stat);
    if guard
        && !listing
            .as_ref()
            .and_then(Names::stat)
            .is_some_and(judged_before)
    {
        trusted(cx, &mut at, spec, dir_acl)?;
    }
    Ok(Queued { at, listing })
}

/// The check of the directory our node is in (`tenancy.rs`), with the ACL read behind the
/// create if it came; a directory found trusted is remembered with its stat. `Err`: the
/// attempt ends so, and our node is deleted with `at` (unless another node took its path:
/// that one is not ours to delete).
fn trusted(
    cx: &mut Attempt<'_>,
    at: &mut OwnNode<'_>,
    spec: &Spec<'_>,
    mut dir_acl: Option<(Vec<Acl>, Stat)>,
) -> std::result::Result<(), Next> {
    let Some(node) = at.node.as_ref() else {
        return Err(Next::Restart);
    };
    cx.reset_backoff();
    loop {
        let c = cx.checked(None)?;
        let judged = match dir_acl.take() {
            Some(read) => Ok(read),
            None => c.get_acl(spec.dir),
        }
        .and_then(|(acl, stat)| {
            tenancy::check(&c, spec.acl, spec.dir, &acl, Some(node)).map(|()| stat)
        });
        match judged {
            Ok(stat) => {
                cx.client.tenancy().record(spec.dir, spec.acl, &stat);
                return Ok(());
            }
            // Not our node at our path: not ours to delete.
            Err(e @ Error::NotOurNode { .. }) => {
                at.take();
                return Err(Next::Done(Err(e)));
            }
            Err(e) => cx.failed(e, true)?,
        }
    }
}

/// After a create whose reply was lost: our node, if the server made it in this session.
/// A node of ours left by an earlier session is deleted.
fn find_by_uuid(c: &Client, spec: &Spec<'_>, uuid: &str) -> Result<Option<Acquired>> {
    let dir = spec.dir;
    let names = match c.get_children(dir) {
        Ok((names, _)) => names,
        Err(Error::NoNode { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut found = None;
    for n in names.into_iter().filter(|n| n.contains(uuid)) {
        let path = names::child(dir, &n);
        match c.exists(&path)? {
            Some(stat) if found.is_none() && stat.ephemeral_owner == c.session_id() => {
                found = Some(Acquired::of(path, &stat, spec.acl));
            }
            Some(_) => {
                let _ = c.delete(&path, None);
            }
            None => {}
        }
    }
    Ok(found)
}

/// Creates every missing ancestor of `dir` as a container node, and `dir` itself as a
/// container, or, when it has data to keep (`dir_data`: a semaphore's permit count, which
/// must outlive idle periods), as a persistent node. Each created node gets `acl`; an existing one is
/// left as it is.
///
/// `dir` is created first: its parent usually exists, and then that is the one request
/// (every create is a write through the quorum, a failed one too). Only a missing parent
/// makes it create the ancestors, each the same way, and `dir` again.
pub(crate) fn create_dir(c: &Client, dir: &str, dir_data: &[u8], acl: &[Acl]) -> Result<()> {
    let (data, mode) = if dir_data.is_empty() {
        (&b""[..], CreateMode::Container)
    } else {
        (dir_data, CreateMode::Persistent)
    };
    match create_one(c, dir, data, mode, acl) {
        Err(Error::NoNode { .. }) => match dir.rfind('/') {
            Some(i) if i > 0 => {
                create_dir(c, &dir[..i], b"", acl)?;
                create_one(c, dir, data, mode, acl)
            }
            // The root always exists: a NoNode for a top-level node is the server's word.
            _ => create_one(c, dir, data, mode, acl),
        },
        other => other,
    }
}

/// Creates `path` unless it exists.
fn create_one(c: &Client, path: &str, data: &[u8], mode: CreateMode, acl: &[Acl]) -> Result<()> {
    match c.create_with_acl(path, data, mode, acl) {
        Ok(_) | Err(Error::NodeExists { .. }) => Ok(()),
        // The server checks the parent's ACL before whether the node exists: a node
        // that exists under a parent we may not create in is no obstacle.
        Err(e @ Error::NoAuth { .. }) => match c.exists(path)? {
            Some(_) => Ok(()),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}
