//! End-to-end tests of `ftcoll agree --sim`: output, the properties under failures, misuse.

mod common;

use common::{ALONE, free_port, ftcoll, json};

#[test]
fn failure_free_json_meets_theorem_5() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let v = json(&[
        "agree",
        "--sim",
        "--nodes",
        "32",
        "--runs",
        "5",
        "--agreements",
        "40",
        "--json",
    ]);
    for k in [
        "agreement_latency",
        "process_latency",
        "messages_per_agreement",
        "critical_path_steps",
    ] {
        for p in ["mean", "p50", "p99", "p99.9", "max"] {
            assert!(v[k][p].is_number(), "{k}.{p} missing in {v}");
        }
    }
    assert_eq!(v["messages_per_agreement"]["max"], 62.0, "2(n-1) messages");
    assert_eq!(v["max_steps_failure_free"], v["theorem5_bound"]);
    assert_eq!(v["failure_free_agreements"], 200);
    assert!(v["max_stored_agreements_per_process"].as_u64().unwrap() <= 3);
}

#[test]
fn failures_keep_every_property() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let v = json(&[
        "agree",
        "--sim",
        "--nodes",
        "24",
        "--tree",
        "bin/star:4",
        "--runs",
        "50",
        "--agreements",
        "6",
        "--kill",
        "0@msg:1,5@7",
        "--random-kills",
        "3",
        "--detect-jitter",
        "9",
        "--value",
        "union",
        "--json",
    ]);
    for k in [
        "agreement",
        "participation",
        "validity",
        "irrevocability",
        "failed_set",
        "termination",
    ] {
        assert_eq!(v["violations"][k], 0, "{k}: {v}");
    }
    assert_eq!(v["dead"], 50 * 5);
    assert!(v["not_acknowledged_returns"].as_u64().unwrap() > 0);
}

#[test]
fn loggp_noise_and_shared_cores_reach_the_simulator() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let run = |extra: &[&str]| {
        let mut args = vec![
            "agree",
            "--sim",
            "--nodes",
            "16",
            "--runs",
            "2",
            "--agreements",
            "5",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&args)
    };
    let logp = run(&["--L", "2", "--o", "2"]);
    let same = run(&["--L", "2", "--o", "2", "--os", "2", "--or", "2"]);
    assert_eq!(logp["agreement_latency"], same["agreement_latency"]);
    // A dearer receive makes every hop dearer; one core for all makes it dearer still.
    let asym = run(&["--L", "2", "--o", "2", "--os", "2", "--or", "5"]);
    let shared = run(&["--L", "2", "--o", "2", "--os", "2", "--or", "5", "--cores", "1"]);
    let p50 = |v: &serde_json::Value| v["agreement_latency"]["p50"].as_f64().unwrap();
    assert!(p50(&asym) > p50(&logp), "{asym}");
    assert!(p50(&shared) > p50(&asym), "{shared}");
    assert_eq!(
        (asym["config"]["or"].as_u64(), shared["config"]["cores"].as_u64()),
        (Some(5), Some(1))
    );
    for v in [&logp, &asym, &shared] {
        assert_eq!(v["violations"]["agreement"], 0);
        assert_eq!(v["aborted_runs"], 0);
    }
}

#[test]
fn table_output_names_the_checks() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let (code, out, err) = ftcoll(&["agree", "--sim", "--nodes", "16", "--runs", "3", "--agreements", "10"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Theorem 5 (failure-free): max steps 8 over 30 agreements"),
        "{out}"
    );
    assert!(out.contains("violations: agreement 0 participation 0"), "{out}");
}

