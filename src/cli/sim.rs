//! `ftcoll sim`: Monte Carlo simulation with a table (or JSON) of latencies and messages.

use std::io::IsTerminal;

use serde_json::json;

use crate::cli::flags::SimArgs;
use crate::experiment::sim::Setup;
use crate::experiment::simulate as runner;
use crate::sim::stats::Percentiles;
use crate::sim::{Report, write_trace};

/// Runs `ftcoll sim`: the table (or JSON) on stdout, then, if any run hit the event cap, a
/// one-line error on stderr and [`crate::cli::EXIT_ABORTED`] (unless `--allow-aborts`).
pub fn run(a: &SimArgs) -> Result<(), crate::cli::failure::Failure> {
    if crate::cli::flags::is_overlay(a.alg.algo) {
        return crate::cli::overlay::run(a);
    }
    let setup = a.setup()?;
    let ex = &setup.experiment;
    if let Some(path) = &a.trace {
        let rows = runner::trace(&setup)?;
        let mut f = std::fs::File::create(path).map_err(|e| format!("cannot write trace {}: {e}", path.display()))?;
        write_trace(&rows, &mut f).map_err(|e| format!("cannot write trace {}: {e}", path.display()))?;
    }
    let show = !a.no_progress && !a.json && std::io::stderr().is_terminal() && ex.runs >= 20;
    let bar = show.then(|| {
        let b = indicatif::ProgressBar::new(ex.runs);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} runs ({per_sec}, eta {eta})",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b
    });
    let started = std::time::Instant::now();
    let summary = runner::simulate(&setup, &|k| {
        if let Some(b) = &bar {
            b.inc(k);
        }
    })?;
    let secs = started.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let r = summary.report();
    if a.json {
        println!("{}", json_report(&setup, &r, secs));
    } else {
        print!("{}", table(&setup, &r, secs));
    }
    crate::cli::failure::check_aborts(
        r.aborted_runs,
        r.runs,
        &format!("--max-events {}", ex.max_events),
        a.allow_aborts,
    )
}

/// The JSON object printed by `--json`.
pub fn json_report(setup: &Setup, r: &Report, secs: f64) -> serde_json::Value {
    let ex = &setup.experiment;
    let mut v = serde_json::to_value(r).expect("report serializes");
    v["config"] = json!({
        "algo": setup.algo,
        "description": setup.algo.describe(),
        "nodes": ex.n,
        "L": ex.logp.l,
        "o": ex.logp.as_logp().map_or(ex.logp.mean_o(), |p| p.o),
        "os": ex.logp.os,
        "or": ex.logp.or,
        "g": ex.logp.g,
        "G_k": ex.logp.gk,
        "noise": ex.noise.is_some(),
        "faults": setup.faults_text,
        "online_faults": ex.faults.online,
        "kills": ex.faults.online_list,
        "known_dead": ex.faults.known_dead,
        "receives": ex.receives,
        "cores": ex.cores,
        "core_visit": ex.cores.map(|_| ex.visit),
        "core_work": ex.cores.map(|_| ex.work),
        "core_local_work": ex.cores.map(|_| ex.local_work.unwrap_or(ex.work)),
        "core_local_receive": ex.cores.map(|_| ex.local_receive.unwrap_or(ex.logp.or)),
        "core_poll_per_source": ex.cores.map(|_| ex.poll_per_source as f64 / 1000.0),
        "runs": ex.runs,
        "seed": ex.seed,
        "threads": ex.threads,
    });
    v["wall_seconds"] = json!(secs);
    v
}

fn row(name: &str, p: &Percentiles) -> String {
    format!(
        "{name:<26}{:>10.2}{:>10.1}{:>10.1}{:>10.1}{:>10.1}\n",
        p.mean, p.p50, p.p99, p.p999, p.max
    )
}

/// The human-readable table.
pub fn table(setup: &Setup, r: &Report, secs: f64) -> String {
    let ex = &setup.experiment;
    let mut s = String::new();
    let recv = match ex.receives {
        crate::sim::Receives::Queued => "",
        crate::sim::Receives::Parallel => " receives=parallel",
    };
    let recv = match ex.cores {
        Some(c) if c < ex.n && ex.visit > 0 => format!("{recv} cores={c} core-visit={}", ex.visit),
        Some(c) if c < ex.n => format!("{recv} cores={c}"),
        _ => recv.to_string(),
    };
    s += &format!("ftcoll sim: {}{recv}\n", setup.algo.describe());
    s += &format!(
        "nodes={} {}{} faults={}{} online-faults={}{} runs={} seed={} threads={}\n\n",
        ex.n,
        ex.logp,
        if ex.noise.is_some() { " noise=on" } else { "" },
        setup.faults_text,
        if ex.faults.known_dead {
            " (known to the senders)"
        } else {
            ""
        },
        ex.faults.online,
        if ex.faults.online_list.is_empty() {
            String::new()
        } else {
            format!(" kills={:?}", ex.faults.online_list)
        },
        ex.runs,
        ex.seed,
        ex.threads
    );
    s += &format!(
        "{:<26}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
        "metric (LogP time units)", "mean", "p50", "p99", "p99.9", "max"
    );
    s += &row("coloring_latency", &r.coloring_latency);
    s += &row("quiescence_latency", &r.quiescence_latency);
    s += &row("correction_latency", &r.correction_latency);
    s += &row("gmax", &r.gmax);
    s += &row("messages_per_process", &r.messages_per_process);
    s += &row("max_messages_per_process", &r.max_messages_per_process);
    s += &format!(
        "\nuncolored_runs: {} of {} (live processes left uncolored: {}); aborted_runs: {}\n",
        r.uncolored_runs, r.runs, r.uncolored_nodes, r.aborted_runs
    );
    if r.aborted_runs > 0 {
        s += &format!(
            "ABORTED: {} of {} runs hit the event cap and were stopped: the figures above include \
             unfinished runs\n",
            r.aborted_runs, r.runs
        );
    }
    s += &format!(
        "{} events in {:.2} s ({:.0} runs/s)\n",
        r.events,
        secs,
        r.runs as f64 / secs.max(1e-9)
    );
    s
}
