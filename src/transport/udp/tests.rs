use super::*;
use crate::transport::testutil::{assert_complete, exchange};
use std::net::UdpSocket as StdSocket;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn collect(t: &mut UdpTransport, out: &mut Vec<(u32, Vec<u8>)>) -> usize {
    t.poll(Instant::now(), &mut |d| match d {
        Delivery::Message { from, bytes } => out.push((from, bytes.to_vec())),
        Delivery::Suspect { peer } => out.push((peer, b"SUSPECT".to_vec())),
    })
    .unwrap()
}

/// Polls all of `eps` until `done` holds or `limit` passes; returns whether it held.
fn pump(
    eps: &mut [&mut UdpTransport],
    got: &mut [Vec<(u32, Vec<u8>)>],
    limit: Duration,
    done: impl Fn(&[&mut UdpTransport], &[Vec<(u32, Vec<u8>)>]) -> bool,
) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        for (t, g) in eps.iter_mut().zip(got.iter_mut()) {
            collect(t, g);
        }
        if done(eps, got) {
            return true;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    false
}

// ---- RFC 6298 estimator -------------------------------------------------------------------

#[test]
fn rto_rfc6298_first_sample() {
    // 2.1: RTO = 1 s before any sample; 2.2: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4·RTTVAR.
    let mut e = RtoEstimator::new(Duration::from_secs(1), MS(10), Duration::from_secs(60));
    assert_eq!(e.rto(), Duration::from_secs(1));
    assert_eq!(e.srtt(), None);
    e.on_sample(MS(100));
    assert_eq!(e.srtt(), Some(MS(100)));
    assert_eq!(e.rttvar(), MS(50));
    assert_eq!(e.rto(), MS(300));
    // With RFC 6298's own 1 s lower bound (2.4) the same sample gives 1 s.
    let mut e = RtoEstimator::new(Duration::from_secs(1), Duration::from_secs(1), Duration::MAX);
    e.on_sample(MS(100));
    assert_eq!(e.rto(), Duration::from_secs(1));
}

#[test]
fn rto_rfc6298_subsequent_samples() {
    let mut e = RtoEstimator::new(Duration::from_secs(1), MS(10), Duration::from_secs(60));
    e.on_sample(MS(100));
    // 2.3: RTTVAR = 3/4·50 + 1/4·|100-200| = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5.
    e.on_sample(MS(200));
    assert_eq!(e.rttvar(), Duration::from_micros(62_500));
    assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
    assert_eq!(e.rto(), Duration::from_micros(362_500));
    // A sample equal to SRTT: RTTVAR decays by 3/4 = 46.875, SRTT stays, RTO = 300.
    e.on_sample(Duration::from_micros(112_500));
    assert_eq!(e.rttvar(), Duration::from_micros(46_875));
    assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
    assert_eq!(e.rto(), MS(300));
}

#[test]
fn rto_lower_bound_backoff_and_upper_bound() {
    let min = Duration::from_micros(200);
    let mut e = RtoEstimator::new(MS(1), min, MS(100));
    // A 10 µs loopback RTT: 10 + 4·5 = 30 µs, raised to the lower bound (2.4).
    e.on_sample(Duration::from_micros(10));
    assert_eq!(e.rto(), min);
    // 5.5: doubling on every expiry, capped by the upper bound.
    let mut seen = vec![e.rto()];
    for _ in 0..12 {
        e.on_timeout();
        seen.push(e.rto());
    }
    assert_eq!(seen[1], Duration::from_micros(400));
    assert_eq!(seen[8], Duration::from_micros(200 << 8));
    assert_eq!(seen[9], MS(100));
    assert_eq!(*seen.last().unwrap(), MS(100));
    // A new sample (Karn: of a packet not retransmitted) ends the backoff.
    e.on_sample(Duration::from_micros(10));
    assert!(e.rto() < MS(1));
    // Inverted bounds never panic.
    let e = RtoEstimator::new(MS(5), MS(10), MS(1));
    assert_eq!(e.rto(), MS(10));
}

#[test]
fn suspicion_time_of_defaults_is_bounded() {
    let cfg = UdpConfig::default();
    // 0.2 ms · (2^9 - 1) = 102.2 ms from rto_min.
    assert_eq!(cfg.suspicion_time(cfg.rto_min), Duration::from_micros(102_200));
    // 1+2+…+64 ms, then twice 100 ms.
    assert_eq!(cfg.suspicion_time(cfg.rto_initial), MS(327));
    assert_eq!(cfg.suspicion_time(Duration::MAX), MS(900));
}

// ---- header and timer wheel ---------------------------------------------------------------

