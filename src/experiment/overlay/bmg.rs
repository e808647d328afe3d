//! `sim --algo bmg-build`: the BMG overlay built from launch trees by the §4 schedulers
//! (BMG paper Figures 2–4), optionally repaired after crashes; a table or `--json`.

use serde::Serialize;
use serde_json::json;

use crate::experiment::failure::Failure;
use crate::experiment::overlay::{OverlaySpec, Schedulers};
use crate::protocol::ProtoRng;
use crate::sim::bmg_build::{Build, BuildRun, Convergence, Start};
use crate::sim::phased::Scheduler;
use crate::topology::launch_tree::{LaunchShape, LaunchTree};

/// Largest `--nodes` for `--algo bmg-build` (memory: about 1 KB per simulated process).
pub const MAX_BMG_NODES: u32 = 1 << 22;

/// Largest `--nodes` for `--algo dissemination` (an all-gather costs `n^2 log n` item copies).
pub const MAX_DISSEMINATION_NODES: u32 = 2048;

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

pub(crate) fn shapes(spec: &str) -> Result<Vec<String>, String> {
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
pub fn bmg(a: &OverlaySpec) -> Result<(), Failure> {
    if a.nodes > MAX_BMG_NODES {
        return Err(format!("--algo bmg-build takes --nodes up to {MAX_BMG_NODES} (got {})", a.nodes).into());
    }
    let o = a;
    let names = shapes(o.launch_tree.as_deref().unwrap_or("binomial,binary"))?;
    let scheds = match o.scheduler.unwrap_or(Schedulers::Both) {
        Schedulers::Synchronous => vec![Scheduler::Synchronous],
        Schedulers::Asynchronous => vec![Scheduler::Asynchronous],
        Schedulers::Both => vec![Scheduler::Synchronous, Scheduler::Asynchronous],
    };
    let refresh = o.refresh.unwrap_or(64);
    let crashes = o.crashes.unwrap_or(0);
    if refresh == 0 {
        return Err("--refresh must be at least 1".to_string().into());
    }
    if crashes > a.nodes.saturating_sub(2) {
        return Err(format!(
            "--crashes {crashes}: at most --nodes − 2 = {} (a repaired overlay keeps two processes)",
            a.nodes.saturating_sub(2)
        )
        .into());
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
    crate::experiment::failure::check_aborts(
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

pub(crate) fn fmt_opt(x: Option<f64>) -> String {
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
