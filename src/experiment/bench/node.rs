//! One node of a multi-process bench run ([`NodeRunSpec`]): rank and size from the spec or the
//! launcher's environment (Slurm `SLURM_PROCID`/`SLURM_NTASKS`, Open MPI
//! `OMPI_COMM_WORLD_RANK`/`SIZE`, MPICH/PMI `PMI_RANK`/`PMI_SIZE`); peers from a hostfile or a
//! rendezvous directory, or the address table of rank 0's coordinator (`join`); the run is
//! coordinated over a control channel.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::experiment::algo::{AlgoSpec, resolve_algo};
use crate::experiment::launch::joined::{JoinedNode, RunNode, run_joined_node};
use crate::model::BenchModel;
use crate::runtime::TransportKind;
use crate::runtime::cluster::PollMode;
use crate::runtime::control::ChildAgent;
use crate::runtime::kill::parse_kills;
use crate::runtime::procs::{NodeExit, NodeSpec, parse_hostfile, rendezvous, udp_config, unix_ns};
use crate::transport::run_dir::{RunDir, RunId};
use crate::transport::udp::UdpTransport;
use crate::transport::udp::auth::AuthKey;
use crate::wire::dispatch::Dispatch;

/// A node process's run. `None` means the default described on each field.
#[derive(Clone, Debug)]
pub struct NodeRunSpec {
    pub alg: AlgoSpec,
    /// This node's rank and the run's size [default: from the launcher's environment].
    pub rank: Option<u32>,
    pub nodes: Option<u32>,
    /// Peer addresses, one per rank.
    pub hostfile: Option<PathBuf>,
    /// A directory shared by all nodes of the job, to exchange addresses through.
    pub rendezvous: Option<PathBuf>,
    /// The IP to bind and publish (loopback: let a joined node pick its interface).
    pub bind: IpAddr,
    /// The coordinator's control address.
    pub control: Option<SocketAddr>,
    /// Rendezvous and control through rank 0's coordinator here.
    pub join: Option<SocketAddr>,
    /// The run's common clock epoch, ns since the Unix epoch [default: now].
    pub epoch_unix_ns: Option<u64>,
    /// Job id [default: 1; with `join`, the bench job derived from `seed`].
    pub job: Option<u64>,
    pub seed: u64,
    /// LogP o and L, ns (the model: [`BenchModel`]).
    pub o_ns: u64,
    pub l_ns: u64,
    /// LogGP o_s and o_r, ns [default: `o_ns`].
    pub os_ns: Option<u64>,
    pub or_ns: Option<u64>,
    pub size: usize,
    pub poll: PollMode,
    pub control_timeout_ms: u64,
    pub emulate_delay_ns: u64,
    pub emulate_jitter_ns: u64,
    /// Fraction of received datagrams dropped (loss injection; not with `join`).
    pub loss: f64,
    /// Crash specs; only the one naming this rank applies.
    pub kill: Option<String>,
    pub transport: TransportKind,
    /// With verbs: the directory for QP data [default: `rendezvous`].
    pub verbs_dir: Option<PathBuf>,
    /// This launch's id, for the files of `rendezvous` / `verbs_dir` and the run's session key
    /// [default: the launcher's; required with a key].
    pub run_id: Option<String>,
}

/// What a node run needs from its caller.
pub struct NodeEnv<'a> {
    /// Refuses verbs settings with another transport; configures the verbs endpoints otherwise.
    pub configure_verbs: &'a dyn Fn(TransportKind) -> Result<(), String>,
    /// The job's key (never generated: the node must share its job's).
    pub job_key: &'a dyn Fn() -> Result<Option<AuthKey>, String>,
}

