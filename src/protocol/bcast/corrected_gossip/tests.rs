use super::*;
use crate::model::LogP;
use crate::protocol::bcast::correction::FAILPROOF_CAP;
use crate::sim::{DeadBefore, Engine, Faults, RunStats};

fn run(n: u32, logp: LogP, t: Time, v: Variant, faults: &Faults, seed: u64) -> RunStats {
    let shared = GossipShared::new(n, logp, t, v);
    let s = match v {
        Variant::Fcg { .. } => {
            Engine::<CorrectedGossip<FAILPROOF_CAP>>::new(n, logp).run(&shared, faults, seed, 50_000_000)
        }
        _ => Engine::<CorrectedGossip<0>>::new(n, logp).run(&shared, faults, seed, 50_000_000),
    };
    assert!(!s.aborted, "n={n} {v:?} T={t} seed={seed}: aborted at the event cap");
    s
}

fn dead(k: u32) -> Faults {
    Faults {
        before: DeadBefore::Count(k),
        ..Faults::default()
    }
}

const UNIT: LogP = LogP { l: 1, o: 1 };

#[test]
fn gossip_stops_at_t_and_correction_starts_at_t_plus_l_plus_o() {
    for seed in 0..20 {
        let s = run(1024, UNIT, 20, Variant::Gos, &dead(0), seed);
        // Only g-nodes send, one per O before T: at most 20 from the root.
        assert!(s.max_messages_per_process <= 20);
        assert_eq!(s.correction, 0, "GOS has no correction");
        // Virtual time may lag real time by receive queueing (several gossip messages
        // arriving together), so the last receive can come a few O after T + L + O.
        assert!(s.quiescence <= 20 + 2 + 6, "quiescence {}", s.quiescence);
    }
}

#[test]
fn ccg_colors_every_live_process_with_faults_before() {
    for seed in 0..50 {
        let s = run(1024, UNIT, 25, Variant::Ccg, &dead(seed as u32 * 3), seed);
        assert_eq!(s.uncolored_live, 0, "seed {seed}");
        assert!(!s.aborted);
    }
    // Even with a tiny T (few g-nodes, long gaps).
    let s = run(1024, UNIT, 3, Variant::Ccg, &dead(0), 1);
    assert_eq!(s.uncolored_live, 0);
}

#[test]
fn fcg_survives_up_to_f_online_failures() {
    let logp = LogP { l: 2, o: 1 };
    for f in [1u32, 2] {
        for seed in 0..40 {
            let faults = Faults {
                before: DeadBefore::Count(3),
                online: f,
                online_horizon: 60,
                ..Faults::default()
            };
            let s = run(1024, logp, 24, Variant::Fcg { f }, &faults, seed);
            assert_eq!(s.uncolored_live, 0, "f={f} seed={seed}");
            assert!(!s.aborted, "no SOS flood expected");
        }
    }
}

#[test]
fn fcg_sos_still_colors_everyone_when_gossip_reaches_nobody() {
    // T = 0: only the root is a g-node; with f = 1 it never finds f + 1 g-nodes: SOS.
    let s = run(64, UNIT, 0, Variant::Fcg { f: 1 }, &dead(0), 0);
    assert_eq!(s.uncolored_live, 0);
    assert!(!s.aborted, "SOS must terminate");
    assert!(s.messages >= 63 * 63, "SOS floods: {}", s.messages);
}

/// SOS sends of each rank in a traced run, in order: (time, target).
fn sos_sends(rows: &[crate::sim::TraceRow], r: Rank) -> Vec<(Time, Rank)> {
    rows.iter()
        .filter(|x| x.node == r && x.event == "send" && x.label == "sos")
        .map(|x| (x.time, x.peer))
        .collect()
}

