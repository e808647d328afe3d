//! The model's prediction that `bench` prints beside its measurements: the LogP simulator
//! run on the same algorithm, nodes and crashes, with the measured L and o.

use crate::experiment::algo::Algo;
use crate::experiment::sim::Setup;
use crate::experiment::simulate as runner;
pub use crate::model::BenchModel;

use crate::protocol::{ProtoRng, Protocol, SharedInfo};
use crate::runtime::kill::{Kill, Segment};
use crate::runtime::node::{OsuBcast, RankTimes};
use crate::sim::{DeadBefore, Experiment, Faults, Noise, Summary};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};
use std::sync::Arc;

/// The Monte Carlo runs of a prediction, with each live rank's delivery time per run (in the
/// model's units): the runs of [`crate::sim::run_many`] on one thread, same seeds.
struct PerRank<'a>(&'a Experiment);

impl Visit for PerRank<'_> {
    type Out = (Summary, RankTimes);
    fn visit<P>(self, shared: &P::Shared) -> Self::Out
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        let ex = self.0;
        let mut eng = crate::sim::montecarlo::engine::<P>(shared, ex);
        let (mut sum, mut ranks) = (Summary::new(ex.n), RankTimes::default());
        for i in 0..ex.runs {
            let st = eng.run(shared, &ex.faults, ProtoRng::run_seed(ex.seed, i), ex.max_events);
            sum.record(&st);
            for r in 0..ex.n {
                let at = eng.delivered_at(r);
                if eng.death_time(r) == crate::model::Time::MAX && at != crate::model::Time::MAX {
                    ranks.record(r as usize, at);
                }
            }
        }
        (sum, ranks)
    }
}

/// The simulator's runs of `setup` with per-rank delivery times; an error if any run was
/// aborted at the event cap.
fn simulate_per_rank(setup: &Setup) -> Result<(Summary, RankTimes), String> {
    runner::check_fits(setup)?;
    let ex = &setup.experiment;
    let (s, ranks) = setup.algo.dispatch(ex.n, ex.logp, PerRank(ex))?;
    if s.aborted_runs > 0 {
        return Err(format!(
            "the LogP prediction: {} of {} runs aborted at the event cap (--max-events {}); no figure is printed from them",
            s.aborted_runs, s.runs, ex.max_events
        ));
    }
    Ok((s, ranks))
}

/// LogP `o` on hosts that share `cores` cores (processor sharing): each of `nodes`
/// busy-polling nodes runs `cores / nodes` of the time, so a message's `o` of CPU time takes
/// `o · nodes / cores` of wall time. Unchanged with a core per node (or `cores` unset).
pub fn shared_o_ns(o_ns: u64, nodes: u32, cores: Option<u32>) -> u64 {
    match cores {
        Some(c) if c > 0 && nodes > c => (o_ns * u64::from(nodes)).div_ceil(u64::from(c)),
        _ => o_ns,
    }
}

/// Nodes that share cores, as a local run's workers serve them: `cores` cores (rank r on core
/// r mod cores), each visiting its nodes in turn, a visit of a node with nothing to do costing
/// `visit_ns` (measured: [`crate::experiment::bench::node_hop`]; 0: switching is free), a
/// visit with work holding its core `work_ns` after its last send or receive (`local_work_ns`
/// when it received only from its own core), and a receive of a message from a node of the
/// same core costing `local_or_ns` (0, with `local_work_ns`: not measured, `o_r`), and each
/// visit costing `ring_poll_ns` more per node beyond the first that sends to its node (an
/// in-process poll reads one ring per sender; 0: not measured, or a transport without
/// per-sender polls).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SharedCores {
    pub cores: u32,
    pub visit_ns: u64,
    pub work_ns: u64,
    pub local_work_ns: u64,
    pub local_or_ns: u64,
    pub ring_poll_ns: f64,
}

