//! Frames on the wire: splitting the byte stream into length-prefixed frames.

use std::io::{self, Read};
use std::time::Instant;

use super::link::Link;
use crate::client::proto::{self, Malformed};

/// A read that timed out (or was interrupted): nothing wrong with the connection.
pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Splits a byte stream into length-prefixed frames, tolerating read timeouts mid-frame.
/// Reads into one reused buffer (`buf[start..end]` holds the unread bytes).
///
/// A reply over the size limit is not kept: its header (xid, zxid, error code) comes out as
/// a frame of its own whose error code is [`proto::code::REPLY_TOO_LARGE`], and the rest of
/// it is read and dropped. Only the request it answers fails; the connection, and every
/// other request on it, goes on (a client that dropped the connection instead would send the
/// same request again after reconnecting, and again).
pub(crate) struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The largest frame kept.
    max: usize,
    /// Bytes of an oversized frame still to drop.
    skip: usize,
}

/// The buffer's size to begin with.
const INITIAL: usize = 64 * 1024;

/// A reply's header: xid (4 bytes), zxid (8), error code (4).
const REPLY_HEADER: usize = 16;

impl FrameReader {
    /// A reader that keeps frames of up to `max` bytes.
    pub fn new(max: usize) -> FrameReader {
        FrameReader {
            buf: vec![0; INITIAL],
            start: 0,
            end: 0,
            // A reply over the limit keeps its header: the limit is at least that.
            max: max.max(REPLY_HEADER),
            skip: 0,
        }
    }

    /// Drops what is buffered of an oversized frame; whether any of it is still to come.
    fn skipping(&mut self) -> bool {
        let n = self.skip.min(self.end - self.start);
        self.start += n;
        self.skip -= n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        self.skip > 0
    }

