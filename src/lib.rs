//! # zkguard
//!
//! Distributed locks and leader election on Apache ZooKeeper for programs that are not
//! async, with RAII guards, honest failure semantics and a test harness that runs real
//! ZooKeeper servers.
//!
//! ```no_run
//! # fn main() -> zkguard::Result<()> {
//! let client = zkguard::Client::connect("127.0.0.1:2181")?;
//! let lock = zkguard::Mutex::new(&client, "/locks/invoices")?;
//! let guard = lock.acquire()?;          // fair, herd-free, one round trip uncontended
//! assert!(guard.is_valid());            // false while disconnected, for good once lost
//! let _fence = guard.token();           // grows with every later holder
//! drop(guard);                          // released
//! # Ok(()) }
//! ```
//!
//! ## Locks
//!
//! | type | what | guard |
//! |---|---|---|
//! | [`Mutex`] | fair exclusive lock (Curator's `InterProcessMutex` layout) | [`MutexGuard`] |
//! | [`ReentrantMutex`] | the holding thread may take it again | [`ReentrantMutexGuard`] (not `Send`) |
//! | [`UnfairMutex`] | one node at the path; few contenders | [`UnfairMutexGuard`] |
//! | [`RwLock`] | many readers or one writer, writers not starved | [`ReadGuard`], [`WriteGuard`] |
//! | [`Semaphore`] | at most N holders | [`Permit`] |
//! | [`MultiLock`] | several exclusive locks of any mix, all or none, deadlock-free order | [`MultiLockGuard`] |
//!
//! Every lock has blocking, `try_` and timeout acquires and a [`Canceller`], written once in
//! the [`Lock`] trait (each lock has them as inherent methods too, so no import is needed;
//! an [`RwLock`]'s sides are the locks [`ReadLock`] and [`WriteLock`]). The exclusive ones
//! ([`ExclusiveLock`]) combine, in any mix, into a [`MultiLock`]; a lock picked at run
//! time is a `Box<dyn` [`DynLock`]`>`, its guard a [`BoxedGuard`]. The sequential
//! ones share one queue algorithm, the [`Mutex`]'s: a release wakes at most two waiters.
//! The [`Semaphore`] follows Curator's `InterProcessSemaphoreV2` protocol over that queue.
//! A contender re-checks that its node exists and
//! belongs to the current session before it claims the lock after any reconnect, and every
//! failed, cancelled or timed-out acquire deletes its node (in the background if need be).
//!
//! The nodes a recipe creates get the client's [`NodeAcl`] (open by default; a creator ACL
//! keeps other identities of a shared ensemble from deleting or writing a held node), and
//! every guard can make [fenced writes](Guard::fenced_multi): ZooKeeper writes applied only
//! while the lock is held.
//!
//! Every guard owns what it needs (no lifetime), releases on drop, and tells the truth
//! about the lock: `is_valid()` (false while disconnected or unanswered, read from the
//! monotonic clock at the call, so a process resumed from a long pause is told at once),
//! `lost()` (a receiver that fires when the session may have expired — counted by the
//! client itself, connected or not, so a partitioned or stalled holder learns it before
//! anyone else can get the lock — when the client closes, or when the node is deleted or
//! replaced: every guard keeps a watch on its own node), `confirm()` (a quorum check, now,
//! that the lock is still ours), `token()` (a fencing token: the node's creation zxid) and
//! `revocation()` (cooperative revocation, compatible with Curator's `Revoker`; see
//! [`revoke`]), and `release()`. These are the [`Guard`] trait's methods, the same for every
//! guard, [`Leadership`] and [`MultiLockGuard`] included.
//!
//! ## Leader election
//!
//! [`LeaderElection`] is fair (the lock queue, with Curator `LeaderLatch` node names so
//! Curator participants and zkguard candidates elect one leader together) or unfair (one
//! node, a herd; for a few candidates). Take part in the calling thread with
//! [`lead`](LeaderElection::lead), which returns a [`Leadership`] guard, or in the background
//! with [`join`](LeaderElection::join), which returns a [`Candidate`] that reports
//! [`LeaderEvent`]s and stays in the election across session expiry.
//!
//! ```no_run
//! # fn main() -> zkguard::Result<()> {
//! # let client = zkguard::Client::connect("127.0.0.1:2181")?;
//! let election = zkguard::LeaderElection::new(&client, "/services/scheduler", "host-a")?;
//! let leadership = election.lead()?; // blocks until this process leads
//! leadership.confirm()?;              // proven with a quorum write, right now
//! let _fence = leadership.token();    // grows with every later leader
//! drop(leadership);                   // resigned: the next candidate leads
//! # Ok(()) }
//! ```
//!
//! A leader is told it is suspended the moment its connection drops, and that it lost
//! leadership before anyone else can be elected. A background leader makes
//! [fenced writes](LeaderTerm::fenced_multi) through its term ([`Candidate::term`]).
//!
//! ## Shutting down
//!
//! [`Canceller::shut`] ends the acquires blocked on a lock object and every later one (so
//! workers between two jobs cannot slip past a stop), [`Candidate::stop`] leaves an
//! election, and [`Client::close`] ends every blocked call on the client at once (see
//! there). `examples/daemon.rs` is a whole daemon stopped both ways.
//!
//! ## The client
//!
//! A synchronous ZooKeeper client of its own ([`Client`]), with one connection thread, that
//! always knows the state of its session; TLS and mutual TLS with the `tls` feature
//! (`ClientBuilder::tls`, `TlsConfig`), SASL DIGEST-MD5 logins
//! ([`ClientBuilder::sasl_digest`]) and Kerberos logins with the `kerberos` feature
//! (`ClientBuilder::sasl_kerberos`, `Kerberos`, on the platform's GSSAPI, loaded at run
//! time: building needs nothing but Rust); with the `testing`
//! feature, real ZooKeeper clusters (secured and Kerberized ones too, with a throwaway KDC)
//! and a fault-injecting proxy for tests ([`testing`]).
//!
//! ```no_run
//! use zkguard::{Client, CreateMode, SessionEvent};
//! # fn main() -> zkguard::Result<()> {
//! let client = Client::connect("127.0.0.1:2181")?;
//! let events = client.events();
//! let me = client.create("/workers/w-", b"host-a", CreateMode::EphemeralSequential)?;
//! let (_, _, watch) = client.get_children_w("/workers")?;
//! zkguard::channel::select! {
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
//!   The session counts as [`SessionState::Lost`], whatever a server may say later, once
//!   the negotiated session timeout (less a tenth of it, at most 250 ms) has passed since
//!   the client *sent* the last request a server answered: the server renews a session
//!   when a request arrives, so it cannot expire the session any earlier. A
//!   server's "expired" answer means the same. On loss every request waiting for that
//!   session fails with [`Error::SessionExpired`], every watch receives
//!   [`EventType::SessionLost`], and the client opens a new session by itself.
//! - On reconnecting within the same session the client re-arms every watch (a change made
//!   during the outage is still reported) and presents its credentials again.
//! - A session the client gave up on its own clock may still live on the server (a
//!   standalone server restarted from its data restores its sessions, ephemeral nodes
//!   included, with a fresh timeout). Before it opens its new session the client closes
//!   that one (it has its id and password), so [`SessionEvent::Connected`] for the new
//!   session comes after the old session's locks and election nodes are gone, and a
//!   [`Candidate`] says [`LeaderEvent::Rejoined`] only then. It never closes a session it
//!   still counts live.
//!
//! ## Logging
//!
//! The crate logs through the [`log`](https://docs.rs/log) facade: install any logger
//! (`env_logger`, `simplelog`, a `tracing` bridge, ...) to see reconnects and session loss;
//! without one a daemon sees nothing of them. Every message starts with `zkguard:`, and
//! the target is the module's path under `zkguard` (`zkguard::client::conn::session` for
//! the session, `zkguard::lock::holding` for held nodes, `zkguard::testing` for the
//! harness), so `RUST_LOG=zkguard=info` (with `env_logger`) selects them all. Session ids
//! are written as ZooKeeper's own logs write them, in hex (`session 0x1000a3b4c5d0000`),
//! here and in the `Debug` of [`SessionEvent`].
//!
//! | level | what it shows |
//! |---|---|
//! | `error` | the client cannot work as set up: credentials rejected, a malformed frame from a server, a thread that cannot start |
//! | `warn` | something is lost or at risk: a session lost (and why), a held lock node, semaphore lease or election node lost, a server silent or not answering (reconnecting), no server reachable at the first connect, a background delete that failed, a reply over the size limit, a candidate's error |
//! | `info` | the session's life: a new session or the same one resumed (with server and negotiated timeout), a connection the server ended, a given-up session closed on the server, a close the server did not confirm, an acquire queueing again after a session change |
//! | `debug` | detail: every session event, each failed connect attempt, re-armed watches, background deletes, and everything that follows from the client's own `close()` |
//!
//! Nothing is logged at `trace`.
#![warn(missing_docs)]
// Unsafe code only where a module allows it: today the GSSAPI loaded at run time
// (`client::gssapi`, feature `kerberos`), whose every block says why it is sound.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod admin;
mod backoff;
mod client;
mod election;
mod error;
mod host;
mod lock;
pub mod metrics;
mod queue;
mod sync;
#[cfg(feature = "testing")]
pub mod testing;

