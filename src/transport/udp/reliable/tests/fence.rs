//! Suspicion semantics on the virtual clock: adaptive suspicion (a peer that came back from a
//! stall gets longer next time; a dead one is still suspected within the ceiling), fail-stop
//! enforcement (a suspected live peer is fenced and stops; a lost FENCE is repeated; two
//! endpoints that suspect each other do not kill each other), and ICMP errors as hints.

use super::*;
use crate::transport::udp::auth::AuthKey;

const MS: fn(u64) -> Duration = Duration::from_millis;

/// A configuration whose retransmission floor is short enough to test stalls against:
/// `rto_max` 20 ms, so `suspicion_time(rto_min)` is 25.4 + 2 × 20 = 65.4 ms, plus 9 one-way ACK
/// delays of 0.2 ms: 67.2 ms.
fn short_floor() -> UdpConfig {
    UdpConfig {
        rto_max: MS(20),
        seed: 7,
        ..UdpConfig::default()
    }
}

/// Rank 0 sends rank 1 a message every millisecond; rank 1 stops polling (stalls) during
/// each `[from, to)` of `stalls`. Both poll every 50 µs otherwise. From `retune.0` on, rank 0's
/// `max_retries` is `retune.1`. Returns the nodes and when rank 0 suspected rank 1, if it did,
/// within `until`.
fn stall_run(
    cfg: &UdpConfig,
    stalls: &[(Duration, Duration)],
    retune: Option<(Duration, u32)>,
    until: Duration,
) -> (Vec<Node>, Option<Duration>) {
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, cfg, US(10), t0);
    let step = US(50);
    let mut now = t0;
    let mut next_send = t0;
    let mut i = 0u64;
    while now - t0 < until {
        now += step;
        let at = now - t0;
        wire.borrow_mut().now = Some(now);
        if let Some((when, retries)) = retune
            && at >= when
        {
            ns[0].core.cfg.max_retries = retries;
        }
        if now >= next_send && !ns[0].core.is_suspected(1) && ns[0].send(1, &payload(0, i), now).is_ok() {
            i += 1;
            next_send = now + MS(1);
        }
        ns[0].poll(now);
        if !stalls.iter().any(|&(a, b)| at >= a && at < b) {
            ns[1].poll(now);
        }
        if !ns[0].suspects.is_empty() {
            return (ns, Some(at));
        }
    }
    (ns, None)
}

fn in_order(n: &Node, from: u32) -> bool {
    let want: Vec<(u32, Vec<u8>)> = (0..n.got.len() as u64).map(|i| (from, payload(from, i))).collect();
    n.got == want
}

#[test]
fn a_peer_that_came_back_from_a_stall_is_given_longer_at_its_next() {
    let cfg = short_floor();
    let floor = cfg.suspicion_time(cfg.rto_min);
    assert_eq!(floor, US(67_200));
    // Without a stall learned, a 90 ms stall is past the floor: suspected.
    let (_, at) = stall_run(&cfg, &[(MS(100), MS(190))], None, MS(400));
    let at = at.expect("a first 90 ms stall is suspected at the floor");
    assert!(at < MS(190), "{at:?}");
    // A 50 ms stall (under the floor) is survived and learned: the next 90 ms one is not
    // suspected (2 × 50 ms > 90 ms), and every message still arrives once, in order.
    let (ns, at) = stall_run(&cfg, &[(MS(100), MS(150)), (MS(300), MS(390))], None, MS(500));
    assert_eq!(at, None);
    assert!(ns[1].fenced.is_empty());
    assert!(ns[1].got.len() > 400 && in_order(&ns[1], 0), "{}", ns[1].got.len());
}

#[test]
fn a_peer_that_stalled_300_ms_once_is_not_suspected_at_its_next_300_ms_stall() {
    // The defaults' floor is 104 ms: a first 300 ms stall is suspected.
    let cfg = UdpConfig::default();
    let (_, at) = stall_run(&cfg, &[(MS(100), MS(400))], None, MS(600));
    assert!(at.is_some_and(|a| a < MS(400)), "{at:?}");
    // Survived once (the floor raised by more retries while it is learned), then, back on the
    // defaults' floor, the next 300 ms stall is within 2 × the learned 300 ms.
    let patient = UdpConfig {
        max_retries: 12,
        ..cfg.clone()
    };
    assert!(patient.suspicion_time(patient.rto_min) > MS(300));
    let stalls = [(MS(100), MS(400)), (MS(600), MS(900))];
    let (ns, at) = stall_run(&patient, &stalls, Some((MS(450), cfg.max_retries)), MS(1_100));
    assert_eq!(at, None);
    assert!(ns[0].core.silence_bound(1, ns[0].core.peers[1].last_heard) >= MS(590));
    assert!(in_order(&ns[1], 0) && ns[1].got.len() > 500, "{}", ns[1].got.len());
}

