//! The tuning of the reliable UDP transport and its defaults for loopback and data-centre
//! networks.

use std::io;
use std::time::Duration;

use super::{REORDER, auth};

/// Tuning of the reliable UDP transport.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpConfig {
    /// RTO before the first RTT sample.
    pub rto_initial: Duration,
    /// Lower bound of the RTO.
    pub rto_min: Duration,
    /// Upper bound of the RTO (caps the exponential backoff).
    pub rto_max: Duration,
    /// Retransmissions of one packet without any answer from the peer before it may be
    /// suspected (the floor of the suspicion time, [`UdpConfig::suspicion_time`]).
    pub max_retries: u32,
    /// Adaptive suspicion: besides `max_retries`, a peer is suspected only once it has been
    /// silent (no valid datagram while something was unacknowledged) longer than
    /// `stall_factor` × the longest silence it recently ended by speaking again.
    pub stall_factor: u32,
    /// Half-life of the learned stall: a stall observed this long ago counts half.
    pub stall_memory: Duration,
    /// Ceiling of the adaptive silence bound: however long the stalls learned, a peer silent
    /// this long (and past `max_retries`) is suspected.
    pub silence_max: Duration,
    /// An ICMP "port unreachable" for a peer is a hint, not a proof: the peer is probed and
    /// suspected only if no authenticated datagram comes from it within this time.
    pub probe_timeout: Duration,
    /// Every peer's port was bound before this endpoint learned its address (the table came
    /// from bound sockets: [`super::UdpTransport::bind_ephemeral_local`], a local cluster's;
    /// or each node process reported or published its bound port before anyone got the
    /// table: `bench --procs`, `--rendezvous`, an `agree --procs` node that chose its port),
    /// so an ICMP "port unreachable" for a peer not heard from yet means its process closed
    /// the port, as for one heard from: it is probed, or suspected at once when the error
    /// quotes DATA in flight. `false`: an address may name a port not bound yet (a hostfile
    /// given ahead of the processes), and such an error is ignored until the peer has
    /// spoken (the retransmission timeouts still detect a peer that never does).
    pub bound_at_start: bool,
    /// FENCE datagrams sent to a suspected peer after the first, one per `rto_max`, so that a
    /// lost FENCE does not leave it alive and cut off (every datagram it still sends is
    /// answered with a FENCE too, at most one per `rto_min`).
    pub fence_repeats: u32,
    /// Unacknowledged messages per peer, 1..=64 (the receiver buffers and selectively
    /// acknowledges 64 packets beyond a gap); pre-allocated, `window * 1248` bytes per peer.
    pub window: usize,
    /// How long a standalone ACK may wait for DATA to ride on where the link carries DATA
    /// both ways (this endpoint sent DATA to the peer within [`super::reliable::TWO_WAY`]):
    /// the sender's retransmission timer allows for it, as QUIC's PTO allows for
    /// `max_ack_delay`.
    pub ack_delay: Duration,
    /// The same where the link carries DATA one way (nothing sent back to the peer within
    /// [`super::reliable::TWO_WAY`]: a broadcast tree's links): no DATA will come to ride
    /// on, the hold only gathers several ACKs into one, and a lost datagram with nothing
    /// behind it waits the sender's timer, `rto + ack_delay_one_way`. At most `ack_delay`
    /// (checked when an endpoint is built: a configuration that lowers `ack_delay` below the
    /// default 200 µs lowers this too).
    pub ack_delay_one_way: Duration,
    /// A standalone ACK goes at once after this many in-order DATA datagrams from one peer
    /// (at most `window / 4`; a gap is acknowledged at once anyway).
    pub ack_every: usize,
    /// Job id: datagrams of another job are dropped.
    pub job: u64,
    /// Probability that a received datagram is dropped (loss injection, tests).
    pub loss: f64,
    /// Probability that a received datagram is held back behind the next one (tests).
    pub reorder: f64,
    /// Seed of the injectors (mixed with the rank).
    pub seed: u64,
    /// Emulated one-way link delay: received datagrams are held this long before they are
    /// processed (for kernels without `netem`; see `udp/delay.rs`). Zero: off.
    pub delay: Duration,
    /// Uniform extra delay in `[0, delay_jitter]` per datagram (FIFO kept).
    pub delay_jitter: Duration,
    /// The job's secret key: every datagram is sealed with it and checked against it. `None`:
    /// unauthenticated (benchmarks, tests; whoever sets it should say so loudly).
    pub auth: Option<auth::AuthKey>,
}

