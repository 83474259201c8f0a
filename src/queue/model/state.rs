//! The model's state: the server (nodes, sessions, watches), each process (its session as
//! the client sees it, what it is doing, its channels), and what is left of the faults.

use crate::queue::names;
use crate::queue::waiter::decide::{Slot, View, Watches};

/// Which recipe the processes run (its library `Place` in each directory by
/// [`Modelled::place`]). The model's
/// names are its own: `Modelled`, `Held` (a guard's core), `Doing` (a process's phase) and
/// `World` (the whole state), never the library's recipe base `Base`, `Guard`, `Phase` or `State`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Modelled {
    /// `Mutex` (and every exclusive queue: a `ReentrantMutex`'s first hold, a `MultiLock`
    /// part).
    Mutex,
    /// The fair `LeaderElection` (`lead`): the exclusive rule on `latch-` nodes.
    Election,
    /// `RwLock`: each process is a reader or a writer (`ProcSpec::read`).
    RwLock,
    /// `Semaphore` with this many permits: the internal lock, then the lease loop.
    Semaphore(u32),
}

/// One process: what it asks for, how often.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcSpec {
    pub read: bool,
    pub acquisitions: u8,
}

/// Faults the environment may inject, each at most so many times in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Faults {
    /// A link breaks (replies in flight are lost, a create's included); the client notices
    /// later.
    pub disconnects: u8,
    /// A client's loss clock runs out while its link is broken (then the server may expire
    /// the session).
    pub expiries: u8,
    /// Another party deletes a node (held or waiting).
    pub tampers: u8,
    /// A waiter gives up (a cancel, or its deadline).
    pub give_ups: u8,
}

/// Deliberate mistakes in the rules (the negative controls): each must be caught.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seeded {
    /// On its blocker's deletion a waiter takes the lock without listing again, even when
    /// its last listing said someone else would still be ahead.
    pub no_relist: bool,
    /// The fast path without its two-ahead check: every view says "the blocker's deletion
    /// lets me in".
    pub no_two_ahead: bool,
    /// A release that does not see its delete through: a delete that fails for connection
    /// reasons (lost with the link) is dropped, not handed to the background.
    pub release_drops_failed_delete: bool,
    /// The server expires a session before the client's loss clock has run out (breaks
    /// the timing rule the guards rely on).
    pub early_expiry: bool,
    /// The grant ignores an event waiting on the waiter's own node (the own-node watch
    /// unused).
    pub ignore_own_watch: bool,
    /// A waiter whose blocker's deletion lets it in lists again instead (the fast path
    /// never taken: slower, never wrong).
    pub no_fast_path: bool,
    /// The semaphore counts one permit too many.
    pub count_off_by_one: bool,
    /// Every view says its next node's deletion leaves the blocker the last one ahead
    /// (`View::next_is_last`), even with other nodes ahead of the next.
    pub next_always_last: bool,
    /// The grant does not check that the waiter's session is still the node's (no restart
    /// on a session declared lost).
    pub grant_blind_to_session: bool,
}

/// A model configuration.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub recipe: Modelled,
    pub procs: Vec<ProcSpec>,
    pub faults: Faults,
    pub seeded: Seeded,
    /// Whether waiters take their slow re-check tick (never a progress step).
    pub tick: bool,
    /// Whether holders make fenced writes (fencing tokens).
    pub fenced_writes: bool,
}

/// The two directories: the queue (a lock's or election's directory, a semaphore's
/// internal lock) and a semaphore's leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Dir {
    Queue,
    Leases,
}

impl Dir {
    pub(crate) fn path(self) -> &'static str {
        match self {
            Dir::Queue => "/q",
            Dir::Leases => "/s/leases",
        }
    }
}

/// A node on the server (every one ephemeral sequential).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Node {
    /// The sequence number, and the creation zxid (the fencing token): one counter.
    pub seq: u8,
    pub dir: Dir,
    /// The session that made it.
    pub owner: u8,
    /// The process and attempt (the uuid in its name).
    pub proc: u8,
    pub uuid: u8,
    pub read: bool,
}

impl Node {
    /// The node's name, as the recipe names it.
    pub(crate) fn name(&self, recipe: Modelled) -> String {
        // The kind's marker; a semaphore's internal lock is the gate's queue
        // (`Place::Gate`: Curator's lock nodes).
        let marker = recipe.place(self.dir, self.read).marker();
        let prefix = names::node_prefix(
            self.dir.path(),
            &format!("p{}a{}", self.proc, self.uuid),
            marker,
        );
        format!("{}{:010}", names::base(&prefix), self.seq)
    }
}

/// A watch on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Watch {
    /// A data watch on the node of this sequence number.
    Data(u8),
    /// A child watch on a directory.
    Children(Dir),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Server {
    /// In sequence order.
    pub nodes: Vec<Node>,
    pub next_seq: u8,
    /// Sessions the server has ended (expired or closed), a bit per session id.
    pub ended: u16,
    pub watches: Vec<(u8, Watch)>,
}

/// What comes to a client from the server, in order on its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum In {
    /// The reply to the request the process waits for (its content is in `Proc::reply`).
    Reply,
    /// A watch fired: the node was deleted (or, for a guard's watch armed on a missing
    /// node, found missing).
    Deleted(u8),
    /// A child watch fired.
    Children(Dir),
}

/// A session event, as `SessionEvent` has them (ids are the model's session ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Ev {
    Suspended,
    Reconnected,
    Lost(u8),
    Connected(u8),
}

