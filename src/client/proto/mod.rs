//! The ZooKeeper wire protocol: jute encoding, op codes and the records zkguard uses.
//!
//! Written from the public record definitions (`zookeeper.jute`) and op codes. Every
//! decoder works on untrusted bytes and returns an error instead of panicking.
//!
//! A leaf of the client: it uses the paths (`path.rs`), the public records (`types.rs`)
//! and the error type, and nothing of the connection or pipeline layers, which use it.
//! `ops.rs` holds the request bodies of the node operations and the multi codec.

use super::types::{Acl, Identity, Perms, Stat};
use crate::error::escape;
use crate::error::Error;

mod names;
mod ops;
pub(crate) use names::Names;
pub(crate) use ops::{create_body, decode_multi, encode_multi, version_arg};

/// What a request is called, written once here: the word its errors say (`Error::Timeout`'s
/// `op`, ...) and the `op` label of `zkguard_request_seconds` (`crate::metrics`), carried with
/// the request from its `Req` to where its reply is counted. Not an op code: `get_config` is
/// a getData, and the creates' four codes are one `create`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    Create,
    Delete,
    Exists,
    GetData,
    SetData,
    GetAcl,
    SetAcl,
    GetChildren,
    Sync,
    Multi,
    WhoAmI,
    GetConfig,
    Reconfig,
    RemoveWatches,
    Close,
}

impl Name {
    /// Every name (the metrics table's test records each).
    #[cfg(all(test, feature = "metrics"))]
    pub(crate) const ALL: [Name; 15] = [
        Name::Create,
        Name::Delete,
        Name::Exists,
        Name::GetData,
        Name::SetData,
        Name::GetAcl,
        Name::SetAcl,
        Name::GetChildren,
        Name::Sync,
        Name::Multi,
        Name::WhoAmI,
        Name::GetConfig,
        Name::Reconfig,
        Name::RemoveWatches,
        Name::Close,
    ];

    /// The name as errors say it and metrics label it.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Name::Create => "create",
            Name::Delete => "delete",
            Name::Exists => "exists",
            Name::GetData => "get_data",
            Name::SetData => "set_data",
            Name::GetAcl => "get_acl",
            Name::SetAcl => "set_acl",
            Name::GetChildren => "get_children",
            Name::Sync => "sync",
            Name::Multi => "multi",
            Name::WhoAmI => "who_am_i",
            Name::GetConfig => "get_config",
            Name::Reconfig => "reconfig",
            Name::RemoveWatches => "remove_watches",
            Name::Close => "close",
        }
    }
}

/// Op codes (`ZooDefs.OpCode`).
pub(crate) mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const RECONFIG: i32 = 16;
    pub const CREATE2: i32 = 15;
    pub const REMOVE_WATCHES: i32 = 18;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const CREATE_TTL: i32 = 21;
    pub const CLOSE: i32 = -11;
    pub const AUTH: i32 = 100;
    pub const SET_WATCHES: i32 = 101;
    pub const SASL: i32 = 102;
    pub const WHO_AM_I: i32 = 107;
    /// Multi header type of an error result.
    pub const ERROR: i32 = -1;
}

/// Reserved xids.
pub(crate) mod xid {
    pub const WATCH_EVENT: i32 = -1;
    pub const PING: i32 = -2;
    pub const AUTH: i32 = -4;
    pub const SET_WATCHES: i32 = -8;
}

/// The server error codes the protocol code compares against, as the wire's numbers; the
/// table itself is [`ErrorCode`](crate::ErrorCode), where each code is written once.
pub(crate) mod code {
    use crate::error::ErrorCode;

    pub const OK: i32 = ErrorCode::Ok.as_i32();
    pub const RUNTIME_INCONSISTENCY: i32 = ErrorCode::RuntimeInconsistency.as_i32();
    pub const NO_NODE: i32 = ErrorCode::NoNode.as_i32();
    pub const SESSION_EXPIRED: i32 = ErrorCode::SessionExpired.as_i32();
    /// Not the server's: the client's mark on a reply over its size limit, which it dropped
    /// (see `conn/frame.rs`).
    pub const REPLY_TOO_LARGE: i32 = -1_000_001;
}

