//! A node of a launched run (`bench --join`, `bench --boot`, `ftcoll node --join`): it joins
//! rank 0's coordinator (or builds the BMG overlay from its launch-tree parent's address),
//! gets the address table and the run's LogP unit, resolves the algorithm and runs until told
//! to stop ([`run_joined_node`]).

use std::net::SocketAddr;

use crate::experiment::algo::{AlgoSpec, resolve_algo};
use crate::model::BenchModel;
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::cluster::PollMode;
use crate::runtime::control::ChildAgent;
use crate::runtime::join::JobParams;
use crate::runtime::kill::{Kill, KillPoint};
use crate::runtime::procs::{NodeExit, NodeSpec, run_node, run_node_with, unix_ns};
use crate::transport::Transport;
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

/// Runs one node of `NodeSpec` over the given transport (else the spec's UDP socket) for
/// the algorithm [`Algo::dispatch`](crate::protocol::bcast::algo::Algo) resolves.
pub(crate) struct RunNode<'a>(pub &'a NodeSpec, pub Option<Box<dyn Transport>>, pub ChildAgent);

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
    /// The algorithm (every rank resolves it alike, with the run's LogP unit).
    pub alg: &'a AlgoSpec,
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
    // Set up as a data endpoint's own: it becomes this node's endpoint afterwards.
    let sock = crate::transport::udp::UdpTransport::bind_socket(SocketAddr::V4(b.me))
        .map_err(|e| format!("cannot bind {}: {e}", b.me))?;
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
        // The control plane joins by challenge–response like `--join` (the coordinator's
        // table, already known from the overlay, is not used): its datagrams are then sealed
        // with the run's session key.
        agent.join(SocketAddr::V4(b.me), j.timeout)?;
        let p = JobParams {
            o_ns: b.o_ns,
            l_ns: b.l_ns,
            epoch_unix_ns: unix_ns(),
            run: [0; 16],
        };
        // The bootstrap ran before any run nonce was known: the datagrams keep the job key.
        // Its socket stays the node's (the data endpoint over UDP, the verbs records' channel).
        let key = j.auth.clone();
        return run_launched(j, peers, p, control, agent, sock, true, key);
    }
    let crate::runtime::control::child::Joined {
        sock,
        agent,
        peers,
        params: p,
    } = crate::runtime::control::child::join_with_socket(
        j.coordinator,
        j.bind,
        j.job,
        j.rank,
        j.n,
        j.auth.clone(),
        j.timeout,
    )?;
    // The run's datagrams are sealed with its session key, from the nonce in rank 0's table.
    let key = j.auth.as_ref().map(|k| k.session(&p.run));
    run_launched(j, peers, p, j.coordinator, agent, sock, false, key)
}

/// A launched node once it has the address table and the run's parameters; `sock`: the
/// node's socket, bound at its address in the table (the UDP endpoint is built on it; a
/// booted run's verbs records go over it, `booted`); `key`: what the run's datagrams are
/// sealed with.
#[allow(clippy::too_many_arguments)]
fn run_launched(
    j: &JoinedNode<'_>,
    peers: Vec<SocketAddr>,
    p: JobParams,
    control: SocketAddr,
    mut agent: ChildAgent,
    sock: std::net::UdpSocket,
    booted: bool,
    key: Option<crate::transport::udp::auth::AuthKey>,
) -> Result<NodeExit, String> {
    // Verbs: the QPs are connected here; the coordinator's go-ahead (it waits for every node's
    // clock report, sent after this) is the barrier that has every QP in RTR before a SEND.
    let transport = if j.verbs {
        let max = crate::transport::MAX_PAYLOAD as u32;
        let mut exchange = |mine: &[crate::transport::verbs::conn::ConnInfo]| match booted {
            true => {
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
                crate::runtime::conn_peers::exchange(&sock, &peers, mine, &cfg).map(|r| r.theirs)
            }
            false => agent.exchange_conns(mine, max, j.timeout),
        };
        Some(crate::transport::verbs::connected_endpoint(
            j.rank,
            j.n,
            j.job,
            j.seed,
            &mut exchange,
        )?)
    } else {
        // As `run_node` configures its own endpoint, on the socket kept since the table.
        let cfg = crate::transport::udp::UdpConfig {
            job: j.job,
            seed: j.seed,
            delay: j.link_delay.0,
            delay_jitter: j.link_delay.1,
            auth: key.clone(),
            ..crate::transport::udp::UdpConfig::default()
        };
        let t = crate::transport::udp::UdpTransport::from_socket(j.rank, sock, &peers, cfg)
            .map_err(|e| format!("cannot open the endpoint at {}: {e}", peers[j.rank as usize]))?;
        Some(Box::new(t) as Box<dyn Transport>)
    };
    // The job parameters carry one o: o_s = o_r here.
    let model = BenchModel::new(p.o_ns, p.o_ns, p.l_ns);
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
    let algo = resolve_algo(j.alg, j.n, model.mean_logp(), dead)?;
    let spec = NodeSpec {
        rank: j.rank,
        n: j.n,
        peers,
        control,
        epoch_unix_ns: p.epoch_unix_ns,
        job: j.job,
        seed: j.seed,
        tick_ns: model.unit_ns,
        payload_len: j.size,
        poll: j.poll,
        kill,
        control_timeout: j.timeout,
        sigkill_self,
        link_delay: j.link_delay,
        loss: 0.0,
        auth: key,
    };
    algo.dispatch(j.n, model.loggp, RunNode(&spec, transport, agent))?
}
