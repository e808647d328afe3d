//! A quick estimate of LogP's `o` and `L` on a transport, used to give the protocols their
//! time unit and the simulator its parameters: a ping-pong between two endpoints driven by
//! one thread (round-trip time), plus the CPU time of a send call and of a receiving poll
//! (Kielmann's direct method in spirit: `o_s`, `o_r` measured, `L = RTT/2 − o_s − o_r`).

use std::time::{Duration, Instant};

use serde::Serialize;

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
    let (mut rtt, mut os, mut or) = estimate_samples(kind, reps, size)?;
    Ok(Estimate::from_samples(&mut rtt, &mut os, &mut or))
}

/// Per round trip: the RTT, the send call and the delivering poll (ns).
pub type RoundTrips = (Vec<u64>, Vec<u64>, Vec<u64>);

/// [`estimate`]'s raw samples.
pub fn estimate_samples(kind: TransportKind, reps: usize, size: usize) -> Result<RoundTrips, String> {
    let mut eps = endpoints(kind, 2, 0x10_6f, 1, 0.0)?;
    let (b, a) = (eps.pop().expect("two"), eps.pop().expect("two"));
    let (mut a, mut b) = (a.0, b.0);
    let msg = vec![0x5au8; size.max(1)];
    let (mut rtt, mut os, mut or) = (
        Vec::with_capacity(reps),
        Vec::with_capacity(reps),
        Vec::with_capacity(reps),
    );
    let limit = Duration::from_secs(1);
    for i in 0..reps + reps / 10 {
        let t0 = Instant::now();
        a.send(1, &msg, t0).map_err(|e| format!("send failed: {e}"))?;
        let s = t0.elapsed().as_nanos() as u64;
        let r = await_one(b.as_mut(), a.as_mut(), limit)?;
        b.send(0, &msg, Instant::now())
            .map_err(|e| format!("send failed: {e}"))?;
        await_one(a.as_mut(), b.as_mut(), limit)?;
        let total = t0.elapsed().as_nanos() as u64;
        if i >= reps / 10 {
            rtt.push(total);
            os.push(s);
            or.push(r);
        }
    }
    Ok((rtt, os, or))
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

/// The `noise` JSON of sorted `o_s`, `o_r` and `L` samples.
fn noise_of(os: &[u64], or: &[u64], l: &[u64]) -> serde_json::Value {
    serde_json::json!({
        "os": quantile_table(os),
        "or": quantile_table(or),
        "L": quantile_table(l),
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
            noise: noise_of(&os, &or, &l),
        })
    }

    /// The distributions alone (`noise`'s JSON) of [`estimate_samples`]' samples, as a
    /// calibration of them would save them (`None`: no round trips).
    pub fn noise_from_samples(rtt: &[u64], os: &[u64], or: &[u64]) -> Option<serde_json::Value> {
        if rtt.is_empty() || rtt.len() != os.len() || rtt.len() != or.len() {
            return None;
        }
        let (mut os, mut or, mut l) = per_round_trip(rtt, os, or);
        for v in [&mut os, &mut or, &mut l] {
            v.sort_unstable();
        }
        Some(noise_of(&os, &or, &l))
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
            "{}   {}   {}   g = {:.3} µs{}",
            one("o_s", &self.os_ns),
            one("o_r", &self.or_ns),
            one("L", &self.l_ns),
            self.g_ns / 1e3,
            self.big_g_ns_per_byte
                .map(|g| format!("   G = {:.4} ns/B", g))
                .unwrap_or_default()
        )
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
