//! LogP model and the papers' closed forms (latencies, gap laws, optimal gossip time).
//!
//! * [`tree_latency`](mod@tree_latency): dissemination latency of the Corrected Trees trees in LogP (§3.2).
//! * [`corrected_trees`]: checked-correction latency and message count (Corrected Trees §4.2).
//! * [`gossip`]: the expected gossip curve `c(t)` (Corrected Gossip Lemma 1) and GOS.
//! * [`chains`]: longest uncolored chain (eq. (2)) and g-node chains (Appendix B).
//! * [`gossip_tuning`]: `C` for OCG (Claim 2) and `T_opt` of OCG, CCG, FCG (eqs. (3)–(5)).
//! * [`baselines`]: BFB and BIG (Corrected Gossip §IV.B).
//! * [`prediction`]: named, referenced quantities the CLI prints.
//!
//! Every function validates its input and returns [`ModelError`] instead of panicking.
//! Time arithmetic saturates at `Time::MAX` rather than overflowing.

pub mod baselines;
pub mod bench_model;
pub mod chains;
pub mod corrected_trees;
pub mod gossip;
pub mod gossip_tuning;
pub mod logp;
pub mod prediction;
pub mod tree_latency;

pub use baselines::{bfb_messages, big_messages, ceil_log2, t_bfb, t_big};
pub use bench_model::BenchModel;
pub use chains::{g_hat, k_hat, longest_gap_pmf, longest_gap_probability};
pub use corrected_trees::{l_ff_scc, l_scc_bounds, m_scc, scc_loggp};
pub use gossip::{GossipCurve, expected_gnodes, gos_colored_fraction, gos_expected_messages};
pub use gossip_tuning::{DEFAULT_DELTA, GossipOptimum, c_for_ocg, t_opt_ccg, t_opt_fcg, t_opt_ocg};
pub use logp::{LogGP, LogP, Time};
pub use prediction::{Prediction, Quantity, Value};
pub use tree_latency::{
    TreeShape, binomial_latency, kary_latency, lame_latency, optimal_colored, optimal_latency, tree_latency,
};

use std::fmt;

/// Why a closed form cannot be evaluated for the given input.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelError {
    /// `o = 0`: LogP needs a positive overhead (Corrected Trees §2.2, `{o, L} ∈ Z+`).
    ZeroOverhead,
    /// A tree order (`k` of a k-ary or Lamé tree) of 0.
    ZeroOrder,
    /// A Lamé order so large that its `R(t)` table would not fit in memory.
    OrderTooLarge(u32),
    /// Node counts must satisfy `1 ≤ n ≤ N` (n active of N, Corrected Gossip §II).
    Nodes { total: u64, active: u64 },
    /// `δ` must lie in `(0, 1)`.
    Delta(f64),
    /// A failure count the closed form does not cover (Appendix B is derived for `f = 1`).
    UnsupportedFailures(u32),
    /// A gossip horizon (in steps of `O`) beyond [`gossip::MAX_GOSSIP_STEPS`].
    Horizon(u64),
    /// `N` too large to materialize a whole distribution ([`chains::MAX_PMF_NODES`]).
    TooManyNodes(u64),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroOverhead => write!(f, "LogP overhead o must be at least 1"),
            Self::ZeroOrder => write!(f, "tree order k must be at least 1"),
            Self::OrderTooLarge(k) => write!(f, "Lamé order k = {k} is too large"),
            Self::Nodes { total, active } => write!(
                f,
                "need 1 <= n <= N active of total nodes, got n = {active}, N = {total}"
            ),
            Self::Delta(d) => write!(f, "delta must be in (0, 1), got {d}"),
            Self::UnsupportedFailures(v) => write!(
                f,
                "the FCG bound (Corrected Gossip Appendix B) is derived for f = 1 only, got f = {v}"
            ),
            Self::Horizon(s) => write!(
                f,
                "gossip horizon of {s} steps of O exceeds the model's limit of {}",
                gossip::MAX_GOSSIP_STEPS
            ),
            Self::TooManyNodes(n) => write!(
                f,
                "N = {n} is too large for a full distribution (limit {})",
                chains::MAX_PMF_NODES
            ),
        }
    }
}

impl std::error::Error for ModelError {}

/// Rejects `o = 0` (LogGP: `o_s = 0` or `o_r = 0`), which every closed form divides by or
/// steps with.
pub(crate) fn check_logp(logp: impl Into<LogGP>) -> Result<(), ModelError> {
    let p: LogGP = logp.into();
    if p.os == 0 || p.or == 0 {
        Err(ModelError::ZeroOverhead)
    } else {
        Ok(())
    }
}

/// `2o + L` (LogGP: `o_s + G(k−1) + L + o_r`), saturating.
pub(crate) fn hop(logp: impl Into<LogGP>) -> Time {
    logp.into().hop()
}
