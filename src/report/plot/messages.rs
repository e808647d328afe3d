//! Messages per process against node count per algorithm, like Corrected Trees Fig. 6: the
//! mean over runs solid, the busiest process's count (p99 over runs) dashed.

use crate::report::plot::{Axis, Chart, Line, Sweep};

/// The figure; `context` (LogP parameters, faults, runs) goes into the title.
pub fn chart(sweeps: &[Sweep], context: &str) -> Chart {
    let mut lines = Vec::new();
    for (i, s) in sweeps.iter().enumerate() {
        lines.push(Line {
            label: format!("{} mean", s.label),
            points: s
                .points
                .iter()
                .map(|(x, r)| (*x, r.messages_per_process.mean))
                .collect(),
            color: i,
            dashed: false,
            markers: true,
        });
        lines.push(Line {
            label: format!("{} busiest process p99", s.label),
            points: s
                .points
                .iter()
                .map(|(x, r)| (*x, r.max_messages_per_process.p99))
                .collect(),
            color: i,
            dashed: true,
            markers: true,
        });
    }
    Chart {
        title: format!("messages per process against node count ({context})"),
        x_label: "processes P".into(),
        y_label: "messages sent per process".into(),
        x_axis: Axis::Log2,
        y_axis: Axis::Linear,
        lines,
    }
}
