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
pub(crate) struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        }
    }
}

impl FrameReader {
    /// Reads what is available into the buffer.
    pub fn fill(&mut self, stream: &mut impl Read) -> io::Result<usize> {
        if self.end == self.buf.len() {
            // Move the unread bytes to the front; grow if a frame is larger than the buffer.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = stream.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Takes one complete frame off the buffer, if there is one.
    pub fn pop(&mut self) -> std::result::Result<Option<Vec<u8>>, Malformed> {
        let avail = &self.buf[self.start..self.end];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
        if len < 0 || len as usize > proto::MAX_FRAME {
            return Err(Malformed(format!("frame length {len}")));
        }
        let len = len as usize;
        if avail.len() < 4 + len {
            return Ok(None);
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
        let mut fr = FrameReader::default();
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

    #[test]
    fn hostile_frame_lengths_are_errors() -> io::Result<()> {
        let mut fr = FrameReader::default();
        fr.fill(&mut &(-5i32).to_be_bytes()[..])?;
        assert!(fr.pop().is_err());
        let mut fr = FrameReader::default();
        fr.fill(&mut &(i32::MAX).to_be_bytes()[..])?;
        assert!(fr.pop().is_err());
        Ok(())
    }
}
