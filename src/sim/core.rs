//! The event core of the LogP engine, shared by every simulated protocol family: the
//! calendar ([`Calendar`]), the cost of a message ([`Timing`]: LogGP, noise, shared cores),
//! the sender's side of a send (a busy core defers it) and the event cap with its
//! aborted-run accounting ([`EventCap`]). Two drivers run on it, each monomorphized over what it drives:
//! the broadcast [`Engine`](crate::sim::Engine) (any [`Protocol`](crate::protocol::Protocol),
//! the papers' hot path) and the [`MachineEngine`](crate::sim::machine_engine::MachineEngine)
//! (any sans-IO [`Machine`](crate::protocol::Machine): ERA's agreements).

use crate::model::{LogGP, Time};
use crate::protocol::Rank;
use crate::sim::calendar::{Calendar, Item};
use crate::sim::timing::Timing;

/// Calendar and message costs of one simulator.
pub struct Core<E> {
    /// The events of the run, `Early` ones before `Late` (sender polls) at each instant.
    pub cal: Calendar<E>,
    /// What a message costs: LogGP parameters, noise and shared cores.
    pub timing: Timing,
}

/// The event cap of one run: the events handed out, and whether the run was stopped one past
/// the cap (counted, never hidden). A run's loop keeps it on its stack (a register in the
/// hot loop).
#[derive(Clone, Copy, Debug)]
pub struct EventCap {
    /// Events handed out in this run.
    pub events: u64,
    /// The most events of the run.
    pub max: u64,
    /// The run was stopped at the cap.
    pub aborted: bool,
}

impl EventCap {
    /// No event yet, at most `max`.
    pub fn new(max: u64) -> Self {
        Self {
            events: 0,
            max,
            aborted: false,
        }
    }

    /// The next event of `core`'s calendar, counted; `None` when there is none left or when
    /// it would be one past the cap (the run is then marked aborted).
    #[inline]
    pub fn pop<E: Copy>(&mut self, core: &mut Core<E>) -> Option<(Time, Item<E>)> {
        let next = core.cal.pop()?;
        self.events += 1;
        if self.events > self.max {
            self.aborted = true;
            return None;
        }
        Some(next)
    }
}

impl<E: Copy> Core<E> {
    /// A core whose calendar covers `window` time units ahead for `n` processes.
    pub fn new(window: Time, n: u32, logp: LogGP) -> Self {
        Self {
            cal: Calendar::new(window, n),
            timing: Timing::new(logp),
        }
    }

    /// Before a run: an empty calendar at time 0, every core free, noise from `seed`'s own
    /// stream.
    pub fn reset(&mut self, seed: u64) {
        self.cal.reset();
        self.timing.reset(seed);
    }

    /// Whether process `r`'s core (from [`Timing::core`]) is not `r`'s at `t` (doing
    /// another process's send or receive, or, with a visit cost, elsewhere in its round); if
    /// so, `r`'s sender is polled again at its turn ([`Timing::turn`]). Asked before the
    /// protocol is, so that a process without its core is not asked what it sends.
    #[inline]
    pub fn core_busy(&mut self, r: Rank, core: Option<usize>, t: Time) -> bool {
        if core.is_none() {
            return false;
        }
        let turn = self.timing.turn(core, r, t);
        if turn > t {
            self.cal.push_late(turn, r);
            return true;
        }
        false
    }

    /// A message `ev` reached process `to` (on `core`, whose receive port is free at `port`)
    /// at `t`: with a visit cost, its receive starts only when the core's round reaches `to`
    /// ([`Timing::turn`]), so the event is put back to then and `None` returned; otherwise
    /// (or at that turn) the event, to receive now. The receive is not booked ahead: until
    /// then the core serves the processes before `to` in its round. Without a visit cost
    /// every event is handed back (the receive waits for the core as booked by
    /// [`Timing::receive`]).
    #[inline]
    pub fn at_turn(&mut self, core: Option<usize>, to: Rank, t: Time, port: Time, ev: E) -> Option<E> {
        if core.is_none() || self.timing.visit() == 0 {
            return Some(ev);
        }
        let turn = self.timing.receive_turn(core, to, t.max(port));
        if turn > t {
            self.cal.push(turn, ev);
            return None;
        }
        Some(ev)
    }
}
