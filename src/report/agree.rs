//! What `ftcoll agree` prints: in simulation (`--sim`: latency, messages and critical-path
//! steps over the runs, the §2.1 properties checked) and on the network (threads, `--procs`,
//! `--join`: the latencies of each class of agreement — failure-free, failure-detecting,
//! stabilizing, post-failure), as a table or one JSON object.

use hdrhistogram::Histogram;
use serde_json::json;

use crate::experiment::agree::Totals;
use crate::experiment::agree_predict::{AgreePrediction, Compared};
use crate::runtime::agree::{AgreeBench, AgreeBenchReport, AgreeTransport};
use crate::sim::agree::AgreeSim;
use crate::sim::stats::Dist;

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// How a network agreement run is shown, beside its results.
pub struct BenchShown<'a> {
    pub mode: AgreeMode,
    /// The flags as given.
    pub procs: bool,
    pub joined: bool,
    /// This process's peak memory when it only classed other processes' returns.
    pub coordinator_rss: Option<u64>,
    pub json: bool,
    /// Why the run failed ([`crate::experiment::verdict::Verdict`]'s reasons; empty: passed).
    pub failures: &'a [String],
    /// The run against ERA in the LogGP simulator with this machine's parameters.
    pub prediction: Option<&'a AgreePrediction>,
}