#[cfg(feature = "kerberos")]
pub use client::Kerberos;
#[cfg(feature = "tls")]
pub use client::TlsConfig;
pub use client::{
    validate_path, Acl, Client, ClientBuilder, ClientStats, CloseOutcome, ConnectString,
    CreateMode, Created, EnsembleConfig, EnsembleServer, EventType, Identity, LossReason, NodeAcl,
    Op, OpResult, Pending, Perms, Pipeline, SessionEvent, SessionState, Stat, WatchedEvent,
    CONFIG_NODE, MAX_PATH_LEN,
};
/// The [crossbeam-channel](https://docs.rs/crossbeam-channel/0.5) crate (0.5), re-exported:
/// every receiver zkguard hands out (session events, watches, `lost()`, `revocation()`,
/// leader events) is a [`channel::Receiver`], and [`channel::select!`] waits on several at
/// once, with no dependency of your own to add.
pub use crossbeam_channel as channel;
pub use election::{
    Candidate, LeaderChange, LeaderElection, LeaderEvent, LeaderObserver, LeaderTerm, Leadership,
    Prefer, Successor,
};
pub use error::{
    escape, escape_bytes, ConnectAttempt, ConnectFailure, Error, ErrorCode, IoCause, KerberosCause,
    Result,
};
pub use host::host_id;
pub use lock::{
    revoke, validate_recipe_path, BoxedGuard, DynLock, ExclusiveLock, Guard, Lock, MultiLock,
    MultiLockGuard, Mutex, MutexGuard, Permit, ReadGuard, ReadLock, ReentrantMutex,
    ReentrantMutexGuard, RwLock, Semaphore, UnfairMutex, UnfairMutexGuard, WriteGuard, WriteLock,
};
pub use queue::{Canceller, Participant, QueueEvent, DIRECTORY_MARKER};

/// The README's examples, compiled as doctests so they cannot rot. Its first blocks run
/// against a server of the harness (one hidden line each, so they read as a user's code), so
/// they are doctests with the `testing` feature (as CI runs them): `cargo test --doc
/// --features testing`.
#[cfg(all(doctest, feature = "testing"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The examples of the documents in docs/, compiled as doctests the same way as the README's.
#[cfg(doctest)]
mod docs_doctests {
    #[doc = include_str!("../docs/recipes.md")]
    struct Recipes;
    #[doc = include_str!("../docs/semantics.md")]
    struct Semantics;
    #[doc = include_str!("../docs/client.md")]
    struct ClientDoc;
    #[doc = include_str!("../docs/security.md")]
    struct Security;
    #[doc = include_str!("../docs/operations.md")]
    struct Operations;
    #[doc = include_str!("../docs/testing.md")]
    struct Testing;
    #[doc = include_str!("../docs/performance.md")]
    struct Performance;
}
