//! Four-letter words: asking a server what it is doing.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::ms;

/// Sends a four-letter command and reads the reply to EOF, all within `timeout`.
pub(crate) fn four_letter_at(addr: SocketAddr, cmd: &str, timeout: Duration) -> io::Result<String> {
    let deadline = Instant::now() + timeout;
    let timed_out = |stage: &str| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "four-letter command `{cmd}` to {addr} timed out after {} ms ({stage})",
                ms(timeout)
            ),
        )
    };
    let remaining = |stage: &str| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| timed_out(stage))
    };
    let mut stream = TcpStream::connect_timeout(&addr, remaining("connecting")?).map_err(|e| {
        if matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        ) {
            timed_out("connecting")
        } else {
            io::Error::new(
                e.kind(),
                format!("four-letter command `{cmd}`: cannot connect to {addr}: {e}"),
            )
        }
    })?;
    stream.set_write_timeout(Some(remaining("writing")?))?;
    stream.write_all(cmd.as_bytes()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("four-letter command `{cmd}` to {addr}: write failed: {e}"),
        )
    })?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        stream.set_read_timeout(Some(remaining("reading the reply")?))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(timed_out("reading the reply"));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("four-letter command `{cmd}` to {addr}: read failed: {e}"),
                ))
            }
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// The `Mode:` of a `srvr` reply (`standalone`, `leader`, `follower`, `observer`).
pub(super) fn parse_mode(srvr: &str) -> Option<&str> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(str::trim)
}

/// The release of a `srvr` reply's `Zookeeper version: 3.6.3--6401e4a…, built on …` line, as
/// `(major, minor, patch)`.
pub(super) fn parse_version(srvr: &str) -> Option<(u32, u32, u32)> {
    let v = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version:"))?
        .trim();
    let release = v.split(['-', ',', ' ']).next()?;
    let mut parts = release.split('.').map(|n| n.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

pub(super) fn is_serving_mode(mode: &str) -> bool {
    matches!(mode, "standalone" | "leader" | "follower" | "observer")
}
