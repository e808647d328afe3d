//! A closed peer socket, detected at once: with `IP_RECVERR` the kernel queues the ICMP "port
//! unreachable" that a datagram to a dead process's port draws (on the same host, or from a
//! host whose process died but whose kernel lives), with the datagram's original destination.
//! The transport then suspects that peer immediately instead of after its retransmission
//! timeouts — but only a peer it has heard from before: a port that answered and is now
//! closed belongs to a process that died, while a port not yet bound at start-up is normal.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use super::recvmsg;

/// Asks the kernel to queue ICMP errors with their destination (`IP_RECVERR`, and
/// `IPV6_RECVERR` on an IPv6 socket). Best effort: without it, timeouts still detect.
pub fn enable(socket: &impl AsRawFd, v6: bool) {
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::IPPROTO_IP, libc::IP_RECVERR)
    };
    recvmsg::enable_option(socket, level, name);
}

/// One queued error: the destination of a datagram refused with "port unreachable", or
/// `None` for another error. `Err(WouldBlock)` when the queue is empty.
pub fn next_refused(socket: &impl AsRawFd) -> io::Result<Option<SocketAddr>> {
    let mut data = [0u8; 64];
    Ok(next_refused_quoting(socket, &mut data)?.map(|(addr, _)| addr))
}

/// As [`next_refused`], with the refused datagram as the error quotes it: its first bytes are
/// copied into `quoted` and their count returned. Linux quotes the whole payload of a datagram
/// refused on this host (and a remote Linux host up to 576 bytes of the packet); an error
/// forged by a third party can quote only what it saw or guessed.
pub fn next_refused_quoting(socket: &impl AsRawFd, quoted: &mut [u8]) -> io::Result<Option<(SocketAddr, usize)>> {
    let mut refused = false;
    let (len, addr) = recvmsg::recv(socket, quoted, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT, &mut |c| {
        let ours = (c.level == libc::IPPROTO_IP && c.kind == libc::IP_RECVERR)
            || (c.level == libc::IPPROTO_IPV6 && c.kind == libc::IPV6_RECVERR);
        // SAFETY: IP(V6)_RECVERR messages carry a sock_extended_err, a plain C struct.
        if let Some(e) = ours.then(|| unsafe { c.read::<libc::sock_extended_err>() }).flatten() {
            refused |= e.ee_errno == libc::ECONNREFUSED as u32;
        }
    })?;
    Ok(if refused {
        addr.map(|a| (a, len.min(quoted.len())))
    } else {
        None
    })
}
