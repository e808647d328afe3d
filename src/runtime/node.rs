//! One node of the runtime: drives the sans-IO protocol state machines of its in-flight
//! operations over a [`Transport`], in real time (`docs/architecture.md`, decisions
//! 1–2, 6).
//!
//! Per operation (named `(root, seq)`, Corrected Gossip Claim 1) the node keeps one protocol
//! instance, created when the root starts it or on the operation's first message. Every
//! datagram is decoded and validated by [`crate::wire`] before anything trusts it; what fails
//! is dropped and counted. The protocol's model time is nanoseconds since the cluster epoch
//! divided by `tick_ns`; a counted `Sleep(u)` keeps the sender busy for `u · tick_ns`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::protocol::op::Admission;
use crate::protocol::{Action, Ctx, DuplicateFilter, OpId, ProtoRng, Protocol, Rank, Time};
use crate::runtime::board::{Control, NodeBoard, WINDOW};
use crate::runtime::kill::{Kill, KillPoint};
use crate::transport::{Delivery, MAX_PAYLOAD, SendError, Transport};
use crate::wire::{DecodeError, DropCounters, Header, WireMessage, encode_datagram};

/// Parameters every node of a run shares.
pub struct NodeParams<'a, S> {
    pub shared: &'a S,
    pub n: u32,
    pub root: u32,
    pub job: u64,
    /// Nanoseconds per model time unit.
    pub tick_ns: u64,
    pub epoch: Instant,
    pub payload_len: usize,
}

/// The payload byte `i` of operation `seq` (checked at every receiver).
pub fn payload_byte(seq: u64, i: usize) -> u8 {
    (seq as u8).wrapping_mul(31).wrapping_add(i as u8).wrapping_add(7)
}

struct Slot<P> {
    seq: u64,
    proto: Option<P>,
    delivered: bool,
    finished: bool,
    sent: u32,
}

/// Counters a node keeps for the final report.
#[derive(Debug)]
pub struct NodeStats {
    pub drops: DropCounters,
    /// Valid datagrams of another protocol family.
    pub wrong_kind: u64,
    /// Messages of operations already retired here (late copies).
    pub stale: u64,
    /// Messages of operations too far ahead of the window.
    pub too_far: u64,
    /// Messages whose header sender differs from the transport's sender.
    pub spoofed: u64,
    /// Sends refused because the peer is suspected.
    pub to_suspected: u64,
    /// Sends deferred by a full retransmit window.
    pub backpressure: u64,
    /// Deferred sends dropped because the deferral queue was full (counted, never silent).
    pub deferred_overflow: u64,
    /// Delivery latency (root's start to this node's delivery), ns.
    pub delivery_ns: Histogram<u64>,
}

impl Default for NodeStats {
    fn default() -> Self {
        Self {
            drops: DropCounters::default(),
            wrong_kind: 0,
            stale: 0,
            too_far: 0,
            spoofed: 0,
            to_suspected: 0,
            backpressure: 0,
            deferred_overflow: 0,
            delivery_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        }
    }
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
    deferred: std::collections::VecDeque<(u32, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
    blocked: Vec<u32>,
    out: Vec<u8>,
    payload: Vec<u8>,
    payload_seq: Option<u64>,
    rng: ProtoRng,
    kill: Option<Kill>,
    /// Messages sent per step at most (see `PollMode::sends_per_pass`).
    sends_per_step: u32,
    /// The transport's counters when the node died (its sends count in the run's totals).
    last_stats: crate::transport::TransportStats,
    pub stats: NodeStats,
}

impl<P: Protocol> Node<P>
where
    P::Msg: WireMessage,
{
    /// A node with its transport; `on_death` runs when an injected crash kills it.
    pub fn new(
        rank: u32,
        n: u32,
        transport: Box<dyn Transport>,
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
                    proto: None,
                    delivered: false,
                    finished: false,
                    sent: 0,
                })
                .collect(),
            filter: DuplicateFilter::new(n),
            busy_until: Instant::now(),
            next_start: 0,
            retired: 0,
            deferred: std::collections::VecDeque::new(),
            spare: Vec::new(),
            blocked: Vec::new(),
            out: vec![0; MAX_PAYLOAD],
            payload: Vec::with_capacity(MAX_PAYLOAD),
            payload_seq: None,
            rng: ProtoRng::new(ProtoRng::run_seed(seed, u64::from(rank))),
            kill,
            sends_per_step: 16,
            last_stats: crate::transport::TransportStats::default(),
            stats: NodeStats::default(),
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

