//! `ftcoll bench`: the main job. A local cluster (threads of this process over UDP loopback or
//! in-process queues) broadcasts back to back with crashes injected, checks every operation
//! for consistency, and prints a perftest-like table next to the LogP prediction.

use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;

use crate::cli::flags::AlgoArgs;
use crate::cli::values::{PollArg, TransportArg};
use crate::experiment::algo::resolve_algo;
use crate::experiment::launch::bcast::coordinate_joined;
use crate::experiment::launch::joined::{BootSpec, JoinedNode, run_joined_node};
use crate::experiment::predict::{predict, shared_o_ns};
use crate::model::LogP;
use crate::report::bench::{BenchFacts, BenchReport, dropped_failure, write_hlog};
use crate::runtime::cluster::{ClusterConfig, PollMode};
use crate::runtime::control::ParentAgent;
use crate::runtime::join::JobParams;
use crate::runtime::kill::{Kill, KillPoint, format_kills, parse_kills};
use crate::runtime::logp::{Estimate, estimate};
use crate::runtime::procs::{rank_from_env, unix_ns};
use crate::runtime::{Bench, TransportKind};

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    pub alg: AlgoArgs,
    /// Nodes in the local cluster.
    #[arg(long, default_value_t = 8)]
    pub nodes: u32,
    /// Transport.
    #[arg(long, value_enum, default_value = "udp")]
    pub transport: TransportArg,
    /// Worker threads (each pinned to a core, owning nodes round-robin) [default: min(nodes, cores)].
    #[arg(long)]
    pub workers: Option<usize>,
    /// How idle workers wait [default: busy; with --procs and more processes than cores,
    /// yield].
    #[arg(long, value_enum)]
    pub poll: Option<PollArg>,
    /// Broadcast payload in bytes.
    #[arg(long, default_value_t = 8)]
    pub size: usize,
    /// Measured operations.
    #[arg(long, default_value_t = 10_000)]
    pub iterations: u64,
    /// Unmeasured operations first.
    #[arg(long, default_value_t = 1_000)]
    pub warmup: u64,
    /// Crashes: R (dead from the start), R@I[:recv] (dies on iteration I's first message),
    /// R@I:sent=K (after sending K messages of iteration I), comma-separated; `none` for no
    /// crash [default: rank 1, the root's first child, dies on receiving mid-run].
    #[arg(long)]
    pub kill: Option<String>,
    /// Operations in flight at once (1: a barrier between iterations, like osu_bcast).
    #[arg(long, default_value_t = 1)]
    pub window: u64,
    /// LogP o in ns for the protocols' time unit and the prediction [default: measured].
    #[arg(long = "o-ns")]
    pub o_ns: Option<u64>,
    /// LogP L in ns [default: measured].
    #[arg(long = "L-ns")]
    pub l_ns: Option<u64>,
    /// A calibration saved by `ftcoll logp --save FILE`: its o (mean of o_s and o_r) and L
    /// instead of a fresh estimate (--o-ns/--L-ns still win).
    #[arg(long, value_name = "FILE")]
    pub params: Option<std::path::PathBuf>,
    /// The cores the hosts of a launched run share (an emulated cluster on one machine, e.g.
    /// netns-cluster.sh). When the nodes outnumber them, each busy-polling node runs C/nodes
    /// of the time, so o (CPU time per message) takes o·nodes/C of wall time: the protocols'
    /// time unit and the model use that (processor sharing). Unset: a core per node.
    #[arg(long = "shared-cores")]
    pub shared_cores: Option<u32>,
    /// An operation not complete after this many ms is abandoned and counted.
    #[arg(long = "op-timeout-ms", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub op_timeout_ms: u64,
    /// Seed (gossip targets, job id).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Do not pin workers to cores.
    #[arg(long = "no-pin")]
    pub no_pin: bool,
    /// One OS process per node (`ftcoll node`, UDP only), coordinated by this process; allows
    /// `--kill R@I:sigkill`.
    #[arg(long)]
    pub procs: bool,
    /// Skip the LogP prediction.
    #[arg(long = "no-model")]
    pub no_model: bool,
    /// Write the latency histograms in HdrHistogram's interval-log format to FILE.
    #[arg(long)]
    pub hlog: Option<std::path::PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// A launched run (Slurm, mpirun, one process per host): rank 0 runs the coordinator at
    /// this `IP:PORT` and prints the results; every rank joins it for the address table.
    #[arg(long, value_name = "IP:PORT")]
    pub join: Option<std::net::SocketAddr>,
    /// With --join: this process's rank [default: from the launcher's environment; the size
    /// then comes from it too].
    #[arg(long)]
    pub rank: Option<u32>,
    /// With --join: the IP to publish for this node [default: the interface toward rank 0].
    #[arg(long, requires = "join")]
    pub bind: Option<std::net::IpAddr>,
    /// Emulated one-way link delay in ns, held in the UDP transport on receive (for kernels
    /// without `netem`; the netns script passes it) [default: 0, off; --join runs only].
    #[arg(long = "emulate-delay-ns", default_value_t = 0)]
    pub emulate_delay_ns: u64,
    /// Uniform jitter added to --emulate-delay-ns, ns.
    #[arg(long = "emulate-jitter-ns", default_value_t = 0)]
    pub emulate_jitter_ns: u64,
    /// A launched run bootstrapped by the BMG overlay: this node's `IP:PORT` (its
    /// data address afterwards); with --boot-parent, the only address a node is given. Rank 0
    /// coordinates at its own IP, port --control-port. Needs --o-ns and --L-ns (no
    /// coordinator hands out the LogP unit before the table exists).
    #[arg(long, value_name = "IP:PORT", conflicts_with = "join")]
    pub boot: Option<std::net::SocketAddrV4>,
    /// With --boot: the launch-tree parent's `IP:PORT` (every rank but 0).
    #[arg(long = "boot-parent", value_name = "IP:PORT", requires = "boot")]
    pub boot_parent: Option<std::net::SocketAddrV4>,
    /// With --boot: the coordinator's port on rank 0's IP.
    #[arg(long = "control-port", default_value_t = 47000)]
    pub control_port: u16,
    /// With --join: how long to wait for every rank to join (and the longest silence of the
    /// coordinator a node accepts), ms.
    #[arg(long = "join-timeout-ms", default_value_t = 60_000)]
    pub join_timeout_ms: u64,
    #[command(flatten)]
    pub verbs: crate::cli::verbs::VerbsArgs,
    /// Packet authentication: `on`, a keyed MAC on every UDP datagram (key from --key-file,
    /// else FTCOLL_KEY, else generated for this run), or `off` (logged loudly).
    #[arg(long, value_enum, default_value = "on")]
    pub auth: crate::cli::auth::AuthMode,
    /// The job's secret key: a file whose first line is 32 hex digits.
    #[arg(long = "key-file")]
    pub key_file: Option<std::path::PathBuf>,
}

