//! The LogP engine driving any sans-IO [`Machine`] (the contract of
//! [`crate::protocol::machine`]; ERA's [`crate::protocol::agree::Era`] is one), on the same
//! event core as the broadcast engine ([`Core`]: calendar, [`crate::sim::timing`]'s LogGP
//! costs with noise and shared cores, the event cap). Per process it keeps when the sender
//! and the receive port are free and when the process died:
//!
//! - a free sender is asked ([`Machine::poll_transmit`]) after every event at its process and
//!   again when its previous send's slot (`max(o_s + G·(k−1), g)`) has passed; a send on a
//!   busy shared core waits for it;
//! - a message reaches its receiver `L` after its send ends, then takes the receive port (and
//!   core) in arrival order for `o_r`, and is handed to the machine when its receive ends; a
//!   message to a dead process vanishes (its sender paid for the send);
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
        };
        Self {
            core,
            cap: EventCap::new(max_events),
            ports: vec![port; nodes.len()],
            nodes,
            slab: Vec::new(),
            free: Vec::new(),
            last: 0,
        }
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

    /// Offers `r`'s sender a send if it is alive and free.
    fn pump<H: Harness<M, Tag = T>>(&mut self, h: &mut H, r: Rank, now: Time) {
        let port = self.ports[r as usize];
        if port.death != Time::MAX || port.send_free > now {
            return;
        }
        let core = self.core.timing.core(r);
        if self.core.core_busy(r, core, now) {
            return;
        }
        let Some((to, msg)) = self.nodes[r as usize].poll_transmit(now) else {
            return;
        };
        let tag = h.on_send(r, to, &msg, now);
        let sent = self.core.timing.send(core, r, now);
        self.ports[r as usize].send_free = sent.next;
        // The sender may send again then: whatever is queued by then goes out.
        self.core.cal.push_late(sent.next, r);
        let i = self.alloc(Flight { from: r, to, tag, msg });
        self.core.cal.push(sent.arrive, Ev::Arrive(i));
    }

    fn settle<H: Harness<M, Tag = T>>(&mut self, h: &mut H, r: Rank, now: Time) {
        h.settle(self, r, now);
        let t = self.nodes[r as usize].poll_timeout().unwrap_or(Time::MAX);
        let port = &mut self.ports[r as usize];
        if t != port.timer_at {
            port.timer_at = t;
            if t != Time::MAX {
                self.core.cal.push(t.max(now), Ev::Timer(r));
            }
        }
        self.pump(h, r, now);
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
                Item::Late(r) => self.pump(h, r, now),
                Item::Early(Ev::Die(r)) => h.on_die(self, r, now),
                Item::Early(Ev::Arrive(i)) => {
                    let to = self.slab[i as usize].as_ref().map_or(0, |f| f.to);
                    if !self.alive(to) {
                        self.slab[i as usize] = None;
                        self.free.push(i);
                        continue;
                    }
                    let core = self.core.timing.core(to);
                    let port = &mut self.ports[to as usize];
                    let (end, free) = self.core.timing.receive(core, to, now, port.recv_free);
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
