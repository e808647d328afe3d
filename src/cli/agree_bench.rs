//! `ftcoll agree` without `--sim`: the ERA benchmark on a local cluster
//! ([`crate::runtime::agree`]), like ULFM's `benchagree`: failure-free, failure-detecting,
//! stabilizing and post-failure agreement latencies with HdrHistogram percentiles.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;

use crate::cli::agree_args::{AgreeArgs, RebalanceName, TransportName};
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
        op_timeout: Duration::from_millis(a.op_timeout_ms),
        seed: a.seed,
    })
}

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// With `--join`: this process's part of the launched run. The job key comes from
/// `FTCOLL_KEY` (every host's process must share it); without one the run is unauthenticated
/// (said loudly).
fn join_spec(a: &AgreeArgs) -> Result<crate::experiment::launch::agree_join::JoinSpec, String> {
    Ok(crate::experiment::launch::agree_join::JoinSpec {
        coordinator: a.join.ok_or("--join missing")?,
        rank: a.rank.ok_or("--join needs --rank (bench here with --nodes)")?,
        bind: a.bind,
        timeout: Duration::from_millis(a.join_timeout_ms.max(1)),
        key: crate::cli::auth::job_key(crate::cli::auth::AuthMode::On, None, false)?,
    })
}

/// Runs the benchmark and prints its report.
pub fn run(a: &AgreeArgs) -> Result<(), String> {
    let mut a = a.clone();
    if a.join.is_some() {
        // Rank and size: the flags, else the launcher's environment.
        let (rank, n) = crate::runtime::procs::rank_and_size(a.rank, a.rank.map(|_| a.nodes), "nodes")?;
        (a.rank, a.nodes) = (Some(rank), n);
    }
    let a = &a;
    let b = bench(a)?;
    let mode = if a.join.is_some() {
        Mode::Joined
    } else if a.procs {
        Mode::Procs
    } else {
        Mode::Threads
    };
    let r = match mode {
        Mode::Joined => match crate::experiment::launch::agree_join::run(&b, &join_spec(a)?)? {
            Some(r) => r,
            None => return Ok(()), // A node of a launched run: rank 0 reports.
        },
        Mode::Procs => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
            crate::experiment::launch::agree::run(&b, &exe)?
        }
        Mode::Threads => crate::runtime::agree::run(&b)?,
    };
    // With node processes, this process only classes their returns: its own memory too.
    let coordinator_rss = (mode != Mode::Threads)
        .then(crate::runtime::agree::peak_rss_kb)
        .flatten();
    if a.json {
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
                "messages_per_agreement": r.messages_per_agreement, "agreements": r.agreements, "seconds": r.seconds,
                "procs": a.procs, "joined": a.join.is_some(), "peak_rss_kb": r.peak_rss_kb,
                "coordinator_peak_rss_kb": coordinator_rss, "era_stored_max": r.era_stored_max, "late_returns": r.late,
                "bad_report_lines": r.bad_lines, "clock_uncertainty_us": r.clock_uncertainty_ns.map(|x| x as f64 / 1000.0),
            })
        );
    } else {
        print!("{}", table(&b, &r, mode, coordinator_rss));
    }
    if r.unfinished > 0 {
        return Err(format!("{} live nodes did not finish (timed out)", r.unfinished));
    }
    Ok(())
}

/// Where the nodes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Threads,
    /// `--procs`: node processes started by this one.
    Procs,
    /// `--join`: one process per host, launched by someone else; rank 0 reports.
    Joined,
}

fn table(b: &AgreeBench, r: &AgreeBenchReport, mode: Mode, coordinator_rss: Option<u64>) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ftcoll agree: ERA tree={} nodes={} transport={:?} {} warmup={} {} kill={}",
        b.era.shape,
        b.n,
        b.transport,
        match mode {
            Mode::Procs => "one process per node".to_string(),
            Mode::Joined => "one process per host, joined at rank 0".to_string(),
            Mode::Threads => format!("workers={}", b.workers.min(b.n as usize)),
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
    if mode != Mode::Threads && r.bad_lines > 0 {
        let _ = writeln!(s, "malformed report lines from the nodes (dropped): {}", r.bad_lines);
    }
    if let Some(u) = r.clock_uncertainty_ns {
        let _ = writeln!(
            s,
            "clocks: every node's offset to rank 0 by ping-pong; largest uncertainty {:.2} µs (per-agreement times carry it)",
            u as f64 / 1000.0
        );
    }
    let kb = |k: Option<u64>| k.map_or("?".to_string(), |k| k.to_string());
    let _ = writeln!(
        s,
        "memory: peak RSS {} kB{}; most agreements one node's ERA kept at once: {} (GC §4); late returns: {}",
        kb(r.peak_rss_kb),
        match mode {
            Mode::Threads => String::new(),
            _ => format!(" (largest node process; {} kB this process)", kb(coordinator_rss)),
        },
        r.era_stored_max,
        r.late
    );
    s
}
