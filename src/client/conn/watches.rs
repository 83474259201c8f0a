//! The watch registry: which watches are armed (per server table), firing them, the queue
//! of kept watches to arm again, and the list SetWatches re-arms after a reconnect.

use crate::error::escape;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::client::Ringing;

use super::hash::FastMap;
use super::requests::Outgoing;
use super::Shared;
use crate::client::path;
use crate::client::proto::{self, code, op};
use crate::client::types::{EventType, LossReason, WatchedEvent};

/// Which of the server's watch tables a watch lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchKind {
    /// getData, or exists on a node that exists.
    Data,
    /// exists on a node that does not exist.
    Exist,
    /// getChildren.
    Child,
}

/// A watch to register when the reply arrives (and only if it says the server set it).
pub(crate) struct WatchReg {
    pub server_path: String,
    pub kind: WatchKind,
    pub tx: WatchTx,
}

/// Something inside the crate that reacts to a watch event without a thread of its own
/// (a guard watching its own node). Called on the connection thread: it must only flip
/// flags and send into channels, never block.
pub(crate) trait WatchSink: Send + Sync {
    fn on_watch(&self, ev: &WatchedEvent);
    /// The data and stat the request that armed the watch read (a getData reply).
    fn on_data(&self, _data: &[u8], _stat: &crate::client::Stat) {}
    /// `Some(session)` while the sink wants its data watch kept armed on that session: the
    /// connection thread then re-arms it itself after every data change and after an
    /// arming request died with its connection (a guard watching its own node).
    fn keep(&self) -> Option<i64> {
        None
    }
}

/// The event a server notification type (`WatcherEvent.type`) is, and which watch tables it
/// fires, in the order `[data, exist, child]`; `None` for a type this client ignores (-1,
/// a session-state notification, is handled before this).
pub(super) fn fired_by(kind: i32) -> Option<(EventType, [bool; 3])> {
    Some(match kind {
        1 => (EventType::NodeCreated, [true, true, false]),
        2 => (EventType::NodeDeleted, [true, true, true]),
        3 => (EventType::NodeDataChanged, [true, true, false]),
        4 => (EventType::NodeChildrenChanged, [false, false, true]),
        _ => return None,
    })
}

/// The same sink (the data pointer, whatever the vtable).
pub(super) fn same_sink(a: &Arc<dyn WatchSink>, b: &Arc<dyn WatchSink>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const u8, Arc::as_ptr(b) as *const u8)
}

/// Where a watch event goes.
pub(crate) enum WatchTx {
    /// A channel a caller holds (and the bell of the wait it is for, if any).
    Chan(Ringing<WatchedEvent>),
    /// A sink; a data watch on a node that turns out to be missing is told `NodeDeleted`
    /// at once (the reply says the node is gone, and no watch is left on the server).
    Sink(Arc<dyn WatchSink>),
}

impl WatchTx {
    /// A watch fires once: its event is the channel's last message.
    fn deliver(self, ev: &WatchedEvent) {
        match self {
            WatchTx::Chan(tx) => tx.send_last(ev.clone()),
            WatchTx::Sink(s) => s.on_watch(ev),
        }
    }
}

/// The watches armed on the server, per table (behind `Shared::watches`).
#[derive(Default)]
pub(super) struct Watches {
    data: FastMap<String, Vec<WatchTx>>,
    exist: FastMap<String, Vec<WatchTx>>,
    child: FastMap<String, Vec<WatchTx>>,
    /// The client is closed: no watch is registered any more.
    closed: bool,
}

type Table = FastMap<String, Vec<WatchTx>>;

