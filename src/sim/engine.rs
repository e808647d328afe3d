//! The LogP discrete-event driver (`docs/architecture.md`, decision 4; Corrected Trees §2.2), in its LogGP
//! form ([`LogGP`]; a [`LogP`](crate::model::LogP) gives exactly the LogP timing).
//!
//! Integer time. A send occupies the sender for `o_s + G·(k−1)` and the next one starts
//! `max(o_s + G·(k−1), g)` later; the message travels `L`; its receive occupies the receiver
//! for `o_r`, in arrival order, receives starting at least `max(o_r, g)` apart. A process sends
//! and receives at the same time but does one of each at a time. Dead processes are passive: a
//! message to one costs the sender its send and vanishes; where the senders know the processes
//! dead before the start ([`Faults::known_dead`], as a runtime's transports do once they have
//! suspected them), a send to one of those costs nothing. Memory is O(P) and nothing is
//! allocated per event once the buffers have grown (they are reused across runs).
//!
//! Shared cores ([`Engine::set_cores`]): the processes run on `C` cores, rank `r` on core
//! `r mod C` (the runtime's workers, each serving its nodes in turn), and a core does one send
//! or receive at a time: a process whose core is busy waits for it before it sends, and a
//! message that arrived waits for its receiver's core. With a core per process this is LogP.
//!
//! Noisy mode ([`Engine::set_noise`]) draws each message's `o_s`, `L` and
//! `o_r` from [`Noise`]'s distributions with a generator of its own; a message then reaches
//! its receiver as an event of its own, and the receive port is taken in arrival order.

use std::sync::Arc;

use crate::model::{LogGP, Time};
use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};
use crate::sim::calendar::{Calendar, Item};
use crate::sim::core::{Core, EventCap};
use crate::sim::faults::Faults;
use crate::sim::noise::Noise;
use crate::topology::ring;

mod outputs;
pub use outputs::{Receives, RunStats, TraceRow};

/// A message event's receiver and stage: the top bit marks a message that has only reached
/// its receiver's port (noisy or shared-cores mode: its receive is scheduled then), a clear
/// one a receive that completes. Ranks are below 2^31 ([`Engine::new`]).
#[derive(Clone, Copy, Debug)]
struct Dest(u32);

impl Dest {
    const ARRIVE: u32 = 1 << 31;

    fn recv(to: Rank) -> Self {
        Self(to)
    }

    fn arrive(to: Rank) -> Self {
        Self(to | Self::ARRIVE)
    }

    fn rank(self) -> Rank {
        self.0 & !Self::ARRIVE
    }

    fn arrived(self) -> bool {
        self.0 & Self::ARRIVE != 0
    }
}

/// The top bit of a message event's sender at its arrival stage: copies of the message were
/// lost ([`crate::sim::noise::Loss`]) and the one that arrives is a retransmission. Cleared
/// before the receive is scheduled, so a receive's sender is a plain rank.
const LATE_COPY: Rank = 1 << 31;

/// An event. Both stages of a message are one variant ([`Dest`] tells them apart), so that a
/// message type with a spare niche holds the event's tag: a corrected tree's event (`C = 0`) is
/// 16 bytes, not 20 (a broadcast at 2^20 processes holds about four instants of a million
/// receives each in the calendar at once).
#[derive(Clone, Copy, Debug)]
enum Ev<M> {
    Msg { to: Dest, from: Rank, msg: M },
    Timer(Rank),
    Suspect { node: Rank, peer: Rank },
    Die(Rank),
}

/// The driver's state of one process that its events read and write: 32 bytes, aligned so
/// that a cache line holds two and none straddles two lines. The protocol's state lives in an
/// array of its own (struct of arrays): an event touches the protocol state of its process
/// and this slot; a send touches the receiver's slot only. What only the result collection
/// reads (the delivery time) is kept apart.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Slot {
    /// When the receive port is free again.
    recv_free: Time,
    /// Death time (`Time::MAX`: alive; 0: dead before the start).
    death: Time,
    /// The armed timer (`Time::MAX`: none).
    timer_at: Time,
    /// Messages sent.
    sent: u32,
    /// A poll is queued or the sender is busy.
    poll_pending: bool,
    /// The first delivery is recorded (in `Engine::delivered_at`).
    delivered: bool,
}

const _: () = assert!(size_of::<Slot>() == 32);
const _: () = assert!(size_of::<Ev<crate::protocol::bcast::corrected_tree::TreeMsg<0>>>() == 16);