fn data_header(job: u64, from: u32, to: u32, seq: u64, ack: u64, len: u16) -> Header {
    Header {
        kind: KIND_DATA,
        len,
        job,
        from,
        to,
        seq,
        ack,
        sack: 0,
    }
}

fn datagram(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; HEADER_LEN + payload.len()];
    h.write(&mut d);
    d[HEADER_LEN..].copy_from_slice(payload);
    d
}

#[test]
fn header_roundtrip_and_stateless_checks() {
    let mut h = data_header(7, 1, 2, u64::MAX - 1, 42, 3);
    h.sack = 0b1011;
    let d = datagram(h, b"abc");
    assert_eq!(Header::read(&d), Some(h));
    for cut in 0..d.len() {
        assert_eq!(Header::read(&d[..cut]), None, "truncated at {cut}");
    }
    let mut bad = d.clone();
    bad[0] ^= 1;
    assert_eq!(Header::read(&bad), None, "magic");
    let mut bad = d.clone();
    bad[4] = VERSION + 1;
    assert_eq!(Header::read(&bad), None, "version");
    let mut bad = d.clone();
    bad[5] = 9;
    assert_eq!(Header::read(&bad), None, "kind");
    let mut bad = d.clone();
    bad.push(0);
    assert_eq!(Header::read(&bad), None, "length");
    let ack = Header {
        kind: KIND_ACK,
        len: 0,
        seq: 0,
        ..h
    };
    assert_eq!(Header::read(&datagram(ack, &[])), Some(ack));
    assert_eq!(Header::read(&datagram(ack, b"x")), None, "ack with payload");
    assert_eq!(Header::read(&vec![0u8; MAX_DATAGRAM + 1]), None);
}

#[test]
fn timer_wheel_never_fires_early() {
    let t0 = Instant::now();
    let tick = Duration::from_micros(25);
    let mut w = TimerWheel::new(4, t0, tick, MS(10));
    let mut out = Vec::with_capacity(4);
    w.schedule(0, t0 + Duration::from_micros(100));
    w.schedule(1, t0 + Duration::from_micros(30));
    // Far beyond the horizon: parked, then re-armed until due.
    w.schedule(2, t0 + MS(50));
    w.schedule(3, t0 + MS(1));
    w.cancel(3);
    assert!(!w.is_armed(3));
    assert!(w.next_due().unwrap() >= t0 + Duration::from_micros(30));
    w.expire(t0 + Duration::from_micros(29), &mut out);
    assert!(out.is_empty());
    w.expire(t0 + Duration::from_micros(60), &mut out);
    assert_eq!(out, vec![1]);
    out.clear();
    // Re-arming moves a timer.
    w.schedule(0, t0 + MS(2));
    w.expire(t0 + MS(1), &mut out);
    assert!(out.is_empty());
    w.expire(t0 + MS(30), &mut out);
    assert_eq!(out, vec![0]);
    out.clear();
    assert!(w.is_armed(2));
    w.expire(t0 + MS(49), &mut out);
    assert!(out.is_empty());
    // A long pause (more than a whole turn of the wheel) is handled in one call.
    w.expire(t0 + MS(500), &mut out);
    assert_eq!(out, vec![2]);
    assert_eq!(w.next_due(), None);
}

// ---- endpoints -----------------------------------------------------------------------------

fn local(n: u32, cfg: UdpConfig) -> Vec<UdpTransport> {
    UdpTransport::bind_ephemeral_local(n, cfg).unwrap().1
}

#[test]
fn udp_send_refusals() {
    let cfg = UdpConfig {
        window: 4,
        ..UdpConfig::default()
    };
    let mut eps = local(2, cfg);
    let now = Instant::now();
    assert_eq!(eps[0].send(0, b"x", now), Err(SendError::BadPeer));
    assert_eq!(eps[0].send(2, b"x", now), Err(SendError::BadPeer));
    let big = [0u8; MAX_PAYLOAD + 1];
    assert_eq!(eps[0].send(1, &big, now), Err(SendError::TooLarge));
    for _ in 0..4 {
        eps[0].send(1, b"x", now).unwrap();
    }
    assert_eq!(eps[0].send(1, b"x", now), Err(SendError::WindowFull));
    assert_eq!(eps[0].stats().window_full, 1);
    assert_eq!(eps[0].unacked(), 4);
}