impl Watches {
    /// Registers a watch the server set; gives it back if the client is closed. A sink
    /// armed twice (a re-arm and a confirm crossing) is kept once.
    fn add(
        &mut self,
        server_path: String,
        kind: WatchKind,
        tx: WatchTx,
    ) -> Result<(), (String, WatchTx)> {
        if self.closed {
            return Err((server_path, tx));
        }
        let table = match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Exist => &mut self.exist,
            WatchKind::Child => &mut self.child,
        };
        let list = table.entry(server_path).or_default();
        if let WatchTx::Sink(new) = &tx {
            if list
                .iter()
                .any(|t| matches!(t, WatchTx::Sink(old) if same_sink(old, new)))
            {
                return Ok(());
            }
        }
        list.push(tx);
        Ok(())
    }

    /// Takes the watches on `server_path` of the tables `from` names (`[data, exist,
    /// child]`, see [`fired_by`]).
    fn take_fired(&mut self, server_path: &str, from: [bool; 3]) -> Vec<WatchTx> {
        let mut senders = Vec::new();
        let tables = [&mut self.data, &mut self.exist, &mut self.child];
        for (table, take) in tables.into_iter().zip(from) {
            if take {
                if let Some(v) = table.remove(server_path) {
                    senders.extend(v);
                }
            }
        }
        senders
    }

    /// Takes every watch; with `close`, none is registered any more.
    fn take_all(&mut self, close: bool) -> [Table; 3] {
        if close {
            self.closed = true;
        }
        [
            std::mem::take(&mut self.data),
            std::mem::take(&mut self.exist),
            std::mem::take(&mut self.child),
        ]
    }

    /// The paths watched, per table: `[data, exist, child]`.
    fn paths(&self) -> [Vec<String>; 3] {
        let keys = |m: &Table| m.keys().cloned().collect::<Vec<_>>();
        [keys(&self.data), keys(&self.exist), keys(&self.child)]
    }
}

impl Shared {
    /// Forgets every data and `exists` watch registered on `server_path`: nothing of theirs
    /// is delivered or armed again after a reconnect (`Pipeline::remove_watches`).
    pub(crate) fn forget_watches(&self, server_path: &str) {
        // Dropped (each sender rings its wait's bell as it goes) once the lock is let go.
        let forgotten = self
            .watches
            .lock()
            .take_fired(server_path, [true, true, false]);
        drop(forgotten);
    }

    /// A watch's arming request failed (nothing was set): a sink that wants its watch kept
    /// is queued to be armed again.
    pub(super) fn unarmed(&self, watch: Option<WatchReg>) {
        if let Some(WatchReg {
            server_path,
            tx: WatchTx::Sink(sink),
            ..
        }) = watch
        {
            if sink.keep().is_some() {
                self.queue_rearm(server_path, sink);
            }
        }
    }

    pub(super) fn queue_rearm(&self, server_path: String, sink: Arc<dyn WatchSink>) {
        let mut q = self.rearm.lock();
        if !q
            .iter()
            .any(|(p, s)| *p == server_path && same_sink(s, &sink))
        {
            q.push((server_path, sink));
        }
    }

    /// Arms the kept watches queued for re-arming (see [`WatchSink::keep`]) on the current
    /// connection, if it belongs to the session each sink names; sinks of another session
    /// are forgotten (their node went with it). Never waits for a caller's write: if one
    /// holds the socket, the queue stays for the next turn. False if work was left.
    pub(super) fn flush_rearm(&self) -> bool {
        if self.rearm.lock().is_empty() {
            return true;
        }
        let Some(mut io) = self.io.try_lock() else {
            return false;
        };
        if io.stream().is_none() {
            return true;
        }
        let session = io.session();
        let queued = std::mem::take(&mut *self.rearm.lock());
        let mut reqs = Vec::new();
        for (server_path, sink) in queued {
            if sink.keep() != Some(session) {
                continue;
            }
            let mut w = proto::Writer::default();
            w.string(&server_path).bool(true);
            let (tx, _rx) = super::reply_slot();
            reqs.push(Outgoing {
                name: proto::Name::GetData,
                opcode: op::GET_DATA,
                body: w.buf,
                watch: Some(WatchReg {
                    server_path,
                    kind: WatchKind::Data,
                    tx: WatchTx::Sink(sink),
                }),
                tx,
            });
        }
        if !reqs.is_empty() {
            log::debug!("zkguard: re-arming {} kept watch(es)", reqs.len());
            self.write_locked(&mut io, reqs);
        }
        true
    }

