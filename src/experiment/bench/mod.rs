//! A `bench` run as specified ([`BenchSpec`], no flag parsing), its checks
//! ([`BenchSpec::validate`]) and its runner: a local cluster (threads over UDP loopback or
//! in-process queues), one process per node (`procs`), or a launched run joined at rank 0
//! (`join`, `boot`), broadcasting back to back with crashes injected. A local run is a
//! [`Group`]'s [`Stream`] (`Group::stream`): the library's runtime, measured.
//!
//! - [`host`]: whether this host's memory and file descriptors can hold the run.
//! - [`node`]: one node process of such a run ([`node::NodeRunSpec`], `ftcoll node`).

pub mod host;
pub mod node;

use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::experiment::algo::{Algo, AlgoSpec, resolve_algo};
use crate::experiment::launch::bcast::coordinate_joined;
use crate::experiment::launch::joined::{BootSpec, JoinedNode, run_joined_node};
use crate::experiment::node_hop::{HopSetup, NodeHop, measure as measure_hop};
use crate::experiment::predict::{BenchModel, Prediction, predict, shared_o_ns};
use crate::group::{Group, GroupError, Stream};
use crate::runtime::cluster::{ClusterConfig, ClusterResult, PollMode};
use crate::runtime::control::ParentAgent;
use crate::runtime::join::JobParams;
use crate::runtime::kill::{Kill, KillPoint, format_kills, parse_kills};
use crate::runtime::logp::{Calibration, Estimate, estimate};
use crate::runtime::node::Generated;
use crate::runtime::procs::{rank_from_env, unix_ns};
use crate::runtime::{Bench, TransportKind};
use crate::transport::udp::auth::{AuthKey, warn_unauthenticated};

/// Operations abandoned at the timeout in a row after which a bench run stops: the rest would
/// most likely wait out theirs too (a node cut off, a dead subtree), and a run of N such
/// operations would take N timeouts. The operations left are reported as not run, and the
/// run fails.
pub const GIVE_UP_AFTER: u32 = 3;

/// A bench run: the cluster, the workload, the crashes, the LogP unit and how the nodes are
/// started. `None` means the default described on each field.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub alg: AlgoSpec,
    pub nodes: u32,
    pub transport: TransportKind,
    /// Worker threads [default: min(nodes, cores)].
    pub workers: Option<usize>,
    /// How idle workers wait [default: busy; yield with `procs` and more processes than cores].
    pub poll: Option<PollMode>,
    /// Payload in bytes.
    pub size: usize,
    pub iterations: u64,
    pub warmup: u64,
    /// Crash specs as written, or `none` [default: rank 1 dies mid-run when nodes >= 3].
    pub kill: Option<String>,
    /// Operations in flight at once.
    pub window: u64,
    /// LogP o and L in ns [default: calibrated (`params`) or measured].
    pub o_ns: Option<u64>,
    pub l_ns: Option<u64>,
    /// A saved calibration to take o and L from.
    pub params: Option<PathBuf>,
    /// The cores the hosts of a launched run share (processor sharing of o).
    pub shared_cores: Option<u32>,
    pub op_timeout_ms: u64,
    pub seed: u64,
    pub no_pin: bool,
    /// One OS process per node, started by this one.
    pub procs: bool,
    pub no_model: bool,
    /// A launched run: rank 0's coordinator address.
    pub join: Option<SocketAddr>,
    /// This process's rank in a launched run [default: from the launcher's environment].
    pub rank: Option<u32>,
    /// The IP to publish for this node.
    pub bind: Option<IpAddr>,
    pub emulate_delay_ns: u64,
    pub emulate_jitter_ns: u64,
    /// A launched run bootstrapped by the BMG overlay: this node's address.
    pub boot: Option<SocketAddrV4>,
    /// With `boot`: the launch-tree parent's address (every rank but 0).
    pub boot_parent: Option<SocketAddrV4>,
    /// With `boot`: the coordinator's port on rank 0's IP.
    pub control_port: u16,
    pub join_timeout_ms: u64,
    /// With `boot`: this launch's id, from which the run's session key is derived [default:
    /// the launcher's; required with a key].
    pub run_id: Option<String>,
    /// The algorithm's and the verbs transport's flags, as handed to `procs` children.
    pub child_alg_args: Vec<String>,
    pub child_verbs_args: Vec<String>,
}

