//! `ftcoll node`: the flags of one node of a multi-process run (the `bench --procs` parent's
//! children, or the ranks of a launched `--join` run). They build a [`NodeRunSpec`], which
//! [`crate::experiment::bench::node`] checks and runs; this prints the node's counters.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::cli::flags::{AlgoArgs, WALL_MAX_MS, WALL_MAX_NS};
use crate::cli::values::{PollArg, TransportArg};
use crate::experiment::bench::node::{NodeEnv, NodeRunSpec};

#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    #[command(flatten)]
    pub alg: AlgoArgs,
    /// This node's rank [default: from the launcher's environment].
    #[arg(long)]
    pub rank: Option<u32>,
    /// Nodes in the run [default: from the launcher's environment].
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Peer addresses: one `IP:port` per line in rank order, or `RANK IP:port` lines [default
    /// with --control alone: the node binds a port on 127.0.0.1 and gets the table from the
    /// coordinator, as `bench --procs` starts its nodes].
    #[arg(long, conflicts_with_all = ["rendezvous", "join"])]
    pub hostfile: Option<PathBuf>,
    /// Exchange addresses through this directory instead (shared by all nodes of the job).
    #[arg(long)]
    pub rendezvous: Option<PathBuf>,
    /// With --rendezvous: the IP address to bind and publish.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// The coordinator's control address (`IP:port`).
    #[arg(long, required_unless_present = "join", conflicts_with = "join")]
    pub control: Option<SocketAddr>,
    /// Rendezvous and control through rank 0's coordinator at `IP:port` (a `ftcoll bench
    /// --join IP:port` process of rank 0): the address table and LogP unit come from it.
    #[arg(long, value_name = "IP:PORT", conflicts_with = "rendezvous")]
    pub join: Option<SocketAddr>,
    /// The run's common clock epoch, ns since the Unix epoch [default: now].
    #[arg(long = "epoch-unix-ns")]
    pub epoch_unix_ns: Option<u64>,
    /// Job id: datagrams of other jobs are dropped [default: 1; with --join, the id `bench
    /// --join` derives from --seed].
    #[arg(long)]
    pub job: Option<u64>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// LogP o in ns (the protocols' time unit).
    #[arg(long = "o-ns", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub o_ns: u64,
    /// LogP L in ns.
    #[arg(long = "L-ns", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub l_ns: u64,
    /// LogGP send overhead o_s in ns [default: --o-ns].
    #[arg(long = "os-ns", value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub os_ns: Option<u64>,
    /// LogGP receive overhead o_r in ns [default: --o-ns].
    #[arg(long = "or-ns", value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub or_ns: Option<u64>,
    /// Broadcast payload in bytes.
    #[arg(long, default_value_t = 8)]
    pub size: usize,
    #[arg(long, value_enum, default_value = "adaptive")]
    pub poll: PollArg,
    /// Packet authentication: `on`, a keyed MAC on every UDP datagram (key from --key-file,
    /// else FTCOLL_KEY, else none: a loud warning), or `off` (logged loudly).
    #[arg(long, value_enum, default_value = "on")]
    pub auth: crate::cli::auth::AuthMode,
    /// The job's secret key: a file whose first line is 32 hex digits.
    #[arg(long = "key-file")]
    pub key_file: Option<std::path::PathBuf>,
    /// Give up when the coordinator has not answered within this many ms.
    #[arg(long = "control-timeout-ms", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS))]
    pub control_timeout_ms: u64,
    /// Emulated one-way link delay in ns, held in the UDP transport on receive (for kernels
    /// without `netem`; the netns script passes it) [default: 0, off].
    #[arg(long = "emulate-delay-ns", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub emulate_delay_ns: u64,
    /// Uniform jitter added to --emulate-delay-ns, ns.
    #[arg(long = "emulate-jitter-ns", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub emulate_jitter_ns: u64,
    /// Drop this fraction of the datagrams this node receives (`bench --loss`; UDP, a node
    /// of `bench --procs`) [default: 0].
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub loss: f64,
    /// Crash specs (see `bench --kill`); only the one naming this rank applies.
    #[arg(long)]
    pub kill: Option<String>,
    /// Transport: udp, or verbs (QP data exchanged through --verbs-dir or --rendezvous).
    #[arg(long, value_enum, default_value = "udp")]
    pub transport: TransportArg,
    /// With --transport verbs: the directory (seen by every node) for QP data [default:
    /// --rendezvous].
    #[arg(long = "verbs-dir")]
    pub verbs_dir: Option<PathBuf>,
    /// This launch's id, the same on every process of it and new for each launch: the files
    /// of --rendezvous / --verbs-dir go under DIR/run-ID/ and, with a key, are sealed and the
    /// datagrams signed with a key derived from it (with --hostfile too) [default: the launcher's, Slurm
    /// SLURM_JOB_ID.SLURM_STEP_ID or Open MPI PMIX_NAMESPACE; a keyed run needs one].
    #[arg(long = "run-id", value_name = "STR")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub verbs: crate::cli::verbs::VerbsArgs,
}

impl NodeArgs {
    /// The node run these flags describe.
    pub fn to_spec(&self) -> NodeRunSpec {
        NodeRunSpec {
            alg: self.alg.spec(),
            rank: self.rank,
            nodes: self.nodes,
            hostfile: self.hostfile.clone(),
            rendezvous: self.rendezvous.clone(),
            bind: self.bind,
            control: self.control,
            join: self.join,
            epoch_unix_ns: self.epoch_unix_ns,
            job: self.job,
            seed: self.seed,
            o_ns: self.o_ns,
            l_ns: self.l_ns,
            os_ns: self.os_ns,
            or_ns: self.or_ns,
            size: self.size,
            poll: self.poll.into(),
            control_timeout_ms: self.control_timeout_ms,
            emulate_delay_ns: self.emulate_delay_ns,
            emulate_jitter_ns: self.emulate_jitter_ns,
            loss: self.loss,
            kill: self.kill.clone(),
            transport: self.transport.kind(),
            verbs_dir: self.verbs_dir.clone(),
            run_id: self.run_id.clone(),
        }
    }
}

/// Runs `ftcoll node`; prints one JSON line with the node's counters when it exits.
pub fn run(a: &NodeArgs) -> Result<(), String> {
    let configure_verbs = |t| a.verbs.apply(t);
    let job_key = || crate::cli::auth::job_key(a.auth, a.key_file.as_deref(), false);
    let exit = a.to_spec().run(&NodeEnv {
        configure_verbs: &configure_verbs,
        job_key: &job_key,
    })?;
    println!("{}", serde_json::to_string(&exit).map_err(|e| e.to_string())?);
    Ok(())
}
