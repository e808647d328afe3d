//! The receive side of the core: validation of every datagram, acknowledgements (cumulative
//! and selective, with the NACK retransmission of holes), in-order delivery through the
//! reorder buffer, the learning of stalls (adaptive suspicion), and FENCEs (fail-stop
//! enforcement).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::Reliable;
use crate::transport::Delivery;
use crate::transport::MAX_PAYLOAD;
use crate::transport::udp::REORDER;
use crate::transport::udp::header::{
    HEADER_LEN, Header, KIND_ACK, KIND_DATA, KIND_FENCE, KIND_PROBE, MAX_DATAGRAM, verify,
};

impl Reliable {
    /// Validates one datagram from `src` and acts on it; returns the deliveries made. A
    /// fenced endpoint reads nothing more.
    #[inline]
    pub fn on_datagram(
        &mut self,
        d: &[u8],
        src: SocketAddr,
        now: Instant,
        sink: &mut dyn FnMut(Delivery<'_>),
    ) -> usize {
        if self.fenced_by.is_some() {
            return 0;
        }
        let Some(&from) = self.addr_rank.get(&src) else {
            self.stats.foreign += 1;
            return 0;
        };
        if d.len() < HEADER_LEN || d.len() > MAX_DATAGRAM {
            self.stats.malformed += 1;
            return 0;
        }
        if let Some(key) = &self.cfg.auth
            && !verify(key, d)
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
        // An ACK's duplicate report names a packet this endpoint sent (`seq - 1 < next_seq`).
        if h.ack > self.peers[p].next_seq || (h.kind == KIND_ACK && h.seq > self.peers[p].next_seq) {
            self.stats.malformed += 1;
            return 0;
        }
        if self.peers[p].suspected {
            // A dead process sends nothing: what comes from a suspect is dropped, and answered
            // with a FENCE (a FENCE is not, so two endpoints that suspect each other do not
            // keep fencing each other).
            self.stats.from_suspected += 1;
            if h.kind != KIND_FENCE {
                self.refence(p, now);
            }
            return 0;
        }
        if h.kind == KIND_FENCE {
            // Fail-stop enforcement: a live peer suspected this endpoint; it stops.
            self.fence(from);
            sink(Delivery::Fenced { by: from });
            return 1;
        }
        // The peer is alive; a silence that ends here is a stall it recovered from.
        self.learn_stall(p, now);
        let peer = &mut self.peers[p];
        peer.retries = 0;
        peer.heard = true;
        peer.last_heard = now;
        peer.probe_due = None;
        if h.kind == KIND_DATA {
            // Before its ACK fields are read: DATA from the peer may change the hold it applies.
            self.heard_data(p, now);
        }
        if h.kind == KIND_ACK && h.seq != 0 {
            self.on_duplicate_report(p, h.seq - 1, h.hold, now);
        }
        self.on_ack(p, h.ack, h.hold, h.sack, now);
        match h.kind {
            KIND_DATA => self.on_data(p, h.seq, &d[HEADER_LEN..], now, sink),
            KIND_PROBE => {
                self.want_ack(p, now);
                0
            }
            _ => 0,
        }
    }

    /// `p` spoke at `now`: if something to it was unacknowledged, it had been silent since
    /// its last word or that send, whichever is later; the longest such silence, decayed, is
    /// what its suspicion bound learns from.
    fn learn_stall(&mut self, p: usize, now: Instant) {
        let peer = &self.peers[p];
        if peer.snd_una == peer.next_seq {
            return;
        }
        let oldest = self.tx_meta[self.tx_index(p, peer.snd_una)].sent_at;
        let silence = now.saturating_duration_since(peer.last_heard.max(oldest));
        if silence > self.learned(peer, now) {
            let peer = &mut self.peers[p];
            peer.stall = silence;
            peer.stall_at = now;
        }
    }

    /// The peer received our DATA `seq` twice (RFC 2883's duplicate-SACK). When we had
    /// retransmitted it, the retransmission was spurious: the original was not lost but late
    /// (typically the peer's thread was descheduled past our RTO, which Karn's rule then kept
    /// out of the estimator). The time from the original send to this report is a true upper
    /// sample of that delay, and the RTO adapts to it as the Eifel response does (RFC 4015):
    /// the next stall of that length then costs no retransmission, no duplicate and no extra
    /// ACK. A duplicate we never retransmitted (the network's) teaches nothing. Less the time
    /// the report's ACK says the peer held it (`hold` µs, at most `ack_delay`): a hold is no
    /// delay of the path, and our timer allows for it already (a retransmission that beat a
    /// held ACK: the peer's DATA that told us of its longer hold was lost).
    fn on_duplicate_report(&mut self, p: usize, seq: u64, hold: u16, now: Instant) {
        let next = self.peers[p].next_seq;
        if next - seq > self.cfg.window as u64 {
            // Its window slot holds a later packet now: too old to learn from.
            return;
        }
        let i = self.tx_index(p, seq);
        let slot = &mut self.tx_meta[i];
        if !slot.retransmitted || slot.dsacked {
            return;
        }
        slot.dsacked = true;
        let held = Duration::from_micros(u64::from(hold)).min(self.cfg.ack_delay);
        let delay = now.saturating_duration_since(slot.sent_at).saturating_sub(held);
        self.peers[p].rto.on_spurious(delay);
        self.stats.spurious_retransmits += 1;
    }

    /// The peer acknowledged everything below `ack` and the packets flagged in `sack`, having
    /// held the acknowledgement `hold` µs.
    pub(super) fn on_ack(&mut self, p: usize, ack: u64, hold: u16, sack: u64, now: Instant) {
        let peer = &self.peers[p];
        let (una, next) = (peer.snd_una, peer.next_seq);
        if ack > una {
            // Karn: the RTT of the newest packet acknowledged here, unless retransmitted.
            let newest = self.tx_meta[self.tx_index(p, ack - 1)];
            let peer = &mut self.peers[p];
            let allowance = peer.allowance(&self.cfg, now);
            if !newest.retransmitted {
                // Less the time the peer held its ACK (RFC 9002 §5.3): a thin flight's every
                // ACK waits up to its hold for DATA to ride on, which is no part of the
                // path's round trip (the timer adds the hold for it below).
                // At most the hold the peer applies: a flush later than that (the peer's
                // thread away) is the path's, as RFC 9002 caps `ack_delay` at `max_ack_delay`.
                let held = Duration::from_micros(u64::from(hold)).min(allowance);
                peer.rto
                    .on_sample_held(now.saturating_duration_since(newest.sent_at), held);
            }
            peer.snd_una = ack;
            peer.linear = 0;
            if ack == next {
                self.wheel.cancel(p as u32);
            } else {
                // The peer may hold its ACK that long (QUIC's max_ack_delay in its PTO).
                let wait = peer.timer_wait(&self.cfg, now);
                self.wheel.schedule(p as u32, now + wait);
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
        // The holes below the highest packet received were lost: each was sent before a
        // packet the peer has, and the paths this transport runs on (a host's loopback, one
        // fabric route) keep a flow's order. A hole sent once is resent at once, whatever the
        // flight's size (Early Retransmit, RFC 5827, down to one duplicate; RACK, RFC 8985
        // §6.2, with no reordering window); a resent one again at most once per least round
        // trip and a quarter (RACK's window, `min_RTT / 4`, on top). Not per smoothed RTT,
        // as before: its samples included the ACKs a receiver held (up to `ack_delay`, a thin
        // flight's every ACK), so a hole behind a lost message waited for the retransmission
        // timer (`bench --loss`: the checked correction's message behind a lost tree
        // message on the same link colored its receiver an RTO late).
        let highest = (ack + 64 - u64::from(sack.leading_zeros())).min(next);
        let est = &self.peers[p].rto;
        let again = est
            .min_rtt()
            .map(|m| m + m / 4)
            .or(est.srtt())
            .unwrap_or(self.cfg.rto_min);
        for seq in ack.max(una)..highest {
            let slot = self.tx_meta[self.tx_index(p, seq)];
            if !slot.sacked && (!slot.retransmitted || now.saturating_duration_since(slot.last_tx) >= again) {
                self.retransmit(p, seq, now);
            }
        }
    }

    /// DATA came from `p`: the link carries DATA both ways now if we send `p` DATA too, and `p`
    /// holds its ACKs of ours `ack_delay` ([`super::TWO_WAY`]). A retransmission timer armed
    /// for the shorter hold, `ack_delay_one_way` (a crossing: our DATA left while this was on
    /// its way), is extended by the difference, or the ACK `p` now holds would come after it
    /// and the DATA would be resent for nothing. Extended, never restarted: a peer that keeps
    /// talking must not keep a lost message's timer from firing.
    fn heard_data(&mut self, p: usize, now: Instant) {
        let extra = self.cfg.ack_delay.saturating_sub(self.cfg.ack_delay_one_way);
        let peer = &mut self.peers[p];
        peer.data_rx = Some(now);
        if !peer.armed_one_way || peer.suspected || peer.snd_una == peer.next_seq {
            return;
        }
        peer.armed_one_way = false;
        if let Some(due) = self.wheel.deadline(p as u32) {
            self.wheel.schedule(p as u32, due + extra);
        }
    }

    /// Asks for an ACK to `p` at `due` at the latest.
    pub(super) fn want_ack(&mut self, p: usize, due: Instant) {
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

    /// DATA `seq` of `p` came twice. Only a copy that came before we acknowledged the first
    /// is reported as a duplicate (RFC 2883's D-SACK): the sender's timer fired while we held
    /// its DATA unacknowledged (descheduled past its RTO), and its RTO adapts to that delay
    /// ([`Reliable::on_duplicate_report`]). A copy of DATA we had acknowledged means our ACK
    /// was lost (or is on its way): the sender's timer was right, and a report would make it
    /// take the whole retransmission timeout for a late original and triple its RTO. Under
    /// 15 % receive loss on every member that happened at every lost ACK and drove the RTO to
    /// its 100 ms ceiling: agreements' p99 38–100 ms (`cargo bench --bench member_loss`).
    fn report_duplicate(&mut self, p: usize, seq: u64) {
        let peer = &mut self.peers[p];
        if !peer.acked_before(seq) {
            peer.dsack = seq + 1;
        }
    }

    pub(super) fn on_data(
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
            // Our ACK was lost or is late, or the peer's timer fired early: say again what we
            // have, and that this one came twice.
            self.stats.duplicates += 1;
            self.report_duplicate(p, seq);
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
                self.report_duplicate(p, seq);
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
        peer.rcv_at = now;
        peer.unacked_rx += delivered;
        self.stats.received += delivered as u64;
        let due = if peer.held != 0 || peer.unacked_rx >= self.cfg.ack_every.clamp(1, (self.cfg.window / 4).max(1)) {
            now
        } else {
            now + peer.hold(&self.cfg, now)
        };
        self.want_ack(p, due);
        delivered
    }
}
