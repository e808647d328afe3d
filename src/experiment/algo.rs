//! A broadcast algorithm as the user specifies it ([`AlgoSpec`]: the algorithm's name and the
//! optional knobs, as text where the text has a grammar of its own) and its resolution into a
//! checked [`Algo`]: every impossible combination is a one-line error here, before anything runs.

use crate::experiment::spec;
use crate::model::{LogGP, LogP};
use crate::protocol::bcast::Start;
pub use crate::protocol::bcast::algo::{Algo, corr_name, tree_name};
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::protocol::bcast::correction::Correction;
use crate::topology::{Order, TreeKind};

/// The broadcast algorithms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlgoName {
    /// Corrected Trees: tree dissemination + ring correction.
    #[default]
    CorrectedTree,
    /// Corrected Gossip: OCG, CCG or FCG (see the variant).
    CorrectedGossip,
    /// Gossip only (GOS), no correction.
    Gossip,
    /// Binomial-graph broadcast (BIG).
    Big,
    /// Buntinas' fault-tolerant broadcast (BFB) with a modeled failure detector.
    Bfb,
    /// Tree broadcast with acknowledgments.
    TreeAck,
    /// Simulation only: the self-stabilizing BMG overlay built from a launch tree (convergence).
    BmgBuild,
    /// Simulation only: Han–Finkel dissemination (rounds, one failure, reorganization).
    Dissemination,
    /// Simulation only: failure notices spread by fault-tolerant dissemination (rounds).
    FailureNotices,
}

impl AlgoName {
    /// Whether this names one of the overlay experiments (BMG build, dissemination, notices)
    /// rather than a broadcast.
    pub fn is_overlay(self) -> bool {
        matches!(
            self,
            AlgoName::BmgBuild | AlgoName::Dissemination | AlgoName::FailureNotices
        )
    }
}

/// A broadcast algorithm and its parameters, unresolved (`None`: the default, chosen by
/// [`resolve_algo`]). Knobs that do not apply to the algorithm must be `None`.
#[derive(Clone, Debug, Default)]
pub struct AlgoSpec {
    pub algo: AlgoName,
    /// Dissemination tree: `kary:K`, `binomial`, `lame:K` or `optimal` [default: binomial].
    pub tree: Option<String>,
    /// Tree numbering [default: interleaved].
    pub order: Option<Order>,
    /// Correction: `none`, `opportunistic:D`, `optimized:D`, `checked`, `failproof:F`,
    /// `delayed[:DELAY]` [default: checked].
    pub correction: Option<String>,
    /// Correction start [default: synchronized].
    pub start: Option<Start>,
    /// Corrected-gossip variant: `ocg`, `ccg` or `fcg[:F]` [default: ccg].
    pub variant: Option<String>,
    /// Gossip rounds T [default: the paper's T_opt].
    pub gossip_rounds: Option<u64>,
    /// OCG correction time C [default: Claim 2's C = K·O + L + O, plus one O].
    pub correction_time: Option<u64>,
}

impl AlgoSpec {
    /// The algorithm with every knob at its default.
    pub fn new(algo: AlgoName) -> AlgoSpec {
        AlgoSpec {
            algo,
            ..AlgoSpec::default()
        }
    }
}

/// LogGP parameters beside L and o (all `None`: exactly LogP).
#[derive(Clone, Debug, Default)]
pub struct LoggpSpec {
    /// Send overhead o_s [default: o].
    pub os: Option<u64>,
    /// Receive overhead o_r [default: o].
    pub or: Option<u64>,
    /// Gap g [default: 0].
    pub g: Option<u64>,
    /// G, time per byte after a message's first (needs `bytes`).
    pub big_g: Option<f64>,
    /// Message size k in bytes for G.
    pub bytes: Option<u64>,
    /// Noisy LogP: a JSON file of per-message distributions.
    pub noise: Option<std::path::PathBuf>,
}

fn reject(given: bool, flag: &str, algo: AlgoName) -> Result<(), String> {
    if given {
        let name = serde_json::to_value(algo)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        return Err(format!("{flag} does not apply to --algo {name}"));
    }
    Ok(())
}

