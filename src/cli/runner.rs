//! Runs a resolved [`Setup`] on the simulator: builds the protocol's shared configuration once
//! and drives the Monte Carlo runner (or a single traced run).

use crate::cli::config::{Algo, Setup};
use crate::protocol::bcast::bfb::{Bfb, BfbShared};
use crate::protocol::bcast::big::{Big, BigShared};
use crate::protocol::bcast::corrected_gossip::{CorrectedGossip, GossipShared};
use crate::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use crate::protocol::bcast::tree_ack::{TreeAck, TreeAckShared};
use crate::protocol::{Protocol, SharedInfo};
use crate::sim::{Experiment, Summary, TraceRow, run_many, trace_one};
use crate::topology::Tree;

/// Runs the experiment, calling `progress` with completed run counts.
pub fn simulate(setup: &Setup, progress: &(dyn Fn(u64) + Sync)) -> Result<Summary, String> {
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
            run_many::<CorrectedTree>(&shared, ex, progress)
        }
        Algo::CorrectedGossip { variant, t } => {
            let shared = GossipShared::new(ex.n, ex.logp, *t, *variant);
            run_many::<CorrectedGossip>(&shared, ex, progress)
        }
        Algo::Big => run_many::<Big>(&BigShared::new(ex.n), ex, progress),
        Algo::Bfb => run_many::<Bfb>(&BfbShared::new(ex.n, ex.logp), ex, progress),
        Algo::TreeAck { tree, order } => {
            let t = Tree::build(*tree, *order, ex.n, ex.logp)?;
            run_many::<TreeAck>(&TreeAckShared::new(t), ex, progress)
        }
    })
}

fn traced<P: Protocol>(shared: &P::Shared, ex: &Experiment) -> Vec<TraceRow>
where
    P::Shared: SharedInfo,
{
    trace_one::<P>(shared, ex, 0)
}

/// The event trace of run 0 of the experiment.
pub fn trace(setup: &Setup) -> Result<Vec<TraceRow>, String> {
    let ex = &setup.experiment;
    Ok(match &setup.algo {
        Algo::CorrectedTree {
            tree,
            order,
            correction,
            start,
        } => {
            let t = Tree::build(*tree, *order, ex.n, ex.logp)?;
            traced::<CorrectedTree>(&TreeShared::new(t, ex.logp, *correction, *start), ex)
        }
        Algo::CorrectedGossip { variant, t } => {
            traced::<CorrectedGossip>(&GossipShared::new(ex.n, ex.logp, *t, *variant), ex)
        }
        Algo::Big => traced::<Big>(&BigShared::new(ex.n), ex),
        Algo::Bfb => traced::<Bfb>(&BfbShared::new(ex.n, ex.logp), ex),
        Algo::TreeAck { tree, order } => {
            let t = Tree::build(*tree, *order, ex.n, ex.logp)?;
            traced::<TreeAck>(&TreeAckShared::new(t), ex)
        }
    })
}
