//! The core without sockets: endpoints over an in-memory link with a one-way latency, the
//! same fault injection as the UDP endpoint ([`Impaired`]) and the same receive loop
//! ([`receive`]), on a virtual clock. Every run is deterministic, as a simulator needs.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::*;
use crate::transport::SendError;
use crate::transport::udp::header::{Header, KIND_ACK, KIND_DATA, KIND_FENCE, seal};
use crate::transport::udp::impair::Impaired;
use crate::transport::udp::link::{Link, Recv};
use crate::transport::udp::pump::{receive, transmit};

const US: fn(u64) -> Duration = Duration::from_micros;

/// Datagrams in flight: (due, from, to, bytes), in sending order.
#[derive(Default)]
struct Wire {
    latency: Duration,
    flying: VecDeque<(Instant, SocketAddr, SocketAddr, Vec<u8>)>,
    /// DATA datagrams (the first `drop_data`) that the wire loses, before any impairment.
    drop_data: usize,
    dropped: usize,
    /// FENCE datagrams (the first `drop_fences`) that the wire loses.
    drop_fences: usize,
    /// ACK datagrams (the next `drop_acks`) that the wire loses.
    drop_acks: usize,
    /// Everything sent is lost (a partition).
    cut: bool,
    /// The clock the senders see.
    now: Option<Instant>,
}

/// One endpoint's end of the shared wire.
struct MemLink {
    me: SocketAddr,
    wire: Rc<RefCell<Wire>>,
}

impl Link for MemLink {
    fn recv(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Recv> {
        let mut w = self.wire.borrow_mut();
        let Some(i) = w.flying.iter().position(|f| f.2 == self.me && f.0 <= now) else {
            return Ok(Recv::Empty);
        };
        let (_, src, _, d) = w.flying.remove(i).unwrap();
        buf[..d.len()].copy_from_slice(&d);
        Ok(Recv::Datagram {
            len: d.len(),
            src,
            arrived: None,
        })
    }

    fn send(&mut self, d: &[u8], to: SocketAddr) {
        let mut w = self.wire.borrow_mut();
        if d[5] == KIND_DATA && w.dropped < w.drop_data {
            w.dropped += 1;
            return;
        }
        if d[5] == KIND_FENCE && w.drop_fences > 0 {
            w.drop_fences -= 1;
            return;
        }
        if d[5] == KIND_ACK && w.drop_acks > 0 {
            w.drop_acks -= 1;
            return;
        }
        if w.cut {
            return;
        }
        let due = w.now.unwrap() + w.latency;
        w.flying.push_back((due, self.me, to, d.to_vec()));
    }
}

/// An endpoint: the core, its link, and what it delivered.
struct Node {
    core: Reliable,
    link: Impaired<MemLink>,
    rbuf: Vec<u8>,
    got: Vec<(u32, Vec<u8>)>,
    suspects: Vec<u32>,
    fenced: Vec<u32>,
}

impl Node {
    /// One poll at `now`: receive, then timers; as `UdpTransport::poll` without the socket.
    fn poll(&mut self, now: Instant) {
        let (got, suspects, fenced) = (&mut self.got, &mut self.suspects, &mut self.fenced);
        let mut sink = |d: Delivery<'_>| match d {
            Delivery::Message { from, bytes } => got.push((from, bytes.to_vec())),
            Delivery::Suspect { peer } => suspects.push(peer),
            Delivery::Fenced { by } => fenced.push(by),
        };
        receive(&mut self.core, &mut self.link, &mut self.rbuf, now, &mut sink).unwrap();
        self.core.on_timers(now, &mut sink);
        transmit(&mut self.core, &mut self.link);
    }

    fn send(&mut self, to: u32, bytes: &[u8], now: Instant) -> Result<(), SendError> {
        let sent = self.core.send(to, bytes, now);
        transmit(&mut self.core, &mut self.link);
        sent
    }

    fn link_addr(&self) -> SocketAddr {
        self.link.inner().me
    }

    fn stats(&self) -> TransportStats {
        TransportStats {
            injected_losses: self.link.injected_losses(),
            ..self.core.stats()
        }
    }
}

