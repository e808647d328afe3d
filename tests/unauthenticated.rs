//! Commands whose UDP datagrams carry no MAC (`logp`, `boot-node` without a key) keep to
//! loopback unless `--auth off` is given: then they say so in one warning line.

mod common;
use common::ftcoll;

/// Addresses from TEST-NET-1 (RFC 5737): not loopback, and on no interface of the test host,
/// so a run allowed past the check fails at its bind.
const A: &str = "192.0.2.1";
const B: &str = "192.0.2.2";

#[test]
fn logp_between_hosts_is_refused_without_auth_off() {
    let between = format!("{A},{B}");
    let (code, _, err) = ftcoll(&["logp", "--between", &between, "--rank", "0", "--reps", "10"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("non-loopback address 192.0.2.1") && err.contains("--auth off"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // Said explicitly: one warning, then the run goes on (and fails at its bind here).
    let (code, _, err) = ftcoll(&[
        "logp",
        "--between",
        &between,
        "--rank",
        "0",
        "--reps",
        "10",
        "--auth",
        "off",
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(!err.contains("give --auth off"), "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("WARNING") && l.contains("NOT authenticated"))
            .count(),
        1,
        "{err}"
    );
    // Loopback needs nothing (the other side is missing: it fails later, not at the check).
    let (_, _, err) = ftcoll(&[
        "logp",
        "--between",
        "127.0.0.1,127.0.0.2",
        "--rank",
        "9",
        "--reps",
        "10",
    ]);
    assert!(!err.contains("--auth off"), "{err}");
}

#[test]
fn logp_rendezvous_on_a_non_loopback_bind_is_refused() {
    let dir = std::env::temp_dir().join(format!("ftcoll-unauth-{}", std::process::id()));
    let d = dir.display().to_string();
    let (code, _, err) = ftcoll(&["logp", "--rendezvous", &d, "--rank", "0", "--nodes", "2", "--bind", A]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--auth off"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn boot_node_without_a_key_is_refused_off_loopback() {
    let bind = format!("{A}:0");
    let run = |extra: &[&str], key: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_ftcoll"));
        c.args([
            "boot-node",
            "--rank",
            "0",
            "--nodes",
            "2",
            "--bind",
            &bind,
            "--timeout-s",
            "1",
        ])
        .args(extra)
        .env_remove("FTCOLL_KEY");
        if let Some(k) = key {
            c.env("FTCOLL_KEY", k);
        }
        let o = c.output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[], None);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("boot-node without FTCOLL_KEY") && err.contains("--auth off"),
        "{err}"
    );
    // With the job key (and the run's id) it is authenticated: past the check (it fails to
    // bind here).
    let (code, err) = run(&["--run-id", "t"], Some("000102030405060708090a0b0c0d0e0f"));
    assert_ne!(code, 0);
    assert!(!err.contains("--auth off") && err.contains("cannot bind"), "{err}");
    let (code, err) = run(&["--auth", "off"], None);
    assert_ne!(code, 0);
    assert!(err.contains("WARNING") && err.contains("cannot bind"), "{err}");
}
