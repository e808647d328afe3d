//! Credit flow control over a peer's pre-posted receive ring: a SEND to an RC peer that has no
//! receive posted is an RNR NAK (and with rnr_retry 7, perftest's default, a stall), so a
//! sender never posts more than the ring holds. The receiver returns credits by RDMA-writing
//! its cumulative count of re-posted receives into the sender's credit word (no receive is
//! consumed by a credit update). Counts are cumulative u64s: a lost or stale update is
//! harmless, a bogus one (beyond what was sent, or going back) is refused.

/// The sender's view of one peer's ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendCredits {
    slots: u64,
    sent: u64,
    returned: u64,
}

/// A credit word that cannot be true (ahead of what we sent, or going backwards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bogus;

impl SendCredits {
    pub fn new(slots: u32) -> Self {
        SendCredits {
            slots: u64::from(slots),
            sent: 0,
            returned: 0,
        }
    }

    /// Sends the peer's ring can still take.
    pub fn available(&self) -> u64 {
        self.slots - (self.sent - self.returned)
    }

    /// Takes one credit for a send; false (back-pressure) when the ring is full.
    pub fn take(&mut self) -> bool {
        if self.available() == 0 {
            return false;
        }
        self.sent += 1;
        true
    }

    /// Applies the peer's cumulative count of receives re-posted for us.
    pub fn on_return(&mut self, cumulative: u64) -> Result<(), Bogus> {
        if cumulative < self.returned || cumulative > self.sent {
            return Err(Bogus);
        }
        self.returned = cumulative;
        Ok(())
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }
}

/// The receiver's side for one peer: receives consumed and re-posted, and what it last told
/// the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCredits {
    threshold: u64,
    reposted: u64,
    advertised: u64,
}

impl RecvCredits {
    /// Credits go back in batches of a quarter ring (at least 1), or earlier when idle.
    pub fn new(slots: u32) -> Self {
        RecvCredits {
            threshold: (u64::from(slots) / 4).max(1),
            reposted: 0,
            advertised: 0,
        }
    }

    /// A receive was handled and its buffer posted again.
    pub fn reposted(&mut self) {
        self.reposted += 1;
    }

    /// The cumulative count to write to the sender now, if one is due: a quarter ring's worth
    /// pending, or anything pending when `idle`.
    pub fn due(&self, idle: bool) -> Option<u64> {
        let pending = self.reposted - self.advertised;
        (pending >= self.threshold || (idle && pending > 0)).then_some(self.reposted)
    }

    /// The write of `value` was posted.
    pub fn advertised(&mut self, value: u64) {
        self.advertised = self.advertised.max(value.min(self.reposted));
    }

    /// Receives re-posted so far (the value a credit write carries).
    pub fn reposted_count(&self) -> u64 {
        self.reposted
    }

    pub fn pending(&self) -> u64 {
        self.reposted - self.advertised
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_stops_at_the_ring_size_and_resumes_on_return() {
        let mut s = SendCredits::new(4);
        for _ in 0..4 {
            assert!(s.take());
        }
        assert!(!s.take());
        assert_eq!(s.available(), 0);
        s.on_return(3).unwrap();
        assert_eq!(s.available(), 3);
        assert!(s.take());
        assert_eq!(s.sent(), 5);
    }

    #[test]
    fn bogus_returns_are_refused_and_change_nothing() {
        let mut s = SendCredits::new(4);
        s.take();
        s.take();
        assert_eq!(s.on_return(3), Err(Bogus));
        s.on_return(2).unwrap();
        assert_eq!(s.on_return(1), Err(Bogus));
        assert_eq!(s.available(), 4);
        // A stale (equal) word is fine.
        s.on_return(2).unwrap();
    }

    #[test]
    fn receiver_returns_in_quarter_ring_batches_or_when_idle() {
        let mut r = RecvCredits::new(16);
        for _ in 0..3 {
            r.reposted();
        }
        assert_eq!(r.due(false), None);
        assert_eq!(r.due(true), Some(3));
        r.reposted();
        assert_eq!(r.due(false), Some(4));
        r.advertised(4);
        assert_eq!(r.pending(), 0);
        assert_eq!(r.due(true), None);
        // A stale advertisement never moves backwards or beyond what was re-posted.
        r.advertised(2);
        r.advertised(99);
        assert_eq!(r.pending(), 0);
        assert_eq!(RecvCredits::new(1).threshold, 1);
    }

    #[test]
    fn no_deadlock_a_full_ring_always_yields_a_due_return() {
        // Sender fills the ring; receiver consumes everything; a return is due without idling.
        for slots in [1u32, 2, 3, 7, 512] {
            let mut s = SendCredits::new(slots);
            let mut r = RecvCredits::new(slots);
            while s.take() {
                r.reposted();
            }
            let v = r.due(false).expect("due");
            s.on_return(v).unwrap();
            assert!(s.available() > 0);
        }
    }
}
