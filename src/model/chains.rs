//! Chain-length laws on the correction ring: the longest uncolored chain (Corrected Gossip
//! §III.A.1, eq. (2)) and the longest chain holding `V` g-nodes (Appendix B).
//!
//! Both laws have the same shape. With `x = c(T+L+O)/N` the probability that a ring
//! position is a g-node and `t_i` the probability that a given position starts a pattern of
//! length `i`, the paper takes `a_i = 1 − (1 − t_i)^N` and `p_K = a_K·Π_{i>K}(1 − a_i)`.
//! The product telescopes, so the tail is
//! `Σ_{i>K} p_i = 1 − Π_{i>K}(1 − a_i) = −expm1(N·Σ_{i>K} log1p(−t_i))`,
//! which is how it is evaluated here (no cancellation for `N` up to 2^20 and beyond).
//! * eq. (2): `t_K = x²·(1−x)^K` (g-node, `K` uncolored, g-node), `1 ≤ K ≤ N−1`.
//! * App. B: `t_G = x^V·(1−x)^{G−V}·C(G−2, V−2)` (`G` nodes, first and last of them and
//!   `V−2` in between g-nodes), `V ≤ G ≤ N`.
//!
//! Fast path: `Σ t_i` has a closed form (geometric, resp. a binomial CDF with `V−1` terms),
//! and `log1p(−t) + t` is summed exactly wherever `t > 10^-7` (a few thousand indices at
//! most); elsewhere it is dropped, a relative error below `10^-7/2` on the log-tail.

use super::gossip::{GossipCurve, check_nodes};
use super::{LogP, ModelError, Time};

/// Below this `t_i` the `O(t²)` part of `log1p(−t_i)` is dropped.
const EXACT_ABOVE: f64 = 1e-7;

/// Largest `N` for which [`longest_gap_pmf`] materializes the whole distribution.
pub const MAX_PMF_NODES: u64 = 1 << 24;

/// `k·ln`, with `0·(−∞) = 0`.
fn mul_ln(k: u64, ln: f64) -> f64 {
    if k == 0 { 0.0 } else { k as f64 * ln }
}

/// `ln C(m, k)` for small `k` (−∞ if `k > m`).
fn ln_choose(m: u64, k: u64) -> f64 {
    if k > m {
        return f64::NEG_INFINITY;
    }
    (0..k).map(|j| ((m - j) as f64 / (j + 1) as f64).ln()).sum()
}

/// The pattern law: which of the two families and its index range `[lo, hi]`.
#[derive(Clone, Copy, Debug)]
enum Pattern {
    /// eq. (2): an uncolored chain of length `K` between two g-nodes.
    Gap,
    /// Appendix B: a chain of `G` nodes holding exactly `V` g-nodes, g-nodes at both ends.
    Chain { v: u64 },
}

/// Tail evaluator for one `(N, x)` and pattern (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Runs {
    pattern: Pattern,
    positions: f64,
    x: f64,
    ln_x: f64,
    ln_r: f64,
    lo: u64,
    hi: u64,
    /// First index of the range where `t_i > EXACT_ABOVE`.
    exact_lo: u64,
    /// `exact_suffix[j] = Σ_{i ≥ exact_lo + j} (log1p(−t_i) + t_i)` over that range.
    exact_suffix: Vec<f64>,
}

impl Runs {
    /// eq. (2) on `N = total` positions with g-node probability `x`.
    pub(crate) fn gap(total: u64, x: f64) -> Self {
        Self::new(Pattern::Gap, total, x, 1, total.saturating_sub(1))
    }

    /// Appendix B with `V = v ≥ 2` g-nodes per chain.
    pub(crate) fn chain(total: u64, x: f64, v: u64) -> Self {
        let v = v.max(2);
        Self::new(Pattern::Chain { v }, total, x, v, total)
    }

    fn new(pattern: Pattern, total: u64, x: f64, lo: u64, hi: u64) -> Self {
        let x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
        let mut runs = Self {
            pattern,
            positions: total as f64,
            x,
            ln_x: x.ln(),
            ln_r: (-x).ln_1p(),
            lo,
            hi,
            exact_lo: lo,
            exact_suffix: Vec::new(),
        };
        runs.build_exact_range();
        runs
    }

    /// `ln t_i` for `lo ≤ i ≤ hi`.
    fn ln_term(&self, i: u64) -> f64 {
        match self.pattern {
            Pattern::Gap => 2.0 * self.ln_x + mul_ln(i, self.ln_r),
            Pattern::Chain { v } => mul_ln(v, self.ln_x) + mul_ln(i - v, self.ln_r) + ln_choose(i - 2, v - 2),
        }
    }

