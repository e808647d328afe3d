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
//! peer per poll, `ack_delay` after the data they acknowledge (at once when there is a gap or a
//! duplicate). Every buffer is allocated when the endpoint is built: nothing on the message path.
//!
//! A peer that answers nothing to `max_retries` retransmissions in a row is reported once as
//! [`Delivery::Suspect`]; sends to it then fail with [`SendError::Suspected`] and what it
//! sends is dropped. Each peer has its own window and timer, so a silent peer stalls no one
//! else. Every datagram is validated (address, magic, version, kind, length, job, ranks,
//! acknowledgement range) and dropped and counted when anything is wrong.
//!
//! Datagram = 64-byte header (little-endian) + payload:
//! `magic u32 | version u8 | kind u8 | payload len u16 | job u64 | from u32 | to u32 |
//!  seq u64 | ack u64 | sack u64 | tag [u8; 16]`.
//!
//! With a job key ([`UdpConfig::auth`]) `tag` is the keyed MAC ([`auth`]) of the header's
//! first 48 bytes and the payload, and a datagram whose tag does not verify is dropped
//! (counted in `bad_mac`) before any of its fields is read; without a key it is zero and
//! ignored. Checks then run in this order, each counted by reason: sender address in the job
//! (`foreign`), lengths and kind (`malformed`), job id (`foreign_job`), ranks (`bad_rank`),
//! acknowledgement range (`malformed`).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use socket2::{Domain, Protocol, Socket, Type};

use super::{Delivery, MAX_PAYLOAD, SendError, Transport, TransportStats};

/// "FTCU" (ftcoll UDP), first field of every datagram.
pub const MAGIC: u32 = 0x5543_5446;
/// Version of this transport's header (2: the MAC tag).
pub const VERSION: u8 = 2;
/// Bytes of the header in front of every payload.
pub const HEADER_LEN: usize = 64;
/// Offset of the MAC tag in the header (the fields before it and the payload are covered).
pub const TAG_AT: usize = HEADER_LEN - auth::TAG_LEN;
/// The largest datagram sent (1264 bytes: fits a 1500-byte MTU).
pub const MAX_DATAGRAM: usize = HEADER_LEN + MAX_PAYLOAD;

const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;
/// Out-of-order packets buffered per sender (the width of the SACK bitmap).
const REORDER: u64 = 64;
/// Datagrams read per poll at most, so that timers and ACKs are served under a flood (a poll
/// also returns after the first datagram that delivered something).
const RECV_BUDGET: usize = 256;
/// Requested SO_RCVBUF / SO_SNDBUF (the kernel caps it at its maximum, e.g. `rmem_max`).
const SOCKET_BUFFER: usize = 4 << 20;
/// Clock granularity G of RFC 6298 (Instant is finer; 1 µs keeps RTTVAR = 0 harmless).
const CLOCK_GRANULARITY: Duration = Duration::from_micros(1);

