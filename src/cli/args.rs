//! The command line: `ftcoll COMMAND [FLAGS]`, one variant per command.

use clap::{Parser, Subcommand};

use crate::cli::flags::{ReproduceArgs, SimArgs};

/// Fault-tolerant group communication for HPC clusters: simulate, model and reproduce.
#[derive(Parser, Debug)]
#[command(name = "ftcoll", version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("FTCOLL_GIT_REV"), ")"), about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Monte Carlo simulation of one broadcast algorithm in the LogP model.
    Sim(SimArgs),
    /// The papers' analytic predictions for the same flags as `sim`.
    Model(SimArgs),
    /// Regenerate docs/reproduction.md: the papers' results next to ours.
    Reproduce(ReproduceArgs),
    /// The main job: broadcasts on a local cluster (UDP loopback or in-process), crashes
    /// injected, latencies against the LogP prediction.
    Bench(crate::cli::bench::BenchArgs),
    /// Measure LogP's o, g and L of a transport (Netgauge PRTT and the direct method).
    Logp(crate::cli::logp::LogpArgs),
    /// One node of a multi-process run (started by `bench --procs` or a launcher).
    Node(crate::cli::node::NodeArgs),
    /// ERA agreements (early-returning agreement): `--sim` runs them in the LogP simulator.
    Agree(crate::cli::agree_args::AgreeArgs),
    /// One node process of `agree --procs` (started by it, not by hand).
    #[command(hide = true)]
    AgreeNode {
        /// The node's configuration (JSON).
        #[arg(long)]
        spec: String,
    },
    /// Stress loops: `stress agree` (agreements with random kills until --duration).
    Stress(crate::cli::stress::StressArgs),
    /// The runtime bootstrap on this machine: node processes given only their parent's
    /// address build the BMG overlay and all-gather the address table.
    Bootstrap(crate::cli::bootstrap::BootstrapArgs),
    /// One node of the bootstrap (rank, size, parent's address), as a launcher starts it.
    BootNode(crate::cli::bootstrap::BootNodeArgs),
    /// The bootstrap's launch tree: one `RANK PARENT` line per rank (rank 0's parent is `-`),
    /// for launchers that hand each node its parent's address (`bench --boot-parent`).
    LaunchTree {
        /// Nodes in the run.
        #[arg(long)]
        nodes: u32,
    },
    /// Figures (SVG or PNG): scaling, messages, correction (simulated), cdf (bench --hlog),
    /// compare (bench --json).
    Plot(crate::cli::plot::PlotArgs),
}
