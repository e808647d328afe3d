//! The model's prediction that `bench` prints beside its measurements: the LogP simulator
//! run on the same algorithm, nodes and crashes, with the measured L and o.

use crate::experiment::algo::Algo;
use crate::experiment::sim::Setup;
use crate::experiment::simulate as runner;
pub use crate::model::BenchModel;

use crate::runtime::kill::{Kill, KillPoint};
use crate::sim::{DeadBefore, Experiment, Faults, Noise};
use std::sync::Arc;

/// `noise`: each message's `o_s`, `o_r` and `L` drawn from these distributions (in the model's
/// units), so that p99 and p99.9 mean something (noisy LogP); `None`: fixed.
/// `cores`: the nodes share that many cores (rank r on core r mod cores, as the runtime's
/// workers serve their nodes; see [`crate::sim::Engine::set_cores`]); `None`: a core per node.
/// The simulator's prediction for the measured operations `warmup..warmup + iterations`: nodes
/// dead from the start are dead in every run, and a node crashed during iteration I is dead in
/// the share of runs that stands for the measured operations from I on (the runs are split
/// over the segments between crashes in proportion to their lengths).
/// LogP `o` on hosts that share `cores` cores (processor sharing): each of `nodes`
/// busy-polling nodes runs `cores / nodes` of the time, so a message's `o` of CPU time takes
/// `o · nodes / cores` of wall time. Unchanged with a core per node (or `cores` unset).
pub fn shared_o_ns(o_ns: u64, nodes: u32, cores: Option<u32>) -> u64 {
    match cores {
        Some(c) if c > 0 && nodes > c => (o_ns * u64::from(nodes)).div_ceil(u64::from(c)),
        _ => o_ns,
    }
}

pub fn predict(
    algo: &Algo,
    n: u32,
    model: &BenchModel,
    cores: Option<u32>,
    noise: Option<&Arc<Noise>>,
    kills: &[Kill],
    measured: (u64, u64),
) -> Result<Prediction, String> {
    const RUNS: u64 = 200;
    let (first, end) = (measured.0, measured.0 + measured.1);
    let mut cuts: Vec<(u64, u32)> = kills.iter().filter_map(|k| Some((k.iteration()?, k.rank))).collect();
    cuts.sort_unstable();
    let mut dead: Vec<u32> = kills
        .iter()
        .filter(|k| k.point == KillPoint::Start)
        .map(|k| k.rank)
        .collect();
    let mut segments: Vec<(Vec<u32>, u64)> = Vec::new();
    let mut at = first;
    for &(iter, rank) in &cuts {
        if iter > at && at < end {
            segments.push((dead.clone(), iter.min(end) - at));
            at = iter.min(end);
        }
        dead.push(rank);
    }
    if at < end {
        segments.push((dead.clone(), end - at));
    }
    let total: u64 = segments.iter().map(|s| s.1).sum::<u64>().max(1);
    let mut summary: Option<crate::sim::stats::Summary> = None;
    for (dead, len) in segments {
        let runs = (RUNS * len).div_ceil(total).max(1);
        let setup = Setup {
            algo: algo.clone(),
            experiment: Experiment {
                n,
                logp: model.loggp,
                noise: noise.cloned(),
                faults: Faults {
                    before: DeadBefore::List(dead),
                    ..Faults::default()
                },
                runs,
                seed: 1,
                threads: 1,
                max_events: Experiment::default_max_events(n),
                receives: Default::default(),
                cores,
            },
            faults_text: String::new(),
        };
        let s = runner::simulate_complete(&setup, "the LogP prediction")?;
        match summary.as_mut() {
            Some(all) => all.merge(&s),
            None => summary = Some(s),
        }
    }
    let s = summary.ok_or("no measured operations to predict")?;
    let u = model.unit_ns as f64;
    let ns = |p: crate::sim::stats::Percentiles| [p.p50 * u, p.p99 * u, p.p999 * u];
    let r = s.report();
    Ok(Prediction {
        coloring: ns(r.coloring_latency),
        quiescence: ns(r.quiescence_latency),
        messages: r.messages_per_process.mean * f64::from(n),
    })
}

/// The simulator's p50, p99 and p99.9 (ns) and mean messages per operation.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Prediction {
    pub coloring: [f64; 3],
    pub quiescence: [f64; 3],
    pub messages: f64,
}

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
}
