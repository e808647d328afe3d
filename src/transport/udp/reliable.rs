//! The reliability core, sans-IO: per peer sequence numbers, cumulative and selective
//! acknowledgements, RFC 6298 retransmission ([`RtoEstimator`]) on a `TimerWheel`,
//! duplicate suppression, in-order delivery through a reorder buffer, a bounded retransmit
//! window, adaptive suspicion of silent peers, fail-stop enforcement of a suspicion (FENCE),
//! and ICMP errors taken as hints to probe (see the [module](super) documentation for the
//! protocol).
//!
//! It owns no socket and reads no clock: the driver hands it the time (`now`) with every
//! call, the datagrams it received ([`Reliable::on_datagram`]) and ICMP refusals
//! ([`Reliable::on_refused`]), calls [`Reliable::on_timers`] when [`Reliable::next_due`] is
//! reached, and drains what to transmit with [`Reliable::poll_transmit`] after every call. The
//! socket loop of [`super::UdpTransport`] drives it over UDP; the tests beside it drive two
//! cores over an in-memory link with a virtual clock.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::header::{HEADER_LEN, MAX_DATAGRAM};
use super::rto::RtoEstimator;
use super::timer_wheel::TimerWheel;
use super::{REORDER, UdpConfig, invalid};
use crate::transport::{Delivery, MAX_PAYLOAD, TransportStats};

/// A flight of fewer packets than this is thin (Linux's `tcp_stream_is_thin`): one
/// operation's messages on a tree link, an agreement's UP or DOWN. Nothing after the last of
/// them reveals its loss, so only the timer repairs it.
pub const THIN_FLIGHT: u64 = 4;
/// Expiries of a thin flight's timer that retransmit without backing the RTO off (Linux's
/// `tcp_thin_linear_timeouts`, 6 there too): under random loss each round trip fails with
/// the same odds, and doubling the wait at each made a few losses in a row cost tens of
/// milliseconds. They do not count toward `max_retries`, so a silent peer is suspected no
/// sooner than with backoff alone ([`UdpConfig::suspicion_time`]), a thin flight up to
/// [`UdpConfig::linear_time`] later.
pub const LINEAR_TIMEOUTS: u32 = 6;

/// A link carries DATA both ways while this endpoint sent DATA to the peer within this long
/// (the receiver's rule: it then holds an ACK up to `ack_delay`, for its own DATA to carry,
/// else `ack_delay_one_way`), and the sender expects the longer hold while it heard DATA from
/// the peer within as long (the same DATA, seen at its other end: its window opens at the
/// arrival, after the send, so it closes later too). A contribution's answer comes one
/// agreement later: 10 ms is about ten times the longest agreement of 64 nodes on two cores
/// (`ftcoll agree`'s p99, 0.8–1.1 ms); a link quieter than that is one-way for the hold, which
/// costs it a few more ACKs, never a loss.
///
/// The two ends disagree while the peer's first DATA in a while is on its way (a crossing:
/// our DATA left meanwhile, its timer armed for the shorter hold, and the peer holds the ACK
/// longer) or lost. Its arrival extends the timer by the difference of the holds
/// (`heard_data`), before any expiry, a one-way delay being far below `rto_min`. A lost one
/// can cost one early retransmission, which the peer reports as a duplicate; its ACK says
/// how long it was held, and the RTO learns the delay less that hold, not the hold
/// (`on_duplicate_report`).
pub const TWO_WAY: Duration = Duration::from_millis(10);

/// Whether `at` (the last time something happened, if ever) lies within [`TWO_WAY`] of `now`.
#[inline]
fn recent(at: Option<Instant>, now: Instant) -> bool {
    at.is_some_and(|t| now.saturating_duration_since(t) < TWO_WAY)
}

/// The hold of a link whose last DATA (the one direction the caller watches) was `at`:
/// `ack_delay` within [`TWO_WAY`] of it, else `ack_delay_one_way`.
#[inline]
fn hold_after(cfg: &UdpConfig, at: Option<Instant>, now: Instant) -> Duration {
    if recent(at, now) {
        cfg.ack_delay
    } else {
        cfg.ack_delay_one_way
    }
}

