//! The UDP socket of one endpoint: binding (socket2, large buffers, non-blocking), reads
//! (with kernel arrival stamps when a link delay is emulated), sends, the ICMP error queue,
//! and the blocking wait (epoll through mio, or `ppoll` under a millisecond).

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Protocol, Socket, Type};

use super::header::HEADER_LEN;
use super::link::{Link, Recv};
use super::{icmp, rx_stamp};

/// Requested SO_RCVBUF / SO_SNDBUF (the kernel caps it at its maximum, e.g. `rmem_max`).
pub(crate) const SOCKET_BUFFER: usize = 4 << 20;

/// A non-blocking UDP socket with large buffers, not yet bound.
pub(crate) fn new_socket(addr: &SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    // Best effort: the kernel caps these at its limits.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    Ok(socket)
}

/// Receive errors after which reading goes on.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
    )
}

/// A bound UDP socket as a [`Link`].
pub struct SocketLink {
    socket: UdpSocket,
    /// Read kernel arrival stamps (for the emulated link delay).
    stamps: bool,
    /// The kernel reported an ICMP error: read its queue at the next poll.
    errors_queued: bool,
    poll: Poll,
    events: Events,
}

impl SocketLink {
    /// Takes a bound socket; asks for ICMP errors (`v6`: an IPv6 socket) and, with `stamps`,
    /// for kernel arrival stamps.
    pub fn new(socket: Socket, v6: bool, stamps: bool) -> io::Result<Self> {
        let socket = UdpSocket::from_std(socket.into());
        icmp::enable(&socket, v6);
        if stamps {
            rx_stamp::enable(&socket);
        }
        Ok(SocketLink {
            socket,
            stamps,
            errors_queued: false,
            poll: Poll::new()?,
            events: Events::with_capacity(4),
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Hands `f` the destinations refused with "port unreachable" since the last call (see
    /// `udp/icmp.rs`), each with the refused datagram's first bytes as the error quotes them,
    /// if the kernel reported any error.
    pub fn take_refused(&mut self, f: &mut dyn FnMut(SocketAddr, &[u8])) {
        if !self.errors_queued {
            return;
        }
        self.errors_queued = false;
        // Bounded: the queue holds what the kernel kept (a few entries per refused send).
        for _ in 0..64 {
            let mut quoted = [0u8; HEADER_LEN];
            match icmp::next_refused_quoting(&self.socket, &mut quoted) {
                Ok(Some((addr, len))) => f(addr, &quoted[..len]),
                Ok(None) => {}
                Err(_) => break,
            }
        }
    }

    /// Blocks until the socket may be readable or `timeout` passed.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        if timeout < Duration::from_millis(1) {
            // epoll counts in milliseconds (mio rounds up): a timer due in 20 µs would sleep a
            // whole millisecond. ppoll takes a timespec and sleeps on a high-resolution timer.
            return crate::transport::ppoll::readable(std::os::fd::AsFd::as_fd(&self.socket), timeout).map(|_| ());
        }
        // Registered only while waiting: a registered socket costs ~0.2 µs more per arrival
        // (the epoll callback, measured on loopback), which busy polling should not pay.
        // Registration reports data already queued, so nothing is missed.
        let registry = self.poll.registry();
        registry.register(&mut self.socket, Token(0), Interest::READABLE)?;
        let waited = self.poll.poll(&mut self.events, Some(timeout));
        self.poll.registry().deregister(&mut self.socket)?;
        match waited {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => Err(e),
            _ => Ok(()),
        }
    }
}

impl SocketLink {
    /// [`SocketLink::wait`], woken also when `doorbell` is readable (ppoll on both, at any
    /// timeout).
    pub fn wait_or(&mut self, timeout: Duration, also: &[std::os::fd::BorrowedFd<'_>]) -> io::Result<()> {
        crate::transport::ppoll::any_readable(std::os::fd::AsFd::as_fd(&self.socket), also, timeout).map(|_| ())
    }

    /// The socket, for a wait on it beside other descriptors.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.socket)
    }
}

impl Link for SocketLink {
    #[inline]
    fn recv(&mut self, buf: &mut [u8], _now: Instant) -> io::Result<Recv> {
        let read = if self.stamps {
            rx_stamp::recv(&self.socket, buf)
        } else {
            self.socket.recv_from(buf).map(|(n, src)| (n, src, None))
        };
        match read {
            Ok((len, src, arrived)) => Ok(Recv::Datagram { len, src, arrived }),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Recv::Empty),
            // Signals, ICMP errors of earlier sends (some platforms): keep reading.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.errors_queued = true;
                Ok(Recv::Consumed)
            }
            Err(e) if transient(&e) => Ok(Recv::Consumed),
            Err(e) => Err(e),
        }
    }

    #[inline]
    fn send(&mut self, d: &[u8], to: SocketAddr) {
        // Errors (full socket buffer, unreachable) are losses: the RTO repairs them; a refusal
        // reported here leaves its details in the error queue, read by the next poll.
        if let Err(e) = self.socket.send_to(d, to)
            && e.kind() == io::ErrorKind::ConnectionRefused
        {
            self.errors_queued = true;
        }
    }
}
