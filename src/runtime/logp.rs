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
    Ok(Estimate::from_samples(&mut rtt, &mut os, &mut or))
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
