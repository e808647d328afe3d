//! Noisy LogP: each message's `o_s`, `L` and `o_r` drawn from an empirical
//! distribution instead of fixed, so that the simulator's p99 and p99.9 predictions carry the
//! measured variability of a real machine. The draws come from their own generator, seeded
//! from the run's seed: runs are reproducible and the protocols' random stream is the same
//! as without noise.
//!
//! Input (JSON, values in the simulator's time units):
//! ```json
//! { "os": [1200, 1180, 2400],                       // samples: each drawn with equal chance
//!   "or": {"quantiles": [[0, 700], [0.5, 800], [0.99, 1500], [1, 4000]]},
//!   "L":  800 }                                     // a constant
//! ```
//! A quantile table is an inverse CDF, interpolated linearly between its points (HdrHistogram
//! percentiles as `ftcoll logp --save` writes them, in ns: a calibration file is read through
//! its `noise` member). A parameter left out keeps the engine's
//! fixed value. Unknown keys are rejected.
//!
//! Datagram loss repaired by retransmission ([`Loss`]) comes on top of the drawn `L`:
//! `"loss": {"p": 0.05, "rto": 400, "linear": 6, "max": 100000}` (`linear` and `max`
//! optional: the UDP transport's thin-flight rule and RTO ceiling).

use serde::Deserialize;

use crate::model::{LogGP, Time};
use crate::protocol::ProtoRng;

/// One parameter's distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    /// Always this value.
    Const(Time),
    /// Uniform over the samples (an empirical distribution).
    Samples(Vec<Time>),
    /// Inverse CDF through `(quantile, value)` points, quantiles in `[0, 1]` increasing,
    /// values nondecreasing.
    Quantiles(Vec<(f64, f64)>),
}

impl Dist {
    /// One draw.
    pub fn draw(&self, rng: &mut ProtoRng) -> Time {
        match self {
            Dist::Const(v) => *v,
            Dist::Samples(s) => s[rng.below(s.len() as u32) as usize],
            Dist::Quantiles(q) => {
                let u = rng.unit();
                let i = q.partition_point(|&(p, _)| p <= u);
                let v = if i == 0 {
                    q[0].1
                } else if i == q.len() {
                    q[q.len() - 1].1
                } else {
                    let ((p0, v0), (p1, v1)) = (q[i - 1], q[i]);
                    v0 + (v1 - v0) * (u - p0) / (p1 - p0)
                };
                v.round() as Time
            }
        }
    }

    /// Every value multiplied by `f` (a change of time unit), rounded; at least `min`.
    pub fn scaled(&self, f: f64, min: Time) -> Dist {
        let t = |v: Time| ((v as f64 * f).round() as Time).max(min);
        match self {
            Dist::Const(v) => Dist::Const(t(*v)),
            Dist::Samples(s) => Dist::Samples(s.iter().map(|&v| t(v)).collect()),
            Dist::Quantiles(q) => Dist::Quantiles(q.iter().map(|&(p, v)| (p, (v * f).max(min as f64))).collect()),
        }
    }

    /// Does every draw give the same value?
    pub fn constant(&self) -> Option<Time> {
        match self {
            Dist::Const(v) => Some(*v),
            Dist::Samples(s) => s.iter().all(|&x| x == s[0]).then_some(s[0]),
            Dist::Quantiles(q) => q.iter().all(|x| x.1 == q[0].1).then_some(q[0].1.round() as Time),
        }
    }

