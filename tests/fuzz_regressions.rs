//! The fuzz targets in the default suite: every saved crash (`fuzz/regressions/NAME/`) and
//! every seed must pass, and a short stable-toolchain fuzz run of each target must find
//! nothing. `.ci/run` runs the longer bounded campaign (`cargo run --example fuzz`).

use std::time::Duration;

use ftcoll::fuzz::{TARGETS, stable};

fn regressions(name: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(name);
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v.iter()
        .map(|p| std::fs::read(p).expect("readable regression file"))
        .collect()
}

#[test]
fn saved_crashes_and_seeds_pass() {
    let mut cases = 0;
    for t in TARGETS {
        for input in regressions(t.name).iter().chain((t.seeds)().iter()) {
            (t.run)(input);
            cases += 1;
        }
    }
    assert!(cases > TARGETS.len());
    assert!(!regressions("kills").is_empty(), "the kill-spec crashes are kept");
}

#[test]
fn a_short_fuzz_run_of_every_target_finds_nothing() {
    for t in TARGETS {
        let r = stable::run(t, &regressions(t.name), Duration::from_millis(300), 50_000, 1024, 8);
        assert!(r.crashes.is_empty(), "{}: {:?}", t.name, r.crashes);
        assert!(r.execs > 100 && r.outcomes >= 1, "{}: {r:?}", t.name);
    }
}
