//! # zkguard
//!
//! Distributed locks and leader election on Apache ZooKeeper for programs that are not
//! async, with RAII guards, honest failure semantics and a test harness that runs real
//! ZooKeeper servers.
//!
//! This release contains the foundation: a synchronous ZooKeeper client ([`Client`]) that
//! always knows the state of its session, and (with the `testing` feature) real ZooKeeper
//! clusters and a fault-injecting proxy for tests. The lock and election recipes build on it.
//!
//! ```no_run
//! use zkguard::{Client, CreateMode, SessionEvent};
//! # fn main() -> zkguard::Result<()> {
//! let client = Client::connect("127.0.0.1:2181")?;
//! let events = client.events();
//! let me = client.create("/workers/w-", b"host-a", CreateMode::EphemeralSequential)?;
//! let (_, _, watch) = client.get_children_w("/workers")?;
//! crossbeam_channel::select! {
//!     recv(watch) -> ev => println!("membership changed: {ev:?}"),
//!     recv(events) -> ev => if let Ok(SessionEvent::Lost { .. }) = ev {
//!         println!("session lost: {} is gone", me.path);
//!     },
//! }
//! # Ok(())
//! # }
//! ```
//!
//! ## Session semantics
//!
//! - While connected the client pings on its own schedule (a third of the session timeout
//!   of idle sending), and drops a connection that has been silent for two thirds of the
//!   session timeout, then reconnects to another server.
//! - While disconnected the session is [`SessionState::Suspended`]: it may still be alive.
//!   Once the negotiated session timeout has passed since the last frame from any server,
//!   the session counts as [`SessionState::Lost`], whatever a server may say later; a
//!   server's "expired" answer means the same. On loss every request waiting for that
//!   session fails with [`Error::SessionExpired`], every watch receives
//!   [`EventType::SessionLost`], and the client opens a new session by itself.
//! - On reconnecting within the same session the client re-arms every watch (a change made
//!   during the outage is still reported) and presents its credentials again.
#![warn(missing_docs)]

mod client;
mod error;
mod lock;
mod queue;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{
    Acl, Client, ClientBuilder, ClientStats, CreateMode, Created, EventType, LossReason, Op,
    OpResult, Pending, Perms, Pipeline, SessionEvent, SessionState, Stat, WatchedEvent,
};
pub use error::{Error, Result};
pub use lock::{
    revoke, MultiLock, MultiLockGuard, Mutex, MutexGuard, Permit, ReadGuard, ReentrantMutex,
    ReentrantMutexGuard, RwLock, Semaphore, UnfairMutex, UnfairMutexGuard, WriteGuard,
};
pub use queue::{Canceller, Participant};

/// The README's examples, compiled as doctests so they cannot rot.
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
