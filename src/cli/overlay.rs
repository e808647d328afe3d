//! `ftcoll sim --algo bmg-build | dissemination | failure-notices`: the flags that apply, and
//! the overlay experiment ([`crate::experiment::overlay`]) they specify.

use crate::cli::failure::Failure;
use crate::cli::flags::{AlgoArg, SchedulerName, SimArgs};
use crate::experiment::overlay::bmg::bmg;
use crate::experiment::overlay::dissemination::{dissemination, sizes};
use crate::experiment::overlay::{OverlaySpec, Schedulers, notices};

/// The overlay spec of these flags.
fn spec(a: &SimArgs) -> OverlaySpec {
    let o = &a.overlay;
    OverlaySpec {
        nodes: a.nodes,
        runs: a.runs,
        seed: a.seed,
        json: a.json,
        allow_aborts: a.allow_aborts,
        launch_tree: o.launch_tree.clone(),
        scheduler: o.scheduler.map(|s| match s {
            SchedulerName::Synchronous => Schedulers::Synchronous,
            SchedulerName::Asynchronous => Schedulers::Asynchronous,
            SchedulerName::Both => Schedulers::Both,
        }),
        refresh: o.refresh,
        corrupted: o.corrupted,
        max_phases: o.max_phases,
        crashes: o.crashes,
    }
}

/// Runs `ftcoll sim` for an overlay algorithm.
pub fn run(a: &SimArgs) -> Result<(), Failure> {
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
        (a.cores.is_some(), "--cores"),
        (a.known_dead, "--known-dead"),
        (a.faults.is_some(), "--faults"),
        (a.l.is_some(), "--L"),
        (a.o.is_some(), "--o"),
        (a.loggp.os.is_some(), "--os"),
        (a.loggp.or.is_some(), "--or"),
        (a.loggp.g.is_some(), "--g"),
        (a.loggp.big_g.is_some(), "--G"),
        (a.loggp.bytes.is_some(), "--bytes"),
        (a.loggp.noise.is_some(), "--noise"),
        (a.detect_delay.is_some(), "--detect-delay"),
        (a.max_events.is_some(), "--max-events"),
        (a.threads.is_some(), "--threads"),
        (a.core_visit.is_some(), "--core-visit"),
        (a.core_work.is_some(), "--core-work"),
        (a.core_local_work.is_some(), "--core-local-work"),
        (a.core_local_receive.is_some(), "--core-local-receive"),
        (a.core_poll_per_source.is_some(), "--core-poll-per-source"),
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
                Ok(dissemination(&spec(a))?)
            } else {
                Ok(notices::run(&spec(a), &sizes(a.nodes))?)
            }
        }
        _ => bmg(&spec(a)),
    }
}
