//! Four-letter words: asking a server what it is doing.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::admin::{self, AdminError};

/// The most a test reads of one reply: `wchc`/`wchp` of a test with thousands of long
/// watched paths go well past [`admin::MAX_REPLY`].
const TEST_REPLY_LIMIT: usize = 256 << 20;

/// Sends a four-letter command and reads the reply to EOF, all within `timeout`
/// ([`crate::admin::four_letter_up_to`], up to 256 MiB); a refused word's reply ("… is not
/// in the whitelist") is returned as the server sent it.
pub(crate) fn four_letter_at(addr: SocketAddr, cmd: &str, timeout: Duration) -> io::Result<String> {
    match admin::four_letter_up_to(addr, cmd, timeout, TEST_REPLY_LIMIT) {
        Ok(reply) | Err(AdminError::NotAllowed { reply, .. }) => Ok(reply),
        Err(e) => {
            let kind = match &e {
                AdminError::NoAnswer { .. } => io::ErrorKind::TimedOut,
                AdminError::Connect { source, .. } | AdminError::Io { source, .. } => source.kind(),
                AdminError::InvalidWord { .. } => io::ErrorKind::InvalidInput,
                _ => io::ErrorKind::Other,
            };
            Err(io::Error::new(
                kind,
                format!("four-letter command `{}`: {e}", crate::escape(cmd)),
            ))
        }
    }
}
