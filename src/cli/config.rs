//! Resolution of `sim`/`model` flags into a validated experiment: every impossible
//! combination is a one-line error here, before anything runs.

use crate::cli::args::{AlgoArgs, AlgoName, OrderName, SimArgs, StartName};
use crate::cli::spec;
use crate::model::{LogGP, LogP};
use crate::protocol::bcast::Start;
pub use crate::protocol::bcast::algo::{Algo, corr_name, tree_name};
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::protocol::bcast::correction::Correction;
use crate::sim::{DeadBefore, Experiment, Faults, Receives};
use crate::topology::{Order, TreeKind};

/// A validated `sim` / `model` invocation.
#[derive(Clone, Debug)]
pub struct Setup {
    pub algo: Algo,
    pub experiment: Experiment,
    /// The fault flag as given, for the report header.
    pub faults_text: String,
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
pub fn resolve_algo(g: &AlgoArgs, n: u32, logp: LogP, dead: u32) -> Result<Algo, String> {
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
    let order = match g.order.unwrap_or(OrderName::Interleaved) {
        OrderName::Interleaved => Order::Interleaved,
        OrderName::InOrder => Order::InOrder,
    };
    Ok(match g.algo {
        AlgoName::CorrectedTree => {
            let correction = g
                .correction
                .as_deref()
                .map(spec::correction)
                .transpose()?
                .unwrap_or(Correction::Checked);
            let start = match g.start.unwrap_or(StartName::Synchronized) {
                StartName::Synchronized => Start::Synchronized,
                StartName::Overlapped => Start::Overlapped,
            };
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
            crate::cli::defaults::gossip(
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
pub fn loggp(logp: LogP, a: &crate::cli::args::LoggpArgs) -> Result<LogGP, String> {
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

impl Setup {
    /// Validates the flags; errors are one line.
    pub fn from_args(a: &SimArgs) -> Result<Setup, String> {
        crate::cli::overlay::reject_unused(&a.overlay)?;
        if a.nodes < 2 {
            return Err(format!("--nodes must be at least 2, got {}", a.nodes));
        }
        let logp = LogP::new(a.l, a.o)?;
        if a.detect_delay > LogP::MAX {
            return Err(format!(
                "--detect-delay must be at most {} (got {})",
                LogP::MAX,
                a.detect_delay
            ));
        }
        let gp = loggp(logp, &a.loggp)?;
        // The closed forms behind the defaults (gossip T, the online-fault window) have a
        // LogP form only: they get the LogP that counts the same hop and send slot.
        let logp = gp.counting_logp();
        if a.runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        let n = a.nodes;
        let dead_guess = match spec::dead(&a.faults)? {
            DeadBefore::Count(c) => c,
            DeadBefore::Fraction(f) => Faults::fraction_count(f, n),
            DeadBefore::List(l) => l.len() as u32,
        };
        let algo = resolve_algo(&a.alg, n, logp, dead_guess)?;
        let before = match &a.dead {
            Some(list) => DeadBefore::List(spec::ranks(list)?),
            None => spec::dead(&a.faults)?,
        };
        let online_list = a.kill.as_deref().map(spec::kills).transpose()?.unwrap_or_default();
        let horizon = crate::cli::defaults::fault_free_latency(&algo, n, logp).max(1);
        let faults = Faults {
            before,
            online: a.online_faults,
            online_horizon: horizon,
            online_list,
            detect_delay: a.detect_delay,
        };
        faults.validate(n)?;
        let threads = match a.threads {
            Some(0) => return Err("--threads must be at least 1".into()),
            Some(t) => t,
            None => std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1),
        };
        let noise = a
            .loggp
            .noise
            .as_deref()
            .map(|p| crate::sim::Noise::load(p, gp).map(std::sync::Arc::new))
            .transpose()?;
        let experiment = Experiment {
            n,
            logp: gp,
            noise,
            faults,
            runs: a.runs,
            seed: a.seed,
            threads,
            max_events: a.max_events.unwrap_or_else(|| Experiment::default_max_events(n)),
            receives: match a.receives.as_deref() {
                Some("parallel") => Receives::Parallel,
                _ => Receives::Queued,
            },
        };
        let faults_text = match &a.dead {
            Some(l) => format!("dead={l}"),
            None => a.faults.clone(),
        };
        Ok(Setup {
            algo,
            experiment,
            faults_text,
        })
    }
}
