//! A run that failed exits non-zero and says why on its last line; one that passed exits 0.
//! The failures are made deterministic: a tree broadcast with acknowledgments tolerates no
//! crash, so once rank 1 dies every later operation misses its subtree and times out.

mod common;

use common::{ALONE, ftcoll};

/// `ftcoll bench` of 8 in-process nodes, no warm-up, a short operation timeout and a fixed
/// LogP unit (nothing measured), plus `extra`.
fn bench(extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "bench",
        "--transport",
        "inproc",
        "--nodes",
        "8",
        "--warmup",
        "0",
        "--op-timeout-ms",
        "100",
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
        "--no-model",
        "--no-pin",
    ];
    args.extend_from_slice(extra);
    ftcoll(&args)
}

fn last_line(err: &str) -> &str {
    err.lines().last().unwrap_or("")
}

#[test]
fn a_bench_with_violations_and_timeouts_exits_1_and_says_why_last() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let (code, out, err) = bench(&["--algo", "tree-ack", "--kill", "1@10", "--iterations", "40", "--json"]);
    assert_eq!(code, 1, "{err}");
    // The JSON is still printed in full.
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    let (violations, timeouts) = (v["violations"].as_u64().unwrap(), v["timeouts"].as_u64().unwrap());
    assert!(violations > 0 && timeouts > 0, "{v}");
    let line = last_line(&err);
    assert!(line.starts_with("ftcoll: bench failed: "), "{err}");
    assert!(line.contains(&format!("{violations} violations")), "{line}");
    assert!(line.contains(&format!("{timeouts} timeout")), "{line}");
    assert!(line.ends_with("in 40 operations"), "{line}");
    let failures = v["failures"].as_array().unwrap();
    assert!(failures.len() >= 2, "{v}");
    // The table says the same.
    let (code, out, err) = bench(&["--algo", "tree-ack", "--kill", "1@10", "--iterations", "40"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("consistency violations"), "{out}");
    assert!(last_line(&err).starts_with("ftcoll: bench failed: "), "{err}");
}

#[test]
fn timeouts_in_a_row_stop_the_run_and_the_rest_fails_as_not_run() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    // 60 operations: after the crash each would wait out its 100 ms timeout; the run stops
    // after the third in a row instead and counts the others as not run.
    let (code, out, err) = bench(&["--algo", "tree-ack", "--kill", "1@5", "--iterations", "60", "--json"]);
    assert_eq!(code, 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    let (measured, not_run) = (v["measured_ops"].as_u64().unwrap(), v["not_run"].as_u64().unwrap());
    assert!(not_run > 0, "{v}");
    assert_eq!(measured + not_run, 60, "{v}");
    assert_eq!(v["timeouts"], 3, "exactly the three in a row: {v}");
    let line = last_line(&err);
    assert!(
        line.contains(&format!(
            "{not_run} operations not run (stopped after 3 timeouts in a row)"
        )),
        "{line}"
    );
}

#[test]
fn a_clean_bench_exits_0_without_a_failure_line() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let (code, out, err) = bench(&[
        "--correction",
        "checked",
        "--kill",
        "1@10",
        "--iterations",
        "40",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["not_run"], 0, "{v}");
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0), "{v}");
    assert!(!err.contains("failed"), "{err}");
}

#[test]
fn an_agreement_run_with_false_suspicions_exits_1_unless_allowed() {
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    // Rank 3 of 8 stops 30 ms (alive) before measured agreement 50 while its neighbours suspect
    // after 1 ms of silence: it is suspected while alive, on any machine, loaded or idle.
    let args = |transport: &'static str, allow: bool| {
        let mut v = vec![
            "agree",
            "--transport",
            transport,
            "--nodes",
            "8",
            "--workers",
            "2",
            "--warmup",
            "0",
            "--agreements",
            "300",
            "--suspect-ms",
            "1",
            "--stall",
            "3@50:30",
            "--no-pin",
            "--no-model",
            "--json",
        ];
        if allow {
            v.push("--allow-false-suspicions");
        }
        v
    };
    let run = |transport: &'static str, allow: bool| {
        let (code, out, err) = ftcoll(&args(transport, allow));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
        let others = ["disagreements", "invalid", "unfinished"]
            .iter()
            .any(|k| v[k].as_u64() != Some(0));
        (code, v, err, others)
    };
    for transport in ["inproc", "udp"] {
        let (code, v, err, others) = run(transport, false);
        assert!(v["false_suspicions"].as_u64().unwrap() >= 1, "{transport}: {v}\n{err}");
        // The suspicion is enforced (the stalled node is fenced, it does not go on alone):
        // no disagreement, every live node finished.
        assert!(!others, "{transport}: {v}\n{err}");
        assert_eq!(code, 1, "{transport}: {v}\n{err}");
        let line = last_line(&err);
        assert!(line.starts_with("ftcoll: agree failed: "), "{err}");
        assert!(
            line.contains(&format!("{} false suspicion", v["false_suspicions"])),
            "{line}"
        );
        assert!(line.ends_with(&format!("in {} agreements", v["agreements"])), "{line}");
        let failures = v["failures"].as_array().unwrap();
        assert!(
            failures.iter().any(|f| f.as_str().unwrap().contains("false suspicion")),
            "{v}"
        );
        // Allowed: said on stderr, not failed.
        let (code, v, err, others) = run(transport, true);
        assert!(v["false_suspicions"].as_u64().unwrap() >= 1, "{transport}: {v}\n{err}");
        assert!(!others, "{transport}: {v}\n{err}");
        assert_eq!(code, 0, "{transport}: {v}\n{err}");
        assert!(err.contains("false suspicion"), "{err}");
    }
}

#[test]
fn misuse_still_exits_2_not_1() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let (code, _, err) = bench(&["--iterations", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(last_line(&err).starts_with("ftcoll: error: "), "{err}");
}

/// A report that cannot be written (a full disk, a pipe whose reader has gone) ends as any
/// other error: one line on stderr and exit code 2 (`println!` panicked there, exit 101 with
/// a backtrace's worth of lines).
#[test]
fn a_failed_write_to_stdout_is_one_line_and_exit_2() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let bin = env!("CARGO_BIN_EXE_ftcoll");
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        for args in [&["model", "--nodes", "16"][..], &["sim", "--help"]] {
            let out = Command::new(bin)
                .args(args)
                .stdout(full.try_clone().unwrap())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.starts_with("ftcoll: error: cannot write to standard output: "),
                "{err}"
            );
        }
    }
    // `ftcoll launch-tree --nodes 100000 | head -c 10`: a megabyte of lines into a pipe closed
    // after ten bytes.
    let mut child = Command::new(bin)
        .args(["launch-tree", "--nodes", "100000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot write to standard output") && err.contains("Broken pipe"),
        "{err}"
    );
}
