//! Making a recipe's node and, when it is missing, its directory: the queue's node
//! (`enqueue.rs`) and the single node (`single.rs`) alike. A node whose directory the last
//! create found missing is made in one `multi` with it (one quorum write where the
//! directory's create and then the node's were two); `create_dir` makes directories by
//! themselves (missing parents above a directory, a semaphore's).

use super::held::Acquired;
use super::names;
use crate::client::{Acl, Client, CreateMode, Created, NodeAcl, Op, OpResult, Pending, Pipeline};
use crate::error::{Error, Result};

/// How many rounds one create may spend on missing directories (a directory someone
/// deletes again and again, or a parent missing again after it was made).
const DIR_TRIES: u32 = 10;

/// One node's create with its directory's when that is missing, over as many rounds as it
/// takes: [`send`](Create::send) puts a round into a pipeline, [`wait`](Create::wait) says
/// how it went and, when it found no directory, sees to it for the next round.
pub(super) struct Create<'a> {
    /// The directory the node goes in.
    dir: &'a str,
    /// The node's path (a sequential node's prefix).
    path: &'a str,
    data: &'a [u8],
    mode: CreateMode,
    acl: &'a NodeAcl,
    /// The last round found the directory missing: the next sends it with the node.
    dir_missing: bool,
    /// Rounds spent on missing directories.
    tries: u32,
}

/// A round as sent: the node's create by itself, or in one `multi` behind the directory's
/// (a container with the node's ACL, as [`create_dir`] makes it).
pub(super) enum Sent {
    Alone(Pending<Created>),
    WithDir(Pending<Vec<OpResult>>),
}

/// A round that made no node (as far as its caller knows).
pub(super) enum Failed {
    /// The directory was missing and is seen to: send another round.
    Again,
    /// Nothing was made (the directory's create failed, or the node's inside the `multi`):
    /// the error is the caller's to judge.
    Nothing(Error),
    /// The node's create by itself failed with this error; a connection error leaves it
    /// unknown whether it happened.
    Node(Error),
}

impl<'a> Create<'a> {
    /// The node at `path` (a prefix, for a sequential `mode`) in `dir`, with `data` and
    /// `acl`.
    pub(super) fn new(
        dir: &'a str,
        path: &'a str,
        data: &'a [u8],
        mode: CreateMode,
        acl: &'a NodeAcl,
    ) -> Create<'a> {
        Create {
            dir,
            path,
            data,
            mode,
            acl,
            dir_missing: false,
            tries: 0,
        }
    }

    /// Puts this round's create into `p`.
    pub(super) fn send(&self, p: &mut Pipeline) -> Sent {
        let acl = self.acl.entries();
        if !self.dir_missing {
            return Sent::Alone(p.create_with_acl(self.path, self.data, self.mode, acl));
        }
        Sent::WithDir(p.multi(&[
            Op::CreateWithAcl {
                path: self.dir.to_string(),
                data: Vec::new(),
                mode: CreateMode::Container,
                acl: acl.to_vec(),
            },
            Op::CreateWithAcl {
                path: self.path.to_string(),
                data: self.data.to_vec(),
                mode: self.mode,
                acl: acl.to_vec(),
            },
        ]))
    }

    /// The node `sent` made in `session` (the session the pipeline was pinned to), or why
    /// there is none; a directory found missing is seen to through `c` (its parents made
    /// first when they are missing too, a directory made meanwhile left as it is: the
    /// caller's co-tenant check judges it), so that [`Failed::Again`] may send again.
    ///
    /// ZooKeeper answers a create inside a multi with its path alone, but a container's
    /// with its stat too: the directory's `czxid` is the multi's zxid, so our node's (its
    /// token), and an ephemeral node's owner is the session that sent the request.
    pub(super) fn wait(
        &mut self,
        c: &Client,
        sent: Sent,
        session: i64,
    ) -> std::result::Result<Acquired, Failed> {
        let e = match sent {
            Sent::Alone(p) => match p.wait() {
                Ok(cr) => return Ok(Acquired::of(cr.path, &cr.stat, self.acl)),
                Err(e) => e,
            },
            Sent::WithDir(p) => match p.wait() {
                Ok(results) => return self.made(&results, session).map_err(Failed::Nothing),
                Err(e) => e,
            },
        };
        match e {
            // No directory: the next round makes it and the node in one write (the root
            // always exists: a NoNode for a node in it is the server's word).
            Error::NoNode { .. } if self.dir != "/" && self.tries < DIR_TRIES => {
                self.tries += 1;
                self.dir_missing = true;
                Err(Failed::Again)
            }
            // The directory's create failed, so nothing was made.
            Error::Multi { index: 0, source } => {
                self.dir_missing = false;
                let made = match *source {
                    // Made meanwhile (by anyone: the caller's check judges it).
                    Error::NodeExists { .. } => Ok(()),
                    // Its parent is missing too: the parents first, then the multi again.
                    Error::NoNode { .. } if self.tries < DIR_TRIES => {
                        self.tries += 1;
                        self.dir_missing = true;
                        match names::parent(self.dir) {
                            // The root always exists: a NoNode below it is the server's word.
                            "/" => Err(*source),
                            parent => create_dir(c, parent, b"", self.acl.entries()),
                        }
                    }
                    // The directory by itself, as `create_dir` makes it (it steps over a
                    // directory made meanwhile under a parent we may not create in).
                    _ => create_dir(c, self.dir, b"", self.acl.entries()),
                };
                made.map_or_else(|e| Err(Failed::Nothing(e)), |()| Err(Failed::Again))
            }
            // The node's create failed in the multi: its own error.
            Error::Multi { source, .. } => Err(Failed::Nothing(*source)),
            // A lost reply (a multi's too) leaves the node unknown: the caller looks for
            // it as for a lone create's, and a next round without a directory sends the
            // multi again.
            e => Err(Failed::Node(e)),
        }
    }

    /// The node a `multi` that made it and its directory answered with.
    fn made(&self, results: &[OpResult], session: i64) -> Result<Acquired> {
        match results {
            [OpResult::Create {
                stat: Some(dir), ..
            }, OpResult::Create { path, .. }] => {
                let mut node = Acquired::of(path.clone(), dir, self.acl);
                node.owner = session;
                Ok(node)
            }
            other => Err(Error::Malformed {
                op: "multi",
                path: self.dir.to_string(),
                reason: format!("a directory and our node made, answered {other:?}"),
            }),
        }
    }
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
