use std::time::Duration;

use super::*;
use crate::protocol::agree::{EraConfig, EraTree};
use crate::runtime::logp::Calibration;

fn bench(n: u32, workers: usize) -> AgreeBench {
    AgreeBench {
        n,
        era: EraConfig::default(),
        transport: AgreeTransport::Inproc,
        workers,
        pin: false,
        warmup: 5,
        iterations: 60,
        duration: None,
        kills: Vec::new(),
        stalls: Vec::new(),
        heartbeat: Duration::from_micros(500),
        suspect_after: Duration::from_millis(200),
        op_timeout: Duration::from_secs(5),
        seed: 9,
    }
}

#[test]
fn the_prediction_is_the_simulator_run_of_the_same_model_in_microseconds() {
    // A real run (inproc threads), then the model compared by hand: the simulator run on the
    // same model, scaled by the unit, and the run's own histograms.
    let b = bench(4, 2);
    let r = crate::experiment::agree_local::run(&b).expect("runs");
    assert_eq!((r.disagreements, r.unfinished), (0, 0));
    let model = BenchModel::new(900, 400, 300);
    let p = compare(&b, &r, model, Some(2))
        .unwrap()
        .expect("failure-free agreements");
    let ff = &r.classes[0];
    assert_eq!(p.agreements, ff.agreement.len());
    let sim = simulated(&b, &model, Some(2), 0, ff.agreement.len());
    let run = run_once::<And64>(&sim, b.seed).unwrap();
    assert!(!run.aborted, "aborted at the event cap");
    let unit_us = model.unit_ns as f64 / 1000.0;
    assert_eq!(p.agreement.predicted_p50_us, run.latency.percentiles().p50 * unit_us);
    assert_eq!(p.node.predicted_p99_us, run.process_latency.percentiles().p99 * unit_us);
    assert_eq!(
        p.agreement.measured_p50_us,
        ff.agreement.value_at_quantile(0.5) as f64 / 1000.0
    );
    assert_eq!(
        p.agreement.ratio_p50,
        p.agreement.measured_p50_us / p.agreement.predicted_p50_us
    );
}

#[test]
fn the_modeled_agreement_is_no_faster_than_its_critical_path() {
    // Closed form: up the tree and down again, one LogGP hop per level each way.
    for n in [2u32, 5, 16] {
        let b = bench(n, n as usize);
        let model = BenchModel::new(700, 300, 250);
        let sim = simulated(&b, &model, None, 0, 20);
        let run = run_once::<And64>(&sim, 1).unwrap();
        assert!(!run.aborted && run.violations.total() == 0);
        let (height, _) = EraTree::full(b.era.shape, n).shape_stats();
        let hop = model.loggp.hop();
        assert!(
            run.latency.percentiles().p50 >= (2 * u64::from(height) * hop) as f64,
            "n={n}"
        );
        if n == 2 {
            // Back to back: the root enters the next agreement as it decides (1 hop in), the
            // leaf one hop later, whose contribution then takes a hop up and the decision one
            // down: 3 hops from the first entry to the last return.
            assert_eq!(run.latency.percentiles().p50, (3 * hop) as f64);
        }
    }
}

#[test]
fn shared_cores_are_the_workers_or_the_host_cores_when_fewer_than_the_nodes() {
    assert_eq!(model_cores(&bench(8, 2), false, 16), Some(2));
    assert_eq!(model_cores(&bench(8, 8), false, 16), None);
    assert_eq!(model_cores(&bench(8, 8), false, 2), Some(2));
    assert_eq!(model_cores(&bench(8, 1), true, 4), Some(4));
    assert_eq!(model_cores(&bench(4, 1), true, 4), None);
}

#[test]
fn the_post_failure_class_is_the_fourth() {
    assert_eq!(crate::runtime::agree_window::CLASS_NAMES[POST_FAILURE], "post-failure");
}

