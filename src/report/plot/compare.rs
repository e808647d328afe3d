//! Measured against predicted: the p50, p99 and p99.9 of coloring and quiescence latency from
//! the `prediction` object of `ftcoll bench --json`, on the percentile axis of [`super::cdf`]
//! (measured solid, the LogP simulator's prediction dashed, same color per latency).

use serde_json::Value;

use crate::report::plot::{Axis, Chart, Line};

const QS: [(&str, f64); 3] = [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)];

fn series(v: &Value, kind: &str, side: &str) -> Result<Vec<(f64, f64)>, String> {
    QS.iter()
        .map(|(name, q)| {
            let x = v["prediction"][kind][side][name]
                .as_f64()
                .ok_or_else(|| format!("prediction.{kind}.{side}.{name} is missing or not a number"))?;
            if !x.is_finite() || x <= 0.0 {
                return Err(format!("prediction.{kind}.{side}.{name} must be > 0, got {x}"));
            }
            Ok((1.0 / (1.0 - q), x))
        })
        .collect()
}

/// The figure from a parsed `bench --json` report.
pub fn chart(v: &Value) -> Result<Chart, String> {
    if v.get("prediction").is_none_or(Value::is_null) {
        return Err("the report has no prediction (was bench run with --no-model?)".into());
    }
    let mut lines = Vec::new();
    for (i, kind) in ["coloring", "quiescence"].into_iter().enumerate() {
        for (side, dashed, what) in [("measured_us", false, "measured"), ("predicted_us", true, "LogP model")] {
            lines.push(Line {
                label: format!("{kind} {what}"),
                points: series(v, kind, side)?,
                color: i,
                dashed,
                markers: true,
            });
        }
    }
    let cfg = &v["config"];
    let context = format!(
        "{} nodes, {}, o = {} ns, L = {} ns",
        cfg["nodes"],
        cfg["transport"].as_str().unwrap_or("?"),
        cfg["o_ns"],
        cfg["L_ns"]
    );
    Ok(Chart {
        title: format!("measured against predicted ({context})"),
        x_label: "percentile".into(),
        y_label: "latency (µs)".into(),
        x_axis: Axis::LogPercentile,
        y_axis: Axis::Log,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn side(a: f64) -> Value {
        json!({"p50": a, "p99": 2.0 * a, "p99.9": 3.0 * a})
    }

    #[test]
    fn four_series_from_the_prediction_object() {
        let v = json!({
            "config": {"nodes": 8, "transport": "udp", "o_ns": 900, "L_ns": 3000},
            "prediction": {
                "coloring": {"measured_us": side(10.0), "predicted_us": side(5.0)},
                "quiescence": {"measured_us": side(20.0), "predicted_us": side(8.0)},
            }
        });
        let c = chart(&v).unwrap();
        assert_eq!(c.lines.len(), 4);
        assert_eq!(c.lines[0].label, "coloring measured");
        let ys: Vec<f64> = c.lines[0].points.iter().map(|p| p.1).collect();
        assert_eq!(ys, vec![10.0, 20.0, 30.0]);
        let xs: Vec<f64> = c.lines[0].points.iter().map(|p| p.0).collect();
        assert!((xs[0] - 2.0).abs() < 1e-9 && (xs[1] - 100.0).abs() < 1e-6 && (xs[2] - 1000.0).abs() < 1e-6);
        assert!(c.lines[1].dashed && !c.lines[0].dashed);
        assert_eq!(c.lines[3].points[2].1, 24.0);
        assert!(c.title.contains("8 nodes"));
    }

    #[test]
    fn a_report_without_prediction_is_an_error() {
        assert!(chart(&json!({"prediction": null})).is_err());
        assert!(chart(&json!({})).is_err());
        let bad = json!({"prediction": {"coloring": {"measured_us": side(0.0)}}});
        assert!(chart(&bad).is_err());
    }
}
