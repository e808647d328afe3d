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

/// Every protocol message decoder has a target, and its seeds are valid messages: a seed that
/// fails to decode would leave the mutator far from the deep checks.
#[test]
fn every_wire_seed_decodes_and_every_message_family_has_a_target() {
    for name in [
        "wire_header",
        "wire_tree",
        "wire_gossip",
        "wire_corr",
        "wire_bfb",
        "wire_small",
        "wire_era",
        "wire_overlay",
        "wire_watch",
        "wire_bootstrap",
        "join_line",
    ] {
        let t = ftcoll::fuzz::find(name).unwrap_or_else(|| panic!("no fuzz target {name}"));
        for (i, seed) in (t.seeds)().iter().enumerate() {
            let outcome = (t.run)(seed);
            assert!(
                outcome % 1000 >= 100,
                "{name}: seed {i} does not decode (outcome {outcome})"
            );
        }
    }
}

/// Each target of the stable harness is also a libFuzzer binary of the `fuzz/` crate.
#[test]
fn every_target_is_a_libfuzzer_binary() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for t in TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{}\"", t.name)),
            "{} missing from fuzz/Cargo.toml",
            t.name
        );
        let src = std::fs::read_to_string(root.join(format!("fuzz_targets/{}.rs", t.name)))
            .unwrap_or_else(|e| panic!("fuzz/fuzz_targets/{}.rs: {e}", t.name));
        assert!(src.contains(&format!("targets::{}(", t.name)), "{}: wrong body", t.name);
    }
}
