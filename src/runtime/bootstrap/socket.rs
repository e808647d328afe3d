//! A bootstrapping node's socket as a [`Transport`] for the generic node loop
//! ([`crate::runtime::driver`]): plain datagrams (no retransmission: the overlay repairs
//! itself and the all-gather re-sends), sealed with the job's MAC when it has a key, sent
//! only to the addresses in the node's [`AddrBook`]. The book learns as datagrams come in:
//! the source of a datagram is the address of the rank its header names (the MAC vouches for
//! it), and is set aside for the machine as well ([`AddrBook::fresh`]).

use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::protocol::Rank;
use crate::transport::{Delivery, SendError, Transport, TransportStats};
use crate::wire::Header;
use crate::wire::mac::{AuthKey, opened, sealed};

/// The addresses a node knows, by rank, shared by its transport (which learns sources and
/// sends to them) and its node loop (which adds what the machine learned).
#[derive(Debug, Default)]
pub(crate) struct AddrBook {
    pub(crate) addrs: Vec<Option<SocketAddrV4>>,
    /// Sources learned since the loop last took them.
    pub(crate) fresh: Vec<(Rank, SocketAddrV4)>,
}

/// A shared [`AddrBook`].
pub(crate) type Book = Arc<Mutex<AddrBook>>;

/// Locks a book (a panic elsewhere leaves it usable: it holds plain data).
pub(crate) fn lock(b: &Book) -> std::sync::MutexGuard<'_, AddrBook> {
    b.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Learning {
    pub(crate) sock: UdpSocket,
    pub(crate) book: Book,
    pub(crate) key: Option<AuthKey>,
    pub(crate) job: u64,
    pub(crate) rank: u32,
    pub(crate) n: u32,
    /// Receive buffer.
    pub(crate) rbuf: Vec<u8>,
    /// `malformed`: datagrams whose MAC or header failed.
    pub(crate) stats: TransportStats,
}

impl Transport for Learning {
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
        // A full socket buffer is a lost datagram: the protocols repair or re-send.
        match self.sock.send_to(&d, addr) {
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
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
                Err(_) => break,
            };
            let SocketAddr::V4(src) = src else { continue };
            let Some(body) = opened(self.key.as_ref(), &dgram[..len]) else {
                self.stats.malformed += 1;
                continue;
            };
            match Header::decode(body, self.job, self.n) {
                Ok((h, _, _)) => {
                    {
                        let mut b = lock(&self.book);
                        let slot = &mut b.addrs[h.sender as usize];
                        if *slot != Some(src) {
                            *slot = Some(src);
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
                Err(_) => self.stats.malformed += 1,
            }
        }
        let _ = self.sock.set_nonblocking(false);
        self.rbuf = dgram;
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
