//! The per-rank comparison of `bench`'s report (each rank's mean delivery time, measured
//! and modeled) and its `osu_bcast` figures beside the model's.

use serde_json::json;

use crate::runtime::node::OsuBcast;

/// `osu_bcast`'s figures in µs.
pub(super) fn osu_us(o: OsuBcast) -> serde_json::Value {
    json!({"avg": o.avg / 1e3, "min": o.min / 1e3, "max": o.max / 1e3})
}

/// One rank's mean delivery time, measured and modeled (ns).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankCompared {
    pub rank: u32,
    pub measured: f64,
    pub model: f64,
}

impl RankCompared {
    /// Measured over modeled (`None` for a rank the model delivers at once: the root).
    pub fn ratio(&self) -> Option<f64> {
        (self.model >= 1.0).then(|| self.measured / self.model)
    }
}

/// The rank whose measured mean is furthest from the model's, by factor either way
/// (`|ln ratio|`: 0.5 is as far as 2).
pub fn furthest(ranks: &[RankCompared]) -> Option<&RankCompared> {
    ranks
        .iter()
        .filter_map(|r| Some((r, r.ratio()?.ln().abs())))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(r, _)| r)
}

/// The ranks with a mean delivery time both measured and modeled, in rank order.
pub fn per_rank(measured: &[Option<f64>], model: &[Option<f64>]) -> Vec<RankCompared> {
    measured
        .iter()
        .zip(model)
        .enumerate()
        .filter_map(|(r, (m, p))| {
            Some(RankCompared {
                rank: r as u32,
                measured: (*m)?,
                model: (*p)?,
            })
        })
        .collect()
}

/// Measured and modeled `osu_bcast` figures and their ratios (`null` without either).
pub(super) fn compare_osu(m: Option<OsuBcast>, p: Option<OsuBcast>) -> serde_json::Value {
    let (Some(m), Some(p)) = (m, p) else {
        return serde_json::Value::Null;
    };
    json!({
        "measured_us": osu_us(m),
        "predicted_us": osu_us(p),
        "ratio": {"avg": m.avg / p.avg.max(1.0), "max": m.max / p.max.max(1.0)},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_compared_where_both_sides_have_them() {
        // Rank 2 died in every run of the model, rank 3 completed nothing measured.
        let measured = [Some(1.0), Some(3000.0), Some(5000.0), None];
        let model = [Some(0.0), Some(2000.0), None, Some(4000.0)];
        let r = per_rank(&measured, &model);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].rank, r[0].ratio()), (0, None), "the root: delivered at its start");
        assert_eq!((r[1].rank, r[1].ratio()), (1, Some(1.5)));
        // Furthest either way: 0.4 is further than 1.5.
        let c = |rank, measured, model| RankCompared { rank, measured, model };
        let ranks = [c(0, 1.0, 0.0), c(1, 1500.0, 1000.0), c(2, 400.0, 1000.0)];
        assert_eq!(furthest(&ranks).map(|r| r.rank), Some(2));
        assert_eq!(
            furthest(&ranks[..1]).map(|r| r.rank),
            None,
            "the root alone has no ratio"
        );
    }
}
