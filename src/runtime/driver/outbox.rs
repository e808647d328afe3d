//! The send side every runtime node shares: a datagram goes to the transport, or, when the
//! peer's bounded retransmit window is full ([`SendError::WindowFull`]), into a queue behind
//! that peer's earlier datagrams. Only the refused peer waits: a slow peer must not hold up
//! the others (who would then suspect this node). Per-peer order is kept.

use std::collections::VecDeque;
use std::time::Instant;

use crate::protocol::Rank;
use crate::transport::{SendError, Transport};

/// What became of a datagram handed to [`Outbox::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The transport took it.
    Sent,
    /// Queued behind the peer's earlier datagrams, or because its window is full.
    Queued,
    /// The queue was full: dropped.
    Overflow,
    /// The transport refused it for good (not [`SendError::WindowFull`]).
    Refused(SendError),
}

/// Datagrams refused with [`SendError::WindowFull`], in order, with the count per peer.
#[derive(Clone)]
pub struct Outbox {
    queue: VecDeque<(Rank, Vec<u8>)>,
    /// Datagrams in `queue` per peer.
    queued: Vec<u32>,
    /// The flush in which each peer's window was last found full.
    blocked_in: Vec<u64>,
    flushes: u64,
    /// Buffers of datagrams sent from the queue, for reuse.
    spare: Vec<Vec<u8>>,
    /// The most datagrams queued.
    cap: usize,
}

impl Outbox {
    /// An outbox for a job of `n` ranks holding at most `cap` datagrams.
    pub fn new(n: u32, cap: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            queued: vec![0; n as usize],
            blocked_in: vec![0; n as usize],
            flushes: 0,
            spare: Vec::new(),
            cap,
        }
    }

    /// Whether no datagram is waiting.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether datagrams to `peer` are waiting.
    #[inline]
    pub fn is_queued(&self, peer: Rank) -> bool {
        // (The common case, nothing queued, reads no per-peer state.)
        !self.queue.is_empty() && self.queued[peer as usize] > 0
    }

    /// Sends `bytes` to `to`, or queues them behind `to`'s earlier datagrams (only a queued
    /// datagram is copied).
    #[inline]
    pub fn send(&mut self, tp: &mut dyn Transport, to: Rank, bytes: &[u8], now: Instant) -> Sent {
        if !self.is_queued(to) {
            match tp.send(to, bytes, now) {
                Ok(()) => return Sent::Sent,
                Err(SendError::WindowFull) => {}
                Err(e) => return Sent::Refused(e),
            }
        }
        if self.queue.len() >= self.cap {
            return Sent::Overflow;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(bytes);
        self.queue.push_back((to, buf));
        self.queued[to as usize] += 1;
        Sent::Queued
    }

    /// Retries the queued datagrams once, in order; a peer whose window is still full keeps
    /// the rest of its datagrams. `done` hears of each datagram that left the queue (sent, or
    /// refused for good). Whether any did.
    pub fn flush(
        &mut self,
        tp: &mut dyn Transport,
        now: Instant,
        mut done: impl FnMut(Rank, Result<(), SendError>),
    ) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        self.flushes += 1;
        let mut progress = false;
        for _ in 0..self.queue.len() {
            let (to, buf) = self.queue.pop_front().expect("counted");
            if self.blocked_in[to as usize] != self.flushes {
                match tp.send(to, &buf, now) {
                    Err(SendError::WindowFull) => self.blocked_in[to as usize] = self.flushes,
                    r => {
                        self.queued[to as usize] -= 1;
                        self.spare.push(buf);
                        progress = true;
                        done(to, r);
                        continue;
                    }
                }
            }
            self.queue.push_back((to, buf));
        }
        progress
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::transport::{Delivery, TransportStats};

    /// A transport whose windows are open or full per peer; it records what it took.
    struct Gate {
        full: Vec<bool>,
        took: Vec<(Rank, u8)>,
    }

    impl Transport for Gate {
        fn rank(&self) -> u32 {
            0
        }
        fn size(&self) -> u32 {
            self.full.len() as u32
        }
        fn send(&mut self, to: u32, bytes: &[u8], _: Instant) -> Result<(), SendError> {
            match to {
                0 => Err(SendError::BadPeer),
                _ if self.full[to as usize] => Err(SendError::WindowFull),
                _ => {
                    self.took.push((to, bytes[0]));
                    Ok(())
                }
            }
        }
        fn poll(&mut self, _: Instant, _: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
            Ok(0)
        }
        fn wait(&mut self, _: Duration) -> std::io::Result<()> {
            Ok(())
        }
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
    }

    #[test]
    fn only_the_full_peer_waits_and_its_order_is_kept() {
        let now = Instant::now();
        let mut tp = Gate {
            full: vec![false, true, false],
            took: Vec::new(),
        };
        let mut o = Outbox::new(3, 3);
        assert_eq!(o.send(&mut tp, 1, &[1], now), Sent::Queued);
        assert_eq!(o.send(&mut tp, 2, &[2], now), Sent::Sent);
        tp.full[1] = false;
        // Behind its earlier datagram, though the window is open again.
        assert_eq!(o.send(&mut tp, 1, &[3], now), Sent::Queued);
        assert!(o.is_queued(1) && !o.is_queued(2));
        assert_eq!(o.send(&mut tp, 0, &[4], now), Sent::Refused(SendError::BadPeer));
        tp.full[1] = true;
        assert!(!o.flush(&mut tp, now, |_, _| panic!("nothing leaves")));
        assert_eq!(o.send(&mut tp, 1, &[5], now), Sent::Queued);
        assert_eq!(o.send(&mut tp, 1, &[6], now), Sent::Overflow);
        tp.full[1] = false;
        let mut done = Vec::new();
        assert!(o.flush(&mut tp, now, |to, r| done.push((to, r))));
        assert_eq!(done, vec![(1, Ok(())); 3]);
        assert_eq!(tp.took, vec![(2, 2), (1, 1), (1, 3), (1, 5)]);
        assert!(o.is_empty() && !o.is_queued(1));
    }
}
