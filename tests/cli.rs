//! End-to-end tests of the `ftcoll` binary: output shape, determinism and misuse handling.

mod common;

use common::{ftcoll, json};

#[test]
fn sim_json_has_the_documented_fields() {
    let v = json(&["sim", "--nodes", "1024", "--runs", "30", "--faults", "1%", "--json"]);
    for k in [
        "coloring_latency",
        "quiescence_latency",
        "correction_latency",
        "gmax",
        "messages_per_process",
    ] {
        for p in ["mean", "p50", "p99", "p99.9", "max"] {
            assert!(v[k][p].is_number(), "{k}.{p} missing in {v}");
        }
    }
    assert_eq!(v["runs"], 30);
    assert_eq!(v["uncolored_runs"], 0, "checked correction colors everyone");
    assert_eq!(v["aborted_runs"], 0);
    assert_eq!(v["config"]["nodes"], 1024);
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let base = [
        "sim",
        "--algo",
        "corrected-gossip",
        "--variant",
        "ccg",
        "--nodes",
        "512",
        "--runs",
        "40",
        "--faults",
        "2%",
        "--json",
    ];
    let mut a = json(&[&base[..], &["--threads", "1"]].concat());
    let mut b = json(&[&base[..], &["--threads", "2"]].concat());
    for v in [&mut a, &mut b] {
        v["wall_seconds"] = serde_json::Value::Null;
        v["config"]["threads"] = serde_json::Value::Null;
    }
    assert_eq!(a, b);
}

#[test]
fn table_output_names_every_metric() {
    let (code, out, err) = ftcoll(&[
        "sim", "--nodes", "256", "--runs", "10", "--algo", "big", "--faults", "0",
    ]);
    assert_eq!(code, 0, "{err}");
    for k in [
        "coloring_latency",
        "quiescence_latency",
        "correction_latency",
        "gmax",
        "messages_per_process",
        "uncolored_runs",
    ] {
        assert!(out.contains(k), "{k} missing:\n{out}");
    }
}

#[test]
fn every_algorithm_runs_from_the_cli() {
    for algo in [
        &[
            "--algo",
            "corrected-tree",
            "--tree",
            "lame:2",
            "--correction",
            "optimized:4",
            "--start",
            "overlapped",
        ][..],
        &[
            "--algo",
            "corrected-tree",
            "--tree",
            "kary:4",
            "--order",
            "in-order",
            "--correction",
            "failproof:1",
        ],
        &[
            "--algo",
            "corrected-tree",
            "--tree",
            "optimal",
            "--correction",
            "delayed",
        ],
        &["--algo", "corrected-gossip", "--variant", "ocg"],
        &[
            "--algo",
            "corrected-gossip",
            "--variant",
            "fcg:1",
            "--online-faults",
            "1",
        ],
        &["--algo", "gossip"],
        &["--algo", "big"],
        &["--algo", "bfb", "--faults", "2"],
        &["--algo", "tree-ack", "--faults", "0"],
    ] {
        let args = [&["sim", "--nodes", "256", "--runs", "5", "--json"][..], algo].concat();
        let v = json(&args);
        assert_eq!(v["runs"], 5, "{algo:?}");
        assert_eq!(v["aborted_runs"], 0, "{algo:?}");
    }
}

