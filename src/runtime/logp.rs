//! A quick estimate of LogP's `o` and `L` on a transport, used to give the protocols their
//! time unit and the simulator its parameters: a ping-pong between two endpoints driven by
//! one thread (round-trip time), plus the CPU time of a send call and of a receiving poll
//! (Kielmann's direct method in spirit: `o_s`, `o_r` measured, `L = RTT/2 − o_s − o_r`).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::runtime::thread_switches::SwitchCounter;
use crate::runtime::{TransportKind, endpoints};
use crate::transport::{Delivery, Transport};

mod calibration;
pub use calibration::{Calibration, Ci};

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

#[cfg(test)]
mod tests;
