//! The partition set-up several files repeat: servers and a fault proxy in front of them
//! (clients connected through the proxy can be cut off, those connected directly cannot), and
//! which server a client is on.

use std::time::Duration;

use zkguard::testing::{FaultProxy, TestCluster};
use zkguard::Client;

use super::{init_log, wait_until};

/// `servers` fresh servers (with logging set up) and a fault proxy in front of them:
/// clients connected to `proxy.connect_string()` can be partitioned, clients connected to
/// `cluster.connect_string()` cannot.
pub fn partition(servers: usize) -> (TestCluster, FaultProxy) {
    init_log();
    let cluster = TestCluster::start(servers).unwrap();
    let proxy = FaultProxy::for_cluster(&cluster).unwrap();
    (cluster, proxy)
}

/// The index of the server `c` is connected to right now, if any.
pub fn server_of(cluster: &TestCluster, c: &Client) -> Option<usize> {
    let addr = c.connected_server()?;
    (0..cluster.len()).find(|&i| cluster.client_addr(i) == addr)
}

/// Kills the server `c` is connected to and waits until `c` has reconnected elsewhere with
/// the same session (`events` is a receiver of `c`'s, taken before). Returns the index of
/// the killed server.
pub fn fail_over(
    cluster: &TestCluster,
    c: &Client,
    events: &crossbeam_channel::Receiver<zkguard::SessionEvent>,
) -> usize {
    let i = wait_server_of(cluster, c);
    let session = c.session_id();
    cluster.kill(i).unwrap();
    super::expect_reconnected(events, session, Duration::from_secs(30));
    assert_ne!(
        server_of(cluster, c),
        Some(i),
        "reconnected to the killed server"
    );
    i
}

/// Waits until `c` is connected and returns the index of its server.
pub fn wait_server_of(cluster: &TestCluster, c: &Client) -> usize {
    let mut found = None;
    wait_until(
        Duration::from_secs(30),
        "client connected to a server",
        || {
            found = server_of(cluster, c);
            found.is_some()
        },
    );
    found.unwrap_or_default()
}

/// The index of the server `client` talks to through `proxy`, if connected.
pub fn proxied_server(proxy: &FaultProxy, client: &Client) -> Option<usize> {
    let addr = client.connected_server()?;
    proxy.local_addrs().iter().position(|a| *a == addr)
}

/// A client through `proxy` whose session outlives a stalled direction (20 s) and whose
/// requests give up after 1 s: for a write sent while the replies are stalled.
pub fn stallable(proxy: &FaultProxy) -> Client {
    Client::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(20))
        .request_timeout(Duration::from_secs(1))
        .connect_timeout(super::WITHIN)
        .build()
        .unwrap()
}
