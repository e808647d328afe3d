//! `ftcoll node`: one node of a multi-process run. Rank and size come from the flags or the
//! launcher's environment (Slurm `SLURM_PROCID`/`SLURM_NTASKS`, Open MPI
//! `OMPI_COMM_WORLD_RANK`/`SIZE`, MPICH/PMI `PMI_RANK`/`PMI_SIZE`); peers from a hostfile; the
//! run is coordinated over a control channel (`--control`, the `bench --procs` parent).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::cli::flags::AlgoArgs;
use crate::cli::values::{PollArg, TransportArg};
use crate::experiment::algo::resolve_algo;
use crate::experiment::launch::joined::{JoinedNode, RunNode, run_joined_node};
use crate::model::LogP;
use crate::runtime::TransportKind;
use crate::runtime::control::ChildAgent;
use crate::runtime::kill::parse_kills;
use crate::runtime::procs::{NodeSpec, parse_hostfile, rendezvous, unix_ns};
use crate::wire::dispatch::Dispatch;

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
    #[arg(long, required_unless_present_any = ["rendezvous", "join"], conflicts_with_all = ["rendezvous", "join"])]
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
    #[arg(long = "o-ns", default_value_t = 1000)]
    pub o_ns: u64,
    /// LogP L in ns.
    #[arg(long = "L-ns", default_value_t = 2000)]
    pub l_ns: u64,
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
    #[arg(long = "control-timeout-ms", default_value_t = 30_000)]
    pub control_timeout_ms: u64,
    /// Emulated one-way link delay in ns, held in the UDP transport on receive (for kernels
    /// without `netem`; the netns script passes it) [default: 0, off].
    #[arg(long = "emulate-delay-ns", default_value_t = 0)]
    pub emulate_delay_ns: u64,
    /// Uniform jitter added to --emulate-delay-ns, ns.
    #[arg(long = "emulate-jitter-ns", default_value_t = 0)]
    pub emulate_jitter_ns: u64,
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
    #[command(flatten)]
    pub verbs: crate::cli::verbs::VerbsArgs,
}

/// Runs `ftcoll node`; prints one JSON line with the node's counters when it exits.
pub fn run(a: &NodeArgs) -> Result<(), String> {
    let (rank, n) = crate::runtime::procs::rank_and_size(a.rank, a.nodes, "nodes")?;
    if a.o_ns == 0 {
        return Err("--o-ns must be at least 1".into());
    }
    if a.size > 1024 {
        return Err(format!("--size must be at most 1024 bytes, got {}", a.size));
    }
    if let Some(coordinator) = a.join {
        if a.transport.kind() == TransportKind::Inproc {
            return Err("--transport inproc does not apply to node processes".into());
        }
        if a.verbs_dir.is_some() {
            return Err("--verbs-dir does not apply to --join (the coordinator relays the connection data)".into());
        }
        a.verbs.apply(a.transport.kind())?;
        if a.transport.kind() == TransportKind::Verbs {
            crate::transport::verbs::probe()?;
        }
        if rank == 0 {
            return Err("rank 0 coordinates a joined run: start it as `ftcoll bench --join ADDR --rank 0`".into());
        }
        let kills = match a.kill.as_deref() {
            None | Some("none") => Vec::new(),
            Some(k) => parse_kills(k, n)?,
        };
        let exit = run_joined_node(&JoinedNode {
            auth: crate::cli::auth::job_key(a.auth, a.key_file.as_deref(), false)?,
            alg: &a.alg.spec(),
            coordinator,
            bind: (!a.bind.is_loopback()).then_some(a.bind),
            rank,
            n,
            job: a.job.unwrap_or(crate::experiment::launch::job::bench(a.seed)),
            seed: a.seed,
            size: a.size,
            poll: a.poll.into(),
            kills: &kills,
            timeout: std::time::Duration::from_millis(a.control_timeout_ms),
            link_delay: (
                std::time::Duration::from_nanos(a.emulate_delay_ns),
                std::time::Duration::from_nanos(a.emulate_jitter_ns),
            ),
            boot: None,
            verbs: a.transport.kind() == TransportKind::Verbs,
        })?;
        println!("{}", serde_json::to_string(&exit).map_err(|e| e.to_string())?);
        return Ok(());
    }
    a.verbs.apply(a.transport.kind())?;
    let verbs_dir = match (a.transport.kind(), a.verbs_dir.as_ref().or(a.rendezvous.as_ref())) {
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
    let control = a.control.ok_or("give --control or --join")?;
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
    let algo = resolve_algo(&a.alg.spec(), n, model, 0)?;
    let spec = NodeSpec {
        rank,
        n,
        peers,
        control,
        epoch_unix_ns: a.epoch_unix_ns.unwrap_or_else(unix_ns),
        job: a.job.unwrap_or(1),
        seed: a.seed,
        tick_ns: a.o_ns,
        payload_len: a.size,
        poll: a.poll.into(),
        kill,
        control_timeout: std::time::Duration::from_millis(a.control_timeout_ms),
        sigkill_self: false,
        auth: crate::cli::auth::job_key(a.auth, a.key_file.as_deref(), false)?,
        link_delay: (
            std::time::Duration::from_nanos(a.emulate_delay_ns),
            std::time::Duration::from_nanos(a.emulate_jitter_ns),
        ),
    };
    let mut agent =
        ChildAgent::new(control, a.job.unwrap_or(1), rank, n).map_err(|e| format!("control socket: {e}"))?;
    agent.set_key(spec.auth.clone());
    let transport = match &verbs_dir {
        Some(dir) => Some(crate::transport::verbs::node_endpoint(
            rank,
            n,
            a.job.unwrap_or(1),
            a.seed,
            dir,
            std::time::Duration::from_secs(60),
        )?),
        None => None,
    };
    let exit = algo.dispatch(n, model, RunNode(&spec, transport, agent))??;
    println!("{}", serde_json::to_string(&exit).map_err(|e| e.to_string())?);
    Ok(())
}