#[test]
fn fcg_sos_floods_once_per_process_and_terminates() {
    // Corollary 2: every process that receives a message terminates. With T = 0 (N = 16)
    // or a tiny T, fewer than f + 1 g-nodes exist: the root (or a c-node's timeout)
    // starts SOS, every process floods once (Alg. 3 line 9: to all others) and stops.
    for (n, t, faults, seed) in [
        (16, 0, dead(0), 0),
        (64, 0, dead(0), 1),
        (64, 2, dead(5), 2),
        (40, 0, dead(3), 3),
    ] {
        let shared = GossipShared::new(n, UNIT, t, Variant::Fcg { f: 1 });
        let mut e = Engine::<CorrectedGossip<FAILPROOF_CAP>>::new(n, UNIT);
        e.trace = Some(Vec::new());
        let s = e.run(&shared, &faults, seed, 10_000_000);
        assert!(!s.aborted, "n={n} T={t}: run aborted after {} messages", s.messages);
        assert_eq!(s.uncolored_live, 0);
        let rows = e.trace.take().unwrap();
        let mut flooded = 0u64;
        for r in 0..n {
            let sos = sos_sends(&rows, r);
            let mut targets: Vec<Rank> = sos.iter().map(|x| x.1).collect();
            targets.sort_unstable();
            targets.dedup();
            // At most one flood: at most N - 1 SOS messages, to distinct targets.
            assert!(sos.len() < n as usize, "rank {r} sent {} SOS messages", sos.len());
            assert_eq!(targets.len(), sos.len(), "rank {r} repeated an SOS target");
            if !sos.is_empty() {
                assert_eq!(sos.len(), n as usize - 1, "rank {r}: a flood goes to all others");
                flooded += 1;
            }
            let cx = Ctx {
                rank: r,
                n,
                now: s.quiescence,
                shared: &shared,
            };
            if e.death_time(r) == Time::MAX {
                assert!(e.node(r).finished(&cx), "rank {r} not finished at the end");
            }
        }
        assert!(flooded > 0, "n={n} T={t}: SOS expected");
        // Each process: at most one flood, plus a g-node's correction loop (< 2N + 2).
        assert!(
            s.max_messages_per_process <= 3 * n + 2,
            "n={n}: {} messages from one process",
            s.max_messages_per_process
        );
        assert!(
            s.messages <= u64::from(n) * u64::from(n - 1) + 3 * u64::from(n),
            "{}",
            s.messages
        );
    }
}

#[test]
fn fcg_sos_process_delivers_after_its_flood_and_is_not_finished_before() {
    // Claim 4's proof: a node returning from SOS "would have sent to all nodes before
    // delivering". A process reached only by SOS owes a flood: not finished until done.
    let n = 8;
    let p = GossipShared::new(n, UNIT, 0, Variant::Fcg { f: 1 }).corr;
    let mut c = Corrector::<FAILPROOF_CAP>::new();
    let sos = CorrMsg {
        dir: Dir::Fwd,
        kind: crate::protocol::bcast::correction::CorrKind::Sos,
        known: Default::default(),
    };
    c.on_message(&p, 3, n, 10, 0, &sos);
    let mut sent = Vec::new();
    while let Action::Send { to, msg } = c.poll(&p, 3, n) {
        assert_eq!(msg.kind, sos.kind);
        assert!(!c.delivered(), "delivered before its flood ended");
        assert!(!c.finished(), "finished while SOS sends are owed");
        sent.push(to);
        assert!(sent.len() < n as usize, "flood does not end");
    }
    assert_eq!(sent, vec![0, 1, 2, 4, 5, 6, 7]);
    assert!(c.delivered() && c.finished());
    // A later SOS message starts no second flood.
    c.on_message(&p, 3, n, 30, 5, &sos);
    assert!(c.finished());
    assert_eq!(c.poll(&p, 3, n), Action::Wait);
}

