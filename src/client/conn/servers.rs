//! The server list: which server the connection thread tries next, and how a new list
//! ([`Client::update_servers`](crate::Client::update_servers), or the ensemble followed)
//! replaces the old one.
//!
//! The list starts as the connect string's, shuffled. A new list is [`plan`]ned (pure, so
//! unit-tested): whether the client must move off the server it is connected to, and the
//! order in which to try the new list. The rule is ZooKeeper's Java client's
//! (`StaticHostProvider.updateServerList`), which spreads the clients of an ensemble evenly
//! over its new servers while moving as few of them as it can:
//!
//! - the current server is not in the new list: the client moves. If the list grew, it
//!   goes to one of the servers new in the list; otherwise to one of the servers kept
//!   from the old list with probability `kept × (old − new) / (new × (old − kept))`, and to
//!   one of the new ones otherwise (each kept server ends up with `1/new` of the clients);
//! - the current server is in the new list and the list grew: the client moves, to one of
//!   the servers new in the list, with probability `1 − old / new` (each kept server sheds
//!   the share the new ones must take);
//! - the current server is in the new list and the list did not grow: it stays.
//!
//! `old` and `new` are the sizes of the two lists, `kept` the servers in both (the same
//! `host:port` text, its host compared without case). The group picked comes first in the
//! order, shuffled, then the rest, shuffled: if none of the picked group answers, the client
//! goes on to the others.
//!
//! A move is the connection cut by the caller ([`Shared::update_servers`]); a connection
//! the connection thread was making meanwhile from the old list is left as soon as it is
//! made ([`Servers::must_leave`]). Either way the session is resumed on the next server:
//! a session move, not a new session.

use std::net::SocketAddr;

use super::Shared;
use crate::client::types::Hex;
use crate::error::escape;

/// The live server list, behind `Shared::servers` (a leaf lock).
pub(super) struct Servers {
    /// `host:port` entries, in the order they are tried.
    hosts: Vec<String>,
    /// The index (modulo the length) of the next one to try.
    next: usize,
    /// The list's number: 0 for the connect string's, one more with each new list.
    list: u64,
    /// A connection made from a list numbered below this one must be left (a move).
    leave_below: u64,
}

/// The server the connection thread tries next.
pub(super) struct Pick {
    pub host: String,
    /// Its place in the connect string's list, if the list is still that one (for the first
    /// connect's error).
    pub first_list_index: Option<usize>,
    /// The list it came from.
    pub list: u64,
}

/// Where the client is relative to a new list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Current {
    /// Not connected: nothing to move.
    Unconnected,
    /// Connected to a server the new list names.
    Kept,
    /// Connected to a server the new list does not name.
    Dropped,
}

/// What a new list means for the client: the order to try it in, and whether to leave the
/// current server now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    pub order: Vec<String>,
    pub moves: bool,
}

