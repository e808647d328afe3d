//! The seeded generator handed to protocols (`docs/architecture.md`, decision 1: no global
//! RNG).

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// Deterministic, portable generator (xoshiro256++) used by every protocol and driver.
#[derive(Clone, Debug)]
pub struct ProtoRng(Xoshiro256PlusPlus);

impl ProtoRng {
    /// A generator from a 64-bit seed.
    pub fn new(seed: u64) -> Self {
        Self(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// The seed of run `index` of a Monte Carlo experiment with `base` seed (SplitMix64 mix),
    /// so that every run's randomness is independent of the thread that executes it.
    pub fn run_seed(base: u64, index: u64) -> u64 {
        let mut z = base ^ index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform value in `0..bound` (Lemire's multiply-shift with rejection); `bound > 0`.
    pub fn below(&mut self, bound: u32) -> u32 {
        debug_assert!(bound > 0);
        let bound = u64::from(bound);
        loop {
            let m = (self.next_u64() >> 32) * bound;
            let low = m & 0xFFFF_FFFF;
            if low >= (1u64 << 32) % bound {
                return (m >> 32) as u32;
            }
        }
    }

    /// A uniform rank in `0..n` other than `me` (Corrected Gossip's `rand({0..N-1} \ i)`).
    pub fn other_than(&mut self, me: u32, n: u32) -> u32 {
        debug_assert!(n >= 2);
        let r = self.below(n - 1);
        if r >= me { r + 1 } else { r }
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl crate::topology::launch_tree::UniformBelow for ProtoRng {
    fn below(&mut self, bound: u32) -> u32 {
        ProtoRng::below(self, bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_is_in_range_and_covers_it() {
        let mut r = ProtoRng::new(7);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            seen[r.below(5) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 1800), "{seen:?}");
    }

    #[test]
    fn other_than_never_returns_self() {
        let mut r = ProtoRng::new(1);
        for _ in 0..10_000 {
            assert_ne!(r.other_than(3, 4), 3);
        }
    }

    #[test]
    fn run_seeds_differ_and_are_stable() {
        assert_ne!(ProtoRng::run_seed(1, 0), ProtoRng::run_seed(1, 1));
        assert_eq!(ProtoRng::run_seed(1, 5), ProtoRng::run_seed(1, 5));
    }
}
