//! The broadcast engine against the same operation on the machine engine
//! ([`super::run`]): for every deterministic broadcast algorithm (the corrected trees with
//! every correction and start, BIG, the acknowledged tree; the gossips draw from a generator
//! per run in the engine and per process here, BFB needs the modeled failure detector), LogP
//! and LogGP parameters, deaths before and during the run, with one event per message and with
//! two, the same statistics and the same delivery time at every process, run for run.

use crate::model::{LogGP, LogP, Time};
use crate::protocol::bcast::algo::Algo;
use crate::protocol::{Protocol, SharedInfo};
use crate::sim::loggp_tests::algos;
use crate::sim::{DeadBefore, Engine, Experiment, Faults, RunStats};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

/// Each run's statistics and per-process delivery times (`Time::MAX`: none) on one engine,
/// and (the broadcast engine's runs) how many processes died during the run.
type Runs = Vec<(RunStats, Vec<Time>, u32)>;

struct Both<'a> {
    n: u32,
    gp: LogGP,
    faults: &'a Faults,
    seeds: u64,
}

impl Visit for Both<'_> {
    /// The broadcast engine's runs and the machine engine's; `None` for a protocol that takes
    /// suspicions.
    type Out = Option<(Runs, Runs)>;
    fn visit<P>(self, shared: &P::Shared) -> Self::Out
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        if shared.uses_failure_detector() {
            return None;
        }
        let max = Experiment::default_max_events(self.n);
        let mut e = Engine::<P>::new(self.n, self.gp);
        let mut a = Vec::new();
        let mut b = Vec::new();
        for seed in 0..self.seeds {
            let st = e.run(shared, self.faults, seed, max);
            let at = (0..self.n)
                .map(|r| {
                    if e.node(r).delivered() {
                        e.delivered_at(r)
                    } else {
                        Time::MAX
                    }
                })
                .collect();
            let online = (0..self.n)
                .filter(|&r| !matches!(e.death_time(r), 0 | Time::MAX))
                .count();
            a.push((st, at, online as u32));
            let one_event = seed % 2 == 1;
            let (st, at) = super::run::<P>(self.n, self.gp, shared, self.faults, seed, max, one_event);
            b.push((st, at, 0));
        }
        Some((a, b))
    }
}

fn deterministic(algo: &Algo) -> bool {
    !matches!(algo, Algo::CorrectedGossip { .. })
}

fn same_on_both_engines(n: u32, gp: LogGP, seeds: u64) -> usize {
    let mut compared = 0;
    for (i, algo) in algos().into_iter().filter(deterministic).enumerate() {
        let faults = Faults {
            before: match i % 3 {
                0 => DeadBefore::Fraction(0.05),
                1 => DeadBefore::Count(n / 7),
                _ => DeadBefore::List((1..n).filter(|r| r % 5 == 3).collect()),
            },
            online: 1 + (i as u32 % 3),
            online_horizon: 20 * gp.hop(),
            online_list: if n > 3 { vec![(n / 2, gp.hop() + 1)] } else { Vec::new() },
            ..Faults::default()
        };
        let both = Both {
            n,
            gp,
            faults: &faults,
            seeds,
        };
        let Some((a, b)) = algo.dispatch(n, gp, both).unwrap() else {
            continue;
        };
        for (seed, (x, y)) in a.iter().zip(&b).enumerate() {
            let at = format!("{algo:?} n={n} {gp:?} seed {seed}");
            assert!(!x.0.aborted && !y.0.aborted, "{at}: a run aborted");
            // Odd seeds: one event per message on both engines; even: two on the machine's
            // (arrival, end of receive).
            if seed % 2 == 1 {
                // The machine engine's deaths during the run are events of their own.
                assert_eq!(y.0.events, x.0.events + u64::from(x.2), "{at}");
            } else {
                assert!(y.0.events > x.0.events || x.0.messages == 0, "{at}");
            }
            assert_eq!(RunStats { events: 0, ..x.0 }, RunStats { events: 0, ..y.0 }, "{at}");
            assert_eq!(x.1, y.1, "{at}: delivery times");
            assert!(x.1[0] != Time::MAX, "{at}: the root delivers");
        }
        compared += 1;
    }
    compared
}

#[test]
fn every_deterministic_algorithm_runs_the_same_on_the_machine_engine() {
    let p = |l: Time, o: Time| LogGP::from(LogP { l, o });
    for gp in [p(2, 1), LogGP::new(3, 1, 4, 2, 1).unwrap(), p(5000, 2)] {
        for n in [1, 2, 97, 300] {
            let compared = same_on_both_engines(n, gp, 2);
            // 48 corrected trees (4 trees × 6 corrections × 2 starts), BIG and the
            // acknowledged tree (BFB is left out).
            assert_eq!(compared, 50, "n={n} {gp:?}");
        }
    }
}

#[test]
fn large_runs_are_the_same_on_the_machine_engine() {
    same_on_both_engines(4096, LogGP::from(LogP { l: 2, o: 1 }), 2);
}
