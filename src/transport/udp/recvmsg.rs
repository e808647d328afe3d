//! `recvmsg(2)` with ancillary data, shared by the ICMP error queue (`icmp.rs`) and the
//! receive timestamps (`rx_stamp.rs`): one datagram (or queued error), its address, and each
//! control message handed to a visitor.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

/// One control message: level, type and its data bytes.
pub struct Cmsg<'a> {
    pub level: libc::c_int,
    pub kind: libc::c_int,
    pub data: &'a [u8],
}

impl Cmsg<'_> {
    /// The data as a `T`, when it holds at least one.
    ///
    /// # Safety
    /// `T` must be a plain C struct (every bit pattern valid), the one this control message's
    /// level and type carry.
    pub unsafe fn read<T: Copy>(&self) -> Option<T> {
        // SAFETY: the length is checked and the read is unaligned; validity is the caller's.
        (self.data.len() >= std::mem::size_of::<T>())
            .then(|| unsafe { std::ptr::read_unaligned(self.data.as_ptr().cast()) })
    }
}

/// Sets an integer socket option to 1; false when the kernel refuses it.
pub fn enable_option(socket: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: the descriptor is the live socket borrowed for the call; the kernel reads
    // exactly `size_of::<c_int>()` bytes from a live local.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// Reads one datagram into `data` with `flags` (add `MSG_DONTWAIT` to never block): its
/// length and source address (`None` for an unknown family), after handing every control
/// message to `visit`.
pub fn recv(
    socket: &impl AsRawFd,
    data: &mut [u8],
    flags: libc::c_int,
    visit: &mut dyn FnMut(Cmsg<'_>),
) -> io::Result<(usize, Option<SocketAddr>)> {
    // SAFETY (both `zeroed`): sockaddr_storage and msghdr are plain C structs for which
    // all-zero bytes are a valid value.
    let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
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
    // SAFETY: every pointer in `msg` points into a live buffer of the length given alongside;
    // the kernel writes only within those lengths.
    let r = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, flags) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within
    // `msg_controllen`; each message's data slice ends at its own `cmsg_len`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            let start = libc::CMSG_DATA(c);
            let len = (h.cmsg_len as usize).saturating_sub(start.offset_from(c.cast::<u8>()) as usize);
            visit(Cmsg {
                level: h.cmsg_level,
                kind: h.cmsg_type,
                data: std::slice::from_raw_parts(start, len),
            });
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((r as usize, sockaddr_to_addr(&name)))
}

fn sockaddr_to_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
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