/// The simulator's prediction for the measured operations `warmup..warmup + iterations`
/// (`measured`), segment by segment between crashes ([`crate::runtime::kill::segments`]):
/// nodes dead from the start are dead in every run, and a node crashed during iteration I is
/// dead in the runs that stand for the segments from I on (the runs are shared out over the
/// segments in proportion to their lengths, so the pooled figures are the whole window's).
/// `noise`: each message's `o_s`, `o_r` and `L` drawn from these distributions (in the model's
/// units), so that p99 and p99.9 mean something (noisy LogP); `None`: fixed.
/// `cores`: the nodes share cores ([`SharedCores`], see [`crate::sim::Engine::set_cores`]);
/// `None`: a core per node.
pub fn predict(
    algo: &Algo,
    n: u32,
    model: &BenchModel,
    cores: Option<SharedCores>,
    noise: Option<&Arc<Noise>>,
    kills: &[Kill],
    measured: (u64, u64),
) -> Result<Prediction, String> {
    // Enough runs that the p50 of a window half before and half after a crash does not jump
    // between the two regimes from run to run (it did with 200) and a segment's p99.9 rests
    // on more than one run: 2000 up to 64 nodes, fewer beyond (a run's events grow with n),
    // at least 200; shared out in proportion to the segments' lengths, at least one each.
    let runs_total = (128_000 / u64::from(n.max(1))).clamp(200, 2000);
    let segments = crate::runtime::kill::segments(kills, measured.0, measured.0 + measured.1);
    let total: u64 = segments.iter().map(|s| s.ops.end - s.ops.start).sum::<u64>().max(1);
    let mut summary: Option<Summary> = None;
    // Per rank, pooled over the segments' runs (each stands for its share of the operations).
    let mut ranks = RankTimes::default();
    let mut per_segment = Vec::with_capacity(segments.len());
    let u = model.unit_ns as f64;
    let ns = |p: crate::sim::stats::Percentiles| [p.p50 * u, p.p99 * u, p.p999 * u];
    for seg in segments {
        let len = seg.ops.end - seg.ops.start;
        let runs = (runs_total * len).div_ceil(total).max(1);
        let dead = seg.dead.clone();
        let setup = Setup {
            algo: algo.clone(),
            experiment: Experiment {
                n,
                logp: model.loggp,
                noise: noise.cloned(),
                faults: Faults {
                    before: DeadBefore::List(dead),
                    // A crashed node's peers suspect it in the operation it crashed in (its
                    // port refuses, or their retries run out); from then on their transports
                    // refuse a send to it at once.
                    known_dead: true,
                    ..Faults::default()
                },
                runs,
                seed: 1,
                threads: 1,
                max_events: Experiment::default_max_events(n),
                receives: Default::default(),
                cores: cores.map(|c| c.cores),
                // A measured visit never rounds to free switching.
                visit: cores.map_or(0, |c| {
                    let u = model.unit_ns.max(1);
                    if c.visit_ns == 0 {
                        0
                    } else {
                        ((c.visit_ns + u / 2) / u).max(1)
                    }
                }),
                work: cores.map_or(0, |c| (c.work_ns + model.unit_ns.max(1) / 2) / model.unit_ns.max(1)),
                // Measured on one core (else as any); a measured receive never rounds to free.
                local_work: cores
                    .filter(|c| c.local_or_ns > 0)
                    .map(|c| (c.local_work_ns + model.unit_ns.max(1) / 2) / model.unit_ns.max(1)),
                local_receive: cores.and_then(|c| {
                    let u = model.unit_ns.max(1);
                    (c.local_or_ns > 0).then(|| ((c.local_or_ns + u / 2) / u).max(1))
                }),
                // In thousandths of a unit: a few ns a ring against units of several.
                poll_per_source: cores.map_or(0, |c| {
                    (c.ring_poll_ns.max(0.0) * 1000.0 / model.unit_ns.max(1) as f64).round() as u64
                }),
            },
            faults_text: String::new(),
        };
        let (s, r) = simulate_per_rank(&setup)?;
        ranks.merge(&r);
        let rep = s.report();
        per_segment.push(SegmentPrediction {
            segment: seg,
            runs,
            coloring: ns(rep.coloring_latency),
            quiescence: ns(rep.quiescence_latency),
            messages: rep.messages_per_process.mean * f64::from(n),
        });
        match summary.as_mut() {
            Some(all) => all.merge(&s),
            None => summary = Some(s),
        }
    }
    let s = summary.ok_or("no measured operations to predict")?;
    let r = s.report();
    Ok(Prediction {
        coloring: ns(r.coloring_latency),
        quiescence: ns(r.quiescence_latency),
        messages: r.messages_per_process.mean * f64::from(n),
        osu_bcast: ranks.osu().map(|o| OsuBcast {
            avg: o.avg * u,
            min: o.min * u,
            max: o.max * u,
        }),
        per_rank: ranks.means_by_rank().into_iter().map(|m| m.map(|m| m * u)).collect(),
        segments: per_segment,
    })
}