/// Largest frame accepted from a server by default (ZooKeeper's own `jute.maxbuffer` default
/// is 1 MiB; the server sends larger replies, such as a listing of many children, so allow
/// headroom; see `ClientBuilder::max_reply_size`).
pub(crate) const MAX_FRAME: usize = 64 * 1024 * 1024;

/// The most entries one reply decodes into, over all of its vectors (children, ACL
/// entries, identities, multi results). Each entry costs far more decoded than the 4 bytes
/// an empty name takes on the wire (a `String` alone is 24): without a cap a hostile
/// server's 64 MiB reply of empty names would decode to about 400 MB. At this cap a reply
/// decodes to tens of megabytes beside its frame; ZooKeeper's own client, at its default
/// `jute.maxbuffer`, takes no listing of more than about 100 000 names.
pub(crate) const MAX_ENTRIES: usize = 1 << 20;

/// The server's default `jute.maxbuffer`: the largest request frame it accepts.
pub(crate) const DEFAULT_MAX_REQUEST: usize = 0xfffff;

/// A malformed record: the connection it came from cannot be trusted any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed record: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

pub(crate) type DecodeResult<T> = std::result::Result<T, Malformed>;

/// A length as the wire carries it (a signed 32-bit count). Requests over the client's
/// `max_request` (at most `i32::MAX`) are refused before they are sent, and replies are read,
/// not written, so no length written here saturates.
fn wire_len(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Appends jute-encoded values to a buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    /// A writer whose buffer starts with room for the 4-byte frame length.
    pub fn frame() -> Writer {
        Writer {
            buf: vec![0, 0, 0, 0],
        }
    }

    /// Fills in the frame length written by [`Writer::frame`] and returns the bytes.
    pub fn finish_frame(mut self) -> Vec<u8> {
        let len = wire_len(self.buf.len() - 4);
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }

    pub fn int(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn long(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(v as u8);
        self
    }
    pub fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.int(wire_len(v.len()));
        self.buf.extend_from_slice(v);
        self
    }
    pub fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(v.as_bytes())
    }
    pub fn strings(&mut self, v: &[String]) -> &mut Self {
        self.int(wire_len(v.len()));
        for s in v {
            self.string(s);
        }
        self
    }
    pub fn acls(&mut self, acls: &[Acl]) -> &mut Self {
        self.int(wire_len(acls.len()));
        for a in acls {
            self.int(a.perms.bits() as i32)
                .string(&a.scheme)
                .string(&a.id);
        }
        self
    }
}