impl Default for UdpConfig {
    /// Loopback and data-centre values: RTTs of 10–50 µs, busy-polling peers.
    ///
    /// - `rto_min` 200 µs: RFC 6298's 1 s floor exists for WAN paths and 200 ms delayed ACKs;
    ///   here a floor of ~10 loopback RTTs plus the peer's hold avoids spurious retransmissions
    ///   while a lost packet is repaired in well under a millisecond.
    /// - `rto_initial` 1 ms: before any sample, 20–50× a loopback RTT, so start-up (threads
    ///   spawning, first page faults) does not trigger retransmissions.
    /// - `rto_max` 100 ms and `max_retries` 8: a silent peer is suspected after
    ///   [`UdpConfig::suspicion_time`] — 104 ms from `rto_min`, 329 ms from `rto_initial`,
    ///   0.9 s at most — long enough for a peer thread descheduled on an oversubscribed host,
    ///   short enough for a failure detector. A thin flight (under
    ///   [`super::reliable::THIN_FLIGHT`] packets, the protocols' usual case) first retransmits
    ///   [`super::reliable::LINEAR_TIMEOUTS`] times without backing off and without counting
    ///   retries: suspected [`UdpConfig::linear_time`] later (7.2 ms from `rto_initial`; both in the test below).
    /// - `stall_factor` 2, `stall_memory` 60 s, `silence_max` 2 s: a peer that came back
    ///   after a stall of `s` (a descheduled thread, a flooded socket) gets `2·s` of silence
    ///   before the next suspicion, and the lesson fades over minutes; a peer never seen
    ///   stalling is suspected at the retransmission floor as before; a dead one at most
    ///   `silence_max` + `rto_max` after its last word, well inside the runtime's 5 s
    ///   operation timeout.
    /// - `probe_timeout` 50 ms: hundreds of loopback RTTs for a live peer to answer a probe
    ///   (a forged ICMP error must not kill it), still 2–18× faster than the timeouts for a
    ///   process whose port is really closed.
    /// - `fence_repeats` 20: the FENCE is repeated for 2 s (20 × `rto_max`); a fenced peer
    ///   that keeps sending is answered anyway.
    /// - `window` 64, the largest: every packet in flight then fits in the receiver's reorder
    ///   buffer and SACK bitmap, so every loss is seen as a gap and repaired without waiting
    ///   for the timer; 64 messages per ~30 µs RTT is 2 M messages/s per peer, more than one
    ///   socket carries, for 80 KB of (lazily committed) buffers per peer.
    /// - `ack_delay_one_way` 200 µs and `ack_every` 8: a broadcast tree's links carry DATA
    ///   one way, so an ACK finds no DATA to ride on; held until 8 DATA came or 200 µs
    ///   passed, one ACK answers several operations, and ACK datagrams stay under a quarter
    ///   of the DATA (`acks_per_data`) off the receivers' and senders' critical paths.
    /// - `ack_delay` 500 µs on links that carry DATA both ways: an agreement's answer to a
    ///   contribution (the decision) comes a whole agreement later, 0.3–1 ms with 64 nodes on
    ///   two cores: at 200 µs 0.53 ACK datagrams went per data datagram there (2000
    ///   agreements), each a `sendto` on a shared core that the model does not have (`agree`
    ///   p50 1.5–2.4× its model), at 500 µs 0.004 (docs/measurements.md, "ACKs held for an
    ///   agreement's answer"). On a one-way link that hold bought nothing and cost every
    ///   lost datagram with nothing behind it 0.7 ms instead of 0.5 (`bench --loss
    ///   --correction none`, "ACKs held only where an answer comes back").
    ///
    ///   The sender's retransmission timer is `rto` plus the hold the peer applies, which it
    ///   tells from the same rule on its side (DATA heard from the peer within
    ///   [`super::reliable::TWO_WAY`]), so a held ACK is not a loss; each ACK says how long
    ///   it was held, which its round-trip sample leaves out (the RTO is the path's, not the
    ///   hold's); a gap is still acknowledged at once, so loss repair does not wait.
    fn default() -> Self {
        UdpConfig {
            rto_initial: Duration::from_millis(1),
            rto_min: Duration::from_micros(200),
            rto_max: Duration::from_millis(100),
            max_retries: 8,
            stall_factor: 2,
            stall_memory: Duration::from_secs(60),
            silence_max: Duration::from_secs(2),
            probe_timeout: Duration::from_millis(50),
            bound_at_start: false,
            fence_repeats: 20,
            window: REORDER as usize,
            ack_delay: Duration::from_micros(500),
            ack_delay_one_way: Duration::from_micros(200),
            ack_every: 8,
            job: 0,
            loss: 0.0,
            reorder: 0.0,
            seed: 0x5EED,
            delay: Duration::ZERO,
            delay_jitter: Duration::ZERO,
            auth: None,
        }
    }
}

