//! The ZooKeeper frames in a server's bytes to a client, as the proxy forwards them: where
//! each notification ends, so that [`FaultProxy::cut_after_next_notification`] can close a
//! connection right after one (`super::FaultProxy`).
//!
//! Every frame a server sends a client is a 4-byte big-endian length and that many bytes:
//! the first the handshake's reply (it opens with the protocol version, 0), every later one
//! a reply header whose first field is the xid, -1 for a notification. Bytes that are not
//! ZooKeeper's (an election connection, TLS) are tracked as frames all the same and simply
//! never show a notification where a cut is wanted; a cut is for plaintext client
//! connections.

/// The xid of a notification (a watch event).
const NOTIFICATION_XID: i32 = -1;

/// Where the frames of one connection's server-to-client bytes stand.
#[derive(Debug, Default)]
pub(super) struct Frames {
    /// The current frame's length (4 bytes), then the first 4 bytes of its body (the xid).
    head: [u8; 8],
    /// How many bytes of `head` are in.
    have: usize,
    /// The bytes of the current frame's body not yet seen (once its length is in).
    left: usize,
}

impl Frames {
    /// Takes the next `chunk` of the stream; returns the offset in it just past the first
    /// notification frame that ends in it, if any.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Option<usize> {
        let mut found = None;
        let mut pos = 0;
        while pos < chunk.len() {
            if self.have < 4 {
                let n = (4 - self.have).min(chunk.len() - pos);
                self.head[self.have..self.have + n].copy_from_slice(&chunk[pos..pos + n]);
                self.have += n;
                pos += n;
                if self.have == 4 {
                    let len = i32::from_be_bytes([
                        self.head[0],
                        self.head[1],
                        self.head[2],
                        self.head[3],
                    ]);
                    self.left = usize::try_from(len).unwrap_or(0);
                    if self.left == 0 {
                        self.have = 0;
                    }
                }
                continue;
            }
            let take = self.left.min(chunk.len() - pos);
            let into_head = (8 - self.have).min(take);
            self.head[self.have..self.have + into_head]
                .copy_from_slice(&chunk[pos..pos + into_head]);
            self.have += into_head;
            self.left -= take;
            pos += take;
            if self.left == 0 {
                let xid =
                    i32::from_be_bytes([self.head[4], self.head[5], self.head[6], self.head[7]]);
                if self.have == 8 && xid == NOTIFICATION_XID && found.is_none() {
                    found = Some(pos);
                }
                self.have = 0;
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame: its length, then `xid` and `rest` as its body.
    fn frame(xid: i32, rest: &[u8]) -> Vec<u8> {
        let mut body = xid.to_be_bytes().to_vec();
        body.extend_from_slice(rest);
        let mut f = (body.len() as i32).to_be_bytes().to_vec();
        f.extend(body);
        f
    }

    #[test]
    fn finds_the_end_of_the_first_notification_in_a_chunk() {
        let reply = frame(7, &[0; 12]);
        let note = frame(NOTIFICATION_XID, &[1; 20]);
        let mut stream = reply.clone();
        stream.extend(&note);
        stream.extend(frame(NOTIFICATION_XID, &[2; 20]));
        let mut f = Frames::default();
        assert_eq!(f.feed(&stream), Some(reply.len() + note.len()));
        // The next frame starts clean: a ping's reply, then nothing.
        assert_eq!(f.feed(&frame(-2, &[0; 12])), None);
    }

    #[test]
    fn follows_frames_split_anywhere_across_chunks() {
        let mut stream = frame(0, &[0; 30]); // the handshake's reply opens with version 0
        stream.extend(frame(3, &[9; 5]));
        let end = {
            stream.extend(frame(NOTIFICATION_XID, b"event"));
            stream.len()
        };
        stream.extend(frame(NOTIFICATION_XID, b"second"));
        for cut in 1..stream.len() {
            let mut f = Frames::default();
            let (a, b) = stream.split_at(cut);
            let found = f.feed(a).or_else(|| f.feed(b).map(|p| p + cut));
            assert_eq!(found, Some(end), "split at {cut}");
        }
        // One byte at a time.
        let mut f = Frames::default();
        let first = (0..stream.len()).find(|&i| f.feed(&stream[i..=i]).is_some());
        assert_eq!(first, Some(end - 1));
    }

    #[test]
    fn an_empty_frame_or_a_short_body_is_no_notification() {
        let mut f = Frames::default();
        let mut stream = 0i32.to_be_bytes().to_vec(); // an empty frame
        stream.extend(2i32.to_be_bytes());
        stream.extend([0xff, 0xff]); // two bytes of body: no whole xid
        assert_eq!(f.feed(&stream), None);
        assert_eq!(f.feed(&frame(NOTIFICATION_XID, &[])), Some(8));
    }
}
