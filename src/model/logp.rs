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
    /// it; bounding both by 2^32 keeps all of that far from `u64` overflow.
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

/// LogGP parameters (Alexandrov et al., "LogGP: incorporating long messages into the LogP
/// model", 1995), with the overhead split into a send and a receive part as in Corrected Trees
/// §2.2's timing (a send occupies the sender, the message travels, its receive occupies the
/// receiver). The simulator's engine and the protocols' counted time use these; a [`LogP`]
/// converts with `o_s = o_r = o`, `g = 0` (ignored, as in §2.2: `g ≤ o`) and `G = 0`, which
/// gives exactly the LogP timing.
///
/// Timing of one message of `k` bytes sent at `t` (integer time, like [`LogP`]):
/// * the sender is busy for `o_s + G·(k−1)` (the bytes after the first enter the wire one per
///   `G`) and may start its next send at `t + max(o_s + G·(k−1), g)` ([`LogGP::slot`]);
/// * the message is at the receiver at `t + o_s + G·(k−1) + L` and its receive occupies the
///   receiver for `o_r`; consecutive receives at one process start at least `max(o_r, g)`
///   apart ([`LogGP::recv_slot`]);
/// * a fault-free hop, start of send to end of receive, takes [`LogGP::hop`]
///   `= o_s + G·(k−1) + L + o_r`.
///
/// `G·(k−1)` is kept as one integer ([`LogGP::gk`]): the simulated protocols send messages of
/// one size per run, so only the product matters; [`LogGP::with_bytes`] computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct LogGP {
    /// Network latency `L`.
    pub l: Time,
    /// Send overhead `o_s` (≥ 1).
    pub os: Time,
    /// Receive overhead `o_r` (≥ 1).
    pub or: Time,
    /// Gap `g`: the least time between the starts of two sends (or two receives) of one
    /// process; 0 when it never binds (LogP's `g ≤ o`).
    pub g: Time,
    /// `G·(k−1)`: the time the bytes after the first of a `k`-byte message take to enter the
    /// wire (0 for LogP's small messages).
    pub gk: Time,
}

impl LogGP {
    /// Validated parameters: `o_s` and `o_r` must be at least 1 (as LogP's `o`).
    pub fn new(l: Time, os: Time, or: Time, g: Time, gk: Time) -> Result<Self, String> {
        if os == 0 {
            return Err("o_s must be at least 1".into());
        }
        if or == 0 {
            return Err("o_r must be at least 1".into());
        }
        let p = Self { l, os, or, g, gk };
        os.checked_add(gk)
            .and_then(|x| x.checked_add(l))
            .and_then(|x| x.checked_add(or))
            .ok_or("LogGP o_s + G(k-1) + L + o_r overflows")?;
        Ok(p)
    }

    /// `G·(k−1)` for `big_g` time units per byte and messages of `bytes` bytes, rounded to
    /// the nearest time unit; errors on a negative, non-finite or overflowing value.
    pub fn gk_for(big_g: f64, bytes: u64) -> Result<Time, String> {
        if !big_g.is_finite() || big_g < 0.0 {
            return Err(format!("G must be a finite number >= 0, got {big_g}"));
        }
        let v = (big_g * bytes.saturating_sub(1) as f64).round();
        if v > LogP::MAX as f64 {
            return Err(format!("G·(k-1) = {v} is too large (at most {})", LogP::MAX));
        }
        Ok(v as Time)
    }

    /// The same parameters with `G·(k−1)` for `big_g` per byte and `bytes`-byte messages.
    pub fn with_bytes(self, big_g: f64, bytes: u64) -> Result<Self, String> {
        Self::new(self.l, self.os, self.or, self.g, Self::gk_for(big_g, bytes)?)
    }

    /// How long a send occupies the sender: `o_s + G·(k−1)`.
    pub fn send(&self) -> Time {
        self.os.saturating_add(self.gk)
    }

    /// Time between the starts of two consecutive sends of one process: `max(o_s + G·(k−1), g)`
    /// (LogP: `o`). The protocols count one send as this much virtual time.
    pub fn slot(&self) -> Time {
        self.send().max(self.g)
    }