/// `n` endpoints of one job on a wire with one-way `latency`, built at `t0`.
fn nodes(n: u32, cfg: &UdpConfig, latency: Duration, t0: Instant) -> (Rc<RefCell<Wire>>, Vec<Node>) {
    let wire = Rc::new(RefCell::new(Wire {
        latency,
        now: Some(t0),
        ..Wire::default()
    }));
    let addrs: Vec<SocketAddr> = (0..n)
        .map(|r| SocketAddr::from(([10, 0, 0, 1], 7000 + r as u16)))
        .collect();
    let nodes = (0..n)
        .map(|r| {
            let link = MemLink {
                me: addrs[r as usize],
                wire: wire.clone(),
            };
            Node {
                core: Reliable::new(r, &addrs, cfg.clone(), t0).unwrap(),
                link: Impaired::new(link, cfg, r),
                rbuf: vec![0; MAX_DATAGRAM + 1],
                got: Vec::new(),
                suspects: Vec::new(),
                fenced: Vec::new(),
            }
        })
        .collect();
    (wire, nodes)
}

/// Every endpoint polls at `now`, the wire's clock set to it.
fn tick(wire: &Rc<RefCell<Wire>>, ns: &mut [Node], now: Instant) {
    wire.borrow_mut().now = Some(now);
    for n in ns.iter_mut() {
        n.poll(now);
    }
}

fn payload(from: u32, i: u64) -> Vec<u8> {
    let mut p = vec![from as u8; 1 + (i % 97) as usize];
    p[..1].copy_from_slice(&[(i % 251) as u8]);
    p.extend_from_slice(&i.to_le_bytes());
    p
}

/// Impairments: loss and reordering probabilities, and an emulated delay with jitter.
fn impaired(loss: f64, reorder: f64, delay: Duration, delay_jitter: Duration) -> UdpConfig {
    UdpConfig {
        loss,
        reorder,
        delay,
        delay_jitter,
        seed: 42,
        ..UdpConfig::default()
    }
}

/// Two endpoints send `count` messages each to the other through a link impaired as `cfg`
/// says, polling every 2 µs; returns the nodes and the virtual time it took.
fn exchange_lossy(count: u64, cfg: UdpConfig) -> (Vec<Node>, Duration) {
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    let step = US(2);
    let mut now = t0;
    let mut sent = [0u64; 2];
    for _ in 0..2_000_000 {
        now += step;
        wire.borrow_mut().now = Some(now);
        for r in 0..2 {
            let node = &mut ns[r];
            node.poll(now);
            // Send as fast as the window allows.
            while sent[r] < count && node.send(1 - r as u32, &payload(r as u32, sent[r]), now).is_ok() {
                sent[r] += 1;
            }
        }
        let done = |n: &Node| n.got.len() as u64 == count && n.core.unacked() == 0;
        if sent == [count; 2] && ns.iter().all(done) {
            return (ns, now - t0);
        }
    }
    panic!(
        "no completion: sent {sent:?}, got {} and {}, suspects {:?} {:?}, stats {:?} {:?}, unacked {} {}, flying {}",
        ns[0].got.len(),
        ns[1].got.len(),
        ns[0].suspects,
        ns[1].suspects,
        ns[0].stats(),
        ns[1].stats(),
        ns[0].core.unacked(),
        ns[1].core.unacked(),
        wire.borrow().flying.len()
    );
}

#[test]
fn exactly_once_in_order_over_a_lossy_reordering_link() {
    let count = 1_000;
    let no_delay = impaired(0.05, 0.1, Duration::ZERO, Duration::ZERO);
    let delayed = impaired(0.02, 0.05, US(30), US(20));
    for cfg in [no_delay, delayed] {
        let (ns, _) = exchange_lossy(count, cfg);
        check_exactly_once_in_order(&ns, count);
    }
}

