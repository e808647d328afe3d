//! `ftcoll agree --sim`: ERA in the LogP simulator (without `--sim`: [`super::agree_bench`]) — back-to-back agreements per process
//! (ULFM's `benchagree` loop), failures before or during them, latency, messages and
//! critical-path steps as percentiles, the properties of §2.1 checked on every return.

use crate::cli::agree_args::{
    AgreeArgs, RebalanceName, SIM_DEFAULT_DETECT_DELAY, SIM_DEFAULT_L, SIM_DEFAULT_MAX_EVENTS, SIM_DEFAULT_O,
    SIM_DEFAULT_RUNS, ValueName,
};

use crate::experiment::agree::simulate;
use crate::model::LogP;
use crate::protocol::agree::{And32, And64, EraConfig, EraTree, RankSet, Rebalance, Shape};
use crate::report::agree::SimShown;
use crate::sim::agree::{AgreeSim, Kill, KillAt, theorem5_bound};

fn parse_kills(spec: &str, n: u32) -> Result<Vec<Kill>, String> {
    let mut v = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("bad --kill '{part}': expected R, R@T or R@msg:K");
        let (r, at) = match part.split_once('@') {
            None => (part, KillAt::Before),
            Some((r, rest)) => {
                let at = match rest.strip_prefix("msg:") {
                    Some(k) => KillAt::Message(k.parse().map_err(|_| bad())?),
                    None => KillAt::Time(rest.parse().map_err(|_| bad())?),
                };
                (r, at)
            }
        };
        let rank: u32 = r.parse().map_err(|_| bad())?;
        if rank >= n {
            return Err(format!("bad --kill '{part}': rank {rank} but there are {n} processes"));
        }
        v.push(Kill { rank, at });
    }
    Ok(v)
}

/// The simulated experiment of these flags.
pub fn experiment(a: &AgreeArgs) -> Result<AgreeSim, String> {
    if a.nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    if a.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if a.window == 0 {
        return Err("--window must be at least 1".into());
    }
    let shape: Shape = a.tree.parse()?;
    let logp = LogP::new(a.l, a.o)?;
    let spec = a.loggp.spec();
    let gp = crate::experiment::algo::loggp(logp, &spec)?;
    let noise = spec
        .noise
        .as_deref()
        .map(|p| crate::sim::Noise::load(p, gp).map(std::sync::Arc::new))
        .transpose()?;
    crate::experiment::agree::check_nodes(a.nodes)?;
    let (height, _) = EraTree::full(shape, a.nodes).shape_stats();
    let sim = AgreeSim {
        n: a.nodes,
        era: EraConfig {
            shape,
            window: a.window,
            gc: !a.no_gc,
            rebalance: match a.rebalance {
                RebalanceName::Off => Rebalance::Off,
                RebalanceName::Degenerated => Rebalance::Degenerated,
                RebalanceName::Always => Rebalance::Always,
            },
        },
        logp,
        loggp: (gp != logp.into()).then_some(gp),
        noise,
        cores: a.cores,
        visit: 0,
        agreements: a.agreements,
        detect_delay: a.detect_delay,
        detect_jitter: a.detect_jitter,
        kills: a
            .kill
            .as_deref()
            .map(|s| parse_kills(s, a.nodes))
            .transpose()?
            .unwrap_or_default(),
        random_kills: a.random_kills,
        kill_horizon: a.kill_horizon.unwrap_or(2 * u64::from(height.max(1)) * gp.hop()).max(1),
        ack_on_error: !a.no_ack,
        max_events: a.max_events,
    };
    sim.validate()?;
    Ok(sim)
}

/// Runs `ftcoll agree`.
pub fn run(a: &AgreeArgs) -> Result<(), crate::cli::failure::Failure> {
    if !a.sim {
        if a.allow_aborts {
            return Err("--allow-aborts applies to --sim only".to_string().into());
        }
        let l = &a.loggp;
        let sim_only = [
            (l.os.is_some(), "--os"),
            (l.or.is_some(), "--or"),
            (l.g.is_some(), "--g"),
            (l.big_g.is_some(), "--G"),
            (l.bytes.is_some(), "--bytes"),
            (l.noise.is_some(), "--noise"),
            (a.cores.is_some(), "--cores"),
            // The simulator's own flags; given at their defaults they change nothing.
            (a.l != SIM_DEFAULT_L, "--L"),
            (a.o != SIM_DEFAULT_O, "--o"),
            (a.runs != SIM_DEFAULT_RUNS, "--runs"),
            (a.random_kills != 0, "--random-kills"),
            (a.kill_horizon.is_some(), "--kill-horizon"),
            (a.detect_delay != SIM_DEFAULT_DETECT_DELAY, "--detect-delay"),
            (a.detect_jitter != 0, "--detect-jitter"),
            (a.max_events != SIM_DEFAULT_MAX_EVENTS, "--max-events"),
            (a.value != ValueName::And64, "--value"),
            (a.no_ack, "--no-ack"),
        ];
        if let Some((_, flag)) = sim_only.iter().find(|(given, _)| *given) {
            return Err(format!("{flag} applies to --sim only").into());
        }
        return crate::cli::agree_bench::run(a);
    }
    if a.stall.is_some() {
        return Err("--stall applies to the network benchmark only (drop --sim)"
            .to_string()
            .into());
    }
    let sim = experiment(a)?;
    let started = std::time::Instant::now();
    let t = match a.value {
        ValueName::And32 => simulate::<And32>(&sim, a.runs, a.seed)?,
        ValueName::And64 => simulate::<And64>(&sim, a.runs, a.seed)?,
        ValueName::Union => simulate::<RankSet>(&sim, a.runs, a.seed)?,
    };
    let secs = started.elapsed().as_secs_f64();
    let (height, fanout) = EraTree::full(sim.era.shape, sim.n).shape_stats();
    let bound = theorem5_bound(sim.n, fanout, height);
    let shown = SimShown {
        runs: a.runs,
        kill: a.kill.as_deref(),
        value: format!("{:?}", a.value),
        seed: a.seed,
    };
    crate::report::agree::print_sim(&sim, &shown, &t, (height, fanout, bound), secs, a.json);
    crate::cli::failure::check_aborts(
        t.aborted,
        a.runs,
        &format!("agree --sim, --max-events {}", a.max_events),
        a.allow_aborts,
    )?;
    // A run stopped at its event cap never terminates: its termination is not checked.
    let mut checked = t.violations;
    if t.aborted > 0 {
        checked.termination = 0;
    }
    crate::experiment::verdict::Verdict::agree_sim(&checked, a.runs).into_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_specs_parse_and_bad_ones_fail() {
        let k = parse_kills("3, 1@40,2@msg:2", 8).unwrap();
        assert_eq!(
            k,
            vec![
                Kill {
                    rank: 3,
                    at: KillAt::Before
                },
                Kill {
                    rank: 1,
                    at: KillAt::Time(40)
                },
                Kill {
                    rank: 2,
                    at: KillAt::Message(2)
                }
            ]
        );
        for bad in ["x", "9", "1@", "1@msg:", "1@msg:x", "-1"] {
            assert!(parse_kills(bad, 8).is_err(), "{bad}");
        }
    }
}
