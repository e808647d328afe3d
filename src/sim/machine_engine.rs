//! The LogP engine driving any sans-IO [`Machine`] (the contract of
//! [`crate::protocol::machine`]; ERA's [`crate::protocol::agree::Era`] is one), on the same
//! event core as the broadcast engine ([`Core`]: calendar, [`crate::sim::timing`]'s LogGP
//! costs with noise and shared cores, the event cap). Per process it keeps when the sender
//! and the receive port are free and when the process died:
//!
//! - a free sender is asked ([`Machine::poll_transmit`]) after every event at its process and
//!   again when its previous send's slot (`max(o_s + G·(k−1), g)`) has passed or its counted
//!   wait ([`Machine::poll_wake`]) ends, those after the instant's receives and timers; in
//!   the broadcast engine's order ([`MachineEngine::instant_order`]) events do not ask a
//!   sender while such a poll is queued or a timer of the instant is still due, so it acts on
//!   everything it learned at an instant before it sends, and the machine engine then agrees
//!   with the broadcast engine ([`crate::sim::Engine`]) run for run on every deterministic
//!   broadcast (`sim/bcast_machine.rs`); a send on a busy shared core waits for it;
//! - a message reaches its receiver `L` after its send ends, then takes the receive port (and
//!   core) in arrival order for `o_r`, and is handed to the machine when its receive ends; a
//!   message to a dead process vanishes (its sender paid for the send). With fixed costs (no
//!   noise, a core per process) the end of the receive may be scheduled at the send instead
//!   ([`MachineEngine::receive_at_send`]): one event per message instead of two;
//! - a machine's timer ([`Machine::poll_timeout`]) is an event at its time;
//! - suspicions ([`Event::Suspect`]) and deaths are events the experiment schedules.
//!
//! What is measured and checked, and what a process is asked to do (inputs, kills at points
//! of the protocol, failure detection), belongs to the experiment around the engine, a
//! [`Harness`]: the engine calls it when a message is sent and received and after every
//! event at a process ([`Harness::settle`]), monomorphized (no dynamic dispatch).

use crate::model::{LogGP, Time};
use crate::protocol::{Event, Machine, Rank};
use crate::sim::calendar::{Calendar, Item};
use crate::sim::core::{Core, EventCap};

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A message (its slab index) reaches its receiver, whose receive then takes `o_r`.
    Arrive(u32),
    /// The receive of a message ends: the machine handles it.
    Handle(u32),
    Suspect {
        node: Rank,
        peer: Rank,
    },
    Die(Rank),
    /// The time of [`Machine::poll_timeout`] has come.
    Timer(Rank),
}

/// A message in flight and what the experiment tagged it with.
struct Flight<M, T> {
    from: Rank,
    to: Rank,
    tag: T,
    msg: M,
}

/// One process's ports.
#[derive(Clone, Copy, Debug)]
struct Port {
    /// When the sender may start its next send.
    send_free: Time,
    /// When the receive port is free again.
    recv_free: Time,
    /// When the process died (`Time::MAX`: alive).
    death: Time,
    /// The armed timer (`Time::MAX`: none).
    timer_at: Time,
    /// A poll of the sender is queued (its send slot ends, a counted wait ends, or a timer
    /// of the instant comes first): events before it do not ask the sender.
    poll_pending: bool,
}

/// The experiment around a [`MachineEngine`] run (see the module doc).
pub trait Harness<M: Machine> {
    /// What the experiment carries beside each message (ERA: its causal depth).
    type Tag: Copy;
    /// Process `r` sends `msg` to `to` at `now`: the message's tag.
    fn on_send(&mut self, r: Rank, to: Rank, msg: &M::Msg, now: Time) -> Self::Tag;
    /// The receive of `msg` from `from` ended at live process `to`, before the machine sees
    /// it. `false` drops it (the experiment killed `to` on it).
    fn on_receive(
        &mut self,
        eng: &mut MachineEngine<M, Self::Tag>,
        to: Rank,
        from: Rank,
        msg: &M::Msg,
        tag: Self::Tag,
        now: Time,
    ) -> bool;
    /// After every event at live process `r` (and at the start): collect its outputs, hand
    /// it inputs, schedule suspicions. The engine then offers `r`'s sender a send.
    fn settle(&mut self, eng: &mut MachineEngine<M, Self::Tag>, r: Rank, now: Time);
    /// Live process `r`'s sender was asked ([`Machine::poll_transmit`]) at `now`, whether it
    /// sent or not: outputs can appear then too (a broadcast process that delivers when it
    /// starts its correction).
    fn polled(&mut self, _eng: &mut MachineEngine<M, Self::Tag>, _r: Rank, _now: Time) {}
    /// A death scheduled with [`MachineEngine::die_at`] is due.
    fn on_die(&mut self, eng: &mut MachineEngine<M, Self::Tag>, r: Rank, now: Time);
}

