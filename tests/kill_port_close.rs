//! `bench/kill_port_close.py`: a SIGKILLed process's UDP port refuses datagrams only after the
//! kernel tore the process down; the script prints the time per trial and size. Bad input is
//! one line and exit 2. Skipped (said so) without python3.

use std::path::Path;
use std::process::Command;

fn script(args: &[&str]) -> Option<(i32, String, String)> {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: python3 is not installed");
        return None;
    }
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/kill_port_close.py"))
        .args(args)
        .output()
        .expect("run the script");
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn each_size_gets_its_trials_times_from_the_kill_to_the_refusal() {
    let Some((code, out, err)) = script(&["--sizes", "0 2", "--trials", "2"]) else {
        return;
    };
    assert_eq!(code, 0, "{out}{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("MiB touched:")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    for (row, mib) in rows.iter().zip(["0", "2"]) {
        assert!(row.starts_with(&format!("{mib} MiB touched: ")), "{row}");
        let times: Vec<f64> = row
            .split(':')
            .nth(1)
            .unwrap()
            .split("(median")
            .next()
            .unwrap()
            .split_whitespace()
            .map(|t| t.parse().expect("a time in µs"))
            .collect();
        assert_eq!(times.len(), 2, "{row}");
        assert!(times.iter().all(|&t| t > 0.0 && t < 5e6), "{row}");
    }
}

#[test]
fn bad_sizes_or_trials_are_one_line_and_exit_2() {
    for args in [
        &["--sizes", "x"][..],
        &["--sizes", "-1"],
        &["--trials", "0"],
        &["--sizes", ""],
    ] {
        let Some((code, out, err)) = script(args) else {
            return;
        };
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("kill_port_close: error:"), "{err}");
        assert!(out.is_empty(), "{out}");
    }
}