#[test]
fn misuse_is_a_one_line_error_with_code_2() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    for args in [
        &["agree", "--sim", "--nodes", "4", "--tree", "bin/"][..],
        &["agree", "--sim", "--tree", "ring"],
        &["agree", "--sim", "--tree", "bin/bin:0"],
        &["agree", "--sim", "--nodes", "4", "--kill", "7"],
        &["agree", "--sim", "--nodes", "4", "--kill", "1@msg:0"],
        &["agree", "--sim", "--nodes", "4", "--kill", "1,1@5"],
        &["agree", "--sim", "--nodes", "3", "--random-kills", "3"],
        &["agree", "--sim", "--o", "0"],
        &["agree", "--sim", "--nodes", "0"],
        &["agree", "--sim", "--agreements", "0"],
        &["agree", "--sim", "--value", "xor"],
        &["agree", "--sim", "--window", "0"],
        &["agree", "--nodes", "1"],
        &["agree", "--nodes", "129"],
        &["agree", "--nodes", "4", "--kill", "1"],
        &["agree", "--nodes", "4", "--kill", "7@1"],
        &["agree", "--nodes", "4", "--agreements", "10", "--kill", "1@10"],
        &["agree", "--nodes", "4", "--window", "2"],
        &["agree", "--nodes", "4", "--heartbeat-us", "0"],
        &["agree", "--nodes", "4", "--stall", "1"],
        &["agree", "--nodes", "4", "--stall", "1@5:x"],
        &["agree", "--nodes", "4", "--stall", "4@5:10"],
        &["agree", "--nodes", "4", "--stall", "1@5:0"],
        &["agree", "--nodes", "4", "--stall", "1@5:10", "--kill", "1@7"],
        &["agree", "--sim", "--stall", "1@5:10"],
        &["agree", "--nodes", "4", "--os", "3"],
        &["agree", "--nodes", "4", "--cores", "1"],
        &["agree", "--sim", "--os", "0"],
        &["agree", "--sim", "--G", "0.5"],
        &["agree", "--sim", "--cores", "0"],
        &["agree", "--sim", "--noise", "/nonexistent/noise.json"],
        &[
            "agree",
            "--join",
            "127.0.0.1:9",
            "--rank",
            "0",
            "--nodes",
            "4",
            "--kill",
            "0@5",
        ],
        &["agree", "--join", "127.0.0.1:9", "--rank", "4", "--nodes", "4"],
        &[
            "agree",
            "--join",
            "127.0.0.1:9",
            "--rank",
            "1",
            "--nodes",
            "4",
            "--transport",
            "inproc",
        ],
    ] {
        let (code, out, err) = ftcoll(args);
        assert_eq!(code, 2, "{args:?}: {out} {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ftcoll: error: "), "{args:?}: {err}");
    }
}

/// The latency classes a network run reported.
fn class_names(v: &serde_json::Value) -> Vec<&str> {
    v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect()
}

#[test]
fn network_benchmark_survives_a_kill_inproc_and_udp() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    for transport in ["inproc", "udp"] {
        let v = json(&[
            "agree",
            "--transport",
            transport,
            "--nodes",
            "4",
            "--warmup",
            "20",
            "--agreements",
            "200",
            "--kill",
            "2@100",
            "--suspect-ms",
            "50",
            "--json",
        ]);
        assert_eq!(v["disagreements"], 0, "{transport}: {v}");
        assert_eq!(v["invalid"], 0, "{transport}: {v}");
        assert_eq!(v["unfinished"], 0, "{transport}: {v}");
        assert!(v["first_success_after_kill_us"].is_number(), "{transport}: {v}");
        // The detection is part of the recovery: it comes first.
        let detected = v["first_suspicion_after_kill_us"]
            .as_f64()
            .unwrap_or_else(|| panic!("no suspicion after the kill: {v}"));
        assert!(
            detected > 0.0 && detected <= v["first_success_after_kill_us"].as_f64().unwrap(),
            "{transport}: {v}"
        );
        let c = &v["transport_counters"];
        assert!(
            c["sent"].as_u64().unwrap() > 0 && c["received"].as_u64().unwrap() > 0,
            "{transport}: {v}"
        );
        // Standalone ACK datagrams per data datagram: UDP's, from the same counters; the
        // in-process transport sends none and reports none.
        match (transport, v["acks_per_data"].as_f64()) {
            ("udp", Some(q)) => {
                let (acks, sent) = (c["acks_sent"].as_u64().unwrap(), c["sent"].as_u64().unwrap());
                assert!((q - acks as f64 / sent as f64).abs() < 1e-12, "{v}");
            }
            ("inproc", None) => assert!(v["acks_per_data"].is_null(), "{v}"),
            _ => panic!("{transport}: acks_per_data {}", v["acks_per_data"]),
        }
        // The workers' preemptions are counted where the kernel tells.
        if std::path::Path::new("/proc/thread-self/status").exists() {
            assert!(v["preempted"].as_u64().is_some(), "{transport}: {v}");
        }
        let classes = class_names(&v);
        assert!(classes.contains(&"failure-detecting"), "{transport}: {v}");
        assert!(classes.contains(&"post-failure"), "{transport}: {v}");
        // The failure-free agreements against ERA in the LogGP simulator with this machine's
        // parameters (measured by a ping-pong on the same transport).
        let p = &v["prediction"];
        for k in ["os_ns", "or_ns", "l_ns", "unit_ns"] {
            assert!(
                p["model"][k].as_u64().is_some_and(|x| x > 0 || k == "l_ns"),
                "{transport}: {p}"
            );
        }
        for what in ["agreement", "node"] {
            let c = &p[what];
            let (m, pr) = (
                c["measured_p50_us"].as_f64().unwrap(),
                c["predicted_p50_us"].as_f64().unwrap(),
            );
            assert!(m > 0.0 && pr > 0.0, "{transport}: {p}");
            assert!(
                (c["ratio_p50"].as_f64().unwrap() - m / pr).abs() < 1e-9,
                "{transport}: {p}"
            );
        }
        // The failure-free class: the 20 warm-up ones are not measured, the rest before the kill are.
        assert!(p["agreements"].as_u64().unwrap() >= 90, "{transport}: {p}");
        // The node's own cost per hop (a 2-node agreement measured before the comparison) is
        // in the model's overheads, split between send and receive.
        let h = &p["node_hop"];
        let u = |k: &str| h[k].as_i64().unwrap();
        assert!(h["hop_ns"]["median"].as_f64().unwrap() > 0.0, "{transport}: {p}");
        assert_eq!(
            u("os_share_ns") + u("or_share_ns"),
            u("overhead_ns"),
            "{transport}: {p}"
        );
        // The node's hop is the measured one, longer or shorter than the transport's (the
        // model's hop is at least L + 2 ns: each o keeps 1 ns).
        let l_ns = p["model"]["l_ns"].as_i64().unwrap();
        let (hop, got) = (
            h["hop_ns"]["median"].as_f64().unwrap().round() as i64,
            u("transport_hop_ns") + u("overhead_ns"),
        );
        assert!(got == hop || (got > hop && got <= l_ns + 2), "{transport}: {p}");
        assert!(p["model"]["os_ns"].as_i64().unwrap() >= 1, "{transport}: {p}");
    }
    let v = json(&[
        "agree",
        "--transport",
        "inproc",
        "--nodes",
        "4",
        "--agreements",
        "20",
        "--no-model",
        "--json",
    ]);
    assert!(v["prediction"].is_null(), "{v}");
}