    /// Index of the largest `t_i` (the law is unimodal in `i`).
    fn peak(&self) -> u64 {
        let guess = match self.pattern {
            Pattern::Gap => self.lo,
            // t_{i+1}/t_i = (1−x)(i−1)/(i−V+1) ≥ 1  ⇔  i ≤ (V − 1 − (1−x))/x.
            Pattern::Chain { v } => ((v as f64 - 2.0 + self.x) / self.x).floor() as u64 + 1,
        };
        let mut i = guess.clamp(self.lo, self.hi);
        while i < self.hi && self.ln_term(i + 1) > self.ln_term(i) {
            i += 1;
        }
        while i > self.lo && self.ln_term(i - 1) > self.ln_term(i) {
            i -= 1;
        }
        i
    }

    /// Finds the index range where `t_i > EXACT_ABOVE` and stores its corrections.
    fn build_exact_range(&mut self) {
        if self.lo > self.hi || self.x == 0.0 {
            return;
        }
        let threshold = EXACT_ABOVE.ln();
        let peak = self.peak();
        if self.ln_term(peak) <= threshold {
            return;
        }
        // Increasing on [lo, peak], decreasing on [peak, hi]: binary search both edges.
        let (mut a, mut b) = (self.lo, peak);
        while a < b {
            let mid = a + (b - a) / 2;
            if self.ln_term(mid) > threshold {
                b = mid
            } else {
                a = mid + 1
            }
        }
        let first = a;
        let (mut a, mut b) = (peak, self.hi);
        while a < b {
            let mid = a + (b - a).div_ceil(2);
            if self.ln_term(mid) > threshold {
                a = mid
            } else {
                b = mid - 1
            }
        }
        let last = a;
        let mut suffix: Vec<f64> = (first..=last)
            .map(|i| {
                let t = self.ln_term(i).exp();
                (-t).ln_1p() + t
            })
            .collect();
        for j in (0..suffix.len().saturating_sub(1)).rev() {
            suffix[j] += suffix[j + 1];
        }
        self.exact_lo = first;
        self.exact_suffix = suffix;
    }

    /// `Σ_{i ≥ a} t_i` over the unbounded law (closed form).
    fn sum_from(&self, a: u64) -> f64 {
        let a = a.max(self.lo);
        match self.pattern {
            Pattern::Gap => (self.ln_x + mul_ln(a, self.ln_r)).exp(),
            // x·P(Binomial(a−2, x) ≤ V−2): the (V−1)-th g-node after the first comes at ≥ a.
            Pattern::Chain { v } => {
                let m = a - 2;
                let sum: f64 = (0..=v - 2)
                    .map(|s| (ln_choose(m, s) + mul_ln(s, self.ln_x) + mul_ln(m - s, self.ln_r)).exp())
                    .sum();
                self.x * sum
            }
        }
    }

    /// `Σ_{i=a}^{hi} t_i`.
    fn range_sum(&self, a: u64) -> f64 {
        let a = a.max(self.lo);
        if a > self.hi {
            return 0.0;
        }
        if self.hi - a < 64 {
            return (a..=self.hi).map(|i| self.ln_term(i).exp()).sum();
        }
        (self.sum_from(a) - self.sum_from(self.hi.saturating_add(1))).max(0.0)
    }

    /// `Σ_{i=a}^{hi} log1p(−t_i)` (≤ 0).
    fn log_tail(&self, a: u64) -> f64 {
        let exact_hi = self.exact_lo + self.exact_suffix.len() as u64;
        let correction = if self.exact_suffix.is_empty() || a >= exact_hi {
            0.0
        } else {
            self.exact_suffix[a.saturating_sub(self.exact_lo) as usize]
        };
        correction - self.range_sum(a)
    }

    /// `Σ_{i>k} p_i = 1 − Π_{i>k}(1 − a_i)`: probability that some pattern is longer than `k`.
    pub(crate) fn tail(&self, k: u64) -> f64 {
        -(self.positions * self.log_tail(k.saturating_add(1))).exp_m1()
    }

    /// Smallest `k` in `[lo − 1, min(limit, hi)]` with `tail(k) < δ`, with that tail; `None`
    /// when even `limit` does not reach `δ`.
    pub(crate) fn smallest_below(&self, delta: f64, limit: Option<u64>) -> Option<(u64, f64)> {
        let floor = self.lo - 1;
        if self.hi < self.lo {
            return Some((floor, 0.0)).filter(|&(k, _)| limit.is_none_or(|l| k <= l));
        }
        // tail(k) < δ  ⇔  N·log_tail(k+1) > ln(1 − δ).
        let threshold = (-delta).ln_1p();
        let below = |k: u64| self.positions * self.log_tail(k + 1) > threshold;
        let top = limit.map_or(self.hi, |l| l.min(self.hi));
        if top < floor || !below(top) {
            return None;
        }
        let (mut a, mut b) = (floor, top);
        while a < b {
            let mid = a + (b - a) / 2;
            if below(mid) { b = mid } else { a = mid + 1 }
        }
        Some((a, self.tail(a)))
    }

