//! A line chart (title, two axes, labelled series) and its rendering to SVG or PNG.
//! Every figure kind builds a [`Chart`]; this file is the only one that talks to plotters.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::prelude::*;

use crate::report::plot::Format;

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Linear,
    /// Logarithmic with decade ticks; every value must be > 0.
    Log,
    /// Logarithmic with ticks at powers of two (node counts); every value must be > 0.
    Log2,
    /// HdrHistogram's percentile axis: the value is `1/(1-q)` on a log scale, labelled as the
    /// percentile `100·q` (2 → 50%, 100 → 99%, 1000 → 99.9%).
    LogPercentile,
}

/// One series.
#[derive(Clone, Debug)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Index into the palette: series drawn in the same color belong together.
    pub color: usize,
    /// Dashed and with hollow markers (e.g. p99 next to a solid p50, or predicted next to
    /// measured).
    pub dashed: bool,
    /// A marker at every point (off for dense curves).
    pub markers: bool,
}

/// A figure: what [`render`] draws.
#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_axis: Axis,
    pub y_axis: Axis,
    pub lines: Vec<Line>,
}

/// Tableau 10: distinguishable colors, also in grayscale print.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

const SIZE: (u32, u32) = (960, 600);

static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// Registers the embedded font as plotters' "sans-serif" (once per process).
fn register_font() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font does not parse".to_string());
    });
    result
}

/// The percentile label of an [`Axis::LogPercentile`] value, for the round ones only.
pub fn percentile_label(v: f64) -> String {
    if v < 1.0 {
        return String::new();
    }
    let decade = v.log10();
    let round = (decade - decade.round()).abs() < 1e-9 || (v - 2.0).abs() < 1e-9;
    if !round {
        return String::new();
    }
    let p = 100.0 * (1.0 - 1.0 / v);
    let mut s = format!("{p:.6}");
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    format!("{s}%")
}

/// Bounds of an axis over the values; log axes need positive values.
fn bounds(vals: impl Iterator<Item = f64>, axis: Axis, name: &str) -> Result<(f64, f64), String> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals {
        if !v.is_finite() {
            return Err(format!("a {name} value is not a finite number"));
        }
        if axis != Axis::Linear && v <= 0.0 {
            return Err(format!("{name} values must be > 0 on a log axis, got {v}"));
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return Err("no data to plot".into());
    }
    Ok(match axis {
        Axis::Linear => {
            let lo = if lo >= 0.0 { 0.0 } else { lo };
            let span = (hi - lo).max(hi.abs() * 0.1).max(1e-9);
            (lo, hi + 0.08 * span)
        }
        Axis::Log | Axis::Log2 | Axis::LogPercentile => {
            let lo = if axis == Axis::LogPercentile { 1.0 } else { lo / 1.25 };
            (lo, (hi * 1.25).max(lo * 2.0))
        }
    })
}

/// Extends the y range upward so that the legend (top left) covers no data.
fn headroom((lo, hi): (f64, f64), c: &Chart) -> (f64, f64) {
    let legend_px = 20.0 * (c.lines.len() as f64 + 1.0);
    let frac = (legend_px / f64::from(SIZE.1 - 130)).min(0.6);
    match c.y_axis {
        Axis::Linear => (lo, lo + (hi - lo) / (1.0 - frac)),
        _ => (lo, lo * (hi / lo).powf(1.0 / (1.0 - frac))),
    }
}

