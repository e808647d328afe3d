//! `ftcoll agree` without `--sim`: the ERA benchmark on a local cluster
//! ([`crate::runtime::agree`]), like ULFM's `benchagree`: failure-free, failure-detecting,
//! stabilizing and post-failure agreement latencies with HdrHistogram percentiles.

use std::time::Duration;

use crate::cli::agree_args::{AgreeArgs, RebalanceName, TransportName};
use crate::experiment::failure::Failure;
use crate::experiment::verdict::{AgreeCounts, Verdict};
use crate::protocol::agree::{EraConfig, Rebalance, Shape};
use crate::report::agree::AgreeMode;
use crate::runtime::agree::{AgreeBench, AgreeTransport, Stall};

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

/// `R@I:MS,...`: rank R stops for MS ms instead of entering measured agreement I.
fn parse_stalls(spec: &str) -> Result<Vec<Stall>, String> {
    let mut v = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let bad = || format!("bad --stall '{part}': expected R@I:MS (rank R stops MS ms before measured agreement I)");
        let (r, rest) = part.split_once('@').ok_or_else(bad)?;
        let (i, ms) = rest.split_once(':').ok_or_else(bad)?;
        v.push(Stall {
            rank: r.parse().map_err(|_| bad())?,
            at: i.parse().map_err(|_| bad())?,
            pause: Duration::from_millis(ms.parse().map_err(|_| bad())?),
        });
    }
    Ok(v)
}

/// The benchmark of these flags.
pub fn bench(a: &AgreeArgs) -> Result<AgreeBench, String> {
    if a.window != 1 {
        return Err("the network benchmark runs blocking agreements: --window must be 1".into());
    }
    if a.heartbeat_us == Some(0) || a.suspect_ms == 0 {
        return Err("--heartbeat-us and --suspect-ms must be positive".into());
    }
    if a.agreements == 0 {
        return Err("--agreements must be at least 1".into());
    }
    if a.duration == Some(0) {
        return Err("--duration must be positive".into());
    }
    if a.workers == Some(0) {
        return Err("--workers must be at least 1".into());
    }
    if a.duration.is_some() && a.kill.is_some() {
        return Err("--duration runs are failure-free soaks: drop --kill".into());
    }
    let shape: Shape = a.tree.parse()?;
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let mut b = AgreeBench {
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
        stalls: a.stall.as_deref().map(parse_stalls).transpose()?.unwrap_or_default(),
        heartbeat: crate::runtime::agree::DEDICATED_HEARTBEAT,
        suspect_after: Duration::from_millis(a.suspect_ms),
        op_timeout: Duration::from_millis(a.op_timeout_ms),
        seed: a.seed,
    };
    b.heartbeat = match a.heartbeat_us {
        Some(us) => Duration::from_micros(us),
        None => crate::experiment::agree_local::default_heartbeat(&b, a.procs, a.join.is_some(), cores),
    };
    Ok(b)
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

/// Runs the benchmark and prints its report, then the verdict (a failed run exits non-zero
/// with its reasons on the last line).
pub fn run(a: &AgreeArgs) -> Result<(), Failure> {
    let mut a = a.clone();
    if a.join.is_some() {
        // Rank and size: the flags, else the launcher's environment.
        let (rank, n) = crate::runtime::procs::rank_and_size(a.rank, a.rank.map(|_| a.nodes), "nodes")?;
        (a.rank, a.nodes) = (Some(rank), n);
    }
    let a = &a;
    let b = bench(a)?;
    let mode = if a.join.is_some() {
        AgreeMode::Joined
    } else if a.procs {
        AgreeMode::Procs
    } else {
        AgreeMode::Threads
    };
    let r = match mode {
        AgreeMode::Joined => match crate::experiment::launch::agree_join::run(&b, &join_spec(a)?)? {
            Some(r) => r,
            None => return Ok(()), // A node of a launched run: rank 0 reports.
        },
        AgreeMode::Procs => {
            let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
            crate::experiment::launch::agree::run(&b, &exe)?
        }
        AgreeMode::Threads => crate::experiment::agree_local::run(&b)?,
    };
    // With node processes, this process only classes their returns: its own memory too.
    let coordinator_rss = (mode != AgreeMode::Threads)
        .then(crate::runtime::agree::peak_rss_kb)
        .flatten();
    let verdict = Verdict::agree(&AgreeCounts::from(&r), a.allow_false_suspicions);
    // Launched runs span hosts: one ping-pong here does not model them.
    let prediction = if a.no_model || mode == AgreeMode::Joined {
        None
    } else {
        crate::experiment::agree_predict::predict(&b, &r, a.procs)?
    };
    let shown = crate::report::agree::BenchShown {
        mode,
        procs: a.procs,
        joined: a.join.is_some(),
        coordinator_rss,
        json: a.json,
        failures: &verdict.reasons,
        prediction: prediction.as_ref(),
    };
    crate::report::agree::print_bench(&b, &r, &shown);
    if let Some(note) = verdict.accepted_note() {
        eprintln!("ftcoll: warning: {note}");
    }
    verdict.into_result()
}
