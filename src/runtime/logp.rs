//! A quick estimate of LogP's `o` and `L` on a transport, used to give the protocols their
//! time unit and the simulator its parameters: a ping-pong between two endpoints driven by
//! one thread (round-trip time), plus the CPU time of a send call and of a receiving poll
//! (Kielmann's direct method in spirit: `o_s`, `o_r` measured, `L = RTT/2 − o_s − o_r`).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::runtime::thread_switches::SwitchCounter;
use crate::runtime::{TransportKind, endpoints};
use crate::transport::{Delivery, Transport};

/// Measured parameters, nanoseconds (medians).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Estimate {
    pub rtt_ns: u64,
    pub o_send_ns: u64,
    pub o_recv_ns: u64,
    /// `(o_send + o_recv) / 2`, at least 1.
    pub o_ns: u64,
    pub l_ns: u64,
    pub samples: usize,
    /// 95% intervals of the medians of `o_send` and `o_recv` (the estimate's spread).
    pub o_send_ci_ns: Ci,
    pub o_recv_ci_ns: Ci,
    /// Round trips measured and left out: the thread was preempted in them
    /// ([`RoundTrips::preempted`]).
    pub preempted: Option<usize>,
}

pub(crate) fn median(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Polls `t` until a message arrives (or `limit` passes); returns the poll call's duration
/// of the delivering call.
fn await_one(t: &mut dyn Transport, other: &mut dyn Transport, limit: Duration) -> Result<u64, String> {
    let start = Instant::now();
    loop {
        let now = Instant::now();
        let mut got = false;
        let t0 = Instant::now();
        t.poll(now, &mut |d| {
            if let Delivery::Message { .. } = d {
                got = true;
            }
        })
        .map_err(|e| format!("poll failed: {e}"))?;
        let spent = t0.elapsed().as_nanos() as u64;
        // Keep the peer's reliability layer (acks, retransmits) moving.
        other
            .poll(Instant::now(), &mut |_| {})
            .map_err(|e| format!("poll failed: {e}"))?;
        if got {
            return Ok(spent);
        }
        if start.elapsed() > limit {
            return Err("no answer from the peer endpoint within 1 s".into());
        }
    }
}

/// Measures `reps` round trips of `size`-byte messages between two endpoints.
pub fn estimate(kind: TransportKind, reps: usize, size: usize) -> Result<Estimate, String> {
    Ok(estimate_samples(kind, reps, size)?.estimate())
}

/// A ping-pong's round trips, ns each: the RTT, the send call and the delivering poll; and
/// how many more were measured and left out because the measuring thread was preempted
/// during them (`None`: this kernel does not say, and none was left out).
///
/// Why leave them out: a calibration is the machine's `o` and `L`, and the noisy prediction
/// draws every message's costs from it. A round trip the thread was preempted in holds
/// another thread's time slice, which depends on what else ran at that moment, not on the
/// machine (few on a quiet machine: 0 to 21 of thousands here, docs/measurements.md,
/// "Interruptions in time"). The interruptions that come whatever runs beside (timer ticks,
/// a virtual machine's exits) stay, recorded apart ([`crate::sim::noise::Interrupts`]).
#[derive(Clone, Debug, Default)]
pub struct RoundTrips {
    pub rtt: Vec<u64>,
    pub os: Vec<u64>,
    pub or: Vec<u64>,
    pub preempted: Option<usize>,
}

impl RoundTrips {
    fn with_capacity(n: usize) -> RoundTrips {
        RoundTrips {
            rtt: Vec::with_capacity(n),
            os: Vec::with_capacity(n),
            or: Vec::with_capacity(n),
            preempted: None,
        }
    }

    fn push(&mut self, rtt: u64, os: u64, or: u64) {
        self.rtt.push(rtt);
        self.os.push(os);
        self.or.push(or);
    }

    /// The direct method's medians of these round trips.
    pub fn estimate(&self) -> Estimate {
        let (mut r, mut s, mut o) = (self.rtt.clone(), self.os.clone(), self.or.clone());
        Estimate {
            preempted: self.preempted,
            ..Estimate::from_samples(&mut r, &mut s, &mut o)
        }
    }

    /// Their distributions (`noise`'s JSON; `None`: no round trips).
    pub fn noise(&self) -> Option<serde_json::Value> {
        Calibration::noise_from_samples(&self.rtt, &self.os, &self.or)
    }

    /// A calibration of them (see [`Calibration::from_samples`]).
    pub fn calibration(
        &self,
        transport: String,
        size: usize,
        g_ns: f64,
        big_g_ns_per_byte: Option<f64>,
    ) -> Result<Calibration, String> {
        let c = Calibration::from_samples(transport, size, &self.rtt, &self.os, &self.or, g_ns, big_g_ns_per_byte)?;
        Ok(Calibration {
            preempted: self.preempted,
            ..c
        })
    }

    /// Pools `other`'s round trips into these (their left-out counts add up; unknown when
    /// either's is).
    pub fn extend(&mut self, other: &RoundTrips) {
        let empty = self.rtt.is_empty();
        self.rtt.extend_from_slice(&other.rtt);
        self.os.extend_from_slice(&other.os);
        self.or.extend_from_slice(&other.or);
        self.preempted = if empty {
            other.preempted
        } else {
            self.preempted.zip(other.preempted).map(|(a, b)| a + b)
        };
    }
}

/// A calibration's round trips add up to at least this long, so that its rate of
/// interruptions ([`crate::sim::noise::Interrupts`]: a virtual machine's timer ticks come every
/// few milliseconds) counts several of them rather than none or one.
pub const MIN_CALIBRATION: Duration = Duration::from_millis(50);

/// Round trips are checked for a preemption in batches of about this long: reading the
/// thread's count takes microseconds, many in-process round trips.
const BATCH_NS: u64 = 200_000;

/// Preempted in more than this share of its round trips, a calibration keeps them all: the
/// preemptions are then what this machine does to every message (more spinning threads
/// than cores), not a few intervals of another thread's.
const MOST_PREEMPTED: f64 = 0.1;

/// Takes round trips until `reps` of them were not preempted and they add up to
/// [`MIN_CALIBRATION`] (after `reps / 10` unmeasured, at least one, which also size the
/// batches the thread's preemptions are counted over), or, preempted in many, until `4 reps`
/// were measured adding up to ten times that. `one` times a round trip. Preempted in more
/// than [`MOST_PREEMPTED`] of them, it keeps them all, warns on stderr and counts none left
/// out.
pub(crate) fn clean_round_trips(
    reps: usize,
    one: impl FnMut() -> Result<(u64, u64, u64), String>,
) -> Result<RoundTrips, String> {
    let mut switches = SwitchCounter::of_this_thread();
    clean_round_trips_counted(reps, move || switches.read(), one)
}

/// [`clean_round_trips`] with `preempted` the thread's count of preemptions (`None`: not
/// known, every round trip kept).
fn clean_round_trips_counted(
    reps: usize,
    mut preempted: impl FnMut() -> Option<u64>,
    mut one: impl FnMut() -> Result<(u64, u64, u64), String>,
) -> Result<RoundTrips, String> {
    let watched = preempted().is_some();
    let mut warm: Vec<u64> = Vec::with_capacity(reps / 10 + 1);
    for _ in 0..(reps / 10).max(usize::from(reps > 0)) {
        warm.push(one()?.0);
    }
    let batch = (BATCH_NS / median(&mut warm).max(1)).clamp(1, 1024) as usize;
    let (mut kept, mut all) = (RoundTrips::with_capacity(reps), RoundTrips::default());
    let (mut kept_ns, mut all_ns, mut away) = (0u64, 0u64, 0usize);
    let least = MIN_CALIBRATION.as_nanos() as u64;
    // Enough: `reps` kept adding up to the least time; or, preempted in many, four times as
    // many measured and ten times the time (then at least `reps` are kept, or most were
    // preempted and all are kept).
    let enough = |kept: &RoundTrips, kept_ns: u64, all: &RoundTrips, all_ns: u64| {
        (kept.rtt.len() >= reps && kept_ns >= least) || (all.rtt.len() >= 4 * reps && all_ns >= 10 * least)
    };
    while reps > 0 && !enough(&kept, kept_ns, &all, all_ns) {
        let before = if watched { preempted() } else { None };
        let from = all.rtt.len();
        for _ in 0..batch {
            let (rtt, os, or) = one()?;
            all.push(rtt, os, or);
            all_ns += rtt;
        }
        if before == (if watched { preempted() } else { None }) {
            for i in from..all.rtt.len() {
                kept.push(all.rtt[i], all.os[i], all.or[i]);
                kept_ns += all.rtt[i];
            }
        } else {
            away += batch;
        }
    }
    if !watched {
        return Ok(all);
    }
    if away as f64 > MOST_PREEMPTED * all.rtt.len() as f64 {
        eprintln!(
            "ftcoll: warning: the measuring thread was preempted in {away} of {} round trips (more spinning threads than cores?): keeping them all",
            all.rtt.len()
        );
        all.preempted = Some(0);
        return Ok(all);
    }
    kept.preempted = Some(away);
    Ok(kept)
}

/// [`estimate`]'s round trips.
pub fn estimate_samples(kind: TransportKind, reps: usize, size: usize) -> Result<RoundTrips, String> {
    let mut eps = endpoints(kind, 2, 0x10_6f, 1, 0.0)?;
    let (b, a) = (eps.pop().expect("two"), eps.pop().expect("two"));
    let (mut a, mut b) = (a.0, b.0);
    let msg = vec![0x5au8; size.max(1)];
    let limit = Duration::from_secs(1);
    clean_round_trips(reps, || {
        let t0 = Instant::now();
        a.send(1, &msg, t0).map_err(|e| format!("send failed: {e}"))?;
        let s = t0.elapsed().as_nanos() as u64;
        let r = await_one(b.as_mut(), a.as_mut(), limit)?;
        b.send(0, &msg, Instant::now())
            .map_err(|e| format!("send failed: {e}"))?;
        await_one(a.as_mut(), b.as_mut(), limit)?;
        Ok((t0.elapsed().as_nanos() as u64, s, r))
    })
}

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
    /// ([`RoundTrips::preempted`]; `None`: not known, as in a file saved before).
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
    /// From [`estimate_samples`]' samples, Netgauge's `g` and an optional G.
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

    /// The distributions alone (`noise`'s JSON) of [`estimate_samples`]' samples, as a
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

    /// The single `o` (mean of `o_s` and `o_r`, as [`Estimate::o_ns`]) and `L`, ns.
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
mod calibration_tests {
    use super::*;

    #[test]
    fn median_interval_brackets_the_median_and_narrows_with_samples() {
        let mut small: Vec<u64> = (0..100).rev().collect();
        let c = Ci::of(&mut small);
        assert_eq!(c.median, 50.0);
        assert!(c.lo < 50.0 && c.hi > 50.0 && c.lo >= 38.0 && c.hi <= 62.0, "{c:?}");
        let mut big: Vec<u64> = (0..10_000).map(|i| i % 100).collect();
        let d = Ci::of(&mut big);
        assert!(d.hi - d.lo < c.hi - c.lo, "{d:?} vs {c:?}");
        assert_eq!(Ci::of(&mut []).median, 0.0);
    }

    #[test]
    fn calibration_round_trips_and_feeds_the_noise_reader() {
        let rtt: Vec<u64> = (0..200).map(|i| 10_000 + 10 * i).collect();
        let os: Vec<u64> = (0..200).map(|i| 1000 + i).collect();
        let or: Vec<u64> = vec![500; 200];
        let c = Calibration::from_samples("udp".into(), 8, &rtt, &os, &or, 700.0, Some(0.5)).unwrap();
        assert_eq!(c.or_ns.median, 500.0);
        assert_eq!(c.os_ns.median, 1100.0);
        let text = serde_json::to_string(&c).unwrap();
        let back: Calibration = serde_json::from_str(&text).unwrap();
        assert_eq!(back.l_ns, c.l_ns);
        let (o, l) = back.o_and_l_ns();
        assert_eq!((o, l), (800, c.l_ns.median as u64));
        let fixed = crate::model::LogGP::new(1, 1, 1, 0, 0).unwrap();
        let noise = crate::sim::Noise::from_json(&text, fixed).unwrap();
        assert_eq!(noise.or.constant(), Some(500));
        assert_eq!(noise.os.max(), 1199);
        assert!(Calibration::from_samples("udp".into(), 8, &[], &[], &[], 1.0, None).is_err());
    }

    /// The noisy prediction draws from the table as recorded: a tail of a few far outliers
    /// (three preempted round trips of 2000) stays a few draws in a thousand, and the draws
    /// between the 0.99 quantile and those outliers stay where the samples were. With the
    /// old table (0.99, 0.999, 0.9999 and nothing between) the 0.999 quantile falls on an
    /// outlier and 0.9 % of the draws spread evenly up to it: every tail check here fails.
    #[test]
    fn a_calibrations_tail_keeps_its_few_outliers_few() {
        let n = 2000;
        // 1980 round trips' o_s near 3 µs, 17 near 5 µs, three preempted at 40-60 µs.
        let mut os: Vec<u64> = (0..n).map(|i| 3000 + i % 100).collect();
        for (k, v) in os.iter_mut().rev().take(20).enumerate() {
            *v = match k {
                0 => 60_000,
                1 => 50_000,
                2 => 40_000,
                _ => 5000 + k as u64,
            };
        }
        let rtt = vec![20_000; n as usize];
        let or = vec![1000; n as usize];
        let json = Calibration::noise_from_samples(&rtt, &os, &or).unwrap();
        let fixed = crate::model::LogGP::new(1, 1, 1, 0, 0).unwrap();
        let noise = crate::sim::Noise::from_json(&json.to_string(), fixed).unwrap();
        let mut rng = crate::protocol::ProtoRng::new(3);
        let mut draws: Vec<u64> = (0..200_000).map(|_| noise.os.draw(&mut rng)).collect();
        draws.sort_unstable();
        let at = |q: f64| draws[(q * (draws.len() - 1) as f64) as usize];
        assert!(at(0.98) < 3100, "below the tail: {}", at(0.98));
        assert!((5000..=5100).contains(&at(0.995)), "inside the tail: {}", at(0.995));
        assert!(
            at(0.998) < 10_000,
            "the outliers stay a few in a thousand: {}",
            at(0.998)
        );
        assert_eq!(noise.os.max(), 60_000);
        let above = draws.iter().filter(|&&d| d > 10_000).count() as f64 / draws.len() as f64;
        assert!(above < 0.002, "{above}");
    }

    /// Round trips far longer than the median one are interruptions: counted per time, kept
    /// out of `o_s`, `o_r` and `L`'s tables; the medians still count every round trip.
    #[test]
    fn interrupted_round_trips_become_a_rate_and_leave_the_tables() {
        let n = 4000;
        let mut rtt: Vec<u64> = (0..n).map(|i| 500 + i % 50).collect();
        let mut os: Vec<u64> = (0..n).map(|i| 40 + i % 10).collect();
        let or: Vec<u64> = vec![50; n as usize];
        // Three interruptions, in the send (two) and in the wait (one); and one round trip
        // long but below the cut (median + max(2 median, 5 µs)).
        for (i, extra, in_send) in [
            (7, 30_000, true),
            (1500, 45_000, true),
            (3000, 20_000, false),
            (3500, 5_000, false),
        ] {
            rtt[i] += extra;
            if in_send {
                os[i] += extra;
            }
        }
        let json = Calibration::noise_from_samples(&rtt, &os, &or).unwrap();
        let total: u64 = rtt.iter().sum();
        let i = &json["interrupts"];
        assert!((i["rate"].as_f64().unwrap() - 3.0 / total as f64).abs() < 1e-15, "{i}");
        let fixed = crate::model::LogGP::new(1, 1, 1, 0, 0).unwrap();
        let noise = crate::sim::Noise::from_json(&json.to_string(), fixed).unwrap();
        assert_eq!(noise.os.max(), 49, "the interrupted sends left o_s's table");
        assert!(
            noise.l.max() >= 2_000,
            "the long one below the cut stays: {}",
            noise.l.max()
        );
        let ex = &noise.interrupts.as_ref().unwrap().excess;
        let mut rng = crate::protocol::ProtoRng::new(1);
        let draws: Vec<u64> = (0..1000).map(|_| ex.draw(&mut rng)).collect();
        assert!(draws.iter().all(|&d| (19_900..=45_100).contains(&d)), "{:?}", ex);
        let c = Calibration::from_samples("udp".into(), 8, &rtt, &os, &or, 1.0, None).unwrap();
        assert_eq!(c.noise, json, "a saved calibration records the same");
        assert_eq!(c.samples, n as usize);
        // None interrupted: a rate of 0.
        let quiet = Calibration::noise_from_samples(&[500; 10], &[40; 10], &[50; 10]).unwrap();
        assert_eq!(quiet["interrupts"]["rate"], 0.0);
    }

    /// Round trips timed with a preemption every `every` calls (a 1 ms one), 1 µs otherwise.
    fn preempted_every(every: u64) -> (RoundTrips, u64) {
        let mut k = 0u64;
        let seen = std::cell::Cell::new(0u64);
        let trips = clean_round_trips_counted(
            100,
            || Some(seen.get() / every),
            || {
                k += 1;
                seen.set(k);
                Ok(if k.is_multiple_of(every) {
                    (1_000_000, 500_000, 500_000)
                } else {
                    (1000, 100, 50)
                })
            },
        )
        .unwrap();
        (trips, k)
    }

    /// Batches the thread was preempted in are left out and counted, and as many more are
    /// measured, until the kept ones add up to 50 ms; a thread preempted in most keeps them
    /// all; a thread that cannot tell keeps them all.
    #[test]
    fn round_trips_the_thread_was_preempted_in_are_left_out() {
        // 10 unmeasured of 1 µs: batches of 200 (200 µs).
        let (trips, k) = preempted_every(5000);
        assert!(trips.rtt.iter().all(|&r| r == 1000), "a preempted round trip was kept");
        let kept_ns: u64 = trips.rtt.iter().sum();
        assert!(kept_ns >= 50_000_000 && trips.rtt.len() >= 100, "{kept_ns}");
        let away = trips.preempted.unwrap();
        assert_eq!(away + trips.rtt.len(), (k - 10) as usize);
        // Each preemption costs its batch.
        assert_eq!(away, 200 * ((k / 5000) as usize), "{away} {k}");
        assert_eq!(trips.estimate().preempted, trips.preempted);
        let c = trips.calibration("inproc".into(), 8, 1.0, None).unwrap();
        assert_eq!((c.preempted, c.samples), (trips.preempted, trips.rtt.len()));
        // Preempted in every batch: all kept, the preemptions in the tables.
        let (most, k) = preempted_every(7);
        assert_eq!((most.preempted, most.rtt.len()), (Some(0), (k - 10) as usize));
        assert!(most.rtt.contains(&1_000_000));
        let blind = clean_round_trips_counted(10, || None, || Ok((1000, 100, 50))).unwrap();
        assert_eq!(blind.preempted, None);
        assert!(blind.rtt.len() >= 10);
    }

    #[test]
    fn pooled_round_trips_add_their_left_out_counts() {
        let one = |n: usize, away: Option<usize>| RoundTrips {
            rtt: vec![1000; n],
            os: vec![100; n],
            or: vec![50; n],
            preempted: away,
        };
        let mut all = RoundTrips::default();
        all.extend(&one(3, Some(2)));
        all.extend(&one(4, Some(1)));
        assert_eq!((all.rtt.len(), all.preempted), (7, Some(3)));
        all.extend(&one(1, None));
        assert_eq!((all.os.len(), all.preempted), (8, None));
    }

    #[test]
    fn the_estimate_carries_its_spread() {
        let mut rtt: Vec<u64> = (0..400).map(|i| 5000 + i).collect();
        let mut os: Vec<u64> = (0..400).map(|i| 100 + i % 50).collect();
        let mut or: Vec<u64> = vec![70; 400];
        let e = Estimate::from_samples(&mut rtt, &mut os, &mut or);
        let s = e.o_send_ci_ns;
        assert_eq!(s.median, e.o_send_ns as f64);
        assert!(s.lo < s.median && s.median < s.hi && s.spread() > 0.0, "{s:?}");
        assert_eq!((e.o_recv_ci_ns.lo, e.o_recv_ci_ns.hi), (70.0, 70.0));
    }
}

impl Estimate {
    /// The direct method's parameters from per-round-trip samples (medians).
    pub fn from_samples(rtt: &mut [u64], os: &mut [u64], or: &mut [u64]) -> Estimate {
        let (rtt_ns, o_send_ns, o_recv_ns) = (median(rtt), median(os), median(or));
        let o_ns = ((o_send_ns + o_recv_ns) / 2).max(1);
        let l_ns = (rtt_ns / 2).saturating_sub(o_send_ns + o_recv_ns).max(1);
        Estimate {
            rtt_ns,
            o_send_ns,
            o_recv_ns,
            o_ns,
            l_ns,
            samples: rtt.len(),
            o_send_ci_ns: Ci::of(os),
            o_recv_ci_ns: Ci::of(or),
            preempted: None,
        }
    }
}

/// Netgauge's parametrized round-trip time PRTT(n, d, s): the client sends `n` messages of
/// `s` bytes with a busy-wait of `d` ns between consecutive sends; the server answers once it
/// has all `n`; the time from the first send to the answer. Median over `reps`.
fn prtt(kind: TransportKind, n: usize, d_ns: u64, size: usize, reps: usize) -> Result<u64, String> {
    let mut eps = endpoints(kind, 2, 0x10_70, 2, 0.0)?;
    let (server, client) = (eps.pop().expect("two").0, eps.pop().expect("two").0);
    let msg = vec![0xa5u8; size.max(1)];
    let total = reps + reps / 10 + 1;
    let limit = Duration::from_secs(2);
    std::thread::scope(|s| {
        let msg2 = msg.clone();
        let srv = s.spawn(move || -> Result<(), String> {
            let mut t = server;
            for _ in 0..total {
                let mut got = 0;
                let start = Instant::now();
                while got < n {
                    t.poll(Instant::now(), &mut |d| {
                        if let Delivery::Message { .. } = d {
                            got += 1;
                        }
                    })
                    .map_err(|e| format!("poll failed: {e}"))?;
                    if start.elapsed() > limit {
                        return Err("PRTT server: messages missing for 2 s".into());
                    }
                }
                send_retrying(t.as_mut(), 0, &msg2)?;
            }
            // Keep acknowledging until the client is done.
            let end = Instant::now();
            while end.elapsed() < Duration::from_millis(20) {
                t.poll(Instant::now(), &mut |_| {})
                    .map_err(|e| format!("poll failed: {e}"))?;
            }
            Ok(())
        });
        let mut t = client;
        let mut samples = Vec::with_capacity(reps);
        for rep in 0..total {
            let t0 = Instant::now();
            for i in 0..n {
                send_retrying(t.as_mut(), 1, &msg)?;
                if i + 1 < n && d_ns > 0 {
                    // A pure spin: the delay must not include the transport's own work.
                    let until = Instant::now() + Duration::from_nanos(d_ns);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
            }
            let mut got = false;
            while !got {
                t.poll(Instant::now(), &mut |d| {
                    if let Delivery::Message { .. } = d {
                        got = true;
                    }
                })
                .map_err(|e| format!("poll failed: {e}"))?;
                if t0.elapsed() > limit {
                    return Err("PRTT client: no answer for 2 s".into());
                }
            }
            if rep > reps / 10 {
                samples.push(t0.elapsed().as_nanos() as u64);
            }
        }
        srv.join().map_err(|_| "PRTT server thread panicked".to_string())??;
        Ok(median(&mut samples))
    })
}

pub(crate) fn send_retrying(t: &mut dyn Transport, to: u32, msg: &[u8]) -> Result<(), String> {
    let start = Instant::now();
    loop {
        match t.send(to, msg, Instant::now()) {
            Ok(()) => return Ok(()),
            Err(crate::transport::SendError::WindowFull) if start.elapsed() < Duration::from_secs(2) => {
                t.poll(Instant::now(), &mut |_| {})
                    .map_err(|e| format!("poll failed: {e}"))?;
            }
            Err(e) => return Err(format!("send failed: {e}")),
        }
    }
}

/// LogP parameters by Netgauge's PRTT method (Hoefler et al.): with `n` messages,
/// `g = (PRTT(n,0,s) − PRTT(1,0,s)) / (n − 1)`, `o = (PRTT(n,d,s) − PRTT(1,0,s)) / (n − 1) − d`
/// for a delay `d` larger than `g` (here `d = 2·PRTT(1,0,s)`), and
/// `L = PRTT(1,0,s) / 2 − 2o` (one-way time minus both overheads).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Prtt {
    pub n: usize,
    pub size: usize,
    pub d_ns: u64,
    pub prtt_1_0_ns: u64,
    pub prtt_n_0_ns: u64,
    pub prtt_n_d_ns: u64,
    pub g_ns: f64,
    pub o_ns: f64,
    pub l_ns: f64,
}

/// Measures [`Prtt`] on a transport.
pub fn netgauge(kind: TransportKind, n: usize, size: usize, reps: usize) -> Result<Prtt, String> {
    let n = n.max(2);
    let p1 = prtt(kind, 1, 0, size, reps)?;
    let pn = prtt(kind, n, 0, size, reps)?;
    let d = 2 * p1;
    let pnd = prtt(kind, n, d, size, reps)?;
    Ok(Prtt::from_times(n, size, d, p1, pn, pnd))
}

impl Prtt {
    /// The parameters from the three measured PRTTs (ns) with delay `d_ns` (formulas above).
    pub fn from_times(n: usize, size: usize, d_ns: u64, p1: u64, pn: u64, pnd: u64) -> Prtt {
        let k = (n.max(2) - 1) as f64;
        let g = (pn as f64 - p1 as f64) / k;
        let o = ((pnd as f64 - p1 as f64) / k - d_ns as f64).max(0.0);
        let l = (p1 as f64 / 2.0 - 2.0 * o).max(0.0);
        Prtt {
            n,
            size,
            d_ns,
            prtt_1_0_ns: p1,
            prtt_n_0_ns: pn,
            prtt_n_d_ns: pnd,
            g_ns: g,
            o_ns: o,
            l_ns: l,
        }
    }
}
