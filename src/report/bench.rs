//! What `ftcoll bench` prints: the perftest-like table of measured latencies next to the LogP
//! prediction, or one JSON object (`--json`); the files beside them (`--hlog`, `--trace`) are
//! `report/bench/logs.rs`'s.

use std::path::PathBuf;

use hdrhistogram::Histogram;
use serde_json::json;

use crate::experiment::algo::Algo;
use crate::experiment::predict::{BenchModel, Prediction};
use crate::experiment::verdict::Verdict;
use crate::runtime::TransportKind;
use crate::runtime::cluster::{ClusterResult, PollMode};
use crate::runtime::kill::Kill;
use crate::runtime::logp::{Calibration, Estimate};

mod logs;
mod ranks;

pub use logs::{write_hlog, write_trace};
pub use ranks::{RankCompared, furthest, per_rank};
use ranks::{compare_osu, osu_us};

/// The settings of a bench run that its report shows.
pub struct BenchFacts {
    pub nodes: u32,
    pub transport: TransportKind,
    pub size: usize,
    pub iterations: u64,
    pub warmup: u64,
    pub window: u64,
    pub shared_cores: Option<u32>,
    /// One process per node, started here.
    pub procs: bool,
    /// Launched and bootstrapped by the overlay from parents' addresses.
    pub boot: bool,
    /// Launched, joined at rank 0.
    pub join: bool,
    pub json: bool,
    /// The calibration file (`--params`).
    pub params: Option<PathBuf>,
    /// Whether o and L were given (not estimated or calibrated).
    pub o_ns_given: bool,
    pub l_ns_given: bool,
    /// The injected loss as the model has it (`bench --loss`), in the model's unit.
    pub loss: Option<crate::sim::noise::Loss>,
    /// The loss model's timeout is the run's mean wait before a timer retransmission.
    pub loss_rto_measured: bool,
}

/// A finished bench run and everything its report shows.
pub struct BenchReport<'a> {
    pub a: BenchFacts,
    pub algo: &'a Algo,
    pub res: &'a ClusterResult,
    pub est: Option<Estimate>,
    pub cal: Option<&'a Calibration>,
    pub pred: Option<Prediction>,
    pub workers: usize,
    pub poll: PollMode,
    pub kills: &'a [Kill],
    /// The crash specs as given (or defaulted).
    pub kill_text: &'a str,
    /// The model's o (shared cores counted) and L, ns.
    pub o_ns: u64,
    pub l_ns: u64,
    /// This host's own o, ns.
    pub own_o_ns: u64,
    /// The model the protocols counted in and the prediction used.
    pub model: BenchModel,
    /// The cores the model put the nodes on (`None`: a core per node).
    pub model_cores: Option<u32>,
    /// With `model_cores`: a core's visit of a node with nothing to do, ns (0: switching
    /// between nodes is free in the model).
    pub model_visit_ns: u64,
    pub model_work_ns: u64,
    pub model_local_work_ns: u64,
    pub model_local_or_ns: u64,
    /// With `model_visit_ns`: what each node beyond the first that sends to a node adds to its
    /// visits, ns (0: nothing).
    pub model_ring_poll_ns: f64,
    /// The prediction drew o_s, o_r and L per message from the calibration's distributions,
    /// or the fresh estimate's (noisy LogP).
    pub noisy: bool,
    /// The node's own cost per hop folded into the model's o_s and o_r.
    pub node_hop: Option<crate::experiment::bench::node_hop::NodeHop>,
    /// Cores of this host.
    pub cores: usize,
    /// Whether the run passed (the JSON lists its failures; the CLI prints the reason last).
    pub verdict: &'a Verdict,
}

/// Standalone ACKs per data datagram that a fault-free run should stay under: ACKs ride on
/// data or wait until the node is idle, so they do not sit on the forwarding path.
pub const ACK_BUDGET: f64 = 0.25;

