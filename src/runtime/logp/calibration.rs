//! What `ftcoll logp --save` writes and `bench --params` reads ([`Calibration`]): the LogGP
//! parameters with their confidence intervals ([`Ci`]) and the measured distributions of
//! `o_s`, `o_r` and `L`, with the round trips a timer tick or a VM exit lengthened apart.

use serde::Serialize;

use super::median;

/// A median with its 95 % confidence interval (distribution-free: the order statistics at
/// ranks `n/2 ∓ 1.96·√n/2`), ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Ci {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Ci {
    /// From unsorted samples (sorted in place); all zero when there are none.
    pub fn of(v: &mut [u64]) -> Ci {
        if v.is_empty() {
            return Ci {
                median: 0.0,
                lo: 0.0,
                hi: 0.0,
            };
        }
        v.sort_unstable();
        let n = v.len() as f64;
        let half = 1.96 * n.sqrt() / 2.0;
        let at = |r: f64| v[(r.max(0.0) as usize).min(v.len() - 1)] as f64;
        Ci {
            median: v[v.len() / 2] as f64,
            lo: at((n / 2.0 - half).floor()),
            hi: at((n / 2.0 + half).ceil()),
        }
    }

    /// `(hi − lo) / median`: the interval's width relative to the estimate.
    pub fn spread(&self) -> f64 {
        (self.hi - self.lo) / self.median.max(1.0)
    }
}

/// What `ftcoll logp --save` writes and `bench --params` reads: LogGP
/// parameters in ns with their confidence intervals, and the measured distributions of
/// `o_s`, `o_r` and `L` as quantile tables in the form `sim --noise` reads.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Calibration {
    pub transport: String,
    pub size: usize,
    pub samples: usize,
    pub os_ns: Ci,
    pub or_ns: Ci,
    #[serde(rename = "L_ns")]
    pub l_ns: Ci,
    /// Netgauge's gap at `size` bytes.
    pub g_ns: f64,
    /// LogGP's G: the gap's growth per byte between `size` and 1024 bytes (None when not
    /// measured).
    #[serde(rename = "G_ns_per_byte")]
    pub big_g_ns_per_byte: Option<f64>,
    /// `{"os": {"quantiles": [[q, v], ..]}, "or": .., "L": ..}` in ns.
    pub noise: serde_json::Value,
    /// Round trips measured and left out: the thread was preempted in them
    /// ([`super::RoundTrips::preempted`]; `None`: not known, as in a file saved before).
    #[serde(default)]
    pub preempted: Option<usize>,
}

/// The quantiles a calibration records below its tail.
const NOISE_QS: [f64; 12] = [0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99];
/// Above the 0.99 quantile a calibration records one quantile every this much, up to 0.9995
/// (then 0.9999 and the maximum): with 2000 samples that is every order statistic of the top
/// 1 %. A draw between two recorded quantiles is interpolated linearly (`sim::noise::Dist`),
/// so a coarse tail spreads its mass evenly between the points it has: with 0.99 at 4.9 µs
/// and 0.999 at 40 µs (a few preempted round trips), 0.9 % of the draws were spread up to
/// 40 µs wherever the samples between lay, and a 2-node UDP broadcast's modeled p99 read
/// 2–7× the measured (docs/measurements.md, "A calibration's tail").
const NOISE_TAIL_STEP: f64 = 0.0005;

/// `o_s`, `o_r` and `L` per round trip (`L` as the direct method takes it from the medians).
fn per_round_trip(rtt: &[u64], os: &[u64], or: &[u64]) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let l = (0..rtt.len())
        .map(|i| (rtt[i] / 2).saturating_sub(os[i] + or[i]))
        .collect();
    (os.to_vec(), or.to_vec(), l)
}

/// A round trip longer than the median one by this many times the median, and by at least
/// [`INTERRUPTED_MIN_NS`], was interrupted ([`crate::sim::noise::Interrupts`]): in process
/// (a round trip of 0.5 µs, its 99.99th percentile below 2 µs) one 5 µs or more longer than
/// the median; over UDP on loopback (10 µs) one 20 µs or more longer (shorter excesses stay
/// in the per-message tables).
const INTERRUPTED_FACTOR: u64 = 2;
/// See [`INTERRUPTED_FACTOR`].
const INTERRUPTED_MIN_NS: u64 = 5_000;

/// The `noise` JSON of round trips: `o_s`, `o_r` and `L` of the round trips that were not
/// interrupted, and the interruptions apart (their rate per ns over all round trips' time and
/// their excess over the median round trip).
fn noise_of(rtt: &[u64], os: &[u64], or: &[u64]) -> serde_json::Value {
    let med = median(&mut rtt.to_vec());
    let cut = med + (INTERRUPTED_FACTOR * med).max(INTERRUPTED_MIN_NS);
    let (mut keep_rtt, mut keep_os, mut keep_or, mut excess) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..rtt.len() {
        if rtt[i] > cut {
            excess.push(rtt[i] - med);
        } else {
            keep_rtt.push(rtt[i]);
            keep_os.push(os[i]);
            keep_or.push(or[i]);
        }
    }
    let (mut os, mut or, mut l) = per_round_trip(&keep_rtt, &keep_os, &keep_or);
    for v in [&mut os, &mut or, &mut l, &mut excess] {
        v.sort_unstable();
    }
    let time: u64 = rtt.iter().sum();
    serde_json::json!({
        "os": quantile_table(&os),
        "or": quantile_table(&or),
        "L": quantile_table(&l),
        "interrupts": {
            "rate": excess.len() as f64 / time.max(1) as f64,
            "excess": if excess.is_empty() { serde_json::json!(0) } else { quantile_table(&excess) },
        },
    })
}

