//! Fault injection as a [`Transport`] wrapper: every `k`-th datagram handed to it is dropped
//! instead of sent, to check that the protocols above repair losses.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::transport::{Beat, Delivery, SendError, Transport, TransportStats};

/// `inner`, dropping every `every`-th send (0: none); the drops are counted in `losses`.
pub(crate) struct Lossy<T> {
    pub(crate) inner: T,
    pub(crate) every: u64,
    attempts: u64,
    pub(crate) losses: Arc<AtomicU64>,
}

impl<T> Lossy<T> {
    pub(crate) fn new(inner: T, every: u32) -> Self {
        Self {
            inner,
            every: u64::from(every),
            attempts: 0,
            losses: Arc::default(),
        }
    }
}

impl<T: Transport> Transport for Lossy<T> {
    fn rank(&self) -> u32 {
        self.inner.rank()
    }

    fn size(&self) -> u32 {
        self.inner.size()
    }

    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        self.attempts += 1;
        if self.every > 0 && self.attempts.is_multiple_of(self.every) {
            self.losses.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.inner.send(to, bytes, now)
    }

    fn poll(&mut self, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
        self.inner.poll(now, sink)
    }

    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.inner.wait(timeout)
    }

    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }

    fn unacked(&self) -> usize {
        self.inner.unacked()
    }

    fn last_heard(&self, peer: u32) -> Option<Instant> {
        self.inner.last_heard(peer)
    }

    fn sent_marks(&self, marks: &mut Vec<u64>) {
        self.inner.sent_marks(marks);
    }

    fn beat(&mut self, to: u32, now: Instant) -> Beat {
        self.inner.beat(to, now)
    }

    fn acked_through(&self, marks: &[u64]) -> bool {
        self.inner.acked_through(marks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what reaches it.
    struct Count(u64);

    impl Transport for Count {
        fn rank(&self) -> u32 {
            0
        }
        fn size(&self) -> u32 {
            2
        }
        fn send(&mut self, _to: u32, _bytes: &[u8], _now: Instant) -> Result<(), SendError> {
            self.0 += 1;
            Ok(())
        }
        fn poll(&mut self, _now: Instant, _sink: &mut dyn FnMut(Delivery<'_>)) -> std::io::Result<usize> {
            Ok(0)
        }
        fn wait(&mut self, _timeout: Duration) -> std::io::Result<()> {
            Ok(())
        }
        fn stats(&self) -> TransportStats {
            TransportStats {
                sent: self.0,
                ..TransportStats::default()
            }
        }
    }

    #[test]
    fn every_kth_send_is_dropped_and_counted() {
        let now = Instant::now();
        for (every, passed) in [(0u32, 10u64), (1, 0), (3, 7), (5, 8)] {
            let mut t = Lossy::new(Count(0), every);
            for _ in 0..10 {
                assert_eq!(t.send(1, b"x", now), Ok(()));
            }
            assert_eq!(t.stats().sent, passed, "every {every}");
            assert_eq!(t.losses.load(Ordering::Relaxed), 10 - passed, "every {every}");
        }
    }
}
