//! `ftcoll bench`: the main job. A local cluster (threads of this process over UDP loopback or
//! in-process queues) broadcasts back to back with crashes injected, checks every operation
//! for consistency, and prints a perftest-like table next to the LogP prediction.

use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;
use hdrhistogram::Histogram;
use serde_json::json;

use crate::cli::args::AlgoArgs;
use crate::cli::node::{BootSpec, JoinedNode, run_joined_node};
use crate::cli::values::{PollArg, TransportArg};
use crate::experiment::algo::{Algo, resolve_algo};
use crate::experiment::launch::bcast::coordinate_joined;
use crate::experiment::sim::Setup;
use crate::experiment::simulate as runner;
use crate::model::LogP;
use crate::runtime::cluster::{ClusterConfig, ClusterResult, PollMode};
use crate::runtime::control::ParentAgent;
use crate::runtime::join::JobParams;
use crate::runtime::kill::{Kill, KillPoint, format_kills, parse_kills};
use crate::runtime::logp::{Estimate, estimate};
use crate::runtime::procs::{rank_from_env, unix_ns};
use crate::runtime::{Bench, TransportKind};
use crate::sim::{DeadBefore, Experiment, Faults};

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

/// Percentiles of a histogram in µs.
fn pcts(h: &Histogram<u64>) -> serde_json::Value {
    let us = |v: u64| v as f64 / 1000.0;
    json!({
        "t_min": us(h.min()), "p50": us(h.value_at_quantile(0.5)), "avg": h.mean() / 1000.0,
        "p99": us(h.value_at_quantile(0.99)), "p99.9": us(h.value_at_quantile(0.999)), "max": us(h.max()),
    })
}

fn row(name: &str, h: &Histogram<u64>) -> String {
    let us = |v: u64| v as f64 / 1000.0;
    format!(
        "{name:<22}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>10.2}\n",
        us(h.min()),
        us(h.value_at_quantile(0.5)),
        h.mean() / 1000.0,
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999)),
        us(h.max())
    )
}

/// The simulator's prediction of the median coloring latency (ns) for the same algorithm,
/// nodes and nodes dead from the start, with the measured L and o.
/// The simulator's prediction for the measured operations `warmup..warmup + iterations`: nodes
/// dead from the start are dead in every run, and a node crashed during iteration I is dead in
/// the share of runs that stands for the measured operations from I on (the runs are split
/// over the segments between crashes in proportion to their lengths).
/// LogP `o` on hosts that share `cores` cores (processor sharing): each of `nodes`
/// busy-polling nodes runs `cores / nodes` of the time, so a message's `o` of CPU time takes
/// `o · nodes / cores` of wall time. Unchanged with a core per node (or `cores` unset).
pub fn shared_o_ns(o_ns: u64, nodes: u32, cores: Option<u32>) -> u64 {
    match cores {
        Some(c) if c > 0 && nodes > c => (o_ns * u64::from(nodes)).div_ceil(u64::from(c)),
        _ => o_ns,
    }
}

