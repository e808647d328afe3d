//! An emulated link delay for machines whose kernel has no `netem` qdisc: every received
//! datagram is held for the configured one-way delay before the transport processes it (the
//! DATA, its ACKs and retransmissions alike, in each direction at its receiver). Pre-allocated
//! ring, FIFO release (jitter never reorders); a datagram that finds the ring full is dropped
//! and counted like an injected loss, and the sender's retransmission repairs it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Datagrams in flight on one emulated link end (2.5 MB of buffer).
pub const CAPACITY: usize = 2048;

pub struct DelayLine {
    delay: Duration,
    jitter: Duration,
    due: Vec<Instant>,
    meta: Vec<(usize, SocketAddr)>,
    buf: Box<[u8]>,
    slot: usize,
    head: usize,
    len: usize,
    last_due: Option<Instant>,
    state: u64,
}

impl DelayLine {
    /// A line holding datagrams of at most `slot` bytes for `delay` plus up to `jitter`.
    pub fn new(delay: Duration, jitter: Duration, slot: usize, seed: u64) -> Self {
        let now = Instant::now();
        Self {
            delay,
            jitter,
            due: vec![now; CAPACITY],
            meta: vec![(0, SocketAddr::from(([0, 0, 0, 0], 0))); CAPACITY],
            buf: vec![0; CAPACITY * slot].into_boxed_slice(),
            slot,
            head: 0,
            len: 0,
            last_due: None,
            state: seed | 1,
        }
    }

    fn jitter(&mut self) -> Duration {
        if self.jitter.is_zero() {
            return Duration::ZERO;
        }
        // xorshift64*: the injector's own stream, independent of the loss injector.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        Duration::from_nanos(r % (self.jitter.as_nanos() as u64 + 1))
    }

    /// Holds `d` from `src`, received at `now`; false (dropped) when the line is full.
    pub fn push(&mut self, d: &[u8], src: SocketAddr, now: Instant) -> bool {
        if self.len == CAPACITY || d.len() > self.slot {
            return false;
        }
        let mut due = now + self.delay + self.jitter();
        if let Some(last) = self.last_due {
            due = due.max(last);
        }
        self.last_due = Some(due);
        let i = (self.head + self.len) % CAPACITY;
        self.due[i] = due;
        self.meta[i] = (d.len(), src);
        self.buf[i * self.slot..i * self.slot + d.len()].copy_from_slice(d);
        self.len += 1;
        true
    }

    /// When the oldest held datagram is due, if any.
    pub fn next_due(&self) -> Option<Instant> {
        (self.len > 0).then(|| self.due[self.head])
    }

    /// Hands the oldest datagram to `f` if it is due at `now`; false when none is.
    pub fn pop_due(&mut self, now: Instant, f: &mut dyn FnMut(&[u8], SocketAddr)) -> bool {
        if self.len == 0 || self.due[self.head] > now {
            return false;
        }
        let i = self.head;
        let (len, src) = self.meta[i];
        f(&self.buf[i * self.slot..i * self.slot + len], src);
        self.head = (self.head + 1) % CAPACITY;
        self.len -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_for_the_delay_in_fifo_order_and_drops_when_full() {
        let mut l = DelayLine::new(Duration::from_micros(100), Duration::from_micros(50), 8, 7);
        let src = SocketAddr::from(([127, 0, 0, 1], 9));
        let t0 = Instant::now();
        assert!(l.push(b"a", src, t0));
        assert!(l.push(b"bb", src, t0));
        let mut got = Vec::new();
        assert!(!l.pop_due(t0 + Duration::from_micros(99), &mut |d, _| got.push(d.to_vec())));
        let late = t0 + Duration::from_micros(151);
        while l.pop_due(late, &mut |d, _| got.push(d.to_vec())) {}
        assert_eq!(got, vec![b"a".to_vec(), b"bb".to_vec()]);
        assert!(l.next_due().is_none());
        for _ in 0..CAPACITY {
            assert!(l.push(b"x", src, t0));
        }
        assert!(!l.push(b"x", src, t0), "a full line drops");
        assert!(
            !l.push(&[0; 9], src, t0) || l.len < CAPACITY,
            "oversized datagrams are refused"
        );
    }
}