/// A datagram to put on the wire: `bytes` to `to`.
#[derive(Debug)]
pub struct Transmit<'a> {
    pub to: SocketAddr,
    pub bytes: &'a [u8],
}

/// Where a queued datagram lies: a slot of the retransmit window or a peer's ACK buffer.
#[derive(Clone, Copy, Debug)]
enum Queued {
    /// `len` bytes of the window slot `slot`, to `peer`.
    Data { peer: u32, slot: u32, len: u16 },
    /// The ACK buffer of `peer`.
    Ack { peer: u32 },
    /// The FENCE (or PROBE) buffer of `peer`.
    Control { peer: u32 },
}

/// One slot of a retransmit window.
#[derive(Clone, Copy, Debug)]
struct TxSlot {
    len: u16,
    retransmitted: bool,
    sacked: bool,
    /// The peer reported receiving it twice (its retransmission was spurious; counted once).
    dsacked: bool,
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
    /// Expiries without backoff since the peer last acknowledged something new
    /// ([`LINEAR_TIMEOUTS`]).
    linear: u32,
    suspected: bool,
    /// A valid datagram came from the peer once (its port was bound then).
    heard: bool,
    /// When the last valid datagram came from the peer.
    last_heard: Instant,
    /// The longest silence the peer ended by speaking again, and when it ended (the learned
    /// stall, decaying with half-life `stall_memory`).
    stall: Duration,
    stall_at: Instant,
    /// An ICMP hint is being checked: suspect the peer if it says nothing before this.
    probe_due: Option<Instant>,
    /// FENCEs still to repeat to the suspected peer, and when the last one left.
    fences_left: u32,
    fence_tx: Option<Instant>,
    /// Next sequence number expected from the peer (the cumulative ACK we send).
    rcv_next: u64,
    /// When `rcv_next` last moved, on the poll's clock: about the arrival of the DATA just
    /// below it (a poll's clock may read a little before; a hole filled, later), whence the
    /// hold an ACK reports ([`super::rto::RtoEstimator::on_sample_held`]).
    rcv_at: Instant,
    /// Bit i: `rcv_next + 1 + i` is in the reorder buffer (the SACK bitmap we send).
    held: u64,
    /// Reports of the open hole repeated so far (each waits twice as long as the last).
    nack_repeats: u32,
    /// Messages delivered since our last ACK to the peer.
    unacked_rx: usize,
    ack_pending: bool,
    ack_listed: bool,
    ack_due: Instant,
    /// `s + 1` when DATA `s` from the peer came twice and our next ACK must say so (0: none).
    dsack: u64,
    /// The cumulative and selective ACK we last sent the peer (in any datagram): a DATA they
    /// cover that comes again was retransmitted because our ACK was lost or is late, not
    /// because the DATA was (see `on_data`).
    acked: (u64, u64),
    /// When DATA last left for the peer (a retransmission too), and when DATA from it last
    /// came (out of order or twice too): the two ends of the [`TWO_WAY`] rule.
    data_tx: Option<Instant>,
    data_rx: Option<Instant>,
    /// The retransmission timer was last armed with the one-way hold (`ack_delay_one_way`):
    /// DATA from the peer now extends it to the two-way hold (`heard_data`).
    armed_one_way: bool,
}

impl Peer {
    /// How long an ACK to the peer may wait for DATA to ride on: `ack_delay` while we send
    /// the peer DATA too ([`TWO_WAY`]), else `ack_delay_one_way`.
    #[inline]
    fn hold(&self, cfg: &UdpConfig, now: Instant) -> Duration {
        hold_after(cfg, self.data_tx, now)
    }

    /// The hold the peer applies to its ACKs of our DATA, as far as we can tell ([`TWO_WAY`]):
    /// what our retransmission timer waits beyond the RTO.
    #[inline]
    fn allowance(&self, cfg: &UdpConfig, now: Instant) -> Duration {
        hold_after(cfg, self.data_rx, now)
    }

