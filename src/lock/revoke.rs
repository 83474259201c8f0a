//! Cooperative revocation, compatible with Apache Curator's `Revoker`.

use crate::client::Client;
use crate::error::Result;

/// The bytes Curator's `Revoker.attemptRevoke` writes into a lock node.
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Asks the holder (or a waiter) of the lock node at `node_path` to let go, the way
/// Curator's `Revoker.attemptRevoke` does: it writes `__REVOKE__` into the node. A zkguard
/// holder sees the request on its guard's `revocation()` receiver; a Curator holder made
/// revocable with `makeRevocable` gets its `RevocationListener` called. Letting go is up to
/// the holder.
///
/// Find node paths with a lock's `participants()` or a guard's `path()`.
///
/// ```no_run
/// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
/// let lock = zkguard::Mutex::new(client, "/locks/report")?;
/// if let Some(holder) = lock.participants()?.first() {
///     zkguard::revoke(client, &format!("/locks/report/{}", holder.node))?;
/// }
/// # Ok(()) }
/// ```
///
/// Fails with [`Error::NoNode`](crate::Error::NoNode) naming the path when the node is gone
/// (nothing to revoke).
///
/// # Errors
///
/// [`Error::NoNode`](crate::Error::NoNode) naming the path when the node is gone (nothing
/// to revoke), and the errors every request can return (see [`Client`](crate::Client#errors-every-request-can-return)).
pub fn revoke(client: &Client, node_path: &str) -> Result<()> {
    client.set_data(node_path, REVOKE_MESSAGE, None).map(|_| ())
}