/// Standalone ACK datagrams per data datagram sent over UDP (`udp`: `None` for the other
/// transports, which send no ACK datagrams, and when nothing was sent). `bench` and `agree`
/// both print it.
pub fn acks_per_data(udp: bool, t: &crate::transport::TransportStats) -> Option<f64> {
    (udp && t.sent > 0).then(|| t.acks_sent as f64 / t.sent as f64)
}

/// The text line of [`acks_per_data`] `q` with `acks` ACK datagrams (and, above
/// [`ACK_BUDGET`], says so), as `bench` and `agree` print it.
pub fn acks_line(q: f64, acks: u64) -> String {
    let over = if q > ACK_BUDGET {
        format!("; above the {ACK_BUDGET} a quiet critical path allows")
    } else {
        String::new()
    };
    format!("transport: {q:.3} standalone ACK datagrams per data datagram ({acks} ACKs){over}\n")
}

/// Prints the report of `r`: one JSON object, or the table.
pub fn print(r: &BenchReport) {
    let BenchReport {
        a,
        algo,
        res,
        est,
        cal,
        pred,
        workers,
        poll,
        kills,
        kill_text,
        o_ns,
        l_ns,
        own_o_ns,
        model,
        model_cores,
        model_visit_ns,
        model_work_ns,
        model_local_work_ns,
        model_local_or_ns,
        model_ring_poll_ns,
        noisy,
        node_hop,
        cores,
        verdict,
    } = r;
    let (res, algo, kills, kill_text) = (*res, *algo, *kills, *kill_text);
    let (workers, poll, o_ns, l_ns, own_o_ns, cores) = (*workers, *poll, *o_ns, *l_ns, *own_o_ns, *cores);
    let (est, cal) = (*est, *cal);
    if a.json {
        let v = json!({
            "config": {
                "algo": algo, "description": algo.describe(), "nodes": a.nodes, "transport": a.transport,
                "workers": workers, "poll": poll, "size": a.size, "iterations": a.iterations,
                "warmup": a.warmup, "window": a.window, "kills": kills, "o_ns": o_ns, "L_ns": l_ns,
                "own_o_ns": own_o_ns, "shared_cores": a.shared_cores,
                "os_ns": model.os_ns, "or_ns": model.or_ns, "unit_ns": model.unit_ns,
                "model_cores": model_cores, "model_visit_ns": model_cores.map(|_| model_visit_ns),
                "model_work_ns": model_cores.map(|_| model_work_ns),
                "model_local_work_ns": model_cores.map(|_| model_local_work_ns),
                "model_local_or_ns": model_cores.map(|_| if *model_local_or_ns > 0 { *model_local_or_ns } else { model.or_ns }),
                "model_ring_poll_ns": model_cores.map(|_| *model_ring_poll_ns),
                "noisy_model": noisy,
                "stage_stamps": crate::runtime::node::stages::ON,
                "loss": a.loss.map_or(0.0, |l| l.p),
            },
            "logp_estimate": est,
            "calibration": cal,
            "node_hop": node_hop,
            "coloring_latency_us": pcts(&res.coloring),
            "quiescence_latency_us": pcts(&res.quiescence),
            "delivery_latency_us": pcts(&res.delivery),
            "osu_bcast_us": res.per_rank.osu().map(osu_us),
            "messages_per_op": res.messages.mean(),
            "violations": res.violations,
            "timeouts": res.timeouts,
            "dropped_ops": res.dropped_ops,
            "not_run": res.not_run,
            "failures": verdict.reasons,
            "measured_ops": res.measured,
            "wall_seconds": res.wall.as_secs_f64(),
            "preempted": res.preempted(),
            "ops_per_second": res.measured as f64 / res.wall.as_secs_f64().max(1e-9),
            "prediction": pred.as_ref().map(|p| json!({
                "coloring": compare(&res.coloring, &p.coloring),
                "quiescence": compare(&res.quiescence, &p.quiescence),
                "messages_per_op": p.messages,
                "osu_bcast": compare_osu(res.per_rank.osu(), p.osu_bcast),
                "per_rank_delivery_us": per_rank(&res.per_rank.means_by_rank(), &p.per_rank)
                    .into_iter()
                    .map(|r| json!({"rank": r.rank, "measured": r.measured / 1e3, "model": r.model / 1e3, "ratio": r.ratio()}))
                    .collect::<Vec<_>>(),
            })),
            "segments": super::segments::json(res, pred.as_ref()),
            "transport": res.transport,
            "acks_per_data": acks_per_data(a.transport == TransportKind::Udp, &res.transport),
            "drops": res.drops,
            "stale": res.stale, "spoofed": res.spoofed, "wrong_kind": res.wrong_kind, "backpressure": res.backpressure,
            "deferred_overflow": res.deferred_overflow, "too_far": res.too_far,
            "dead_nodes": res.dead_nodes,
            "false_suspicions": res.false_suspicions,
            "clock_uncertainty_ns": res.clock_uncertainty_ns,
            "clocks_ns": res.clocks.iter().map(|c| c.map(|(o, u)| json!({"offset": o, "uncertainty": u}))).collect::<Vec<_>>(),
            "deliveries_before_start": res.before_start,
        });
        println!("{v}");
        return;
    }
    let mut s = String::new();
    s += &format!("ftcoll bench: {}\n", algo.describe());
    s += &format!(
        "nodes={} transport={:?}{} workers={} poll={:?} size={}B iterations={} warmup={} window={} kills={}\n",
        a.nodes,
        a.transport,
        if a.procs {
            " (one process per node)"
        } else if a.boot {
            " (launched, one process per node, bootstrapped by the BMG overlay from parents' addresses)"
        } else if a.join {
            " (launched, one process per node, joined at rank 0)"
        } else {
            ""
        },
        workers,
        poll,
        a.size,
        a.iterations,
        a.warmup,
        a.window,
        kill_text
    );
    match est {
        Some(e) => {
            s += &format!(
                "LogP (estimated by ping-pong, median of {}{}): o = {} ns (send {} / recv {}), L = {} ns, RTT = {} ns\n",
                e.samples,
                e.preempted
                    .map(|n| format!("; {n} more left out, the thread was preempted in them"))
                    .unwrap_or_default(),
                (e.o_send_ns + e.o_recv_ns).div_ceil(2),
                e.o_send_ns,
                e.o_recv_ns,
                l_ns,
                e.rtt_ns
            );
            let ci =
                |c: crate::runtime::logp::Ci| format!("[{:.0}, {:.0}] ns (±{:.0}%)", c.lo, c.hi, 50.0 * c.spread());
            s += &format!(
                "  spread of the estimate (95% interval of the median): send {}, recv {}; `ftcoll logp --save F` + `--params F` gives a stable calibration\n",
                ci(e.o_send_ci_ns),
                ci(e.o_recv_ci_ns)
            );
        }
        None if cal.is_some() && !a.o_ns_given && !a.l_ns_given => {
            s += &format!("LogP (from the calibration, its medians on the next line): L = {l_ns} ns\n")
        }
        None => s += &format!("LogP (given): o = {own_o_ns} ns, L = {l_ns} ns\n"),
    }
    if let (Some(c), Some(path)) = (cal, &a.params) {
        s += &format!(
            "calibration {} ({} samples, {}, {} B; median and 95% interval): {}\n",
            path.display(),
            c.samples,
            c.transport,
            c.size,
            c.summary()
        );
    }
    s += &format!(
        "model: LogGP o_s = {} ns, o_r = {} ns, L = {} ns; the protocols and the simulator count in units of {} ns; {}\n",
        model.os_ns,
        model.or_ns,
        model.l_ns,
        model.unit_ns,
        match model_cores {
            Some(c) if *model_visit_ns > 0 => format!(
                "{} nodes on {c} cores (rank r on core r mod {c}), a core doing one send or receive at a time and visiting its nodes in turn, {model_visit_ns} ns a visit of an idle node and {model_work_ns} ns more a visit with work after its last send or receive (measured: the 2-node run's passes), a message between nodes of one core without L{}{}",
                a.nodes,
                if *model_local_or_ns > 0 {
                    format!(
                        ", received in {model_local_or_ns} ns, and {model_local_work_ns} ns more a visit that received only from its own core, nothing more a visit that only sent (measured: one core's 2- and 3-node runs)"
                    )
                } else {
                    String::new()
                },
                if *model_ring_poll_ns > 0.0 {
                    format!(
                        ", and {model_ring_poll_ns:.1} ns more a visit for each node beyond the first that sends to its node (an in-process poll reads a ring per sender; measured: an idle poll with {} rings against one)",
                        a.nodes.saturating_sub(1)
                    )
                } else {
                    String::new()
                },
            ),
            Some(c) => format!(
                "{} nodes on {c} cores (rank r on core r mod {c}), a core doing one send or receive at a time",
                a.nodes
            ),
            None if o_ns != own_o_ns => "processor sharing (--shared-cores)".to_string(),
            None => "a core per node".to_string(),
        }
    );
    if let Some(h) = node_hop {
        s += &format!(
            "model: a node's hop {:.0} ns (measured: 2 nodes, no correction) = the transport's o_s + L + o_r {} ns {}\n",
            h.hop_ns.median,
            h.transport_hop_ns,
            h.own_cost("(protocol, codec, bookkeeping)")
        );
        if let Some(local) = h.local_hop_ns {
            s += &format!(
                "model: one core's hop {:.0} ns (measured: 2 nodes on one worker) = the node's send + {} ns, a receive from the same core; 3 nodes on one worker, the root sending to both, {} = two such hops + {} ns the first receiver's visit held the core after its receive\n",
                local.median,
                h.local_or_ns,
                h.local_fanout_ns
                    .map_or("-".to_string(), |f| format!("{:.0} ns", f.median)),
                h.local_work_ns.unwrap_or(0)
            );
        }
    }
    if *noisy {
        s += if cal.is_some() {
            "model: noisy LogGP: each message's o_s, o_r and L drawn from the calibration's distributions\n"
        } else {
            "model: noisy LogGP: each message's o_s, o_r and L drawn from the distributions of the ping-pong above\n"
        };
    }
    if let Some(l) = a.loss {
        let ns = |t: crate::model::Time| t.saturating_mul(model.unit_ns) as f64 / 1000.0;
        s += &format!(
            "loss: each node's transport dropped {:.1} % of the datagrams it received; model: a lost copy of a message arrives again one retransmission timeout later ({:.0} us, {}; the first {} times, then doubling up to {:.0} us; a mean {:.1} us per message)\n",
            l.p * 100.0,
            ns(l.rto),
            if a.loss_rto_measured {
                "the run's mean wait before a timer retransmission"
            } else {
                "the transport's floor on a one-way link, rto_min + ack_delay_one_way: no timer fired"
            },
            l.linear,
            ns(l.max),
            l.mean_delay() * model.unit_ns as f64 / 1000.0
        );
    }
    if o_ns != own_o_ns {
        s += &format!(
            "shared cores: {} nodes on {} cores, each runs {}/{} of the time: o taken as {o_ns} ns (protocols' time unit and model)\n",
            a.nodes,
            a.shared_cores.unwrap_or(0),
            a.shared_cores.unwrap_or(0),
            a.nodes
        );
    }
    if a.join && est.is_some() {
        s += "note: L and o were estimated on rank 0's loopback, not between hosts: give --L-ns/--o-ns from `ftcoll logp` between two hosts for a cluster model\n";
    }
    s += &format!(
        "\n{:<22}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
        "latency (µs)", "t_min", "p50", "avg", "p99", "p99.9", "max"
    );
    s += &row("coloring", &res.coloring);
    s += &row("quiescence", &res.quiescence);
    s += &row("per-node delivery", &res.delivery);
    if let Some(o) = res.per_rank.osu() {
        s += &format!(
            "osu_bcast (per rank: mean of its broadcast times; over ranks): avg {:.2} µs  min {:.2}  max {:.2}\n",
            o.avg / 1e3,
            o.min / 1e3,
            o.max / 1e3
        );
    }
    s += &format!(
        "\nmessages per operation: {:.2}   consistency violations: {}   timeouts: {}   ops with unsent messages: {}   operations: {} ({:.0}/s)\n",
        res.messages.mean(),
        res.violations,
        res.timeouts,
        res.dropped_ops,
        res.measured,
        res.measured as f64 / res.wall.as_secs_f64().max(1e-9)
    );
    if let Some(n) = res.preempted() {
        s += &format!(
            "the workers' threads were preempted {n} times over the run (involuntary context switches, warm-up included; the model has none)\n"
        );
    }
    if res.not_run > 0 {
        s += &format!(
            "stopped early: {} measured operations not run ({})\n",
            res.not_run,
            crate::experiment::verdict::stop_reason(res.root_lost)
        );
    }
    if let Some(p) = &pred {
        s += &format!(
            "\nLogP prediction (simulator, same algorithm and nodes; crashed nodes dead in the share of operations after their crash; {:.2} messages/op):\n",
            p.messages
        );
        s += &format!(
            "  {:<11}{:<7}{:>12}{:>12}{:>10}\n",
            "latency", "", "measured µs", "model µs", "ratio"
        );
        s += &compare_rows("coloring", &res.coloring, &p.coloring);
        s += &compare_rows("quiescence", &res.quiescence, &p.quiescence);
        if let (Some(m), Some(o)) = (res.per_rank.osu(), p.osu_bcast) {
            for (q, mv, pv) in [("avg", m.avg, o.avg), ("max", m.max, o.max)] {
                s += &format!(
                    "  {:<11}{q:<7}{:>12.2}{:>12.2}{:>10.2}\n",
                    "osu_bcast",
                    mv / 1e3,
                    pv / 1e3,
                    mv / pv.max(1.0)
                );
            }
        }
        let ranks = per_rank(&res.per_rank.means_by_rank(), &p.per_rank);
        if let Some(w) = furthest(&ranks) {
            s += &format!(
                "  per rank (mean delivery): furthest from the model rank {} at {:.2} against {:.2} µs ({:.2}); every rank in the JSON's prediction.per_rank_delivery_us\n",
                w.rank,
                w.measured / 1e3,
                w.model / 1e3,
                w.ratio().unwrap_or(0.0)
            );
        }
    }
    s += &super::segments::text(res, pred.as_ref());
    if a.procs && a.nodes as usize > cores {
        let how = match poll {
            PollMode::Blocking => "they block on their sockets and the OS wakes them",
            PollMode::Yield | PollMode::Adaptive => "a message waits until its process next gets a core",
            PollMode::Busy => "spinning processes hold the cores the others need",
        };
        s += &format!(
            "note: {} node processes share {} cores (plus this coordinator): {how}; the model takes turns on the cores, the OS's scheduler does not always.\n",
            a.nodes, cores
        );
    }
    if let Some(u) = res.clock_uncertainty_ns {
        s += &format!(
            "clocks: each process's offset to this coordinator estimated by ping-pong (not applied where a process reached it at an address of its own host and the estimate held 0); largest uncertainty {:.2} µs\n",
            u as f64 / 1e3
        );
    }
    if res.before_start > 0 {
        s += &format!(
            "clocks: {} deliveries stamped before their operation's start, each recorded as 1 ns: the processes' clocks disagree by more than a hop, and the latencies near 0 are clock error\n",
            res.before_start
        );
    }
    let t = &res.transport;
    if a.join {
        s += "transport: counters stay with each node in a launched run (ftcoll node prints them)\n";
        print!("{s}");
        return;
    }
    s += &format!(
        "transport: sent {} received {} retransmits {} suspected {}; dropped: malformed {} foreign {} bad-mac {} foreign-job {} bad-rank {} decode {} stale {} too-far {} deferred-overflow {}; dead nodes {:?}\n",
        t.sent,
        t.received,
        t.retransmits,
        t.suspected,
        t.malformed,
        t.foreign,
        t.bad_mac,
        t.foreign_job,
        t.bad_rank,
        res.drops.total(),
        res.stale,
        res.too_far,
        res.deferred_overflow,
        res.dead_nodes
    );
    s += &format!(
        "fail-stop: {} false suspicion(s) (live nodes suspected, fenced and stopped), {} FENCEs sent\n",
        res.false_suspicions, t.fences_sent
    );
    if let Some(r) = acks_per_data(a.transport == TransportKind::Udp, t) {
        s += &acks_line(r, t.acks_sent);
    }
    if res.counters_lost > 0 {
        s += &format!(
            "transport: the counters of {} SIGKILLed process(es) died with them (their sends are missing from the totals, not what their peers received)\n",
            res.counters_lost
        );
    }
    print!("{s}");
}

