//! Overlay protocols of the runtime's bootstrap: the self-stabilizing binomial-graph overlay
//! (BMG paper §3: [`tree_to_ring`] is Algorithm 1, [`ring_to_bmg`] Algorithm 2, [`bmg_overlay`]
//! one process running both), Han–Finkel dissemination ([`han_finkel`]), failure notices
//! spread with it ([`failure_notice`]), the repair after a permanent crash ([`repair`]), and
//! a booted process's watch combining the last three as one sans-IO machine ([`watch`]).
//!
//! The BMG algorithms are written as guarded rules (BMG paper §3.1): spontaneous rules whose
//! guard is on the local state only, and reception rules that consume the first message of an
//! incoming link. [`Guarded`] is their sans-IO shape: a driver (the phased schedulers of
//! [`crate::sim::phased`], or a runtime) decides when a process runs its spontaneous rules
//! and when it consumes a message, and carries what the process sends.

pub mod bmg_overlay;
pub mod boot;
pub mod failure_notice;
pub mod han_finkel;
pub mod repair;
pub mod ring_to_bmg;
pub mod tree_to_ring;
pub mod watch;

use crate::protocol::Rank;

/// Messages a rule sends: `(destination, message)` in sending order.
pub type Outbox<M> = Vec<(Rank, M)>;

/// A process of a guarded-rule algorithm (BMG paper §3.1), as a sans-IO state machine.
pub trait Guarded {
    /// The messages of the algorithm.
    type Msg: Copy + std::fmt::Debug;
    /// Is a spontaneous rule enabled now? A process that went quiet (§4) answers false
    /// except when its periodic refresh is due.
    fn spontaneous_due(&self) -> bool;
    /// Runs the enabled spontaneous rules (all of them, in rule order).
    fn spontaneous(&mut self, out: &mut Outbox<Self::Msg>);
    /// Consumes one message `msg` received from `from` (the reception rules).
    fn on_message(&mut self, from: Rank, msg: Self::Msg, out: &mut Outbox<Self::Msg>);
    /// One scheduler phase has passed (counts the periodic refresh; no clock).
    fn on_phase(&mut self);
    /// The failure detector suspects `peer`: wake up and re-run the spontaneous rules.
    fn on_suspect(&mut self, peer: Rank);
    /// Has this process gone quiet (§4: its local state is correct as far as it can tell)?
    fn quiet(&self) -> bool;
}
