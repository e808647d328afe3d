//! `bench`'s measured operations segment by segment between crashes, beside the model's
//! prediction for each segment (its crashed nodes dead from its start): with the default
//! crash half the window is before it and half after, and the pooled p50 sits between the
//! two regimes, where neither the machine nor the model has many operations. Only here do
//! measured and modeled compare like for like.

use hdrhistogram::Histogram;
use serde_json::json;

use super::bench::{QS, compare, pcts};
use crate::experiment::predict::{Prediction, SegmentPrediction};
use crate::runtime::cluster::{ClusterResult, SegmentResult};

/// The ranks a segment has dead (as planned) that were alive when the run ended: a crash
/// planned for a point the node never reached (`R@I:sent=K` on a node that sends fewer than K
/// messages of operation I), which the segment's model still has dead.
fn not_crashed(seg: &SegmentResult, res: &ClusterResult) -> Vec<u32> {
    seg.segment
        .dead
        .iter()
        .copied()
        .filter(|r| !res.dead_nodes.contains(r))
        .collect()
}

/// The model's segment for a measured one (the same operations), if it predicted one.
fn model_of<'a>(seg: &SegmentResult, pred: Option<&'a Prediction>) -> Option<&'a SegmentPrediction> {
    pred?.segments.iter().find(|p| p.segment == seg.segment)
}

/// The segments as JSON (an empty array for a run without a crash inside its window).
pub fn json(res: &ClusterResult, pred: Option<&Prediction>) -> serde_json::Value {
    res.segments
        .iter()
        .map(|s| {
            let p = model_of(s, pred);
            json!({
                "ops": [s.segment.ops.start, s.segment.ops.end],
                "dead": s.segment.dead,
                "not_crashed": not_crashed(s, res),
                "measured_ops": s.messages.len() + s.unstarted,
                "timeouts": s.timeouts,
                "violated_ops": s.violated_ops,
                "coloring_latency_us": pcts(&s.coloring),
                "quiescence_latency_us": pcts(&s.quiescence),
                "messages_per_op": s.messages.mean(),
                "prediction": p.map(|p| json!({
                    "runs": p.runs,
                    "coloring": compare(&s.coloring, &p.coloring),
                    "quiescence": compare(&s.quiescence, &p.quiescence),
                    "messages_per_op": p.messages,
                })),
            })
        })
        .collect::<Vec<_>>()
        .into()
}

/// The table of the text report ("" for a run without a crash inside its window).
pub fn text(res: &ClusterResult, pred: Option<&Prediction>) -> String {
    if res.segments.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\nby segment between crashes (operations as --kill counts them; the model's crashed nodes dead from the segment's start):\n",
    );
    s += &format!(
        "  {:<15}{:<8}{:>7}  {:<24}{:<24}{}\n",
        "operations", "dead", "ops", "coloring p50 µs", "coloring p99 µs", "messages/op"
    );
    s += &format!(
        "  {:<30}  {:<24}{:<24}{}\n",
        "", "measured  model ratio", "measured  model ratio", "measured  model"
    );
    let cell = |h: &Histogram<u64>, q: usize, p: Option<&[f64; 3]>| {
        if h.is_empty() {
            // Every operation of the segment abandoned: nothing colored.
            return format!("{:>8} {:>6} {:>5}   ", "-", "-", "-");
        }
        let m = h.value_at_quantile(QS[q]) as f64;
        match p {
            Some(p) => format!("{:>8.2} {:>6.2} {:>5.2}   ", m / 1e3, p[q] / 1e3, m / p[q].max(1.0)),
            None => format!("{:>8.2} {:>6} {:>5}   ", m / 1e3, "-", "-"),
        }
    };
    for seg in &res.segments {
        let p = model_of(seg, pred);
        let dead = if seg.segment.dead.is_empty() {
            "-".to_string()
        } else {
            seg.segment
                .dead
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        s += &format!(
            "  {:<15}{:<8}{:>7}  {}{}{:>8.2} {:>6}\n",
            format!("{}..{}", seg.segment.ops.start, seg.segment.ops.end),
            dead,
            seg.messages.len() + seg.unstarted,
            cell(&seg.coloring, 0, p.map(|p| &p.coloring)),
            cell(&seg.coloring, 1, p.map(|p| &p.coloring)),
            seg.messages.mean(),
            p.map_or("-".to_string(), |p| format!("{:.2}", p.messages)),
        );
        let alive = not_crashed(seg, res);
        if !alive.is_empty() {
            s += &format!(
                "  {:<30}  (planned dead but alive at the end, dead in the model: {:?})\n",
                "", alive
            );
        }
        if seg.timeouts > 0 || seg.violated_ops > 0 {
            s += &format!(
                "  {:<30}  ({} timed out, {} with a violation)\n",
                "", seg.timeouts, seg.violated_ops
            );
        }
    }
    s
}
