//! Held ACKs (`UdpConfig::ack_delay`, `ack_delay_one_way`, [`super::super::TWO_WAY`]): a
//! tree link's holds leave its smoothed RTT the path's; a two-way link holds longer and its
//! sender allows for it, also across a crossing; a talking peer never keeps a lost message's
//! timer from firing; a retransmission that beat a held ACK teaches the RTO no hold.

use super::*;

/// A link whose messages go one at a time (a tree link): every ACK is held
/// `ack_delay_one_way`, for DATA to ride on that never comes, and says so (its hold), so the
/// smoothed RTT is the path's round trip, 20 µs, not the hold (before the hold was reported,
/// it was about the hold, and the RTO twice that); the least RTT stays the raw sample's.
#[test]
fn a_tree_links_held_acks_leave_the_smoothed_rtt_the_paths() {
    let cfg = UdpConfig::default();
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, &cfg, US(10), t0);
    one_at_a_time(&wire, &mut ns, t0, cfg.ack_delay + US(100));
    assert_eq!(ns[1].stats().acks_sent, 12, "every ACK went alone");
    let est = ns[0].core.rto_estimator(1).unwrap();
    let srtt = est.srtt().unwrap();
    assert!(srtt <= US(30), "the holds are taken out: {est:?}");
    assert!(est.min_rtt().unwrap() >= cfg.ack_delay_one_way, "held, raw: {est:?}");
    assert_eq!(est.rto(), cfg.rto_min, "{est:?}");
}

/// Two endpoints 10 µs apart after rank 0 sent rank 1 a message at a time long enough for
/// rank 0's RTO to rank 1 to come down to its floor, `rto_min`; and the time then.
fn warmed(cfg: &UdpConfig) -> (Rc<RefCell<Wire>>, Vec<Node>, Instant) {
    let t0 = Instant::now();
    let (wire, mut ns) = nodes(2, cfg, US(10), t0);
    let now = one_at_a_time(&wire, &mut ns, t0, cfg.ack_delay_one_way + US(100));
    assert_eq!(ns[0].core.rto_estimator(1).unwrap().rto(), cfg.rto_min);
    (wire, ns, now)
}

/// Runs the two endpoints from `from` until rank 1 has sent `acks` ACK datagrams, in steps of
/// 2 µs; returns when it sent the last (at most 5 ms later, else `None`).
fn ack_sent_by_1(wire: &Rc<RefCell<Wire>>, ns: &mut [Node], from: Instant, acks: u64) -> (Option<Instant>, Instant) {
    let mut now = from;
    while now < from + Duration::from_millis(5) {
        now += US(2);
        tick(wire, ns, now);
        if ns[1].stats().acks_sent >= acks {
            return (Some(now), now);
        }
    }
    (None, now)
}

/// A link that carries DATA both ways (an agreement's: a contribution up, the decision down a
/// while later) holds its ACKs `ack_delay`, for the answer to ride on; its sender's timer
/// allows for that hold (no retransmission while the ACK is held), and the link falls back to
/// the one-way hold once it carried nothing back for `TWO_WAY`.
#[test]
fn a_two_way_links_acks_are_held_longer_and_its_sender_waits_for_them() {
    let cfg = UdpConfig::default();
    assert!(cfg.ack_delay > cfg.ack_delay_one_way + cfg.rto_min / 4);
    let (wire, mut ns, mut now) = warmed(&cfg);
    // Rank 1 answers (DATA back to 0), then rank 0 sends again once that arrived.
    ns[1].send(0, b"up", now).unwrap();
    for _ in 0..20 {
        now += US(2);
        tick(&wire, &mut ns, now);
    }
    assert_eq!(ns[0].got.last(), Some(&(1, b"up".to_vec())));
    let acks = ns[1].stats().acks_sent;
    let sent = now;
    ns[0].send(1, b"down", now).unwrap();
    // Rank 0's timer allows for rank 1's longer hold.
    assert_eq!(ns[0].core.wheel.deadline(1), Some(sent + cfg.rto_min + cfg.ack_delay));
    let (acked, mut now) = ack_sent_by_1(&wire, &mut ns, now, acks + 1);
    let held = acked.expect("acknowledged") - sent;
    // Arrived 10 µs after the send; held `ack_delay` (within a poll step), not the one-way hold.
    assert!(held >= cfg.ack_delay && held <= cfg.ack_delay + US(20), "{held:?}");
    // Its timer was `rto_min + ack_delay`: no retransmission while the ACK was held.
    for _ in 0..50 {
        now += US(2);
        tick(&wire, &mut ns, now);
    }
    assert_eq!(ns[0].stats().retransmits, 0, "the held ACK was taken for a loss");
    // Quiet for longer than `TWO_WAY`: one-way again, both ends.
    now += TWO_WAY;
    tick(&wire, &mut ns, now);
    let acks = ns[1].stats().acks_sent;
    let sent = now;
    ns[0].send(1, b"down again", now).unwrap();
    assert_eq!(
        ns[0].core.wheel.deadline(1),
        Some(sent + cfg.rto_min + cfg.ack_delay_one_way)
    );
    let (acked, _) = ack_sent_by_1(&wire, &mut ns, now, acks + 1);
    let held = acked.expect("acknowledged") - sent;
    assert!(
        held >= cfg.ack_delay_one_way && held <= cfg.ack_delay_one_way + US(20),
        "{held:?}"
    );
    assert_eq!(ns[0].stats().retransmits, 0);
}

