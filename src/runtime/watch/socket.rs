//! A booted node's socket as a [`Transport`] for the generic node loop
//! ([`crate::runtime::driver`]): plain datagrams (no retransmission: the watch tolerates
//! loss, heartbeats repeat and notices are forwarded for `⌈log m⌉ + 2` rounds), sealed with
//! the job's MAC when it has a key, and ICMP "port unreachable" reported as a suspicion of
//! the peer at that address (`IP_RECVERR`, [`crate::transport::udp::icmp`]). The sender of a
//! datagram is the one its header names (the MAC vouches for it), as addresses seen from a
//! multi-homed host need not be the ones in the table.

use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use crate::transport::udp::icmp;
use crate::transport::{Delivery, SendError, Transport, TransportStats};
use crate::wire::Header;
use crate::wire::mac::AuthKey;
use crate::wire::mac::{opened, sealed};

pub(crate) struct Sealed {
    pub(crate) sock: UdpSocket,
    pub(crate) addrs: Vec<SocketAddrV4>,
    pub(crate) key: Option<AuthKey>,
    pub(crate) job: u64,
    pub(crate) rank: u32,
    /// Receive buffer.
    pub(crate) rbuf: Vec<u8>,
    /// `malformed`: datagrams whose MAC or header failed (no sender to hand them to).
    pub(crate) stats: TransportStats,
}

impl Sealed {
    fn set_nonblocking(&self, on: bool) {
        let _ = self.sock.set_nonblocking(on);
    }
}

impl Transport for Sealed {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.addrs.len() as u32
    }

    fn send(&mut self, to: u32, bytes: &[u8], _now: Instant) -> Result<(), SendError> {
        let Some(&addr) = self.addrs.get(to as usize) else {
            return Err(SendError::Suspected);
        };
        let d = sealed(self.key.as_ref(), bytes);
        // With IP_RECVERR a refusal (the ICMP of an earlier datagram to a dead peer) fails the
        // next call on the socket, and this datagram with it: once reported it is cleared, so
        // try once more.
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
        self.set_nonblocking(true);
        for _ in 0..64 {
            let len = match self.sock.recv_from(&mut dgram) {
                Ok((len, _)) => len,
                // A refusal reported here: its details wait in the error queue.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
                Err(_) => break,
            };
            let Some(body) = opened(self.key.as_ref(), &dgram[..len]) else {
                self.stats.malformed += 1;
                continue;
            };
            match Header::decode(body, self.job, self.size()) {
                Ok((h, _, _)) => {
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
        self.set_nonblocking(false);
        self.rbuf = dgram;
        // Refused datagrams: the peer's port is closed, its process dead.
        while let Ok(r) = icmp::next_refused(&self.sock) {
            if let Some(SocketAddr::V4(a)) = r
                && let Some(p) = self.addrs.iter().position(|&x| x == a)
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
