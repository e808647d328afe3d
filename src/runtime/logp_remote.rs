//! LogP between processes (on one host or two, over verbs or UDP): rank 0 measures every other
//! rank in turn with the methods of [`super::logp`] (Netgauge's PRTT and the direct method),
//! the others answer. Messages are [`crate::wire::probe`]'s: the server replies once per
//! completed burst; burst 0 ends the session; a keep-alive tells the ranks still waiting for
//! their turn that rank 0 is alive (their silence limit counts from it).
//!
//! Direct method, per round trip: `o_s` is the send call (a post on verbs), `o_r` the poll call
//! that delivered the reply (on verbs: CQ poll plus re-post of the receive, plus the amortized
//! send-completion polling and credit return that poll also does), `L = RTT/2 − o_s − o_r`.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::logp::{Estimate, Prtt, RoundTrips, clean_round_trips};
use crate::transport::{Delivery, SendError, Transport};
use crate::wire::probe::{HDR, KEEPALIVE, burst, message};

/// Rank 0 tells the waiting ranks it is alive this often (outside the timed regions).
const KEEPALIVE_EVERY: Duration = Duration::from_millis(500);

/// What one measurement needs: message size, repetitions, patience, last keep-alive.
struct Run {
    size: usize,
    reps: usize,
    limit: Duration,
    alive: Instant,
    /// Sleep in the kernel between polls (as `--poll blocking` nodes do: the wake-up then
    /// counts in L, as it does in their broadcasts).
    blocking: bool,
}

/// Sends a keep-alive to every rank but 0 and `busy` when one is due.
fn keepalive(t: &mut dyn Transport, busy: u32, last: &mut Instant, limit: Duration) -> Result<(), String> {
    if last.elapsed() < KEEPALIVE_EVERY {
        return Ok(());
    }
    *last = Instant::now();
    let msg = message(HDR, KEEPALIVE);
    for r in (1..t.size()).filter(|&r| r != busy) {
        send_retrying(t, r, &msg, limit)?;
    }
    Ok(())
}

/// What rank 0 measured against one peer.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PeerLogp {
    pub peer: u32,
    pub direct: Estimate,
    pub prtt: Prtt,
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Sends, polling while the transport pushes back; returns the successful call's duration.
fn send_retrying(t: &mut dyn Transport, to: u32, msg: &[u8], limit: Duration) -> Result<u64, String> {
    let start = Instant::now();
    loop {
        let t0 = Instant::now();
        match t.send(to, msg, t0) {
            Ok(()) => return Ok(t0.elapsed().as_nanos() as u64),
            Err(SendError::WindowFull) if start.elapsed() < limit => {
                t.poll(Instant::now(), &mut |_| {})
                    .map_err(|e| format!("poll failed: {e}"))?;
            }
            Err(e) => return Err(format!("send to rank {to} failed: {e}")),
        }
    }
}

/// Polls until a message from `from` arrives (sleeping in the kernel between polls if
/// `blocking`); returns the delivering poll call's duration.
fn await_reply(t: &mut dyn Transport, from: u32, limit: Duration, blocking: bool) -> Result<u64, String> {
    let start = Instant::now();
    loop {
        let (mut got, mut lost) = (false, false);
        let t0 = Instant::now();
        t.poll(t0, &mut |d| match d {
            Delivery::Message { from: f, .. } if f == from => got = true,
            Delivery::Suspect { peer } if peer == from => lost = true,
            // This endpoint was fenced: nothing more will come.
            Delivery::Fenced { .. } => lost = true,
            _ => {}
        })
        .map_err(|e| format!("poll failed: {e}"))?;
        let spent = t0.elapsed().as_nanos() as u64;
        if got {
            return Ok(spent);
        }
        if lost {
            return Err(format!("rank {from} is suspected: its endpoint stopped answering"));
        }
        if start.elapsed() > limit {
            return Err(format!("no answer from rank {from} within {limit:?}"));
        }
        if blocking {
            t.wait(Duration::from_millis(10))
                .map_err(|e| format!("wait failed: {e}"))?;
        }
    }
}

/// The direct method against `peer`: the estimate and its raw round trips (for a saved
/// calibration).
fn direct(t: &mut dyn Transport, peer: u32, run: &mut Run) -> Result<(Estimate, RoundTrips), String> {
    let (reps, size, limit) = (run.reps, run.size, run.limit);
    let msg = message(size, 1);
    let raw = clean_round_trips(reps, || {
        keepalive(t, peer, &mut run.alive, limit)?;
        let t0 = Instant::now();
        let s = send_retrying(t, peer, &msg, limit)?;
        let r = await_reply(t, peer, limit, run.blocking)?;
        Ok((t0.elapsed().as_nanos() as u64, s, r))
    })?;
    Ok((raw.estimate(), raw))
}

