//! `ftcoll agree --sim`: ERA in the LogP simulator (without `--sim`: [`super::agree_bench`]) — back-to-back agreements per process
//! (ULFM's `benchagree` loop), failures before or during them, latency, messages and
//! critical-path steps as percentiles, the properties of §2.1 checked on every return.

use clap::{Args, ValueEnum};
use serde_json::json;

use crate::model::LogP;
use crate::protocol::agree::{And32, And64, EraConfig, EraTree, RankSet, Rebalance, Shape};
use crate::sim::agree::{AgreeRun, AgreeSim, Kill, KillAt, SimValue, Violations, run_once, theorem5_bound};
use crate::sim::stats::Dist;

/// The agreed value's type and `F`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ValueName {
    /// Bitwise AND of a 32-bit word (MPIX_Comm_agree).
    And32,
    /// Bitwise AND of a 64-bit word.
    And64,
    /// Set union (each process contributes its rank).
    Union,
}

/// Transport of the network benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportName {
    Udp,
    Inproc,
    /// ibverbs RC QPs on this host's RDMA device (cargo feature `rdma`).
    Verbs,
}

/// Tree rebalancing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RebalanceName {
    Off,
    Degenerated,
    Always,
}

#[derive(Args, Debug, Clone)]
pub struct AgreeArgs {
    /// Run in the LogP simulator instead of on a local cluster.
    #[arg(long)]
    pub sim: bool,
    /// Network benchmark: every node its own OS process over UDP (kills are real SIGKILLs).
    #[arg(long)]
    pub procs: bool,
    /// Network benchmark across hosts (Slurm, mpirun, the netns script; like `bench --join`):
    /// one process per host, rank 0 runs the coordinator at this `IP:PORT` (UDP control plane
    /// and TCP report streams) next to its own node and prints the report.
    #[arg(long, value_name = "IP:PORT", conflicts_with_all = ["sim", "procs"])]
    pub join: Option<std::net::SocketAddr>,
    /// With --join: this process's rank [default: from the launcher's environment; the size
    /// then comes from it too].
    #[arg(long, requires = "join")]
    pub rank: Option<u32>,
    /// With --join: the IP to publish for this node [default: the interface toward rank 0].
    #[arg(long, requires = "join")]
    pub bind: Option<std::net::IpAddr>,
    /// With --join: how long to wait for every rank to join, ms.
    #[arg(long = "join-timeout-ms", default_value_t = 60_000)]
    pub join_timeout_ms: u64,
    /// Network benchmark: run this many seconds instead of --agreements (a soak).
    #[arg(long)]
    pub duration: Option<u64>,
    /// Network benchmark: transport.
    #[arg(long, value_enum, default_value = "udp")]
    pub transport: TransportName,
    /// Network benchmark: warm-up agreements before the measured ones.
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// Network benchmark: worker threads [default: min(nodes, cores)].
    #[arg(long)]
    pub workers: Option<usize>,
    /// Network benchmark: do not pin workers to cores.
    #[arg(long = "no-pin")]
    pub no_pin: bool,
    /// Network benchmark: heartbeat period to tree neighbours, µs. A node blocked on a dead
    /// neighbour probes it this soon (a closed port then answers with ICMP at once); a link
    /// that carries agreements needs none, so busy runs send almost no heartbeats.
    #[arg(long = "heartbeat-us", default_value_t = 200)]
    pub heartbeat_us: u64,
    /// Network benchmark: a neighbour silent this long is suspected, ms.
    #[arg(long = "suspect-ms", default_value_t = 100)]
    pub suspect_ms: u64,
    /// Network benchmark: give up when no agreement returns for this long, ms.
    #[arg(long = "op-timeout-ms", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    pub op_timeout_ms: u64,
    /// Number of processes.
    #[arg(long, default_value_t = 64)]
    pub nodes: u32,
    /// ERA tree: bin, star, string, or X/Y:G (e.g. bin/bin:8, groups of G ranks).
    #[arg(long, default_value = "bin")]
    pub tree: String,
    /// LogP latency L.
    #[arg(long = "L", default_value_t = 2)]
    pub l: u64,
    /// LogP overhead o (> 0).
    #[arg(long = "o", default_value_t = 1)]
    pub o: u64,
    /// Agreements per process per run, back to back.
    #[arg(long, default_value_t = 100)]
    pub agreements: u64,
    /// Monte Carlo runs.
    #[arg(long, default_value_t = 100)]
    pub runs: u64,
    /// Failures. --sim: R (dead before), R@T (dies at time T), R@msg:K (dies on its K-th
    /// received message), comma-separated. Network: R@I, rank R dies instead of entering
    /// measured agreement I.
    #[arg(long)]
    pub kill: Option<String>,
    /// Random processes dying at random times in [0, --kill-horizon) in each run.
    #[arg(long = "random-kills", default_value_t = 0)]
    pub random_kills: u32,
    /// Window of random failures [default: the failure-free duration of the first agreement
    /// estimate, 2·height·(L+2o)].
    #[arg(long = "kill-horizon")]
    pub kill_horizon: Option<u64>,
    /// Failure detection delay after a death.
    #[arg(long = "detect-delay", default_value_t = 20)]
    pub detect_delay: u64,
    /// Extra uniform random detection delay in [0, J].
    #[arg(long = "detect-jitter", default_value_t = 0)]
    pub detect_jitter: u64,
    /// Value type and operation F.
    #[arg(long, value_enum, default_value = "and64")]
    pub value: ValueName,
    /// Agreements one process may have in flight (1 = blocking MPIX_Comm_agree).
    #[arg(long, default_value_t = 1)]
    pub window: u32,
    /// Keep every decided result (no §4 garbage collection).
    #[arg(long = "no-gc")]
    pub no_gc: bool,
    /// Tree rebalancing between agreements.
    #[arg(long, value_enum, default_value = "degenerated")]
    pub rebalance: RebalanceName,
    /// Never acknowledge failures (every agreement after one reports it).
    #[arg(long = "no-ack")]
    pub no_ack: bool,
    /// Base seed; run i uses a seed derived from (seed, i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Per-run event cap (a run over it is counted as aborted).
    #[arg(long = "max-events", default_value_t = 1 << 40)]
    pub max_events: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// --sim: exit 0 even when runs were aborted at --max-events (else exit code 3).
    #[arg(long = "allow-aborts")]
    pub allow_aborts: bool,
}

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
        kill_horizon: a
            .kill_horizon
            .unwrap_or(2 * u64::from(height.max(1)) * (a.l + 2 * a.o))
            .max(1),
        ack_on_error: !a.no_ack,
        max_events: a.max_events,
    };
    sim.validate()?;
    Ok(sim)
}