fn predict(
    algo: &Algo,
    n: u32,
    model: LogP,
    o_ns: u64,
    kills: &[Kill],
    measured: (u64, u64),
) -> Result<Prediction, String> {
    const RUNS: u64 = 200;
    let (first, end) = (measured.0, measured.0 + measured.1);
    let mut cuts: Vec<(u64, u32)> = kills.iter().filter_map(|k| Some((k.iteration()?, k.rank))).collect();
    cuts.sort_unstable();
    let mut dead: Vec<u32> = kills
        .iter()
        .filter(|k| k.point == KillPoint::Start)
        .map(|k| k.rank)
        .collect();
    let mut segments: Vec<(Vec<u32>, u64)> = Vec::new();
    let mut at = first;
    for &(iter, rank) in &cuts {
        if iter > at && at < end {
            segments.push((dead.clone(), iter.min(end) - at));
            at = iter.min(end);
        }
        dead.push(rank);
    }
    if at < end {
        segments.push((dead.clone(), end - at));
    }
    let total: u64 = segments.iter().map(|s| s.1).sum::<u64>().max(1);
    let mut summary: Option<crate::sim::stats::Summary> = None;
    for (dead, len) in segments {
        let runs = (RUNS * len).div_ceil(total).max(1);
        let setup = Setup {
            algo: algo.clone(),
            experiment: Experiment {
                n,
                logp: model.into(),
                noise: None,
                faults: Faults {
                    before: DeadBefore::List(dead),
                    ..Faults::default()
                },
                runs,
                seed: 1,
                threads: 1,
                max_events: Experiment::default_max_events(n),
                receives: Default::default(),
            },
            faults_text: String::new(),
        };
        let s = runner::simulate_complete(&setup, "the LogP prediction")?;
        match summary.as_mut() {
            Some(all) => all.merge(&s),
            None => summary = Some(s),
        }
    }
    let s = summary.ok_or("no measured operations to predict")?;
    let ns = |p: crate::sim::stats::Percentiles| [p.p50 * o_ns as f64, p.p99 * o_ns as f64, p.p999 * o_ns as f64];
    let r = s.report();
    Ok(Prediction {
        coloring: ns(r.coloring_latency),
        quiescence: ns(r.quiescence_latency),
        messages: r.messages_per_process.mean * f64::from(n),
    })
}

/// The simulator's p50, p99 and p99.9 (ns) and mean messages per operation.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Prediction {
    coloring: [f64; 3],
    quiescence: [f64; 3],
    messages: f64,
}

const QS: [f64; 3] = [0.5, 0.99, 0.999];

fn compare(h: &Histogram<u64>, pred: &[f64; 3]) -> serde_json::Value {
    let m: Vec<f64> = QS.iter().map(|&q| h.value_at_quantile(q) as f64).collect();
    json!({
        "measured_us": {"p50": m[0] / 1e3, "p99": m[1] / 1e3, "p99.9": m[2] / 1e3},
        "predicted_us": {"p50": pred[0] / 1e3, "p99": pred[1] / 1e3, "p99.9": pred[2] / 1e3},
        "ratio": {"p50": m[0] / pred[0].max(1.0), "p99": m[1] / pred[1].max(1.0), "p99.9": m[2] / pred[2].max(1.0)},
    })
}

