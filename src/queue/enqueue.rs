//! Phase 1 of an attempt (step 1 of the algorithm in `acquire.rs`): our node in the queue,
//! made once even when a create's reply is lost, and deleted on every way out that is not
//! success.

use crate::error::escape;
use std::time::Duration;

use super::attempt::{Attempt, Next, Spec};
use super::create::{Create, Failed};
use super::held::Acquired;
use super::names;
use super::tenancy;
use crate::client::{Acl, CreateMode, SessionState, Stat};
use crate::client::{Check, Client, Job, Names};
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
    let prefix = names::node_prefix(spec.dir, &at.uuid, spec.place.marker());
    cx.reset_backoff();
    let mut listing: Option<Names> = None;
    let guard = spec.acl.keeps_others_out();
    let mut dir_acl: Option<(Vec<Acl>, Stat)> = None;
    let mut create = Create::new(
        spec.dir,
        &prefix,
        spec.data,
        CreateMode::EphemeralSequential,
        spec.acl,
    );
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
                create.send(p),
                p.list(spec.dir),
                read.then(|| p.get_acl(spec.dir)),
            )
        });
        match create.wait(&c, created, at.session) {
            Ok(node) => {
                cx.enqueued(&node.path);
                at.node = Some(node);
                listing = listed.wait().ok();
                dir_acl = read_acl.and_then(|p| p.wait().ok());
            }
            Err(Failed::Again) => {}
            Err(Failed::Nothing(e)) => cx.failed(e, false)?,
            Err(Failed::Node(e)) => {
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
