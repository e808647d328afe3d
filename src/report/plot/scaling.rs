//! Latency against node count per algorithm, like Corrected Trees Fig. 7 (quiescence latency
//! against P) and Corrected Gossip Fig. 7a/7b (median latency against N): p50 solid, p99
//! dashed, log-scale node axis.

use crate::report::plot::{Axis, Chart, Line, Sweep};
use crate::sim::stats::Percentiles;

/// Which latency of the simulator's report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Root's start to the last live process's delivery.
    Coloring,
    /// To the last send or receive of the operation.
    Quiescence,
}

impl Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::Coloring => "coloring",
            Metric::Quiescence => "quiescence",
        }
    }
}

/// p50 and p99 lines of `pick` for every sweep, one color per sweep.
pub fn p50_p99(sweeps: &[Sweep], pick: impl Fn(&crate::sim::Report) -> Percentiles) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, s) in sweeps.iter().enumerate() {
        for (q, dashed) in [("p50", false), ("p99", true)] {
            lines.push(Line {
                label: format!("{} {q}", s.label),
                points: s
                    .points
                    .iter()
                    .map(|(x, r)| (*x, if dashed { pick(r).p99 } else { pick(r).p50 }))
                    .collect(),
                color: i,
                dashed,
                markers: true,
            });
        }
    }
    lines
}

/// The figure; `context` (LogP parameters, faults, runs) goes into the title.
pub fn chart(sweeps: &[Sweep], metric: Metric, context: &str) -> Chart {
    Chart {
        title: format!("{} latency against node count ({context})", metric.name()),
        x_label: "processes P".into(),
        y_label: format!("{} latency (LogP time units)", metric.name()),
        x_axis: Axis::Log2,
        y_axis: Axis::Linear,
        lines: p50_p99(sweeps, |r| match metric {
            Metric::Coloring => r.coloring_latency,
            Metric::Quiescence => r.quiescence_latency,
        }),
    }
}
