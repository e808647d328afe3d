//! Correction latency against the fault rate, the resilience study of Corrected Trees §4.3
//! (rates 0.01%–4%, Fig. 8 and Table 1's L_SCC): quiescence minus the end of dissemination,
//! p50 solid and p99 dashed, log-scale fault-rate axis.

use crate::report::plot::scaling::p50_p99;
use crate::report::plot::{Axis, Chart, Sweep};

/// The figure; sweep parameters are fault rates in percent.
pub fn chart(sweeps: &[Sweep], context: &str) -> Chart {
    Chart {
        title: format!("correction latency against fault rate ({context})"),
        x_label: "processes dead before the operation (%)".into(),
        y_label: "correction latency (LogP time units)".into(),
        x_axis: Axis::Log,
        y_axis: Axis::Linear,
        lines: p50_p99(sweeps, |r| r.correction_latency),
    }
}
