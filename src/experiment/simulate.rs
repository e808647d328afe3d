//! Runs a resolved [`Setup`] on the simulator, through [`Dispatch::dispatch`]: Monte Carlo or a
//! single traced run.

use crate::experiment::limits;
use crate::experiment::sim::Setup;
use crate::model::LogGP;
use crate::protocol::bcast::algo::Algo;
use crate::protocol::bcast::bfb::Bfb;
use crate::protocol::bcast::big::Big;
use crate::protocol::bcast::corrected_gossip::{CorrectedGossip, Variant};
use crate::protocol::bcast::corrected_tree::CorrectedTree;
use crate::protocol::bcast::correction::{Correction, FAILPROOF_CAP};
use crate::protocol::bcast::tree_ack::TreeAck;
use crate::protocol::{Protocol, SharedInfo};
use crate::sim::engine::Engine;
use crate::sim::{Experiment, Summary, TraceRow, run_many, trace_one};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

struct MonteCarlo<'a>(&'a Experiment, &'a (dyn Fn(u64) + Sync));

impl Visit for MonteCarlo<'_> {
    type Out = Summary;
    fn visit<P>(self, shared: &P::Shared) -> Summary
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        run_many::<P>(shared, self.0, self.1)
    }
}

struct Traced<'a>(&'a Experiment);

impl Visit for Traced<'_> {
    type Out = Vec<TraceRow>;
    fn visit<P>(self, shared: &P::Shared) -> Vec<TraceRow>
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        trace_one::<P>(shared, self.0, 0)
    }
}

/// Bytes of the shared tree (parent, child offsets, children and depth per process).
const TREE_PER_NODE: u64 = 4 * size_of::<u32>() as u64;

/// What a protocol allocates per process beyond its record (received sets, pending lists),
/// in bytes: measured, not derived. Peak RSS of `ftcoll sim --nodes 1000000 --threads 1
/// --runs 2` less [`Engine::footprint`], rounded up: corrected tree 109, fail-proof 430,
/// gossip 487, BIG 203, tree-ack 7, BFB over 1463 (still growing after 60 s).
fn heap_per_node(algo: &Algo) -> u64 {
    match algo {
        Algo::CorrectedTree { correction, .. } => match correction {
            Correction::FailProof { .. } => 448,
            _ => 128,
        },
        Algo::CorrectedGossip { .. } => 512,
        Algo::Big => 224,
        Algo::Bfb => 2048,
        Algo::TreeAck { .. } => 16,
    }
}

/// Bytes one simulator thread needs for `algo` over `n` processes: its engine (the
/// structures' sizes) and the protocol's heap, plus the shared tree.
fn engine_footprint(algo: &Algo, n: u32, logp: LogGP) -> u64 {
    let engine = match algo {
        Algo::CorrectedTree { correction, .. } => match correction {
            Correction::FailProof { .. } => Engine::<CorrectedTree<FAILPROOF_CAP>>::footprint(n, logp),
            _ => Engine::<CorrectedTree<0>>::footprint(n, logp),
        },
        Algo::CorrectedGossip { variant, .. } => match variant {
            Variant::Fcg { .. } => Engine::<CorrectedGossip<FAILPROOF_CAP>>::footprint(n, logp),
            _ => Engine::<CorrectedGossip<0>>::footprint(n, logp),
        },
        Algo::Big => Engine::<Big>::footprint(n, logp),
        Algo::Bfb => Engine::<Bfb>::footprint(n, logp),
        Algo::TreeAck { .. } => Engine::<TreeAck>::footprint(n, logp),
    };
    let tree = match algo {
        Algo::CorrectedTree { .. } | Algo::TreeAck { .. } => TREE_PER_NODE,
        _ => 0,
    };
    engine.saturating_add(u64::from(n).saturating_mul(heap_per_node(algo) + tree))
}

/// A spawned thread's stack (Rust's default), reserved per simulation thread.
const THREAD_STACK: u64 = 2 << 20;

/// Bytes a Monte Carlo run of `setup` needs at least: one engine and stack per thread that
/// gets runs.
pub fn footprint(setup: &Setup) -> u64 {
    let ex = &setup.experiment;
    let threads = ex.threads.max(1).min(ex.runs.max(1) as usize) as u64;
    (engine_footprint(&setup.algo, ex.n, ex.logp).saturating_add(THREAD_STACK)).saturating_mul(threads)
}

/// Refuses a setup this host's memory cannot hold, before anything is allocated.
pub fn check_fits(setup: &Setup) -> Result<(), String> {
    let ex = &setup.experiment;
    let max = Engine::<CorrectedTree<0>>::MAX_PROCESSES;
    if ex.n > max {
        return Err(format!("--nodes {}: the simulator holds at most {max} processes", ex.n));
    }
    let threads = ex.threads.max(1).min(ex.runs.max(1) as usize);
    let what = format!(
        "the simulator ({threads} thread{})",
        if threads == 1 { "" } else { "s" }
    );
    limits::check_memory("--nodes", u64::from(ex.n), footprint(setup), &what)
}

/// Runs the experiment, calling `progress` with completed run counts.
pub fn simulate(setup: &Setup, progress: &(dyn Fn(u64) + Sync)) -> Result<Summary, String> {
    check_fits(setup)?;
    let ex = &setup.experiment;
    setup.algo.dispatch(ex.n, ex.logp, MonteCarlo(ex, progress))
}

/// As [`simulate`], but an error naming `what` if any run was aborted at the event cap: for
/// callers that print figures (reproduce, plot, bench's prediction), where an unfinished run
/// must never become a number.
pub fn simulate_complete(setup: &Setup, what: &str) -> Result<Summary, String> {
    let s = simulate(setup, &|_| {})?;
    if s.aborted_runs > 0 {
        return Err(format!(
            "{what}: {} of {} runs aborted at the event cap (--max-events {}); no figure is printed from them",
            s.aborted_runs, s.runs, setup.experiment.max_events
        ));
    }
    Ok(s)
}

/// The event trace of run 0 of the experiment.
pub fn trace(setup: &Setup) -> Result<Vec<TraceRow>, String> {
    check_fits(setup)?;
    let ex = &setup.experiment;
    setup.algo.dispatch(ex.n, ex.logp, Traced(ex))
}
