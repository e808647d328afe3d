//! Differential tests of the broadcast engine's layout: every simulator run is the same, run
//! for run, process for process and event for event (the trace), as with the engine it
//! replaced, one record per process ([`reference::Engine`], kept verbatim in the test build),
//! over every broadcast algorithm, fault plans with deaths before and during the run, LogP
//! parameters with and without far events, shared cores, parallel receives, noise, and one
//! engine reused across runs.

use std::sync::Arc;

use crate::model::{LogGP, LogP, Time};
use crate::protocol::bcast::algo::Algo;
use crate::protocol::{Protocol, Rank, SharedInfo};
use crate::sim::engine::{Receives, reference};
use crate::sim::loggp_tests::algos;
use crate::sim::noise::{Dist, Noise};
use crate::sim::{DeadBefore, Engine, Experiment, Faults, RunStats, TraceRow};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

/// How an engine is set up beside its parameters.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Plain,
    Cores(u32),
    /// Shared cores that visit their processes in turn, at this cost a visit.
    Visits(u32, Time),
    Parallel,
    Noisy,
}

/// One run's outcome as both engines report it: the statistics, each process's death and
/// delivery time and whether its protocol state says it delivered, and the trace.
#[derive(Debug, PartialEq)]
struct Outcome {
    stats: RunStats,
    per_process: Vec<(Time, Time, bool)>,
    trace: Vec<TraceRow>,
}

struct Runs {
    n: u32,
    gp: LogGP,
    mode: Mode,
    faults: Faults,
    seeds: u64,
    traced: bool,
}

impl Runs {
    fn noise(&self) -> Option<Arc<Noise>> {
        let g = self.gp;
        matches!(self.mode, Mode::Noisy).then(|| {
            Arc::new(Noise {
                os: Dist::Samples(vec![g.os, g.os + 1, 2 * g.os]),
                or: Dist::Samples(vec![g.or, g.or + 2]),
                l: Dist::Samples(vec![g.l, g.l / 2, 3 * g.l + 1]),
                loss: None,
            })
        })
    }
    fn cores(&self) -> Option<u32> {
        match self.mode {
            Mode::Cores(c) | Mode::Visits(c, _) => Some(c),
            _ => None,
        }
    }
    fn visit(&self) -> Time {
        match self.mode {
            Mode::Visits(_, v) => v,
            _ => 0,
        }
    }
    fn receives(&self) -> Receives {
        match self.mode {
            Mode::Parallel => Receives::Parallel,
            _ => Receives::Queued,
        }
    }
}

/// The new engine's outcomes, one engine for every seed.
struct New<'a>(&'a Runs);
/// The reference engine's outcomes, one engine for every seed.
struct Old<'a>(&'a Runs);

fn outcome(
    stats: RunStats,
    n: u32,
    trace: Option<Vec<TraceRow>>,
    each: impl Fn(Rank) -> (Time, Time, bool),
) -> Outcome {
    Outcome {
        stats,
        per_process: (0..n).map(each).collect(),
        trace: trace.unwrap_or_default(),
    }
}

impl Visit for New<'_> {
    type Out = Vec<Outcome>;
    fn visit<P>(self, shared: &P::Shared) -> Vec<Outcome>
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        let x = self.0;
        let mut e = Engine::<P>::new(x.n, x.gp);
        e.receives = x.receives();
        e.set_cores(x.cores());
        e.set_visit(x.visit());
        e.set_work(x.visit() / 2);
        e.set_noise(x.noise());
        (0..x.seeds)
            .map(|s| {
                e.trace = x.traced.then(Vec::new);
                let stats = e.run(shared, &x.faults, s, Experiment::default_max_events(x.n));
                let trace = e.trace.take();
                outcome(stats, x.n, trace, |r| {
                    (e.death_time(r), e.delivered_at(r), e.node(r).delivered())
                })
            })
            .collect()
    }
}

