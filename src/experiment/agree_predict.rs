//! The model of a network `agree` run, as `bench` has one for broadcasts: ERA in the LogGP
//! simulator ([`crate::sim::agree`], the same `Era` code the nodes ran) with this machine's own
//! `o_s`, `o_r` and `L` ([`BenchModel`], from a ping-pong of ERA-sized messages on the run's
//! transport), on as many cores as the nodes had ([`crate::sim::timing`]'s shared cores), for
//! as many back-to-back agreements as the run measured failure-free. Compared per agreement
//! (first entry to the last return, both sides) and per node (entry to return), at p50 and
//! p99. The model is noisy LogP, as `bench`'s is: each message's `o_s`, `o_r` and `L` drawn from
//! the ping-pong's distributions, stretched so that their medians are the node's (`noise_for`).
//!
//! The overheads are the node's, as `bench`'s are ([`crate::experiment::bench::node_hop`]): a
//! failure-free 2-node agreement is run on the same transport before the comparison; divided by
//! the hops the simulator's 2-node agreement takes, it is one hop through an ERA node, and what
//! that takes beyond the transport's `o_s + L + o_r` (the ERA step, codec, the runtime's
//! bookkeeping) is charged to `o_s` and `o_r` in proportion to them.
//!
//! Where the nodes share a run's workers, a core visits its nodes in turn, as a worker steps
//! its share (not so node processes, which the kernel schedules):
//! a visit of a node with nothing to do costs what the 2-node calibration's workers measured
//! on their passes without progress (`AgreeBenchReport::idle_visit_ns`), and a message waits for its node's turn
//! ([`crate::sim::timing::Timing::set_visit`], the processor sharing `bench`'s model has too).
//! What the model leaves out, explicitly: the runtime's heartbeats (one per `--heartbeat-us`
//! per tree neighbour a node waits on, sharing the nodes' cores and sockets; by default their
//! period grows with the nodes per core, [`crate::runtime::agree::shared_heartbeat`], so a
//! core carries about as many as with a core per node), the coordinator's bookkeeping of
//! returns, and what a visit with work holds its worker beyond the node's hop. Failure classes are
//! not predicted but the post-failure one (the simulator's failure detector is modeled by a
//! fixed delay, the runtime's by heartbeats, so the detecting and stabilizing agreements are
//! not): with the run's killed nodes dead from the start and found at once, the agreements
//! after the stabilizing one ([`run_post_failure`]), against the run's post-failure class.
//! ERA §5.1 finds a post-failure agreement as fast as a failure-free one on a rebalanced tree
//! and about as fast on a mended one after a failure, and so does the model; a run whose
//! post-failure agreements are slower than their model has a cost on the survivors' path
//! that the protocol does not ask for. Only runs whose kills all come at one agreement and
//! that stall no node are compared (the runtime classes from the first kill on).

use std::sync::Arc;

use crate::experiment::bench::node_hop::NodeHop;
use crate::model::BenchModel;
use crate::protocol::agree::And64;
use crate::runtime::TransportKind;
use crate::runtime::agree::{AgreeBench, AgreeBenchReport, AgreeTransport};
use crate::runtime::agree_window::Class;
use crate::runtime::logp::{Ci, Estimate, estimate_samples};
use crate::sim::Noise;
use crate::sim::agree::{AgreeRun, AgreeSim, Kill, KillAt, run_once, run_post_failure};

/// Bytes of the messages the ping-pong measures: about an ERA message of a 64-bit value.
pub const ERA_MESSAGE_BYTES: usize = 48;

/// The most agreements one prediction simulates (percentiles settle long before).
pub const MAX_AGREEMENTS: u64 = 500;

/// Measured and modeled p50 and p99 of one latency, in µs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Compared {
    pub measured_p50_us: f64,
    pub predicted_p50_us: f64,
    pub ratio_p50: f64,
    pub measured_p99_us: f64,
    pub predicted_p99_us: f64,
    pub ratio_p99: f64,
}

impl Compared {
    fn new(measured: (f64, f64), predicted: (f64, f64)) -> Self {
        let ratio = |m: f64, p: f64| if p > 0.0 { m / p } else { f64::NAN };
        Compared {
            measured_p50_us: measured.0,
            predicted_p50_us: predicted.0,
            ratio_p50: ratio(measured.0, predicted.0),
            measured_p99_us: measured.1,
            predicted_p99_us: predicted.1,
            ratio_p99: ratio(measured.1, predicted.1),
        }
    }
}

