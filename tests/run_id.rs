//! Runs with no rank 0 to hand out a nonce (`node --rendezvous`, `bench --boot`, `boot-node`)
//! take their run's identity from `--run-id` or the launcher: a keyed one without either is
//! refused in one line, before it binds or publishes anything.

use std::process::Command;

/// Variables a launcher names its launch with: removed, so the test decides.
const LAUNCHER_VARS: &[&str] = &[
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
];

/// Runs `ftcoll args…` with a job key in the environment and, of the launcher's variables,
/// only `vars`: (exit code, stderr).
fn keyed_with(vars: &[(&str, &str)], args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ftcoll"));
    for v in LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    let out = cmd
        .envs(vars.iter().copied())
        .env("FTCOLL_KEY", "000102030405060708090a0b0c0d0e0f")
        .args(args)
        .output()
        .expect("run ftcoll");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `ftcoll args…` with a job key in the environment and no launcher's run id.
fn keyed(args: &[&str]) -> (i32, String) {
    keyed_with(&[], args)
}

fn assert_needs_run_id(args: &[&str], what: &str) {
    let (code, err) = keyed(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(err.contains(what) && err.contains("--run-id"), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn a_keyed_rendezvous_without_a_run_id_is_refused() {
    let dir = std::env::temp_dir().join(format!("ftcoll-runid-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    assert_needs_run_id(
        &[
            "node",
            "--rendezvous",
            d,
            "--rank",
            "0",
            "--nodes",
            "2",
            "--control",
            "127.0.0.1:9",
        ],
        "keyed node --rendezvous",
    );
    // Nothing was published, not even the run's directory.
    assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_keyed_hand_started_node_without_a_run_id_is_refused() {
    // A hostfile gives addresses, not a nonce: the launch's id must.
    let dir = std::env::temp_dir().join(format!("ftcoll-runid-hf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hf = dir.join("hosts");
    std::fs::write(&hf, "127.0.0.1:5000\n127.0.0.1:5001\n").unwrap();
    let hf = hf.to_str().unwrap();
    assert_needs_run_id(
        &[
            "node",
            "--hostfile",
            hf,
            "--rank",
            "0",
            "--nodes",
            "2",
            "--control",
            "127.0.0.1:9",
        ],
        "keyed node --hostfile",
    );
    // With one, it gets past the check and fails only at its silent coordinator.
    let (code, err) = keyed(&[
        "node",
        "--hostfile",
        hf,
        "--rank",
        "0",
        "--nodes",
        "2",
        "--control",
        "127.0.0.1:9",
        "--run-id",
        "job-7",
        "--control-timeout-ms",
        "300",
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(!err.contains("--run-id"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_keyed_boot_without_a_run_id_is_refused() {
    assert_needs_run_id(
        &[
            "bench",
            "--boot",
            "127.0.0.1:0",
            "--boot-parent",
            "127.0.0.1:9",
            "--rank",
            "1",
            "--nodes",
            "2",
            "--o-ns",
            "1000",
            "--L-ns",
            "1000",
        ],
        "keyed bench --boot",
    );
    assert_needs_run_id(
        &["boot-node", "--rank", "1", "--nodes", "2", "--parent", "127.0.0.1:9"],
        "keyed boot-node",
    );
}

#[test]
fn run_id_is_checked_and_applies_where_no_rank_0_hands_out_a_nonce() {
    let (code, err) = keyed(&["bench", "--run-id", "x", "--nodes", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--boot"), "{err}");
    let (code, err) = keyed(&[
        "boot-node",
        "--rank",
        "1",
        "--nodes",
        "2",
        "--parent",
        "127.0.0.1:9",
        "--run-id",
        "",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--run-id must be 1 to 256 bytes"), "{err}");
    let (code, err) = keyed(&[
        "node",
        "--join",
        "127.0.0.1:9",
        "--rank",
        "1",
        "--nodes",
        "2",
        "--run-id",
        "x",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--run-id does not apply to --join"), "{err}");
}

/// Under Slurm (job and step id) or Open MPI (PMIx namespace) the launcher's id serves: a keyed
/// `boot-node` gets past the check and fails only at its bootstrap (no parent answers).
#[test]
fn the_launchers_id_serves_as_the_run_id() {
    let boot_node = ["boot-node", "--rank", "1", "--nodes", "2", "--parent", "127.0.0.1:9"];
    for vars in [
        &[("SLURM_JOB_ID", "4242"), ("SLURM_STEP_ID", "0")][..],
        &[("PMIX_NAMESPACE", "prterun-host-1234@1")][..],
    ] {
        let (code, err) = keyed_with(vars, &[&boot_node[..], &["--timeout-s", "1"]].concat());
        assert_ne!(code, 0, "{vars:?}: {err}");
        assert!(
            !err.contains("--run-id") && err.contains("timed out"),
            "{vars:?}: {err}"
        );
    }
    // A job id without a step (a batch script's own shell) is not one launch: refused.
    let (code, err) = keyed_with(&[("SLURM_JOB_ID", "4242")], &boot_node);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--run-id"), "{err}");
}
