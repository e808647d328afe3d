//! End-to-end tests of the runtime: the same protocols as the simulator on real transports
//! (in-process queues and UDP on 127.0.0.1), with crashes, loss and reordering injected.
//! Bounded in time and count, loopback only.

use std::time::Duration;

use ftcoll::experiment::algo::{Algo, AlgoName, AlgoSpec, resolve_algo};
use ftcoll::experiment::bench::local::run;
use ftcoll::model::LogP;
use ftcoll::runtime::cluster::{ClusterConfig, ClusterResult, PollMode};
use ftcoll::runtime::kill::parse_kills;
use ftcoll::runtime::{Bench, TransportKind};

fn algo(spec: &AlgoSpec, n: u32, model: LogP) -> Algo {
    resolve_algo(spec, n, model, 0).expect("algorithm")
}

/// A corrected tree with this correction.
fn ct(correction: &str) -> AlgoSpec {
    AlgoSpec {
        correction: Some(correction.into()),
        ..AlgoSpec::new(AlgoName::CorrectedTree)
    }
}

fn bench(spec: AlgoSpec, transport: TransportKind, n: u32, iters: u64, kills: &str, loss: f64) -> ClusterResult {
    bench_with(spec, transport, n, iters, kills, loss, Duration::from_secs(2))
}

fn bench_with(
    spec: AlgoSpec,
    transport: TransportKind,
    n: u32,
    iters: u64,
    kills: &str,
    loss: f64,
    op_timeout: Duration,
) -> ClusterResult {
    let model = LogP { l: 2, o: 1 };
    let cluster = ClusterConfig {
        nodes: n,
        workers: 2,
        poll: PollMode::Adaptive,
        warmup: 10,
        iterations: iters,
        window: 1,
        payload_len: 16,
        tick_ns: 1000,
        job: 42,
        seed: 7,
        op_timeout,
        idle: Duration::from_micros(500),
        pin: false,
        give_up_after: None,
    };
    let kills = if kills.is_empty() {
        Vec::new()
    } else {
        parse_kills(kills, n).unwrap()
    };
    let bench = Bench {
        algo: algo(&spec, n, model),
        cluster,
        transport,
        kills,
        model: model.into(),
        loss,
        auth: None,
    };
    run(&bench, None).expect("bench runs")
}

fn assert_consistent(r: &ClusterResult, iters: u64, what: &str) {
    assert_eq!(r.measured, iters, "{what}");
    assert_eq!(r.violations, 0, "{what}: {r:?}");
    assert_eq!(r.timeouts, 0, "{what}");
    assert_eq!(r.dropped_ops, 0, "{what}: {r:?}");
    assert_eq!(r.coloring.len(), iters, "{what}");
}

#[test]
fn quiescence_is_never_reported_before_coloring() {
    // Two nodes, no correction: the last activity of an operation is the receiver's delivery.
    // The receive was stamped before the delivery, so quiescence came out below coloring in
    // every operation unless the delivery counts as activity. Per operation q >= c implies
    // every order statistic of q is at least c's.
    for t in [TransportKind::Inproc, TransportKind::Udp] {
        let r = bench(ct("none"), t, 2, 100, "", 0.0);
        assert_consistent(&r, 100, &format!("{t:?}"));
        for p in [0.0, 50.0, 99.0, 100.0] {
            let (q, c) = (r.quiescence.value_at_percentile(p), r.coloring.value_at_percentile(p));
            assert!(q >= c, "{t:?} p{p}: quiescence {q} ns < coloring {c} ns");
        }
    }
}

#[test]
fn corrected_tree_survives_a_crash_on_both_transports() {
    for t in [TransportKind::Inproc, TransportKind::Udp] {
        let r = bench(ct("checked"), t, 8, 200, "1@60", 0.0);
        assert_consistent(&r, 200, &format!("{t:?}"));
        assert_eq!(r.dead_nodes, vec![1], "{t:?}");
    }
}

#[test]
fn every_algorithm_runs_over_inproc() {
    let overlapped = |c: &str| AlgoSpec {
        start: Some(ftcoll::protocol::bcast::Start::Overlapped),
        ..ct(c)
    };
    let gossip = |v: &str| AlgoSpec {
        variant: Some(v.into()),
        ..AlgoSpec::new(AlgoName::CorrectedGossip)
    };
    for (what, spec) in [
        ("checked, overlapped", overlapped("checked")),
        (
            "lame:2, optimized:4, overlapped",
            AlgoSpec {
                tree: Some("lame:2".into()),
                ..overlapped("optimized:4")
            },
        ),
        (
            "optimal, failproof:1",
            AlgoSpec {
                tree: Some("optimal".into()),
                ..ct("failproof:1")
            },
        ),
        ("delayed", ct("delayed")),
        ("ccg", gossip("ccg")),
        ("fcg:1", gossip("fcg:1")),
        ("big", AlgoSpec::new(AlgoName::Big)),
        ("bfb", AlgoSpec::new(AlgoName::Bfb)),
    ] {
        let r = bench(spec, TransportKind::Inproc, 8, 100, "3@40", 0.0);
        assert_consistent(&r, 100, what);
    }
    // Tree broadcast with acknowledgments tolerates nothing, but runs fault-free.
    let r = bench(AlgoSpec::new(AlgoName::TreeAck), TransportKind::Inproc, 8, 100, "", 0.0);
    assert_consistent(&r, 100, "tree-ack");
}

