//! Node names and ordering. Layout as in Apache Curator, `_c_<uuid>-<marker><10-digit seq>`,
//! so Curator's recipes and ours queue together on the same path.

use crate::error::{Error, Result};

/// Curator's protected-name prefix.
pub(crate) const PROTECTED: &str = "_c_";
/// Marker of Curator's `InterProcessMutex` nodes (and ours).
pub(crate) const LOCK: &str = "lock-";
/// Marker of Curator's read-lock nodes.
pub(crate) const READ: &str = "__READ__";
/// Marker of Curator's write-lock nodes.
pub(crate) const WRITE: &str = "__WRIT__";
/// Marker of our semaphore's lease nodes.
pub(crate) const LEASE: &str = "lease-";
/// Marker of an election candidate (Curator's `LeaderLatch`).
pub(crate) const LATCH: &str = "latch-";

/// The name of the persistent node `zkguard mkdir` keeps in a directory it makes, with the
/// directory's ACL, so the directory is never empty: ZooKeeper deletes only an empty node,
/// so no identity the directory's ACL shuts out can delete it (and re-create it open), even
/// where its parent (the root of a shared ensemble) lets anyone delete. Every recipe
/// accepts it in its directory: it is neither a contender nor a foreign node.
///
/// ```
/// assert_eq!(zkguard::DIRECTORY_MARKER, "zkguard-directory");
/// ```
pub const DIRECTORY_MARKER: &str = "zkguard-directory";

/// One contender of a queue, as listed. Its name is a `String`, or a `&str` borrowed from
/// the listing's buffer where only a few names are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender<N = String> {
    pub name: N,
    pub seq: i64,
    /// A read-lock node (Curator's `__READ__`, kazoo's `__rlock__`): only writers block
    /// readers.
    pub read: bool,
}

/// Parses and orders a directory listing. Every child must end in the server's 10-digit
/// sequence number; anything else was not made by a lock recipe and is an error naming it,
/// but the [`DIRECTORY_MARKER`], which is left out.
pub(crate) fn order<S: AsRef<str>>(
    dir: &str,
    names: impl IntoIterator<Item = S>,
) -> Result<Vec<Contender>>
where
    String: From<S>,
{
    order_where(dir, names, |_| true)
}

/// [`order`] for the node named `me`, keeping only the contenders up to it (by sequence),
/// their names borrowed from the listing: a rule looks only ahead of a node, and at a
/// thousand waiters a listing ordered whole, a string made for every name, was most of a
/// waiter's own work on the critical path of a handoff. Every child is still checked. If
/// `me` is not among `names`, neither is it in the result.
pub(crate) fn order_upto<'n>(
    dir: &str,
    names: impl IntoIterator<Item = &'n str>,
    me: &str,
) -> Result<Vec<Contender<&'n str>>> {
    let mine = sequence(me).unwrap_or(i64::MAX);
    order_where(dir, names, |seq| seq <= mine)
}

fn order_where<S: AsRef<str>, N: From<S> + AsRef<str> + Ord>(
    dir: &str,
    names: impl IntoIterator<Item = S>,
    keep: impl Fn(i64) -> bool,
) -> Result<Vec<Contender<N>>> {
    let mut out = Vec::new();
    for name in names {
        if name.as_ref() == DIRECTORY_MARKER {
            continue;
        }
        let Some(seq) = sequence(name.as_ref()) else {
            return Err(Error::ForeignNode {
                path: dir.to_string(),
                node: name.as_ref().to_string(),
            });
        };
        if !keep(seq) {
            continue;
        }
        let name = N::from(name);
        // The marker sits right before the sequence number (checked above: ten ASCII
        // digits), so only the name's end is looked at, not the whole name.
        let head = &name.as_ref()[..name.as_ref().len() - 10];
        let read = head.ends_with(READ) || head.ends_with("__rlock__");
        out.push(Contender { name, seq, read });
    }
    out.sort_unstable_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
}

/// The sequence number the server appended: the last ten characters, all digits.
pub(crate) fn sequence(name: &str) -> Option<i64> {
    // Bytes, not a string slice: a foreign name's last ten bytes may start inside a
    // multi-byte character.
    let b = name.as_bytes();
    let tail = b.get(b.len().checked_sub(10)?..)?;
    // Ten digits fit an i64 with room to spare.
    tail.iter().try_fold(0i64, |n, d| {
        d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
    })
}

/// The prefix of a new node: `<dir>/_c_<uuid>-<marker>`.
pub(crate) fn node_prefix(dir: &str, uuid: &str, marker: &str) -> String {
    if dir == "/" {
        format!("/{PROTECTED}{uuid}-{marker}")
    } else {
        format!("{dir}/{PROTECTED}{uuid}-{marker}")
    }
}

