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
    /// The same, with messages within a core at their own costs (`Engine::set_local`).
    Local(u32, Time),
    /// Visits at this cost, and this many thousandths of a unit more per sender beyond the
    /// first (`Engine::set_poll_per_source`), learned over the seeds' runs.
    Sources(u32, Time, u64),
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
                interrupts: None,
            })
        })
    }
    fn cores(&self) -> Option<u32> {
        match self.mode {
            Mode::Cores(c) | Mode::Visits(c, _) | Mode::Local(c, _) | Mode::Sources(c, _, _) => Some(c),
            _ => None,
        }
    }
    fn visit(&self) -> Time {
        match self.mode {
            Mode::Visits(_, v) | Mode::Local(_, v) | Mode::Sources(_, v, _) => v,
            _ => 0,
        }
    }
    fn poll_per_source(&self) -> u64 {
        match self.mode {
            Mode::Sources(_, _, m) => m,
            _ => 0,
        }
    }
    /// With `Mode::Local`: a visit's tail after receiving within its core, and such a receive.
    fn local(&self) -> (Option<Time>, Option<Time>) {
        match self.mode {
            Mode::Local(_, v) => (Some(v / 3), Some((self.gp.or / 2).max(1))),
            _ => (None, None),
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
        let (work_local, or_local) = x.local();
        e.set_local(work_local, or_local);
        e.set_poll_per_source(x.poll_per_source());
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
        let (work_local, or_local) = x.local();
        e.set_local(work_local, or_local);
        e.set_poll_per_source(x.poll_per_source());
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
                known_dead: false,
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
        for mode in [
            Mode::Cores(7),
            Mode::Visits(7, 3),
            Mode::Local(7, 5),
            Mode::Sources(7, 3, 1500),
            Mode::Parallel,
            Mode::Noisy,
        ] {
            same_as_the_reference(120, gp, mode, 2, false);
        }
    }
}

/// Each mode once, on 5 cores where cores are shared.
const EVERY_MODE: [Mode; 7] = [
    Mode::Plain,
    Mode::Cores(5),
    Mode::Visits(5, 2),
    Mode::Local(5, 4),
    Mode::Sources(5, 2, 700),
    Mode::Parallel,
    Mode::Noisy,
];

/// The trace, event by event, is the reference engine's.
#[test]
fn traces_are_the_reference_engines_event_for_event() {
    for mode in EVERY_MODE {
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

/// Senders that know the dead ([`Faults::known_dead`]) differ only in their sends to processes
/// dead before the start: with none dead before (deaths during the run only, which no sender
/// knows of), every run is the reference engine's, in every mode.
#[test]
fn known_dead_changes_nothing_without_processes_dead_before_the_start() {
    let gp = LogGP::from(LogP { l: 2, o: 1 });
    for mode in EVERY_MODE {
        for algo in algos() {
            let faults = |known_dead| Faults {
                before: DeadBefore::Count(0),
                online: 2,
                online_horizon: 20 * gp.hop(),
                online_list: vec![(7, gp.hop() + 1)],
                detect_delay: 10 + gp.l,
                known_dead,
            };
            let runs = |known_dead| Runs {
                n: 64,
                gp,
                mode,
                faults: faults(known_dead),
                seeds: 2,
                traced: true,
            };
            let known = algo.dispatch(64, gp, New(&runs(true))).unwrap();
            let old = algo.dispatch(64, gp, Old(&runs(false))).unwrap();
            for (a, b) in known.iter().zip(&old) {
                assert!(!a.stats.aborted, "{algo:?} {mode:?}");
                assert_eq!(a, b, "{algo:?} {mode:?}");
            }
        }
    }
}

/// One run of a binomial tree with checked correction over 8 processes, rank 1 (the root's first
/// child) dead before the start, with or without senders that know it; its trace.
fn root_child_dead(known_dead: bool, mode: Mode) -> Outcome {
    use crate::protocol::bcast::Start;
    use crate::protocol::bcast::correction::Correction;
    use crate::topology::{Order, TreeKind};
    let gp = LogGP::from(LogP { l: 2, o: 1 });
    let algo = Algo::CorrectedTree {
        tree: TreeKind::Binomial,
        order: Order::Interleaved,
        correction: Correction::Checked,
        start: Start::Synchronized,
    };
    let runs = Runs {
        n: 8,
        gp,
        mode,
        faults: Faults {
            before: DeadBefore::List(vec![1]),
            known_dead,
            ..Faults::default()
        },
        seeds: 1,
        traced: true,
    };
    let mut out = algo.dispatch(8, gp, New(&runs)).unwrap();
    assert!(!out[0].stats.aborted);
    out.remove(0)
}

/// The times of `r`'s sends in a trace, with their receivers.
fn sends_of(o: &Outcome, r: Rank) -> Vec<(Time, Rank)> {
    o.trace
        .iter()
        .filter(|t| t.node == r && t.event == "send")
        .map(|t| (t.time, t.peer))
        .collect()
}

/// A send to a known dead process takes no time: the root's tree message to rank 2 leaves at
/// the instant of the refused one to rank 1 (LogP: one `o` later), so rank 2 delivers at
/// `o + L + o`; both count the message to rank 1, as the runtime does.
#[test]
fn a_send_to_a_known_dead_process_costs_nothing() {
    let (logp, known) = (root_child_dead(false, Mode::Plain), root_child_dead(true, Mode::Plain));
    assert_eq!(&sends_of(&logp, 0)[..3], [(0, 1), (1, 2), (2, 4)]);
    assert_eq!(&sends_of(&known, 0)[..3], [(0, 1), (0, 2), (1, 4)]);
    assert_eq!(known.per_process[2].1, 4, "rank 2 delivers at o + L + o");
    assert_eq!(logp.per_process[2].1, 5);
    assert!(known.stats.coloring < logp.stats.coloring, "{known:?} {logp:?}");
    let to_1 = |o: &Outcome| o.trace.iter().filter(|t| t.event == "send" && t.peer == 1).count();
    assert!(to_1(&known) >= 2, "the tree message and a correction message to rank 1");
    // Nothing reaches the dead process with known senders; without, it loses what it is sent.
    let lost = |o: &Outcome| o.trace.iter().filter(|t| t.event == "lost").count();
    assert_eq!(lost(&known), 0);
    assert_eq!(lost(&logp), to_1(&logp));
}

/// With cores that visit their processes in turn, a refused tree message keeps the sender's
/// visit (the runtime's node forwards on at once), a refused correction message ends it (the
/// node reads before its next correction message, and its worker visits the others first).
#[test]
fn a_refused_correction_message_hands_the_core_on_and_a_tree_message_does_not() {
    let known = root_child_dead(true, Mode::Visits(2, 3));
    let root = sends_of(&known, 0);
    assert_eq!((root[0], root[1].1), ((0, 1), 2));
    assert_eq!(root[1].0, 0, "the tree message to rank 2 in the same visit: {root:?}");
    let refused = known
        .trace
        .iter()
        .position(|t| t.event == "send" && t.peer == 1 && t.label != "tree")
        .expect("a correction message to rank 1");
    let (t, from) = (known.trace[refused].time, known.trace[refused].node);
    let next = sends_of(&known, from).into_iter().find(|s| s.0 >= t && s.1 != 1);
    let next = next.expect("the sender sends on");
    assert!(
        next.0 > t,
        "rank {from}'s next send after its refused one at {t}: {next:?}"
    );
}