/// DATA crossing: rank 0 sends while rank 1's first DATA to it is in flight. Rank 0 armed its
/// timer for a one-way link's hold; rank 1, having just sent, holds its ACK `ack_delay`. The
/// arrival of rank 1's DATA at rank 0 extends the timer to the longer hold, so the held ACK
/// is not taken for a loss.
#[test]
fn a_crossing_extends_the_timer_to_the_peers_longer_hold() {
    let cfg = UdpConfig::default();
    let (wire, mut ns, now) = warmed(&cfg);
    let acks = ns[1].stats().acks_sent;
    ns[1].send(0, b"up", now).unwrap();
    ns[0].send(1, b"down", now).unwrap();
    let sent = now;
    let (acked, mut now) = ack_sent_by_1(&wire, &mut ns, now, acks + 1);
    let held = acked.expect("acknowledged") - sent;
    assert!(held >= cfg.ack_delay, "{held:?}");
    for _ in 0..50 {
        now += US(2);
        tick(&wire, &mut ns, now);
    }
    assert_eq!(ns[0].stats().retransmits, 0, "resent while the peer held its ACK");
    assert_eq!(ns[1].stats().retransmits, 0);
    assert_eq!(ns[1].got.last(), Some(&(0, b"down".to_vec())));
    assert_eq!(ns[0].got.last(), Some(&(1, b"up".to_vec())));
}

/// A peer that keeps sending DATA does not keep a lost message's timer from firing: its DATA
/// extends a timer armed for the one-way hold once, by the difference of the holds, and
/// never starts it again (a first version restarted it at every DATA after `TWO_WAY` of
/// quiet: with an RTO above `TWO_WAY` the lost message was never resent).
#[test]
fn a_talking_peer_does_not_hold_off_a_lost_messages_timer() {
    let cfg = UdpConfig {
        rto_min: Duration::from_millis(20),
        ..UdpConfig::default()
    };
    let (wire, mut ns, mut now) = warmed(&cfg);
    let lost = {
        let mut w = wire.borrow_mut();
        w.drop_data = w.dropped + 1;
        w.dropped
    };
    let sent = now;
    ns[0].send(1, b"lost", now).unwrap();
    assert_eq!(wire.borrow().dropped, lost + 1);
    // Rank 1 sends rank 0 DATA every 15 ms (more than `TWO_WAY` apart).
    let step = US(20);
    let mut next_talk = now + Duration::from_millis(5);
    while ns[1].got.last() != Some(&(0, b"lost".to_vec())) {
        now += step;
        assert!(now < sent + Duration::from_millis(200), "never resent");
        if now >= next_talk {
            ns[1].send(0, b"talk", now).unwrap();
            next_talk += Duration::from_millis(15);
        }
        tick(&wire, &mut ns, now);
    }
    // The timer: the RTO, the one-way hold it was armed with, the extension, a wheel tick.
    let due = cfg.rto_min + cfg.ack_delay;
    let tick_len = (cfg.rto_min / 8).min(Duration::from_millis(1));
    assert!(now - sent <= due + tick_len + step * 2, "{:?}", now - sent);
    assert_eq!(ns[0].stats().retransmits, 1);
}

/// Rank 1's DATA to rank 0 is lost, so rank 0 takes the link for one-way while rank 1 holds its
/// ACKs `ack_delay`: rank 0's timer fires early once and rank 1 reports the duplicate. The
/// report's ACK says how long rank 1 held it, and the RTO learns the path's delay, not the
/// hold (otherwise one lost DATA of the peer's tripled the RTO: 200 µs to 1.26 ms).
#[test]
fn a_spurious_retransmission_that_beat_a_held_ack_teaches_the_rto_no_hold() {
    let cfg = UdpConfig::default();
    let (wire, mut ns, mut now) = warmed(&cfg);
    {
        let mut w = wire.borrow_mut();
        w.drop_data = w.dropped + 1;
    }
    ns[1].send(0, b"up, lost", now).unwrap();
    for _ in 0..20 {
        now += US(2);
        tick(&wire, &mut ns, now);
    }
    ns[0].send(1, b"down", now).unwrap();
    let sent = now;
    while ns[0].stats().spurious_retransmits == 0 {
        now += US(2);
        assert!(now < sent + Duration::from_millis(2), "no duplicate reported");
        tick(&wire, &mut ns, now);
    }
    assert_eq!(ns[0].stats().retransmits, 1);
    let rto = ns[0].core.rto_estimator(1).unwrap().rto();
    assert_eq!(rto, cfg.rto_min, "the hold was learned as delay");
}
