//! The broadcast node on the generic node loop against the LogP simulator: the same
//! protocol, the same dead processes, the same deliveries and messages per operation.
//! What does not depend on timing is compared exactly: a binomial tree's dissemination
//! alone (its messages, and the live processes a dead one cuts off); with a correction,
//! which processes correct depends on real timing, so only the deliveries are (every live
//! process). Bounded in time and count, in-process transport only.

use std::time::Duration;

use ftcoll::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
use ftcoll::experiment::bench::local::run;
use ftcoll::model::LogP;
use ftcoll::protocol::bcast::Start;
use ftcoll::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use ftcoll::protocol::bcast::correction::Correction;
use ftcoll::runtime::cluster::{ClusterConfig, ClusterResult, PollMode};
use ftcoll::runtime::kill::parse_kills;
use ftcoll::runtime::{Bench, TransportKind};
use ftcoll::sim::{DeadBefore, Experiment, Faults, run_many};
use ftcoll::topology::{Order, Tree, TreeKind};

const N: u32 = 16;
const ITERS: u64 = 12;

fn node_loop(correction: Correction, kills: &str) -> ClusterResult {
    let model = LogP { l: 2, o: 1 };
    let spec = AlgoSpec {
        correction: Some(ftcoll::protocol::bcast::algo::corr_name(&correction)),
        ..AlgoSpec::new(AlgoName::CorrectedTree)
    };
    let cluster = ClusterConfig {
        nodes: N,
        workers: 2,
        poll: PollMode::Adaptive,
        warmup: 2,
        iterations: ITERS,
        window: 1,
        payload_len: 16,
        tick_ns: 1000,
        job: 42,
        seed: 7,
        // (An operation a dead process cut off waits this long: every one, without a
        // correction.)
        op_timeout: Duration::from_millis(100),
        idle: Duration::from_micros(500),
        pin: false,
        give_up_after: None,
    };
    let bench = Bench {
        algo: resolve_algo(&spec, N, model, 0).expect("algorithm"),
        cluster,
        transport: TransportKind::Inproc,
        kills: if kills.is_empty() {
            Vec::new()
        } else {
            parse_kills(kills, N).unwrap()
        },
        model: model.into(),
        loss: 0.0,
        auth: None,
    };
    run(&bench, None).expect("bench runs")
}

/// The simulator's messages per operation (and whether the count is fixed) and uncolored
/// live processes per run, with `dead` dead from the start.
fn simulated(correction: Correction, dead: &[u32]) -> (f64, bool, f64) {
    let model = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, N, model).unwrap();
    let shared = TreeShared::new(tree, model, correction, Start::Synchronized);
    let runs = 4;
    let ex = Experiment {
        n: N,
        logp: model.into(),
        noise: None,
        faults: Faults {
            before: DeadBefore::List(dead.to_vec()),
            ..Faults::default()
        },
        runs,
        seed: 1,
        threads: 1,
        max_events: 1 << 20,
        receives: Default::default(),
        cores: None,
        visit: 0,
        work: 0,
        local_work: None,
        local_receive: None,
        poll_per_source: 0,
    };
    let sim = run_many::<CorrectedTree<0>>(&shared, &ex, &|_| {});
    assert_eq!(sim.aborted_runs, 0, "the simulation hit its event cap");
    let r = sim.report();
    let m = r.messages_per_process;
    (
        m.mean * f64::from(N),
        m.max == m.mean,
        sim.uncolored_nodes as f64 / runs as f64,
    )
}

fn kills(dead: &[u32]) -> String {
    dead.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

#[test]
fn the_node_loop_sends_and_cuts_off_what_the_simulator_does() {
    // In the binomial tree of 16 (interleaved), 2 and 3 are inner nodes.
    for dead in [&[][..], &[3][..], &[2, 3][..]] {
        let k = kills(dead);
        let r = node_loop(Correction::None, &k);
        let (messages, fixed, uncolored) = simulated(Correction::None, dead);
        assert!(fixed, "{k}: the tree's count is fixed");
        assert_eq!(
            dead.is_empty(),
            uncolored == 0.0,
            "{k}: a dead inner node cuts off its subtree"
        );
        assert_eq!(r.measured, ITERS, "{k}: {r:?}");
        assert_eq!(r.dead_nodes, dead.to_vec());
        assert_eq!(r.messages.min(), r.messages.max(), "{k}: a fixed count per operation");
        assert_eq!(r.messages.min() as f64, messages.round(), "{k}: messages per operation");
        // A violation is a live process that did not deliver an operation.
        assert_eq!(r.violations as f64 / ITERS as f64, uncolored, "{k}: {r:?}");
        let live = u64::from(N) - dead.len() as u64;
        assert_eq!(
            r.delivery.len() + r.violations,
            ITERS * (live - 1),
            "{k}: every other live process delivered or was cut off"
        );
    }
}

#[test]
fn with_a_correction_the_node_loop_delivers_where_the_simulator_does() {
    let correction = Correction::Opportunistic { d: 2 };
    for dead in [&[][..], &[2, 3][..]] {
        let k = kills(dead);
        let r = node_loop(correction, &k);
        let (_, _, uncolored) = simulated(correction, dead);
        assert_eq!(uncolored, 0.0, "{k}: the simulator colors every live process");
        assert_eq!((r.measured, r.violations, r.timeouts), (ITERS, 0, 0), "{k}: {r:?}");
        let live = u64::from(N) - dead.len() as u64;
        assert_eq!(r.delivery.len(), ITERS * (live - 1), "{k}");
    }
}
