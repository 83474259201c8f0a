//! The server as the model sees it (one linearizable store, per-session order, one-shot
//! watches fired exactly as ZooKeeper fires them) and the environment's steps: a connection
//! drops, a loss clock runs out, a client reconnects, the server expires a session, another
//! party deletes a held node, the background deletes.

use super::state::{Dir, Doing, Ev, Held, In, Node, Proc, Reply, Watch, World};

impl Proc {
    /// Whether a request of the client reaches the server and is answered (the client
    /// thinks itself connected, its session is not declared lost, and the link works).
    pub(crate) fn reaches(&self) -> bool {
        self.up && self.link && !self.clock_out
    }

    /// `Client::session_id`: none (0) once the session is declared lost, until a new one.
    pub(crate) fn session_id(&self) -> Option<u8> {
        (!self.clock_out).then_some(self.sid)
    }

    /// Whether an acquire call runs (and so hears session events).
    pub(crate) fn acquiring(&self) -> bool {
        matches!(
            self.phase,
            Doing::Enqueue { .. }
                | Doing::Enqueuing { .. }
                | Doing::Waiter { .. }
                | Doing::Lease { .. }
        )
    }

    /// Waits for `reply` (see `World::send`).
    fn ask(&mut self, reply: Reply) {
        self.reply = Some(reply);
        self.inbox.push(In::Reply);
    }

    /// A session event, to the acquire call if one runs, and to the guards (their session
    /// sink: `State::on_session` in lock/holding.rs).
    fn session_event(&mut self, ev: Ev) {
        if self.acquiring() {
            self.events.push(ev);
        }
        for g in [&mut self.guard, &mut self.internal].into_iter().flatten() {
            let lost = match ev {
                Ev::Lost(sid) => sid == g.owner,
                Ev::Connected(sid) => sid != g.owner,
                Ev::Suspended | Ev::Reconnected => false,
            };
            if lost && !g.released {
                g.lost = true;
            }
        }
    }
}

impl Held {
    /// `Holding::is_valid`: not lost or released, connected, the session its node's and not
    /// declared lost.
    pub(crate) fn is_valid(&self, p: &Proc) -> bool {
        !self.lost && !self.released && p.up && !p.clock_out && p.sid == self.owner
    }
}

impl World {
    /// A request of process `p`, applied by the server as `apply` if it reaches it. Sent
    /// into a broken link the client has not noticed, it is not answered until the client
    /// notices; a client that knows it is disconnected (or has declared its session lost)
    /// fails it at once.
    pub(crate) fn send(&mut self, p: usize, apply: impl FnOnce(&mut World) -> Reply) {
        let proc = &self.procs[p];
        if proc.reaches() {
            let reply = apply(self);
            self.procs[p].ask(reply);
        } else if proc.up && !proc.clock_out {
            self.procs[p].reply = Some(Reply::Loss);
        } else {
            self.procs[p].ask(Reply::Loss);
        }
    }

    pub(crate) fn node(&self, seq: u8) -> Option<&Node> {
        self.server.nodes.iter().find(|n| n.seq == seq)
    }

    pub(crate) fn session_ended(&self, sid: u8) -> bool {
        self.server.ended & (1 << sid) != 0
    }

    /// Delivers a watch event to the client of session `sid`, if it still has it.
    fn notify(&mut self, sid: u8, ev: In) {
        if let Some(p) = self.procs.iter_mut().find(|p| p.sid == sid) {
            p.inbox.push(ev);
        }
    }

    /// Fires (and removes) every watch `w`.
    fn fire(&mut self, w: Watch, ev: In) {
        let fired: Vec<u8> = self
            .server
            .watches
            .iter()
            .filter(|(_, x)| *x == w)
            .map(|(sid, _)| *sid)
            .collect();
        self.server.watches.retain(|(_, x)| *x != w);
        for sid in fired {
            self.notify(sid, ev);
        }
    }

    /// Creates an ephemeral sequential node for process `p` in its session.
    pub(crate) fn create(&mut self, p: usize, dir: Dir, uuid: u8, read: bool) -> u8 {
        let seq = self.server.next_seq;
        self.server.next_seq += 1;
        self.server.nodes.push(Node {
            seq,
            dir,
            owner: self.procs[p].sid,
            proc: p as u8,
            uuid,
            read,
        });
        self.fire(Watch::Children(dir), In::Children(dir));
        seq
    }

    pub(crate) fn list(&self, dir: Dir) -> Vec<Node> {
        self.server
            .nodes
            .iter()
            .filter(|n| n.dir == dir)
            .copied()
            .collect()
    }

    /// Deletes a node (if it is there), firing its data watches and its directory's child
    /// watches.
    pub(crate) fn delete(&mut self, seq: u8) {
        let Some(i) = self.server.nodes.iter().position(|n| n.seq == seq) else {
            return;
        };
        let n = self.server.nodes.remove(i);
        self.fire(Watch::Data(seq), In::Deleted(seq));
        self.fire(Watch::Children(n.dir), In::Children(n.dir));
    }

    /// A watch of session `sid`; false (and no watch) if the node is missing.
    pub(crate) fn watch_data(&mut self, sid: u8, seq: u8) -> bool {
        if self.node(seq).is_none() {
            return false;
        }
        let w = (sid, Watch::Data(seq));
        if !self.server.watches.contains(&w) {
            self.server.watches.push(w);
            self.server.watches.sort_unstable();
        }
        true
    }

