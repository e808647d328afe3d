//! The model's prediction that `bench` prints beside its measurements: the LogP simulator
//! run on the same algorithm, nodes and crashes, with the measured L and o.

use crate::experiment::algo::Algo;
use crate::experiment::sim::Setup;
use crate::experiment::simulate as runner;
use crate::model::LogP;
use crate::runtime::kill::{Kill, KillPoint};
use crate::sim::{DeadBefore, Experiment, Faults};

/// The simulator's prediction of the median coloring latency (ns) for the same algorithm,
/// nodes and nodes dead from the start, with the measured L and o.
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
    model: LogP,
    o_ns: u64,
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
                logp: model.into(),
                noise: None,
                faults: Faults {
                    before: DeadBefore::List(dead),
                    ..Faults::default()
                },
                runs,
                seed: 1,
                threads: 1,
                max_events: Experiment::default_max_events(n),
                receives: Default::default(),
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
    let ns = |p: crate::sim::stats::Percentiles| [p.p50 * o_ns as f64, p.p99 * o_ns as f64, p.p999 * o_ns as f64];
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
    use super::shared_o_ns;

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
