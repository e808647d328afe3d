//! The model of a measured machine: LogGP with its own `o_s`, `o_r` and `L` in nanoseconds,
//! expressed in a time unit the protocols count in (the runtime's clock tick and the
//! simulator's time), fine enough that no parameter is lost to rounding.

use crate::model::{LogGP, LogP};

/// The model of a bench run: LogGP with the machine's own `o_s`, `o_r` and `L` (measured,
/// calibrated or given), in a time unit fine enough to carry each of them.
///
/// The unit is the protocols' counted time in the runtime (a node's clock reads
/// `ns / unit_ns`) and the simulator's: a correction phase that starts "after dissemination"
/// must start after the machine's dissemination, whose sends cost `o_s` each and whose
/// receives cost `o_r`. Counting in units of one mean `o` both rounded `L` to whole `o`s (a
/// 238 ns loopback `L` with `o` = 552 ns became 0) and made every send cost the mean, not
/// `o_s`, so a sender with many children was modeled faster than it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BenchModel {
    /// Nanoseconds per model time unit.
    pub unit_ns: u64,
    /// `L`, `o_s`, `o_r` in units (`g` and `G` are 0: small messages, `g ≤ o`).
    pub loggp: LogGP,
    /// The parameters in ns as given (after processor sharing).
    pub os_ns: u64,
    pub or_ns: u64,
    pub l_ns: u64,
}

impl BenchModel {
    /// Units per the smaller of `o_s` and `o_r`: rounding then moves no parameter by more
    /// than 1/32 of it (and `L` by at most half a unit).
    pub const RESOLUTION: u64 = 16;

    /// The model of a machine with send and receive overheads `os_ns`, `or_ns` and latency
    /// `l_ns` (an overhead of 0 counts as 1 ns).
    pub fn new(os_ns: u64, or_ns: u64, l_ns: u64) -> Self {
        let (os_ns, or_ns) = (os_ns.max(1), or_ns.max(1));
        let unit_ns = (os_ns.min(or_ns) / Self::RESOLUTION).max(1);
        let units = |ns: u64| (ns + unit_ns / 2) / unit_ns;
        let loggp = LogGP {
            l: units(l_ns),
            os: units(os_ns).max(1),
            or: units(or_ns).max(1),
            g: 0,
            gk: 0,
        };
        BenchModel {
            unit_ns,
            loggp,
            os_ns,
            or_ns,
            l_ns,
        }
    }

    /// LogP with the mean of `o_s` and `o_r`, in the same unit: what the tuning of the
    /// gossip algorithms (Corrected Gossip §3, derived in LogP) is given.
    pub fn mean_logp(&self) -> LogP {
        LogP {
            l: self.loggp.l,
            o: ((self.loggp.os + self.loggp.or) / 2).max(1),
        }
    }

    /// The mean overhead `(o_s + o_r) / 2` in ns (the single `o` of LogP reports).
    pub fn mean_o_ns(&self) -> u64 {
        ((self.os_ns + self.or_ns) / 2).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_latency_survives_the_unit() {
        // The loopback figures that a unit of one mean o rounded to L = 0.
        let m = BenchModel::new(783, 321, 238);
        assert_eq!(m.unit_ns, 20);
        assert_eq!((m.loggp.os, m.loggp.or, m.loggp.l), (39, 16, 12));
        let hop_ns = m.loggp.hop() * m.unit_ns;
        assert!(hop_ns.abs_diff(783 + 238 + 321) <= m.unit_ns * 3 / 2, "{hop_ns}");
        assert_eq!(m.mean_o_ns(), 552);
        assert_eq!(m.mean_logp(), LogP { l: 12, o: 27 });
    }

    #[test]
    fn every_parameter_is_within_a_32nd_of_itself() {
        for (os, or, l) in [(1, 1, 0), (100, 5000, 7), (2400, 800, 9000), (17, 17, 17), (0, 3, 1)] {
            let m = BenchModel::new(os, or, l);
            for (ns, units) in [(os.max(1), m.loggp.os), (or.max(1), m.loggp.or)] {
                let back = units * m.unit_ns;
                assert!(back.abs_diff(ns) * 32 <= ns.max(32), "{os} {or} {l}: {ns} -> {back}");
            }
            assert!((m.loggp.l * m.unit_ns).abs_diff(l) <= m.unit_ns / 2, "{l}");
        }
    }

    #[test]
    fn equal_overheads_are_logp() {
        let m = BenchModel::new(1000, 1000, 3000);
        assert_eq!(LogGP::from(m.mean_logp()), m.loggp);
    }
}