fn quantile_table(v: &[u64]) -> serde_json::Value {
    // `v` is sorted; the value at quantile q is the order statistic at rank q·(n − 1).
    // Four decimals, as written: 0.99 + 19 steps is 0.9995, not 0.99949999.
    let tail = (1..=19).map(|k| ((0.99 + k as f64 * NOISE_TAIL_STEP) * 1e4).round() / 1e4);
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for q in NOISE_QS.into_iter().chain(tail).chain([0.9999, 1.0]) {
        let x = v[((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)] as f64;
        pts.push((q, x));
    }
    serde_json::json!({ "quantiles": pts })
}

impl Calibration {
    /// From [`super::estimate_samples`]' samples, Netgauge's `g` and an optional G.
    pub fn from_samples(
        transport: String,
        size: usize,
        rtt: &[u64],
        os: &[u64],
        or: &[u64],
        g_ns: f64,
        big_g_ns_per_byte: Option<f64>,
    ) -> Result<Calibration, String> {
        if rtt.is_empty() || rtt.len() != os.len() || rtt.len() != or.len() {
            return Err("no round trips to calibrate from".into());
        }
        let (os_all, or_all) = (os, or);
        let (mut os, mut or, mut l) = per_round_trip(rtt, os, or);
        let (os_ns, or_ns, l_ns) = (Ci::of(&mut os), Ci::of(&mut or), Ci::of(&mut l));
        Ok(Calibration {
            transport,
            size,
            samples: rtt.len(),
            os_ns,
            or_ns,
            l_ns,
            g_ns,
            big_g_ns_per_byte,
            noise: noise_of(rtt, os_all, or_all),
            preempted: None,
        })
    }

    /// The distributions alone (`noise`'s JSON) of [`super::estimate_samples`]' samples, as a
    /// calibration of them would save them (`None`: no round trips).
    pub fn noise_from_samples(rtt: &[u64], os: &[u64], or: &[u64]) -> Option<serde_json::Value> {
        if rtt.is_empty() || rtt.len() != os.len() || rtt.len() != or.len() {
            return None;
        }
        Some(noise_of(rtt, os, or))
    }

    /// Reads a saved calibration.
    pub fn load(path: &std::path::Path) -> Result<Calibration, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let c: Calibration = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if c.os_ns.median < 1.0 || c.or_ns.median < 1.0 {
            return Err(format!("{}: o_s and o_r must be at least 1 ns", path.display()));
        }
        Ok(c)
    }

    /// The single `o` (mean of `o_s` and `o_r`, as [`super::Estimate::o_ns`]) and `L`, ns.
    pub fn o_and_l_ns(&self) -> (u64, u64) {
        let o = ((self.os_ns.median + self.or_ns.median) / 2.0).round().max(1.0) as u64;
        (o, (self.l_ns.median.round() as u64).max(1))
    }

    /// `o_s`, `o_r` and `L` (medians), ns; each overhead at least 1.
    pub fn os_or_l_ns(&self) -> (u64, u64, u64) {
        let ns = |x: f64| (x.round() as u64).max(1);
        (ns(self.os_ns.median), ns(self.or_ns.median), ns(self.l_ns.median))
    }

    /// One line: every parameter with its interval and relative spread.
    pub fn summary(&self) -> String {
        let one = |name: &str, c: &Ci| {
            format!(
                "{name} = {:.3} µs [{:.3}, {:.3}] (±{:.0}%)",
                c.median / 1e3,
                c.lo / 1e3,
                c.hi / 1e3,
                50.0 * c.spread()
            )
        };
        format!(
            "{}   {}   {}   g = {:.3} µs{}{}",
            one("o_s", &self.os_ns),
            one("o_r", &self.or_ns),
            one("L", &self.l_ns),
            self.g_ns / 1e3,
            self.big_g_ns_per_byte
                .map(|g| format!("   G = {:.4} ns/B", g))
                .unwrap_or_default(),
            self.preempted
                .map(|n| format!("   (left out: {n} round trips the thread was preempted in)"))
                .unwrap_or_default()
        ) + &self.interrupts_text()
    }

    /// `; interrupted N times a second, median +X µs` from the noise's interruptions (empty for
    /// a calibration saved before they were recorded).
    fn interrupts_text(&self) -> String {
        let Some(i) = self.noise.get("interrupts") else {
            return String::new();
        };
        let rate = i["rate"].as_f64().unwrap_or(0.0);
        let median = match &i["excess"] {
            serde_json::Value::Object(t) => t["quantiles"]
                .as_array()
                .and_then(|q| q.iter().find(|p| p[0].as_f64() >= Some(0.5)))
                .and_then(|p| p[1].as_f64()),
            v => v.as_f64(),
        }
        .unwrap_or(0.0);
        if rate == 0.0 {
            return "   interruptions: none seen".into();
        }
        format!("   interruptions: {:.0}/s, median +{:.1} µs", rate * 1e9, median / 1e3)
    }
}

#[cfg(test)]
mod tests;
