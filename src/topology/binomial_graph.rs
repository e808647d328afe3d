//! Binomial graphs over ranks `0..n`: the forward dissemination graph of Corrected Gossip
//! §IV.B.3 and the bidirectional binomial graph (BMG) of Angskun et al., which the
//! self-stabilizing overlay builds (BMG paper §3.4).
//!
//! Both use the exponents `0 <= x < ceil(log2 n)`, i.e. exactly the `x` with `2^x < n`, so
//! the offsets `2^x` are distinct and nonzero modulo `n`.

use super::ring::{backward, forward};

/// `ceil(log2 n)`: the number of exponents `x` with `2^x < n` (0 for `n <= 1`).
fn exponents(n: u32) -> u32 {
    if n <= 1 { 0 } else { u32::BITS - (n - 1).leading_zeros() }
}

/// Corrected Gossip §IV.B.3: `N(p) = { p + 2^x mod n | 0 <= x < ceil(log2 n) }`, in increasing
/// `x`. The offsets are distinct and nonzero modulo `n`, so the neighbours are deduplicated and
/// never `p` itself (for `p < n`). Empty for `n <= 1`.
pub fn forward_neighbors(p: u32, n: u32) -> impl Iterator<Item = u32> {
    (0..exponents(n)).map(move |x| forward(p, 1 << x, n))
}

/// Binomial graph (BMG) of Angskun et al. (BMG paper §3.4): `p ± 2^x mod n` for
/// `0 <= x < ceil(log2 n)`, sorted by `(x, + before -)`, keeping the first occurrence of each
/// process (`p + 2^x` and `p - 2^y` coincide when `n | 2^x + 2^y`); never `p` itself (for
/// `p < n`). Empty for `n <= 1`.
pub fn neighbors(p: u32, n: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(2 * exponents(n) as usize);
    for x in 0..exponents(n) {
        for q in [forward(p, 1 << x, n), backward(p, 1 << x, n)] {
            if q != p && !out.contains(&q) {
                out.push(q);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_are_ceil_log2() {
        let cases = [
            (0, 0),
            (1, 0),
            (2, 1),
            (3, 2),
            (4, 2),
            (5, 3),
            (8, 3),
            (9, 4),
            (1024, 10),
        ];
        for (n, x) in cases {
            assert_eq!(exponents(n), x, "n={n}");
        }
        assert_eq!(exponents(1025), 11);
        assert_eq!(exponents(u32::MAX), 32);
    }

    #[test]
    fn forward_neighbors_examples() {
        let f = |p, n| forward_neighbors(p, n).collect::<Vec<_>>();
        assert_eq!(f(0, 1), Vec::<u32>::new());
        assert_eq!(f(0, 2), [1]);
        assert_eq!(f(1, 2), [0]);
        assert_eq!(f(0, 8), [1, 2, 4]);
        assert_eq!(f(6, 8), [7, 0, 2]);
        assert_eq!(f(0, 9), [1, 2, 4, 8]);
        assert_eq!(f(5, 12), [6, 7, 9, 1]);
        let big = f(u32::MAX - 1, u32::MAX);
        assert_eq!(big.len(), 32);
        assert_eq!(big[0], 0);
    }

    #[test]
    fn bmg_neighbors_examples() {
        assert!(neighbors(0, 1).is_empty());
        assert_eq!(neighbors(0, 2), [1]);
        assert_eq!(neighbors(0, 3), [1, 2]);
        assert_eq!(neighbors(0, 4), [1, 3, 2]);
        assert_eq!(neighbors(0, 8), [1, 7, 2, 6, 4]);
        assert_eq!(neighbors(3, 8), [4, 2, 5, 1, 7]);
        assert_eq!(neighbors(0, 12), [1, 11, 2, 10, 4, 8]);
        assert_eq!(neighbors(0, 9), [1, 8, 2, 7, 4, 5]);
    }

    #[test]
    fn neighbor_sets_are_the_definitions() {
        for n in 1..=70u32 {
            let m = exponents(n);
            assert!(m == 0 || (1u64 << (m - 1) < u64::from(n) && u64::from(n) <= 1u64 << m));
            for p in 0..n {
                let fw: Vec<u32> = forward_neighbors(p, n).collect();
                let want: Vec<u32> = (0..m).map(|x| (p + (1 << x)) % n).collect();
                assert_eq!(fw, want);
                assert!(!fw.contains(&p));
                let mut dedup = fw.clone();
                dedup.sort_unstable();
                dedup.dedup();
                assert_eq!(dedup.len(), fw.len());

                let bmg = neighbors(p, n);
                assert!(!bmg.contains(&p));
                let mut set = bmg.clone();
                set.sort_unstable();
                set.dedup();
                assert_eq!(set.len(), bmg.len());
                let mut all: Vec<u32> = (0..m)
                    .flat_map(|x| [(p + (1 << x)) % n, (p + n - (1 << x)) % n])
                    .collect();
                all.sort_unstable();
                all.dedup();
                assert_eq!(set, all);
                // The forward neighbours come first within each exponent.
                for (x, &q) in fw.iter().enumerate() {
                    let at = bmg.iter().position(|&b| b == q).unwrap();
                    assert!(at <= 2 * x);
                }
                // Symmetric: q is p's BMG neighbour iff p is q's.
                for &q in &bmg {
                    assert!(neighbors(q, n).contains(&p));
                }
            }
        }
    }
}