/// The model of one run and how the failure-free agreements compare with it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AgreePrediction {
    pub model: BenchModel,
    /// The node's own cost per hop folded into the model's overheads (`None`: not measured).
    pub node_hop: Option<NodeHop>,
    /// The cores the simulated processes shared (`None`: one each).
    pub model_cores: Option<u32>,
    /// Noisy LogP: each message's `o_s`, `o_r` and `L` drawn from the ping-pong's
    /// distributions (stretched to the node's overheads), so p99 means something; without,
    /// every agreement of the model takes the same time.
    pub noisy: bool,
    /// Failure-free agreements simulated.
    pub agreements: u64,
    /// Per agreement: first entry to the last return.
    pub agreement: Compared,
    /// Per node: entry to return.
    pub node: Compared,
    /// The post-failure agreements, where the run killed nodes and measured some.
    pub post_failure: Option<PostFailure>,
}

/// The post-failure agreements, measured and modeled.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PostFailure {
    /// Post-failure agreements simulated (the killed nodes dead from the start).
    pub agreements: u64,
    /// Per agreement: first entry to the last return.
    pub agreement: Compared,
    /// Per node: entry to return.
    pub node: Compared,
}

/// The cores the nodes of a run shared: a thread run's workers when fewer than the nodes; a
/// `--procs` run's host cores when fewer than the processes.
pub fn model_cores(b: &AgreeBench, procs: bool, host_cores: usize) -> Option<u32> {
    let n = b.n as usize;
    let c = if procs { host_cores } else { b.workers.min(host_cores) };
    (c.max(1) < n).then_some(c.max(1) as u32)
}

/// The simulated counterpart of `b` under `model`: `agreements` failure-free agreements; on
/// shared `cores`, a core's visit of an idle node costs `visit_ns` (0: nothing).
pub fn simulated(b: &AgreeBench, model: &BenchModel, cores: Option<u32>, visit_ns: u64, agreements: u64) -> AgreeSim {
    let unit = model.unit_ns.max(1);
    AgreeSim {
        n: b.n,
        era: b.era,
        logp: model.mean_logp(),
        loggp: Some(model.loggp),
        noise: None,
        cores,
        // (A measured visit is at least a unit: a core does not switch for free.)
        visit: if cores.is_some() {
            ((visit_ns + unit / 2) / unit).max(u64::from(visit_ns > 0))
        } else {
            0
        },
        agreements: agreements.clamp(1, MAX_AGREEMENTS),
        detect_delay: 0,
        detect_jitter: 0,
        kills: Vec::new(),
        random_kills: 0,
        kill_horizon: 1,
        ack_on_error: true,
        max_events: 100_000_000,
    }
}

/// The prediction for a finished run under `model` (`None` when it measured no failure-free
/// agreement).
pub fn compare(
    b: &AgreeBench,
    r: &AgreeBenchReport,
    model: BenchModel,
    model_cores: Option<u32>,
) -> Result<Option<AgreePrediction>, String> {
    compare_with_hop(b, r, model, None, model_cores, None)
}

/// As [`compare`], with the node's hop that `model` includes and, for a noisy model, the
/// distributions its messages' costs are drawn from.
fn compare_with_hop(
    b: &AgreeBench,
    r: &AgreeBenchReport,
    model: BenchModel,
    node_hop: Option<NodeHop>,
    model_cores: Option<u32>,
    noise: Option<Arc<Noise>>,
) -> Result<Option<AgreePrediction>, String> {
    let Some(ff) = r
        .classes
        .first()
        .filter(|c| !c.agreement.is_empty() && !c.node.is_empty())
    else {
        return Ok(None);
    };
    // The idle visit the 2-node calibration measured (bench's processor sharing charges the
    // same: a message waits for its node's turn in its worker's round).
    let visit_ns = node_hop.as_ref().map_or(0, |h| h.visit_ns);
    let mut sim = simulated(b, &model, model_cores, visit_ns, ff.agreement.len());
    sim.noise = noise.clone();
    sim.validate()?;
    let run = checked(run_once::<And64>(&sim, b.seed)?, "this run")?;
    let (agreement, node) = against(ff, &run, &model);
    let post_failure = post_failure(b, r, &model, model_cores, visit_ns, noise.clone())?;
    Ok(Some(AgreePrediction {
        model,
        node_hop,
        model_cores,
        noisy: noise.is_some(),
        agreements: sim.agreements,
        agreement,
        node,
        post_failure,
    }))
}