/// Differential, simulator against closed form and against a smaller group: three
/// processes of a binary tree whose leaf 2 is dead from the start agree, after the detecting
/// and the stabilizing agreement, as two do failure-free (3 hops from the first entry to
/// the last return, as above), and a run where no one dies has no post-failure agreement.
#[test]
fn post_failure_agreements_of_three_with_a_dead_leaf_are_those_of_two() {
    let model = BenchModel::new(700, 300, 250);
    let hop = model.loggp.hop();
    let mut three = simulated(&bench(3, 3), &model, None, 0, 40);
    three.kills = vec![Kill {
        rank: 2,
        at: KillAt::Before,
    }];
    let pf = run_post_failure::<And64>(&three, 1).unwrap();
    assert!(!pf.aborted && pf.violations.total() == 0);
    assert_eq!(pf.not_acknowledged, 2, "both survivors told once");
    // Agreements 0 (detecting) and 1 (stabilizing) left out.
    assert_eq!(pf.latency.histogram().len(), 38);
    let two = run_once::<And64>(&simulated(&bench(2, 2), &model, None, 0, 40), 1).unwrap();
    assert_eq!(pf.latency.percentiles().p50, two.latency.percentiles().p50);
    assert_eq!(pf.latency.percentiles().p50, (3 * hop) as f64);
    let all = run_once::<And64>(&three, 1).unwrap();
    assert_eq!(all.latency.histogram().len(), 40, "run_once measures every agreement");
    let none = run_post_failure::<And64>(&simulated(&bench(3, 3), &model, None, 0, 40), 1).unwrap();
    assert!(none.latency.histogram().is_empty() && none.process_latency.histogram().is_empty());
}

/// A real run that kills a node gets its post-failure class compared with the simulator's
/// post-failure agreements of the same model; one that kills none gets no such comparison.
#[test]
fn a_run_with_a_kill_has_its_post_failure_agreements_modeled() {
    let mut b = bench(4, 2);
    b.kills = vec![(3, 20)];
    let r = crate::experiment::agree_local::run(&b).expect("runs");
    assert_eq!((r.disagreements, r.unfinished), (0, 0));
    let measured = &r.classes[POST_FAILURE];
    assert!(!measured.agreement.is_empty(), "post-failure agreements measured");
    let model = BenchModel::new(900, 400, 300);
    let p = compare(&b, &r, model, Some(2)).unwrap().expect("a prediction");
    let pf = p.post_failure.expect("the post-failure class modeled");
    let mut sim = simulated(&b, &model, Some(2), 0, measured.agreement.len());
    sim.agreements += 2;
    sim.kills = vec![Kill {
        rank: 3,
        at: KillAt::Before,
    }];
    let run = run_post_failure::<And64>(&sim, b.seed).unwrap();
    let unit_us = model.unit_ns as f64 / 1000.0;
    assert_eq!(pf.agreements, run.latency.histogram().len());
    assert_eq!(pf.agreement.predicted_p50_us, run.latency.percentiles().p50 * unit_us);
    assert_eq!(
        pf.node.measured_p99_us,
        measured.node.value_at_quantile(0.99) as f64 / 1000.0
    );
    b.kills.clear();
    let r = crate::experiment::agree_local::run(&b).expect("runs");
    let p = compare(&b, &r, model, Some(2)).unwrap().expect("a prediction");
    assert_eq!(p.post_failure, None);
    // Kills at two agreements: the run's post-failure class holds the second one's
    // detecting and stabilizing agreements, which a model of both dead from the start has not.
    b.kills = vec![(3, 20), (2, 40)];
    let r = crate::experiment::agree_local::run(&b).expect("runs");
    assert!(!r.classes[POST_FAILURE].agreement.is_empty());
    let p = compare(&b, &r, model, Some(2)).unwrap().expect("a prediction");
    assert_eq!(p.post_failure, None, "kills at two agreements are not compared");
}

#[test]
fn post_failure_agreements_are_classed_for_blocking_agreements_only() {
    let mut sim = simulated(&bench(3, 3), &BenchModel::new(700, 300, 250), None, 0, 10);
    sim.era.window = 2;
    let e = run_post_failure::<And64>(&sim, 1).unwrap_err();
    assert!(e.contains("window of 1"), "{e}");
}

#[test]
fn a_two_node_run_times_the_visit_of_an_idle_node() {
    // What the processor-sharing model charges per node a core passes by: the workers'
    // passes without progress, per node visited, as the worker loop timed them.
    let b = AgreeBench {
        iterations: 2000,
        ..bench(2, 2)
    };
    let r = crate::experiment::agree_local::run(&b).expect("runs");
    assert_eq!((r.disagreements, r.unfinished), (0, 0));
    let v = r.idle_visit_ns.expect("an idle pass timed");
    assert!(
        v > 0.0 && v < crate::runtime::cluster::LONGEST_IDLE_PASS_NS as f64,
        "{v}"
    );
}