    fn vrank(p: &NodeParams<'_, P::Shared>, phys: u32) -> Rank {
        (phys + p.n - p.root % p.n) % p.n
    }

    fn phys(p: &NodeParams<'_, P::Shared>, v: Rank) -> u32 {
        (v + p.root) % p.n
    }

    fn now_units(p: &NodeParams<'_, P::Shared>, now: Instant) -> Time {
        now.saturating_duration_since(p.epoch).as_nanos() as u64 / p.tick_ns.max(1)
    }

    fn ns(p: &NodeParams<'_, P::Shared>, now: Instant) -> u64 {
        now.saturating_duration_since(p.epoch).as_nanos() as u64
    }

    fn die(&mut self, board: &NodeBoard, iter: u64) {
        if let Some(t) = self.transport.take() {
            self.last_stats = t.stats();
        }
        board.died_in.store(iter, Ordering::Relaxed);
        board.dead.store(true, Ordering::Release);
        if let Some(f) = self.on_death.as_mut() {
            f();
        }
    }

    /// Marks a node that is dead from the start.
    pub fn kill_at_start(&mut self, board: &NodeBoard) {
        if matches!(
            self.kill,
            Some(Kill {
                point: KillPoint::Start,
                ..
            })
        ) {
            self.die(board, u64::MAX);
        }
    }

    fn slot_index(seq: u64) -> usize {
        (seq % WINDOW as u64) as usize
    }

    /// The slot of `seq`, (re)initialized for it.
    fn open(&mut self, p: &NodeParams<'_, P::Shared>, seq: u64, now: Instant, board: &NodeBoard) -> usize {
        let i = Self::slot_index(seq);
        if self.slots[i].seq != seq {
            let cx = Ctx {
                rank: Self::vrank(p, self.rank),
                n: p.n,
                now: Self::now_units(p, now),
                shared: p.shared,
            };
            let mut proto = P::new(&cx);
            proto.start(&cx);
            self.slots[i] = Slot {
                seq,
                proto: Some(proto),
                delivered: false,
                finished: false,
                sent: 0,
            };
            board.claim(seq);
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
            self.filter.complete(OpId { root: p.root, seq });
            let i = Self::slot_index(seq);
            if self.slots[i].seq == seq {
                self.slots[i].proto = None;
            }
            self.retired += 1;
        }
        // The root starts what it may.
        if self.rank == p.root {
            let allowed = ctl.allowed.load(Ordering::Acquire);
            while self.next_start < allowed {
                let seq = self.next_start;
                ctl.started_ns[Self::slot_index(seq)].store(Self::ns(p, now), Ordering::Release);
                let i = self.open(p, seq, now, board);
                self.after_event(p, i, now, board);
                self.next_start += 1;
                progress = true;
            }
            // The root's first sends leave before it reads its socket (LogP: they follow the
            // start, `o` apart).
            if progress {
                self.send_phase(p, board, now);
            }
        }
        // Receive, act, send; again while datagrams keep arriving (the transport hands out
        // one delivery per poll so that a forward leaves before the next read), bounded so the
        // worker's other nodes are served too.
        for round in 0..16 {
            let now = if round == 0 { now } else { Instant::now() };
            let mut t = self.transport.take().expect("alive");
            let mut deaths = None;
            let r = t.poll(now, &mut |d| match d {
                Delivery::Message { from, bytes } => {
                    if let Some(iter) = self.on_datagram(p, board, from, bytes, now) {
                        deaths = Some(iter);
                    }
                }
                Delivery::Suspect { peer } => self.on_suspect(p, board, peer, now),
            });
            self.transport = Some(t);
            let delivered = matches!(r, Ok(k) if k > 0);
            progress |= delivered;
            if let Some(iter) = deaths {
                self.die(board, iter);
                return true;
            }
            progress |= self.fire_timers(p, board, now);
            progress |= self.send_phase(p, board, now);
            if !delivered || self.transport.is_none() {
                break;
            }
        }
        progress
    }

