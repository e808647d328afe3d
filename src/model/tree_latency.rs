//! Dissemination latency of the Corrected Trees trees in LogP, in closed form.
//!
//! Timing model (Corrected Trees §2.2, small messages): the root is colored at time 0; a
//! process colored at time `c` starts its `j`-th send (`j = 0, 1, ..`) at `c + j·o`, and that
//! child is colored at `c + j·o + 2o + L` (send `o`, wire `L`, receive `o`). Every function
//! also takes [`LogGP`] parameters: then `o` stands for the send slot
//! `max(o_s + G(k−1), g)` and `2o + L` for the hop `o_s + G(k−1) + L + o_r`, and the same
//! derivations hold (a tree process receives once, so receives never queue). Children are sent
//! in the order the paper's construction creates them. The latency of a tree on `n` processes
//! (ranks `0..n`) is the time its last process is colored. The shapes are the *interleaved*
//! trees of §3.2 (ranks truncated at `n`); none of the functions builds the tree.

use serde::Serialize;

use super::{LogGP, ModelError, Time, check_logp, hop};

/// The tree families of Corrected Trees §3.2 (mirrors the topology layer's kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TreeShape {
    /// Interleaved k-ary tree (§3.2.1); `k = 1` is a chain.
    Kary(u32),
    /// Binomial tree (Lamé order 1, §3.2.2).
    Binomial,
    /// Lamé tree of order `k` (§3.2.2, eq. (1)–(2)).
    Lame(u32),
    /// Latency-optimal tree for the given LogP (§3.2.3).
    Optimal,
}

/// Dissemination latency of `shape` on `n` processes.
pub fn tree_latency(shape: TreeShape, n: u64, logp: impl Into<LogGP>) -> Result<Time, ModelError> {
    let logp: LogGP = logp.into();
    match shape {
        TreeShape::Kary(k) => kary_latency(k, n, logp),
        TreeShape::Binomial => binomial_latency(n, logp),
        TreeShape::Lame(k) => lame_latency(k, n, logp),
        TreeShape::Optimal => optimal_latency(n, logp),
    }
}

/// Binomial tree (§3.2.2, children `r + 2^i`, `2^i > r`): process `r` is colored at
/// `popcount(r)·(2o+L) + o·(msb(r) + 1 − popcount(r))`; the latency is the maximum over
/// `r < n`, attained at `n − 1` or at `n − 1` with one set bit cleared and all lower bits set.
/// `n ≤ 1` gives 0.
pub fn binomial_latency(n: u64, logp: impl Into<LogGP>) -> Result<Time, ModelError> {
    let logp: LogGP = logp.into();
    check_logp(logp)?;
    if n <= 1 {
        return Ok(0);
    }
    let h = hop(logp);
    let colored = |r: u64| -> Time {
        let p = u64::from(r.count_ones());
        let msb = u64::from(63 - r.leading_zeros());
        p.saturating_mul(h)
            .saturating_add(logp.slot().saturating_mul(msb + 1 - p))
    };
    let last = n - 1;
    let mut worst = colored(last);
    for b in 0..64 {
        if (last >> b) & 1 == 1 {
            let candidate = (last & !((1u64 << b) | ((1u64 << b) - 1))) | ((1u64 << b) - 1);
            if candidate > 0 {
                worst = worst.max(colored(candidate));
            }
        }
    }
    Ok(worst)
}

/// Interleaved k-ary tree (§3.2.1, children `r + i·k^ℓ`, `0 < i ≤ k`, `ℓ` = level of `r`).
/// The process at position `x` of level `d` is colored at `d·(2o+L) + o·digitsum_k(x)`, so
/// the latency is the larger of the last full level, `(d−1)·(2o+L + (k−1)·o)`, and the
/// largest base-`k` digit sum among the occupied positions of the last level. `k = 1` is a
/// chain: `(n−1)·(2o+L)`. `n ≤ 1` gives 0.
pub fn kary_latency(k: u32, n: u64, logp: impl Into<LogGP>) -> Result<Time, ModelError> {
    let logp: LogGP = logp.into();
    check_logp(logp)?;
    if k == 0 {
        return Err(ModelError::ZeroOrder);
    }
    if n <= 1 {
        return Ok(0);
    }
    let h = hop(logp);
    if k == 1 {
        return Ok((n - 1).saturating_mul(h));
    }
    let k = u128::from(k);
    let last = u128::from(n - 1);
    // Level `depth` holds ranks `start .. start + size`; find the level of rank n − 1.
    let (mut depth, mut start, mut size) = (0u64, 0u128, 1u128);
    while start + size <= last {
        start += size;
        size = size.saturating_mul(k);
        depth += 1;
    }
    // Largest digit sum of x ≤ m over `depth` base-k digits: m itself, or m with one nonzero
    // digit decreased by one and every lower digit set to k − 1.
    let m = last - start;
    let mut digits = Vec::new();
    let mut rest = m;
    for _ in 0..depth {
        digits.push((rest % k) as u64);
        rest /= k;
    }
    let top = k as u64 - 1;
    let mut best: u64 = digits.iter().sum();
    let mut higher: u64 = 0; // digit sum above position b
    for (b, &d) in digits.iter().enumerate().rev() {
        if d > 0 {
            best = best.max(higher + d - 1 + b as u64 * top);
        }
        higher += d;
    }
    let last_level = depth.saturating_mul(h).saturating_add(logp.slot().saturating_mul(best));
    let full_level = (depth - 1).saturating_mul(h.saturating_add(logp.slot().saturating_mul(top)));
    Ok(last_level.max(full_level))
}

