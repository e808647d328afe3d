//! A node's socket as a [`Transport`] for the generic node loop ([`crate::runtime::driver`]),
//! during its bootstrap and after ([`crate::runtime::watch`]): plain datagrams (no
//! retransmission: the overlay repairs itself, the all-gather re-sends, heartbeats repeat and
//! notices are forwarded for `⌈log m⌉ + 2` rounds), sealed with the job's MAC when it has a
//! key, sent only to the addresses in the node's [`AddrBook`].
//!
//! The sender of a datagram is the rank its header names (the MAC vouches for it). While
//! bootstrapping ([`Sealed::learning`]) the book learns the datagram's source as that rank's
//! address and sets it aside for the machine ([`AddrBook::fresh`]); once the table is
//! complete it is left as it is, as addresses seen from a multi-homed host need not be the
//! ones in the table. ICMP "port unreachable" (`IP_RECVERR`, enabled by the watch,
//! [`crate::transport::udp::icmp`]) is reported as a suspicion of the peer at that address.

use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::protocol::Rank;
use crate::transport::udp::icmp;
use crate::transport::{Delivery, SendError, Transport, TransportStats};
use crate::wire::Header;
use crate::wire::mac::{AuthKey, opened, sealed};

/// The addresses a node knows, by rank, shared by its transport (which sends to them and,
/// while bootstrapping, learns sources) and its node loop (which adds what the machine
/// learned).
#[derive(Debug, Default)]
pub(crate) struct AddrBook {
    pub(crate) addrs: Vec<Option<SocketAddrV4>>,
    /// Sources learned since the loop last took them.
    pub(crate) fresh: Vec<(Rank, SocketAddrV4)>,
}

/// A shared [`AddrBook`].
pub(crate) type Book = Arc<Mutex<AddrBook>>;

/// Locks a book (a panic elsewhere leaves it usable: it holds plain data).
pub(crate) fn lock(b: &Book) -> MutexGuard<'_, AddrBook> {
    b.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Sealed {
    sock: UdpSocket,
    book: Book,
    /// Learn sources into the book.
    learn: bool,
    key: Option<AuthKey>,
    job: u64,
    rank: u32,
    n: u32,
    /// Receive buffer.
    rbuf: Vec<u8>,
    /// `malformed`: datagrams whose MAC or header failed (no sender to hand them to).
    stats: TransportStats,
}

impl Sealed {
    /// Node `rank` with a complete table `addrs` (one per rank of the job), receiving
    /// datagrams of up to `max` bytes (MAC excluded).
    pub(crate) fn fixed(
        sock: UdpSocket,
        addrs: Vec<SocketAddrV4>,
        key: Option<AuthKey>,
        job: u64,
        rank: u32,
        max: usize,
    ) -> Self {
        let book = AddrBook {
            addrs: addrs.into_iter().map(Some).collect(),
            fresh: Vec::new(),
        };
        Self::new(sock, Arc::new(Mutex::new(book)), false, key, job, rank, max)
    }

    /// The same while bootstrapping: sends to what `book` holds (one entry per rank of the
    /// job), which learns the sources.
    pub(crate) fn learning(sock: UdpSocket, book: Book, key: Option<AuthKey>, job: u64, rank: u32, max: usize) -> Self {
        Self::new(sock, book, true, key, job, rank, max)
    }

    fn new(sock: UdpSocket, book: Book, learn: bool, key: Option<AuthKey>, job: u64, rank: u32, max: usize) -> Self {
        let n = lock(&book).addrs.len() as u32;
        Self {
            sock,
            book,
            learn,
            key,
            job,
            rank,
            n,
            rbuf: vec![0u8; max + 64],
            stats: TransportStats::default(),
        }
    }
}

impl Transport for Sealed {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.n
    }

    fn send(&mut self, to: u32, bytes: &[u8], _now: Instant) -> Result<(), SendError> {
        let Some(Some(addr)) = lock(&self.book).addrs.get(to as usize).copied() else {
            return Err(SendError::BadPeer);
        };
        let d = sealed(self.key.as_ref(), bytes);
        // With IP_RECVERR a refusal (the ICMP of an earlier datagram to a dead peer) fails the
        // next call on the socket, and this datagram with it: once reported it is cleared, so
        // try once more. Any other failure (a full socket buffer) is a lost datagram.
        let mut r = self.sock.send_to(&d, addr);
        if r.as_ref().is_err_and(|e| e.kind() == ErrorKind::ConnectionRefused) {
            r = self.sock.send_to(&d, addr);
        }
        match r {
            Ok(_) => {
                self.stats.sent += 1;
                Ok(())
            }
            Err(_) => Err(SendError::Suspected),
        }
    }

    fn poll(&mut self, _now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
        let mut got = 0;
        let mut dgram = std::mem::take(&mut self.rbuf);
        let _ = self.sock.set_nonblocking(true);
        for _ in 0..64 {
            let (len, src) = match self.sock.recv_from(&mut dgram) {
                Ok(r) => r,
                // A refusal reported here: its details wait in the error queue.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
                Err(_) => break,
            };
            let Some(body) = opened(self.key.as_ref(), &dgram[..len]) else {
                self.stats.malformed += 1;
                continue;
            };
            let Ok((h, _, _)) = Header::decode(body, self.job, self.n) else {
                self.stats.malformed += 1;
                continue;
            };
            if self.learn {
                let SocketAddr::V4(src) = src else { continue };
                let mut b = lock(&self.book);
                if b.addrs[h.sender as usize] != Some(src) {
                    b.addrs[h.sender as usize] = Some(src);
                    b.fresh.push((h.sender, src));
                }
            }
            self.stats.received += 1;
            got += 1;
            sink(Delivery::Message {
                from: h.sender,
                bytes: body,
            });
        }
        let _ = self.sock.set_nonblocking(false);
        self.rbuf = dgram;
        // Refused datagrams: the peer's port is closed, its process dead.
        while let Ok(r) = icmp::next_refused(&self.sock) {
            if let Some(SocketAddr::V4(a)) = r
                && let Some(p) = lock(&self.book).addrs.iter().position(|&x| x == Some(a))
            {
                self.stats.suspected += 1;
                got += 1;
                sink(Delivery::Suspect { peer: p as u32 });
            }
        }
        Ok(got)
    }

    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.sock
            .set_read_timeout(Some(timeout.max(Duration::from_micros(100))))?;
        let _ = self.sock.peek_from(&mut [0u8; 1]);
        Ok(())
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}
