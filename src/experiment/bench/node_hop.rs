//! The hop as a broadcast node pays it, measured, and folded into the model's `o_s` and `o_r`.
//!
//! A ping-pong of the transport ([`crate::runtime::logp`]) measures LogP's `o_s`, `o_r` and
//! `L` of the transport alone. A node does more around each message: the root reads its start
//! signal and makes the operation's protocol instance, every message is encoded, decoded and
//! stepped through the protocol, and the run keeps its books (board stamps, counters, the clock
//! reads of the measurement itself). On a machine with a core per node these costs made the
//! measured coloring 1.4× (UDP) to 2× (in-process) the model's at every size (`docs/
//! measurements.md`), and, since the protocols count time in the model's unit, a synchronized
//! correction started while the real dissemination was still running and sent 3–4× the modeled
//! messages.
//!
//! The measurement: a 2-node broadcast without correction on the same transport, payload size,
//! poll mode and pinning, through the very runner of a local run ([`super::local::run`], a
//! group's stream), so through the same node code; its
//! coloring latency is one hop through the node, root's start to the other node's delivery
//! (median with its 95 % interval). What that hop takes beyond the transport's
//! `o_s + L + o_r` is the node's own overhead per hop; [`NodeHop::fold`] charges it to `o_s`
//! and `o_r` in proportion to the transport's (the wire's `L` stays the transport's): each
//! send and each receive then costs what it costs a node, so a sender with many children is
//! charged per child. A hop shorter than the transport's sum (a calibration saved with
//! `logp --save` at a busier moment of the machine: `docs/measurements.md`, "A hop shorter
//! than its calibration") is folded the same way, the difference taken off `o_s` and `o_r`:
//! a prediction from the calibration alone would miss the run it predicts by the
//! calibration's error at every hop. Checked against a 16-core machine (N = 2…16, both
//! transports) in `docs/measurements.md`, where the other splits (all on the sender, all on
//! the receiver) are compared too.
//!
//! The same run measures what a worker's visit of a node with nothing to do costs (its passes
//! without progress, [`crate::runtime::cluster::IdlePasses`]): where a run's nodes outnumber
//! its workers, a message waits until its worker's round reaches its receiver, which the
//! processor-sharing model charges at this cost per node visited
//! ([`crate::sim::timing::Timing::turn`]); and what a visit with work holds the worker beyond
//! the node's `o_r` (the receiver's median pass with progress, which is its receive, the
//! delivery's bookkeeping, one more poll and the board's stamps), which the model charges each
//! time a core moves on after work ([`crate::sim::timing::Timing::set_work`]).
//!
//! Where the run's nodes share cores, two more runs with all nodes on one worker measure
//! messages between nodes of one core. The 2-node run's hop is the root's send, the worker's
//! move to the other node and that node's receive of a message its own core just handled
//! (over loopback UDP the sender's `sendto` ran the receiving side of the stack, in process
//! the message's cache lines never left the core). A 3-node run, whose root sends to both
//! others, colors its last node after the root's two sends, the first receiver's visit and
//! the second's receive: two such hops and what the first receiving visit held the core
//! after its receive. The model takes both ([`NodeHop::with_local`],
//! [`crate::sim::timing::Timing::set_local`]): the cross-core run's `work_ns` stays the
//! charge after a visit that received from another core, whose books miss the cache too
//! (`docs/measurements.md`, "Messages between nodes of one core").
//!
//! Where in-process nodes share cores, one more measurement: what each ring beyond the first
//! costs an idle poll ([`crate::runtime::ring_poll::per_ring_ns`], with as many rings as the
//! run's nodes less one). A node's poll reads one ring per node that ever sent to it, the
//! 2-node run's node has one, and a node of the checked correction hears from most of the
//! others; the model charges the cost on every visit, per sender beyond the first
//! ([`NodeHop::with_ring_poll`], [`crate::sim::timing::Timing::set_poll_per_source`];
//! `docs/measurements.md`, "The rings a checked node polls").

use std::time::Duration;

use serde::Serialize;

use crate::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
use crate::model::BenchModel;
use crate::runtime::cluster::{ClusterConfig, IdlePasses, PollMode};
use crate::runtime::logp::Ci;
use crate::runtime::{Bench, TransportKind};
use crate::transport::udp::auth::AuthKey;