/// The post-failure class of `r` against its model (`None` when the run killed no node,
/// killed nodes at different agreements, stalled one, or measured no post-failure
/// agreement): the same model with `b`'s killed nodes dead before
/// the first agreement and suspected at once by their neighbours, as many agreements as the
/// run measured in that class (at most [`MAX_AGREEMENTS`]) after the detecting and
/// stabilizing ones.
fn post_failure(
    b: &AgreeBench,
    r: &AgreeBenchReport,
    model: &BenchModel,
    model_cores: Option<u32>,
    visit_ns: u64,
    noise: Option<Arc<Noise>>,
) -> Result<Option<PostFailure>, String> {
    // The runtime classes from the first kill on: kills at other agreements put their own
    // detecting and stabilizing agreements in its post-failure class, and a stalled node
    // suspected while alive is dead there and alive in the model, so neither is compared.
    let one_moment = b.kills.windows(2).all(|w| w[0].1 == w[1].1) && b.stalls.is_empty();
    let Some(pf) = r
        .classes
        .get(POST_FAILURE)
        .filter(|c| !b.kills.is_empty() && one_moment && !c.agreement.is_empty() && !c.node.is_empty())
    else {
        return Ok(None);
    };
    let mut sim = simulated(b, model, model_cores, visit_ns, pf.agreement.len());
    sim.noise = noise;
    // The detecting and the stabilizing agreement come first.
    sim.agreements += 2;
    sim.kills = b
        .kills
        .iter()
        .map(|&(rank, _)| Kill {
            rank,
            at: KillAt::Before,
        })
        .collect();
    // The run's report does not depend on this second model: one that cannot be run or did
    // not complete is told, not the run's failure; one that saw a violation of ERA's
    // properties fails it.
    let run = match sim.validate().and_then(|()| run_post_failure::<And64>(&sim, b.seed)) {
        Ok(run) if run.violations.total() != 0 => {
            return Err(format!(
                "the model of this run's post-failure agreements saw {} violations",
                run.violations.total()
            ));
        }
        Ok(run) if !run.aborted => run,
        Ok(_) => {
            eprintln!(
                "ftcoll: warning: no model of the post-failure agreements: it did not complete (aborted at the event cap)"
            );
            return Ok(None);
        }
        Err(e) => {
            eprintln!("ftcoll: warning: no model of the post-failure agreements: {e}");
            return Ok(None);
        }
    };
    if run.latency.histogram().is_empty() {
        return Ok(None);
    }
    let (agreement, node) = against(pf, &run, model);
    Ok(Some(PostFailure {
        agreements: run.latency.histogram().len(),
        agreement,
        node,
    }))
}

/// `run`, or an error naming `what` if it aborted or saw a violation.
fn checked(run: AgreeRun, what: &str) -> Result<AgreeRun, String> {
    if run.aborted || run.violations.total() != 0 {
        return Err(format!(
            "the model of {what} did not complete ({} violations, aborted: {})",
            run.violations.total(),
            run.aborted
        ));
    }
    Ok(run)
}

/// One measured class against the simulator's run, per agreement and per node, in µs.
fn against(measured: &Class, run: &AgreeRun, model: &BenchModel) -> (Compared, Compared) {
    let unit_us = model.unit_ns as f64 / 1000.0;
    let (a, n) = (run.latency.percentiles(), run.process_latency.percentiles());
    let us = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    (
        Compared::new(
            (us(&measured.agreement, 0.5), us(&measured.agreement, 0.99)),
            (a.p50 * unit_us, a.p99 * unit_us),
        ),
        Compared::new(
            (us(&measured.node, 0.5), us(&measured.node, 0.99)),
            (n.p50 * unit_us, n.p99 * unit_us),
        ),
    )
}

/// The index of the post-failure class in a report's classes
/// ([`crate::runtime::agree_window::CLASS_NAMES`]).
const POST_FAILURE: usize = 3;