/// Longest `R(t)` table built for a Lamé tree (orders `k ≥ n − 1` are stars and need none).
const MAX_LAME_TABLE: usize = 1 << 20;

/// Lamé tree of order `k` (§3.2.2): shape from eq. (1)–(2), timed in LogP as described in
/// the module docs. A process reached by the iterations `i_1 < … < i_d` (`i_{m+1} ≥ i_m + k`)
/// has rank `Σ R(i_m + k − 1)` and is colored at `d·(2o+L) + o·(i_d − (d−1)·k)`; for each
/// depth `d` the latest such process has the smallest prefix `i_m = (m−1)·k` and the largest
/// `i_d` with rank `< n`. `k = 1` is the binomial tree; `k ≥ n − 1` is a star.
pub fn lame_latency(k: u32, n: u64, logp: impl Into<LogGP>) -> Result<Time, ModelError> {
    let logp: LogGP = logp.into();
    check_logp(logp)?;
    if k == 0 {
        return Err(ModelError::ZeroOrder);
    }
    if n <= 1 {
        return Ok(0);
    }
    let h = hop(logp);
    let budget = u128::from(n - 1);
    if u128::from(k) >= budget {
        // Star: the root's children are ranks 1, 2, … (eq. (2) with R = 1, 2, …).
        return Ok((n - 2).saturating_mul(logp.slot()).saturating_add(h));
    }
    let r = lame_ready(k as usize, budget).ok_or(ModelError::OrderTooLarge(k))?;
    let k = k as usize;
    let mut worst: Time = 0;
    let mut prefix: u128 = 0; // Σ_{m<d} R(m·k − 1)
    for d in 1u64.. {
        let min_index = d as usize * k - 1; // smallest i_d + k − 1
        let Some(&first) = r.get(min_index).filter(|&&v| prefix + v <= budget) else {
            break;
        };
        let room = budget - prefix;
        // Largest j with R(j) ≤ room (R is nondecreasing and the table ends above `budget`).
        let j = r.partition_point(|&v| v <= room) - 1;
        let steps = (j + 1 - d as usize * k) as u64; // i_d − (d−1)·k
        worst = worst.max(d.saturating_mul(h).saturating_add(logp.slot().saturating_mul(steps)));
        prefix += first;
    }
    Ok(worst)
}

/// `R(t)` of eq. (1) for `t = 0, 1, …` until it exceeds `limit`; `None` if that takes more
/// than [`MAX_LAME_TABLE`] entries.
fn lame_ready(k: usize, limit: u128) -> Option<Vec<u128>> {
    if k == 0 || k > MAX_LAME_TABLE {
        return None;
    }
    let mut r: Vec<u128> = vec![1; k];
    while r[r.len() - 1] <= limit {
        if r.len() >= MAX_LAME_TABLE {
            return None;
        }
        let t = r.len();
        r.push(r[t - 1].saturating_add(r[t - k]));
    }
    Some(r)
}

/// Number of processes the optimal schedule (§3.2.3, `R(t) = R(t−o) + R(t−2o−L)`, `R = 1`
/// on `[0, 2o+L)`) has colored by time `t`, capped at `cap`. Closed form: a process `d`
/// hops below the root whose ancestors waited `j_1..j_d` sends is colored at
/// `d·(2o+L) + o·Σj`, so `R(t) = Σ_{d ≤ t/(2o+L)} C(⌊(t − d·(2o+L))/o⌋ + d, d)`.
pub fn optimal_colored(t: Time, logp: impl Into<LogGP>, cap: u128) -> Result<u128, ModelError> {
    let logp: LogGP = logp.into();
    check_logp(logp)?;
    let h = hop(logp);
    let mut total: u128 = 0;
    let mut d: u64 = 0;
    while let Some(used) = d.checked_mul(h).filter(|&u| u <= t) {
        let m = u128::from((t - used) / logp.slot());
        total = total.saturating_add(binomial_capped(m + u128::from(d), d, cap));
        if total >= cap {
            break;
        }
        d += 1;
    }
    Ok(total.min(cap))
}

