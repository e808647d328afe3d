//! The gossip phase of Corrected Gossip (§III.A, Lemma 1) and plain gossip, GOS (§IV.B.1).
//!
//! Time grid: every colored node sends one message per `O`, so Lemma 1 is evaluated at the
//! multiples of `O`; step `s` is time `s·O` and `c(t)` for other `t` is `c(⌊t/O⌋·O)`. The
//! paper assumes `O | L` (§II). Otherwise `L` is rounded **up** to `⌈L/O⌉·O` inside `c(t)`
//! (each hop lands on the next `O` slot), which slows the curve slightly, so `c` is
//! conservative (fewer g-nodes, longer gaps); the latency formulas keep the exact `L`.
//! The gossip stop time `T` is likewise taken on the grid: nodes send at `s·O < T`, i.e.
//! `⌈T/O⌉` rounds, and the correction starts at `⌈T/O⌉·O + L + O`.

use super::{LogP, ModelError, Time, check_logp};

/// Longest grid the curve stores (`2^24` steps of `O`); longer horizons are an error.
pub const MAX_GOSSIP_STEPS: u64 = 1 << 24;

/// Validates `1 ≤ n ≤ N`.
pub(crate) fn check_nodes(total: u64, active: u64) -> Result<(), ModelError> {
    if active == 0 || active > total {
        Err(ModelError::Nodes { total, active })
    } else {
        Ok(())
    }
}

/// `⌈T/O⌉`: the number of gossip rounds (sends at `s·O < T`).
pub(crate) fn rounds(t: Time, o: Time) -> u64 {
    t.div_ceil(o)
}

/// Expected g-node count `c(t)` of Lemma 1 on the grid of multiples of `O`:
/// `c(t+O) = c(t) + (n − c(t))·[1 − (1 − 1/(N−1))^{c(t−L−O)}]`, `c(0) = 1`, `c(t<0) = 0`.
#[derive(Clone, Debug)]
pub struct GossipCurve {
    active: f64,
    /// Grid steps between a sender's coloring and its first possible victim: `⌈L/O⌉ + 1`.
    lag: u64,
    /// `ln(1 − 1/(N−1))` (−∞ for N = 2); `None` when N = 1 (no one to send to).
    ln_miss: Option<f64>,
    o: Time,
    l: Time,
    /// `c(s·O)` for `s = 0..values.len()`.
    values: Vec<f64>,
    /// Step from which the curve is constant (fixed point reached).
    fixed_from: Option<u64>,
}

impl GossipCurve {
    /// The curve for `n = active` live nodes out of `N = total` (`1 ≤ n ≤ N`).
    pub fn new(total: u64, active: u64, logp: LogP) -> Result<Self, ModelError> {
        check_logp(logp)?;
        check_nodes(total, active)?;
        let ln_miss = match total {
            1 => None,
            2 => Some(f64::NEG_INFINITY),
            _ => Some((-1.0 / (total - 1) as f64).ln_1p()),
        };
        Ok(Self {
            active: active as f64,
            lag: logp.l.div_ceil(logp.o).saturating_add(1),
            ln_miss,
            o: logp.o,
            l: logp.l,
            values: vec![1.0],
            fixed_from: None,
        })
    }

    /// Grid steps `⌈L/O⌉ + 1` from a node's coloring to the first node it can color.
    pub fn lag_steps(&self) -> u64 {
        self.lag
    }

    /// `c(s·O)`.
    pub fn at_step(&mut self, s: u64) -> Result<f64, ModelError> {
        while (self.values.len() as u64) <= s {
            if let Some(fixed) = self.fixed_from {
                return Ok(self.values[fixed as usize]);
            }
            if self.values.len() as u64 >= MAX_GOSSIP_STEPS {
                return Err(ModelError::Horizon(s));
            }
            self.extend();
        }
        Ok(self.values[s as usize])
    }

    /// `c(t)`, constant between grid points.
    pub fn at(&mut self, t: Time) -> Result<f64, ModelError> {
        self.at_step(t / self.o)
    }

    /// `c(T + L + O)`: the expected g-node count when the correction phase starts after
    /// gossiping until `T` (grid rounding as in the module docs).
    pub fn at_correction_start(&mut self, t_stop: Time) -> Result<f64, ModelError> {
        self.at_step(rounds(t_stop, self.o).saturating_add(self.lag))
    }

    /// Appends `c((s+1)·O)` for the last stored step `s`.
    fn extend(&mut self) {
        let s = self.values.len() - 1;
        let c = self.values[s];
        let senders = if s as u64 >= self.lag {
            self.values[s - self.lag as usize]
        } else {
            0.0
        };
        let hit = match self.ln_miss {
            Some(ln_miss) if senders > 0.0 => -(senders * ln_miss).exp_m1(),
            _ => 0.0,
        };
        let next = (c + (self.active - c) * hit).min(self.active);
        self.values.push(next);
        // Constant from here on once the whole lag window is equal and nothing changes.
        let len = self.values.len();
        if next == c && (len as u64) > self.lag + 1 {
            let window = &self.values[len - 1 - self.lag as usize..];
            if window.iter().all(|&v| v == next) {
                self.fixed_from = Some(len as u64 - 1);
            }
        }
    }

    /// The stored `c(s·O)` for `s ≤ steps` (computing them if needed).
    pub fn values(&mut self, steps: u64) -> Result<Vec<f64>, ModelError> {
        (0..=steps).map(|s| self.at_step(s)).collect()
    }