fn default_kills(a: &BenchArgs) -> String {
    if a.nodes < 3 {
        return "none".into();
    }
    format!("1@{}", a.warmup + a.iterations / 2)
}

/// With `--join`: this process's rank, and the arguments with `--nodes` set to the run's size
/// (from the launcher's environment unless `--rank` is given).
fn joined_args(a: &BenchArgs) -> Result<(BenchArgs, Option<u32>), String> {
    let mut adj = a.clone();
    if let Some(me) = a.boot {
        if a.o_ns.is_none() || a.l_ns.is_none() {
            return Err("--boot needs --o-ns and --L-ns (every node must resolve the same algorithm)".into());
        }
        // Launched like --join; the coordinator sits at rank 0's IP (only rank 0 binds it).
        adj.join = Some(std::net::SocketAddr::new((*me.ip()).into(), a.control_port));
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
    if a.transport.kind() == TransportKind::Inproc {
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

/// Runs `ftcoll bench`.
pub fn run(a: &BenchArgs) -> Result<(), String> {
    let (adj, join_rank) = joined_args(a)?;
    let a = &adj;
    if a.join.is_none() && (a.emulate_delay_ns > 0 || a.emulate_jitter_ns > 0) {
        return Err("--emulate-delay-ns applies to launched runs (--join), e.g. on the netns cluster".into());
    }
    if a.nodes < 2 {
        return Err(format!("--nodes must be at least 2, got {}", a.nodes));
    }
    a.verbs.apply(a.transport.kind())?;
    if a.join.is_some() && a.transport.kind() == TransportKind::Verbs {
        // Before the rendezvous: a rank without a usable device must not leave the others
        // (or its own coordinator thread) waiting for it.
        crate::transport::verbs::probe()?;
    }
    if a.iterations == 0 {
        return Err("--iterations must be at least 1".into());
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
    let kill_text = a.kill.clone().unwrap_or_else(|| default_kills(a));
    let kills = if kill_text == "none" {
        Vec::new()
    } else {
        parse_kills(&kill_text, a.nodes)?
    };
    // A launched run's processes must share the key (FTCOLL_KEY or --key-file): none is
    // generated there. Local runs generate one for their nodes.
    // Resolved once, when the run starts (after every check of the flags).
    let key = || crate::cli::auth::job_key(a.auth, a.key_file.as_deref(), a.join.is_none());
    let alg_spec = a.alg.spec();
    let joined_node = |rank: u32, auth| JoinedNode {
        auth,
        alg: &alg_spec,
        coordinator: a.join.expect("join mode"),
        bind: a.bind,
        rank,
        n: a.nodes,
        job: crate::experiment::launch::job::bench(a.seed),
        seed: a.seed,
        size: a.size,
        poll: a.poll.map(PollMode::from).unwrap_or(PollMode::Busy),
        kills: &kills,
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
        verbs: a.transport.kind() == TransportKind::Verbs,
    };
    if let Some(rank) = join_rank
        && rank != 0
    {
        // Not the coordinator: this process is one node; rank 0 prints the results.
        run_joined_node(&joined_node(rank, key()?))?;
        return Ok(());
    }
    // Opened (created) before the run, so an unwritable path fails now, not after it.
    let mut hlog = match &a.hlog {
        Some(p) => Some((crate::report::output::open_for_output(p)?, p)),
        None => None,
    };
    let cal = a
        .params
        .as_deref()
        .map(crate::runtime::logp::Calibration::load)
        .transpose()?;
    let (given_o, given_l) = match cal.as_ref().map(|c| c.o_and_l_ns()) {
        Some((o, l)) => (a.o_ns.or(Some(o)), a.l_ns.or(Some(l))),
        None => (a.o_ns, a.l_ns),
    };
    let est: Option<Estimate> = match (given_o, given_l) {
        (Some(_), Some(_)) => None,
        _ => Some(estimate(a.transport.kind(), 2000, a.size)?),
    };
    let own_o_ns = given_o.or(est.map(|e| e.o_ns)).unwrap_or(1).max(1);
    let o_ns = shared_o_ns(own_o_ns, a.nodes, a.shared_cores);
    let l_ns = given_l.or(est.map(|e| e.l_ns)).unwrap_or(1);
    let model = LogP {
        l: (l_ns + o_ns / 2) / o_ns,
        o: 1,
    };
    let dead = kills.iter().filter(|k| k.point == KillPoint::Start).count() as u32;
    let algo = resolve_algo(&a.alg.spec(), a.nodes, model, dead)?;
    let cores = std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1);
    if (a.procs || a.join.is_some()) && a.workers.is_some() {
        return Err("--workers does not apply to --procs (each node process has one worker)".into());
    }
    // More processes than cores: spinning ones would hold a core the others need, and
    // blocking ones pay a kernel wake-up per hop; yielding ones neither.
    let poll = a
        .poll
        .map(PollMode::from)
        .unwrap_or(if a.procs && a.nodes as usize + 1 > cores {
            PollMode::Yield
        } else {
            PollMode::Busy
        });
    let workers = if a.procs || a.join.is_some() {
        a.nodes as usize
    } else {
        a.workers.unwrap_or(cores).min(a.nodes as usize).max(1)
    };
    let cluster = ClusterConfig {
        nodes: a.nodes,
        workers,
        poll,
        warmup: a.warmup,
        iterations: a.iterations,
        window: a.window,
        payload_len: a.size,
        tick_ns: o_ns,
        job: crate::experiment::launch::job::bench(a.seed),
        seed: a.seed,
        op_timeout: Duration::from_millis(a.op_timeout_ms),
        idle: Duration::from_micros(500),
        pin: !a.no_pin,
    };
    let bench = Bench {
        algo: algo.clone(),
        cluster,
        transport: a.transport.kind(),
        kills: kills.clone(),
        model,
        loss: 0.0,
        auth: if a.join.is_none() && a.transport.kind() == TransportKind::Udp {
            key()?
        } else {
            None
        },
    };
    if a.join.is_none() && a.transport.kind() == TransportKind::Udp && bench.auth.is_none() {
        crate::cli::auth::warn_unauthenticated();
    }
    let show = !a.json && std::io::stderr().is_terminal();
    let bar = show.then(|| {
        let b = indicatif::ProgressBar::new(a.warmup + a.iterations);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} operations ({per_sec}, eta {eta})",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b
    });
    let tick = |k: u64| {
        if let Some(b) = &bar {
            b.set_position(k);
        }
    };
    let progress: Option<&(dyn Fn(u64) + Sync)> = if show { Some(&tick) } else { None };
    let res = if let Some(addr) = a.join {
        let root_key = key()?;
        let mut agent = ParentAgent::bind(addr, bench.cluster.job, a.nodes)
            .map_err(|e| format!("cannot bind the coordinator at {addr}: {e}"))?;
        agent.set_key(root_key.clone());
        let params = JobParams {
            o_ns,
            l_ns,
            epoch_unix_ns: unix_ns(),
        };
        let timeout = Duration::from_millis(a.join_timeout_ms.max(1));
        let (res, node) = std::thread::scope(|sc| {
            let table = a.boot.is_none();
            let (cluster, kills_ref) = (&bench.cluster, &kills);
            let coord = sc.spawn(move || coordinate_joined(agent, cluster, kills_ref, params, timeout, table));
            let node = run_joined_node(&joined_node(0, root_key));
            (coord.join(), node)
        });
        let res = res.map_err(|_| "the coordinator thread panicked".to_string())??;
        node?;
        res
    } else if a.procs {
        if a.transport.kind() == TransportKind::Inproc {
            return Err("--procs needs --transport udp or verbs (processes do not share memory)".into());
        }
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
        let dir = std::env::temp_dir().join(format!("ftcoll-procs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let key_args = match &bench.auth {
            Some(k) => vec![
                "--key-file".to_string(),
                crate::cli::auth::write_key_file(&dir, k)?.display().to_string(),
            ],
            None => vec!["--auth".to_string(), "off".to_string()],
        };
        let l_ns_s = l_ns.to_string();
        let alg_args = a.alg.to_args();
        let child_poll = crate::cli::values::poll_name(poll).to_string();
        let child_args = |r: u32| {
            let mine: Vec<Kill> = kills
                .iter()
                .copied()
                .filter(|k| k.rank == r && !matches!(k.point, KillPoint::SigKill { .. }))
                .collect();
            let mut v = alg_args.clone();
            v.extend([
                "--L-ns".to_string(),
                l_ns_s.clone(),
                "--kill".to_string(),
                format_kills(&mine),
            ]);
            v.extend(["--poll".to_string(), child_poll.clone()]);
            if a.transport.kind() == TransportKind::Verbs {
                // QP data goes through a directory beside the hostfile.
                v.extend([
                    "--transport".to_string(),
                    "verbs".to_string(),
                    "--verbs-dir".to_string(),
                ]);
                v.push(dir.join("verbs").display().to_string());
                v.extend(a.verbs.to_args());
            }
            v.extend(key_args.iter().cloned());
            v
        };
        let r = crate::experiment::launch::bcast::run_parent(
            &exe,
            &bench.cluster,
            bench.auth.as_ref(),
            &kills,
            &child_args,
            &dir,
        );
        let _ = std::fs::remove_dir_all(&dir);
        r?
    } else {
        if kills.iter().any(|k| matches!(k.point, KillPoint::SigKill { .. })) {
            return Err("--kill R@I:sigkill needs --procs (a thread cannot be SIGKILLed)".into());
        }
        crate::runtime::run(&bench, progress)?
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let pred = if a.no_model {
        None
    } else {
        Some(predict(&algo, a.nodes, model, o_ns, &kills, (a.warmup, a.iterations))?)
    };
    if let Some((f, path)) = &mut hlog {
        write_hlog(f, &res).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    crate::report::bench::print(&BenchReport {
        a: BenchFacts {
            nodes: a.nodes,
            transport: a.transport.kind(),
            size: a.size,
            iterations: a.iterations,
            warmup: a.warmup,
            window: a.window,
            shared_cores: a.shared_cores,
            procs: a.procs,
            boot: a.boot.is_some(),
            join: a.join.is_some(),
            json: a.json,
            params: a.params.clone(),
            o_ns_given: a.o_ns.is_some(),
            l_ns_given: a.l_ns.is_some(),
        },
        algo: &algo,
        res: &res,
        est,
        cal: cal.as_ref(),
        pred,
        workers,
        poll,
        kills: &kills,
        kill_text: &kill_text,
        o_ns,
        l_ns,
        own_o_ns,
        cores,
    });
    dropped_failure(&res)
}
