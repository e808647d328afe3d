//! Differential test: ERA's experiment on the shared LogP engine ([`super::run_once`]) against
//! the driver it replaced ([`super::oracle::run_once`]) over a grid of seeds, sizes, tree
//! shapes, kills (before the start, at a time, on a message, at random with a jittered
//! detector), LogP and LogGP costs, noise and shared cores: every field of every run equal.

use std::sync::Arc;

use super::tests::fingerprint_of;
use super::*;
use crate::protocol::agree::And64;
use crate::sim::noise::Dist as NoiseDist;

fn base(n: Rank, shape: &str) -> AgreeSim {
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
        agreements: 6,
        detect_delay: 20,
        detect_jitter: 0,
        kills: Vec::new(),
        random_kills: 0,
        kill_horizon: 1,
        ack_on_error: true,
        max_events: 5_000_000,
    }
}

/// The fault settings of the grid for `n` processes.
fn faults(n: Rank, s: &AgreeSim, which: u32) -> AgreeSim {
    let mut s = s.clone();
    match which {
        0 => {}
        1 => {
            s.random_kills = (n / 4).max(1);
            s.kill_horizon = 90;
            s.detect_jitter = 7;
        }
        2 => {
            s.kills = vec![
                Kill {
                    rank: 0,
                    at: KillAt::Message(3),
                },
                Kill {
                    rank: n - 1,
                    at: KillAt::Before,
                },
            ];
            s.ack_on_error = false;
        }
        _ => {
            s.kills = vec![Kill {
                rank: n / 2,
                at: KillAt::Time(13),
            }];
            s.random_kills = 1;
            s.kill_horizon = 40;
            s.detect_delay = 3;
            s.detect_jitter = 30;
        }
    }
    s
}

/// The cost settings of the grid: LogP, LogGP with a gap and a per-byte cost, noise.
fn costs(s: &AgreeSim, which: u32) -> AgreeSim {
    let mut s = s.clone();
    match which {
        0 => {}
        1 => s.loggp = Some(LogGP::new(5, 3, 1, 4, 1).unwrap()),
        _ => {
            s.noise = Some(Arc::new(Noise {
                os: NoiseDist::Samples(vec![1, 1, 2, 5]),
                or: NoiseDist::Const(2),
                l: NoiseDist::Quantiles(vec![(0.0, 1.0), (0.5, 3.0), (0.9, 9.0), (1.0, 40.0)]),
                loss: None,
                interrupts: None,
            }))
        }
    }
    s
}

#[test]
fn the_shared_engine_runs_era_exactly_as_its_old_driver() {
    let mut runs = 0;
    for shape in ["bin", "star", "bin/bin:4"] {
        for n in [2u32, 7, 33] {
            for fault in 0..4 {
                if n == 2 && fault > 0 {
                    continue;
                }
                for cost in 0..3 {
                    for cores in [None, Some(3)] {
                        let s = AgreeSim {
                            cores,
                            visit: 0,
                            ..costs(&faults(n, &base(n, shape), fault), cost)
                        };
                        for seed in [1, 8] {
                            let want = oracle::run_once::<And64>(&s, seed).unwrap();
                            let got = run_once::<And64>(&s, seed).unwrap();
                            assert!(!got.aborted, "aborted at the event cap: {shape} n={n}");
                            assert_eq!(got.violations.total(), 0, "{shape} n={n} fault={fault}");
                            assert_eq!(
                                fingerprint_of(&got),
                                fingerprint_of(&want),
                                "{shape} n={n} fault={fault} cost={cost} cores={cores:?} seed={seed}"
                            );
                            runs += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(runs, 3 * (1 + 4 + 4) * 3 * 2 * 2);
}

#[test]
fn a_run_stopped_at_the_event_cap_is_stopped_at_the_same_event() {
    let s = AgreeSim {
        max_events: 500,
        ..faults(33, &base(33, "bin"), 1)
    };
    let want = oracle::run_once::<And64>(&s, 4).unwrap();
    let got = run_once::<And64>(&s, 4).unwrap();
    assert!(got.aborted && want.aborted);
    assert_eq!(got.events, 501);
    assert_eq!(fingerprint_of(&got), fingerprint_of(&want));
}
