//! The flags several commands share: the broadcast algorithm (`sim`, `model`, `bench`, `node`,
//! `plot`), the simulation (`sim`, `model`, `plot`), LogGP, the overlay algorithms, and
//! `reproduce`; each converts into its typed spec of [`crate::experiment`].

use clap::{Args, ValueEnum};

use crate::experiment::algo::{AlgoName, AlgoSpec, LoggpSpec};
use crate::experiment::sim::{Setup, SimSpec};
use crate::protocol::bcast::Start;
use crate::topology::Order;

/// The longest wall-clock time a flag may give (a run's duration, a timeout, a tick, an
/// emulated delay): a year, in each flag's unit. Longer ones overflowed the clock's arithmetic
/// (`Instant + Duration` panicked for `agree --duration 18446744073709551615`, a tick in µs
/// wrapped around in ns) and no run lasts that long.
pub const WALL_MAX_S: u64 = 365 * 24 * 3600;
/// [`WALL_MAX_S`] in ms.
pub const WALL_MAX_MS: u64 = WALL_MAX_S * 1000;
/// [`WALL_MAX_S`] in µs.
pub const WALL_MAX_US: u64 = WALL_MAX_MS * 1000;
/// [`WALL_MAX_S`] in ns.
pub const WALL_MAX_NS: u64 = WALL_MAX_US * 1000;

/// The broadcast algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AlgoArg {
    /// Corrected Trees: tree dissemination + ring correction.
    CorrectedTree,
    /// Corrected Gossip: OCG, CCG or FCG (see --variant).
    CorrectedGossip,
    /// Gossip only (GOS), no correction.
    Gossip,
    /// Binomial-graph broadcast (BIG).
    Big,
    /// Buntinas' fault-tolerant broadcast (BFB) with a modeled failure detector.
    Bfb,
    /// Tree broadcast with acknowledgments.
    TreeAck,
    /// `sim` only: the self-stabilizing BMG overlay built from a launch tree (convergence).
    BmgBuild,
    /// `sim` only: Han–Finkel dissemination (rounds, one failure, reorganization).
    Dissemination,
    /// `sim` only: failure notices spread by fault-tolerant dissemination (rounds).
    FailureNotices,
}

/// Tree numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    Interleaved,
    InOrder,
}

/// Correction start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StartArg {
    Synchronized,
    Overlapped,
}

/// The broadcast algorithm and its parameters (shared by `sim`, `model` and `bench`).
#[derive(Args, Debug, Clone)]
pub struct AlgoArgs {
    /// Broadcast algorithm.
    #[arg(long, value_enum, default_value = "corrected-tree")]
    pub algo: AlgoArg,
    /// Dissemination tree: kary:K, binomial, lame:K or optimal [default: binomial].
    #[arg(long)]
    pub tree: Option<String>,
    /// Tree numbering [default: interleaved].
    #[arg(long, value_enum)]
    pub order: Option<OrderArg>,
    // The bracketed option in the help is its syntax, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Correction: none, opportunistic:D, optimized:D, checked, failproof:F, delayed[:DELAY]
    /// [default: checked].
    #[arg(long)]
    pub correction: Option<String>,
    /// Correction start [default: synchronized].
    #[arg(long, value_enum)]
    pub start: Option<StartArg>,
    // The bracketed option in the help is its syntax, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Corrected-gossip variant: ocg, ccg or fcg[:F] [default: ccg].
    #[arg(long)]
    pub variant: Option<String>,
    /// Gossip rounds T (virtual time at which gossip stops; at most 2^32) [default: the
    /// paper's T_opt].
    #[arg(long = "gossip-rounds", value_parser = clap::value_parser!(u64).range(..=crate::model::LogP::MAX))]
    pub gossip_rounds: Option<u64>,
    /// OCG correction time C (at most 2^32) [default: Claim 2's C = K·O + L + O, plus one O].
    #[arg(long = "correction-time", value_parser = clap::value_parser!(u64).range(..=crate::model::LogP::MAX))]
    pub correction_time: Option<u64>,
}

impl From<AlgoArg> for AlgoName {
    fn from(a: AlgoArg) -> AlgoName {
        match a {
            AlgoArg::CorrectedTree => AlgoName::CorrectedTree,
            AlgoArg::CorrectedGossip => AlgoName::CorrectedGossip,
            AlgoArg::Gossip => AlgoName::Gossip,
            AlgoArg::Big => AlgoName::Big,
            AlgoArg::Bfb => AlgoName::Bfb,
            AlgoArg::TreeAck => AlgoName::TreeAck,
            AlgoArg::BmgBuild => AlgoName::BmgBuild,
            AlgoArg::Dissemination => AlgoName::Dissemination,
            AlgoArg::FailureNotices => AlgoName::FailureNotices,
        }
    }
}