    /// Runs the protocol timers that are due.
    fn fire_timers(&mut self, p: &NodeParams<'_, P::Shared>, board: &NodeBoard, now: Instant) -> bool {
        let mut progress = false;
        let units = Self::now_units(p, now);
        for i in 0..WINDOW {
            let Some(proto) = self.slots[i].proto.as_mut() else {
                continue;
            };
            if proto.next_timer().is_some_and(|t| t <= units) {
                let cx = Ctx {
                    rank: Self::vrank(p, self.rank),
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
        board: &NodeBoard,
        from: u32,
        bytes: &[u8],
        now: Instant,
    ) -> Option<u64> {
        let (h, body, payload) = match Header::decode(bytes, p.job, p.n) {
            Ok(x) => x,
            Err(e) => {
                self.stats.drops.count(e);
                return None;
            }
        };
        if h.kind != P::Msg::KIND {
            self.stats.wrong_kind += 1;
            return None;
        }
        if h.sender != from {
            self.stats.spoofed += 1;
            return None;
        }
        if h.root != p.root {
            self.stats.drops.count(DecodeError::BadField("root"));
            return None;
        }
        match self.filter.admit(OpId {
            root: h.root,
            seq: h.seq,
        }) {
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
        if payload.len() != p.payload_len || payload.iter().enumerate().any(|(i, &b)| b != payload_byte(h.seq, i)) {
            if let Some(b) = board.get(h.seq) {
                b.bad_payload.fetch_add(1, Ordering::Relaxed);
            }
            self.stats.drops.count(DecodeError::BadField("payload"));
            return None;
        }
        if let Some(Kill {
            point: KillPoint::OnReceive { iter },
            ..
        }) = self.kill
            && iter == h.seq
        {
            return Some(iter);
        }
        let i = self.open(p, h.seq, now, board);
        let cx = Ctx {
            rank: Self::vrank(p, self.rank),
            n: p.n,
            now: Self::now_units(p, now),
            shared: p.shared,
        };
        if let Some(proto) = self.slots[i].proto.as_mut() {
            proto.on_message(&cx, Self::vrank(p, from), &msg);
        }
        board.claim(h.seq).touch(Self::ns(p, Instant::now().max(now)));
        self.after_event(p, i, now, board);
        None
    }

    fn on_suspect(&mut self, p: &NodeParams<'_, P::Shared>, board: &NodeBoard, peer: u32, now: Instant) {
        let units = Self::now_units(p, now);
        for i in 0..WINDOW {
            if let Some(proto) = self.slots[i].proto.as_mut() {
                let cx = Ctx {
                    rank: Self::vrank(p, self.rank),
                    n: p.n,
                    now: units,
                    shared: p.shared,
                };
                proto.on_suspect(&cx, Self::vrank(p, peer));
                self.after_event(p, i, now, board);
            }
        }
    }

    /// Publishes delivery and completion of slot `i`.
    fn after_event(&mut self, p: &NodeParams<'_, P::Shared>, i: usize, now: Instant, board: &NodeBoard) {
        let s = &mut self.slots[i];
        let Some(proto) = s.proto.as_ref() else { return };
        let b = board.claim(s.seq);
        if !s.delivered && proto.delivered() {
            s.delivered = true;
            // A fresh clock: `now` was read at the start of the step, possibly before another
            // thread's root started the operation.
            let ns = Self::ns(p, Instant::now().max(now));
            b.delivered_ns.store(ns.max(1), Ordering::Relaxed);
            b.deliveries.fetch_add(1, Ordering::Relaxed);
            // The delivery is the operation's latest activity here: quiescence is never
            // reported before coloring.
            b.touch(ns.max(1));
        }
        let cx = Ctx {
            rank: Self::vrank(p, self.rank),
            n: p.n,
            now: Self::now_units(p, now),
            shared: p.shared,
        };
        let fin = proto.finished(&cx);
        if fin != s.finished {
            s.finished = fin;
            b.finished.store(fin, Ordering::Release);
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
                let cx = Ctx {
                    rank: Self::vrank(p, self.rank),
                    n: p.n,
                    now: units,
                    shared: p.shared,
                };
                let proto = self.slots[i].proto.as_mut().expect("checked");
                match proto.poll_send(&cx, &mut self.rng) {
                    Action::Send { to, msg } => {
                        budget -= 1;
                        progress = true;
                        let dest = Self::phys(p, to);
                        let len = match self.encode(p, seq, &msg) {
                            Ok(len) => len,
                            Err(e) => {
                                self.stats.drops.count(e);
                                continue;
                            }
                        };
                        let s = &mut self.slots[i];
                        s.sent += 1;
                        let b = board.claim(seq);
                        b.sent.fetch_add(1, Ordering::Relaxed);
                        b.touch(Self::ns(p, now));
                        if !self.send_or_defer(dest, len, now) {
                            b.send_drops.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(Kill {
                            point: KillPoint::AfterSends { iter, k },
                            ..
                        }) = self.kill
                            && iter == seq
                            && self.slots[i].sent >= k
                        {
                            self.die(board, iter);
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
        const MAX_DEFERRED: usize = 4096;
        let queued = self.deferred.iter().any(|(d, _)| *d == dest);
        if !queued {
            let t = self.transport.as_mut().expect("alive");
            match t.send(dest, &self.out[..len], now) {
                Ok(()) => return true,
                Err(SendError::WindowFull) => {}
                Err(SendError::Suspected) => {
                    // Crash-stop: a suspected peer is dead to this node, nothing is owed to it.
                    self.stats.to_suspected += 1;
                    return true;
                }
                Err(_) => {
                    self.stats.drops.count(DecodeError::BadField("destination"));
                    return false;
                }
            }
        }
        self.stats.backpressure += 1;
        if self.deferred.len() >= MAX_DEFERRED {
            self.stats.deferred_overflow += 1;
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&self.out[..len]);
        self.deferred.push_back((dest, buf));
        true
    }

    /// Retries deferred datagrams in order, per destination.
    fn flush_deferred(&mut self, now: Instant) -> bool {
        if self.deferred.is_empty() {
            return false;
        }
        let mut progress = false;
        self.blocked.clear();
        let mut i = 0;
        while i < self.deferred.len() {
            let dest = self.deferred[i].0;
            if self.blocked.contains(&dest) {
                i += 1;
                continue;
            }
            let t = self.transport.as_mut().expect("alive");
            match t.send(dest, &self.deferred[i].1, now) {
                Err(SendError::WindowFull) => {
                    self.blocked.push(dest);
                    i += 1;
                }
                r => {
                    if r == Err(SendError::Suspected) {
                        self.stats.to_suspected += 1;
                    }
                    let (_, buf) = self.deferred.remove(i).expect("index in range");
                    self.spare.push(buf);
                    progress = true;
                }
            }
        }
        progress
    }

    fn encode(&mut self, p: &NodeParams<'_, P::Shared>, seq: u64, msg: &P::Msg) -> Result<usize, DecodeError> {
        // The payload of an operation is built once, not per message.
        if self.payload_seq != Some(seq) {
            let len = p.payload_len.min(MAX_PAYLOAD);
            self.payload.clear();
            self.payload.extend((0..len).map(|i| payload_byte(seq, i)));
            self.payload_seq = Some(seq);
        }
        encode_datagram(&mut self.out, p.job, p.root, seq, self.rank, msg, &self.payload)
    }
}
