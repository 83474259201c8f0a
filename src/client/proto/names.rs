//! A listing as the queue recipes read it: the names in the reply's own buffer, and the
//! directory's stat.

use super::{DecodeResult, RawReply, Reader};
use crate::client::types::Stat;

/// A node's children as the server sent them, kept in the reply's own buffer: the queue
/// recipes read a listing of a thousand names without a string allocated for each (at a
/// thousand waiters that cost a handoff more than the rest of its client work).
pub(crate) struct Names {
    raw: RawReply,
    /// The listed node's own stat (getChildren2 sends it after the names).
    stat: Option<Stat>,
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Names {
    /// Checks a getChildren2 reply body: every name in bounds. (Each is read as UTF-8 once,
    /// by [`Names::iter`].)
    pub(crate) fn check(raw: RawReply) -> DecodeResult<Names> {
        let mut r = Reader::new(raw.body());
        // Not capped at MAX_ENTRIES: the names stay in the frame, none is decoded.
        let n = r.count_entries(4)?;
        for _ in 0..n {
            r.slice()?;
        }
        let stat = r.stat().ok();
        Ok(Names { raw, stat })
    }

    /// The listed node's stat (its `czxid` tells this node from a later one at the path,
    /// its `aversion` counts changes of its ACL).
    pub(crate) fn stat(&self) -> Option<&Stat> {
        self.stat.as_ref()
    }

    /// The names, in the server's order. A name that is not UTF-8 (a ZooKeeper server
    /// never sends one) reads as `"\u{FFFD}"`, which no recipe takes for one of its nodes.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        let mut r = Reader::new(self.raw.body());
        let n = r.count_entries(4).unwrap_or(0);
        // Bounds checked when made: every read succeeds.
        (0..n).map_while(move |_| {
            r.slice()
                .ok()
                .map(|b| std::str::from_utf8(b).unwrap_or("\u{FFFD}"))
        })
    }
}
