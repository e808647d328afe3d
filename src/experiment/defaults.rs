//! Parameters the papers' models choose when the user does not: the gossip time `T` and OCG's
//! correction time `C` (Corrected Gossip eqs. (3)–(5), Claim 2), and the fault-free latency
//! that bounds when random online failures happen.

use crate::experiment::algo::Algo;
use crate::model::{
    DEFAULT_DELTA, GossipCurve, LogP, ModelError, Time, TreeShape, c_for_ocg, k_hat, l_ff_scc, t_bfb, t_big, t_opt_ccg,
    t_opt_fcg, t_opt_ocg, tree_latency,
};
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::topology::TreeKind;

fn err(e: ModelError) -> String {
    format!("model: {e}")
}

/// The model's shape for a topology tree kind.
pub fn shape(k: TreeKind) -> TreeShape {
    match k {
        TreeKind::Kary(k) => TreeShape::Kary(k),
        TreeKind::Binomial => TreeShape::Binomial,
        TreeKind::Lame(k) => TreeShape::Lame(k),
        TreeKind::Optimal => TreeShape::Optimal,
    }
}

/// GOS: the smallest `T` (multiple of `O`) with `n − c(T + L + O) < δ`, i.e. gossip alone
/// colors everyone with probability about `1 − δ` (Corrected Gossip, remark after Lemma 1).
pub fn t_gos(total: u32, active: u32, logp: LogP) -> Result<Time, String> {
    let mut curve = GossipCurve::new(total.into(), active.into(), logp).map_err(err)?;
    let mut t = 0;
    while active as f64 - curve.at_correction_start(t).map_err(err)? >= DEFAULT_DELTA {
        t += logp.o;
    }
    Ok(t)
}

/// Resolves a corrected-gossip variant: `T` (and OCG's `C`) from the model unless given.
/// OCG, CCG and FCG (f = 1) run at their model optimum plus one `O` (eqs. (3), (4), (5); the
/// paper: "in all our experiments, we added one O to T", §III.B Discussion) and OCG with
/// Claim 2's `C` with its extra `O`. FCG with f ≠ 1 needs `--gossip-rounds`: Appendix B's
/// eq. (5) is derived for f = 1 only.
pub fn gossip(
    variant: Variant,
    total: u32,
    active: u32,
    logp: LogP,
    t: Option<Time>,
    c: Option<Time>,
) -> Result<Algo, String> {
    let (big, small) = (u64::from(total), u64::from(active));
    let t = match (t, variant) {
        (Some(t), _) => t,
        (None, Variant::Gos) => t_gos(total, active, logp)?,
        (None, Variant::Ocg { .. }) => t_opt_ocg(DEFAULT_DELTA, big, small, logp).map_err(err)?.recommended_t,
        (None, Variant::Ccg) => t_opt_ccg(DEFAULT_DELTA, big, small, logp).map_err(err)?.recommended_t,
        (None, Variant::Fcg { f: 1 }) => {
            t_opt_fcg(DEFAULT_DELTA, big, small, 1, logp)
                .map_err(err)?
                .recommended_t
        }
        (None, Variant::Fcg { f }) => {
            return Err(format!(
                "--variant fcg:{f} needs --gossip-rounds: the paper's T_opt for FCG (eq. (5), Appendix B) is derived for f = 1 only"
            ));
        }
    };
    let variant = match variant {
        Variant::Ocg { .. } => {
            let c = match c {
                Some(c) => c,
                None => c_for_ocg(k_hat(DEFAULT_DELTA, big, small, t, logp).map_err(err)?, logp, true),
            };
            Variant::Ocg { c }
        }
        v => v,
    };
    Ok(Algo::CorrectedGossip { variant, t })
}

/// A fault-free latency estimate for the algorithm: the window in which random online
/// failures are drawn.
pub fn fault_free_latency(algo: &Algo, n: u32, logp: LogP) -> Time {
    let n64 = u64::from(n);
    let lff = l_ff_scc(logp).unwrap_or(0);
    match algo {
        Algo::CorrectedTree { tree, .. } => tree_latency(shape(*tree), n64, logp).unwrap_or(0) + lff,
        Algo::CorrectedGossip { t, .. } => t + 2 * logp.hop() + lff,
        Algo::Big => t_big(n64, logp).unwrap_or(0),
        Algo::Bfb => t_bfb(n64, logp).unwrap_or(0),
        Algo::TreeAck { tree, .. } => 2 * tree_latency(shape(*tree), n64, logp).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t_of(v: Variant) -> Result<Time, String> {
        match gossip(v, 1024, 1024, LogP { l: 1, o: 1 }, None, None)? {
            Algo::CorrectedGossip { t, .. } => Ok(t),
            _ => Err("not gossip".into()),
        }
    }

    #[test]
    fn every_corrected_gossip_variant_runs_at_t_opt_plus_o() {
        // CG §III.B Discussion: "in all our experiments, we added one O to T"; Figures 3 and 5
        // name T = 24 (OCG) and 25 (CCG) at N = 1024, L = O = 1.
        assert_eq!(t_of(Variant::Ocg { c: 0 }), Ok(24));
        assert_eq!(t_of(Variant::Ccg), Ok(25));
        let fcg = t_opt_fcg(DEFAULT_DELTA, 1024, 1024, 1, LogP { l: 1, o: 1 }).unwrap();
        assert_eq!(t_of(Variant::Fcg { f: 1 }), Ok(fcg.t + 1));
        // Eq. (5) is for f = 1 only: other f must name T, not silently get CCG's.
        let e = t_of(Variant::Fcg { f: 2 }).unwrap_err();
        assert!(e.contains("--gossip-rounds") && !e.contains('\n'), "{e}");
        assert_eq!(
            gossip(Variant::Fcg { f: 2 }, 1024, 1024, LogP { l: 1, o: 1 }, Some(30), None)
                .map(|a| matches!(a, Algo::CorrectedGossip { t: 30, .. })),
            Ok(true)
        );
    }
}
