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
    /// Creates LogP parameters; `o` must be at least 1.
    pub fn new(l: Time, o: Time) -> Result<Self, String> {
        if o == 0 {
            return Err("o must be at least 1".into());
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