impl UdpConfig {
    /// The retransmissions of one datagram without an answer after which a peer may be
    /// suspected, for a failure detector above that suspects a silent peer after `bound`:
    /// this configuration's `max_retries`, or as many more as it takes for
    /// [`UdpConfig::suspicion_time`] from `rto_min` to reach `bound` (each one past the
    /// backoff's ceiling adds `rto_max`; at most 10 000), so that the transport does not
    /// undercut the detector's bound (a loaded host's stalls). A closed port is still found
    /// at once (the ICMP error, then an unanswered probe).
    pub fn retries_for(&self, bound: Duration) -> u32 {
        let max = self.rto_max.max(self.rto_min);
        let (mut retries, mut rto, mut total) = (0u32, self.rto_min, Duration::ZERO);
        loop {
            // The time until expiry number `retries + 1` (as `suspicion_time` sums it).
            total = total.saturating_add(rto).saturating_add(self.ack_delay_one_way);
            rto = rto.saturating_mul(2).min(max);
            if retries >= self.max_retries && total >= bound || retries >= 10_000 {
                return retries;
            }
            retries += 1;
        }
    }

    /// The floor of the time from the first unanswered transmission to the suspicion of a
    /// silent peer when the RTO was `rto` at that moment: `Σ_{i=0..=max_retries} min(rto·2^i,
    /// rto_max) + ack_delay_one_way` (plus at most one timer-wheel tick, `rto_min / 8`, per
    /// expiry, and the polling delay; on a link that carried DATA both ways, the expiries
    /// within [`super::reliable::TWO_WAY`] of the peer's last DATA wait `ack_delay` instead
    /// of `ack_delay_one_way`). It is the suspicion time of a peer never seen stalling; one that
    /// recovered from stalls is given up to `stall_factor` × its longest recent stall, at most
    /// `silence_max` (then suspected at the next expiry, within `rto_max`).
    pub fn suspicion_time(&self, rto: Duration) -> Duration {
        let max = self.rto_max.max(self.rto_min);
        let mut r = rto.max(self.rto_min).min(max);
        let mut total = Duration::ZERO;
        for _ in 0..=self.max_retries {
            // Each expiry waits the RTO plus the peer's ACK delay (see `ack_delay_one_way`).
            total = total.saturating_add(r).saturating_add(self.ack_delay_one_way);
            r = r.saturating_mul(2).min(max);
        }
        total
    }

    /// How much later than [`UdpConfig::suspicion_time`] a silent peer with a thin flight
    /// to it (the protocols' usual case) is suspected, the RTO being `rto`: its first
    /// [`super::reliable::LINEAR_TIMEOUTS`] expiries retransmit without backing off and count
    /// no retry.
    pub fn linear_time(&self, rto: Duration) -> Duration {
        let r = rto.max(self.rto_min).min(self.rto_max.max(self.rto_min));
        r.saturating_add(self.ack_delay_one_way)
            .saturating_mul(super::reliable::LINEAR_TIMEOUTS)
    }

    pub(crate) fn validate(&self) -> io::Result<()> {
        let bad = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what.to_string()));
        if self.window == 0 || self.window > REORDER as usize {
            return bad("udp window must be in 1..=64");
        }
        if !(0.0..=1.0).contains(&self.loss) || !(0.0..=1.0).contains(&self.reorder) {
            return bad("udp loss and reorder must be probabilities");
        }
        if self.rto_min.is_zero() {
            return bad("udp rto_min must be positive");
        }
        if self.stall_memory.is_zero() {
            return bad("udp stall_memory must be positive");
        }
        if self.ack_delay_one_way > self.ack_delay {
            return bad("udp ack_delay_one_way must not exceed ack_delay");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suspicion_time_of_defaults_is_bounded() {
        let cfg = UdpConfig::default();
        // 0.2 ms · (2^9 - 1) = 102.2 ms from rto_min, plus 9 one-way ACK delays of 0.2 ms.
        assert_eq!(cfg.suspicion_time(cfg.rto_min), Duration::from_micros(104_000));
        // 1+2+…+64 ms, then twice 100 ms; plus the ACK delays.
        assert_eq!(cfg.suspicion_time(cfg.rto_initial), Duration::from_micros(328_800));
        assert_eq!(cfg.suspicion_time(Duration::MAX), Duration::from_micros(901_800));
        // Six expiries of (1 ms + the ACK delay) without backing off.
        assert_eq!(cfg.linear_time(cfg.rto_initial), Duration::from_micros(7_200));
    }
}