#[test]
fn a_dead_peer_is_still_suspected_within_the_ceiling() {
    // Learned: a 50 ms stall, bound 100 ms; the ceiling cuts it to 80 ms. Rank 1 then dies.
    let cfg = UdpConfig {
        silence_max: MS(80),
        ..short_floor()
    };
    let (_, at) = stall_run(&cfg, &[(MS(100), MS(150)), (MS(300), MS(100_000))], None, MS(1_000));
    let at = at.expect("suspected") - MS(300);
    let ceiling = cfg.silence_max.max(cfg.suspicion_time(cfg.rto_min));
    assert!(at >= cfg.silence_max, "{at:?}");
    assert!(at <= ceiling + cfg.rto_max + MS(2), "{at:?}");
    // A learned stall fades: half-life `stall_memory`.
    let c = &short_floor();
    let t0 = Instant::now();
    let addrs = [
        SocketAddr::from(([10, 0, 0, 1], 1)),
        SocketAddr::from(([10, 0, 0, 2], 2)),
    ];
    let mut r = Reliable::new(0, &addrs, c.clone(), t0).unwrap();
    r.peers[1].stall = MS(100);
    r.peers[1].stall_at = t0;
    assert_eq!(r.silence_bound(1, t0), MS(200));
    assert_eq!(r.silence_bound(1, t0 + c.stall_memory), MS(100));
    assert!(r.silence_bound(1, t0 + c.stall_memory * 200) < US(1));
    r.peers[1].stall = Duration::from_secs(100);
    assert_eq!(r.silence_bound(1, t0), c.silence_max);
}

/// Rank 0 and rank 1 exchange a message each way every millisecond; on `[from, to)` of
/// `cut` the wire loses everything, and rank 1 does not poll during `stall`. Returns the nodes
/// after `until`.
fn fence_run(
    cfg: &UdpConfig,
    stall: (Duration, Duration),
    cut: (Duration, Duration),
    drop_fences: usize,
    until: Duration,
) -> Vec<Node> {
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, cfg, US(10), t0);
    wire.borrow_mut().drop_fences = drop_fences;
    let step = US(50);
    let mut now = t0;
    let mut next_send = t0;
    let mut i = [0u64; 2];
    while now - t0 < until {
        now += step;
        let at = now - t0;
        {
            let mut w = wire.borrow_mut();
            w.now = Some(now);
            w.cut = at >= cut.0 && at < cut.1;
        }
        let send = now >= next_send;
        if send {
            next_send = now + MS(1);
        }
        for r in 0..2 {
            if r == 1 && at >= stall.0 && at < stall.1 {
                continue;
            }
            if send && ns[r].fenced.is_empty() && ns[r].send(1 - r as u32, &payload(r as u32, i[r]), now).is_ok() {
                i[r] += 1;
            }
            ns[r].poll(now);
        }
    }
    ns
}

#[test]
fn a_suspected_live_peer_is_fenced_and_stops() {
    let cfg = short_floor();
    // Rank 1 stalls 200 ms: rank 0 suspects it at the floor and fences it; rank 1 comes back,
    // reads the FENCE, reports it once and sends nothing more.
    let ns = fence_run(&cfg, (MS(50), MS(250)), (MS(0), MS(0)), 0, MS(600));
    assert_eq!(ns[0].suspects, vec![1]);
    assert_eq!(ns[1].fenced, vec![0], "{:?}", ns[1].stats());
    assert!(ns[1].suspects.is_empty(), "the fenced one suspects no one");
    assert_eq!(ns[1].core.fenced_by(), Some(0));
    assert_eq!(ns[1].stats().fenced, 1);
    let mut b = ns.into_iter().nth(1).unwrap();
    assert_eq!(b.core.send(0, b"x", Instant::now()), Err(SendError::Fenced));
    assert!(b.core.poll_transmit().is_none());
}

