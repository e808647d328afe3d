//! The broadcast engine as it was before its per-process state was split into arrays (one
//! record per process, protocol and driver state side by side), kept verbatim in the test
//! build as the reference that the differential tests (`engine_tests.rs`) compare the engine
//! against, run for run and process for process.

use std::sync::Arc;

use crate::model::{LogGP, Time};
use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};
use crate::sim::calendar::Item;
use crate::sim::core::{Core, EventCap};
use crate::sim::engine::{Receives, RunStats, TraceRow};
use crate::sim::faults::Faults;
use crate::sim::noise::Noise;
use crate::topology::ring;

#[derive(Clone, Copy, Debug)]
enum Ev<M> {
    Recv {
        to: Rank,
        from: Rank,
        msg: M,
    },
    /// Noisy mode: the message reached `to`'s receive port (its receive is scheduled now).
    Arrive {
        to: Rank,
        from: Rank,
        msg: M,
    },
    Timer(Rank),
    Suspect {
        node: Rank,
        peer: Rank,
    },
    Die(Rank),
}

/// The driver's per-process state.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// When the receive port is free again.
    recv_free: Time,
    /// Death time (`Time::MAX`: alive; 0: dead before the start).
    death: Time,
    /// First delivery (`Time::MAX`: never).
    delivered_at: Time,
    /// The armed timer (`Time::MAX`: none).
    timer_at: Time,
    /// Messages sent.
    sent: u32,
    /// A poll is queued or the sender is busy.
    poll_pending: bool,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            recv_free: 0,
            death: Time::MAX,
            delivered_at: Time::MAX,
            timer_at: Time::MAX,
            sent: 0,
            poll_pending: false,
        }
    }
}

/// One process: the protocol's state and the driver's.
struct Proc<P> {
    slot: Slot,
    node: P,
}

/// A reusable simulator for protocol `P` over `n` processes.
pub struct Engine<P: Protocol> {
    n: u32,
    /// The event core shared with the machine engine: calendar, message costs (LogGP
    /// parameters, noise, shared cores) and the event cap.
    core: Core<Ev<P::Msg>>,
    /// Per-process protocol and driver state side by side: an event touches one record.
    procs: Vec<Proc<P>>,
    /// Death times as drawn by the fault plan (copied into the slots).
    death: Vec<Time>,
    scratch: Vec<Rank>,
    sends_log: Vec<(Rank, Rank)>,
    fd: bool,
    /// How receives occupy a process (see [`Receives`]).
    pub receives: Receives,
    /// When `Some`, every event of the next runs is appended here.
    pub trace: Option<Vec<TraceRow>>,
}

