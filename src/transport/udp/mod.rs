//! Reliable UDP: one non-blocking socket per node, busy-polled.
//!
//! Per peer, in each direction: sequence numbers (64-bit, never wrap), a cumulative ACK (the
//! next sequence expected) with a 64-bit selective-ACK bitmap of what arrived beyond the first
//! gap (the gap itself is the NACK: the sender retransmits the holes at once, at most once per
//! smoothed RTT), retransmission on an RFC 6298 timer (SRTT/RTTVAR, α = 1/8, β = 1/4, K = 4,
//! lower bound `rto_min`, exponential backoff, Karn's rule; on expiry the earliest packet and,
//! as TCP's go-back-N, the rest of the flight not SACKed nor sent within the expired RTO)
//! kept in a timer wheel advanced by
//! [`Transport::poll`], duplicate suppression, in-order delivery with a 64-slot reorder buffer,
//! and a bounded retransmit window. ACKs ride on DATA going the same way, or go alone, one per
//! peer per poll, `ack_delay` after the data they acknowledge where the link carries DATA
//! both ways, `ack_delay_one_way` where it carries DATA one way (at once when there is a gap
//! or a duplicate; [`reliable::TWO_WAY`]). Every buffer is allocated when the endpoint is
//! built: nothing on the message path.
//!
//! A peer that answers nothing to `max_retries` retransmissions in a row, and has been silent
//! longer than its adaptive bound (`stall_factor` × the longest stall it recently recovered
//! from, at most `silence_max`), is reported once as [`Delivery::Suspect`]; sends to it then
//! fail with [`SendError::Suspected`] and what it sends is dropped. The suspicion is enforced
//! (fail-stop, as ULFM's): the suspect is sent a FENCE (header kind 3), repeated
//! `fence_repeats` times and in answer to what it still sends; an endpoint that receives a
//! valid FENCE from a peer it does not suspect reports [`Delivery::Fenced`] and stops. An ICMP
//! "port unreachable" is a hint: the peer is probed (kind 4, an ACK asking for an ACK) and
//! suspected only if silent for `probe_timeout`. Each peer has its own window and timer, so a
//! silent peer stalls no one else. Every datagram is validated (address, magic, version, kind, length, job, ranks,
//! acknowledgement range) and dropped and counted when anything is wrong.
//!
//! Datagram = 64-byte header (little-endian) + payload:
//! `magic u32 | version u8 | kind u8 | payload len u16 | job u64 | from u32 | to u32 |
//!  seq u64 | ack u64 | sack u64 | tag [u8; 16]`; the `ack` field's top 16 bits say how long
//! the ACK was held, in µs, and each round-trip sample is taken less that hold (RFC 9002
//! §5.3; `header.rs`, `rto.rs`).
//!
//! With a job key ([`UdpConfig::auth`]) `tag` is the keyed MAC ([`auth`]) of the header's
//! first 48 bytes and the payload, and a datagram whose tag does not verify is dropped
//! (counted in `bad_mac`) before any of its fields is read; without a key it is zero and
//! ignored. Checks then run in this order, each counted by reason: sender address in the job
//! (`foreign`), lengths and kind (`malformed`), job id (`foreign_job`), ranks (`bad_rank`),
//! acknowledgement range (`malformed`).
//!
//! Layers, bottom up: [`link::Link`] (the socket, [`socket::SocketLink`], or the fault
//! injection wrapped around it, [`impair::Impaired`]); [`header`] (the datagram format);
//! [`reliable::Reliable`], the sans-IO reliability core ([`rto`], `timer_wheel`); and
//! [`UdpTransport`], the loop that moves datagrams between link and core.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use socket2::Socket;

use super::death_watch::DeathWatch;
use super::{Beat, Delivery, SendError, Transport, TransportStats};

mod config;
mod delay;
pub mod header;
pub mod impair;
pub mod link;
mod pump;
mod recvmsg;
pub mod reliable;
pub mod rto;
mod rx_stamp;
pub mod socket;
mod timer_wheel;

pub(crate) mod icmp;

pub mod auth;

#[cfg(test)]
mod tests;

pub use config::UdpConfig;
pub use header::{HEADER_LEN, MAGIC, MAX_DATAGRAM, TAG_AT, VERSION, seal};
pub use rto::RtoEstimator;

