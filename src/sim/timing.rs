//! The LogGP cost of one message, part of the simulator's event core
//! ([`Core`](crate::sim::core::Core)) that the broadcast [`Engine`](crate::sim::Engine) and
//! the [`MachineEngine`](crate::sim::machine_engine::MachineEngine) (ERA) run on, so that
//! every simulated protocol family pays for a message the same way (Corrected Trees §2.2's
//! LogP, in its LogGP form):
//!
//! - a send occupies its process for `o_s + G·(k−1)`; the next send starts `max(o_s +
//!   G·(k−1), g)` after it ([`Timing::send`]);
//! - the message reaches its receiver `L` after the send ends;
//! - its receive occupies the receiver for `o_r`, in arrival order, receives starting at
//!   least `max(o_r, g)` apart ([`Timing::receive`]).
//!
//! Noisy mode ([`Timing::set_noise`]) draws each message's `o_s`, `L` and `o_r` from measured
//! distributions with a generator of its own. Shared cores ([`Timing::set_cores`]): rank `r`
//! runs on core `r mod C`, and a core does one send or receive at a time. With a visit cost
//! ([`Timing::set_visit`]) a core also serves its processes in turn, as the runtime's worker
//! steps its nodes: it visits them round-robin in rank order, a visit of a process with
//! nothing to do costs `v`, and a process sends or receives only when the core is at it (a
//! process that just worked keeps the core for what follows at once; once it is done, the
//! core stays `work` more before it moves on, [`Timing::set_work`], or `work_local` after a
//! visit that had no message from another core, [`Timing::set_local`]; a message that waits
//! for its process is taken when the round reaches it, [`Timing::receive_turn`]). A message
//! between two processes of one core does not pay `L`: it is there when its send ends (`L` is
//! the time between cores: in process, a cache line's move to the receiver's core; over
//! loopback UDP, the kernel queues the datagram at the receiving socket within the sender's
//! own call, so a node of the same worker finds it at its next visit), and its receive may
//! cost other than `o_r` ([`Timing::set_local`]). The engines keep
//! their own per-process state (when each receive port is free) next to the protocol's, for
//! locality; this type owns the parameters, the noise and the cores.

use std::sync::Arc;

use crate::model::{LogGP, Time};
use crate::protocol::{ProtoRng, Rank};
use crate::sim::noise::Noise;

/// One message's cost model (see the module doc).
#[derive(Clone, Debug)]
pub struct Timing {
    logp: LogGP,
    /// `logp`'s send occupancy, send slot, send-to-arrival time, `o_r` and receive slot.
    t_send: Time,
    t_slot: Time,
    t_flight: Time,
    t_or: Time,
    t_rslot: Time,
    noise: Option<Arc<Noise>>,
    nrng: ProtoRng,
    /// Noisy mode: copies of the last message sent were lost ([`crate::sim::noise::Loss`]);
    /// the one that arrives is a retransmission ([`Timing::last_late`]).
    late: bool,
    /// Shared cores: how many (0: a core per process), and when each is free again.
    cores: u32,
    core_free: Vec<Time>,
    /// A core's visit of a process with nothing to do (0: a core switches for free).
    visit: Time,
    /// With a visit cost: what a process's visit with work holds its core after its last
    /// send or receive, before the core moves on ([`Timing::set_work`]).
    work: Time,
    /// The same after a visit that received only from its own core, and the receive of a
    /// message from a process of the same core ([`Timing::set_local`]; `None`: `work`, `o_r`).
    work_local: Option<Time>,
    or_local: Option<Time>,
    /// Per core: what the visit of the process served last holds the core after its work (0:
    /// it did none).
    owed: Vec<Time>,
    /// Per core: its processes, and the index on it (`r / cores`) of the one it served last.
    on_core: Vec<u32>,
    last: Vec<u32>,
    /// Per core: sends and receives the process served last did back to back in its visit.
    burst: Vec<u32>,
    /// With a visit cost, per process: since when a message has waited for its core's round
    /// to reach the process (`Time::MAX`: none waits), see [`Timing::receive_turn`].
    waiting: Vec<Time>,
    /// With a visit cost: what a process's visit costs more for each process beyond the first
    /// that has sent it a message, in thousandths of a unit (0: nothing;
    /// [`Timing::set_poll_per_source`]).
    source_poll_milli: u64,
    /// While sources are learned: per process, a bitmap (`source_words` words) of the
    /// processes that have sent it a message.
    sources: Vec<u64>,
    source_words: usize,
    learning: bool,
    /// Per process: what its visit costs beyond `visit` for its sources (empty: nothing).
    extra: Vec<Time>,
    /// Per core: the sum of its processes' `extra`.
    core_extra: Vec<Time>,
}

