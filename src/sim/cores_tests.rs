//! Shared cores in the engine ([`Engine::set_cores`]): with a core per process it is the LogGP
//! engine, bit for bit; on one core every send and receive of the run is serialized; a small
//! tree on fewer cores gives the hand-computed times, also where cores visit their
//! processes in turn ([`Engine::set_visit`]).

use crate::model::{LogGP, Time};
use crate::protocol::bcast::Start;
use crate::protocol::bcast::algo::Algo;
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::protocol::bcast::correction::Correction;
use crate::protocol::{Protocol, SharedInfo};
use crate::sim::{DeadBefore, Engine, Faults, RunStats};
use crate::topology::{Order, TreeKind};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

struct Runs {
    n: u32,
    logp: LogGP,
    cores: Option<u32>,
    visit: Time,
    faults: Faults,
    seeds: u64,
}

impl Visit for Runs {
    type Out = Vec<RunStats>;
    fn visit<P>(self, shared: &P::Shared) -> Vec<RunStats>
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        let mut e = Engine::<P>::new(self.n, self.logp);
        e.set_cores(self.cores);
        e.set_visit(self.visit);
        (0..self.seeds)
            .map(|s| e.run(shared, &self.faults, s, 10_000_000))
            .collect()
    }
}

fn algos() -> Vec<Algo> {
    let mut v = Vec::new();
    for correction in [
        Correction::Checked,
        Correction::Opportunistic { d: 2 },
        Correction::None,
    ] {
        for start in [Start::Synchronized, Start::Overlapped] {
            v.push(Algo::CorrectedTree {
                tree: TreeKind::Binomial,
                order: Order::Interleaved,
                correction,
                start,
            });
        }
    }
    v.push(Algo::CorrectedGossip {
        variant: Variant::Ccg,
        t: 20,
    });
    v.push(Algo::Bfb);
    v
}

fn runs(algo: &Algo, n: u32, logp: LogGP, cores: Option<u32>, faults: Faults) -> Vec<RunStats> {
    runs_visiting(algo, n, logp, cores, 0, faults)
}

fn runs_visiting(algo: &Algo, n: u32, logp: LogGP, cores: Option<u32>, visit: Time, faults: Faults) -> Vec<RunStats> {
    let r = algo
        .dispatch(
            n,
            logp,
            Runs {
                n,
                logp,
                cores,
                visit,
                faults,
                seeds: 4,
            },
        )
        .unwrap();
    for s in &r {
        assert!(!s.aborted, "{algo:?} n={n} cores={cores:?}");
    }
    r
}

fn gp(l: Time, os: Time, or: Time) -> LogGP {
    LogGP::new(l, os, or, 0, 0).unwrap()
}

#[test]
fn a_core_per_process_is_the_engine_without_cores() {
    let faults = Faults {
        before: DeadBefore::Fraction(0.05),
        online: 1,
        online_horizon: 100,
        ..Faults::default()
    };
    for algo in algos() {
        let plain = runs(&algo, 64, gp(5, 3, 2), None, faults.clone());
        for cores in [Some(64), Some(1000)] {
            assert_eq!(runs(&algo, 64, gp(5, 3, 2), cores, faults.clone()), plain, "{algo:?}");
        }
        // Fewer cores than processes changes the run (the engine is not ignoring them).
        if matches!(algo, Algo::CorrectedTree { .. }) {
            assert_ne!(runs(&algo, 64, gp(5, 3, 2), Some(4), faults.clone()), plain, "{algo:?}");
        }
    }
}

#[test]
fn one_core_serializes_every_send_and_receive() {
    let (os, or) = (3, 2);
    for algo in algos() {
        for n in [2, 9, 40] {
            for s in runs(&algo, n, gp(4, os, or), Some(1), Faults::default()) {
                assert_eq!(s.uncolored_live, 0, "{algo:?} n={n}");
                // No process is dead: every message is received, one core does it all.
                assert!(
                    s.quiescence >= s.messages * (os + or),
                    "{algo:?} n={n}: quiescence {} < {} messages · (o_s + o_r)",
                    s.quiescence,
                    s.messages
                );
            }
        }
    }
}

