//! [`TestChroot`]: one cluster shared by every test of a test binary, a fresh chroot each.

use std::io;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use super::cluster::TestCluster;
use crate::{Client, Error};

/// The shared cluster, while some `TestChroot` holds it.
static SHARED: Mutex<Weak<TestCluster>> = Mutex::new(Weak::new());
/// How long the chroot's own client waits to connect or for a request.
const PATIENCE: Duration = Duration::from_secs(30);

/// A fresh chroot on a standalone server shared by every test of a test binary, as
/// kazoo's harness gives each test a chroot: a crate with thirty test files starts one
/// server per test binary, not one per test, and tests that run at once never see each
/// other's nodes.
///
/// [`TestChroot::new`] starts the shared server if no other `TestChroot` of the process
/// holds it, then makes a node of its own under `/zkguard-test` (a fresh name) and
/// hands out a connect string rooted there ([`connect_string`](Self::connect_string)).
/// Dropping it deletes the chroot and everything under it (a node still held by a live
/// session's ephemeral is tried again; a failure is logged as a warning, never a panic);
/// the last one dropped stops the server, and the harness's watchdog stops it if the
/// test process exits or dies first. Faults that hit the server (a kill, a pause) hit
/// every test sharing it: a test that inflicts them starts a [`TestCluster`] of its own.
///
/// ```
/// use zkguard::testing::TestChroot;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let root = TestChroot::new()?;
/// let client = zkguard::Client::connect(&root.connect_string())?;
/// let guard = zkguard::Mutex::new(&client, "/jobs/nightly")?.acquire()?; // in the chroot
/// # drop(guard);
/// # Ok(())
/// # }
/// ```
#[must_use = "the chroot is deleted as soon as it is dropped"]
pub struct TestChroot {
    cluster: Arc<TestCluster>,
    chroot: String,
    admin: Client,
}

impl std::fmt::Debug for TestChroot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestChroot")
            .field("chroot", &self.chroot)
            .field("servers", &self.cluster.connect_string())
            .finish()
    }
}

impl TestChroot {
    /// The parent of every chroot.
    pub const PARENT: &'static str = "/zkguard-test";

    /// A fresh chroot `/zkguard-test/<uuid>` on the shared server, which is started now
    /// if no other `TestChroot` of this process holds it.
    ///
    /// # Errors
    ///
    /// As [`TestCluster::start`] when the server must be started; the chroot's node
    /// cannot be made (the error says why).
    pub fn new() -> io::Result<TestChroot> {
        let cluster = {
            let mut shared = SHARED.lock();
            match shared.upgrade() {
                Some(cluster) => cluster,
                None => {
                    let cluster = Arc::new(TestCluster::start(1)?);
                    *shared = Arc::downgrade(&cluster);
                    cluster
                }
            }
        };
        let failed = |what: &str, e: Error| io::Error::other(format!("TestChroot: {what}: {e}"));
        let admin = Client::builder(&cluster.connect_string())
            .connect_timeout(PATIENCE)
            .request_timeout(PATIENCE)
            .build()
            .map_err(|e| failed("cannot connect to the shared server", e))?;
        let chroot = format!("{}/{}", Self::PARENT, uuid::Uuid::new_v4().simple());
        admin
            .ensure_path(&chroot)
            .map_err(|e| failed(&format!("cannot make {chroot}"), e))?;
        log::info!(
            "zkguard TestChroot: {chroot} on {}",
            cluster.connect_string()
        );
        Ok(TestChroot {
            cluster,
            chroot,
            admin,
        })
    }

    /// The connect string of the shared server, rooted at this chroot: a client
    /// connected with it sees the chroot as `/`.
    pub fn connect_string(&self) -> String {
        format!("{}{}", self.cluster.connect_string(), self.chroot)
    }

    /// The chroot's path on the server (`/zkguard-test/<uuid>`).
    pub fn chroot(&self) -> &str {
        &self.chroot
    }

    /// The shared cluster (one standalone server), for what needs its own addresses,
    /// such as a [`FaultProxy`](crate::testing::FaultProxy) (give the proxy's connect
    /// string the chroot: `format!("{}{}", proxy.connect_string(), root.chroot())`).
    pub fn cluster(&self) -> &TestCluster {
        &self.cluster
    }

    /// Deletes `path` and everything under it, children first; `Ok` when it is gone.
    fn delete_tree(&self, path: &str) -> crate::Result<()> {
        let children = match self.admin.get_children(path) {
            Ok((children, _)) => children,
            Err(Error::NoNode { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        for child in children {
            self.delete_tree(&format!("{path}/{child}"))?;
        }
        match self.admin.delete(path, None) {
            Ok(()) | Err(Error::NoNode { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for TestChroot {
    fn drop(&mut self) {
        // A live session of the test may still make nodes in it meanwhile: a few rounds.
        let mut outcome = Ok(());
        for _ in 0..5 {
            outcome = self.delete_tree(&self.chroot);
            if outcome.is_ok() {
                break;
            }
        }
        if let Err(e) = outcome {
            log::warn!("zkguard TestChroot: cannot delete {}: {e}", self.chroot);
        }
        self.admin.close();
    }
}