use impair::Impaired;
use link::{Link, Recv};
use pump::{receive, transmit};
use reliable::Reliable;
use socket::{SocketLink, new_socket};

/// Out-of-order packets buffered per sender (the width of the SACK bitmap).
const REORDER: u64 = 64;

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// The socket, read directly or through the fault injection.
enum UdpLink {
    Direct(SocketLink),
    Impaired(Impaired<SocketLink>),
}

impl UdpLink {
    fn socket(&self) -> &SocketLink {
        match self {
            UdpLink::Direct(s) => s,
            UdpLink::Impaired(l) => l.inner(),
        }
    }

    fn socket_mut(&mut self) -> &mut SocketLink {
        match self {
            UdpLink::Direct(s) => s,
            UdpLink::Impaired(l) => l.inner_mut(),
        }
    }
}

impl Link for UdpLink {
    #[inline]
    fn recv(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Recv> {
        match self {
            UdpLink::Direct(s) => s.recv(buf, now),
            UdpLink::Impaired(l) => l.recv(buf, now),
        }
    }

    #[inline]
    fn send(&mut self, d: &[u8], to: SocketAddr) {
        match self {
            UdpLink::Direct(s) => s.send(d, to),
            UdpLink::Impaired(l) => l.send(d, to),
        }
    }

    #[inline]
    fn take_held(&mut self, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
        match self {
            UdpLink::Direct(_) => None,
            UdpLink::Impaired(l) => l.take_held(buf),
        }
    }

    fn take_due(&mut self, buf: &mut [u8], now: Instant) -> Option<(usize, SocketAddr)> {
        match self {
            UdpLink::Direct(_) => None,
            UdpLink::Impaired(l) => l.take_due(buf, now),
        }
    }

    fn next_due(&self) -> Option<Instant> {
        match self {
            UdpLink::Direct(_) => None,
            UdpLink::Impaired(l) => l.next_due(),
        }
    }

    fn injected_losses(&self) -> u64 {
        match self {
            UdpLink::Direct(_) => 0,
            UdpLink::Impaired(l) => l.injected_losses(),
        }
    }
}

/// The reliable UDP endpoint of one rank.
///
/// Aligned to two cache lines: endpoints built together sit next to each other on the heap and
/// are then polled by different threads, and a line shared by the tail of one and the head of
/// the next costs each message a transfer between cores (measured: +0.1 µs one-way on
/// loopback, depending on which fields happened to land there).
#[repr(align(128))]
pub struct UdpTransport {
    // Fields drop in this order: the socket closes before the core's buffers are freed, so
    // that a dropped endpoint (a crash injected into a thread) refuses datagrams at once, as
    // a killed process's port does. Freeing the buffers first kept the port open for 110–250
    // µs after the crash in `agree --nodes 2 --kill 1@2500` on 2 shared cores (a temporary
    // print around the drop; docs/measurements.md, "Kill to the first successful agreement").
    link: UdpLink,
    core: Reliable,
    /// Receive buffer, one byte longer than the largest valid datagram (to see truncation).
    rbuf: Box<[u8]>,
    /// The last poll stopped before the socket was empty: more may be waiting.
    backlog: bool,
    /// Peers of this host whose processes died, told by their robust mutexes before their
    /// ports close ([`crate::transport::death_watch`]; `None`: not watched).
    deaths: Option<DeathWatch>,
}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("rank", &self.core.rank())
            .field("size", &self.core.size())
            .field("local_addr", &self.link.socket().local_addr().ok())
            .finish()
    }
}

impl UdpTransport {
    /// Binds `peers[rank]` and builds the endpoint of `rank` in the job whose rank `r` is at
    /// `peers[r]`. A port in use, a bad rank or duplicate addresses are errors.
    pub fn bind(rank: u32, peers: &[SocketAddr], cfg: UdpConfig) -> io::Result<Self> {
        let addr = peers
            .get(rank as usize)
            .ok_or_else(|| invalid("rank outside the peer list"))?;
        cfg.validate()?;
        let socket = new_socket(addr)?;
        socket.bind(&(*addr).into())?;
        Self::on_socket(rank, peers, cfg, socket)
    }

    /// A socket for an endpoint, bound at `addr` (port 0: the kernel's choice) and set up as
    /// [`UdpTransport::bind`] sets its own: kept by whoever chose the port until
    /// [`UdpTransport::from_socket`] builds the endpoint on it, so that nothing else can take
    /// the port in between.
    pub fn bind_socket(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
        let socket = new_socket(&addr)?;
        socket.bind(&addr.into())?;
        Ok(socket.into())
    }

