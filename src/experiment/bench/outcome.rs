//! A finished bench run, assembled for the report: what ran (the algorithm, the workers and
//! how they waited), the model it was counted and predicted in, and what the cluster measured.

use std::sync::Arc;

use super::model::RunModel;
use crate::experiment::algo::Algo;
use crate::experiment::predict::BenchModel;
use crate::runtime::cluster::{ClusterResult, PollMode};
use crate::runtime::logp::{Calibration, Estimate};
use crate::sim::Noise;

use super::node_hop::NodeHop;

/// A finished run (before its prediction).
pub struct BenchOutcome {
    pub algo: Algo,
    pub res: ClusterResult,
    pub est: Option<Estimate>,
    pub cal: Option<Calibration>,
    pub model: BenchModel,
    /// The cores the model puts the nodes on (`None`: a core per node): the workers' when
    /// they serve several nodes each, the host's when node processes outnumber its cores.
    pub model_cores: Option<u32>,
    /// With `model_cores`: a core's visit of a node with nothing to do, ns (a local run's
    /// workers step their nodes in turn: the node-hop run's measured visit cost; 0 where the
    /// kernel schedules node processes).
    pub model_visit_ns: u64,
    /// With `model_visit_ns`: what a node's visit with work holds its worker after its last
    /// send or receive, ns (the node-hop run's measured passes with progress), and
    /// `model_local_work_ns` when the visit had no message from another core (one core's
    /// 3-node run beyond two of its 2-node hops; `model_work_ns` when not measured).
    pub model_work_ns: u64,
    pub model_local_work_ns: u64,
    /// With `model_visit_ns`: the model's receive of a message from a node of the same core,
    /// ns (one core's 2-node hop beyond the node's send; 0: not measured, `o_r`).
    pub model_local_or_ns: u64,
    /// With `model_visit_ns`: what each node beyond the first that sends to a node adds to
    /// the node's visits, ns (an in-process poll reads a ring per sender: the node-hop
    /// calibration's `ring_poll_ns`; 0: not measured, or not in process).
    pub model_ring_poll_ns: f64,
    /// Noisy LogP: the calibration's distributions of o_s, o_r and L, in the model's units,
    /// and the injected loss (`bench --loss`).
    pub noise: Option<Arc<Noise>>,
    /// The loss model's retransmission timeout is the run's (its transports' mean wait before
    /// a timer retransmission), not the transport's floor.
    pub loss_rto_measured: bool,
    /// The node's own cost per hop folded into the model's overheads (`None`: o and L given,
    /// or a launched run).
    pub node_hop: Option<NodeHop>,
    pub workers: usize,
    pub poll: PollMode,
    pub o_ns: u64,
    pub l_ns: u64,
    pub own_o_ns: u64,
    pub cores: usize,
}

/// How the run's nodes were hosted.
pub(super) struct Hosting {
    pub(super) workers: usize,
    pub(super) poll: PollMode,
    pub(super) model_cores: Option<u32>,
    /// Whether the model's shared cores are workers stepping their nodes in turn.
    pub(super) workers_take_turns: bool,
    pub(super) cores: usize,
}

impl BenchOutcome {
    /// The outcome of a run of `algo` hosted as `h`, counted in `m`, that measured `res`.
    pub(super) fn assemble(algo: Algo, m: RunModel, h: Hosting, res: ClusterResult) -> BenchOutcome {
        let (noise, loss_rto_measured) = measured_timeout(m.noise, &res, m.model.unit_ns);
        // Workers that step their nodes in turn: the node-hop run's visit and work costs (the
        // work charge only with a visit cost, as the model has it).
        let (model_visit_ns, model_work_ns, model_local_work_ns, model_local_or_ns, model_ring_poll_ns) =
            match (h.model_cores, h.workers_take_turns, m.node_hop) {
                (Some(_), true, Some(hop)) if hop.visit_ns > 0 => (
                    hop.visit_ns,
                    hop.work_ns,
                    hop.local_work_ns.unwrap_or(hop.work_ns),
                    hop.local_or_ns,
                    hop.ring_poll_ns.unwrap_or(0.0),
                ),
                _ => (0, 0, 0, 0, 0.0),
            };
        BenchOutcome {
            algo,
            res,
            est: m.est,
            cal: m.cal,
            model: m.model,
            model_cores: h.model_cores,
            model_visit_ns,
            model_work_ns,
            model_local_work_ns,
            model_local_or_ns,
            model_ring_poll_ns,
            noise,
            loss_rto_measured,
            node_hop: m.node_hop,
            workers: h.workers,
            poll: h.poll,
            o_ns: m.o_ns,
            l_ns: m.l_ns,
            own_o_ns: m.own_o_ns,
            cores: h.cores,
        }
    }
}

/// Under injected loss, the timeout a lost copy costs as the run's transports waited it: the
/// mean wait of their timer retransmissions (an RTO above its floor where the round trips
/// the estimator sampled were long, the timer wheel's tick), in units of `unit_ns`; the
/// floor the model was built with where no timer fired.
fn measured_timeout(noise: Option<Arc<Noise>>, res: &ClusterResult, unit_ns: u64) -> (Option<Arc<Noise>>, bool) {
    let t = &res.transport;
    match noise {
        Some(n) if t.timeouts > 0 && n.loss.is_some() => {
            let mut loss = n.loss.expect("checked");
            loss.rto = (t.timeout_wait_ns / t.timeouts / unit_ns.max(1)).max(1);
            loss.max = loss.max.max(loss.rto);
            (Some(Arc::new((*n).clone().with_loss(Some(loss)))), true)
        }
        n => (n, false),
    }
}
