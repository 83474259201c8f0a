//! Free loopback ports for the servers.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::{fs, io};

use parking_lot::Mutex;

use super::other;

/// Ports handed out by this process, never handed out twice.
pub(super) static HANDED_OUT: Mutex<BTreeSet<u16>> = parking_lot::const_mutex(BTreeSet::new());

/// The first port of the kernel's ephemeral range (source ports of outgoing connections).
pub(super) fn ephemeral_low() -> u16 {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32768)
}

/// A loopback port that is free now and was never handed out before in this process.
///
/// Ports come from below the kernel's ephemeral range, so a server that is stopped for a
/// while cannot find its port taken by the source port of some client connection when
/// it is restarted. Falls back to asking the kernel (`127.0.0.1:0`) when that range is
/// too small.
pub(crate) fn free_port() -> io::Result<u16> {
    const LOW: u16 = 10_000;
    let high = ephemeral_low();
    let mut handed = HANDED_OUT.lock();
    if high > LOW + 1000 {
        let span = u128::from(high - LOW);
        for _ in 0..200 {
            let port = LOW + (uuid::Uuid::new_v4().as_u128() % span) as u16;
            if handed.contains(&port) {
                continue;
            }
            if TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok() {
                handed.insert(port);
                return Ok(port);
            }
        }
    }
    for _ in 0..200 {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        if handed.insert(port) {
            return Ok(port);
        }
    }
    Err(other(
        "could not find a free loopback TCP port that was not handed out before".to_string(),
    ))
}

/// The `n` loopback ports from `first` on, checked free now (an `AddrInUse` error names a
/// taken one); [`free_port`] never hands them out afterwards.
pub(super) fn fixed_ports(first: u16, n: usize) -> io::Result<Vec<u16>> {
    let ports: Vec<u16> = (0..n).map_while(|i| first.checked_add(i as u16)).collect();
    for &port in &ports {
        TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("client port {port} on 127.0.0.1 is not free: {e}"),
            )
        })?;
    }
    HANDED_OUT.lock().extend(&ports);
    Ok(ports)
}