    /// The largest value a draw can give.
    pub fn max(&self) -> Time {
        match self {
            Dist::Const(v) => *v,
            Dist::Samples(s) => s.iter().copied().max().unwrap_or(0),
            Dist::Quantiles(q) => q.last().map_or(0, |x| x.1.round() as Time),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawDist {
    Const(f64),
    Samples(Vec<f64>),
    Quantiles { quantiles: Vec<(f64, f64)> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNoise {
    os: Option<RawDist>,
    or: Option<RawDist>,
    #[serde(rename = "L")]
    l: Option<RawDist>,
    loss: Option<RawLoss>,
    interrupts: Option<RawInterrupts>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterrupts {
    rate: f64,
    excess: RawDist,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoss {
    p: f64,
    rto: f64,
    linear: Option<u32>,
    max: Option<f64>,
}

/// Datagram loss under a retransmitting transport, as `ftcoll bench --loss` injects it: each
/// copy of a message is lost with probability `p`, and its sender sends it again when its
/// retransmission timer expires, `rto` after the last copy for the first `linear` expiries and
/// then twice as long at each (at most `max`): the UDP transport's rule for a thin flight,
/// every tree and agreement message's (`transport/udp/reliable.rs`, `LINEAR_TIMEOUTS`, as
/// Linux's `tcp_thin_linear_timeouts`). A message whose first `k` copies were lost arrives
/// the sum of `k` timeouts late. What is not modeled: the retransmissions' send overhead,
/// the receive overhead of a duplicate after a lost acknowledgement (it delays no delivery),
/// and the order of a link's later messages behind a lost one (a tree link carries one
/// message per operation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Loss {
    pub p: f64,
    pub rto: Time,
    pub linear: u32,
    pub max: Time,
}

impl Loss {
    /// The expiries at the first timeout before the backoff starts: the UDP transport's
    /// `LINEAR_TIMEOUTS` (the experiments check that the two agree).
    pub const LINEAR: u32 = 6;

    /// Expiries after which a lost message is given up on here (its sender's transport would
    /// have suspected the receiver long before): bounds a draw at `p` near 1.
    const MAX_COPIES: u32 = 64;

    /// How late one message arrives: the timeouts of the copies lost before one got through.
    /// Out of line: the send it is drawn for is inlined into the simulator's event loop.
    #[inline(never)]
    pub fn delay(&self, rng: &mut ProtoRng) -> Time {
        let mut late: Time = 0;
        let mut rto = self.rto;
        let mut lost = 0;
        while lost < Self::MAX_COPIES && rng.unit() < self.p {
            lost += 1;
            late = late.saturating_add(rto);
            if lost >= self.linear {
                rto = rto.saturating_mul(2).min(self.max.max(self.rto));
            }
        }
        late
    }

    /// The expected delay of one message (what [`Loss::delay`] averages to).
    pub fn mean_delay(&self) -> f64 {
        let (mut mean, mut rto, mut reach) = (0.0, self.rto as f64, 1.0);
        for lost in 1..=Self::MAX_COPIES {
            reach *= self.p;
            mean += reach * rto;
            if lost >= self.linear {
                rto = (rto * 2.0).min(self.max.max(self.rto) as f64);
            }
        }
        mean
    }

    fn scaled(&self, f: f64) -> Loss {
        let t = |v: Time| (v as f64 * f).round() as Time;
        Loss {
            rto: t(self.rto),
            max: t(self.max),
            ..*self
        }
    }
}

/// Interruptions of a core that come at a rate in time rather than per message: a timer
/// tick, a virtual machine's exit to its host. A calibration's ping-pong sees
/// them as a few round trips far longer than the rest (on this project's 2-core virtual
/// machine one every few milliseconds, 15-60 µs each, in-process and over UDP alike), and
/// `ftcoll logp --save` records them apart: how often per time unit (`rate`) and how long
/// (`excess`: beyond the typical round trip), with `o_s`, `o_r` and `L` drawn from the other
/// round trips only. An overhead of `c` time units is then interrupted with chance `c·rate`
/// and lasts `excess` longer (only one that starts in it: a message that reaches a process
/// while its core is interrupted is not delayed, which measured closer to the runs here,
/// docs/measurements.md). Kept in the per-message tables instead, one interruption among
/// 2000 in-process round trips of 0.5 µs claimed one message in 2000 where a message of the
/// node's 70 ns meets one in about 40 000 at 340 a second, and stretching a table to the
/// node's overheads stretched the interruption with it (docs/measurements.md,
/// "Interruptions in time").
#[derive(Clone, Debug, PartialEq)]
pub struct Interrupts {
    /// Interruptions per time unit.
    pub rate: f64,
    /// How much longer an interrupted overhead lasts.
    pub excess: Dist,
}

/// The per-message distributions of `o_s`, `o_r` and `L`, and the loss on top of `L`.
#[derive(Clone, Debug, PartialEq)]
pub struct Noise {
    pub os: Dist,
    pub or: Dist,
    pub l: Dist,
    /// `None`: no message is lost.
    pub loss: Option<Loss>,
    /// `None`: overheads are only what `os` and `or` draw.
    pub interrupts: Option<Interrupts>,
}

/// Largest value accepted in a noise file (keeps time arithmetic far from overflow).
const MAX_VALUE: f64 = (1u64 << 50) as f64;

fn value(name: &str, v: f64) -> Result<Time, String> {
    if !v.is_finite() || !(0.0..=MAX_VALUE).contains(&v) {
        return Err(format!("noise: {name}: values must be numbers in 0..=2^50, got {v}"));
    }
    Ok(v.round() as Time)
}

fn convert(name: &str, raw: Option<RawDist>, fixed: Time) -> Result<Dist, String> {
    Ok(match raw {
        None => Dist::Const(fixed),
        Some(RawDist::Const(v)) => Dist::Const(value(name, v)?),
        Some(RawDist::Samples(s)) => {
            if s.is_empty() || s.len() > u32::MAX as usize {
                return Err(format!("noise: {name}: give at least one sample"));
            }
            Dist::Samples(s.into_iter().map(|v| value(name, v)).collect::<Result<_, _>>()?)
        }
        Some(RawDist::Quantiles { quantiles }) => {
            if quantiles.is_empty() {
                return Err(format!("noise: {name}: give at least one quantile"));
            }
            for w in quantiles.windows(2) {
                if w[1].0 <= w[0].0 || w[1].1 < w[0].1 {
                    return Err(format!(
                        "noise: {name}: quantiles must increase and values must not decrease"
                    ));
                }
            }
            for &(q, v) in &quantiles {
                if !(0.0..=1.0).contains(&q) {
                    return Err(format!("noise: {name}: quantile {q} is outside [0, 1]"));
                }
                value(name, v)?;
            }
            Dist::Quantiles(quantiles)
        }
    })
}

impl Noise {
    /// Parses a noise file (or a calibration of `ftcoll logp --save`: its `noise` member);
    /// parameters it leaves out keep `fixed`'s values.
    pub fn from_json(text: &str, fixed: LogGP) -> Result<Noise, String> {
        let mut v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("noise: {e}"))?;
        if let Some(inner) = v.get_mut("noise") {
            v = inner.take();
        }
        let raw: RawNoise = serde_json::from_value(v).map_err(|e| format!("noise: {e}"))?;
        let loss = match raw.loss {
            None => None,
            Some(l) => {
                if !(0.0..1.0).contains(&l.p) {
                    return Err(format!("noise: loss: p must be a probability below 1, got {}", l.p));
                }
                let rto = value("loss.rto", l.rto)?;
                if rto == 0 {
                    return Err("noise: loss: rto must be positive".into());
                }
                Some(Loss {
                    p: l.p,
                    rto,
                    linear: l.linear.unwrap_or(Loss::LINEAR),
                    max: l
                        .max
                        .map(|m| value("loss.max", m))
                        .transpose()?
                        .unwrap_or(rto.saturating_mul(1 << 9)),
                })
            }
        };
        let interrupts = match raw.interrupts {
            None => None,
            Some(i) => {
                if !i.rate.is_finite() || !(0.0..=1.0).contains(&i.rate) {
                    return Err(format!(
                        "noise: interrupts: rate must be a number in [0, 1] per time unit, got {}",
                        i.rate
                    ));
                }
                Some(Interrupts {
                    rate: i.rate,
                    excess: convert("interrupts.excess", Some(i.excess), 0)?,
                })
            }
        };
        Ok(Noise {
            os: convert("os", raw.os, fixed.os)?,
            or: convert("or", raw.or, fixed.or)?,
            l: convert("L", raw.l, fixed.l)?,
            loss,
            interrupts,
        })
    }

    /// An overhead of `c` time units as interruptions leave it: with chance `c·rate` one
    /// interruption's excess longer ([`Interrupts`]). Draws nothing without interruptions.
    #[inline]
    pub fn interrupted(&self, c: Time, rng: &mut ProtoRng) -> Time {
        match &self.interrupts {
            Some(i) if i.rate > 0.0 && rng.unit() < c as f64 * i.rate => c.saturating_add(i.excess.draw(rng)),
            _ => c,
        }
    }

    /// One send overhead: `o_s`'s draw, interrupted.
    #[inline]
    pub fn draw_os(&self, rng: &mut ProtoRng) -> Time {
        let c = self.os.draw(rng);
        self.interrupted(c, rng)
    }

    /// The same distributions with `loss` on top of `L`.
    pub fn with_loss(self, loss: Option<Loss>) -> Noise {
        Noise { loss, ..self }
    }

    /// One message's flight: a draw of `L` and, under loss, the timeouts of its lost copies;
    /// and whether a copy was lost (the one that arrives is a retransmission).
    #[inline]
    pub fn flight(&self, rng: &mut ProtoRng) -> (Time, bool) {
        let l = self.l.draw(rng);
        match &self.loss {
            Some(loss) => {
                let late = loss.delay(rng);
                (l.saturating_add(late), late > 0)
            }
            None => (l, false),
        }
    }

    /// The flight of a message between two processes of one core: no `L` (see
    /// [`crate::sim::timing`]), only, under loss, the timeouts of its lost copies.
    #[inline]
    pub fn flight_local(&self, rng: &mut ProtoRng) -> (Time, bool) {
        match &self.loss {
            Some(loss) => {
                let late = loss.delay(rng);
                (late, late > 0)
            }
            None => (0, false),
        }
    }

    /// The distributions in another time unit: `o_s` times `fs`, `o_r` times `fr`, `L` times
    /// `fl` (overheads stay at least 1). `fl` is the change of unit: interruptions take it
    /// (their rate the inverse), as the loss's timeouts do, and not the overheads' stretch.
    pub fn scaled(&self, fs: f64, fr: f64, fl: f64) -> Noise {
        Noise {
            os: self.os.scaled(fs, 1),
            or: self.or.scaled(fr, 1),
            l: self.l.scaled(fl, 0),
            loss: self.loss.map(|l| l.scaled(fl)),
            interrupts: self.interrupts.as_ref().map(|i| Interrupts {
                rate: (i.rate / fl.max(f64::MIN_POSITIVE)).min(1.0),
                excess: i.excess.scaled(fl, 0),
            }),
        }
    }

    /// Reads and parses a noise file.
    pub fn load(path: &std::path::Path, fixed: LogGP) -> Result<Noise, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::from_json(&text, fixed).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Is every draw of `o_s`, `o_r` and `L` the same (loss aside)?
    pub fn is_constant(&self) -> bool {
        self.os.constant().is_some()
            && self.or.constant().is_some()
            && self.l.constant().is_some()
            && self.interrupts.as_ref().is_none_or(|i| i.rate == 0.0)
    }

    /// Every parameter fixed at `p`'s value.
    pub fn constant(p: LogGP) -> Noise {
        Noise {
            os: Dist::Const(p.os),
            or: Dist::Const(p.or),
            l: Dist::Const(p.l),
            loss: None,
            interrupts: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms_and_rejects_bad_input() {
        let base = LogGP::new(7, 2, 3, 0, 0).unwrap();
        let n = Noise::from_json(
            r#"{"os": [1, 2, 3], "L": 5, "or": {"quantiles": [[0, 1], [1, 9]]}}"#,
            base,
        )
        .unwrap();
        assert_eq!(n.os, Dist::Samples(vec![1, 2, 3]));
        assert_eq!(n.l, Dist::Const(5));
        assert_eq!(n.or, Dist::Quantiles(vec![(0.0, 1.0), (1.0, 9.0)]));
        let n = Noise::from_json("{}", base).unwrap();
        assert_eq!(n, Noise::constant(base));
        for bad in [
            r#"{"os": []}"#,
            r#"{"os": [-1]}"#,
            r#"{"x": 1}"#,
            r#"{"L": {"quantiles": [[0.5, 3], [0.4, 4]]}}"#,
            r#"{"L": {"quantiles": [[0.1, 3], [0.4, 2]]}}"#,
            r#"{"L": {"quantiles": [[0.1, 3], [1.5, 4]]}}"#,
            "not json",
        ] {
            assert!(Noise::from_json(bad, base).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_loss_parses_with_the_transports_defaults_and_rejects_bad_input() {
        let base = LogGP::new(7, 2, 3, 0, 0).unwrap();
        let n = Noise::from_json(r#"{"loss": {"p": 0.1, "rto": 40}}"#, base).unwrap();
        let loss = n.loss.unwrap();
        assert_eq!((loss.p, loss.rto, loss.linear), (0.1, 40, Loss::LINEAR));
        assert!(loss.max >= loss.rto);
        assert_eq!(n.l, Dist::Const(7), "L keeps its value under loss");
        let scaled = n.scaled(1.0, 1.0, 0.5).loss.unwrap();
        assert_eq!(
            (scaled.rto, scaled.p),
            (20, 0.1),
            "the timeout is a time, the probability is not"
        );
        for bad in [
            r#"{"loss": {"p": 1.0, "rto": 40}}"#,
            r#"{"loss": {"p": -0.1, "rto": 40}}"#,
            r#"{"loss": {"p": 0.1, "rto": 0}}"#,
            r#"{"loss": {"p": 0.1}}"#,
            r#"{"loss": {"p": 0.1, "rto": 4, "x": 1}}"#,
        ] {
            assert!(Noise::from_json(bad, base).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_lost_copy_costs_its_timeout_linear_first_then_doubling() {
        let loss = Loss {
            p: 0.5,
            rto: 10,
            linear: 2,
            max: 1000,
        };
        // The possible delays: 0, then the timeouts 10, 10, 20, 40, ... summed.
        let mut sums = vec![0];
        let mut rto = 10;
        for lost in 1..=40u32 {
            sums.push(sums.last().unwrap() + rto);
            if lost >= 2 {
                rto = (rto * 2).min(1000);
            }
        }
        let mut rng = ProtoRng::new(9);
        let k = 200_000;
        let draws: Vec<Time> = (0..k).map(|_| loss.delay(&mut rng)).collect();
        assert!(
            draws.iter().all(|d| sums.contains(d)),
            "every delay is a sum of timeouts"
        );
        // P(no copy lost) = 1 − p, P(exactly one) = p(1 − p).
        let share = |v: Time| draws.iter().filter(|&&d| d == v).count() as f64 / k as f64;
        assert!((share(0) - 0.5).abs() < 0.01, "{}", share(0));
        assert!((share(10) - 0.25).abs() < 0.01, "{}", share(10));
        assert!((share(20) - 0.125).abs() < 0.01, "{}", share(20));
        assert!((share(40) - 0.0625).abs() < 0.005, "{}", share(40));
        let mean = draws.iter().sum::<Time>() as f64 / k as f64;
        assert!(
            (mean / loss.mean_delay() - 1.0).abs() < 0.05,
            "{mean} vs {}",
            loss.mean_delay()
        );
        let none = Loss { p: 0.0, ..loss };
        assert!((0..1000).all(|_| none.delay(&mut rng) == 0));
        assert_eq!(none.mean_delay(), 0.0);
    }

    #[test]
    fn draws_follow_the_distribution() {
        let mut rng = ProtoRng::new(5);
        let d = Dist::Quantiles(vec![(0.0, 0.0), (1.0, 1000.0)]);
        let k = 100_000;
        let below_250 = (0..k).filter(|_| d.draw(&mut rng) < 250).count();
        assert!((below_250 as f64 / k as f64 - 0.25).abs() < 0.01, "{below_250}");
        let s = Dist::Samples(vec![1, 1, 1, 7]);
        let sevens = (0..k).filter(|_| s.draw(&mut rng) == 7).count();
        assert!((sevens as f64 / k as f64 - 0.25).abs() < 0.01, "{sevens}");
        assert_eq!(s.constant(), None);
        assert_eq!(Dist::Samples(vec![4, 4]).constant(), Some(4));
        assert_eq!(s.max(), 7);
    }

    /// An interruption hits an overhead in proportion to its length and adds its excess;
    /// a change of unit rescales rate and excess, the overheads' stretch neither.
    #[test]
    fn interruptions_come_in_time_and_keep_their_length_under_a_stretch() {
        let base = LogGP::new(7, 2, 3, 0, 0).unwrap();
        let text = r#"{"interrupts": {"rate": 0.001, "excess": 5000}}"#;
        let n = Noise::from_json(text, base).unwrap();
        assert!(!n.is_constant());
        let mut rng = ProtoRng::new(11);
        let k = 200_000;
        let hits = |n: &Noise, c: Time, rng: &mut ProtoRng| {
            let d: Vec<Time> = (0..k).map(|_| n.interrupted(c, rng)).collect();
            assert!(
                d.iter()
                    .all(|&x| x == c || x == c + n.interrupts.as_ref().unwrap().excess.max())
            );
            d.iter().filter(|&&x| x > c).count() as f64 / k as f64
        };
        let (short, long) = (hits(&n, 10, &mut rng), hits(&n, 100, &mut rng));
        assert!((short - 0.01).abs() < 0.002, "{short}");
        assert!((long - 0.1).abs() < 0.005, "{long}");
        // Overheads stretched 5x and the unit halved (values x0.5): an interruption is half
        // as many units long and twice as likely per unit, whatever the stretch.
        let s = n.scaled(5.0, 5.0, 0.5);
        let i = s.interrupts.as_ref().unwrap();
        assert_eq!((i.rate, i.excess.max()), (0.002, 2500));
        assert_eq!(s.os, Dist::Const(10), "the overheads take the stretch");
        let per = hits(&s, 50, &mut rng);
        assert!((per - 0.1).abs() < 0.005, "{per}");
        // draw_os = a draw of os, interrupted.
        let always = Noise::from_json(r#"{"interrupts": {"rate": 1, "excess": 4}}"#, base).unwrap();
        assert_eq!(always.draw_os(&mut rng), 2 + 4);
        let none = Noise::from_json(r#"{"interrupts": {"rate": 0, "excess": 4}}"#, base).unwrap();
        assert!(none.is_constant());
        assert_eq!(none.draw_os(&mut rng), 2);
        for bad in [
            r#"{"interrupts": {"rate": -0.1, "excess": 4}}"#,
            r#"{"interrupts": {"rate": 1.5, "excess": 4}}"#,
            r#"{"interrupts": {"rate": 0.1}}"#,
            r#"{"interrupts": {"rate": 0.1, "excess": -4}}"#,
            r#"{"interrupts": {"rate": 0.1, "excess": 4, "x": 1}}"#,
        ] {
            assert!(Noise::from_json(bad, base).is_err(), "{bad}");
        }
    }
}
