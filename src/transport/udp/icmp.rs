//! A closed peer socket, detected at once: with `IP_RECVERR` the kernel queues the ICMP "port
//! unreachable" that a datagram to a dead process's port draws (on the same host, or from a
//! host whose process died but whose kernel lives), with the datagram's original destination.
//! The transport then suspects that peer immediately instead of after its retransmission
//! timeouts — but only a peer it has heard from before: a port that answered and is now
//! closed belongs to a process that died, while a port not yet bound at start-up is normal.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

/// Asks the kernel to queue ICMP errors with their destination (`IP_RECVERR`, and
/// `IPV6_RECVERR` on an IPv6 socket). Best effort: without it, timeouts still detect.
pub fn enable(socket: &impl AsRawFd, v6: bool) {
    let one: libc::c_int = 1;
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::IPPROTO_IP, libc::IP_RECVERR)
    };
    // SAFETY: the descriptor is the live socket borrowed for the call; `one` is a valid c_int
    // whose size is passed; the kernel only reads it.
    let _ = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// One queued error: the destination of a datagram refused with "port unreachable", or
/// `None` for another error. `Err(WouldBlock)` when the queue is empty.
pub fn next_refused(socket: &impl AsRawFd) -> io::Result<Option<SocketAddr>> {
    // SAFETY (all of `zeroed` here): sockaddr_storage, iovec and msghdr are plain C structs
    // for which all-zero bytes are a valid value.
    let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut data = [0u8; 64];
    let mut control = [0u64; 64];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: every pointer in `msg` points into a live local buffer of the length given
    // alongside; MSG_ERRQUEUE | MSG_DONTWAIT never blocks and only writes within them.
    let r = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut refused = false;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within
    // `msg_controllen`; each header's data is read with an unaligned read of exactly the
    // sock_extended_err it holds for IP(V6)_RECVERR.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            let ours = (h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_RECVERR)
                || (h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_RECVERR);
            if ours {
                let e: libc::sock_extended_err = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                refused |= e.ee_errno == libc::ECONNREFUSED as u32;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if !refused {
        return Ok(None);
    }
    Ok(to_addr(&name))
}

fn to_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large
            // enough and aligned for.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}
