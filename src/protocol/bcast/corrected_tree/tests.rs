use super::*;
use crate::model::LogP;
use crate::protocol::ProtoRng;
use crate::protocol::bcast::correction::FAILPROOF_CAP;
use crate::sim::{DeadBefore, Engine, Faults, RunStats};
use crate::topology::{Order, TreeKind, ring};

#[allow(clippy::too_many_arguments)]
fn run(
    kind: TreeKind,
    order: Order,
    n: u32,
    logp: LogP,
    c: Correction,
    start: Start,
    faults: &Faults,
    seed: u64,
) -> RunStats {
    let tree = Tree::build(kind, order, n, logp).unwrap();
    let shared = TreeShared::new(tree, logp, c, start);
    let s = match c {
        Correction::FailProof { .. } => {
            Engine::<CorrectedTree<FAILPROOF_CAP>>::new(n, logp).run(&shared, faults, seed, 100_000_000)
        }
        _ => Engine::<CorrectedTree<0>>::new(n, logp).run(&shared, faults, seed, 100_000_000),
    };
    assert!(!s.aborted, "n={n} {c:?} seed={seed}: aborted at the event cap");
    s
}

fn dead(k: u32) -> Faults {
    Faults {
        before: DeadBefore::Count(k),
        ..Faults::default()
    }
}

/// The counter-example to a skip rule applied to both sides: with the rule of §3.3
/// ("i receives from j, j − d < i < j": a message from the right only) every live process
/// within d of a participant is covered, so this run colors everyone, as plain
/// opportunistic correction does. Applied symmetrically, 115's and 117's neighbours relied
/// on each other and rank 116 stayed uncolored.
#[test]
fn optimized_skip_rule_is_one_sided_issue14_counterexample() {
    let logp = LogP { l: 2, o: 1 };
    let dead = vec![4, 18, 23, 24, 30, 42, 47, 54, 58, 66, 68, 72, 87, 95, 102, 115, 117];
    let faults = Faults {
        before: DeadBefore::List(dead),
        ..Faults::default()
    };
    for start in [Start::Synchronized, Start::Overlapped] {
        for c in [Correction::Opportunistic { d: 4 }, Correction::Optimized { d: 4 }] {
            let s = run(TreeKind::Binomial, Order::Interleaved, 128, logp, c, start, &faults, 1);
            assert_eq!(s.uncolored_live, 0, "{c:?} {start:?}: {s:?}");
        }
    }
}

/// What one run did, per process.
struct Outcome {
    alive: Vec<bool>,
    colored: Vec<bool>,
    participant: Vec<bool>,
    stats: RunStats,
}

fn outcome(tree: &Tree, logp: LogP, c: Correction, start: Start, faults: &Faults, seed: u64) -> Outcome {
    let n = tree.len();
    let shared = TreeShared::new(tree.clone(), logp, c, start);
    let mut eng = Engine::<CorrectedTree<0>>::new(n, logp);
    let stats = eng.run(&shared, faults, seed, 100_000_000);
    let alive: Vec<bool> = (0..n).map(|r| eng.death_time(r) == Time::MAX).collect();
    let colored = (0..n).map(|r| alive[r as usize] && eng.node(r).delivered()).collect();
    let participant = (0..n)
        .map(|r| alive[r as usize] && eng.node(r).colored_by_dissemination())
        .collect();
    Outcome {
        alive,
        colored,
        participant,
        stats,
    }
}

/// The processes opportunistic correction with distance `d` must color given who
/// participated: the participants, every live process within ring distance `d` of one and,
/// with the overlapped start (early-corrected processes forward the tree, §3.3), every live
/// descendant of a colored process along live tree edges.
fn implied(tree: &Tree, d: u32, start: Start, o: &Outcome) -> Vec<bool> {
    let n = tree.len();
    let d = d.min(n - 1);
    let mut c = vec![false; n as usize];
    for r in (0..n).filter(|&r| o.participant[r as usize]) {
        c[r as usize] = true;
        for off in 1..=d {
            for x in [ring::forward(r, off, n), ring::backward(r, off, n)] {
                c[x as usize] |= o.alive[x as usize];
            }
        }
    }
    if start == Start::Overlapped {
        // Children outrank their parents: one pass in rank order is the closure.
        for r in 0..n {
            if c[r as usize] {
                for &ch in tree.children(r) {
                    c[ch as usize] |= o.alive[ch as usize];
                }
            }
        }
    }
    c
}