    /// The SetWatches frames that re-arm, on a resumed session, every watch the registry
    /// holds (the server forgot them with the old connection).
    pub(super) fn set_watches_frames(&self) -> Vec<Vec<u8>> {
        let [data, exist, child] = self.watches.lock().paths();
        self.meter
            .rearmed((data.len() + exist.len() + child.len()) as u64);
        proto::set_watches_frames(
            self.last_zxid.load(Ordering::Relaxed),
            &data,
            &exist,
            &child,
        )
    }

    /// Every watch receives `kind` and is forgotten.
    pub(super) fn fire_all_watches(&self, kind: EventType, close: bool) {
        let maps = self.watches.lock().take_all(close);
        for map in maps {
            for (p, senders) in map {
                let ev = WatchedEvent {
                    event_type: kind,
                    path: path::from_server(&self.cfg.chroot, &p),
                };
                for tx in senders {
                    tx.deliver(&ev);
                }
            }
        }
    }

    /// Adds `sink` to the data watch the registry holds on `server_path` (this session's:
    /// the registry is emptied when a session ends), if it holds one; false if not. A watch
    /// is taken out of the registry as its event is dispatched, under the same lock: so a
    /// watch found here has not fired yet, and its event reaches the sink too.
    pub(crate) fn join_data_watch(&self, server_path: &str, sink: &Arc<dyn WatchSink>) -> bool {
        let mut w = self.watches.lock();
        if w.closed {
            return false;
        }
        match w.data.get_mut(server_path) {
            Some(list) if !list.is_empty() => {
                if !list
                    .iter()
                    .any(|t| matches!(t, WatchTx::Sink(old) if same_sink(old, sink)))
                {
                    list.push(WatchTx::Sink(sink.clone()));
                }
                true
            }
            _ => false,
        }
    }

    pub(super) fn register_watch(&self, server_path: String, kind: WatchKind, tx: WatchTx) {
        let added = self.watches.lock().add(server_path, kind, tx);
        if let Err((server_path, tx)) = added {
            tx.deliver(&WatchedEvent {
                event_type: EventType::Closed,
                path: path::from_server(&self.cfg.chroot, &server_path),
            });
        }
    }