    /// Time between the starts of two consecutive receives of one process: `max(o_r, g)`.
    pub fn recv_slot(&self) -> Time {
        self.or.max(self.g)
    }

    /// Start of a send to the end of its receive, without contention:
    /// `o_s + G·(k−1) + L + o_r` (LogP: `2o + L`).
    pub fn hop(&self) -> Time {
        self.send().saturating_add(self.l).saturating_add(self.or)
    }

    /// The [`LogP`] these parameters are, if they are LogP (`o_s = o_r`, `g ≤ o`, `G = 0`).
    pub fn as_logp(&self) -> Option<LogP> {
        (self.os == self.or && self.g <= self.os && self.gk == 0).then_some(LogP { l: self.l, o: self.os })
    }

    /// The LogP that counts the same units where one exists: `o` = [`LogGP::slot`] and
    /// `L = hop − 2·slot` (0 if negative), so that its `o` and `2o + L` are this send slot and
    /// hop. For LogP parameters it is the LogP itself. The closed forms that only have a LogP
    /// form (gossip, BIG, BFB) get this one.
    pub fn counting_logp(&self) -> LogP {
        let o = self.slot().max(1);
        LogP {
            l: self.hop().saturating_sub(2 * o),
            o,
        }
    }

    /// The single `o` of the closest LogP: the mean of `o_s` and `o_r` (rounded up), for code
    /// that has only a LogP form.
    pub fn mean_o(&self) -> Time {
        (self.os.saturating_add(self.or)).div_ceil(2).max(1)
    }
}

impl From<LogP> for LogGP {
    fn from(p: LogP) -> Self {
        Self {
            l: p.l,
            os: p.o,
            or: p.o,
            g: 0,
            gk: 0,
        }
    }
}

impl Default for LogGP {
    fn default() -> Self {
        LogP::default().into()
    }
}

impl std::fmt::Display for LogGP {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.as_logp() {
            Some(p) if self.g == 0 => write!(f, "L={} o={}", p.l, p.o),
            _ => write!(
                f,
                "L={} o_s={} o_r={} g={} G(k-1)={}",
                self.l, self.os, self.or, self.g, self.gk
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loggp_from_logp_has_the_logp_timing() {
        for (l, o) in [(0, 1), (2, 1), (5, 3), (100, 7)] {
            let p = LogP { l, o };
            let q = LogGP::from(p);
            assert_eq!(q.hop(), p.hop());
            assert_eq!(q.slot(), o);
            assert_eq!(q.recv_slot(), o);
            assert_eq!(q.as_logp(), Some(p));
        }
    }

    #[test]
    fn loggp_parts() {
        let q = LogGP::new(10, 3, 1, 5, 0).unwrap();
        assert_eq!((q.send(), q.slot(), q.recv_slot(), q.hop()), (3, 5, 5, 14));
        assert_eq!(q.as_logp(), None);
        let q = q.with_bytes(0.5, 9).unwrap();
        assert_eq!((q.gk, q.send(), q.slot(), q.hop()), (4, 7, 7, 18));
        assert!(LogGP::new(1, 0, 1, 0, 0).is_err());
        assert!(LogGP::new(1, 1, 0, 0, 0).is_err());
        assert!(LogGP::new(Time::MAX, 1, 1, 0, 0).is_err());
        assert!(LogGP::gk_for(-1.0, 8).is_err());
        assert!(LogGP::gk_for(f64::NAN, 8).is_err());
        assert_eq!(LogGP::gk_for(2.0, 0), Ok(0));
        assert_eq!(LogGP::gk_for(1.0, LogP::MAX + 1), Ok(LogP::MAX));
        assert!(LogGP::gk_for(1.0, LogP::MAX + 2).is_err(), "at most 2^32, as L and o");
        assert_eq!(q.to_string(), "L=10 o_s=3 o_r=1 g=5 G(k-1)=4");
        assert_eq!(LogGP::from(LogP { l: 2, o: 1 }).to_string(), "L=2 o=1");
    }
}