/// The differential property of optimized against plain opportunistic correction, stated as precisely as it holds.
///
/// **Exact, for any fault set:**
/// 1. *Every run colors exactly what its participants imply* ([`implied`]): each live process
///    within `d` of a participant and, overlapped, each live process below a colored one.
///    For optimized correction this is the soundness of §3.3's skip rule (a skipped target
///    is always sent to by a participant further right, see `Correction::Optimized`); the
///    symmetric rule broke it (rank 116 of the pinned counter-example).
/// 2. *Synchronized start: optimized colors exactly the processes plain opportunistic
///    colors*, with no more messages: the participants are the processes the tree reaches,
///    the same in both, and by 1. the colored sets are then equal.
/// 3. *Overlapped start: optimized colors every process plain colors whenever every plain
///    participant is an optimized participant too* (1. is monotone in the participants).
///
/// **Not exact:** "optimized never colors fewer" does not hold for the overlapped start by
/// the paper's own rules, however correct the skip rule. Skipping brings a participant's
/// farther sends forward in time, so a process can be reached by correction before its
/// tree message under optimized and after it under plain; early-corrected, it is a c-node
/// (§3.1) and its own `d` neighbours lose its messages. The reverse happens too (a process
/// early-corrected under plain participates under optimized).
/// [`optimized_can_color_fewer_when_early_correction_silences_a_participant`] pins a small
/// case (36 processes, 10 dead); at realistic rates it is rare: of the 40 000 fault sets
/// of [`differential_optimized_vs_opportunistic_large`] (rates up to 5 %, P up to 16K) the
/// colorings differ in 2, and optimized colors fewer processes in 1; in the 1 500 of the
/// default test they never differ. So, besides 1.–3., the test bounds how often optimized
/// colors fewer: at most one fault set in 1 000.
fn differential(cases: u32, max_n: u32, seed: u64) {
    let logp = LogP { l: 2, o: 1 };
    let kinds = [
        TreeKind::Binomial,
        TreeKind::Lame(2),
        TreeKind::Optimal,
        TreeKind::Kary(2),
        TreeKind::Kary(4),
    ];
    let mut rng = ProtoRng::new(seed);
    let (mut differ, mut fewer) = (0u32, 0u32);
    for case in 0..cases {
        // Sizes log-uniform in 16..=max_n, rates uniform in 0..=5 %.
        let lg = 4 + rng.below(max_n.ilog2() - 3);
        let n = ((1u32 << lg) + rng.below(1 << lg)).clamp(16, max_n);
        let rate = f64::from(rng.below(5001)) / 100_000.0;
        let dead = ((rate * f64::from(n)).round() as u32).min(n - 1);
        let kind = kinds[rng.below(kinds.len() as u32) as usize];
        let d = [1u32, 2, 3, 4, 8][rng.below(5) as usize];
        let start = if rng.below(2) == 0 {
            Start::Synchronized
        } else {
            Start::Overlapped
        };
        let run_seed = rng.next_u64();
        let tree = Tree::build(kind, Order::Interleaved, n, logp).unwrap();
        let faults = dead_faults(dead);
        let what = format!("case {case}: n={n} dead={dead} {kind:?} d={d} {start:?} seed={run_seed}");
        let plain = outcome(&tree, logp, Correction::Opportunistic { d }, start, &faults, run_seed);
        let opt = outcome(&tree, logp, Correction::Optimized { d }, start, &faults, run_seed);
        for (name, o) in [("opportunistic", &plain), ("optimized", &opt)] {
            assert_eq!(o.colored, implied(&tree, d, start, o), "{name} {what}");
            let uncolored = (0..n as usize).filter(|&r| o.alive[r] && !o.colored[r]).count();
            assert_eq!(o.stats.uncolored_live as usize, uncolored, "{name} {what}");
        }
        let count = |o: &Outcome| o.colored.iter().filter(|&&c| c).count();
        if start == Start::Synchronized {
            assert_eq!(opt.participant, plain.participant, "{what}");
            assert_eq!(opt.colored, plain.colored, "{what}");
            assert!(opt.stats.messages <= plain.stats.messages, "{what}");
        } else if (0..n as usize).all(|r| !plain.participant[r] || opt.participant[r]) {
            assert!((0..n as usize).all(|r| !plain.colored[r] || opt.colored[r]), "{what}");
        }
        differ += u32::from(opt.colored != plain.colored);
        if count(&opt) < count(&plain) {
            fewer += 1;
            eprintln!("optimized colors fewer: {what}");
        }
    }
    eprintln!("{cases} fault sets: colorings differ in {differ}, optimized colors fewer in {fewer}");
    assert!(
        fewer <= cases.div_ceil(1000),
        "optimized colored fewer processes than opportunistic in {fewer} of {cases} fault sets ({differ} differ)"
    );
}