/// Prints the report of `r` (a run of `b`): one JSON object with `json`, else the table.
pub fn print_bench(b: &AgreeBench, r: &AgreeBenchReport, shown: &BenchShown) {
    let BenchShown {
        mode,
        procs,
        joined,
        coordinator_rss,
        json,
        failures,
        prediction,
    } = *shown;
    if json {
        let classes: Vec<_> = r
            .classes
            .iter()
            .filter(|c| !c.node.is_empty())
            .map(|c| {
                let agreement = (!c.agreement.is_empty()).then(|| {
                    json!({"min": us(&c.agreement, 0.0), "p50": us(&c.agreement, 0.5), "mean": c.agreement.mean() / 1000.0,
                        "p99": us(&c.agreement, 0.99), "p99.9": us(&c.agreement, 0.999), "max": c.agreement.max() as f64 / 1000.0})
                });
                json!({
                    "class": c.name, "count": c.agreement.len(), "node_count": c.node.len(),
                    "agreement_us": agreement,
                    "node_us": {"p50": us(&c.node, 0.5), "mean": c.node.mean() / 1000.0, "p99": us(&c.node, 0.99)},
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "nodes": b.n, "transport": format!("{:?}", b.transport), "tree": b.era.shape.to_string(),
                "classes": classes, "disagreements": r.disagreements, "invalid": r.invalid, "unfinished": r.unfinished,
                "suspicions": r.suspicions, "false_suspicions": r.false_suspicions,
                "first_success_after_kill_us": r.first_success_after_kill.map(|x| x as f64 / 1000.0),
                "first_suspicion_after_kill_us": r.first_suspicion_after_kill.map(|x| x as f64 / 1000.0),
                "messages_per_agreement": r.messages_per_agreement, "agreements": r.agreements, "seconds": r.seconds,
                "procs": procs, "joined": joined, "heartbeat_us": b.heartbeat.as_micros() as u64,
                "peak_rss_kb": r.peak_rss_kb,
                "coordinator_peak_rss_kb": coordinator_rss, "era_stored_max": r.era_stored_max, "late_returns": r.late,
                "bad_report_lines": r.bad_lines, "clock_uncertainty_us": r.clock_uncertainty_ns.map(|x| x as f64 / 1000.0),
                "refused_streams": r.refused_streams, "preempted": r.preempted,
                "acks_per_data": crate::report::bench::acks_per_data(b.transport == AgreeTransport::Udp, &r.transport),
                "drops": r.drops,
                "transport_counters": {
                    "sent": r.transport.sent, "received": r.transport.received,
                    "retransmits": r.transport.retransmits, "acks_sent": r.transport.acks_sent,
                    "window_full": r.transport.window_full, "suspected": r.transport.suspected,
                    "refused": r.transport.refused, "refused_probes": r.transport.refused_probes,
                    "died_on_host": r.transport.died_on_host,
                    "heartbeats": r.heartbeats, "probes": r.probes,
                },
                "prediction": prediction,
                "failures": failures,
            })
        );
    } else {
        print!("{}", table(b, r, mode, coordinator_rss));
        if let Some(p) = prediction {
            print!("{}", model_lines(p, procs.then_some(b.n)));
        }
    }
}

/// The measured/modeled lines of the table; `procs`: the run's node processes (`--procs`).
fn model_lines(p: &AgreePrediction, procs: Option<u32>) -> String {
    use std::fmt::Write;
    let m = &p.model;
    let mut s = format!(
        "\nmodel: ERA in the {}LogGP simulator, o_s={} ns o_r={} ns L={} ns (ping-pong of {}-byte messages{}), {} ({} failure-free agreements; heartbeats not modeled)\n",
        if p.noisy { "noisy " } else { "" },
        m.os_ns,
        m.or_ns,
        m.l_ns,
        crate::experiment::agree_predict::ERA_MESSAGE_BYTES,
        if p.noisy {
            "; each message's o_s, o_r and L drawn from their distributions there, medians as above"
        } else {
            ""
        },
        match (p.model_cores, p.node_hop.as_ref().map_or(0, |h| h.visit_ns)) {
            (Some(c), 0) => format!("the nodes sharing {c} cores"),
            (Some(c), v) => format!(
                "the nodes sharing {c} cores, each visiting its nodes in turn, {v} ns a visit of an idle node (timed: the 2-node run's passes without progress)"
            ),
            (None, _) => "a core per node".to_string(),
        },
        p.agreements
    );
    if let Some(h) = &p.node_hop {
        let _ = writeln!(
            s,
            "model: a hop through an ERA node {:.0} ns (a 2-node agreement measured, over the model's hops in it) = the transport's o_s + L + o_r {} ns {}",
            h.hop_ns.median,
            h.transport_hop_ns,
            h.own_cost("")
        );
    }
    let _ = writeln!(
        s,
        "{:<34}{:>12}{:>12}{:>10}",
        "failure-free (µs)", "measured", "modeled", "ratio"
    );
    compared_rows(&mut s, &p.agreement, &p.node);
    if let Some(pf) = &p.post_failure {
        let _ = writeln!(
            s,
            "{:<34}{:>12}{:>12}{:>10}",
            "post-failure (µs)", "measured", "modeled", "ratio"
        );
        compared_rows(&mut s, &pf.agreement, &pf.node);
        let _ = writeln!(
            s,
            "model: post-failure, {} agreements with the killed nodes dead from the start, after the detecting and stabilizing ones",
            pf.agreements
        );
    }
    if let (Some(n), Some(c)) = (procs, p.model_cores) {
        // Measured on the 2-core development machine: threads 1.0-1.2 of the model at
        // N = 3..8, node processes 1.5-3.3 (docs/measurements.md, "The model where node
        // processes share cores").
        let _ = writeln!(
            s,
            "note: {n} node processes share {c} cores (plus this coordinator): a message waits until its process next gets a core, and the OS switches processes at a cost the model does not have (it takes turns on the cores for free, and its hop is a 2-node run of threads); compare with a core per process."
        );
    }
    s
}

/// The p50 and p99 rows of one class: per agreement, then per node.
fn compared_rows(s: &mut String, agreement: &Compared, node: &Compared) {
    use std::fmt::Write;
    for (what, c) in [("agreement", agreement), ("per node", node)] {
        for (q, me, pr, ra) in [
            ("p50", c.measured_p50_us, c.predicted_p50_us, c.ratio_p50),
            ("p99", c.measured_p99_us, c.predicted_p99_us, c.ratio_p99),
        ] {
            let _ = writeln!(s, "{:<34}{:>12.2}{:>12.2}{:>10.2}", format!("{what} {q}"), me, pr, ra);
        }
    }
}

/// Where the nodes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgreeMode {
    Threads,
    /// `--procs`: node processes started by this one.
    Procs,
    /// `--join`: one process per host, launched by someone else; rank 0 reports.
    Joined,
}

