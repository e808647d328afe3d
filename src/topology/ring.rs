//! The correction ring over ranks `0..n` (Corrected Trees §3.1, §3.3; Corrected Gossip §III):
//! rank `r`'s neighbours are `r ± 1, r ± 2, …` modulo `n`.
//!
//! All functions take `n >= 1`; for `n == 0` (no ring) they return 0 instead of panicking.
//! Arithmetic is done in `u64`, so no input overflows.

/// `(r + off) mod n`: the process `off` steps forward (to the right) of `r`.
pub fn forward(r: u32, off: u32, n: u32) -> u32 {
    if r < n && off <= n {
        // Ranks and offsets on the ring (every caller on a hot path): no division.
        let s = u64::from(r) + u64::from(off);
        let n = u64::from(n);
        return (if s >= n { s - n } else { s }) as u32;
    }
    if n == 0 {
        return 0;
    }
    ((u64::from(r) + u64::from(off)) % u64::from(n)) as u32
}

/// `(r - off) mod n`: the process `off` steps backward (to the left) of `r`.
pub fn backward(r: u32, off: u32, n: u32) -> u32 {
    if r < n && off <= n {
        return if r >= off {
            r - off
        } else {
            (u64::from(r) + u64::from(n) - u64::from(off)) as u32
        };
    }
    if n == 0 {
        return 0;
    }
    let n = u64::from(n);
    ((u64::from(r) % n + n - u64::from(off) % n) % n) as u32
}

/// Steps going forward from `from` to `to`: the `d` in `0..n` with `forward(from, d, n) == to`.
pub fn forward_distance(from: u32, to: u32, n: u32) -> u32 {
    backward(to, from, n)
}

/// Steps going backward from `from` to `to`: the `d` in `0..n` with
/// `backward(from, d, n) == to`.
pub fn backward_distance(from: u32, to: u32, n: u32) -> u32 {
    backward(from, to, n)
}

/// Length of the longest circular run of ranks `r` in `0..n` with `uncolored(r)`: the
/// maximum gap size that correction has to close (Corrected Trees §3.1, `g_max`). All
/// uncolored gives `n`, none gives 0. Calls `uncolored` once per rank.
pub fn longest_circular_run(uncolored: impl Fn(u32) -> bool, n: u32) -> u32 {
    let (mut best, mut run) = (0u32, 0u32);
    // Length of the run starting at rank 0, known once the first colored rank is seen.
    let mut leading = None;
    for r in 0..n {
        if uncolored(r) {
            run += 1;
            best = best.max(run);
        } else {
            leading.get_or_insert(run);
            run = 0;
        }
    }
    match leading {
        None => n,
        // The trailing run wraps around into the leading one.
        Some(leading) => best.max(run + leading),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_and_backward_wrap() {
        assert_eq!(forward(3, 2, 8), 5);
        assert_eq!(forward(7, 1, 8), 0);
        assert_eq!(forward(7, 9, 8), 0);
        assert_eq!(forward(0, 0, 1), 0);
        assert_eq!(backward(0, 1, 8), 7);
        assert_eq!(backward(3, 5, 8), 6);
        assert_eq!(backward(3, 17, 8), 2);
        assert_eq!(backward(5, 0, 8), 5);
        assert_eq!(forward(u32::MAX - 1, u32::MAX - 1, u32::MAX), u32::MAX - 2);
        assert_eq!(forward(u32::MAX - 1, u32::MAX, u32::MAX), u32::MAX - 1);
        assert_eq!(backward(0, u32::MAX - 1, u32::MAX), 1);
        assert_eq!((forward(3, 1, 0), backward(3, 1, 0)), (0, 0));
    }

    #[test]
    fn distances_invert_moves() {
        for n in 1..=13 {
            for a in 0..n {
                for d in 0..n {
                    let f = forward(a, d, n);
                    let b = backward(a, d, n);
                    assert_eq!(backward(f, d, n), a);
                    assert_eq!(forward_distance(a, f, n), d);
                    assert_eq!(backward_distance(a, b, n), d);
                    assert_eq!(forward_distance(a, b, n), (n - d) % n);
                    assert_eq!(backward_distance(b, a, n), (n - d) % n);
                }
            }
        }
        // Corrected Trees §3.1: 23 hears from 19 (4 back) and 28 (5 forward).
        assert_eq!(backward_distance(23, 19, 100), 4);
        assert_eq!(forward_distance(23, 28, 100), 5);
        assert_eq!(forward_distance(98, 1, 100), 3);
        assert_eq!(backward_distance(1, 98, 100), 3);
    }

    #[test]
    fn longest_run_wraps_around() {
        let run = |bits: &[u8]| longest_circular_run(|r| bits[r as usize] == 1, bits.len() as u32);
        assert_eq!(run(&[]), 0);
        assert_eq!(run(&[0]), 0);
        assert_eq!(run(&[1]), 1);
        assert_eq!(run(&[1, 1, 1]), 3);
        assert_eq!(run(&[0, 0, 0]), 0);
        assert_eq!(run(&[0, 1, 1, 0, 1]), 2);
        assert_eq!(run(&[1, 1, 0, 1, 1]), 4);
        assert_eq!(run(&[1, 0, 1, 1, 1, 0, 1, 1]), 3);
        assert_eq!(run(&[1, 0, 0, 0, 0, 0, 1, 1]), 3);
        assert_eq!(run(&[0, 1, 1, 1, 1, 1, 1, 0]), 6);
    }

    #[test]
    fn longest_run_matches_brute_force() {
        for n in 1..=10u32 {
            for mask in 0..1u32 << n {
                let bit = |r: u32| mask >> r & 1 == 1;
                let brute = (0..n)
                    .map(|s| (0..n).take_while(|&d| bit((s + d) % n)).count() as u32)
                    .max()
                    .unwrap();
                assert_eq!(longest_circular_run(bit, n), brute, "n={n} mask={mask:b}");
            }
        }
    }
}