/// `dir` joined with a child's name.
pub(crate) fn child(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Where a leader asks the election candidate whose node is `name` in `dir` to take over
/// (a named hand-over, `election/hand_over.rs`): beside the election's directory, not in
/// it, so no listing of the queue (ours, Curator's) ever sees it, and only that candidate's
/// waiter watches it.
pub(crate) fn ask(dir: &str, name: &str) -> String {
    format!("{dir}.hand-over.{name}")
}

/// The last component of a path.
pub(crate) fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The directory a node at `path` is in (`/` for a top-level node).
pub(crate) fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Default node data: which host and process holds or waits.
pub(crate) fn default_data() -> Vec<u8> {
    crate::host::host_id().into_bytes()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A queue of `kinds` (`w` write or exclusive, `r` read) named n0, n1, ..., in order.
    pub(crate) fn queue(kinds: &str) -> Vec<Contender> {
        kinds
            .chars()
            .enumerate()
            .map(|(i, k)| Contender {
                name: format!("n{i}"),
                seq: i as i64,
                read: k == 'r',
            })
            .collect()
    }

    #[test]
    fn curator_kazoo_and_zookeeper_names_order_by_sequence() -> Result<()> {
        let names = vec![
            "_c_2f0c8a43-55a5-4d39-8a3e-2c1f2a8e9b11-lock-0000000012".to_string(),
            "8e7e0a2b9d3a4f7c__lock__0000000003".to_string(),
            "_c_aa-__READ__0000000007".to_string(),
            "x-72057594037927936-0000000001".to_string(),
            "kazoo__rlock__0000000009".to_string(),
        ];
        let o = order("/l", names)?;
        let seqs: Vec<i64> = o.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, vec![1, 3, 7, 9, 12]);
        let reads: Vec<bool> = o.iter().map(|c| c.read).collect();
        assert_eq!(reads, vec![false, false, true, true, false]);
        Ok(())
    }

    #[test]
    fn a_foreign_child_is_an_error_naming_it() {
        let e = order("/locks/a", ["config", "x-0000000001"]);
        assert_eq!(
            e,
            Err(Error::ForeignNode {
                path: "/locks/a".into(),
                node: "config".into()
            })
        );
        assert!(sequence("lock-00000001").is_none());
        assert!(sequence("lock-12345678x9").is_none());
        assert_eq!(sequence("0000000042"), Some(42));
        // Non-ASCII names whose last ten bytes start inside a character: no panic.
        assert_eq!(sequence("a\u{e9}123456789"), None);
        assert_eq!(sequence("\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}"), None);
        assert_eq!(sequence("\u{e9}0000000007"), Some(7));
        let e = order("/l", ["a\u{e9}123456789"]);
        assert!(matches!(e, Err(Error::ForeignNode { .. })), "{e:?}");
    }

    #[test]
    fn the_directory_marker_is_neither_a_contender_nor_foreign() {
        let names = [DIRECTORY_MARKER, "_c_b-lock-0000000012"];
        let o = order("/l", names).unwrap();
        assert_eq!(o.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![12]);
        let o = order_upto("/l", names, "_c_b-lock-0000000012").unwrap();
        assert_eq!(o.len(), 1);
        assert!(order("/l", ["zkguard-directory2"]).is_err());
    }

    #[test]
    fn ordering_up_to_a_node_keeps_it_and_what_is_ahead_and_still_checks_every_child() {
        let names = [
            "_c_b-lock-0000000012",
            "_c_a-__READ__0000000003",
            "_c_c-lock-0000000007",
            "_c_d-lock-0000000009",
        ];
        let o = order_upto("/l", names, "_c_c-lock-0000000007").unwrap();
        let seqs: Vec<i64> = o.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, vec![3, 7]);
        assert!(o[0].read && !o[1].read);
        // A node not listed (ours was deleted) is not in the result.
        let o = order_upto("/l", names, "_c_x-lock-0000000008").unwrap();
        assert_eq!(o.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![3, 7]);
        // A foreign child behind us is still an error naming it.
        let e = order_upto(
            "/l",
            ["_c_c-lock-0000000007", "config"],
            "_c_c-lock-0000000007",
        );
        assert_eq!(
            e,
            Err(Error::ForeignNode {
                path: "/l".into(),
                node: "config".into()
            })
        );
    }

    #[test]
    fn prefixes_and_children() {
        assert_eq!(node_prefix("/a", "u", LOCK), "/a/_c_u-lock-");
        assert_eq!(node_prefix("/", "u", WRITE), "/_c_u-__WRIT__");
        assert_eq!(child("/", "n"), "/n");
        assert_eq!(child("/a/b", "n"), "/a/b/n");
        assert_eq!(base("/a/b/n"), "n");
        assert!(!default_data().is_empty());
    }
}