/// Measured operations of the 2-node run (after a tenth as many unmeasured).
pub const OPERATIONS: u64 = 2000;

/// A node's hop and what the model makes of it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NodeHop {
    /// The 2-node coloring latency (median, 95 % interval), ns, measured before the run.
    pub hop_ns: Ci,
    /// The transport's `o_s + L + o_r`, ns.
    pub transport_hop_ns: u64,
    /// `hop − (o_s + L + o_r)`: the node's overhead per hop, ns. Negative when the node's hop
    /// took less than the transport's calibration says a hop takes (a calibration saved on a
    /// busier machine, or one whose ping-pong pays a wake-up a polling node does not): the
    /// calibration's `o_s` and `o_r` are then too long by that much, and each keeps at least
    /// 1 ns.
    pub overhead_ns: i64,
    /// The shares of it charged to each send and each receive, ns (negative: taken off).
    pub os_share_ns: i64,
    pub or_share_ns: i64,
    /// A worker's visit of a node with nothing to do, ns (the cheapest worker's mean; 0, and
    /// left out of the JSON, when not measured).
    #[serde(skip_serializing_if = "is_zero")]
    pub visit_ns: u64,
    /// What a node's visit with work holds its worker beyond the node's `o_r` (its pass
    /// polls once more and stamps the board before the worker moves on): the cheapest
    /// worker's median pass with progress, which in the 2-node run is one receive, less the
    /// node's `o_r`, ns (0, and left out of the JSON, when not measured).
    #[serde(skip_serializing_if = "is_zero")]
    pub work_ns: u64,
    /// Where the run's nodes share cores: the 2-node hop with both nodes on one worker
    /// (median, 95 % interval), ns (`None`, and left out of the JSON: not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_hop_ns: Option<Ci>,
    /// Where the run's nodes share cores: the 3-node coloring latency with all three on one
    /// worker, the root sending to both others (median, 95 % interval), ns (`None`, and left
    /// out of the JSON: not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_fanout_ns: Option<Ci>,
    /// What a visit that received only from its own core holds its worker after its receive:
    /// the 3-node run's latency beyond two of the 2-node run's hops, ns, at least 0 (left out
    /// of the JSON with `local_or_ns`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_work_ns: Option<u64>,
    /// What the model's receive of a message from a node of the same core costs: that hop
    /// less the node's `o_s`, ns, at least 1 (0, and left out of the JSON: not measured).
    #[serde(skip_serializing_if = "is_zero")]
    pub local_or_ns: u64,
    /// Where the run's in-process nodes share cores: what each ring beyond the first adds to
    /// a node's poll, ns (an idle endpoint's poll with as many rings as a node of the run can
    /// have, against one: [`crate::runtime::ring_poll::per_ring_ns`]); the model charges it
    /// per sender beyond the first on every visit (`None`, and left out of the JSON: not
    /// measured, or a transport whose poll reads no ring per sender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring_poll_ns: Option<f64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl NodeHop {
    /// The overhead of a node's hop `hop_ns` beyond the transport's `os_ns + l_ns + or_ns`,
    /// split between send and receive in proportion to `os_ns : or_ns`: the node's `o_s` and
    /// `o_r` then make its hop the measured one, longer or shorter than the transport's (the
    /// wire's `L` stays the transport's; shorter, each `o` keeps at least 1 ns).
    /// `visit_ns` is the measured visit cost, carried as is; `busy_ns` the measured median pass
    /// with progress (0: none), of which what the node's `o_r` does not cover is `work_ns`.
    pub fn fold(hop_ns: Ci, os_ns: u64, or_ns: u64, l_ns: u64, visit_ns: u64, busy_ns: u64) -> NodeHop {
        let transport_hop_ns = os_ns + l_ns + or_ns;
        let (os, or) = (os_ns as i64, or_ns as i64);
        let overhead = hop_ns.median.round().max(0.0) as i64 - transport_hop_ns as i64;
        let o = (os + or).max(1);
        let os_share_ns = ((overhead as f64 * os as f64 / o as f64).round() as i64).max(1 - os.max(1));
        let or_share_ns = (overhead - os_share_ns).max(1 - or.max(1));
        let node_or = (or + or_share_ns) as u64;
        NodeHop {
            hop_ns,
            transport_hop_ns,
            overhead_ns: os_share_ns + or_share_ns,
            os_share_ns,
            or_share_ns,
            visit_ns,
            work_ns: busy_ns.saturating_sub(node_or),
            local_hop_ns: None,
            local_fanout_ns: None,
            local_work_ns: None,
            local_or_ns: 0,
            ring_poll_ns: None,
        }
    }

    /// With the measured cost of a poll's ring beyond the first (`None`: not measured).
    pub fn with_ring_poll(self, ring_poll_ns: Option<f64>) -> NodeHop {
        NodeHop { ring_poll_ns, ..self }
    }

    /// With one core's runs (`None`: not measured): the 2-node hop and the 3-node latency,
    /// all nodes on one worker. In the model that hop is the root's send (the node's `o_s`;
    /// `os_ns`: the transport's) and the receive from the same core, which is the rest (at
    /// least 1 ns): the root's visit after its send, the worker's move and the receive
    /// itself. The 3-node root sends twice, then its worker visits the first receiver, which
    /// receives and holds the core a while, and the second, which receives: two hops and
    /// that while, which is then what a visit that received only from its own core holds its
    /// core after its work ([`crate::sim::timing::Timing::set_local`]). Where the first
    /// receiving visit held the core for less than the medians' noise, it is 0.
    pub fn with_local(self, local: Option<LocalHops>, os_ns: u64) -> NodeHop {
        let Some(LocalHops { hop, fanout }) = local else {
            return self;
        };
        let node_os = (os_ns as i64 + self.os_share_ns).max(0) as u64;
        let ns = |c: Ci| c.median.round().max(0.0) as u64;
        NodeHop {
            local_hop_ns: Some(hop),
            local_fanout_ns: Some(fanout),
            local_work_ns: Some(ns(fanout).saturating_sub(2 * ns(hop))),
            local_or_ns: ns(hop).saturating_sub(node_os).max(1),
            ..self
        }
    }

    /// What the report says of the node's own cost per hop after the transport's sum: `what`
    /// names what it is made of when it is a cost.
    pub fn own_cost(&self, what: &str) -> String {
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(" {what}")
        };
        if self.overhead_ns >= 0 {
            format!(
                "+ the node's own {} ns{what}, charged {} ns to each send and {} ns to each receive",
                self.overhead_ns, self.os_share_ns, self.or_share_ns
            )
        } else {
            format!(
                "less {} ns (the calibration's o_s and o_r are longer than a node's hop takes now), taken {} ns off each send and {} ns off each receive",
                -self.overhead_ns, -self.os_share_ns, -self.or_share_ns
            )
        }
    }

    /// The node's `o_s` and `o_r`: the transport's plus their shares, ns (at least 1 each
    /// where the transport's is).
    pub fn node_o_ns(&self, os_ns: u64, or_ns: u64) -> (u64, u64) {
        let add = |o: u64, share: i64| (o as i64 + share).max(0) as u64;
        (add(os_ns, self.os_share_ns), add(or_ns, self.or_share_ns))
    }
}

