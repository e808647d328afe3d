//! ERA in the LogP simulator: Theorem 5 failure-free, the properties of §2.1 over random
//! failure schedules, GC's bounded memory, detecting then stabilizing agreements.

use super::*;
use crate::protocol::agree::{And32, And64, EraTree, RankSet, Rebalance, Shape};

fn sim(n: Rank, shape: &str, agreements: u64) -> AgreeSim {
    AgreeSim {
        n,
        era: EraConfig {
            shape: shape.parse().unwrap(),
            ..EraConfig::default()
        },
        logp: LogP::new(2, 1).unwrap(),
        loggp: None,
        noise: None,
        cores: None,
        visit: 0,
        agreements,
        detect_delay: 20,
        detect_jitter: 0,
        kills: Vec::new(),
        random_kills: 0,
        kill_horizon: 1,
        ack_on_error: true,
        max_events: 50_000_000,
    }
}

#[test]
fn theorem_5_failure_free_steps_and_messages() {
    for shape in ["bin", "star", "string", "bin/bin:4", "bin/star:4"] {
        for n in [2u32, 3, 8, 31, 64] {
            let s = sim(n, shape, 5);
            let r = run_once::<And64>(&s, 7).unwrap();
            assert!(!r.aborted, "aborted at the event cap");
            assert_eq!(r.violations.total(), 0, "{shape} n={n}");
            let t = EraTree::full(s.era.shape, n);
            let (height, fanout) = t.shape_stats();
            // Exactly the tree's height up and down, and one UP and one DOWN per edge.
            assert_eq!(r.max_steps_failure_free, 2 * height, "{shape} n={n}");
            // Theorem 5's 2·⌈log_δ n⌉ assumes a tree whose depth is log_δ n: the flat ones.
            // Hierarchical trees are as deep as their two levels together (2·height above).
            if !shape.contains('/') {
                assert!(
                    r.max_steps_failure_free <= theorem5_bound(n, fanout, height),
                    "{shape} n={n}"
                );
            }
            assert_eq!(r.messages.percentiles().max, f64::from(2 * (n - 1)));
            assert_eq!(r.messages.percentiles().p50, f64::from(2 * (n - 1)));
            // One UP to the parent and one DOWN per child: at most fan-out + 1.
            assert!(
                r.max_sent_per_process.percentiles().max <= f64::from(fanout + 1),
                "{shape} n={n}"
            );
            // No faster than the critical path's LogP cost.
            let hop = s.logp.l + 2 * s.logp.o;
            assert!(r.latency.percentiles().p50 >= (2 * u64::from(height) * hop) as f64);
            assert_eq!(r.failure_free_agreements, 5);
        }
    }
    // For binary trees Theorem 5's bound is met with equality when n is a power of two.
    assert_eq!(theorem5_bound(64, 2, 6), 12);
    assert_eq!(theorem5_bound(100, 99, 1), 4);
}

#[test]
fn random_failure_schedules_keep_the_four_properties() {
    random_failure_schedules(2024, 3000);
}

/// The same over 100 000 schedules (minutes): `cargo test --release -- --ignored soak`.
#[test]
#[ignore]
fn soak_random_failure_schedules() {
    random_failure_schedules(7, 100_000);
}

fn random_failure_schedules(seed: u64, runs: u64) {
    let shapes = ["bin", "star", "string", "bin/bin:4", "bin/star:3", "star/bin:5"];
    let mut rng = ProtoRng::new(seed);
    let mut failures = 0;
    for run in 0..runs {
        let n = 2 + rng.below(40);
        let shape = shapes[run as usize % shapes.len()];
        let mut s = sim(n, shape, 1 + u64::from(rng.below(4)));
        s.era.rebalance = [Rebalance::Off, Rebalance::Degenerated, Rebalance::Always][run as usize % 3];
        s.detect_delay = u64::from(rng.below(30));
        s.detect_jitter = u64::from(rng.below(10));
        s.ack_on_error = rng.below(2) == 0;
        let kills = rng.below(n / 2 + 1).min(n - 1);
        let mut taken = HashSet::new();
        for _ in 0..kills {
            let r = rng.below(n);
            if !taken.insert(r) {
                continue;
            }
            let at = match rng.below(3) {
                0 => KillAt::Before,
                1 => KillAt::Time(u64::from(rng.below(60))),
                _ => KillAt::Message(1 + u64::from(rng.below(6))),
            };
            s.kills.push(Kill { rank: r, at });
        }
        let r = run_once::<RankSet>(&s, run).unwrap();
        assert!(!r.aborted, "run {run}");
        assert_eq!(
            r.violations,
            Violations::default(),
            "run {run}: {shape} n={n} {:?}",
            s.kills
        );
        failures += u64::from(r.dead);
    }
    assert!(failures > runs, "the schedules inject failures: {failures}");
}

