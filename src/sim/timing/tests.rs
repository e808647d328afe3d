//! Tests of [`super::Timing`]: the LogGP formulas, shared cores and their visits.
use super::*;

fn loggp(l: Time, os: Time, or: Time, g: Time, gk: Time) -> LogGP {
    LogGP { l, os, or, g, gk }
}

#[test]
fn fixed_costs_are_the_loggp_formulas() {
    let mut t = Timing::new(loggp(5, 2, 3, 4, 1));
    let s = t.send(None, 0, 1, 10);
    // o_s + G(k-1) = 3; next = max(3, g=4); arrival = 3 + L.
    assert_eq!(
        s,
        Sent {
            end: 13,
            arrive: 18,
            next: 14
        }
    );
    // Port free at 20: start 20, end 23, next receive not before 20 + max(3, 4).
    assert_eq!(t.receive(None, 0, 1, 18, 20), (23, 24));
    assert_eq!(t.receive_fixed(18, 20), (23, 24));
    assert_eq!(t.receive(None, 0, 1, 18, 0), (21, 22));
}

#[test]
fn a_shared_core_serializes_sends_and_receives() {
    let mut t = Timing::new(loggp(2, 1, 1, 0, 0));
    t.set_cores(4, Some(2));
    assert_eq!((t.core(0), t.core(1), t.core(2)), (Some(0), Some(1), Some(0)));
    t.send(t.core(0), 0, 1, 0);
    assert_eq!(t.core_free(Some(0)), 1);
    // Rank 2's receive arriving at 0 waits for the core.
    assert_eq!(t.receive(t.core(2), 0, 2, 0, 0), (2, 2));
    assert_eq!(t.core_free(Some(0)), 2);
    t.reset(1);
    assert_eq!(t.core_free(Some(0)), 0);
    t.set_cores(4, Some(4));
    assert!(!t.shared_cores());
}