#[test]
fn nodes_dead_from_the_start_and_after_sends_are_tolerated() {
    let r = bench(ct("checked"), TransportKind::Inproc, 16, 150, "5,2@30:sent=1,9@70", 0.0);
    assert_consistent(&r, 150, "mixed kills");
    assert_eq!(r.dead_nodes, vec![2, 5, 9]);
}

#[test]
fn udp_loss_and_reordering_do_not_break_delivery() {
    let r = bench(ct("checked"), TransportKind::Udp, 8, 150, "4@50", 0.1);
    assert_consistent(&r, 150, "10% loss");
    assert!(r.transport.retransmits > 0, "losses were repaired by retransmission");
    assert!(r.transport.injected_losses > 0);
}

#[test]
fn tree_ack_without_correction_is_inconsistent_under_a_crash() {
    // The check is not vacuous: a non-fault-tolerant broadcast loses the dead node's subtree.
    let r = bench_with(
        AlgoSpec::new(AlgoName::TreeAck),
        TransportKind::Inproc,
        8,
        20,
        "1@15",
        0.0,
        Duration::from_millis(100),
    );
    assert!(r.violations > 0 && r.timeouts > 0, "{r:?}");
    // An abandoned operation never colored: no coloring or quiescence latency for it.
    assert_eq!(r.coloring.len(), r.measured - r.timeouts, "{r:?}");
    assert_eq!(r.quiescence.len(), r.coloring.len());
    // The segments' JSON still counts every measured operation, abandoned ones included.
    let segments = ftcoll::report::segments::json(&r, None);
    let counted: u64 = segments
        .as_array()
        .expect("segments")
        .iter()
        .map(|s| s["measured_ops"].as_u64().unwrap())
        .sum();
    assert!(r.segments.len() >= 2, "a crash inside the window: {segments}");
    assert_eq!(counted, r.measured, "{segments}");
    // A segment whose operations were all abandoned has no latency, not 0 µs.
    let last = &segments[r.segments.len() - 1];
    assert_eq!(last["timeouts"].as_u64(), last["measured_ops"].as_u64(), "{last}");
    assert!(last["coloring_latency_us"].is_null(), "{last}");
}

#[test]
fn message_counts_stay_near_the_simulators() {
    // Same protocol, same nodes, no faults: the runtime's messages per operation are within
    // a factor of the LogP simulation's. Checked correction stops when a neighbour's message
    // arrives, so real timing (and other tests sharing the 2 cores) moves the count: the
    // bounds are loose on purpose, the lower one is structural (the tree plus one message
    // each way per participant).
    use ftcoll::sim::{Experiment, Faults, run_many};
    let model = LogP { l: 2, o: 1 };
    let r = bench(ct("checked"), TransportKind::Inproc, 16, 100, "", 0.0);
    assert_consistent(&r, 100, "fault-free");
    let tree = ftcoll::topology::Tree::build(
        ftcoll::topology::TreeKind::Binomial,
        ftcoll::topology::Order::Interleaved,
        16,
        model,
    )
    .unwrap();
    let shared = ftcoll::protocol::bcast::corrected_tree::TreeShared::new(
        tree,
        model,
        ftcoll::protocol::bcast::correction::Correction::Checked,
        ftcoll::protocol::bcast::Start::Synchronized,
    );
    let ex = Experiment {
        n: 16,
        logp: model.into(),
        noise: None,
        faults: Faults::default(),
        runs: 1,
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
    let sim = run_many::<ftcoll::protocol::bcast::corrected_tree::CorrectedTree<0>>(&shared, &ex, &|_| {});
    assert_eq!(sim.aborted_runs, 0, "the simulation hit its event cap");
    let predicted = sim.report().messages_per_process.mean * 16.0;
    let measured = r.messages.mean();
    assert!(
        measured >= 15.0 + 2.0 * 16.0,
        "the tree's 15 messages and 2 per participant: {measured}"
    );
    assert!(
        (0.5 * predicted..=3.0 * predicted).contains(&measured),
        "measured {measured} vs simulated {predicted}"
    );
}