fn same_host(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// ZooKeeper's rebalancing rule (the module doc) for going from list `old` to list `new`.
/// `roll` is a number drawn uniformly from `[0, 1)`, `seed` seeds the shuffles (both
/// passed in so tests can fix them).
pub(super) fn plan(old: &[String], new: &[String], current: Current, roll: f64, seed: u64) -> Plan {
    let (kept, fresh): (Vec<String>, Vec<String>) = new
        .iter()
        .cloned()
        .partition(|h| old.iter().any(|o| same_host(o, h)));
    let (n_old, n_new, n_kept) = (old.len() as f64, new.len() as f64, kept.len() as f64);
    let grew = new.len() > old.len();
    // Which group the client tries first: `Some(true)` the servers new in the list,
    // `Some(false)` the kept ones, `None` no preference (the whole list shuffled).
    let (moves, fresh_first) = match current {
        Current::Unconnected => (false, None),
        Current::Kept if grew => {
            let p_move = 1.0 - n_old / n_new;
            if roll < p_move {
                (true, Some(true))
            } else {
                (false, None)
            }
        }
        Current::Kept => (false, None),
        Current::Dropped if grew || kept.is_empty() => (true, Some(true)),
        Current::Dropped if fresh.is_empty() || old.len() == kept.len() => (true, Some(false)),
        Current::Dropped => {
            let p_kept = n_kept * (n_old - n_new) / (n_new * (n_old - n_kept));
            (true, Some(roll >= p_kept))
        }
    };
    let mut rng = seed | 1;
    let order = match fresh_first {
        None => shuffled(new.to_vec(), &mut rng),
        Some(true) => [shuffled(fresh, &mut rng), shuffled(kept, &mut rng)].concat(),
        Some(false) => [shuffled(kept, &mut rng), shuffled(fresh, &mut rng)].concat(),
    };
    Plan { order, moves }
}

/// `v` shuffled with the xorshift state `rng` (odd, never zero).
fn shuffled(mut v: Vec<String>, rng: &mut u64) -> Vec<String> {
    for i in (1..v.len()).rev() {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        v.swap(i, (*rng % (i as u64 + 1)) as usize);
    }
    v
}

/// A fresh random number: the seed of a shuffle, and (its top 53 bits) a roll in `[0, 1)`.
pub(super) fn random() -> u64 {
    uuid::Uuid::new_v4().as_u128() as u64
}

/// The roll in `[0, 1)` of a random number: its top 53 bits (a double's precision).
fn roll_of(r: u64) -> f64 {
    (r >> 11) as f64 / (1u64 << 53) as f64
}

/// `hosts` in a random order (the connect string's list, at build).
pub(crate) fn shuffle(hosts: Vec<String>) -> Vec<String> {
    shuffled(hosts, &mut (random() | 1))
}

impl Servers {
    /// The connect string's list (already shuffled by the builder).
    pub(super) fn new(hosts: Vec<String>) -> Servers {
        Servers {
            hosts,
            next: 0,
            list: 0,
            leave_below: 0,
        }
    }

    /// The next server to try.
    pub(super) fn next(&mut self) -> Pick {
        let i = self.next % self.hosts.len();
        self.next = i + 1;
        Pick {
            host: self.hosts[i].clone(),
            first_list_index: (self.list == 0).then_some(i),
            list: self.list,
        }
    }

    /// How many servers the list has.
    pub(super) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether a connection made to a server of list `list` must be left now: a newer list
    /// asked for a move after the server was picked.
    pub(super) fn must_leave(&self, list: u64) -> bool {
        list < self.leave_below
    }

    /// The list now, in the order it is tried.
    pub(super) fn hosts(&self) -> Vec<String> {
        self.hosts.clone()
    }

    /// Takes the planned list; a move makes every connection from an older list one to
    /// leave.
    fn replace(&mut self, plan: Plan) {
        self.hosts = plan.order;
        self.next = 0;
        self.list += 1;
        if plan.moves {
            self.leave_below = self.list;
        }
    }
}

impl Shared {
    /// The server list now, in the order it is tried.
    pub fn servers(&self) -> Vec<String> {
        self.servers.lock().hosts()
    }

    /// Replaces the server list with `hosts` (checked by the caller: not empty, each
    /// `host:port`). `connected_in_new` says, for a connected client, whether its server
    /// (`server`) is among `hosts` (the caller resolved them). Moves the session off its
    /// server if the [`plan`] says so: the connection is cut and the connection thread
    /// resumes the session on the next server of the new order. Returns whether it moves.
    pub fn update_servers(&self, hosts: Vec<String>, server: Option<(SocketAddr, bool)>) -> bool {
        let current = match server {
            None => Current::Unconnected,
            Some((_, true)) => Current::Kept,
            Some((_, false)) => Current::Dropped,
        };
        let r = random();
        let roll = roll_of(r);
        let session = Hex(self.session_id());
        let moves = {
            let mut s = self.servers.lock();
            let plan = plan(&s.hosts, &hosts, current, roll, r.rotate_left(17));
            log::info!(
                "zkguard: new server list {}{}",
                escape(&plan.order.join(",")),
                match (plan.moves, server) {
                    (true, Some((addr, _))) => format!("; session {session} moves off {addr}"),
                    _ => String::new(),
                }
            );
            let moves = plan.moves;
            s.replace(plan);
            moves
        };
        if moves {
            self.cut();
        }
        // A thread pausing between rounds of failed connects tries the new list now.
        let _ = self.wake.0.send(());
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(hosts: &[&str]) -> Vec<String> {
        hosts.iter().map(|h| h.to_string()).collect()
    }

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    #[test]
    fn a_client_whose_server_is_dropped_always_moves() {
        let old = list(&["a:1", "b:1", "c:1"]);
        let new = list(&["d:1", "e:1"]);
        for roll in [0.0, 0.5, 0.999] {
            let p = plan(&old, &new, Current::Dropped, roll, 7);
            assert!(p.moves, "{roll}");
            assert_eq!(sorted(p.order), new);
        }
    }

    #[test]
    fn grown_lists_send_the_movers_to_the_new_servers_first() {
        let old = list(&["a:1", "b:1", "c:1"]);
        let new = list(&["a:1", "b:1", "c:1", "d:1", "e:1"]);
        // Kept: moves with probability 1 - 3/5 = 0.4.
        let p = plan(&old, &new, Current::Kept, 0.39, 3);
        assert!(p.moves);
        assert_eq!(sorted(p.order[..2].to_vec()), list(&["d:1", "e:1"]));
        let p = plan(&old, &new, Current::Kept, 0.41, 3);
        assert!(!p.moves);
        assert_eq!(sorted(p.order), new);
        // Dropped (its server left as two came): always to a new one first.
        let new = list(&["a:1", "b:1", "d:1", "e:1"]);
        let p = plan(&old, &new, Current::Dropped, 0.99, 3);
        assert!(p.moves);
        assert_eq!(sorted(p.order[..2].to_vec()), list(&["d:1", "e:1"]));
    }

    #[test]
    fn a_kept_server_in_a_list_that_did_not_grow_keeps_its_client() {
        let old = list(&["a:1", "b:1", "c:1"]);
        for new in [list(&["a:1", "b:1"]), list(&["a:1", "x:1", "y:1"])] {
            for roll in [0.0, 0.999] {
                assert!(!plan(&old, &new, Current::Kept, roll, 1).moves);
            }
        }
    }

    #[test]
    fn a_shrunk_list_spreads_the_movers_by_zookeepers_probability() {
        // 5 servers to 3: a, b kept, f new; c, d, e dropped. A client of a dropped server
        // goes to a kept one with probability 2 × (5 − 3) / (3 × (5 − 2)) = 4/9.
        let old = list(&["a:1", "b:1", "c:1", "d:1", "e:1"]);
        let new = list(&["a:1", "b:1", "f:1"]);
        let first = |roll| plan(&old, &new, Current::Dropped, roll, 5).order[0].clone();
        assert_ne!(first(0.44), "f:1");
        assert_eq!(first(0.45), "f:1");
        // Only kept servers left: to them.
        let p = plan(&old, &list(&["a:1", "b:1"]), Current::Dropped, 0.99, 5);
        assert!(p.moves);
        assert_eq!(sorted(p.order), list(&["a:1", "b:1"]));
    }

    #[test]
    fn the_expected_loads_come_out_even() {
        // Averaged over rolls, the clients of the old servers end up spread evenly over the
        // new ones: 5 → 3 (a, b kept, f new), one client per old server.
        let old = list(&["a:1", "b:1", "c:1", "d:1", "e:1"]);
        let new = list(&["a:1", "b:1", "f:1"]);
        let rolls = 9_000;
        let mut to_f = 0.0;
        for i in 0..rolls {
            let roll = i as f64 / rolls as f64;
            if plan(&old, &new, Current::Dropped, roll, i).order[0] == "f:1" {
                to_f += 1.0;
            }
        }
        // Three movers; f must get a third of five clients: 5/3 = 3 × P(f).
        let load_f = 3.0 * to_f / rolls as f64;
        assert!((load_f - 5.0 / 3.0).abs() < 0.01, "{load_f}");
    }

    #[test]
    fn unconnected_clients_and_hosts_compared_without_case() {
        let old = list(&["ZK1:2181"]);
        let new = list(&["zk1:2181", "zk2:2181"]);
        let p = plan(&old, &new, Current::Unconnected, 0.0, 9);
        assert!(!p.moves);
        assert_eq!(sorted(p.order), new);
        let p = plan(&old, &new, Current::Kept, 0.0, 9);
        assert_eq!(p.order[0], "zk2:2181");
    }

    #[test]
    fn a_move_leaves_connections_from_older_lists_only() {
        let mut s = Servers::new(list(&["a:1", "b:1"]));
        let first = s.next();
        assert_eq!(first.first_list_index, Some(0));
        s.replace(Plan {
            order: list(&["c:1"]),
            moves: false,
        });
        assert!(!s.must_leave(first.list));
        s.replace(Plan {
            order: list(&["d:1"]),
            moves: true,
        });
        assert!(s.must_leave(first.list));
        let p = s.next();
        assert_eq!((p.host.as_str(), p.first_list_index), ("d:1", None));
        assert!(!s.must_leave(p.list));
    }

    #[test]
    fn a_roll_is_in_zero_to_one_from_the_top_bits() {
        assert_eq!(roll_of(0), 0.0);
        assert_eq!(roll_of(1 << 63), 0.5);
        assert_eq!(roll_of((1 << 11) - 1), 0.0, "the low bits are not used");
        let top = roll_of(u64::MAX);
        assert!(top < 1.0 && top > 0.999_999, "{top}");
    }

    #[test]
    fn every_order_comes_from_fresh_seeds() {
        // Clients given one list must spread over its servers: every order of three hosts
        // comes up among a few hundred fresh seeds (each order's chance is 1/6).
        let hosts = list(&["a:1", "b:1", "c:1"]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..600 {
            let mut rng = random() | 1;
            seen.insert(shuffled(hosts.clone(), &mut rng));
        }
        assert_eq!(seen.len(), 6, "{seen:?}");
    }
}
