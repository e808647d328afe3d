//! The broadcast family's machine on the generic node loop: one node's window of operations
//! in flight ([`Ops`], driven pass by pass through [`Pass`]), over its datagrams
//! ([`Datagrams`]).
//!
//! Per operation (named `(root, seq)`, Corrected Gossip Claim 1) the machine keeps one
//! protocol instance in a window of [`WINDOW`] slots, created when the root starts it
//! ([`Event::Input`]) or on the operation's first message. A datagram is admitted in the
//! order the wire and the window want: header (job, kind, sender), duplicate filter, window,
//! root, body, payload. What fails is dropped and counted in [`NodeStats`].
//!
//! The machine lives in the runtime, not in [`crate::protocol`], because it publishes to
//! the run's [`NodeBoard`] (delivery and activity stamps, read by the coordinator) at the
//! instant each event happens: a pass carries that instant ([`Pass::now`]), and the
//! protocol's model time is nanoseconds since the epoch divided by `tick_ns`; a counted
//! `Sleep(u)` keeps the sender busy for `u · tick_ns`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::stages::{self, Stage};
use super::trace;
use super::{Datagrams, Faults, NodeParams, NodeStats, Op, Payloads};
use crate::protocol::op::Admission;
use crate::protocol::{
    Action, Ctx, DuplicateFilter, Event, Machine, Message, OpId, Phase, ProtoRng, Protocol, Rank, Time,
};
use crate::runtime::board::{Control, NodeBoard, WINDOW};
use crate::runtime::driver::{Endpoint, Got, Reject, Sent, open_datagram};
use crate::transport::SendError;
use crate::wire::{DecodeError, DropCounters, WireMessage, encode_datagram};

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

/// One node's broadcast state: the operations in flight and what they need.
pub(super) struct Ops<P: Protocol> {
    pub(super) rank: u32,
    slots: Vec<Slot<P>>,
    filter: DuplicateFilter,
    busy_until: Instant,
    next_start: u64,
    pub(super) retired: u64,
    payloads: Box<dyn Payloads>,
    /// Deliveries of this pass not yet stamped on the board (`Pass::publish`).
    unpublished: Vec<(u64, u64)>,
    /// Sends and other activity of this pass not yet on the board: `(seq, sends, ns)`.
    unpublished_activity: Vec<(u64, u32, u64)>,
    /// Operations this root started in this pass, not yet announced to the coordinator:
    /// `(seq, start ns)` ([`Pass::announce_starts`], after the first sends).
    unannounced: Vec<(u64, u64)>,
    rng: ProtoRng,
    /// Crash injection (tests, benchmarks), if any.
    pub(super) faults: Option<Box<dyn Faults>>,
    /// Messages sent per pass at most (see `PollMode::sends_per_pass`).
    pub(super) sends_per_step: u32,
    /// The next operation a send phase looks at (oldest first).
    cursor: u64,
    /// One past the newest operation this node opened: every slot with a protocol instance
    /// holds one of `retired..live_end`, so a pass visits those and not the whole window
    /// (a visit of all [`WINDOW`] slots, twice per pass, was most of an idle node's step).
    live_end: u64,
    /// The send phase sent a message past dissemination: it ends there (see
    /// [`Pass::poll_transmit`]).
    read_first: bool,
    /// An injected crash struck in the operation (its iteration): the node must die.
    pub(super) dying: Option<u64>,
    /// Stage stamps of the forwarding path (cargo feature `stages`; empty otherwise).
    pub(super) stages: stages::Recorder,
    /// The message trace (cargo feature `trace`; empty otherwise).
    pub(super) trace: trace::Tracer,
}

impl<P: Protocol> Ops<P> {
    pub(super) fn new(
        rank: u32,
        n: u32,
        payloads: Box<dyn Payloads>,
        faults: Option<Box<dyn Faults>>,
        seed: u64,
    ) -> Self {
        Self {
            rank,
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
            payloads,
            unpublished: Vec::with_capacity(WINDOW),
            unpublished_activity: Vec::with_capacity(WINDOW),
            unannounced: Vec::with_capacity(WINDOW),
            rng: ProtoRng::new(ProtoRng::run_seed(seed, u64::from(rank))),
            faults,
            sends_per_step: 16,
            cursor: 0,
            live_end: 0,
            read_first: false,
            dying: None,
            stages: stages::Recorder::default(),
            trace: trace::Tracer::default(),
        }
    }