/// The most processes whose sources [`Timing::set_poll_per_source`] keeps (a bitmap of
/// `n` bits per process).
pub const MAX_SOURCE_PROCESSES: u32 = 4096;

/// With a visit cost, a core serves one process for at most this many sends and receives in
/// a row before it visits the others, as a runtime worker's node sends at most this many
/// messages per pass (`PollMode::sends_per_pass` of a polling worker).
pub const VISIT_BURST: u32 = 16;

/// When a send started at `t` ends, when its message reaches the receiver, and when the
/// sender may start its next send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    pub end: Time,
    pub arrive: Time,
    pub next: Time,
}

impl Timing {
    /// The fixed parameters `logp`, a core per process, no noise.
    pub fn new(logp: LogGP) -> Self {
        Self {
            logp,
            t_send: logp.send(),
            t_slot: logp.slot().max(1),
            t_flight: logp.send().saturating_add(logp.l),
            t_or: logp.or,
            t_rslot: logp.recv_slot(),
            noise: None,
            late: false,
            nrng: ProtoRng::new(0),
            cores: 0,
            core_free: Vec::new(),
            visit: 0,
            work: 0,
            work_local: None,
            or_local: None,
            owed: Vec::new(),
            on_core: Vec::new(),
            last: Vec::new(),
            burst: Vec::new(),
            waiting: Vec::new(),
            source_poll_milli: 0,
            sources: Vec::new(),
            source_words: 0,
            learning: false,
            extra: Vec::new(),
            core_extra: Vec::new(),
        }
    }

    /// The parameters.
    #[inline]
    pub fn params(&self) -> LogGP {
        self.logp
    }

    /// Draws every message's `o_s`, `L` and `o_r` from `noise` (`None`: the fixed
    /// parameters). `g` and `G·(k−1)` stay fixed.
    pub fn set_noise(&mut self, noise: Option<Arc<Noise>>) {
        self.noise = noise;
    }

    /// Whether noisy mode is on.
    #[inline]
    pub fn noisy(&self) -> bool {
        self.noise.is_some()
    }

    /// `n` processes on `cores` cores (`None`, 0 or at least `n`: a core per process).
    pub fn set_cores(&mut self, n: u32, cores: Option<u32>) {
        self.cores = match cores {
            Some(c) if c > 0 && c < n => c,
            _ => 0,
        };
        self.core_free = vec![0; self.cores as usize];
        let c = self.cores.max(1);
        self.on_core = (0..self.cores).map(|k| (n - k).div_ceil(c)).collect();
        self.last = vec![0; self.cores as usize];
        self.burst = vec![0; self.cores as usize];
        self.owed = vec![0; self.cores as usize];
        self.waiting = vec![Time::MAX; if self.cores > 0 { n as usize } else { 0 }];
        self.set_poll_per_source(n, self.source_poll_milli);
    }

    /// Shared cores with a visit cost: a process's visit (idle, or before its work) costs
    /// `milli / 1000` units more for each process beyond the first that has sent it a message,
    /// as a runtime node's poll reads one in-process ring per peer that ever sent to it
    /// (`transport::inproc`: a ring is made at a pair's first message and kept; measured,
    /// `experiment::bench::node_hop`). The senders are learned from the sends that follow
    /// (across runs: [`Timing::reset`] keeps them) until [`Timing::freeze_sources`]. A
    /// process's first source costs nothing: the visit cost and `o_r` were measured on a node
    /// with one. 0, or no shared cores: nothing (and nothing is kept). At most
    /// [`MAX_SOURCE_PROCESSES`] processes.
    pub fn set_poll_per_source(&mut self, n: u32, milli: u64) {
        let on = milli > 0 && self.cores > 0;
        assert!(
            !on || n <= MAX_SOURCE_PROCESSES,
            "sources are kept for at most {MAX_SOURCE_PROCESSES} processes"
        );
        self.source_poll_milli = milli;
        self.source_words = if on { n.div_ceil(64) as usize } else { 0 };
        self.sources = vec![0; self.source_words * if on { n as usize } else { 0 }];
        self.extra = vec![0; if on { n as usize } else { 0 }];
        self.core_extra = vec![0; if on { self.cores as usize } else { 0 }];
        self.learning = on;
    }