fn dead_faults(k: u32) -> Faults {
    Faults {
        before: DeadBefore::Count(k),
        ..Faults::default()
    }
}

/// The property over random fault sets: see [`differential`]. Seconds.
#[test]
fn differential_optimized_vs_opportunistic() {
    differential(1500, 16384, 14);
}

/// The same over more fault sets (`cargo test --release -- --ignored
/// differential_optimized_vs_opportunistic_large`; about four minutes, one core).
#[test]
#[ignore = "large: run with --release --ignored"]
fn differential_optimized_vs_opportunistic_large() {
    differential(40_000, 16384, 1414);
}

/// Why "optimized never colors fewer" is not exact with the overlapped start. P = 36, Lamé
/// tree (k = 2), d = 3, ten dead. Participant 34 hears from 0 (distance 2 to its right,
/// across the ring's end) at t = 14: by §3.3 it sends nothing more to the right, so its
/// message to 31 (left offset 3) leaves at 14 instead of 15 and reaches 31 at 18, one step
/// before 31's tree message (from 10, at 19). Plain: 31 gets its tree message first,
/// participates and colors 29 and 30. Optimized: 31 is a c-node and sends no correction
/// (§3.1); 29 and 30 have no other participant within 3 (28 was itself reached by correction
/// before its tree message) and stay uncolored. Synchronized, both color alike.
#[test]
fn optimized_can_color_fewer_when_early_correction_silences_a_participant() {
    let logp = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Lame(2), Order::Interleaved, 36, logp).unwrap();
    let faults = Faults {
        before: DeadBefore::List(vec![2, 5, 6, 8, 9, 13, 22, 26, 32, 33]),
        ..Faults::default()
    };
    let (plain, opt) = (Correction::Opportunistic { d: 3 }, Correction::Optimized { d: 3 });
    let p = outcome(&tree, logp, plain, Start::Overlapped, &faults, 1);
    let o = outcome(&tree, logp, opt, Start::Overlapped, &faults, 1);
    assert_eq!(p.stats.uncolored_live, 0);
    assert!(p.participant[31] && !o.participant[31] && o.colored[31] && !o.participant[28]);
    let uncolored: Vec<usize> = (0..36).filter(|&r| o.alive[r] && !o.colored[r]).collect();
    assert_eq!(uncolored, [29, 30]);
    let sync = |c| outcome(&tree, logp, c, Start::Synchronized, &faults, 1).colored;
    assert_eq!(sync(plain), sync(opt));
}

