//! `ftcoll sim --algo bmg-build | dissemination` (and `failure-notices`, [`crate::cli::notices`]):
//! convergence tables of the overlay
//! protocols (BMG paper §4, Figures 2–4; Han–Finkel Theorems 1–3), as a table or `--json`.

use serde::Serialize;
use serde_json::json;

use crate::cli::flags::{AlgoArg, SchedulerName, SimArgs};
use crate::protocol::ProtoRng;
use crate::protocol::overlay::han_finkel::{Tolerance, run_len};
use crate::sim::bmg_build::{Build, BuildRun, Convergence, Start};
use crate::sim::dissemination::{all_gather, reorganize};
use crate::sim::phased::Scheduler;
use crate::topology::launch_tree::{LaunchShape, LaunchTree};

/// Largest `--nodes` for `--algo bmg-build` (memory: about 1 KB per simulated process).
pub const MAX_BMG_NODES: u32 = 1 << 22;

/// Largest `--nodes` for `--algo dissemination` (an all-gather costs `n^2 log n` item copies).
pub const MAX_DISSEMINATION_NODES: u32 = 2048;

/// Runs `ftcoll sim` for an overlay algorithm.
pub fn run(a: &SimArgs) -> Result<(), crate::cli::failure::Failure> {
    let g = &a.alg;
    for (given, flag) in [
        (g.tree.is_some(), "--tree"),
        (g.order.is_some(), "--order"),
        (g.correction.is_some(), "--correction"),
        (g.start.is_some(), "--start"),
        (g.variant.is_some(), "--variant"),
        (g.gossip_rounds.is_some(), "--gossip-rounds"),
        (g.correction_time.is_some(), "--correction-time"),
        (a.dead.is_some(), "--dead"),
        (a.kill.is_some(), "--kill"),
        (a.trace.is_some(), "--trace"),
        (a.online_faults > 0, "--online-faults"),
        (a.receives.is_some(), "--receives"),
    ] {
        if given {
            return Err(format!("{flag} does not apply to the overlay algorithms").into());
        }
    }
    if a.nodes < 2 {
        return Err(format!("--nodes must be at least 2, got {}", a.nodes).into());
    }
    if a.runs == 0 {
        return Err("--runs must be at least 1".to_string().into());
    }
    match a.alg.algo {
        AlgoArg::Dissemination | AlgoArg::FailureNotices => {
            if let Some(flag) = a.overlay.given() {
                return Err(format!("{flag} applies to --algo bmg-build only").into());
            }
            if a.allow_aborts {
                return Err(
                    "--allow-aborts does not apply to --algo dissemination or failure-notices"
                        .to_string()
                        .into(),
                );
            }
            if a.alg.algo == AlgoArg::Dissemination {
                Ok(dissemination(a)?)
            } else {
                Ok(crate::cli::notices::run(a, &sizes(a.nodes))?)
            }
        }
        _ => bmg(a),
    }
}

/// One table row of `bmg-build`.
#[derive(Clone, Debug, Serialize)]
struct BuildRow {
    tree: String,
    scheduler: Scheduler,
    depth: u32,
    runs: u64,
    /// Processes (mean over the runs for random trees).
    nodes: f64,
    max_degree: u32,
    /// Each run's result.
    results: Vec<Convergence>,
    /// Each run's repairs after `--crashes`: (dead process, convergence from the crash).
    repairs: Vec<Vec<(u32, Convergence)>>,
}

fn shapes(spec: &str) -> Result<Vec<String>, String> {
    let v: Vec<String> = spec.split(',').map(|s| s.trim().to_string()).collect();
    for s in &v {
        match s.split_once(':') {
            None if s == "binary" || s == "binomial" => {}
            Some(("random", d)) if d.parse::<u32>().is_ok_and(|d| d >= 1) => {}
            _ => {
                return Err(format!(
                    "invalid --launch-tree '{s}': expected binary, binomial or random:DEGREE (DEGREE >= 1)"
                ));
            }
        }
    }
    Ok(v)
}

fn shape(name: &str, depth: u32) -> LaunchShape {
    match name.split_once(':') {
        Some((_, d)) => LaunchShape::Random {
            depth,
            degree: d.parse().unwrap_or(1),
        },
        None if name == "binary" => LaunchShape::Binary { depth },
        None => LaunchShape::Binomial { depth },
    }
}

