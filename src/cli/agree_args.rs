//! The flags of `ftcoll agree` (simulated with `--sim`, else on the network) and the values
//! `stress agree` shares.

use crate::cli::flags::{WALL_MAX_MS, WALL_MAX_S, WALL_MAX_US};
use crate::runtime::agree::DEFAULT_SUSPECT_AFTER;
use clap::{Args, ValueEnum};

// `--sim`'s defaults, which the network benchmark also checks its flags against: a
// simulator flag given to it at another value would be ignored.
/// `--sim`'s default L.
pub const SIM_DEFAULT_L: u64 = 2;
/// `--sim`'s default o.
pub const SIM_DEFAULT_O: u64 = 1;
/// `--sim`'s default number of runs.
pub const SIM_DEFAULT_RUNS: u64 = 100;
/// `--sim`'s default failure-detection delay.
pub const SIM_DEFAULT_DETECT_DELAY: u64 = 20;
/// `--sim`'s default event cap per run.
pub const SIM_DEFAULT_MAX_EVENTS: u64 = 1 << 40;

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
    #[arg(long = "join-timeout-ms", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS), conflicts_with = "sim")]
    pub join_timeout_ms: u64,
    /// Network benchmark: run this many seconds instead of --agreements (a soak).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_S), conflicts_with = "sim")]
    pub duration: Option<u64>,
    /// Network benchmark: transport.
    #[arg(long, value_enum, default_value = "udp", conflicts_with = "sim")]
    pub transport: TransportName,
    /// Network benchmark: warm-up agreements before the measured ones.
    #[arg(long, default_value_t = 100, conflicts_with = "sim")]
    pub warmup: u64,
    /// Network benchmark: worker threads [default: min(nodes, cores)].
    #[arg(long, conflicts_with = "sim")]
    pub workers: Option<usize>,
    /// Network benchmark: do not pin workers to cores.
    #[arg(long = "no-pin", conflicts_with = "sim")]
    pub no_pin: bool,
    /// Network benchmark: heartbeat period to tree neighbours, µs. A node blocked on a dead
    /// neighbour probes it after half a period (a closed port then answers with ICMP at once);
    /// a link that carries agreements needs none, so busy runs send few heartbeats [default:
    /// 50 when every node has a core of its own (and with --join), 50 times the nodes per
    /// core when nodes share cores].
    #[arg(long = "heartbeat-us", value_parser = clap::value_parser!(u64).range(..=WALL_MAX_US), conflicts_with = "sim")]
    pub heartbeat_us: Option<u64>,
    /// Network benchmark: a neighbour silent this long is suspected, ms.
    #[arg(long = "suspect-ms", default_value_t = DEFAULT_SUSPECT_AFTER.as_millis() as u64, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS), conflicts_with = "sim")]
    pub suspect_ms: u64,
    /// Network benchmark: give up when no agreement returns for this long, ms.
    #[arg(long = "op-timeout-ms", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=WALL_MAX_MS), conflicts_with = "sim")]
    pub op_timeout_ms: u64,
    /// Network benchmark: skip the model (ERA in the LogGP simulator with this machine's o_s,
    /// o_r and L, measured by a ping-pong on the run's transport before it).
    #[arg(long = "no-model", conflicts_with = "sim")]
    pub no_model: bool,
    /// Number of processes.
    #[arg(long, default_value_t = 64)]
    pub nodes: u32,
    /// ERA tree: bin, star, string, or X/Y:G (e.g. bin/bin:8, groups of G ranks).
    #[arg(long, default_value = "bin")]
    pub tree: String,
    /// LogP latency L.
    #[arg(long = "L", default_value_t = SIM_DEFAULT_L)]
    pub l: u64,
    /// LogP overhead o (> 0).
    #[arg(long = "o", default_value_t = SIM_DEFAULT_O)]
    pub o: u64,
    /// Agreements per process per run, back to back.
    #[arg(long, default_value_t = 100)]
    pub agreements: u64,
    /// Monte Carlo runs.
    #[arg(long, default_value_t = SIM_DEFAULT_RUNS)]
    pub runs: u64,
    /// Failures. --sim: R (dead before), R@T (dies at time T), R@msg:K (dies on its K-th
    /// received message), comma-separated. Network: R@I, rank R dies instead of entering
    /// measured agreement I.
    #[arg(long)]
    pub kill: Option<String>,
    /// Network benchmark: live nodes that stop for a while, R@I:MS (rank R neither receives nor
    /// sends for MS ms instead of entering measured agreement I, then goes on), comma-separated.
    /// Longer than --suspect-ms, the node is suspected while alive: a false suspicion.
    #[arg(long)]
    pub stall: Option<String>,
    /// Random processes dying at random times in [0, --kill-horizon) in each run.
    #[arg(long = "random-kills", default_value_t = 0)]
    pub random_kills: u32,
    /// Window of random failures [default: the failure-free duration of the first agreement
    /// estimate, 2·height·(L+2o)].
    #[arg(long = "kill-horizon")]
    pub kill_horizon: Option<u64>,
    /// Failure detection delay after a death.
    #[arg(long = "detect-delay", default_value_t = SIM_DEFAULT_DETECT_DELAY)]
    pub detect_delay: u64,
    /// Extra uniform random detection delay in [0, J].
    #[arg(long = "detect-jitter", default_value_t = 0)]
    pub detect_jitter: u64,
    /// --sim: LogGP refinements of --L/--o and noisy LogP (the broadcast simulator's flags).
    #[command(flatten)]
    pub loggp: crate::cli::flags::LoggpArgs,
    /// --sim: the processes share C cores (rank r on core r mod C), each core doing one send
    /// or receive at a time [default: a core per process].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cores: Option<u32>,
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
    #[arg(long = "max-events", default_value_t = SIM_DEFAULT_MAX_EVENTS)]
    pub max_events: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// --sim: exit 0 even when runs were aborted at --max-events (else exit code 3).
    #[arg(long = "allow-aborts")]
    pub allow_aborts: bool,
    /// Network runs: exit 0 even when live nodes were suspected of having crashed (false
    /// suspicions are then reported, not failed). Disagreements, invalid values and unfinished
    /// nodes still fail the run.
    #[arg(long = "allow-false-suspicions", conflicts_with = "sim")]
    pub allow_false_suspicions: bool,
}