/// A reply's content.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Reply {
    /// The request failed for connection reasons (sent or not, answered or not).
    Loss,
    /// Create and list: our node's sequence number and the listing.
    Created(u8, Vec<Node>),
    /// After a lost create reply: our node, found by its uuid in this session.
    Found(Option<u8>),
    /// A listing (with a child watch, if asked).
    Listed(Vec<Node>),
    /// Data watches armed on these nodes; these were missing.
    Armed(Vec<u8>, Vec<u8>),
    /// A delete.
    Deleted,
}

/// A guard's core (`Holding`): its node, and the lost and released signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Held {
    pub seq: u8,
    pub owner: u8,
    pub lost: bool,
    pub released: bool,
}

/// A waiter's view: the library's `View`, by sequence numbers.
pub(crate) type MView = View<u8>;

/// A waiter's data watches (the library's `Watches`), by sequence number: whether the
/// connection delivered its event (a deletion) yet.
pub(crate) type Recv = Watches<u8, Flag>;

/// One of a waiter's watches in the model: fired (a deletion delivered) or not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Flag(pub bool);

impl Slot for Flag {
    fn heard(&self) -> bool {
        self.0
    }

    fn take(&self) -> Option<bool> {
        // The model's only event on a data watch is a deletion.
        self.0.then_some(true)
    }
}

/// Where a waiter is in `Waiter::run`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum WStep {
    /// List (the create's listing first, if it is there).
    List,
    /// A listing was asked for.
    Listing,
    /// Watches were asked for.
    Arming(MView),
    Wait(MView),
    /// Connection trouble: a pause (which may take one session event), then list.
    Pause,
}

/// What a process is doing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Doing {
    /// Not acquiring or holding.
    Idle,
    /// Step 1 in `dir`: send the create (or, after a lost reply, look for the uuid).
    Enqueue { dir: Dir, uuid: u8, maybe: bool },
    /// Step 1's request is out.
    Enqueuing { dir: Dir, uuid: u8, find: bool },
    /// Steps 2 to 5 in the queue for our node `seq`.
    Waiter {
        seq: u8,
        owner: u8,
        step: WStep,
        listing: Option<Vec<Node>>,
    },
    /// The semaphore's lease loop for lease `seq`, holding the internal lock.
    Lease {
        seq: u8,
        owner: u8,
        want_watch: bool,
        listing: Option<Vec<Node>>,
        /// A listing was asked for (with a watch if `want_watch`).
        out: bool,
        /// Waiting for a lease to come or go.
        waiting: bool,
    },
    /// The lock is held (the guard is `Proc::guard`).
    Held,
    /// A release waits for its delete.
    Releasing,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Proc {
    /// The client's session id.
    pub sid: u8,
    /// The client thinks itself connected.
    pub up: bool,
    /// The link to the server works.
    pub link: bool,
    /// The loss clock ran out for `sid`: the client calls it lost.
    pub clock_out: bool,
    /// Acquisitions still to make.
    pub left: u8,
    pub phase: Doing,
    /// From the server, in order.
    pub inbox: Vec<In>,
    /// The content of the reply in `inbox`.
    pub reply: Option<Reply>,
    /// The acquire call's session events (subscribed while it runs).
    pub events: Vec<Ev>,
    /// The waiter's data watches by sequence number: fired (a deletion heard) or not.
    pub recv: Recv,
    /// The lease loop's child watch: fired or not.
    pub lease_watch: Option<bool>,
    /// The recipe's guard (while held).
    pub guard: Option<Held>,
    /// The semaphore's internal lock, held during the lease loop.
    pub internal: Option<Held>,
    /// Background deletes: (node, the session it belongs to).
    pub janitor: Vec<(u8, u8)>,
    /// Attempts made (the next uuid).
    pub attempts: u8,
    /// The node of the attempt under way (the `OwnNode`'s), for its clean-up.
    pub attempt_node: Option<(u8, u8)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct World {
    pub server: Server,
    pub procs: Vec<Proc>,
    pub faults: Faults,
    pub next_sid: u8,
    /// The highest fencing token a fenced write was accepted with, and whether a lower one
    /// was accepted after it.
    pub fence: u8,
    pub fence_broken: bool,
    /// A waiter did not take the fast path where it should have (`props::FAST_PATH`).
    pub fast_missed: bool,
    /// A guard was handed out invalid: its node not there in the holder's live session
    /// (`props::HANDED_VALID`).
    pub handed_invalid: bool,
    /// Held nodes deleted by another party (their holders are exempt until they learn).
    pub tampered: Vec<u8>,
}

impl World {
    pub(crate) fn initial(c: &Config) -> World {
        let procs = c
            .procs
            .iter()
            .enumerate()
            .map(|(i, p)| Proc {
                sid: i as u8,
                up: true,
                link: true,
                clock_out: false,
                left: p.acquisitions,
                phase: Doing::Idle,
                inbox: Vec::new(),
                reply: None,
                events: Vec::new(),
                recv: Recv::default(),
                lease_watch: None,
                guard: None,
                internal: None,
                janitor: Vec::new(),
                attempts: 0,
                attempt_node: None,
            })
            .collect::<Vec<_>>();
        World {
            server: Server {
                nodes: Vec::new(),
                next_seq: 0,
                ended: 0,
                watches: Vec::new(),
            },
            next_sid: procs.len() as u8,
            procs,
            faults: c.faults,
            fence: 0,
            fence_broken: false,
            fast_missed: false,
            handed_invalid: false,
            tampered: Vec::new(),
        }
    }
}
