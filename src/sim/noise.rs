//! Noisy LogP: each message's `o_s`, `L` and `o_r` drawn from an empirical
//! distribution instead of fixed, so that the simulator's p99 and p99.9 predictions carry the
//! measured variability of a real machine. The draws come from their own generator, seeded
//! from the run's seed: runs are reproducible and the protocols' random stream is the same
//! as without noise.
//!
//! Input (JSON, values in the simulator's time units):
//! ```json
//! { "os": [1200, 1180, 2400],                       // samples: each drawn with equal chance
//!   "or": {"quantiles": [[0, 700], [0.5, 800], [0.99, 1500], [1, 4000]]},
//!   "L":  800 }                                     // a constant
//! ```
//! A quantile table is an inverse CDF, interpolated linearly between its points (HdrHistogram
//! percentiles as `ftcoll logp --save` writes them, in ns: a calibration file is read through
//! its `noise` member). A parameter left out keeps the engine's
//! fixed value. Unknown keys are rejected.

use serde::Deserialize;

use crate::model::{LogGP, Time};
use crate::protocol::ProtoRng;

/// One parameter's distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    /// Always this value.
    Const(Time),
    /// Uniform over the samples (an empirical distribution).
    Samples(Vec<Time>),
    /// Inverse CDF through `(quantile, value)` points, quantiles in `[0, 1]` increasing,
    /// values nondecreasing.
    Quantiles(Vec<(f64, f64)>),
}

impl Dist {
    /// One draw.
    pub fn draw(&self, rng: &mut ProtoRng) -> Time {
        match self {
            Dist::Const(v) => *v,
            Dist::Samples(s) => s[rng.below(s.len() as u32) as usize],
            Dist::Quantiles(q) => {
                let u = rng.unit();
                let i = q.partition_point(|&(p, _)| p <= u);
                let v = if i == 0 {
                    q[0].1
                } else if i == q.len() {
                    q[q.len() - 1].1
                } else {
                    let ((p0, v0), (p1, v1)) = (q[i - 1], q[i]);
                    v0 + (v1 - v0) * (u - p0) / (p1 - p0)
                };
                v.round() as Time
            }
        }
    }

    /// Every value multiplied by `f` (a change of time unit), rounded; at least `min`.
    pub fn scaled(&self, f: f64, min: Time) -> Dist {
        let t = |v: Time| ((v as f64 * f).round() as Time).max(min);
        match self {
            Dist::Const(v) => Dist::Const(t(*v)),
            Dist::Samples(s) => Dist::Samples(s.iter().map(|&v| t(v)).collect()),
            Dist::Quantiles(q) => Dist::Quantiles(q.iter().map(|&(p, v)| (p, (v * f).max(min as f64))).collect()),
        }
    }

    /// Does every draw give the same value?
    pub fn constant(&self) -> Option<Time> {
        match self {
            Dist::Const(v) => Some(*v),
            Dist::Samples(s) => s.iter().all(|&x| x == s[0]).then_some(s[0]),
            Dist::Quantiles(q) => q.iter().all(|x| x.1 == q[0].1).then_some(q[0].1.round() as Time),
        }
    }

