//! LogP between two hosts (`ftcoll logp --between A,B --rank R`): rank 1 echoes, rank 0
//! measures with the same two methods as on one machine — Netgauge's PRTT and the direct
//! method — so that L includes the real wire (or an emulated link's netem delay).
//!
//! Every payload's first byte says what the echo does: [`BURST`] (part of a PRTT burst, no
//! answer), [`ANSWER`] (answer with one message of the same size), [`BYE`] (done).

use std::time::{Duration, Instant};

use crate::runtime::logp::{Estimate, Prtt, median, send_retrying};
use crate::transport::{Delivery, Transport};

const BURST: u8 = 0;
const ANSWER: u8 = 1;
const BYE: u8 = 2;

/// Rank 1: answers rank 0 until it says bye (or nothing came for `idle`). `blocking`: sleep
/// in the kernel between datagrams, as `--poll blocking` nodes do (the wake-up then counts in
/// the measured L, as it does in their broadcasts).
pub fn serve(t: &mut dyn Transport, idle: Duration, blocking: bool) -> Result<(), String> {
    let mut last = Instant::now();
    let mut reply: Option<usize> = None;
    let mut bye = false;
    let mut buf = vec![0u8; 1024];
    while !bye {
        t.poll(Instant::now(), &mut |d| {
            if let Delivery::Message { from: 0, bytes } = d
                && !bytes.is_empty()
            {
                match bytes[0] {
                    ANSWER => reply = Some(bytes.len()),
                    BYE => bye = true,
                    _ => {}
                }
            }
        })
        .map_err(|e| format!("poll failed: {e}"))?;
        if let Some(len) = reply.take() {
            buf[0] = ANSWER;
            send_retrying(t, 0, &buf[..len.min(buf.len())])?;
            last = Instant::now();
        } else if last.elapsed() > idle {
            return Err(format!("the measuring host was silent for {idle:?}"));
        } else if blocking && !bye {
            t.wait(Duration::from_millis(10))
                .map_err(|e| format!("wait failed: {e}"))?;
        }
    }
    // Acknowledge the bye (and anything before it) for a moment before leaving.
    let end = Instant::now();
    while end.elapsed() < Duration::from_millis(50) {
        t.poll(Instant::now(), &mut |_| {})
            .map_err(|e| format!("poll failed: {e}"))?;
    }
    Ok(())
}

/// Polls until rank 1's answer arrives (sleeping in the kernel between polls if `blocking`);
/// returns the duration of the delivering poll call.
fn await_answer(t: &mut dyn Transport, limit: Duration, blocking: bool) -> Result<u64, String> {
    let start = Instant::now();
    loop {
        let mut got = false;
        let t0 = Instant::now();
        t.poll(t0, &mut |d| {
            if let Delivery::Message { from: 1, .. } = d {
                got = true;
            }
        })
        .map_err(|e| format!("poll failed: {e}"))?;
        if got {
            return Ok(t0.elapsed().as_nanos() as u64);
        }
        if start.elapsed() > limit {
            return Err("no answer from the echoing host within 2 s".into());
        }
        if blocking {
            t.wait(Duration::from_millis(10))
                .map_err(|e| format!("wait failed: {e}"))?;
        }
    }
}

/// PRTT(n, d, s) against the echo: median of `reps` bursts (a tenth more run as warm-up).
fn prtt(t: &mut dyn Transport, n: usize, d_ns: u64, size: usize, reps: usize, blocking: bool) -> Result<u64, String> {
    let mut msg = vec![0xa5u8; size.max(1)];
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..reps + reps / 10 {
        let t0 = Instant::now();
        for i in 0..n {
            msg[0] = if i + 1 == n { ANSWER } else { BURST };
            send_retrying(t, 1, &msg)?;
            if i + 1 < n && d_ns > 0 {
                // The delay keeps the transport polled: over a real or emulated link the
                // acknowledgments then arrive in time (an unpolled sender would see spurious
                // retransmission timeouts, which are not part of o).
                let until = Instant::now() + Duration::from_nanos(d_ns);
                while Instant::now() < until {
                    t.poll(Instant::now(), &mut |_| {})
                        .map_err(|e| format!("poll failed: {e}"))?;
                }
            }
        }
        await_answer(t, Duration::from_secs(2), blocking)?;
        if rep >= reps / 10 {
            samples.push(t0.elapsed().as_nanos() as u64);
        }
    }
    Ok(median(&mut samples))
}

/// Rank 0: both methods against the echo on rank 1, then tells it to stop.
pub fn measure(
    t: &mut dyn Transport,
    n: usize,
    size: usize,
    reps: usize,
    blocking: bool,
) -> Result<(Prtt, Estimate), String> {
    let n = n.max(2);
    let p1 = prtt(t, 1, 0, size, reps, blocking)?;
    let pn = prtt(t, n, 0, size, reps, blocking)?;
    let d = 2 * p1;
    let pnd = prtt(t, n, d, size, reps, blocking)?;
    let p = Prtt::from_times(n, size, p1, pn, d, pnd);
    let mut msg = vec![ANSWER; size.max(1)];
    let (mut rtt, mut os, mut or) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps + reps / 10 {
        let t0 = Instant::now();
        send_retrying(t, 1, &msg)?;
        let s = t0.elapsed().as_nanos() as u64;
        let r = await_answer(t, Duration::from_secs(2), blocking)?;
        if rep >= reps / 10 {
            rtt.push(t0.elapsed().as_nanos() as u64);
            os.push(s);
            or.push(r);
        }
    }
    msg[0] = BYE;
    send_retrying(t, 1, &msg)?;
    let end = Instant::now();
    while end.elapsed() < Duration::from_millis(50) && t.unacked() > 0 {
        t.poll(Instant::now(), &mut |_| {})
            .map_err(|e| format!("poll failed: {e}"))?;
    }
    Ok((p, Estimate::from_samples(&mut rtt, &mut os, &mut or)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::udp::{UdpConfig, UdpTransport};

    fn pair(delay: Duration) -> (Prtt, Estimate) {
        let cfg = UdpConfig {
            delay,
            ..UdpConfig::default()
        };
        let (_, mut ts) = UdpTransport::bind_ephemeral_local(2, cfg).unwrap();
        let mut echo = ts.pop().unwrap();
        let mut me = ts.pop().unwrap();
        let srv = std::thread::spawn(move || serve(&mut echo, Duration::from_secs(10), false));
        let r = measure(&mut me, 4, 8, 100, false).unwrap();
        srv.join().unwrap().unwrap();
        r
    }

    /// One test, so that the two busy-polling pairs do not compete for the cores.
    #[test]
    fn remote_measurement_sees_an_emulated_link_delay_as_l() {
        let (p, d) = pair(Duration::ZERO);
        assert!(p.prtt_1_0_ns > 0 && d.rtt_ns > 0, "{p:?} {d:?}");
        assert_eq!(d.samples, 100);
        // One-way 200 µs each way: every round trip takes at least 400 µs, and L is most of
        // it. No upper bound: two busy pollers on a loaded machine lose whole scheduler ticks.
        let (p, d) = pair(Duration::from_micros(200));
        assert!(d.rtt_ns >= 400_000 && p.prtt_1_0_ns >= 400_000, "{p:?} {d:?}");
        assert!(d.l_ns >= 150_000, "{d:?}");
    }
}