/// Reads jute-encoded values from untrusted bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Entries this reader may still decode ([`MAX_ENTRIES`] for the whole record).
    entries_left: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            entries_left: MAX_ENTRIES,
        }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// How many bytes have been read.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> DecodeResult<&'a [u8]> {
        if self.remaining() < n {
            return Err(Malformed(format!(
                "truncated {what}: need {n} bytes, {} left",
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn int(&mut self) -> DecodeResult<i32> {
        let b = self.take(4, "int")?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn long(&mut self) -> DecodeResult<i64> {
        let b = self.take(8, "long")?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    pub fn bool(&mut self) -> DecodeResult<bool> {
        Ok(self.take(1, "bool")?[0] != 0)
    }
    /// A length-prefixed buffer; -1 (null) reads as empty.
    pub fn buffer(&mut self) -> DecodeResult<Vec<u8>> {
        Ok(self.slice()?.to_vec())
    }
    pub fn string(&mut self) -> DecodeResult<String> {
        let bytes = self.buffer()?;
        String::from_utf8(bytes).map_err(|_| Malformed("string is not UTF-8".into()))
    }
    /// A length-prefixed buffer, borrowed from the bytes read; -1 (null) reads as empty.
    pub fn slice(&mut self) -> DecodeResult<&'a [u8]> {
        let len = self.int()?;
        if len < 0 {
            return Ok(&[]);
        }
        self.take(len as usize, "buffer")
    }
    /// A vector count, checked against the bytes left (each element takes at least `min`
    /// bytes) and against the entries the record may still decode ([`MAX_ENTRIES`]).
    fn count(&mut self, min: usize) -> DecodeResult<usize> {
        let n = self.count_entries(min)?;
        self.take_entries(n)?;
        Ok(n)
    }

    /// A vector count checked against the bytes left only: for a listing read in place
    /// ([`Names`]), whose entries cost no more memory than their bytes.
    fn count_entries(&mut self, min: usize) -> DecodeResult<usize> {
        let n = self.int()?;
        if n < 0 {
            return Ok(0);
        }
        let n = n as usize;
        if n.saturating_mul(min) > self.remaining() {
            return Err(Malformed(format!(
                "vector of {n} elements in {} bytes",
                self.remaining()
            )));
        }
        Ok(n)
    }

    /// Counts `n` more decoded entries against the record's [`MAX_ENTRIES`].
    pub fn take_entries(&mut self, n: usize) -> DecodeResult<()> {
        if n > self.entries_left {
            return Err(Malformed(format!(
                "{} entries in one reply: more than the {MAX_ENTRIES} zkguard decodes",
                MAX_ENTRIES - self.entries_left + n
            )));
        }
        self.entries_left -= n;
        Ok(())
    }
    pub fn strings(&mut self) -> DecodeResult<Vec<String>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.string()).collect()
    }
    /// A vector of ACL entries (each at least 12 bytes: perms and two lengths).
    pub fn acls(&mut self) -> DecodeResult<Vec<Acl>> {
        let n = self.count(12)?;
        (0..n)
            .map(|_| {
                let perms = Perms::from_bits(self.int()? as u32);
                Ok(Acl::new(perms, self.string()?, self.string()?))
            })
            .collect()
    }
    /// `WhoAmIResponse`: a vector of `ClientInfo` (scheme, user; each at least two lengths).
    pub fn identities(&mut self) -> DecodeResult<Vec<Identity>> {
        let n = self.count(8)?;
        (0..n)
            .map(|_| {
                Ok(Identity {
                    scheme: self.string()?,
                    id: self.string()?,
                })
            })
            .collect()
    }
    pub fn stat(&mut self) -> DecodeResult<Stat> {
        Ok(Stat {
            czxid: self.long()?,
            mzxid: self.long()?,
            ctime: self.long()?,
            mtime: self.long()?,
            version: self.int()?,
            cversion: self.int()?,
            aversion: self.int()?,
            ephemeral_owner: self.long()?,
            data_length: self.int()?,
            num_children: self.int()?,
            pzxid: self.long()?,
        })
    }
}

/// `ConnectRequest`, sent without a request header.
pub(crate) fn connect_request(
    last_zxid: i64,
    timeout_ms: i32,
    session_id: i64,
    passwd: &[u8],
) -> Vec<u8> {
    let mut w = Writer::frame();
    w.int(0) // protocol version
        .long(last_zxid)
        .int(timeout_ms)
        .long(session_id)
        .buffer(passwd)
        .bool(false); // read-only not wanted
    w.finish_frame()
}

/// `ConnectResponse`. Its `Debug` redacts the session password (whoever has it may take
/// the session over).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ConnectResponse {
    pub timeout_ms: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
}

impl std::fmt::Debug for ConnectResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectResponse")
            .field("timeout_ms", &self.timeout_ms)
            .field("session_id", &crate::client::types::Hex(self.session_id))
            .field("passwd", &format_args!("<redacted>"))
            .finish()
    }
}

pub(crate) fn decode_connect_response(frame: &[u8]) -> DecodeResult<ConnectResponse> {
    let mut r = Reader::new(frame);
    let _protocol_version = r.int()?;
    let timeout_ms = r.int()?;
    let session_id = r.long()?;
    let passwd = r.buffer()?;
    // An optional read-only flag may follow; ignore it.
    Ok(ConnectResponse {
        timeout_ms,
        session_id,
        passwd,
    })
}

/// `ReplyHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplyHeader {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
}

pub(crate) fn decode_reply_header(r: &mut Reader<'_>) -> DecodeResult<ReplyHeader> {
    Ok(ReplyHeader {
        xid: r.int()?,
        zxid: r.long()?,
        err: r.int()?,
    })
}

