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
use crate::model::LogP;
use crate::protocol::bcast::algo::Visit;
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::TransportKind;
use crate::runtime::cluster::PollMode;
use crate::runtime::control::ChildAgent;
use crate::runtime::join::JobParams;
use crate::runtime::kill::parse_kills;
use crate::runtime::kill::{Kill, KillPoint};
use crate::runtime::procs::{NodeExit, NodeSpec, parse_hostfile, rendezvous, run_node, run_node_with, unix_ns};
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
            alg: &a.alg,
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

struct RunNode<'a>(&'a NodeSpec, Option<Box<dyn Transport>>, ChildAgent);

impl Visit for RunNode<'_> {
    type Out = Result<NodeExit, String>;
    fn visit<P>(self, shared: &P::Shared) -> Self::Out
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        match self.1 {
            Some(t) => run_node_with::<P>(shared, self.0, t, self.2),
            None => run_node::<P>(shared, self.0, self.2),
        }
    }
}

/// One node of a launched run (`bench --join`): the node's part, for every rank.
pub struct JoinedNode<'a> {
    pub alg: &'a AlgoArgs,
    /// Rank 0's coordinator address.
    pub coordinator: SocketAddr,
    /// The IP to publish for this node's data socket [default: the interface toward the
    /// coordinator].
    pub bind: Option<std::net::IpAddr>,
    pub rank: u32,
    pub n: u32,
    pub job: u64,
    pub seed: u64,
    pub size: usize,
    pub poll: PollMode,
    /// Every crash of the run (all ranks resolve the algorithm alike); this rank's applies.
    pub kills: &'a [Kill],
    pub timeout: std::time::Duration,
    /// Emulated link delay and jitter (zero: off).
    pub link_delay: (std::time::Duration, std::time::Duration),
    /// The job's key (`None`: unauthenticated).
    pub auth: Option<crate::transport::udp::auth::AuthKey>,
    /// Rendezvous by the overlay bootstrap instead of through the coordinator (`bench
    /// --boot`): the node knows only its launch-tree parent; the coordinator is then at rank
    /// 0's address from the table, port `coordinator.port()`.
    pub boot: Option<BootSpec>,
    /// Over the verbs transport: QPs connected, once the address table is in, with the
    /// records the coordinator relays ([`crate::runtime::conn_relay`], `--join`) or those the
    /// peers exchange pairwise on their bootstrap sockets ([`crate::runtime::conn_peers`],
    /// `--boot`: no coordinator in the rendezvous).
    pub verbs: bool,
}

/// The overlay bootstrap's part of a launched node (a node needs only its parent's
/// address): its own address (kept as its data address afterwards), its parent's, and the
/// run's LogP unit, which every node is given alike since no coordinator hands it out.
#[derive(Clone, Copy, Debug)]
pub struct BootSpec {
    pub me: std::net::SocketAddrV4,
    pub parent: Option<std::net::SocketAddrV4>,
    pub o_ns: u64,
    pub l_ns: u64,
}

/// Builds the BMG overlay from the parent's address and all-gathers the address table
/// ([`crate::runtime::bootstrap::boot_keep`]); returns the table by rank and the socket.
fn boot_table(
    rank: u32,
    n: u32,
    job: u64,
    b: &BootSpec,
    timeout: std::time::Duration,
    key: Option<crate::transport::udp::auth::AuthKey>,
) -> Result<(Vec<SocketAddr>, std::net::UdpSocket), String> {
    let sock = std::net::UdpSocket::bind(b.me).map_err(|e| format!("cannot bind {}: {e}", b.me))?;
    let cfg = crate::runtime::bootstrap::BootConfig {
        rank,
        n,
        parent: b.parent,
        job,
        tick: std::time::Duration::from_millis(1),
        refresh: 16,
        linger: std::time::Duration::from_millis(300),
        timeout,
        drop_every: 0,
        key,
    };
    let booted = crate::runtime::bootstrap::boot_keep(sock, cfg)?;
    Ok((booted.addrs.iter().map(|&a| SocketAddr::V4(a)).collect(), booted.sock))
}

/// The local IP this host uses to reach `dst` (no packet is sent: a connected UDP socket).
pub(crate) fn local_ip_toward(dst: SocketAddr) -> std::io::Result<std::net::IpAddr> {
    let any: std::net::IpAddr = if dst.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let s = std::net::UdpSocket::bind((any, 0))?;
    s.connect(dst)?;
    Ok(s.local_addr()?.ip())
}