/// A bmg-build run that was not legitimate and quiet for the closure phases within
/// `--max-phases` is the overlay's aborted run: reported, and exit code 3 unless
/// `--allow-aborts`.
fn bmg(a: &SimArgs) -> Result<(), crate::cli::failure::Failure> {
    if a.nodes > MAX_BMG_NODES {
        return Err(format!("--algo bmg-build takes --nodes up to {MAX_BMG_NODES} (got {})", a.nodes).into());
    }
    let o = &a.overlay;
    let names = shapes(o.launch_tree.as_deref().unwrap_or("binomial,binary"))?;
    let scheds = match o.scheduler.unwrap_or(SchedulerName::Both) {
        SchedulerName::Synchronous => vec![Scheduler::Synchronous],
        SchedulerName::Asynchronous => vec![Scheduler::Asynchronous],
        SchedulerName::Both => vec![Scheduler::Synchronous, Scheduler::Asynchronous],
    };
    let refresh = o.refresh.unwrap_or(64);
    let crashes = o.crashes.unwrap_or(0);
    if refresh == 0 {
        return Err("--refresh must be at least 1".to_string().into());
    }
    let cfg = |scheduler, n: u32| BuildRun {
        scheduler,
        refresh,
        start: if o.corrupted {
            Start::Corrupted {
                messages: n.saturating_mul(4),
            }
        } else {
            Start::Clean
        },
        max_phases: o.max_phases.unwrap_or(1_000_000),
        closure_phases: 3 * u64::from(refresh),
    };
    let mut rows = Vec::new();
    for name in &names {
        let random = name.starts_with("random");
        for &sched in &scheds {
            for depth in 1.. {
                let runs = if random { a.runs } else { 1 };
                let mut trees = Vec::new();
                for r in 0..runs {
                    let mut rng = ProtoRng::new(ProtoRng::run_seed(a.seed, r));
                    match LaunchTree::build(shape(name, depth), a.nodes, &mut rng) {
                        Ok(t) => trees.push((t, rng)),
                        Err(_) => break,
                    }
                }
                // Depth d >= 1 gives at least 2 processes; stop at the first depth over --nodes.
                if trees.len() < runs as usize {
                    break;
                }
                let mut results = Vec::new();
                let mut repairs = Vec::new();
                for (t, rng) in &mut trees {
                    let mut b = Build::new(t, &cfg(sched, t.len()), rng);
                    results.push(b.converge());
                    let mut done = Vec::new();
                    for _ in 0..crashes.min(t.len().saturating_sub(2)) {
                        let ring = b.tree().ring_order();
                        let dead = ring[rng.below(ring.len() as u32) as usize];
                        b.crash(dead)?;
                        done.push((dead, b.converge()));
                    }
                    repairs.push(done);
                }
                rows.push(BuildRow {
                    tree: name.clone(),
                    scheduler: sched,
                    depth,
                    runs,
                    nodes: trees.iter().map(|(t, _)| f64::from(t.len())).sum::<f64>() / trees.len() as f64,
                    max_degree: trees.iter().map(|(t, _)| t.max_degree()).max().unwrap_or(0),
                    results,
                    repairs,
                });
            }
        }
    }
    let all = rows
        .iter()
        .flat_map(|r| r.results.iter().chain(r.repairs.iter().flatten().map(|x| &x.1)));
    let (total, open) = all.fold((0, 0), |(t, o), c| (t + 1, o + u64::from(!c.closed)));
    if a.json {
        let v = json!({
            "algo": "bmg-build",
            "refresh": refresh,
            "start": if o.corrupted { "corrupted" } else { "clean" },
            "seed": a.seed,
            "rows": rows,
            "aborted_runs": open,
        });
        println!("{v}");
    } else {
        print!("{}", bmg_table(&rows, refresh, o.corrupted, a.seed));
        if crashes > 0 {
            print!("{}", repair_table(&rows));
        }
        if open > 0 {
            println!("\nABORTED: {open} of {total} runs were not legitimate and quiet within --max-phases");
        }
    }
    crate::cli::failure::check_aborts(
        open,
        total,
        &format!("bmg-build, --max-phases {}", cfg(Scheduler::Synchronous, 2).max_phases),
        a.allow_aborts,
    )
}