#[test]
fn udp_pair_delivers_acknowledges_and_measures_rtt() {
    // A long first RTO: on a loaded machine a descheduled peer would otherwise trigger a
    // retransmission of every packet, and Karn's rule then leaves no RTT sample to check.
    let cfg = UdpConfig {
        rto_initial: Duration::from_millis(500),
        ..UdpConfig::default()
    };
    let mut eps = local(2, cfg);
    let (a, b) = eps.split_at_mut(1);
    let (a, b) = (&mut a[0], &mut b[0]);
    for i in 0..3u8 {
        a.send(1, &[i; 5], Instant::now()).unwrap();
    }
    b.send(0, &[], Instant::now()).unwrap();
    b.send(0, &[9; MAX_PAYLOAD], Instant::now()).unwrap();
    let mut got = vec![Vec::new(), Vec::new()];
    let ok = pump(&mut [a, b], &mut got, MS(5_000), |e, g| {
        g[0].len() == 2 && g[1].len() == 3 && e[0].unacked() == 0 && e[1].unacked() == 0
    });
    assert!(ok, "{got:?}");
    assert_eq!(got[1], (0..3u8).map(|i| (0, vec![i; 5])).collect::<Vec<_>>());
    assert_eq!(got[0], vec![(1, vec![]), (1, vec![9; MAX_PAYLOAD])]);
    assert!(eps[0].rto_estimator(1).unwrap().srtt().is_some());
    let (sa, sb) = (eps[0].stats(), eps[1].stats());
    assert_eq!((sa.sent, sa.received, sb.sent, sb.received), (3, 2, 2, 3));
    assert_eq!(sa.malformed + sa.foreign + sb.malformed + sb.foreign, 0);
}

#[test]
fn udp_all_to_all_exactly_once_in_order() {
    let eps = local(4, UdpConfig::default());
    let out = exchange(eps, 3_000, 32, &[], Duration::from_secs(60));
    assert_complete(&out, 3_000);
    for o in &out {
        assert_eq!(o.stats.sent, 9_000);
        assert_eq!(o.stats.received, 9_000);
        assert_eq!(o.stats.suspected, 0);
    }
}

#[test]
fn udp_loss_and_reordering_still_exactly_once_in_order() {
    let cfg = UdpConfig {
        loss: 0.2,
        reorder: 0.2,
        seed: 7,
        // 20% loss of data and of ACKs: an exchange fails with p = 0.36; 30 in a row would
        // be needed for a false suspicion (p < 1e-13).
        max_retries: 30,
        ..UdpConfig::default()
    };
    let eps = local(4, cfg);
    let out = exchange(eps, 500, 24, &[], Duration::from_secs(90));
    assert_complete(&out, 500);
    let lost: u64 = out.iter().map(|o| o.stats.injected_losses).sum();
    let rexmit: u64 = out.iter().map(|o| o.stats.retransmits).sum();
    assert!(lost > 100 && rexmit > 100, "{out:?}");
}

#[test]
fn udp_silent_peers_are_suspected_while_others_go_on() {
    let cfg = UdpConfig::default();
    let bound = cfg.suspicion_time(cfg.rto_initial);
    let mut eps = local(5, cfg);
    // Rank 4's socket is closed; rank 3's stays open but is never polled.
    drop(eps.pop());
    let _never_polled = eps.pop();
    let out = exchange(eps, 300, 16, &[3, 4], Duration::from_secs(30));
    assert_complete(&out, 300);
    for o in &out {
        let mut s = o.suspects.clone();
        s.sort_unstable();
        assert_eq!(s, vec![3, 4], "rank {}: reported once each", o.rank);
        assert_eq!(o.stats.suspected, 2);
        // Generous slack: CI hosts have 2 cores shared by every test thread.
        let t = o.finished_after.unwrap();
        assert!(t < bound + Duration::from_secs(3), "rank {} took {t:?}", o.rank);
    }
}

