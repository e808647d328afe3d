//! One rank's verbs endpoint: per-peer RC QPs on shared send and receive CQs, one buffer in
//! two registrations (see [`super::ring::Layout`]): the credit words, the only memory a peer
//! may RDMA WRITE, and the receive rings and send staging, local access only.

mod qp;
mod setup;
#[cfg(test)]
mod test_hooks;

pub use qp::KillSwitch;
#[cfg(test)]
pub(crate) use qp::{ibv_init, ibv_rtr, ibv_rts};
pub use setup::local;
#[cfg(test)]
pub(crate) use setup::local_on;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ibv::*;
use qp::{QpSet, Region, qp_to_error};

use super::VerbsConfig;
use super::completion::{PeerHealth, WcClass, classify, status};
use super::credits::{RecvCredits, SendCredits};
use super::device::Device;
use super::ring::{Layout, Reposts, wr_id};
use super::send_queue::{Post, SendQueue};
use crate::transport::{Delivery, MAX_PAYLOAD, SendError, Transport, TransportStats};

/// Completions taken per `ibv_poll_cq` (perftest's CTX_POLL_BATCH).
const POLL_BATCH: usize = 16;

/// Completion events acknowledged together (`ibv_ack_cq_events` takes a mutex; perftest's
/// event mode acks each, rdma-core's examples batch). Whatever is left is acked before the CQ
/// is destroyed, which libibverbs requires.
const ACK_BATCH: u32 = 16;

/// A peer's queue counts as idle after this long without a post: then its unsignaled tail is
/// flushed and pending credits go back below the batch threshold. Shorter would add a WR per
/// message to ping-pong traffic; the tail only matters for `unacked` and staging-slot reuse.
const IDLE: Duration = Duration::from_micros(100);

/// Counters of the verbs data path, beside the common [`TransportStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VerbsCounters {
    pub inline_sends: u64,
    pub staged_sends: u64,
    pub signaled: u64,
    pub credit_writes: u64,
    /// Error completions by class (see [`super::completion`]).
    pub peer_lost: u64,
    pub flushed: u64,
    pub local_errors: u64,
    /// Credit words that could not be true, refused.
    pub bogus_credits: u64,
    /// Completion events taken from the channel by [`Transport::wait`].
    pub cq_events: u64,
}

struct Peer {
    qp: *mut ibv_qp,
    psn: u32,
    connected: bool,
    sq: SendQueue,
    tx: SendCredits,
    rx: RecvCredits,
    health: PeerHealth,
    reported: bool,
    credit_addr: u64,
    credit_rkey: u32,
    last_post: Instant,
}

/// The endpoint.
pub struct VerbsTransport {
    rank: u32,
    n: u32,
    job: u64,
    dev: Arc<Device>,
    cfg: VerbsConfig,
    layout: Layout,
    inline_max: usize,
    region: Region,
    /// The receive rings and send staging: local write only (a peer's RDMA WRITE there fails
    /// with a remote access error and breaks its QP).
    mr: *mut ibv_mr,
    /// The credit words: local and remote write; its rkey is the one peers are given.
    credit_mr: *mut ibv_mr,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    /// The completion channel both CQs report to, for [`Transport::wait`].
    channel: *mut ibv_comp_channel,
    /// Events taken from the channel and not yet acknowledged: (send CQ, receive CQ).
    unacked_events: (u32, u32),
    /// Receive completions `wait` found in `wc` after arming; `poll` handles them first.
    stashed: usize,
    peers: Vec<Peer>,
    /// The QPs, shared with [`KillSwitch`]es (`None` until construction completed).
    qps: Option<Arc<QpSet>>,
    unreported: usize,
    reposts: Reposts<POLL_BATCH>,
    wc: [ibv_wc; POLL_BATCH],
    /// The send CQ's own batch (a send may poll it while `wc` holds stashed receives).
    send_wc: [ibv_wc; POLL_BATCH],
    stats: TransportStats,
    counters: VerbsCounters,
}

