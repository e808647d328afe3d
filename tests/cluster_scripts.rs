//! The launcher scripts of `cluster-scripts/`: their dry-run modes print the exact launch
//! command (checked here), bad input is one line and exit code 2, and shellcheck finds nothing
//! (when installed; `.ci/run` installs it).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn script(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster-scripts").join(rel)
}

fn run(rel: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new("bash");
    c.arg(script(rel)).args(args);
    for k in ["SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "FTCOLL_BIN"] {
        c.env_remove(k);
    }
    c.envs(env.iter().copied());
    common::output(&mut c)
}

#[test]
fn sbatch_dry_run_launches_one_joined_bench_per_task() {
    let (rc, out, err) = run(
        "slurm/ftcoll.sbatch",
        &[
            "--dry-run",
            "--kill",
            "1@500:sigkill",
            "--algo",
            "--algo corrected-gossip",
            "--",
            "--size",
            "64",
        ],
        &[
            ("SLURM_JOB_ID", "77"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_NODELIST", "localhost"),
        ],
    );
    assert_eq!(rc, 0, "{err}");
    let srun = out.lines().find(|l| l.starts_with("srun ")).expect("an srun line");
    for want in [
        "--ntasks=8",
        "--cpu-bind=cores",
        "bench --join 127.0.0.1:47000",
        "--algo corrected-gossip",
        "--kill 1@500:sigkill",
        "--json",
        "--size 64",
    ] {
        assert!(srun.contains(want), "'{want}' missing from: {srun}");
    }
    assert!(out.contains("ftcoll-77/ftcoll-77.json"), "{out}");
    assert!(err.contains("8 tasks"), "{err}");
}

#[test]
fn mpirun_dry_run_uses_the_launchers_conventions() {
    let (rc, out, err) = run("mpirun.sh", &["-n", "4", "--dry-run", "--kill", "2@9:sigkill"], &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("mpirun -n 4 "), "{out}");
    for want in [
        "--with-ft ulfm",
        "bench --join 127.0.0.1:47000",
        "--kill 2@9:sigkill",
        "--json",
    ] {
        assert!(out.contains(want), "'{want}' missing from: {out}");
    }
    let hosts = std::env::temp_dir().join(format!("ftcoll-hosts-{}", std::process::id()));
    std::fs::write(&hosts, "# cluster\n127.0.0.1 slots=2\nnode2 slots=2\n").unwrap();
    let (rc, out, err) = run(
        "mpirun.sh",
        &[
            "-n",
            "4",
            "--launcher",
            "mpich",
            "--hostfile",
            hosts.to_str().unwrap(),
            "--dry-run",
        ],
        &[],
    );
    std::fs::remove_file(&hosts).ok();
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("mpiexec -n 4 -bind-to core -f "), "{out}");
    assert!(
        out.contains("--join 127.0.0.1:47000") && out.contains("--poll busy"),
        "{out}"
    );
}