#[test]
fn a_star_of_three_takes_turns_on_its_cores() {
    // Root 0 sends to 1 (0..3) and to 2 (3..6); each message lands L = 1 after its send.
    let star = Algo::CorrectedTree {
        tree: TreeKind::Kary(2),
        order: Order::Interleaved,
        correction: Correction::None,
        start: Start::Synchronized,
    };
    let coloring = |cores| runs(&star, 3, gp(1, 3, 2), cores, Faults::default())[0].coloring;
    // A core each: 1 receives 4..6, 2 receives 7..9.
    assert_eq!(coloring(None), 9);
    // One core: the second send holds it until 6, so 1 receives 6..8 and 2 receives 8..10.
    assert_eq!(coloring(Some(1)), 10);
    // Cores {0, 2} and {1}: 1 receives 4..6 on its own core; 2 shares the root's, so its
    // message is there when the send ends (no L on one core) and 2 receives 6..8.
    assert_eq!(coloring(Some(2)), 8);
}

#[test]
fn cores_that_visit_their_processes_in_turn_give_the_hand_computed_times() {
    // The star of three on cores {0, 2} and {1}: root 0 sends to 1 (0..3, lands at 5) and to
    // 2 (3..6, there at 6: the same core, no L), L = 2, o_s = 3, o_r = 2.
    let star = Algo::CorrectedTree {
        tree: TreeKind::Kary(2),
        order: Order::Interleaved,
        correction: Correction::None,
        start: Start::Synchronized,
    };
    let coloring = |visit| runs_visiting(&star, 3, gp(2, 3, 2), Some(2), visit, Faults::default())[0].coloring;
    // Free switching: as without visits (1 receives 5..7, 2 receives 6..8).
    assert_eq!(coloring(0), 8);
    // Visits of 3: core {1} looks at rank 1 at 1, 4, 7: it receives 7..9. Core {0, 2} keeps
    // the root for its second send (3..6) and moves on to rank 2 at 7, where the message has
    // waited since 6: 7..9.
    assert_eq!(coloring(3), 9);
    // Visits of 1: rank 1 receives at 5 (5..7); rank 2 is visited at 7: 7..9.
    assert_eq!(coloring(1), 9);
    // A visit cost without shared cores changes nothing.
    let alone = runs_visiting(&star, 3, gp(2, 3, 2), None, 5, Faults::default())[0].coloring;
    assert_eq!(alone, 10, "a core each: 2 receives 8..10");
}

#[test]
fn the_models_broadcast_grows_smoothly_with_the_visit_cost() {
    // 16 and 64 processes on 2 cores, fixed costs (the bench model's in-process ones, in ns):
    // a message that waits for its process is taken when the core's round reaches it. It was
    // taken a whole round later when the core got there sooner than foreseen (its processes
    // before had work shorter than a visit): at 16 processes one unit more per visit, 101 to
    // 102, added 1537 to the coloring (`docs/measurements.md`, "A cliff in the
    // processor-sharing model").
    for correction in [Correction::None, Correction::Checked] {
        let tree = Algo::CorrectedTree {
            tree: TreeKind::Binomial,
            order: Order::Interleaved,
            correction,
            start: Start::Synchronized,
        };
        for n in [16, 64] {
            let coloring =
                |visit| runs_visiting(&tree, n, gp(118, 80, 100), Some(2), visit, Faults::default())[0].coloring;
            let mut last = coloring(90);
            for visit in 91..=130 {
                let c = coloring(visit);
                // One unit more per visit moves the coloring by at most one unit per visit on
                // the way: a round's worth of them (n / 2 a core) for each of the tree's
                // log2(n) hops (either way: the correction's messages shift with it).
                let most = Time::from(n / 2) * Time::from(n.ilog2());
                assert!(
                    c.abs_diff(last) <= most,
                    "{correction:?} n={n}: visit {} -> {visit}: coloring {last} -> {c}",
                    visit - 1
                );
                last = c;
            }
        }
    }
}
