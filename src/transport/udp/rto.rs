//! The RFC 6298 retransmission-timeout estimator: SRTT/RTTVAR with α = 1/8, β = 1/4, K = 4,
//! a lower and an upper bound, and exponential backoff on expiry.

use std::time::Duration;

/// Clock granularity G of RFC 6298 (Instant is finer; 1 µs keeps RTTVAR = 0 harmless).
const CLOCK_GRANULARITY: Duration = Duration::from_micros(1);

/// The RFC 6298 retransmission-timeout estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtoEstimator {
    srtt: Option<Duration>,
    /// The least RTT sampled (RFC 8985's `min_RTT`, over the connection's life: a fabric's
    /// or a host's path does not change under a job).
    min_rtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min: Duration,
    max: Duration,
}

impl RtoEstimator {
    /// Before any sample the RTO is `initial` (2.1), always kept within `[min, max]`.
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        let max = max.max(min);
        RtoEstimator {
            srtt: None,
            min_rtt: None,
            rttvar: Duration::ZERO,
            rto: initial.max(min).min(max),
            min,
            max,
        }
    }

    /// The current RTO.
    #[inline]
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// The smoothed RTT, once a sample was taken.
    #[inline]
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The least RTT sampled, once a sample was taken.
    #[inline]
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// A new RTT measurement `r` (of a packet never retransmitted: Karn's rule).
    #[inline]
    pub fn on_sample(&mut self, r: Duration) {
        self.on_sample_held(r, Duration::ZERO);
    }

    /// A new RTT measurement `r` whose acknowledgement the peer held `held` before sending it
    /// (RFC 9002 §5.3's `ack_delay`; the caller caps it at the hold it expects of the peer): the smoothed
    /// RTT and its variation take `r - held` (at least the clock's granularity), the least
    /// RTT takes `r` as it is. Unlike RFC 9002 the hold is taken out even below the least
    /// raw sample: on a link whose every ACK is held (a tree's, DATA one way) no raw sample
    /// is free of a hold, and the smoothed RTT would be the hold. The peer measures the hold
    /// from its poll's clock, which may read a little before the DATA came, so a reported hold
    /// may exceed the true one by a poll's length; the RTO's floor (`rto_min`) covers that
    /// for the timer, and the least RTT, which paces the repeats of a hole's repair, stays
    /// raw so that such a sample cannot pin it near zero.
    #[inline]
    pub fn on_sample_held(&mut self, raw: Duration, held: Duration) {
        self.min_rtt = Some(self.min_rtt.map_or(raw, |m| m.min(raw)));
        let r = raw.saturating_sub(held).max(CLOCK_GRANULARITY);
        match self.srtt {
            // 2.2: SRTT = R, RTTVAR = R/2.
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            // 2.3: RTTVAR = (1-β)·RTTVAR + β·|SRTT-R|, then SRTT = (1-α)·SRTT + α·R.
            Some(srtt) => {
                let delta = srtt.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
        // RTO = SRTT + max(G, K·RTTVAR), then 2.4/2.5 bounds.
        let srtt = self.srtt.unwrap_or(r);
        let rto = srtt.saturating_add(CLOCK_GRANULARITY.max(self.rttvar.saturating_mul(4)));
        self.rto = rto.max(self.min).min(self.max);
    }

    /// The timer expired (5.5): back off, RTO = min(2·RTO, max).
    /// A retransmission turned out spurious: the original was acknowledged late, `delay`
    /// after it was sent (a sample Karn's rule had to discard). As the Eifel response
    /// (RFC 4015) does, the estimator takes it as it would a first measurement when it
    /// exceeds what it believes (`srtt ≥ delay`, `rttvar ≥ delay / 2`, so the RTO becomes at
    /// least 3·delay); later samples bring the RTO back down as they come (RFC 6298 §2.3).
    pub fn on_spurious(&mut self, delay: Duration) {
        let srtt = self.srtt.map_or(delay, |s| s.max(delay));
        self.srtt = Some(srtt);
        self.rttvar = self.rttvar.max(delay / 2);
        let rto = srtt.saturating_add(CLOCK_GRANULARITY.max(self.rttvar.saturating_mul(4)));
        self.rto = rto.max(self.min).min(self.max);
    }

    pub fn on_timeout(&mut self) {
        self.rto = self.rto.saturating_mul(2).min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn rto_rfc6298_first_sample() {
        // 2.1: RTO = 1 s before any sample; 2.2: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4·RTTVAR.
        let mut e = RtoEstimator::new(Duration::from_secs(1), MS(10), Duration::from_secs(60));
        assert_eq!(e.rto(), Duration::from_secs(1));
        assert_eq!(e.srtt(), None);
        e.on_sample(MS(100));
        assert_eq!(e.srtt(), Some(MS(100)));
        assert_eq!(e.rttvar(), MS(50));
        assert_eq!(e.rto(), MS(300));
        // With RFC 6298's own 1 s lower bound (2.4) the same sample gives 1 s.
        let mut e = RtoEstimator::new(Duration::from_secs(1), Duration::from_secs(1), Duration::MAX);
        e.on_sample(MS(100));
        assert_eq!(e.rto(), Duration::from_secs(1));
    }

    #[test]
    fn the_least_rtt_is_kept_whatever_the_smoothed_one_does() {
        let mut e = RtoEstimator::new(Duration::from_secs(1), MS(1), Duration::from_secs(60));
        assert_eq!(e.min_rtt(), None);
        for r in [40, 10, 200, 200, 200, 30] {
            e.on_sample(MS(r));
        }
        assert_eq!(e.min_rtt(), Some(MS(10)));
        assert!(e.srtt().unwrap() > MS(60), "{:?}", e.srtt());
    }

    #[test]
    fn rto_rfc6298_subsequent_samples() {
        let mut e = RtoEstimator::new(Duration::from_secs(1), MS(10), Duration::from_secs(60));
        e.on_sample(MS(100));
        // 2.3: RTTVAR = 3/4·50 + 1/4·|100-200| = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5.
        e.on_sample(MS(200));
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(362_500));
        // A sample equal to SRTT: RTTVAR decays by 3/4 = 46.875, SRTT stays, RTO = 300.
        e.on_sample(Duration::from_micros(112_500));
        assert_eq!(e.rttvar(), Duration::from_micros(46_875));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), MS(300));
    }

    #[test]
    fn rto_lower_bound_backoff_and_upper_bound() {
        let min = Duration::from_micros(200);
        let mut e = RtoEstimator::new(MS(1), min, MS(100));
        // A 10 µs loopback RTT: 10 + 4·5 = 30 µs, raised to the lower bound (2.4).
        e.on_sample(Duration::from_micros(10));
        assert_eq!(e.rto(), min);
        // 5.5: doubling on every expiry, capped by the upper bound.
        let mut seen = vec![e.rto()];
        for _ in 0..12 {
            e.on_timeout();
            seen.push(e.rto());
        }
        assert_eq!(seen[1], Duration::from_micros(400));
        assert_eq!(seen[8], Duration::from_micros(200 << 8));
        assert_eq!(seen[9], MS(100));
        assert_eq!(*seen.last().unwrap(), MS(100));
        // A new sample (Karn: of a packet not retransmitted) ends the backoff.
        e.on_sample(Duration::from_micros(10));
        assert!(e.rto() < MS(1));
        // Inverted bounds never panic.
        let e = RtoEstimator::new(MS(5), MS(10), MS(1));
        assert_eq!(e.rto(), MS(10));
    }

    #[test]
    fn a_held_acks_hold_is_taken_out_of_the_smoothed_rtt_not_the_least() {
        let us = Duration::from_micros;
        let mut e = RtoEstimator::new(MS(1), us(200), MS(100));
        // Every ACK held 500 µs on a 20 µs path: the smoothed RTT is the path's, the least
        // RTT the raw sample's.
        for r in [520, 530, 515, 525] {
            e.on_sample_held(us(r), us(500));
        }
        assert_eq!(e.min_rtt(), Some(us(515)));
        let srtt = e.srtt().unwrap();
        assert!((us(15)..=us(30)).contains(&srtt), "{srtt:?}");
        assert_eq!(e.rto(), us(200), "the floor");
        // The same samples without their holds: the hold is all the estimator sees.
        let mut raw = RtoEstimator::new(MS(1), us(200), MS(100));
        for r in [520, 530, 515, 525] {
            raw.on_sample(us(r));
        }
        assert!(raw.srtt().unwrap() >= us(515) && raw.rto() > us(520), "{raw:?}");
        // A hold longer than the sample (a poll's clock read before the DATA came): the
        // smoothed RTT takes the granularity, not zero, and the least RTT is untouched.
        e.on_sample_held(us(600), us(700));
        assert_eq!(e.min_rtt(), Some(us(515)));
        assert!(e.srtt().unwrap() < srtt, "{:?}", e.srtt());
    }
}