/// `C(m, d)` capped at `cap` (exact below the cap).
fn binomial_capped(m: u128, d: u64, cap: u128) -> u128 {
    // C(m − d + i, i) for i = 0..=d, each step exact: c·(m − d + i) / i.
    let base = m - u128::from(d);
    let mut c: u128 = 1;
    for i in 1..=u128::from(d) {
        c = c.saturating_mul(base + i) / i;
        if c >= cap {
            return cap;
        }
    }
    c
}

/// Smallest `t` with `R(t) ≥ n` for the optimal schedule of §3.2.3 (the optimal tree's
/// latency); `n ≤ 1` gives 0.
pub fn optimal_latency(n: u64, logp: impl Into<LogGP>) -> Result<Time, ModelError> {
    let logp: LogGP = logp.into();
    check_logp(logp)?;
    if n <= 1 {
        return Ok(0);
    }
    let cap = u128::from(n);
    // The binomial tree is a schedule, so the optimum is no later than its latency.
    let mut hi = binomial_latency(n, logp)?;
    while optimal_colored(hi, logp, cap)? < cap && hi < Time::MAX {
        hi = hi.saturating_mul(2).max(1);
    }
    let mut lo = 0;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if optimal_colored(mid, logp, cap)? >= cap {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LogP;

    fn lp(l: Time, o: Time) -> LogP {
        LogP { l, o }
    }

    /// Brute force: color every rank of a tree given by `children(r)` in send order.
    fn simulate(n: u64, logp: LogP, children: impl Fn(u64) -> Vec<u64>) -> Time {
        let mut colored = vec![None; n as usize];
        colored[0] = Some(0);
        let mut stack = vec![0u64];
        let mut worst = 0;
        while let Some(r) = stack.pop() {
            let c = colored[r as usize].unwrap();
            worst = worst.max(c);
            for (j, child) in children(r).into_iter().enumerate() {
                assert!(colored[child as usize].is_none(), "rank {child} reached twice");
                colored[child as usize] = Some(c + j as u64 * logp.o + logp.hop());
                stack.push(child);
            }
        }
        assert!(colored.iter().all(Option::is_some));
        worst
    }

    fn lame_children(k: usize, n: u64) -> impl Fn(u64) -> Vec<u64> {
        let r = lame_ready(k, u128::from(n) + 1).unwrap();
        move |rank| {
            let first = r.iter().position(|&v| v > u128::from(rank)).unwrap();
            (first..)
                .map(|i| rank as u128 + r.get(i + k - 1).copied().unwrap_or(u128::MAX / 2))
                .take_while(|&c| c < u128::from(n))
                .map(|c| c as u64)
                .collect()
        }
    }

    fn kary_children(k: u64, n: u64) -> impl Fn(u64) -> Vec<u64> {
        move |rank| {
            let (mut level_pow, mut start, mut size) = (1u64, 0u64, 1u64);
            while rank >= start + size {
                start += size;
                size *= k;
                level_pow *= k;
            }
            (1..=k).map(|i| rank + i * level_pow).filter(|&c| c < n).collect()
        }
    }

    const PARAMS: [(Time, Time); 5] = [(2, 1), (1, 1), (0, 1), (5, 2), (7, 3)];

    #[test]
    fn binomial_matches_brute_force() {
        for (l, o) in PARAMS {
            for n in 1..600 {
                let children = |r: u64| -> Vec<u64> {
                    (0..64)
                        .filter(|&i| (1u64 << i) > r)
                        .map(|i| r + (1u64 << i))
                        .take_while(|&c| c < n)
                        .collect()
                };
                let brute = simulate(n, lp(l, o), children);
                assert_eq!(binomial_latency(n, lp(l, o)).unwrap(), brute, "n={n} L={l} o={o}");
                assert_eq!(lame_latency(1, n, lp(l, o)).unwrap(), brute, "lame1 n={n}");
            }
        }
    }

    #[test]
    fn kary_matches_brute_force() {
        for (l, o) in PARAMS {
            for k in 1..6u32 {
                for n in 1..400 {
                    let brute = simulate(n, lp(l, o), kary_children(u64::from(k), n));
                    assert_eq!(kary_latency(k, n, lp(l, o)).unwrap(), brute, "k={k} n={n}");
                }
            }
        }
    }

    #[test]
    fn lame_matches_brute_force() {
        for (l, o) in PARAMS {
            for k in 1..7u32 {
                for n in 1..400 {
                    let brute = simulate(n, lp(l, o), lame_children(k as usize, n));
                    assert_eq!(lame_latency(k, n, lp(l, o)).unwrap(), brute, "k={k} n={n}");
                }
            }
        }
    }

    #[test]
    fn lame_figure_5_shape() {
        // Corrected Trees Fig. 5: k = 3, P = 9: 0 → {1, 2, 3, 4, 6}, 1 → {5, 7}, 2 → {8}.
        let c = lame_children(3, 9);
        assert_eq!(c(0), vec![1, 2, 3, 4, 6]);
        assert_eq!(c(1), vec![5, 7]);
        assert_eq!(c(2), vec![8]);
        // With L = o = 1 the k = 3 Lamé tree is optimal (2o + L = k).
        for n in 1..2000 {
            assert_eq!(
                lame_latency(3, n, lp(1, 1)).unwrap(),
                optimal_latency(n, lp(1, 1)).unwrap(),
                "n={n}"
            );
        }
    }

    #[test]
    fn optimal_matches_recurrence() {
        for (l, o) in PARAMS {
            let logp = lp(l, o);
            let h = logp.hop() as usize;
            let mut r: Vec<u128> = Vec::new();
            let cap = 1u128 << 64;
            for t in 0..400usize {
                let v = if t < h {
                    1
                } else {
                    (r[t - o as usize] + r[t - h]).min(cap)
                };
                r.push(v);
                assert_eq!(optimal_colored(t as Time, logp, cap).unwrap(), v, "t={t}");
            }
            for n in 1..3000u64 {
                let expect = r.iter().position(|&v| v >= u128::from(n)).unwrap() as Time;
                assert_eq!(optimal_latency(n, logp).unwrap(), expect, "n={n} L={l} o={o}");
            }
        }
    }

    #[test]
    fn optimal_is_fastest() {
        for (l, o) in PARAMS {
            for n in 1..1000 {
                let opt = optimal_latency(n, lp(l, o)).unwrap();
                assert!(opt <= binomial_latency(n, lp(l, o)).unwrap());
                for k in 1..5 {
                    assert!(opt <= kary_latency(k, n, lp(l, o)).unwrap());
                    assert!(opt <= lame_latency(k, n, lp(l, o)).unwrap());
                }
            }
        }
    }

    /// Cross-check against the topology layer's explicit trees (built, then timed).
    #[test]
    fn matches_topology_trees() {
        use crate::topology::{Order, Tree, TreeKind};
        let kinds = [
            (TreeKind::Binomial, TreeShape::Binomial, 2000),
            (TreeKind::Optimal, TreeShape::Optimal, 2000),
            (TreeKind::Kary(2), TreeShape::Kary(2), 2000),
            (TreeKind::Lame(2), TreeShape::Lame(2), 2000),
            (TreeKind::Kary(1), TreeShape::Kary(1), 300),
            (TreeKind::Kary(3), TreeShape::Kary(3), 2000),
            (TreeKind::Kary(4), TreeShape::Kary(4), 2000),
            (TreeKind::Lame(3), TreeShape::Lame(3), 2000),
            (TreeKind::Lame(5), TreeShape::Lame(5), 2000),
        ];
        for (l, o) in [(2, 1), (1, 1), (0, 1), (5, 2), (3, 3)] {
            let logp = lp(l, o);
            for (kind, shape, max_n) in kinds {
                for n in 1..=max_n {
                    let tree = Tree::build(kind, Order::Interleaved, n, logp).unwrap();
                    assert_eq!(
                        tree_latency(shape, u64::from(n), logp).unwrap(),
                        tree.dissemination_latency(logp),
                        "{kind:?} n={n} L={l} o={o}"
                    );
                }
            }
        }
    }

    #[test]
    fn gossip_figure_1_optimal_tree() {
        // Corrected Gossip Fig. 1: L = O = 1, N = 1024: "the optimal tree would require t = 20".
        assert_eq!(optimal_latency(1024, lp(1, 1)).unwrap(), 20);
    }

    #[test]
    fn small_and_bad_input() {
        assert_eq!(binomial_latency(0, lp(2, 1)), Ok(0));
        assert_eq!(binomial_latency(2, lp(2, 1)), Ok(4));
        assert_eq!(kary_latency(0, 5, lp(2, 1)), Err(ModelError::ZeroOrder));
        assert_eq!(lame_latency(0, 5, lp(2, 1)), Err(ModelError::ZeroOrder));
        assert_eq!(optimal_latency(5, lp(2, 0)), Err(ModelError::ZeroOverhead));
        assert_eq!(lame_latency(u32::MAX, 10, lp(2, 1)), Ok(12));
        assert_eq!(
            lame_latency(u32::MAX, u64::MAX, lp(2, 1)),
            Err(ModelError::OrderTooLarge(u32::MAX))
        );
        // Huge inputs saturate instead of overflowing.
        let big = lp(u64::MAX / 2, 1);
        assert_eq!(binomial_latency(u64::MAX, big), Ok(Time::MAX));
        assert!(optimal_latency(u64::MAX, lp(2, 1)).is_ok());
        assert!(kary_latency(u32::MAX, u64::MAX, big).is_ok());
    }
}
