//! Stopping blocked acquires and hearing where they stand: the [`Canceller`] every lock
//! object keeps (a registration per blocked acquire, [`CancelWait`]; one per call made of
//! several acquires, [`CallCanceller`]) and the [`QueueEvent`]s it sends to its listeners.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use crate::client::{Bell, Ringing};

/// Cancels blocked acquires of one lock object from another thread.
///
/// Two ways, for two purposes:
///
/// - [`cancel`](Canceller::cancel) gives up the waits under way: every acquire that is
///   blocked on the lock object at that moment returns
///   [`Error::Cancelled`](crate::Error::Cancelled) and leaves nothing behind in ZooKeeper.
///   Acquires started later are not affected (the lock can be used again).
/// - [`shut`](Canceller::shut) stops the lock object for good: the acquires blocked now
///   *and every one started later* return `Error::Cancelled` (a later one at once, with
///   nothing sent). This is the stop of a daemon: "set a stop flag, then cancel" races
///   with a worker that is between its check of the flag and its next acquire; a shut
///   canceller has no such gap. Guards already held are not touched: the workers release
///   them as they finish.
///
/// The canceller belongs to the lock object and its clones (`lock.clone()` shares it; a
/// lock made again with `new` has its own). To end every blocked call of a client at once
/// (acquires, `lead`, a candidate, plain requests), close the client:
/// [`Client::close`](crate::Client::close).
///
/// ```no_run
/// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
/// let lock = zkguard::Mutex::new(client, "/locks/job")?;
/// let canceller = lock.canceller();
/// std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_secs(5));
///     canceller.cancel();
/// });
/// match lock.acquire() {
///     Ok(_guard) => println!("got it"),
///     Err(zkguard::Error::Cancelled { .. }) => println!("gave up"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
///
/// Stopping workers that share a lock:
///
/// ```no_run
/// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
/// let lock = zkguard::Mutex::new(client, "/locks/jobs")?;
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let lock = lock.clone(); // shares the canceller
///         std::thread::spawn(move || loop {
///             match lock.acquire() {
///                 Ok(guard) => { /* one job, then */ drop(guard) }
///                 Err(zkguard::Error::Cancelled { .. }) => return, // shut: stop
///                 Err(e) => eprintln!("{e}"),
///             }
///         })
///     })
///     .collect();
/// lock.canceller().shut(); // every worker returns, whatever it was doing
/// for w in workers {
///     w.join().unwrap();
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Canceller {
    waiting: Arc<Mutex<Waiting>>,
    /// Who hears the acquires' [`QueueEvent`]s (shared with the cancellers of calls made
    /// of several acquires: a multi-lock's).
    listeners: Arc<Mutex<Vec<Sender<QueueEvent>>>>,
}

/// Where a waiting acquire stands in its lock's queue: what
/// [`Canceller::queue_events`] (and each lock's `queue_events()`) sends while acquires of
/// that lock object (and its clones) wait. Events of one acquire come in order; the `node`
/// tells concurrent acquires apart.
///
/// Positions are learned when the waiter lists the queue: right after its node is made,
/// whenever one of the (at most two) nodes it watches ahead of it goes, after a reconnect,
/// and at its slow re-check (every session timeout). A waiter far back is not told of every
/// step forward (that would need every waiter to watch every node, Curator's herd): a
/// release of the head reaches the next waiter and the one after it only. The unfair
/// recipes have no queue and send nothing; a semaphore's waiter is told of its place in the
/// internal lock's queue, then that its lease is made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueueEvent {
    /// The acquire's node was created: its place in line is reserved (Curator's
    /// CURATOR-592). `node` is the node's path. An acquire that has to queue again (its
    /// session was lost, its node deleted) is told again, with its new node.
    Queued {
        /// The node's path.
        node: String,
    },
    /// A listing of the queue found `ahead` contenders' nodes ahead of `node` (0: it is
    /// granted now), or, between listings, the waiter heard the node two places ahead of it
    /// go while that was all it needed to know (one fewer than the last listing said: it
    /// is next now). Told when the number changed.
    Position {
        /// The waiting node's path.
        node: String,
        /// How many nodes are ahead of it.
        ahead: usize,
    },
}

#[derive(Default)]
struct Waiting {
    next: u64,
    list: Vec<(u64, Entry)>,
    /// Every acquire, now and later, is cancelled (the owner is going away).
    shut: bool,
}

/// What a [`Canceller`] wakes: one entry of its list.
enum Entry {
    /// One blocked acquire: its cancelled state (set first, for good) and the sender that
    /// wakes its wait (ringing its bell).
    Wake(Arc<AtomicBool>, Ringing<()>),
    /// A call made of several acquires one after the other (a multi-lock's): cancelling
    /// shuts its own canceller, so the acquire under way and every later one of the call
    /// are cancelled, including one that registers between two others.
    Call(Canceller),
}