fn check_exactly_once_in_order(ns: &[Node], count: u64) {
    for (r, n) in ns.iter().enumerate() {
        let from = 1 - r as u32;
        let want: Vec<(u32, Vec<u8>)> = (0..count).map(|i| (from, payload(from, i))).collect();
        assert!(n.got == want, "rank {r}: not exactly once in order");
        assert!(n.suspects.is_empty());
        let s = n.stats();
        assert!(s.injected_losses > 10, "{s:?}");
        assert!(s.retransmits > 0, "{s:?}");
        assert_eq!(s.sent, count);
        assert_eq!(s.received, count);
    }
}

#[test]
fn the_same_inputs_give_the_same_run() {
    let cfg = impaired(0.2, 0.2, US(5), US(5));
    let (a, ta) = exchange_lossy(500, cfg.clone());
    let (b, tb) = exchange_lossy(500, cfg);
    assert_eq!(ta, tb);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.stats(), y.stats());
    }
}

/// `k` messages sent at `t0`, the first `lost` DATA datagrams lost on the wire: when the
/// last message arrived, and rank 0's RTO then.
fn repaired_after_losses(k: u64, lost: usize) -> (Duration, Duration) {
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    wire.borrow_mut().drop_data = lost;
    for i in 0..k {
        ns[0].send(1, &payload(0, i), t0).unwrap();
    }
    let step = US(5);
    let mut now = t0;
    while (ns[1].got.len() as u64) < k {
        now += step;
        assert!(now < t0 + Duration::from_secs(1), "not repaired");
        wire.borrow_mut().now = Some(now);
        for n in ns.iter_mut() {
            n.poll(now);
        }
    }
    (now - t0, ns[0].core.rto_estimator(1).unwrap().rto())
}

#[test]
fn a_thin_flight_retransmits_without_backoff_first_and_a_fat_one_backs_off() {
    let cfg = UdpConfig::default();
    // A one-way link: the receiver holds its ACKs `ack_delay_one_way`.
    let expiry = cfg.rto_initial + cfg.ack_delay_one_way;
    let slack = (cfg.rto_min / 8 + US(5)) * 4 + US(20);
    // One message lost three times: its fourth copy (the third retransmission) arrives after
    // three expiries of the same timeout, not after 1 + 2 + 4 of a doubling one.
    let (at, rto) = repaired_after_losses(1, 3);
    assert!(at >= expiry * 3 && at <= expiry * 3 + slack, "{at:?}");
    assert_eq!(rto, cfg.rto_initial);
    // Four messages (not thin), all lost once (no later one reveals a hole): the timer
    // backs off at once.
    let (_, rto) = repaired_after_losses(THIN_FLIGHT, THIN_FLIGHT as usize);
    assert_eq!(rto, cfg.rto_initial * 2);
}

/// Rank 0 sends rank 1 twelve messages, one every `gap`, both polling every 2 µs; returns
/// the time it ran to.
fn one_at_a_time(wire: &Rc<RefCell<Wire>>, ns: &mut [Node], t0: Instant, gap: Duration) -> Instant {
    let mut now = t0;
    for i in 0..12 {
        ns[0].send(1, &payload(0, i), now).unwrap();
        let end = now + gap;
        while now < end {
            now += US(2);
            tick(wire, ns, now);
        }
    }
    now
}

#[test]
fn a_hole_behind_a_message_the_peer_has_is_resent_at_once_not_at_the_smoothed_rtt() {
    // A link that was slow while the estimator warmed (150 µs each way: a smoothed RTT of
    // about 300 µs) and is fast now (10 µs).
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(150), t0);
    let step = US(2);
    let mut now = one_at_a_time(&wire, &mut ns, t0, cfg.ack_delay + US(400));
    let srtt = ns[0].core.rto_estimator(1).unwrap().srtt().unwrap();
    assert!(srtt >= US(250), "{srtt:?}");
    assert_eq!(ns[0].stats().retransmits, 0);
    wire.borrow_mut().latency = US(10);
    // Two messages back to back, the first lost: the second reveals the hole (the peer's
    // gap ACK), and the sender resends it at once, not a smoothed RTT after it sent it.
    wire.borrow_mut().drop_data = 1;
    let sent_at = now;
    ns[0].send(1, b"lost", now).unwrap();
    ns[0].send(1, b"behind", now).unwrap();
    let mut repaired = None;
    while repaired.is_none() {
        now += step;
        assert!(now < sent_at + cfg.rto_max, "never repaired");
        tick(&wire, &mut ns, now);
        if ns[1].got.len() == 14 {
            repaired = Some(now - sent_at);
        }
    }
    let at = repaired.unwrap();
    // Two round trips of the path (the gap ACK back, the copy out) and the poll steps.
    assert!(at <= US(40) + step * 4, "repaired after {at:?} (smoothed RTT {srtt:?})");
    assert_eq!(&ns[1].got[12..], &[(0, b"lost".to_vec()), (0, b"behind".to_vec())]);
    assert_eq!(ns[0].stats().retransmits, 1);
    assert_eq!(ns[0].stats().timeouts, 0, "no timer fired");
}