impl<P: Protocol> Engine<P>
where
    P::Shared: SharedInfo,
{
    /// An engine for `n >= 1` processes with LogP or LogGP parameters.
    pub fn new(n: u32, logp: impl Into<LogGP>) -> Self {
        let logp: LogGP = logp.into();
        let len = n as usize;
        Self {
            n,
            core: Core::new(4 * logp.hop() + 4, n, logp),
            procs: Vec::with_capacity(len),
            death: vec![Time::MAX; len],
            scratch: Vec::new(),
            sends_log: Vec::new(),
            fd: false,
            receives: Receives::Queued,
            trace: None,
        }
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

    /// As [`crate::sim::Engine::set_local`].
    pub fn set_local(&mut self, work_local: Option<Time>, or_local: Option<Time>) {
        self.core.timing.set_local(work_local, or_local);
    }

    /// Shared cores with a visit cost: a process's visit costs `milli / 1000` units more per
    /// process beyond the first that sends to it, learned from the runs that follow
    /// ([`crate::sim::timing::Timing::set_poll_per_source`]).
    pub fn set_poll_per_source(&mut self, milli: u64) {
        self.core.timing.set_poll_per_source(self.n, milli);
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

    /// The protocol state of process `r` after the last run (for tests and diagnostics).
    pub fn node(&self, r: Rank) -> &P {
        &self.procs[r as usize].node
    }

    /// The death time drawn for `r` in the last run (`Time::MAX`: alive).
    pub fn death_time(&self, r: Rank) -> Time {
        self.procs[r as usize].slot.death
    }

    /// When `r` delivered in the last run (`Time::MAX`: never).
    pub fn delivered_at(&self, r: Rank) -> Time {
        self.procs[r as usize].slot.delivered_at
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
        if self.procs[i].slot.delivered_at == Time::MAX && self.procs[i].node.delivered() {
            self.procs[i].slot.delivered_at = now;
        }
        let t = self.procs[i].node.next_timer().unwrap_or(Time::MAX);
        if t != self.procs[i].slot.timer_at {
            self.procs[i].slot.timer_at = t;
            if t != Time::MAX {
                self.core.cal.push(t.max(now), Ev::Timer(r));
            }
        }
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
        if !self.procs[i].slot.poll_pending {
            if self.procs[i].slot.timer_at == now || self.fd || self.receives == Receives::Parallel {
                self.procs[i].slot.poll_pending = true;
                self.core.cal.push_late(now, r);
            } else {
                self.poll(shared, r, now, rng, st);
            }
        }
    }

    /// The sender of `r` is free at `t`: ask the protocol and carry out its action.
    fn poll(&mut self, shared: &P::Shared, r: Rank, t: Time, rng: &mut ProtoRng, st: &mut RunStats) {
        let i = r as usize;
        if self.procs[i].slot.death <= t {
            return;
        }
        let core = self.core(r);
        if self.core.core_busy(r, core, t) {
            // Asked again when the core is free.
            self.procs[i].slot.poll_pending = true;
            return;
        }
        let cx = self.cx(shared, r, t);
        match self.procs[i].node.poll_send(&cx, rng) {
            Action::Send { to, msg } => {
                debug_assert!(to < self.n && to != r, "rank {r} sent to {to}");
                st.messages += 1;
                self.procs[i].slot.sent += 1;
                if self.trace.is_some() {
                    self.log(t, r, "send", to, msg.label());
                }
                let sent = self.core.timing.send(core, r, to, t);
                if core.is_some() && msg.phase() != Phase::Dissemination {
                    // A node reads before it sends the next correction message (shared
                    // cores only: nothing to hand on, and no phase to ask, otherwise).
                    self.core.timing.hand_on(core);
                }
                st.quiescence = st.quiescence.max(sent.end);
                if self.core.timing.noisy() || core.is_some() {
                    // The receive takes the receiver's port (and core) when the message arrives.
                    self.core.cal.push(sent.arrive, Ev::Arrive { to, from: r, msg });
                } else {
                    let ti = to as usize;
                    match self.receives {
                        Receives::Queued => {
                            let (end, free) = self
                                .core
                                .timing
                                .receive_fixed(sent.arrive, self.procs[ti].slot.recv_free);
                            if self.procs[ti].slot.death > sent.arrive {
                                self.procs[ti].slot.recv_free = free;
                            }
                            self.core.cal.push(end, Ev::Recv { to, from: r, msg });
                        }
                        Receives::Parallel => self
                            .core
                            .cal
                            .push(sent.arrive + self.core.timing.or(), Ev::Recv { to, from: r, msg }),
                    }
                }
                if self.fd {
                    self.sends_log.push((r, to));
                }
                self.procs[i].slot.poll_pending = true;
                self.core.cal.push_late(sent.next, r);
            }
            Action::Sleep(s) => {
                self.procs[i].slot.poll_pending = true;
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
        self.procs.clear();
        for r in 0..n {
            let node = P::new(&self.cx(shared, r, 0));
            let slot = Slot {
                death: self.death[r as usize],
                ..Slot::default()
            };
            self.procs.push(Proc { slot, node });
        }
        let fd = shared.uses_failure_detector();
        self.fd = fd;
        for r in 0..n {
            let d = self.procs[r as usize].slot.death;
            if d == 0 {
                self.log(0, r, "dead", r, "");
                continue;
            }
            if d != Time::MAX && fd {
                self.core.cal.push(d, Ev::Die(r));
            }
            let cx = self.cx(shared, r, 0);
            self.procs[r as usize].node.start(&cx);
            self.settle(shared, r, 0, &mut rng, &mut st);
        }

        let mut diss_end: Time = 0;
        let mut cap = EventCap::new(max_events);
        while let Some((t, item)) = cap.pop(&mut self.core) {
            let ev = match item {
                Item::Late(r) => {
                    self.procs[r as usize].slot.poll_pending = false;
                    self.poll(shared, r, t, &mut rng, &mut st);
                    continue;
                }
                Item::Early(ev) => ev,
            };
            match ev {
                Ev::Arrive { to, from, msg } => {
                    // Noisy or shared-cores mode: the receive port is taken in arrival order.
                    let i = to as usize;
                    let queued = self.receives == Receives::Queued;
                    let alive = self.procs[i].slot.death > t;
                    let port = if queued { self.procs[i].slot.recv_free } else { 0 };
                    let core = self.core(to).filter(|_| alive);
                    let Some(Ev::Arrive { to, from, msg }) =
                        self.core.at_turn(core, to, t, port, Ev::Arrive { to, from, msg })
                    else {
                        continue;
                    };
                    let (end, free) = self.core.timing.receive(core, from, to, t, port);
                    if queued && alive {
                        self.procs[i].slot.recv_free = free;
                    }
                    self.core.cal.push(end, Ev::Recv { to, from, msg });
                }
                Ev::Recv { to, from, msg } => {
                    let i = to as usize;
                    if self.procs[i].slot.death <= t {
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
                    self.procs[i].node.on_message(&cx, from, &msg);
                    self.settle(shared, to, t, &mut rng, &mut st);
                }
                Ev::Timer(r) => {
                    let i = r as usize;
                    if self.procs[i].slot.death <= t || self.procs[i].slot.timer_at != t {
                        continue;
                    }
                    self.procs[i].slot.timer_at = Time::MAX;
                    self.log(t, r, "timer", r, "");
                    let cx = self.cx(shared, r, t);
                    self.procs[i].node.on_timer(&cx);
                    self.settle(shared, r, t, &mut rng, &mut st);
                }
                Ev::Suspect { node, peer } => {
                    let i = node as usize;
                    if self.procs[i].slot.death <= t {
                        continue;
                    }
                    self.log(t, node, "suspect", peer, "");
                    let cx = self.cx(shared, node, t);
                    self.procs[i].node.on_suspect(&cx, peer);
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
        // One sweep over the records for the per-process figures.
        let mut coloring = 0;
        let mut max_sent = 0;
        for p in &self.procs {
            max_sent = max_sent.max(p.slot.sent);
            if p.slot.death != Time::MAX {
                continue;
            }
            if p.slot.delivered_at == Time::MAX {
                st.uncolored_live += 1;
            } else {
                coloring = coloring.max(p.slot.delivered_at);
            }
        }
        st.coloring = coloring;
        st.max_messages_per_process = max_sent;
        let procs = &self.procs;
        st.gmax = ring::longest_circular_run(|r| !procs[r as usize].node.colored_by_dissemination(), n);
        st.dissemination_end = diss_end.max(shared.sync_correction_start().unwrap_or(0));
        st.correction = st.quiescence.saturating_sub(st.dissemination_end);
        st
    }
}