/// What the runner needs from its caller: the job key, the verbs configuration, and how a
/// child process is handed its key and poll mode.
pub struct BenchEnv<'a> {
    /// Refuses verbs settings with another transport; configures the verbs endpoints otherwise.
    pub configure_verbs: &'a dyn Fn(TransportKind) -> Result<(), String>,
    /// The job's key (generated for local runs, never for launched ones).
    pub job_key: &'a dyn Fn(bool) -> Result<Option<AuthKey>, String>,
    /// Writes the key into a directory for the children; returns the file.
    pub write_key_file: &'a dyn Fn(&Path, &AuthKey) -> Result<PathBuf, String>,
    /// The flag value naming a poll mode.
    pub poll_name: fn(PollMode) -> &'static str,
}

/// A checked spec: `nodes` is the run's size (from the launcher for a launched run).
pub struct Checked {
    pub spec: BenchSpec,
    /// This process's rank in a launched run.
    pub join_rank: Option<u32>,
    pub kills: Vec<Kill>,
    /// The crash specs as given (or defaulted).
    pub kill_text: String,
}

/// A finished run (before its prediction).
pub struct BenchOutcome {
    pub algo: Algo,
    pub res: ClusterResult,
    pub est: Option<Estimate>,
    pub cal: Option<Calibration>,
    pub model: BenchModel,
    /// The cores the model puts the nodes on (`None`: a core per node): the workers' when
    /// they serve several nodes each, the host's when node processes outnumber its cores.
    pub model_cores: Option<u32>,
    /// Noisy LogP: the calibration's distributions of o_s, o_r and L, in the model's units.
    pub noise: Option<std::sync::Arc<crate::sim::Noise>>,
    /// The node's own cost per hop folded into the model's overheads (`None`: o and L given,
    /// or a launched run).
    pub node_hop: Option<NodeHop>,
    pub workers: usize,
    pub poll: PollMode,
    pub o_ns: u64,
    pub l_ns: u64,
    pub own_o_ns: u64,
    pub cores: usize,
}

fn default_kills(a: &BenchSpec) -> String {
    if a.nodes < 3 {
        return "none".into();
    }
    format!("1@{}", a.warmup + a.iterations / 2)
}

/// A local run: a [`Group`] of the bench's nodes on its workers (pinned or not, polling as
/// asked), without agreements, streaming the bench's operations from rank 0 with
/// [`Generated`] payloads (checked byte for byte at every receiver).
fn run_local(bench: &Bench, progress: Option<&(dyn Fn(u64) + Sync)>) -> Result<ClusterResult, String> {
    let c = &bench.cluster;
    let one_line = |e: GroupError| match e {
        GroupError::Setup(e) => e,
        e => e.to_string(),
    };
    let mut group = Group::builder(c.nodes)
        .algo(bench.algo.clone())
        .transport(bench.transport)
        .loggp(bench.model, Duration::from_nanos(c.tick_ns))
        .window(c.window)
        .op_timeout(c.op_timeout)
        .seed(c.seed)
        .job(c.job)
        .auth(bench.auth.clone())
        .workers(c.workers)
        .pin(c.pin)
        .poll(c.poll)
        .agreements(false)
        .kills(bench.kills.clone())
        .build()
        .map_err(one_line)?;
    let len = c.payload_len;
    group
        .stream(Stream {
            ops: c.iterations,
            warmup: c.warmup,
            window: c.window,
            roots: vec![0],
            give_up_after: c.give_up_after,
            payloads: Box::new(move |_| Box::new(Generated::new(len))),
            progress,
        })
        .map_err(one_line)
}