#[test]
fn a_lost_report_of_a_hole_is_repeated_before_the_senders_timer() {
    // Two messages back to back on a fresh link, the first lost, and the receiver's first
    // report of the hole (its gap ACK) lost too: the receiver reports again a quarter of the
    // RTO's floor later (it has no round trip to the sender sampled), and the sender
    // resends the hole then, not at its timer (rto_initial + ack_delay_one_way, 1.2 ms).
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    wire.borrow_mut().drop_data = 1;
    wire.borrow_mut().drop_acks = 1;
    ns[0].send(1, b"lost", t0).unwrap();
    ns[0].send(1, b"behind", t0).unwrap();
    let step = US(2);
    let mut now = t0;
    while ns[1].got.len() < 2 {
        now += step;
        assert!(now < t0 + cfg.rto_max, "never repaired");
        tick(&wire, &mut ns, now);
    }
    let at = now - t0;
    // The repeat (rto_min / 4), its flight back and the copy's flight out, and poll steps.
    assert!(at <= cfg.rto_min / 4 + US(40) + step * 4, "repaired after {at:?}");
    assert_eq!(ns[1].got, vec![(0, b"lost".to_vec()), (0, b"behind".to_vec())]);
    assert_eq!(ns[0].stats().retransmits, 1);
    assert_eq!(ns[0].stats().timeouts, 0, "no timer fired");
    // Once the hole is filled the receiver stops repeating: over the next RTO no more
    // than the ACK of the repaired pair goes out.
    let acks = ns[1].stats().acks_sent;
    let end = now + cfg.rto_initial;
    while now < end {
        now += step;
        tick(&wire, &mut ns, now);
    }
    assert!(
        ns[1].stats().acks_sent <= acks + 1,
        "{} then {}",
        acks,
        ns[1].stats().acks_sent
    );
}

#[test]
fn the_retransmission_timer_repairs_a_lost_datagram() {
    // One message, lost on the wire: no later packet reveals the gap, only the RTO repairs it.
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    wire.borrow_mut().drop_data = 1;
    ns[0].send(1, b"once", t0).unwrap();
    let step = US(5);
    let mut now = t0;
    let mut repaired_at = None;
    while now < t0 + cfg.rto_initial * 3 {
        now += step;
        wire.borrow_mut().now = Some(now);
        for n in ns.iter_mut() {
            n.poll(now);
        }
        if repaired_at.is_none() && ns[0].stats().retransmits == 1 {
            repaired_at = Some(now);
        }
    }
    let at = repaired_at.expect("retransmitted") - t0;
    // RFC 6298: not before the initial RTO (plus the peer's ACK delay on a one-way link, as
    // QUIC's PTO), then within a timer-wheel tick and a poll step.
    assert!(at >= cfg.rto_initial + cfg.ack_delay_one_way, "{at:?}");
    assert!(
        at <= cfg.rto_initial + cfg.ack_delay_one_way + cfg.rto_min / 8 + step * 2,
        "{at:?}"
    );
    assert_eq!(ns[1].got, vec![(0, b"once".to_vec())]);
    assert_eq!(ns[0].stats().retransmits, 1);
    assert_eq!(ns[0].core.unacked(), 0);
    // Karn: the retransmitted packet gave no sample; one packet is a thin flight, whose first
    // expiries do not back the RTO off (`LINEAR_TIMEOUTS`).
    let rto = ns[0].core.rto_estimator(1).unwrap();
    assert_eq!(rto.srtt(), None);
    assert_eq!(rto.rto(), cfg.rto_initial);
}