#[test]
fn a_lost_fence_is_repeated_and_repeats_are_bounded() {
    let cfg = UdpConfig {
        fence_repeats: 5,
        ..short_floor()
    };
    // The first three FENCEs are lost (the first, and the answers to what rank 1 still had in
    // flight are then rate-limited or lost): a repeat still reaches rank 1.
    let ns = fence_run(&cfg, (MS(50), MS(250)), (MS(0), MS(0)), 3, MS(800));
    assert_eq!(ns[0].suspects, vec![1]);
    assert_eq!(ns[1].fenced, vec![0]);
    // At most the first and `fence_repeats` repeats, plus the answers to what rank 1 sent
    // (its retransmissions until it was fenced).
    let s0 = ns[0].stats();
    assert!(s0.fences_sent >= 4, "{s0:?}");
    assert!(s0.fences_sent <= 1 + 5 + s0.from_suspected, "{s0:?}");
    // A dead peer gets exactly the first FENCE and the repeats, then nothing.
    let ns = fence_run(&cfg, (MS(50), MS(100_000)), (MS(0), MS(0)), 0, MS(800));
    assert_eq!(ns[0].stats().fences_sent, 1 + 5);
    assert!(ns[1].fenced.is_empty());
}

#[test]
fn two_endpoints_that_suspect_each_other_do_not_kill_each_other() {
    // A partition: both suspect the other; each one's FENCE meets a suspect on arrival and is
    // dropped (a dead process sends nothing), never answered (no FENCE ping-pong).
    let cfg = UdpConfig {
        fence_repeats: 5,
        ..short_floor()
    };
    let ns = fence_run(&cfg, (MS(0), MS(0)), (MS(50), MS(150)), 0, MS(800));
    for (r, n) in ns.iter().enumerate() {
        assert_eq!(n.suspects, vec![1 - r as u32]);
        assert!(n.fenced.is_empty(), "rank {r}");
        let s = n.stats();
        assert_eq!(s.fences_sent, 1 + 5, "rank {r}: {s:?}");
        assert!(s.from_suspected > 0, "rank {r}: {s:?}");
    }
}

#[test]
fn a_forged_fence_stops_no_one() {
    // With a job key, a FENCE without it fails the MAC; one from outside the job is foreign.
    let key = AuthKey::from_bytes([7; crate::transport::udp::auth::KEY_LEN]);
    let cfg = UdpConfig {
        auth: Some(key.clone()),
        ..UdpConfig::default()
    };
    let t0 = Instant::now();
    let addrs = [
        SocketAddr::from(([10, 0, 0, 1], 1)),
        SocketAddr::from(([10, 0, 0, 2], 2)),
    ];
    let mut b = Reliable::new(1, &addrs, cfg, t0).unwrap();
    let fence = Header {
        kind: KIND_FENCE,
        len: 0,
        job: 0,
        from: 0,
        to: 1,
        seq: 0,
        ack: 0,
        hold: 0,
        sack: 0,
    };
    let mut d = [0u8; HEADER_LEN];
    fence.write(&mut d);
    let feed = |b: &mut Reliable, d: &[u8], src: SocketAddr| {
        let mut fenced = 0;
        b.on_datagram(d, src, t0, &mut |x| {
            fenced += u32::from(matches!(x, Delivery::Fenced { .. }))
        });
        fenced
    };
    let mut fenced = feed(&mut b, &d, addrs[0]);
    fenced += feed(&mut b, &d, SocketAddr::from(([10, 0, 0, 9], 9)));
    seal(
        Some(&AuthKey::from_bytes([8; crate::transport::udp::auth::KEY_LEN])),
        &mut d,
    );
    fenced += feed(&mut b, &d, addrs[0]);
    assert_eq!(fenced, 0);
    let s = b.stats();
    assert_eq!((s.bad_mac, s.foreign, s.fenced), (2, 1, 0), "{s:?}");
    // The real key's FENCE stops it.
    seal(Some(&key), &mut d);
    fenced += feed(&mut b, &d, addrs[0]);
    assert_eq!((fenced, b.fenced_by()), (1, Some(0)));
}

