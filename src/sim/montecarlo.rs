//! Monte Carlo experiments: R runs from a base seed spread over threads. Run `i` always uses
//! seed `run_seed(base, i)` and the summaries merge exactly, so results are identical for any
//! thread count.

use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use crate::model::{LogGP, Time};
use crate::protocol::{ProtoRng, Protocol, SharedInfo};
use crate::sim::engine::{Engine, Receives, TraceRow};
use crate::sim::faults::Faults;
use crate::sim::noise::Noise;
use crate::sim::stats::Summary;

/// What to run.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub n: u32,
    /// LogP or LogGP parameters (a `LogP` converts with `.into()`).
    pub logp: LogGP,
    /// Noisy LogP: per-message `o_s`, `L`, `o_r` drawn from these (`None`: fixed).
    pub noise: Option<Arc<Noise>>,
    pub faults: Faults,
    pub runs: u64,
    pub seed: u64,
    pub threads: usize,
    /// Per-run event cap (a run over it is stopped and counted as aborted).
    pub max_events: u64,
    /// How receives occupy a process (LogP's queue by default).
    pub receives: Receives,
    /// The processes share this many cores (`None`: a core per process; see
    /// [`Engine::set_cores`]).
    pub cores: Option<u32>,
    /// With shared cores: a core's visit of a process with nothing to do, in model units (0:
    /// cores switch for free; see [`Engine::set_visit`]).
    pub visit: Time,
    /// With a visit cost: what a process's visit that received holds its core after its last
    /// send or receive, in model units (see [`Engine::set_work`]).
    pub work: Time,
    /// With shared cores: what a visit that received only from its own core holds its core
    /// after its work, and the receive of a message from a process of the same core, in model
    /// units (`None`: `work`, `o_r`; see [`Engine::set_local`]).
    pub local_work: Option<Time>,
    pub local_receive: Option<Time>,
    /// With a visit cost: what a process's visit costs more per process beyond the first that
    /// sends to it, in thousandths of a unit (0: nothing; see [`Engine::set_poll_per_source`]).
    /// Its senders are those of the experiment's first [`SOURCE_WARMUP_RUNS`] runs, run once
    /// more before the others by every engine ([`engine`]), so the result does not depend on
    /// the threads.
    pub poll_per_source: u64,
}

/// Runs an engine makes before an experiment's to learn which processes send to which
/// ([`Experiment::poll_per_source`]), as a benchmark's warm-up operations make the in-process
/// transport's rings before the measured ones.
pub const SOURCE_WARMUP_RUNS: u64 = 64;

impl Experiment {
    /// The default event cap for `n` processes: generous for every protocol's normal runs,
    /// finite for pathological ones (FCG's SOS floods O(n²) messages).
    pub fn default_max_events(n: u32) -> u64 {
        4_000 * u64::from(n) + 10_000_000
    }
}

/// An engine set up for `ex`: its processes, costs, receives, shared cores and noise (the
/// fault plan is given to each run); with [`Experiment::poll_per_source`], it has run the
/// experiment's first [`SOURCE_WARMUP_RUNS`] runs to learn the senders and kept them.
pub fn engine<P>(shared: &P::Shared, ex: &Experiment) -> Engine<P>
where
    P: Protocol,
    P::Shared: SharedInfo,
{
    let mut eng = Engine::<P>::new(ex.n, ex.logp);
    eng.receives = ex.receives;
    eng.set_cores(ex.cores);
    eng.set_visit(ex.visit);
    eng.set_work(ex.work);
    eng.set_local(ex.local_work, ex.local_receive);
    eng.set_noise(ex.noise.clone());
    if ex.poll_per_source > 0 && ex.cores.is_some() {
        eng.set_poll_per_source(ex.poll_per_source);
        for i in 0..SOURCE_WARMUP_RUNS.min(ex.runs.max(1)) {
            eng.run(shared, &ex.faults, ProtoRng::run_seed(ex.seed, i), ex.max_events);
        }
        eng.freeze_sources();
    }
    eng
}

/// Runs the experiment; `progress` is called with the number of runs completed so far.
pub fn run_many<P>(shared: &P::Shared, ex: &Experiment, progress: &(dyn Fn(u64) + Sync)) -> Summary
where
    P: Protocol,
    P::Shared: SharedInfo,
{
    let next = AtomicU64::new(0);
    let threads = ex.threads.max(1).min(ex.runs.max(1) as usize);
    // Runs are handed out in chunks (fewer atomic operations), small enough that every
    // thread gets work even when there are few runs.
    let chunk = (ex.runs / (4 * threads as u64)).clamp(1, 8);
    let mut total = Summary::new(ex.n);
    let parts: Vec<Summary> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut eng = engine::<P>(shared, ex);
                    let mut sum = Summary::new(ex.n);
                    loop {
                        let start = next.fetch_add(chunk, Ordering::Relaxed);
                        if start >= ex.runs {
                            break;
                        }
                        let end = (start + chunk).min(ex.runs);
                        for i in start..end {
                            let st = eng.run(shared, &ex.faults, ProtoRng::run_seed(ex.seed, i), ex.max_events);
                            sum.record(&st);
                        }
                        progress(end - start);
                    }
                    sum
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("simulation thread panicked"))
            .collect()
    });
    for p in &parts {
        total.merge(p);
    }
    total
}

/// Runs run number `index` of the experiment alone and returns its event trace.
pub fn trace_one<P>(shared: &P::Shared, ex: &Experiment, index: u64) -> Vec<TraceRow>
where
    P: Protocol,
    P::Shared: SharedInfo,
{
    let mut eng = engine::<P>(shared, ex);
    eng.trace = Some(Vec::new());
    eng.run(shared, &ex.faults, ProtoRng::run_seed(ex.seed, index), ex.max_events);
    eng.trace.take().unwrap_or_default()
}

/// Writes a trace as CSV (`time,node,event,peer,label`).
pub fn write_trace(rows: &[TraceRow], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(out, "time,node,event,peer,label")?;
    for r in rows {
        writeln!(out, "{},{},{},{},{}", r.time, r.node, r.event, r.peer, r.label)?;
    }
    Ok(())
}
