use super::*;
use crate::sim::RunStats;

/// The BMG claim states the number of phases the table shows: the
/// synchronous ring phases measured on binomial launch trees of every depth.
#[test]
fn the_bmg_claim_states_the_phases_the_table_shows() {
    use crate::sim::bmg_build::{BuildRun, Start, run};
    use crate::sim::phased::Scheduler;
    use crate::topology::launch_tree::{LaunchShape, LaunchTree};
    let claim = bmg_claim();
    for depth in 2..=8 {
        let t = LaunchTree::build(
            LaunchShape::Binomial { depth },
            1 << 20,
            &mut crate::protocol::ProtoRng::new(1),
        )
        .unwrap();
        let cfg = BuildRun {
            scheduler: Scheduler::Synchronous,
            refresh: 64,
            start: Start::Clean,
            max_phases: 10_000,
            closure_phases: 192,
        };
        let c = run(&t, &cfg, &mut crate::protocol::ProtoRng::new(1));
        assert!(c.closed, "depth {depth}");
        let ring = c.ring_phases.unwrap();
        assert!(
            claim.contains(&format!("shows {ring} = ")),
            "depth {depth}: ring {ring}: {claim}"
        );
        assert_eq!(ring, BMG_BINOMIAL_RING_HOPS + 1, "depth {depth}");
    }
    assert!(claim.contains("in 4 synchronous phases, counting message hops"));
}

/// A Figure 7 cell never shows a latency for a strongly consistent
/// algorithm when a run left a live process uncolored; OCG (weakly consistent) notes them.
#[test]
fn figure7_cells_never_report_a_latency_for_incomplete_runs() {
    let mut s = Summary::new(64);
    for (quiescence, uncolored_live) in [(40, 0), (41, 0), (42, 3)] {
        s.record(&RunStats {
            quiescence,
            uncolored_live,
            ..RunStats::default()
        });
    }
    let (m, cell) = scaling_cell(&s, false);
    assert!(m.is_infinite());
    assert_eq!(cell, "**1/3 runs incomplete**");
    let (m, cell) = scaling_cell(&s, true);
    assert_eq!(m, 41.0);
    assert_eq!(cell, "41.0 (1/3 runs missed a node)");
    let mut ok = Summary::new(64);
    ok.record(&RunStats {
        quiescence: 40,
        ..RunStats::default()
    });
    assert_eq!(scaling_cell(&ok, false), (40.0, "40.0".to_string()));
}