/// How the 2-node run is set up: what the measured run shares with it.
pub struct HopSetup {
    pub transport: TransportKind,
    pub size: usize,
    pub poll: PollMode,
    pub pin: bool,
    /// UDP: the run's key (its datagrams are sealed as the measured run's are).
    pub auth: Option<AuthKey>,
    /// The transport's `o_s`, `o_r`, `L`, ns (the 2-node run's time unit).
    pub os_ns: u64,
    pub or_ns: u64,
    pub l_ns: u64,
    /// The run's nodes share cores: measure one core's runs too ([`Measured::local`]).
    pub one_core: bool,
    /// With `one_core`, in process with a ring per sender: the most rings a node of the run
    /// can have (its other nodes), to measure what each one beyond the first costs a poll
    /// ([`Measured::ring_poll_ns`]; `None`: not measured).
    pub rings: Option<u32>,
}

/// The run of `s` over `nodes` nodes (2, or 3 for one core's fan-out) on `workers` workers
/// (at most 2): a broadcast without correction, one message to each other node per
/// operation.
fn hop_bench(s: &HopSetup, nodes: u32, workers: usize) -> Result<Bench, String> {
    let model = BenchModel::new(s.os_ns, s.or_ns, s.l_ns);
    let spec = AlgoSpec {
        correction: Some("none".into()),
        ..AlgoSpec::new(AlgoName::CorrectedTree)
    };
    let algo = resolve_algo(&spec, nodes, model.mean_logp(), 0)?;
    let bench = Bench {
        algo,
        cluster: ClusterConfig {
            nodes,
            workers,
            poll: s.poll,
            warmup: OPERATIONS / 10,
            iterations: OPERATIONS,
            window: 1,
            payload_len: s.size,
            tick_ns: model.unit_ns,
            job: crate::experiment::launch::job::node_hop(),
            seed: 1,
            op_timeout: Duration::from_millis(1000),
            idle: Duration::from_micros(500),
            pin: s.pin,
            give_up_after: Some(crate::experiment::bench::GIVE_UP_AFTER),
        },
        transport: s.transport,
        kills: Vec::new(),
        model: model.loggp,
        loss: 0.0,
        auth: s.auth.clone(),
    };
    Ok(bench)
}