/// One run of `n` machines over the LogP event core (see the module doc).
pub struct MachineEngine<M: Machine, T> {
    core: Core<Ev>,
    cap: EventCap,
    nodes: Vec<M>,
    ports: Vec<Port>,
    slab: Vec<Option<Flight<M::Msg, T>>>,
    free: Vec<u32>,
    /// The time of the last event that did more than drop a message at a dead process.
    last: Time,
    /// With fixed costs, schedule a message's end of receive at its send (one event per
    /// message; [`MachineEngine::receive_at_send`]).
    receive_at_send: bool,
    /// Senders act on everything they learned at an instant before they send
    /// ([`MachineEngine::instant_order`]).
    instant_order: bool,
}

impl<M: Machine, T: Copy> MachineEngine<M, T> {
    /// A run of `nodes` (process `r` is `nodes[r]`) with message costs `logp`, a calendar
    /// covering `window` time units ahead, noise drawn from `seed`'s own stream and at most
    /// `max_events` events. Set noise and cores through [`MachineEngine::timing`].
    pub fn new(nodes: Vec<M>, logp: LogGP, window: Time, seed: u64, max_events: u64) -> Self {
        let n = nodes.len() as u32;
        let mut core = Core::new(window, n, logp);
        core.reset(seed);
        let port = Port {
            send_free: 0,
            recv_free: 0,
            death: Time::MAX,
            timer_at: Time::MAX,
            poll_pending: false,
        };
        Self {
            core,
            cap: EventCap::new(max_events),
            ports: vec![port; nodes.len()],
            nodes,
            slab: Vec::new(),
            free: Vec::new(),
            last: 0,
            receive_at_send: false,
            instant_order: false,
        }
    }

    /// A sender is asked after the receives and timers of an instant: while a poll of it is
    /// queued (its send slot ends at this instant, or a timer of the instant is still due),
    /// events do not ask it, so it acts on everything it learned at an instant before it
    /// sends, as in the broadcast engine ([`crate::sim::Engine`]). Off (ERA's experiment,
    /// whose figures and differential tests are pinned to it): a free sender is asked right
    /// after each event.
    pub fn instant_order(&mut self, on: bool) {
        self.instant_order = on;
    }

    /// With fixed costs (no noise, a core per process) messages arrive in the order they are
    /// sent, so the end of a receive can be scheduled at the send: one event per message
    /// instead of two, the same run (the broadcast path, `sim/bcast_machine.rs`, does this;
    /// ERA's experiment keeps two events, whose counts its differential tests pin).
    pub fn receive_at_send(&mut self, on: bool) {
        self.receive_at_send = on;
    }

    /// Bytes the engine allocates up front for `n` processes and a calendar `window` (the
    /// machines themselves and the messages in flight come on top).
    pub fn footprint(n: u32, window: Time) -> u64 {
        u64::from(n)
            .saturating_mul(size_of::<Port>() as u64)
            .saturating_add(Calendar::<Ev>::footprint(window, n))
    }

    /// The message cost model (to set noise and shared cores before the run).
    pub fn timing(&mut self) -> &mut crate::sim::timing::Timing {
        &mut self.core.timing
    }

    /// Processes.
    pub fn n(&self) -> Rank {
        self.nodes.len() as Rank
    }

    /// Process `r`'s machine.
    pub fn node(&self, r: Rank) -> &M {
        &self.nodes[r as usize]
    }

