//! `ftcoll stress agree`: the paper's §5 stress test in the spirit of ULFM's — an endless loop
//! (bounded by `--duration`) of agreements on a local cluster in which random nodes are killed
//! mid-run. Threads (default): each generation ends when every survivor has returned all its
//! agreements and the next is a new group of fresh nodes. `--procs`: one OS process per node,
//! kills are SIGKILLs, and the survivors keep their processes into the next generation, whose
//! membership is the shrink of the last agreement's failed set plus new processes in the
//! failed ranks ([`crate::runtime::agree_procs::stress`]). Prints agreements completed,
//! failures tolerated and disagreements (must be 0), totals and per minute.

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};

use crate::cli::agree_args::TransportName;
use crate::protocol::ProtoRng;
use crate::protocol::agree::{EraConfig, Shape};
use crate::runtime::agree::{AgreeBench, AgreeTransport};

#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    #[command(subcommand)]
    pub what: StressWhat,
}

#[derive(Subcommand, Debug, Clone)]
pub enum StressWhat {
    /// Agreements with random kills until --duration is over.
    Agree(StressAgreeArgs),
}

#[derive(Args, Debug, Clone)]
pub struct StressAgreeArgs {
    /// How long to run, seconds.
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Nodes per generation.
    #[arg(long, default_value_t = 8)]
    pub nodes: u32,
    #[arg(long, value_enum, default_value = "udp")]
    pub transport: TransportName,
    /// ERA tree.
    #[arg(long, default_value = "bin")]
    pub tree: String,
    /// Agreements per generation.
    #[arg(long, default_value_t = 2000)]
    pub agreements: u64,
    /// Kills per generation at most (at least 1).
    #[arg(long = "max-kills", default_value_t = 2)]
    pub max_kills: u32,
    #[arg(long = "heartbeat-us", default_value_t = 200)]
    pub heartbeat_us: u64,
    #[arg(long = "suspect-ms", default_value_t = 100)]
    pub suspect_ms: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Every node its own OS process over UDP; kills are real SIGKILLs and every generation
    /// starts new processes (survivors included).
    #[arg(long)]
    pub procs: bool,
}

#[derive(Default)]
struct Totals {
    agreements: u64,
    failures: u64,
    bad: u64,
    generations: u64,
    false_susp: u64,
    newcomers: u64,
}

/// Runs `ftcoll stress ...`.
pub fn run(a: &StressArgs) -> Result<(), String> {
    let StressWhat::Agree(a) = &a.what;
    if a.nodes < 2 {
        return Err(format!("stress agree needs --nodes >= 2, got {}", a.nodes));
    }
    if a.max_kills == 0 || a.max_kills >= a.nodes {
        return Err(format!(
            "stress agree needs 1 <= --max-kills < --nodes (one node survives every generation), got --max-kills {} with --nodes {}",
            a.max_kills, a.nodes
        ));
    }
    if a.agreements < 2 || a.duration == 0 || a.heartbeat_us == 0 || a.suspect_ms == 0 {
        return Err("--agreements must be at least 2; --duration, --heartbeat-us and --suspect-ms positive".into());
    }
    let shape: Shape = a.tree.parse()?;
    if a.procs && a.transport != TransportName::Udp {
        return Err("--procs runs over UDP: use --transport udp".into());
    }
    let exe = if a.procs {
        Some(std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?)
    } else {
        None
    };
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let mut rng = ProtoRng::new(a.seed);
    let kills_of = |rng: &mut ProtoRng| {
        let k = 1 + rng.below(a.max_kills);
        let mut kills: Vec<(u32, u64)> = Vec::new();
        while kills.len() < k as usize {
            let r = rng.below(a.nodes);
            if kills.iter().all(|x| x.0 != r) {
                kills.push((r, u64::from(rng.below(a.agreements as u32))));
            }
        }
        kills
    };
    let mut b = AgreeBench {
        n: a.nodes,
        era: EraConfig {
            shape,
            ..EraConfig::default()
        },
        transport: match a.transport {
            TransportName::Udp => AgreeTransport::Udp,
            TransportName::Inproc => AgreeTransport::Inproc,
            TransportName::Verbs => AgreeTransport::Verbs,
        },
        workers: cores.min(a.nodes as usize),
        pin: true,
        warmup: 0,
        iterations: a.agreements,
        duration: None,
        kills: Vec::new(),
        heartbeat: Duration::from_micros(a.heartbeat_us),
        suspect_after: Duration::from_millis(a.suspect_ms),
        op_timeout: Duration::from_secs(10),
        seed: a.seed,
    };
    let started = Instant::now();
    let mut t = Totals::default();
    if let Some(exe) = &exe {
        // One group of processes: survivors carry over, the failed are replaced.
        let mut kr = rng.clone();
        crate::experiment::launch::agree::stress(&b, exe, &mut |_| kills_of(&mut kr), &mut |g| {
            t.generations += 1;
            t.agreements += g.report.agreements;
            t.failures += u64::from(g.killed);
            t.false_susp += g.report.false_suspicions;
            t.newcomers += u64::from(g.newcomers);
            t.bad += g.report.disagreements + g.report.invalid + g.report.unfinished + g.shrink_mismatch;
            started.elapsed() < Duration::from_secs(a.duration)
        })?;
    } else {
        while started.elapsed() < Duration::from_secs(a.duration) {
            b.kills = kills_of(&mut rng);
            b.seed = rng.next_u64();
            let r = crate::runtime::agree::run(&b)?;
            t.generations += 1;
            t.agreements += r.agreements;
            t.failures += b.kills.len() as u64 + r.false_suspicions;
            t.false_susp += r.false_suspicions;
            t.newcomers += u64::from(a.nodes);
            t.bad += r.disagreements + r.invalid + r.unfinished;
        }
    }
    let Totals {
        agreements,
        failures,
        bad,
        generations,
        false_susp,
        newcomers,
    } = t;
    let secs = started.elapsed().as_secs_f64();
    let per_min = |x: u64| x as f64 * 60.0 / secs;
    println!(
        "ftcoll stress agree: nodes={} transport={:?}{} tree={} agreements/generation={} max-kills={}",
        a.nodes,
        a.transport,
        if a.procs {
            " (one process per node, SIGKILL; survivors keep their process)"
        } else {
            " (threads; every generation a new group)"
        },
        shape,
        a.agreements,
        a.max_kills
    );
    println!(
        "{secs:.1} s, {generations} generations: agreements completed {agreements} ({:.0}/min), failures tolerated {failures} ({:.1}/min; {false_susp} of them false suspicions made real), disagreements {bad}; nodes started {newcomers}",
        per_min(agreements),
        per_min(failures)
    );
    if bad > 0 {
        return Err(format!("{bad} disagreements, invalid values or unfinished nodes"));
    }
    Ok(())
}