    /// Reads what is available into the buffer.
    pub fn fill(&mut self, stream: &mut impl Read) -> io::Result<usize> {
        if self.end == self.buf.len() {
            // Move the unread bytes to the front; grow if a frame is larger than the buffer.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                // To the frame's own size when its length is known (a 64 MiB reply takes
                // 64 MiB, not the 128 of a doubled buffer), else twice the size.
                let grown = match self.announced() {
                    Some(want) if want > self.buf.len() => want,
                    _ => self.buf.len() * 2,
                };
                self.buf.resize(grown, 0);
            }
        }
        let n = stream.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// The whole size (prefix included) of the frame the buffer starts with, if its
    /// length is read and within the limit.
    fn announced(&self) -> Option<usize> {
        let avail = &self.buf[self.start..self.end];
        let len = i32::from_be_bytes(avail.get(..4)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        (len <= self.max).then_some(4 + len)
    }

    /// Takes one complete frame off the buffer, if there is one.
    pub fn pop(&mut self) -> std::result::Result<Option<Vec<u8>>, Malformed> {
        if self.skip > 0 && self.skipping() {
            return Ok(None);
        }
        let avail = &self.buf[self.start..self.end];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
        if len < 0 {
            return Err(Malformed(format!("frame length {len}")));
        }
        let len = len as usize;
        if len > self.max {
            if avail.len() < 4 + REPLY_HEADER {
                return Ok(None);
            }
            let mut header = avail[4..4 + REPLY_HEADER].to_vec();
            header[12..16].copy_from_slice(&proto::code::REPLY_TOO_LARGE.to_be_bytes());
            log::warn!(
                "zkguard: a {len}-byte reply is over the client's {}-byte limit \
                 (ClientBuilder::max_reply_size); dropping it, and failing its request",
                self.max
            );
            self.start += 4 + REPLY_HEADER;
            self.skip = len - REPLY_HEADER;
            self.skipping();
            return Ok(Some(header));
        }
        if avail.len() < 4 + len {
            return Ok(None);
        }
        if self.start == 0 && self.end == 4 + len && len > INITIAL {
            // A large frame that is the whole buffer: handed out as it is, not copied (no
            // second 64 MiB), and the reader starts again with a small buffer.
            let mut frame = std::mem::replace(&mut self.buf, vec![0; INITIAL]);
            frame.drain(..4);
            self.end = 0;
            return Ok(Some(frame));
        }
        let frame = avail[4..4 + len].to_vec();
        self.start += 4 + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(Some(frame))
    }

    /// Reads until one frame is complete or the deadline passes.
    pub(super) fn read_frame_by(
        &mut self,
        stream: &Link,
        deadline: Instant,
    ) -> io::Result<Vec<u8>> {
        loop {
            match self.pop() {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(m) => return Err(io::Error::new(io::ErrorKind::InvalidData, m.0)),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no reply before the attempt's deadline",
                ));
            }
            stream.set_read_timeout(Some(left))?;
            match self.fill(&mut &*stream) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ))
                }
                Ok(_) => {}
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_reads() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut fr = FrameReader::new(proto::MAX_FRAME);
        let mut data: Vec<u8> = Vec::new();
        data.extend_from_slice(&3u32.to_be_bytes());
        data.extend_from_slice(&[1, 2, 3]);
        data.extend_from_slice(&0u32.to_be_bytes());
        data.extend_from_slice(&2u32.to_be_bytes());
        data.extend_from_slice(&[9]);
        fr.fill(&mut &data[..])?;
        assert_eq!(fr.pop()?, Some(vec![1, 2, 3]));
        assert_eq!(fr.pop()?, Some(vec![]));
        assert_eq!(fr.pop()?, None);
        fr.fill(&mut &[8u8][..])?;
        assert_eq!(fr.pop()?, Some(vec![9, 8]));
        Ok(())
    }

    /// A frame larger than the buffer grows it to the frame's size, never twice that, and
    /// is handed out whole; the reader then starts small again.
    #[test]
    fn a_large_frame_takes_its_own_size_once() -> std::result::Result<(), Box<dyn std::error::Error>>
    {
        let len = 3 * INITIAL + 5;
        let mut data = (len as u32).to_be_bytes().to_vec();
        data.extend((0..len).map(|i| i as u8));
        let mut fr = FrameReader::new(proto::MAX_FRAME);
        let mut rest = &data[..];
        let frame = loop {
            if let Some(f) = fr.pop()? {
                break f;
            }
            // In pieces of 10 KiB, as a socket delivers them.
            let mut piece = &rest[..rest.len().min(10 * 1024)];
            let n = fr.fill(&mut piece)?;
            rest = &rest[n..];
            assert!(fr.buf.len() <= (4 + len).max(INITIAL), "{}", fr.buf.len());
        };
        assert_eq!(frame.len(), len);
        assert_eq!(frame, data[4..]);
        assert_eq!(fr.buf.len(), INITIAL);
        // The stream goes on.
        fr.fill(&mut &[0, 0, 0, 1, 7][..])?;
        assert_eq!(fr.pop()?, Some(vec![7]));
        Ok(())
    }

    #[test]
    fn hostile_frame_lengths_are_errors() -> io::Result<()> {
        let mut fr = FrameReader::new(proto::MAX_FRAME);
        fr.fill(&mut &(-5i32).to_be_bytes()[..])?;
        assert!(fr.pop().is_err());
        let mut fr = FrameReader::new(proto::MAX_FRAME);
        fr.fill(&mut &i32::MIN.to_be_bytes()[..])?;
        assert!(fr.pop().is_err());
        Ok(())
    }

    #[test]
    fn an_oversized_reply_leaves_its_header_and_the_stream_goes_on(
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut fr = FrameReader::new(20);
        let mut data: Vec<u8> = Vec::new();
        // A 40-byte reply: xid 7, zxid 9, error 0, then 24 bytes of body.
        data.extend_from_slice(&40u32.to_be_bytes());
        data.extend_from_slice(&7i32.to_be_bytes());
        data.extend_from_slice(&9i64.to_be_bytes());
        data.extend_from_slice(&0i32.to_be_bytes());
        data.extend_from_slice(&[0xaa; 24]);
        // Then a small frame.
        data.extend_from_slice(&2u32.to_be_bytes());
        data.extend_from_slice(&[1, 2]);
        // Fed in small pieces, as a socket may.
        let mut got = Vec::new();
        for chunk in data.chunks(7) {
            fr.fill(&mut &chunk[..])?;
            while let Some(f) = fr.pop()? {
                got.push(f);
            }
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(&got[0][..4], &7i32.to_be_bytes());
        assert_eq!(&got[0][4..12], &9i64.to_be_bytes());
        assert_eq!(&got[0][12..], &proto::code::REPLY_TOO_LARGE.to_be_bytes());
        assert_eq!(got[1], vec![1, 2]);
        Ok(())
    }
}