    /// Retires the operations the coordinator declared over.
    pub(super) fn retire(&mut self, retired: u64) {
        while self.retired < retired {
            let seq = self.retired;
            self.filter.complete(OpId { root: 0, seq });
            let i = slot_index(seq);
            if self.slots[i].seq == seq {
                self.slots[i].proto = None;
            }
            self.retired += 1;
        }
    }

    /// The operations this node starts now (as root): those from its last start to
    /// `allowed`, whose root it is.
    pub(super) fn starts_until(&mut self, allowed: u64) -> std::ops::Range<u64> {
        let first = self.next_start;
        self.next_start = self.next_start.max(allowed);
        first..self.next_start
    }

    /// Is the sender busy (a counted `Sleep`) at `now`?
    #[inline]
    pub(super) fn busy(&self, now: Instant) -> bool {
        now < self.busy_until
    }

    /// The operations that may hold a protocol instance, oldest first (at most [`WINDOW`]
    /// of them, unless a root started one before it saw the retirement that allowed it).
    #[inline]
    pub(super) fn live(&self) -> std::ops::Range<u64> {
        self.retired..self.live_end.max(self.retired)
    }

    /// One past the last operation a send phase visits: the live ones, at most [`WINDOW`]
    /// from the oldest (a root that started one early waits to send it).
    #[inline]
    fn send_end(&self) -> u64 {
        self.live().end.min(self.retired + WINDOW as u64)
    }

    /// The slot of live operation `seq`, if it holds its protocol instance.
    #[inline]
    fn live_slot(&self, seq: u64) -> Option<usize> {
        let i = slot_index(seq);
        (self.slots[i].seq == seq && self.slots[i].proto.is_some()).then_some(i)
    }

    /// Whether slot `seq` holds operation `seq` rooted here.
    pub(super) fn is_own(&self, seq: u64) -> bool {
        let s = &self.slots[slot_index(seq)];
        s.seq == seq && s.root == self.rank
    }
}

fn slot_index(seq: u64) -> usize {
    (seq % WINDOW as u64) as usize
}

/// One pass of a node: its machine with the run's parameters, the coordinator's control and
/// its board, at the pass's instant. This is what the driver drives.
pub(super) struct Pass<'a, 'p, P: Protocol> {
    pub ops: &'a mut Ops<P>,
    pub stats: &'a mut NodeStats,
    pub p: &'a NodeParams<'p, P::Shared>,
    pub ctl: &'a Control,
    pub board: &'a NodeBoard,
    /// The pass's instant.
    pub now: Instant,
}

