//! Aggregation of Monte Carlo runs: HdrHistogram percentiles plus exact means and maxima.
//! Merging is order-independent, so results do not depend on the number of threads.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::sim::engine::RunStats;

/// Fixed-point scale for fractional per-run values (messages per process).
pub const MILLI: u64 = 1000;

/// One measured quantity over all runs.
#[derive(Clone, Debug)]
pub struct Dist {
    hist: Histogram<u64>,
    sum: u128,
    max: u64,
    count: u64,
    scale: u64,
}

/// Mean and percentiles of a [`Dist`], in the quantity's own unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Percentiles {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p999: f64,
    pub max: f64,
}

impl Dist {
    /// An empty distribution of values recorded in units of `1/scale`.
    pub fn new(scale: u64) -> Self {
        Self {
            hist: Histogram::new_with_bounds(1, 1 << 50, 3).expect("valid bounds"),
            sum: 0,
            max: 0,
            count: 0,
            scale,
        }
    }

    /// Records one value (already multiplied by the scale).
    pub fn record(&mut self, v: u64) {
        self.hist.saturating_record(v);
        self.sum += u128::from(v);
        self.max = self.max.max(v);
        self.count += 1;
    }

    /// Adds another distribution's values.
    pub fn merge(&mut self, other: &Dist) {
        self.hist
            .add(&other.hist)
            .expect("auto-resizing histograms always merge");
        self.sum += other.sum;
        self.max = self.max.max(other.max);
        self.count += other.count;
    }

    /// Mean (exact), p50, p99, p99.9 (HdrHistogram, 3 significant digits) and max (exact).
    pub fn percentiles(&self) -> Percentiles {
        let s = self.scale as f64;
        if self.count == 0 {
            return Percentiles {
                mean: 0.0,
                p50: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
            };
        }
        let q = |p: f64| self.hist.value_at_quantile(p).min(self.max) as f64 / s;
        Percentiles {
            mean: self.sum as f64 / self.count as f64 / s,
            p50: q(0.5),
            p99: q(0.99),
            p999: q(0.999),
            max: self.max as f64 / s,
        }
    }

    /// The value at quantile `q` in the quantity's unit (HdrHistogram, 3 significant digits).
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.hist.value_at_quantile(q).min(self.max) as f64 / self.scale as f64
    }

    /// The raw histogram (for HdrHistogram log output).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }
}

/// Everything measured over a Monte Carlo experiment.
#[derive(Clone, Debug)]
pub struct Summary {
    pub runs: u64,
    pub coloring: Dist,
    pub quiescence: Dist,
    pub correction: Dist,
    pub gmax: Dist,
    pub messages_per_process: Dist,
    pub max_messages_per_process: Dist,
    /// Runs that left at least one live process uncolored.
    pub uncolored_runs: u64,
    /// Live processes left uncolored, summed over runs.
    pub uncolored_nodes: u64,
    /// Runs that left exactly one live process uncolored.
    pub single_uncolored_runs: u64,
    /// The most live processes one run left uncolored.
    pub max_uncolored: u64,
    /// Runs stopped at the event cap.
    pub aborted_runs: u64,
    pub events: u64,
    n: u32,
}

impl Summary {
    /// An empty summary for `n` processes.
    pub fn new(n: u32) -> Self {
        Self {
            runs: 0,
            coloring: Dist::new(1),
            quiescence: Dist::new(1),
            correction: Dist::new(1),
            gmax: Dist::new(1),
            messages_per_process: Dist::new(MILLI),
            max_messages_per_process: Dist::new(1),
            uncolored_runs: 0,
            uncolored_nodes: 0,
            single_uncolored_runs: 0,
            max_uncolored: 0,
            aborted_runs: 0,
            events: 0,
            n,
        }
    }

    /// Records one run.
    pub fn record(&mut self, r: &RunStats) {
        self.runs += 1;
        self.coloring.record(r.coloring);
        self.quiescence.record(r.quiescence);
        self.correction.record(r.correction);
        self.gmax.record(u64::from(r.gmax));
        let per = (u128::from(r.messages) * u128::from(MILLI) + u128::from(self.n / 2)) / u128::from(self.n.max(1));
        self.messages_per_process.record(per as u64);
        self.max_messages_per_process
            .record(u64::from(r.max_messages_per_process));
        if r.uncolored_live > 0 {
            self.uncolored_runs += 1;
        }
        self.uncolored_nodes += u64::from(r.uncolored_live);
        self.single_uncolored_runs += u64::from(r.uncolored_live == 1);
        self.max_uncolored = self.max_uncolored.max(u64::from(r.uncolored_live));
        if r.aborted {
            self.aborted_runs += 1;
        }
        self.events += r.events;
    }

    /// Adds another summary (from another thread).
    pub fn merge(&mut self, o: &Summary) {
        self.runs += o.runs;
        self.coloring.merge(&o.coloring);
        self.quiescence.merge(&o.quiescence);
        self.correction.merge(&o.correction);
        self.gmax.merge(&o.gmax);
        self.messages_per_process.merge(&o.messages_per_process);
        self.max_messages_per_process.merge(&o.max_messages_per_process);
        self.uncolored_runs += o.uncolored_runs;
        self.uncolored_nodes += o.uncolored_nodes;
        self.single_uncolored_runs += o.single_uncolored_runs;
        self.max_uncolored = self.max_uncolored.max(o.max_uncolored);
        self.aborted_runs += o.aborted_runs;
        self.events += o.events;
    }

    /// The serializable report (`--json` field names).
    pub fn report(&self) -> Report {
        Report {
            runs: self.runs,
            coloring_latency: self.coloring.percentiles(),
            quiescence_latency: self.quiescence.percentiles(),
            correction_latency: self.correction.percentiles(),
            gmax: self.gmax.percentiles(),
            messages_per_process: self.messages_per_process.percentiles(),
            max_messages_per_process: self.max_messages_per_process.percentiles(),
            uncolored_runs: self.uncolored_runs,
            uncolored_nodes: self.uncolored_nodes,
            single_uncolored_runs: self.single_uncolored_runs,
            max_uncolored: self.max_uncolored,
            aborted_runs: self.aborted_runs,
            events: self.events,
        }
    }
}

/// The per-experiment numbers printed by `ftcoll sim` (and as JSON with `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub runs: u64,
    pub coloring_latency: Percentiles,
    pub quiescence_latency: Percentiles,
    pub correction_latency: Percentiles,
    pub gmax: Percentiles,
    pub messages_per_process: Percentiles,
    pub max_messages_per_process: Percentiles,
    pub uncolored_runs: u64,
    pub uncolored_nodes: u64,
    pub single_uncolored_runs: u64,
    pub max_uncolored: u64,
    pub aborted_runs: u64,
    pub events: u64,
}