/// `WatcherEvent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawWatchEvent {
    pub kind: i32,
    pub state: i32,
    pub path: String,
}

pub(crate) fn decode_watch_event(r: &mut Reader<'_>) -> DecodeResult<RawWatchEvent> {
    Ok(RawWatchEvent {
        kind: r.int()?,
        state: r.int()?,
        path: r.string()?,
    })
}

/// A request frame: header plus body.
pub(crate) fn request_frame(xid: i32, opcode: i32, body: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(12 + body.len());
    append_request_frame(&mut buf, xid, opcode, body);
    buf
}

/// Appends a request frame to `buf` (several frames go out in one write).
pub(crate) fn append_request_frame(buf: &mut Vec<u8>, xid: i32, opcode: i32, body: &[u8]) {
    buf.extend_from_slice(&wire_len(8 + body.len()).to_be_bytes());
    buf.extend_from_slice(&xid.to_be_bytes());
    buf.extend_from_slice(&opcode.to_be_bytes());
    buf.extend_from_slice(body);
}

/// Splits the watches into SetWatches frames of at most ~128 KiB each (the Java client does
/// the same, so a session with many watches does not exceed the server's frame limit).
pub(crate) fn set_watches_frames(
    relative_zxid: i64,
    data: &[String],
    exist: &[String],
    child: &[String],
) -> Vec<Vec<u8>> {
    const LIMIT: usize = 128 * 1024;
    let mut frames = Vec::new();
    let (mut d, mut e, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let mut size = 0usize;
    let all = data
        .iter()
        .map(|p| (0, p))
        .chain(exist.iter().map(|p| (1, p)))
        .chain(child.iter().map(|p| (2, p)));
    let flush = |d: &mut Vec<String>,
                 e: &mut Vec<String>,
                 c: &mut Vec<String>,
                 frames: &mut Vec<Vec<u8>>| {
        let mut w = Writer::default();
        w.long(relative_zxid).strings(d).strings(e).strings(c);
        frames.push(request_frame(xid::SET_WATCHES, op::SET_WATCHES, &w.buf));
        d.clear();
        e.clear();
        c.clear();
    };
    for (kind, path) in all {
        if size + path.len() + 4 > LIMIT && size > 0 {
            flush(&mut d, &mut e, &mut c, &mut frames);
            size = 0;
        }
        size += path.len() + 4;
        match kind {
            0 => d.push(path.clone()),
            1 => e.push(path.clone()),
            _ => c.push(path.clone()),
        }
    }
    if size > 0 {
        flush(&mut d, &mut e, &mut c, &mut frames);
    }
    frames
}

/// A reply as it came from the server: the whole frame, handed over without a copy.
pub(crate) struct RawReply {
    pub err: i32,
    frame: Vec<u8>,
    body_start: usize,
}

impl RawReply {
    /// The reply in `frame`, whose body starts at `body_start`; `err` is its header's code.
    pub fn new(err: i32, frame: Vec<u8>, body_start: usize) -> RawReply {
        RawReply {
            err,
            frame,
            body_start,
        }
    }

    /// The reply's body (after the reply header).
    pub fn body(&self) -> &[u8] {
        &self.frame[self.body_start..]
    }

    /// The zxid of the reply's header: the last transaction the answering server had
    /// applied when it answered (`None` for a frame without a header).
    pub fn zxid(&self) -> Option<i64> {
        let mut r = Reader::new(self.frame.get(..self.body_start)?);
        decode_reply_header(&mut r).ok().map(|h| h.zxid)
    }

    /// A reply whose frame is `body` alone, for decoders' unit tests.
    #[cfg(test)]
    pub fn of_body(body: Vec<u8>) -> RawReply {
        RawReply {
            err: 0,
            frame: body,
            body_start: 0,
        }
    }
}

/// The error for a reply to `op` on `path` that could not be decoded.
pub(crate) fn malformed(op: &'static str, path: &str, why: &str) -> Error {
    log::error!(
        "zkguard: malformed {op} reply for {}: {}",
        escape(path),
        escape(why)
    );
    Error::Malformed {
        op,
        path: path.to_string(),
        reason: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_constants_come_from_the_table() {
        use crate::client::proto::code;
        assert_eq!(code::OK, 0);
        assert_eq!(code::RUNTIME_INCONSISTENCY, -2);
        assert_eq!(code::NO_NODE, -101);
        assert_eq!(code::SESSION_EXPIRED, -112);
    }

    /// `WhoAmIResponse`: `ClientInfo` records in order; a count larger than the bytes is
    /// malformed, not a huge allocation.
    #[test]
    fn who_am_i_replies_decode() {
        let mut w = Writer::default();
        w.int(2).string("ip").string("127.0.0.1");
        w.string("sasl").string("alice");
        let got = Reader::new(&w.buf).identities().unwrap();
        let pairs: Vec<String> = got.iter().map(ToString::to_string).collect();
        assert_eq!(pairs, ["ip:127.0.0.1", "sasl:alice"]);
        let mut bad = Writer::default();
        bad.int(1000).string("ip");
        assert!(Reader::new(&bad.buf).identities().is_err());
    }

    /// Empty names: the fewest bytes (4) an entry can take on the wire.
    fn empty_names(n: usize) -> Vec<u8> {
        let mut w = Writer::default();
        w.int(n as i32);
        w.buf.resize(4 + 4 * n, 0);
        w.buf
    }

    #[test]
    fn a_reply_decodes_at_most_max_entries_over_all_its_vectors() {
        // Exactly the cap: decoded.
        let buf = empty_names(MAX_ENTRIES);
        assert_eq!(Reader::new(&buf).strings().unwrap().len(), MAX_ENTRIES);
        // One more: refused before a string is made, naming the cap.
        let buf = empty_names(MAX_ENTRIES + 1);
        let err = Reader::new(&buf).strings().unwrap_err();
        assert!(err.0.contains(&MAX_ENTRIES.to_string()), "{err}");
        // The cap is the record's, not each vector's: two halves and one more.
        let mut two = empty_names(MAX_ENTRIES / 2);
        two.extend(empty_names(MAX_ENTRIES / 2 + 1));
        let mut r = Reader::new(&two);
        assert_eq!(r.strings().unwrap().len(), MAX_ENTRIES / 2);
        assert!(r.strings().is_err());
        // ACL entries and identities count the same way.
        let mut acls = Writer::default();
        acls.int(MAX_ENTRIES as i32 + 1);
        acls.buf.resize(4 + 12 * (MAX_ENTRIES + 1), 0);
        let err = Reader::new(&acls.buf).acls().unwrap_err();
        assert!(err.0.contains("entries in one reply"), "{err}");
        let mut ids = Writer::default();
        ids.int(MAX_ENTRIES as i32 + 1);
        ids.buf.resize(4 + 8 * (MAX_ENTRIES + 1), 0);
        assert!(Reader::new(&ids.buf).identities().is_err());
        // A listing read in place decodes nothing: only its bytes bound it.
        let names = Names::check(RawReply::of_body(empty_names(MAX_ENTRIES + 1))).unwrap();
        assert_eq!(names.iter().count(), MAX_ENTRIES + 1);
    }

    #[test]
    fn a_multi_reply_with_more_results_than_ops_is_malformed() {
        // Two delete results and the end marker, for a multi of one op.
        let mut w = Writer::default();
        for _ in 0..2 {
            w.int(op::DELETE).bool(false).int(0);
        }
        w.int(-1).bool(true).int(-1);
        let ops = [("delete", "/a".to_string())];
        let raw = RawReply::of_body(w.buf.clone());
        match decode_multi(&raw, "", &ops) {
            Err(Error::Malformed { reason, .. }) => {
                assert!(reason.contains("more results than the 1 ops"), "{reason}")
            }
            r => panic!("{r:?}"),
        }
        // As many results as ops: decoded.
        let two = [("delete", "/a".to_string()), ("delete", "/b".to_string())];
        assert_eq!(decode_multi(&raw, "", &two).unwrap().len(), 2);
    }

    #[test]
    fn a_connect_responses_debug_redacts_the_session_password() {
        let r = ConnectResponse {
            timeout_ms: 4000,
            session_id: 0x1234,
            passwd: vec![0xde, 0xad, 0xbe, 0xef],
        };
        let shown = format!("{r:?}");
        assert!(
            shown.contains("0x1234") && shown.contains("<redacted>"),
            "{shown}"
        );
        assert!(!shown.contains("222, 173"), "{shown}");
    }

    #[test]
    fn a_listing_is_read_in_place_and_checked_for_bounds() {
        let mut w = Writer::default();
        w.int(3).string("_c_a-lock-0000000001");
        w.buffer(&[0xff, 0xfe]);
        w.string("x-0000000002");
        let names = Names::check(RawReply::of_body(w.buf.clone())).unwrap();
        let got: Vec<&str> = names.iter().collect();
        assert_eq!(
            got,
            vec!["_c_a-lock-0000000001", "\u{FFFD}", "x-0000000002"]
        );
        // A name that runs past the end, or a count larger than the body: malformed.
        let mut w = Writer::default();
        w.int(2).string("ok-0000000001").int(50);
        assert!(Names::check(RawReply::of_body(w.buf.clone())).is_err());
        let mut w = Writer::default();
        w.int(1000).string("ok-0000000001");
        assert!(Names::check(RawReply::of_body(w.buf.clone())).is_err());
    }

    #[test]
    fn round_trip_primitives() -> DecodeResult<()> {
        let mut w = Writer::default();
        w.int(-7)
            .long(1 << 40)
            .bool(true)
            .string("/a/b")
            .buffer(&[1, 2, 3]);
        w.strings(&["x".to_string(), "yz".to_string()]);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.int()?, -7);
        assert_eq!(r.long()?, 1 << 40);
        assert!(r.bool()?);
        assert_eq!(r.string()?, "/a/b");
        assert_eq!(r.buffer()?, vec![1, 2, 3]);
        assert_eq!(r.strings()?, vec!["x", "yz"]);
        assert_eq!(r.remaining(), 0);
        Ok(())
    }

    #[test]
    fn truncated_and_hostile_input_is_an_error() -> DecodeResult<()> {
        assert!(Reader::new(&[0, 0, 0]).int().is_err());
        // A buffer claiming 1000 bytes with 2 present.
        let mut w = Writer::default();
        w.int(1000).int(0);
        assert!(Reader::new(&w.buf).buffer().is_err());
        // A vector claiming 2^31-1 elements.
        let mut w = Writer::default();
        w.int(i32::MAX);
        assert!(Reader::new(&w.buf).strings().is_err());
        // Invalid UTF-8 in a string.
        let mut w = Writer::default();
        w.buffer(&[0xff, 0xfe]);
        assert!(Reader::new(&w.buf).string().is_err());
        // Null buffer reads as empty.
        let mut w = Writer::default();
        w.int(-1);
        assert_eq!(Reader::new(&w.buf).buffer()?, Vec::<u8>::new());
        assert!(decode_connect_response(&[1, 2, 3]).is_err());
        Ok(())
    }

    #[test]
    fn frame_length_prefix() {
        let f = request_frame(5, op::EXISTS, &[9, 9]);
        assert_eq!(&f[..4], &10u32.to_be_bytes());
        assert_eq!(f.len(), 14);
    }

    #[test]
    fn set_watches_split_into_bounded_frames() -> DecodeResult<()> {
        let paths: Vec<String> = (0..20_000)
            .map(|i| format!("/some/long/path/{i:08}"))
            .collect();
        let frames = set_watches_frames(42, &paths, &[], &paths[..10]);
        assert!(frames.len() > 1);
        let mut seen = 0;
        for f in &frames {
            assert!(f.len() < 140 * 1024);
            let mut r = Reader::new(&f[4..]);
            assert_eq!(r.int()?, xid::SET_WATCHES);
            assert_eq!(r.int()?, op::SET_WATCHES);
            assert_eq!(r.long()?, 42);
            seen += r.strings()?.len();
            seen += r.strings()?.len();
            seen += r.strings()?.len();
        }
        assert_eq!(seen, 20_010);
        Ok(())
    }
}
