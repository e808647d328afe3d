//! `ftcoll logp --rendezvous`: LogP between processes (here over UDP on loopback; the same
//! code runs over verbs between hosts): rank 0 reports every other rank, the others answer.

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
    assert_eq!(p["direct"]["samples"], 100);
    assert!(p["direct"]["rtt_ns"].as_u64().unwrap() > 0);
    let q = |k: &str| p["prtt"][k].as_u64().unwrap();
    assert!(
        q("prtt_1_0_ns") > 0 && q("prtt_n_0_ns") > 0 && q("prtt_n_d_ns") > 0,
        "{p}"
    );
    assert_eq!(q("d_ns"), 2 * q("prtt_1_0_ns"), "{p}");
    // 110 pings, 110 + 2·110·4 PRTT messages, the end marker.
    assert_eq!(s["served"], 110 + 110 + 2 * 110 * 4 + 1);
}
