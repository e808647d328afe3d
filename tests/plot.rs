//! End-to-end tests of `ftcoll plot`: every kind draws SVG and PNG from what the other commands
//! produce, and every kind of bad input is a one-line error with exit code 2.

mod common;

use common::ftcoll;

use std::path::{Path, PathBuf};

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ftcoll-plot-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = ftcoll(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

fn svg(path: &Path, expect: &[&str]) {
    let text = std::fs::read_to_string(path).expect("svg written");
    assert!(
        text.starts_with("<svg") && text.trim_end().ends_with("</svg>"),
        "not an SVG"
    );
    for e in expect {
        assert!(text.contains(e), "{} lacks '{e}'", path.display());
    }
}

fn png(path: &Path) {
    let bytes = std::fs::read(path).expect("png written");
    assert!(bytes.len() > 1000, "{} is only {} bytes", path.display(), bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG signature");
}

/// Exit code 2 and exactly one line `ftcoll: error: ...` containing `what`.
fn usage_error(args: &[&str], what: &str) {
    let (code, out, err) = ftcoll(args);
    assert_eq!(code, 2, "{args:?}: stdout {out} stderr {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(
        err.starts_with("ftcoll: error: ") && err.contains(what),
        "{args:?}: {err}"
    );
}

#[test]
fn scaling_and_messages_draw_one_series_per_algorithm_and_quantile() {
    let d = scratch("scaling");
    let algos = "corrected-tree --tree binomial;big";
    let common = ["--nodes", "64,128", "--runs", "6", "--algos", algos, "--threads", "1"];
    let out = d.join("scaling.svg");
    let table = ok(&[&["plot", "scaling", "--out", s(&out)], &common[..]].concat());
    svg(
        &out,
        &[
            "corrected-tree --tree binomial p50",
            "corrected-tree --tree binomial p99",
            "big p50",
            "big p99",
            "processes P",
            "coloring latency",
        ],
    );
    // Two algorithms, two quantiles, two node counts: eight plotted values.
    let rows = table
        .lines()
        .filter(|l| l.starts_with("corrected-tree") || l.starts_with("big"))
        .count();
    assert_eq!(rows, 8, "{table}");
    let out = d.join("quiescence.png");
    ok(&[
        &["plot", "scaling", "--metric", "quiescence", "--out", s(&out)],
        &common[..],
    ]
    .concat());
    png(&out);
    let out = d.join("messages.svg");
    ok(&[
        &["plot", "messages", "--out", s(&out), "--algo-spec", "corrected-gossip"],
        &common[..],
    ]
    .concat());
    svg(
        &out,
        &[
            "big mean",
            "corrected-gossip mean",
            "busiest process",
            "messages sent per process",
        ],
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn correction_plots_against_the_fault_rate() {
    let d = scratch("correction");
    let out = d.join("correction.svg");
    let table = ok(&[
        "plot",
        "correction",
        "--nodes",
        "512",
        "--faults",
        "0.5%,2%",
        "--runs",
        "8",
        "--algos",
        "corrected-tree --correction checked;corrected-tree --correction failproof:1",
        "--out",
        s(&out),
    ]);
    svg(
        &out,
        &["checked p50", "failproof:1 p99", "correction latency", "fault rate"],
    );
    // Fault rates in percent on the x axis.
    assert!(
        table
            .lines()
            .any(|l| l.contains("checked p50") && l.contains(" 2.0000 ")),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn cdf_and_compare_draw_what_bench_wrote() {
    let d = scratch("bench");
    let hlog = d.join("bench.hlog");
    let json = ok(&[
        "bench",
        "--transport",
        "inproc",
        "--nodes",
        "4",
        "--iterations",
        "150",
        "--warmup",
        "10",
        "--kill",
        "none",
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
        "--no-pin",
        "--poll",
        "blocking",
        "--json",
        "--hlog",
        s(&hlog),
    ]);
    let report = d.join("bench.json");
    std::fs::write(&report, &json).expect("write report");
    for ext in ["svg", "png"] {
        let out = d.join(format!("cdf.{ext}"));
        ok(&["plot", "cdf", s(&hlog), "--out", s(&out)]);
        ok(&[
            "plot",
            "cdf",
            s(&hlog),
            "--log-y",
            "--out",
            s(&d.join(format!("cdf-log.{ext}"))),
        ]);
        let out2 = d.join(format!("compare.{ext}"));
        ok(&["plot", "compare", s(&report), "--out", s(&out2)]);
        if ext == "svg" {
            svg(
                &out,
                &["coloring (150 values)", "quiescence (150 values)", "delivery", "99%"],
            );
            svg(
                &out2,
                &[
                    "coloring measured",
                    "coloring LogP model",
                    "quiescence measured",
                    "quiescence LogP model",
                ],
            );
            svg(&d.join("cdf-log.svg"), &["coloring (150 values)", "latency (µs)"]);
        } else {
            png(&d.join("cdf-log.png"));
            png(&out);
            png(&out2);
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_is_a_one_line_error() {
    let d = scratch("bad");
    let out = d.join("x.svg");
    let o = s(&out);
    let missing = d.join("missing.hlog");
    let garbage = d.join("garbage.hlog");
    std::fs::write(&garbage, "this is not a histogram log\n").unwrap();
    let empty = d.join("empty.hlog");
    std::fs::write(&empty, "").unwrap();
    let no_model = d.join("nomodel.json");
    std::fs::write(&no_model, r#"{"prediction": null, "config": {}}"#).unwrap();
    usage_error(&["plot", "cdf", s(&missing), "--out", o], "cannot read");
    usage_error(
        &["plot", "cdf", s(&garbage), "--out", o],
        "not an HdrHistogram interval log",
    );
    usage_error(&["plot", "cdf", s(&empty), "--out", o], "no recorded values");
    usage_error(&["plot", "compare", s(&missing), "--out", o], "cannot read");
    usage_error(
        &["plot", "compare", s(&garbage), "--out", o],
        "not a `bench --json` report",
    );
    usage_error(&["plot", "compare", s(&no_model), "--out", o], "no prediction");
    for kind in ["scaling", "messages", "correction"] {
        usage_error(&["plot", kind, "--out", "fig.jpg"], "expected a .svg or .png");
        usage_error(
            &["plot", kind, "--out", o, "--algos", "quantum"],
            "algorithm spec 'quantum'",
        );
        usage_error(&["plot", kind, "--out", o, "--algos", " ; "], "no algorithm to plot");
    }
    usage_error(
        &["plot", "cdf", s(&garbage), "--out", "fig.gif"],
        "expected a .svg or .png",
    );
    usage_error(
        &["plot", "compare", s(&garbage), "--out", "noext"],
        "expected a .svg or .png",
    );
    let nodir = d.join("nodir").join("x.png");
    usage_error(&["plot", "scaling", "--out", s(&nodir)], "no directory");
    usage_error(
        &["plot", "scaling", "--out", o, "--nodes", "64,x"],
        "invalid node count",
    );
    usage_error(
        &["plot", "messages", "--out", o, "--nodes", "1"],
        "--nodes must be at least 2",
    );
    usage_error(&["plot", "correction", "--out", o, "--faults", "0%"], "must be > 0");
    usage_error(
        &["plot", "correction", "--out", o, "--faults", "150%"],
        "fault percentage",
    );
    usage_error(
        &[
            "plot",
            "scaling",
            "--out",
            o,
            "--algos",
            "corrected-tree;big --tree binomial",
        ],
        "--tree does not apply",
    );
    assert!(!out.exists(), "no image is written on bad input");
    let _ = std::fs::remove_dir_all(&d);
}

/// Latencies so far apart that the axis' ends or span are no finite number (with the legend's
/// headroom on a log axis) are refused in one line; plotters' tick search looped on them. A
/// span of 200 decades still draws.
#[test]
fn compare_refuses_values_too_far_apart_to_plot() {
    let d = scratch("far");
    let report = |p50: f64| {
        let q = |x: f64| serde_json::json!({"p50": x, "p99": 2.0, "p99.9": 3.0});
        serde_json::json!({"prediction": {
            "coloring": {"measured_us": q(p50), "predicted_us": q(1.0)},
            "quiescence": {"measured_us": q(1.0), "predicted_us": q(1.0)},
        }})
        .to_string()
    };
    let out = d.join("x.svg");
    for (i, (p50, fits)) in [
        (1e200, true),
        (1e-200, true),
        (1e250, false),
        (1e-250, false),
        (1e307, false),
    ]
    .into_iter()
    .enumerate()
    {
        let file = d.join(format!("r{i}.json"));
        std::fs::write(&file, report(p50)).unwrap();
        let args = ["plot", "compare", s(&file), "--out", s(&out)];
        if fits {
            ok(&args);
        } else {
            usage_error(&args, "too far apart to plot");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}
