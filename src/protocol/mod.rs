//! Sans-IO protocol state machines (`docs/architecture.md`, decisions 1–3).
//!
//! A protocol instance is one process's state for one operation. It never touches a socket,
//! a clock, a thread or a global RNG: a driver (the LogP simulator in [`crate::sim`], or the
//! network runtime in [`crate::runtime`]) hands it events and, whenever the process's sender is free, asks it what to
//! send next ([`Protocol::poll_send`]). The same code therefore runs under virtual and real time.
//!
//! Every family meets one contract, [`Machine`] (events in; messages, timers and outputs out):
//! ERA and the overlay's watch implement it, and [`Bcast`] adapts any broadcast [`Protocol`]
//! (the trait the LogP engine's hot path and the papers' algorithms are written against). One
//! heartbeat failure detector, [`Detector`], serves every family's driver.
//!
//! Ranks are *virtual*: the root of an operation is rank 0 (the papers assume this without loss
//! of generality); a driver maps virtual to physical ranks as `(physical - root) mod n`.

pub mod agree;
pub mod bcast;
pub mod detector;
pub mod machine;
pub mod op;
pub mod overlay;
pub mod rng;

pub use crate::model::Time;
pub use detector::{Detector, DetectorConfig};
pub use machine::{Bcast, Event, Machine};
pub use op::{DuplicateFilter, OpId};
pub use rng::ProtoRng;

/// Virtual time as carried in messages: counted from the operation's start, so 32 bits
/// suffice (smaller messages, smaller simulator events); saturates rather than wraps.
pub type VTime = u32;

/// Saturating conversion of a model time into a message's [`VTime`].
pub fn vtime(t: Time) -> VTime {
    VTime::try_from(t).unwrap_or(VTime::MAX)
}

/// A process rank inside one operation (virtual: the operation's root is 0).
pub type Rank = u32;

/// What a process's sender does next (`docs/architecture.md`, decision 2: the sender pulls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<M> {
    /// Send `msg` to `to`; the sender is busy for `o`.
    Send { to: Rank, msg: M },
    /// Spend this many model time units without sending (a counted wait, e.g. a gossip node
    /// waiting `L + O` after round `T`, or a stopped direction's slot in checked correction).
    /// Zero is treated as one unit.
    Sleep(Time),
    /// Nothing to send until the next event (message, timer or suspicion) for this process.
    Wait,
}

impl<M> Action<M> {
    /// The same action with its message converted (a protocol wrapping a sub-protocol's).
    pub fn map<N>(self, f: impl FnOnce(M) -> N) -> Action<N> {
        match self {
            Action::Send { to, msg } => Action::Send { to, msg: f(msg) },
            Action::Sleep(t) => Action::Sleep(t),
            Action::Wait => Action::Wait,
        }
    }
}

/// Which phase of an operation a message belongs to; drivers use it for statistics only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Dissemination: tree, gossip or graph messages that color processes first.
    Dissemination,
    /// Correction messages on the ring.
    Correction,
    /// Acknowledgments, NACKs, SOS and other control traffic.
    Control,
}

/// Properties every protocol message exposes to drivers.
pub trait Message: Copy + std::fmt::Debug + Send + Sync + 'static {
    /// The phase the message belongs to.
    fn phase(&self) -> Phase;
    /// A short name for traces (`tree`, `gossip`, `corr>`, `ack`, ...).
    fn label(&self) -> &'static str;
}

/// Read-only context handed to every protocol call.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a, S> {
    /// This process's (virtual) rank.
    pub rank: Rank,
    /// Number of processes in the operation.
    pub n: Rank,
    /// The driver's current time in model units (LogP time in the simulator).
    pub now: Time,
    /// Configuration shared by all processes of the operation (trees, parameters).
    pub shared: &'a S,
}

/// A sans-IO protocol: one process's state for one operation.
pub trait Protocol: Sized + Send {
    /// Configuration shared by every process of the operation (immutable during it).
    type Shared: Sync;
    /// The protocol's message type.
    type Msg: Message;

    /// A fresh state for process `cx.rank`, before the operation starts.
    fn new(cx: &Ctx<'_, Self::Shared>) -> Self;
    /// The operation starts at this process (the root begins disseminating; others arm).
    fn start(&mut self, cx: &Ctx<'_, Self::Shared>);
    /// A message from `from` has been received (its receive overhead is already paid).
    fn on_message(&mut self, cx: &Ctx<'_, Self::Shared>, from: Rank, msg: &Self::Msg);
    /// The sender is free: what next? `rng` is the driver's seeded generator.
    fn poll_send(&mut self, cx: &Ctx<'_, Self::Shared>, rng: &mut ProtoRng) -> Action<Self::Msg>;
    /// The timer returned by [`Protocol::next_timer`] has expired.
    fn on_timer(&mut self, _cx: &Ctx<'_, Self::Shared>) {}
    /// The failure detector (modeled or real) suspects `peer`.
    fn on_suspect(&mut self, _cx: &Ctx<'_, Self::Shared>, _peer: Rank) {}
    /// The absolute time at which [`Protocol::on_timer`] should run, if any.
    fn next_timer(&self) -> Option<Time> {
        None
    }
    /// Has this process delivered the operation's payload to its user?
    fn delivered(&self) -> bool;
    /// Was this process colored by the dissemination phase (a "g-node" in Corrected Gossip's
    /// terms)? Used for the gap statistics `g_max`.
    fn colored_by_dissemination(&self) -> bool;
    /// Has this process finished all its work for the operation (it will send nothing more,
    /// whatever it receives)? Drivers use this to retire operation state.
    fn finished(&self, cx: &Ctx<'_, Self::Shared>) -> bool;
}

/// Per-operation facts a shared configuration can tell drivers.
pub trait SharedInfo {
    /// The common start of a synchronized correction phase, when the protocol has one
    /// (Corrected Trees §3.3); used to measure correction latency.
    fn sync_correction_start(&self) -> Option<Time> {
        None
    }
    /// Does the protocol consume failure-detector suspicions (BFB)?
    fn uses_failure_detector(&self) -> bool {
        false
    }
}
