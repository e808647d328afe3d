//! Spurious retransmissions: a receiver descheduled past the sender's RTO gets the original
//! and the retransmissions, reports the duplicate in its ACK, and the sender's RTO adapts so
//! that the next stall of the same length costs nothing.

use super::*;

/// Rank 0 sends one message to rank 1 at `at`; rank 1 does not poll for `stall` after it
/// (descheduled); both poll every 5 µs otherwise. Returns the time it ran to.
fn one_message_over_a_stall(wire: &Rc<RefCell<Wire>>, ns: &mut [Node], at: Instant, stall: Duration) -> Instant {
    ns[0].send(1, b"m", at).unwrap();
    let step = US(5);
    let mut now = at;
    while now < at + stall + Duration::from_millis(2) {
        now += step;
        wire.borrow_mut().now = Some(now);
        ns[0].poll(now);
        if now >= at + stall {
            ns[1].poll(now);
        }
    }
    assert_eq!(ns[0].core.unacked(), 0);
    now
}

/// Warms the estimator with ordinary exchanges (RTT of tens of µs), then polls until the
/// receiver's held ACK came (at most `ack_delay` and a few steps later), so that nothing is
/// in flight when the scenario starts.
fn warm(wire: &Rc<RefCell<Wire>>, ns: &mut [Node], t0: Instant) -> Instant {
    let mut now = t0;
    let step = |now: &mut Instant, ns: &mut [Node]| {
        *now += US(5);
        wire.borrow_mut().now = Some(*now);
        ns[0].poll(*now);
        ns[1].poll(*now);
    };
    for i in 0..20 {
        ns[0].send(1, &payload(0, i), now).unwrap();
        for _ in 0..40 {
            step(&mut now, ns);
        }
    }
    let end = now + UdpConfig::default().ack_delay + US(100);
    while ns[0].core.unacked() > 0 && now < end {
        step(&mut now, ns);
    }
    assert_eq!(ns[0].core.unacked(), 0, "the warm-up's last ACK came");
    now
}

#[test]
fn a_reported_duplicate_teaches_the_rto_the_stall_and_the_next_stall_costs_nothing() {
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    let now = warm(&wire, &mut ns, t0);
    let before = ns[0].core.rto_estimator(1).unwrap().rto();
    assert!(before < Duration::from_millis(1), "{before:?}");
    let stall = Duration::from_millis(2);

    // First stall: the RTO fires while rank 1 sleeps; it gets the original and the copies.
    let now = one_message_over_a_stall(&wire, &mut ns, now, stall);
    let (a, b) = (ns[0].stats(), ns[1].stats());
    assert!(a.retransmits >= 1, "{a:?}");
    assert_eq!(
        b.duplicates, a.retransmits,
        "every retransmission was a duplicate: {b:?}"
    );
    assert_eq!(a.spurious_retransmits, 1, "one packet, reported spurious once: {a:?}");
    let rto = ns[0].core.rto_estimator(1).unwrap().rto();
    assert!(rto >= 3 * stall, "the RTO covers the stall it learned: {rto:?}");

    // Second stall of the same length: no retransmission, no duplicate.
    one_message_over_a_stall(&wire, &mut ns, now, stall);
    let (a2, b2) = (ns[0].stats(), ns[1].stats());
    assert_eq!(a2.retransmits, a.retransmits, "{a2:?}");
    assert_eq!(b2.duplicates, b.duplicates, "{b2:?}");
    assert_eq!(ns[1].got.len(), 22);
}

#[test]
fn a_retransmission_for_a_lost_ack_is_not_reported_and_teaches_nothing() {
    // Rank 1 gets the DATA and acknowledges it, but the ACK is lost: the sender's timer was
    // right. The copy it then gets is re-acknowledged at once without a duplicate report, so
    // the sender's RTO only backs off (RFC 6298) instead of taking the whole timeout for a
    // late original (the Eifel response, which tripled it at every lost ACK).
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    let mut now = warm(&wire, &mut ns, t0);
    let before = ns[0].core.rto_estimator(1).unwrap().rto();
    let (a0, b0) = (ns[0].stats(), ns[1].stats());
    wire.borrow_mut().drop_acks = 1;
    ns[0].send(1, b"m", now).unwrap();
    let end = now + Duration::from_millis(3);
    while now < end {
        now += US(5);
        wire.borrow_mut().now = Some(now);
        ns[0].poll(now);
        ns[1].poll(now);
    }
    let (a, b) = (ns[0].stats(), ns[1].stats());
    assert_eq!(ns[0].core.unacked(), 0);
    assert_eq!(a.retransmits - a0.retransmits, 1, "{a:?}");
    assert_eq!(b.duplicates - b0.duplicates, 1, "{b:?}");
    assert_eq!(a.spurious_retransmits, 0, "{a:?}");
    let rto = ns[0].core.rto_estimator(1).unwrap().rto();
    assert!(
        rto <= 2 * before,
        "backed off once, not inflated: {before:?} -> {rto:?}"
    );
    assert_eq!(ns[1].got.len(), 21);
}

#[test]
fn a_duplicate_never_retransmitted_teaches_nothing() {
    // The sender's own slot says it was sent once: a duplicate report (a network duplicate,
    // or a forged-but-authentic replay) does not move the RTO.
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    let now = warm(&wire, &mut ns, t0);
    let rto = ns[0].core.rto_estimator(1).unwrap();
    // Rank 1 hears DATA 19 again (a copy the wire duplicated) and says so.
    let copy = {
        let mut core = Reliable::new(0, &[ns[0].link_addr(), ns[1].link_addr()], cfg.clone(), t0).unwrap();
        for i in 0..20 {
            core.send(1, &payload(0, i), t0).unwrap();
        }
        let mut last = Vec::new();
        while let Some(t) = core.poll_transmit() {
            last = t.bytes.to_vec();
        }
        last
    };
    let mut sink = |_: Delivery<'_>| {};
    let from = ns[0].link_addr();
    ns[1].core.on_datagram(&copy, from, now, &mut sink);
    let mut now = now;
    for _ in 0..40 {
        now += US(5);
        wire.borrow_mut().now = Some(now);
        ns[1].poll(now);
        ns[0].poll(now);
    }
    assert_eq!(ns[1].stats().duplicates, 1);
    assert_eq!(ns[0].stats().spurious_retransmits, 0);
    assert_eq!(ns[0].core.rto_estimator(1).unwrap(), rto);
}

#[test]
fn a_duplicate_report_beyond_what_was_sent_is_malformed() {
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let addrs = [
        SocketAddr::from(([10, 0, 0, 1], 1)),
        SocketAddr::from(([10, 0, 0, 2], 2)),
    ];
    let mut a = Reliable::new(0, &addrs, cfg, t0).unwrap();
    let mut d = [0u8; HEADER_LEN];
    Header {
        kind: KIND_ACK,
        len: 0,
        job: 0,
        from: 1,
        to: 0,
        // Reports DATA 0 twice, but rank 0 never sent anything.
        seq: 1,
        ack: 0,
        hold: 0,
        sack: 0,
    }
    .write(&mut d);
    a.on_datagram(&d, addrs[1], t0, &mut |_| {});
    assert_eq!(a.stats().malformed, 1);
}
