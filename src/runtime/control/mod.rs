//! The control plane of a multi-process run: a small UDP side channel between the coordinator
//! (the `ftcoll bench --procs` parent on 127.0.0.1, or rank 0 of a launcher-started run at
//! its `--join` address) and each node process. With `--join` it is also the rendezvous:
//! every node sends its data address ([`crate::wire::control::Msg::Join`]) and receives the whole table, with the
//! run's LogP unit, in table datagrams ([`crate::wire::join`]); over verbs the coordinator then
//! relays each rank's QP connection data to its peers ([`crate::wire::conn_relay`]). Nodes
//! report per operation what the in-process cluster reads from shared
//! atomics; the parent tells the root which operations it may start and everyone which are
//! over. Reports are idempotent and re-sent periodically, so a lost datagram only delays.
//! Every datagram is sealed ([`crate::wire::mac`]) and validated (magic, version, job, type,
//! rank, exact length: [`crate::wire::control`]); the invalid ones are counted and dropped.
//!
//! Keys. A `--procs` run's control plane is sealed with the run's session key (the children
//! get it in their key file). A launched run (`--join`) starts with a challenge–response under
//! the job's long-term key, so that nothing recorded in an earlier run with the same key
//! verifies: the node knocks with a fresh nonce of its own ([`Msg::Knock`], long-term key);
//! the coordinator answers with its challenge, a fresh nonce and the run's nonce
//! ([`Msg::Challenge`], sealed with [`challenge_key`] over the knock's nonce, so a recorded
//! challenge does not verify at a node); the node's hello ([`Msg::Join`], its data address) is
//! sealed with [`hello_key`] over both nonces; every later datagram, both ways, with the
//! run's session key ([`AuthKey::session`]). A knock changes nothing at the coordinator but
//! draws its challenge; a hello of another run is refused and counted
//! ([`ParentAgent::refused_hellos`]).
//!
//! [`Msg::Knock`]: crate::wire::control::Msg::Knock
//! [`Msg::Challenge`]: crate::wire::control::Msg::Challenge
//! [`Msg::Join`]: crate::wire::control::Msg::Join
//!
//! - [`child`]: the node process's [`ChildAgent`] (join, connection data, reports, commands);
//! - [`clock`]: its clock offset to the coordinator (Cristian's method);
//! - [`parent`]: the coordinator's [`ParentAgent`].

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::wire::mac::AuthKey;

pub mod child;
pub mod clock;
pub mod parent;

pub use child::ChildAgent;
pub use parent::ParentAgent;

/// `MAC(long_term, label ‖ parts)` as a key (`None` without a key: the run is unauthenticated).
fn derived(long_term: Option<&AuthKey>, label: &[u8], parts: &[&[u8; 16]]) -> Option<AuthKey> {
    long_term.map(|k| {
        let mut all: Vec<&[u8]> = vec![label];
        all.extend(parts.iter().map(|p| &p[..]));
        AuthKey::from_bytes(k.tag(&all))
    })
}

/// The key of the coordinator's challenge to the node that knocked with `knock`.
pub fn challenge_key(long_term: Option<&AuthKey>, knock: &[u8; 16]) -> Option<AuthKey> {
    derived(long_term, b"ftcoll control challenge", &[knock])
}

/// The key of a node's hello answering the challenge `nonce` of run `run`.
pub fn hello_key(long_term: Option<&AuthKey>, nonce: &[u8; 16], run: &[u8; 16]) -> Option<AuthKey> {
    derived(long_term, b"ftcoll control hello", &[nonce, run])
}

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