/// Tuning of the reliable UDP transport.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpConfig {
    /// RTO before the first RTT sample.
    pub rto_initial: Duration,
    /// Lower bound of the RTO.
    pub rto_min: Duration,
    /// Upper bound of the RTO (caps the exponential backoff).
    pub rto_max: Duration,
    /// Retransmissions of one packet without any answer from the peer before it is suspected.
    pub max_retries: u32,
    /// Unacknowledged messages per peer, 1..=64 (the receiver buffers and selectively
    /// acknowledges 64 packets beyond a gap); pre-allocated, `window * 1248` bytes per peer.
    pub window: usize,
    /// How long a standalone ACK may wait for DATA to ride on.
    pub ack_delay: Duration,
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
    ///   here a floor of ~10 loopback RTTs plus `ack_delay` avoids spurious retransmissions
    ///   while a lost packet is repaired in well under a millisecond.
    /// - `rto_initial` 1 ms: before any sample, 20–50× a loopback RTT, so start-up (threads
    ///   spawning, first page faults) does not trigger retransmissions.
    /// - `rto_max` 100 ms and `max_retries` 8: a silent peer is suspected after
    ///   [`UdpConfig::suspicion_time`] — 102 ms from `rto_min`, 327 ms from `rto_initial`,
    ///   0.9 s at most — long enough for a peer thread descheduled on an oversubscribed host,
    ///   short enough for a failure detector.
    /// - `window` 64, the largest: every packet in flight then fits in the receiver's reorder
    ///   buffer and SACK bitmap, so every loss is seen as a gap and repaired without waiting
    ///   for the timer; 64 messages per ~30 µs RTT is 2 M messages/s per peer, more than one
    ///   socket carries, for 80 KB of (lazily committed) buffers per peer.
    /// - `ack_delay` 20 µs: lets a reply or a forwarded message go out first (and carry the
    ///   ACK), coalesces ACKs of bursts, and stays far below `rto_min`.
    fn default() -> Self {
        UdpConfig {
            rto_initial: Duration::from_millis(1),
            rto_min: Duration::from_micros(200),
            rto_max: Duration::from_millis(100),
            max_retries: 8,
            window: REORDER as usize,
            ack_delay: Duration::from_micros(20),
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
    /// Time from the first unanswered transmission to the suspicion of a silent peer when the
    /// RTO was `rto` at that moment: `Σ_{i=0..=max_retries} min(rto·2^i, rto_max)` (plus at
    /// most one timer-wheel tick, `rto_min / 8`, per expiry, and the polling delay).
    pub fn suspicion_time(&self, rto: Duration) -> Duration {
        let max = self.rto_max.max(self.rto_min);
        let mut r = rto.max(self.rto_min).min(max);
        let mut total = Duration::ZERO;
        for _ in 0..=self.max_retries {
            total = total.saturating_add(r);
            r = r.saturating_mul(2).min(max);
        }
        total
    }

    fn validate(&self) -> io::Result<()> {
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
        Ok(())
    }
}

/// The RFC 6298 retransmission-timeout estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtoEstimator {
    srtt: Option<Duration>,
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
            rttvar: Duration::ZERO,
            rto: initial.max(min).min(max),
            min,
            max,
        }
    }

    /// The current RTO.
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// The smoothed RTT, once a sample was taken.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// A new RTT measurement `r` (of a packet never retransmitted: Karn's rule).
    pub fn on_sample(&mut self, r: Duration) {
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
    pub fn on_timeout(&mut self) {
        self.rto = self.rto.saturating_mul(2).min(self.max);
    }
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    kind: u8,
    len: u16,
    job: u64,
    from: u32,
    to: u32,
    seq: u64,
    ack: u64,
    sack: u64,
}

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl Header {
    /// Writes the header into `out[..HEADER_LEN]` (`out` is at least that long).
    fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4] = VERSION;
        out[5] = self.kind;
        out[6..8].copy_from_slice(&self.len.to_le_bytes());
        out[8..16].copy_from_slice(&self.job.to_le_bytes());
        out[16..20].copy_from_slice(&self.from.to_le_bytes());
        out[20..24].copy_from_slice(&self.to.to_le_bytes());
        out[24..32].copy_from_slice(&self.seq.to_le_bytes());
        write_ack_fields(out, self.ack, self.sack);
    }

    /// Decodes and checks what needs no state: magic, version, kind, lengths.
    fn read(d: &[u8]) -> Option<Header> {
        if d.len() < HEADER_LEN || d.len() > MAX_DATAGRAM {
            return None;
        }
        if le_u32(d, 0)? != MAGIC || d[4] != VERSION {
            return None;
        }
        let h = Header {
            kind: d[5],
            len: le_u16(d, 6)?,
            job: le_u64(d, 8)?,
            from: le_u32(d, 16)?,
            to: le_u32(d, 20)?,
            seq: le_u64(d, 24)?,
            ack: le_u64(d, 32)?,
            sack: le_u64(d, 40)?,
        };
        let ok = match h.kind {
            KIND_DATA => usize::from(h.len) == d.len() - HEADER_LEN,
            KIND_ACK => h.len == 0 && h.seq == 0 && d.len() == HEADER_LEN,
            _ => false,
        };
        ok.then_some(h)
    }
}

/// Writes the MAC tag of a whole datagram (`d.len() >= HEADER_LEN`) into its header (zero
/// without a key).
pub fn seal(key: Option<&auth::AuthKey>, d: &mut [u8]) {
    let tag = match key {
        Some(k) => k.tag(&[&d[..TAG_AT], &d[HEADER_LEN..]]),
        None => [0; auth::TAG_LEN],
    };
    d[TAG_AT..HEADER_LEN].copy_from_slice(&tag);
}

/// Rewrites the acknowledgement fields of a header (piggybacking on a retransmission).
fn write_ack_fields(out: &mut [u8], ack: u64, sack: u64) {
    out[32..40].copy_from_slice(&ack.to_le_bytes());
    out[40..48].copy_from_slice(&sack.to_le_bytes());
}

const NIL: u32 = u32::MAX;

/// A hashed timer wheel of one timer per key (peer), intrusive lists, no allocation after
/// construction. A timer never fires before its deadline, and at most one tick after it once
/// `expire` is called.
#[derive(Debug)]
struct TimerWheel {
    start: Instant,
    tick_ns: u64,
    mask: u64,
    /// Last tick processed.
    cur: u64,
    heads: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Slot of each key, NIL when disarmed.
    slot: Vec<u32>,
    deadline: Vec<Instant>,
    armed: usize,
}