fn table(b: &AgreeBench, r: &AgreeBenchReport, mode: AgreeMode, coordinator_rss: Option<u64>) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ftcoll agree: ERA tree={} nodes={} transport={:?} {} warmup={} {} kill={}",
        b.era.shape,
        b.n,
        b.transport,
        match mode {
            AgreeMode::Procs => "one process per node".to_string(),
            AgreeMode::Joined => "one process per host, joined at rank 0".to_string(),
            AgreeMode::Threads => format!("workers={}", b.workers.min(b.n as usize)),
        },
        b.warmup,
        match b.duration {
            Some(d) => format!("duration={} s", d.as_secs()),
            None => format!("agreements={}", b.iterations),
        },
        if b.kills.is_empty() {
            "none".to_string()
        } else {
            b.kills
                .iter()
                .map(|(r, i)| format!("{r}@{i}"))
                .collect::<Vec<_>>()
                .join(",")
        }
    );
    let _ = writeln!(
        s,
        "failure detector: heartbeat {} µs to tree neighbours, suspect after {} ms of silence or a transport suspicion",
        b.heartbeat.as_micros(),
        b.suspect_after.as_millis()
    );
    let _ = writeln!(
        s,
        "\n{:<34}{:>7}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "latency (µs)", "count", "t_min", "p50", "avg", "p99", "p99.9", "max"
    );
    for c in &r.classes {
        for (what, h) in [("agreement", &c.agreement), ("per node", &c.node)] {
            if h.is_empty() {
                continue;
            }
            let _ = writeln!(
                s,
                "{:<34}{:>7}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}",
                format!("{} {what}", c.name),
                h.len(),
                h.min() as f64 / 1000.0,
                us(h, 0.5),
                h.mean() / 1000.0,
                us(h, 0.99),
                us(h, 0.999),
                h.max() as f64 / 1000.0
            );
        }
    }
    if let Some(t) = r.first_success_after_kill {
        let _ = writeln!(
            s,
            "\nkill to the first successful agreement returned everywhere: {:.2} µs",
            t as f64 / 1000.0
        );
    }
    if let Some(t) = r.first_suspicion_after_kill {
        let _ = writeln!(
            s,
            "kill to the first suspicion (failure detection): {:.2} µs",
            t as f64 / 1000.0
        );
    }
    let _ = writeln!(
        s,
        "\nmessages per agreement: {:.2} (+ {} heartbeats over the run, {} of them probes)   agreements/s: {:.0}",
        r.messages_per_agreement,
        r.heartbeats,
        r.probes,
        r.agreements as f64 / r.seconds.max(1e-9)
    );
    let _ = writeln!(
        s,
        "disagreements: {}   invalid values: {}   unfinished nodes: {}   suspicions: {} (false: {})",
        r.disagreements, r.invalid, r.unfinished, r.suspicions, r.false_suspicions
    );
    let _ = writeln!(
        s,
        "transport: sent {} received {} retransmits {} suspected {}; dropped {}",
        r.transport.sent,
        r.transport.received,
        r.transport.retransmits,
        r.transport.suspected,
        r.drops.total()
    );
    if let Some(q) = crate::report::bench::acks_per_data(b.transport == AgreeTransport::Udp, &r.transport) {
        s += &crate::report::bench::acks_line(q, r.transport.acks_sent);
    }
    if mode != AgreeMode::Threads && r.bad_lines > 0 {
        let _ = writeln!(s, "malformed report lines from the nodes (dropped): {}", r.bad_lines);
    }
    if let Some(u) = r.clock_uncertainty_ns {
        let _ = writeln!(
            s,
            "clocks: every node's offset to rank 0 by ping-pong; largest uncertainty {:.2} µs (per-agreement times carry it)",
            u as f64 / 1000.0
        );
    }
    if let Some(n) = r.preempted {
        let _ = writeln!(
            s,
            "the workers' threads were preempted {n} times over the run (involuntary context switches, warm-up included; the model has none)"
        );
    }
    let kb = |k: Option<u64>| k.map_or("?".to_string(), |k| k.to_string());
    let _ = writeln!(
        s,
        "memory: peak RSS {} kB{}; most agreements one node's ERA kept at once: {} (GC §4); late returns: {}",
        kb(r.peak_rss_kb),
        match mode {
            AgreeMode::Threads => String::new(),
            _ => format!(" (largest node process; {} kB this process)", kb(coordinator_rss)),
        },
        r.era_stored_max,
        r.late
    );
    s
}

