//! Fail-stop enforcement in `bench --procs`: a node process that stops answering (SIGSTOPped
//! here, as a process descheduled for long on a loaded host would) is declared crashed by the
//! coordinator, and the declaration is made true: the process is SIGKILLed, every later
//! operation completes without it, and the run counts one false suspicion and fails for it.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The pid of `parent`'s child whose command line holds `--rank <rank>`.
fn child_of(parent: u32, rank: u32) -> Option<u32> {
    common::children_with(parent, &format!("--rank\0{rank}\0"))
        .first()
        .copied()
}

fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill").args([sig, &pid.to_string()]).status().unwrap();
    assert!(ok.success(), "kill {sig} {pid}");
}

#[test]
fn a_stopped_node_process_is_killed_counted_and_the_run_fails_for_it() {
    let bench = Command::new(env!("CARGO_BIN_EXE_ftcoll"))
        .args(["bench", "--procs", "--nodes", "4", "--kill", "none"])
        .args(["--iterations", "9000", "--warmup", "50", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut bench = bench;
    // Generous: once, on a loaded machine, no rank 2 was seen within 30 s (why was not kept:
    // the run's output was dropped then); a run that ends first is reported at once with
    // what it printed.
    let deadline = Instant::now() + Duration::from_secs(120);
    let pid = loop {
        if let Some(p) = child_of(bench.id(), 2) {
            break p;
        }
        if Instant::now() >= deadline || bench.try_wait().unwrap().is_some() {
            let _ = bench.kill();
            let out = bench.wait_with_output().unwrap();
            panic!(
                "rank 2 never started ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let the run start (the nodes join and measure their clocks first), then stop rank 2 for
    // well over the coordinator's 300 ms of silence.
    std::thread::sleep(Duration::from_millis(1500));
    signal("-STOP", pid);
    std::thread::sleep(Duration::from_millis(900));
    let _ = Command::new("kill").args(["-CONT", &pid.to_string()]).status();
    let out = bench.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["measured_ops"], 9000, "{v}");
    assert_eq!(v["dead_nodes"], serde_json::json!([2]), "{v}\n{err}");
    assert_eq!(v["false_suspicions"], 1, "{v}\n{err}");
    assert_eq!(v["violations"], 0, "{v}\n{err}");
    assert_eq!(v["timeouts"], 0, "{v}\n{err}");
    // Made true: the process is gone (killed, not merely ignored).
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z")),
        "rank 2 still runs"
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("false suspicion"), "{last}");
}