impl Visit for Old<'_> {
    type Out = Vec<Outcome>;
    fn visit<P>(self, shared: &P::Shared) -> Vec<Outcome>
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        let x = self.0;
        let mut e = reference::Engine::<P>::new(x.n, x.gp);
        e.receives = x.receives();
        e.set_cores(x.cores());
        e.set_visit(x.visit());
        e.set_work(x.visit() / 2);
        e.set_noise(x.noise());
        (0..x.seeds)
            .map(|s| {
                e.trace = x.traced.then(Vec::new);
                let stats = e.run(shared, &x.faults, s, Experiment::default_max_events(x.n));
                let trace = e.trace.take();
                outcome(stats, x.n, trace, |r| {
                    (e.death_time(r), e.delivered_at(r), e.node(r).delivered())
                })
            })
            .collect()
    }
}

/// Every algorithm with both engines: the same outcome for every run, and no run aborted.
fn same_as_the_reference(n: u32, gp: LogGP, mode: Mode, seeds: u64, traced: bool) {
    for (i, algo) in algos().into_iter().enumerate() {
        // BFB floods: at thousands of processes its runs hit the event cap.
        if n > 1000 && algo == Algo::Bfb {
            continue;
        }
        let before = match i % 3 {
            0 => DeadBefore::Fraction(0.05),
            1 => DeadBefore::Count(n / 7),
            _ => DeadBefore::List((1..n).filter(|r| r % 5 == 3).collect()),
        };
        let runs = Runs {
            n,
            gp,
            mode,
            faults: Faults {
                before,
                online: 1 + (i as u32 % 3),
                online_horizon: 20 * gp.hop(),
                online_list: if n > 3 { vec![(n / 2, gp.hop() + 1)] } else { Vec::new() },
                detect_delay: 10 + gp.l,
            },
            seeds,
            traced,
        };
        let new = algo.dispatch(n, gp, New(&runs)).unwrap();
        let old = algo.dispatch(n, gp, Old(&runs)).unwrap();
        assert_eq!(new.len(), old.len());
        let mut colored = 0;
        for (seed, (a, b)) in new.iter().zip(&old).enumerate() {
            assert!(!a.stats.aborted, "{algo:?} n={n} {gp:?} {mode:?} seed {seed}");
            assert_eq!(a.stats, b.stats, "{algo:?} n={n} {gp:?} {mode:?} seed {seed}");
            assert_eq!(
                a.per_process, b.per_process,
                "{algo:?} n={n} {gp:?} {mode:?} seed {seed}"
            );
            assert_eq!(a.trace, b.trace, "{algo:?} n={n} {gp:?} {mode:?} seed {seed}");
            assert_eq!(a.trace.is_empty(), !traced || n == 0);
            colored += a.per_process.iter().filter(|p| p.1 != Time::MAX).count();
        }
        // The runs did something: the root delivers in every run.
        assert!(colored as u64 >= seeds, "{algo:?} n={n}: {colored} deliveries");
    }
}

fn params() -> Vec<LogGP> {
    let p = |l: Time, o: Time| LogGP::from(LogP { l, o });
    vec![p(2, 1), LogGP::new(3, 1, 4, 2, 1).unwrap(), p(5000, 2), p(1 << 30, 3)]
}

#[test]
fn every_algorithm_runs_as_with_one_record_per_process() {
    for gp in params() {
        for n in [1, 2, 97, 300] {
            same_as_the_reference(n, gp, Mode::Plain, 3, false);
        }
    }
}

#[test]
fn shared_cores_parallel_receives_and_noise_run_as_with_one_record_per_process() {
    for gp in params() {
        for mode in [Mode::Cores(7), Mode::Visits(7, 3), Mode::Parallel, Mode::Noisy] {
            same_as_the_reference(120, gp, mode, 2, false);
        }
    }
}

/// The trace, event by event, is the reference engine's.
#[test]
fn traces_are_the_reference_engines_event_for_event() {
    for mode in [
        Mode::Plain,
        Mode::Cores(5),
        Mode::Visits(5, 2),
        Mode::Parallel,
        Mode::Noisy,
    ] {
        same_as_the_reference(64, LogGP::from(LogP { l: 2, o: 1 }), mode, 2, true);
    }
}

/// Larger runs (but BFB), where many receives share an instant and buckets grow to one event
/// per rank.
#[test]
fn large_runs_are_the_reference_engines() {
    for n in [4096, 10_000] {
        same_as_the_reference(n, LogGP::from(LogP { l: 2, o: 1 }), Mode::Plain, 1, false);
    }
}
