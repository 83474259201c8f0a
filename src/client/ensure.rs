//! `ensure_path`: a path made to exist, its missing nodes created in one write.

use super::path;
use super::{Acl, Client, CreateMode};
use crate::error::{Error, Result};

impl Client {
    /// Makes sure `path` exists: creates it and every missing node above it, each
    /// persistent, empty and with the open ACL (what kazoo's `ensure_path` and Curator's
    /// `creatingParentsIfNeeded` do). Nodes already there are left as they are. The nodes on
    /// the way go out in one write, so the whole call is one round trip when the connection
    /// is up.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a bad path (nothing is sent),
    /// [`Error::NoChildrenForEphemerals`] naming the first node that cannot be made because
    /// the one above it is ephemeral,
    /// and connection errors (then some of the nodes may exist; calling again finishes).
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// client.ensure_path("/app/config/feature-flags")?;
    /// assert!(client.exists("/app/config")?.is_some());
    /// # Ok(()) }
    /// ```
    pub fn ensure_path(&self, path: &str) -> Result<()> {
        self.ensure_path_with_acl(path, &Acl::open_unsafe())
    }

    /// [`ensure_path`](Client::ensure_path), the nodes it creates getting `acl`: entries
    /// (`&[Acl]`, `&Vec<Acl>`) or one of the recipes' presets (a [`NodeAcl`](super::NodeAcl)). Nodes that
    /// exist keep their own ACL.
    ///
    /// # Errors
    ///
    /// As [`ensure_path`](Client::ensure_path), and [`Error::InvalidAcl`] for an ACL the
    /// server rejects (a creator ACL on a session without credentials);
    /// [`Error::InvalidArgument`] for an empty list.
    ///
    /// ```no_run
    /// # fn main() -> zkguard::Result<()> {
    /// let client = zkguard::Client::builder("127.0.0.1:2181")
    ///     .auth("digest", b"app:secret")
    ///     .build()?;
    /// client.ensure_path_with_acl("/app/config", &zkguard::NodeAcl::creator_read())?;
    /// # Ok(()) }
    /// ```
    pub fn ensure_path_with_acl(
        &self,
        path: &str,
        acl: &(impl AsRef<[Acl]> + ?Sized),
    ) -> Result<()> {
        path::validate_path(path)?;
        let acl = acl.as_ref();
        let prefixes: Vec<&str> = path
            .match_indices('/')
            .skip(1)
            .map(|(i, _)| &path[..i])
            .chain((path != "/").then_some(path))
            .collect();
        let created = self.pipeline(|p| {
            prefixes
                .iter()
                .map(|node| p.create_with_acl(node, b"", CreateMode::Persistent, acl))
                .collect::<Vec<_>>()
        });
        for pending in created {
            match pending.wait() {
                Ok(_) | Err(Error::NodeExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