/// Everything measured over the runs.
pub struct Totals {
    pub latency: Dist,
    pub process_latency: Dist,
    pub messages: Dist,
    pub steps: Dist,
    pub max_sent: Dist,
    pub max_steps_failure_free: u32,
    pub failure_free_agreements: u64,
    pub max_stored: usize,
    pub not_acknowledged: u64,
    pub rebalances: u64,
    pub dead: u64,
    pub aborted: u64,
    pub events: u64,
    pub violations: Violations,
}

impl Totals {
    fn new() -> Self {
        Self {
            latency: Dist::new(1),
            process_latency: Dist::new(1),
            messages: Dist::new(1),
            steps: Dist::new(1),
            max_sent: Dist::new(1),
            max_steps_failure_free: 0,
            failure_free_agreements: 0,
            max_stored: 0,
            not_acknowledged: 0,
            rebalances: 0,
            dead: 0,
            aborted: 0,
            events: 0,
            violations: Violations::default(),
        }
    }

    fn add(&mut self, r: &AgreeRun) {
        self.latency.merge(&r.latency);
        self.process_latency.merge(&r.process_latency);
        self.messages.merge(&r.messages);
        self.steps.merge(&r.steps);
        self.max_sent.merge(&r.max_sent_per_process);
        self.max_steps_failure_free = self.max_steps_failure_free.max(r.max_steps_failure_free);
        self.failure_free_agreements += r.failure_free_agreements;
        self.max_stored = self.max_stored.max(r.max_stored);
        self.not_acknowledged += r.not_acknowledged;
        self.rebalances += r.rebalances;
        self.dead += u64::from(r.dead);
        self.aborted += u64::from(r.aborted);
        self.events += r.events;
        self.violations.merge(&r.violations);
    }
}

fn simulate<V: SimValue>(sim: &AgreeSim, a: &AgreeArgs) -> Result<Totals, String> {
    let mut t = Totals::new();
    for i in 0..a.runs {
        let r = run_once::<V>(sim, crate::protocol::ProtoRng::run_seed(a.seed, i))?;
        t.add(&r);
    }
    Ok(t)
}