/// §3.3 "After receiving an early correction, a process still sends tree messages to its
/// children", also when its parent is dead, and §3.1 "processes that become colored during
/// correction do not send any messages": with the overlapped start a c-node sends exactly
/// one tree message to each child and no correction message; with the synchronized start
/// (no correction message can precede a tree message) it sends nothing. For every
/// correction kind whose c-nodes deliver at once; checked correction still colors everyone.
#[test]
fn early_corrected_processes_forward_the_tree_and_send_no_correction() {
    let logp = LogP { l: 2, o: 1 };
    let n = 4096;
    let kinds = [
        Correction::Opportunistic { d: 4 },
        Correction::Optimized { d: 4 },
        Correction::Checked,
        Correction::Delayed { delay: None },
    ];
    for kind in [TreeKind::Binomial, TreeKind::Optimal, TreeKind::Kary(4)] {
        let tree = Tree::build(kind, Order::Interleaved, n, logp).unwrap();
        for c in kinds {
            for start in [Start::Synchronized, Start::Overlapped] {
                let mut orphans_forwarding = 0;
                for seed in 0..3 {
                    let shared = TreeShared::new(tree.clone(), logp, c, start);
                    let mut eng = Engine::<CorrectedTree<0>>::new(n, logp);
                    eng.trace = Some(Vec::new());
                    let st = eng.run(&shared, &dead(164), seed, 100_000_000);
                    let trace = eng.trace.take().unwrap();
                    let mut sent: Vec<Vec<(Rank, &str)>> = vec![Vec::new(); n as usize];
                    for row in trace.iter().filter(|r| r.event == "send") {
                        sent[row.node as usize].push((row.peer, row.label));
                    }
                    for r in 0..n {
                        let p = eng.node(r);
                        if eng.death_time(r) != Time::MAX || !p.delivered() || p.colored_by_dissemination() {
                            continue;
                        }
                        let what = format!("{kind:?} {c:?} {start:?} seed {seed}: c-node {r}");
                        let expect: Vec<(Rank, &str)> = match start {
                            Start::Overlapped => tree.children(r).iter().map(|&ch| (ch, "tree")).collect(),
                            Start::Synchronized => Vec::new(),
                        };
                        assert_eq!(sent[r as usize], expect, "{what}");
                        let parent = tree.parent(r).unwrap();
                        if eng.death_time(parent) != Time::MAX && !tree.children(r).is_empty() {
                            orphans_forwarding += 1;
                        }
                    }
                    if c == Correction::Checked {
                        assert_eq!(st.uncolored_live, 0, "{kind:?} {start:?} seed {seed}");
                    }
                }
                if start == Start::Overlapped {
                    assert!(orphans_forwarding > 0, "{kind:?} {c:?}: no orphan forwarded");
                }
            }
        }
    }
}

/// Every participant's first correction message goes left (see `TreeShared::new`); with
/// the overlapped start some processes are early-corrected even fault-free and send none.
#[test]
fn first_correction_message_goes_left() {
    let logp = LogP { l: 2, o: 1 };
    for c in [
        Correction::Opportunistic { d: 2 },
        Correction::Optimized { d: 2 },
        Correction::Checked,
    ] {
        for start in [Start::Synchronized, Start::Overlapped] {
            let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, 64, logp).unwrap();
            let shared = TreeShared::new(tree, logp, c, start);
            let mut eng = Engine::<CorrectedTree<0>>::new(64, logp);
            eng.trace = Some(Vec::new());
            eng.run(&shared, &dead(0), 0, 1_000_000);
            let trace = eng.trace.take().unwrap();
            for r in (0..64).filter(|&r| eng.node(r).colored_by_dissemination()) {
                let label = trace
                    .iter()
                    .find(|t| t.node == r && t.event == "send" && t.label != "tree")
                    .map(|t| t.label);
                assert_eq!(label, Some("corr<"), "{c:?} {start:?} rank {r}");
            }
        }
    }
}

/// CT §4.1: "Optimized opportunistic correction sends at most as many messages as checked
/// correction" (fault-free, d = 4, L = 2, o = 1), with either start, on every tree of the
/// paper. Holds because the first message goes left (see `TreeShared::new`).
#[test]
fn optimized_sends_at_most_as_many_as_checked_fault_free() {
    let logp = LogP { l: 2, o: 1 };
    for kind in [
        TreeKind::Binomial,
        TreeKind::Lame(2),
        TreeKind::Optimal,
        TreeKind::Kary(4),
    ] {
        for n in [1024, 16384] {
            let checked = run(
                kind,
                Order::Interleaved,
                n,
                logp,
                Correction::Checked,
                Start::Synchronized,
                &dead(0),
                0,
            );
            for start in [Start::Synchronized, Start::Overlapped] {
                let s = run(
                    kind,
                    Order::Interleaved,
                    n,
                    logp,
                    Correction::Optimized { d: 4 },
                    start,
                    &dead(0),
                    0,
                );
                assert_eq!(s.uncolored_live, 0);
                assert!(
                    s.messages <= checked.messages,
                    "{kind:?} n={n} {start:?}: {} > {}",
                    s.messages,
                    checked.messages
                );
            }
        }
    }
}