/// With `join`/`boot`: this process's rank, and the spec with `nodes` set to the run's size
/// (from the launcher's environment unless `rank` is given).
fn joined(a: &BenchSpec) -> Result<(BenchSpec, Option<u32>), String> {
    let mut adj = a.clone();
    if let Some(me) = a.boot {
        if a.o_ns.is_none() || a.l_ns.is_none() {
            return Err("--boot needs --o-ns and --L-ns (every node must resolve the same algorithm)".into());
        }
        // Launched like --join; the coordinator sits at rank 0's IP (only rank 0 binds it).
        adj.join = Some(SocketAddr::new((*me.ip()).into(), a.control_port));
    }
    if a.run_id.is_some() && a.boot.is_none() {
        return Err("--run-id applies to --boot (a --join run gets its nonce from rank 0)".into());
    }
    if adj.join.is_none() {
        if a.rank.is_some() {
            return Err("--rank needs --join or --boot".into());
        }
        return Ok((adj, None));
    }
    if a.procs {
        return Err("--join and --procs exclude each other (the launcher starts the processes)".into());
    }
    if a.transport == TransportKind::Inproc {
        return Err("--join needs --transport udp or verbs (processes do not share memory)".into());
    }
    let (rank, n) = match a.rank {
        Some(r) => (r, a.nodes),
        None => rank_from_env().ok_or(
            "--join needs this process's rank: give --rank (and --nodes), or run under Slurm, Open MPI or a PMI launcher",
        )?,
    };
    if n < 2 || rank >= n {
        return Err(format!(
            "rank {rank} of {n} nodes is invalid (need 0 <= rank < nodes, nodes >= 2)"
        ));
    }
    if a.boot.is_some() && (rank == 0) != a.boot_parent.is_none() {
        return Err("with --boot, every rank but 0 needs --boot-parent, and rank 0 takes none".into());
    }
    adj.nodes = n;
    Ok((adj, Some(rank)))
}

impl BenchSpec {
    /// Checks the spec (configuring the verbs transport on the way, before a launched run's
    /// device probe) and parses its crashes.
    pub fn validate(&self, env: &BenchEnv) -> Result<Checked, String> {
        let (a, join_rank) = joined(self)?;
        if a.join.is_none() && (a.emulate_delay_ns > 0 || a.emulate_jitter_ns > 0) {
            return Err("--emulate-delay-ns applies to launched runs (--join), e.g. on the netns cluster".into());
        }
        if a.nodes < 2 {
            return Err(format!("--nodes must be at least 2, got {}", a.nodes));
        }
        (env.configure_verbs)(a.transport)?;
        if a.join.is_some() && a.transport == TransportKind::Verbs {
            // Before the rendezvous: a rank without a usable device must not leave the others
            // (or its own coordinator thread) waiting for it.
            crate::transport::verbs::probe()?;
        }
        if a.iterations == 0 {
            return Err("--iterations must be at least 1".into());
        }
        if a.warmup.checked_add(a.iterations).is_none_or(|t| t >= u64::MAX / 2) {
            return Err(format!(
                "--warmup {} plus --iterations {} must be below 2^63 (operations are numbered in 64 bits)",
                a.warmup, a.iterations
            ));
        }
        if a.window == 0 || a.window > 32 {
            return Err(format!("--window must be in 1..=32, got {}", a.window));
        }
        if a.size > 1024 {
            return Err(format!("--size must be at most 1024 bytes, got {}", a.size));
        }
        if a.workers == Some(0) {
            return Err("--workers must be at least 1".into());
        }
        if matches!(a.o_ns, Some(0)) {
            return Err("--o-ns must be at least 1".into());
        }
        if matches!(a.shared_cores, Some(0)) {
            return Err("--shared-cores must be at least 1".into());
        }
        if a.shared_cores.is_some() && a.join.is_none() && a.boot.is_none() {
            return Err("--shared-cores applies to launched runs (--join or --boot), e.g. on the netns cluster".into());
        }
        host::check(&a)?;
        let kill_text = a.kill.clone().unwrap_or_else(|| default_kills(&a));
        let kills = if kill_text == "none" {
            Vec::new()
        } else {
            parse_kills(&kill_text, a.nodes)?
        };
        Ok(Checked {
            spec: a,
            join_rank,
            kills,
            kill_text,
        })
    }
}

impl Checked {
    /// A launched run's rank other than 0: this process is one node and prints nothing.
    pub fn is_plain_node(&self) -> bool {
        matches!(self.join_rank, Some(r) if r != 0)
    }