    /// Stops learning senders: the visit costs stay as the sends so far made them.
    pub fn freeze_sources(&mut self) {
        self.learning = false;
    }

    /// What process `r`'s visit costs beyond the visit cost for its sources (0 without them).
    #[cfg(test)]
    pub fn source_extra(&self, r: Rank) -> Time {
        self.extra.get(r as usize).copied().unwrap_or(0)
    }

    /// `from` sent to `to`: while learning, `to` has one more source if `from` is new.
    #[inline]
    fn note_source(&mut self, from: Rank, to: Rank) {
        let w = self.source_words;
        let (word, bit) = (to as usize * w + from as usize / 64, 1u64 << (from % 64));
        if self.sources[word] & bit != 0 {
            return;
        }
        self.sources[word] |= bit;
        let count: u64 = self.sources[to as usize * w..(to as usize + 1) * w]
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum();
        let new = (self.source_poll_milli * count.saturating_sub(1) + 500) / 1000;
        let c = (to % self.cores) as usize;
        let old = std::mem::replace(&mut self.extra[to as usize], new);
        self.core_extra[c] = self.core_extra[c] - old + new;
    }

    /// Shared cores: a core's visit of a process with nothing to do costs `visit` (0: none;
    /// see the module doc).
    pub fn set_visit(&mut self, visit: Time) {
        self.visit = visit;
    }

    /// Shared cores with a visit cost: a process's visit with work holds its core `work`
    /// more after its last send or receive before the core moves on, as a runtime node's
    /// pass that received polls its transport once more and stamps the board before its
    /// worker steps the next node (measured: the node-hop run's passes with progress,
    /// `experiment::bench::node_hop`). 0: the core moves on at once.
    pub fn set_work(&mut self, work: Time) {
        self.work = work;
    }

    /// Shared cores: messages between processes of one core, as one core's 2- and 3-node
    /// runs measure them (`experiment::bench::node_hop`). The receive of a message from a process
    /// of the same core costs `or_local` instead of `o_r` (noisy mode scales the drawn `o_r`
    /// by `or_local / o_r`): everything from the end of the sender's send to the end of the
    /// receive, so with it a visit that only sent holds its core nothing after its sends. A
    /// visit that received only from its own core holds it `work_local` instead of `work`:
    /// where a message and the books it touches never left the core (over loopback UDP the
    /// sender's own `sendto` ran the receiving side of the stack; in process the cache lines
    /// stay), a delivery's books cost less than after a message from another core. `None`:
    /// `work` after every visit with work (`work_local`), `o_r` for every receive
    /// (`or_local`).
    pub fn set_local(&mut self, work_local: Option<Time>, or_local: Option<Time>) {
        self.work_local = work_local;
        self.or_local = or_local;
    }

    /// The visit cost of shared cores.
    #[inline]
    pub fn visit(&self) -> Time {
        self.visit
    }

    /// Whether processes share cores.
    #[inline]
    pub fn shared_cores(&self) -> bool {
        self.cores > 0
    }

    /// Before a run: every core free, noise drawn from `seed`'s own stream (the protocols
    /// draw the same numbers with or without noise).
    pub fn reset(&mut self, seed: u64) {
        self.nrng = ProtoRng::new(seed ^ 0x6E6F_6973_794C_6F67);
        self.core_free.fill(0);
        self.last.fill(0);
        self.burst.fill(0);
        self.owed.fill(0);
        self.waiting.fill(Time::MAX);
    }

    /// The core of process `r` when processes share cores.
    #[inline]
    pub fn core(&self, r: Rank) -> Option<usize> {
        (self.cores > 0).then(|| (r % self.cores) as usize)
    }

    /// When `core` is free again (0 without one).
    #[inline]
    pub fn core_free(&self, core: Option<usize>) -> Time {
        core.map_or(0, |c| self.core_free[c])
    }

