//! The `Debug` forms that write session ids as ZooKeeper does (hex), and [`Hex`] itself.

use super::{SessionEvent, Stat};

/// A session id as ZooKeeper writes it in its logs and `zkCli`: `0x` and lowercase hex.
/// The one format of session ids in the crate's log records and `Debug` output.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hex(pub i64);

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

impl std::fmt::Debug for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Debug for SessionEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, session_id) = match *self {
            SessionEvent::Connected { session_id } => ("Connected", session_id),
            SessionEvent::Suspended { session_id } => ("Suspended", session_id),
            SessionEvent::Reconnected { session_id } => ("Reconnected", session_id),
            SessionEvent::Lost { session_id, reason } => {
                return f
                    .debug_struct("Lost")
                    .field("session_id", &Hex(session_id))
                    .field("reason", &reason)
                    .finish()
            }
            SessionEvent::Closed => return f.write_str("Closed"),
        };
        f.debug_struct(name)
            .field("session_id", &Hex(session_id))
            .finish()
    }
}

impl std::fmt::Debug for Stat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stat")
            .field("czxid", &self.czxid)
            .field("mzxid", &self.mzxid)
            .field("ctime", &self.ctime)
            .field("mtime", &self.mtime)
            .field("version", &self.version)
            .field("cversion", &self.cversion)
            .field("aversion", &self.aversion)
            .field("ephemeral_owner", &Hex(self.ephemeral_owner))
            .field("data_length", &self.data_length)
            .field("num_children", &self.num_children)
            .field("pzxid", &self.pzxid)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::types::{LossReason, SessionEvent, Stat};

    #[test]
    fn session_ids_are_hex_in_debug_as_in_zookeepers_logs() {
        let id = 0x1000a3b4c5d0000_i64;
        assert_eq!(
            format!("{:?}", SessionEvent::Connected { session_id: id }),
            "Connected { session_id: 0x1000a3b4c5d0000 }"
        );
        assert_eq!(
            format!(
                "{:?}",
                SessionEvent::Lost {
                    session_id: id,
                    reason: LossReason::Timeout
                }
            ),
            "Lost { session_id: 0x1000a3b4c5d0000, reason: Timeout }"
        );
        assert_eq!(format!("{:?}", SessionEvent::Closed), "Closed");
        let stat = Stat {
            ephemeral_owner: id,
            ..Stat::default()
        };
        assert!(format!("{stat:?}").contains("ephemeral_owner: 0x1000a3b4c5d0000,"));
        assert_eq!(Hex(0).to_string(), "0x0");
    }
}
