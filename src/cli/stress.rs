//! `ftcoll stress agree`: the paper's §5 stress test in the spirit of ULFM's — an endless loop
//! (bounded by `--duration`) of agreements on a local cluster in which random nodes are killed
//! mid-run. Threads (default): each generation ends when every survivor has returned all its
//! agreements and the next is a new group of fresh nodes. `--procs`: one OS process per node,
//! kills are SIGKILLs, and the survivors keep their processes into the next generation, whose
//! membership is the shrink of the last agreement's failed set plus new processes in the
//! failed ranks ([`crate::experiment::stress`]). Prints agreements completed,
//! failures tolerated and disagreements (must be 0), totals and per minute.

use clap::{Args, Subcommand};

use crate::cli::agree_args::TransportName;
use crate::cli::flags::{WALL_MAX_MS, WALL_MAX_S, WALL_MAX_US};
use crate::experiment::stress::{self, StressSpec};
use crate::runtime::agree::AgreeTransport;

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
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_S))]
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
    #[arg(long = "heartbeat-us", default_value_t = 100, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_US))]
    pub heartbeat_us: u64,
    #[arg(long = "suspect-ms", default_value_t = 100, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS))]
    pub suspect_ms: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Every node its own OS process over UDP; kills are real SIGKILLs and every generation
    /// starts new processes (survivors included).
    #[arg(long)]
    pub procs: bool,
}

/// Runs `ftcoll stress ...`.
pub fn run(a: &StressArgs) -> Result<(), crate::experiment::failure::Failure> {
    let StressWhat::Agree(a) = &a.what;
    let t = stress::run(&StressSpec {
        duration: a.duration,
        nodes: a.nodes,
        transport: match a.transport {
            TransportName::Udp => AgreeTransport::Udp,
            TransportName::Inproc => AgreeTransport::Inproc,
            TransportName::Verbs => AgreeTransport::Verbs,
        },
        tree: a.tree.clone(),
        agreements: a.agreements,
        max_kills: a.max_kills,
        heartbeat_us: a.heartbeat_us,
        suspect_ms: a.suspect_ms,
        seed: a.seed,
        procs: a.procs,
    })?;
    let verdict = crate::experiment::verdict::Verdict::stress(&t);
    let stress::Totals {
        agreements,
        failures,
        bad,
        generations,
        false_susp,
        newcomers,
        shape,
        secs,
    } = t;
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
    verdict.into_result()
}