    pub(crate) fn watch_children(&mut self, sid: u8, dir: Dir) {
        let w = (sid, Watch::Children(dir));
        if !self.server.watches.contains(&w) {
            self.server.watches.push(w);
            self.server.watches.sort_unstable();
        }
    }

    /// The server ends a session: its ephemeral nodes go (firing watches), its watches too.
    pub(crate) fn end_session(&mut self, sid: u8) {
        self.server.ended |= 1 << sid;
        self.server.watches.retain(|(s, _)| *s != sid);
        let mine: Vec<u8> = self
            .server
            .nodes
            .iter()
            .filter(|n| n.owner == sid)
            .map(|n| n.seq)
            .collect();
        for seq in mine {
            self.delete(seq);
        }
    }

    /// `Client::delete_owned` (and `delete_unwaited`) of node `seq` of session `owner` by
    /// process `p`: not sent on another session; handed to the background if the connection
    /// is in trouble (or forgotten, with `forget`); else applied.
    pub(crate) fn delete_owned(&mut self, p: usize, seq: u8, owner: u8, forget: bool) {
        let proc = &mut self.procs[p];
        if proc.sid != owner {
            return;
        }
        if !proc.reaches() {
            if !forget {
                proc.janitor.push((seq, owner));
            }
            return;
        }
        self.delete(seq);
    }

    // The environment's steps.

    /// The link breaks (the client does not know yet): the reply in flight is lost (the
    /// request may have been applied); watch events stay (the client's SetWatches on
    /// reconnect has the server fire them again).
    pub(crate) fn partition(&mut self, p: usize) {
        self.faults.disconnects -= 1;
        let proc = &mut self.procs[p];
        proc.link = false;
        if let Some(i) = proc.inbox.iter().position(|m| *m == In::Reply) {
            proc.inbox.remove(i);
            proc.reply = Some(Reply::Loss);
        }
    }

    /// The client notices the broken link: the request in flight fails, the session is
    /// suspended.
    pub(crate) fn notice(&mut self, p: usize) {
        let proc = &mut self.procs[p];
        proc.up = false;
        if proc.reply.is_some() && !proc.inbox.contains(&In::Reply) {
            proc.inbox.insert(0, In::Reply);
        }
        proc.session_event(Ev::Suspended);
    }

    /// The client's loss clock runs out while its link is broken (whether it noticed or
    /// not): its session is lost to it, and its guards read invalid.
    pub(crate) fn clock_out(&mut self, p: usize) {
        self.faults.expiries -= 1;
        let proc = &mut self.procs[p];
        proc.clock_out = true;
        let sid = proc.sid;
        proc.session_event(Ev::Lost(sid));
    }

    /// The client connects again: to its session if the server still has it and the
    /// client has not declared it lost, else to a new one.
    pub(crate) fn reconnect(&mut self, p: usize) {
        let old = self.procs[p].sid;
        let ended = self.session_ended(old);
        if !self.procs[p].clock_out && !ended {
            let proc = &mut self.procs[p];
            proc.up = true;
            proc.link = true;
            proc.session_event(Ev::Reconnected);
            // The guards' watches are armed again: a node that went is a loss.
            let held = [proc.guard, proc.internal];
            for g in held.into_iter().flatten() {
                if self.node(g.seq).is_none() {
                    self.procs[p].inbox.push(In::Deleted(g.seq));
                }
            }
            return;
        }
        let sid = self.next_sid;
        self.next_sid += 1;
        let proc = &mut self.procs[p];
        if !proc.clock_out {
            // The server said expired.
            proc.session_event(Ev::Lost(old));
        }
        proc.sid = sid;
        proc.up = true;
        proc.link = true;
        proc.clock_out = false;
        // Watch events of the old session are void.
        proc.inbox.retain(|m| *m == In::Reply);
        proc.session_event(Ev::Connected(sid));
    }

    /// The server expires session `sid`.
    pub(crate) fn expire(&mut self, sid: u8) {
        self.end_session(sid);
    }

    /// Whether the server may expire `sid` now: only after its client's loss clock has run
    /// out (or it moved to another session), unless `early` (a seeded fault: any time its
    /// client's link is broken).
    pub(crate) fn may_expire(&self, sid: u8, early: bool) -> Option<bool> {
        if self.session_ended(sid) || sid >= self.next_sid {
            return None;
        }
        match self.procs.iter().find(|p| p.sid == sid) {
            None => Some(true),
            Some(p) if p.clock_out => Some(true),
            Some(p) if early && !p.link => Some(false),
            Some(_) => None,
        }
    }

    /// Another party deletes a node. If the node held the lock by the server's queue
    /// (`held`: nothing blocks it), its holder is exempt from the exclusion properties
    /// until it learns: nothing can tell it sooner (its grant may be on its way).
    pub(crate) fn tamper(&mut self, seq: u8, held: bool) {
        self.faults.tampers -= 1;
        if held {
            self.tampered.push(seq);
        }
        self.delete(seq);
    }

    /// The background deletes one job of process `p`: on its session, if connected;
    /// dropped once the session changed (the server removes the node with the session).
    pub(crate) fn janitor(&mut self, p: usize) {
        let (seq, owner) = self.procs[p].janitor.remove(0);
        if self.procs[p].sid == owner {
            self.delete(seq);
        }
    }
}