#[test]
fn an_icmp_error_for_a_live_peer_is_a_probe_not_a_suspicion() {
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    let step = US(50);
    let mut now = t0;
    let addr1 = ns[1].link.inner().me;
    // Rank 1 answers once (heard), then forged ICMP errors name it every millisecond while it
    // is alive and polling but has nothing to send: each probe draws its ACK.
    ns[0].send(1, b"hello", now).unwrap();
    for k in 0..2_000u32 {
        now += step;
        wire.borrow_mut().now = Some(now);
        if k >= 100 && k % 20 == 0 {
            ns[0].core.on_refused(addr1, &[], now);
        }
        ns[0].poll(now);
        ns[1].poll(now);
    }
    assert!(ns[0].suspects.is_empty(), "{:?}", ns[0].stats());
    let s = ns[0].stats();
    assert!(s.refused > 50, "each hint probed once it was answered: {s:?}");
    // Now rank 1 dies (stops polling): the next hint leads to a suspicion at the probe's
    // deadline, long before the retransmission floor would.
    let dead_at = now;
    ns[0].core.on_refused(addr1, &[], now);
    while ns[0].suspects.is_empty() && now - dead_at < MS(1_000) {
        now += step;
        wire.borrow_mut().now = Some(now);
        ns[0].poll(now);
    }
    let after = now - dead_at;
    assert_eq!(ns[0].suspects, vec![1]);
    assert!(
        after >= cfg.probe_timeout && after <= cfg.probe_timeout + step * 2,
        "{after:?}"
    );
}

#[test]
fn an_endpoint_that_could_not_drain_its_link_suspects_only_at_the_ceiling() {
    // Rank 1 is dead. Rank 0's link holds more garbage than one receive reads (a flood): a
    // peer's answers could be queued behind it, so rank 0 waits for `silence_max` instead of
    // suspecting at the floor (111 ms from `rto_initial`).
    let cfg = UdpConfig {
        silence_max: MS(200),
        ..short_floor()
    };
    let suspected_at = |flood: bool| {
        let t0 = Instant::now();
        let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
        let me = ns[0].link.inner().me;
        let stranger = SocketAddr::from(([10, 9, 9, 9], 9));
        let step = MS(1);
        let mut now = t0;
        ns[0].send(1, b"to the dead", now).unwrap();
        while now - t0 < MS(1_000) {
            now += step;
            {
                let mut w = wire.borrow_mut();
                w.now = Some(now);
                if flood {
                    for _ in 0..300 {
                        w.flying.push_back((now, stranger, me, vec![0; 8]));
                    }
                }
            }
            ns[0].poll(now);
            if !ns[0].suspects.is_empty() {
                return Some((now - t0, ns[0].stats()));
            }
        }
        None
    };
    let (calm, _) = suspected_at(false).expect("suspected");
    assert!(
        // Each expiry is seen at the next 1 ms poll, and the next timer runs from there.
        calm <= cfg.suspicion_time(cfg.rto_initial)
            + cfg.linear_time(cfg.rto_initial)
            + MS(1) * (cfg.max_retries + 1 + LINEAR_TIMEOUTS)
            + MS(2)
            && calm < cfg.silence_max,
        "{calm:?}"
    );
    let (flooded, s) = suspected_at(true).expect("suspected at the ceiling");
    assert!(
        flooded >= cfg.silence_max && flooded <= cfg.silence_max + cfg.rto_max + MS(2),
        "{flooded:?}"
    );
    assert!(s.foreign > 10_000, "{s:?}");
}

#[test]
fn a_suspicion_made_above_the_transport_is_enforced_with_a_fence() {
    // A heartbeat detector suspected rank 1 (alive, talking) at 5 ms: rank 0's core fences it
    // without reporting a suspicion of its own, and rank 1 stops as if the core had suspected.
    let cfg = short_floor();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    let mut now = t0;
    let mut i = 0u64;
    while now - t0 < MS(40) {
        now += US(50);
        wire.borrow_mut().now = Some(now);
        if now - t0 == MS(5) {
            ns[0].core.enforce(1, now);
            ns[0].core.enforce(1, now); // (idempotent)
            ns[0].core.enforce(0, now); // (itself: nothing)
            ns[0].core.enforce(9, now); // (out of range: nothing)
        }
        if ns[1].fenced.is_empty() && ns[1].send(0, &payload(1, i), now).is_ok() {
            i += 1;
        }
        for n in ns.iter_mut() {
            n.poll(now);
        }
    }
    assert!(ns[0].core.is_suspected(1));
    assert!(
        ns[0].suspects.is_empty(),
        "not reported back: the caller made the suspicion"
    );
    assert_eq!(ns[0].stats().suspected, 0);
    assert!(ns[0].stats().fences_sent >= 1);
    assert_eq!(ns[1].fenced, vec![0], "{:?}", ns[1].stats());
    assert_eq!(ns[1].core.fenced_by(), Some(0));
    assert!(i > 10, "rank 1 was talking before the fence");
}
