//! The files `bench` writes beside its report: the HdrHistogram interval log (`--hlog`) and
//! the message trace (`--trace`).

use std::time::Duration;

use crate::runtime::cluster::ClusterResult;
use crate::runtime::node::trace;

pub fn write_hlog(f: &mut std::fs::File, res: &ClusterResult) -> std::io::Result<()> {
    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    let mut bytes = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .add_comment("ftcoll bench latency histograms, values in ns")
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut bytes, &mut ser)?;
    let d = res.wall;
    for (tag, h) in [
        ("coloring", &res.coloring),
        ("quiescence", &res.quiescence),
        ("delivery", &res.delivery),
    ] {
        w.write_histogram(h, Duration::ZERO, d, Tag::new(tag))
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
    }
    crate::report::output::replace_contents(f, &bytes)
}

/// Writes the message trace the run's nodes published ([`trace::take`]) to `f` (`path` names
/// it in messages), the operations from `from` on, and says on stderr how much it wrote and
/// whether nodes could not keep every row.
pub fn write_trace(f: &mut std::fs::File, path: &std::path::Path, from: u64) -> Result<(), String> {
    let (rows, lost) = trace::take();
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut bytes = Vec::new();
    let ops = trace::write_csv(&rows, from, &mut bytes).map_err(cannot)?;
    crate::report::output::replace_contents(f, &bytes).map_err(cannot)?;
    eprintln!(
        "trace: {ops} operations from operation {from} written to {}",
        path.display()
    );
    if lost > 0 {
        eprintln!(
            "trace: {lost} rows not kept (at most {} per node, {} in all): the last operations are incomplete",
            trace::MAX_ROWS_PER_NODE,
            trace::MAX_ROWS
        );
    }
    Ok(())
}