impl AlgoArgs {
    /// The typed algorithm spec of these flags.
    pub fn spec(&self) -> AlgoSpec {
        AlgoSpec {
            algo: self.algo.into(),
            tree: self.tree.clone(),
            order: self.order.map(|o| match o {
                OrderArg::Interleaved => Order::Interleaved,
                OrderArg::InOrder => Order::InOrder,
            }),
            correction: self.correction.clone(),
            start: self.start.map(|s| match s {
                StartArg::Synchronized => Start::Synchronized,
                StartArg::Overlapped => Start::Overlapped,
            }),
            variant: self.variant.clone(),
            gossip_rounds: self.gossip_rounds,
            correction_time: self.correction_time,
        }
    }

    /// The flags that reproduce these algorithm settings (to start `ftcoll node` processes).
    pub fn to_args(&self) -> Vec<String> {
        let mut v = vec!["--algo".to_string()];
        v.push(
            clap::ValueEnum::to_possible_value(&self.algo)
                .map(|p| p.get_name().to_string())
                .unwrap_or_default(),
        );
        let mut opt = |flag: &str, val: Option<String>| {
            if let Some(x) = val {
                v.push(flag.to_string());
                v.push(x);
            }
        };
        opt("--tree", self.tree.clone());
        opt(
            "--order",
            self.order
                .and_then(|o| clap::ValueEnum::to_possible_value(&o))
                .map(|p| p.get_name().to_string()),
        );
        opt("--correction", self.correction.clone());
        opt(
            "--start",
            self.start
                .and_then(|o| clap::ValueEnum::to_possible_value(&o))
                .map(|p| p.get_name().to_string()),
        );
        opt("--variant", self.variant.clone());
        opt("--gossip-rounds", self.gossip_rounds.map(|x| x.to_string()));
        opt("--correction-time", self.correction_time.map(|x| x.to_string()));
        v
    }
}