    /// `p_k` of eq. (2) (or `q_k` of Appendix B); `k = lo − 1` is "no pattern at all".
    fn probability(&self, k: u64) -> f64 {
        if k < self.lo - 1 || k > self.hi {
            return 0.0;
        }
        let none_longer = (self.positions * self.log_tail(k + 1)).exp();
        if k == self.lo - 1 {
            return none_longer;
        }
        let t = self.ln_term(k).exp();
        let exists = -(self.positions * (-t).ln_1p()).exp_m1();
        exists * none_longer
    }
}

/// Validates `0 < δ < 1`.
pub(crate) fn check_delta(delta: f64) -> Result<(), ModelError> {
    if delta > 0.0 && delta < 1.0 {
        Ok(())
    } else {
        Err(ModelError::Delta(delta))
    }
}

/// `x = c(T+L+O)/N`: probability that a ring position is a g-node when correction starts.
fn gnode_share(total: u64, active: u64, t_stop: Time, logp: LogP) -> Result<f64, ModelError> {
    let mut curve = GossipCurve::new(total, active, logp)?;
    Ok(curve.at_correction_start(t_stop)? / total as f64)
}

/// eq. (2): probability that the longest uncolored chain after gossiping until `T` has
/// length `K` (`K = 0`: no uncolored node between g-nodes at all, `Π_{i≥1}(1 − a_i)`, which
/// the paper leaves implicit; with it the law sums to 1).
pub fn longest_gap_probability(k: u64, total: u64, active: u64, t_stop: Time, logp: LogP) -> Result<f64, ModelError> {
    let x = gnode_share(total, active, t_stop, logp)?;
    Ok(Runs::gap(total, x).probability(k))
}

/// eq. (2) for every `K = 0..N` (index `K`), summed exactly (no fast path);
/// `N ≤` [`MAX_PMF_NODES`].
pub fn longest_gap_pmf(total: u64, active: u64, t_stop: Time, logp: LogP) -> Result<Vec<f64>, ModelError> {
    check_nodes(total, active)?;
    if total > MAX_PMF_NODES {
        return Err(ModelError::TooManyNodes(total));
    }
    let x = gnode_share(total, active, t_stop, logp)?;
    let runs = Runs::gap(total, x);
    let positions = total as f64;
    // suffix = Σ_{j>K} log1p(−t_j), K from N−1 down to 0.
    let mut pmf = vec![0.0; total as usize];
    let mut suffix = 0.0;
    for k in (1..total).rev() {
        let log1p_t = (-runs.ln_term(k).exp()).ln_1p();
        pmf[k as usize] = -(positions * log1p_t).exp_m1() * (positions * suffix).exp();
        suffix += log1p_t;
    }
    pmf[0] = (positions * suffix).exp();
    Ok(pmf)
}

/// Claim 2: `K̂`, the smallest `K` with `Σ_{i>K} p_i < δ` (eq. (2)) after gossiping until `T`
/// on `n` active of `N` nodes.
pub fn k_hat(delta: f64, total: u64, active: u64, t_stop: Time, logp: LogP) -> Result<u64, ModelError> {
    check_delta(delta)?;
    let x = gnode_share(total, active, t_stop, logp)?;
    Ok(Runs::gap(total, x)
        .smallest_below(delta, None)
        .map_or(total.saturating_sub(1), |(k, _)| k))
}