const TREES: [TreeKind; 5] = [
    TreeKind::Binomial,
    TreeKind::Lame(2),
    TreeKind::Optimal,
    TreeKind::Kary(2),
    TreeKind::Kary(4),
];

/// Corrected Trees Lemma 2 and Corollary 1, exactly, for L divisible by o.
#[test]
fn lemma2_and_corollary1_fault_free_synchronized_checked() {
    for (l, o) in [(1, 1), (2, 1), (3, 1), (5, 1), (4, 2), (6, 3), (0, 1)] {
        let logp = LogP { l, o };
        let lff = 4 * o + l + (l / o) * o;
        let mscc = 3 + l / o;
        for kind in TREES {
            for n in [16, 1000, 4096] {
                let s = run(
                    kind,
                    Order::Interleaved,
                    n,
                    logp,
                    Correction::Checked,
                    Start::Synchronized,
                    &dead(0),
                    1,
                );
                let d = Tree::build(kind, Order::Interleaved, n, logp)
                    .unwrap()
                    .dissemination_latency(logp);
                assert_eq!(s.uncolored_live, 0);
                assert_eq!(s.coloring, d, "{kind:?} n={n} L={l} o={o}");
                assert_eq!(s.correction, lff, "{kind:?} n={n} L={l} o={o}");
                assert_eq!(s.quiescence, d + lff);
                assert_eq!(
                    s.messages - u64::from(n - 1),
                    u64::from(n) * mscc,
                    "{kind:?} n={n} L={l} o={o}"
                );
                assert_eq!(s.gmax, 0);
            }
        }
    }
}

/// Lemma 3: L_FF + g_max·o <= L_SCC <= L_FF + (2·g_max + 1)·o, and every live process is
/// colored, whatever the faults before the operation.
#[test]
fn lemma3_bounds_and_full_coloring_under_faults() {
    let logp = LogP { l: 2, o: 1 };
    let lff = 8;
    for kind in TREES {
        for seed in 0..40 {
            let s = run(
                kind,
                Order::Interleaved,
                4096,
                logp,
                Correction::Checked,
                Start::Synchronized,
                &dead(41 + seed as u32),
                seed,
            );
            assert_eq!(s.uncolored_live, 0, "{kind:?} seed {seed}");
            let g = u64::from(s.gmax);
            assert!(s.correction >= lff + g * logp.o, "{kind:?} seed {seed}: {s:?}");
            assert!(
                s.correction <= lff + (2 * g + 1) * logp.o,
                "{kind:?} seed {seed}: {s:?}"
            );
        }
    }
}

#[test]
fn checked_correction_colors_everyone_with_many_faults_in_any_mode() {
    let logp = LogP { l: 2, o: 1 };
    for order in [Order::Interleaved, Order::InOrder] {
        for start in [Start::Synchronized, Start::Overlapped] {
            for seed in 0..20 {
                let s = run(
                    TreeKind::Binomial,
                    order,
                    2000,
                    logp,
                    Correction::Checked,
                    start,
                    &dead(200),
                    seed,
                );
                assert_eq!(s.uncolored_live, 0, "{order:?} {start:?} seed {seed}");
            }
        }
    }
}

/// §3.2.1: opportunistic correction with d >= k on a k-ary tree tolerates k - 1 failures.
#[test]
fn kary_opportunistic_tolerates_k_minus_one_failures() {
    let logp = LogP { l: 2, o: 1 };
    for k in [2u32, 3, 4] {
        for seed in 0..200 {
            for start in [Start::Synchronized, Start::Overlapped] {
                let s = run(
                    TreeKind::Kary(k),
                    Order::Interleaved,
                    500,
                    logp,
                    Correction::Opportunistic { d: k },
                    start,
                    &dead(k - 1),
                    seed,
                );
                assert_eq!(s.uncolored_live, 0, "k={k} seed={seed} {start:?}");
            }
        }
    }
    // ... and the guarantee is not vacuous: killing all the root's children leaves holes.
    let tree = Tree::build(TreeKind::Kary(2), Order::Interleaved, 500, logp).unwrap();
    let f = Faults {
        before: DeadBefore::List(tree.children(0).to_vec()),
        ..Faults::default()
    };
    let s = run(
        TreeKind::Kary(2),
        Order::Interleaved,
        500,
        logp,
        Correction::Opportunistic { d: 2 },
        Start::Synchronized,
        &f,
        0,
    );
    assert!(s.uncolored_live > 0);
}

