//! A bench run's LogP model: o and L given, calibrated (`params`) or measured, the node's own
//! cost per hop folded into the overheads ([`super::node_hop`]), processor sharing, the
//! measured distributions of o_s, o_r and L (noisy LogP: a calibration's, or those of the
//! run's own ping-pong); and the prediction of a finished run on the simulator.

use std::sync::Arc;

use super::node_hop::{HopSetup, NodeHop, measure as measure_hop};
use super::{BenchEnv, BenchOutcome, Checked};
use crate::experiment::predict::{BenchModel, Prediction, SharedCores, node_noise, predict, shared_o_ns};
use crate::runtime::TransportKind;
use crate::runtime::cluster::PollMode;
use crate::runtime::logp::{Calibration, Estimate, estimate_samples};
use crate::sim::Noise;
use crate::sim::noise::Loss;
use crate::transport::udp::UdpConfig;

/// The model a run's protocols count in and its prediction uses.
pub struct RunModel {
    /// The saved calibration the run was given.
    pub cal: Option<Calibration>,
    /// The transport's fresh estimate (when o or L were neither given nor calibrated).
    pub est: Option<Estimate>,
    /// The node's own cost per hop folded into the overheads (`None`: o and L given, or a
    /// launched run).
    pub node_hop: Option<NodeHop>,
    /// The LogGP of the run, after processor sharing.
    pub model: BenchModel,
    /// Noisy LogP: the distributions of o_s, o_r and L (the calibration's, else the fresh
    /// estimate's), in the model's units.
    pub noise: Option<Arc<Noise>>,
    /// The node's mean overhead before processor sharing, ns.
    pub own_o_ns: u64,
    /// The model's mean o and its L, ns.
    pub o_ns: u64,
    pub l_ns: u64,
}

/// Errors unless calibration `c` was measured on `transport` with `size`-byte messages: o and L
/// of another transport or size would predict another machine (a UDP calibration was taken for
/// an in-process run without a word).
fn fits_run(c: &Calibration, transport: TransportKind, size: usize) -> Result<(), String> {
    let run = transport.name();
    if c.transport != run {
        return Err(format!(
            "--params: the calibration is of the '{}' transport and this run's is {run} (ftcoll logp --transport {run} --save FILE makes one)",
            c.transport.escape_debug()
        ));
    }
    if c.size != size {
        return Err(format!(
            "--params: the calibration's messages are {} bytes and this run's {size} (ftcoll logp --size {size} --save FILE makes one)",
            c.size
        ));
    }
    Ok(())
}

impl Checked {
    /// Sets up o and L (given, calibrated or measured, with the node's own hop measured on
    /// this machine for a local or `procs` run whose o and L were not given) and the model
    /// the protocols and the prediction use; `poll` is how the run's workers wait.
    /// `cores`: the machine's.
    pub(super) fn run_model(&self, env: &BenchEnv, poll: PollMode, cores: usize) -> Result<RunModel, String> {
        let a = &self.spec;
        let cal = a.params.as_deref().map(Calibration::load).transpose()?;
        if let Some(c) = &cal {
            fits_run(c, a.transport, a.size)?;
        }
        // --o-ns gives one o (o_s = o_r); a calibration and the estimate give both.
        let cal_ns = cal.as_ref().map(|c| c.os_or_l_ns());
        let given_o = a.o_ns.map(|o| (o, o)).or(cal_ns.map(|(os, or, _)| (os, or)));
        let given_l = a.l_ns.or(cal_ns.map(|(_, _, l)| l));
        // The estimate's round trips also give the distributions a calibration saves
        // (`ftcoll logp --save`: the same ping-pongs, 2000 or more and 50 ms of them at least),
        // for the noisy prediction.
        let (est, est_noise): (Option<Estimate>, Option<serde_json::Value>) = match (given_o, given_l) {
            (Some(_), Some(_)) => (None, None),
            _ => {
                let trips = estimate_samples(a.transport, 2000, a.size)?;
                (Some(trips.estimate()), trips.noise())
            }
        };
        // The transport's overheads (measured, calibrated or given).
        let (tr_os, tr_or) = given_o.or(est.map(|e| (e.o_send_ns, e.o_recv_ns))).unwrap_or((1, 1));
        let l_ns = given_l.or(est.map(|e| e.l_ns)).unwrap_or(1);
        // What a node pays per hop beyond the transport (`node_hop`), measured now by this
        // process on the cores its workers use: on a virtual machine the same 2-node hop moved
        // by 1.5x between processes (docs/measurements.md), so a saved figure would not be this
        // run's. Not when o or L were given, nor for a launched run (its hosts are not this one).
        let node_hop = if a.o_ns.is_some() || a.l_ns.is_some() || a.join.is_some() {
            None
        } else {
            let setup = HopSetup {
                transport: a.transport,
                size: a.size,
                poll,
                pin: !a.no_pin,
                auth: if a.transport == TransportKind::Udp {
                    crate::experiment::launch::job::fresh_session(self.key(env)?)?
                } else {
                    None
                },
                os_ns: tr_os,
                or_ns: tr_or,
                l_ns,
                // Workers that step nodes in turn: messages between nodes of one core.
                one_core: self.workers(cores).1.is_some() && self.workers_take_turns(poll),
                // In process, a receiver reads a ring per node that ever sent to it (below
                // `DIRECT_MAX` ranks; above, a doorbell word per 64 senders): up to its
                // other nodes'.
                rings: (a.transport == TransportKind::Inproc && a.nodes <= crate::transport::inproc::DIRECT_MAX)
                    .then(|| a.nodes - 1),
            };
            let m = measure_hop(&setup)?;
            Some(
                NodeHop::fold(m.hop_ns, tr_os, tr_or, l_ns, m.visit_ns, m.busy_ns)
                    .with_local(m.local, tr_os)
                    .with_ring_poll(m.ring_poll_ns),
            )
        };
        // The node's overheads: the transport's and the node's own share of each hop.
        let (own_os, own_or) = node_hop.map_or((tr_os, tr_or), |h| h.node_o_ns(tr_os, tr_or));
        let own_o_ns = ((own_os + own_or) / 2).max(1);
        let model = BenchModel::new(
            shared_o_ns(own_os, a.nodes, a.shared_cores),
            shared_o_ns(own_or, a.nodes, a.shared_cores),
            l_ns,
        );
        if model.loggp.l > crate::model::LogP::MAX {
            // The protocols count in units of o/16 (`BenchModel::RESOLUTION`); the group's
            // build refuses such an L too, but in words that name no flag.
            let from = if a.l_ns.is_some() {
                "--L-ns"
            } else {
                "the calibration's L"
            };
            return Err(format!(
                "{from} ({l_ns} ns) is too long for an overhead of {} ns: L may be at most {} ns, 2^32 of the model's time unit ({} ns)",
                model.os_ns.min(model.or_ns),
                u128::from(crate::model::LogP::MAX) * u128::from(model.unit_ns),
                model.unit_ns
            ));
        }
        let o_ns = model.mean_o_ns();
        // A calibration that gave every parameter also gives their distributions, and so does
        // the estimate when it measured them all: the prediction then draws each message's
        // o_s, o_r and L from them (noisy LogP). Not when o or L was given.
        let measured = cal.as_ref().map(|c| &c.noise).or(est_noise.as_ref());
        let noise = match measured {
            Some(dists) if a.o_ns.is_none() && a.l_ns.is_none() && !dists.is_null() => {
                // The transport's distributions, stretched so that their medians are the node's
                // overheads (after processor sharing), in the model's unit.
                Some(node_noise(dists, tr_os, tr_or, &model)?)
            }
            _ => None,
        };
        // Injected loss: each lost copy of a message costs its sender's retransmission timer.
        let noise = match loss_model(a.loss, model.unit_ns) {
            None => noise,
            lossy => Some(Arc::new(
                noise
                    .map_or_else(|| Noise::constant(model.loggp), |n| (*n).clone())
                    .with_loss(lossy),
            )),
        };
        Ok(RunModel {
            cal,
            est,
            node_hop,
            model,
            noise,
            own_o_ns,
            o_ns,
            l_ns,
        })
    }

