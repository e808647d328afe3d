//! Simulator throughput: runs/s and events/s per core for a fixed reference configuration
//! (binomial tree, interleaved, synchronized checked correction, L = 2, o = 1, 1 %
//! uniform faults) at P = 1024, 65536 and 2^20, on one thread and on all cores.
//!
//! `cargo bench --bench sim_throughput` (add `-- --quick` for a shorter run).
//!
//! `-- --machine` instead times the same operation, one thread, on the broadcast engine and on
//! the machine engine through the `Bcast` adapter (`ftcoll::sim::bcast_machine`), alternating
//! three times, and checks that both give the same runs.

use std::time::Instant;

use ftcoll::model::LogP;
use ftcoll::protocol::ProtoRng;
use ftcoll::protocol::bcast::Start;
use ftcoll::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use ftcoll::protocol::bcast::correction::Correction;
use ftcoll::sim::{DeadBefore, Engine, Experiment, Faults, RunStats, bcast_machine, run_many};
use ftcoll::topology::{Order, Tree, TreeKind};

fn shared(n: u32) -> TreeShared {
    let logp = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp).expect("tree");
    TreeShared::new(tree, logp, Correction::Checked, Start::Synchronized)
}

fn faults() -> Faults {
    Faults {
        before: DeadBefore::Fraction(0.01),
        ..Faults::default()
    }
}

/// `runs` operations at `n` processes on one engine path (`None`: the broadcast engine;
/// `Some(one_event)`: the machine engine with one or two events per message), each with a new
/// engine as a caller of one run makes it: the runs' statistics and the wall time.
fn one_path(n: u32, runs: u64, machine: Option<bool>) -> (Vec<RunStats>, f64) {
    let shared = shared(n);
    let faults = faults();
    let logp = LogP { l: 2, o: 1 };
    let max = Experiment::default_max_events(n);
    let t = Instant::now();
    let stats = (0..runs)
        .map(|i| {
            let seed = ProtoRng::run_seed(1, i);
            match machine {
                Some(one) => bcast_machine::run::<CorrectedTree<0>>(n, logp.into(), &shared, &faults, seed, max, one).0,
                None => Engine::<CorrectedTree<0>>::new(n, logp).run(&shared, &faults, seed, max),
            }
        })
        .collect();
    (stats, t.elapsed().as_secs_f64())
}

/// The broadcast engine against the machine engine (see the module doc).
fn engines(quick: bool) {
    println!(
        "one thread, a new engine per run: the broadcast engine (Engine) against the machine engine (MachineEngine + Bcast)"
    );
    println!(
        "with two events per message (arrival, end of receive: m2) and with one (m1); wall time as a ratio to Engine's"
    );
    println!(
        "{:>9} {:>5} {:>11} {:>11} {:>13} {:>13} {:>13} {:>7} {:>7}",
        "P", "runs", "events", "events m2", "Engine ev/s", "m2 ev/s", "m1 ev/s", "m2/E", "m1/E"
    );
    let sizes: &[(u32, u64)] = if quick {
        &[(1024, 200), (65536, 4), (1 << 20, 1)]
    } else {
        &[(1024, 2000), (65536, 40), (1 << 20, 2)]
    };
    for &(n, runs) in sizes {
        for _ in 0..3 {
            let (e, te) = one_path(n, runs, None);
            let (m2, t2) = one_path(n, runs, Some(false));
            let (m1, t1) = one_path(n, runs, Some(true));
            for ((x, y), z) in e.iter().zip(&m2).zip(&m1) {
                assert!(!x.aborted && !y.aborted && !z.aborted, "a run aborted");
                let strip = |s: &RunStats| RunStats { events: 0, ..*s };
                assert!(
                    strip(x) == strip(y) && *x == *z,
                    "the engines disagree at P = {n}: {x:?}, {y:?}, {z:?}"
                );
            }
            let ev = |v: &[RunStats]| v.iter().map(|s| s.events).sum::<u64>();
            let (ee, e2) = (ev(&e), ev(&m2));
            println!(
                "{n:>9} {runs:>5} {ee:>11} {e2:>11} {:>13.0} {:>13.0} {:>13.0} {:>7.2} {:>7.2}",
                ee as f64 / te,
                e2 as f64 / t2,
                ee as f64 / t1,
                t2 / te,
                t1 / te
            );
        }
    }
}

fn measure(n: u32, runs: u64, threads: usize) -> (f64, f64, f64) {
    let logp = LogP { l: 2, o: 1 };
    let shared = shared(n);
    let ex = Experiment {
        n,
        logp: logp.into(),
        noise: None,
        faults: faults(),
        runs,
        seed: 1,
        threads,
        max_events: Experiment::default_max_events(n),
        receives: Default::default(),
        cores: None,
        visit: 0,
        work: 0,
        local_work: None,
        local_receive: None,
        poll_per_source: 0,
    };
    let t = Instant::now();
    let s = run_many::<CorrectedTree<0>>(&shared, &ex, &|_| {});
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(s.uncolored_runs, 0, "checked correction must color everyone");
    (runs as f64 / secs, s.events as f64 / secs, secs)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    if std::env::args().any(|a| a == "--machine") {
        engines(quick);
        return;
    }
    let cores = std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1);
    println!("simulator throughput: binomial interleaved, synchronized checked correction, L=2 o=1, 1% faults");
    println!(
        "{:>9} {:>8} {:>7} {:>12} {:>16} {:>14} {:>10}",
        "P", "threads", "runs", "runs/s", "events/s", "runs/s/core", "wall s"
    );
    let sizes: &[(u32, u64)] = if quick {
        &[(1024, 2000), (65536, 40), (1 << 20, 2)]
    } else {
        &[(1024, 20000), (65536, 400), (1 << 20, 6)]
    };
    for &(n, runs) in sizes {
        let mut one = 0.0;
        for threads in [1, cores] {
            if threads == cores && cores == 1 {
                continue;
            }
            let (rps, eps, secs) = measure(n, runs, threads);
            if threads == 1 {
                one = rps;
            }
            println!(
                "{n:>9} {threads:>8} {runs:>7} {rps:>12.1} {eps:>16.0} {:>14.1} {secs:>10.2}",
                rps / threads as f64
            );
        }
        if cores > 1 {
            let (rps, _, _) = measure(n, runs, cores);
            println!("{:>9} speed-up on {cores} cores: {:.2}x", "", rps / one.max(1e-9));
        }
    }
}