impl TimerWheel {
    fn new(keys: usize, start: Instant, tick: Duration, horizon: Duration) -> Self {
        let tick_ns = (tick.as_nanos() as u64).max(1);
        let slots = (horizon.as_nanos() as u64 / tick_ns + 2)
            .next_power_of_two()
            .clamp(64, 1 << 16);
        TimerWheel {
            start,
            tick_ns,
            mask: slots - 1,
            cur: 0,
            heads: vec![NIL; slots as usize],
            next: vec![NIL; keys],
            prev: vec![NIL; keys],
            slot: vec![NIL; keys],
            deadline: vec![start; keys],
            armed: 0,
        }
    }

    /// Whole ticks from the start to `t`, rounded down (or up).
    fn ticks(&self, t: Instant, up: bool) -> u64 {
        let ns = t.saturating_duration_since(self.start).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        if up {
            ns.div_ceil(self.tick_ns)
        } else {
            ns / self.tick_ns
        }
    }

    fn is_armed(&self, key: u32) -> bool {
        self.slot[key as usize] != NIL
    }

    fn cancel(&mut self, key: u32) {
        let k = key as usize;
        let s = self.slot[k];
        if s == NIL {
            return;
        }
        let (p, n) = (self.prev[k], self.next[k]);
        if p == NIL {
            self.heads[s as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
        self.slot[k] = NIL;
        self.armed -= 1;
    }

    /// Arms (or re-arms) `key` for `at`.
    fn schedule(&mut self, key: u32, at: Instant) {
        self.cancel(key);
        // The first tick starting at or after `at`: it is processed once now >= at.
        let mut t = self.ticks(at, true);
        t = t.max(self.cur + 1).min(self.cur + self.mask);
        let s = (t & self.mask) as u32;
        let k = key as usize;
        let head = self.heads[s as usize];
        self.next[k] = head;
        self.prev[k] = NIL;
        if head != NIL {
            self.prev[head as usize] = key;
        }
        self.heads[s as usize] = key;
        self.slot[k] = s;
        self.deadline[k] = at;
        self.armed += 1;
    }

    /// Appends to `out` (capacity: the number of keys) the keys due at `now`, disarmed.
    fn expire(&mut self, now: Instant, out: &mut Vec<u32>) {
        let target = self.ticks(now, false);
        if target <= self.cur {
            return;
        }
        let first = out.len();
        let steps = (target - self.cur).min(self.mask + 1);
        for i in 1..=steps {
            let s = ((self.cur + i) & self.mask) as usize;
            let mut k = std::mem::replace(&mut self.heads[s], NIL);
            while k != NIL {
                let next = self.next[k as usize];
                self.slot[k as usize] = NIL;
                self.armed -= 1;
                out.push(k);
                k = next;
            }
        }
        self.cur = target;
        // Keys parked at the horizon and not yet due go back in.
        let mut i = first;
        while i < out.len() {
            let k = out[i];
            if self.deadline[k as usize] <= now {
                i += 1;
            } else {
                let at = self.deadline[k as usize];
                self.schedule(k, at);
                out.swap_remove(i);
            }
        }
    }

    /// When the next armed timer may be due (the start of its tick), if any.
    fn next_due(&self) -> Option<Instant> {
        if self.armed == 0 {
            return None;
        }
        (1..=self.mask + 1)
            .map(|i| self.cur + i)
            .find(|t| self.heads[(t & self.mask) as usize] != NIL)
            .map(|t| self.start + Duration::from_nanos(t.saturating_mul(self.tick_ns)))
    }
}

/// One slot of a retransmit window.
#[derive(Clone, Copy, Debug)]
struct TxSlot {
    len: u16,
    retransmitted: bool,
    sacked: bool,
    sent_at: Instant,
    last_tx: Instant,
}

/// Reliability state towards and from one peer.
#[derive(Debug)]
struct Peer {
    addr: SocketAddr,
    /// Next sequence number to send.
    next_seq: u64,
    /// Oldest unacknowledged sequence number.
    snd_una: u64,
    rto: RtoEstimator,
    /// Retransmissions since the peer was last heard from.
    retries: u32,
    suspected: bool,
    /// A valid datagram came from the peer once (its port was bound then).
    heard: bool,
    /// Next sequence number expected from the peer (the cumulative ACK we send).
    rcv_next: u64,
    /// Bit i: `rcv_next + 1 + i` is in the reorder buffer (the SACK bitmap we send).
    held: u64,
    /// Messages delivered since our last ACK to the peer.
    unacked_rx: usize,
    ack_pending: bool,
    ack_listed: bool,
    ack_due: Instant,
}

/// Everything but the receive buffers (so that a payload can be delivered from them while the
/// state changes).
struct Core {
    rank: u32,
    size: u32,
    cfg: UdpConfig,
    socket: UdpSocket,
    addr_rank: HashMap<SocketAddr, u32>,
    peers: Vec<Peer>,
    /// `size * window` slots.
    tx_meta: Vec<TxSlot>,
    /// `size * window * MAX_DATAGRAM` bytes: the datagrams as sent.
    tx_buf: Vec<u8>,
    /// `size * REORDER` payload lengths and `size * REORDER * MAX_PAYLOAD` bytes.
    rx_len: Vec<u16>,
    rx_buf: Vec<u8>,
    wheel: TimerWheel,
    expired: Vec<u32>,
    ack_list: Vec<u32>,
    to_report: Vec<u32>,
    /// The kernel reported an ICMP error: read its queue at the next poll.
    errors_queued: bool,
    ack_buf: [u8; HEADER_LEN],
    stats: TransportStats,
}

impl Core {
    fn tx_index(&self, peer: usize, seq: u64) -> usize {
        peer * self.cfg.window + (seq % self.cfg.window as u64) as usize
    }

    fn rx_index(peer: usize, seq: u64) -> usize {
        peer * REORDER as usize + (seq % REORDER) as usize
    }

    fn send_datagram(&mut self, bytes_at: usize, len: usize, addr: SocketAddr) {
        seal(self.cfg.auth.as_ref(), &mut self.tx_buf[bytes_at..bytes_at + len]);
        // Errors (full socket buffer, unreachable) are losses: the RTO repairs them; a refusal
        // reported here leaves its details in the error queue, read by the next poll.
        if let Err(e) = self.socket.send_to(&self.tx_buf[bytes_at..bytes_at + len], addr)
            && e.kind() == io::ErrorKind::ConnectionRefused
        {
            self.errors_queued = true;
        }
    }

    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        if to >= self.size || to == self.rank {
            return Err(SendError::BadPeer);
        }
        if bytes.len() > MAX_PAYLOAD {
            return Err(SendError::TooLarge);
        }
        let p = to as usize;
        let peer = &self.peers[p];
        if peer.suspected {
            return Err(SendError::Suspected);
        }
        if peer.next_seq - peer.snd_una >= self.cfg.window as u64 {
            self.stats.window_full += 1;
            return Err(SendError::WindowFull);
        }
        let seq = peer.next_seq;
        let header = Header {
            kind: KIND_DATA,
            len: bytes.len() as u16,
            job: self.cfg.job,
            from: self.rank,
            to,
            seq,
            ack: peer.rcv_next,
            sack: peer.held,
        };
        let addr = peer.addr;
        let i = self.tx_index(p, seq);
        let at = i * MAX_DATAGRAM;
        let len = HEADER_LEN + bytes.len();
        let buf = &mut self.tx_buf[at..at + len];
        header.write(buf);
        buf[HEADER_LEN..].copy_from_slice(bytes);
        self.tx_meta[i] = TxSlot {
            len: len as u16,
            retransmitted: false,
            sacked: false,
            sent_at: now,
            last_tx: now,
        };
        let peer = &mut self.peers[p];
        peer.next_seq += 1;
        peer.ack_pending = false;
        peer.unacked_rx = 0;
        let rto = peer.rto.rto();
        self.send_datagram(at, len, addr);
        if !self.wheel.is_armed(to) {
            self.wheel.schedule(to, now + rto);
        }
        self.stats.sent += 1;
        Ok(())
    }

    fn retransmit(&mut self, p: usize, seq: u64, now: Instant) {
        let i = self.tx_index(p, seq);
        let at = i * MAX_DATAGRAM;
        let len = usize::from(self.tx_meta[i].len);
        let peer = &mut self.peers[p];
        let (ack, sack, addr) = (peer.rcv_next, peer.held, peer.addr);
        peer.ack_pending = false;
        peer.unacked_rx = 0;
        write_ack_fields(&mut self.tx_buf[at..at + HEADER_LEN], ack, sack);
        let slot = &mut self.tx_meta[i];
        slot.retransmitted = true;
        slot.last_tx = now;
        self.send_datagram(at, len, addr);
        self.stats.retransmits += 1;
    }

    /// The peer acknowledged everything below `ack` and the packets flagged in `sack`.
    fn on_ack(&mut self, p: usize, ack: u64, sack: u64, now: Instant) {
        let peer = &self.peers[p];
        let (una, next) = (peer.snd_una, peer.next_seq);
        if ack > una {
            // Karn: the RTT of the newest packet acknowledged here, unless retransmitted.
            let newest = self.tx_meta[self.tx_index(p, ack - 1)];
            let peer = &mut self.peers[p];
            if !newest.retransmitted {
                peer.rto.on_sample(now.saturating_duration_since(newest.sent_at));
            }
            peer.snd_una = ack;
            let rto = peer.rto.rto();
            if ack == next {
                self.wheel.cancel(p as u32);
            } else {
                self.wheel.schedule(p as u32, now + rto);
            }
        }
        if sack == 0 {
            return;
        }
        let una = self.peers[p].snd_una;
        let mut bits = sack;
        while bits != 0 {
            let seq = ack + 1 + u64::from(bits.trailing_zeros());
            bits &= bits - 1;
            if seq >= una && seq < next {
                let i = self.tx_index(p, seq);
                self.tx_meta[i].sacked = true;
            }
        }
        // The holes below the highest packet received were lost (or are late): resend each
        // at most once per smoothed RTT.
        let highest = (ack + 64 - u64::from(sack.leading_zeros())).min(next);
        let gap = self.peers[p].rto.srtt().unwrap_or(self.cfg.rto_min);
        for seq in ack.max(una)..highest {
            let slot = self.tx_meta[self.tx_index(p, seq)];
            if !slot.sacked && now.saturating_duration_since(slot.last_tx) >= gap {
                self.retransmit(p, seq, now);
            }
        }
    }

    /// Asks for an ACK to `p` at `due` at the latest.
    fn want_ack(&mut self, p: usize, due: Instant) {
        let peer = &mut self.peers[p];
        if !peer.ack_pending || due < peer.ack_due {
            peer.ack_due = due;
        }
        peer.ack_pending = true;
        if !peer.ack_listed {
            peer.ack_listed = true;
            self.ack_list.push(p as u32);
        }
    }

    fn on_data(
        &mut self,
        p: usize,
        seq: u64,
        payload: &[u8],
        now: Instant,
        sink: &mut dyn FnMut(Delivery<'_>),
    ) -> usize {
        let from = p as u32;
        let rcv_next = self.peers[p].rcv_next;
        if seq < rcv_next {
            // Our ACK was lost or is late: say again what we have.
            self.stats.duplicates += 1;
            self.want_ack(p, now);
            return 0;
        }
        if seq > rcv_next {
            let off = seq - rcv_next - 1;
            if off >= REORDER {
                // Beyond the reorder buffer: dropped, the sender will retransmit.
                self.want_ack(p, now);
                return 0;
            }
            if self.peers[p].held & (1 << off) != 0 {
                self.stats.duplicates += 1;
            } else {
                let i = Self::rx_index(p, seq);
                let at = i * MAX_PAYLOAD;
                self.rx_buf[at..at + payload.len()].copy_from_slice(payload);
                self.rx_len[i] = payload.len() as u16;
                self.peers[p].held |= 1 << off;
            }
            // A gap: tell the sender now (the NACK).
            self.want_ack(p, now);
            return 0;
        }
        sink(Delivery::Message { from, bytes: payload });
        let mut delivered = 1;
        let peer = &mut self.peers[p];
        peer.rcv_next += 1;
        while peer.held & 1 != 0 {
            peer.held >>= 1;
            let i = Self::rx_index(p, peer.rcv_next);
            let at = i * MAX_PAYLOAD;
            let len = usize::from(self.rx_len[i]);
            sink(Delivery::Message {
                from,
                bytes: &self.rx_buf[at..at + len],
            });
            peer.rcv_next += 1;
            delivered += 1;
        }
        peer.held >>= 1;
        peer.unacked_rx += delivered;
        self.stats.received += delivered as u64;
        let due = if peer.held != 0 || peer.unacked_rx >= (self.cfg.window / 4).max(1) {
            now
        } else {
            now + self.cfg.ack_delay
        };
        self.want_ack(p, due);
        delivered
    }

    /// Validates one datagram from `src` and acts on it; returns the deliveries made.
    fn on_datagram(&mut self, d: &[u8], src: SocketAddr, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> usize {
        let Some(&from) = self.addr_rank.get(&src) else {
            self.stats.foreign += 1;
            return 0;
        };
        if d.len() < HEADER_LEN || d.len() > MAX_DATAGRAM {
            self.stats.malformed += 1;
            return 0;
        }
        if let Some(key) = &self.cfg.auth
            && !key.verify(&[&d[..TAG_AT], &d[HEADER_LEN..]], &d[TAG_AT..HEADER_LEN])
        {
            self.stats.bad_mac += 1;
            return 0;
        }
        let Some(h) = Header::read(d) else {
            self.stats.malformed += 1;
            return 0;
        };
        let p = from as usize;
        if h.job != self.cfg.job {
            self.stats.foreign_job += 1;
            return 0;
        }
        // A datagram "from" this endpoint's own address is never a peer's (found by fuzzing:
        // it was delivered as a message from ourselves).
        if h.from != from || h.to != self.rank || from == self.rank {
            self.stats.bad_rank += 1;
            return 0;
        }
        if h.ack > self.peers[p].next_seq {
            self.stats.malformed += 1;
            return 0;
        }
        if self.peers[p].suspected {
            self.stats.from_suspected += 1;
            return 0;
        }
        // The peer is alive.
        self.peers[p].retries = 0;
        self.peers[p].heard = true;
        self.on_ack(p, h.ack, h.sack, now);
        if h.kind == KIND_DATA {
            self.on_data(p, h.seq, &d[HEADER_LEN..], now, sink)
        } else {
            0
        }
    }

    /// Stops all traffic to `p` and reports it to the driver as suspected.
    fn suspect(&mut self, p: usize) {
        let peer = &mut self.peers[p];
        peer.suspected = true;
        peer.snd_una = peer.next_seq;
        peer.ack_pending = false;
        self.to_report.push(p as u32);
        self.stats.suspected += 1;
    }

    /// The kernel says a datagram to `addr` met a closed port: a peer heard from before has
    /// died (see `udp/icmp.rs`).
    fn on_refused(&mut self, addr: SocketAddr) {
        if let Some(&r) = self.addr_rank.get(&addr) {
            let p = r as usize;
            if p != self.rank as usize && self.peers[p].heard && !self.peers[p].suspected {
                self.stats.refused += 1;
                self.suspect(p);
            }
        }
    }

    /// The retransmission timer of `p` expired (RFC 6298 5.4–5.6).
    fn on_timeout(&mut self, p: usize, now: Instant) {
        let peer = &mut self.peers[p];
        if peer.suspected || peer.snd_una == peer.next_seq {
            return;
        }
        peer.retries += 1;
        if peer.retries > self.cfg.max_retries {
            self.suspect(p);
            return;
        }
        let (una, next, expired_rto) = (peer.snd_una, peer.next_seq, peer.rto.rto());
        peer.rto.on_timeout();
        let rto = peer.rto.rto();
        self.retransmit(p, una, now);
        // Go-back-N as TCP after a timeout: the rest of the flight that was neither
        // selectively acknowledged nor sent within the expired RTO is presumed lost too.
        for seq in una + 1..next {
            let slot = self.tx_meta[self.tx_index(p, seq)];
            if !slot.sacked && now.saturating_duration_since(slot.last_tx) >= expired_rto {
                self.retransmit(p, seq, now);
            }
        }
        self.wheel.schedule(p as u32, now + rto);
    }

    fn send_ack(&mut self, p: usize) {
        let peer = &mut self.peers[p];
        let header = Header {
            kind: KIND_ACK,
            len: 0,
            job: self.cfg.job,
            from: self.rank,
            to: p as u32,
            seq: 0,
            ack: peer.rcv_next,
            sack: peer.held,
        };
        peer.ack_pending = false;
        peer.unacked_rx = 0;
        header.write(&mut self.ack_buf);
        seal(self.cfg.auth.as_ref(), &mut self.ack_buf);
        let _ = self.socket.send_to(&self.ack_buf, peer.addr);
        self.stats.acks_sent += 1;
    }

    /// Sends the ACKs that are due (one per peer).
    fn flush_acks(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.ack_list.len() {
            let p = self.ack_list[i] as usize;
            let peer = &self.peers[p];
            if !peer.ack_pending || peer.suspected {
                self.peers[p].ack_listed = false;
                self.ack_list.swap_remove(i);
            } else if peer.ack_due <= now {
                self.send_ack(p);
                self.peers[p].ack_listed = false;
                self.ack_list.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// The earliest instant at which a timer or a delayed ACK is due.
    fn next_due(&self) -> Option<Instant> {
        let acks = self
            .ack_list
            .iter()
            .map(|&p| &self.peers[p as usize])
            .filter(|p| p.ack_pending)
            .map(|p| p.ack_due)
            .min();
        match (acks, self.wheel.next_due()) {
            (Some(a), Some(t)) => Some(a.min(t)),
            (a, t) => a.or(t),
        }
    }
}

/// The reliable UDP endpoint of one rank.
pub struct UdpTransport {
    core: Core,
    poll: Poll,
    events: Events,
    /// Receive buffer, one byte longer than the largest valid datagram (to see truncation).
    rbuf: Box<[u8]>,
    /// A datagram held back by the reorder injector.
    hbuf: Box<[u8]>,
    rng: Option<Xoshiro256PlusPlus>,
    /// The emulated link delay, when configured.
    delay: Option<Box<delay::DelayLine>>,
    /// The last poll stopped before the socket was empty: more may be waiting.
    backlog: bool,
}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("rank", &self.core.rank)
            .field("size", &self.core.size)
            .field("local_addr", &self.core.socket.local_addr().ok())
            .finish()
    }
}

/// Receive errors after which reading goes on.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
    )
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// A non-blocking UDP socket with large buffers, not yet bound.
fn new_socket(addr: &SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    // Best effort: the kernel caps these at its limits.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    Ok(socket)
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
        Self::from_socket(rank, peers, cfg, socket)
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
            .map(|(rank, s)| Self::from_socket(rank as u32, &addrs, cfg.clone(), s))
            .collect::<io::Result<Vec<_>>>()?;
        Ok((addrs, transports))
    }

    fn from_socket(rank: u32, peers: &[SocketAddr], cfg: UdpConfig, socket: Socket) -> io::Result<Self> {
        cfg.validate()?;
        let size = u32::try_from(peers.len()).map_err(|_| invalid("too many peers"))?;
        if rank >= size {
            return Err(invalid("rank outside the peer list"));
        }
        let mut addr_rank = HashMap::with_capacity(peers.len());
        for (r, a) in peers.iter().enumerate() {
            if addr_rank.insert(*a, r as u32).is_some() {
                return Err(invalid("duplicate peer address"));
            }
        }
        let socket = UdpSocket::from_std(socket.into());
        icmp::enable(&socket, peers[rank as usize].is_ipv6());
        if !cfg.delay.is_zero() || !cfg.delay_jitter.is_zero() {
            rx_stamp::enable(&socket);
        }
        let poll = Poll::new()?;
        let n = peers.len();
        let now = Instant::now();
        let rto = RtoEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max);
        let peers_state = peers
            .iter()
            .map(|&addr| Peer {
                addr,
                next_seq: 0,
                snd_una: 0,
                rto,
                retries: 0,
                heard: false,
                suspected: false,
                rcv_next: 0,
                held: 0,
                unacked_rx: 0,
                ack_pending: false,
                ack_listed: false,
                ack_due: now,
            })
            .collect();
        let slot = TxSlot {
            len: 0,
            retransmitted: false,
            sacked: false,
            sent_at: now,
            last_tx: now,
        };
        let tick = (cfg.rto_min / 8).clamp(Duration::from_micros(1), Duration::from_millis(1));
        let rng = (cfg.loss > 0.0 || cfg.reorder > 0.0).then(|| {
            let mix = u64::from(rank).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ mix)
        });
        let window = cfg.window;
        let delay = (!cfg.delay.is_zero() || !cfg.delay_jitter.is_zero()).then(|| {
            Box::new(delay::DelayLine::new(
                cfg.delay,
                cfg.delay_jitter,
                MAX_DATAGRAM,
                cfg.seed ^ u64::from(rank),
            ))
        });
        let core = Core {
            rank,
            size,
            socket,
            addr_rank,
            peers: peers_state,
            tx_meta: vec![slot; n * window],
            // Zeroed allocations: the kernel commits the pages of unused peers lazily.
            tx_buf: vec![0; n * window * MAX_DATAGRAM],
            rx_len: vec![0; n * REORDER as usize],
            rx_buf: vec![0; n * REORDER as usize * MAX_PAYLOAD],
            wheel: TimerWheel::new(n, now, tick, cfg.rto_max),
            expired: Vec::with_capacity(n),
            ack_list: Vec::with_capacity(n),
            to_report: Vec::with_capacity(n),
            errors_queued: false,
            ack_buf: [0; HEADER_LEN],
            stats: TransportStats::default(),
            cfg,
        };
        Ok(UdpTransport {
            core,
            poll,
            events: Events::with_capacity(4),
            rbuf: vec![0; MAX_DATAGRAM + 1].into_boxed_slice(),
            hbuf: vec![0; MAX_DATAGRAM + 1].into_boxed_slice(),
            rng,
            delay,
            backlog: false,
        })
    }