/// PRTT(n, d, s) against `peer`: median over `reps` of n sends `d` ns apart, then the reply.
fn prtt(t: &mut dyn Transport, peer: u32, n: usize, d_ns: u64, run: &mut Run) -> Result<u64, String> {
    let (reps, size, limit) = (run.reps, run.size, run.limit);
    let msg = message(size, n as u16);
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..reps + reps / 10 {
        keepalive(t, peer, &mut run.alive, limit)?;
        let t0 = Instant::now();
        for i in 0..n {
            send_retrying(t, peer, &msg, limit)?;
            if i + 1 < n && d_ns > 0 {
                // The delay keeps the transport polled: over a delayed (netem or emulated) link
                // the acknowledgments then arrive in time; an unpolled sender would see
                // spurious retransmission timeouts, which are not part of o.
                let until = Instant::now() + Duration::from_nanos(d_ns);
                while Instant::now() < until {
                    t.poll(Instant::now(), &mut |_| {})
                        .map_err(|e| format!("poll failed: {e}"))?;
                }
            }
        }
        await_reply(t, peer, limit, run.blocking)?;
        if rep >= reps / 10 {
            samples.push(t0.elapsed().as_nanos() as u64);
        }
    }
    Ok(median(&mut samples))
}

/// Rank 0: measures every other rank, then ends the session. `n` is the PRTT burst.
pub fn client(t: &mut dyn Transport, n: usize, size: usize, reps: usize) -> Result<Vec<PeerLogp>, String> {
    client_with(t, n, size, reps, false)
}

/// [`client`], optionally sleeping in the kernel between polls (`blocking`).
pub fn client_with(
    t: &mut dyn Transport,
    n: usize,
    size: usize,
    reps: usize,
    blocking: bool,
) -> Result<Vec<PeerLogp>, String> {
    client_samples(t, n, size, reps, blocking).map(|(peers, _)| peers)
}

/// [`client_with`], also returning each peer's raw round trips of the direct method (RTT,
/// send, delivering poll; ns), in peer order.
pub fn client_samples(
    t: &mut dyn Transport,
    n: usize,
    size: usize,
    reps: usize,
    blocking: bool,
) -> Result<(Vec<PeerLogp>, Vec<RoundTrips>), String> {
    if n >= usize::from(KEEPALIVE) || n < 2 {
        return Err(format!("burst n must be in 2..=65534, got {n}"));
    }
    let limit = Duration::from_secs(10);
    let mut out = Vec::new();
    let mut raw = Vec::new();
    let mut run = Run {
        size,
        reps,
        limit,
        alive: Instant::now(),
        blocking,
    };
    for peer in 1..t.size() {
        let (d, samples) = direct(t, peer, &mut run)?;
        raw.push(samples);
        let p1 = prtt(t, peer, 1, 0, &mut run)?;
        let pn = prtt(t, peer, n, 0, &mut run)?;
        let delay = 2 * p1;
        let pnd = prtt(t, peer, n, delay, &mut run)?;
        out.push(PeerLogp {
            peer,
            direct: d,
            prtt: Prtt::from_times(n, size, delay, p1, pn, pnd),
        });
    }
    let end = message(HDR, 0);
    for peer in 1..t.size() {
        send_retrying(t, peer, &end, limit)?;
    }
    drain(t, Duration::from_secs(2));
    Ok((out, raw))
}

/// Polls until everything sent is acknowledged (or `limit`).
fn drain(t: &mut dyn Transport, limit: Duration) {
    let start = Instant::now();
    while t.unacked() > 0 && start.elapsed() < limit {
        if t.poll(Instant::now(), &mut |_| {}).is_err() {
            return;
        }
    }
}

/// Any other rank: answers rank 0 until it ends the session; gives up when rank 0 has been
/// silent (keep-alives included) for `idle_limit`. Returns the messages served (keep-alives
/// not counted).
pub fn serve(t: &mut dyn Transport, idle_limit: Duration) -> Result<u64, String> {
    serve_with(t, idle_limit, false)
}