/// The prediction for one stretch of the measured operations between crashes
/// ([`crate::runtime::kill::segments`]), its crashed nodes dead from its start: what a run
/// with crashes is compared with, segment by segment (pooled, a window half before and half
/// after a crash has its p50 between two regimes, where neither the model nor the machine
/// has many operations).
#[derive(Clone, Debug, serde::Serialize)]
pub struct SegmentPrediction {
    pub segment: Segment,
    /// The simulator's runs that stand for it.
    pub runs: u64,
    /// p50, p99 and p99.9 (ns).
    pub coloring: [f64; 3],
    pub quiescence: [f64; 3],
    pub messages: f64,
}

/// The simulator's p50, p99 and p99.9 (ns) and mean messages per operation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Prediction {
    pub coloring: [f64; 3],
    pub quiescence: [f64; 3],
    pub messages: f64,
    /// `osu_bcast`'s metric (ns): the mean over ranks of each live rank's mean delivery time
    /// (the root's is 0), with the smallest and largest per-rank mean.
    pub osu_bcast: Option<OsuBcast>,
    /// Each rank's mean delivery time (ns) by rank (`None`: dead in every run): where the
    /// model misses, rank by rank, against the run's own.
    pub per_rank: Vec<Option<f64>>,
    /// The same, segment by segment between crashes (one segment without crashes).
    pub segments: Vec<SegmentPrediction>,
}

/// A ping-pong's distributions of `o_s`, `o_r` and `L` (`noise`'s JSON in ns, as
/// `ftcoll logp --save` writes them and the predictions' estimates take them) for a node of
/// `model`: the overheads' tables stretched so that their medians, the transport's `tr_os` and
/// `tr_or`, become the node's `model.os_ns` and `model.or_ns` (a node's own work per message
/// spread like the transport's), everything in the model's unit. Interruptions are in time,
/// not in a message's work: their rate and lengths take the change of unit only
/// ([`Noise::scaled`]).
pub fn node_noise(dists: &serde_json::Value, tr_os: u64, tr_or: u64, model: &BenchModel) -> Result<Arc<Noise>, String> {
    let (tr_os, tr_or) = (tr_os.max(1), tr_or.max(1));
    let fixed = crate::model::LogGP::new(model.l_ns.max(1), tr_os, tr_or, 0, 0)?;
    let ns = Noise::from_json(&dists.to_string(), fixed)?;
    let u = model.unit_ns.max(1) as f64;
    Ok(Arc::new(ns.scaled(
        model.os_ns as f64 / tr_os as f64 / u,
        model.or_ns as f64 / tr_or as f64 / u,
        1.0 / u,
    )))
}