#[test]
fn root_and_inner_node_failures_mid_agreement() {
    // The root dies on its first receive, an inner node after two: both mid-protocol.
    for (shape, n) in [("bin", 31), ("bin/bin:4", 32), ("string", 6), ("star", 9)] {
        let mut s = sim(n, shape, 4);
        s.kills = vec![
            Kill {
                rank: 0,
                at: KillAt::Message(1),
            },
            Kill {
                rank: 2,
                at: KillAt::Message(2),
            },
        ];
        let r = run_once::<And64>(&s, 3).unwrap();
        assert!(!r.aborted, "aborted at the event cap");
        assert_eq!(r.violations, Violations::default(), "{shape}");
        assert_eq!(r.dead, 2);
        assert!(r.not_acknowledged > 0, "{shape}: the failures are reported");
    }
}

#[test]
fn garbage_collection_bounds_memory_over_many_agreements() {
    let s = sim(8, "bin", 20_000);
    let r = run_once::<And32>(&s, 1).unwrap();
    assert!(!r.aborted, "aborted at the event cap");
    assert_eq!(r.violations.total(), 0);
    assert!(r.max_stored <= 3, "stored agreements per process: {}", r.max_stored);
    let mut nogc = sim(8, "bin", 500);
    nogc.era.gc = false;
    let r = run_once::<And32>(&nogc, 1).unwrap();
    assert!(!r.aborted, "aborted at the event cap");
    assert_eq!(r.max_stored, 500);
}

#[test]
fn detecting_then_stabilizing_then_post_failure() {
    let mut s = sim(16, "bin", 4);
    s.kills = vec![Kill {
        rank: 5,
        at: KillAt::Before,
    }];
    let r = run_once::<And64>(&s, 9).unwrap();
    assert!(!r.aborted, "aborted at the event cap");
    assert_eq!(r.violations.total(), 0);
    // Only the first (detecting) agreement reports the failure: 15 returns.
    assert_eq!(r.not_acknowledged, 15);
    s.ack_on_error = false;
    let r = run_once::<And64>(&s, 9).unwrap();
    assert!(!r.aborted, "aborted at the event cap");
    assert_eq!(
        r.not_acknowledged,
        4 * 15,
        "never acknowledged: every agreement reports it"
    );
}

#[test]
fn bad_configurations_are_errors() {
    let mut s = sim(4, "bin", 1);
    s.kills = vec![Kill {
        rank: 9,
        at: KillAt::Before,
    }];
    assert!(run_once::<And64>(&s, 1).is_err());
    s.kills = (0..4)
        .map(|r| Kill {
            rank: r,
            at: KillAt::Before,
        })
        .collect();
    assert!(run_once::<And64>(&s, 1).is_err());
    let s = sim(4, "bin", 0);
    assert!(run_once::<And64>(&s, 1).is_err());
    assert!("bin/bin:0".parse::<Shape>().is_err());
}

/// Everything one run reports, for comparing runs.
pub(super) fn fingerprint_of(r: &AgreeRun) -> String {
    format!("{r:?}")
}