    pub(super) fn on_watch_event(&self, ev: proto::RawWatchEvent) {
        // Type -1 is a session-state notification.
        if ev.kind == -1 {
            if ev.state == code::SESSION_EXPIRED {
                self.enter_lost(LossReason::Expired);
            }
            return;
        }
        self.counters.watch_events.fetch_add(1, Ordering::Relaxed);
        let Some((event_type, from)) = fired_by(ev.kind) else {
            log::debug!(
                "zkguard: ignoring watch event type {} for {}",
                ev.kind,
                escape(&ev.path)
            );
            return;
        };
        let senders = self.watches.lock().take_fired(&ev.path, from);
        let out = WatchedEvent {
            event_type,
            path: path::from_server(&self.cfg.chroot, &ev.path),
        };
        // A data change spends the watch; sinks that keep theirs get it back (armed by this
        // thread right after, on this connection: a deletion in between is answered NoNode).
        let rearm = matches!(
            event_type,
            EventType::NodeDataChanged | EventType::NodeCreated
        );
        for tx in senders {
            let sink = match (rearm, &tx) {
                (true, WatchTx::Sink(sink)) => Some(sink.clone()),
                _ => None,
            };
            tx.deliver(&out);
            if let Some(sink) = sink.filter(|s| s.keep().is_some()) {
                self.queue_rearm(ev.path.clone(), sink);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::conn::unconnected as shared;

    /// The server's tables: getData and exists-on-a-node watches are in the data table,
    /// exists-on-no-node in the exist table, getChildren in the child table.
    #[test]
    fn which_tables_each_event_fires() {
        use EventType::*;
        assert_eq!(fired_by(1), Some((NodeCreated, [true, true, false])));
        assert_eq!(fired_by(2), Some((NodeDeleted, [true, true, true])));
        assert_eq!(fired_by(3), Some((NodeDataChanged, [true, true, false])));
        assert_eq!(
            fired_by(4),
            Some((NodeChildrenChanged, [false, false, true]))
        );
        for ignored in [-1, 0, 5, 6, 7, 99] {
            assert_eq!(fired_by(ignored), None, "type {ignored}");
        }
    }

    fn event(kind: i32, path: &str) -> proto::RawWatchEvent {
        proto::RawWatchEvent {
            kind,
            state: 3,
            path: path.into(),
        }
    }

    #[test]
    fn an_event_fires_only_the_watches_of_its_tables_and_spends_them() {
        let sh = shared();
        let (data_tx, data_rx) = crossbeam_channel::unbounded();
        let (child_tx, child_rx) = crossbeam_channel::unbounded();
        sh.register_watch(
            "/a".into(),
            WatchKind::Data,
            WatchTx::Chan(Ringing::new(data_tx, None)),
        );
        sh.register_watch(
            "/a".into(),
            WatchKind::Child,
            WatchTx::Chan(Ringing::new(child_tx, None)),
        );
        sh.on_watch_event(event(3, "/a"));
        assert_eq!(
            data_rx.try_recv().map(|e| e.event_type),
            Ok(EventType::NodeDataChanged)
        );
        assert!(
            child_rx.try_recv().is_err(),
            "a data change leaves child watches"
        );
        sh.on_watch_event(event(3, "/a"));
        assert!(data_rx.try_recv().is_err(), "a watch fires once");
        sh.on_watch_event(event(2, "/a"));
        assert_eq!(
            child_rx.try_recv().map(|e| e.event_type),
            Ok(EventType::NodeDeleted)
        );
        assert_eq!(
            sh.set_watches_frames(),
            proto::set_watches_frames(0, &[], &[], &[])
        );
    }

    struct Counting(std::sync::atomic::AtomicUsize);

    impl WatchSink for Counting {
        fn on_watch(&self, _ev: &WatchedEvent) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_sink_joins_only_a_data_watch_not_fired_yet_and_hears_its_event() {
        let sh = shared();
        let sink = Arc::new(Counting(Default::default()));
        let dyn_sink: Arc<dyn WatchSink> = sink.clone();
        assert!(!sh.join_data_watch("/a", &dyn_sink), "no watch on /a");
        let (tx, rx) = crossbeam_channel::unbounded();
        sh.register_watch(
            "/a".into(),
            WatchKind::Child,
            WatchTx::Chan(Ringing::new(tx.clone(), None)),
        );
        assert!(
            !sh.join_data_watch("/a", &dyn_sink),
            "a child watch is not one"
        );
        sh.register_watch(
            "/a".into(),
            WatchKind::Data,
            WatchTx::Chan(Ringing::new(tx, None)),
        );
        assert!(sh.join_data_watch("/a", &dyn_sink));
        assert!(sh.join_data_watch("/a", &dyn_sink), "joined twice");
        sh.on_watch_event(event(2, "/a"));
        assert_eq!(sink.0.load(Ordering::Relaxed), 1, "told once");
        assert_eq!(
            rx.try_iter().count(),
            2,
            "the channel's data and child watches"
        );
        assert!(
            !sh.join_data_watch("/a", &dyn_sink),
            "fired: nothing to join"
        );
        let (tx, _rx) = crossbeam_channel::unbounded();
        sh.register_watch(
            "/b".into(),
            WatchKind::Data,
            WatchTx::Chan(Ringing::new(tx, None)),
        );
        sh.fire_all_watches(EventType::Closed, true);
        assert!(!sh.join_data_watch("/b", &dyn_sink), "closed");
    }

    #[test]
    fn a_sink_armed_twice_on_one_path_is_told_once() {
        let sh = shared();
        let sink = Arc::new(Counting(Default::default()));
        for _ in 0..2 {
            sh.register_watch("/a".into(), WatchKind::Data, WatchTx::Sink(sink.clone()));
        }
        sh.on_watch_event(event(2, "/a"));
        assert_eq!(sink.0.load(Ordering::Relaxed), 1);
    }
}