    /// The LogP prediction for a finished run (`None` with `no_model`).
    pub fn prediction(&self, out: &BenchOutcome) -> Result<Option<Prediction>, String> {
        let a = &self.spec;
        if a.no_model {
            return Ok(None);
        }
        predict(
            &out.algo,
            a.nodes,
            &out.model,
            out.model_cores.map(|cores| SharedCores {
                cores,
                visit_ns: out.model_visit_ns,
                work_ns: out.model_work_ns,
                local_work_ns: out.model_local_work_ns,
                local_or_ns: out.model_local_or_ns,
                ring_poll_ns: out.model_ring_poll_ns,
            }),
            out.noise.as_ref(),
            &self.kills,
            (a.warmup, a.iterations),
        )
        .map(Some)
    }
}

/// The model of `bench --loss p` in units of `unit_ns` ns (`None` without loss): a lost copy
/// of a message is sent again when the sender's retransmission timer expires, which on an
/// idle link (a round trip far below the RTO's floor) is the transport's floor, `rto_min`
/// plus the `ack_delay_one_way` a receiver holds its acknowledgement on a link that carries
/// DATA one way, as a broadcast tree's do (`transport/udp/reliable.rs`, `TWO_WAY`), linear
/// for a thin flight's first expiries, then doubling up to `rto_max` ([`Loss`]). A tree link
/// that the checked correction also uses the other way waits `ack_delay` instead, 0.3 ms more,
/// which the model does not tell apart: there a lost message is seldom left to the timer.
pub(crate) fn loss_model(p: f64, unit_ns: u64) -> Option<Loss> {
    if p <= 0.0 {
        return None;
    }
    let cfg = UdpConfig::default();
    let units = |d: std::time::Duration| (d.as_nanos() as u64 / unit_ns.max(1)).max(1);
    Some(Loss {
        p,
        rto: units(cfg.rto_min + cfg.ack_delay_one_way),
        linear: Loss::LINEAR,
        max: units(cfg.rto_max + cfg.ack_delay_one_way),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_model_is_the_transports_retransmission_rule() {
        // The simulator cannot see the transport (it sits beside it): the two agree here.
        assert_eq!(Loss::LINEAR, crate::transport::udp::reliable::LINEAR_TIMEOUTS);
        assert_eq!(loss_model(0.0, 50), None);
        let l = loss_model(0.1, 50).unwrap();
        let cfg = UdpConfig::default();
        assert_eq!(u128::from(l.rto) * 50, (cfg.rto_min + cfg.ack_delay_one_way).as_nanos());
        assert_eq!(u128::from(l.max) * 50, (cfg.rto_max + cfg.ack_delay_one_way).as_nanos());
        assert_eq!(l.p, 0.1);
    }
}