#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    #[command(flatten)]
    pub alg: AlgoArgs,
    /// Number of processes P (N).
    #[arg(long, default_value_t = 65536)]
    pub nodes: u32,
    /// LogP latency L [default: 2].
    #[arg(long = "L")]
    pub l: Option<u64>,
    /// LogP overhead o (> 0) [default: 1].
    #[arg(long = "o")]
    pub o: Option<u64>,
    #[command(flatten)]
    pub loggp: LoggpArgs,
    /// Processes dead before the operation: a count (5), a percentage (1%) or a fraction (0.01)
    /// [default: 1%].
    #[arg(long)]
    pub faults: Option<String>,
    /// These ranks are dead before the operation (comma-separated; overrides --faults).
    #[arg(long)]
    pub dead: Option<String>,
    /// Random processes that die during each run, at a uniform random time in (0, T] (T: the
    /// algorithm's fault-free latency), never at 0: a death at 0 is a dead-before process.
    #[arg(long = "online-faults", default_value_t = 0)]
    pub online_faults: u32,
    /// Specific online failures: RANK@TIME,... (TIME 0: dead before the operation).
    #[arg(long)]
    pub kill: Option<String>,
    /// Modeled failure-detector delay (BFB) [default: 10].
    #[arg(long = "detect-delay")]
    pub detect_delay: Option<u64>,
    /// The senders know the processes dead before the operation (their transport has
    /// suspected them, as `bench`'s runs after a crash): a send to one is refused at once and
    /// costs nothing [default: LogP, it costs a send as any other].
    #[arg(long = "known-dead")]
    pub known_dead: bool,
    /// How receives occupy a process: queued (LogP: one receive at a time, `o` each) or
    /// parallel (Corrected Gossip's model: every message lands `o + L + o` after its send)
    /// [default: queued].
    #[arg(long, value_parser = ["queued", "parallel"])]
    pub receives: Option<String>,
    /// The processes share C cores (rank r on core r mod C, as bench's workers serve their
    /// nodes), each core doing one send or receive at a time [default: a core per process].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cores: Option<u32>,
    /// With --cores: each core visits its processes in turn (as bench's workers step their
    /// nodes), a visit of a process with nothing to do costing U time units (bench's model
    /// uses its measured `node_hop.visit_ns`) [default: 0, switching is free].
    #[arg(long = "core-visit", value_name = "U", value_parser = clap::value_parser!(u64).range(0..=1u64 << 32))]
    pub core_visit: Option<u64>,
    /// With --core-visit: a process's visit with work holds its core U time units more after
    /// its last send or receive before the core moves on, as a worker's node polls once more
    /// after a receive (bench's model uses its measured `node_hop.work_ns`) [default: 0].
    #[arg(long = "core-work", value_name = "U", value_parser = clap::value_parser!(u64).range(0..=1u64 << 32))]
    pub core_work: Option<u64>,
    /// With --core-visit: a visit that received only from its own core holds its core U time
    /// units after its last send or receive instead of --core-work's (bench's model uses its
    /// measured `node_hop.local_work_ns`) [default: --core-work's].
    #[arg(long = "core-local-work", value_name = "U", value_parser = clap::value_parser!(u64).range(0..=1u64 << 32))]
    pub core_local_work: Option<u64>,
    /// With --cores: a message from a process of the same core costs its receiver U time
    /// units instead of o_r, everything from the end of the sender's send (so a visit that
    /// only sent then holds its core nothing more), as a worker's node finds a message its own
    /// core just handled in its cache (bench's model uses its measured `node_hop.local_or_ns`)
    /// [default: o_r, and --core-work after every visit with work].
    #[arg(long = "core-local-receive", value_name = "U", value_parser = clap::value_parser!(u64).range(1..=1u64 << 32))]
    pub core_local_receive: Option<u64>,
    /// With --core-visit: a process's visit (idle, or before its work) costs U time units more
    /// for each process beyond the first that has sent it a message, as a worker's node reads
    /// one in-process ring per peer that ever sent to it on every poll (bench's model uses its
    /// measured `node_hop.ring_poll_ns`); a decimal number. The senders are those of the
    /// first 64 runs [default: 0].
    #[arg(long = "core-poll-per-source", value_name = "U", value_parser = parse_units)]
    pub core_poll_per_source: Option<f64>,
    /// Monte Carlo runs.
    #[arg(long, default_value_t = 1000)]
    pub runs: u64,
    /// Base seed; run i uses a seed derived from (seed, i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Per-run event cap (a run over it is counted as aborted) [default: 4000·P + 10^7].
    #[arg(long = "max-events")]
    pub max_events: Option<u64>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the events of run 0 as CSV (time,node,event,peer,label) to FILE.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// Never show a progress bar.
    #[arg(long = "no-progress")]
    pub no_progress: bool,
    /// Exit 0 even when runs were aborted at the event cap (`--max-events`; bmg-build:
    /// `--max-phases`). Without it any aborted run is reported on stderr and the exit code is 3.
    #[arg(long = "allow-aborts")]
    pub allow_aborts: bool,
    #[command(flatten)]
    pub overlay: OverlayArgs,
}

impl SimArgs {
    /// The typed simulation spec of these flags.
    pub fn spec(&self) -> SimSpec {
        SimSpec {
            alg: self.alg.spec(),
            nodes: self.nodes,
            l: self.l.unwrap_or(2),
            o: self.o.unwrap_or(1),
            loggp: self.loggp.spec(),
            faults: self.faults.clone().unwrap_or_else(|| "1%".into()),
            dead: self.dead.clone(),
            online_faults: self.online_faults,
            kill: self.kill.clone(),
            detect_delay: self.detect_delay.unwrap_or(10),
            known_dead: self.known_dead,
            receives: self.receives.clone(),
            cores: self.cores,
            core_visit: self.core_visit,
            core_work: self.core_work,
            core_local_work: self.core_local_work,
            core_local_receive: self.core_local_receive,
            core_poll_per_source: self.core_poll_per_source,
            runs: self.runs,
            seed: self.seed,
            threads: self.threads,
            max_events: self.max_events,
        }
    }

    /// Validates the flags into a simulation setup; errors are one line.
    pub fn setup(&self) -> Result<Setup, String> {
        reject_unused(&self.overlay)?;
        if self.detect_delay.is_some() && self.alg.algo != AlgoArg::Bfb {
            // The other algorithms have no failure detector to delay.
            return Err("--detect-delay applies to --algo bfb only (its modeled failure detector)".into());
        }
        Setup::from_spec(&self.spec())
    }
}