    /// Reads the deaths of peers on this host at every poll
    /// ([`crate::transport::death_watch`]): each is suspected at once, as a peer silent past
    /// its retransmissions is (counted in `TransportStats::died_on_host`). A transport
    /// waiting in [`Transport::wait`] sees them when it wakes.
    pub fn watch_deaths(&mut self, deaths: DeathWatch) {
        self.deaths = Some(deaths);
    }

    /// Builds the endpoint of `rank` on `sock`, already bound at `peers[rank]` (best from
    /// [`UdpTransport::bind_socket`]).
    pub fn from_socket(rank: u32, sock: std::net::UdpSocket, peers: &[SocketAddr], cfg: UdpConfig) -> io::Result<Self> {
        peers
            .get(rank as usize)
            .ok_or_else(|| invalid("rank outside the peer list"))?;
        cfg.validate()?;
        sock.set_nonblocking(true)?;
        Self::on_socket(rank, peers, cfg, Socket::from(sock))
    }

    /// Builds the endpoint of `rank` on `socket`, already bound to `peers[rank]` (a rendezvous
    /// keeps the socket whose address it published: no other program can take the port
    /// between publishing and binding). A socket bound elsewhere is an error.
    pub fn from_bound(
        rank: u32,
        peers: &[SocketAddr],
        cfg: UdpConfig,
        socket: std::net::UdpSocket,
    ) -> io::Result<Self> {
        let addr = peers
            .get(rank as usize)
            .ok_or_else(|| invalid("rank outside the peer list"))?;
        cfg.validate()?;
        if socket.local_addr()? != *addr {
            return Err(invalid("the socket is not bound to this rank's address"));
        }
        let socket = Socket::from(socket);
        socket.set_nonblocking(true)?;
        let _ = socket.set_recv_buffer_size(socket::SOCKET_BUFFER);
        let _ = socket.set_send_buffer_size(socket::SOCKET_BUFFER);
        Self::on_socket(rank, peers, cfg, socket)
    }

    /// `n` endpoints on 127.0.0.1 with ports chosen by the kernel (tests, local clusters):
    /// every socket is bound first, then each endpoint is built knowing all the addresses.
    pub fn bind_ephemeral_local(n: u32, cfg: UdpConfig) -> io::Result<(Vec<SocketAddr>, Vec<UdpTransport>)> {
        cfg.validate()?;
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let mut sockets = Vec::with_capacity(n as usize);
        let mut addrs = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let socket = new_socket(&any)?;
            socket.bind(&any.into())?;
            let addr = socket
                .local_addr()?
                .as_socket()
                .ok_or_else(|| invalid("not an IP socket"))?;
            sockets.push(socket);
            addrs.push(addr);
        }
        let transports = sockets
            .into_iter()
            .enumerate()
            .map(|(rank, s)| Self::on_socket(rank as u32, &addrs, cfg.clone(), s))
            .collect::<io::Result<Vec<_>>>()?;
        Ok((addrs, transports))
    }

    fn on_socket(rank: u32, peers: &[SocketAddr], cfg: UdpConfig, socket: Socket) -> io::Result<Self> {
        let core = Reliable::new(rank, peers, cfg, Instant::now())?;
        let cfg = core.config();
        let socket = SocketLink::new(socket, peers[rank as usize].is_ipv6(), impair::delayed(cfg))?;
        let link = if impair::wanted(cfg) {
            UdpLink::Impaired(Impaired::new(socket, cfg, rank))
        } else {
            UdpLink::Direct(socket)
        };
        Ok(UdpTransport {
            core,
            link,
            rbuf: vec![0; MAX_DATAGRAM + 1].into_boxed_slice(),
            backlog: false,
            deaths: None,
        })
    }

    /// The address this endpoint is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.link.socket().local_addr()
    }

    /// The configuration.
    pub fn config(&self) -> &UdpConfig {
        self.core.config()
    }

    /// The RTO estimator towards `peer` (diagnostics, tests).
    pub fn rto_estimator(&self, peer: u32) -> Option<RtoEstimator> {
        self.core.rto_estimator(peer)
    }

    /// Processes `d` as if the socket had just returned it from `src`: the whole receive path
    /// without the kernel (fuzzing, tests).
    pub fn receive_datagram(
        &mut self,
        d: &[u8],
        src: SocketAddr,
        now: Instant,
        sink: &mut dyn FnMut(Delivery<'_>),
    ) -> usize {
        let delivered = self.core.on_datagram(d, src, now, sink);
        transmit(&mut self.core, &mut self.link);
        delivered
    }

    /// Whether `peer` is suspected.
    pub fn is_suspected(&self, peer: u32) -> bool {
        self.core.is_suspected(peer)
    }

    /// The peer whose FENCE stopped this endpoint, if one did.
    pub fn fenced_by(&self) -> Option<u32> {
        self.core.fenced_by()
    }
}

