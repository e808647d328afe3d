//! Simulator throughput: runs/s and events/s per core for a fixed reference configuration
//! (binomial tree, interleaved, synchronized checked correction, L = 2, o = 1, 1 %
//! uniform faults) at P = 1024, 65536 and 2^20, on one thread and on all cores.
//!
//! `cargo bench --bench sim_throughput` (add `-- --quick` for a shorter run).

use std::time::Instant;

use ftcoll::model::LogP;
use ftcoll::protocol::bcast::Start;
use ftcoll::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use ftcoll::protocol::bcast::correction::Correction;
use ftcoll::sim::{DeadBefore, Experiment, Faults, run_many};
use ftcoll::topology::{Order, Tree, TreeKind};

fn measure(n: u32, runs: u64, threads: usize) -> (f64, f64, f64) {
    let logp = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp).expect("tree");
    let shared = TreeShared::new(tree, logp, Correction::Checked, Start::Synchronized);
    let ex = Experiment {
        n,
        logp: logp.into(),
        noise: None,
        faults: Faults {
            before: DeadBefore::Fraction(0.01),
            ..Faults::default()
        },
        runs,
        seed: 1,
        threads,
        max_events: Experiment::default_max_events(n),
        receives: Default::default(),
        cores: None,
        visit: 0,
    };
    let t = Instant::now();
    let s = run_many::<CorrectedTree<0>>(&shared, &ex, &|_| {});
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(s.uncolored_runs, 0, "checked correction must color everyone");
    (runs as f64 / secs, s.events as f64 / secs, secs)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
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
