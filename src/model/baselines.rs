//! Fault-free costs of the baseline reliable broadcasts of Corrected Gossip §IV.B.
//!
//! The paper writes `log₂ N` for trees that need whole levels; here it is `⌈log₂ N⌉`
//! ([`ceil_log2`]), equal to the paper's value when `N` is a power of two.

use super::{LogP, ModelError, Time, check_logp, hop};

/// `⌈log₂ n⌉` (0 for `n ≤ 1`).
pub fn ceil_log2(n: u64) -> u64 {
    if n <= 1 {
        0
    } else {
        u64::from(64 - (n - 1).leading_zeros())
    }
}

/// BFB (§IV.B.2): minimal fault-free latency of Buntinas' broadcast, down a tree and the
/// acknowledgments back up, `T_BFB = 2·(2O + L)·⌈log₂ N⌉`. (The scanned text reads
/// "TBFB =220 + L)log, N"; this is its reading.)
pub fn t_bfb(total: u64, logp: LogP) -> Result<Time, ModelError> {
    check_logp(logp)?;
    Ok(hop(logp).saturating_mul(2).saturating_mul(ceil_log2(total)))
}

/// BFB fault-free message count: one message down and one acknowledgment up per non-root
/// node, `2(N − 1)`.
pub fn bfb_messages(total: u64) -> u64 {
    total.saturating_sub(1).saturating_mul(2)
}

/// BIG (§IV.B.3): fault-free latency on the binomial graph,
/// `T_BIG = (2O + L)·⌈log₂ P⌉ + O·⌈log₂ P⌉` (a binomial tree whose last node also receives
/// `log₂ P` more messages).
pub fn t_big(processes: u64, logp: LogP) -> Result<Time, ModelError> {
    check_logp(logp)?;
    let levels = ceil_log2(processes);
    Ok(hop(logp)
        .saturating_mul(levels)
        .saturating_add(logp.o.saturating_mul(levels)))
}

/// BIG fault-free message count: every node forwards the first message it gets to its
/// `⌈log₂ P⌉` neighbours `p + 2^x mod P`, so `P·⌈log₂ P⌉`.
pub fn big_messages(processes: u64) -> u64 {
    processes.saturating_mul(ceil_log2(processes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2() {
        let cases = [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (4096, 12), (4097, 13)];
        for (n, l) in cases {
            assert_eq!(ceil_log2(n), l, "n={n}");
        }
        assert_eq!(ceil_log2(u64::MAX), 64);
    }

    #[test]
    fn case_study_4096() {
        // §IV.D: N = 4096, L = 2, O = 1.
        let logp = LogP { l: 2, o: 1 };
        assert_eq!(t_bfb(4096, logp), Ok(96));
        assert_eq!(t_big(4096, logp), Ok(60));
        assert_eq!(bfb_messages(4096), 8190);
        assert_eq!(big_messages(4096), 49152);
        // BIG is consistent up to log₂(4096) − 1 = 11 failures: 12 neighbours.
        assert_eq!(ceil_log2(4096) - 1, 11);
    }

    #[test]
    fn edges() {
        let logp = LogP { l: 2, o: 1 };
        assert_eq!(t_bfb(1, logp), Ok(0));
        assert_eq!(t_big(1, logp), Ok(0));
        assert_eq!(bfb_messages(0), 0);
        assert_eq!(t_bfb(8, LogP { l: 2, o: 0 }), Err(ModelError::ZeroOverhead));
        assert_eq!(t_big(u64::MAX, LogP { l: u64::MAX, o: 1 }), Ok(Time::MAX));
    }
}