/// Joins the coordinator (rendezvous through rank 0), builds the algorithm with the run's
/// LogP unit from it, and runs the node until told to stop. A `sigkill` crash is carried out
/// by the process on itself.
pub fn run_joined_node(j: &JoinedNode<'_>) -> Result<NodeExit, String> {
    if let Some(b) = &j.boot {
        // The bootstrap's socket address becomes the data address: the table names it.
        let (peers, sock) = boot_table(j.rank, j.n, j.job, b, j.timeout, j.auth.clone())?;
        let control = SocketAddr::new(peers[0].ip(), j.coordinator.port());
        let mut agent = ChildAgent::new(control, j.job, j.rank, j.n).map_err(|e| format!("control socket: {e}"))?;
        agent.set_key(j.auth.clone());
        let p = JobParams {
            o_ns: b.o_ns,
            l_ns: b.l_ns,
            epoch_unix_ns: unix_ns(),
        };
        // Over UDP the socket is let go: the transport binds the same address next.
        return run_launched(j, peers, p, control, agent, j.verbs.then_some(sock));
    }
    let ip = match j.bind {
        Some(ip) => ip,
        None => {
            local_ip_toward(j.coordinator).map_err(|e| format!("no route to the coordinator {}: {e}", j.coordinator))?
        }
    };
    let me = std::net::UdpSocket::bind((ip, 0))
        .and_then(|s| s.local_addr())
        .map_err(|e| format!("cannot bind a UDP port on {ip}: {e}"))?;
    let mut agent = ChildAgent::new(j.coordinator, j.job, j.rank, j.n).map_err(|e| format!("control socket: {e}"))?;
    agent.set_key(j.auth.clone());
    let (peers, p): (Vec<SocketAddr>, JobParams) = agent.join(me, j.timeout)?;
    run_launched(j, peers, p, j.coordinator, agent, None)
}

/// A launched node once it has the address table and the run's parameters; `boot_sock`:
/// the bootstrap's socket, kept for the verbs records of a booted run.
fn run_launched(
    j: &JoinedNode<'_>,
    peers: Vec<SocketAddr>,
    p: JobParams,
    control: SocketAddr,
    mut agent: ChildAgent,
    boot_sock: Option<std::net::UdpSocket>,
) -> Result<NodeExit, String> {
    // Verbs: the QPs are connected here; the coordinator's go-ahead (it waits for every node's
    // clock report, sent after this) is the barrier that has every QP in RTR before a SEND.
    let transport = if j.verbs {
        let max = crate::transport::MAX_PAYLOAD as u32;
        let mut exchange = |mine: &[crate::transport::verbs::conn::ConnInfo]| match &boot_sock {
            Some(sock) => {
                let cfg = crate::runtime::conn_peers::PeerConfig {
                    rank: j.rank,
                    n: j.n,
                    job: j.job,
                    max_msg: max,
                    timeout: j.timeout,
                    linger: std::time::Duration::from_millis(300),
                    drop_every: 0,
                    key: j.auth.clone(),
                };
                crate::runtime::conn_peers::exchange(sock, &peers, mine, &cfg).map(|r| r.theirs)
            }
            None => agent.exchange_conns(mine, max, j.timeout),
        };
        Some(crate::transport::verbs::connected_endpoint(
            j.rank,
            j.n,
            j.job,
            j.seed,
            &mut exchange,
        )?)
    } else {
        None
    };
    let model = LogP {
        l: (p.l_ns + p.o_ns / 2) / p.o_ns,
        o: 1,
    };
    let (kill, sigkill_self) = match j.kills.iter().copied().find(|k| k.rank == j.rank) {
        Some(Kill {
            rank,
            point: KillPoint::SigKill { iter },
        }) => (
            Some(Kill {
                rank,
                point: KillPoint::OnReceive { iter },
            }),
            true,
        ),
        k => (k, false),
    };
    let dead = j.kills.iter().filter(|k| k.point == KillPoint::Start).count() as u32;
    let algo = resolve_algo(&j.alg.spec(), j.n, model, dead)?;
    let spec = NodeSpec {
        rank: j.rank,
        n: j.n,
        peers,
        control,
        epoch_unix_ns: p.epoch_unix_ns,
        job: j.job,
        seed: j.seed,
        tick_ns: p.o_ns,
        payload_len: j.size,
        poll: j.poll,
        kill,
        control_timeout: j.timeout,
        sigkill_self,
        link_delay: j.link_delay,
        auth: j.auth.clone(),
    };
    algo.dispatch(j.n, model, RunNode(&spec, transport, agent))?
}
