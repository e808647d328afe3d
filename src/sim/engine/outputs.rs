//! What a run of the [`super::Engine`] is told and tells: how receives share a process's
//! time, the run's measurements and its trace rows.

use crate::model::Time;
use crate::protocol::Rank;

/// How a process's receives share its time (the one assumption on which the two papers'
/// simulations differ, see `docs/reproduction.md`, "CG receive model").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Receives {
    /// LogP (Corrected Trees §2.2, `docs/architecture.md` decision 4): a process receives one message at a
    /// time, each occupying it for `o`; messages arriving while it is busy wait in its queue.
    #[default]
    Queued,
    /// Corrected Gossip's analysis (Lemma 1, eqs. (3)–(5)) and pseudo-code (Algorithms 1–3
    /// drain every pending message in one `check for receive` loop without advancing time):
    /// every message is received `o + L + o` after its send starts, however many arrive at
    /// once; the receive overhead is latency, never occupancy. All receives of an instant are
    /// handled before the process's send slot at that instant.
    Parallel,
}

/// One simulated run's measurements (Corrected Trees §4: coloring and quiescence latency,
/// messages; §4.3: `g_max` and correction latency).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Root's start to the last live process's delivery.
    pub coloring: Time,
    /// Root's start to the end of the last activity (send or receive) of the operation.
    pub quiescence: Time,
    /// Quiescence minus the end of dissemination (the synchronized correction start, or the
    /// last dissemination message received, whichever is later).
    pub correction: Time,
    /// The end of dissemination as defined for `correction`.
    pub dissemination_end: Time,
    /// Longest circular run of processes not colored by dissemination (dead ones included).
    pub gmax: u32,
    /// Messages sent in total.
    pub messages: u64,
    /// The most messages any one process sent.
    pub max_messages_per_process: u32,
    /// Processes alive at the end that never delivered.
    pub uncolored_live: u32,
    /// The run hit the event cap and was stopped (counted, never hidden).
    pub aborted: bool,
    /// Events processed.
    pub events: u64,
}

/// One trace line: `time,node,event,peer,label`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRow {
    pub time: Time,
    pub node: Rank,
    pub event: &'static str,
    pub peer: Rank,
    pub label: &'static str,
}
