//! `stress agree`: the paper's §5 stress test in the spirit of ULFM's — an endless loop
//! (bounded by a duration) of agreements on a local cluster in which random nodes are killed
//! mid-run. Threads: each generation ends when every survivor has returned all its agreements
//! and the next is a new group of fresh nodes. Processes: kills are SIGKILLs, and the survivors
//! keep their processes into the next generation ([`crate::experiment::launch::agree::stress`]).

use std::time::{Duration, Instant};

use crate::protocol::ProtoRng;
use crate::protocol::agree::{EraConfig, Shape};
use crate::runtime::agree::{AgreeBench, AgreeTransport};

/// A stress run.
#[derive(Clone, Debug)]
pub struct StressSpec {
    /// How long to run, seconds.
    pub duration: u64,
    /// Nodes per generation.
    pub nodes: u32,
    pub transport: AgreeTransport,
    /// ERA tree.
    pub tree: String,
    /// Agreements per generation.
    pub agreements: u64,
    /// Kills per generation at most (at least 1).
    pub max_kills: u32,
    pub heartbeat_us: u64,
    pub suspect_ms: u64,
    pub seed: u64,
    /// Every node its own OS process over UDP.
    pub procs: bool,
}

/// What a stress run did.
pub struct Totals {
    pub agreements: u64,
    pub failures: u64,
    /// Disagreements, invalid values, unfinished nodes and shrink mismatches (must be 0).
    pub bad: u64,
    pub generations: u64,
    pub false_susp: u64,
    pub newcomers: u64,
    /// The ERA tree run.
    pub shape: Shape,
    /// Wall time, seconds.
    pub secs: f64,
}

/// Runs `a` until its duration is over.
pub fn run(a: &StressSpec) -> Result<Totals, String> {
    if a.nodes < 2 {
        return Err(format!("stress agree needs --nodes >= 2, got {}", a.nodes));
    }
    if a.max_kills == 0 || a.max_kills >= a.nodes {
        return Err(format!(
            "stress agree needs 1 <= --max-kills < --nodes (one node survives every generation), got --max-kills {} with --nodes {} (--max-kills defaults to 2: give a smaller one or more nodes)",
            a.max_kills, a.nodes
        ));
    }
    if a.agreements < 2 || a.duration == 0 || a.heartbeat_us == 0 || a.suspect_ms == 0 {
        return Err("--agreements must be at least 2; --duration, --heartbeat-us and --suspect-ms positive".into());
    }
    let shape: Shape = a.tree.parse()?;
    if a.procs && a.transport != AgreeTransport::Udp {
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
        transport: a.transport,
        workers: cores.min(a.nodes as usize),
        pin: true,
        warmup: 0,
        iterations: a.agreements,
        duration: None,
        kills: Vec::new(),
        stalls: Vec::new(),
        heartbeat: Duration::from_micros(a.heartbeat_us),
        suspect_after: Duration::from_millis(a.suspect_ms),
        op_timeout: Duration::from_secs(10),
        seed: a.seed,
    };
    let started = Instant::now();
    let mut t = Totals {
        agreements: 0,
        failures: 0,
        bad: 0,
        generations: 0,
        false_susp: 0,
        newcomers: 0,
        shape,
        secs: 0.0,
    };
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
            let r = crate::experiment::agree_local::run(&b)?;
            t.generations += 1;
            t.agreements += r.agreements;
            t.failures += b.kills.len() as u64 + r.false_suspicions;
            t.false_susp += r.false_suspicions;
            t.newcomers += u64::from(a.nodes);
            t.bad += r.disagreements + r.invalid + r.unfinished;
        }
    }
    t.secs = started.elapsed().as_secs_f64();
    Ok(t)
}
