//! `zkguard server`: real ZooKeeper servers on loopback (the library's test harness) for
//! local development, until Ctrl-C. Only with the `dev-server` feature: the harness may
//! install ZooKeeper with `apt-get`, which a shipped binary must not carry; without it the
//! subcommand says how to get it.

/// How to build a `zkguard` that has `server`.
#[cfg(not(feature = "dev-server"))]
pub fn run(
    _args: &crate::args::ServerArgs,
    _say: crate::say::Say,
) -> Result<i32, crate::fail::Fail> {
    Err(crate::fail::Fail::new(
        crate::fail::EXIT_UNAVAILABLE,
        "this zkguard was built without `zkguard server` (throwaway ZooKeeper servers for \
         development): install it with cargo install --path cli --features dev-server, or \
         run ZooKeeper yourself (Debian's package zookeeper)",
    ))
}

#[cfg(feature = "dev-server")]
pub use harness::run;

#[cfg(feature = "dev-server")]
mod harness {
    use std::io::Write;

    use zkguard::testing::TestCluster;

    use crate::args::ServerArgs;
    use crate::child::{next_signal, signal_name, signals};
    use crate::fail::{Fail, EXIT_UNAVAILABLE};
    use crate::say::Say;

    /// Starts the servers, prints the connect string, and stops them at the first signal.
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
}
