//! Who this session is as an ACL records it: what the server wrote for the `auth` entries of a
//! node the session has just created, read back, and believed only from a node proven to be
//! that one (its creation zxid and its owner session).
//!
//! Between our create and the read-back, anyone who may delete and create in the directory
//! can delete our node and put one of theirs at the same path: read back blindly, it would
//! teach us their identities as ours (and a directory of theirs would then pass for ours). So
//! the read-back's stat must show the create's zxid and our session; otherwise
//! [`Error::NotOurNode`] and nothing is learned.

use super::acl::NodeAcl;
use super::janitor::Check;
use super::types::{Acl, CreateMode};
use super::Client;
use crate::error::{Error, Result};

impl Client {
    /// This session's identities as ZooKeeper writes them in an ACL (`digest:user:HASH`,
    /// `sasl:principal`, `x509:DN`): the entries a node created with [`Acl::creator_all`]
    /// (the `auth` scheme, as under [`NodeAcl::creator`]) gets, and so the ones a
    /// directory's ACL must name for [`NodeAcl::untrusted`] to take them for ours. Unlike
    /// [`who_am_i`](Client::who_am_i), whose digest names lack the password's hash, these
    /// match an ACL's entries exactly.
    ///
    /// Learned as the recipes learn them: an ephemeral node with the `auth` ACL is created
    /// in `dir`, its ACL read back and the node deleted. The node read back must be the one
    /// created (its `czxid` the create's zxid, its `ephemeralOwner` this session): someone
    /// who may delete and create in `dir` could otherwise replace it in between and choose
    /// what is learned. Entries that name no login (`world`, `ip`) or hide their hash
    /// (`digest:user:x`) are left out ([`NodeAcl::identities_in`]).
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let client = zkguard::Client::builder("127.0.0.1:2181")
    ///     .auth("digest", b"app:secret")
    ///     .build()?;
    /// let ours = client.own_identities("/locks")?;
    /// assert_eq!(ours[0].to_string(), "digest:app:F6Y+U5gIoCbNNoLQExmvxRFeatA= cdrwa");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotOurNode`] if the node read back is not the one created (nothing is
    /// learned; a node that is not ours is left alone); [`Error::InvalidAcl`] on a session
    /// without credentials; [`Error::NoNode`] if `dir` does not exist; [`Error::NoAuth`]
    /// without CREATE in `dir`; and the errors every request can return.
    pub fn own_identities(&self, dir: &str) -> Result<Vec<Acl>> {
        let session = self.session_id();
        let probe = format!(
            "{}/zkguard-identity-{}",
            dir.trim_end_matches('/'),
            uuid::Uuid::new_v4()
        );
        let on = self.pinned(session);
        let created =
            on.create_with_acl(&probe, b"", CreateMode::Ephemeral, &Acl::creator_all())?;
        let token = created.stat.token();
        let learned = on.identities_from(dir, &created.path, token, session);
        // Ours only if it is still the node created (never a replacement).
        let _ = self.delete_owned(&created.path, Check::Czxid(token), session, self.timeout());
        learned
    }

    /// The identities in the ACL of `node`, made in `dir` with the `auth` ACL by this
    /// client's create whose zxid is `czxid`, on session `owner`: read back, and believed
    /// only if the node read is that one ([`Error::NotOurNode`] otherwise, nothing learned).
    pub(crate) fn identities_from(
        &self,
        dir: &str,
        node: &str,
        czxid: u64,
        owner: i64,
    ) -> Result<Vec<Acl>> {
        let not_ours = || Error::NotOurNode {
            path: dir.to_string(),
            node: node.to_string(),
        };
        let (stored, stat) = match self.pinned(owner).get_acl(node) {
            Ok(read) => read,
            // Our own node (the `auth` ACL gives us every right) gone or closed to us.
            Err(Error::NoNode { .. } | Error::NoAuth { .. }) => return Err(not_ours()),
            Err(e) => return Err(e),
        };
        // (Read on `owner` only: after a new session the read fails with `SessionExpired`,
        // which a recipe answers by starting over, not with this refusal.)
        if stat.token() != czxid || stat.ephemeral_owner != owner {
            return Err(not_ours());
        }
        Ok(NodeAcl::identities_in(&stored))
    }
}