#[test]
fn stress_agree_runs_for_its_duration_without_disagreement() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let (code, out, err) = ftcoll(&[
        "stress",
        "agree",
        "--duration",
        "2",
        "--transport",
        "inproc",
        "--nodes",
        "6",
        "--agreements",
        "300",
    ]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("disagreements 0"), "{out}");
    let (code, _, err) = ftcoll(&["stress", "agree", "--max-kills", "8", "--nodes", "8"]);
    assert_eq!(code, 2, "{err}");
}

/// Four node processes, 300 agreements after 20, rank 2 SIGKILLed at the 100th.
const PROCS_KILL: &[&str] = &[
    "agree",
    "--procs",
    "--nodes",
    "4",
    "--warmup",
    "20",
    "--agreements",
    "300",
    "--kill",
    "2@100",
    "--json",
];

#[test]
fn procs_mode_survives_a_sigkill() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let v = json(PROCS_KILL);
    assert_eq!(v["procs"], true, "{v}");
    assert_eq!(v["disagreements"], 0, "{v}");
    assert_eq!(v["invalid"], 0, "{v}");
    assert_eq!(v["unfinished"], 0, "{v}");
    assert!(v["suspicions"].as_u64().unwrap() >= 1, "the SIGKILL was noticed: {v}");
    assert!(v["first_success_after_kill_us"].is_number(), "{v}");
    let detected = v["first_suspicion_after_kill_us"]
        .as_f64()
        .unwrap_or_else(|| panic!("no suspicion after the kill: {v}"));
    assert!(
        detected > 0.0 && detected <= v["first_success_after_kill_us"].as_f64().unwrap(),
        "{v}"
    );
    assert_eq!(v["agreements"], 320, "every agreement returned at the survivors: {v}");
    // The node processes report all their transport's counters: the killed process's mutex
    // on the launch's death board was marked owner-dead by the kernel before its port closed,
    // and the survivors' transports read it (`transport/death_watch.rs`; the closed port's
    // ICMP proof, which came first before the board, is tested by the UDP transport's own
    // tests, `src/transport/udp/tests/hostile.rs`).
    let c = &v["transport_counters"];
    assert!(c["died_on_host"].as_u64().unwrap() >= 1, "{v}");
    // Node processes: their workers' preemptions are theirs, not counted here.
    assert!(v["preempted"].is_null(), "{v}");
    let classes = class_names(&v);
    assert!(classes.contains(&"failure-detecting"), "{v}");
    assert!(classes.contains(&"post-failure"), "{v}");
    per_agreement_rows(&v, 300);
}