    /// The address this endpoint is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.core.socket.local_addr()
    }

    /// The configuration.
    pub fn config(&self) -> &UdpConfig {
        &self.core.cfg
    }

    /// The RTO estimator towards `peer` (diagnostics, tests).
    pub fn rto_estimator(&self, peer: u32) -> Option<RtoEstimator> {
        self.core.peers.get(peer as usize).map(|p| p.rto)
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
        self.core.on_datagram(d, src, now, sink)
    }

    /// Whether `peer` is suspected.
    pub fn is_suspected(&self, peer: u32) -> bool {
        self.core.peers.get(peer as usize).is_some_and(|p| p.suspected)
    }

    fn random_unit(rng: &mut Xoshiro256PlusPlus) -> f64 {
        (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl Transport for UdpTransport {
    fn rank(&self) -> u32 {
        self.core.rank
    }

    fn size(&self) -> u32 {
        self.core.size
    }

    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        self.core.send(to, bytes, now)
    }

    fn poll(&mut self, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> io::Result<usize> {
        let mut delivered = 0;
        let mut held: Option<(usize, SocketAddr)> = None;
        self.backlog = false;
        let mut reads = 0;
        loop {
            if reads == RECV_BUDGET {
                self.backlog = true;
                break;
            }
            reads += 1;
            // Held datagrams are due `delay` after their kernel arrival stamp (rx_stamp.rs).
            let read = if self.delay.is_some() {
                rx_stamp::recv(&self.core.socket, &mut self.rbuf)
            } else {
                self.core
                    .socket
                    .recv_from(&mut self.rbuf)
                    .map(|(n, src)| (n, src, None))
            };
            let (n, src, arrived) = match read {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // Signals, ICMP errors of earlier sends (some platforms): keep reading.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.core.errors_queued = true;
                    continue;
                }
                Err(e) if transient(&e) => continue,
                Err(e) => return Err(e),
            };
            if let Some(rng) = self.rng.as_mut() {
                if Self::random_unit(rng) < self.core.cfg.loss {
                    self.core.stats.injected_losses += 1;
                    continue;
                }
                if held.is_none() && Self::random_unit(rng) < self.core.cfg.reorder {
                    self.hbuf[..n].copy_from_slice(&self.rbuf[..n]);
                    held = Some((n, src));
                    continue;
                }
            }
            if let Some(line) = self.delay.as_mut() {
                if !line.push(&self.rbuf[..n], src, arrived.unwrap_or(now)) {
                    self.core.stats.injected_losses += 1;
                }
                continue;
            }
            delivered += self.core.on_datagram(&self.rbuf[..n], src, now, sink);
            if let Some((hn, hsrc)) = held.take() {
                delivered += self.core.on_datagram(&self.hbuf[..hn], hsrc, now, sink);
            }
            if delivered > 0 {
                // Hand the messages over now: the runtime's reply or forward goes out before
                // the read that would find the socket empty (a syscall off the critical path).
                self.backlog = true;
                break;
            }
        }
        if let Some((hn, hsrc)) = held.take() {
            delivered += self.core.on_datagram(&self.hbuf[..hn], hsrc, now, sink);
        }
        if let Some(line) = self.delay.as_mut() {
            let core = &mut self.core;
            while line.pop_due(now, &mut |d, src| delivered += core.on_datagram(d, src, now, sink)) {}
        }
        if self.core.errors_queued {
            self.core.errors_queued = false;
            // Bounded: the queue holds what the kernel kept (a few entries per refused send).
            for _ in 0..64 {
                match icmp::next_refused(&self.core.socket) {
                    Ok(Some(addr)) => self.core.on_refused(addr),
                    Ok(None) => {}
                    Err(_) => break,
                }
            }
        }
        let mut expired = std::mem::take(&mut self.core.expired);
        self.core.wheel.expire(now, &mut expired);
        for &p in &expired {
            self.core.on_timeout(p as usize, now);
        }
        expired.clear();
        self.core.expired = expired;
        for peer in self.core.to_report.drain(..) {
            sink(Delivery::Suspect { peer });
            delivered += 1;
        }
        self.core.flush_acks(now);
        Ok(delivered)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        if self.backlog {
            return Ok(());
        }
        let mut timeout = timeout;
        if let Some(due) = self.core.next_due() {
            timeout = timeout.min(due.saturating_duration_since(Instant::now()));
        }
        if let Some(due) = self.delay.as_ref().and_then(|l| l.next_due()) {
            timeout = timeout.min(due.saturating_duration_since(Instant::now()));
        }
        if timeout.is_zero() {
            return Ok(());
        }
        if timeout < Duration::from_millis(1) {
            // epoll counts in milliseconds (mio rounds up): a timer due in 20 µs would sleep a
            // whole millisecond. ppoll takes a timespec and sleeps on a high-resolution timer.
            return crate::transport::ppoll::readable(std::os::fd::AsFd::as_fd(&self.core.socket), timeout).map(|_| ());
        }
        // Registered only while waiting: a registered socket costs ~0.2 µs more per arrival
        // (the epoll callback, measured on loopback), which busy polling should not pay.
        // Registration reports data already queued, so nothing is missed.
        let registry = self.poll.registry();
        registry.register(&mut self.core.socket, Token(0), Interest::READABLE)?;
        let waited = self.poll.poll(&mut self.events, Some(timeout));
        self.poll.registry().deregister(&mut self.core.socket)?;
        match waited {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => Err(e),
            _ => Ok(()),
        }
    }

    fn stats(&self) -> TransportStats {
        self.core.stats
    }

    fn unacked(&self) -> usize {
        self.core.peers.iter().map(|p| (p.next_seq - p.snd_una) as usize).sum()
    }
}

#[cfg(test)]
mod tests;

mod delay;
mod recvmsg;
mod rx_stamp;

pub(crate) mod icmp;

pub mod auth;
