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
//! runs on core `r mod C`, and a core does one send or receive at a time. The engines keep
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
    /// Shared cores: how many (0: a core per process), and when each is free again.
    cores: u32,
    core_free: Vec<Time>,
}

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
            nrng: ProtoRng::new(0),
            cores: 0,
            core_free: Vec::new(),
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

    /// A send started at `t` on `core` (which it occupies until the send ends).
    #[inline]
    pub fn send(&mut self, core: Option<usize>, t: Time) -> Sent {
        let s = if let Some(nz) = self.noise.as_deref() {
            let send = nz.os.draw(&mut self.nrng).saturating_add(self.logp.gk);
            let flight = send.saturating_add(nz.l.draw(&mut self.nrng));
            Sent {
                end: t + send,
                arrive: t + flight,
                next: t + send.max(self.logp.g).max(1),
            }
        } else {
            Sent {
                end: t + self.t_send,
                arrive: t + self.t_flight,
                next: t + self.t_slot,
            }
        };
        if let Some(c) = core {
            self.core_free[c] = s.end;
        }
        s
    }

    /// The receive of a message that reached its receiver at `arrive`, whose receive port is
    /// free at `port_free` (pass 0 when receives do not queue) and which runs on `core` (if
    /// it is alive and shares one): when the receive ends, and when the port is free again.
    #[inline]
    pub fn receive(&mut self, core: Option<usize>, arrive: Time, port_free: Time) -> (Time, Time) {
        let or = match self.noise.as_deref() {
            Some(nz) => nz.or.draw(&mut self.nrng),
            None => self.t_or,
        };
        let mut start = arrive.max(port_free);
        if let Some(c) = core {
            start = start.max(self.core_free[c]);
            self.core_free[c] = start + or;
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

    /// `o_r` without noise (a receive that does not queue).
    #[inline]
    pub fn or(&self) -> Time {
        self.t_or
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loggp(l: Time, os: Time, or: Time, g: Time, gk: Time) -> LogGP {
        LogGP { l, os, or, g, gk }
    }

    #[test]
    fn fixed_costs_are_the_loggp_formulas() {
        let mut t = Timing::new(loggp(5, 2, 3, 4, 1));
        let s = t.send(None, 10);
        // o_s + G(k-1) = 3; next = max(3, g=4); arrival = 3 + L.
        assert_eq!(
            s,
            Sent {
                end: 13,
                arrive: 18,
                next: 14
            }
        );
        // Port free at 20: start 20, end 23, next receive not before 20 + max(3, 4).
        assert_eq!(t.receive(None, 18, 20), (23, 24));
        assert_eq!(t.receive_fixed(18, 20), (23, 24));
        assert_eq!(t.receive(None, 18, 0), (21, 22));
    }

    #[test]
    fn a_shared_core_serializes_sends_and_receives() {
        let mut t = Timing::new(loggp(2, 1, 1, 0, 0));
        t.set_cores(4, Some(2));
        assert_eq!((t.core(0), t.core(1), t.core(2)), (Some(0), Some(1), Some(0)));
        t.send(t.core(0), 0);
        assert_eq!(t.core_free(Some(0)), 1);
        // Rank 2's receive arriving at 0 waits for the core.
        assert_eq!(t.receive(t.core(2), 0, 0), (2, 2));
        assert_eq!(t.core_free(Some(0)), 2);
        t.reset(1);
        assert_eq!(t.core_free(Some(0)), 0);
        t.set_cores(4, Some(4));
        assert!(!t.shared_cores());
    }
}
