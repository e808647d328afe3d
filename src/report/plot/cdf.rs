//! Latency distributions from an HdrHistogram interval log (`ftcoll bench --hlog`), drawn the
//! way HdrHistogram's plotter draws them: latency against percentile on a log `1/(1-q)` axis,
//! one curve per tag (intervals with the same tag are merged).

use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use base64::Engine as _;

use crate::report::plot::{Axis, Chart, Line};

/// The histograms of the log, merged per tag in order of first appearance (untagged
/// intervals are named "untagged"). Values are as logged (ns for `bench --hlog`).
pub fn read_hlog(text: &[u8]) -> Result<Vec<(String, Histogram<u64>)>, String> {
    let mut out: Vec<(String, Histogram<u64>)> = Vec::new();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(text) {
        let entry = entry.map_err(|e| format!("not an HdrHistogram interval log ({e:?})"))?;
        let LogEntry::Interval(iv) = entry else { continue };
        let tag = iv
            .tag()
            .map(|t| t.as_str().to_string())
            .unwrap_or_else(|| "untagged".into());
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(iv.encoded_histogram())
            .map_err(|e| format!("histogram '{tag}' is not valid base64: {e}"))?;
        let h: Histogram<u64> = de
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("histogram '{tag}' does not decode: {e:?}"))?;
        match out.iter_mut().find(|(t, _)| *t == tag) {
            Some((_, acc)) => acc
                .add(&h)
                .map_err(|e| format!("histogram '{tag}' does not merge: {e:?}"))?,
            None => out.push((tag, h)),
        }
    }
    if out.iter().all(|(_, h)| h.is_empty()) {
        return Err("the log holds no recorded values".into());
    }
    Ok(out)
}

/// Points (1/(1-q), value·scale) of `h` from the median-less start to its last recorded value:
/// HdrHistogram's quantile iteration, 5 steps per halving of the remaining tail.
pub fn curve(h: &Histogram<u64>, scale: f64) -> Vec<(f64, f64)> {
    let mut pts = vec![(1.0, h.min() as f64 * scale)];
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        if q >= 1.0 {
            break;
        }
        pts.push((
            1.0 / (1.0 - q),
            h.highest_equivalent(v.value_iterated_to()) as f64 * scale,
        ));
    }
    // The maximum sits at the last rank: 1/(1-q) with q = 1 - 1/count.
    let x_max = (h.len() as f64).max(pts.last().map_or(1.0, |p| p.0));
    pts.push((x_max, h.max() as f64 * scale));
    pts.dedup();
    pts
}

/// The figure; values are ns in the log and µs on the axis (logarithmic if `log_y`, without
/// zero values then).
pub fn chart(hists: &[(String, Histogram<u64>)], context: &str, log_y: bool) -> Chart {
    let lines = hists
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .enumerate()
        .map(|(i, (tag, h))| Line {
            label: format!("{tag} ({} values)", h.len()),
            points: curve(h, 1e-3).into_iter().filter(|p| !log_y || p.1 > 0.0).collect(),
            color: i,
            dashed: false,
            markers: false,
        })
        .collect();
    Chart {
        title: format!("latency by percentile ({context})"),
        x_label: "percentile".into(),
        y_label: "latency (µs)".into(),
        x_axis: Axis::LogPercentile,
        y_axis: if log_y { Axis::Log } else { Axis::Linear },
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_is_monotone_and_ends_at_the_maximum() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 1 << 40, 3).unwrap();
        for v in 1..=10_000u64 {
            h.record(v * 100).unwrap();
        }
        let c = curve(&h, 1.0);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1), "{c:?}");
        let last = c.last().unwrap();
        assert_eq!(last.1, h.max() as f64);
        assert!(last.0 >= 10_000.0);
        // The median point sits near 1/(1-0.5) = 2 at about half the maximum.
        let mid = c.iter().find(|p| p.0 >= 2.0).unwrap();
        assert!((mid.1 - 500_000.0).abs() < 5_000.0, "{mid:?}");
    }

    #[test]
    fn garbage_is_not_a_log() {
        assert!(read_hlog(b"this is not a log\n").is_err());
        assert!(read_hlog(b"").is_err());
    }
}