#[cfg(test)]
mod interrupts_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
    use crate::model::LogP;
    use crate::runtime::kill::parse_kills;

    /// The prediction in a unit of 1/16 o equals the one in a unit of o (the simulator and
    /// every protocol's counted time scale with the unit) when o_s = o_r and L is a whole
    /// number of o: the fine unit changes nothing but rounding.
    #[test]
    fn the_fine_unit_predicts_what_the_unit_of_o_did() {
        let (o, l) = (640, 1920);
        let fine = BenchModel::new(o, o, l);
        assert_eq!(fine.unit_ns, o / 16);
        let coarse = BenchModel {
            unit_ns: o,
            loggp: LogP { l: l / o, o: 1 }.into(),
            ..fine
        };
        let specs = [
            AlgoSpec::new(AlgoName::CorrectedTree),
            AlgoSpec {
                correction: Some("opportunistic:2".into()),
                ..AlgoSpec::new(AlgoName::CorrectedTree)
            },
            AlgoSpec {
                correction: Some("none".into()),
                ..AlgoSpec::new(AlgoName::CorrectedTree)
            },
            AlgoSpec::new(AlgoName::CorrectedGossip),
        ];
        for n in [2, 8, 33] {
            let kills = if n > 2 {
                parse_kills("1@5", n).unwrap()
            } else {
                Vec::new()
            };
            for spec in &specs {
                let at = |m: &BenchModel| {
                    let algo = resolve_algo(spec, n, m.mean_logp(), 0).unwrap();
                    predict(&algo, n, m, None, None, &kills, (0, 10)).unwrap()
                };
                let (a, b) = (at(&coarse), at(&fine));
                assert_eq!(a.coloring, b.coloring, "{spec:?} n={n}");
                assert_eq!(a.quiescence, b.quiescence, "{spec:?} n={n}");
                assert_eq!(a.messages, b.messages, "{spec:?} n={n}");
            }
        }
    }

    /// Noise that always draws the fixed values is the fixed model; a heavy tail of o_r (1% of
    /// receives 1 to 40 times slower) moves p99 far more than p50.
    #[test]
    fn noise_moves_the_tail() {
        use crate::sim::noise::Dist;
        let m = BenchModel::new(800, 800, 1600);
        let spec = AlgoSpec::new(AlgoName::CorrectedTree);
        let algo = resolve_algo(&spec, 16, m.mean_logp(), 0).unwrap();
        let at = |noise: Option<&Arc<Noise>>| predict(&algo, 16, &m, None, noise, &[], (0, 10)).unwrap();
        let fixed = at(None);
        let flat = Arc::new(Noise::constant(m.loggp));
        assert_eq!(at(Some(&flat)).coloring, fixed.coloring);
        let tail = Arc::new(Noise {
            or: Dist::Quantiles(vec![(0.0, 50.0), (0.9, 50.0), (0.99, 60.0), (1.0, 2000.0)]),
            ..Noise::constant(m.loggp)
        });
        let noisy = at(Some(&tail));
        assert!(noisy.coloring[1] > 2.0 * fixed.coloring[1], "{noisy:?} vs {fixed:?}");
        assert!(noisy.coloring[0] >= fixed.coloring[0], "{noisy:?} vs {fixed:?}");
        assert!(
            noisy.coloring[1] / fixed.coloring[1] > 2.0 * noisy.coloring[0] / fixed.coloring[0],
            "{noisy:?} vs {fixed:?}"
        );
    }

    /// With o_s > o_r a sender with several children is slower than the mean o says. A
    /// 4-ary tree of 21: the last grandchild is reached after the root's 4th send and its
    /// parent's 4th, `2·(4·o_s + L + o_r)`; the split moves it from 18 µs to 22.8 µs.
    #[test]
    fn the_split_of_o_moves_the_prediction() {
        let spec = AlgoSpec {
            tree: Some("kary:4".into()),
            correction: Some("none".into()),
            ..AlgoSpec::new(AlgoName::CorrectedTree)
        };
        let at = |m: BenchModel| {
            let algo = resolve_algo(&spec, 21, m.mean_logp(), 0).unwrap();
            predict(&algo, 21, &m, None, None, &[], (0, 10)).unwrap()
        };
        let even = at(BenchModel::new(1600, 1600, 1000));
        let split = at(BenchModel::new(2400, 800, 1000));
        assert_eq!(even.coloring[0], 2.0 * (4.0 * 1600.0 + 1000.0 + 1600.0));
        assert_eq!(split.coloring[0], 2.0 * (4.0 * 2400.0 + 1000.0 + 800.0));
    }

    /// Differential: segment by segment, a crash's prediction is that of a run without the
    /// crash before it and that of a run with the node dead from the start after it (a
    /// corrected tree without noise: every run the same, whatever their number), and the
    /// pooled figures are the segments' weighted by their runs.
    #[test]
    fn a_crash_splits_the_prediction_into_its_two_regimes() {
        let m = BenchModel::new(800, 600, 1000);
        let n = 8;
        let algo = resolve_algo(&AlgoSpec::new(AlgoName::CorrectedTree), n, m.mean_logp(), 0).unwrap();
        let at = |k: &str, window| predict(&algo, n, &m, None, None, &parse_kills(k, n).unwrap(), window).unwrap();
        let split = at("1@6000:sent=0", (1000, 10_000));
        let (before, after) = (at("", (1000, 5000)), at("1", (6000, 5000)));
        let [a, b] = &split.segments[..] else {
            panic!("{:?}", split.segments)
        };
        assert_eq!(
            (a.segment.ops.clone(), b.segment.ops.clone()),
            (1000..6000, 6000..11_000)
        );
        assert_eq!(
            (a.segment.dead.as_slice(), b.segment.dead.as_slice()),
            (&[][..], &[1][..])
        );
        assert_eq!(
            (a.coloring, a.quiescence, a.messages),
            (before.coloring, before.quiescence, before.messages)
        );
        assert_eq!(
            (b.coloring, b.quiescence, b.messages),
            (after.coloring, after.quiescence, after.messages)
        );
        assert_ne!(a.quiescence, b.quiescence, "the crash changes the operation");
        assert_eq!(a.runs, b.runs);
        let pooled = (a.messages * a.runs as f64 + b.messages * b.runs as f64) / (a.runs + b.runs) as f64;
        assert!((split.messages - pooled).abs() < 1e-9, "{} vs {pooled}", split.messages);
        // Without a crash inside the window: one segment, the whole prediction.
        assert_eq!(before.segments.len(), 1);
        assert_eq!(before.segments[0].coloring, before.coloring);
    }

    #[test]
    fn o_stretches_only_when_nodes_outnumber_the_shared_cores() {
        assert_eq!(shared_o_ns(1272, 4, None), 1272, "a core per node");
        assert_eq!(shared_o_ns(1272, 4, Some(4)), 1272);
        assert_eq!(shared_o_ns(1272, 4, Some(8)), 1272);
        assert_eq!(
            shared_o_ns(1272, 4, Some(2)),
            2544,
            "two nodes per core: half the time each"
        );
        assert_eq!(shared_o_ns(1000, 5, Some(2)), 2500);
        assert_eq!(shared_o_ns(1001, 3, Some(2)), 1502, "rounded up");
    }

    /// `osu_bcast`'s prediction in a tree with known times: a 4-ary tree of 5, no correction,
    /// o_s = 2400, o_r = 800, L = 1000 ns. Child j is reached at `j·o_s + L + o_r`, the root at
    /// 0: the mean over ranks is (0 + Σ_j (j·2400 + 1800)) / 5 = 6240 ns, the max 11 400.
    #[test]
    fn the_osu_prediction_is_the_mean_of_known_delivery_times() {
        let spec = AlgoSpec {
            tree: Some("kary:4".into()),
            correction: Some("none".into()),
            ..AlgoSpec::new(AlgoName::CorrectedTree)
        };
        let m = BenchModel::new(2400, 800, 1000);
        let algo = resolve_algo(&spec, 5, m.mean_logp(), 0).unwrap();
        let p = predict(&algo, 5, &m, None, None, &[], (0, 10)).unwrap();
        let o = p.osu_bcast.unwrap();
        assert_eq!((o.avg, o.min, o.max), (6240.0, 0.0, 11_400.0));
        assert_eq!(p.coloring[0], o.max, "the last delivery is the coloring");
        // Rank by rank: child j at j·2400 + 1800.
        let want: Vec<Option<f64>> = [0.0, 4200.0, 6600.0, 9000.0, 11_400.0].into_iter().map(Some).collect();
        assert_eq!(p.per_rank, want);
    }

    /// Differential: the prediction's `osu_bcast` avg equals the mean over ranks of each rank's
    /// mean delivery time taken from the simulator's event traces of the same runs (a rank
    /// delivers at its first receive, the root at 0), for randomized algorithms.
    #[test]
    fn the_osu_prediction_matches_the_traces() {
        use crate::sim::trace_one;
        struct Traces<'a>(&'a Experiment);
        impl Visit for Traces<'_> {
            type Out = Vec<Vec<crate::sim::TraceRow>>;
            fn visit<P>(self, shared: &P::Shared) -> Self::Out
            where
                P: Protocol,
                P::Shared: SharedInfo,
                P::Msg: WireMessage,
            {
                (0..self.0.runs).map(|i| trace_one::<P>(shared, self.0, i)).collect()
            }
        }
        let m = BenchModel::new(900, 500, 700);
        for (spec, n) in [
            (AlgoSpec::new(AlgoName::CorrectedGossip), 8),
            (
                AlgoSpec {
                    correction: Some("opportunistic:2".into()),
                    ..AlgoSpec::new(AlgoName::CorrectedTree)
                },
                13,
            ),
        ] {
            let algo = resolve_algo(&spec, n, m.mean_logp(), 0).unwrap();
            let p = predict(&algo, n, &m, None, None, &[], (0, 10)).unwrap();
            let ex = Experiment {
                n,
                logp: m.loggp,
                noise: None,
                faults: Faults::default(),
                // The prediction's own runs (one segment: no crash).
                runs: p.segments[0].runs,
                seed: 1,
                threads: 1,
                max_events: Experiment::default_max_events(n),
                receives: Default::default(),
                cores: None,
                visit: 0,
                work: 0,
                local_work: None,
                local_receive: None,
                poll_per_source: 0,
            };
            let traces = algo.dispatch(n, m.loggp, Traces(&ex)).unwrap();
            let mut per_rank = vec![0u64; n as usize];
            for rows in &traces {
                for r in 1..n {
                    let first = rows
                        .iter()
                        .filter(|row| row.node == r && row.event == "recv")
                        .map(|row| row.time)
                        .min()
                        .expect("every rank receives");
                    per_rank[r as usize] += first;
                }
            }
            let runs = traces.len() as f64;
            let means: Vec<f64> = per_rank.iter().map(|&s| s as f64 / runs * m.unit_ns as f64).collect();
            let avg = means.iter().sum::<f64>() / f64::from(n);
            let max = means.iter().copied().fold(0.0, f64::max);
            let o = p.osu_bcast.unwrap();
            assert!((o.avg - avg).abs() < 1e-6 * avg, "{spec:?}: {} vs {avg}", o.avg);
            assert!((o.max - max).abs() < 1e-6 * max, "{spec:?}: {} vs {max}", o.max);
            assert_eq!(o.min, 0.0, "the root");
            // And rank by rank.
            assert_eq!(p.per_rank.len(), n as usize);
            for (r, (got, want)) in p.per_rank.iter().zip(&means).enumerate() {
                let got = got.expect("every rank delivers");
                assert!(
                    (got - want).abs() <= 1e-6 * want.max(1.0),
                    "{spec:?} rank {r}: {got} vs {want}"
                );
            }
        }
    }
}
