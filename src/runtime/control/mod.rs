//! The control plane of a multi-process run: a small UDP side channel between the coordinator
//! (the `ftcoll bench --procs` parent on 127.0.0.1, or rank 0 of a launcher-started run at
//! its `--join` address) and each node process. With `--join` it is also the rendezvous:
//! every node sends its data address ([`crate::wire::control::Msg::Join`]) and receives the whole table, with the
//! run's LogP unit, in table datagrams ([`crate::wire::join`]); over verbs the coordinator then
//! relays each rank's QP connection data to its peers ([`crate::wire::conn_relay`]). Nodes
//! report per operation what the in-process cluster reads from shared
//! atomics; the parent tells the root which operations it may start and everyone which are
//! over. Reports are idempotent and re-sent periodically, so a lost datagram only delays.
//! Every datagram is sealed with the job key ([`crate::wire::mac`]) and validated (magic,
//! version, job, type, rank, exact length: [`crate::wire::control`]); the invalid ones are
//! counted and dropped.
//!
//! - [`child`]: the node process's [`ChildAgent`] (join, connection data, reports, commands);
//! - [`clock`]: its clock offset to the coordinator (Cristian's method);
//! - [`parent`]: the coordinator's [`ParentAgent`].

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

pub mod child;
pub mod clock;
pub mod parent;

pub use child::ChildAgent;
pub use parent::ParentAgent;

/// A blocking receive on a non-blocking socket, until `deadline` at the latest.
fn recv_within(sock: &UdpSocket, buf: &mut [u8], deadline: Instant) -> std::io::Result<(usize, SocketAddr)> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_micros(1));
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(left))?;
    let r = sock.recv_from(buf);
    sock.set_nonblocking(true)?;
    r
}

/// Blocks until `sock` has a datagram or `timeout` passed (leaves it non-blocking).
fn wait_readable(sock: &UdpSocket, timeout: Duration) {
    if sock.set_nonblocking(false).is_ok()
        && sock
            .set_read_timeout(Some(timeout.max(Duration::from_micros(1))))
            .is_ok()
    {
        let _ = sock.peek_from(&mut [0u8; 1]);
    }
    let _ = sock.set_nonblocking(true);
}

#[cfg(test)]
mod tests;