/// A leaving endpoint waits for what it sent before its marks (the first message, lost once
/// and repaired by the RTO), not for what it sent after them (a heartbeat, say); without
/// marks it waits for everything.
#[test]
fn marks_wait_for_what_was_sent_before_them_only() {
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    wire.borrow_mut().drop_data = 1;
    ns[0].send(1, b"decision", t0).unwrap();
    let mut marks = Vec::new();
    ns[0].core.sent_marks(&mut marks);
    assert!(!ns[0].core.acked_through(&marks));
    let mut now = t0;
    while !ns[0].core.acked_through(&marks) {
        assert!(
            now < t0 + cfg.rto_initial * 3,
            "the marked message was never acknowledged"
        );
        now += US(5);
        wire.borrow_mut().now = Some(now);
        for n in ns.iter_mut() {
            n.poll(now);
        }
    }
    assert_eq!(ns[0].stats().retransmits, 1, "acknowledged only after its repair");
    assert_eq!(ns[1].got, vec![(0, b"decision".to_vec())]);
    // Sent after the marks: not waited for with them, waited for without.
    ns[0].send(1, b"heartbeat", now).unwrap();
    assert_eq!(ns[0].core.unacked(), 1);
    assert!(ns[0].core.acked_through(&marks));
    assert!(!ns[0].core.acked_through(&[]));
}

#[test]
fn a_peer_that_never_answers_is_suspected_after_the_backoff() {
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(3, &cfg, US(10), t0);
    ns[0].send(1, b"hello", t0).unwrap();
    ns[0].send(2, b"hello", t0).unwrap();
    let step = US(50);
    let mut now = t0;
    let mut suspected_at = None;
    while now < t0 + Duration::from_secs(2) && suspected_at.is_none() {
        now += step;
        wire.borrow_mut().now = Some(now);
        // Rank 1 is silent (never polls); rank 2 answers.
        ns[0].poll(now);
        ns[2].poll(now);
        if !ns[0].suspects.is_empty() {
            suspected_at = Some(now - t0);
        }
    }
    let at = suspected_at.expect("suspected");
    // One message: a thin flight, retransmitted LINEAR_TIMEOUTS times without backoff first.
    let bound = cfg.suspicion_time(cfg.rto_initial) + cfg.linear_time(cfg.rto_initial);
    // Each of the expiries fires within a wheel tick and a poll step.
    let slack = (cfg.rto_min / 8 + step) * (cfg.max_retries + 1 + LINEAR_TIMEOUTS);
    assert!(at >= bound && at <= bound + slack, "{at:?} vs {bound:?}");
    assert_eq!(ns[0].suspects, vec![1]);
    assert!(ns[0].core.is_suspected(1) && !ns[0].core.is_suspected(2));
    assert_eq!(ns[0].send(1, b"x", now), Err(SendError::Suspected));
    assert_eq!(ns[2].got, vec![(0, b"hello".to_vec())]);
    assert_eq!(ns[0].stats().retransmits, u64::from(cfg.max_retries + LINEAR_TIMEOUTS));
}