/// The flags of an `agree --sim` run its report shows as given.
pub struct SimShown<'a> {
    pub runs: u64,
    pub kill: Option<&'a str>,
    /// The value type's name (`And32`, `And64`, `Union`).
    pub value: String,
    pub seed: u64,
}

/// Prints the report of `agree --sim`: one JSON object with `json`, else the table.
pub fn print_sim(
    sim: &AgreeSim,
    a: &SimShown,
    t: &Totals,
    (height, fanout, bound): (u32, u32, u32),
    secs: f64,
    json: bool,
) {
    if json {
        let p = |d: &Dist| serde_json::to_value(d.percentiles()).unwrap_or_default();
        println!(
            "{}",
            json!({
                "config": {
                    "nodes": sim.n, "tree": sim.era.shape.to_string(), "L": sim.logp.l, "o": sim.logp.o,
                    "agreements": sim.agreements, "runs": a.runs, "detect_delay": sim.detect_delay,
                    "detect_jitter": sim.detect_jitter, "kill": a.kill, "random_kills": sim.random_kills,
                    "value": a.value.to_lowercase(), "gc": sim.era.gc, "seed": a.seed,
                    "os": sim.params().os, "or": sim.params().or, "g": sim.params().g,
                    "G_k": sim.params().gk, "noise": sim.noise.is_some(), "cores": sim.cores,
                },
                "agreement_latency": p(&t.latency),
                "process_latency": p(&t.process_latency),
                "messages_per_agreement": p(&t.messages),
                "critical_path_steps": p(&t.steps),
                "max_messages_sent_by_one_process": p(&t.max_sent),
                "tree_height": height, "tree_fanout": fanout, "theorem5_bound": bound,
                "max_steps_failure_free": t.max_steps_failure_free,
                "failure_free_agreements": t.failure_free_agreements,
                "max_stored_agreements_per_process": t.max_stored,
                "not_acknowledged_returns": t.not_acknowledged,
                "rebalances": t.rebalances, "dead": t.dead, "aborted_runs": t.aborted,
                "violations": t.violations, "events": t.events, "seconds": secs,
            })
        );
    } else {
        print!("{}", sim_table(sim, a, t, (height, fanout, bound), secs));
    }
}

