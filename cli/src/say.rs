//! What zkguard writes for people and scripts: messages on stderr (`Say`), JSON lines on
//! stdout that are safe on a terminal, and the small texts several subcommands show
//! (durations, ACLs).

use std::fmt::{self, Write as _};
use std::time::Duration;

use zkguard::Client;

use crate::logging;

/// Messages on stderr, unless `--quiet`.
#[derive(Clone, Copy)]
pub struct Say {
    pub quiet: bool,
}

impl Say {
    pub fn say(&self, msg: impl fmt::Display) {
        if !self.quiet {
            logging::line(msg);
        }
    }
}

/// `v` as one line of JSON that is safe on a terminal: serde escapes the C0 controls, and
/// every other character [`zkguard::escape`] would escape (DEL, C1 controls, bidirectional
/// overrides, line separators) is written as a JSON `\uXXXX` escape, which decodes to the
/// same string. (A backslash is JSON's own escape: serde has written it as `\\` already.)
pub fn json_line(v: &serde_json::Value) -> String {
    let text = v.to_string();
    let mut out = String::with_capacity(text.len());
    let mut buf = [0u8; 4];
    for c in text.chars() {
        let one: &str = c.encode_utf8(&mut buf);
        if c != '\\' && zkguard::escape(one) != one {
            for unit in c.encode_utf16(&mut [0u16; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A lock or election path given on the command line: a valid node path
/// "12 s", "3 min 4 s".
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    }
}

/// An ACL for messages: `[digest:alice:… cdrwa, world:anyone r]`, every entry escaped (an
/// id is whoever set the ACL's), a digest entry's password hash left out.
pub fn acl_text(acl: &[zkguard::Acl]) -> String {
    let entries: Vec<String> = acl.iter().map(acl_entry).collect();
    format!("[{}]", entries.join(", "))
}

/// One ACL entry for messages (see [`acl_text`]).
pub fn acl_entry(a: &zkguard::Acl) -> String {
    let mut a = a.clone();
    if a.scheme == "digest" {
        if let Some((user, _)) = a.id.split_once(':') {
            a.id = format!("{user}:…");
        }
    }
    zkguard::escape(&a.to_string()).into_owned()
}

/// "the ACL of PATH is [ENTRIES]" as `client` reads it now (or that this identity may not
/// read it), the entries as [`acl_text`] shows them: what a refusal (77) names.
pub fn acl_at(client: &Client, path: &str) -> String {
    match client.get_acl(path) {
        Ok((acl, _)) => format!("the ACL of {path} is {}", acl_text(&acl)),
        Err(e) => format!("the ACL of {path} is unreadable to this identity ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    /// `json_line` leaves nothing a terminal acts on (C0 and C1 controls, DEL, a bidi
    /// override, a line separator) and still decodes to the same strings.
    #[test]
    fn json_lines_are_json_and_safe_on_a_terminal() {
        let nasty = "x\x1b[2J\nHOLDER forged\u{9b}31m\u{7f}\u{202e}\u{2028}\\ é";
        let v = json!({ "data": nasty, "plain": "host-a pid 42" });
        let line = super::json_line(&v);
        assert!(
            line.chars()
                .all(|c| c == '\\' || zkguard::escape(&c.to_string()) == c.to_string()),
            "{line}"
        );
        assert!(
            line.contains("é") && line.contains("host-a pid 42"),
            "{line}"
        );
        let back: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back, v);
    }
}
