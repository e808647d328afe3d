//! Synchronized checked correction of Corrected Trees (§4.2, Lemmas 2–3, Corollary 1).

use super::{LogP, ModelError, Time, check_logp};

/// Lemma 2: fault-free quiescence latency of synchronized checked correction,
/// `L_FF_SCC = 4o + L + ⌊L/o⌋·o` (8 for L = 2, o = 1).
pub fn l_ff_scc(logp: LogP) -> Result<Time, ModelError> {
    check_logp(logp)?;
    let o = logp.o;
    Ok(o.saturating_mul(4)
        .saturating_add(logp.l)
        .saturating_add((logp.l / o).saturating_mul(o)))
}

/// Corollary 1: fault-free correction messages per process, `M_SCC = 3 + ⌊L/o⌋`.
pub fn m_scc(logp: LogP) -> Result<u64, ModelError> {
    check_logp(logp)?;
    Ok((logp.l / logp.o).saturating_add(3))
}

/// Lemma 3: bounds `(lower, upper)` on the quiescence latency of synchronized checked
/// correction given the maximum gap `g_max` (assumes `P ≫ g_max`):
/// `L_FF_SCC + g_max·o ≤ L_SCC ≤ L_FF_SCC + (2·g_max + 1)·o`.
pub fn l_scc_bounds(g_max: u64, logp: LogP) -> Result<(Time, Time), ModelError> {
    let ff = l_ff_scc(logp)?;
    let lower = ff.saturating_add(g_max.saturating_mul(logp.o));
    let upper = ff.saturating_add(g_max.saturating_mul(2).saturating_add(1).saturating_mul(logp.o));
    Ok((lower, upper))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(l: Time, o: Time) -> LogP {
        LogP { l, o }
    }

    #[test]
    fn lemma_2_and_corollary_1() {
        // (L, o) → (L_FF_SCC, M_SCC)
        let cases = [
            ((2, 1), (8, 5)),
            ((1, 1), (6, 4)),
            ((0, 1), (4, 3)),
            ((3, 2), (13, 4)),
            ((5, 2), (17, 5)),
            ((1, 3), (13, 3)),
            ((10, 4), (34, 5)),
        ];
        for ((l, o), (lat, msgs)) in cases {
            assert_eq!(l_ff_scc(lp(l, o)), Ok(lat), "L={l} o={o}");
            assert_eq!(m_scc(lp(l, o)), Ok(msgs), "L={l} o={o}");
        }
    }

    #[test]
    fn lemma_3_brackets_table_1() {
        // Corrected Trees Table 1 (L = 2, o = 1): g_max = 0 → L_SCC = 8, and each row's 99th
        // percentiles (g_max, L_SCC) lie inside the bounds.
        assert_eq!(l_scc_bounds(0, lp(2, 1)), Ok((8, 9)));
        for (g, observed) in [(1, 10), (2, 12), (5, 16), (8, 19), (13, 26)] {
            let (lo, hi) = l_scc_bounds(g, lp(2, 1)).unwrap();
            assert!(lo <= observed && observed <= hi, "g={g}: {lo}..{hi} vs {observed}");
        }
    }

    #[test]
    fn bad_input() {
        assert_eq!(l_ff_scc(lp(2, 0)), Err(ModelError::ZeroOverhead));
        assert_eq!(m_scc(lp(2, 0)), Err(ModelError::ZeroOverhead));
        assert_eq!(l_scc_bounds(u64::MAX, lp(2, 1)), Ok((Time::MAX, Time::MAX)));
    }
}
