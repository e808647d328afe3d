//! Differential tests of the calendar's far store: every simulator run is the same, run for
//! run and figure for figure, whether the calendar keeps far events in lists per instant or in
//! the binary heap it used before ([`reference::use_heap`]), over every broadcast algorithm,
//! fault plans with deaths before and during the run, LogP parameters whose latency keeps
//! most events beyond the calendar's ring, shared cores, parallel receives and noise.

use std::sync::Arc;

use crate::model::{LogGP, LogP, Time};
use crate::protocol::{Protocol, SharedInfo};
use crate::sim::calendar::reference;
use crate::sim::engine::Receives;
use crate::sim::loggp_tests::algos;
use crate::sim::noise::{Dist, Noise};
use crate::sim::{DeadBefore, Engine, Faults, RunStats};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

/// How an engine is set up beside its parameters.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Plain,
    Cores(u32),
    Parallel,
    Noisy,
}

struct Runs {
    n: u32,
    gp: LogGP,
    mode: Mode,
    faults: Faults,
    seeds: u64,
}

impl Visit for &Runs {
    type Out = Vec<RunStats>;
    fn visit<P>(self, shared: &P::Shared) -> Vec<RunStats>
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        let mut e = Engine::<P>::new(self.n, self.gp);
        match self.mode {
            Mode::Plain => {}
            Mode::Cores(c) => e.set_cores(Some(c)),
            Mode::Parallel => e.receives = Receives::Parallel,
            Mode::Noisy => {
                let g = self.gp;
                e.set_noise(Some(Arc::new(Noise {
                    os: Dist::Samples(vec![g.os, g.os + 1, 2 * g.os]),
                    or: Dist::Samples(vec![g.or, g.or + 2]),
                    l: Dist::Samples(vec![g.l, g.l / 2, 3 * g.l + 1]),
                    loss: None,
                    interrupts: None,
                })));
            }
        }
        // One engine for all seeds: buffers reused across runs must not change a run either.
        (0..self.seeds)
            .map(|s| e.run(shared, &self.faults, s, 10_000_000))
            .collect()
    }
}

/// Every algorithm over `runs`, with the far store and with the reference heap: the same
/// statistics for every run, and no run aborted.
fn same_with_the_heap(n: u32, gp: LogGP, mode: Mode, seeds: u64) {
    for (i, algo) in algos().into_iter().enumerate() {
        let runs = Runs {
            n,
            gp,
            mode,
            faults: Faults {
                before: DeadBefore::Fraction(0.05),
                online: 1 + (i as u32 % 3),
                online_horizon: 20 * gp.hop(),
                online_list: Vec::new(),
                detect_delay: 10 + gp.l,
                known_dead: false,
            },
            seeds,
        };
        let new = algo.dispatch(n, gp, &runs).unwrap();
        let old = reference::use_heap(|| algo.dispatch(n, gp, &runs).unwrap());
        for (seed, (a, b)) in new.iter().zip(&old).enumerate() {
            assert!(!a.aborted, "{algo:?} n={n} {gp:?} {mode:?} seed {seed}");
            assert_eq!(a, b, "{algo:?} n={n} {gp:?} {mode:?} seed {seed}");
        }
        assert_eq!(new.len(), old.len());
    }
}

fn params() -> Vec<LogGP> {
    let p = |l: Time, o: Time| LogGP::from(LogP { l, o });
    vec![
        // The papers' parameters: only sleeps until the synchronized start go far.
        p(2, 1),
        // Receives queue behind a slow receiver; timers.
        LogGP::new(3, 1, 4, 2, 1).unwrap(),
        // L beyond the largest ring: every message travels through the far store.
        p(5000, 2),
        p(1 << 30, 3),
    ]
}

#[test]
fn every_algorithm_runs_the_same_as_with_the_heap() {
    for gp in params() {
        for n in [1, 2, 97, 300] {
            same_with_the_heap(n, gp, Mode::Plain, 3);
        }
    }
}

#[test]
fn shared_cores_parallel_receives_and_noise_run_the_same_as_with_the_heap() {
    for gp in params() {
        for mode in [Mode::Cores(7), Mode::Parallel, Mode::Noisy] {
            same_with_the_heap(120, gp, mode, 2);
        }
    }
}