impl<'p, P: Protocol> Pass<'_, 'p, P>
where
    P::Msg: WireMessage,
{
    /// The virtual rank of `phys` in an operation rooted at `root` (the root is 0).
    #[inline]
    fn vrank(&self, root: u32, phys: u32) -> Rank {
        let n = self.p.n;
        (phys + n - root % n) % n
    }

    #[inline]
    fn units(&self, now: Instant) -> Time {
        now.saturating_duration_since(self.p.epoch).as_nanos() as u64 / self.p.tick_ns.max(1)
    }

    #[inline]
    fn ns(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.p.epoch).as_nanos() as u64
    }

    #[inline]
    fn cx(&self, root: u32, units: Time) -> Ctx<'p, P::Shared> {
        Ctx {
            rank: self.vrank(root, self.ops.rank),
            n: self.p.n,
            now: units,
            shared: self.p.shared,
        }
    }

    /// The slot of `seq` (rooted at `root`), (re)initialized for it; its payload is
    /// `payload` (a received one) or, at the root, the source's.
    fn open(&mut self, (root, seq): (u32, u64), payload: Option<&[u8]>) -> usize {
        let i = slot_index(seq);
        if self.ops.slots[i].seq != seq {
            let cx = self.cx(root, self.units(self.now));
            let mut proto = P::new(&cx);
            proto.start(&cx);
            let ops = &mut *self.ops;
            let s = &mut ops.slots[i];
            s.payload.clear();
            match payload {
                Some(b) => s.payload.extend_from_slice(b),
                None => ops.payloads.source(seq, &mut s.payload),
            }
            s.seq = seq;
            s.root = root;
            s.proto = Some(proto);
            ops.live_end = ops.live_end.max(seq + 1);
            s.delivered = false;
            s.finished = false;
            s.sent = 0;
            // The board's entry (lines the coordinator's core reads: each write may miss) is
            // claimed after the first sends at the root ([`Pass::announce_starts`]), at its
            // delivery elsewhere (after the user has the payload).
        }
        i
    }

    /// The root starts operation `seq`. Its start is stamped now, once the start signal
    /// (`Control::allowed`, written by the coordinator's core) has been read, as an MPI
    /// rank's timer starts on entering the call after the barrier that released it: the
    /// pass's instant, read before that load, counted its cache miss as the broadcast's.
    /// The coordinator hears of the start after the first sends ([`Pass::announce_starts`]).
    fn start(&mut self, seq: u64) {
        let (rank, epoch) = (self.ops.rank, self.p.epoch);
        self.ops.stages.mark_at(rank, seq, Stage::RootStep, self.ns(self.now));
        // The root has its payload at the start (its delivery is stamped at the pass's
        // instant, `after_event`): the start is the pass's instant from here on.
        self.now = Instant::now().max(self.now);
        let ns = self.ns(self.now);
        self.ops.unannounced.push((seq, ns));
        self.ops.trace.note(self.p.job, rank, seq, "start", rank, "", ns);
        self.ops.stages.mark(rank, seq, Stage::Started, epoch);
        self.open((rank, seq), None);
        self.ops.stages.mark(rank, seq, Stage::RootOpened, epoch);
    }

    /// Tells the coordinator of the operations this root started in the pass (their start
    /// stamps, their board entries): after their first sends, since those writes go to lines
    /// the coordinator's core is reading (each may miss, about 0.1 µs on a lent 16-core
    /// machine) and no peer waits for them. Called before anything else can end the pass
    /// (an injected crash included), so a started operation is always announced.
    pub(super) fn announce_starts(&mut self) {
        for (seq, ns) in self.ops.unannounced.drain(..) {
            self.ctl.started_ns[slot_index(seq)].store(ns, Ordering::Release);
            self.board.claim(seq);
        }
    }

    /// Operation `seq`'s slot after its root started it and sent: publishes its delivery.
    pub(super) fn started(&mut self, seq: u64) {
        if self.ops.is_own(seq) {
            self.after_event(slot_index(seq));
        }
    }

    /// Publishes delivery and completion of slot `i`; true if the slot delivered now.
    fn after_event(&mut self, i: usize) -> bool {
        let now = self.now;
        let (ops, p) = (&mut *self.ops, self.p);
        let s = &mut ops.slots[i];
        let Some(proto) = s.proto.as_ref() else { return false };
        let delivers = !s.delivered && proto.delivered();
        let ns_of = |at: Instant| at.saturating_duration_since(p.epoch).as_nanos() as u64;
        if delivers {
            s.delivered = true;
            // The root has its payload at the start (`now`, the pass's clock, is the start's
            // stamp: its own delivery is published after its first sends, in the same pass).
            // Elsewhere a fresh clock: `now` was read at the start of the pass, possibly
            // before another thread's root started the operation. The user has the payload
            // before the board's bookkeeping (its lines are read by the coordinator's core:
            // each write may miss).
            let at = if s.root == ops.rank {
                now
            } else {
                Instant::now().max(now)
            };
            let ns = ns_of(at).max(1);
            ops.payloads.deliver(s.root, s.seq, &s.payload);
            ops.trace.note(p.job, ops.rank, s.seq, "deliver", s.root, "", ns);
            // The board's stamps (lines the coordinator's core reads: each write may miss) wait
            // until the pass's forwards have left (`publish`): a relay's children no more wait
            // for them than the root's do.
            ops.unpublished.push((s.seq, ns));
        }
        let cx = Ctx {
            rank: (ops.rank + p.n - s.root % p.n) % p.n,
            n: p.n,
            now: ns_of(now) / p.tick_ns.max(1),
            shared: p.shared,
        };
        let fin = proto.finished(&cx);
        if fin != s.finished {
            s.finished = fin;
            let seq = s.seq;
            // Never finished before delivered, as the coordinator reads them.
            if fin {
                self.publish();
            }
            self.board.claim(seq).finished.store(fin, Ordering::Release);
        }
        delivers
    }

    /// Stamps the pass's deliveries on the board: when, how many, and the operation's latest
    /// activity (quiescence is never reported before coloring).
    pub(super) fn publish(&mut self) {
        // Activity first: it may be of an older operation than a delivery of this pass, whose
        // entry would then take the older one's slot (an entry is never taken back).
        for (seq, sends, ns) in self.ops.unpublished_activity.drain(..) {
            let Some(b) = self.board.claim_unless_newer(seq) else {
                continue;
            };
            if sends > 0 {
                b.sent.fetch_add(sends, Ordering::Relaxed);
            }
            b.touch(ns);
        }
        for (seq, ns) in self.ops.unpublished.drain(..) {
            let b = self.board.claim(seq);
            // The count before the time, which releases it: the coordinator takes a delivery
            // as made once it sees the time (`Coordinator::tick`).
            b.deliveries.fetch_add(1, Ordering::Relaxed);
            b.delivered_ns.store(ns, Ordering::Release);
            b.touch(ns);
        }
    }

    /// Notes activity of operation `seq` at `ns` (and `sends` more datagrams) for the board
    /// at the pass's end: its lines are read by the coordinator's core, so a write there may
    /// miss, and a relay's children must not wait for it (the model has no such cost).
    fn note_activity(&mut self, seq: u64, sends: u32, ns: u64) {
        let pending = &mut self.ops.unpublished_activity;
        match pending.iter_mut().find(|e| e.0 == seq) {
            Some(e) => {
                e.1 += sends;
                e.2 = e.2.max(ns);
            }
            None => pending.push((seq, sends, ns)),
        }
    }

    /// Runs the protocol timers that are due.
    fn fire_timers(&mut self) {
        let units = self.units(self.now);
        for seq in self.ops.live() {
            let Some(i) = self.ops.live_slot(seq) else { continue };
            let root = self.ops.slots[i].root;
            let cx = self.cx(root, units);
            let Some(proto) = self.ops.slots[i].proto.as_mut() else {
                continue;
            };
            if proto.next_timer().is_some_and(|t| t <= units) {
                proto.on_timer(&cx);
                self.after_event(i);
            }
        }
    }

    fn on_suspect(&mut self, peer: u32) {
        let units = self.units(self.now);
        for seq in self.ops.live() {
            let Some(i) = self.ops.live_slot(seq) else { continue };
            let root = self.ops.slots[i].root;
            let (cx, v) = (self.cx(root, units), self.vrank(root, peer));
            if let Some(proto) = self.ops.slots[i].proto.as_mut() {
                proto.on_suspect(&cx, v);
                self.after_event(i);
            }
        }
    }

    /// A message of an open operation (its payload admitted).
    fn on_message(&mut self, from: u32, op: &Op<P::Msg>) {
        let (rank, epoch) = (self.ops.rank, self.p.epoch);
        self.ops.trace.note(
            self.p.job,
            rank,
            op.seq,
            "recv",
            from,
            op.msg.label(),
            trace::now(epoch),
        );
        let i = self.open((op.root, op.seq), Some(&[]));
        self.ops.stages.mark(rank, op.seq, Stage::Opened, epoch);
        let cx = self.cx(op.root, self.units(self.now));
        let v = self.vrank(op.root, from);
        if let Some(proto) = self.ops.slots[i].proto.as_mut() {
            proto.on_message(&cx, v, &op.msg);
        }
        self.ops.stages.mark(rank, op.seq, Stage::Stepped, epoch);
        // A delivery stamps the operation's activity itself; any other message does here.
        if !self.after_event(i) {
            let ns = self.ns(Instant::now().max(self.now));
            self.note_activity(op.seq, 0, ns);
        }
        self.ops.stages.mark(rank, op.seq, Stage::Delivered, epoch);
    }

    /// A send phase begins (oldest operation first).
    pub(super) fn begin_sends(&mut self) {
        self.ops.cursor = self.ops.retired;
        self.ops.read_first = false;
    }

    /// A send phase ended: the operations it did not reach publish their state.
    pub(super) fn end_sends(&mut self) {
        let end = self.ops.send_end();
        while self.ops.cursor < end {
            let seq = self.ops.cursor;
            self.ops.cursor += 1;
            let i = slot_index(seq);
            if self.ops.slots[i].seq == seq && self.ops.slots[i].proto.is_some() {
                self.after_event(i);
            }
        }
    }
}