impl Canceller {
    /// Wakes every acquire currently blocked on the lock with
    /// [`Error::Cancelled`](crate::Error::Cancelled).
    pub fn cancel(&self) {
        let woken: Vec<(u64, Entry)> = self.waiting.lock().list.drain(..).collect();
        for (_, w) in woken {
            match w {
                Entry::Wake(cancelled, tx) => {
                    // The state before the wake-up: a wait that takes the message and
                    // does not act on it (a pause) leaves the registration cancelled.
                    cancelled.store(true, Ordering::SeqCst);
                    tx.send_last(());
                }
                Entry::Call(c) => c.shut(),
            }
        }
    }

    /// A receiver of the [`QueueEvent`]s of every acquire of this lock object (and its
    /// clones) from now on: when its node is made, and its place in line as it moves.
    /// Dropping the receiver unsubscribes (at the next event).
    ///
    /// ```no_run
    /// # fn f(client: &zkguard::Client) -> zkguard::Result<()> {
    /// let lock = zkguard::Mutex::new(client, "/locks/job")?;
    /// let events = lock.canceller().queue_events();
    /// std::thread::spawn(move || {
    ///     for ev in events {
    ///         match ev {
    ///             zkguard::QueueEvent::Queued { node } => println!("in line as {node}"),
    ///             zkguard::QueueEvent::Position { ahead, .. } => println!("{ahead} ahead"),
    ///             _ => {}
    ///         }
    ///     }
    /// });
    /// let _guard = lock.acquire()?;
    /// # Ok(()) }
    /// ```
    #[must_use = "the receiver is the only way to hear the events"]
    pub fn queue_events(&self) -> Receiver<QueueEvent> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.listeners.lock().push(tx);
        rx
    }

    /// Tells every listener (and forgets those gone).
    fn tell(&self, ev: QueueEvent) {
        let mut l = self.listeners.lock();
        if !l.is_empty() {
            l.retain(|tx| tx.send(ev.clone()).is_ok());
        }
    }

    /// Cancels every acquire blocked now and every one started later, for good: each
    /// returns [`Error::Cancelled`](crate::Error::Cancelled) (a later one at once, before
    /// sending anything). There is no way back; make the lock again with `new` to use its
    /// path again. Calling it again does nothing more.
    pub fn shut(&self) {
        self.waiting.lock().shut = true;
        self.cancel();
    }

    /// Whether [`shut`](Canceller::shut) was called on this canceller (or a clone of it).
    pub fn is_shut(&self) -> bool {
        self.waiting.lock().shut
    }

    /// A registration cancelled by the next `cancel` (at once if shut): its state set for
    /// good ([`CancelWait::is_cancelled`]), then its receiver fires and `bell` rings. It
    /// unregisters on drop.
    pub(crate) fn register(&self, bell: &Bell) -> CancelWait {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let tx = Ringing::new(tx, Some(bell.clone()));
        let cancelled = Arc::new(AtomicBool::new(false));
        let mut w = self.waiting.lock();
        w.next += 1;
        let id = w.next;
        if w.shut {
            cancelled.store(true, Ordering::SeqCst);
            tx.send_last(());
        } else {
            w.list.push((id, Entry::Wake(cancelled.clone(), tx)));
        }
        CancelWait {
            rx,
            cancelled,
            id,
            owner: self.clone(),
        }
    }

    /// A canceller for one call made of several acquires in turn: a `cancel` of this one
    /// while the call lasts cancels the acquire under way and every later one of the call
    /// (a cancel between two acquires is not lost). It unregisters on drop.
    pub(crate) fn call(&self) -> CallCanceller {
        let call = Canceller {
            waiting: Arc::default(),
            listeners: self.listeners.clone(),
        };
        let mut w = self.waiting.lock();
        if w.shut {
            call.waiting.lock().shut = true;
        }
        w.next += 1;
        let id = w.next;
        w.list.push((id, Entry::Call(call.clone())));
        CallCanceller {
            canceller: call,
            id,
            owner: self.clone(),
        }
    }

    fn unregister(&self, id: u64) {
        self.waiting.lock().list.retain(|(i, _)| *i != id);
    }
}

/// One acquire's place in a [`Canceller`]'s list.
///
/// A cancel is a state, not a message: [`is_cancelled`](CancelWait::is_cancelled) stays
/// true once a cancel (or a shut) reached it, whoever took the message from `rx` (a wait
/// that does not act on what woke it, such as a pause after connection trouble, takes it
/// too). `rx` only wakes the wait: it gets one message and then its sender goes.
pub(crate) struct CancelWait {
    pub rx: Receiver<()>,
    cancelled: Arc<AtomicBool>,
    id: u64,
    owner: Canceller,
}