impl Slot {
    fn new(death: Time) -> Self {
        Self {
            recv_free: 0,
            death,
            timer_at: Time::MAX,
            sent: 0,
            poll_pending: false,
            delivered: false,
        }
    }
}

/// A reusable simulator for protocol `P` over `n` processes.
pub struct Engine<P: Protocol> {
    n: u32,
    /// The event core shared with the machine engine: calendar, message costs (LogGP
    /// parameters, noise, shared cores) and the event cap.
    core: Core<Ev<P::Msg>>,
    /// Each process's protocol state.
    nodes: Vec<P>,
    /// Each process's driver state (see [`Slot`]).
    slots: Vec<Slot>,
    /// Each process's first delivery, valid where its slot says `delivered`.
    delivered_at: Vec<Time>,
    /// Death times as drawn by the fault plan (copied into the slots).
    death: Vec<Time>,
    scratch: Vec<Rank>,
    sends_log: Vec<(Rank, Rank)>,
    fd: bool,
    /// The run's [`Faults::known_dead`]: a send to a process dead before the start is refused
    /// at once.
    known_dead: bool,
    /// How receives occupy a process (see [`Receives`]).
    pub receives: Receives,
    /// When `Some`, every event of the next runs is appended here.
    pub trace: Option<Vec<TraceRow>>,
}

