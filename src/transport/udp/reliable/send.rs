//! The send side of the core: a datagram's first transmission into the window, its
//! retransmissions (RFC 6298 §5 timeouts, go-back-N after one, thin flights' linear
//! timeouts), the acknowledgements this endpoint sends, and the repeat of a receiver's hole
//! report (NACK).

use std::time::{Duration, Instant};

use super::{LINEAR_TIMEOUTS, Queued, Reliable, THIN_FLIGHT, TxSlot};
use crate::transport::udp::header::{
    HEADER_LEN, Header, KIND_ACK, KIND_DATA, MAX_DATAGRAM, MAX_SEQ, seal, write_ack_fields,
};
use crate::transport::{MAX_PAYLOAD, SendError};

impl Reliable {
    /// Seals the datagram in window slot `i` and queues it for `peer`.
    #[inline]
    pub(super) fn send_datagram(&mut self, peer: usize, i: usize, len: usize) {
        let at = i * MAX_DATAGRAM;
        seal(self.cfg.auth.as_ref(), &mut self.tx_buf[at..at + len]);
        self.outbox.push(Queued::Data {
            peer: peer as u32,
            slot: i as u32,
            len: len as u16,
        });
    }

    /// Queues `bytes` for reliable delivery to `to` (its first transmission goes to the outbox).
    #[inline]
    pub fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        if to >= self.size || to == self.rank {
            return Err(SendError::BadPeer);
        }
        if self.fenced_by.is_some() {
            return Err(SendError::Fenced);
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
        debug_assert!(seq < MAX_SEQ, "2^48 datagrams to one peer");
        let (ack, hold, sack) = self.peers[p].rode_ack(now);
        let header = Header {
            kind: KIND_DATA,
            len: bytes.len() as u16,
            job: self.cfg.job,
            from: self.rank,
            to,
            seq,
            ack,
            hold,
            sack,
        };
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
            dsacked: false,
            sent_at: now,
            last_tx: now,
        };
        let peer = &mut self.peers[p];
        peer.next_seq += 1;
        peer.data_tx = Some(now);
        self.send_datagram(p, i, len);
        if !self.wheel.is_armed(to) {
            let wait = self.peers[p].timer_wait(&self.cfg, now);
            self.wheel.schedule(to, now + wait);
        }
        self.stats.sent += 1;
        Ok(())
    }

    pub(super) fn retransmit(&mut self, p: usize, seq: u64, now: Instant) {
        let i = self.tx_index(p, seq);
        let at = i * MAX_DATAGRAM;
        let len = usize::from(self.tx_meta[i].len);
        let peer = &mut self.peers[p];
        peer.data_tx = Some(now);
        let (ack, hold, sack) = peer.rode_ack(now);
        write_ack_fields(&mut self.tx_buf[at..at + HEADER_LEN], ack, hold, sack);
        let slot = &mut self.tx_meta[i];
        slot.retransmitted = true;
        slot.last_tx = now;
        self.send_datagram(p, i, len);
        self.stats.retransmits += 1;
    }

    /// The retransmission timer of `p` expired (RFC 6298 5.4–5.6), or the FENCE of a
    /// suspected `p` is due again.
    pub(super) fn on_timeout(&mut self, p: usize, now: Instant) {
        let peer = &mut self.peers[p];
        if peer.suspected {
            if peer.fences_left > 0 {
                peer.fences_left -= 1;
                self.send_fence(p, now);
                self.wheel.schedule(p as u32, now + self.cfg.rto_max);
            }
            return;
        }
        if peer.snd_una == peer.next_seq {
            return;
        }
        let linear = peer.next_seq - peer.snd_una < THIN_FLIGHT && peer.linear < LINEAR_TIMEOUTS;
        if linear {
            peer.linear += 1;
        } else {
            peer.retries += 1;
        }
        if !linear && peer.retries > self.cfg.max_retries {
            // Adaptive: past the retransmission floor, the peer must also have been silent
            // longer than the stalls it came back from (the RTO keeps backing off meanwhile).
            let (una, last_heard) = (peer.snd_una, peer.last_heard);
            let oldest = self.tx_meta[self.tx_index(p, una)].sent_at;
            let silent = now.saturating_duration_since(last_heard.max(oldest));
            // An endpoint that has not read all its socket (a flood, a burst) may have the
            // peer's answers still queued: it suspects only at the ceiling then.
            let bound = if self.rx_backlog {
                self.cfg.silence_max
            } else {
                self.silence_bound(p as u32, now)
            };
            if silent >= bound {
                self.suspect(p, now);
                return;
            }
        }
        let peer = &mut self.peers[p];
        let (una, next, expired_rto) = (peer.snd_una, peer.next_seq, peer.rto.rto());
        if !linear {
            peer.rto.on_timeout();
        }
        let rto = peer.timer_wait(&self.cfg, now);
        let waited = now.saturating_duration_since(self.tx_meta[self.tx_index(p, una)].last_tx);
        self.stats.timeouts += 1;
        self.stats.timeout_wait_ns += waited.as_nanos() as u64;
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

    pub(super) fn send_ack(&mut self, p: usize, now: Instant) {
        let peer = &mut self.peers[p];
        let (ack, hold, sack) = peer.ack_fields(now);
        let header = Header {
            kind: KIND_ACK,
            len: 0,
            job: self.cfg.job,
            from: self.rank,
            to: p as u32,
            seq: peer.dsack,
            ack,
            hold,
            sack,
        };
        peer.ack_pending = false;
        peer.unacked_rx = 0;
        peer.dsack = 0;
        let buf = &mut self.ack_buf[p];
        header.write(buf);
        seal(self.cfg.auth.as_ref(), buf);
        self.outbox.push(Queued::Ack { peer: p as u32 });
        self.stats.acks_sent += 1;
    }

    /// Sends the ACKs that are due (one per peer).
    #[inline]
    pub(super) fn flush_acks(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.ack_list.len() {
            let p = self.ack_list[i] as usize;
            let peer = &self.peers[p];
            if !peer.ack_pending || peer.suspected {
                self.peers[p].ack_listed = false;
                self.ack_list.swap_remove(i);
            } else if peer.ack_due <= now {
                self.send_ack(p, now);
                self.peers[p].ack_listed = false;
                self.ack_list.swap_remove(i);
                if self.peers[p].held != 0 {
                    // A hole is still open: the report may have been lost, and the sender
                    // resends a hole only when told (or at its timer). Tell it again soon,
                    // then less and less often (a sender that died never fills it).
                    let again = self.nack_repeat(p);
                    self.peers[p].nack_repeats += 1;
                    self.want_ack(p, now + again);
                } else {
                    self.peers[p].nack_repeats = 0;
                }
            } else {
                i += 1;
            }
        }
    }

    /// How soon a receiver with a hole from `p` repeats its report (its ACK with the selective
    /// bitmap): first after twice the least round trip to `p` it has sampled (else a quarter
    /// of the RTO's floor; at least 10 µs), then twice as long each time, up to `rto_max`. A
    /// lost report (the NACK) then costs that, not the sender's retransmission timer
    /// (`rto_min` plus the receiver's hold, and more).
    pub(super) fn nack_repeat(&self, p: usize) -> Duration {
        let peer = &self.peers[p];
        let first = peer
            .rto
            .min_rtt()
            .map_or(self.cfg.rto_min / 4, |m| m * 2)
            .max(Duration::from_micros(10));
        first
            .saturating_mul(1 << peer.nack_repeats.min(16))
            .min(self.cfg.rto_max)
    }
}
