//! Size flags past what the host can hold: a one-line error naming the flag, the need and
//! the limit, and a non-zero exit, before anything is allocated.
//!
//! Each command runs under a guard (`ulimit -v` 4 GiB, `ulimit -n` 1024, `timeout 120`) so
//! that a build without the checks fails these tests without hurting the machine.

use std::process::{Command, Output};

/// Runs `ftcoll ARGS` under the guard.
fn guarded(args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("120")
        .arg("sh")
        .arg("-c")
        .arg("ulimit -v 4194304 && ulimit -n 1024 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_ftcoll"))
        .args(args)
        .output()
        .expect("runs sh")
}

/// Asserts a non-zero exit with exactly one stderr line that contains every one of `parts`.
fn refused(args: &[&str], parts: &[&str]) {
    let out = guarded(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {err}");
    assert_eq!(out.status.code(), Some(2), "{args:?}: {:?} {err}", out.status);
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err}");
    for p in parts {
        assert!(err.contains(p), "{args:?}: {p:?} missing from: {err}");
    }
}

#[test]
fn sim_nodes_past_memory_are_refused() {
    refused(
        &["sim", "--nodes", "2000000000", "--no-progress"],
        &[
            "--nodes 2000000000 needs about",
            "for the simulator",
            "this machine has",
        ],
    );
}

#[test]
fn sim_nodes_past_what_the_engine_holds_are_refused_whatever_the_memory() {
    refused(
        &["sim", "--nodes", "4294967295", "--no-progress"],
        &["--nodes 4294967295: the simulator holds at most 2147483648 processes"],
    );
}

#[test]
fn agree_sim_nodes_past_memory_are_refused() {
    refused(
        &["agree", "--sim", "--nodes", "4294967295"],
        &["--nodes 4294967295 needs about", "each process holds a tree over all n"],
    );
}

#[test]
fn agree_sim_agreements_past_memory_are_refused() {
    refused(
        &[
            "agree",
            "--sim",
            "--nodes",
            "8",
            "--runs",
            "1",
            "--agreements",
            "18446744073709551615",
        ],
        &["--agreements 18446744073709551615 needs about", "per-agreement records"],
    );
}

#[test]
fn bench_nodes_past_file_descriptors_are_refused() {
    for nodes in ["100000", "4294967295"] {
        refused(
            &["bench", "--nodes", nodes],
            &[
                &format!("--nodes {nodes} needs about"),
                "file descriptors",
                "the limit is 1024 (ulimit -n)",
            ],
        );
    }
}

#[test]
fn bench_inproc_nodes_past_memory_are_refused() {
    refused(
        &["bench", "--transport", "inproc", "--nodes", "100000"],
        &[
            "--nodes 100000 needs about",
            "for the in-process endpoints",
            "this machine has",
        ],
    );
}

#[test]
fn stress_agree_with_two_nodes_names_the_kills_not_the_nodes() {
    // Two nodes are enough; the default --max-kills 2 is what leaves no survivor.
    refused(
        &["stress", "agree", "--duration", "2", "--nodes", "2"],
        &["--max-kills 2 with --nodes 2", "--max-kills defaults to 2"],
    );
    let err =
        String::from_utf8_lossy(&guarded(&["stress", "agree", "--duration", "2", "--nodes", "2"]).stderr).to_string();
    assert!(!err.contains("needs --nodes >= 2"), "{err}");
}

#[test]
fn a_zero_operation_timeout_is_refused_not_rounded() {
    for cmd in [&["bench"][..], &["agree"][..]] {
        let mut args = cmd.to_vec();
        args.extend(["--op-timeout-ms", "0"]);
        let out = guarded(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(err.contains("--op-timeout-ms"), "{args:?}: {err}");
    }
}

#[test]
fn launch_tree_nodes_past_memory_are_refused() {
    refused(
        &["launch-tree", "--nodes", "4294967295"],
        &["--nodes 4294967295 needs about", "for the launch tree"],
    );
}

#[test]
fn logp_reps_past_memory_are_refused() {
    refused(
        &["logp", "--reps", "18446744073709551615"],
        &["--reps 18446744073709551615 needs about", "round-trip samples"],
    );
}

#[test]
fn bench_operation_counts_that_overflow_are_refused() {
    refused(
        &[
            "bench",
            "--nodes",
            "4",
            "--kill",
            "none",
            "--warmup",
            "100",
            "--iterations",
            "18446744073709551615",
        ],
        &["--warmup 100 plus --iterations 18446744073709551615 must be below 2^63"],
    );
}

#[test]
fn agree_operation_counts_that_overflow_are_refused() {
    refused(
        &[
            "agree",
            "--nodes",
            "4",
            "--warmup",
            "100",
            "--agreements",
            "18446744073709551615",
        ],
        &["--warmup 100 plus --agreements 18446744073709551615 must be below 2^63"],
    );
}

#[test]
fn sim_threads_past_the_cap_are_refused() {
    refused(
        &[
            "sim",
            "--nodes",
            "2",
            "--threads",
            "100000",
            "--runs",
            "100000",
            "--no-progress",
        ],
        &["--threads 100000 is more than 4096"],
    );
}

#[test]
fn boot_node_nodes_past_memory_are_refused() {
    refused(
        &["boot-node", "--rank", "0", "--nodes", "4294967295", "--timeout-s", "1"],
        &["--nodes 4294967295 needs about", "this node's address table"],
    );
}
