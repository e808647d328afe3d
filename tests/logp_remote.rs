//! `ftcoll logp --rendezvous`: LogP between processes (here over UDP on loopback; the same
//! code runs over verbs between hosts): rank 0 reports every other rank, the others answer.

mod common;

use std::process::{Command, Stdio};

#[test]
fn two_processes_measure_each_other_through_a_rendezvous_directory() {
    let dir = std::env::temp_dir().join(format!("ftcoll-logp-remote-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let spawn = |rank: &str| {
        Command::new(env!("CARGO_BIN_EXE_ftcoll"))
            .args(["logp", "--rendezvous", d, "--nodes", "2", "--rank", rank])
            .args(["--reps", "100", "--n", "4", "--json", "--rendezvous-timeout", "20"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ftcoll")
    };
    let server = spawn("1");
    let client = spawn("0").wait_with_output().unwrap();
    let server = server.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(client.status.success(), "client: {}", text(&client));
    assert!(server.status.success(), "server: {}", text(&server));
    let c: serde_json::Value = serde_json::from_slice(&client.stdout).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&server.stdout).unwrap();
    let p = &c["peers"][0];
    assert_eq!(p["peer"], 1);
    // At least --reps round trips and at least 50 ms of them (`runtime::logp::MIN_CALIBRATION`),
    // those the measuring thread was preempted in left out and counted.
    let samples = p["direct"]["samples"].as_u64().unwrap();
    let away = p["direct"]["preempted"].as_u64().unwrap_or(0);
    assert!(samples >= 100, "{p}");
    assert!(p["direct"]["rtt_ns"].as_u64().unwrap() > 0);
    let q = |k: &str| p["prtt"][k].as_u64().unwrap();
    assert!(
        q("prtt_1_0_ns") > 0 && q("prtt_n_0_ns") > 0 && q("prtt_n_d_ns") > 0,
        "{p}"
    );
    assert_eq!(q("d_ns"), 2 * q("prtt_1_0_ns"), "{p}");
    // 10 unmeasured pings and the measured ones, 110 + 2·110·4 PRTT messages, the end marker.
    assert_eq!(s["served"], 10 + samples + away + 110 + 2 * 110 * 4 + 1);
}

/// Runs `args` for ranks 1.. in the background and rank 0 in the foreground; returns rank 0's
/// JSON after every rank succeeded.
fn measure(args: &dyn Fn(&str) -> Vec<String>, ranks: u32) -> serde_json::Value {
    let spawn = |rank: &str| {
        Command::new(env!("CARGO_BIN_EXE_ftcoll"))
            .args(args(rank))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ftcoll")
    };
    let servers: Vec<_> = (1..ranks).map(|r| spawn(&r.to_string())).collect();
    let client = spawn("0").wait_with_output().unwrap();
    for s in servers {
        let o = s.wait_with_output().unwrap();
        assert!(o.status.success(), "server: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(
        client.status.success(),
        "client: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    serde_json::from_slice(&client.stdout).unwrap()
}

/// A saved calibration is one `bench --params` takes: its samples and medians as written.
/// A saved calibration of at least `samples` round trips (see the first test), and `bench`
/// runs on it.
fn check_calibration(path: &std::path::Path, samples: u64) {
    let cal: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(cal["samples"].as_u64().unwrap() >= samples, "{cal}");
    assert_eq!(cal["transport"], "udp");
    for k in ["os_ns", "or_ns", "L_ns"] {
        let c = &cal[k];
        assert!(
            c["lo"].as_f64() <= c["median"].as_f64() && c["median"].as_f64() <= c["hi"].as_f64(),
            "{c}"
        );
    }
    let b = ftcoll_json(&[
        "bench",
        "--nodes",
        "2",
        "--iterations",
        "20",
        "--warmup",
        "5",
        "--params",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert!(b["logp_estimate"].is_null(), "the calibration, no fresh estimate: {b}");
    assert_eq!(b["calibration"]["samples"], cal["samples"], "{b}");
}

fn ftcoll_json(args: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_ftcoll")).args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn rank_0_saves_a_calibration_of_its_peers_round_trips() {
    // Through a rendezvous directory: three processes, the round trips with both peers pooled.
    let dir = std::env::temp_dir().join(format!("ftcoll-logp-save-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cal = dir.join("cal.json");
    let (d, c) = (dir.join("rdv"), cal.to_str().unwrap().to_string());
    let d = d.to_str().unwrap().to_string();
    let v = measure(
        &|rank| {
            let mut a: Vec<String> = [
                "logp",
                "--rendezvous",
                &d,
                "--nodes",
                "3",
                "--rank",
                rank,
                "--reps",
                "100",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            a.extend(["--n", "4", "--json", "--rendezvous-timeout", "20"].map(String::from));
            if rank == "0" {
                a.extend(["--save".to_string(), c.clone()]);
            }
            a
        },
        3,
    );
    // Both peers' round trips pooled.
    let peers: u64 = (0..2)
        .map(|i| v["peers"][i]["direct"]["samples"].as_u64().unwrap())
        .sum();
    assert_eq!(v["calibration"]["samples"], peers, "{v}");
    check_calibration(&cal, 200);
    // Between two hosts (here two loopback addresses).
    let port = common::free_port().to_string();
    std::fs::remove_file(&cal).unwrap();
    measure(
        &|rank| {
            let mut a: Vec<String> = [
                "logp",
                "--between",
                "127.0.0.1,127.0.0.2",
                "--udp-port",
                &port,
                "--rank",
                rank,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            a.extend(["--reps", "100", "--n", "4", "--json"].map(String::from));
            if rank == "0" {
                a.extend(["--save".to_string(), c.clone()]);
            }
            a
        },
        2,
    );
    check_calibration(&cal, 100);
    let _ = std::fs::remove_dir_all(&dir);
}