// SAFETY: the raw pointers are verbs objects and memory owned by this endpoint alone; verbs
// calls are thread-safe, and the endpoint is used by one thread at a time (`&mut self`).
unsafe impl Send for VerbsTransport {}

impl VerbsTransport {
    /// A handle that moves every QP of this endpoint to the error state, as the death of its
    /// process would: the peers' HCAs get no more acknowledgements and suspect this rank. The
    /// local cluster's crash injection fires it when a node dies.
    pub fn kill_switch(&self) -> Option<KillSwitch> {
        self.qps.as_ref().map(|q| KillSwitch(Arc::clone(q)))
    }

    /// The data-path counters.
    pub fn counters(&self) -> VerbsCounters {
        self.counters
    }

    /// The send and receive CQ handles (tests check them in the HCA model).
    #[cfg(test)]
    pub(crate) fn cq_handles(&self) -> (usize, usize) {
        (self.send_cq as usize, self.recv_cq as usize)
    }

    /// The inline limit the QPs were created with.
    pub fn inline_max(&self) -> usize {
        self.inline_max
    }

    fn post_recvs(&mut self, peer: u32, slots: &[u32]) -> io::Result<()> {
        if slots.is_empty() || slots.len() > POLL_BATCH {
            return Err(io::Error::other("a receive batch holds 1 to 16 slots"));
        }
        let lkey = {
            // SAFETY: mr is valid.
            unsafe { (*self.mr).lkey }
        };
        // SAFETY: plain C structs; all-zero is valid.
        let mut sges: [ibv_sge; POLL_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut wrs: [ibv_recv_wr; POLL_BATCH] = unsafe { std::mem::zeroed() };
        let k = slots.len();
        for (i, &s) in slots.iter().enumerate() {
            sges[i] = ibv_sge {
                addr: self.region.ptr as u64 + self.layout.rx(peer as usize, s as usize) as u64,
                length: self.layout.slot as u32,
                lkey,
            };
        }
        let sg_base = sges.as_mut_ptr();
        let wr_base = wrs.as_mut_ptr();
        for (i, &s) in slots.iter().enumerate() {
            // SAFETY: i < k <= POLL_BATCH: in bounds of both arrays, which outlive the post;
            // the chain is written through the same raw pointers the post reads.
            unsafe {
                let w = wr_base.add(i);
                (*w).wr_id = wr_id::encode(peer as usize, u64::from(s));
                (*w).sg_list = sg_base.add(i);
                (*w).num_sge = 1;
                (*w).next = if i + 1 < k {
                    wr_base.add(i + 1)
                } else {
                    std::ptr::null_mut()
                };
            }
        }
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        let qp = self.peers[peer as usize].qp;
        // SAFETY: qp is valid; the chain and its SGEs are initialized and live until return
        // (the provider copies them into the receive queue).
        let rc = unsafe { ibv_post_recv(qp, wr_base, &mut bad) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Posts one SEND (or, with `credit`, an inline RDMA WRITE of that credit value).
    fn post_send(
        &mut self,
        to: usize,
        bytes: &[u8],
        credit: Option<u64>,
        force: bool,
        now: Instant,
    ) -> Result<Post, ()> {
        let Some(post) = self.peers[to].sq.reserve(force) else {
            return Err(());
        };
        let value = credit.map(u64::to_le_bytes);
        let data: &[u8] = match &value {
            Some(v) => v,
            None => bytes,
        };
        // SAFETY: mr is valid.
        let lkey = unsafe { (*self.mr).lkey };
        let mut flags = 0u32;
        let mut sge = ibv_sge {
            addr: data.as_ptr() as u64,
            length: data.len() as u32,
            lkey,
        };
        let inline = data.len() <= self.inline_max;
        if inline {
            flags |= ibv_send_flags::IBV_SEND_INLINE.0;
        } else {
            // Above the inline limit (or a QP without inline data): the WR's staging slot.
            let off = self.layout.tx(to, self.peers[to].sq.slot(post.index));
            // SAFETY: off..off+len is inside the region (len <= MAX_PAYLOAD <= slot); the
            // slot's previous WR was retired (at most tx_depth outstanding).
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), self.region.ptr.add(off), data.len());
            }
            sge.addr = self.region.ptr as u64 + off as u64;
        }
        if post.signaled {
            flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        // SAFETY: plain C struct; all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id::encode(to, post.index);
        wr.num_sge = i32::from(sge.length > 0);
        wr.sg_list = &mut sge;
        wr.send_flags = flags;
        let p = &self.peers[to];
        if credit.is_some() {
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            wr.wr.rdma = rdma_t {
                remote_addr: p.credit_addr,
                rkey: p.credit_rkey,
            };
        } else {
            wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        }
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: the QP is valid and in RTS; wr and sge live until return; inline data is
        // copied by the provider during the call, staged data stays in the registered region
        // until the WR is retired.
        let rc = unsafe { ibv_post_send(p.qp, &mut wr, &mut bad) };
        if rc != 0 {
            self.peers[to].sq.unreserve(post);
            return Err(());
        }
        self.peers[to].last_post = now;
        match (credit.is_some(), inline) {
            (true, _) => {}
            (false, true) => self.counters.inline_sends += 1,
            (false, false) => self.counters.staged_sends += 1,
        }
        self.counters.signaled += u64::from(post.signaled);
        Ok(post)
    }

    /// Marks `peer` suspected (once), moves its QP to the error state so everything posted
    /// flushes, and queues the report for the next poll.
    fn suspect(&mut self, peer: usize) {
        let p = &mut self.peers[peer];
        if p.health.suspect() {
            self.fail_qp(peer);
        }
        self.queue_report(peer);
    }

    fn queue_report(&mut self, peer: usize) {
        let p = &mut self.peers[peer];
        if p.reported {
            p.reported = false;
            self.unreported += 1;
        }
    }

    fn fail_qp(&mut self, peer: usize) {
        qp_to_error(self.peers[peer].qp);
    }

    fn on_error(&mut self, peer: usize, st: u32) {
        match classify(st) {
            WcClass::Ok => return,
            WcClass::PeerLost => self.counters.peer_lost += 1,
            WcClass::Flushed => self.counters.flushed += 1,
            WcClass::Local => self.counters.local_errors += 1,
        }
        if self.peers[peer].health.on_status(st) {
            // Already in error after an error completion; force it for flush-only paths.
            if st == status::WR_FLUSH_ERR {
                self.fail_qp(peer);
            }
            self.queue_report(peer);
        }
    }

    fn refresh_credits(&mut self, peer: usize) {
        // SAFETY: the credit word is inside the region, 8-byte aligned; the HCA writes it
        // whole (one 8-byte inline RDMA WRITE); a volatile read sees its latest value.
        let v = unsafe { std::ptr::read_volatile(self.region.ptr.add(self.layout.credit(peer)).cast::<u64>()) };
        let v = u64::from_le(v);
        if self.peers[peer].tx.on_return(v).is_err() {
            self.counters.bogus_credits += 1;
            self.stats.malformed += 1;
        }
    }

    fn poll_send_cq(&mut self) -> io::Result<()> {
        loop {
            // SAFETY: the CQ is valid; send_wc has POLL_BATCH entries.
            let k = unsafe { ibv_poll_cq(self.send_cq, POLL_BATCH as i32, self.send_wc.as_mut_ptr()) };
            if k < 0 {
                return Err(io::Error::other("ibv_poll_cq (send) failed"));
            }
            for i in 0..k as usize {
                let (id, st) = (self.send_wc[i].wr_id, self.send_wc[i].status);
                let Some((peer, low)) = wr_id::decode(id, self.peers.len()) else {
                    self.stats.malformed += 1;
                    continue;
                };
                if st != status::SUCCESS {
                    self.on_error(peer, st);
                    continue;
                }
                let sq = &mut self.peers[peer].sq;
                let index = wr_id::widen(low, sq.retired());
                if sq.complete(index).is_err() {
                    self.stats.malformed += 1;
                }
            }
            if (k as usize) < POLL_BATCH {
                return Ok(());
            }
        }
    }

    /// Takes every event the channel holds (its fd is non-blocking) and acknowledges them
    /// per [`ACK_BATCH`].
    fn take_events(&mut self) {
        loop {
            let mut cq: *mut ibv_cq = std::ptr::null_mut();
            let mut ctx: *mut std::os::raw::c_void = std::ptr::null_mut();
            // SAFETY: the channel is valid; the out-pointers are live locals.
            if unsafe { ibv_get_cq_event(self.channel, &mut cq, &mut ctx) } != 0 {
                break;
            }
            self.counters.cq_events += 1;
            if cq == self.send_cq {
                self.unacked_events.0 += 1;
            } else {
                self.unacked_events.1 += 1;
            }
        }
        self.ack_events(ACK_BATCH);
    }

    /// Acknowledges each CQ's events once at least `min` are pending.
    fn ack_events(&mut self, min: u32) {
        let (s, r) = self.unacked_events;
        if s >= min.max(1) {
            // SAFETY: the CQ is valid; s events were taken for it and not yet acknowledged.
            unsafe { ibv_ack_cq_events(self.send_cq, s) };
            self.unacked_events.0 = 0;
        }
        if r >= min.max(1) {
            // SAFETY: as above.
            unsafe { ibv_ack_cq_events(self.recv_cq, r) };
            self.unacked_events.1 = 0;
        }
    }

    fn flush_reposts(&mut self) {
        let mut batch = std::mem::take(&mut self.reposts);
        batch.drain_by_peer(|peer, slots| {
            if self.peers[peer as usize].health.is_suspected() {
                return;
            }
            if self.post_recvs(peer, slots).is_ok() {
                for _ in slots {
                    self.peers[peer as usize].rx.reposted();
                }
            } else {
                self.suspect(peer as usize);
            }
        });
        self.reposts = batch;
    }
}

impl Transport for VerbsTransport {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.n
    }

    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        if to >= self.n || to == self.rank || !self.peers[to as usize].connected {
            return Err(SendError::BadPeer);
        }
        if bytes.len() > MAX_PAYLOAD {
            return Err(SendError::TooLarge);
        }
        let t = to as usize;
        if self.peers[t].health.is_suspected() {
            return Err(SendError::Suspected);
        }
        if self.peers[t].tx.available() == 0 {
            self.refresh_credits(t);
        }
        if self.peers[t].tx.available() == 0 {
            self.stats.window_full += 1;
            return Err(SendError::WindowFull);
        }
        if self.peers[t].sq.outstanding() >= u64::from(self.cfg.tx_depth) {
            let _ = self.poll_send_cq();
        }
        match self.post_send(t, bytes, None, false, now) {
            Ok(_) => {
                self.peers[t].tx.take();
                self.stats.sent += 1;
                Ok(())
            }
            Err(()) if self.peers[t].sq.outstanding() >= u64::from(self.cfg.tx_depth) => {
                self.stats.window_full += 1;
                Err(SendError::WindowFull)
            }
            Err(()) => {
                // The provider refused a post with room in the queue: the QP is in error.
                self.suspect(t);
                Err(SendError::Suspected)
            }
        }
    }

    fn poll(&mut self, now: Instant, sink: &mut dyn FnMut(Delivery<'_>)) -> io::Result<usize> {
        let mut delivered = 0;
        loop {
            let k = if self.stashed > 0 {
                std::mem::take(&mut self.stashed) as i32
            } else {
                // SAFETY: the CQ is valid; wc has POLL_BATCH entries.
                unsafe { ibv_poll_cq(self.recv_cq, POLL_BATCH as i32, self.wc.as_mut_ptr()) }
            };
            if k < 0 {
                return Err(io::Error::other("ibv_poll_cq (receive) failed"));
            }
            for i in 0..k as usize {
                let (id, st, len) = (self.wc[i].wr_id, self.wc[i].status, self.wc[i].byte_len as usize);
                let Some((peer, slot)) = wr_id::decode(id, self.peers.len()) else {
                    self.stats.malformed += 1;
                    continue;
                };
                if st != status::SUCCESS {
                    self.on_error(peer, st);
                    continue;
                }
                if self.peers[peer].health.is_suspected() {
                    self.stats.from_suspected += 1;
                    continue;
                }
                if len <= MAX_PAYLOAD && (slot as usize) < self.layout.rx_slots {
                    let off = self.layout.rx(peer, slot as usize);
                    // SAFETY: the completion says the HCA finished writing len bytes at off,
                    // inside the region; the slot is re-posted only after the sink returns.
                    let bytes = unsafe { std::slice::from_raw_parts(self.region.ptr.add(off), len) };
                    self.stats.received += 1;
                    delivered += 1;
                    sink(Delivery::Message {
                        from: peer as u32,
                        bytes,
                    });
                } else {
                    self.stats.malformed += 1;
                }
                self.reposts.push(peer as u32, slot as u32);
            }
            self.flush_reposts();
            if (k as usize) < POLL_BATCH {
                break;
            }
        }
        self.poll_send_cq()?;
        // Credits back to senders, and a signaled WR for any idle unsignaled tail.
        for r in 0..self.peers.len() {
            let p = &self.peers[r];
            if !p.connected || p.health.is_suspected() {
                continue;
            }
            let idle = now.saturating_duration_since(p.last_post) >= IDLE;
            let due = p.rx.due(idle);
            let flush = idle && p.sq.tail() > 0;
            if due.is_some() || flush {
                let v = due.unwrap_or(p.rx.reposted_count());
                if self.post_send(r, &[], Some(v), flush, now).is_ok() {
                    self.peers[r].rx.advertised(v);
                    self.counters.credit_writes += 1;
                }
            }
        }
        if self.unreported > 0 {
            for r in 0..self.peers.len() {
                if !self.peers[r].reported {
                    self.peers[r].reported = true;
                    self.unreported -= 1;
                    self.stats.suspected += 1;
                    delivered += 1;
                    sink(Delivery::Suspect { peer: r as u32 });
                }
            }
        }
        Ok(delivered)
    }

    /// Sleeps on the completion channel (only the blocking poll mode calls this; the pinned
    /// worker busy-polls), as perftest's `--event` mode: arm both CQs, poll them again to
    /// close the race with completions that came before the arming (they raise no event),
    /// then block in ppoll on the channel's fd, take the events and acknowledge them in
    /// batches. The CQs are re-armed by the next wait. An event whose completion the re-poll
    /// found first stays in the channel and is taken by a later wait (one early return).
    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        if self.stashed > 0 {
            return Ok(());
        }
        for cq in [self.send_cq, self.recv_cq] {
            // SAFETY: the CQ is valid and was created with the channel.
            let rc = unsafe { ibv_req_notify_cq(cq, 0) };
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
        }
        // Send completions are handled here (errors are queued for the next poll); receive
        // completions need the sink, so they stay in `wc` for the next poll.
        self.poll_send_cq()?;
        // SAFETY: the CQ is valid; wc has POLL_BATCH entries and holds no stashed entries.
        let k = unsafe { ibv_poll_cq(self.recv_cq, POLL_BATCH as i32, self.wc.as_mut_ptr()) };
        if k < 0 {
            return Err(io::Error::other("ibv_poll_cq (receive) failed"));
        }
        if k > 0 || self.unreported > 0 {
            self.stashed = k as usize;
            return Ok(());
        }
        // SAFETY: the channel is valid; its fd stays open while the endpoint lives.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw((*self.channel).fd) };
        if !crate::transport::ppoll::readable(fd, timeout)? {
            return Ok(());
        }
        self.take_events();
        Ok(())
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }

    fn unacked(&self) -> usize {
        self.peers
            .iter()
            .filter(|p| p.connected && !p.health.is_suspected())
            .map(|p| p.sq.outstanding() as usize)
            .sum()
    }
}