    /// LogP latency `L` this curve was built for.
    pub fn latency(&self) -> Time {
        self.l
    }

    /// LogP overhead `O` this curve was built for.
    pub fn overhead(&self) -> Time {
        self.o
    }

    /// Number of active nodes `n`.
    pub fn active(&self) -> f64 {
        self.active
    }
}

/// Lemma 1: expected number of g-nodes at time `t` (grid rounding as in the module docs).
pub fn expected_gnodes(total: u64, active: u64, t: Time, logp: LogP) -> Result<f64, ModelError> {
    GossipCurve::new(total, active, logp)?.at(t)
}

/// GOS (§IV.B.1): expected fraction of the `n` active nodes colored when gossip that stops
/// sending at `T` has drained, `c(T + L + O)/n` (Lemma 1).
pub fn gos_colored_fraction(total: u64, active: u64, t_stop: Time, logp: LogP) -> Result<f64, ModelError> {
    let mut curve = GossipCurve::new(total, active, logp)?;
    Ok(curve.at_correction_start(t_stop)? / active as f64)
}

/// GOS: expected number of gossip messages until `T`, `Σ_{s·O < T} c(s·O)` (every g-node
/// sends once per `O` from its coloring on, Lemma 1's model).
pub fn gos_expected_messages(total: u64, active: u64, t_stop: Time, logp: LogP) -> Result<f64, ModelError> {
    let mut curve = GossipCurve::new(total, active, logp)?;
    let mut sum = 0.0;
    for s in 0..rounds(t_stop, logp.o) {
        sum += curve.at_step(s)?;
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(l: Time, o: Time) -> LogP {
        LogP { l, o }
    }

    #[test]
    fn starts_at_one_and_is_monotone_to_n() {
        for (total, active, l, o) in [(1024, 1024, 1, 1), (4096, 4000, 2, 1), (1000, 10, 3, 2)] {
            let mut c = GossipCurve::new(total, active, lp(l, o)).unwrap();
            assert_eq!(c.at(0).unwrap(), 1.0);
            let v = c.values(4000).unwrap();
            assert!(v.windows(2).all(|w| w[0] <= w[1]), "not monotone");
            // Nothing arrives before the first hop 2O + L.
            let first_arrival = (2 * o + l).div_ceil(o) * o;
            assert_eq!(c.at(first_arrival - 1).unwrap(), 1.0);
            assert!(c.at(first_arrival).unwrap() > 1.0);
            assert!((v[4000] - active as f64).abs() < 1e-9, "{} vs {active}", v[4000]);
        }
    }

    #[test]
    fn figure_1_half_colored_near_t_18() {
        // Corrected Gossip Fig. 1 (L = O = 1, N = n = 1024): the coloring rate peaks around
        // 512 nodes at t ≈ 18. Our curve: c(18) ≈ 431.5, c(19) ≈ 554.2.
        let mut c = GossipCurve::new(1024, 1024, lp(1, 1)).unwrap();
        let cross = (0..100).find(|&t| c.at(t).unwrap() >= 512.0).unwrap();
        assert!((18..=19).contains(&cross), "crosses 512 at {cross}");
        let rate = |c: &mut GossipCurve, t| c.at(t + 1).unwrap() - c.at(t).unwrap();
        let peak = (0..60)
            .max_by(|&a, &b| rate(&mut c, a).total_cmp(&rate(&mut c, b)))
            .unwrap();
        assert!((17..=19).contains(&peak), "steepest step at {peak}");
        // The paper's opening numbers: c(3) = 2 (first message lands at 2O + L).
        assert_eq!(c.at(3).unwrap(), 2.0);
    }

    #[test]
    fn rounding_of_l_not_divisible_by_o() {
        // L = 3, O = 2 behaves like L = 4, O = 2.
        let mut a = GossipCurve::new(500, 500, lp(3, 2)).unwrap();
        let mut b = GossipCurve::new(500, 500, lp(4, 2)).unwrap();
        for t in 0..200 {
            assert_eq!(a.at(t).unwrap(), b.at(t).unwrap());
        }
    }

    #[test]
    fn degenerate_systems() {
        assert_eq!(expected_gnodes(1, 1, 100, lp(1, 1)), Ok(1.0));
        assert_eq!(expected_gnodes(2, 2, 3, lp(1, 1)), Ok(2.0));
        assert_eq!(expected_gnodes(2, 1, 50, lp(1, 1)), Ok(1.0));
        assert!(expected_gnodes(10, 0, 5, lp(1, 1)).is_err());
        assert!(expected_gnodes(10, 11, 5, lp(1, 1)).is_err());
        assert!(expected_gnodes(10, 10, 5, lp(1, 0)).is_err());
        // Far horizons of a converged curve need no storage.
        assert!((expected_gnodes(64, 64, u64::MAX, lp(1, 1)).unwrap() - 64.0).abs() < 1e-9);
    }

    #[test]
    fn gos_fraction_and_messages() {
        let f = gos_colored_fraction(1024, 1024, 40, lp(1, 1)).unwrap();
        assert!(f > 0.999 && f <= 1.0);
        // T = 1: only the root sends, once.
        assert_eq!(gos_expected_messages(1024, 1024, 1, lp(1, 1)), Ok(1.0));
        assert_eq!(gos_expected_messages(1024, 1024, 3, lp(1, 1)), Ok(3.0));
    }
}