/// Appendix B: `Ĝ_V`, the smallest `G ≥ V` with `Σ_{i>G} q_i < δ`, where `q_G` is the
/// probability that the longest chain of consecutive nodes holding exactly `V` g-nodes
/// (`V ≥ 2`) has length `G`.
pub fn g_hat(delta: f64, total: u64, active: u64, t_stop: Time, v: u64, logp: LogP) -> Result<u64, ModelError> {
    check_delta(delta)?;
    let x = gnode_share(total, active, t_stop, logp)?;
    let v = v.max(2);
    Ok(Runs::chain(total, x, v)
        .smallest_below(delta, None)
        .map_or(total, |(g, _)| g.max(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact smallest `k` with tail < δ by direct summation.
    fn brute_smallest(runs: &Runs, delta: f64) -> (u64, f64) {
        let mut suffix = 0.0;
        let mut k = runs.hi;
        loop {
            // suffix = Σ_{i>k} log1p(−t_i)
            let tail = -(runs.positions * suffix).exp_m1();
            if tail >= delta {
                let next = k + 1;
                let mut s = 0.0;
                for i in next + 1..=runs.hi {
                    s += (-runs.ln_term(i).exp()).ln_1p();
                }
                return (next, -(runs.positions * s).exp_m1());
            }
            if k < runs.lo {
                return (k, tail);
            }
            suffix += (-runs.ln_term(k).exp()).ln_1p();
            k -= 1;
        }
    }

    #[test]
    fn fast_tail_matches_direct_sum() {
        for total in [10u64, 100, 1024, 4096, 65536] {
            for x in [1e-4f64, 1e-3, 0.0031, 0.01, 0.05, 0.2, 0.5, 0.8, 0.97, 0.999, 1.0] {
                let x = x.max(1.0 / total as f64);
                for runs in [Runs::gap(total, x), Runs::chain(total, x, 5), Runs::chain(total, x, 3)] {
                    for delta in [super::super::DEFAULT_DELTA, 1e-3, 0.3] {
                        let fast = runs.smallest_below(delta, None).unwrap();
                        let brute = brute_smallest(&runs, delta);
                        assert_eq!(fast.0, brute.0, "N={total} x={x} δ={delta} {runs:?}");
                        let rel = (fast.1 - brute.1).abs() / brute.1.max(1e-300);
                        assert!(rel < 1e-6 || (fast.1 - brute.1).abs() < 1e-15, "{fast:?} {brute:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn pmf_sums_to_one() {
        let logp = LogP { l: 1, o: 1 };
        for (total, active, t) in [(1024, 1024, 10), (1024, 1024, 24), (4096, 4000, 30), (1000, 3, 5)] {
            let pmf = longest_gap_pmf(total, active, t, logp).unwrap();
            let sum: f64 = pmf.iter().sum();
            assert!((sum - 1.0).abs() < 1e-9, "Σ = {sum}");
            assert!(pmf.iter().all(|&p| (0.0..=1.0).contains(&p)));
            for k in [0, 1, 2, 5, 50] {
                let one = longest_gap_probability(k, total, active, t, logp).unwrap();
                assert!(
                    (one - pmf[k as usize]).abs() < 1e-9,
                    "K={k}: {one} vs {}",
                    pmf[k as usize]
                );
            }
        }
        // Early in the gossip a gap certainly exists: Σ_{K≥1} p_K ≈ 1 as the paper states.
        let pmf = longest_gap_pmf(1024, 1024, 15, logp).unwrap();
        assert!((pmf[1..].iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn k_hat_decreases_with_t_and_delta() {
        let logp = LogP { l: 1, o: 1 };
        let d = super::super::DEFAULT_DELTA;
        let ks: Vec<u64> = (10..40).map(|t| k_hat(d, 1024, 1024, t, logp).unwrap()).collect();
        assert!(ks.windows(2).all(|w| w[0] >= w[1]), "{ks:?}");
        assert_eq!(ks[24 - 10], 3);
        assert!(k_hat(1e-12, 1024, 1024, 24, logp).unwrap() >= k_hat(d, 1024, 1024, 24, logp).unwrap());
        assert_eq!(k_hat(d, 1, 1, 5, logp), Ok(0));
        assert!(k_hat(0.0, 1024, 1024, 24, logp).is_err());
        assert!(k_hat(1.0, 1024, 1024, 24, logp).is_err());
        assert!(k_hat(f64::NAN, 1024, 1024, 24, logp).is_err());
    }

    #[test]
    fn g_hat_sane() {
        let logp = LogP { l: 1, o: 1 };
        let d = super::super::DEFAULT_DELTA;
        // All nodes g-nodes: a 5-chain is exactly 5 long.
        assert_eq!(g_hat(d, 64, 64, 1000, 5, logp), Ok(5));
        let gs: Vec<u64> = (15..40).map(|t| g_hat(d, 1024, 1024, t, 5, logp).unwrap()).collect();
        assert!(gs.windows(2).all(|w| w[0] >= w[1]), "{gs:?}");
        assert!(gs.iter().all(|&g| g >= 5));
        // A chain of 5 g-nodes around the longest gap is longer than that gap (loosely: the
        // two laws are separate approximations, so only a weak ordering is asserted).
        for t in 15..30 {
            let k = k_hat(d, 1024, 1024, t, logp).unwrap();
            let g = g_hat(d, 1024, 1024, t, 5, logp).unwrap();
            assert!(g >= k + 2, "t={t}: Ĝ={g} K̂={k}");
        }
    }
}