    /// The first instant at or after `ready` at which process `r` has `core` (0 without one):
    /// once the core is free and, with a visit cost, when its round reaches `r`. After its
    /// work for the process it served last, a core visits the next ones in turn, `visit`
    /// each, so process `r` (index `j` on the core, last served `l`, `k` on the core) has it
    /// at `free + 1 + work + visit·((j − l − 1) mod k)` (`work` once a process worked, or
    /// `work_local` after a visit that received only from its own core, see
    /// [`Timing::set_work`]) and every `k·visit` after (with sources,
    /// [`Timing::set_poll_per_source`], each visit costs its process's more, and `r`'s
    /// own poll comes before its work); the process served
    /// last keeps it at `free` itself, for [`VISIT_BURST`] sends and receives in a row at
    /// most. (Moving on costs at least one time unit: at the instant
    /// `free` the core is still the last process's, whose follow-up at that instant, a receive
    /// ending or its next send, the engines may take after another process's arrival; a
    /// runtime node forwards in the visit that received.)
    #[inline]
    pub fn turn(&self, core: Option<usize>, r: Rank, ready: Time) -> Time {
        let Some(c) = core else { return ready };
        let free = self.core_free[c];
        if self.visit == 0 {
            return ready.max(free);
        }
        let (j, l, k) = (r / self.cores, self.last[c], self.on_core[c].max(1));
        if j == l && ready <= free && self.burst[c] < VISIT_BURST {
            return free;
        }
        let tail = self.owed[c];
        let steps = (j + k - l - 1) % k;
        let mut first = free + 1 + tail + self.visit * Time::from(steps);
        let mut period = self.visit * Time::from(k);
        if !self.extra.is_empty() {
            // Each process visited on the way polls its sources, and so does `r` before its
            // work; a round polls every process's.
            let rank = |idx: u32| (idx * self.cores) as usize + c;
            first += (1..=steps).map(|s| self.extra[rank((l + s) % k)]).sum::<Time>() + self.extra[r as usize];
            period += self.core_extra[c];
        }
        if first >= ready {
            return first;
        }
        first + (ready - first).div_ceil(period) * period
    }

    /// When process `to` may start the receive of a message there since `ready` (its arrival,
    /// or its port's being free), on `core`: its [`Timing::turn`], counted from when the
    /// first message began to wait for it, and not before `ready`. An engine that puts the
    /// message back until that turn ([`crate::sim::core::Core::at_turn`]) asks again when it
    /// comes; meanwhile the core may have served the processes before `to` faster than
    /// their visits would have taken, reaching `to` earlier than foreseen. Counted from the
    /// message's own `ready`, that turn was passed a moment before the message was asked
    /// about again, and the receive waited a whole round more (on 16 processes of 2 cores,
    /// one ns more per visit added 1.5 µs to the model's broadcast, `docs/measurements.md`);
    /// a worker's node finds a message that waits in its inbox the moment the worker's round
    /// comes to it.
    #[inline]
    pub fn receive_turn(&mut self, core: Option<usize>, to: Rank, ready: Time) -> Time {
        if core.is_none() || self.visit == 0 {
            return self.turn(core, to, ready);
        }
        let w = &mut self.waiting[to as usize];
        let since = (*w).min(ready);
        *w = since;
        self.turn(core, to, since).max(ready)
    }

    /// With a visit cost: the process `core` served last gives it up after its current work
    /// (a runtime node reads before it sends a correction message's successor, and its
    /// worker moves on when nothing came: `Pass::poll_transmit`); it has the core again at
    /// its next turn.
    #[inline]
    pub fn hand_on(&mut self, core: Option<usize>) {
        if let Some(c) = core
            && self.visit > 0
        {
            self.burst[c] = VISIT_BURST;
        }
    }

    /// A send of process `r` at `t` that its transport refused at once (a receiver known to
    /// be dead, [`crate::sim::Faults::known_dead`]): it takes no time, but it is work of `r`'s
    /// visit on `core` (which goes on, or ends at [`Timing::hand_on`], as after a send).
    #[inline]
    pub fn refused(&mut self, core: Option<usize>, r: Rank, t: Time) {
        if let Some(c) = core {
            let end = t.max(self.core_free[c]);
            self.take(c, r, t, end, false, false);
        }
    }

    /// Process `r` works on `core` until `end`; `received`: the work is a receive, `across`: of
    /// a message from another core. The visit then owes `work` after it; with the costs
    /// within a core set ([`Timing::set_local`]), `work_local` after a visit that received
    /// only from its own core, and with `or_local` nothing after one that only sent.
    #[inline]
    fn take(&mut self, core: usize, r: Rank, start: Time, end: Time, received: bool, across: bool) {
        let j = r / self.cores;
        let on = self.last[core] == j && start == self.core_free[core];
        self.burst[core] = if on { self.burst[core].saturating_add(1) } else { 1 };
        self.core_free[core] = end;
        self.last[core] = j;
        let tail = if !received {
            // With a receive within a core measured, the tail of a visit that only sent is in it.
            if self.or_local.is_some() { 0 } else { self.work }
        } else if across {
            self.work
        } else {
            self.work_local.unwrap_or(self.work)
        };
        self.owed[core] = if on { self.owed[core].max(tail) } else { tail };
    }