#[test]
fn fcg_known_lists_freeze_once_the_final_round_starts() {
    // Alg. 3 line 21: k_t is updated only while !f_t. Appendix B: a g-node enters the
    // final round on learning f + 1 g-nodes on a side (task 1's "reset ... by learning
    // about f + 1 = 2 other g-nodes"); from then on that side's list is frozen, and the
    // final round covers exactly the f + 1 g-nodes it announced (Lemma 2).
    use crate::protocol::bcast::correction::{CorrKind, Known};
    let (n, me) = (32, 10);
    let p = GossipShared::new(n, UNIT, 0, Variant::Fcg { f: 1 }).corr;
    let mut c = Corrector::<FAILPROOF_CAP>::new();
    c.colored_by_dissemination();
    c.start(&p, n, 0);
    let msg = |dir, known: &[Rank]| CorrMsg {
        dir,
        kind: CorrKind::Normal,
        known: Known::from_slice(known).unwrap(),
    };
    // From behind: 8 (knowing nothing behind it), then 6 (knowing 5): behind = [8, 6].
    c.on_message(&p, me, n, 3, 8, &msg(Dir::Fwd, &[8]));
    c.on_message(&p, me, n, 4, 6, &msg(Dir::Fwd, &[6, 5]));
    // A nearer g-node behind reported after the final round started: ignored.
    c.on_message(&p, me, n, 5, 9, &msg(Dir::Fwd, &[9]));
    // From ahead: 11 and 13.
    c.on_message(&p, me, n, 6, 11, &msg(Dir::Bwd, &[11, 13]));
    let mut final_bwd = Vec::new();
    for _ in 0..4 * n {
        match c.poll(&p, me, n) {
            Action::Send { to, msg } if msg.kind == CorrKind::Final && msg.dir == Dir::Bwd => final_bwd.push(to),
            Action::Wait => break,
            _ => {}
        }
    }
    assert!(c.finished());
    // Final backward messages up to the frozen second g-node behind (6), not up to 8.
    assert_eq!(final_bwd, vec![9, 8, 7, 6]);
}

fn run_with(n: u32, t: Time, v: Variant, recv: crate::sim::Receives, seed: u64) -> RunStats {
    let shared = GossipShared::new(n, UNIT, t, v);
    let mut e = Engine::<CorrectedGossip<0>>::new(n, UNIT);
    e.receives = recv;
    e.run(&shared, &dead(0), seed, 50_000_000)
}

#[test]
fn parallel_receives_follow_lemma_1_timing_and_eq_4() {
    use crate::sim::Receives;
    // Lemma 1's timing: every message lands o + L + o after its send starts, so GOS is
    // quiet at T + L + O exactly; with LogP's receive queue late copies pile up.
    let (mut queued_late, t) = (0, 24);
    for seed in 0..20 {
        let p = run_with(1024, t, Variant::Gos, Receives::Parallel, seed);
        assert!(!p.aborted);
        assert_eq!(p.quiescence, t + 2, "seed {seed}");
        let q = run_with(1024, t, Variant::Gos, Receives::Queued, seed);
        assert!(!q.aborted);
        queued_late += u32::from(q.quiescence > t + 2);
    }
    assert!(queued_late > 10, "queued receives should lag: {queued_late}/20");
    // CG Fig. 5 (N = 1024, L = O = 1): the paper sees the simulated maximum within two
    // steps of eq. (4). Model: T = 25 → 35, T = 30 → 36.
    for (t, model) in [(25, 35), (30, 36)] {
        let (mut par, mut que) = (0, 0);
        for seed in 0..100 {
            let p = run_with(1024, t, Variant::Ccg, Receives::Parallel, seed);
            let q = run_with(1024, t, Variant::Ccg, Receives::Queued, seed);
            assert!(!p.aborted && !q.aborted);
            assert_eq!(p.uncolored_live + q.uncolored_live, 0);
            par = par.max(p.quiescence);
            que = que.max(q.quiescence);
        }
        assert!(par.abs_diff(model) <= 2, "T={t}: parallel max {par}, model {model}");
        assert!(que > model + 4, "T={t}: queued max {que}, model {model}");
    }
}