    /// The wait of a retransmission timer armed now: the RTO and the peer's hold
    /// ([`Peer::allowance`]), noting which hold it allowed for.
    #[inline]
    fn timer_wait(&mut self, cfg: &UdpConfig, now: Instant) -> Duration {
        let allowance = self.allowance(cfg, now);
        self.armed_one_way = allowance < cfg.ack_delay;
        self.rto.rto() + allowance
    }

    /// A DATA datagram to the peer carried our cumulative and selective ACK: no ACK datagram
    /// is owed any more, unless a duplicate must be reported (only an ACK datagram says so).
    #[inline]
    fn rode_ack(&mut self, now: Instant) -> (u64, u16, u64) {
        if self.dsack == 0 {
            self.ack_pending = false;
        }
        self.unacked_rx = 0;
        self.ack_fields(now)
    }

    /// The cumulative ACK, how long it was held (µs since the DATA below it arrived, as RFC
    /// 9002's `ack_delay`; saturated) and the selective ACK a datagram to the peer carries
    /// now, noted as sent.
    #[inline]
    fn ack_fields(&mut self, now: Instant) -> (u64, u16, u64) {
        self.acked = (self.rcv_next, self.held);
        let hold = now
            .saturating_duration_since(self.rcv_at)
            .as_micros()
            .min(u128::from(u16::MAX)) as u16;
        (self.rcv_next, hold, self.held)
    }

    /// DATA `seq` of the peer was covered by an ACK we sent it.
    #[inline]
    fn acked_before(&self, seq: u64) -> bool {
        let (ack, sack) = self.acked;
        seq < ack || (seq > ack && seq - ack - 1 < 64 && sack & (1 << (seq - ack - 1)) != 0)
    }
}

/// The reliability state of one endpoint towards all the peers of its job.
pub struct Reliable {
    rank: u32,
    size: u32,
    cfg: UdpConfig,
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
    /// One ACK datagram per peer (several may be queued at once).
    ack_buf: Vec<[u8; HEADER_LEN]>,
    /// One FENCE or PROBE datagram per peer.
    ctl_buf: Vec<[u8; HEADER_LEN]>,
    /// Peers with an ICMP hint being probed.
    pub(super) probing: Vec<u32>,
    /// PROBEs sent so far (each carries its number).
    probes_sent: u64,
    /// The peer whose FENCE stopped this endpoint: it sends and delivers nothing more.
    fenced_by: Option<u32>,
    /// The last receive stopped before the link was empty (see [`Reliable::set_backlog`]).
    rx_backlog: bool,
    /// Datagrams to transmit, in order, and how many of them were handed out.
    outbox: Vec<Queued>,
    sent_out: usize,
    stats: TransportStats,
}

impl Reliable {
    /// The header of DATA `seq` to `p` as last sent, while unacknowledged (tests).
    #[cfg(test)]
    pub(crate) fn data_header(&self, p: u32, seq: u64) -> &[u8] {
        let at = self.tx_index(p as usize, seq) * MAX_DATAGRAM;
        &self.tx_buf[at..at + HEADER_LEN]
    }

    /// The FENCE or PROBE last written for `p`, as sent (tests).
    #[cfg(test)]
    pub(crate) fn control_datagram(&self, p: u32) -> &[u8] {
        &self.ctl_buf[p as usize][..]
    }