/// Percentiles of a histogram in µs.
/// A histogram's percentiles in µs; `null` for an empty one (every operation of a segment
/// abandoned: no latency, not 0).
pub(super) fn pcts(h: &Histogram<u64>) -> serde_json::Value {
    if h.is_empty() {
        return serde_json::Value::Null;
    }
    let us = |v: u64| v as f64 / 1000.0;
    json!({
        "t_min": us(h.min()), "p50": us(h.value_at_quantile(0.5)), "avg": h.mean() / 1000.0,
        "p99": us(h.value_at_quantile(0.99)), "p99.9": us(h.value_at_quantile(0.999)), "max": us(h.max()),
    })
}

fn row(name: &str, h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return format!(
            "{name:<22}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
            "-", "-", "-", "-", "-", "-"
        );
    }
    let us = |v: u64| v as f64 / 1000.0;
    format!(
        "{name:<22}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}\n",
        us(h.min()),
        us(h.value_at_quantile(0.5)),
        h.mean() / 1000.0,
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999)),
        us(h.max())
    )
}

pub(super) const QS: [f64; 3] = [0.5, 0.99, 0.999];

pub(super) fn compare(h: &Histogram<u64>, pred: &[f64; 3]) -> serde_json::Value {
    if h.is_empty() {
        // Nothing measured: the prediction alone, no ratio.
        return json!({
            "measured_us": null,
            "predicted_us": {"p50": pred[0] / 1e3, "p99": pred[1] / 1e3, "p99.9": pred[2] / 1e3},
            "ratio": null,
        });
    }
    let m: Vec<f64> = QS.iter().map(|&q| h.value_at_quantile(q) as f64).collect();
    json!({
        "measured_us": {"p50": m[0] / 1e3, "p99": m[1] / 1e3, "p99.9": m[2] / 1e3},
        "predicted_us": {"p50": pred[0] / 1e3, "p99": pred[1] / 1e3, "p99.9": pred[2] / 1e3},
        "ratio": {"p50": m[0] / pred[0].max(1.0), "p99": m[1] / pred[1].max(1.0), "p99.9": m[2] / pred[2].max(1.0)},
    })
}

fn compare_rows(name: &str, h: &Histogram<u64>, pred: &[f64; 3]) -> String {
    let mut s = String::new();
    for (i, q) in ["p50", "p99", "p99.9"].iter().enumerate() {
        if h.is_empty() {
            s += &format!("  {name:<11}{q:<7}{:>12}{:>12.2}{:>10}\n", "-", pred[i] / 1e3, "-");
            continue;
        }
        let m = h.value_at_quantile(QS[i]) as f64;
        s += &format!(
            "  {name:<11}{q:<7}{:>12.2}{:>12.2}{:>10.2}\n",
            m / 1e3,
            pred[i] / 1e3,
            m / pred[i].max(1.0)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::TransportStats;

    #[test]
    fn acks_per_data_is_a_udp_ratio() {
        let t = TransportStats {
            sent: 400,
            acks_sent: 100,
            ..TransportStats::default()
        };
        assert_eq!(acks_per_data(true, &t), Some(0.25));
        assert_eq!(acks_per_data(false, &t), None);
        assert_eq!(acks_per_data(true, &TransportStats::default()), None);
        let quiet = TransportStats {
            sent: 400,
            ..TransportStats::default()
        };
        assert_eq!(acks_per_data(true, &quiet), Some(0.0));
    }
}