/// Resolves the algorithm flags for `n` processes of which about `dead` are dead before the
/// operation (the gossip model needs the active count); errors are one line.
pub fn resolve_algo(g: &AlgoSpec, n: u32, logp: LogP, dead: u32) -> Result<Algo, String> {
    let treeish = matches!(g.algo, AlgoName::CorrectedTree | AlgoName::TreeAck);
    reject(!treeish && g.tree.is_some(), "--tree", g.algo)?;
    reject(!treeish && g.order.is_some(), "--order", g.algo)?;
    let is_ct = g.algo == AlgoName::CorrectedTree;
    reject(!is_ct && g.correction.is_some(), "--correction", g.algo)?;
    reject(!is_ct && g.start.is_some(), "--start", g.algo)?;
    let gossipy = matches!(g.algo, AlgoName::CorrectedGossip | AlgoName::Gossip);
    reject(
        g.algo != AlgoName::CorrectedGossip && g.variant.is_some(),
        "--variant",
        g.algo,
    )?;
    reject(!gossipy && g.gossip_rounds.is_some(), "--gossip-rounds", g.algo)?;
    reject(!gossipy && g.correction_time.is_some(), "--correction-time", g.algo)?;
    let tree = g
        .tree
        .as_deref()
        .map(spec::tree)
        .transpose()?
        .unwrap_or(TreeKind::Binomial);
    let order = g.order.unwrap_or(Order::Interleaved);
    Ok(match g.algo {
        AlgoName::CorrectedTree => {
            let correction = g
                .correction
                .as_deref()
                .map(spec::correction)
                .transpose()?
                .unwrap_or(Correction::Checked);
            let start = g.start.unwrap_or(Start::Synchronized);
            Algo::CorrectedTree {
                tree,
                order,
                correction,
                start,
            }
        }
        AlgoName::CorrectedGossip | AlgoName::Gossip => {
            let variant = if g.algo == AlgoName::Gossip {
                Variant::Gos
            } else {
                g.variant
                    .as_deref()
                    .map(spec::variant)
                    .transpose()?
                    .unwrap_or(Variant::Ccg)
            };
            if g.correction_time.is_some() && !matches!(variant, Variant::Ocg { .. }) {
                return Err("--correction-time applies to --variant ocg only".into());
            }
            crate::experiment::defaults::gossip(
                variant,
                n,
                n.saturating_sub(dead).max(1),
                logp,
                g.gossip_rounds,
                g.correction_time,
            )?
        }
        AlgoName::Big => Algo::Big,
        AlgoName::Bfb => Algo::Bfb,
        AlgoName::TreeAck => Algo::TreeAck { tree, order },
        AlgoName::BmgBuild | AlgoName::Dissemination | AlgoName::FailureNotices => {
            return Err("--algo bmg-build, dissemination and failure-notices run in `ftcoll sim` only".into());
        }
    })
}

/// The LogGP parameters of `--L --o` and the LogGP flags (LogP when none is given).
pub fn loggp(logp: LogP, a: &LoggpSpec) -> Result<LogGP, String> {
    // Each at most 2^32, as `--L` and `--o` (`LogP::MAX`): a time far beyond wrapped around
    // in the engines' sums (`--g 18446744073709551615` made broadcasts faster).
    for (flag, v) in [("--os", a.os), ("--or", a.or), ("--g", a.g)] {
        if let Some(v) = v.filter(|&v| v > LogP::MAX) {
            return Err(format!("{flag} must be at most {} (got {v})", LogP::MAX));
        }
    }
    let gp = LogGP::new(
        logp.l,
        a.os.unwrap_or(logp.o),
        a.or.unwrap_or(logp.o),
        a.g.unwrap_or(0),
        0,
    )
    .map_err(|e| format!("--os/--or: {e}"))?;
    match (a.big_g, a.bytes) {
        (None, None) => Ok(gp),
        (Some(g), Some(k)) => gp.with_bytes(g, k).map_err(|e| format!("--G: {e}")),
        (Some(_), None) => Err("--G needs --bytes (the message size k: each send takes G·(k−1) longer)".into()),
        (None, Some(_)) => Err("--bytes applies with --G only".into()),
    }
}