#[test]
fn ocg_splits_its_sends_forward_first() {
    // Algorithm 1: S = (C - L - O)/O alternating sends starting forward: ⌈S/2⌉ forward,
    // ⌊S/2⌋ backward. T = 0 leaves the root the only g-node.
    for (c, fwd, bwd) in [
        (7u64, vec![1, 2, 3], vec![63, 62]),
        (6, vec![1, 2], vec![63, 62]),
        (3, vec![1], vec![]),
    ] {
        let shared = GossipShared::new(64, UNIT, 0, Variant::Ocg { c });
        let mut e = Engine::<CorrectedGossip<0>>::new(64, UNIT);
        e.trace = Some(Vec::new());
        let s = e.run(&shared, &dead(0), 0, 1_000_000);
        assert!(!s.aborted);
        let rows = e.trace.take().unwrap();
        let sent = |label: &str| -> Vec<Rank> {
            rows.iter()
                .filter(|x| x.node == 0 && x.event == "send" && x.label == label)
                .map(|x| x.peer)
                .collect()
        };
        assert_eq!((sent("corr>"), sent("corr<")), (fwd, bwd), "C = {c}");
    }
}

#[test]
fn ocg_with_model_c_mostly_colors_all_and_gos_often_does_not() {
    let (mut ocg_bad, mut gos_bad) = (0, 0);
    for seed in 0..200 {
        ocg_bad += u32::from(run(1024, UNIT, 24, Variant::Ocg { c: 12 }, &dead(0), seed).uncolored_live > 0);
        gos_bad += u32::from(run(1024, UNIT, 24, Variant::Gos, &dead(0), seed).uncolored_live > 0);
    }
    assert!(ocg_bad <= 2, "OCG inconsistent in {ocg_bad}/200 runs");
    assert!(gos_bad > 100, "GOS at T=24 misses nodes in most runs: {gos_bad}/200");
}

#[test]
fn ccg_counts_are_plausible_fault_free() {
    // Figure 5 neighbourhood: N = 1024, L = O = 1, T = 25: latency near T + 2L + 2O + 2K̂O.
    let mut worst = 0;
    for seed in 0..100 {
        let s = run(1024, UNIT, 25, Variant::Ccg, &dead(0), seed);
        assert_eq!(s.uncolored_live, 0);
        worst = worst.max(s.quiescence);
    }
    assert!((30..=60).contains(&worst), "worst CCG latency {worst}");
}

/// The bound of `ccg_counts_are_plausible_fault_free` tightened to what eq. (4) says on the
/// same inputs (N = n = 1024, L = O = 1, T = 25) under the receive model eq. (4) assumes
/// (every message lands `o + L + o` after its send, [`crate::sim::Receives::Parallel`]):
/// every run at least the correction-free `T + 2L + 2O`, the worst at most
/// `T + 2L + (2 + 2K̂)O` plus the paper's "within 2 steps".
#[test]
fn ccg_latency_agrees_with_eq4_within_two_steps() {
    let t = 25;
    let k = crate::model::k_hat(crate::model::DEFAULT_DELTA, 1024, 1024, t, UNIT).unwrap();
    let model = t + 2 * UNIT.l + (2 + 2 * k) * UNIT.o;
    let floor = t + 2 * UNIT.l + 2 * UNIT.o;
    let mut worst = 0;
    for seed in 0..100 {
        let s = run_with(1024, t, Variant::Ccg, crate::sim::Receives::Parallel, seed);
        assert_eq!(s.uncolored_live, 0);
        assert!(s.quiescence >= floor, "seed {seed}: {} < {floor}", s.quiescence);
        worst = worst.max(s.quiescence);
    }
    assert!(
        worst <= model + 2,
        "worst CCG latency {worst}, eq. (4) {model} (K̂ = {k})"
    );
}

/// GOS's quiescence bound (`<= 28` above) tightened to Lemma 1's model
/// ([`crate::model::gos_colored_fraction`]: gossip sent before `T` has drained at
/// `T + L + O`), under the receive model Lemma 1 assumes ([`crate::sim::Receives::Parallel`]).
#[test]
fn gos_quiescence_is_the_models_t_plus_l_plus_o() {
    let t = 20;
    for seed in 0..20 {
        let s = run_with(1024, t, Variant::Gos, crate::sim::Receives::Parallel, seed);
        assert!(!s.aborted);
        assert!(
            s.quiescence <= t + UNIT.l + UNIT.o,
            "seed {seed}: quiescence {} > T + L + O",
            s.quiescence
        );
    }
}