/// Measures this machine's `o_s`, `o_r` and `L` on the run's transport and compares the run
/// with the model (`None` for verbs, whose ping-pong needs the device, and for a run with no
/// failure-free agreement).
pub fn predict(b: &AgreeBench, r: &AgreeBenchReport, procs: bool) -> Result<Option<AgreePrediction>, String> {
    let kind = match b.transport {
        AgreeTransport::Inproc => TransportKind::Inproc,
        AgreeTransport::Udp => TransportKind::Udp,
        AgreeTransport::Verbs => return Ok(None),
    };
    // The round trips give the medians and their distributions, as `bench`'s estimate does.
    let trips = estimate_samples(kind, 2000, ERA_MESSAGE_BYTES)?;
    let (dists, e) = (trips.noise(), trips.estimate());
    let (two, visit_ns) = two_node_hop(b, &e)?;
    // Node processes are not visited in turn by a worker but scheduled by the kernel: no
    // visit cost for them (as `bench` charges one only where workers take turns).
    let visit_ns = if procs { 0 } else { visit_ns };
    let hop = NodeHop::fold(two, e.o_send_ns, e.o_recv_ns, e.l_ns, visit_ns, 0);
    let (os, or) = hop.node_o_ns(e.o_send_ns, e.o_recv_ns);
    let model = BenchModel::new(os, or, e.l_ns);
    let noise = dists.map(|d| noise_for(&d, &e, &model)).transpose()?;
    let host = std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1);
    compare_with_hop(b, r, model, Some(hop), model_cores(b, procs, host), noise)
}

/// The ping-pong's distributions for `model`, as `bench`'s noisy prediction takes them
/// ([`crate::experiment::predict::node_noise`]).
fn noise_for(dists: &serde_json::Value, e: &Estimate, model: &BenchModel) -> Result<Arc<Noise>, String> {
    crate::experiment::predict::node_noise(dists, e.o_send_ns, e.o_recv_ns, model)
}

/// Agreements of the 2-node calibration run (after a tenth as many unmeasured).
const HOP_AGREEMENTS: u64 = 2000;

/// One hop through an ERA node (median and 95 % interval, ns): the failure-free agreement
/// latency of 2 nodes of `b`'s kind, measured, divided by the hops the simulator's 2-node
/// agreement takes (its latency under the transport's model `e` over `o_s + L + o_r`), and
/// the visit of an idle node its workers measured (ns, 0 if none did); an error if that run
/// saw any failure.
fn two_node_hop(b: &AgreeBench, e: &crate::runtime::logp::Estimate) -> Result<(Ci, u64), String> {
    let two = AgreeBench {
        n: 2,
        workers: b.workers.clamp(1, 2),
        warmup: HOP_AGREEMENTS / 10,
        iterations: HOP_AGREEMENTS,
        duration: None,
        kills: Vec::new(),
        stalls: Vec::new(),
        seed: b.seed ^ 0x40B0,
        // A failure detector that suspects no live node of a failure-free pair, whatever the
        // run under test was given (a run may ask for false suspicions on purpose).
        heartbeat: std::time::Duration::from_micros(100),
        suspect_after: std::time::Duration::from_secs(5),
        op_timeout: b.op_timeout.max(std::time::Duration::from_secs(5)),
        ..b.clone()
    };
    let r = crate::experiment::agree_local::run(&two).map_err(|e| format!("the 2-node agreement calibration: {e}"))?;
    let bad = r.disagreements + r.invalid + r.unfinished + r.suspicions;
    let Some(ff) = r.classes.first().filter(|c| !c.agreement.is_empty()) else {
        return Err("the 2-node agreement calibration measured no agreement".into());
    };
    if bad > 0 {
        return Err(format!(
            "the 2-node agreement calibration failed: {} disagreements, {} invalid, {} unfinished, {} suspicions",
            r.disagreements, r.invalid, r.unfinished, r.suspicions
        ));
    }
    // The simulator's 2-node agreement under the transport alone, in hops.
    let transport = BenchModel::new(e.o_send_ns, e.o_recv_ns, e.l_ns);
    let sim = simulated(&two, &transport, None, 0, MAX_AGREEMENTS);
    sim.validate()?;
    let run = run_once::<And64>(&sim, two.seed)?;
    if run.aborted || run.violations.total() != 0 {
        return Err("the model of the 2-node agreement calibration did not complete".into());
    }
    let hop_units = transport.loggp.os + transport.loggp.l + transport.loggp.or;
    let hops = (run.latency.percentiles().p50 / hop_units.max(1) as f64).max(1.0);
    let h = &ff.agreement;
    let half = 0.98 / (h.len().max(1) as f64).sqrt();
    let at = |q: f64| h.value_at_quantile(q.clamp(0.0, 1.0)) as f64 / hops;
    let hop = Ci {
        median: at(0.5),
        lo: at(0.5 - half),
        hi: at(0.5 + half),
    };
    Ok((hop, r.idle_visit_ns.map_or(0, |v| v.round() as u64)))
}

#[cfg(test)]
mod tests;