impl CancelWait {
    /// Whether a cancel or a shut reached this acquire: for good, whatever was taken from
    /// `rx`.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Tells the lock's listeners where this acquire stands.
    pub(crate) fn tell(&self, ev: QueueEvent) {
        self.owner.tell(ev);
    }
}

impl Drop for CancelWait {
    fn drop(&mut self) {
        self.owner.unregister(self.id);
    }
}

/// One call's place in a [`Canceller`]'s list (see [`Canceller::call`]).
pub(crate) struct CallCanceller {
    /// What the call's acquires register with.
    pub canceller: Canceller,
    id: u64,
    owner: Canceller,
}

impl Drop for CallCanceller {
    fn drop(&mut self) {
        self.owner.unregister(self.id);
    }
}

impl std::fmt::Debug for Canceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Canceller").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_between_two_acquires_of_one_call_cancels_the_next() {
        let lock = Canceller::default();
        let call = lock.call();
        let first = call.canceller.register(&Bell::default());
        drop(first); // the first acquire of the call is done
        lock.cancel(); // nobody is registered for a moment: the cancel must not be lost
        let second = call.canceller.register(&Bell::default());
        assert!(
            second.rx.try_recv().is_ok(),
            "the next acquire was not cancelled"
        );
        // A registration of the call made before the cancel is woken too.
        let lock = Canceller::default();
        let call = lock.call();
        let under_way = call.canceller.register(&Bell::default());
        lock.cancel();
        assert!(under_way.rx.try_recv().is_ok());
    }

    #[test]
    fn a_cancel_reaches_only_what_is_registered_and_a_finished_call_is_forgotten() {
        let lock = Canceller::default();
        let call = lock.call();
        drop(call);
        let before = lock.register(&Bell::default());
        lock.cancel();
        assert!(before.rx.try_recv().is_ok());
        // Acquires started after a cancel are not affected, in a call or alone.
        let call = lock.call();
        let later = call.canceller.register(&Bell::default());
        let alone = lock.register(&Bell::default());
        assert!(later.rx.try_recv().is_err());
        assert!(alone.rx.try_recv().is_err());
        assert!(lock.waiting.lock().list.len() == 2);
        drop((later, call, alone));
        assert!(lock.waiting.lock().list.is_empty());
    }

    #[test]
    fn an_acquire_that_ends_leaves_the_others_registered() {
        // Two acquires blocked at once on one lock object (and a call beside them): the
        // first one's end takes only its own entry out, and a cancel still reaches the rest.
        let lock = Canceller::default();
        let first = lock.register(&Bell::default());
        let second = lock.register(&Bell::default());
        let call = lock.call();
        let in_call = call.canceller.register(&Bell::default());
        drop(first);
        assert_eq!(
            lock.waiting.lock().list.len(),
            2,
            "the other entries went too"
        );
        lock.cancel();
        assert!(second.is_cancelled(), "a blocked acquire not cancelled");
        assert!(in_call.is_cancelled(), "a blocked call not cancelled");
        // A call that ends leaves the plain acquires alone, too.
        let lock = Canceller::default();
        let blocked = lock.register(&Bell::default());
        drop(lock.call());
        lock.cancel();
        assert!(blocked.is_cancelled());
    }

    #[test]
    fn a_cancel_is_a_state_that_outlives_its_message() {
        // Taken by a wait that does not act on it (a pause), the message is gone; the
        // registration stays cancelled.
        let lock = Canceller::default();
        let blocked = lock.register(&Bell::default());
        assert!(!blocked.is_cancelled());
        lock.cancel();
        assert!(blocked.rx.try_recv().is_ok(), "the wait is woken");
        assert!(blocked.is_cancelled(), "the message taken, the cancel lost");
        // A shut reaches a later registration as a state too.
        lock.shut();
        let later = lock.register(&Bell::default());
        let _ = later.rx.try_recv();
        assert!(later.is_cancelled());
        // A plain cancel leaves later registrations alone.
        let other = Canceller::default();
        other.cancel();
        assert!(!other.register(&Bell::default()).is_cancelled());
    }

    #[test]
    fn a_shut_canceller_cancels_calls_started_later() {
        let lock = Canceller::default();
        assert!(!lock.is_shut());
        lock.clone().shut();
        assert!(lock.is_shut(), "a clone shares the shut");
        assert!(
            lock.register(&Bell::default()).rx.try_recv().is_ok(),
            "a later acquire"
        );
        let call = lock.call();
        assert!(call
            .canceller
            .register(&Bell::default())
            .rx
            .try_recv()
            .is_ok());
    }
}
