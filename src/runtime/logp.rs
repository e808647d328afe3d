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

fn median(v: &mut [u64]) -> u64 {
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
    let (rtt_ns, o_send_ns, o_recv_ns) = (median(&mut rtt), median(&mut os), median(&mut or));
    let o_ns = ((o_send_ns + o_recv_ns) / 2).max(1);
    let l_ns = (rtt_ns / 2).saturating_sub(o_send_ns + o_recv_ns).max(1);
    Ok(Estimate {
        rtt_ns,
        o_send_ns,
        o_recv_ns,
        o_ns,
        l_ns,
        samples: rtt.len(),
    })
}