/// Runs `ftcoll agree`.
pub fn run(a: &AgreeArgs) -> Result<(), crate::cli::Failure> {
    if !a.sim {
        if a.allow_aborts {
            return Err("--allow-aborts applies to --sim only".to_string().into());
        }
        return Ok(crate::cli::agree_bench::run(a)?);
    }
    let sim = experiment(a)?;
    let started = std::time::Instant::now();
    let t = match a.value {
        ValueName::And32 => simulate::<And32>(&sim, a)?,
        ValueName::And64 => simulate::<And64>(&sim, a)?,
        ValueName::Union => simulate::<RankSet>(&sim, a)?,
    };
    let secs = started.elapsed().as_secs_f64();
    let (height, fanout) = EraTree::full(sim.era.shape, sim.n).shape_stats();
    let bound = theorem5_bound(sim.n, fanout, height);
    if a.json {
        let p = |d: &Dist| serde_json::to_value(d.percentiles()).unwrap_or_default();
        println!(
            "{}",
            json!({
                "config": {
                    "nodes": sim.n, "tree": sim.era.shape.to_string(), "L": sim.logp.l, "o": sim.logp.o,
                    "agreements": sim.agreements, "runs": a.runs, "detect_delay": sim.detect_delay,
                    "detect_jitter": sim.detect_jitter, "kill": a.kill, "random_kills": sim.random_kills,
                    "value": format!("{:?}", a.value).to_lowercase(), "gc": sim.era.gc, "seed": a.seed,
                },
                "agreement_latency": p(&t.latency),
                "process_latency": p(&t.process_latency),
                "messages_per_agreement": p(&t.messages),
                "critical_path_steps": p(&t.steps),
                "max_messages_sent_by_one_process": p(&t.max_sent),
                "tree_height": height, "tree_fanout": fanout, "theorem5_bound": bound,
                "max_steps_failure_free": t.max_steps_failure_free,
                "failure_free_agreements": t.failure_free_agreements,
                "max_stored_agreements_per_process": t.max_stored,
                "not_acknowledged_returns": t.not_acknowledged,
                "rebalances": t.rebalances, "dead": t.dead, "aborted_runs": t.aborted,
                "violations": t.violations, "events": t.events, "seconds": secs,
            })
        );
    } else {
        print!("{}", table(&sim, a, &t, (height, fanout, bound), secs));
    }
    crate::cli::check_aborts(
        t.aborted,
        a.runs,
        &format!("agree --sim, --max-events {}", a.max_events),
        a.allow_aborts,
    )
}

fn table(sim: &AgreeSim, a: &AgreeArgs, t: &Totals, (height, fanout, bound): (u32, u32, u32), secs: f64) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ftcoll agree --sim: ERA tree={} (height {height}, fan-out {fanout}) nodes={} L={} o={} value={:?}",
        sim.era.shape, sim.n, sim.logp.l, sim.logp.o, a.value
    );
    let _ = writeln!(
        s,
        "agreements={} per process x runs={}  detect-delay={} jitter={}  kills={}  random-kills={}  gc={} rebalance={:?}",
        sim.agreements,
        a.runs,
        sim.detect_delay,
        sim.detect_jitter,
        a.kill.as_deref().unwrap_or("none"),
        sim.random_kills,
        sim.era.gc,
        sim.era.rebalance
    );
    let _ = writeln!(
        s,
        "\n{:<36}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "", "mean", "p50", "p99", "p99.9", "max"
    );
    for (name, d) in [
        ("agreement latency (entry→last ret.)", &t.latency),
        ("per-process latency (entry→return)", &t.process_latency),
        ("messages per agreement", &t.messages),
        ("critical-path message steps", &t.steps),
        ("most messages sent by one process", &t.max_sent),
    ] {
        let p = d.percentiles();
        let _ = writeln!(
            s,
            "{name:<36}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}",
            p.mean, p.p50, p.p99, p.p999, p.max
        );
    }
    let _ = writeln!(s, "(latencies in LogP time units)");
    if t.failure_free_agreements > 0 {
        let _ = writeln!(
            s,
            "Theorem 5 (failure-free): max steps {} over {} agreements, bound 2·⌈log_δ n⌉ = {bound} (δ = {fanout}): {}",
            t.max_steps_failure_free,
            t.failure_free_agreements,
            if t.max_steps_failure_free <= bound {
                "holds"
            } else {
                "exceeded (the tree is deeper than log_δ n)"
            }
        );
    }
    let _ = writeln!(
        s,
        "stored agreements per process (max): {}   failures: {}   'failure not acknowledged' returns: {}   tree rebuilds: {}",
        t.max_stored, t.dead, t.not_acknowledged, t.rebalances
    );
    let v = &t.violations;
    let _ = writeln!(
        s,
        "violations: agreement {} participation {} validity {} irrevocability {} failed-set {} termination {}   aborted runs: {}",
        v.agreement, v.participation, v.validity, v.irrevocability, v.failed_set, v.termination, t.aborted
    );
    let _ = writeln!(s, "simulated {} events in {secs:.2} s", t.events);
    s
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