impl NodeRunSpec {
    /// Checks the spec, then runs the node until its coordinator ends the run; returns the
    /// node's counters.
    pub fn run(&self, env: &NodeEnv) -> Result<NodeExit, String> {
        let a = self;
        let (rank, n) = crate::runtime::procs::rank_and_size(a.rank, a.nodes, "nodes")?;
        if a.o_ns == 0 {
            return Err("--o-ns must be at least 1".into());
        }
        if a.size > 1024 {
            return Err(format!("--size must be at most 1024 bytes, got {}", a.size));
        }
        super::spec::check_loss(a.loss)?;
        if a.loss > 0.0 && (a.join.is_some() || a.transport != TransportKind::Udp) {
            return Err("--loss applies to a UDP node of `bench --procs` (not --join, not verbs)".into());
        }
        if let Some(coordinator) = a.join {
            if a.transport == TransportKind::Inproc {
                return Err("--transport inproc does not apply to node processes".into());
            }
            if a.verbs_dir.is_some() {
                return Err("--verbs-dir does not apply to --join (the coordinator relays the connection data)".into());
            }
            if a.run_id.is_some() {
                return Err("--run-id does not apply to --join (rank 0 hands out the run's nonce)".into());
            }
            (env.configure_verbs)(a.transport)?;
            if a.transport == TransportKind::Verbs {
                crate::transport::verbs::probe()?;
            }
            if rank == 0 {
                return Err("rank 0 coordinates a joined run: start it as `ftcoll bench --join ADDR --rank 0`".into());
            }
            let kills = match a.kill.as_deref() {
                None | Some("none") => Vec::new(),
                Some(k) => parse_kills(k, n)?,
            };
            return run_joined_node(&JoinedNode {
                auth: (env.job_key)()?,
                alg: &a.alg,
                coordinator,
                bind: (!a.bind.is_loopback()).then_some(a.bind),
                rank,
                n,
                job: a.job.unwrap_or(crate::experiment::launch::job::bench(a.seed)),
                seed: a.seed,
                size: a.size,
                poll: a.poll,
                kills: &kills,
                timeout: Duration::from_millis(a.control_timeout_ms),
                link_delay: (
                    Duration::from_nanos(a.emulate_delay_ns),
                    Duration::from_nanos(a.emulate_jitter_ns),
                ),
                boot: None,
                verbs: a.transport == TransportKind::Verbs,
            });
        }
        (env.configure_verbs)(a.transport)?;
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
        let control = a.control.ok_or("give --control or --join")?;
        if verbs_dir.is_some() {
            // The device first: nothing is published by a node that cannot take part.
            crate::transport::verbs::probe()?;
        }
        // Files exchanged through a directory: versioned by the run, sealed with its session key.
        let long_term = (env.job_key)()?;
        let files = verbs_dir
            .as_ref()
            .or(a.rendezvous.as_ref().filter(|_| a.hostfile.is_none()));
        let (auth, run_dir) = match files {
            Some(base) => {
                let what = if verbs_dir.is_some() {
                    "verbs node"
                } else {
                    "node --rendezvous"
                };
                let run = RunId::resolve(a.run_id.as_deref(), long_term.is_some(), what)?;
                let key = long_term.as_ref().map(|k| run.session_key(k));
                let dir = RunDir::open(base, &run, key.clone())?;
                (key, Some(dir))
            }
            // A node started by hand from a hostfile: no rank 0 hands out a nonce either, so its
            // datagrams are sealed with the session key of its launch's id (one recorded in an
            // earlier launch with the same key and job fails its MAC).
            None if a.hostfile.is_some() => match &long_term {
                Some(k) => {
                    let run = RunId::resolve(a.run_id.as_deref(), true, "node --hostfile")?;
                    (Some(run.session_key(k)), None)
                }
                None if a.run_id.is_some() => {
                    return Err("--run-id applies to keyed runs (give FTCOLL_KEY or --key-file)".into());
                }
                None => (None, None),
            },
            None if a.run_id.is_some() => {
                return Err("--run-id applies to --hostfile, --rendezvous and --verbs-dir".into());
            }
            None => (long_term.clone(), None),
        };
        let (sock, peers) = match (&a.hostfile, &run_dir) {
            _ if verbs_dir.is_some() => (None, Vec::new()),
            (Some(h), _) => {
                let text =
                    std::fs::read_to_string(h).map_err(|e| format!("cannot read hostfile {}: {e}", h.display()))?;
                (None, parse_hostfile(&text, n)?)
            }
            (None, Some(dir)) => {
                let (sock, peers) = rendezvous(dir, rank, n, a.bind, Duration::from_secs(60))?;
                (Some(sock), peers)
            }
            // The coordinator's table (`bench --procs`: the node binds its own port).
            (None, None) => (None, Vec::new()),
        };
        let kill = match a.kill.as_deref() {
            None | Some("none") => None,
            Some(k) => parse_kills(k, n)?.into_iter().find(|k| k.rank == rank),
        };
        let model = BenchModel::new(a.os_ns.unwrap_or(a.o_ns), a.or_ns.unwrap_or(a.o_ns), a.l_ns);
        let algo = resolve_algo(&a.alg, n, model.mean_logp(), 0)?;
        let mut spec = NodeSpec {
            rank,
            n,
            peers,
            control,
            epoch_unix_ns: a.epoch_unix_ns.unwrap_or_else(unix_ns),
            job: a.job.unwrap_or(1),
            seed: a.seed,
            tick_ns: model.unit_ns,
            payload_len: a.size,
            poll: a.poll,
            kill,
            control_timeout: Duration::from_millis(a.control_timeout_ms),
            sigkill_self: false,
            auth,
            link_delay: (
                Duration::from_nanos(a.emulate_delay_ns),
                Duration::from_nanos(a.emulate_jitter_ns),
            ),
            loss: a.loss,
        };
        let mut agent =
            ChildAgent::new(control, a.job.unwrap_or(1), rank, n).map_err(|e| format!("control socket: {e}"))?;
        // The coordinator (`--control`) holds the job's key, not this run's id.
        agent.set_key(long_term);
        let transport: Option<Box<dyn crate::transport::Transport>> = match (&verbs_dir, &run_dir, sock) {
            (Some(_), Some(dir), _) => Some(crate::transport::verbs::node_endpoint(
                rank,
                n,
                a.job.unwrap_or(1),
                a.seed,
                dir,
                Duration::from_secs(60),
            )?),
            // The socket the rendezvous published, kept: no other program took its port.
            // Every node published its bound port before the directory gave anyone the table:
            // a closed port is a dead node's (`UdpConfig::bound_at_start`).
            (None, _, Some(sock)) => Some(Box::new(
                UdpTransport::from_bound(
                    rank,
                    &spec.peers,
                    crate::transport::udp::UdpConfig {
                        bound_at_start: true,
                        ..udp_config(&spec)
                    },
                    sock,
                )
                .map_err(|e| format!("cannot use the rendezvous socket {}: {e}", spec.peers[rank as usize]))?,
            )),
            // `bench --procs`: bind a port, report it over the control plane, get the table.
            (None, _, None) if spec.peers.is_empty() => {
                Some(crate::experiment::launch::bcast::node_endpoint(&mut spec, &mut agent)?)
            }
            _ => None,
        };
        algo.dispatch(n, model.loggp, RunNode(&spec, transport, agent))?
    }
}