#[test]
fn trace_writes_csv_events() {
    let dir = std::env::temp_dir().join(format!("ftcoll-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.csv");
    let (code, _, err) = ftcoll(&[
        "sim",
        "--nodes",
        "64",
        "--runs",
        "1",
        "--faults",
        "2",
        "--trace",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let csv = std::fs::read_to_string(&f).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("time,node,event,peer,label"));
    let sends = csv.lines().filter(|l| l.contains(",send,")).count();
    assert!(sends >= 63, "at least the tree's sends: {sends}");
    assert!(csv.contains(",dead,"), "the two dead processes are listed");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn model_prints_predictions() {
    let (code, out, err) = ftcoll(&["model", "--nodes", "65536"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Lemma 2"), "{out}");
    let v = json(&[
        "model",
        "--algo",
        "corrected-gossip",
        "--variant",
        "ocg",
        "--nodes",
        "1024",
        "--L",
        "1",
        "--o",
        "1",
        "--json",
    ]);
    assert!(v.to_string().contains("T_opt"), "{v}");
}

/// `sim --nodes 64 --cores 4 --runs 20 --json` with `extra`: the shared-core cases below.
fn sim_64_on_4_cores(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "sim",
        "--nodes",
        "64",
        "--cores",
        "4",
        "--runs",
        "20",
        "--json",
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

/// `sim --cores C --core-visit U`: cores that visit their processes in turn at a cost make
/// the same runs slower than cores that switch for free, and the JSON says which model ran.
#[test]
fn sim_cores_that_visit_in_turn_are_slower_than_free_switching() {
    let run = |visit: &str, work: &str| {
        let mut args = vec![];
        if !visit.is_empty() {
            args.extend(["--core-visit", visit]);
        }
        if !work.is_empty() {
            args.extend(["--core-work", work]);
        }
        sim_64_on_4_cores(&args)
    };
    let (free, visiting, working) = (run("", ""), run("3", ""), run("3", "2"));
    assert_eq!(free["config"]["core_visit"], 0, "{free}");
    assert_eq!(visiting["config"]["core_visit"], 3, "{visiting}");
    assert_eq!(visiting["config"]["core_work"], 0, "{visiting}");
    assert_eq!(working["config"]["core_work"], 2, "{working}");
    let p50 = |v: &serde_json::Value| v["coloring_latency"]["p50"].as_f64().unwrap();
    assert!(p50(&visiting) > p50(&free), "{visiting} {free}");
    // A visit with work that holds its core after the work: slower again.
    assert!(p50(&working) > p50(&visiting), "{working} {visiting}");
    for v in [&free, &visiting, &working] {
        assert_eq!(v["aborted_runs"], 0, "{v}");
    }
}

/// `sim --core-local-work U --core-local-receive U`: messages between processes of one core
/// at their own costs (the receive includes the sender's tail, so a visit that only sent owes
/// none). Cheaper, the same runs are faster; dearer, slower; the JSON says which costs ran.
#[test]
fn sim_messages_within_a_core_at_their_own_costs() {
    let run = |local: &[&str]| {
        let mut args = vec!["--core-visit", "3", "--core-work", "4", "--o", "5", "--L", "9"];
        args.extend_from_slice(local);
        sim_64_on_4_cores(&args)
    };
    let plain = run(&[]);
    let cheaper = run(&["--core-local-work", "1", "--core-local-receive", "1"]);
    let dearer = run(&["--core-local-work", "40", "--core-local-receive", "60"]);
    assert_eq!(plain["config"]["core_local_work"], 4, "{plain}");
    assert_eq!(plain["config"]["core_local_receive"], 5, "{plain}");
    assert_eq!(cheaper["config"]["core_local_work"], 1, "{cheaper}");
    assert_eq!(cheaper["config"]["core_local_receive"], 1, "{cheaper}");
    let p50 = |v: &serde_json::Value| v["coloring_latency"]["p50"].as_f64().unwrap();
    assert!(p50(&cheaper) < p50(&plain), "{cheaper} {plain}");
    assert!(p50(&dearer) > p50(&plain), "{dearer} {plain}");
    for v in [&plain, &cheaper, &dearer] {
        assert_eq!(v["aborted_runs"], 0, "{v}");
    }
}

/// `sim --core-poll-per-source U`: a visit costs more for each process beyond the first
/// that sends to its process, learned over the first runs. With the checked correction a
/// process hears from its ring neighbours too, so the same runs are slower, more so at a
/// higher cost, and the same with more threads; without correction each process hears from
/// its parent alone and nothing changes.
#[test]
fn sim_visits_cost_more_per_sender_beyond_the_first() {
    let run = |per: &str, extra: &[&str]| {
        let mut args = vec!["--core-visit", "3", "--core-work", "2", "--o", "5", "--L", "9"];
        if !per.is_empty() {
            args.extend(["--core-poll-per-source", per]);
        }
        args.extend_from_slice(extra);
        sim_64_on_4_cores(&args)
    };
    let plain = run("", &[]);
    let some = run("0.5", &[]);
    let more = run("4", &[]);
    assert_eq!(plain["config"]["core_poll_per_source"], 0.0, "{plain}");
    assert_eq!(some["config"]["core_poll_per_source"], 0.5, "{some}");
    let p50 = |v: &serde_json::Value| v["coloring_latency"]["p50"].as_f64().unwrap();
    assert!(p50(&some) > p50(&plain), "{some} {plain}");
    assert!(p50(&more) > p50(&some), "{more} {some}");
    let (one, three) = (run("4", &["--threads", "1"]), run("4", &["--threads", "3"]));
    for k in ["coloring_latency", "quiescence_latency", "messages_per_process"] {
        assert_eq!(one[k], three[k], "{k}: {one} {three}");
    }
    let (tree, tree_dear) = (run("", &["--correction", "none"]), run("4", &["--correction", "none"]));
    assert_eq!(
        tree["coloring_latency"], tree_dear["coloring_latency"],
        "{tree} {tree_dear}"
    );
    for v in [&plain, &some, &more, &one, &three, &tree, &tree_dear] {
        assert_eq!(v["aborted_runs"], 0, "{v}");
    }
}

#[test]
fn misuse_is_one_line_and_exit_2() {
    for args in [
        &["sim", "--algo", "nope"][..],
        &["sim", "--nodes", "1"],
        &["sim", "--o", "0"],
        &["sim", "--faults", "100%"],
        &["sim", "--faults", "1.0"],
        &["sim", "--nodes", "10", "--faults", "10"],
        &["sim", "--nodes", "10", "--dead", "0"],
        &["sim", "--nodes", "10", "--dead", "12"],
        &["sim", "--variant", "ccg"],
        &["sim", "--algo", "big", "--tree", "binomial"],
        &["sim", "--algo", "corrected-gossip", "--correction", "checked"],
        &["sim", "--tree", "kary:0"],
        &["sim", "--correction", "failproof:9"],
        &["sim", "--kill", "3"],
        &["sim", "--runs", "0"],
        &["sim", "--threads", "0"],
        &["sim", "--nodes", "abc"],
        &["sim", "--core-visit", "3"],
        &["sim", "--cores", "2", "--core-work", "3"],
        &["sim", "--core-local-receive", "3"],
        &["sim", "--cores", "2", "--core-local-work", "3"],
        &["sim", "--cores", "2", "--core-local-receive", "0"],
        &["sim", "--cores", "2", "--core-poll-per-source", "3"],
        &["sim", "--cores", "2", "--core-visit", "3", "--core-poll-per-source=-1"],
        &["sim", "--cores", "2", "--core-visit", "3", "--core-poll-per-source=nan"],
        &[
            "sim",
            "--nodes",
            "5000",
            "--cores",
            "2",
            "--core-visit",
            "3",
            "--core-poll-per-source",
            "1",
        ],
        &["model", "--nodes", "64", "--core-poll-per-source", "2"],
        &["model", "--nodes", "64", "--core-local-receive", "2"],
        &["model", "--nodes", "1"],
        &["model", "--nodes", "64", "--cores", "2"],
        &["model", "--nodes", "64", "--known-dead"],
        &["sim", "--algo", "bmg-build", "--nodes", "8", "--known-dead"],
        &["bench", "--nodes", "1"],
        &["bench", "--kill", "0"],
        &["bench", "--kill", "9"],
        &["bench", "--kill", "3@x"],
        &["bench", "--window", "0"],
        &["bench", "--size", "5000"],
        &["bench", "--o-ns", "0"],
        &["bench", "--shared-cores", "2"],
        &[
            "bench",
            "--join",
            "127.0.0.1:9",
            "--rank",
            "1",
            "--nodes",
            "4",
            "--shared-cores",
            "0",
        ],
        &["bench", "--iterations", "0"],
        &["bench", "--transport", "carrier-pigeon"],
        &["bench", "--algo", "big", "--correction", "checked"],
        &["bench", "--join", "127.0.0.1:9"],
        &["bench", "--join", "127.0.0.1:9", "--rank", "4", "--nodes", "4"],
        &["bench", "--join", "127.0.0.1:9", "--rank", "0", "--procs"],
        &["bench", "--join", "127.0.0.1:9", "--rank", "0", "--transport", "inproc"],
        &["bench", "--rank", "1"],
        &["bench", "--op-timeout-ms", "0"],
        &["agree", "--op-timeout-ms", "0"],
        &["logp", "--n", "1"],
        &["logp", "--size", "0"],
        &["bogus"],
        // Wall-clock times are at most a year; longer ones overflowed `Instant + Duration`.
        &[
            "agree",
            "--nodes",
            "4",
            "--transport",
            "inproc",
            "--duration",
            "18446744073709551615",
        ],
        &["stress", "agree", "--duration", "31536001"],
        &["bootstrap", "--nodes", "2", "--timeout-s", "18446744073709551615"],
        &["bootstrap", "--nodes", "2", "--tick-us", "18446744073709551615"],
        &["bench", "--op-timeout-ms", "31536000001"],
        &["logp", "--expected-L-ns", "0"],
        &["bench", "--o-ns", "18446744073709551615"],
        &["bench", "--L-ns", "31536000000000001"],
        // LogGP's g at most 2^32, as L and o (a larger one wrapped around).
        &["sim", "--nodes", "16", "--g", "18446744073709551615"],
        &["agree", "--sim", "--nodes", "8", "--g", "4294967297"],
        &["sim", "--nodes", "16", "--G", "1", "--bytes", "18446744073709551615"],
        // A crash past the run's last iteration (warm-up included) would never happen.
        &[
            "bench",
            "--transport",
            "inproc",
            "--nodes",
            "4",
            "--iterations",
            "20",
            "--warmup",
            "2",
            "--kill",
            "1@22",
        ],
        // Flags that would be ignored are refused.
        &["sim", "--nodes", "16", "--algo", "bmg-build", "--faults", "5"],
        &["sim", "--nodes", "16", "--algo", "dissemination", "--L", "7"],
        &["sim", "--nodes", "16", "--algo", "failure-notices", "--noise", "x.json"],
        &["sim", "--nodes", "16", "--algo", "bmg-build", "--max-events", "10"],
        &["sim", "--nodes", "16", "--algo", "bmg-build", "--threads", "2"],
        &["bench", "--algo", "bfb", "--size", "1024"],
        &["bench", "--emulate-jitter-ns", "18446744073709551615"],
        &["sim", "--algo", "gossip", "--gossip-rounds", "18446744073709551615"],
        &["sim", "--nodes", "16", "--algo", "bmg-build", "--crashes", "15"],
        &["sim", "--nodes", "16", "--detect-delay", "5"],
        &["model", "--nodes", "16", "--algo", "bfb", "--detect-delay", "5"],
        &["agree", "--sim", "--nodes", "8", "--warmup", "3"],
        &["agree", "--nodes", "4", "--transport", "inproc", "--runs", "5"],
        &["agree", "--nodes", "4", "--transport", "inproc", "--value", "union"],
        &["agree", "--nodes", "4", "--transport", "inproc", "--workers", "0"],
        // Rank lists name each rank once, and at least one.
        &["sim", "--nodes", "16", "--dead", ","],
        &["sim", "--nodes", "16", "--dead", "1,1"],
        &["sim", "--nodes", "16", "--kill", "1@5,1@6"],
    ] {
        let (code, _, err) = ftcoll(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ftcoll: error: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// An `L` the protocols cannot count (more than 2^32 of the model's unit, o/16) is refused
/// up front naming the flag that gave it, not by the group's build in the model's words.
#[test]
fn bench_names_the_flag_of_an_l_too_long_for_its_o() {
    let (code, _, err) = ftcoll(&["bench", "--nodes", "2", "--o-ns", "1", "--L-ns", "5000000000"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("ftcoll: error: --L-ns (5000000000 ns)"), "{err}");
    assert!(err.contains("at most 4294967296 ns"), "{err}");
}

/// `bench --json` on six nodes, 60 measured operations, rank 2 crashing in the 30th.
fn bench_six_nodes_rank_2_dies(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "bench",
        "--nodes",
        "6",
        "--iterations",
        "60",
        "--warmup",
        "5",
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
        "--kill",
        "2@30",
        "--json",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

#[test]
fn bench_json_reports_latencies_consistency_and_prediction() {
    let v = bench_six_nodes_rank_2_dies(&["--transport", "inproc", "--poll", "adaptive"]);
    assert_eq!(v["measured_ops"], 60);
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["dead_nodes"], serde_json::json!([2]));
    for k in ["t_min", "p50", "avg", "p99", "p99.9", "max"] {
        assert!(
            v["coloring_latency_us"][k].as_f64().is_some_and(|x| x > 0.0),
            "{k} in {v}"
        );
    }
    assert!(
        v["prediction"]["coloring"]["ratio"]["p50"]
            .as_f64()
            .is_some_and(|r| r > 0.0),
        "{v}"
    );
}

/// A node dead from the start (`--kill R`): its senders learn it from the first datagram its
/// closed port refuses (every port of a local run is bound before any node starts), not after
/// their retries run out. Until they did, the sends to it filled their windows and then their
/// deferred queues, and the run failed: 30–143 operations with unsent messages in every run of
/// `ftcoll bench --kill 1`, about 34 000 sends refused at a full window, exit 1.
#[test]
fn a_node_dead_from_the_start_costs_no_operation() {
    let v = json(&[
        "bench",
        "--nodes",
        "8",
        "--kill",
        "1",
        "--iterations",
        "2000",
        "--warmup",
        "200",
        "--no-model",
        "--json",
    ]);
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["dropped_ops"], 0, "{v}");
    assert_eq!(v["transport"]["window_full"], 0, "{v}");
    assert!(v["transport"]["refused_probes"].as_u64().is_some_and(|r| r >= 1), "{v}");
    assert_eq!(v["dead_nodes"], serde_json::json!([1]));
}

/// The same with one process per node: each node process bound its port before the
/// coordinator handed out the table, so a peer's closed port is a dead node's from the first
/// refusal. Before the node processes took it so (`UdpConfig::bound_at_start`), their senders
/// met a full window to the dead rank about 250 000 times a run until their retries ran out.
#[test]
fn a_node_process_dead_from_the_start_is_suspected_at_its_first_refusal() {
    let v = json(&[
        "bench",
        "--procs",
        "--nodes",
        "4",
        "--kill",
        "1",
        "--iterations",
        "500",
        "--warmup",
        "50",
        "--no-model",
        "--json",
    ]);
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["transport"]["window_full"], 0, "{v}");
    assert!(v["transport"]["refused_probes"].as_u64().is_some_and(|r| r >= 1), "{v}");
}

/// A crash inside the measured window splits the report where each crash starts: every
/// measured operation in one segment, each segment beside the model's prediction for it
/// (its crashed nodes dead from its start), nothing failed in any; without a crash inside the
/// window there is no split.
#[test]
fn crashes_split_the_report_into_segments_each_beside_its_model() {
    let args = |kill: &'static str| {
        [
            "bench",
            "--nodes",
            "4",
            "--kill",
            kill,
            "--iterations",
            "1500",
            "--warmup",
            "200",
            "--o-ns",
            "1000",
            "--L-ns",
            "1000",
            "--json",
        ]
    };
    let v = json(&args("1@700,2@1400:sent=1"));
    assert_eq!(v["violations"], 0, "{v}");
    let segs = v["segments"].as_array().unwrap_or_else(|| panic!("{v}"));
    let ops: Vec<_> = segs.iter().map(|s| (s["ops"].clone(), s["dead"].clone())).collect();
    use serde_json::json as j;
    assert_eq!(
        ops,
        [
            (j!([200, 700]), j!([])),
            (j!([700, 1400]), j!([1])),
            (j!([1400, 1700]), j!([1, 2]))
        ]
    );
    let counted: u64 = segs.iter().map(|s| s["measured_ops"].as_u64().unwrap()).sum();
    assert_eq!(counted, v["measured_ops"].as_u64().unwrap(), "{v}");
    assert_eq!(segs[0]["measured_ops"], 500);
    let (mut runs, mut msgs) = (0.0, 0.0);
    for s in segs {
        assert_eq!((&s["timeouts"], &s["violated_ops"]), (&j!(0), &j!(0)), "{s}");
        assert_eq!(s["not_crashed"], j!([]), "every planned crash happened: {s}");
        let p = &s["prediction"];
        let r = p["runs"].as_f64().unwrap_or_else(|| panic!("{s}"));
        assert!(
            r >= 1.0 && p["coloring"]["ratio"]["p50"].as_f64().is_some_and(|x| x > 0.0),
            "{s}"
        );
        runs += r;
        msgs += r * p["messages_per_op"].as_f64().unwrap();
    }
    let pooled = v["prediction"]["messages_per_op"].as_f64().unwrap();
    assert!((msgs / runs - pooled).abs() < 1e-9, "{msgs}/{runs} vs {pooled}");
    let v = json(&args("1"));
    assert_eq!(v["segments"], j!([]), "dead from the start: one regime");
}

/// A planned crash the node never reaches (a leaf asked to die after 50 sends of one
/// operation) is named in its segment: the segment's model has the node dead, the run did not.
#[test]
fn a_planned_crash_that_never_happened_is_named_in_its_segment() {
    let v = json(&[
        "bench",
        "--nodes",
        "4",
        "--kill",
        "3@300:sent=50",
        "--iterations",
        "500",
        "--warmup",
        "50",
        "--o-ns",
        "1000",
        "--L-ns",
        "1000",
        "--json",
    ]);
    assert_eq!(v["dead_nodes"], serde_json::json!([]), "{v}");
    let segs = v["segments"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(segs.len(), 2, "{v}");
    assert_eq!(segs[0]["not_crashed"], serde_json::json!([]));
    assert_eq!(segs[1]["not_crashed"], serde_json::json!([3]), "{v}");
}

/// `--version` names the commit the binary was built from (`build.rs`), so that results name
/// the binary that made them rather than the checkout of whoever ran it, and whether it stamps
/// the forwarding path (feature `stages`: `cargo bench --bench stages --features stages`
/// rebuilds `target/release/ftcoll` with it; a lent machine's run of such a binary took
/// 0.3-0.4 µs more per 2-node broadcast, and passed for a regression).
#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let (code, out, err) = ftcoll(&["--version"]);
    assert_eq!(code, 0, "{err}");
    let line = out.trim();
    let rev = line
        .strip_prefix(concat!("ftcoll ", env!("CARGO_PKG_VERSION"), " ("))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line}"));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    // A build with the `stages` feature says so last (its clock reads slow every broadcast).
    let stages = ftcoll::runtime::node::stages::ON;
    assert_eq!(rev.ends_with("+stages"), stages, "{line}");
    let rev = rev.trim_end_matches("+stages");
    match head {
        Some(h) => assert_eq!(rev.trim_end_matches("+dirty"), h, "{line}"),
        None => assert_eq!(rev, "unknown", "{line}"),
    }
    // And so does a bench's report: its JSON, and a note on stderr in either format.
    let args = "bench --nodes 2 --transport inproc --iterations 20 --warmup 5 --kill none";
    for json in [false, true] {
        let mut a: Vec<&str> = args.split(' ').collect();
        if json {
            a.push("--json");
        }
        let (code, out, err) = ftcoll(&a);
        assert_eq!(code, 0, "{err}");
        assert_eq!(err.contains("feature `stages`"), stages, "{err}");
        if json {
            let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
            assert_eq!(v["config"]["stage_stamps"], stages, "{v}");
        }
    }
}

/// The text's LogP line gives the ping-pong's own estimate (o the mean of its o_s and o_r);
/// the node's cost per hop shows in the model's line, not folded into the estimate's o.
#[test]
fn the_estimate_line_is_the_ping_pongs() {
    let args: Vec<&str> = "bench --nodes 2 --transport inproc --iterations 50 --warmup 5 --kill none"
        .split(' ')
        .collect();
    let (code, out, err) = ftcoll(&args);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("LogP (estimated by ping-pong"))
        .unwrap_or_else(|| panic!("no estimate line in {out}"));
    let num = |key: &str| -> u64 {
        let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (o, send, recv) = (num("o = "), num("(send "), num("/ recv "));
    assert_eq!(o, (send + recv).div_ceil(2), "{line}");
}

#[test]
fn yield_polled_nodes_sharing_workers_send_every_correction_one_per_pass() {
    // Six nodes on two workers, each sending one message per pass and yielding after it:
    // every live node still delivers exactly once, also after a crash.
    let v = bench_six_nodes_rank_2_dies(&[
        "--transport",
        "udp",
        "--workers",
        "2",
        "--poll",
        "yield",
        "--correction",
        "checked",
    ]);
    assert_eq!(v["measured_ops"], 60, "{v}");
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["timeouts"], 0, "{v}");
    assert_eq!(v["config"]["poll"], "yield", "{v}");
    assert!(v["messages_per_op"].as_f64().is_some_and(|m| m > 5.0), "{v}");
}

#[test]
fn errors_name_the_flag_at_fault_and_come_before_the_run() {
    let (code, _, err) = ftcoll(&["stress", "agree", "--nodes", "2", "--duration", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-kills 2 with --nodes 2"), "{err}");
    let (code, _, err) = ftcoll(&["stress", "agree", "--nodes", "1", "--duration", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--nodes >= 2, got 1"), "{err}");
    // An unwritable --hlog fails before the run: the run itself would fail on the kill spec
    // (a thread cannot be SIGKILLed), and that error must not be the one reported.
    let (code, _, err) = ftcoll(&[
        "bench",
        "--transport",
        "inproc",
        "--nodes",
        "4",
        "--o-ns",
        "1000",
        "--L-ns",
        "1000",
        "--kill",
        "1@5:sigkill",
        "--hlog",
        "/dev/null/lat.hlog",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot write /dev/null/lat.hlog"), "{err}");
}

#[test]
fn bench_writes_an_hdrhistogram_interval_log() {
    let dir = std::env::temp_dir().join(format!("ftcoll-hlog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("lat.hlog");
    let (code, _, err) = ftcoll(&[
        "bench",
        "--transport",
        "inproc",
        "--nodes",
        "4",
        "--iterations",
        "30",
        "--warmup",
        "2",
        "--o-ns",
        "1000",
        "--L-ns",
        "1000",
        "--kill",
        "none",
        "--no-model",
        "--hlog",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let log = std::fs::read_to_string(&f).unwrap();
    assert!(log.contains("#ftcoll bench latency histograms"), "{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with("Tag=")).count(), 3, "{log}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn procs_mode_survives_a_real_sigkill() {
    let v = json(&[
        "bench",
        "--procs",
        "--nodes",
        "4",
        "--iterations",
        "80",
        "--warmup",
        "10",
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
        "--kill",
        "2@40:sigkill",
        "--no-model",
        "--json",
    ]);
    assert_eq!(v["measured_ops"], 80, "{v}");
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["timeouts"], 0, "{v}");
    assert_eq!(v["dead_nodes"], serde_json::json!([2]), "{v}");
    // Every transport counter comes back from the node processes: the ACKs too (a tree's
    // links carry DATA one way, so its ACKs go alone), and the ratio is theirs.
    let t = &v["transport"];
    let (acks, sent) = (t["acks_sent"].as_u64().unwrap(), t["sent"].as_u64().unwrap());
    assert!(acks > 0 && sent > 0, "{t}");
    // (serde_json's float parsing may be a unit in the last place off the printed value.)
    let ratio = v["acks_per_data"].as_f64().expect("a UDP run reports acks_per_data");
    assert!((ratio - acks as f64 / sent as f64).abs() < 1e-12, "{v}");
    // The node processes' preemptions are not counted here (their workers are theirs).
    assert!(v["preempted"].is_null(), "{v}");
    let unc = v["clock_uncertainty_ns"]
        .as_u64()
        .expect("procs mode reports the clock uncertainty");
    // Loopback ping-pong takes microseconds on a quiet machine; the bound leaves room for a
    // machine loaded by other builds, where a probe can lose whole scheduler ticks.
    assert!(unc < 20_000_000, "clock uncertainty of {unc} ns on loopback");
}

#[test]
fn node_misuse_is_one_line() {
    for args in [
        &[
            "node",
            "--hostfile",
            "/nonexistent",
            "--control",
            "127.0.0.1:9",
            "--rank",
            "0",
            "--nodes",
            "2",
        ][..],
        &[
            "node",
            "--hostfile",
            "/dev/null",
            "--control",
            "127.0.0.1:9",
            "--rank",
            "0",
            "--nodes",
            "2",
        ],
        &[
            "node",
            "--hostfile",
            "/dev/null",
            "--control",
            "127.0.0.1:9",
            "--rank",
            "5",
            "--nodes",
            "2",
        ],
        &[
            "node",
            "--hostfile",
            "/dev/null",
            "--control",
            "nowhere",
            "--rank",
            "0",
            "--nodes",
            "2",
        ],
        &["bench", "--procs", "--transport", "inproc"],
        &["bench", "--kill", "2@3:sigkill"],
    ] {
        let (code, _, err) = ftcoll(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ftcoll: error: "), "{args:?}: {err}");
    }
}

#[test]
fn a_node_whose_port_is_in_use_fails_cleanly() {
    let busy = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dir = std::env::temp_dir().join(format!("ftcoll-busy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hf = dir.join("hosts");
    std::fs::write(&hf, format!("{}\n127.0.0.1:1\n", busy.local_addr().unwrap())).unwrap();
    let (code, _, err) = ftcoll(&[
        "node",
        "--rank",
        "0",
        "--nodes",
        "2",
        "--hostfile",
        hf.to_str().unwrap(),
        "--control",
        "127.0.0.1:9",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("ftcoll: error: cannot bind"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn node_with_a_malformed_hostfile_or_a_silent_coordinator_fails_cleanly() {
    let dir = std::env::temp_dir().join(format!("ftcoll-hf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad");
    std::fs::write(&bad, "127.0.0.1:7000\nnot-an-address\n").unwrap();
    let (code, _, err) = ftcoll(&[
        "node",
        "--rank",
        "0",
        "--nodes",
        "2",
        "--hostfile",
        bad.to_str().unwrap(),
        "--control",
        "127.0.0.1:9",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hostfile line 2"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // A well-formed hostfile but nobody at the control address: bounded, one line.
    let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let good = dir.join("good");
    std::fs::write(&good, format!("{a}\n{b}\n")).unwrap();
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (code, _, err) = ftcoll(&[
        "node",
        "--rank",
        "1",
        "--nodes",
        "2",
        "--hostfile",
        good.to_str().unwrap(),
        "--control",
        &silent.local_addr().unwrap().to_string(),
        "--control-timeout-ms",
        "300",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did not answer"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn launched_processes_rendezvous_through_rank_0_and_survive_a_self_sigkill() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port")
        .port();
    let join = format!("127.0.0.1:{port}");
    let common = |rank: u32| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_ftcoll"));
        c.args(["bench", "--join", &join, "--rank", &rank.to_string(), "--nodes", "3"])
            .args([
                "--iterations",
                "200",
                "--warmup",
                "20",
                "--poll",
                "blocking",
                "--no-model",
            ])
            .args([
                "--o-ns",
                "1000",
                "--L-ns",
                "2000",
                "--kill",
                "2@100:sigkill",
                "--join-timeout-ms",
                "20000",
            ]);
        c
    };
    let others: Vec<_> = (1..3)
        .map(|r| {
            common(r)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn a node")
        })
        .collect();
    let out = common(0).arg("--json").output().expect("run rank 0");
    for mut c in others {
        let _ = c.kill();
        let _ = c.wait();
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("rank 0 prints one JSON object");
    assert_eq!(v["measured_ops"], 200, "{v}");
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["timeouts"], 0, "{v}");
    assert!(v["clock_uncertainty_ns"].as_u64().is_some(), "{v}");
}

#[test]
fn every_subcommand_definition_is_consistent() {
    // clap's own checks (unique names, valid requirements) for every subcommand; a clash only
    // panics at run time in debug builds otherwise.
    use clap::CommandFactory;
    ftcoll::cli::args::Cli::command().debug_assert();
}

#[test]
fn auth_misuse_is_one_line_and_never_shows_the_key() {
    let dir = std::env::temp_dir().join(format!("ftcoll-cli-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.key");
    std::fs::write(&bad, "0123456789abcdef0123456789abcdeZ\n").unwrap();
    let bad_s = bad.to_str().unwrap();
    for args in [
        &[
            "bench",
            "--key-file",
            "/nonexistent/ftcoll.key",
            "--o-ns",
            "1000",
            "--L-ns",
            "2000",
        ][..],
        &["bench", "--key-file", bad_s, "--o-ns", "1000", "--L-ns", "2000"],
        &["bench", "--auth", "maybe"],
    ] {
        let (code, _, err) = ftcoll(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ftcoll: error: "), "{args:?}: {err}");
        assert!(!err.contains("abcdeZ"), "the key file's content is not echoed: {err}");
    }
    let (code, _, err) = ftcoll(&[
        "bench",
        "--auth",
        "off",
        "--key-file",
        bad_s,
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--key-file needs --auth on"), "{err}");
    // --auth off runs, and says so loudly.
    let (code, _, err) = ftcoll(&[
        "bench",
        "--auth",
        "off",
        "--nodes",
        "4",
        "--iterations",
        "20",
        "--warmup",
        "2",
        "--kill",
        "none",
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
        "--no-model",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("WARNING: packets are NOT authenticated"), "{err}");
    // A good key file is used and not echoed.
    let good = dir.join("good.key");
    let hex = "00112233445566778899aabbccddeeff";
    std::fs::write(&good, format!("{hex}\n")).unwrap();
    let (code, out, err) = ftcoll(&[
        "bench",
        "--key-file",
        good.to_str().unwrap(),
        "--nodes",
        "4",
        "--iterations",
        "20",
        "--warmup",
        "2",
        "--kill",
        "none",
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
        "--no-model",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains(hex) && !err.contains(hex) && !err.contains("WARNING"),
        "{out}{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quoted_bad_input_is_escaped_onto_one_line() {
    // Found by fuzzing: a kill spec or hostfile line with control characters was echoed raw.
    let (code, _, err) = ftcoll(&["bench", "--kill", "1\n2@x\u{1b}[31m"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    let dir = std::env::temp_dir().join(format!("ftcoll-cli-escape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hf = dir.join("hosts");
    std::fs::write(&hf, "127.0.0.1:5000\n\u{1b}[2J\u{7}:1\n").unwrap();
    let (code, _, err) = ftcoll(&[
        "node",
        "--rank",
        "0",
        "--nodes",
        "2",
        "--hostfile",
        hf.to_str().unwrap(),
        "--control",
        "127.0.0.1:9",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("hostfile line 2") && !err.contains('\u{1b}') && !err.contains('\u{7}'),
        "{err:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_huge_node_count_is_an_error_not_an_allocation_abort() {
    let dir = std::env::temp_dir().join(format!("ftcoll-cli-huge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hf = dir.join("hosts");
    std::fs::write(&hf, "127.0.0.1:5000\n").unwrap();
    let (code, _, err) = ftcoll(&[
        "node",
        "--rank",
        "0",
        "--nodes",
        "4000000000",
        "--hostfile",
        hf.to_str().unwrap(),
        "--control",
        "127.0.0.1:9",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("no address for rank 1"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A run stopped at the event cap is never silent. `sim` prints its table
/// with the count, then one `ftcoll: error:` line on stderr, and exits 3; `--allow-aborts`
/// accepts such runs (a warning, exit 0). The same for `agree --sim` and `sim --algo bmg-build`.
#[test]
fn aborted_runs_are_loud_and_exit_3_unless_allowed() {
    let base = [
        "sim",
        "--nodes",
        "64",
        "--runs",
        "3",
        "--faults",
        "0",
        "--max-events",
        "10",
    ];
    let (code, out, err) = ftcoll(&base);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("aborted_runs: 3"), "{out}");
    assert!(out.contains("ABORTED: 3 of 3 runs"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("ftcoll: error: 3 of 3 runs aborted at the event cap"),
        "{err}"
    );
    let (code, out, err) = ftcoll(&[&base[..], &["--json"]].concat());
    assert_eq!(code, 3, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["aborted_runs"], 3);
    let (code, out, err) = ftcoll(&[&base[..], &["--allow-aborts"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("aborted_runs: 3"), "{out}");
    assert!(err.starts_with("ftcoll: warning: 3 of 3 runs aborted"), "{err}");
    // Not aborted: exit 0 and no warning.
    let (code, _, err) = ftcoll(&["sim", "--nodes", "64", "--runs", "3", "--faults", "0"]);
    assert_eq!((code, err.as_str()), (0, ""));

    let agree = [
        "agree",
        "--sim",
        "--nodes",
        "8",
        "--runs",
        "2",
        "--agreements",
        "3",
        "--max-events",
        "5",
    ];
    let (code, out, err) = ftcoll(&agree);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("aborted runs: 2"), "{out}");
    assert!(err.starts_with("ftcoll: error: 2 of 2 runs aborted"), "{err}");
    let (code, _, err) = ftcoll(&[&agree[..], &["--allow-aborts"]].concat());
    assert_eq!(code, 0, "{err}");

    let bmg = [
        "sim",
        "--algo",
        "bmg-build",
        "--nodes",
        "16",
        "--launch-tree",
        "binary",
        "--scheduler",
        "synchronous",
        "--max-phases",
        "1",
    ];
    let (code, out, err) = ftcoll(&bmg);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("ABORTED"), "{out}");
    assert!(err.starts_with("ftcoll: error: "), "{err}");
    let (code, _, err) = ftcoll(&[&bmg[..], &["--allow-aborts"]].concat());
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = ftcoll(&["sim", "--algo", "bmg-build", "--nodes", "16", "--launch-tree", "binary"]);
    assert_eq!(code, 0, "{err}");
}

/// `--L`, `--o` (and the detection delays added to event times) near
/// u64::MAX used to wrap (`--L 18446744073709551615` reported a latency of 6): now a one-line
/// error and exit 2; the largest accepted value simulates without overflow.
#[test]
fn huge_logp_parameters_are_rejected_not_wrapped() {
    let max = u64::MAX.to_string();
    let over = ((1u64 << 32) + 1).to_string();
    let delayed = format!("delayed:{max}");
    for (args, what) in [
        (vec!["sim", "--L", &max], "--L must be at most 4294967296"),
        (vec!["sim", "--L", &over], "--L must be at most 4294967296"),
        (vec!["sim", "--o", &max], "--o must be at most 4294967296"),
        (
            vec!["sim", "--algo", "bfb", "--detect-delay", &max],
            "--detect-delay must be at most",
        ),
        (vec!["model", "--L", &max], "--L must be at most"),
        (vec!["agree", "--sim", "--L", &max], "--L must be at most"),
        (
            vec!["agree", "--sim", "--detect-jitter", &max],
            "--detect-jitter must be at most",
        ),
        (vec!["sim", "--correction", &delayed], "delayed:DELAY must be at most"),
    ] {
        let (code, out, err) = ftcoll(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("ftcoll: error: ") && err.contains(what),
            "{args:?}: {err}"
        );
    }
    // The bound itself is fine: one hop of 2o + L = 2^32 + 2, exactly (16 = 2^4 nodes, a
    // binomial tree of depth 4, fault-free: coloring 4 hops).
    let big = (1u64 << 32).to_string();
    let v = json(&[
        "sim",
        "--nodes",
        "16",
        "--L",
        &big,
        "--faults",
        "0",
        "--runs",
        "1",
        "--correction",
        "none",
        "--json",
    ]);
    assert_eq!(v["coloring_latency"]["max"], 4.0 * ((1u64 << 32) + 2) as f64, "{v}");
    for algo in ["bfb", "big", "corrected-gossip", "tree-ack"] {
        let v = json(&[
            "sim", "--algo", algo, "--nodes", "16", "--L", &big, "--o", &big, "--faults", "1", "--runs", "2", "--json",
        ]);
        assert_eq!(v["aborted_runs"], 0, "{algo}: {v}");
    }
}

/// A short UDP bench of `nodes` nodes under `loss`, o and L given (no estimate), no crash.
fn lossy_bench<'a>(nodes: &'a str, loss: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "bench",
        "--nodes",
        nodes,
        "--iterations",
        "300",
        "--warmup",
        "20",
        "--o-ns",
        "1000",
        "--L-ns",
        "2000",
        "--kill",
        "none",
        "--loss",
        loss,
    ];
    args.extend_from_slice(extra);
    args
}

/// `bench --loss P`: every node's transport drops P of what it receives and repairs it; the
/// run is still exactly once everywhere, the losses and repairs are counted, and the model
/// says what it charged. Local and `--procs` runs (the node processes get the flag).
#[test]
fn bench_under_injected_loss_repairs_every_loss_and_models_it() {
    for extra in [&["--json"][..], &["--json", "--procs"]] {
        let v = json(&lossy_bench("4", "0.1", extra));
        assert_eq!(v["measured_ops"], 300, "{v}");
        assert_eq!(v["violations"], 0, "{v}");
        assert_eq!(v["timeouts"], 0, "{v}");
        assert!(
            v["config"]["loss"].as_f64().is_some_and(|l| (l - 0.1).abs() < 1e-12),
            "{v}"
        );
        let t = &v["transport"];
        let (lost, retx) = (
            t["injected_losses"].as_u64().unwrap(),
            t["retransmits"].as_u64().unwrap(),
        );
        assert!(lost > 0 && retx > 0, "{extra:?}: {t}");
        // Most losses are repaired by the peer's report of what came behind them; a timer's
        // repairs are counted with their waits (below the 100 ms ceiling).
        assert!(t["timeouts"].as_u64().unwrap() < retx, "{t}");
        if let Some(k) = t["timeouts"].as_u64().filter(|&k| k > 0) {
            let mean = t["timeout_wait_ns"].as_u64().unwrap() / k;
            assert!(mean > 0 && mean < 100_000_000, "{t}");
        }
        assert!(
            v["prediction"]["coloring"]["ratio"]["p50"]
                .as_f64()
                .is_some_and(|r| r > 0.0),
            "{v}"
        );
    }
    let (code, out, _) = ftcoll(&lossy_bench("3", "0.05", &[]));
    assert_eq!(code, 0);
    assert!(out.contains("loss: each node's transport dropped 5.0 %"), "{out}");
    for (bad, says) in [
        (vec!["--loss", "1"], "--loss must be a fraction in [0, 1), got 1"),
        (vec!["--loss=-0.1"], "--loss must be a fraction in [0, 1)"),
        (
            vec!["--loss", "0.1", "--transport", "inproc"],
            "--loss needs --transport udp",
        ),
    ] {
        let mut args = vec!["bench", "--nodes", "3", "--iterations", "10"];
        args.extend(bad);
        let (code, _, err) = ftcoll(&args);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says) && err.trim().lines().count() == 1, "{err}");
    }
}