/// [`serve`], optionally sleeping in the kernel whenever nothing arrived (`blocking`).
pub fn serve_with(t: &mut dyn Transport, idle_limit: Duration, blocking: bool) -> Result<u64, String> {
    let (mut count, mut served, mut done) = (0u16, 0u64, false);
    let mut reply: Option<usize> = None;
    let mut heard = Instant::now();
    let mut lost = false;
    loop {
        t.poll(Instant::now(), &mut |d| match d {
            Delivery::Message { from: 0, bytes } if bytes.len() >= HDR => {
                heard = Instant::now();
                let burst = burst(bytes).unwrap_or(KEEPALIVE);
                if burst != KEEPALIVE {
                    served += 1;
                }
                if burst == 0 {
                    done = true;
                } else if burst != KEEPALIVE {
                    count += 1;
                    if count >= burst {
                        count = 0;
                        reply = Some(bytes.len());
                    }
                }
            }
            Delivery::Suspect { peer: 0 } | Delivery::Fenced { .. } => lost = true,
            _ => {}
        })
        .map_err(|e| format!("poll failed: {e}"))?;
        if let Some(len) = reply.take() {
            send_retrying(t, 0, &message(len, 1), Duration::from_secs(10))?;
        }
        if done {
            drain(t, Duration::from_secs(2));
            return Ok(served);
        }
        if lost {
            return Err("rank 0 is suspected: its endpoint stopped answering".into());
        }
        let quiet = heard.elapsed();
        if quiet > idle_limit {
            return Err(format!("rank 0 sent nothing for {idle_limit:?}"));
        }
        // Waiting for our turn (rank 0 measures the others first): leave the core to them.
        if blocking || quiet > Duration::from_millis(1) {
            t.wait(Duration::from_micros(200))
                .map_err(|e| format!("wait failed: {e}"))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::inproc::InprocNet;

    #[test]
    fn client_and_servers_on_threads_measure_every_peer() {
        let (_net, mut eps) = InprocNet::new(3, 64);
        let servers: Vec<_> = eps
            .drain(1..)
            .map(|mut t| std::thread::spawn(move || serve(&mut t, Duration::from_secs(10))))
            .collect();
        let mut c = eps.pop().unwrap();
        let res = client(&mut c, 4, 16, 50).unwrap();
        assert_eq!(res.iter().map(|r| r.peer).collect::<Vec<_>>(), vec![1, 2]);
        for r in &res {
            // At least 50 and at least 50 ms of them (`MIN_CALIBRATION`).
            assert!(r.direct.rtt_ns > 0 && r.direct.samples >= 50, "{r:?}");
            assert!(r.prtt.prtt_n_d_ns > r.prtt.prtt_1_0_ns, "{r:?}");
            assert!(r.prtt.d_ns == 2 * r.prtt.prtt_1_0_ns);
        }
        for (s, r) in servers.into_iter().zip(&res) {
            // direct: 5 unmeasured pings, the measured ones (kept or preempted); PRTT:
            // 55 + 55·4 + 55·4 bursts' messages; the end marker.
            let direct = 5 + r.direct.samples + r.direct.preempted.unwrap_or(0);
            assert_eq!(s.join().unwrap().unwrap(), direct as u64 + 55 + 55 * 4 * 2 + 1);
        }
    }

    #[test]
    fn an_emulated_link_delay_shows_up_as_l_busy_or_blocking() {
        for blocking in [false, true] {
            let cfg = crate::transport::udp::UdpConfig {
                delay: Duration::from_micros(200),
                ..Default::default()
            };
            let (_, mut ts) = crate::transport::udp::UdpTransport::bind_ephemeral_local(2, cfg).unwrap();
            let mut echo = ts.pop().unwrap();
            let mut me = ts.pop().unwrap();
            let srv = std::thread::spawn(move || serve_with(&mut echo, Duration::from_secs(10), blocking));
            let r = client_with(&mut me, 4, 8, 60, blocking).unwrap();
            srv.join().unwrap().unwrap();
            // 200 µs each way: every round trip is at least 400 µs and L most of it. No upper
            // bound: two pollers on a loaded machine lose whole scheduler ticks.
            let (d, p) = (r[0].direct, r[0].prtt);
            assert!(d.rtt_ns >= 400_000 && p.prtt_1_0_ns >= 400_000, "{d:?} {p:?}");
            assert!(d.l_ns >= 150_000, "blocking={blocking}: {d:?}");
        }
    }

    #[test]
    fn a_silent_client_makes_the_server_give_up() {
        let (_net, mut eps) = InprocNet::new(2, 8);
        let mut s = eps.pop().unwrap();
        let e = serve(&mut s, Duration::from_millis(20)).unwrap_err();
        assert!(e.contains("rank 0 sent nothing"), "{e}");
    }
}
