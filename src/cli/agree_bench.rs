//! `ftcoll agree` without `--sim`: the ERA benchmark on a local cluster
//! ([`crate::runtime::agree`]), like ULFM's `benchagree`: failure-free, failure-detecting,
//! stabilizing and post-failure agreement latencies with HdrHistogram percentiles.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;

use crate::cli::agree::{AgreeArgs, RebalanceName, TransportName};
use crate::protocol::agree::{EraConfig, Rebalance, Shape};
use crate::runtime::agree::{AgreeBench, AgreeBenchReport, AgreeTransport};

fn parse_kills(spec: &str) -> Result<Vec<(u32, u64)>, String> {
    if spec == "none" {
        return Ok(Vec::new());
    }
    let mut v = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let bad =
            || format!("bad --kill '{part}': the network benchmark takes R@I (rank R dies at agreement I) or none");
        let (r, i) = part.split_once('@').ok_or_else(bad)?;
        v.push((r.parse().map_err(|_| bad())?, i.parse().map_err(|_| bad())?));
    }
    Ok(v)
}

/// The benchmark of these flags.
pub fn bench(a: &AgreeArgs) -> Result<AgreeBench, String> {
    if a.window != 1 {
        return Err("the network benchmark runs blocking agreements: --window must be 1".into());
    }
    if a.heartbeat_us == 0 || a.suspect_ms == 0 {
        return Err("--heartbeat-us and --suspect-ms must be positive".into());
    }
    if a.agreements == 0 {
        return Err("--agreements must be at least 1".into());
    }
    if a.duration == Some(0) {
        return Err("--duration must be positive".into());
    }
    if a.duration.is_some() && a.kill.is_some() {
        return Err("--duration runs are failure-free soaks: drop --kill".into());
    }
    let shape: Shape = a.tree.parse()?;
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    Ok(AgreeBench {
        n: a.nodes,
        era: EraConfig {
            shape,
            window: 1,
            gc: !a.no_gc,
            rebalance: match a.rebalance {
                RebalanceName::Off => Rebalance::Off,
                RebalanceName::Degenerated => Rebalance::Degenerated,
                RebalanceName::Always => Rebalance::Always,
            },
        },
        transport: match a.transport {
            TransportName::Udp => AgreeTransport::Udp,
            TransportName::Inproc => AgreeTransport::Inproc,
            TransportName::Verbs => AgreeTransport::Verbs,
        },
        workers: a.workers.unwrap_or(cores.min(a.nodes as usize)),
        pin: !a.no_pin,
        warmup: a.warmup,
        iterations: a.agreements,
        duration: a.duration.map(Duration::from_secs),
        kills: a.kill.as_deref().map(parse_kills).transpose()?.unwrap_or_default(),
        heartbeat: Duration::from_micros(a.heartbeat_us),
        suspect_after: Duration::from_millis(a.suspect_ms),
        op_timeout: Duration::from_millis(a.op_timeout_ms.max(1)),
        seed: a.seed,
    })
}

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// Runs the benchmark and prints its report.
pub fn run(a: &AgreeArgs) -> Result<(), String> {
    let b = bench(a)?;
    let r = if a.procs {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
        crate::runtime::agree_procs::run(&b, &exe)?
    } else {
        crate::runtime::agree::run(&b)?
    };
    if a.json {
        let classes: Vec<_> = r
            .classes
            .iter()
            .filter(|c| !c.node.is_empty())
            .map(|c| {
                // (`--procs` has per-node latencies only.)
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
                "messages_per_agreement": r.messages_per_agreement, "agreements": r.agreements, "seconds": r.seconds,
                "procs": a.procs, "peak_rss_kb": r.peak_rss_kb, "era_stored_max": r.era_stored_max, "late_returns": r.late,
            })
        );
    } else {
        print!("{}", table(&b, &r, a.procs));
    }
    if r.unfinished > 0 {
        return Err(format!("{} live nodes did not finish (timed out)", r.unfinished));
    }
    Ok(())
}

fn table(b: &AgreeBench, r: &AgreeBenchReport, procs: bool) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ftcoll agree: ERA tree={} nodes={} transport={:?} {} warmup={} {} kill={}",
        b.era.shape,
        b.n,
        b.transport,
        if procs {
            "one process per node".to_string()
        } else {
            format!("workers={}", b.workers.min(b.n as usize))
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
    let _ = writeln!(
        s,
        "\nmessages per agreement: {:.2} (+ {} heartbeats)   agreements/s: {:.0}",
        r.messages_per_agreement,
        r.heartbeats,
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
    if procs {
        let _ = writeln!(
            s,
            "(per-agreement rows need every node's clock in one process: --procs reports per-node latencies)"
        );
    }
    let _ = writeln!(
        s,
        "memory: peak RSS {} kB{}; most agreements one node's ERA kept at once: {} (GC §4); late returns: {}",
        r.peak_rss_kb.map_or("?".to_string(), |k| k.to_string()),
        if procs { " (largest node process)" } else { "" },
        r.era_stored_max,
        r.late
    );
    s
}