    /// Process `r`'s machine, to hand it inputs.
    pub fn node_mut(&mut self, r: Rank) -> &mut M {
        &mut self.nodes[r as usize]
    }

    /// Whether `r` is alive.
    #[inline]
    pub fn alive(&self, r: Rank) -> bool {
        self.ports[r as usize].death == Time::MAX
    }

    /// Whether any process died.
    pub fn any_dead(&self) -> bool {
        self.ports.iter().any(|p| p.death != Time::MAX)
    }

    /// When `r` died (`Time::MAX`: alive).
    pub fn death(&self, r: Rank) -> Time {
        self.ports[r as usize].death
    }

    /// `r` dies at `now` (a dead process is passive: it neither sends nor receives).
    /// `false` if it was dead already.
    pub fn kill(&mut self, r: Rank, now: Time) -> bool {
        let p = &mut self.ports[r as usize];
        if p.death != Time::MAX {
            return false;
        }
        p.death = now;
        true
    }

    /// `r` dies at `t` ([`Harness::on_die`]).
    pub fn die_at(&mut self, t: Time, r: Rank) {
        self.core.cal.push(t, Ev::Die(r));
    }

    /// `node`'s failure detector reports `peer` at `t` (handed over if `node` is alive then).
    pub fn suspect_at(&mut self, t: Time, node: Rank, peer: Rank) {
        self.core.cal.push(t, Ev::Suspect { node, peer });
    }

    /// Events handled.
    pub fn events(&self) -> u64 {
        self.cap.events
    }

    /// The run stopped at the event cap.
    pub fn aborted(&self) -> bool {
        self.cap.aborted
    }

    /// The time of the last event that did more than drop a message at a dead process.
    pub fn end_time(&self) -> Time {
        self.last
    }