fn repair_table(rows: &[BuildRow]) -> String {
    let mut s = String::from(
        "\nrepairs: a random process crashes for good after convergence (the launch tree mended, N one less);\n",
    );
    s += "phases, messages and max received counted from the crash; one line per crash (first run)\n\n";
    s += &format!(
        "{:<16}{:<7}{:>6}{:>10}{:>8}{:>8}{:>8}{:>8}{:>12}{:>10}{:>8}\n",
        "tree", "sched", "depth", "N after", "dead", "ring", "bmg", "quiet", "messages", "max_recv", "closed"
    );
    for r in rows {
        for (dead, c) in r.repairs.first().into_iter().flatten() {
            s += &format!(
                "{:<16}{:<7}{:>6}{:>10}{:>8}{:>8}{:>8}{:>8}{:>12}{:>10}{:>8}\n",
                r.tree,
                match r.scheduler {
                    Scheduler::Synchronous => "sync",
                    Scheduler::Asynchronous => "async",
                },
                r.depth,
                c.n,
                dead,
                fmt_opt(c.ring_phases.map(|x| x as f64)),
                fmt_opt(c.bmg_phases.map(|x| x as f64)),
                fmt_opt(c.quiet_phases.map(|x| x as f64)),
                if c.bmg_phases.is_some() {
                    c.messages.to_string()
                } else {
                    "-".into()
                },
                if c.bmg_phases.is_some() {
                    c.max_received.to_string()
                } else {
                    "-".into()
                },
                if c.closed { "yes" } else { "no" },
            );
        }
    }
    s
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map(|v| {
        if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    })
    .unwrap_or_else(|| "-".into())
}

/// Mean of `f` over the results, `None` if any run did not converge.
fn mean(rs: &[Convergence], f: impl Fn(&Convergence) -> Option<u64>) -> Option<f64> {
    let v: Option<Vec<u64>> = rs.iter().map(f).collect();
    v.map(|v| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64)
}

fn bmg_table(rows: &[BuildRow], refresh: u32, corrupted: bool, seed: u64) -> String {
    let mut s = format!(
        "ftcoll sim: bmg-build (BMG paper Algorithms 1 and 2, §4 schedulers), start={}, refresh={refresh}, seed={seed}\n",
        if corrupted { "corrupted" } else { "clean" }
    );
    s += "phases until legitimate: ring (Algorithm 1), bmg (ring and BMG), quiet (and every process quiet);\n";
    s += "messages sent and max received by one process until the BMG was legitimate (Figure 3); means over runs\n\n";
    s += &format!(
        "{:<16}{:<7}{:>6}{:>10}{:>5}{:>8}{:>8}{:>8}{:>12}{:>10}{:>10}{:>8}\n",
        "tree", "sched", "depth", "N", "deg", "ring", "bmg", "quiet", "messages", "msg/proc", "max_recv", "closed"
    );
    for r in rows {
        let rs = &r.results;
        let msgs = mean(rs, |c| c.bmg_phases.map(|_| c.messages));
        s += &format!(
            "{:<16}{:<7}{:>6}{:>10}{:>5}{:>8}{:>8}{:>8}{:>12}{:>10}{:>10}{:>8}\n",
            r.tree,
            match r.scheduler {
                Scheduler::Synchronous => "sync",
                Scheduler::Asynchronous => "async",
            },
            r.depth,
            fmt_opt(Some((r.nodes * 10.0).round() / 10.0)),
            r.max_degree,
            fmt_opt(mean(rs, |c| c.ring_phases)),
            fmt_opt(mean(rs, |c| c.bmg_phases)),
            fmt_opt(mean(rs, |c| c.quiet_phases)),
            fmt_opt(msgs.map(f64::round)),
            fmt_opt(msgs.map(|m| (m / r.nodes * 10.0).round() / 10.0)),
            fmt_opt(mean(rs, |c| c.bmg_phases.map(|_| c.max_received))),
            format!("{}/{}", rs.iter().filter(|c| c.closed).count(), rs.len()),
        );
    }
    s
}

/// One table row of `dissemination`.
#[derive(Clone, Debug, Serialize)]
struct DissRow {
    n: u32,
    log_n: u32,
    /// Worst rounds over every start round, no failure (Theorem 1: <= log_n).
    rounds_no_fault: Option<u64>,
    /// Worst rounds over every start round and the failed machines tried (Theorem 2:
    /// <= log_n + 2).
    rounds_one_fault: Option<u64>,
    failed_tried: u32,
    max_items: usize,
    /// Reorganize: rounds from the failure to the reorganization, and whether all agreed.
    reorganize_after: u64,
    reorganize_agreed: bool,
}

