//! The fuzz targets on the stable toolchain: libFuzzer needs nightly-only compiler flags
//! (`-Zsanitizer`, or `RUSTC_BOOTSTRAP`), so CI runs the same bodies here instead. Each target
//! starts from its seeds and a corpus, applies random mutations (bit flips, interesting
//! values, inserts, deletes, splices), and keeps an input in the corpus when it reaches an
//! outcome not seen before (the coarse coverage the bodies return). Panics are caught and the
//! inputs that caused them returned, for saving as regression cases.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

use super::Target;

/// Inputs kept per target at most.
const MAX_CORPUS: usize = 4096;

/// What a bounded run did.
#[derive(Debug, Default)]
pub struct Report {
    /// Inputs executed.
    pub execs: u64,
    /// Corpus size at the end.
    pub corpus: usize,
    /// Distinct outcomes reached.
    pub outcomes: usize,
    /// Inputs that panicked (first few, deduplicated).
    pub crashes: Vec<Vec<u8>>,
}

/// Runs `t` on `corpus` (plus its seeds) and mutations of it until `budget` is spent or
/// `max_execs` inputs ran; inputs are at most `max_len` bytes.
pub fn run(t: &Target, corpus: &[Vec<u8>], budget: Duration, max_execs: u64, max_len: usize, seed: u64) -> Report {
    let mut pool: Vec<Vec<u8>> = (t.seeds)();
    pool.extend(corpus.iter().cloned());
    pool.push(Vec::new());
    let mut seen = HashSet::new();
    let mut report = Report::default();
    let exec = |input: &[u8], report: &mut Report| -> Option<u64> {
        report.execs += 1;
        match catch_unwind(AssertUnwindSafe(|| (t.run)(input))) {
            Ok(o) => Some(o),
            Err(_) => {
                if report.crashes.len() < 16 && !report.crashes.iter().any(|c| c == input) {
                    report.crashes.push(input.to_vec());
                }
                None
            }
        }
    };
    for input in pool.clone() {
        if let Some(o) = exec(&input, &mut report) {
            seen.insert(o);
        }
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let start = Instant::now();
    while report.execs < max_execs && start.elapsed() < budget {
        for _ in 0..64 {
            let base = &pool[(rng.next_u64() % pool.len() as u64) as usize];
            let other = &pool[(rng.next_u64() % pool.len() as u64) as usize];
            let mut input = base.clone();
            let rounds = 1 + rng.next_u64() % 4;
            for _ in 0..rounds {
                mutate(&mut input, other, &mut rng, max_len);
            }
            if let Some(o) = exec(&input, &mut report)
                && seen.insert(o)
                && pool.len() < MAX_CORPUS
            {
                pool.push(input);
            }
        }
    }
    report.corpus = pool.len();
    report.outcomes = seen.len();
    report
}

const INTERESTING: [u64; 12] = [
    0,
    1,
    2,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0xFFFF,
    0x1_0000,
    0xFFFF_FFFF,
    u64::MAX,
    1 << 63,
];

/// One random mutation of `d`, spliced with `other` sometimes, kept within `max_len`.
fn mutate(d: &mut Vec<u8>, other: &[u8], rng: &mut Xoshiro256PlusPlus, max_len: usize) {
    let r = rng.next_u64();
    let at = |len: usize, x: u64| if len == 0 { 0 } else { (x % len as u64) as usize };
    let pos = at(d.len(), r >> 8);
    match r % 10 {
        0 if !d.is_empty() => d[pos] ^= 1 << (r >> 40 & 7),
        1 if !d.is_empty() => d[pos] = (r >> 40) as u8,
        2 if !d.is_empty() => d[pos] = INTERESTING[at(INTERESTING.len(), r >> 40)] as u8,
        3 => d.insert(pos.min(d.len()), (r >> 40) as u8),
        4 if !d.is_empty() => {
            let n = 1 + at(d.len() - pos, r >> 40).min(7);
            d.drain(pos..(pos + n).min(d.len()));
        }
        5 => d.truncate(pos),
        6 if !d.is_empty() => {
            let n = 1 + at(d.len() - pos, r >> 40).min(15);
            let chunk: Vec<u8> = d[pos..pos + n].to_vec();
            let to = at(d.len() + 1, r >> 50);
            d.splice(to..to, chunk);
        }
        7 if !other.is_empty() => {
            let from = at(other.len(), r >> 40);
            d.truncate(pos);
            d.extend_from_slice(&other[from..]);
        }
        8 if !d.is_empty() => {
            let width = [1usize, 2, 4, 8][at(4, r >> 40)];
            let v = INTERESTING[at(INTERESTING.len(), r >> 44)]
                .wrapping_add(rng.next_u64() % 3)
                .wrapping_sub(1);
            let b = v.to_le_bytes();
            for (i, byte) in b.iter().take(width).enumerate() {
                if let Some(x) = d.get_mut(pos + i) {
                    *x = *byte;
                }
            }
        }
        _ => {
            let n = 1 + at(16, r >> 40);
            for _ in 0..n {
                d.push(rng.next_u64() as u8);
            }
        }
    }
    d.truncate(max_len);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panics_on_magic(d: &[u8]) -> u64 {
        assert!(!d.windows(2).any(|w| w == b"!!"), "found it");
        d.len() as u64 % 8
    }

    #[test]
    fn finds_a_planted_bug_and_counts_executions() {
        let t = Target {
            name: "planted",
            run: panics_on_magic,
            seeds: || vec![b"abc!".to_vec()],
        };
        let r = run(&t, &[], Duration::from_secs(5), 200_000, 64, 1);
        assert!(!r.crashes.is_empty(), "{r:?}");
        assert!(r.crashes.iter().all(|c| c.windows(2).any(|w| w == b"!!")));
        assert!(r.execs >= 2 && r.outcomes >= 2, "{r:?}");
    }
}
