//! End-to-end tests of `ftcoll bootstrap --kill`: local node processes boot, some are
//! SIGKILLed, the survivors detect it, spread failure notices and repair the overlay, and every
//! survivor's state is the legitimate BMG over the survivors. Loopback only; bounded by
//! `--timeout-s`.

mod common;

use common::{ftcoll, json};

#[test]
fn killed_nodes_are_noticed_and_the_overlay_repaired() {
    // The launch tree of 8 has ring (preorder) 0 1 3 7 5 2 6 4 (children of 1: 3, 5; of 3: 7).
    for (nodes, kill, ring) in [
        // 3's child 7 takes its place among 1's children, before 5.
        ("8", "3", Some(vec![0u64, 1, 7, 5, 2, 6, 4])),
        // A dead root: its first child 1 becomes the root and adopts 2 and 4 after its own.
        ("8", "0", Some(vec![1, 3, 7, 5, 2, 6, 4])),
        ("12", "2,5", None),
    ] {
        let v = json(&[
            "bootstrap",
            "--nodes",
            nodes,
            "--kill",
            kill,
            "--timeout-s",
            "20",
            "--json",
        ]);
        let killed: Vec<u64> = kill.split(',').map(|k| k.parse().unwrap()).collect();
        assert_eq!(v["killed"].as_array().unwrap().len(), killed.len(), "{v}");
        let survivors = nodes.parse::<u64>().unwrap() - killed.len() as u64;
        assert_eq!(v["survivors"], survivors, "{v}");
        assert_eq!(v["legitimate"], survivors, "{v}");
        // The mended launch tree's preorder: every survivor once.
        let got: Vec<u64> = v["ring"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        let want: Vec<u64> = (0..survivors + killed.len() as u64)
            .filter(|r| !killed.contains(r))
            .collect();
        assert_eq!(sorted, want, "{v}");
        if let Some(ring) = ring {
            assert_eq!(got, ring);
        }
        assert!(v["detectors"].as_u64().unwrap() >= 1, "{v}");
        assert!(
            v["notice_rounds"].as_u64().unwrap() <= v["notice_span"].as_u64().unwrap(),
            "{v}"
        );
        for k in ["detect_ms", "spread_ms", "repair_ms", "total_ms"] {
            assert!(v[k].as_f64().unwrap() >= 0.0, "{k}: {v}");
        }
        assert!(
            ["icmp", "heartbeat"].contains(&v["detected_by"].as_str().unwrap()),
            "{v}"
        );
    }
}

#[test]
fn kill_flags_are_checked() {
    for (args, msg) in [
        (&["bootstrap", "--nodes", "8", "--kill", "8"][..], "not below --nodes"),
        (&["bootstrap", "--nodes", "4,8", "--kill", "1"], "single size"),
        (&["bootstrap", "--nodes", "3", "--kill", "1,2"], "at least 2"),
        (
            &[
                "bootstrap",
                "--nodes",
                "4",
                "--kill",
                "1",
                "--suspect-ms",
                "10",
                "--heartbeat-ms",
                "20",
            ],
            "below --suspect-ms",
        ),
        (&["bootstrap", "--nodes", "4", "--kill", "x"], "invalid value"),
    ] {
        let (code, out, err) = ftcoll(args);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(err.contains(msg) && err.lines().count() <= 4, "{args:?}: {err}");
    }
}

#[test]
fn simulated_notices_meet_theorems_1_and_2() {
    let v = json(&[
        "sim",
        "--algo",
        "failure-notices",
        "--nodes",
        "40",
        "--runs",
        "50",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.len() >= 10, "{v}");
    for r in rows {
        let l = r["log_m"].as_u64().unwrap();
        assert!(r["no_fault"].as_u64().unwrap() <= l, "{r}");
        assert!(r["one_fault"].as_u64().unwrap() <= l + 2, "{r}");
        assert!(
            r["neighbours"].as_u64().is_some() && r["tried"].as_u64().unwrap() > 0,
            "{r}"
        );
    }
    let (code, _, err) = ftcoll(&["sim", "--algo", "failure-notices", "--nodes", "5000"]);
    assert!(code != 0 && err.contains("up to 4096"), "{err}");
}
