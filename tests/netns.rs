//! Multi-host runs on an emulated cluster: `cluster-scripts/netns-cluster.sh` puts each node in
//! its own network namespace with its own IP on a private bridge, the nodes rendezvous through
//! rank 0 (`bench --join`), and hosts crash for real (a node SIGKILLs itself; the script kills
//! a host's process from outside; a host's link is cut). Needs root and iproute2: skipped with
//! a message otherwise. Bounded by the script's timeout; traffic stays inside the namespaces.

use std::path::Path;
use std::process::Command;

fn usable() -> Result<(), String> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        return Err("not root".into());
    }
    let ip = Command::new("ip").args(["netns", "list"]).output();
    match ip {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("iproute2's `ip netns` is not available".into()),
    }
}

/// Runs the script with `script` flags and `bench` flags after `--` (every run measures with
/// a given L and o and no model: the tests check consistency, not latency); returns (exit
/// code, stdout, stderr).
fn cluster(script: &str, bench: &str) -> (i32, String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster-scripts/netns-cluster.sh");
    let out = Command::new("bash")
        .arg(path)
        .args(["--bin", env!("CARGO_BIN_EXE_ftcoll"), "--timeout", "120"])
        .args(script.split_whitespace())
        .arg("--")
        .args(bench.split_whitespace())
        .args(["--poll", "blocking", "--no-model", "--o-ns", "1000", "--L-ns", "2000"])
        .output()
        .expect("run netns-cluster.sh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn field(out: &str, name: &str) -> u64 {
    let at = out.find(name).unwrap_or_else(|| panic!("no '{name}' in:\n{out}")) + name.len();
    out[at..]
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("'{name}' has no number in:\n{out}"))
}

#[test]
fn four_hosts_survive_a_self_sigkill_an_outside_kill_and_a_cut_link() {
    if let Err(why) = usable() {
        eprintln!("skipped: the emulated cluster needs root and `ip netns` ({why})");
        return;
    }
    let (rc, out, err) = cluster(
        "--hosts 4 --crash 3@1.0 --cut 2@1.5",
        "--iterations 4000 --warmup 100 --kill 1@300:sigkill",
    );
    assert_eq!(rc, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("nodes=4 transport=Udp (launched"), "{out}");
    assert_eq!(field(&out, "consistency violations:"), 0, "{out}");
    assert_eq!(field(&out, "operations:"), 4000, "{out}");
    // Every host the run lost was noticed: the self-killed one by its report, the other two by
    // their silence (the harness's detector), unless the run ended before their crash.
    assert!(err.contains("crash: SIGKILL of host 3"), "{err}");
}

#[test]
fn four_hosts_agree_through_rank_0_with_one_sigkill() {
    if let Err(why) = usable() {
        eprintln!("skipped: the emulated cluster needs root and `ip netns` ({why})");
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster-scripts/netns-cluster.sh");
    let out = Command::new("bash")
        .arg(path)
        .args(["--bin", env!("CARGO_BIN_EXE_ftcoll"), "--timeout", "120"])
        .args(["--hosts", "4", "--agree", "--"])
        .args(["--warmup", "100", "--agreements", "2000", "--kill", "3@1000"])
        .args(["--join-timeout-ms", "30000", "--json"])
        .output()
        .expect("run netns-cluster.sh");
    let (rc, text, err) = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(rc, 0, "stdout:\n{text}\nstderr:\n{err}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["joined"], true, "{v}");
    assert_eq!(v["disagreements"], 0, "{v}");
    assert_eq!(v["unfinished"], 0, "{v}");
    assert_eq!(v["agreements"], 2100, "{v}");
    assert!(v["first_success_after_kill_us"].as_f64().unwrap() > 0.0, "{v}");
    let counted: u64 = v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 2000, "every measured agreement classed once: {v}");
}

#[test]
fn bad_script_input_is_one_line_and_exit_2() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster-scripts/netns-cluster.sh");
    for (args, msg) in [
        (vec!["--hosts", "1"], "--hosts must be 2..200"),
        (vec!["--delay", "fast"], "--delay must look like"),
        (vec!["--crash", "9@1"], "is not below --hosts"),
        (vec!["--bogus"], "unknown option"),
        (vec!["--agree", "--boot"], "exclude each other"),
    ] {
        let out = Command::new("bash").arg(&script).args(&args).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg) && err.trim().lines().count() == 1, "{args:?}: {err}");
    }
}

#[test]
fn five_hosts_given_only_their_parents_address_bootstrap_and_broadcast() {
    if let Err(why) = usable() {
        eprintln!("skipped: the emulated cluster needs root and `ip netns` ({why})");
        return;
    }
    let (rc, out, err) = cluster(
        "--hosts 5 --boot",
        "--iterations 1000 --warmup 100 --kill 2@500:sigkill",
    );
    assert_eq!(rc, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("bootstrapped by the BMG overlay"), "{out}");
    assert_eq!(field(&out, "consistency violations:"), 0, "{out}");
    assert_eq!(field(&out, "operations:"), 1000, "{out}");
}
