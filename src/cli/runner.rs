//! Runs a resolved [`Setup`] on the simulator: builds the protocol's shared configuration once
//! and hands it, with the protocol type, to one of the drivers (Monte Carlo or a traced run).

use crate::cli::config::{Algo, Setup};
use crate::protocol::bcast::bfb::{Bfb, BfbShared};
use crate::protocol::bcast::big::{Big, BigShared};
use crate::protocol::bcast::corrected_gossip::{CorrectedGossip, GossipShared, Variant};
use crate::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use crate::protocol::bcast::correction::{Correction, FAILPROOF_CAP};
use crate::protocol::bcast::tree_ack::{TreeAck, TreeAckShared};
use crate::protocol::{Protocol, SharedInfo};
use crate::sim::{Experiment, Summary, TraceRow, run_many, trace_one};
use crate::topology::Tree;

/// Something done with a protocol type and its shared configuration.
trait Driver {
    type Out;
    fn drive<P: Protocol>(self, shared: &P::Shared, ex: &Experiment) -> Self::Out
    where
        P::Shared: SharedInfo;
}

/// Builds the algorithm's shared configuration and runs `d` on it: the one place that maps
/// an [`Algo`] to a protocol type.
fn dispatch<D: Driver>(setup: &Setup, d: D) -> Result<D::Out, String> {
    let ex = &setup.experiment;
    Ok(match &setup.algo {
        Algo::CorrectedTree {
            tree,
            order,
            correction,
            start,
        } => {
            let t = Tree::build(*tree, *order, ex.n, ex.logp)?;
            let shared = TreeShared::new(t, ex.logp, *correction, *start);
            match correction {
                Correction::FailProof { .. } => d.drive::<CorrectedTree<FAILPROOF_CAP>>(&shared, ex),
                _ => d.drive::<CorrectedTree<0>>(&shared, ex),
            }
        }
        Algo::CorrectedGossip { variant, t } => {
            let shared = GossipShared::new(ex.n, ex.logp, *t, *variant);
            match variant {
                Variant::Fcg { .. } => d.drive::<CorrectedGossip<FAILPROOF_CAP>>(&shared, ex),
                _ => d.drive::<CorrectedGossip<0>>(&shared, ex),
            }
        }
        Algo::Big => d.drive::<Big>(&BigShared::new(ex.n), ex),
        Algo::Bfb => d.drive::<Bfb>(&BfbShared::new(ex.n, ex.logp), ex),
        Algo::TreeAck { tree, order } => {
            let t = Tree::build(*tree, *order, ex.n, ex.logp)?;
            d.drive::<TreeAck>(&TreeAckShared::new(t), ex)
        }
    })
}

struct MonteCarlo<'a>(&'a (dyn Fn(u64) + Sync));

impl Driver for MonteCarlo<'_> {
    type Out = Summary;
    fn drive<P: Protocol>(self, shared: &P::Shared, ex: &Experiment) -> Summary
    where
        P::Shared: SharedInfo,
    {
        run_many::<P>(shared, ex, self.0)
    }
}

struct Traced;

impl Driver for Traced {
    type Out = Vec<TraceRow>;
    fn drive<P: Protocol>(self, shared: &P::Shared, ex: &Experiment) -> Vec<TraceRow>
    where
        P::Shared: SharedInfo,
    {
        trace_one::<P>(shared, ex, 0)
    }
}

/// Runs the experiment, calling `progress` with completed run counts.
pub fn simulate(setup: &Setup, progress: &(dyn Fn(u64) + Sync)) -> Result<Summary, String> {
    dispatch(setup, MonteCarlo(progress))
}

/// The event trace of run 0 of the experiment.
pub fn trace(setup: &Setup) -> Result<Vec<TraceRow>, String> {
    dispatch(setup, Traced)
}
