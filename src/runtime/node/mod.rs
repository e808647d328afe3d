//! One node of the runtime: drives the sans-IO protocol state machines of its in-flight
//! operations over a [`Transport`], in real time (`docs/architecture.md`, decisions
//! 1–2, 6).
//!
//! Per operation (named `(root, seq)`, Corrected Gossip Claim 1) the node keeps one protocol
//! instance, created when the root starts it or on the operation's first message. Every
//! datagram is decoded and validated by [`crate::wire`] before anything trusts it; what fails
//! is dropped and counted. The protocol's model time is nanoseconds since the cluster epoch
//! divided by `tick_ns`; a counted `Sleep(u)` keeps the sender busy for `u · tick_ns`.
//!
//! Operations are numbered in one sequence for the whole group; a benchmark's all have one
//! root, a group's coordinator names each one's ([`Control::root_of`]). What an operation carries comes from the node's
//! [`Payloads`]: the user's bytes at the root, handed to the user at every delivery (the
//! benchmark's are [`Generated`]).

mod crash;
mod payload;
pub mod stages;
mod stats;

pub use crash::Faults;
pub use payload::{Generated, Payloads, payload_byte};
pub use stats::{NodeStats, OsuBcast, RankTimes};

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::protocol::op::Admission;
use crate::protocol::{Action, Ctx, DuplicateFilter, Message, OpId, Phase, ProtoRng, Protocol, Rank, Time};
use crate::runtime::board::{Control, NodeBoard, WINDOW};
use crate::runtime::driver::{Outbox, Reject, Sent, open_datagram};
use crate::runtime::kill::Kill;
use crate::transport::{Delivery, MAX_PAYLOAD, SendError, Transport};
use crate::wire::{DecodeError, WireMessage, encode_datagram};
use stages::Stage;

/// Parameters every node of a run shares.
pub struct NodeParams<'a, S> {
    pub shared: &'a S,
    pub n: u32,
    /// `Some(r)`: every operation's root is `r` (a benchmark); `None`: the coordinator names
    /// each one's ([`Control::root_of`]).
    pub root: Option<u32>,
    pub job: u64,
    /// Nanoseconds per model time unit.
    pub tick_ns: u64,
    pub epoch: Instant,
}

struct Slot<P> {
    seq: u64,
    /// The operation's root (physical rank).
    root: u32,
    proto: Option<P>,
    /// The operation's payload: what this node's messages of it carry.
    payload: Vec<u8>,
    delivered: bool,
    finished: bool,
    sent: u32,
}

/// One node: its transport, its operations and its counters. Aligned so that two nodes
/// driven by different threads never share a cache line.
#[repr(align(128))]
pub struct Node<P: Protocol> {
    pub rank: u32,
    transport: Option<Box<dyn Transport>>,
    on_death: Option<Box<dyn FnMut() + Send>>,
    slots: Vec<Slot<P>>,
    filter: DuplicateFilter,
    busy_until: Instant,
    next_start: u64,
    retired: u64,
    /// Datagrams refused by a full retransmit window, per destination in order; other
    /// destinations keep flowing (a silent peer must not stall the others).
    outbox: Outbox,
    out: Vec<u8>,
    payloads: Box<dyn Payloads>,
    /// Deliveries of this step not yet stamped on the board (`publish`).
    unpublished: Vec<(u64, u64)>,
    rng: ProtoRng,
    /// Crash injection (tests, benchmarks), if any.
    faults: Option<Box<dyn Faults>>,
    /// Messages sent per step at most (see `PollMode::sends_per_pass`).
    sends_per_step: u32,
    /// The transport's counters when the node died (its sends count in the run's totals).
    last_stats: crate::transport::TransportStats,
    /// The peer whose FENCE killed this node (a false suspicion made true), if one did.
    fenced_by: Option<u32>,
    pub stats: NodeStats,
    /// Stage stamps of the forwarding path (cargo feature `stages`; empty otherwise).
    stages: stages::Recorder,
}

