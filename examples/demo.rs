//! The first thing to run: a session that survives the death of its server.
//!
//! With `ZK_CONNECT` unset it starts a throwaway three-server ZooKeeper ensemble on loopback
//! (the `testing` feature's harness), connects, kills the server the client is connected to,
//! and shows the same session carrying on through another server, with its ephemeral node
//! and its watch intact. With `ZK_CONNECT=host:port,...` it runs against your ensemble and
//! shows the session and a watch instead (it kills nothing of yours).
//!
//! ```text
//! cargo run --example demo --features testing
//! ZK_CONNECT=127.0.0.1:2181 cargo run --example demo --features testing
//! ```

use std::time::{Duration, Instant};

use zkguard::testing::TestCluster;
use zkguard::{Client, CreateMode, SessionEvent};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cluster;
    let connect = match std::env::var("ZK_CONNECT") {
        Ok(cs) if !cs.is_empty() => {
            println!("using the ensemble at {cs}");
            cluster = None;
            cs
        }
        _ => {
            println!("ZK_CONNECT is unset: starting a throwaway 3-server ZooKeeper ensemble on loopback ...");
            let started = Instant::now();
            let c = TestCluster::start(3)?;
            println!(
                "  ensemble up in {:.1?}: {}",
                started.elapsed(),
                c.connect_string()
            );
            cluster = Some(c);
            cluster
                .as_ref()
                .map(|c| c.connect_string())
                .unwrap_or_default()
        }
    };

    let client = Client::builder(&connect)
        .session_timeout(Duration::from_secs(6))
        .build()?;
    let events = client.events();
    println!(
        "session 0x{:x} via {} (timeout {:?})",
        client.session_id(),
        client
            .connected_server()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        client.session_timeout()
    );

    let dir = format!("/zkguard-demo-{}", std::process::id());
    client.create(&dir, b"", CreateMode::Persistent)?;
    let me = client.create(
        &format!("{dir}/worker-"),
        b"demo",
        CreateMode::EphemeralSequential,
    )?;
    println!(
        "created ephemeral node {} (fencing-grade czxid {})",
        me.path, me.stat.czxid
    );
    let (_, _, watch) = client.get_data_w(&dir)?;

    let Some(cluster) = cluster.as_ref() else {
        let other = Client::connect(&connect)?;
        other.set_data(&dir, b"hello", None)?;
        println!(
            "watch fired: {:?}",
            watch.recv_timeout(Duration::from_secs(10))?
        );
        client.delete(&me.path, None)?;
        client.delete(&dir, None)?;
        return Ok(());
    };

    let here = client.connected_server().ok_or("not connected")?;
    let victim = (0..cluster.len())
        .find(|&i| cluster.client_addr(i) == here)
        .ok_or("server not found")?;
    println!("killing server {victim} ({here}) with SIGKILL ...");
    let killed = Instant::now();
    cluster.kill(victim)?;
    loop {
        match events.recv_timeout(Duration::from_secs(30))? {
            SessionEvent::Suspended { .. } => println!(
                "  {:>6.1?}  suspended: the session may still be alive",
                killed.elapsed()
            ),
            SessionEvent::Reconnected { session_id } => {
                println!(
                    "  {:>6.1?}  reconnected to {}: same session 0x{session_id:x}",
                    killed.elapsed(),
                    client
                        .connected_server()
                        .map(|a| a.to_string())
                        .unwrap_or_default()
                );
                break;
            }
            SessionEvent::Lost { .. } => return Err("the session was lost".into()),
            other => println!("  {:>6.1?}  {other:?}", killed.elapsed()),
        }
    }

    // The watch set before the kill was re-armed on the new server.
    let other = Client::builder(&connect).build()?;
    other.set_data(&dir, b"changed after the failover", None)?;
    println!(
        "watch set before the kill fired: {:?}",
        watch.recv_timeout(Duration::from_secs(10))?
    );
    let owner = other.exists(&me.path)?.map(|s| s.ephemeral_owner);
    println!(
        "ephemeral node still there, owned by 0x{:x}",
        owner.unwrap_or(0)
    );
    assert_eq!(
        owner,
        Some(client.session_id()),
        "the node should still belong to our session"
    );

    let closing = Instant::now();
    client.close().into_result()?;
    println!(
        "closed in {:.1?}: ephemeral node gone at once: {}",
        closing.elapsed(),
        other.exists(&me.path)?.is_none()
    );
    println!("ok");
    Ok(())
}
