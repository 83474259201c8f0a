//! The one escaping rule for text that comes from ZooKeeper or a server (node names and data,
//! ACL ids, server replies) and reaches a terminal or a log record.
//!
//! Anyone who can create a node, or answer as a server, chooses those bytes. Printed raw, an
//! escape sequence (`\x1b[2J`) rewrites the operator's screen, a newline forges a line of
//! output or a log record, and a bidirectional override (`U+202E`) makes text read other than
//! it is. So every such string is shown through [`escape`] or [`escape_bytes`]:
//!
//! | what | shown as |
//! |---|---|
//! | newline, carriage return, tab | `\n`, `\r`, `\t` |
//! | other C0 controls and DEL (U+0000–U+001F, U+007F) | `\x1b`, `\x00`, `\x7f`, … |
//! | C1 controls (U+0080–U+009F), bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), line and paragraph separators (U+2028, U+2029), BOM (U+FEFF) | `\u{9b}`, `\u{202e}`, … |
//! | a backslash | `\\` (so an escaped text is never ambiguous) |
//! | bytes that are not UTF-8 ([`escape_bytes`] only) | `\xff`, … |
//! | everything else | itself |
//!
//! Text with nothing to escape is borrowed, not copied.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` as it may be shown on a terminal or written to a log record: control characters,
/// bidirectional overrides and backslashes escaped (the table in this module's doc), every
/// other character as it is. Text that needs nothing escaped is returned borrowed.
///
/// ```
/// assert_eq!(zkguard::escape("host-a pid 42"), "host-a pid 42");
/// assert_eq!(zkguard::escape("\x1b[2J\nfake line"), "\\x1b[2J\\nfake line");
/// assert_eq!(zkguard::escape("a\u{202e}b"), "a\\u{202e}b");
/// ```
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_char(&mut out, c);
    }
    Cow::Owned(out)
}

/// `bytes` (a node's data, a server's reply) as they may be shown: valid UTF-8 through
/// [`escape`]'s rule, every byte that is not part of valid UTF-8 as `\xNN`.
///
/// ```
/// assert_eq!(zkguard::escape_bytes(b"holder 1"), "holder 1");
/// assert_eq!(zkguard::escape_bytes(b"\xff\x1b[31mred"), "\\xff\\x1b[31mred");
/// ```
pub fn escape_bytes(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => escape(text),
        Err(_) => {
            let mut out = String::with_capacity(bytes.len() + 8);
            for chunk in bytes.utf8_chunks() {
                for c in chunk.valid().chars() {
                    push_char(&mut out, c);
                }
                for b in chunk.invalid() {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
            Cow::Owned(out)
        }
    }
}

fn needs_escape(c: char) -> bool {
    c == '\\'
        || c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

fn push_char(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c == '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if needs_escape(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for text in [
            "",
            "/locks/a/_c_1-lock-0000000001",
            "host-a pid 7",
            "ünïcødé ✓",
        ] {
            assert!(
                matches!(escape(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
            assert!(matches!(escape_bytes(text.as_bytes()), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn every_control_is_escaped_and_nothing_raw_remains() {
        let all: String = (0u32..0x110000).filter_map(char::from_u32).collect();
        let shown = escape(&all);
        assert!(!shown.chars().any(|c| c != '\\' && needs_escape(c)));
        assert!(!shown.chars().any(char::is_control));
    }

    #[test]
    fn the_table() {
        assert_eq!(escape("\x1b[2J"), "\\x1b[2J");
        assert_eq!(escape("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(escape("\0\x7f"), "\\x00\\x7f");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("x\u{202e}y\u{2066}"), "x\\u{202e}y\\u{2066}");
        assert_eq!(escape("\\x1b"), "\\\\x1b");
        assert_eq!(escape("\u{2028}\u{feff}"), "\\u{2028}\\u{feff}");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_hex() {
        assert_eq!(escape_bytes(b"\xff\xfeok"), "\\xff\\xfeok");
        assert_eq!(escape_bytes(b"a\xc3"), "a\\xc3");
        assert_eq!(escape_bytes("é\x1b".as_bytes()), "é\\x1b");
        assert_eq!(escape_bytes(b"\xe2\x80\xae\xff"), "\\u{202e}\\xff");
    }
}
