//! `bench/trace_summary.py`, which reads `bench --trace` and `sim --trace` files: each event's
//! times over the operations, the model's beside them; bad input is one line and a non-zero
//! exit. Skipped (said so) without python3.

use std::path::Path;
use std::process::Command;

fn python() -> bool {
    let ok = Command::new("python3").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: python3 is not installed");
    }
    ok
}

/// A fresh directory for a test's files, or `None` (said so) without python3.
fn scratch(name: &str) -> Option<std::path::PathBuf> {
    if !python() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("ftcoll-trace-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Some(dir)
}

/// Runs `c`: (exit code, stdout, stderr).
fn outcome(c: &mut Command) -> (i32, String, String) {
    let out = c.output().expect("run the script");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn summary(args: &[&Path]) -> (i32, String, String) {
    outcome(
        Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/trace_summary.py"))
            .args(args),
    )
}

#[test]
fn a_bench_trace_is_summarized_beside_the_models_run() {
    let Some(dir) = scratch("summary") else {
        return;
    };
    let model = dir.join("model.csv");
    let st = Command::new(env!("CARGO_BIN_EXE_ftcoll"))
        .args([
            "sim",
            "--nodes",
            "4",
            "--runs",
            "1",
            "--faults",
            "0",
            "--correction",
            "none",
        ])
        .args(["--os", "1000", "--or", "500", "--L", "200", "--no-progress", "--trace"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    // Two operations of a 2-node run, as `bench --trace` writes them.
    let measured = dir.join("measured.csv");
    std::fs::write(
        &measured,
        "op,time_ns,node,event,peer,label\n\
         7,0,0,start,0,\n7,10,0,send,1,tree\n7,1800,1,recv,0,tree\n\
         8,0,0,start,0,\n8,12,0,send,1,tree\n8,1600,1,recv,0,tree\n",
    )
    .unwrap();
    let (rc, out, err) = summary(&[&measured, &model]);
    assert_eq!(rc, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "2 operations", "{out}");
    // Node 1's receive: both operations, median 1700, the model's 1000 + 200 + 500.
    let recv: Vec<&str> = lines
        .iter()
        .find(|l| l.split_whitespace().take(4).eq(["1", "recv", "0", "tree"]))
        .unwrap_or_else(|| panic!("{out}"))
        .split_whitespace()
        .collect();
    assert_eq!(recv[4..], ["2", "1600", "1700", "1800", "1700"], "{out}");
    // The start has no model row; rows come in order of their median.
    assert!(
        lines[2].contains("start") && lines[2].trim_end().ends_with('-'),
        "{out}"
    );
    let (rc, _, err) = summary(&[&dir.join("missing.csv")]);
    assert_eq!(rc, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `bench/trace_vs_model.sh args…` with this build's binary unless `-b` is given.
fn trace_vs_model(args: &[&str]) -> (i32, String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut c = Command::new("bash");
    c.arg(root.join("bench/trace_vs_model.sh")).current_dir(root);
    if !args.contains(&"-b") {
        c.args(["-b", env!("CARGO_BIN_EXE_ftcoll")]);
    }
    outcome(c.args(args))
}

#[test]
fn trace_vs_model_without_a_binary_is_one_line_and_exit_2() {
    let (rc, _, err) = trace_vs_model(&["-b", "/nonexistent/ftcoll"]);
    assert_eq!(rc, 2, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--features trace"), "{err}");
}

/// Without the feature the script stops at bench's refusal, which says how to build.
#[cfg(not(feature = "trace"))]
#[test]
fn trace_vs_model_with_a_binary_without_the_trace_feature_says_how_to_build_one() {
    if !python() {
        return;
    }
    let (rc, _, err) = trace_vs_model(&["--", "--nodes", "2", "--iterations", "10"]);
    assert_ne!(rc, 0);
    assert!(err.contains("cargo build --release --features trace"), "{err}");
}

/// With the feature (`cargo test --features trace`): a real run's trace beside the model's
/// operation, every node's receive with the model's time.
#[cfg(feature = "trace")]
#[test]
fn trace_vs_model_prints_a_real_runs_messages_beside_the_models() {
    if !python() {
        return;
    }
    let (rc, out, err) = trace_vs_model(&[
        "-a",
        "--correction none",
        "--",
        "--nodes",
        "4",
        "--transport",
        "inproc",
        "--iterations",
        "200",
        "--warmup",
        "20",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.starts_with("model: ftcoll sim --nodes 4 --os "), "{out}");
    assert!(out.contains("\n200 operations\n"), "{out}");
    for (node, from) in [(1, 0), (2, 0), (3, 1)] {
        let row: Vec<&str> = out
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .take(4)
                    .eq([node.to_string(), "recv".into(), from.to_string(), "tree".into()])
            })
            .unwrap_or_else(|| panic!("no receive of node {node}: {out}"))
            .split_whitespace()
            .collect();
        assert_eq!(row[4], "200", "{out}");
        let model: u64 = row[8].parse().unwrap_or_else(|_| panic!("no model time: {out}"));
        assert!(model > 0, "{out}");
    }
}

#[test]
fn a_reader_that_stops_early_ends_the_summary_without_a_traceback() {
    // `trace_summary.py big.csv | head`: the summary outgrows the pipe, its reader goes away,
    // and the script ends quietly (it printed a BrokenPipeError traceback).
    let Some(dir) = scratch("pipe") else {
        return;
    };
    let big = dir.join("big.csv");
    let mut csv = String::from("op,time_ns,node,event,peer,label\n1,0,0,start,0,\n");
    for node in 1..20_000 {
        csv.push_str(&format!("1,{node},{node},recv,0,tree\n"));
    }
    std::fs::write(&big, csv).unwrap();
    let mut child = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/trace_summary.py"))
        .arg(&big)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the script");
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("Traceback"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
