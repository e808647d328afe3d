//! `--transport verbs` through the binary: on a build without the `rdma` feature it says how
//! to rebuild; with the feature on a machine without an RDMA device it names the missing
//! device; both exit with code 2 and one line.

mod common;

use common::ftcoll;

/// Exit code 2, nothing on stdout, exactly one `ftcoll: error:` line containing `want`.
fn fails_with(args: &[&str], want: &str) {
    let (code, out, err) = ftcoll(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?}: {out}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("ftcoll: error: "), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

const BENCH: &[&str] = &["bench", "--transport", "verbs", "--iterations", "10", "--warmup", "1"];
const LOGP: &[&str] = &["logp", "--transport", "verbs", "--reps", "10"];
/// A launched run's rank 0 (coordinator and node) and rank 1: the device is checked before
/// the rendezvous, so neither waits for a peer that cannot come.
const JOIN0: &[&str] = &[
    "bench",
    "--join",
    "127.0.0.1:47311",
    "--rank",
    "0",
    "--nodes",
    "2",
    "--transport",
    "verbs",
];
const JOIN1: &[&str] = &[
    "node",
    "--join",
    "127.0.0.1:47311",
    "--rank",
    "1",
    "--nodes",
    "2",
    "--transport",
    "verbs",
];
const AGREE: &[&str] = &["agree", "--transport", "verbs", "--nodes", "4", "--agreements", "10"];
/// `agree --join` over verbs as rank 0 (coordinator and node) or 1: the same device check
/// before the rendezvous as `bench --join`.
fn agree_join(rank: &'static str) -> Vec<&'static str> {
    let mut v = vec!["agree"];
    v.extend(JOIN1[1..].iter().map(|&a| if a == "1" { rank } else { a }));
    v
}

/// `ftcoll node` over verbs with its connection data in rendezvous directory `d`.
fn node_over_rendezvous(d: &str) -> Vec<&str> {
    vec![
        "node",
        "--transport",
        "verbs",
        "--rendezvous",
        d,
        "--rank",
        "0",
        "--nodes",
        "2",
        "--control",
        "127.0.0.1:9",
    ]
}

#[cfg(not(feature = "rdma"))]
#[test]
fn without_the_feature_verbs_says_to_rebuild() {
    let (aj0, aj1) = (agree_join("0"), agree_join("1"));
    for args in [BENCH, LOGP, JOIN0, JOIN1, AGREE, &aj0, &aj1] {
        fails_with(args, "rebuild with `cargo build --release --features rdma`");
        fails_with(args, "--transport udp");
    }
    let dir = std::env::temp_dir().join(format!("ftcoll-verbs-cli-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    fails_with(&node_over_rendezvous(d), "--features rdma");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "rdma")]
#[test]
fn with_the_feature_and_no_device_verbs_names_what_is_missing() {
    // Only where libibverbs finds no device (it lists /sys/class/infiniband_verbs).
    if std::fs::read_dir("/sys/class/infiniband_verbs").is_ok_and(|mut d| d.next().is_some()) {
        return;
    }
    let (aj0, aj1) = (agree_join("0"), agree_join("1"));
    for args in [BENCH, LOGP, JOIN0, JOIN1, AGREE, &aj0, &aj1] {
        fails_with(args, "no RDMA device");
        fails_with(args, "use --transport udp");
    }
    fails_with(&[BENCH, &["--device", "mlx5_0"]].concat(), "no RDMA device");
    let dir = std::env::temp_dir().join(format!("ftcoll-verbs-cli-dev-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    fails_with(
        &[LOGP, &["--rendezvous", d, "--rank", "1", "--nodes", "2"]].concat(),
        "no RDMA device",
    );
    fails_with(&node_over_rendezvous(d), "no RDMA device");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn agree_procs_and_stress_procs_refuse_verbs() {
    fails_with(&[AGREE, &["--procs"]].concat(), "--procs runs over UDP");
    fails_with(
        &["stress", "agree", "--procs", "--transport", "verbs", "--duration", "1"],
        "--procs runs over UDP",
    );
}

#[test]
fn verbs_flags_are_checked_in_every_build() {
    fails_with(
        &["bench", "--gid-index", "1"],
        "--gid-index applies to --transport verbs only",
    );
    fails_with(
        &["logp", "--device", "mlx5_0"],
        "--device applies to --transport verbs only",
    );
    fails_with(
        &[BENCH, &["--retry-count", "8"]].concat(),
        "--retry-count must be in 0..=7",
    );
    fails_with(&[LOGP, &["--port", "0"]].concat(), "--port must be at least 1");
    fails_with(
        &[BENCH, &["--inline-size", "913"]].concat(),
        "--inline-size must be at most 912",
    );
    fails_with(
        &["bench", "--inline-size", "64"],
        "--inline-size applies to --transport verbs only",
    );
    fails_with(
        &["bench", "--join", "127.0.0.1:9", "--rank", "0", "--transport", "inproc"],
        "--join needs --transport udp or verbs",
    );
    fails_with(
        &[JOIN1, &["--verbs-dir", "/tmp/x"]].concat(),
        "--verbs-dir does not apply to --join",
    );
    fails_with(&[BENCH, &["--port", "x"]].concat(), "invalid value 'x'");
    fails_with(
        &[LOGP, &["--rendezvous", "/tmp/x", "--rank", "2", "--nodes", "2"]].concat(),
        "rank 2 of 2",
    );
    fails_with(&["logp", "--rank", "0"], "--rendezvous");
    fails_with(
        &[
            "node",
            "--verbs-dir",
            "/tmp/x",
            "--hostfile",
            "/dev/null",
            "--rank",
            "0",
            "--nodes",
            "2",
            "--control",
            "127.0.0.1:9",
        ],
        "--verbs-dir applies to --transport verbs only",
    );
    fails_with(
        &[
            "node",
            "--transport",
            "verbs",
            "--hostfile",
            "/dev/null",
            "--rank",
            "0",
            "--nodes",
            "2",
            "--control",
            "127.0.0.1:9",
        ],
        "--transport verbs needs --rendezvous DIR",
    );
}