/// Draws `chart` into `path` (SVG or PNG by extension).
pub fn render(chart: &Chart, path: &Path) -> Result<(), String> {
    let format = Format::from_path(path)?;
    if chart.lines.is_empty() || chart.lines.iter().all(|l| l.points.is_empty()) {
        return Err("no data to plot".into());
    }
    // Checked before a backend exists: a backend writes its file when dropped.
    let pts = || chart.lines.iter().flat_map(|l| l.points.iter());
    let x = bounds(pts().map(|p| p.0), chart.x_axis, "x")?;
    let y = headroom(bounds(pts().map(|p| p.1), chart.y_axis, "y")?, chart);
    // Values so far apart that a range's end or its span is no finite number (1e250 beside
    // 1e-1 on a log axis, with the legend's headroom) left plotters' tick search looping.
    for ((lo, hi), name, axis) in [(x, "x", chart.x_axis), (y, "y", chart.y_axis)] {
        let ratio = axis == Axis::Linear || (hi / lo).is_finite();
        if !(lo.is_finite() && hi.is_finite() && (hi - lo).is_finite() && ratio) {
            return Err(format!("the {name} values are too far apart to plot"));
        }
    }
    register_font()?;
    let fail = |e: String| format!("cannot draw {}: {e}", path.display());
    match format {
        Format::Svg => draw(SVGBackend::new(path, SIZE).into_drawing_area(), chart, x, y).map_err(fail),
        Format::Png => draw(BitMapBackend::new(path, SIZE).into_drawing_area(), chart, x, y).map_err(fail),
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    c: &Chart,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut b = ChartBuilder::on(&root);
    b.caption(&c.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72);
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let base = |a: Axis| if a == Axis::Log2 { 2.0 } else { 10.0 };
    let xl = (x0..x1).log_scale().base(base(c.x_axis));
    let yl = (y0..y1).log_scale().base(base(c.y_axis));
    match (c.x_axis != Axis::Linear, c.y_axis != Axis::Linear) {
        (false, false) => fill(b.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?, c)?,
        (true, false) => fill(b.build_cartesian_2d(xl, y0..y1).map_err(e)?, c)?,
        (false, true) => fill(b.build_cartesian_2d(x0..x1, yl).map_err(e)?, c)?,
        (true, true) => fill(b.build_cartesian_2d(xl, yl).map_err(e)?, c)?,
    }
    root.present().map_err(|e| e.to_string())
}

fn number(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e5 || v.abs() < 1e-3) {
        format!("{v:.0e}")
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn fill<'a, DB, X, Y>(mut ctx: ChartContext<'a, DB, Cartesian2d<X, Y>>, c: &Chart) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let xfmt = |v: &f64| match c.x_axis {
        Axis::LogPercentile => percentile_label(*v),
        _ => number(*v),
    };
    let yfmt = |v: &f64| number(*v);
    ctx.configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(e)?;
    for l in &c.lines {
        let color = PALETTE[l.color % PALETTE.len()];
        let stroke = color.stroke_width(2);
        let anno = if l.dashed {
            ctx.draw_series(DashedLineSeries::new(l.points.iter().copied(), 8, 5, stroke))
                .map_err(e)?
        } else {
            ctx.draw_series(LineSeries::new(l.points.iter().copied(), stroke))
                .map_err(e)?
        };
        let dashed = l.dashed;
        anno.label(l.label.as_str()).legend(move |(x, y)| {
            let dash = |a: i32, b: i32| PathElement::new(vec![(a, 0), (b, 0)], stroke);
            let (a, b) = if dashed {
                ((0, 8), (14, 24))
            } else {
                ((0, 12), (12, 24))
            };
            EmptyElement::at((x, y)) + dash(a.0, a.1) + dash(b.0, b.1)
        });
        if l.markers {
            let marker = if l.dashed {
                color.stroke_width(2)
            } else {
                color.filled()
            };
            ctx.draw_series(l.points.iter().map(|&p| Circle::new(p, 4, marker)))
                .map_err(e)?;
        }
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.5))
        .draw()
        .map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels_at_round_values_only() {
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(3.0), "");
    }

    #[test]
    fn bounds_reject_what_a_log_axis_cannot_show() {
        assert!(bounds([0.0, 2.0].into_iter(), Axis::Log, "x").is_err());
        assert!(bounds([f64::NAN].into_iter(), Axis::Linear, "y").is_err());
        assert!(bounds(std::iter::empty(), Axis::Linear, "y").is_err());
        let (lo, hi) = bounds([3.0, 7.0].into_iter(), Axis::Linear, "y").unwrap();
        assert!(lo == 0.0 && hi > 7.0);
        let (lo, hi) = bounds([256.0, 4096.0].into_iter(), Axis::Log, "x").unwrap();
        assert!(lo < 256.0 && lo > 0.0 && hi > 4096.0);
    }
}