#[test]
fn both_launchers_can_run_agreements() {
    let (rc, out, err) = run("mpirun.sh", &["-n", "4", "--agree", "--dry-run", "--kill", "2@9"], &[]);
    assert_eq!(rc, 0, "{err}");
    for want in ["--with-ft ulfm", "agree --join 127.0.0.1:47000", "--kill 2@9", "--json"] {
        assert!(out.contains(want), "'{want}' missing from: {out}");
    }
    // The subcommand, not the binary's path (a checkout may live under a folder named bench).
    assert!(!out.contains(" bench ") && !out.contains("--poll"), "{out}");
    let (rc, out, err) = run(
        "slurm/ftcoll.sbatch",
        &["--agree", "--dry-run", "--iterations", "5000", "--", "--tree", "star"],
        &[],
    );
    assert_eq!(rc, 0, "{err}");
    for want in [
        "agree --join 127.0.0.1:47000",
        "--agreements 5000",
        "--tree star",
        "--json",
    ] {
        assert!(out.contains(want), "'{want}' missing from: {out}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (rel, args, msg) in [
        ("slurm/ftcoll.sbatch", &["--port", "0"][..], "--port must be"),
        ("slurm/ftcoll.sbatch", &["--transport", "pigeon"], "--transport must be"),
        ("slurm/ftcoll.sbatch", &[], "not inside a Slurm allocation"),
        ("slurm/ftcoll.sbatch", &["--what"], "unknown option"),
        ("mpirun.sh", &[], "-n must be an integer"),
        ("fidelity.sh", &["--cores", "two"], "--cores must be"),
        ("fidelity.sh", &["--hosts", "2"], "--hosts must be at least 3"),
        ("mpirun.sh", &["-n", "4", "--launcher", "lam"], "--launcher must be"),
        (
            "mpirun.sh",
            &["-n", "4", "--hostfile", "/nonexistent"],
            "cannot read hostfile",
        ),
        (
            "mpirun.sh",
            &["-n", "4", "--bin", "/nonexistent"],
            "ftcoll binary not found",
        ),
    ] {
        let (rc, _, err) = run(rel, args, &[]);
        assert_eq!(rc, 2, "{rel} {args:?}: {err}");
        assert!(
            err.contains(msg) && err.trim().lines().count() == 1,
            "{rel} {args:?}: {err}"
        );
    }
}

#[test]
fn shellcheck_is_clean() {
    if Command::new("shellcheck").arg("--version").output().is_err() {
        eprintln!("skipped: shellcheck is not installed");
        return;
    }
    let out = Command::new("shellcheck")
        .args([
            script("netns-cluster.sh"),
            script("mpirun.sh"),
            script("slurm/ftcoll.sbatch"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/fidelity_cores.sh"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/heartbeat_sharing.sh"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/trace_vs_model.sh"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/kill_ab.sh"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/shared_cores_ab.sh"),
        ])
        .output()
        .expect("run shellcheck");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `bench/fidelity_cores.sh -c DIR` runs its table on the calibrations `-s DIR` saved (two
/// binaries compared on one calibration, or one from another moment of the machine), and a
/// missing one is a one-line error, exit 2.
#[test]
fn the_fidelity_table_reuses_a_saved_calibration() {
    let fidelity = |args: &[&str]| {
        common::output(
            Command::new("bash")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/fidelity_cores.sh"))
                .args(["-b", env!("CARGO_BIN_EXE_ftcoll")])
                .args(args),
        )
    };
    let dir = std::env::temp_dir().join(format!("ftcoll-fidelity-cal-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let (rc, _, err) = fidelity(&["-c", d]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("no calibration") && err.trim().lines().count() == 1,
        "{err}"
    );
    let small = ["-n", "2", "-t", "inproc", "-i", "100"];
    let (rc, out, err) = fidelity(&[&["-s", d][..], &small].concat());
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("| 2 | inproc | none |"), "{out}");
    let line = |err: &str| -> String {
        let l = err
            .lines()
            .find(|l| l.starts_with("calibration inproc"))
            .unwrap_or_default();
        l.split_once(": ").map(|(_, v)| v.to_string()).unwrap_or_default()
    };
    let saved = line(&err);
    assert!(saved.contains("os_ns"), "{err}");
    let (rc, out, err) = fidelity(&[&["-c", d][..], &small].concat());
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("| 2 | inproc | none |"), "{out}");
    assert!(err.contains(&format!("calibration inproc (saved in {d})")), "{err}");
    assert_eq!(line(&err), saved, "the saved calibration, not a new one");
    // Kept: -c leaves the caller's calibrations where they are.
    assert!(dir.join("inproc.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench/kill_ab.sh` runs `agree --procs` with a real SIGKILL per binary and prints one row per
/// run and a sorted summary per N and binary; a missing binary is one line and exit 2, a run
/// that failed a FAILED row and exit 1.
#[test]
fn the_kill_ab_script_times_a_real_sigkill_per_binary() {
    let ab = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/kill_ab.sh");
    let bin = env!("CARGO_BIN_EXE_ftcoll");
    let (rc, _, err) = common::output(Command::new("bash").arg(&ab).arg("/nonexistent/ftcoll"));
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("no ftcoll binary") && err.trim().lines().count() == 1,
        "{err}"
    );
    // A run that fails (here: a "binary" that prints nothing) is a FAILED row and exit 1.
    let (rc, text, err) = common::output(Command::new("bash").arg(&ab).args(["-r", "1", "-n", "3", "/bin/false"]));
    assert_eq!(rc, 1, "{text}{err}");
    assert!(text.contains("1 3 /bin/false FAILED"), "{text}");
    assert!(
        err.contains("1 run(s) failed") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (rc, text, err) = common::output(
        Command::new("bash")
            .arg(&ab)
            .args(["-r", "1", "-n", "3", "-a", "300", "-k", "2@150", bin]),
    );
    assert_eq!(rc, 0, "{text}{err}");
    let row = text
        .lines()
        .find(|l| l.starts_with("1 3 "))
        .unwrap_or_else(|| panic!("no run row: {text}"));
    let f: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(f.len(), 7, "{row}");
    let v: Vec<f64> = f[3..].iter().map(|x| x.parse().unwrap_or(f64::NAN)).collect();
    assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{row}");
    assert!(v[0] <= v[1], "the first success before the first suspicion: {row}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("N=3 ") && l.contains("first success µs")),
        "no summary: {text}"
    );
}

/// `bench/shared_cores_ab.sh` runs each of its configurations (nodes outnumbering workers) once
/// per binary and repetition and prints one row each, the model's shared-core parameters
/// included, and a count of p50 ratios within the band over the pooled ratios and every
/// crashed segment; no binary or one that is not executable is one line and exit 2.
#[test]
fn the_shared_cores_ab_script_prints_a_row_per_configuration_and_the_band_count() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    let ab = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/shared_cores_ab.sh");
    for args in [&[][..], &["/nonexistent/ftcoll"]] {
        let (rc, _, err) = common::output(Command::new("bash").arg(&ab).args(args));
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let bin = env!("CARGO_BIN_EXE_ftcoll");
    let (rc, text, err) = common::output(Command::new("bash").arg(&ab).args(["-r", "1", "-i", "300", bin]));
    assert_eq!(rc, 0, "{text}{err}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("1 | ")).collect();
    let configs = std::fs::read_to_string(&ab)
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("\"--nodes "))
        .count();
    assert!(configs >= 10, "{configs}");
    assert_eq!(rows.len(), configs, "one row per configuration: {text}");
    let mut ratios = 0;
    for r in &rows {
        let f: Vec<&str> = r.split(" | ").collect();
        assert_eq!(f[2], "B1", "{r}");
        assert!(f[3].starts_with("pooled "), "{r}");
        // The model's shared-core parameters; measured wherever nodes share a worker (on
        // this 2-core machine, every configuration; on a larger one, the one-worker ones).
        let model = f.last().unwrap();
        assert!(model.starts_with("visit "), "{r}");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if f[1].contains("--workers 1") || cores <= 2 {
            assert!(!model.contains("None"), "{r}");
        }
        ratios += 1 + f
            .iter()
            .filter(|s| s.starts_with("dead=") && !s.starts_with("dead=-"))
            .count();
        // A run with a crash has a segment before it and one after.
        if f[1].contains("--kill 1@") {
            assert!(f.iter().any(|s| s.starts_with("dead=1 ")), "{r}");
        }
    }
    let summary = text
        .lines()
        .find(|l| l.starts_with("B1 "))
        .unwrap_or_else(|| panic!("no summary: {text}"));
    let (inside, of) = summary
        .rsplit_once(": ")
        .and_then(|(_, c)| c.split_once(" of "))
        .unwrap_or_else(|| panic!("{summary}"));
    let (inside, of): (usize, usize) = (inside.parse().unwrap(), of.parse().unwrap());
    assert_eq!(of, ratios, "{summary}");
    assert!(inside <= of, "{summary}");
}