#[test]
fn a_message_between_processes_of_one_core_does_not_pay_l() {
    // 4 processes on 2 cores: ranks 0 and 2 on core 0, 1 and 3 on core 1; L = 5.
    let mut t = Timing::new(loggp(5, 2, 3, 0, 0));
    t.set_cores(4, Some(2));
    let local = t.send(t.core(0), 0, 2, 0);
    assert_eq!((local.end, local.arrive), (2, 2), "there when the send ends");
    let across = t.send(t.core(0), 0, 1, 2);
    assert_eq!((across.end, across.arrive), (4, 9), "L between cores");
    let back = t.send(t.core(3), 3, 1, 9);
    assert_eq!(back.arrive, back.end);
    // Noisy: the same rule with drawn costs (L a constant 5 here, o_s drawn as 2).
    let fixed = loggp(5, 2, 3, 0, 0);
    t.set_noise(Some(Arc::new(Noise::from_json(r#"{"L": 5}"#, fixed).unwrap())));
    let local = t.send(t.core(2), 2, 0, 20);
    assert_eq!((local.end, local.arrive), (22, 22));
    let across = t.send(t.core(2), 2, 3, 22);
    assert_eq!(across.arrive, across.end + 5);
    // A core per process: every message pays L.
    t.set_noise(None);
    t.set_cores(4, None);
    assert_eq!(t.send(t.core(0), 0, 2, 0).arrive, 7);
}

#[test]
fn a_waiting_message_is_taken_when_the_round_reaches_its_process_not_a_round_later() {
    // One core for ranks 0, 1, 2 (indices 0..3), visits of 10, o_r = 3.
    let mut t = Timing::new(loggp(5, 2, 3, 0, 0));
    t.set_cores(3, Some(1));
    t.set_visit(10);
    let c = t.core(0);
    // Rank 0 sends 0..2; a message for rank 2 is there at 1: its turn is foreseen after
    // a visit of rank 1, at 2 + 1 + 10 = 13, and an engine puts the message back until then.
    t.send(c, 0, 1, 0);
    assert_eq!(t.receive_turn(c, 2, 1), 13);
    // Rank 1 had work instead (a receive 3..6): the round reaches rank 2 at 7, not 13.
    assert_eq!(t.receive(c, 0, 1, 3, 0), (6, 6));
    // Asked again at 13, the message has waited since 1: taken now, not a round (30)
    // later, as counted from 13 alone.
    assert_eq!(t.turn(c, 2, 13), 7 + 30);
    assert_eq!(t.receive_turn(c, 2, 13), 13);
    assert_eq!(t.receive(c, 0, 2, 13, 0), (16, 16));
    // Taken: the next message for rank 2 waits from its own arrival, for the round's
    // next pass (ranks 0 and 1 first: 16 + 1 + 2 visits).
    assert_eq!(t.receive_turn(c, 2, 17), 37);
}

#[test]
fn a_visit_with_work_holds_its_core_before_the_core_moves_on() {
    // One core for ranks 0, 1, 2, visits of 10, a visit with work 4 more.
    let mut t = Timing::new(loggp(5, 2, 3, 0, 0));
    t.set_cores(3, Some(1));
    t.set_visit(10);
    t.set_work(4);
    let c = t.core(0);
    // Nobody worked yet: the round from the start, no tail.
    assert_eq!(t.turn(c, 1, 0), 1);
    // Rank 0 sends 0..2: rank 1's turn is after rank 0's tail, 2 + 1 + 4; rank 2's one
    // visit later; rank 0 itself keeps the core (its burst).
    t.send(c, 0, 1, 0);
    assert_eq!(t.turn(c, 1, 0), 7);
    assert_eq!(t.turn(c, 2, 0), 17);
    assert_eq!(t.turn(c, 0, 2), 2);
    // After a reset nobody has worked again.
    t.reset(1);
    assert_eq!(t.turn(c, 1, 0), 1);
    // Without a visit cost there is no round and no tail.
    t.set_visit(0);
    t.send(c, 0, 1, 0);
    assert_eq!(t.turn(c, 1, 0), 2);
}

#[test]
fn a_core_with_a_visit_cost_serves_its_processes_in_turn() {
    // 7 processes on 2 cores: core 0 has ranks 0, 2, 4, 6 (indices 0..4), visits cost 3.
    let mut t = Timing::new(loggp(2, 1, 1, 0, 0));
    t.set_cores(7, Some(2));
    t.set_visit(3);
    assert_eq!(t.visit(), 3);
    // Rank 0 sends at 0 (its core was last at index 0, free at 0: it keeps it).
    assert_eq!(t.turn(t.core(0), 0, 0), 0);
    t.send(t.core(0), 0, 1, 0);
    // Rank 4 (index 2) is reached one visit after the send ends (index 1 first), moving
    // on costing one unit.
    assert_eq!(t.turn(t.core(4), 4, 0), 1 + 1 + 3);
    assert_eq!(t.turn(t.core(4), 4, 5), 5);
    // Ready later than that: the next round (every 4 visits = 12).
    assert_eq!(t.turn(t.core(4), 4, 6), 5 + 12);
    // Rank 0 itself, ready after its send: the core went round (3 visits on).
    assert_eq!(t.turn(t.core(0), 0, 1), 1);
    assert_eq!(t.turn(t.core(0), 0, 2), 1 + 1 + 9);
    // At the instant its send ends the core is still rank 0's: nobody else has it then.
    for r in [2, 4, 6] {
        assert!(t.turn(t.core(r), r, 1) > 1, "rank {r}");
    }
    // A receive by rank 2 (index 1) arriving at 0 starts when the core reaches it, at 2.
    assert_eq!(t.receive(t.core(2), 0, 2, 0, 0), (3, 3));
    // Core 1 (ranks 1, 3, 5, at index 0 since the start) is untouched.
    assert_eq!(t.turn(t.core(3), 3, 0), 1);
    assert_eq!(t.turn(t.core(5), 5, 0), 4);
    // Without a visit cost, only the core's being free counts (today's model).
    t.set_visit(0);
    assert_eq!(t.turn(t.core(4), 4, 0), 3);
    // A burst: back at visits of 3, from the start, rank 0 sends at 0.
    t.set_visit(3);
    t.reset(1);
    t.send(t.core(0), 0, 1, 0);
    // ... for VISIT_BURST sends in a row: then the others are visited first.
    let mut at = 1;
    for _ in 1..VISIT_BURST {
        assert_eq!(t.turn(t.core(0), 0, at), at);
        at = t.send(t.core(0), 0, 1, at).end;
    }
    assert_eq!(t.turn(t.core(0), 0, at), at + 1 + 9, "a round later");
    assert_eq!(t.turn(t.core(2), 2, at), at + 1);
    let end = t.send(t.core(2), 2, 1, at + 1).end;
    // Rank 0 again after rank 2's visit: a fresh burst.
    assert_eq!(t.turn(t.core(0), 0, end), end + 1 + 2 * 3);
    // A process that hands its core on (after a correction message) waits for its turn
    // even at the instant its work ends.
    let end = t.send(t.core(0), 0, 1, end + 1 + 2 * 3).end;
    assert_eq!(t.turn(t.core(0), 0, end), end, "its burst goes on");
    t.hand_on(t.core(0));
    assert_eq!(t.turn(t.core(0), 0, end), end + 1 + 9, "a round later");
    assert_eq!(t.turn(t.core(2), 2, end), end + 1);
}

#[test]
fn a_visit_costs_more_for_each_sender_beyond_the_first_once_learned() {
    // One core for ranks 0, 1, 2 (indices 0..3), visits of 10, o_s = 2; each sender beyond
    // a process's first costs its visits 2.5 units (rounded per process).
    let mut t = Timing::new(loggp(5, 2, 3, 0, 0));
    t.set_cores(3, Some(1));
    t.set_visit(10);
    t.set_poll_per_source(3, 2500);
    let c = t.core(0);
    // Rank 0 sends to 1 (its first sender: nothing more), then to 2.
    t.send(c, 0, 1, 0);
    assert_eq!(t.source_extra(1), 0);
    assert_eq!(t.turn(c, 2, 0), 2 + 1 + 10, "rank 1's visit costs the plain visit");
    // Rank 2 sends to 1 too: rank 1 now has two senders, and its visits cost 2.5 more (3,
    // rounded); rank 2's own turn after it includes that, and so does a round.
    t.send(c, 2, 1, 20);
    assert_eq!(t.source_extra(1), 3);
    assert_eq!((t.source_extra(0), t.source_extra(2)), (0, 0));
    assert_eq!(t.turn(c, 0, 22), 22 + 1);
    assert_eq!(
        t.turn(c, 1, 22),
        22 + 1 + 10 + 3,
        "rank 0's visit, then rank 1's own poll"
    );
    assert_eq!(
        t.turn(c, 1, 40),
        36 + (10 + 10 + 13),
        "a round later: every visit and the extra"
    );
    // A repeated sender changes nothing; after the freeze, a new one does not count.
    t.send(c, 2, 1, 60);
    assert_eq!(t.source_extra(1), 3);
    t.freeze_sources();
    t.send(c, 1, 0, 80);
    t.send(c, 2, 0, 90);
    assert_eq!(t.source_extra(0), 0, "learned no more");
    // A reset (the next run) keeps what was learned: the rings stay.
    t.reset(2);
    assert_eq!(t.source_extra(1), 3);
    // Without shared cores nothing is kept.
    t.set_cores(3, None);
    t.set_poll_per_source(3, 2500);
    t.send(None, 0, 1, 0);
    t.send(None, 2, 1, 0);
    assert_eq!(t.source_extra(1), 0);
}

#[test]
fn messages_within_a_core_cost_what_one_cores_hop_measured() {
    // Ranks 0, 2 on core 0 and 1, 3 on core 1; L = 5, o_s = 2, o_r = 3; visits of 10,
    // a visit with work 4 more, or 1 more after receiving from its own core only, whose
    // receive from the same core costs 2.
    let mut t = Timing::new(loggp(5, 2, 3, 0, 0));
    t.set_cores(4, Some(2));
    t.set_visit(10);
    t.set_work(4);
    t.set_local(Some(1), Some(2));
    let c0 = t.core(0);
    // Rank 0 sends to rank 2 (there at 2): its visit only sent, so the core moves on to
    // rank 2 at once (one unit) and the receive takes 2.
    let s = t.send(c0, 0, 2, 0);
    assert_eq!(s.arrive, 2);
    assert_eq!(t.receive_turn(c0, 2, 2), 2 + 1);
    assert_eq!(t.receive(c0, 0, 2, 2, 0), (5, 5));
    // Rank 2's visit received from its own core only: rank 0's turn after 1 more.
    assert_eq!(t.turn(c0, 0, 6), 5 + 1 + 1);
    // A message from rank 1 (core 1) to rank 0: o_r, and the visit then owes 4.
    assert_eq!(t.receive(c0, 1, 0, 7, 0), (10, 10));
    assert_eq!(t.turn(c0, 2, 10), 10 + 1 + 4);
    // A send after it in the same visit keeps that charge.
    let end = t.send(c0, 0, 3, 10).end;
    assert_eq!(t.turn(c0, 2, end), end + 1 + 4);
    // Unset: every receive costs o_r and every visit with work owes `work` (as before).
    t.set_local(None, None);
    t.reset(1);
    t.send(c0, 0, 2, 0);
    assert_eq!(t.receive(c0, 0, 2, 2, 0), (2 + 1 + 4 + 3, 2 + 1 + 4 + 3));
}
