//! Suspicion and its enforcement: the adaptive silence bound learned from the stalls a peer
//! recovered from, the FENCE a suspect is sent (and repeated, and answered with), the stop of
//! an endpoint that is fenced, and ICMP errors taken as hints that trigger a probe.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Peer, Queued, Reliable};
use crate::transport::udp::header::{HEADER_LEN, Header, KIND_DATA, KIND_FENCE, KIND_PROBE, MAX_DATAGRAM, seal};

impl Reliable {
    /// How long `peer` may stay silent before it is suspected (besides the retransmission
    /// floor): `stall_factor` × its learned stall at `now`, at most `silence_max`.
    pub fn silence_bound(&self, peer: u32, now: Instant) -> Duration {
        self.peers
            .get(peer as usize)
            .map_or(Duration::ZERO, |p| self.learned(p, now))
            .saturating_mul(self.cfg.stall_factor)
            .min(self.cfg.silence_max)
    }

    /// The stall `p` recovered from, decayed to `now` (half-life `stall_memory`).
    pub(super) fn learned(&self, p: &Peer, now: Instant) -> Duration {
        if p.stall.is_zero() {
            return Duration::ZERO;
        }
        let age = now.saturating_duration_since(p.stall_at).as_secs_f64();
        let halvings = age / self.cfg.stall_memory.as_secs_f64();
        p.stall.mul_f64(0.5f64.powf(halvings.min(64.0)))
    }

    /// Stops all traffic to `p`, reports it to the driver as suspected, and fences it: a
    /// FENCE now, repeated `fence_repeats` times `rto_max` apart (fail-stop enforcement: the
    /// suspect, if alive, learns it and stops, so no live node stays cut off one-sidedly).
    pub(super) fn suspect(&mut self, p: usize, now: Instant) {
        self.to_report.push(p as u32);
        self.stats.suspected += 1;
        self.fence_off(p, now);
    }

    /// The process of peer `p` died on this host (its robust mutex said so,
    /// [`crate::transport::death_watch`]): suspected at once, as after its retransmissions;
    /// nothing if it is suspected already, is this endpoint, or is out of range.
    pub fn on_died(&mut self, p: u32, now: Instant) {
        if self.peers.get(p as usize).is_none_or(|peer| peer.suspected) || p == self.rank {
            return;
        }
        self.stats.died_on_host += 1;
        self.suspect(p as usize, now);
    }

    /// Stops all traffic to `p` and fences it: a FENCE now, repeated `fence_repeats` times
    /// `rto_max` apart.
    fn fence_off(&mut self, p: usize, now: Instant) {
        let peer = &mut self.peers[p];
        peer.suspected = true;
        peer.snd_una = peer.next_seq;
        peer.ack_pending = false;
        peer.probe_due = None;
        peer.fences_left = self.cfg.fence_repeats;
        self.send_fence(p, now);
        self.wheel.schedule(p as u32, now + self.cfg.rto_max);
    }

    /// A suspicion made above the transport: as `Reliable::suspect` (traffic stopped, the
    /// FENCE sent and repeated) but not reported back nor counted as the transport's own;
    /// nothing if `p` is already suspected or out of range.
    pub fn enforce(&mut self, p: u32, now: Instant) {
        let Some(peer) = self.peers.get_mut(p as usize) else {
            return;
        };
        if peer.suspected || p == self.rank {
            return;
        }
        self.fence_off(p as usize, now);
    }

    /// Queues a FENCE to `p`.
    pub(super) fn send_fence(&mut self, p: usize, now: Instant) {
        self.send_control(p, KIND_FENCE, now);
        self.peers[p].fence_tx = Some(now);
        self.stats.fences_sent += 1;
    }

    /// Answers a datagram from the suspected `p` with a FENCE, at most one per `rto_min`.
    pub(super) fn refence(&mut self, p: usize, now: Instant) {
        let last = self.peers[p].fence_tx;
        if last.is_none_or(|t| now.saturating_duration_since(t) >= self.cfg.rto_min) {
            self.send_fence(p, now);
        }
    }

    /// Queues a header-only datagram of `kind` (FENCE or PROBE) to `p` in its control buffer.
    fn send_control(&mut self, p: usize, kind: u8, now: Instant) {
        let peer = &mut self.peers[p];
        let (ack, hold, sack) = if kind == KIND_FENCE {
            (0, 0, 0)
        } else {
            peer.ack_fields(now)
        };
        let header = Header {
            kind,
            len: 0,
            job: self.cfg.job,
            from: self.rank,
            to: p as u32,
            // A PROBE is numbered, so that each one's bytes (and MAC) are new: an ICMP error
            // quoting it proves it was refused (see `on_refused`).
            seq: if kind == KIND_PROBE {
                self.probes_sent += 1;
                self.probes_sent
            } else {
                0
            },
            ack,
            hold,
            sack,
        };
        let buf = &mut self.ctl_buf[p];
        header.write(buf);
        seal(self.cfg.auth.as_ref(), buf);
        self.outbox.push(Queued::Control { peer: p as u32 });
    }

