//! Synchronized checked correction of Corrected Trees (§4.2, Lemmas 2–3, Corollary 1).

use super::{LogGP, LogP, ModelError, Time, check_logp};

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

/// Lemma 2 and Corollary 1 in LogGP: every participant starts at the synchronized
/// start `S`, sends one message per slot `s = max(o_s + G(k−1), g)` (first left, then
/// alternating) and stops once it has heard from both neighbours. Its right neighbour's first
/// message ends its receive at `S + h` (`h` = hop), its left neighbour's (sent one slot later)
/// at `S + s + h`, and a receive that ends at a slot's start is seen by that slot, so a
/// participant sends in the slots `j·s < h + s`: `M = 1 + ⌈h/s⌉` messages, the last one
/// received at `S + ⌈h/s⌉·s + h`. Returns `(L_FF_SCC, M_SCC)`. The derivation needs receives
/// not to queue (`max(o_r, g) ≤ s`): otherwise `None`. For LogP with `o | L` this is exactly
/// Lemma 2 (`4o + 2L`) and Corollary 1 (`3 + L/o`).
pub fn scc_loggp(p: LogGP) -> Result<Option<(Time, u64)>, ModelError> {
    check_logp(p)?;
    let (h, s) = (p.hop(), p.slot());
    if p.recv_slot() > s {
        return Ok(None);
    }
    let k = h.div_ceil(s);
    Ok(Some((k.saturating_mul(s).saturating_add(h), k.saturating_add(1))))
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
    fn loggp_form_is_lemma_2_for_logp_with_o_dividing_l() {
        for (l, o) in [(0, 1), (2, 1), (4, 2), (6, 3), (9, 3), (5, 1)] {
            let want = (l_ff_scc(lp(l, o)).unwrap(), m_scc(lp(l, o)).unwrap());
            assert_eq!(scc_loggp(lp(l, o).into()), Ok(Some(want)), "L={l} o={o}");
        }
        // Receives that queue (o_r > o_s, g = 0) are outside the derivation.
        assert_eq!(scc_loggp(LogGP::new(2, 1, 3, 0, 0).unwrap()), Ok(None));
    }

    #[test]
    fn bad_input() {
        assert_eq!(l_ff_scc(lp(2, 0)), Err(ModelError::ZeroOverhead));
        assert_eq!(m_scc(lp(2, 0)), Err(ModelError::ZeroOverhead));
        assert_eq!(l_scc_bounds(u64::MAX, lp(2, 1)), Ok((Time::MAX, Time::MAX)));
    }
}
