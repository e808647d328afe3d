//! `ftcoll node`: one node of a multi-process run. Rank and size come from the flags or the
//! launcher's environment (Slurm `SLURM_PROCID`/`SLURM_NTASKS`, Open MPI
//! `OMPI_COMM_WORLD_RANK`/`SIZE`, MPICH/PMI `PMI_RANK`/`PMI_SIZE`); peers from a hostfile; the
//! run is coordinated over a control channel (`--control`, the `bench --procs` parent).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::cli::args::AlgoArgs;
use crate::cli::config::resolve_algo;
use crate::model::LogP;
use crate::protocol::bcast::algo::Visit;
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::TransportKind;
use crate::runtime::cluster::PollMode;
use crate::runtime::kill::parse_kills;
use crate::runtime::procs::{
    NodeExit, NodeSpec, parse_hostfile, rank_from_env, rendezvous, run_node, run_node_with, unix_ns,
};
use crate::transport::Transport;
use crate::wire::WireMessage;

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
    /// Peer addresses: one `IP:port` per line in rank order, or `RANK IP:port` lines.
    #[arg(long, required_unless_present = "rendezvous", conflicts_with = "rendezvous")]
    pub hostfile: Option<PathBuf>,
    /// Exchange addresses through this directory instead (shared by all nodes of the job).
    #[arg(long)]
    pub rendezvous: Option<PathBuf>,
    /// With --rendezvous: the IP address to bind and publish.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// The coordinator's control address (`IP:port`).
    #[arg(long)]
    pub control: SocketAddr,
    /// The run's common clock epoch, ns since the Unix epoch [default: now].
    #[arg(long = "epoch-unix-ns")]
    pub epoch_unix_ns: Option<u64>,
    /// Job id: datagrams of other jobs are dropped.
    #[arg(long, default_value_t = 1)]
    pub job: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// LogP o in ns (the protocols' time unit).
    #[arg(long = "o-ns", default_value_t = 1000)]
    pub o_ns: u64,
    /// LogP L in ns.
    #[arg(long = "L-ns", default_value_t = 2000)]
    pub l_ns: u64,
    /// Broadcast payload in bytes.
    #[arg(long, default_value_t = 8)]
    pub size: usize,
    #[arg(long, value_enum, default_value = "adaptive")]
    pub poll: PollMode,
    /// Give up when the coordinator has not answered within this many ms.
    #[arg(long = "control-timeout-ms", default_value_t = 30_000)]
    pub control_timeout_ms: u64,
    /// Crash specs (see `bench --kill`); only the one naming this rank applies.
    #[arg(long)]
    pub kill: Option<String>,
    /// Transport: udp, or verbs (QP data exchanged through --verbs-dir or --rendezvous).
    #[arg(long, value_enum, default_value = "udp")]
    pub transport: TransportKind,
    /// With --transport verbs: the directory (seen by every node) for QP data [default:
    /// --rendezvous].
    #[arg(long = "verbs-dir")]
    pub verbs_dir: Option<PathBuf>,
    #[command(flatten)]
    pub verbs: crate::cli::verbs::VerbsArgs,
}

/// Runs `ftcoll node`; prints one JSON line with the node's counters when it exits.
pub fn run(a: &NodeArgs) -> Result<(), String> {
    let (rank, n) = match (a.rank, a.nodes) {
        (Some(r), Some(n)) => (r, n),
        _ => rank_from_env()
            .ok_or("rank and size not given: use --rank and --nodes, or run under Slurm, Open MPI or a PMI launcher")?,
    };
    if n < 2 || rank >= n {
        return Err(format!(
            "rank {rank} of {n} nodes is invalid (need 0 <= rank < nodes, nodes >= 2)"
        ));
    }
    if a.o_ns == 0 {
        return Err("--o-ns must be at least 1".into());
    }
    if a.size > 1024 {
        return Err(format!("--size must be at most 1024 bytes, got {}", a.size));
    }
    a.verbs.apply(a.transport)?;
    let verbs_dir = match (a.transport, a.verbs_dir.as_ref().or(a.rendezvous.as_ref())) {
        (TransportKind::Inproc, _) => return Err("--transport inproc does not apply to node processes".into()),
        (TransportKind::Verbs, None) => {
            return Err("--transport verbs needs --rendezvous DIR or --verbs-dir DIR (QP numbers, LIDs/GIDs and PSNs are exchanged through it)".into());
        }
        (TransportKind::Verbs, Some(d)) => Some(d.clone()),
        (TransportKind::Udp, _) if a.verbs_dir.is_some() => {
            return Err("--verbs-dir applies to --transport verbs only".into());
        }
        (TransportKind::Udp, _) => None,
    };
    let peers = match (&a.hostfile, &a.rendezvous) {
        _ if verbs_dir.is_some() => Vec::new(),
        (Some(h), _) => {
            let text = std::fs::read_to_string(h).map_err(|e| format!("cannot read hostfile {}: {e}", h.display()))?;
            parse_hostfile(&text, n)?
        }
        (None, Some(dir)) => rendezvous(dir, rank, n, a.bind, std::time::Duration::from_secs(60))?,
        (None, None) => return Err("give --hostfile or --rendezvous".into()),
    };
    let kill = match a.kill.as_deref() {
        None | Some("none") => None,
        Some(k) => parse_kills(k, n)?.into_iter().find(|k| k.rank == rank),
    };
    let model = LogP {
        l: (a.l_ns + a.o_ns / 2) / a.o_ns,
        o: 1,
    };
    let algo = resolve_algo(&a.alg, n, model, 0)?;
    let spec = NodeSpec {
        rank,
        n,
        peers,
        control: a.control,
        epoch_unix_ns: a.epoch_unix_ns.unwrap_or_else(unix_ns),
        job: a.job,
        seed: a.seed,
        tick_ns: a.o_ns,
        payload_len: a.size,
        poll: a.poll,
        kill,
        control_timeout: std::time::Duration::from_millis(a.control_timeout_ms),
    };
    let transport = match &verbs_dir {
        Some(dir) => Some(crate::transport::verbs::node_endpoint(
            rank,
            n,
            a.job,
            a.seed,
            dir,
            std::time::Duration::from_secs(60),
        )?),
        None => None,
    };
    let exit = algo.dispatch(n, model, RunNode(&spec, transport))??;
    println!("{}", serde_json::to_string(&exit).map_err(|e| e.to_string())?);
    Ok(())
}

struct RunNode<'a>(&'a NodeSpec, Option<Box<dyn Transport>>);

impl Visit for RunNode<'_> {
    type Out = Result<NodeExit, String>;
    fn visit<P>(self, shared: &P::Shared) -> Self::Out
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        match self.1 {
            Some(t) => run_node_with::<P>(shared, self.0, t),
            None => run_node::<P>(shared, self.0),
        }
    }
}
