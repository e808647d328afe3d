//! The counters a node keeps for a run's final report.

use hdrhistogram::Histogram;

use crate::wire::DropCounters;

/// Counters a node keeps for the final report.
#[derive(Debug)]
pub struct NodeStats {
    pub drops: DropCounters,
    /// Valid datagrams of another protocol family.
    pub wrong_kind: u64,
    /// Messages of operations already retired here (late copies).
    pub stale: u64,
    /// Messages of operations too far ahead of the window.
    pub too_far: u64,
    /// Messages whose header sender differs from the transport's sender.
    pub spoofed: u64,
    /// Messages of an operation whose root this node knows (its caller named it, or an
    /// earlier datagram did, [`crate::runtime::board::Control::learn_roots`]) naming another
    /// root: the callers disagree ([`super::Payloads::wrong_root`]).
    pub wrong_root: u64,
    /// Sends refused because the peer is suspected.
    pub to_suspected: u64,
    /// Sends deferred by a full retransmit window.
    pub backpressure: u64,
    /// Deferred sends dropped because the deferral queue was full (counted, never silent).
    pub deferred_overflow: u64,
    /// Delivery latency (root's start to this node's delivery), ns.
    pub delivery_ns: Histogram<u64>,
}

impl Default for NodeStats {
    fn default() -> Self {
        Self {
            drops: DropCounters::default(),
            wrong_kind: 0,
            stale: 0,
            too_far: 0,
            spoofed: 0,
            wrong_root: 0,
            to_suspected: 0,
            backpressure: 0,
            deferred_overflow: 0,
            delivery_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        }
    }
}

/// Each rank's broadcast times, summed over the operations it took part in: what the OSU
/// micro-benchmarks' `osu_bcast` reports. There every rank times its own `MPI_Bcast` call,
/// averages it over the iterations, and the reported latency is the mean of those per-rank
/// averages over the ranks, with their minimum and maximum. Here a rank's time in one
/// operation is the root's start to the rank's delivery; the root has its payload at the
/// start (its time is 0, as in the model), where MPI's root returns after posting its sends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankTimes {
    /// Per rank: summed times (ns) and the operations they cover.
    sum_ns: Vec<u128>,
    ops: Vec<u64>,
}

/// `osu_bcast`'s three figures, in ns: the mean over ranks of each rank's mean time, and the
/// smallest and largest per-rank mean.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct OsuBcast {
    pub avg: f64,
    pub min: f64,
    pub max: f64,
}

impl OsuBcast {
    /// The figures of per-rank means (`None` if there are none).
    pub fn of_means(means: &[f64]) -> Option<Self> {
        if means.is_empty() {
            return None;
        }
        Some(Self {
            avg: means.iter().sum::<f64>() / means.len() as f64,
            min: means.iter().copied().fold(f64::INFINITY, f64::min),
            max: means.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

impl RankTimes {
    /// Records that `rank` completed an operation `ns` after its start.
    pub fn record(&mut self, rank: usize, ns: u64) {
        if self.sum_ns.len() <= rank {
            self.sum_ns.resize(rank + 1, 0);
            self.ops.resize(rank + 1, 0);
        }
        self.sum_ns[rank] += u128::from(ns);
        self.ops[rank] += 1;
    }

    /// Adds another's records (the same ranks, other operations).
    pub fn merge(&mut self, o: &RankTimes) {
        for (rank, (&s, &k)) in o.sum_ns.iter().zip(&o.ops).enumerate() {
            if k > 0 {
                if self.sum_ns.len() <= rank {
                    self.sum_ns.resize(rank + 1, 0);
                    self.ops.resize(rank + 1, 0);
                }
                self.sum_ns[rank] += s;
                self.ops[rank] += k;
            }
        }
    }

    /// Per rank, the operations recorded.
    pub fn ops(&self) -> &[u64] {
        &self.ops
    }

    /// Each rank's mean time (ns) by rank (`None`: it completed no operation).
    pub fn means_by_rank(&self) -> Vec<Option<f64>> {
        self.sum_ns
            .iter()
            .zip(&self.ops)
            .map(|(&s, &k)| (k > 0).then(|| s as f64 / k as f64))
            .collect()
    }

    /// Each rank's mean time (ns), for the ranks that completed an operation.
    pub fn means(&self) -> Vec<f64> {
        self.means_by_rank().into_iter().flatten().collect()
    }

    /// `osu_bcast`'s avg, min and max over ranks of the per-rank means (`None`: no rank
    /// completed an operation).
    pub fn osu(&self) -> Option<OsuBcast> {
        OsuBcast::of_means(&self.means())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three ranks with known times: rank 0 (the root) 1 and 3 ns, rank 1 10 and 20 ns,
    /// rank 2 only one operation of 7 ns (it died after it). Per-rank means 2, 15, 7.
    #[test]
    fn the_osu_figures_are_the_mean_min_and_max_of_per_rank_means() {
        let mut t = RankTimes::default();
        for (rank, ns) in [(0, 1), (1, 10), (2, 7), (0, 3), (1, 20)] {
            t.record(rank, ns);
        }
        assert_eq!(t.means(), vec![2.0, 15.0, 7.0]);
        let o = t.osu().unwrap();
        assert_eq!(o.avg, 8.0, "the mean of per-rank means, not of all samples (41/5)");
        assert_eq!((o.min, o.max), (2.0, 15.0));
        assert_eq!(RankTimes::default().osu(), None);
        // A rank that never completed one (dead from the start) is not a rank of the mean.
        let mut gap = RankTimes::default();
        gap.record(2, 6);
        gap.record(0, 2);
        assert_eq!(gap.osu().unwrap().avg, 4.0);
    }
}