/// The ping-pong distributions of [`a_noisy_model_spreads_the_agreements_around_the_fixed_median`]:
/// o_s mostly 900 ns with a tail to 3 µs, o_r 400 with one to 1.5 µs, 2000 round trips.
fn noisy_pingpong() -> (serde_json::Value, Estimate) {
    let os: Vec<u64> = (0..2000)
        .map(|i| if i % 50 == 0 { 3000 } else { 880 + i % 40 })
        .collect();
    let or: Vec<u64> = (0..2000)
        .map(|i| if i % 40 == 0 { 1500 } else { 390 + i % 20 })
        .collect();
    let rtt: Vec<u64> = (0..2000).map(|i| 2 * (os[i] + or[i] + 300)).collect();
    let dists = Calibration::noise_from_samples(&rtt, &os, &or).unwrap();
    let (mut r2, mut o2, mut q2) = (rtt.clone(), os.clone(), or.clone());
    (dists, Estimate::from_samples(&mut r2, &mut o2, &mut q2))
}

/// A noisy model draws each message's costs from the ping-pong's distributions, stretched
/// to the node's medians (here twice the transport's o_s and three times its o_r): its
/// agreements vary (p99 above p50, where the fixed model's are equal), its median stays near
/// the fixed model's of the node's overheads (a stretch the wrong way round would not), and
/// it completes with no violation, with a core per node and on two shared cores visited in
/// turn.
#[test]
fn a_noisy_model_spreads_the_agreements_around_the_fixed_median() {
    let (dists, e) = noisy_pingpong();
    let model = BenchModel::new(2 * e.o_send_ns, 3 * e.o_recv_ns, e.l_ns);
    let noise = noise_for(&dists, &e, &model).unwrap();
    let b = bench(8, 8);
    for (cores, visit_ns) in [(None, 0), (Some(2), 300)] {
        let fixed = run_once::<And64>(&simulated(&b, &model, cores, visit_ns, 400), 1).unwrap();
        let mut sim = simulated(&b, &model, cores, visit_ns, 400);
        sim.noise = Some(noise.clone());
        sim.validate().unwrap();
        let noisy = run_once::<And64>(&sim, 1).unwrap();
        for run in [&fixed, &noisy] {
            assert!(!run.aborted && run.violations.total() == 0, "{cores:?}");
        }
        let (f, n) = (fixed.latency.percentiles(), noisy.latency.percentiles());
        if cores.is_none() {
            assert_eq!(f.p50, f.p99, "the fixed model's agreements are all alike");
            assert!(n.p99 > n.p50 * 1.2, "{n:?}");
        } else {
            // Nodes sharing cores vary on fixed costs too (whose turn a message waits for).
            assert!(n.p99 - n.p50 > 2.0 * (f.p99 - f.p50), "{n:?} against {f:?}");
        }
        assert!((0.8..1.25).contains(&(n.p50 / f.p50)), "{cores:?}: {n:?} against {f:?}");
    }
}

/// A run's prediction is noisy when given distributions, for its failure-free class and for
/// its post-failure class: both modeled p99 above their p50.
#[test]
fn a_runs_noisy_prediction_models_a_tail_in_both_classes() {
    let (dists, e) = noisy_pingpong();
    let mut b = bench(4, 2);
    b.iterations = 200;
    b.kills = vec![(3, 100)];
    let r = crate::experiment::agree_local::run(&b).expect("runs");
    assert_eq!((r.disagreements, r.unfinished), (0, 0));
    let model = BenchModel::new(2 * e.o_send_ns, 3 * e.o_recv_ns, e.l_ns);
    let noise = noise_for(&dists, &e, &model).unwrap();
    let p = compare_with_hop(&b, &r, model, None, Some(2), Some(noise))
        .unwrap()
        .expect("a prediction");
    assert!(p.noisy);
    assert!(p.agreement.predicted_p99_us > p.agreement.predicted_p50_us, "{p:?}");
    let pf = p.post_failure.expect("a post-failure model");
    assert!(pf.agreement.predicted_p99_us > pf.agreement.predicted_p50_us, "{pf:?}");
    let fixed = compare(&b, &r, model, Some(2)).unwrap().expect("a prediction");
    assert!(!fixed.noisy);
    assert_eq!(fixed.agreement.predicted_p99_us, fixed.agreement.predicted_p50_us);
}
