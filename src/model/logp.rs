//! LogP parameters as the simulator and the closed forms use them (Corrected Trees §2.2).

use serde::Serialize;

/// Virtual time in LogP units (integers, Corrected Trees §2.2: `{o, L} ∈ Z+`).
pub type Time = u64;

/// The two LogP parameters that matter for small messages: `g` is ignored because
/// `g ≤ o` (Corrected Trees §2.2) and `P` is carried separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LogP {
    /// Network latency `L`.
    pub l: Time,
    /// Per-message send and receive overhead `o` (> 0).
    pub o: Time,
}

impl LogP {
    /// The largest `L` and `o` accepted by [`LogP::new`]: the simulator adds `2o + L` to
    /// times, multiplies it by tree depths and round counts, and sizes its event queue from
    /// it; bounding both by 2^32 keeps all of that far from `u64` overflow (issue 14 item 6).
    pub const MAX: Time = 1 << 32;

    /// Creates LogP parameters; `o` must be at least 1, `L` and `o` at most [`LogP::MAX`].
    /// Errors name the parameter as the command line does (`--L`, `--o`).
    pub fn new(l: Time, o: Time) -> Result<Self, String> {
        if o == 0 {
            return Err("--o must be at least 1".into());
        }
        for (name, v) in [("--L", l), ("--o", o)] {
            if v > Self::MAX {
                return Err(format!("{name} must be at most {} (got {v})", Self::MAX));
            }
        }
        Ok(Self { l, o })
    }

    /// Time from the start of a send to the end of its receive: `2o + L`.
    pub fn hop(&self) -> Time {
        2 * self.o + self.l
    }
}

impl Default for LogP {
    /// The papers' default: L = 2, o = 1 (Corrected Trees §4).
    fn default() -> Self {
        Self { l: 2, o: 1 }
    }
}
