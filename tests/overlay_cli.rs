//! End-to-end tests of `ftcoll sim --algo bmg-build | dissemination`.

mod common;

use common::{ftcoll, json};

#[test]
fn bmg_build_converges_on_every_launch_tree_and_scheduler() {
    let v = json(&[
        "sim",
        "--algo",
        "bmg-build",
        "--nodes",
        "256",
        "--launch-tree",
        "binomial,binary,random:3",
        "--runs",
        "2",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    for tree in ["binomial", "binary", "random:3"] {
        for sched in ["synchronous", "asynchronous"] {
            let mine: Vec<_> = rows
                .iter()
                .filter(|r| r["tree"] == tree && r["scheduler"] == sched)
                .collect();
            assert!(mine.len() >= 2, "{tree} {sched}: {v}");
            for r in mine {
                for c in r["results"].as_array().unwrap() {
                    assert_eq!(c["closed"], true, "{r}");
                    assert!(c["bmg_phases"].as_u64().unwrap() >= c["ring_phases"].as_u64().unwrap());
                    assert!(c["nodes"].is_null() && c["n"].as_u64().unwrap() <= 256);
                }
            }
        }
    }
    // §4: the ring on a binomial tree takes a constant number of synchronous phases.
    let ring: Vec<u64> = rows
        .iter()
        .filter(|r| r["tree"] == "binomial" && r["scheduler"] == "synchronous" && r["depth"].as_u64() >= Some(2))
        .map(|r| r["results"][0]["ring_phases"].as_u64().unwrap())
        .collect();
    assert!(ring.len() >= 6 && ring.iter().all(|&x| x == ring[0]), "{ring:?}");
}

#[test]
fn bmg_build_self_stabilizes_from_the_cli() {
    let (code, out, err) = ftcoll(&[
        "sim",
        "--algo",
        "bmg-build",
        "--nodes",
        "64",
        "--corrupted",
        "--launch-tree",
        "binary",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("start=corrupted"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("binary")).collect();
    assert!(rows.len() >= 8, "{out}");
    assert!(rows.iter().all(|l| l.trim_end().ends_with("1/1")), "{out}");
}

#[test]
fn bmg_build_repairs_itself_after_crashes() {
    let v = json(&[
        "sim",
        "--algo",
        "bmg-build",
        "--nodes",
        "128",
        "--crashes",
        "3",
        "--launch-tree",
        "binomial",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    let big: Vec<_> = rows.iter().filter(|r| r["depth"] == 7).collect();
    assert_eq!(big.len(), 2, "both schedulers: {v}");
    for r in big {
        let repairs = r["repairs"][0].as_array().unwrap();
        assert_eq!(repairs.len(), 3, "{r}");
        for (k, x) in repairs.iter().enumerate() {
            let c = &x[1];
            assert_eq!(c["closed"], true, "{r}");
            assert_eq!(c["n"].as_u64(), Some(127 - k as u64), "{r}");
        }
    }
}

#[test]
fn dissemination_meets_theorems_1_to_3() {
    let v = json(&["sim", "--algo", "dissemination", "--nodes", "40", "--json"]);
    for r in v["rows"].as_array().unwrap() {
        let l = r["log_n"].as_u64().unwrap();
        assert_eq!(r["rounds_no_fault"].as_u64(), Some(l), "{r}");
        if r["n"].as_u64().unwrap() >= 3 {
            assert!(r["rounds_one_fault"].as_u64().unwrap() <= l + 2, "{r}");
            assert_eq!(r["reorganize_agreed"], true, "{r}");
            assert_eq!(r["failed_tried"], r["n"], "every machine tried up to 64");
        }
    }
}

#[test]
fn bootstrap_boots_processes_given_only_their_parents_address() {
    let (code, out, err) = ftcoll(&["bootstrap", "--nodes", "4,12", "--json"]);
    assert_eq!(code, 0, "{err}");
    let runs: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(runs.len(), 2, "{out}");
    for (r, n) in runs.iter().zip([4, 12]) {
        assert_eq!(r["nodes"], n);
        assert_eq!(r["tables_complete"], true);
        assert_eq!(r["dropped"], 0);
        let (ring, bmg, gather) = (r["ring_ms"].as_f64(), r["bmg_ms"].as_f64(), r["gather_ms"].as_f64());
        assert!(ring > Some(0.0) && bmg >= ring && gather >= bmg, "{r}");
        assert!(r["boot_ms"].as_f64() >= r["table_ms"].as_f64(), "{r}");
    }
}

#[test]
fn overlay_misuse_is_one_line_and_exit_2() {
    for args in [
        &["sim", "--algo", "bmg-build", "--launch-tree", "ternary"][..],
        &["sim", "--algo", "bmg-build", "--launch-tree", "random:0"],
        &["sim", "--algo", "bmg-build", "--refresh", "0"],
        &["sim", "--algo", "bmg-build", "--nodes", "1"],
        &["sim", "--algo", "bmg-build", "--tree", "binomial"],
        &["sim", "--algo", "dissemination", "--nodes", "100000"],
        &["sim", "--algo", "dissemination", "--launch-tree", "binary"],
        &["sim", "--algo", "dissemination", "--crashes", "1"],
        &["sim", "--algo", "big", "--launch-tree", "binary"],
        &["sim", "--algo", "bmg-build", "--scheduler", "sometimes"],
        &["model", "--algo", "dissemination"],
        &["bootstrap", "--nodes", "1"],
        &["sim", "--algo", "bmg-build", "--nodes", "4294967295"],
        &["bootstrap", "--nodes", "4,x"],
        &["boot-node", "--rank", "1", "--nodes", "4"],
        &["boot-node", "--rank", "0", "--nodes", "4", "--parent", "127.0.0.1:9"],
        &["boot-node", "--rank", "5", "--nodes", "4", "--parent", "127.0.0.1:9"],
        &["boot-node", "--rank", "1", "--nodes", "4", "--parent", "localhost"],
        &[
            "boot-node",
            "--rank",
            "1",
            "--nodes",
            "4",
            "--parent",
            "127.0.0.1:9",
            "--tick-us",
            "0",
        ],
    ] {
        let (code, out, err) = ftcoll(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.starts_with("ftcoll: error: "), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}