    fn key(&self, env: &BenchEnv) -> Result<Option<AuthKey>, String> {
        let key = (env.job_key)(self.spec.join.is_none())?;
        match (self.spec.boot, key) {
            // No rank 0 hands out a nonce before the overlay exists: the run's session key
            // comes from the launch's id (boot datagrams, control plane and data alike).
            (Some(_), Some(k)) => {
                let run = crate::transport::run_dir::RunId::resolve(self.spec.run_id.as_deref(), true, "bench --boot")?;
                Ok(Some(run.session_key(&k)))
            }
            (_, key) => Ok(key),
        }
    }

    fn joined_node(&self, rank: u32, auth: Option<AuthKey>) -> JoinedNode<'_> {
        let a = &self.spec;
        JoinedNode {
            auth,
            alg: &a.alg,
            coordinator: a.join.expect("join mode"),
            bind: a.bind,
            rank,
            n: a.nodes,
            job: crate::experiment::launch::job::bench(a.seed),
            seed: a.seed,
            size: a.size,
            poll: a.poll.unwrap_or(PollMode::Busy),
            kills: &self.kills,
            timeout: Duration::from_millis(a.join_timeout_ms.max(1)),
            link_delay: (
                Duration::from_nanos(a.emulate_delay_ns),
                Duration::from_nanos(a.emulate_jitter_ns),
            ),
            boot: a.boot.map(|me| BootSpec {
                me,
                parent: a.boot_parent,
                o_ns: shared_o_ns(a.o_ns.unwrap_or(1), a.nodes, a.shared_cores),
                l_ns: a.l_ns.unwrap_or(1),
            }),
            verbs: a.transport == TransportKind::Verbs,
        }
    }

    /// Runs this process's node of a launched run (a rank other than 0).
    pub fn run_node(&self, env: &BenchEnv) -> Result<(), String> {
        let rank = self.join_rank.expect("join mode");
        run_joined_node(&self.joined_node(rank, self.key(env)?))?;
        Ok(())
    }

    /// Sets up o and L (given, calibrated or measured), resolves the algorithm and runs the
    /// cluster: local threads, one process per node, or rank 0 of a launched run.
    pub fn run(&self, env: &BenchEnv, progress: Option<&(dyn Fn(u64) + Sync)>) -> Result<BenchOutcome, String> {
        let a = &self.spec;
        let kills = &self.kills;
        if (a.procs || a.join.is_some()) && a.workers.is_some() {
            return Err("--workers does not apply to --procs (each node process has one worker)".into());
        }
        let cal = a.params.as_deref().map(Calibration::load).transpose()?;
        // --o-ns gives one o (o_s = o_r); a calibration and the estimate give both.
        let cal_ns = cal.as_ref().map(|c| c.os_or_l_ns());
        let given_o = a.o_ns.map(|o| (o, o)).or(cal_ns.map(|(os, or, _)| (os, or)));
        let given_l = a.l_ns.or(cal_ns.map(|(_, _, l)| l));
        let est: Option<Estimate> = match (given_o, given_l) {
            (Some(_), Some(_)) => None,
            _ => Some(estimate(a.transport, 2000, a.size)?),
        };
        // The transport's overheads (measured, calibrated or given).
        let (tr_os, tr_or) = given_o.or(est.map(|e| (e.o_send_ns, e.o_recv_ns))).unwrap_or((1, 1));
        let l_ns = given_l.or(est.map(|e| e.l_ns)).unwrap_or(1);
        let cores = std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1);
        // More processes than cores: spinning ones would hold a core the others need, and
        // blocking ones pay a kernel wake-up per hop; yielding ones neither.
        let poll = a.poll.unwrap_or(if a.procs && a.nodes as usize + 1 > cores {
            PollMode::Yield
        } else {
            PollMode::Busy
        });
        // What a node pays per hop beyond the transport (`node_hop`), measured now by this
        // process on the cores its workers use: on a virtual machine the same 2-node hop moved
        // by 1.5x between processes (docs/measurements.md), so a saved figure would not be this
        // run's. Not when o or L were given, nor for a launched run (its hosts are not this one).
        let node_hop = if a.o_ns.is_some() || a.l_ns.is_some() || a.join.is_some() {
            None
        } else {
            let setup = HopSetup {
                transport: a.transport,
                size: a.size,
                poll,
                pin: !a.no_pin,
                auth: if a.transport == TransportKind::Udp {
                    crate::experiment::launch::job::fresh_session(self.key(env)?)?
                } else {
                    None
                },
                os_ns: tr_os,
                or_ns: tr_or,
                l_ns,
            };
            Some(NodeHop::fold(measure_hop(&setup)?, tr_os, tr_or, l_ns))
        };
        // The node's overheads: the transport's and the node's own share of each hop.
        let (own_os, own_or) = node_hop.map_or((tr_os, tr_or), |h| h.node_o_ns(tr_os, tr_or));
        let own_o_ns = ((own_os + own_or) / 2).max(1);
        let model = BenchModel::new(
            shared_o_ns(own_os, a.nodes, a.shared_cores),
            shared_o_ns(own_or, a.nodes, a.shared_cores),
            l_ns,
        );
        let o_ns = model.mean_o_ns();
        // A calibration that gave every parameter also gives their distributions: the
        // prediction then draws each message's o_s, o_r and L from them (noisy LogP).
        let noise = match &cal {
            Some(c) if a.o_ns.is_none() && a.l_ns.is_none() && !c.noise.is_null() => {
                // The transport's distributions, stretched so that their medians are the node's
                // overheads (after processor sharing), in the model's unit.
                let fixed = crate::model::LogGP::new(model.l_ns, tr_os.max(1), tr_or.max(1), 0, 0)?;
                let ns = crate::sim::Noise::from_json(&c.noise.to_string(), fixed)?;
                let u = model.unit_ns as f64;
                Some(std::sync::Arc::new(ns.scaled(
                    model.os_ns as f64 / tr_os.max(1) as f64 / u,
                    model.or_ns as f64 / tr_or.max(1) as f64 / u,
                    1.0 / u,
                )))
            }
            _ => None,
        };
        let dead = kills.iter().filter(|k| k.point == KillPoint::Start).count() as u32;
        let algo = resolve_algo(&a.alg, a.nodes, model.mean_logp(), dead)?;
        let workers = if a.procs || a.join.is_some() {
            a.nodes as usize
        } else {
            a.workers.unwrap_or(cores).min(a.nodes as usize).max(1)
        };
        // Nodes that share cores take turns on them: the model does too (a core does one send or
        // receive at a time). Launched runs model their hosts with --shared-cores instead.
        let model_cores = if a.join.is_some() {
            None
        } else if a.procs {
            (a.nodes as usize > cores).then_some(cores as u32)
        } else {
            (workers < a.nodes as usize).then_some(workers as u32)
        };
        let cluster = ClusterConfig {
            nodes: a.nodes,
            workers,
            poll,
            warmup: a.warmup,
            iterations: a.iterations,
            window: a.window,
            payload_len: a.size,
            tick_ns: model.unit_ns,
            job: crate::experiment::launch::job::bench(a.seed),
            seed: a.seed,
            op_timeout: Duration::from_millis(a.op_timeout_ms),
            idle: Duration::from_micros(500),
            pin: !a.no_pin,
            give_up_after: Some(GIVE_UP_AFTER),
        };
        let bench = Bench {
            algo: algo.clone(),
            cluster,
            transport: a.transport,
            kills: kills.clone(),
            model: model.loggp,
            loss: 0.0,
            auth: if a.join.is_none() && a.transport == TransportKind::Udp {
                crate::experiment::launch::job::fresh_session(self.key(env)?)?
            } else {
                None
            },
        };
        if a.join.is_none() && a.transport == TransportKind::Udp && bench.auth.is_none() {
            warn_unauthenticated();
        }
        let res = if let Some(addr) = a.join {
            let root_key = self.key(env)?;
            let mut agent = ParentAgent::bind(addr, bench.cluster.job, a.nodes)
                .map_err(|e| format!("cannot bind the coordinator at {addr}: {e}"))?;
            agent.set_key(root_key.clone());
            let params = JobParams {
                o_ns,
                l_ns,
                epoch_unix_ns: unix_ns(),
                // The run's nonce: the nodes seal the run's datagrams with its session key.
                run: crate::transport::udp::auth::fresh_nonce()
                    .map_err(|e| format!("cannot draw the run's nonce: {e}"))?,
            };
            let timeout = Duration::from_millis(a.join_timeout_ms.max(1));
            let (res, node) = std::thread::scope(|sc| {
                let table = a.boot.is_none();
                let cluster = &bench.cluster;
                let coord = sc.spawn(move || coordinate_joined(agent, cluster, kills, params, timeout, table));
                let node = run_joined_node(&self.joined_node(0, root_key));
                (coord.join(), node)
            });
            let res = res.map_err(|_| "the coordinator thread panicked".to_string())??;
            node?;
            res
        } else if a.procs {
            self.run_procs(env, &bench, &model, poll)?
        } else {
            if kills.iter().any(|k| matches!(k.point, KillPoint::SigKill { .. })) {
                return Err("--kill R@I:sigkill needs --procs (a thread cannot be SIGKILLed)".into());
            }
            run_local(&bench, progress)?
        };
        Ok(BenchOutcome {
            algo,
            res,
            est,
            cal,
            model,
            model_cores,
            noise,
            node_hop,
            workers,
            poll,
            o_ns,
            l_ns,
            own_o_ns,
            cores,
        })
    }

    /// One `ftcoll node` process per node, coordinated by this one.
    fn run_procs(
        &self,
        env: &BenchEnv,
        bench: &Bench,
        model: &BenchModel,
        poll: PollMode,
    ) -> Result<ClusterResult, String> {
        let a = &self.spec;
        let kills = &self.kills;
        if a.transport == TransportKind::Inproc {
            return Err("--procs needs --transport udp or verbs (processes do not share memory)".into());
        }
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
        let dir = crate::experiment::launch::private_dir("ftcoll-procs")?;
        let key_args = match &bench.auth {
            Some(k) => vec![
                "--key-file".to_string(),
                (env.write_key_file)(&dir, k)?.display().to_string(),
            ],
            None => vec!["--auth".to_string(), "off".to_string()],
        };
        // The children build the same model from the same three numbers.
        let model_args = [
            ("--o-ns", model.mean_o_ns()),
            ("--os-ns", model.os_ns),
            ("--or-ns", model.or_ns),
            ("--L-ns", model.l_ns),
        ];
        let child_poll = (env.poll_name)(poll).to_string();
        let child_args = |r: u32| {
            let mine: Vec<Kill> = kills
                .iter()
                .copied()
                .filter(|k| k.rank == r && !matches!(k.point, KillPoint::SigKill { .. }))
                .collect();
            let mut v = a.child_alg_args.clone();
            for (flag, ns) in model_args {
                v.extend([flag.to_string(), ns.to_string()]);
            }
            v.extend(["--kill".to_string(), format_kills(&mine)]);
            v.extend(["--poll".to_string(), child_poll.clone()]);
            if a.transport == TransportKind::Verbs {
                // QP data goes through a directory beside the hostfile.
                v.extend([
                    "--transport".to_string(),
                    "verbs".to_string(),
                    "--verbs-dir".to_string(),
                ]);
                v.push(dir.join("verbs").display().to_string());
                // The run's id: the name of its private directory, new per run.
                let id = dir.file_name().map(|n| n.to_string_lossy().into_owned());
                v.extend(["--run-id".to_string(), id.unwrap_or_else(|| "procs".into())]);
                v.extend(a.child_verbs_args.iter().cloned());
            }
            v.extend(key_args.iter().cloned());
            v
        };
        let r = crate::experiment::launch::bcast::run_parent(
            &exe,
            &bench.cluster,
            bench.auth.as_ref(),
            kills,
            &child_args,
            &dir,
        );
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    /// The LogP prediction for a finished run (`None` with `no_model`).
    pub fn prediction(&self, out: &BenchOutcome) -> Result<Option<Prediction>, String> {
        let a = &self.spec;
        if a.no_model {
            return Ok(None);
        }
        predict(
            &out.algo,
            a.nodes,
            &out.model,
            out.model_cores,
            out.noise.as_ref(),
            &self.kills,
            (a.warmup, a.iterations),
        )
        .map(Some)
    }
}