/// Without the death board (`FTCOLL_DEATH_BOARD=off`, for A/B runs) the survivors learn of
/// a SIGKILL from the closed port: it refused a datagram a survivor had in flight to it (DATA
/// not yet acknowledged, or the PROBE an earlier refusal triggered), and the ICMP error's
/// quote of it proved it.
#[test]
fn procs_mode_without_the_death_board_sees_the_closed_port() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let (code, out, err) = common::output(
        std::process::Command::new(env!("CARGO_BIN_EXE_ftcoll"))
            .args(PROCS_KILL)
            .env("FTCOLL_DEATH_BOARD", "off"),
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((&v["disagreements"], &v["unfinished"]), (&0.into(), &0.into()), "{v}");
    let c = &v["transport_counters"];
    assert_eq!(c["died_on_host"], 0, "no board: {v}");
    assert!(c["refused_probes"].as_u64().unwrap() >= 1, "{v}");
}

#[test]
fn a_stalled_live_process_is_fenced_not_left_to_disagree() {
    let _alone = ALONE.write().unwrap_or_else(|e| e.into_inner());
    // Rank 2 stops 30 ms (alive) while its neighbours suspect after 1 ms. The suspicion must
    // be enforced: rank 2 is fenced and stops, so it cannot go on deciding alone (before the
    // detector's suspicions reached the transport, it did: hundreds of disagreements).
    let v = json(&[
        "agree",
        "--procs",
        "--nodes",
        "4",
        "--warmup",
        "0",
        "--agreements",
        "300",
        "--suspect-ms",
        "1",
        "--stall",
        "2@100:30",
        "--allow-false-suspicions",
        "--no-model",
        "--json",
    ]);
    assert!(v["false_suspicions"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(v["disagreements"], 0, "{v}");
    assert_eq!(v["invalid"], 0, "{v}");
    assert_eq!(v["unfinished"], 0, "{v}");
}

/// The per-agreement rows of a run of `measured` agreements with one kill: every measured
/// agreement classed once (merged from the nodes' streams), none late.
fn per_agreement_rows(v: &serde_json::Value, measured: u64) {
    let classes = v["classes"].as_array().unwrap();
    let counted: u64 = classes.iter().map(|c| c["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, measured, "{v}");
    assert_eq!(
        classes.iter().find(|c| c["class"] == "failure-detecting").unwrap()["count"],
        1,
        "{v}"
    );
    for c in classes {
        let a = &c["agreement_us"];
        assert!(a["p50"].as_f64().unwrap() > 0.0, "{v}");
        // Per agreement: first entry to the last return, so never below a node's own.
        assert!(
            a["max"].as_f64().unwrap() >= c["node_us"]["p50"].as_f64().unwrap(),
            "{v}"
        );
    }
    assert_eq!(v["late_returns"], 0, "{v}");
    assert_eq!(v["bad_report_lines"], 0, "{v}");
    assert!(v["coordinator_peak_rss_kb"].as_u64().unwrap() > 0, "{v}");
}

#[test]
fn joined_processes_agree_through_rank_0_and_one_kills_itself() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    // Four processes launched apart (as Slurm or the netns script would), on loopback.
    let join = format!("127.0.0.1:{}", free_port());
    let args = |rank: u32| -> Vec<String> {
        let mut v: Vec<String> = ["agree", "--join", &join, "--nodes", "4", "--warmup", "20"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["--agreements", "300", "--kill", "2@100", "--join-timeout-ms", "20000"].map(String::from));
        v.extend(["--rank".to_string(), rank.to_string()]);
        v
    };
    let others: Vec<std::process::Child> = (1..4)
        .map(|r| {
            std::process::Command::new(env!("CARGO_BIN_EXE_ftcoll"))
                .args(args(r))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut root = args(0);
    root.push("--json".into());
    let root: Vec<&str> = root.iter().map(String::as_str).collect();
    let v = json(&root);
    for mut c in others {
        let st = c.wait().unwrap();
        // Rank 2 SIGKILLed itself; the others stopped when rank 0 closed their streams.
        assert!(st.success() || st.code().is_none(), "{st}");
    }
    assert_eq!(v["joined"], true, "{v}");
    assert_eq!(v["disagreements"], 0, "{v}");
    assert_eq!(v["unfinished"], 0, "{v}");
    assert_eq!(v["false_suspicions"], 0, "{v}");
    assert_eq!(v["agreements"], 320, "{v}");
    assert!(v["first_success_after_kill_us"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["first_suspicion_after_kill_us"].is_number(), "{v}");
    assert!(v["clock_uncertainty_us"].is_number(), "{v}");
    per_agreement_rows(&v, 300);
}

#[test]
fn duration_runs_stop_together_in_constant_memory() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let v = json(&[
        "agree",
        "--transport",
        "inproc",
        "--nodes",
        "4",
        "--duration",
        "1",
        "--json",
    ]);
    assert_eq!(v["unfinished"], 0, "{v}");
    assert_eq!(v["disagreements"], 0, "{v}");
    assert!(v["agreements"].as_u64().unwrap() > 100, "{v}");
    assert!(v["peak_rss_kb"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["era_stored_max"].as_u64().unwrap() <= 3,
        "GC keeps ERA's state small: {v}"
    );
    assert!(v["seconds"].as_f64().unwrap() >= 1.0, "{v}");
    for bad in [
        &["agree", "--duration", "0"][..],
        &["agree", "--duration", "5", "--kill", "1@3"],
        &["agree", "--procs", "--transport", "inproc"],
    ] {
        let (code, _, err) = ftcoll(bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err}");
    }
}

#[test]
fn stress_agree_procs_keeps_survivors_and_never_disagrees() {
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let (code, out, err) = ftcoll(&[
        "stress",
        "agree",
        "--procs",
        "--duration",
        "3",
        "--nodes",
        "4",
        "--agreements",
        "200",
    ]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("survivors keep their process"), "{out}");
    assert!(out.contains("disagreements 0"), "{out}");
    let totals = out.lines().nth(1).unwrap_or_default();
    let num = |key: &str| -> u64 {
        let at = totals.find(key).unwrap_or_else(|| panic!("{key} in {out}")) + key.len();
        totals[at..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (gens, failures, started) = (num("s, "), num("failures tolerated"), num("nodes started"));
    assert!(gens >= 2 && failures >= 1, "{out}");
    // Survivors carried over: only the first group and the replacements were started.
    assert!(started < 4 * gens, "{out}");
    assert!(started >= 4 + failures.saturating_sub(2), "{out}");
}

/// Differential: `agree --procs`'s node processes are members of a group of processes
/// (`group::Member`, joined at the parent's rendezvous); the same benchmark among threads
/// (`agree --transport udp`) must return the same outcome for every agreement with the same
/// seed (the contributions come from the seed, the rank and the agreement's id), and another
/// seed must not.
#[test]
fn procs_members_return_what_threads_return_for_the_same_seed() {
    use ftcoll::runtime::agree::{AgreeBench, AgreeTransport};
    use std::time::Duration;
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let b = AgreeBench {
        n: 4,
        era: ftcoll::protocol::agree::EraConfig::default(),
        transport: AgreeTransport::Udp,
        workers: 1,
        pin: false,
        warmup: 20,
        iterations: 3000,
        duration: None,
        kills: vec![],
        stalls: Vec::new(),
        heartbeat: Duration::from_millis(1),
        suspect_after: Duration::from_millis(500),
        op_timeout: Duration::from_secs(10),
        seed: 11,
    };
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_ftcoll"));
    let procs = ftcoll::experiment::launch::agree::run(&b, exe).unwrap();
    let threads = ftcoll::experiment::agree_local::run(&b).unwrap();
    for r in [&procs, &threads] {
        assert_eq!(
            (r.agreements, r.disagreements, r.unfinished, r.invalid),
            (3020, 0, 0, 0)
        );
    }
    assert!(!procs.digests.is_empty());
    assert_eq!(procs.digests, threads.digests);
    let other = ftcoll::experiment::launch::agree::run(&AgreeBench { seed: 12, ..b }, exe).unwrap();
    assert_eq!(other.digests.len(), procs.digests.len());
    assert_ne!(other.digests, procs.digests);
}

/// A node process whose parent is gone (SIGKILLed: no destructor kills its children) stops
/// its stream when its input ends, instead of running out the stream's duration.
#[test]
fn node_processes_stop_when_their_parent_dies() {
    use std::time::{Duration, Instant};
    let _alone = ALONE.read().unwrap_or_else(|e| e.into_inner());
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_ftcoll"))
        .args(["agree", "--procs", "--nodes", "3", "--duration", "120", "--no-model"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let nodes = loop {
        let found = common::children_with(parent.id(), "agree-node");
        if found.len() == 3 {
            break found;
        }
        assert!(Instant::now() < deadline, "the node processes did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Into the stream (they joined, started, and run their agreements for two minutes).
    std::thread::sleep(Duration::from_millis(1500));
    let alive = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"));
    assert!(
        nodes.iter().all(|&p| alive(p)),
        "a node process ended before its parent"
    );
    parent.kill().unwrap();
    parent.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while nodes.iter().any(|&p| alive(p)) {
        assert!(
            Instant::now() < deadline,
            "node processes still run 20 s after their parent died: {nodes:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