#[test]
fn loggp_as_logp_constant_noise_and_a_core_each_give_the_logp_run_exactly() {
    // The message costs come from the broadcast engine's `Timing`: with LogP parameters,
    // constant distributions or a core per process, nothing may change.
    for (shape, n, kills) in [("bin", 31u32, 0u32), ("star", 9, 2), ("bin/bin:4", 40, 5)] {
        let mut base = sim(n, shape, 6);
        base.random_kills = kills;
        base.kill_horizon = 60;
        base.detect_jitter = 7;
        let want = run_once::<And64>(&base, 11).unwrap();
        assert!(!want.aborted && want.violations.total() == 0);
        let gp: LogGP = base.logp.into();
        let variants = [
            AgreeSim {
                loggp: Some(gp),
                ..base.clone()
            },
            AgreeSim {
                noise: Some(Arc::new(Noise::constant(gp))),
                ..base.clone()
            },
            AgreeSim {
                cores: Some(n),
                visit: 0,
                ..base.clone()
            },
        ];
        for v in &variants {
            let got = run_once::<And64>(v, 11).unwrap();
            assert_eq!(fingerprint_of(&got), fingerprint_of(&want), "{shape} n={n}");
        }
    }
}

#[test]
fn an_agreement_of_two_costs_two_loggp_hops() {
    // Rank 1's contribution goes up (o_s + L + o_r), the decision comes down (the same):
    // the closed form of the critical path, for asymmetric overheads and a gap.
    for (l, os, or, g) in [(2, 1, 1, 0), (5, 3, 1, 0), (2, 4, 1, 6), (9, 1, 7, 2)] {
        let gp = LogGP::new(l, os, or, g, 0).unwrap();
        let s = AgreeSim {
            loggp: Some(gp),
            ..sim(2, "star", 1)
        };
        let r = run_once::<And64>(&s, 3).unwrap();
        assert!(!r.aborted && r.violations.total() == 0);
        assert_eq!(r.latency.percentiles().p50, (2 * gp.hop()) as f64, "{gp:?}");
    }
}

#[test]
fn one_shared_core_does_every_send_and_receive_in_turn() {
    // All processes on one core: the core does each of the 2(n-1) messages' send and receive
    // one after the other, so the agreement takes at least their sum.
    let n = 8;
    let gp = LogGP::new(2, 3, 2, 0, 0).unwrap();
    let own = AgreeSim {
        loggp: Some(gp),
        ..sim(n, "bin", 1)
    };
    let shared = AgreeSim {
        cores: Some(1),
        visit: 0,
        ..own.clone()
    };
    let a = run_once::<And64>(&own, 5).unwrap();
    let b = run_once::<And64>(&shared, 5).unwrap();
    for r in [&a, &b] {
        assert!(!r.aborted && r.violations.total() == 0);
    }
    let work = (2 * u64::from(n - 1) * (gp.os + gp.or)) as f64;
    assert!(
        b.latency.percentiles().p50 >= work,
        "{} < {work}",
        b.latency.percentiles().p50
    );
    assert!(a.latency.percentiles().p50 < work);
}

#[test]
fn a_visit_cost_on_shared_cores_slows_agreements_and_without_shared_cores_changes_nothing() {
    // Shared cores: a core visits its processes in turn, so a message waits for its
    // receiver's turn; the same run with every visit free is faster, with the same messages.
    let p50 = |r: &AgreeRun| r.latency.percentiles().p50;
    let run = |s: &AgreeSim| {
        let r = run_once::<And64>(s, 3).unwrap();
        assert!(!r.aborted, "aborted at the event cap");
        assert_eq!(r.violations.total(), 0);
        r
    };
    let mut shared = sim(16, "bin", 30);
    shared.cores = Some(2);
    let free = run(&shared);
    shared.visit = 5;
    let visited = run(&shared);
    assert!(p50(&visited) > p50(&free), "{} against {}", p50(&visited), p50(&free));
    assert_eq!(visited.messages.percentiles().p50, free.messages.percentiles().p50);
    // Seven more processes a core passes by per round at most, each visit 5 units: a
    // message waits at most a round more per hop, 8 hops up and down a tree of 16.
    assert!(p50(&visited) <= p50(&free) + 8.0 * 8.0 * 5.0 + 1.0);
    // A core each: no rounds, the visit cost is not charged.
    let mut own = sim(16, "bin", 30);
    let alone = run(&own);
    own.visit = 5;
    let charged = run(&own);
    assert_eq!(alone.latency.percentiles(), charged.latency.percentiles());
    assert_eq!(alone.events, charged.events);
}