impl UdpTransport {
    /// How long a wait of at most `timeout` may block: `None` when there is work now (a
    /// backlog, a retransmission or an emulated arrival due), else until the next one is due.
    fn wait_for(&self, timeout: Duration) -> Option<Duration> {
        if self.backlog {
            return None;
        }
        let mut timeout = timeout;
        if let Some(due) = self.core.next_due() {
            timeout = timeout.min(due.saturating_duration_since(Instant::now()));
        }
        if let Some(due) = self.link.next_due() {
            timeout = timeout.min(due.saturating_duration_since(Instant::now()));
        }
        (!timeout.is_zero()).then_some(timeout)
    }
}

impl Transport for UdpTransport {
    fn rank(&self) -> u32 {
        self.core.rank()
    }

    fn size(&self) -> u32 {
        self.core.size()
    }

    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        let sent = self.core.send(to, bytes, now);
        transmit(&mut self.core, &mut self.link);
        sent
    }

    fn poll(&mut self, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> io::Result<usize> {
        // A death on this host first: the earliest and strongest evidence (a peer whose port
        // has closed since is then suspected for it, not for the ICMP error).
        if let Some(deaths) = &mut self.deaths {
            let core = &mut self.core;
            deaths.take(|p| core.on_died(p, now));
        }
        // One receive loop per kind of link, so that the socket's has no impairment in it.
        let (mut delivered, backlog, _) = match &mut self.link {
            UdpLink::Direct(s) => receive(&mut self.core, s, &mut self.rbuf, now, sink)?,
            UdpLink::Impaired(l) => receive(&mut self.core, l, &mut self.rbuf, now, sink)?,
        };
        self.backlog = backlog;
        let core = &mut self.core;
        self.link
            .socket_mut()
            .take_refused(&mut |addr, quoted| core.on_refused(addr, quoted, now));
        delivered += self.core.on_timers(now, sink);
        transmit(&mut self.core, &mut self.link);
        Ok(delivered)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        match self.wait_for(timeout) {
            Some(t) => self.link.socket_mut().wait(t),
            None => Ok(()),
        }
    }

    fn wait_or(&mut self, timeout: Duration, also: &[std::os::fd::BorrowedFd<'_>]) -> io::Result<()> {
        match self.wait_for(timeout) {
            Some(t) => self.link.socket_mut().wait_or(t, also),
            None => Ok(()),
        }
    }

    fn readiness(&self) -> Option<(std::os::fd::BorrowedFd<'_>, Option<Instant>)> {
        let due = match self.wait_for(Duration::MAX) {
            None => Some(Instant::now()),
            Some(t) => Instant::now().checked_add(t),
        };
        Some((self.link.socket().fd(), due))
    }

    fn stats(&self) -> TransportStats {
        TransportStats {
            injected_losses: self.link.injected_losses(),
            ..self.core.stats()
        }
    }

    fn unacked(&self) -> usize {
        self.core.unacked()
    }

    fn sent_marks(&self, marks: &mut Vec<u64>) {
        self.core.sent_marks(marks);
    }

    fn last_heard(&self, peer: u32) -> Option<Instant> {
        self.core.last_heard(peer)
    }

    fn acked_through(&self, marks: &[u64]) -> bool {
        self.core.acked_through(marks)
    }

    fn beat(&mut self, to: u32, now: Instant) -> Beat {
        let sent = self.core.beat(to, now);
        transmit(&mut self.core, &mut self.link);
        if sent { Beat::Sent } else { Beat::Withheld }
    }

    fn enforce_suspicion(&mut self, peer: u32, now: Instant) {
        self.core.enforce(peer, now);
        transmit(&mut self.core, &mut self.link);
    }
}