/// What the 2-node run measured: the hop (coloring latency, ns) and a worker's visit of an
/// idle node (ns; the cheapest worker's mean, 0 without an idle pass).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub hop_ns: Ci,
    pub visit_ns: u64,
    /// The cheapest worker's median pass with progress, ns (0: none).
    pub busy_ns: u64,
    /// With [`HopSetup::one_core`]: the runs with all nodes on one worker.
    pub local: Option<LocalHops>,
    /// With [`HopSetup::rings`]: what each ring beyond the first adds to an idle poll, ns.
    pub ring_poll_ns: Option<f64>,
}

/// One core's runs: coloring latencies (median, 95 % interval), ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalHops {
    /// 2 nodes on one worker: one message.
    pub hop: Ci,
    /// 3 nodes on one worker, the root sending to both others.
    pub fanout: Ci,
}

/// Runs the 2-node broadcast (a worker per node where the machine has two cores, and with
/// [`HopSetup::one_core`] again on one worker, and 3 nodes on one worker) and returns its
/// coloring latency and visit cost; an error if any operation failed (a violation, a
/// timeout, a dropped or unrun operation): no figure from a bad run.
pub fn measure(s: &HopSetup) -> Result<Measured, String> {
    let cores = std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1);
    let (hop_ns, res) = hop(s, 2, cores.min(2))?;
    let local = if s.one_core {
        Some(LocalHops {
            hop: hop(s, 2, 1)?.0,
            fanout: hop(s, 3, 1)?.0,
        })
    } else {
        None
    };
    let ring_poll_ns = match s.rings {
        Some(most) if s.one_core && most >= 2 => Some(crate::runtime::ring_poll::per_ring_ns(most)?),
        _ => None,
    };
    Ok(Measured {
        hop_ns,
        visit_ns: cheapest_visit_ns(&res.idle_passes),
        busy_ns: cheapest_busy_ns(&res.idle_passes),
        local,
        ring_poll_ns,
    })
}

/// One run of `nodes` nodes on `workers` workers: its coloring latency's median with its
/// 95 % interval.
fn hop(s: &HopSetup, nodes: u32, workers: usize) -> Result<(Ci, crate::runtime::cluster::ClusterResult), String> {
    let res = super::local::run(&hop_bench(s, nodes, workers)?, None)
        .map_err(|e| format!("the node-hop calibration: {e}"))?;
    let bad = res.violations + res.timeouts + res.dropped_ops + res.not_run;
    if bad > 0 || res.measured == 0 {
        return Err(format!(
            "the node-hop calibration ({nodes} nodes on {workers} worker(s), {:?}) failed: {} violations, {} timeouts, {} dropped and {} unrun of {} operations",
            s.transport, res.violations, res.timeouts, res.dropped_ops, res.not_run, OPERATIONS
        ));
    }
    let h = &res.coloring;
    // The median's 95 % interval by order statistics, as `Ci::of` takes it from samples.
    let n = h.len().max(1) as f64;
    let half = 0.98 / n.sqrt();
    let hop_ns = Ci {
        median: h.value_at_quantile(0.5) as f64,
        lo: h.value_at_quantile((0.5 - half).max(0.0)) as f64,
        hi: h.value_at_quantile((0.5 + half).min(1.0)) as f64,
    };
    Ok((hop_ns, res))
}