/// LogGP parameters beside `--L`/`--o`: the defaults give exactly LogP.
#[derive(Args, Debug, Clone, Default)]
pub struct LoggpArgs {
    /// LogGP send overhead o_s (> 0) [default: --o].
    #[arg(long = "os")]
    pub os: Option<u64>,
    /// LogGP receive overhead o_r (> 0) [default: --o].
    #[arg(long = "or")]
    pub or: Option<u64>,
    /// LogGP gap g: least time between the starts of two sends (or receives) of a process
    /// [default: 0, never binds, as LogP's g <= o].
    #[arg(long = "g")]
    pub g: Option<u64>,
    /// LogGP G: time per byte after a message's first (needs --bytes).
    #[arg(long = "G")]
    pub big_g: Option<f64>,
    /// Message size k in bytes for --G: each send takes G·(k−1) longer.
    #[arg(long = "bytes")]
    pub bytes: Option<u64>,
    /// Noisy LogP: a JSON file of per-message o_s/o_r/L distributions (samples, quantiles or
    /// constants, in LogP time units; see src/sim/noise.rs).
    #[arg(long = "noise")]
    pub noise: Option<std::path::PathBuf>,
}

impl LoggpArgs {
    /// The typed LogGP spec of these flags.
    pub fn spec(&self) -> LoggpSpec {
        LoggpSpec {
            os: self.os,
            or: self.or,
            g: self.g,
            big_g: self.big_g,
            bytes: self.bytes,
            noise: self.noise.clone(),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct ReproduceArgs {
    /// Fewer runs and smaller sizes (minutes instead of tens of minutes).
    #[arg(long)]
    pub quick: bool,
    /// Output file.
    #[arg(long, default_value = "docs/reproduction.md")]
    pub out: std::path::PathBuf,
    /// Worker threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Which schedulers to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SchedulerName {
    Synchronous,
    Asynchronous,
    Both,
}

/// Flags of the overlay algorithms (rejected for the broadcast ones).
#[derive(Args, Debug, Clone, Default)]
pub struct OverlayArgs {
    /// bmg-build: launch trees, comma-separated: binary, binomial, random:DEGREE
    /// [default: binomial,binary].
    #[arg(long = "launch-tree")]
    pub launch_tree: Option<String>,
    /// bmg-build: §4 scheduler(s) [default: both].
    #[arg(long, value_enum)]
    pub scheduler: Option<SchedulerName>,
    /// bmg-build: a quiet process re-runs its spontaneous rules every R phases [default: 64].
    #[arg(long)]
    pub refresh: Option<u32>,
    /// bmg-build: start from random states with 4·N random messages in the channels
    /// (self-stabilization) instead of §4's empty start.
    #[arg(long)]
    pub corrupted: bool,
    /// bmg-build: give up a run after this many phases [default: 1000000].
    #[arg(long = "max-phases")]
    pub max_phases: Option<u64>,
    /// bmg-build: after convergence, crash K random processes for good, one at a time, each
    /// followed by the repair (the launch tree mended, N one less); at most --nodes − 2, and
    /// all but two of a smaller size's processes [default: 0].
    #[arg(long)]
    pub crashes: Option<u32>,
}

impl OverlayArgs {
    /// The first overlay flag given, if any.
    pub fn given(&self) -> Option<&'static str> {
        [
            (self.launch_tree.is_some(), "--launch-tree"),
            (self.scheduler.is_some(), "--scheduler"),
            (self.refresh.is_some(), "--refresh"),
            (self.corrupted, "--corrupted"),
            (self.max_phases.is_some(), "--max-phases"),
            (self.crashes.is_some(), "--crashes"),
        ]
        .into_iter()
        .find(|x| x.0)
        .map(|x| x.1)
    }
}

/// Is `algo` one of the overlay algorithms this module runs?
pub fn is_overlay(algo: AlgoArg) -> bool {
    matches!(
        algo,
        AlgoArg::BmgBuild | AlgoArg::Dissemination | AlgoArg::FailureNotices
    )
}

/// Errors if an overlay flag is given to a broadcast algorithm.
pub fn reject_unused(a: &OverlayArgs) -> Result<(), String> {
    match a.given() {
        Some(flag) => Err(format!("{flag} applies to --algo bmg-build only")),
        None => Ok(()),
    }
}

/// A non-negative decimal number of time units (at most 2^32).
fn parse_units(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(u) if u.is_finite() && (0.0..=4_294_967_296.0).contains(&u) => Ok(u),
        _ => Err(format!("'{v}' is not a number of time units from 0 to 2^32")),
    }
}