fn sim_table(sim: &AgreeSim, a: &SimShown, t: &Totals, (height, fanout, bound): (u32, u32, u32), secs: f64) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ftcoll agree --sim: ERA tree={} (height {height}, fan-out {fanout}) nodes={} L={} o={} value={}{}{}{}",
        sim.era.shape,
        sim.n,
        sim.logp.l,
        sim.logp.o,
        a.value,
        sim.loggp
            .map(|g| format!(" os={} or={} g={} G_k={}", g.os, g.or, g.g, g.gk))
            .unwrap_or_default(),
        if sim.noise.is_some() { " noise=on" } else { "" },
        sim.cores.map(|c| format!(" cores={c}")).unwrap_or_default(),
    );
    let _ = writeln!(
        s,
        "agreements={} per process x runs={}  detect-delay={} jitter={}  kills={}  random-kills={}  gc={} rebalance={:?}",
        sim.agreements,
        a.runs,
        sim.detect_delay,
        sim.detect_jitter,
        a.kill.unwrap_or("none"),
        sim.random_kills,
        sim.era.gc,
        sim.era.rebalance
    );
    let _ = writeln!(
        s,
        "\n{:<36}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "", "mean", "p50", "p99", "p99.9", "max"
    );
    for (name, d) in [
        ("agreement latency (entry→last ret.)", &t.latency),
        ("per-process latency (entry→return)", &t.process_latency),
        ("messages per agreement", &t.messages),
        ("critical-path message steps", &t.steps),
        ("most messages sent by one process", &t.max_sent),
    ] {
        let p = d.percentiles();
        let _ = writeln!(
            s,
            "{name:<36}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}",
            p.mean, p.p50, p.p99, p.p999, p.max
        );
    }
    let _ = writeln!(s, "(latencies in LogP time units)");
    if t.failure_free_agreements > 0 {
        let _ = writeln!(
            s,
            "Theorem 5 (failure-free): max steps {} over {} agreements, bound 2·⌈log_δ n⌉ = {bound} (δ = {fanout}): {}",
            t.max_steps_failure_free,
            t.failure_free_agreements,
            if t.max_steps_failure_free <= bound {
                "holds"
            } else {
                "exceeded (the tree is deeper than log_δ n)"
            }
        );
    }
    let _ = writeln!(
        s,
        "stored agreements per process (max): {}   failures: {}   'failure not acknowledged' returns: {}   tree rebuilds: {}",
        t.max_stored, t.dead, t.not_acknowledged, t.rebalances
    );
    let v = &t.violations;
    let _ = writeln!(
        s,
        "violations: agreement {} participation {} validity {} irrevocability {} failed-set {} termination {}   aborted runs: {}",
        v.agreement, v.participation, v.validity, v.irrevocability, v.failed_set, v.termination, t.aborted
    );
    let _ = writeln!(s, "simulated {} events in {secs:.2} s", t.events);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::agree_predict::PostFailure;
    use crate::model::BenchModel;

    fn prediction(model_cores: Option<u32>) -> AgreePrediction {
        let c = Compared {
            measured_p50_us: 30.0,
            predicted_p50_us: 10.0,
            ratio_p50: 3.0,
            measured_p99_us: 90.0,
            predicted_p99_us: 12.0,
            ratio_p99: 7.5,
        };
        AgreePrediction {
            model: BenchModel::new(2000, 800, 350),
            node_hop: None,
            model_cores,
            noisy: false,
            agreements: 500,
            agreement: c,
            node: c,
            post_failure: None,
        }
    }

    /// A run that killed nodes prints its post-failure agreements beside their model, after
    /// the failure-free ones; one without has no such rows.
    #[test]
    fn the_post_failure_class_is_printed_beside_its_model() {
        let mut p = prediction(None);
        assert!(!model_lines(&p, None).contains("post-failure"));
        let c = Compared {
            measured_p50_us: 5.5,
            predicted_p50_us: 2.0,
            ratio_p50: 2.75,
            measured_p99_us: 9.0,
            predicted_p99_us: 3.0,
            ratio_p99: 3.0,
        };
        p.post_failure = Some(PostFailure {
            agreements: 498,
            agreement: c,
            node: c,
        });
        let text = model_lines(&p, None);
        let (ff, pf) = text.split_once("post-failure (µs)").expect("a post-failure table");
        assert!(ff.contains("failure-free (µs)"), "{text}");
        assert!(
            pf.contains("agreement p50") && pf.contains("5.50") && pf.contains("2.75"),
            "{text}"
        );
        assert!(
            pf.contains("498 agreements with the killed nodes dead from the start"),
            "{text}"
        );
    }

    /// Node processes on fewer cores than they are get the note that the model does not
    /// switch processes; threads on shared workers, or processes with a core each, do not.
    #[test]
    fn processes_sharing_cores_are_told_the_model_does_not_switch_them() {
        let shared = model_lines(&prediction(Some(2)), Some(4));
        assert!(
            shared.contains("note: 4 node processes share 2 cores")
                && shared.contains("compare with a core per process"),
            "{shared}"
        );
        for (cores, procs) in [(Some(2), None), (None, Some(4))] {
            let text = model_lines(&prediction(cores), procs);
            assert!(!text.contains("note:"), "{cores:?} {procs:?}: {text}");
            assert!(text.contains("agreement p50") && text.contains("3.00"), "{text}");
        }
    }
}