/// The cheapest worker's median pass with progress, ns (0: no worker had one): in the 2-node
/// run, the receiver's worker, whose every such pass is one receive and its delivery (the
/// root's worker also starts the operations and coordinates).
pub fn cheapest_busy_ns(workers: &[IdlePasses]) -> u64 {
    cheapest(workers, IdlePasses::busy_ns)
}

/// The cheapest worker's mean visit of an idle node, ns (0: no worker had an idle pass): the
/// worker without the coordinator's work on top, which a run's other workers are too.
pub fn cheapest_visit_ns(workers: &[IdlePasses]) -> u64 {
    cheapest(workers, IdlePasses::visit_ns)
}

/// [`IdlePasses::cheapest`] rounded to ns (0: none has it).
fn cheapest(workers: &[IdlePasses], figure: impl Fn(&IdlePasses) -> Option<f64>) -> u64 {
    IdlePasses::cheapest(workers, figure).map_or(0, |v| v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 2-node run over in-process endpoints, busy and unpinned, 8-byte payloads.
    fn inproc_setup(os_ns: u64, or_ns: u64, l_ns: u64) -> HopSetup {
        HopSetup {
            transport: TransportKind::Inproc,
            size: 8,
            poll: PollMode::Busy,
            pin: false,
            auth: None,
            os_ns,
            or_ns,
            l_ns,
            one_core: false,
            rings: None,
        }
    }

    /// Runs a calibration bench and checks that every operation ran and completed.
    fn run_clean(b: &Bench) -> crate::runtime::cluster::ClusterResult {
        let res = super::super::local::run(b, None).unwrap();
        assert_eq!(res.measured, OPERATIONS);
        assert_eq!(
            (res.violations, res.timeouts, res.not_run, res.dropped_ops),
            (0, 0, 0, 0)
        );
        res
    }

    fn ci(m: f64) -> Ci {
        Ci {
            median: m,
            lo: m,
            hi: m,
        }
    }

    #[test]
    fn the_overhead_is_split_in_proportion_to_the_transports_overheads() {
        // Transport hop 1478 + 410 + 569 = 2457 ns; a node's hop of 3449 ns leaves 992 ns.
        let h = NodeHop::fold(ci(3449.0), 1478, 569, 410, 0, 0);
        assert_eq!((h.transport_hop_ns, h.overhead_ns), (2457, 992));
        assert_eq!(h.os_share_ns + h.or_share_ns, 992);
        assert_eq!(h.os_share_ns, 716, "992 · 1478 / 2047, rounded");
        let (os, or) = h.node_o_ns(1478, 569);
        // The node's hop is then the measured one, exactly.
        assert_eq!(os + 410 + or, 3449);
        assert_eq!(h.work_ns, 0, "no pass with progress measured");
        // A receiver's pass with progress of 1200 ns: its node's o_r (569 + 276) and 355 more.
        let h = NodeHop::fold(ci(3449.0), 1478, 569, 410, 0, 1200);
        assert_eq!(h.work_ns, 1200 - (569 + 276));
        assert_eq!(NodeHop::fold(ci(3449.0), 1478, 569, 410, 0, 800).work_ns, 0);
    }

    #[test]
    fn a_hop_faster_than_the_transports_takes_the_difference_off_its_overheads() {
        // A calibration of 1993 + 513 + 853 = 3359 ns and a node's hop of 2400 ns (a UDP
        // calibration saved on a busier machine): 959 ns too much, taken off o_s and o_r in
        // proportion, so that the node's hop is the measured one.
        let h = NodeHop::fold(ci(2400.0), 1993, 853, 513, 0, 1000);
        assert_eq!((h.transport_hop_ns, h.overhead_ns), (3359, -959));
        assert_eq!(h.os_share_ns, -672, "−959 · 1993 / 2846, rounded");
        assert_eq!(h.os_share_ns + h.or_share_ns, -959);
        let (os, or) = h.node_o_ns(1993, 853);
        assert_eq!((os, or), (1321, 566));
        assert_eq!(os + 513 + or, 2400);
        // The receiver's busy pass less the node's (shorter) o_r.
        assert_eq!(h.work_ns, 1000 - 566);
        // A hop shorter than L alone: the overheads keep 1 ns each (the model's hop is then
        // L + 2, the least it can be with the transport's L).
        let h = NodeHop::fold(ci(100.0), 55, 68, 197, 0, 0);
        assert_eq!((h.os_share_ns, h.or_share_ns, h.overhead_ns), (-54, -67, -121));
        assert_eq!(h.node_o_ns(55, 68), (1, 1));
        // Equal hops: nothing moves.
        let h = NodeHop::fold(ci(320.0), 55, 68, 197, 0, 0);
        assert_eq!((h.overhead_ns, h.node_o_ns(55, 68)), (0, (55, 68)));
    }

    #[test]
    fn the_report_says_whether_the_node_added_to_the_transports_hop_or_took_off_it() {
        let longer = NodeHop::fold(ci(3449.0), 1478, 569, 410, 0, 0).own_cost("(protocol)");
        assert_eq!(
            longer,
            "+ the node's own 992 ns (protocol), charged 716 ns to each send and 276 ns to each receive"
        );
        let shorter = NodeHop::fold(ci(2400.0), 1993, 853, 513, 0, 0).own_cost("(protocol)");
        assert!(
            shorter.starts_with("less 959 ns (the calibration's")
                && shorter.ends_with("taken 672 ns off each send and 287 ns off each receive"),
            "{shorter}"
        );
    }

    #[test]
    fn the_calibration_runs_one_message_per_operation_and_every_operation_on_the_local_runner() {
        // The hop is one message root -> rank 1 per operation: the structure the fold assumes.
        // A runner that measured something else (extra messages, operations left unrun,
        // warmup counted) would skew every model built on it.
        let s = inproc_setup(100, 100, 200);
        let b = hop_bench(&s, 2, 2).unwrap();
        assert_eq!((b.cluster.nodes, b.cluster.window, b.kills.len()), (2, 1, 0));
        let res = run_clean(&b);
        assert_eq!(
            res.coloring.len(),
            OPERATIONS,
            "one coloring sample per measured operation"
        );
        assert_eq!(
            (res.messages.min(), res.messages.max()),
            (1, 1),
            "one message per operation"
        );
        assert!(res.dead_nodes.is_empty());
        // Every message of the warmup and the measured operations crossed the transport once.
        assert_eq!(res.transport.sent, OPERATIONS + OPERATIONS / 10);
        // Every worker reported its idle passes, over the 2 nodes it stepped.
        assert_eq!(res.idle_passes.len(), b.cluster.workers, "{:?}", res.idle_passes);
        assert_eq!(res.idle_passes.iter().map(|w| w.nodes).sum::<u32>(), 2);
        assert!(cheapest_visit_ns(&res.idle_passes) > 0, "{:?}", res.idle_passes);
        // The receiver's worker had one pass with progress per operation (its receive),
        // warmup included; the root's too (each start and its send), at least (those the
        // thread was away in, preempted on a loaded machine, are counted apart).
        let busy = |w: &IdlePasses| w.busy.iter().map(|&c| u64::from(c)).sum::<u64>() + w.busy_away;
        assert!(
            res.idle_passes.iter().all(|w| busy(w) >= OPERATIONS),
            "{:?}",
            res.idle_passes
        );
        assert!(cheapest_busy_ns(&res.idle_passes) > 0);
    }

    #[test]
    fn the_visit_cost_is_the_cheapest_workers_per_node_mean() {
        let w = |nodes, passes, ns| IdlePasses {
            nodes,
            passes,
            ns,
            ..IdlePasses::default()
        };
        // 300 ns a pass over 1 node (the coordinator's worker) against 400 ns over 2 nodes.
        assert_eq!(cheapest_visit_ns(&[w(1, 10, 3000), w(2, 5, 2000)]), 200);
        // A worker without idle passes (or nodes) says nothing; none at all: 0.
        assert_eq!(cheapest_visit_ns(&[w(1, 0, 0), w(0, 3, 30), w(1, 4, 1000)]), 250);
        assert_eq!(cheapest_visit_ns(&[]), 0);
    }

    #[test]
    fn the_measured_hop_is_at_least_the_transports_wire_and_completes_every_operation() {
        let est = crate::runtime::logp::estimate(TransportKind::Inproc, 200, 8).unwrap();
        let s = inproc_setup(est.o_send_ns, est.o_recv_ns, est.l_ns);
        let m = measure(&s).unwrap();
        let hop = m.hop_ns;
        assert!(hop.lo <= hop.median && hop.median <= hop.hi, "{hop:?}");
        // One message crosses between two threads: never faster than a cache line's trip.
        assert!(hop.median >= 20.0, "{hop:?}");
        assert_eq!(m.local, None, "one core's hop only where nodes share cores");
        // Nodes that share cores: one core's hop too, a send and a receive at least.
        let m = measure(&HopSetup { one_core: true, ..s }).unwrap();
        let local = m.local.expect("measured");
        for c in [local.hop, local.fanout] {
            assert!(c.lo <= c.median && c.median <= c.hi, "{local:?}");
            assert!(c.median >= 20.0, "{local:?}");
        }
        // The 3-node run's last node is colored after its root's second send at least.
        assert!(local.fanout.median > local.hop.median, "{local:?}");
    }

    #[test]
    fn one_cores_fanout_run_sends_from_the_root_to_both_others_on_one_worker() {
        // What [`NodeHop::with_local`] reads into the 3-node latency: the root sends both
        // messages, one to each other node, and nobody else sends.
        let s = inproc_setup(100, 100, 200);
        let b = hop_bench(&s, 3, 1).unwrap();
        assert_eq!((b.cluster.nodes, b.cluster.workers, b.cluster.window), (3, 1, 1));
        let res = run_clean(&b);
        assert_eq!(
            (res.messages.min(), res.messages.max()),
            (2, 2),
            "two messages per operation"
        );
        assert_eq!(res.transport.sent, 2 * (OPERATIONS + OPERATIONS / 10));
        let crate::protocol::bcast::algo::Algo::CorrectedTree { tree, order, .. } = b.algo else {
            panic!("the calibration broadcasts a corrected tree: {:?}", b.algo)
        };
        let logp = BenchModel::new(100, 100, 200).mean_logp();
        let tree = crate::topology::Tree::build(tree, order, 3, logp).unwrap();
        assert_eq!(tree.children(0), [1, 2], "the root's children, in the order it sends");
    }

    #[test]
    fn one_cores_runs_give_the_receive_from_the_same_core_and_the_tail_of_its_visit() {
        // Transport o_s 847, L 265, o_r 382 and a node's hop of 2101 ns: the node's o_s is
        // 847 + 418. One core's hop of 1720 ns leaves 455 ns for the receive; its 3-node
        // run of 3720 ns, two hops and 280 ns of tail after the first receive.
        let h = NodeHop::fold(ci(2101.0), 847, 382, 265, 262, 1335);
        assert_eq!(
            (h.os_share_ns, h.local_or_ns, h.local_work_ns, h.local_hop_ns),
            (418, 0, None, None)
        );
        let local = |hop, fanout| {
            Some(LocalHops {
                hop: ci(hop),
                fanout: ci(fanout),
            })
        };
        let l = h.with_local(local(1720.0, 3720.0), 847);
        assert_eq!(l.local_or_ns, 1720 - (847 + 418));
        assert_eq!(l.local_work_ns, Some(280));
        assert_eq!(
            (l.local_hop_ns, l.local_fanout_ns),
            (Some(ci(1720.0)), Some(ci(3720.0)))
        );
        assert_eq!(
            (l.work_ns, l.visit_ns, l.os_share_ns),
            (h.work_ns, 262, 418),
            "the rest is kept"
        );
        // A hop no longer than the node's send: the receive still costs something.
        assert_eq!(h.with_local(local(1000.0, 2000.0), 847).local_or_ns, 1);
        // A 3-node run within two hops: no tail.
        assert_eq!(h.with_local(local(1720.0, 3400.0), 847).local_work_ns, Some(0));
        assert_eq!(h.with_local(None, 847), h);
    }
}
