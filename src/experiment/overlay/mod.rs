//! The overlay experiments of `ftcoll sim`: BMG construction and repair ([`bmg`]; BMG paper
//! §4, Figures 2–4), Han–Finkel dissemination ([`dissemination`]; Theorems 1–3) and failure
//! notices ([`notices`]), each printing a table or one JSON object.

pub mod bmg;
pub mod dissemination;
pub mod notices;

/// Which §4 schedulers `bmg-build` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedulers {
    Synchronous,
    Asynchronous,
    Both,
}

/// An overlay experiment (the flags of `sim --algo bmg-build | dissemination |
/// failure-notices`); `None`: the default.
#[derive(Clone, Debug, Default)]
pub struct OverlaySpec {
    /// Processes (the largest size for dissemination and notices).
    pub nodes: u32,
    pub runs: u64,
    pub seed: u64,
    /// One JSON object instead of the table.
    pub json: bool,
    /// Accept runs that did not converge within `max_phases` (bmg-build).
    pub allow_aborts: bool,
    /// bmg-build: launch trees, comma-separated: binary, binomial, random:DEGREE
    /// [default: binomial,binary].
    pub launch_tree: Option<String>,
    /// bmg-build: §4 scheduler(s) [default: both].
    pub scheduler: Option<Schedulers>,
    /// bmg-build: a quiet process re-runs its spontaneous rules every R phases [default: 64].
    pub refresh: Option<u32>,
    /// bmg-build: start from random states (self-stabilization).
    pub corrupted: bool,
    /// bmg-build: give up a run after this many phases [default: 1000000].
    pub max_phases: Option<u64>,
    /// bmg-build: crash K random processes after convergence, each followed by the repair
    /// [default: 0].
    pub crashes: Option<u32>,
}