impl<P: Protocol> Node<P>
where
    P::Msg: WireMessage,
{
    /// A node with its transport and payloads; `on_death` runs when an injected crash kills
    /// it.
    pub fn new(
        rank: u32,
        n: u32,
        transport: Box<dyn Transport>,
        payloads: Box<dyn Payloads>,
        kill: Option<Kill>,
        seed: u64,
        on_death: Option<Box<dyn FnMut() + Send>>,
    ) -> Self {
        Self {
            rank,
            transport: Some(transport),
            on_death,
            slots: (0..WINDOW)
                .map(|_| Slot {
                    seq: u64::MAX,
                    root: 0,
                    proto: None,
                    payload: Vec::new(),
                    delivered: false,
                    finished: false,
                    sent: 0,
                })
                .collect(),
            filter: DuplicateFilter::new(n),
            busy_until: Instant::now(),
            next_start: 0,
            retired: 0,
            outbox: Outbox::new(n, MAX_DEFERRED),
            out: vec![0; MAX_PAYLOAD],
            payloads,
            unpublished: Vec::with_capacity(WINDOW),
            rng: ProtoRng::new(ProtoRng::run_seed(seed, u64::from(rank))),
            faults: kill.map(|k| Box::new(k) as Box<dyn Faults>),
            sends_per_step: 16,
            last_stats: crate::transport::TransportStats::default(),
            fenced_by: None,
            stats: NodeStats::default(),
            stages: stages::Recorder::default(),
        }
    }

    /// Bounds the messages sent per step (at least one).
    pub fn set_sends_per_step(&mut self, n: u32) {
        self.sends_per_step = n.max(1);
    }

    /// Is this node alive?
    pub fn alive(&self) -> bool {
        self.transport.is_some()
    }

    /// The peer whose FENCE made this node crash (it had suspected this live node), if one
    /// did: a dead node that was not a planned kill.
    pub fn fenced_by(&self) -> Option<u32> {
        self.fenced_by
    }

    /// Blocks until the transport may have data or `timeout` passed (blocking poll mode).
    pub fn wait(&mut self, timeout: Duration) {
        if let Some(t) = self.transport.as_mut() {
            let _ = t.wait(timeout);
        } else {
            std::thread::sleep(timeout);
        }
    }

    /// The transport's counters (as they were at death, once dead).
    pub fn transport_stats(&self) -> crate::transport::TransportStats {
        self.transport.as_ref().map_or(self.last_stats, |t| t.stats())
    }

    /// The virtual rank of `phys` in an operation rooted at `root` (the root is 0).
    fn vrank(p: &NodeParams<'_, P::Shared>, root: u32, phys: u32) -> Rank {
        (phys + p.n - root % p.n) % p.n
    }

    fn phys(p: &NodeParams<'_, P::Shared>, root: u32, v: Rank) -> u32 {
        (v + root) % p.n
    }

    fn now_units(p: &NodeParams<'_, P::Shared>, now: Instant) -> Time {
        now.saturating_duration_since(p.epoch).as_nanos() as u64 / p.tick_ns.max(1)
    }

    fn ns(p: &NodeParams<'_, P::Shared>, now: Instant) -> u64 {
        now.saturating_duration_since(p.epoch).as_nanos() as u64
    }

    fn die(&mut self, board: &NodeBoard, iter: u64) {
        // What it delivered before it died counts.
        self.publish(board);
        if let Some(t) = self.transport.take() {
            self.last_stats = t.stats();
        }
        board.died_in.store(iter, Ordering::Relaxed);
        board.dead.store(true, Ordering::Release);
        if let Some(f) = self.on_death.as_mut() {
            f();
        }
    }

    /// Crashes this node now (crash-stop): its transport closes, `on_death` runs, and the
    /// operations it has not retired no longer wait for it.
    pub fn crash(&mut self, board: &NodeBoard) {
        if self.alive() {
            self.die(board, self.retired);
        }
    }

    /// Marks a node that is dead from the start.
    pub fn kill_at_start(&mut self, board: &NodeBoard) {
        if self.faults.as_ref().is_some_and(|f| f.dead_at_start()) {
            self.die(board, u64::MAX);
        }
    }

    fn slot_index(seq: u64) -> usize {
        (seq % WINDOW as u64) as usize
    }

    /// The slot of `seq` (rooted at `root`), (re)initialized for it; its payload is
    /// `payload` (a received one) or, at the root, the source's.
    fn open(
        &mut self,
        p: &NodeParams<'_, P::Shared>,
        (root, seq): (u32, u64),
        payload: Option<&[u8]>,
        now: Instant,
        board: &NodeBoard,
    ) -> usize {
        let i = Self::slot_index(seq);
        if self.slots[i].seq != seq {
            let cx = Ctx {
                rank: Self::vrank(p, root, self.rank),
                n: p.n,
                now: Self::now_units(p, now),
                shared: p.shared,
            };
            let mut proto = P::new(&cx);
            proto.start(&cx);
            let s = &mut self.slots[i];
            s.payload.clear();
            match payload {
                Some(b) => s.payload.extend_from_slice(b),
                None => self.payloads.source(seq, &mut s.payload),
            }
            s.seq = seq;
            s.root = root;
            s.proto = Some(proto);
            s.delivered = false;
            s.finished = false;
            s.sent = 0;
            if payload.is_none() {
                // The root's entry exists from the start (the coordinator waits for it); a
                // receiver's is claimed at its delivery, after the user has the payload.
                board.claim(seq);
            }
        }
        i
    }

    /// One round of work: start allowed operations (root), receive, time out, send.
    /// Returns true if anything happened.
    pub fn step(&mut self, p: &NodeParams<'_, P::Shared>, ctl: &Control, now: Instant) -> bool {
        let board = &ctl.boards[self.rank as usize];
        if self.transport.is_none() {
            return false;
        }
        let mut progress = false;
        // Retire operations the coordinator declared over.
        let retired = ctl.retired.load(Ordering::Acquire);
        while self.retired < retired {
            let seq = self.retired;
            self.filter.complete(OpId { root: 0, seq });
            let i = Self::slot_index(seq);
            if self.slots[i].seq == seq {
                self.slots[i].proto = None;
            }
            self.retired += 1;
        }
        // A root starts what it may.
        let allowed = match p.root {
            Some(r) if r != self.rank => 0,
            _ => ctl.allowed.load(Ordering::Acquire),
        };
        if self.next_start < allowed {
            let first = self.next_start;
            while self.next_start < allowed {
                let seq = self.next_start;
                self.next_start += 1;
                if p.root.is_none() && ctl.root_of(seq) != self.rank {
                    continue;
                }
                self.stages.mark_at(self.rank, seq, Stage::RootStep, Self::ns(p, now));
                ctl.started_ns[Self::slot_index(seq)].store(Self::ns(p, now), Ordering::Release);
                self.stages.mark(self.rank, seq, Stage::Started, p.epoch);
                self.open(p, (self.rank, seq), None, now, board);
                self.stages.mark(self.rank, seq, Stage::RootOpened, p.epoch);
                progress = true;
            }
            // The root's first sends leave before it reads its socket (LogP: they follow the
            // start, `o` apart), and before its own delivery's bookkeeping (the board's
            // stamps, the user's hand-over), which no peer waits for.
            if progress {
                self.send_phase(p, board, now);
                for seq in first..allowed {
                    let i = Self::slot_index(seq);
                    if self.alive() && self.slots[i].seq == seq && self.slots[i].root == self.rank {
                        self.after_event(p, i, now, board);
                    }
                }
                self.publish(board);
            }
        }
        // Receive, act, send; again while datagrams keep arriving (the transport hands out
        // one delivery per poll so that a forward leaves before the next read), bounded so the
        // worker's other nodes are served too.
        for round in 0..16 {
            let now = if round == 0 { now } else { Instant::now() };
            let mut t = self.transport.take().expect("alive");
            let mut deaths = None;
            let mut fenced = None;
            let r = t.poll(now, &mut |d| match d {
                Delivery::Message { from, bytes } => {
                    if let Some(iter) = self.on_datagram(p, ctl, board, from, bytes, now) {
                        deaths = Some(iter);
                    }
                }
                Delivery::Suspect { peer } => self.on_suspect(p, board, peer, now),
                Delivery::Fenced { by } => fenced = Some(by),
            });
            self.transport = Some(t);
            let delivered = matches!(r, Ok(k) if k > 0);
            progress |= delivered;
            if let Some(by) = fenced {
                // Fail-stop enforcement: a peer suspected this node; it crashes now, and the
                // coordinator counts it dead from the first operation it has not retired.
                self.fenced_by = Some(by);
                self.die(board, self.retired);
                return true;
            }
            if let Some(iter) = deaths {
                self.die(board, iter);
                return true;
            }
            progress |= self.fire_timers(p, board, now);
            progress |= self.send_phase(p, board, now);
            self.publish(board);
            if !delivered || self.transport.is_none() {
                break;
            }
        }
        self.publish(board);
        progress
    }

    /// Runs the protocol timers that are due.
    fn fire_timers(&mut self, p: &NodeParams<'_, P::Shared>, board: &NodeBoard, now: Instant) -> bool {
        let mut progress = false;
        let units = Self::now_units(p, now);
        for i in 0..WINDOW {
            let root = self.slots[i].root;
            let Some(proto) = self.slots[i].proto.as_mut() else {
                continue;
            };
            if proto.next_timer().is_some_and(|t| t <= units) {
                let cx = Ctx {
                    rank: Self::vrank(p, root, self.rank),
                    n: p.n,
                    now: units,
                    shared: p.shared,
                };
                proto.on_timer(&cx);
                self.after_event(p, i, now, board);
                progress = true;
            }
        }
        progress
    }

    /// Decodes and admits one datagram; returns the iteration if it kills this node.
    fn on_datagram(
        &mut self,
        p: &NodeParams<'_, P::Shared>,
        ctl: &Control,
        board: &NodeBoard,
        from: u32,
        bytes: &[u8],
        now: Instant,
    ) -> Option<u64> {
        let polled = self.stages.now(p.epoch);
        let (h, body, payload) = match open_datagram(bytes, p.job, p.n, from, Some(P::Msg::KIND)) {
            Ok(x) => x,
            Err(r) => {
                match r {
                    Reject::Invalid(e) => self.stats.drops.count(e),
                    Reject::WrongKind => self.stats.wrong_kind += 1,
                    Reject::Spoofed => self.stats.spoofed += 1,
                }
                return None;
            }
        };
        if h.root != p.root.unwrap_or_else(|| ctl.root_of(h.seq)) {
            self.stats.drops.count(DecodeError::BadField("root"));
            return None;
        }
        match self.filter.admit(OpId { root: 0, seq: h.seq }) {
            Admission::Live => {}
            Admission::Stale => {
                self.stats.stale += 1;
                return None;
            }
            Admission::TooFarAhead => {
                self.stats.too_far += 1;
                return None;
            }
        }
        if h.seq >= self.retired + WINDOW as u64 {
            self.stats.too_far += 1;
            return None;
        }
        let msg = match P::Msg::decode(body, p.n) {
            Ok(m) => m,
            Err(e) => {
                self.stats.drops.count(e);
                return None;
            }
        };
        if !self.payloads.admit(h.seq, payload) {
            if let Some(b) = board.get(h.seq) {
                b.bad_payload.fetch_add(1, Ordering::Relaxed);
            }
            self.stats.drops.count(DecodeError::BadField("payload"));
            return None;
        }
        self.stages.mark_at(self.rank, h.seq, Stage::Polled, polled);
        self.stages.mark(self.rank, h.seq, Stage::Decoded, p.epoch);
        if let Some(f) = self.faults.as_mut()
            && f.crash_on_receive(h.seq)
        {
            return Some(h.seq);
        }
        let i = self.open(p, (h.root, h.seq), Some(payload), now, board);
        self.stages.mark(self.rank, h.seq, Stage::Opened, p.epoch);
        let cx = Ctx {
            rank: Self::vrank(p, h.root, self.rank),
            n: p.n,
            now: Self::now_units(p, now),
            shared: p.shared,
        };
        if let Some(proto) = self.slots[i].proto.as_mut() {
            proto.on_message(&cx, Self::vrank(p, h.root, from), &msg);
        }
        self.stages.mark(self.rank, h.seq, Stage::Stepped, p.epoch);
        // A delivery stamps the operation's activity itself; any other message does here.
        if !self.after_event(p, i, now, board) {
            board.claim(h.seq).touch(Self::ns(p, Instant::now().max(now)));
        }
        self.stages.mark(self.rank, h.seq, Stage::Delivered, p.epoch);
        None
    }

    fn on_suspect(&mut self, p: &NodeParams<'_, P::Shared>, board: &NodeBoard, peer: u32, now: Instant) {
        let units = Self::now_units(p, now);
        for i in 0..WINDOW {
            let root = self.slots[i].root;
            if let Some(proto) = self.slots[i].proto.as_mut() {
                let cx = Ctx {
                    rank: Self::vrank(p, root, self.rank),
                    n: p.n,
                    now: units,
                    shared: p.shared,
                };
                proto.on_suspect(&cx, Self::vrank(p, root, peer));
                self.after_event(p, i, now, board);
            }
        }
    }

    /// Publishes delivery and completion of slot `i`; true if the slot delivered now.
    fn after_event(&mut self, p: &NodeParams<'_, P::Shared>, i: usize, now: Instant, board: &NodeBoard) -> bool {
        let s = &mut self.slots[i];
        let Some(proto) = s.proto.as_ref() else { return false };
        let delivers = !s.delivered && proto.delivered();
        if delivers {
            s.delivered = true;
            // The root has its payload at the start (`now`, the step's clock, is the start's
            // stamp: its own delivery is published after its first sends, in the same step).
            // Elsewhere a fresh clock: `now` was read at the start of the step, possibly
            // before another thread's root started the operation. The user has the payload
            // before the board's bookkeeping (its lines are read by the coordinator's core:
            // each write may miss).
            let at = if s.root == self.rank {
                now
            } else {
                Instant::now().max(now)
            };
            let ns = Self::ns(p, at).max(1);
            self.payloads.deliver(s.root, s.seq, &s.payload);
            // The board's stamps (lines the coordinator's core reads: each write may miss) wait
            // until this step's forwards have left (`publish`): a relay's children no more
            // wait for them than the root's do.
            self.unpublished.push((s.seq, ns));
        }
        let cx = Ctx {
            rank: Self::vrank(p, s.root, self.rank),
            n: p.n,
            now: Self::now_units(p, now),
            shared: p.shared,
        };
        let fin = proto.finished(&cx);
        if fin != s.finished {
            s.finished = fin;
            let seq = s.seq;
            // Never finished before delivered, as the coordinator reads them.
            if fin {
                self.publish(board);
            }
            board.claim(seq).finished.store(fin, Ordering::Release);
        }
        delivers
    }

    /// Stamps the deliveries of this step on the board: when, how many, and the operation's
    /// latest activity (quiescence is never reported before coloring).
    fn publish(&mut self, board: &NodeBoard) {
        for (seq, ns) in self.unpublished.drain(..) {
            let b = board.claim(seq);
            b.delivered_ns.store(ns, Ordering::Relaxed);
            b.deliveries.fetch_add(1, Ordering::Relaxed);
            b.touch(ns);
        }
    }

    fn send_phase(&mut self, p: &NodeParams<'_, P::Shared>, board: &NodeBoard, now: Instant) -> bool {
        if now < self.busy_until {
            return false;
        }
        let mut progress = self.flush_deferred(now);
        // Oldest operation first; a bounded number of sends per step keeps the loop fair.
        let mut budget = self.sends_per_step;
        let base = self.retired;
        for seq in base..base + WINDOW as u64 {
            let i = Self::slot_index(seq);
            if self.slots[i].seq != seq || self.slots[i].proto.is_none() {
                continue;
            }
            while budget > 0 && now >= self.busy_until {
                let units = Self::now_units(p, now);
                let root = self.slots[i].root;
                let cx = Ctx {
                    rank: Self::vrank(p, root, self.rank),
                    n: p.n,
                    now: units,
                    shared: p.shared,
                };
                let proto = self.slots[i].proto.as_mut().expect("checked");
                match proto.poll_send(&cx, &mut self.rng) {
                    Action::Send { to, msg } => {
                        budget -= 1;
                        // A correction message is followed by a look at the socket before the
                        // next one: LogP's process receives while it sends, and checked
                        // correction stops in a direction as soon as it hears from a
                        // participant there. Sixteen sends in a row before a read sent 3-5x
                        // the modeled correction messages (`docs/measurements.md`).
                        if msg.phase() != Phase::Dissemination {
                            budget = 0;
                        }
                        progress = true;
                        let dest = Self::phys(p, root, to);
                        let s = &self.slots[i];
                        let len = match encode_datagram(&mut self.out, p.job, root, seq, self.rank, &msg, &s.payload) {
                            Ok(len) => len,
                            Err(e) => {
                                self.stats.drops.count(e);
                                continue;
                            }
                        };
                        self.stages.mark(self.rank, seq, Stage::Encoded, p.epoch);
                        let s = &mut self.slots[i];
                        s.sent += 1;
                        let b = board.claim(seq);
                        b.sent.fetch_add(1, Ordering::Relaxed);
                        b.touch(Self::ns(p, now));
                        if !self.send_or_defer(dest, len, now) {
                            b.send_drops.fetch_add(1, Ordering::Relaxed);
                        }
                        self.stages.mark(self.rank, seq, Stage::Sent, p.epoch);
                        if let Some(f) = self.faults.as_mut()
                            && f.crash_after_send(seq, self.slots[i].sent)
                        {
                            self.die(board, seq);
                            return true;
                        }
                    }
                    Action::Sleep(u) => {
                        self.busy_until = now + Duration::from_nanos(u.max(1).saturating_mul(p.tick_ns));
                    }
                    Action::Wait => break,
                }
            }
            self.after_event(p, i, now, board);
        }
        progress
    }

    /// Sends `self.out[..len]` to `dest`, or queues it behind earlier deferred datagrams to
    /// the same peer / when the peer's window is full. False: the datagram was dropped (the
    /// deferred queue is full); the caller fails the operation.
    fn send_or_defer(&mut self, dest: u32, len: usize, now: Instant) -> bool {
        let t = self.transport.as_mut().expect("alive");
        match self.outbox.send(&mut **t, dest, &self.out[..len], now) {
            Sent::Sent => true,
            Sent::Queued => {
                self.stats.backpressure += 1;
                true
            }
            Sent::Overflow => {
                self.stats.backpressure += 1;
                self.stats.deferred_overflow += 1;
                false
            }
            Sent::Refused(SendError::Suspected) => {
                // Crash-stop: a suspected peer is dead to this node, nothing is owed to it.
                self.stats.to_suspected += 1;
                true
            }
            Sent::Refused(_) => {
                self.stats.drops.count(DecodeError::BadField("destination"));
                false
            }
        }
    }

    /// Retries deferred datagrams in order, per destination.
    fn flush_deferred(&mut self, now: Instant) -> bool {
        if self.outbox.is_empty() {
            return false;
        }
        let t = self.transport.as_mut().expect("alive");
        let stats = &mut self.stats;
        self.outbox.flush(&mut **t, now, |_, r| {
            if r == Err(SendError::Suspected) {
                stats.to_suspected += 1;
            }
        })
    }
}

/// The most datagrams a node defers (then it drops, counted).
const MAX_DEFERRED: usize = 4096;

#[cfg(test)]
mod tests;