impl<P: Protocol> Machine for Pass<'_, '_, P>
where
    P::Msg: WireMessage,
{
    type Msg = Op<P::Msg>;
    /// The root starts this operation.
    type Input = u64;
    /// Deliveries go to the node's [`Payloads`] and board as they happen.
    type Output = ();
    type Error = std::convert::Infallible;
    /// The pass carries its instant ([`Pass::now`]).
    const TIMED: bool = false;

    fn handle(&mut self, _: Time, ev: Event<Op<P::Msg>, u64>) -> Result<(), Self::Error> {
        match ev {
            Event::Message { from, msg } => self.on_message(from, &msg),
            Event::Timer => self.fire_timers(),
            Event::Suspect(peer) => self.on_suspect(peer),
            Event::Input(seq) => self.start(seq),
        }
        Ok(())
    }

    /// The next message of the oldest operation that has one, while the sender is free;
    /// each operation publishes its state once its sends are done (as [`Pass::end_sends`]
    /// does for those a phase does not reach). A correction (or control) message ends the
    /// phase: the socket is read before the next one, as LogP's process receives while it
    /// sends, and checked correction stops in a direction as soon as it hears from a
    /// participant there (sixteen sends in a row before a read sent 3-5x the modeled
    /// correction messages, `docs/measurements.md`).
    #[inline]
    fn poll_transmit(&mut self, _: Time) -> Option<(Rank, Op<P::Msg>)> {
        if self.ops.dying.is_some() || self.ops.read_first {
            return None;
        }
        let end = self.ops.send_end();
        while self.ops.cursor < end {
            let seq = self.ops.cursor;
            let i = slot_index(seq);
            if self.ops.slots[i].seq != seq || self.ops.slots[i].proto.is_none() {
                self.ops.cursor += 1;
                continue;
            }
            if self.ops.busy(self.now) {
                return None;
            }
            let root = self.ops.slots[i].root;
            let cx = self.cx(root, self.units(self.now));
            let ops = &mut *self.ops;
            let proto = ops.slots[i].proto.as_mut().expect("checked");
            match proto.poll_send(&cx, &mut ops.rng) {
                Action::Send { to, msg } => {
                    ops.read_first = msg.phase() != Phase::Dissemination;
                    let dest = (to + root) % self.p.n;
                    ops.trace.note(
                        self.p.job,
                        ops.rank,
                        seq,
                        "send",
                        dest,
                        msg.label(),
                        trace::now(self.p.epoch),
                    );
                    return Some((dest, Op { root, seq, msg }));
                }
                Action::Sleep(u) => {
                    // Counted from now, when the sends before it have left, as the model's
                    // process sleeps from the end of its last send (the pass's instant was read
                    // before this pass's receive and sends). Counted from the pass's instant, a
                    // relay's wait for the synchronized correction was over by the time its
                    // forwards had left: it sent its first correction message in the same
                    // visit, holding its worker through the wait while the nodes sharing that
                    // worker could not forward the tree messages it had just sent them.
                    let wait = Duration::from_nanos(u.max(1).saturating_mul(self.p.tick_ns));
                    ops.busy_until = Instant::now().max(self.now) + wait;
                    ops.trace.note(
                        self.p.job,
                        ops.rank,
                        seq,
                        "wait",
                        ops.rank,
                        "",
                        trace::now(self.p.epoch),
                    );
                    return None;
                }
                Action::Wait => {
                    self.ops.cursor += 1;
                    self.after_event(i);
                }
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.ops
            .live()
            .filter_map(|seq| self.ops.slots[self.ops.live_slot(seq)?].proto.as_ref()?.next_timer())
            .min()
    }

    fn poll_output(&mut self) -> Option<()> {
        None
    }
}

mod admit;