fn compare_rows(name: &str, h: &Histogram<u64>, pred: &[f64; 3]) -> String {
    let mut s = String::new();
    for (i, q) in ["p50", "p99", "p99.9"].iter().enumerate() {
        let m = h.value_at_quantile(QS[i]) as f64;
        s += &format!(
            "  {name:<11}{q:<7}{:>12.2}{:>12.2}{:>10.2}\n",
            m / 1e3,
            pred[i] / 1e3,
            m / pred[i].max(1.0)
        );
    }
    s
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
    let joined_node = |rank: u32, auth| JoinedNode {
        auth,
        alg: &a.alg,
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
    if a.json {
        let v = json!({
            "config": {
                "algo": algo, "description": algo.describe(), "nodes": a.nodes, "transport": a.transport.kind(),
                "workers": workers, "poll": poll, "size": a.size, "iterations": a.iterations,
                "warmup": a.warmup, "window": a.window, "kills": kills, "o_ns": o_ns, "L_ns": l_ns,
                "own_o_ns": own_o_ns, "shared_cores": a.shared_cores,
            },
            "logp_estimate": est,
            "calibration": cal,
            "coloring_latency_us": pcts(&res.coloring),
            "quiescence_latency_us": pcts(&res.quiescence),
            "delivery_latency_us": pcts(&res.delivery),
            "messages_per_op": res.messages.mean(),
            "violations": res.violations,
            "timeouts": res.timeouts,
            "dropped_ops": res.dropped_ops,
            "measured_ops": res.measured,
            "wall_seconds": res.wall.as_secs_f64(),
            "ops_per_second": res.measured as f64 / res.wall.as_secs_f64().max(1e-9),
            "prediction": pred.map(|p| json!({
                "coloring": compare(&res.coloring, &p.coloring),
                "quiescence": compare(&res.quiescence, &p.quiescence),
                "messages_per_op": p.messages,
            })),
            "transport": res.transport,
            "drops": res.drops,
            "stale": res.stale, "spoofed": res.spoofed, "wrong_kind": res.wrong_kind, "backpressure": res.backpressure,
            "deferred_overflow": res.deferred_overflow, "too_far": res.too_far,
            "dead_nodes": res.dead_nodes,
            "clock_uncertainty_ns": res.clock_uncertainty_ns,
            "clocks_ns": res.clocks.iter().map(|c| c.map(|(o, u)| json!({"offset": o, "uncertainty": u}))).collect::<Vec<_>>(),
        });
        println!("{v}");
        return dropped_failure(&res);
    }
    let mut s = String::new();
    s += &format!("ftcoll bench: {}\n", algo.describe());
    s += &format!(
        "nodes={} transport={:?}{} workers={} poll={:?} size={}B iterations={} warmup={} window={} kills={}\n",
        a.nodes,
        a.transport.kind(),
        if a.procs {
            " (one process per node)"
        } else if a.boot.is_some() {
            " (launched, one process per node, bootstrapped by the BMG overlay from parents' addresses)"
        } else if a.join.is_some() {
            " (launched, one process per node, joined at rank 0)"
        } else {
            ""
        },
        workers,
        poll,
        a.size,
        a.iterations,
        a.warmup,
        a.window,
        kill_text
    );
    match est {
        Some(e) => {
            s += &format!(
                "LogP (estimated by ping-pong, median of {}): o = {} ns (send {} / recv {}), L = {} ns, RTT = {} ns\n",
                e.samples, own_o_ns, e.o_send_ns, e.o_recv_ns, l_ns, e.rtt_ns
            );
            let ci =
                |c: crate::runtime::logp::Ci| format!("[{:.0}, {:.0}] ns (±{:.0}%)", c.lo, c.hi, 50.0 * c.spread());
            s += &format!(
                "  spread of the estimate (95% interval of the median): send {}, recv {}; `ftcoll logp --save F` + `--params F` gives a stable calibration\n",
                ci(e.o_send_ci_ns),
                ci(e.o_recv_ci_ns)
            );
        }
        None if cal.is_some() && a.o_ns.is_none() && a.l_ns.is_none() => {
            s += &format!("LogP (from the calibration): o = {own_o_ns} ns (mean of o_s and o_r), L = {l_ns} ns\n")
        }
        None => s += &format!("LogP (given): o = {own_o_ns} ns, L = {l_ns} ns\n"),
    }
    if let (Some(c), Some(path)) = (&cal, &a.params) {
        s += &format!(
            "calibration {} ({} samples, {}, {} B; median and 95% interval): {}\n",
            path.display(),
            c.samples,
            c.transport,
            c.size,
            c.summary()
        );
    }
    if o_ns != own_o_ns {
        s += &format!(
            "shared cores: {} nodes on {} cores, each runs {}/{} of the time: o taken as {o_ns} ns (protocols' time unit and model)\n",
            a.nodes,
            a.shared_cores.unwrap_or(0),
            a.shared_cores.unwrap_or(0),
            a.nodes
        );
    }
    if a.join.is_some() && est.is_some() {
        s += "note: L and o were estimated on rank 0's loopback, not between hosts: give --L-ns/--o-ns from `ftcoll logp` between two hosts for a cluster model\n";
    }
    s += &format!(
        "\n{:<22}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
        "latency (µs)", "t_min", "p50", "avg", "p99", "p99.9", "max"
    );
    s += &row("coloring", &res.coloring);
    s += &row("quiescence", &res.quiescence);
    s += &row("per-node delivery", &res.delivery);
    s += &format!(
        "\nmessages per operation: {:.2}   consistency violations: {}   timeouts: {}   ops with unsent messages: {}   operations: {} ({:.0}/s)\n",
        res.messages.mean(),
        res.violations,
        res.timeouts,
        res.dropped_ops,
        res.measured,
        res.measured as f64 / res.wall.as_secs_f64().max(1e-9)
    );
    if let Some(p) = pred {
        s += &format!(
            "\nLogP prediction (simulator, same algorithm and nodes; crashed nodes dead in the share of operations after their crash; {:.2} messages/op):\n",
            p.messages
        );
        s += &format!(
            "  {:<11}{:<7}{:>12}{:>12}{:>10}\n",
            "latency", "", "measured µs", "model µs", "ratio"
        );
        s += &compare_rows("coloring", &res.coloring, &p.coloring);
        s += &compare_rows("quiescence", &res.quiescence, &p.quiescence);
    }
    if a.procs && a.nodes as usize > cores {
        let how = match poll {
            PollMode::Blocking => "they block on their sockets and the OS wakes them",
            PollMode::Yield | PollMode::Adaptive => "a message waits until its process next gets a core",
            PollMode::Busy => "spinning processes hold the cores the others need",
        };
        s += &format!(
            "note: {} node processes share {} cores (plus this coordinator): {how}; the model gives every node its own core, so expect latencies well above it.\n",
            a.nodes, cores
        );
    } else if a.nodes as usize > workers {
        s += &format!(
            "note: {} nodes share {} workers, so a message may wait while its worker serves other nodes; the model gives every node its own core, so expect measured > predicted.\n",
            a.nodes, workers
        );
    }
    if let Some(u) = res.clock_uncertainty_ns {
        s += &format!(
            "clocks: each process's offset to this coordinator estimated by ping-pong; largest uncertainty {:.2} µs\n",
            u as f64 / 1e3
        );
    }
    let t = &res.transport;
    if a.join.is_some() {
        s += "transport: counters stay with each node in a launched run (ftcoll node prints them)\n";
        print!("{s}");
        return dropped_failure(&res);
    }
    s += &format!(
        "transport: sent {} received {} retransmits {} suspected {}; dropped: malformed {} foreign {} bad-mac {} foreign-job {} bad-rank {} decode {} stale {} too-far {} deferred-overflow {}; dead nodes {:?}\n",
        t.sent,
        t.received,
        t.retransmits,
        t.suspected,
        t.malformed,
        t.foreign,
        t.bad_mac,
        t.foreign_job,
        t.bad_rank,
        res.drops.total(),
        res.stale,
        res.too_far,
        res.deferred_overflow,
        res.dead_nodes
    );
    if res.counters_lost > 0 {
        s += &format!(
            "transport: the counters of {} SIGKILLed process(es) died with them (their sends are missing from the totals, not what their peers received)\n",
            res.counters_lost
        );
    }
    print!("{s}");
    dropped_failure(&res)
}

/// A message a node could not send is a failed operation, never a silent loss.
fn dropped_failure(res: &ClusterResult) -> Result<(), String> {
    if res.dropped_ops > 0 {
        return Err(format!(
            "{} operation(s) lost messages a node could not send (deferred-queue overflow {}, bad destinations counted in decode drops)",
            res.dropped_ops, res.deferred_overflow
        ));
    }
    Ok(())
}

fn write_hlog(f: &mut std::fs::File, res: &ClusterResult) -> std::io::Result<()> {
    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    let mut bytes = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .add_comment("ftcoll bench latency histograms, values in ns")
        .with_max_value_divisor(1000.0)
        .begin_log_with(&mut bytes, &mut ser)?;
    let d = res.wall;
    for (tag, h) in [
        ("coloring", &res.coloring),
        ("quiescence", &res.quiescence),
        ("delivery", &res.delivery),
    ] {
        w.write_histogram(h, Duration::ZERO, d, Tag::new(tag))
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
    }
    crate::report::output::replace_contents(f, &bytes)
}

#[cfg(test)]
mod tests {
    use super::shared_o_ns;

    #[test]
    fn o_stretches_only_when_nodes_outnumber_the_shared_cores() {
        assert_eq!(shared_o_ns(1272, 4, None), 1272, "a core per node");
        assert_eq!(shared_o_ns(1272, 4, Some(4)), 1272);
        assert_eq!(shared_o_ns(1272, 4, Some(8)), 1272);
        assert_eq!(
            shared_o_ns(1272, 4, Some(2)),
            2544,
            "two nodes per core: half the time each"
        );
        assert_eq!(shared_o_ns(1000, 5, Some(2)), 2500);
        assert_eq!(shared_o_ns(1001, 3, Some(2)), 1502, "rounded up");
    }
}
