//! The sans-IO contract every protocol family meets (`docs/architecture.md`, decision 1), in
//! quinn-proto's shape: events go in through [`Machine::handle`]; messages come out of
//! [`Machine::poll_transmit`], the next timer out of [`Machine::poll_timeout`] and what the
//! user sees out of [`Machine::poll_output`]. A machine never touches a socket, a clock or a
//! thread: `now` is handed in by its driver (model units in the simulator, nanoseconds since
//! the run's start in the runtime), so one generic node loop can drive any family.
//!
//! The families implement it as follows:
//! - agreement: [`crate::protocol::agree::Era`] (input: a value to agree on; output: an
//!   [`crate::protocol::agree::Outcome`]);
//! - overlay: [`crate::protocol::overlay::watch::WatchMachine`] (the BMG overlay kept
//!   legitimate, failure notices and repair; output: deaths learned); the guarded rules
//!   themselves keep the BMG paper's shape ([`crate::protocol::overlay::Guarded`]), which the
//!   §4 schedulers of the simulator drive rule by rule;
//! - broadcast: [`Bcast`] adapts any [`Protocol`] (the trait the LogP engine's hot path and the
//!   papers' algorithms are written against stays as it is).
//!
//! Failure detection is not part of a machine: a driver runs one
//! [`crate::protocol::detector::Detector`] beside it and hands its verdicts in as
//! [`Event::Suspect`].

use crate::protocol::{Action, Ctx, ProtoRng, Protocol, Rank, Time};

/// What happens to a machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<M, I> {
    /// A message from `from` (decoded and validated by the driver).
    Message { from: Rank, msg: M },
    /// The time returned by [`Machine::poll_timeout`] has come.
    Timer,
    /// The failure detector suspects `peer` (its verdict is final).
    Suspect(Rank),
    /// The user's request (start a broadcast, enter an agreement).
    Input(I),
}

/// One process's sans-IO state for a protocol family.
pub trait Machine {
    /// The messages it exchanges.
    type Msg;
    /// What the user hands in.
    type Input;
    /// What the user is handed.
    type Output;
    /// Why an input was refused.
    type Error;
    /// Does the machine read `now` (timers, counted waits)? One that does not
    /// (ERA: its only timeouts are the failure detector's) may be handed any time, so a
    /// driver need not read or convert its clock for it on every pass.
    const TIMED: bool = true;

    /// Handles one event at time `now`. Only [`Event::Input`] can be refused.
    fn handle(&mut self, now: Time, ev: Event<Self::Msg, Self::Input>) -> Result<(), Self::Error>;
    /// The next message to send, if any (the sender is free).
    fn poll_transmit(&mut self, now: Time) -> Option<(Rank, Self::Msg)>;
    /// When the machine next wants an [`Event::Timer`], if ever.
    fn poll_timeout(&self) -> Option<Time> {
        None
    }
    /// When a sender in a counted wait wants [`Machine::poll_transmit`] asked again, if it
    /// is in one (a broadcast protocol's [`Action::Sleep`]: its send slot, not an event). A
    /// driver that asks on every pass, as the runtime's do, need not read it; the simulator
    /// asks at that time after the instant's events, as it asks a sender whose send ended.
    fn poll_wake(&self) -> Option<Time> {
        None
    }
    /// The next output for the user, if any.
    fn poll_output(&mut self) -> Option<Self::Output>;

    /// The next peer the machine has reason to think dead (a message that came around it,
    /// ERA's [`crate::protocol::agree::Era::poll_doubt`]), if any: no verdict, but its
    /// driver's failure detector probes it now ([`crate::protocol::Detector::probe`]) rather
    /// than at its next heartbeat. By default: none.
    fn poll_doubt(&mut self) -> Option<Rank> {
        None
    }
}

/// A broadcast [`Protocol`] instance as a [`Machine`]: input `()` starts the operation at
/// this process, [`Action::Sleep`] becomes a wake-up ([`Machine::poll_wake`]), and the output
/// is the delivery (once).
/// `now` is in model units (the protocol's own time base).
pub struct Bcast<'s, P: Protocol> {
    p: P,
    rank: Rank,
    n: Rank,
    shared: &'s P::Shared,
    rng: ProtoRng,
    /// The sender sleeps until then ([`Action::Sleep`]).
    asleep_until: Option<Time>,
    delivered: bool,
}

impl<'s, P: Protocol> Bcast<'s, P> {
    /// Process `rank` of `n` for one operation, with its seeded generator.
    pub fn new(rank: Rank, n: Rank, shared: &'s P::Shared, rng: ProtoRng) -> Self {
        let p = P::new(&Ctx {
            rank,
            n,
            now: 0,
            shared,
        });
        Self {
            p,
            rank,
            n,
            shared,
            rng,
            asleep_until: None,
            delivered: false,
        }
    }

    fn cx(&self, now: Time) -> Ctx<'s, P::Shared> {
        Ctx {
            rank: self.rank,
            n: self.n,
            now,
            shared: self.shared,
        }
    }

    /// The protocol instance (for its queries: `delivered`, `finished`, ...).
    pub fn protocol(&self) -> &P {
        &self.p
    }
}

impl<P: Protocol> Machine for Bcast<'_, P> {
    type Msg = P::Msg;
    type Input = ();
    type Output = ();
    type Error = std::convert::Infallible;

    fn handle(&mut self, now: Time, ev: Event<P::Msg, ()>) -> Result<(), Self::Error> {
        let cx = self.cx(now);
        match ev {
            Event::Message { from, msg } => self.p.on_message(&cx, from, &msg),
            Event::Timer => {
                if self.p.next_timer().is_some_and(|t| t <= now) {
                    self.p.on_timer(&cx);
                }
            }
            Event::Suspect(peer) => self.p.on_suspect(&cx, peer),
            Event::Input(()) => self.p.start(&cx),
        }
        Ok(())
    }

    fn poll_transmit(&mut self, now: Time) -> Option<(Rank, P::Msg)> {
        if self.asleep_until.is_some_and(|t| t > now) {
            return None;
        }
        self.asleep_until = None;
        let cx = self.cx(now);
        match self.p.poll_send(&cx, &mut self.rng) {
            Action::Send { to, msg } => Some((to, msg)),
            Action::Sleep(t) => {
                self.asleep_until = Some(now + t.max(1));
                None
            }
            Action::Wait => None,
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.p.next_timer()
    }

    fn poll_wake(&self) -> Option<Time> {
        self.asleep_until
    }

    fn poll_output(&mut self) -> Option<()> {
        if !self.delivered && self.p.delivered() {
            self.delivered = true;
            return Some(());
        }
        None
    }
}

#[cfg(test)]
mod tests;