    /// Bytes the endpoint of a job of `n` ranks with `window` slots per peer commits when
    /// `talking` of its peers exchange data: the per-peer records, transmit-slot metadata,
    /// reorder lengths, address map, timer wheel (64 Ki slots at most), ACK headers and
    /// lists, and the transmit and reorder buffers of the peers that talk (the other peers'
    /// buffers are zeroed pages the kernel never commits).
    pub fn footprint(n: u64, window: u64, talking: u64) -> u64 {
        let sz = |b: usize| b as u64;
        let per_peer = sz(size_of::<Peer>())
            + window * sz(size_of::<TxSlot>())
            + REORDER * sz(size_of::<u16>())
            + 2 * sz(size_of::<(SocketAddr, u32)>())
            + 3 * sz(size_of::<u32>())
            + sz(size_of::<Instant>())
            + 3 * sz(size_of::<u32>())
            + sz(HEADER_LEN);
        let buffers = window * sz(MAX_DATAGRAM) + REORDER * sz(MAX_PAYLOAD);
        let wheel = (1u64 << 16) * sz(size_of::<u32>());
        n.saturating_mul(per_peer)
            .saturating_add(talking.min(n).saturating_mul(buffers))
            .saturating_add(wheel)
    }

    /// The endpoint of `rank` in the job whose rank `r` is at `peers[r]`, built at `now`; every
    /// buffer is allocated here. A bad rank, duplicate addresses or a bad `cfg` are errors.
    pub fn new(rank: u32, peers: &[SocketAddr], cfg: UdpConfig, now: Instant) -> io::Result<Self> {
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
        let n = peers.len();
        let rto = RtoEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max);
        let peers_state = peers
            .iter()
            .map(|&addr| Peer {
                addr,
                next_seq: 0,
                snd_una: 0,
                rto,
                retries: 0,
                linear: 0,
                heard: false,
                suspected: false,
                last_heard: now,
                stall: Duration::ZERO,
                stall_at: now,
                probe_due: None,
                fences_left: 0,
                fence_tx: None,
                rcv_next: 0,
                rcv_at: now,
                held: 0,
                nack_repeats: 0,
                unacked_rx: 0,
                ack_pending: false,
                ack_listed: false,
                ack_due: now,
                dsack: 0,
                acked: (0, 0),
                data_tx: None,
                data_rx: None,
                armed_one_way: false,
            })
            .collect();
        let slot = TxSlot {
            len: 0,
            retransmitted: false,
            sacked: false,
            dsacked: false,
            sent_at: now,
            last_tx: now,
        };
        let tick = (cfg.rto_min / 8).clamp(Duration::from_micros(1), Duration::from_millis(1));
        let window = cfg.window;
        Ok(Reliable {
            rank,
            size,
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
            ack_buf: vec![[0; HEADER_LEN]; n],
            ctl_buf: vec![[0; HEADER_LEN]; n],
            probing: Vec::with_capacity(n),
            probes_sent: 0,
            fenced_by: None,
            rx_backlog: false,
            // The most one call queues: every window retransmitted on expiry, an ACK and a
            // FENCE or PROBE each.
            outbox: Vec::with_capacity(n * (window + 2)),
            sent_out: 0,
            stats: TransportStats::default(),
            cfg,
        })
    }

    /// This endpoint's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The configuration.
    pub fn config(&self) -> &UdpConfig {
        &self.cfg
    }

    /// The counters (`injected_losses` is the impairment's, below this core: always 0 here).
    pub fn stats(&self) -> TransportStats {
        self.stats
    }

    /// The RTO estimator towards `peer`.
    pub fn rto_estimator(&self, peer: u32) -> Option<RtoEstimator> {
        self.peers.get(peer as usize).map(|p| p.rto)
    }

    /// Whether `peer` is suspected.
    pub fn is_suspected(&self, peer: u32) -> bool {
        self.peers.get(peer as usize).is_some_and(|p| p.suspected)
    }

    /// The peer whose FENCE stopped this endpoint, if one did.
    pub fn fenced_by(&self) -> Option<u32> {
        self.fenced_by
    }

    /// The driver's last receive stopped with datagrams possibly left on the link (its
    /// budget ran out under a flood): until one drains it, a silent peer is suspected only at
    /// `silence_max`, since its answers may be queued behind the garbage.
    pub fn set_backlog(&mut self, backlog: bool) {
        self.rx_backlog = backlog;
    }

    /// The next sequence number expected from `peer` (tests).
    #[cfg(test)]
    pub(crate) fn rcv_next(&self, peer: u32) -> u64 {
        self.peers[peer as usize].rcv_next
    }

    /// Messages sent but not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.peers.iter().map(|p| (p.next_seq - p.snd_una) as usize).sum()
    }

    /// When the last valid datagram from `peer` came (`None`: nothing yet, or suspected).
    pub fn last_heard(&self, peer: u32) -> Option<Instant> {
        self.peers
            .get(peer as usize)
            .filter(|p| p.heard && !p.suspected)
            .map(|p| p.last_heard)
    }

    /// The next sequence number of each peer: what was sent so far ([`Reliable::acked_through`]).
    pub fn sent_marks(&self, marks: &mut Vec<u64>) {
        marks.clear();
        marks.extend(self.peers.iter().map(|p| p.next_seq));
    }

    /// Every message sent to a peer below its mark is acknowledged (a suspected peer's are
    /// given up, acknowledged as far as waiting goes); a peer without a mark: all sent to it.
    pub fn acked_through(&self, marks: &[u64]) -> bool {
        self.peers
            .iter()
            .enumerate()
            .all(|(i, p)| p.snd_una >= marks.get(i).copied().unwrap_or(p.next_seq))
    }

    /// The next datagram to put on the wire, oldest first; `None` when all were handed out.
    /// Drain after every call: the bytes live in the core's buffers, which a later call may
    /// rewrite (a retransmission refreshes the acknowledgement it carries).
    #[inline]
    pub fn poll_transmit(&mut self) -> Option<Transmit<'_>> {
        let Some(&q) = self.outbox.get(self.sent_out) else {
            self.outbox.clear();
            self.sent_out = 0;
            return None;
        };
        self.sent_out += 1;
        Some(match q {
            Queued::Data { peer, slot, len } => {
                let at = slot as usize * MAX_DATAGRAM;
                Transmit {
                    to: self.peers[peer as usize].addr,
                    bytes: &self.tx_buf[at..at + usize::from(len)],
                }
            }
            Queued::Ack { peer } => Transmit {
                to: self.peers[peer as usize].addr,
                bytes: &self.ack_buf[peer as usize],
            },
            Queued::Control { peer } => Transmit {
                to: self.peers[peer as usize].addr,
                bytes: &self.ctl_buf[peer as usize],
            },
        })
    }

    /// Serves what is due at `now`: expired retransmission timers (retransmitting,
    /// suspecting, repeating FENCEs), probes past their deadline, the suspicions not yet
    /// reported (to `sink`), and delayed ACKs. Returns the deliveries made.
    #[inline]
    pub fn on_timers(&mut self, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> usize {
        if self.fenced_by.is_some() {
            return 0;
        }
        if !self.probing.is_empty() {
            self.check_probes(now);
        }
        let mut expired = std::mem::take(&mut self.expired);
        self.wheel.expire(now, &mut expired);
        for &p in &expired {
            self.on_timeout(p as usize, now);
        }
        expired.clear();
        self.expired = expired;
        let mut delivered = 0;
        for peer in self.to_report.drain(..) {
            sink(Delivery::Suspect { peer });
            delivered += 1;
        }
        self.flush_acks(now);
        delivered
    }

    #[inline]
    fn tx_index(&self, peer: usize, seq: u64) -> usize {
        peer * self.cfg.window + (seq % self.cfg.window as u64) as usize
    }

    fn rx_index(peer: usize, seq: u64) -> usize {
        peer * REORDER as usize + (seq % REORDER) as usize
    }

    /// The earliest instant at which a timer or a delayed ACK is due.
    #[inline]
    pub fn next_due(&self) -> Option<Instant> {
        let acks = self
            .ack_list
            .iter()
            .map(|&p| &self.peers[p as usize])
            .filter(|p| p.ack_pending)
            .map(|p| p.ack_due)
            .min();
        let probes = self
            .probing
            .iter()
            .filter_map(|&p| self.peers[p as usize].probe_due)
            .min();
        [acks, self.wheel.next_due(), probes].into_iter().flatten().min()
    }
}

mod receive;
mod send;
mod suspect;
#[cfg(test)]
mod tests;
