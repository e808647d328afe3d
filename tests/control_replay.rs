//! A launched run's control plane against datagrams recorded in an earlier run with the same
//! job key: the coordinator's challenge–response refuses a hello that is not sealed for this
//! run, counts it, and the run completes.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::free_port;
use ftcoll::transport::udp::auth::AuthKey;
use ftcoll::wire::control::{Msg, encode};
use ftcoll::wire::mac::sealed;

const KEY: &str = "0f0e0d0c0b0a09080706050403020100";

/// Rank 2's hello as a launched node sealed it with the job key alone: byte for byte what an
/// eavesdropper recorded in an earlier run with the same key, seed and size, with the address
/// it named then (now nobody's).
#[test]
fn a_hello_of_an_earlier_run_is_refused_and_the_run_completes() {
    let join = format!("127.0.0.1:{}", free_port());
    let common = |rank: u32| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ftcoll"));
        c.args(["bench", "--join", &join, "--rank", &rank.to_string(), "--nodes", "3"])
            .args([
                "--iterations",
                "50",
                "--warmup",
                "5",
                "--poll",
                "blocking",
                "--no-model",
            ])
            .args(["--seed", "11", "--o-ns", "1000", "--L-ns", "2000"])
            .args(["--join-timeout-ms", "8000"])
            .env("FTCOLL_KEY", KEY);
        c
    };
    let root = common(0)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let one = common(1).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // The recording, replayed at the coordinator before (and while) the real rank 2 joins.
    let key = AuthKey::from_hex(KEY).unwrap();
    let job = ftcoll::experiment::launch::job::bench(11);
    let hello = Msg::Join {
        addr: "127.0.0.1:9".parse().unwrap(),
        shape: 0,
    };
    let recorded = sealed(Some(&key), &encode(job, 2, &hello));
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        let _ = attacker.send_to(&recorded, &join);
        std::thread::sleep(Duration::from_millis(2));
    }
    let two = common(2).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    for _ in 0..50 {
        let _ = attacker.send_to(&recorded, &join);
        std::thread::sleep(Duration::from_millis(2));
    }
    for c in [one, two] {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let out = root.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("refused") && err.contains("hello"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["measured_ops"], 50, "{v}");
    assert_eq!(v["violations"], 0, "{v}");
}

/// Ports handed to a child process are drawn where the kernel never picks a port for anyone
/// else (below its ephemeral range), so they cannot be taken between the check and the bind.
#[test]
fn free_ports_for_children_lie_outside_the_kernels_ephemeral_range() {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
    for &p in &ports {
        assert!(p < low, "port {p} is in the ephemeral range (from {low})");
    }
    let mut d = ports.clone();
    d.sort_unstable();
    d.dedup();
    assert_eq!(d.len(), ports.len(), "distinct: {ports:?}");
}