#[test]
fn optimized_opportunistic_sends_no_more_than_opportunistic_and_colors_all() {
    let logp = LogP { l: 2, o: 1 };
    for seed in 0..30 {
        let a = run(
            TreeKind::Binomial,
            Order::Interleaved,
            4096,
            logp,
            Correction::Opportunistic { d: 4 },
            Start::Overlapped,
            &dead(8),
            seed,
        );
        let b = run(
            TreeKind::Binomial,
            Order::Interleaved,
            4096,
            logp,
            Correction::Optimized { d: 4 },
            Start::Overlapped,
            &dead(8),
            seed,
        );
        assert!(b.messages <= a.messages, "seed {seed}: {} > {}", b.messages, a.messages);
        assert_eq!(a.uncolored_live, 0);
        assert_eq!(b.uncolored_live, 0, "seed {seed}");
    }
    let ff = run(
        TreeKind::Binomial,
        Order::Interleaved,
        4096,
        logp,
        Correction::Optimized { d: 4 },
        Start::Overlapped,
        &dead(0),
        0,
    );
    let plain = run(
        TreeKind::Binomial,
        Order::Interleaved,
        4096,
        logp,
        Correction::Opportunistic { d: 4 },
        Start::Overlapped,
        &dead(0),
        0,
    );
    assert!(
        ff.messages < plain.messages,
        "the optimization saves messages fault-free"
    );
}

#[test]
fn delayed_correction_sends_one_message_fault_free_and_still_colors_all() {
    let logp = LogP { l: 2, o: 1 };
    let s = run(
        TreeKind::Binomial,
        Order::Interleaved,
        1024,
        logp,
        Correction::Delayed { delay: None },
        Start::Synchronized,
        &dead(0),
        0,
    );
    assert_eq!(s.messages, 1023 + 1024);
    // Overlapped: early correction messages turn some processes into c-nodes that do not
    // participate (§3.3), so their left neighbours search: more messages, same coloring.
    for start in [Start::Synchronized, Start::Overlapped] {
        for seed in 0..30 {
            let s = run(
                TreeKind::Binomial,
                Order::Interleaved,
                1024,
                logp,
                Correction::Delayed { delay: None },
                start,
                &dead(20),
                seed,
            );
            assert_eq!(s.uncolored_live, 0, "{start:?} seed {seed}");
        }
    }
}

/// FCG's correction on trees keeps its guarantee with up to f failures during the run.
#[test]
fn failproof_survives_online_failures() {
    let logp = LogP { l: 2, o: 1 };
    let n = 1024;
    let horizon = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp)
        .unwrap()
        .dissemination_latency(logp)
        + 30;
    for f in [1u32, 2] {
        for seed in 0..40 {
            let faults = Faults {
                before: DeadBefore::Count(10),
                online: f,
                online_horizon: horizon,
                ..Faults::default()
            };
            let s = run(
                TreeKind::Binomial,
                Order::Interleaved,
                n,
                logp,
                Correction::FailProof { f },
                Start::Synchronized,
                &faults,
                seed,
            );
            assert_eq!(s.uncolored_live, 0, "f={f} seed={seed}");
            assert!(!s.aborted);
        }
    }
}

#[test]
fn interleaving_keeps_gaps_small() {
    let logp = LogP { l: 2, o: 1 };
    let (mut gi, mut go) = (0, 0);
    for seed in 0..20 {
        gi += run(
            TreeKind::Binomial,
            Order::Interleaved,
            4096,
            logp,
            Correction::Checked,
            Start::Synchronized,
            &dead(5),
            seed,
        )
        .gmax;
        go += run(
            TreeKind::Binomial,
            Order::InOrder,
            4096,
            logp,
            Correction::Checked,
            Start::Synchronized,
            &dead(5),
            seed,
        )
        .gmax;
    }
    assert!(go > 4 * gi, "in-order {go} vs interleaved {gi}");
}