#[test]
fn queued_datagrams_are_the_wire_bytes_in_order() {
    // An unauthenticated DATA to rank 1 and rank 1's ACK: the outbox hands out exactly the
    // datagrams of the header format, to the peers' addresses.
    let cfg = UdpConfig {
        job: 9,
        ..UdpConfig::default()
    };
    let t0 = Instant::now();
    let addrs = [
        SocketAddr::from(([10, 0, 0, 1], 1)),
        SocketAddr::from(([10, 0, 0, 2], 2)),
    ];
    let mut a = Reliable::new(0, &addrs, cfg.clone(), t0).unwrap();
    let mut b = Reliable::new(1, &addrs, cfg.clone(), t0).unwrap();
    a.send(1, b"xyz", t0).unwrap();
    let t = a.poll_transmit().unwrap();
    assert_eq!(t.to, addrs[1]);
    let d = t.bytes.to_vec();
    assert!(a.poll_transmit().is_none());
    let h = Header::read(&d).unwrap();
    assert_eq!(
        (h.kind, h.job, h.from, h.to, h.seq, h.ack, h.sack),
        (KIND_DATA, 9, 0, 1, 0, 0, 0)
    );
    assert_eq!(&d[HEADER_LEN..], b"xyz");
    assert_eq!(&d[TAG_AT_OFFSET..HEADER_LEN], &[0; 16]);
    let mut got = Vec::new();
    let n = b.on_datagram(&d, addrs[0], t0 + US(10), &mut |dl| {
        if let Delivery::Message { bytes, .. } = dl {
            got.push(bytes.to_vec())
        }
    });
    assert_eq!((n, got), (1, vec![b"xyz".to_vec()]));
    // The ACK waits for `ack_delay_one_way` (DATA to ride on: b sent a none), then goes alone.
    b.on_timers(t0 + US(10), &mut |_| {});
    assert!(b.poll_transmit().is_none());
    assert_eq!(b.next_due(), Some(t0 + US(10) + cfg.ack_delay_one_way));
    b.on_timers(t0 + US(10) + cfg.ack_delay_one_way, &mut |_| {});
    let t = b.poll_transmit().unwrap();
    assert_eq!(t.to, addrs[0]);
    let h = Header::read(t.bytes).unwrap();
    assert_eq!(
        (h.kind, h.from, h.to, h.ack, t.bytes.len()),
        (KIND_ACK, 1, 0, 1, HEADER_LEN)
    );
    assert!(b.poll_transmit().is_none());
}

const TAG_AT_OFFSET: usize = crate::transport::udp::TAG_AT;

mod fence;
mod hold;
mod spurious;

/// A heartbeat outside the reliable stream ([`Reliable::beat`]): a PROBE that takes no window
/// slot and goes out while the window is full; the peer answers with an ACK at once, so each
/// side hears the other ([`Reliable::last_heard`]); nothing is delivered, and a suspected
/// peer gets none.
#[test]
fn a_beat_takes_no_window_slot_and_each_side_hears_the_other() {
    let cfg = UdpConfig {
        window: 2,
        ..UdpConfig::default()
    };
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(3, &cfg, US(10), t0);
    // The window fills with two messages the wire loses.
    wire.borrow_mut().cut = true;
    ns[0].send(1, b"a", t0).unwrap();
    ns[0].send(1, b"b", t0).unwrap();
    assert_eq!(ns[0].send(1, b"c", t0), Err(SendError::WindowFull));
    wire.borrow_mut().cut = false;
    let n0 = &mut ns[0];
    assert!(n0.core.beat(1, t0));
    transmit(&mut n0.core, &mut n0.link);
    assert_eq!(ns[0].core.unacked(), 2, "the beat took no slot");
    assert_eq!(ns[0].stats().beats_sent, 1);
    assert_eq!(ns[0].stats().sent, 2, "a beat is not a message");
    let (t1, t2) = (t0 + US(10), t0 + US(20));
    wire.borrow_mut().now = Some(t1);
    ns[1].poll(t1);
    assert_eq!(ns[1].core.last_heard(0), Some(t1), "the peer heard the beat");
    assert!(ns[1].got.is_empty(), "and delivered nothing");
    assert_eq!(ns[1].stats().acks_sent, 1, "it answered at once");
    wire.borrow_mut().now = Some(t2);
    ns[0].poll(t2);
    assert_eq!(ns[0].core.last_heard(1), Some(t2), "the beater heard the answer");
    assert_eq!((ns[0].stats().retransmits, ns[1].stats().retransmits), (0, 0));
    // A suspected peer gets no beat.
    ns[0].core.enforce(2, t2);
    assert!(!ns[0].core.beat(2, t2));
    assert_eq!(ns[0].stats().beats_sent, 1);
}
