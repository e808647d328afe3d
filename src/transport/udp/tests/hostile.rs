//! What a hostile or broken network sends: garbage, mutations, forged MACs, closed ports; and
//! bind errors.

use super::*;
use crate::transport::udp::header::tests::{data_header, datagram};
use crate::transport::udp::header::{Header, KIND_ACK, KIND_DATA};

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
        .map(|(r, s)| UdpTransport::on_socket(r as u32, &addrs, cfg.clone(), s).unwrap())
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
    assert_eq!(from_2.len() as u64, t.core.rcv_next(2));
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
fn a_closed_peer_port_is_suspected_quickly_but_only_after_it_answered() {
    // Rank 2 never answers (bound, then closed before anything is sent): no quick suspicion
    // for a port never heard from. Rank 1 answers once, then its socket closes: the next
    // datagram to it draws an ICMP port unreachable that quotes it, DATA still in flight:
    // rank 1 is suspected at once, without a PROBE, long before the probe's deadline or the
    // retransmission timeouts (all set far away to tell them apart).
    let cfg = UdpConfig {
        rto_initial: Duration::from_secs(5),
        rto_min: Duration::from_secs(5),
        rto_max: Duration::from_secs(5),
        probe_timeout: Duration::from_secs(5),
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
    // A retransmission is what draws the ICMP error when the first send raced the close.
    let suspects = first_suspects(a, start, |a| {
        let _ = a.send(1, b"again", Instant::now());
    });
    assert_eq!(suspects, vec![1], "after {:?}", start.elapsed());
    assert!(start.elapsed() < MS(500), "{:?}", start.elapsed());
    assert_eq!((a.stats().refused, a.stats().refused_probes), (0, 1), "{:?}", a.stats());
}

/// Polls `a` until it suspects someone or a second has passed since `start`, calling `each`
/// after every poll; the peers of the first suspicions.
fn first_suspects(a: &mut UdpTransport, start: Instant, mut each: impl FnMut(&mut UdpTransport)) -> Vec<u32> {
    let mut suspects = Vec::new();
    while start.elapsed() < MS(1_000) && suspects.is_empty() {
        a.poll(Instant::now(), &mut |d| {
            if let Delivery::Suspect { peer } = d {
                suspects.push(peer);
            }
        })
        .unwrap();
        each(a);
    }
    suspects
}

/// Where every port was bound before the table was handed out ([`UdpConfig::bound_at_start`],
/// a local cluster's), a peer that never answered and whose port is closed (a node dead from
/// the start) is suspected as soon as the error quotes DATA in flight, long before the
/// retransmission timeouts (set far away to tell them apart).
#[test]
fn where_every_port_was_bound_first_a_closed_port_never_heard_is_suspected_quickly() {
    let cfg = UdpConfig {
        rto_initial: Duration::from_secs(5),
        rto_min: Duration::from_secs(5),
        rto_max: Duration::from_secs(5),
        probe_timeout: Duration::from_secs(5),
        bound_at_start: true,
        ..UdpConfig::default()
    };
    let mut eps = local(2, cfg);
    drop(eps.pop());
    let a = &mut eps[0];
    let start = Instant::now();
    a.send(1, b"to the dead from the start", start).unwrap();
    let suspects = first_suspects(a, start, |_| {});
    assert_eq!(suspects, vec![1], "after {:?}", start.elapsed());
    assert!(start.elapsed() < MS(500), "{:?}", start.elapsed());
    assert_eq!(a.stats().refused_probes, 1, "{:?}", a.stats());
}

#[test]
fn an_icmp_error_quoting_data_in_flight_suspects_at_once_and_other_data_quotes_are_hints() {
    // The quote of a DATA header this endpoint has in flight, byte for byte, proves the port
    // refused it (its MAC covers the sequence number and payload); the quote of DATA already
    // acknowledged (a replay) or of altered bytes is a hint, which the live peer's answer to
    // the PROBE clears.
    let (mut eps, addr1, mut got) = heard_pair(MS(300));
    let (a, b) = eps.split_at_mut(1);
    let (a, b) = (&mut a[0], &mut b[0]);
    let acked = a.core.data_header(1, 0).to_vec();
    a.core.on_refused(addr1, &acked, Instant::now());
    assert!(!a.is_suspected(1));
    assert!(pump(&mut [&mut *a, &mut *b], &mut got, MS(2_000), |e, _| e[0]
        .core
        .probing
        .is_empty()));
    a.send(1, b"in flight", Instant::now()).unwrap();
    let mut altered = a.core.data_header(1, 1).to_vec();
    altered[HEADER_LEN - 1] ^= 1;
    a.core.on_refused(addr1, &altered, Instant::now());
    a.core.on_refused(addr1, &altered[..32], Instant::now());
    assert!(!a.is_suspected(1));
    assert_eq!((a.stats().refused, a.stats().refused_probes), (2, 0), "{:?}", a.stats());
    let in_flight = a.core.data_header(1, 1).to_vec();
    a.core.on_refused(addr1, &in_flight, Instant::now());
    assert!(a.is_suspected(1), "{:?}", a.stats());
    assert_eq!((a.stats().refused, a.stats().refused_probes), (2, 1), "{:?}", a.stats());
}

/// What each endpoint of a test received: (sender, bytes) per rank.
type Received = Vec<Vec<(u32, Vec<u8>)>>;

/// Two endpoints with `probe_timeout`, rank 1 heard from once by rank 0 (its "hello" delivered
/// and acknowledged): rank 1's address and what each received.
fn heard_pair(probe_timeout: Duration) -> (Vec<UdpTransport>, SocketAddr, Received) {
    let cfg = UdpConfig {
        probe_timeout,
        ..UdpConfig::default()
    };
    let mut eps = local(2, cfg);
    let addr1 = eps[1].local_addr().unwrap();
    let mut got = vec![Vec::new(), Vec::new()];
    {
        let (a, b) = eps.split_at_mut(1);
        let (a, b) = (&mut a[0], &mut b[0]);
        a.send(1, b"hello", Instant::now()).unwrap();
        assert!(pump(&mut [&mut *a, &mut *b], &mut got, MS(2_000), |e, g| g[1].len()
            == 1
            && e[0].unacked() == 0));
    }
    (eps, addr1, got)
}

#[test]
fn an_icmp_error_quoting_an_earlier_probe_or_other_bytes_stays_a_hint() {
    // Only a quote of the PROBE in flight, byte for byte, proves the port closed: a replayed
    // quote of an earlier PROBE (each is numbered and sealed anew) or made-up bytes are hints
    // that wait for the live peer's answer, which clears them.
    let (mut eps, addr1, mut got) = heard_pair(MS(300));
    let (a, b) = eps.split_at_mut(1);
    let (a, b) = (&mut a[0], &mut b[0]);
    a.core.on_refused(addr1, &[], Instant::now());
    let first = a.core.control_datagram(1).to_vec();
    assert!(pump(&mut [&mut *a, &mut *b], &mut got, MS(2_000), |e, _| e[0]
        .core
        .probing
        .is_empty()));
    a.core.on_refused(addr1, &[], Instant::now());
    assert_ne!(a.core.control_datagram(1), &first[..], "each PROBE is new");
    a.core.on_refused(addr1, &first, Instant::now());
    a.core.on_refused(addr1, &[0u8; 64], Instant::now());
    a.core.on_refused(addr1, &first[..32], Instant::now());
    assert!(!a.is_suspected(1));
    assert!(pump(&mut [&mut *a, &mut *b], &mut got, MS(2_000), |e, _| e[0]
        .core
        .probing
        .is_empty()));
    assert!(!a.is_suspected(1));
    assert_eq!(
        (a.stats().refused, a.stats().refused_probes, a.stats().suspected),
        (2, 0, 0)
    );
}

#[test]
fn an_icmp_error_for_a_live_peer_that_keeps_answering_suspects_no_one() {
    // Forged "port unreachable" errors naming rank 1 (as an attacker off the path could send
    // them) while it is alive: each is a hint that probes it, it answers, it stays a peer.
    let (mut eps, addr1, mut got) = heard_pair(MS(200));
    let (a, b) = eps.split_at_mut(1);
    let (a, b) = (&mut a[0], &mut b[0]);
    let start = Instant::now();
    let mut hints = 0;
    while start.elapsed() < MS(1_000) {
        if hints < 20 && a.core.probing.is_empty() {
            a.core.on_refused(addr1, &[], Instant::now());
            hints += 1;
        }
        for (t, g) in [&mut *a, &mut *b].into_iter().zip(got.iter_mut()) {
            collect(t, g);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(hints, 20, "each probe was answered");
    assert!(!a.is_suspected(1));
    assert!(!got[0].iter().any(|(_, m)| m == b"SUSPECT"), "{got:?}");
    assert!(!got[1].iter().any(|(_, m)| m == b"FENCED"), "{got:?}");
    assert_eq!(a.stats().refused, 20);
    assert_eq!(a.stats().suspected + b.stats().fenced, 0);
}

/// A heartbeat's PROBE ([`Transport::beat`]) quoted by an ICMP error, byte for byte, proves
/// the port refused it, as a DATA heartbeat's header did: the peer is suspected at once,
/// without a probe of its own (an altered quote would be a hint: see above).
#[test]
fn an_icmp_error_quoting_a_heartbeat_suspects_at_once() {
    let (mut eps, addr1, _) = heard_pair(MS(300));
    let a = &mut eps[0];
    assert_eq!(a.beat(1, Instant::now()), Beat::Sent);
    assert_eq!(a.stats().beats_sent, 1);
    let beat = a.core.control_datagram(1).to_vec();
    a.core.on_refused(addr1, &beat, Instant::now());
    assert!(a.is_suspected(1), "{:?}", a.stats());
    assert_eq!((a.stats().refused, a.stats().refused_probes), (0, 1), "{:?}", a.stats());
}