    fn alloc(&mut self, f: Flight<M::Msg, T>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(f);
                i
            }
            None => {
                self.slab.push(Some(f));
                self.slab.len() as u32 - 1
            }
        }
    }

    /// Offers `r`'s sender a send if it is alive and free and no poll of it is queued, then
    /// re-arms its timer.
    fn pump<H: Harness<M, Tag = T>>(&mut self, h: &mut H, r: Rank, now: Time) {
        let port = self.ports[r as usize];
        if port.death != Time::MAX {
            return;
        }
        if !(self.instant_order && port.poll_pending) && port.send_free <= now {
            let core = self.core.timing.core(r);
            if !self.core.core_busy(r, core, now) {
                let polled = self.nodes[r as usize].poll_transmit(now);
                h.polled(self, r, now);
                if let Some((to, msg)) = polled {
                    let tag = h.on_send(r, to, &msg, now);
                    let sent = self.core.timing.send(core, r, to, now);
                    self.ports[r as usize].send_free = sent.next;
                    // The sender may send again then: whatever is queued by then goes out.
                    self.queue_poll(r, sent.next);
                    let i = self.alloc(Flight { from: r, to, tag, msg });
                    let timing = &self.core.timing;
                    if !self.receive_at_send || timing.noisy() || timing.shared_cores() {
                        // The receive takes the receiver's port (and core) when it arrives.
                        self.core.cal.push(sent.arrive, Ev::Arrive(i));
                    } else {
                        // Fixed costs: messages arrive in the order they are sent, so the
                        // receive's end is known now (one event per message, as in the
                        // broadcast engine; a receiver dead by then drops it at its end).
                        let port = &mut self.ports[to as usize];
                        let (end, free) = timing.receive_fixed(sent.arrive, port.recv_free);
                        port.recv_free = free;
                        self.core.cal.push(end, Ev::Handle(i));
                    }
                } else if let Some(w) = self.nodes[r as usize].poll_wake() {
                    // A counted wait: asked again then, after that instant's events.
                    self.queue_poll(r, w.max(now));
                }
            }
        }
        self.rearm(r, now);
    }

    /// Asks `r`'s sender at `t`, after the events of that instant.
    fn queue_poll(&mut self, r: Rank, t: Time) {
        self.ports[r as usize].poll_pending = true;
        self.core.cal.push_late(t, r);
    }

    /// After an event at `r`: the experiment's turn, then the sender is asked, unless a timer
    /// of `r` is due at this instant: then after it (a process acts on everything it learned
    /// at an instant before its send slot, as in the broadcast engine).
    fn settle<H: Harness<M, Tag = T>>(&mut self, h: &mut H, r: Rank, now: Time) {
        h.settle(self, r, now);
        if self.instant_order {
            // The event may have set a timer due now: it goes first.
            self.rearm(r, now);
            let port = self.ports[r as usize];
            if port.timer_at == now && !port.poll_pending {
                self.queue_poll(r, now);
                return;
            }
        }
        // Asks the sender, then re-arms the timer.
        self.pump(h, r, now);
    }

    /// Arms `r`'s timer at [`Machine::poll_timeout`] if that changed. After the sender was
    /// asked: a send (or a counted wait, [`crate::protocol::machine::Bcast`]'s sleep) may set
    /// a timer.
    fn rearm(&mut self, r: Rank, now: Time) {
        let t = self.nodes[r as usize].poll_timeout().unwrap_or(Time::MAX);
        let port = &mut self.ports[r as usize];
        if t != port.timer_at {
            port.timer_at = t;
            if t != Time::MAX {
                self.core.cal.push(t.max(now), Ev::Timer(r));
            }
        }
    }

    /// Runs until no event is left or the event cap is reached: first every live process is
    /// settled at time 0 (the experiment's kills before the start are in place by then).
    pub fn run<H: Harness<M, Tag = T>>(&mut self, h: &mut H) {
        for r in 0..self.n() {
            if self.alive(r) {
                self.settle(h, r, 0);
            }
        }
        let mut cap = self.cap;
        while let Some((now, item)) = cap.pop(&mut self.core) {
            match item {
                Item::Late(r) => {
                    self.ports[r as usize].poll_pending = false;
                    self.pump(h, r, now);
                }
                Item::Early(Ev::Die(r)) => h.on_die(self, r, now),
                Item::Early(Ev::Arrive(i)) => {
                    let (from, to) = self.slab[i as usize].as_ref().map_or((0, 0), |f| (f.from, f.to));
                    if !self.alive(to) {
                        self.slab[i as usize] = None;
                        self.free.push(i);
                        continue;
                    }
                    let core = self.core.timing.core(to);
                    // With a visit cost the receive starts when the core's round reaches
                    // `to`: the arrival is put back until then, the core serving the others
                    // meanwhile (as the broadcast engine does).
                    let recv_free = self.ports[to as usize].recv_free;
                    if self.core.at_turn(core, to, now, recv_free, Ev::Arrive(i)).is_none() {
                        continue;
                    }
                    let port = &mut self.ports[to as usize];
                    let (end, free) = self.core.timing.receive(core, from, to, now, port.recv_free);
                    port.recv_free = free;
                    self.core.cal.push(end, Ev::Handle(i));
                }
                Item::Early(Ev::Handle(i)) => {
                    let Some(f) = self.slab[i as usize].take() else {
                        continue;
                    };
                    self.free.push(i);
                    let to = f.to;
                    if !self.alive(to) || !h.on_receive(self, to, f.from, &f.msg, f.tag, now) {
                        continue;
                    }
                    let ev = Event::Message {
                        from: f.from,
                        msg: f.msg,
                    };
                    // A message the machine refuses is its own business (counted there).
                    _ = self.nodes[to as usize].handle(now, ev);
                    self.settle(h, to, now);
                }
                Item::Early(Ev::Timer(r)) => {
                    let port = &mut self.ports[r as usize];
                    if port.death == Time::MAX && port.timer_at == now {
                        port.timer_at = Time::MAX;
                        _ = self.nodes[r as usize].handle(now, Event::Timer);
                        self.settle(h, r, now);
                    }
                }
                Item::Early(Ev::Suspect { node, peer }) => {
                    if self.alive(node) {
                        _ = self.nodes[node as usize].handle(now, Event::Suspect(peer));
                        self.settle(h, node, now);
                    }
                }
            }
            self.last = now;
        }
        self.cap = cap;
    }
}