    /// A heartbeat to `to` outside the reliable stream: a PROBE (numbered, sealed), which the
    /// peer's transport answers with an ACK at once, so that each side hears the other; no
    /// window slot, no retransmission. Nothing to a suspected peer, an invalid rank or from
    /// a fenced endpoint (`false`: none sent).
    pub fn beat(&mut self, to: u32, now: Instant) -> bool {
        let p = to as usize;
        if to >= self.size || to == self.rank || self.fenced_by.is_some() || self.peers[p].suspected {
            return false;
        }
        self.send_control(p, KIND_PROBE, now);
        self.stats.beats_sent += 1;
        true
    }

    /// Stops this endpoint for good: a FENCE from `by` said it is suspected. Nothing queued
    /// leaves, nothing more is sent or delivered.
    pub(super) fn fence(&mut self, by: u32) {
        self.fenced_by = Some(by);
        self.stats.fenced += 1;
        self.outbox.clear();
        self.sent_out = 0;
        self.ack_list.clear();
        self.probing.clear();
        self.to_report.clear();
    }

    /// The kernel says a datagram to `addr` met a closed port (see `udp/icmp.rs`); `quoted` is
    /// the refused datagram as the error quotes it. Forgeable, so by itself only a hint: a peer
    /// heard from before is probed at once (a PROBE, sealed like every datagram of the run and
    /// numbered, asks for an ACK) and suspected if nothing authentic comes from it within
    /// `probe_timeout`. An error that quotes, byte for byte, a datagram this endpoint has in
    /// flight to that peer (the PROBE, or the header of a DATA datagram not yet acknowledged,
    /// as last sent) is the kernel refusing it: the peer's port is closed, and it is suspected
    /// at once, one round trip sooner than through a PROBE when the refused datagram was DATA
    /// or a heartbeat's PROBE ([`Reliable::beat`]: a heartbeat to a dead neighbour, say). A third party cannot forge that quote without
    /// having seen the datagram (a PROBE's number and every datagram's MAC are new each time;
    /// a DATA header's MAC covers its sequence number and payload), and one who sees the
    /// traffic can stop it anyway, which silence detects too. Without a job key nothing is
    /// authenticated, the PROBE no more than the DATA.
    pub fn on_refused(&mut self, addr: SocketAddr, quoted: &[u8], now: Instant) {
        let Some(&r) = self.addr_rank.get(&addr) else {
            return;
        };
        let p = r as usize;
        let peer = &self.peers[p];
        let unheard = !peer.heard && !self.cfg.bound_at_start;
        if p == self.rank as usize || unheard || peer.suspected || self.fenced_by.is_some() {
            return;
        }
        let probed = peer.probe_due.is_some();
        // The control buffer of a peer not suspected holds its last PROBE (a heartbeat's, or
        // a probe's): quoted, it was refused.
        let quotes_probe = self.ctl_buf[p][5] == KIND_PROBE && quoted == &self.ctl_buf[p][..];
        if quotes_probe || self.quotes_data_in_flight(p, quoted) {
            self.probing.retain(|&q| q != r);
            self.stats.refused_probes += 1;
            self.suspect(p, now);
            return;
        }
        if probed {
            return;
        }
        self.peers[p].probe_due = Some(now + self.cfg.probe_timeout);
        self.probing.push(r);
        self.stats.refused += 1;
        self.send_control(p, KIND_PROBE, now);
    }

    /// Whether `quoted` is, byte for byte, the header of a DATA datagram to `p` still
    /// unacknowledged, as last sent (a retransmission rewrites its ACK fields and seals it
    /// anew; a slot is reused only once its datagram is acknowledged).
    fn quotes_data_in_flight(&self, p: usize, quoted: &[u8]) -> bool {
        if quoted.len() != HEADER_LEN || quoted[5] != KIND_DATA {
            return false;
        }
        let seq = u64::from_le_bytes(quoted[24..32].try_into().expect("8 bytes"));
        let peer = &self.peers[p];
        if seq < peer.snd_una || seq >= peer.next_seq {
            return false;
        }
        let at = self.tx_index(p, seq) * MAX_DATAGRAM;
        quoted == &self.tx_buf[at..at + HEADER_LEN]
    }

    /// Suspects the probed peers whose deadline passed in silence.
    pub(super) fn check_probes(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.probing.len() {
            let p = self.probing[i] as usize;
            match self.peers[p].probe_due {
                Some(due) if due > now => i += 1,
                due => {
                    self.probing.swap_remove(i);
                    if due.is_some() && !self.peers[p].suspected {
                        self.suspect(p, now);
                    }
                }
            }
        }
    }
}