impl<P: Protocol> Engine<P>
where
    P::Shared: SharedInfo,
{
    /// The most processes an engine holds (a message event's receiver keeps its top bit).
    pub const MAX_PROCESSES: u32 = Dest::ARRIVE;

    /// An engine for `1 <= n <= 2^31` processes ([`Engine::MAX_PROCESSES`]; callers refuse more
    /// with an error first) with LogP or LogGP parameters.
    pub fn new(n: u32, logp: impl Into<LogGP>) -> Self {
        assert!(n <= Self::MAX_PROCESSES, "at most 2^31 processes");
        let logp: LogGP = logp.into();
        let len = n as usize;
        Self {
            n,
            core: Core::new(4 * logp.hop() + 4, n, logp),
            nodes: Vec::with_capacity(len),
            slots: Vec::with_capacity(len),
            delivered_at: Vec::with_capacity(len),
            death: vec![Time::MAX; len],
            scratch: Vec::new(),
            sends_log: Vec::new(),
            fd: false,
            known_dead: false,
            receives: Receives::Queued,
            trace: None,
        }
    }

    /// Bytes an engine for `n` processes holds: each process's protocol state, driver slot,
    /// delivery time and death time, room for two events per process in the calendar's buckets (a
    /// broadcast has about one in flight per process, and a bucket's vector doubles as it
    /// grows), and the calendar's ring. A protocol's own heap comes on top.
    pub fn footprint(n: u32, logp: impl Into<LogGP>) -> u64 {
        let logp: LogGP = logp.into();
        let per = (size_of::<P>() + size_of::<Slot>() + 2 * size_of::<Time>() + 2 * size_of::<Ev<P::Msg>>()) as u64;
        u64::from(n)
            .saturating_mul(per)
            .saturating_add(Calendar::<Ev<P::Msg>>::footprint(4 * logp.hop() + 4, n))
    }

    /// Noisy mode: draws every message's `o_s`, `L` and `o_r` from `noise` (`None`: the fixed
    /// parameters). `g` and `G·(k−1)` stay fixed.
    pub fn set_noise(&mut self, noise: Option<Arc<Noise>>) {
        self.core.timing.set_noise(noise);
    }

    /// Shared cores: the processes run on `cores` cores (rank `r` on core `r mod cores`), each
    /// doing one send or receive at a time; `None` (or as many cores as processes): a core per
    /// process. Applies to [`Receives::Queued`].
    pub fn set_cores(&mut self, cores: Option<u32>) {
        self.core.timing.set_cores(self.n, cores);
    }

    /// Shared cores: a core's visit of a process with nothing to do costs `visit` (0: a core
    /// switches between its processes for free; see [`crate::sim::timing::Timing::turn`]).
    pub fn set_visit(&mut self, visit: Time) {
        self.core.timing.set_visit(visit);
    }

    /// Shared cores with a visit cost: a process's visit with work holds its core `work`
    /// more before the core moves on ([`crate::sim::timing::Timing::set_work`]).
    pub fn set_work(&mut self, work: Time) {
        self.core.timing.set_work(work);
    }

    /// Shared cores: a visit that received only from its own core holds its core `work_local`
    /// after its work, and a message from a process of the same core costs its receiver
    /// `or_local` (`None`: as any; [`crate::sim::timing::Timing::set_local`]).
    pub fn set_local(&mut self, work_local: Option<Time>, or_local: Option<Time>) {
        self.core.timing.set_local(work_local, or_local);
    }

    /// Shared cores with a visit cost: a process's visit costs `milli / 1000` units more per
    /// process beyond the first that sends to it, learned from the runs that follow until
    /// [`Self::freeze_sources`] ([`crate::sim::timing::Timing::set_poll_per_source`]).
    pub fn set_poll_per_source(&mut self, milli: u64) {
        self.core.timing.set_poll_per_source(self.n, milli);
    }

    /// Keeps the senders learned so far ([`crate::sim::timing::Timing::freeze_sources`]).
    pub fn freeze_sources(&mut self) {
        self.core.timing.freeze_sources();
    }

    /// The core of process `r` in shared-cores mode.
    #[inline]
    fn core(&self, r: Rank) -> Option<usize> {
        if self.receives == Receives::Queued {
            self.core.timing.core(r)
        } else {
            None
        }
    }

    /// The parameters this engine was built with.
    pub fn params(&self) -> LogGP {
        self.core.timing.params()
    }

    /// The protocol state of process `r` after the last run (for tests and diagnostics).
    pub fn node(&self, r: Rank) -> &P {
        &self.nodes[r as usize]
    }

    /// The death time drawn for `r` in the last run (`Time::MAX`: alive).
    pub fn death_time(&self, r: Rank) -> Time {
        self.slots[r as usize].death
    }

    /// When `r` delivered in the last run (`Time::MAX`: never).
    pub fn delivered_at(&self, r: Rank) -> Time {
        let i = r as usize;
        if self.slots[i].delivered {
            self.delivered_at[i]
        } else {
            Time::MAX
        }
    }

    fn cx<'a>(&self, shared: &'a P::Shared, rank: Rank, now: Time) -> Ctx<'a, P::Shared> {
        Ctx {
            rank,
            n: self.n,
            now,
            shared,
        }
    }

    fn log(&mut self, time: Time, node: Rank, event: &'static str, peer: Rank, label: &'static str) {
        if let Some(t) = self.trace.as_mut() {
            t.push(TraceRow {
                time,
                node,
                event,
                peer,
                label,
            });
        }
    }

    /// Re-arms `r`'s timer if the protocol changed it, and records a first delivery.
    fn rearm(&mut self, r: Rank, now: Time) {
        let i = r as usize;
        if !self.slots[i].delivered && self.nodes[i].delivered() {
            self.slots[i].delivered = true;
            self.delivered_at[i] = now;
        }
        let t = self.nodes[i].next_timer().unwrap_or(Time::MAX);
        if t != self.slots[i].timer_at {
            self.slots[i].timer_at = t;
            if t != Time::MAX {
                self.core.cal.push(t.max(now), Ev::Timer(r));
            }
        }
    }

    /// Is process `r` done with the operation at `t` (delivered, and its protocol will send
    /// nothing more)? A late copy reaching it then is stale.
    #[cold]
    fn stale(&self, shared: &P::Shared, r: Rank, t: Time) -> bool {
        self.slots[r as usize].delivered && self.nodes[r as usize].finished(&self.cx(shared, r, t))
    }

    /// After an event at `r`: an idle sender is asked at once what it sends (its state is
    /// hot in cache now; a deferred poll at the same instant would miss again), unless a timer
    /// of `r` is due at this instant or the protocol takes suspicions (which may arrive at the
    /// same instant), in which case the poll waits for them: a process acts on everything it
    /// learned at an instant before its send slot (receives are serial, so at most one
    /// receive completes per process and instant).
    fn settle(&mut self, shared: &P::Shared, r: Rank, now: Time, rng: &mut ProtoRng, st: &mut RunStats) {
        let i = r as usize;
        self.rearm(r, now);
        if !self.slots[i].poll_pending {
            if self.slots[i].timer_at == now || self.fd || self.receives == Receives::Parallel {
                self.slots[i].poll_pending = true;
                self.core.cal.push_late(now, r);
            } else {
                self.poll(shared, r, now, rng, st);
            }
        }
    }

    /// The sender of `r` is free at `t`: ask the protocol and carry out its action.
    fn poll(&mut self, shared: &P::Shared, r: Rank, t: Time, rng: &mut ProtoRng, st: &mut RunStats) {
        let i = r as usize;
        if self.slots[i].death <= t {
            return;
        }
        let core = self.core(r);
        if self.core.core_busy(r, core, t) {
            // Asked again when the core is free.
            self.slots[i].poll_pending = true;
            return;
        }
        let cx = self.cx(shared, r, t);
        match self.nodes[i].poll_send(&cx, rng) {
            Action::Send { to, msg } => {
                debug_assert!(to < self.n && to != r, "rank {r} sent to {to}");
                st.messages += 1;
                self.slots[i].sent += 1;
                if self.trace.is_some() {
                    self.log(t, r, "send", to, msg.label());
                }
                // A send to a process dead before the start that the sender's transport
                // refuses at once ([`Faults::known_dead`]): counted and traced as the runtime
                // counts it, but it takes no time and no send slot and reaches no one; with
                // shared cores it is work of the sender's visit.
                let refused = self.known_dead && self.slots[to as usize].death == 0;
                let sent = if refused {
                    self.core.timing.refused(core, r, t);
                    None
                } else {
                    Some(self.core.timing.send(core, r, to, t))
                };
                if core.is_some() && msg.phase() != Phase::Dissemination {
                    // A node reads before it sends the next correction message, whether its
                    // transport took the one before or refused it (shared cores only:
                    // nothing to hand on, and no phase to ask, otherwise).
                    self.core.timing.hand_on(core);
                }
                self.slots[i].poll_pending = true;
                let Some(sent) = sent else {
                    // Refused: the sender is asked for its next send at this instant.
                    self.core.cal.push_late(t, r);
                    self.rearm(r, t);
                    return;
                };
                st.quiescence = st.quiescence.max(sent.end);
                if self.core.timing.noisy() || core.is_some() {
                    // The receive takes the receiver's port (and core) when the message arrives.
                    let from = if self.core.timing.last_late() { r | LATE_COPY } else { r };
                    self.core.cal.push(
                        sent.arrive,
                        Ev::Msg {
                            to: Dest::arrive(to),
                            from,
                            msg,
                        },
                    );
                } else {
                    let ti = to as usize;
                    match self.receives {
                        Receives::Queued => {
                            let (end, free) = self.core.timing.receive_fixed(sent.arrive, self.slots[ti].recv_free);
                            if self.slots[ti].death > sent.arrive {
                                self.slots[ti].recv_free = free;
                            }
                            self.core.cal.push(
                                end,
                                Ev::Msg {
                                    to: Dest::recv(to),
                                    from: r,
                                    msg,
                                },
                            );
                        }
                        Receives::Parallel => self.core.cal.push(
                            sent.arrive + self.core.timing.or(),
                            Ev::Msg {
                                to: Dest::recv(to),
                                from: r,
                                msg,
                            },
                        ),
                    }
                }
                if self.fd {
                    self.sends_log.push((r, to));
                }
                self.core.cal.push_late(sent.next, r);
            }
            Action::Sleep(s) => {
                self.slots[i].poll_pending = true;
                self.core.cal.push_late(t + s.max(1), r);
            }
            Action::Wait => {}
        }
        self.rearm(r, t);
    }

    /// Runs one operation with faults drawn from `faults` using `seed`.
    pub fn run(&mut self, shared: &P::Shared, faults: &Faults, seed: u64, max_events: u64) -> RunStats {
        let n = self.n;
        let mut rng = ProtoRng::new(seed);
        // Noisy mode's own stream: the protocols draw the same numbers with or without noise.
        self.core.reset(seed);
        let mut st = RunStats::default();
        faults.draw(n, &mut rng, &mut self.death, &mut self.scratch);
        self.sends_log.clear();
        self.slots.clear();
        self.slots.extend(self.death.iter().map(|&d| Slot::new(d)));
        // Read only where a slot says `delivered`: allocated once, never cleared.
        self.delivered_at.resize(n as usize, Time::MAX);
        let fd = shared.uses_failure_detector();
        self.fd = fd;
        self.known_dead = faults.known_dead;
        // Each process is created and started in one step, while its state is in cache (an
        // event at time 0 touches its own process's state and the slots only, so the
        // processes above it need not exist yet).
        self.nodes.clear();
        for r in 0..n {
            let node = P::new(&self.cx(shared, r, 0));
            self.nodes.push(node);
            let d = self.slots[r as usize].death;
            if d == 0 {
                self.log(0, r, "dead", r, "");
                continue;
            }
            if d != Time::MAX && fd {
                self.core.cal.push(d, Ev::Die(r));
            }
            let cx = self.cx(shared, r, 0);
            self.nodes[r as usize].start(&cx);
            self.settle(shared, r, 0, &mut rng, &mut st);
        }

        let mut diss_end: Time = 0;
        let mut cap = EventCap::new(max_events);
        while let Some((t, item)) = cap.pop(&mut self.core) {
            let ev = match item {
                Item::Late(r) => {
                    self.slots[r as usize].poll_pending = false;
                    self.poll(shared, r, t, &mut rng, &mut st);
                    continue;
                }
                Item::Early(ev) => ev,
            };
            match ev {
                Ev::Msg { to, from, msg } if to.arrived() => {
                    // Noisy or shared-cores mode: the receive port is taken in arrival order.
                    let to = to.rank();
                    let i = to as usize;
                    let queued = self.receives == Receives::Queued;
                    let alive = self.slots[i].death > t;
                    let from = if from & LATE_COPY != 0 {
                        // A retransmitted copy that reaches a process done with the operation
                        // is no activity of it: a runtime node has retired the operation (or
                        // does when the last node is done) and drops the copy as stale.
                        if alive && self.stale(shared, to, t) {
                            continue;
                        }
                        from & !LATE_COPY
                    } else {
                        from
                    };
                    let port = if queued { self.slots[i].recv_free } else { 0 };
                    let core = self.core(to).filter(|_| alive);
                    let ev = Ev::Msg {
                        to: Dest::arrive(to),
                        from,
                        msg,
                    };
                    let Some(Ev::Msg { from, msg, .. }) = self.core.at_turn(core, to, t, port, ev) else {
                        continue;
                    };
                    let (end, free) = self.core.timing.receive(core, from, to, t, port);
                    if queued && alive {
                        self.slots[i].recv_free = free;
                    }
                    self.core.cal.push(
                        end,
                        Ev::Msg {
                            to: Dest::recv(to),
                            from,
                            msg,
                        },
                    );
                }
                Ev::Msg { to, from, msg } => {
                    let to = to.rank();
                    let i = to as usize;
                    if self.slots[i].death <= t {
                        self.log(t, to, "lost", from, msg.label());
                        if fd {
                            self.core
                                .cal
                                .push(t + faults.detect_delay, Ev::Suspect { node: from, peer: to });
                        }
                        continue;
                    }
                    st.quiescence = st.quiescence.max(t);
                    if msg.phase() == Phase::Dissemination {
                        diss_end = diss_end.max(t);
                    }
                    if self.trace.is_some() {
                        self.log(t, to, "recv", from, msg.label());
                    }
                    let cx = self.cx(shared, to, t);
                    self.nodes[i].on_message(&cx, from, &msg);
                    self.settle(shared, to, t, &mut rng, &mut st);
                }
                Ev::Timer(r) => {
                    let i = r as usize;
                    if self.slots[i].death <= t || self.slots[i].timer_at != t {
                        continue;
                    }
                    self.slots[i].timer_at = Time::MAX;
                    self.log(t, r, "timer", r, "");
                    let cx = self.cx(shared, r, t);
                    self.nodes[i].on_timer(&cx);
                    self.settle(shared, r, t, &mut rng, &mut st);
                }
                Ev::Suspect { node, peer } => {
                    let i = node as usize;
                    if self.slots[i].death <= t {
                        continue;
                    }
                    self.log(t, node, "suspect", peer, "");
                    let cx = self.cx(shared, node, t);
                    self.nodes[i].on_suspect(&cx, peer);
                    self.settle(shared, node, t, &mut rng, &mut st);
                }
                Ev::Die(r) => {
                    self.log(t, r, "die", r, "");
                    for k in 0..self.sends_log.len() {
                        let (a, b) = self.sends_log[k];
                        if b == r {
                            self.core
                                .cal
                                .push(t + faults.detect_delay, Ev::Suspect { node: a, peer: r });
                        }
                    }
                }
            }
        }

        // Per-run statistics.
        st.events = cap.events;
        st.aborted = cap.aborted;
        // One sweep over the slots for the per-process figures.
        let mut coloring = 0;
        let mut max_sent = 0;
        for (slot, &at) in self.slots.iter().zip(&self.delivered_at) {
            max_sent = max_sent.max(slot.sent);
            if slot.death != Time::MAX {
                continue;
            }
            if slot.delivered {
                coloring = coloring.max(at);
            } else {
                st.uncolored_live += 1;
            }
        }
        st.coloring = coloring;
        st.max_messages_per_process = max_sent;
        let nodes = &self.nodes;
        st.gmax = ring::longest_circular_run(|r| !nodes[r as usize].colored_by_dissemination(), n);
        st.dissemination_end = diss_end.max(shared.sync_correction_start().unwrap_or(0));
        st.correction = st.quiescence.saturating_sub(st.dissemination_end);
        st
    }
}

#[cfg(test)]
pub(crate) mod reference;
