//! `zkguard server`: real ZooKeeper servers on loopback (the library's test harness) for
//! local development, until Ctrl-C.

use std::io::Write;

use zkguard::testing::TestCluster;

use crate::child::{next_signal, signal_name, signals};
use crate::{Fail, Say, ServerArgs, EXIT_UNAVAILABLE};

pub fn run(args: &ServerArgs, say: Say) -> Result<i32, Fail> {
    // Before the servers start, so that a Ctrl-C during the start stops them too.
    let signals = signals()?;
    let n = usize::from(args.servers);
    say.say(format!("starting {n} ZooKeeper server(s)"));
    let mut builder = TestCluster::builder().servers(n);
    if let Some(port) = args.port {
        builder = builder.client_port(port);
    }
    let cluster = builder
        .start()
        .map_err(|e| Fail::new(EXIT_UNAVAILABLE, format!("cannot start ZooKeeper: {e}")))?;
    let cs = cluster.connect_string();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{cs}").and_then(|_| out.flush());
    drop(out);
    say.say(format!(
        "{n} server(s) at {cs} (data in {}); export ZK_CONNECT={cs}; Ctrl-C stops them",
        cluster.dir().display()
    ));
    let sig = next_signal(&signals, None).expect("the signal thread never ends");
    say.say(format!("{}: stopping the servers", signal_name(sig)));
    drop(cluster);
    Ok(0)
}