    /// A send of process `r` to `to` started at `t` on `core` (which it occupies until the
    /// send ends). A message to a process of the same core arrives when the send ends.
    #[inline]
    pub fn send(&mut self, core: Option<usize>, r: Rank, to: Rank, t: Time) -> Sent {
        if core.is_none() && self.noise.is_none() {
            // The papers' runs: fixed costs, a core per process (the simulator's hot loop).
            return Sent {
                end: t + self.t_send,
                arrive: t + self.t_flight,
                next: t + self.t_slot,
            };
        }
        self.send_drawn_or_shared(core, r, to, t)
    }

    /// [`Timing::send`] with noise or shared cores; out of line, so that the fixed-cost send
    /// inlined into the event loop stays as small as it was.
    #[inline(never)]
    fn send_drawn_or_shared(&mut self, core: Option<usize>, r: Rank, to: Rank, t: Time) -> Sent {
        let local = core.is_some() && to % self.cores == r % self.cores;
        let s = if let Some(nz) = self.noise.as_deref() {
            let send = nz.draw_os(&mut self.nrng).saturating_add(self.logp.gk);
            let (l, late) = if local {
                nz.flight_local(&mut self.nrng)
            } else {
                nz.flight(&mut self.nrng)
            };
            self.late = late;
            Sent {
                end: t + send,
                arrive: t + send.saturating_add(l),
                next: t + send.max(self.logp.g).max(1),
            }
        } else {
            Sent {
                end: t + self.t_send,
                arrive: t + if local { self.t_send } else { self.t_flight },
                next: t + self.t_slot,
            }
        };
        if let Some(c) = core {
            self.take(c, r, t, s.end, false, false);
            if self.learning {
                self.note_source(r, to);
            }
        }
        s
    }

    /// The receive by process `to` of a message from `from` that reached it at `arrive`,
    /// whose receive port is free at `port_free` (pass 0 when receives do not queue) and
    /// which runs on `core` (if it is alive and shares one): when the receive ends, and when
    /// the port is free again.
    #[inline]
    pub fn receive(
        &mut self,
        core: Option<usize>,
        from: Rank,
        to: Rank,
        arrive: Time,
        port_free: Time,
    ) -> (Time, Time) {
        let local = core.is_some() && from % self.cores.max(1) == to % self.cores.max(1);
        let or = match (self.noise.as_deref(), self.or_local.filter(|_| local)) {
            (Some(nz), None) => {
                let c = nz.or.draw(&mut self.nrng);
                nz.interrupted(c, &mut self.nrng)
            }
            (Some(nz), Some(l)) => {
                let drawn = u128::from(nz.or.draw(&mut self.nrng)) * u128::from(l) / u128::from(self.t_or.max(1));
                nz.interrupted(Time::try_from(drawn).unwrap_or(Time::MAX), &mut self.nrng)
            }
            (None, Some(l)) => l,
            (None, None) => self.t_or,
        };
        let mut start = arrive.max(port_free);
        if let Some(c) = core {
            start = self.receive_turn(core, to, start);
            self.take(c, to, start, start + or, true, !local);
            if self.visit > 0 {
                self.waiting[to as usize] = Time::MAX;
            }
        }
        (start + or, start + or.max(self.logp.g))
    }

    /// The receive when it can be scheduled at send time (fixed parameters, a core per
    /// process, queued receives): when it ends and when the port is free again.
    #[inline]
    pub fn receive_fixed(&self, arrive: Time, port_free: Time) -> (Time, Time) {
        let start = arrive.max(port_free);
        (start + self.t_or, start + self.t_rslot)
    }

    /// Noisy mode: whether copies of the message of the last [`Timing::send`] were lost.
    #[inline]
    pub fn last_late(&self) -> bool {
        self.late
    }

    /// `o_r` without noise (a receive that does not queue).
    #[inline]
    pub fn or(&self) -> Time {
        self.t_or
    }
}

#[cfg(test)]
mod tests;
