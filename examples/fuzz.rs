//! Runs the fuzz targets on the stable toolchain for a bounded time each (what `.ci/run`
//! uses; `cargo fuzz run NAME` in `fuzz/` runs the same bodies under libFuzzer on nightly).
//!
//! `cargo run --release --example fuzz -- [NAME...] [--seconds S] [--max-execs N] [--seed X]`
//! (no NAME: every target); `--export-seeds` writes the seeds to `fuzz/corpus/NAME/` instead. Starts from `fuzz/corpus/NAME/` and `fuzz/regressions/NAME/`,
//! saves crashing inputs to `fuzz/artifacts/NAME/`, prints one line per target, and exits 1 if
//! any input panicked.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ftcoll::fuzz::{TARGETS, Target, find, stable};

fn read_dir(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn fail(msg: &str) -> ! {
    eprintln!("fuzz: error: {msg}");
    std::process::exit(2);
}

fn main() {
    let mut names = Vec::new();
    let (mut seconds, mut max_execs, mut seed) = (10.0f64, u64::MAX, 0x00F0_22EDu64);
    let mut export = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| args.next().unwrap_or_else(|| fail(&format!("{what} needs a value")));
        match a.as_str() {
            "--seconds" => {
                seconds = value("--seconds")
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .unwrap_or_else(|| fail("--seconds takes a non-negative number"))
            }
            "--max-execs" => {
                max_execs = value("--max-execs")
                    .parse()
                    .unwrap_or_else(|_| fail("--max-execs takes an integer"))
            }
            "--seed" => {
                seed = value("--seed")
                    .parse()
                    .unwrap_or_else(|_| fail("--seed takes an integer"))
            }
            "--export-seeds" => export = true,
            n if n.starts_with('-') => fail(&format!("unknown flag {n}")),
            n => names.push(n.to_string()),
        }
    }
    let targets: Vec<&Target> = if names.is_empty() {
        TARGETS.iter().collect()
    } else {
        names
            .iter()
            .map(|n| find(n).unwrap_or_else(|| fail(&format!("no target {n}"))))
            .collect()
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    if export {
        // Seeds for libFuzzer (`cargo fuzz run NAME` reads fuzz/corpus/NAME/).
        for t in &targets {
            let dir = root.join("corpus").join(t.name);
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
            for (i, s) in (t.seeds)().iter().enumerate() {
                std::fs::write(dir.join(format!("seed-{i}")), s).unwrap_or_else(|e| fail(&e.to_string()));
            }
        }
        println!("seeds written to {}", root.join("corpus").display());
        return;
    }
    // The bodies panic on a bug: keep the report readable, the inputs are saved.
    std::panic::set_hook(Box::new(|_| {}));
    let mut crashed = false;
    let mut total = 0u64;
    let started = Instant::now();
    for t in targets {
        let mut corpus = read_dir(&root.join("corpus").join(t.name));
        corpus.extend(read_dir(&root.join("regressions").join(t.name)));
        let budget = Duration::from_secs_f64(seconds);
        let r = stable::run(t, &corpus, budget, max_execs, 4096, seed);
        total += r.execs;
        println!(
            "{:<14} execs {:>9}  corpus {:>5}  outcomes {:>5}  crashes {}",
            t.name,
            r.execs,
            r.corpus,
            r.outcomes,
            r.crashes.len()
        );
        for c in &r.crashes {
            crashed = true;
            let dir = root.join("artifacts").join(t.name);
            let _ = std::fs::create_dir_all(&dir);
            let h = c.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            let path = dir.join(format!("crash-{h:016x}"));
            match std::fs::write(&path, c) {
                Ok(()) => println!("  crash saved: {}", path.display()),
                Err(e) => println!("  crash not saved ({e}): {c:?}"),
            }
        }
    }
    println!("total execs {total} in {:.1} s", started.elapsed().as_secs_f64());
    if crashed {
        std::process::exit(1);
    }
}