    /// The largest value a draw can give.
    pub fn max(&self) -> Time {
        match self {
            Dist::Const(v) => *v,
            Dist::Samples(s) => s.iter().copied().max().unwrap_or(0),
            Dist::Quantiles(q) => q.last().map_or(0, |x| x.1.round() as Time),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawDist {
    Const(f64),
    Samples(Vec<f64>),
    Quantiles { quantiles: Vec<(f64, f64)> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNoise {
    os: Option<RawDist>,
    or: Option<RawDist>,
    #[serde(rename = "L")]
    l: Option<RawDist>,
}

/// The per-message distributions of `o_s`, `o_r` and `L`.
#[derive(Clone, Debug, PartialEq)]
pub struct Noise {
    pub os: Dist,
    pub or: Dist,
    pub l: Dist,
}

/// Largest value accepted in a noise file (keeps time arithmetic far from overflow).
const MAX_VALUE: f64 = (1u64 << 50) as f64;

fn value(name: &str, v: f64) -> Result<Time, String> {
    if !v.is_finite() || !(0.0..=MAX_VALUE).contains(&v) {
        return Err(format!("noise: {name}: values must be numbers in 0..=2^50, got {v}"));
    }
    Ok(v.round() as Time)
}

fn convert(name: &str, raw: Option<RawDist>, fixed: Time) -> Result<Dist, String> {
    Ok(match raw {
        None => Dist::Const(fixed),
        Some(RawDist::Const(v)) => Dist::Const(value(name, v)?),
        Some(RawDist::Samples(s)) => {
            if s.is_empty() || s.len() > u32::MAX as usize {
                return Err(format!("noise: {name}: give at least one sample"));
            }
            Dist::Samples(s.into_iter().map(|v| value(name, v)).collect::<Result<_, _>>()?)
        }
        Some(RawDist::Quantiles { quantiles }) => {
            if quantiles.is_empty() {
                return Err(format!("noise: {name}: give at least one quantile"));
            }
            for w in quantiles.windows(2) {
                if w[1].0 <= w[0].0 || w[1].1 < w[0].1 {
                    return Err(format!(
                        "noise: {name}: quantiles must increase and values must not decrease"
                    ));
                }
            }
            for &(q, v) in &quantiles {
                if !(0.0..=1.0).contains(&q) {
                    return Err(format!("noise: {name}: quantile {q} is outside [0, 1]"));
                }
                value(name, v)?;
            }
            Dist::Quantiles(quantiles)
        }
    })
}

impl Noise {
    /// Parses a noise file (or a calibration of `ftcoll logp --save`: its `noise` member);
    /// parameters it leaves out keep `fixed`'s values.
    pub fn from_json(text: &str, fixed: LogGP) -> Result<Noise, String> {
        let mut v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("noise: {e}"))?;
        if let Some(inner) = v.get_mut("noise") {
            v = inner.take();
        }
        let raw: RawNoise = serde_json::from_value(v).map_err(|e| format!("noise: {e}"))?;
        Ok(Noise {
            os: convert("os", raw.os, fixed.os)?,
            or: convert("or", raw.or, fixed.or)?,
            l: convert("L", raw.l, fixed.l)?,
        })
    }

    /// The distributions in another time unit: `o_s` times `fs`, `o_r` times `fr`, `L` times
    /// `fl` (overheads stay at least 1).
    pub fn scaled(&self, fs: f64, fr: f64, fl: f64) -> Noise {
        Noise {
            os: self.os.scaled(fs, 1),
            or: self.or.scaled(fr, 1),
            l: self.l.scaled(fl, 0),
        }
    }

    /// Reads and parses a noise file.
    pub fn load(path: &std::path::Path, fixed: LogGP) -> Result<Noise, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::from_json(&text, fixed).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Every parameter fixed at `p`'s value.
    pub fn constant(p: LogGP) -> Noise {
        Noise {
            os: Dist::Const(p.os),
            or: Dist::Const(p.or),
            l: Dist::Const(p.l),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms_and_rejects_bad_input() {
        let base = LogGP::new(7, 2, 3, 0, 0).unwrap();
        let n = Noise::from_json(
            r#"{"os": [1, 2, 3], "L": 5, "or": {"quantiles": [[0, 1], [1, 9]]}}"#,
            base,
        )
        .unwrap();
        assert_eq!(n.os, Dist::Samples(vec![1, 2, 3]));
        assert_eq!(n.l, Dist::Const(5));
        assert_eq!(n.or, Dist::Quantiles(vec![(0.0, 1.0), (1.0, 9.0)]));
        let n = Noise::from_json("{}", base).unwrap();
        assert_eq!(n, Noise::constant(base));
        for bad in [
            r#"{"os": []}"#,
            r#"{"os": [-1]}"#,
            r#"{"x": 1}"#,
            r#"{"L": {"quantiles": [[0.5, 3], [0.4, 4]]}}"#,
            r#"{"L": {"quantiles": [[0.1, 3], [0.4, 2]]}}"#,
            r#"{"L": {"quantiles": [[0.1, 3], [1.5, 4]]}}"#,
            "not json",
        ] {
            assert!(Noise::from_json(bad, base).is_err(), "{bad}");
        }
    }

    #[test]
    fn draws_follow_the_distribution() {
        let mut rng = ProtoRng::new(5);
        let d = Dist::Quantiles(vec![(0.0, 0.0), (1.0, 1000.0)]);
        let k = 100_000;
        let below_250 = (0..k).filter(|_| d.draw(&mut rng) < 250).count();
        assert!((below_250 as f64 / k as f64 - 0.25).abs() < 0.01, "{below_250}");
        let s = Dist::Samples(vec![1, 1, 1, 7]);
        let sevens = (0..k).filter(|_| s.draw(&mut rng) == 7).count();
        assert!((sevens as f64 / k as f64 - 0.25).abs() < 0.01, "{sevens}");
        assert_eq!(s.constant(), None);
        assert_eq!(Dist::Samples(vec![4, 4]).constant(), Some(4));
        assert_eq!(s.max(), 7);
    }
}