#[test]
fn udp_suspect_is_reported_once_then_sends_refused() {
    let cfg = UdpConfig {
        max_retries: 3,
        ..UdpConfig::default()
    };
    let bound = cfg.suspicion_time(cfg.rto_initial);
    let mut eps = local(2, cfg);
    let start = Instant::now();
    eps[0].send(1, b"hello?", start).unwrap();
    let mut got = Vec::new();
    while got.is_empty() && start.elapsed() < Duration::from_secs(5) {
        collect(&mut eps[0], &mut got);
        let _ = eps[0].wait(MS(1));
    }
    let took = start.elapsed();
    assert_eq!(got, vec![(1, b"SUSPECT".to_vec())]);
    assert!(took >= bound, "suspected after {took:?} < {bound:?}");
    assert!(took < bound + Duration::from_secs(2), "{took:?}");
    for _ in 0..20 {
        collect(&mut eps[0], &mut got);
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(got.len(), 1, "reported once");
    assert_eq!(eps[0].send(1, b"x", Instant::now()), Err(SendError::Suspected));
    assert!(eps[0].is_suspected(1));
    assert_eq!(eps[0].unacked(), 0);
    let s = eps[0].stats();
    assert_eq!((s.suspected, s.retransmits), (1, 3));
    // What the suspected peer sends is dropped.
    eps[1].send(0, b"late", Instant::now()).unwrap();
    std::thread::sleep(MS(2));
    let mut late = Vec::new();
    collect(&mut eps[0], &mut late);
    assert!(late.is_empty());
    assert_eq!(eps[0].stats().from_suspected, 1);
}

/// Polls `a` then `b` on a virtual clock advanced by `step` per round (loopback delivery is
/// immediate), until `done` or `rounds`; timing decisions depend on the virtual clock only.
fn pump_virtual(
    a: &mut UdpTransport,
    b: &mut UdpTransport,
    clock: &mut Instant,
    step: Duration,
    rounds: u32,
    got: &mut [Vec<(u32, Vec<u8>)>; 2],
    done: impl Fn(&UdpTransport, &UdpTransport) -> bool,
) -> bool {
    fn keep(g: &mut Vec<(u32, Vec<u8>)>, d: Delivery<'_>) {
        if let Delivery::Message { from, bytes } = d {
            g.push((from, bytes.to_vec()))
        }
    }
    for _ in 0..rounds {
        *clock += step;
        // Let a datagram just sent reach the other socket's queue.
        std::thread::sleep(Duration::from_micros(20));
        b.poll(*clock, &mut |d| keep(&mut got[1], d)).unwrap();
        a.poll(*clock, &mut |d| keep(&mut got[0], d)).unwrap();
        if done(a, b) {
            return true;
        }
    }
    false
}

#[test]
fn udp_karn_no_rtt_sample_from_a_retransmitted_packet() {
    let cfg = UdpConfig::default();
    let mut eps = local(2, cfg.clone());
    let mut b = eps.pop().unwrap();
    let mut a = eps.pop().unwrap();
    let mut clock = Instant::now();
    a.send(1, b"a", clock).unwrap();
    // Rank 1 sleeps through two expiries of rank 0's timer (after 1 ms, then 2 ms more).
    // Timers fire at their deadline at the earliest, within a tick (rto_min / 8) after it.
    let us = Duration::from_micros;
    a.poll(clock + us(999), &mut |_| {}).unwrap();
    assert_eq!(a.stats().retransmits, 0, "not before the RTO");
    a.poll(clock + us(1_030), &mut |_| {}).unwrap();
    assert_eq!(a.stats().retransmits, 1);
    a.poll(clock + us(3_029), &mut |_| {}).unwrap();
    assert_eq!(a.stats().retransmits, 1, "not before the backed-off RTO");
    clock += us(3_060);
    a.poll(clock, &mut |_| {}).unwrap();
    assert_eq!(a.stats().retransmits, 2);
    let backed_off = a.rto_estimator(1).unwrap();
    assert_eq!(backed_off.rto(), cfg.rto_initial * 4);
    let mut got = [Vec::new(), Vec::new()];
    let step = Duration::from_micros(10);
    assert!(pump_virtual(&mut a, &mut b, &mut clock, step, 200, &mut got, |a, _| {
        a.unacked() == 0
    }));
    assert_eq!(got[1], vec![(0, b"a".to_vec())], "delivered once");
    assert_eq!(b.stats().duplicates, 2);
    // Karn: no sample, the backed-off RTO stays.
    let after = a.rto_estimator(1).unwrap();
    assert_eq!(after.srtt(), None);
    assert_eq!(after.rto(), backed_off.rto());
    // A packet sent once gives a sample (a few 10 µs steps) and ends the backoff.
    a.send(1, b"b", clock).unwrap();
    assert!(pump_virtual(&mut a, &mut b, &mut clock, step, 200, &mut got, |a, _| {
        a.unacked() == 0
    }));
    let fresh = a.rto_estimator(1).unwrap();
    let srtt = fresh.srtt().unwrap();
    assert!(srtt >= step && srtt <= Duration::from_micros(100), "{fresh:?}");
    assert_eq!(fresh.rto(), cfg.rto_min);
}

/// One side of a strict ping-pong: rank 0 sends `i` and waits for `i` back before sending
/// `i + 1`; rank 1 answers each message it receives. Checks exactly once and in order.
struct PingPongSide {
    /// Messages received (the next index expected).
    received: u64,
    /// Messages sent.
    sent: u64,
    order_errors: u64,
    suspects: u64,
}

impl PingPongSide {
    /// Polls `t` once at `now`, then sends what the protocol allows.
    fn step(&mut self, t: &mut UdpTransport, now: Instant, rounds: u64) {
        let (me, received, order_errors, suspects) =
            (t.rank(), &mut self.received, &mut self.order_errors, &mut self.suspects);
        t.poll(now, &mut |d| match d {
            Delivery::Message { from, bytes } => {
                if from != 1 - me || bytes != received.to_le_bytes() {
                    *order_errors += 1;
                }
                *received += 1;
            }
            Delivery::Suspect { .. } => *suspects += 1,
        })
        .unwrap();
        // Rank 0 may send when all its messages were answered, rank 1 when it owes an answer.
        let may_send = if me == 0 {
            self.sent == self.received && self.sent < rounds
        } else {
            self.sent < self.received
        };
        if may_send && t.send(1 - me, &self.sent.to_le_bytes(), now).is_ok() {
            self.sent += 1;
        }
    }
}

/// A strict ping-pong of 8-byte messages as two busy-polling threads sharing one core run it
/// (the transport-latency bench's ping-pong once ran so, both threads pinned to core 0, and
/// seemed to hang: it was making a round trip per two 4 ms scheduler slices). Each side polls
/// for a whole slice while the other is descheduled, so every message waits up to a slice for
/// its reader and the timers expire in between: spurious retransmissions, duplicates,
/// immediate ACKs, Karn's rule and backoff, over sequence numbers far past the window and the
/// reorder buffer. Single-threaded on a virtual clock, so the schedule is the same on every
/// host and the host's scheduler cannot stretch it. Every round must complete, exactly once
/// and in order.
#[test]
fn udp_strict_pingpong_completes_when_each_side_waits_a_time_slice() {
    const ROUNDS: u64 = 20_000;
    let cfg = UdpConfig {
        job: 9,
        seed: 9,
        ..UdpConfig::default()
    };
    let mut eps = local(2, cfg);
    let mut b = eps.pop().unwrap();
    let mut a = eps.pop().unwrap();
    let side = || PingPongSide {
        received: 0,
        sent: 0,
        order_errors: 0,
        suspects: 0,
    };
    let (mut pa, mut pb) = (side(), side());
    let us = Duration::from_micros;
    let step = us(250);
    let mut clock = Instant::now();
    let wall = Instant::now();
    let mut turn = 0usize;
    // Bounded: a few slices per round at most, and a wall-clock limit.
    while pa.received < ROUNDS && turn < 8 * ROUNDS as usize && wall.elapsed() < Duration::from_secs(120) {
        let slice = match turn {
            // As the bench saw it: 4 ms slices (CONFIG_HZ = 250), the RTO adapted to them.
            t if t < 2_000 => us(4_000),
            // Mostly quick turns (the RTO falls to its floor), now and then a wait beyond it.
            t if t % 50 == 49 => us(4_000),
            t if t % 50 == 24 => us(1_000),
            _ => us(30),
        };
        let polls = (slice.as_nanos() / step.as_nanos()).max(1) as u32;
        let (t, side) = if turn.is_multiple_of(2) {
            (&mut a, &mut pa)
        } else {
            (&mut b, &mut pb)
        };
        for _ in 0..polls {
            clock += slice / polls;
            side.step(t, clock, ROUNDS);
        }
        turn += 1;
    }
    // Let the last acknowledgements through.
    for _ in 0..100 {
        if a.unacked() == 0 && b.unacked() == 0 {
            break;
        }
        clock += step;
        pb.step(&mut b, clock, ROUNDS);
        pa.step(&mut a, clock, ROUNDS);
    }
    let (sa, sb) = (a.stats(), b.stats());
    let what = format!("after {turn} slices, {:?}: {sa:?} {sb:?}", wall.elapsed());
    assert_eq!(
        (pa.sent, pa.received, pb.sent, pb.received),
        (ROUNDS, ROUNDS, ROUNDS, ROUNDS),
        "{what}"
    );
    assert_eq!(
        pa.order_errors + pb.order_errors + pa.suspects + pb.suspects,
        0,
        "{what}"
    );
    assert_eq!((a.unacked(), b.unacked()), (0, 0), "{what}");
    assert_eq!((sa.received, sb.received), (ROUNDS, ROUNDS), "{what}");
    // The schedule did exercise the timers and the duplicate path.
    assert!(sa.retransmits > 0 && sb.retransmits > 0, "{what}");
    assert!(sa.duplicates > 0 && sb.duplicates > 0, "{what}");
}

#[test]
fn udp_garbage_is_counted_and_ignored() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut socks = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..2 {
        let s = new_socket(&any).unwrap();
        s.bind(&any.into()).unwrap();
        addrs.push(s.local_addr().unwrap().as_socket().unwrap());
        socks.push(s);
    }
    // Rank 2 is a plain socket: its address is in the job, its bytes are not trusted.
    let rogue = StdSocket::bind(any).unwrap();
    addrs.push(rogue.local_addr().unwrap());
    let stranger = StdSocket::bind(any).unwrap();
    let cfg = UdpConfig {
        job: 77,
        ..UdpConfig::default()
    };
    let mut eps: Vec<UdpTransport> = socks
        .into_iter()
        .enumerate()
        .map(|(r, s)| UdpTransport::from_socket(r as u32, &addrs, cfg.clone(), s).unwrap())
        .collect();
    let to0 = addrs[0];
    let good = data_header(77, 2, 0, 0, 0, 2);
    let mut random = vec![0u8; 100];
    let mut x = 0x1234_5678_9abc_def0u64;
    for b in &mut random {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    random[0] = !MAGIC.to_le_bytes()[0];
    let mut wrong_version = datagram(good, b"ok");
    wrong_version[4] = VERSION + 1;
    let mut bad_len = datagram(good, b"ok");
    bad_len[6] = 3;
    let mut bad_kind = datagram(good, b"ok");
    bad_kind[5] = 7;
    let ack_unsent = Header {
        kind: KIND_ACK,
        len: 0,
        seq: 0,
        ack: 5,
        ..good
    };
    let malformed: Vec<Vec<u8>> = vec![
        random.clone(),
        Vec::new(),
        datagram(good, b"ok")[..20].to_vec(),
        datagram(data_header(78, 2, 0, 0, 0, 2), b"ok"),
        wrong_version,
        datagram(data_header(77, 1, 0, 0, 0, 2), b"ok"),
        datagram(data_header(77, 2, 1, 0, 0, 2), b"ok"),
        bad_len,
        bad_kind,
        datagram(ack_unsent, &[]),
        vec![0u8; 2000],
    ];
    for d in &malformed {
        rogue.send_to(d, to0).unwrap();
    }
    stranger.send_to(&datagram(good, b"ok"), to0).unwrap();
    stranger.send_to(&random, to0).unwrap();
    // The one well-formed datagram of the lot is delivered.
    rogue.send_to(&datagram(good, b"ok"), to0).unwrap();
    let mut got = Vec::new();
    let end = Instant::now() + MS(5_000);
    while got.is_empty() && Instant::now() < end {
        collect(&mut eps[0], &mut got);
    }
    assert_eq!(got, vec![(2, b"ok".to_vec())]);
    let s = eps[0].stats();
    // Counted by reason: job 78 is foreign, the two wrong ranks are outside the membership.
    assert_eq!((s.foreign_job, s.bad_rank), (1, 2), "{s:?}");
    assert_eq!(
        s.malformed + s.foreign_job + s.bad_rank,
        malformed.len() as u64,
        "{s:?}"
    );
    assert_eq!(s.foreign, 2, "{s:?}");
    assert_eq!(s.received, 1);
    // And the job goes on.
    eps[0].send(1, b"still here", Instant::now()).unwrap();
    let (a, b) = eps.split_at_mut(1);
    let mut got = vec![Vec::new(), Vec::new()];
    assert!(pump(&mut [&mut a[0], &mut b[0]], &mut got, MS(5_000), |e, g| {
        !g[1].is_empty() && e[0].unacked() == 0
    }));
    assert_eq!(got[1], vec![(0, b"still here".to_vec())]);
}

#[test]
fn udp_mutated_datagrams_never_panic() {
    let (addrs, mut eps) = UdpTransport::bind_ephemeral_local(3, UdpConfig::default()).unwrap();
    let t = &mut eps[0];
    let now = Instant::now();
    for i in 0..8u8 {
        t.send(2, &[i], now).unwrap();
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut from_2 = Vec::new();
    for round in 0..20_000u64 {
        let seq = rand() % 80;
        let ack = rand() % 10;
        let mut h = data_header(0, 2, 0, seq, ack, 4);
        h.sack = rand();
        if round % 3 == 0 {
            h = Header {
                kind: KIND_ACK,
                len: 0,
                seq: 0,
                ..h
            };
        }
        let payload = seq.to_le_bytes();
        let body: &[u8] = if h.kind == KIND_DATA { &payload[..4] } else { &[] };
        let mut d = datagram(h, body);
        // Flip a few random bytes, or truncate, half of the time.
        if rand() % 2 == 0 {
            for _ in 0..1 + rand() % 3 {
                let i = (rand() as usize) % d.len();
                d[i] ^= rand() as u8 | 1;
            }
        }
        if rand() % 10 == 0 {
            d.truncate((rand() as usize) % d.len());
        }
        let src = addrs[(rand() % 3) as usize];
        t.core.on_datagram(&d, src, now, &mut |dl| {
            if let Delivery::Message { from, bytes } = dl {
                from_2.push((from, bytes.to_vec()));
            }
        });
    }
    // What got through came from rank 2, one delivery per sequence number.
    assert!(from_2.iter().all(|(from, _)| *from == 2));
    assert_eq!(from_2.len() as u64, t.core.peers[2].rcv_next);
    let s = t.stats();
    assert!(s.malformed > 1_000 && s.duplicates > 0, "{s:?}");
}

#[test]
fn udp_bind_errors_are_reported() {
    let taken = StdSocket::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap();
    let free: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let err = UdpTransport::bind(0, &[busy, free], UdpConfig::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    let err = UdpTransport::bind(2, &[busy, free], UdpConfig::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let err = UdpTransport::bind(0, &[free, free], UdpConfig::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let bad = UdpConfig {
        window: 0,
        ..UdpConfig::default()
    };
    assert!(UdpTransport::bind_ephemeral_local(2, bad).is_err());
    let bad = UdpConfig {
        loss: f64::NAN,
        ..UdpConfig::default()
    };
    assert!(UdpTransport::bind_ephemeral_local(2, bad).is_err());
}

// ---- measurements (run with --ignored --nocapture, in release) ----------------------------

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
#[ignore = "measurement: cargo test --release --lib transport -- --ignored --nocapture"]
fn udp_loopback_latency_and_rate() {
    const ROUNDS: usize = 20_000;
    // Raw socket ping-pong: the floor.
    let a = StdSocket::bind("127.0.0.1:0").unwrap();
    let b = StdSocket::bind("127.0.0.1:0").unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut n = 0;
        while n < ROUNDS {
            if let Ok((k, _)) = b.recv_from(&mut buf) {
                b.send_to(&buf[..k], aa).unwrap();
                n += 1;
            }
        }
    });
    let mut buf = [0u8; 64];
    let mut raw = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        a.send_to(&[1u8; 8], ba).unwrap();
        while a.recv_from(&mut buf).is_err() {}
        raw.push(t.elapsed() / 2);
    }
    echo.join().unwrap();

    // The reliable transport, same pattern.
    let mut eps = local(2, UdpConfig::default());
    let mut b = eps.pop().unwrap();
    let mut a = eps.pop().unwrap();
    let echo = std::thread::spawn(move || {
        let mut n = 0;
        let mut reply = false;
        while n < ROUNDS {
            b.poll(Instant::now(), &mut |d| {
                if let Delivery::Message { .. } = d {
                    reply = true;
                }
            })
            .unwrap();
            if reply {
                reply = false;
                while b.send(0, &[2u8; 8], Instant::now()).is_err() {}
                n += 1;
            }
        }
        let t = Instant::now();
        while t.elapsed() < MS(50) {
            b.poll(Instant::now(), &mut |_| {}).unwrap();
        }
        b
    });
    let mut ours = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        while a.send(1, &[1u8; 8], t).is_err() {
            a.poll(Instant::now(), &mut |_| {}).unwrap();
        }
        let mut got = false;
        while !got {
            a.poll(Instant::now(), &mut |d| {
                got |= matches!(d, Delivery::Message { .. });
            })
            .unwrap();
        }
        ours.push(t.elapsed() / 2);
    }
    let b = echo.join().unwrap();

    // Message rate: one sender streaming 8-byte messages to one receiver.
    const STREAM: u64 = 200_000;
    let mut b = b;
    let sink = std::thread::spawn(move || {
        let mut n = 0u64;
        while n < STREAM {
            n += b.poll(Instant::now(), &mut |_| {}).unwrap() as u64;
        }
        let t = Instant::now();
        while t.elapsed() < MS(50) {
            b.poll(Instant::now(), &mut |_| {}).unwrap();
        }
    });
    let t = Instant::now();
    let mut sent = 0;
    while sent < STREAM {
        match a.send(1, &[3u8; 8], Instant::now()) {
            Ok(()) => sent += 1,
            Err(_) => {
                a.poll(Instant::now(), &mut |_| {}).unwrap();
            }
        }
    }
    while a.unacked() > 0 {
        a.poll(Instant::now(), &mut |_| {}).unwrap();
    }
    let rate = STREAM as f64 / t.elapsed().as_secs_f64();
    sink.join().unwrap();
    let (r, o) = (median(raw), median(ours));
    println!(
        "loopback one-way (half ping-pong, 8 B, median of {ROUNDS}): raw socket {:.2} µs, \
         reliable udp {:.2} µs ({:.2}x); stream rate {:.0} msg/s; retransmits {}",
        r.as_secs_f64() * 1e6,
        o.as_secs_f64() * 1e6,
        o.as_secs_f64() / r.as_secs_f64(),
        rate,
        a.stats().retransmits,
    );
}

#[test]
fn authenticated_endpoint_checks_the_mac_first_and_counts_each_reason() {
    use super::auth::AuthKey;
    let key = AuthKey::from_bytes(*b"job key for test");
    let cfg = UdpConfig {
        job: 77,
        auth: Some(key.clone()),
        ..UdpConfig::default()
    };
    let peers: Vec<SocketAddr> = ["127.0.0.1:0", "127.0.0.1:9", "127.0.0.1:10"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let mut t = UdpTransport::bind(0, &peers, cfg).unwrap();
    let now = Instant::now();
    let sealed = |h: Header, p: &[u8], k: &AuthKey| {
        let mut d = datagram(h, p);
        seal(Some(k), &mut d);
        d
    };
    let mut got = Vec::new();
    let mut feed = |t: &mut UdpTransport, d: &[u8], from: usize| {
        t.receive_datagram(d, peers[from], now, &mut |dl| {
            if let Delivery::Message { from, bytes } = dl {
                got.push((from, bytes.to_vec()));
            }
        })
    };
    let good = sealed(data_header(77, 2, 0, 0, 0, 2), b"ok", &key);
    // Not sealed, sealed with another key, and one bit flipped anywhere: bad MAC.
    let other = AuthKey::from_bytes(*b"some other key!!");
    assert_eq!(feed(&mut t, &datagram(data_header(77, 2, 0, 0, 0, 2), b"ok"), 2), 0);
    assert_eq!(
        feed(&mut t, &sealed(data_header(77, 2, 0, 0, 0, 2), b"ok", &other), 2),
        0
    );
    for i in 0..good.len() {
        let mut d = good.clone();
        d[i] ^= 0x10;
        assert_eq!(feed(&mut t, &d, 2), 0, "byte {i}");
    }
    assert_eq!(t.stats().bad_mac, 2 + good.len() as u64);
    // Authentic but of another job, or claiming another rank than its address's.
    feed(&mut t, &sealed(data_header(78, 2, 0, 0, 0, 2), b"ok", &key), 2);
    feed(&mut t, &sealed(data_header(77, 1, 0, 0, 0, 2), b"ok", &key), 2);
    feed(&mut t, &sealed(data_header(77, 2, 1, 0, 0, 2), b"ok", &key), 2);
    // Nor from this endpoint's own address, claiming to be itself.
    feed(&mut t, &sealed(data_header(77, 0, 0, 0, 0, 2), b"ok", &key), 0);
    let s = t.stats();
    assert_eq!((s.foreign_job, s.bad_rank, s.received), (1, 3, 0), "{s:?}");
    // The authentic one is delivered once; its replay is a duplicate, not a delivery.
    assert_eq!(feed(&mut t, &good, 2), 1);
    assert_eq!(feed(&mut t, &good, 2), 0);
    assert_eq!(got, vec![(2, b"ok".to_vec())]);
    let s = t.stats();
    assert_eq!((s.received, s.duplicates, s.malformed), (1, 1, 0), "{s:?}");
}

#[test]
fn a_closed_peer_port_is_suspected_at_once_but_only_after_it_answered() {
    // Rank 2 never answers (bound, then closed before anything is sent): no instant suspicion
    // for a port never heard from. Rank 1 answers once, then its socket closes: the next
    // datagram to it draws an ICMP port unreachable, and rank 1 is suspected long before the
    // retransmission timeouts would (rto_initial is set far away to tell the two apart).
    let cfg = UdpConfig {
        rto_initial: Duration::from_secs(5),
        rto_min: Duration::from_secs(5),
        rto_max: Duration::from_secs(5),
        ..UdpConfig::default()
    };
    let mut eps = local(3, cfg);
    let never = eps.pop().unwrap();
    drop(never);
    let (a, b) = eps.split_at_mut(1);
    let (a, b) = (&mut a[0], &mut b[0]);
    a.send(1, b"hello", Instant::now()).unwrap();
    let mut got = vec![Vec::new(), Vec::new()];
    assert!(pump(&mut [a, b], &mut got, MS(2_000), |e, g| g[1].len() == 1
        && e[0].unacked() == 0));
    let _ = eps.pop();
    let a = &mut eps[0];
    let start = Instant::now();
    a.send(2, b"to the never-bound", start).unwrap();
    a.send(1, b"to the dead", start).unwrap();
    let mut suspects = Vec::new();
    while start.elapsed() < MS(1_000) && suspects.is_empty() {
        a.poll(Instant::now(), &mut |d| {
            if let Delivery::Suspect { peer } = d {
                suspects.push(peer);
            }
        })
        .unwrap();
        // A retransmission is what draws the ICMP error when the first send raced the close.
        let _ = a.send(1, b"again", Instant::now());
    }
    assert_eq!(suspects, vec![1], "after {:?}", start.elapsed());
    assert!(start.elapsed() < MS(500), "{:?}", start.elapsed());
    assert_eq!(a.stats().refused, 1);
}