fn sizes(max: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut p = 2u32;
    while p <= max {
        for n in [p, p + 1, p + p / 2] {
            if n <= max && n >= 2 && !v.contains(&n) {
                v.push(n);
            }
        }
        p = p.saturating_mul(2);
        if p == u32::MAX {
            break;
        }
    }
    if !v.contains(&max) {
        v.push(max);
    }
    v.sort_unstable();
    v
}

fn dissemination(a: &SimArgs) -> Result<(), String> {
    if a.nodes > MAX_DISSEMINATION_NODES {
        return Err(format!(
            "--algo dissemination takes --nodes up to {MAX_DISSEMINATION_NODES} (got {})",
            a.nodes
        ));
    }
    let mut rows = Vec::new();
    for n in sizes(a.nodes) {
        let l = run_len(n);
        let mut rng = ProtoRng::new(ProtoRng::run_seed(a.seed, u64::from(n)));
        let all = n <= 64 || u64::from(n) <= a.runs;
        let failed: Vec<usize> = if all {
            (0..n as usize).collect()
        } else {
            (0..a.runs).map(|_| rng.below(n) as usize).collect()
        };
        let mut no_fault = Some(0);
        let mut one_fault = Some(0);
        let mut max_items = 0;
        for start in 0..u64::from(l) {
            let g = all_gather(n, start, None, Tolerance::None);
            max_items = max_items.max(g.max_items);
            no_fault = no_fault.zip(g.rounds).map(|(x, y)| x.max(y));
            if n >= 3 {
                for &f in &failed {
                    let g = all_gather(n, start, Some(f), Tolerance::OneFault);
                    one_fault = one_fault.zip(g.rounds).map(|(x, y)| x.max(y));
                }
            }
        }
        let (after, agreed) = if n >= 3 {
            let f = failed[0];
            let r = reorganize(n, f, 2 * u64::from(l));
            (r.rounds_after_failure, r.agreed && r.gather_after.is_some())
        } else {
            (0, false)
        };
        rows.push(DissRow {
            n,
            log_n: l,
            rounds_no_fault: no_fault,
            rounds_one_fault: if n >= 3 { one_fault } else { None },
            failed_tried: if n >= 3 { failed.len() as u32 } else { 0 },
            max_items,
            reorganize_after: after,
            reorganize_agreed: agreed,
        });
    }
    if a.json {
        println!("{}", json!({"algo": "dissemination", "seed": a.seed, "rows": rows}));
        return Ok(());
    }
    let mut s = String::from(
        "ftcoll sim: dissemination (Han–Finkel), all-gather from every machine, every start round of a run\n",
    );
    s += "rounds until every item reached every live machine: no failure (Theorem 1 bound ⌈log n⌉),\n";
    s += "one failed machine (Theorem 2 bound ⌈log n⌉+2; every machine tried for n <= 64 or n <= --runs, else --runs random ones);\n";
    s += "Reorganize: rounds from the failure to the common reorganization (Theorem 3)\n\n";
    s += &format!(
        "{:>6}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>11}{:>10}\n",
        "n", "⌈log n⌉", "no fault", "bound", "1 fault", "bound", "failed", "items/msg", "reorg"
    );
    for r in &rows {
        s += &format!(
            "{:>6}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>11}{:>10}\n",
            r.n,
            r.log_n,
            fmt_opt(r.rounds_no_fault.map(|x| x as f64)),
            r.log_n,
            fmt_opt(r.rounds_one_fault.map(|x| x as f64)),
            if r.n >= 3 {
                (r.log_n + 2).to_string()
            } else {
                "-".into()
            },
            r.failed_tried,
            r.max_items,
            if r.n < 3 {
                "-".to_string()
            } else if r.reorganize_agreed {
                format!("{} ok", r.reorganize_after)
            } else {
                format!("{} FAIL", r.reorganize_after)
            },
        );
    }
    print!("{s}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_cover_the_worst_cases() {
        assert_eq!(sizes(10), [2, 3, 4, 5, 6, 8, 9, 10]);
        assert_eq!(sizes(2), [2]);
        assert!(shapes("binary,random:3").is_ok());
        assert!(shapes("random:0").is_err());
        assert!(shapes("ternary").is_err());
    }
}
