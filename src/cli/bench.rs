//! `ftcoll bench`: the main job's flags. They build a [`BenchSpec`], which
//! [`crate::experiment::bench`] checks and runs on the runner it picks (local, `--procs`,
//! `--join`/`--boot`); [`crate::report::bench`] prints the perftest-like table next to the
//! LogP prediction.

use std::io::IsTerminal;

use clap::Args;

use crate::cli::flags::{AlgoArgs, WALL_MAX_MS, WALL_MAX_NS};
use crate::cli::values::{PollArg, TransportArg};
use crate::experiment::bench::Runner;
use crate::experiment::bench::{BenchEnv, BenchSpec, Ran};
use crate::experiment::failure::Failure;
use crate::experiment::verdict::{BenchCounts, Verdict};
use crate::report::bench::{BenchFacts, BenchReport, write_hlog, write_trace};
use crate::runtime::cluster::PollMode;
use crate::runtime::node::trace;

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
    // The bracketed option in the help is its syntax, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Crashes: R (dead from the start), R@I[:recv] (dies on iteration I's first message),
    /// R@I:sent=K (after sending K messages of iteration I), comma-separated; `none` for no
    /// crash [default: rank 1, the root's first child, dies on receiving mid-run].
    #[arg(long)]
    pub kill: Option<String>,
    /// Operations in flight at once (1: a barrier between iterations, like osu_bcast).
    #[arg(long, default_value_t = 1)]
    pub window: u64,
    /// LogP o in ns for the protocols' time unit and the prediction [default: measured].
    #[arg(long = "o-ns", value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub o_ns: Option<u64>,
    /// LogP L in ns [default: measured].
    #[arg(long = "L-ns", value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
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
    #[arg(long = "op-timeout-ms", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=WALL_MAX_MS))]
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
    /// Write the message trace of the measured operations to FILE as CSV (op, time_ns, node,
    /// event, peer, label: `sim --trace`'s columns, times from each operation's start at its
    /// root). Local runs, in a binary built with `--features trace`.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
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
    /// Drop this fraction of the datagrams every node receives (UDP, local and --procs runs):
    /// the transport repairs each loss by retransmission, and the prediction models it (each
    /// lost copy of a message costs the sender's retransmission timeout) [default: 0].
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub loss: f64,
    /// Emulated one-way link delay in ns, held in the UDP transport on receive (for kernels
    /// without `netem`; the netns script passes it) [default: 0, off; --join runs only].
    #[arg(long = "emulate-delay-ns", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
    pub emulate_delay_ns: u64,
    /// Uniform jitter added to --emulate-delay-ns, ns.
    #[arg(long = "emulate-jitter-ns", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_NS))]
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
    /// With --boot: this launch's id, the same on every process of it and new for each
    /// launch; the run's datagrams are sealed with a key derived from it [default: the
    /// launcher's, Slurm SLURM_JOB_ID.SLURM_STEP_ID or Open MPI PMIX_NAMESPACE; a keyed run
    /// needs one].
    #[arg(long = "run-id", value_name = "STR", requires = "boot")]
    pub run_id: Option<String>,
    /// With --join: how long to wait for every rank to join (and the longest silence of the
    /// coordinator a node accepts), ms.
    #[arg(long = "join-timeout-ms", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(..=WALL_MAX_MS))]
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
    /// Exit 0 even when live nodes were suspected of having crashed (false suspicions are
    /// then reported, not failed; so is the end of the run when the fenced node was the
    /// root). Violations, timeouts and lost messages still fail the run.
    #[arg(long = "allow-false-suspicions")]
    pub allow_false_suspicions: bool,
}

impl BenchArgs {
    /// The run these flags describe.
    pub fn to_spec(&self) -> BenchSpec {
        BenchSpec {
            alg: self.alg.spec(),
            nodes: self.nodes,
            transport: self.transport.kind(),
            workers: self.workers,
            poll: self.poll.map(PollMode::from),
            size: self.size,
            iterations: self.iterations,
            warmup: self.warmup,
            kill: self.kill.clone(),
            window: self.window,
            o_ns: self.o_ns,
            l_ns: self.l_ns,
            params: self.params.clone(),
            shared_cores: self.shared_cores,
            op_timeout_ms: self.op_timeout_ms,
            seed: self.seed,
            no_pin: self.no_pin,
            procs: self.procs,
            no_model: self.no_model,
            join: self.join,
            rank: self.rank,
            bind: self.bind,
            emulate_delay_ns: self.emulate_delay_ns,
            emulate_jitter_ns: self.emulate_jitter_ns,
            loss: self.loss,
            boot: self.boot,
            boot_parent: self.boot_parent,
            control_port: self.control_port,
            join_timeout_ms: self.join_timeout_ms,
            run_id: self.run_id.clone(),
            child_alg_args: self.alg.to_args(),
            child_verbs_args: self.verbs.to_args(),
        }
    }
}

/// Runs `ftcoll bench`: the report, then the verdict (a failed run exits non-zero with its
/// reasons on the last line).
pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    let configure_verbs = |t| args.verbs.apply(t);
    // A launched run's processes must share the key (FTCOLL_KEY or --key-file): none is
    // generated there. Local runs generate one for their nodes. Resolved when the run starts
    // (after every check of the flags).
    let job_key = |generate| crate::cli::auth::job_key(args.auth, args.key_file.as_deref(), generate);
    let env = BenchEnv {
        configure_verbs: &configure_verbs,
        job_key: &job_key,
        write_key_file: &crate::cli::auth::write_key_file,
        poll_name: crate::cli::values::poll_name,
    };
    let checked = args.to_spec().validate(&env)?;
    if crate::runtime::node::stages::ON {
        eprintln!(
            "note: this build stamps the forwarding path (feature `stages`): every broadcast is slower by the clock reads; measure with a build without it"
        );
    }
    let reports = checked.reports();
    let a = &checked.spec;
    // Opened (created) before the run, so an unwritable path fails now, not after it.
    let mut hlog = match &args.hlog {
        Some(p) if reports => Some((crate::report::output::open_for_output(p)?, p)),
        _ => None,
    };
    let mut trace_out = match &args.trace {
        Some(_) if !trace::ENABLED => {
            let e = "bench --trace needs a binary built with the trace feature: cargo build --release --features trace";
            return Err(String::from(e).into());
        }
        Some(_) if checked.runner() != Runner::Local => {
            return Err(String::from("bench --trace traces local runs only (not --procs, --join or --boot)").into());
        }
        Some(p) => Some((crate::report::output::open_for_output(p)?, p)),
        None => None,
    };
    let show = reports && !args.json && std::io::stderr().is_terminal();
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
    let out = match checked.run(&env, progress)? {
        // Not the coordinator: this process was one node; rank 0 prints the results.
        Ran::Node => return Ok(()),
        Ran::Measured(out) => out,
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let pred = checked.prediction(&out)?;
    if let Some((f, path)) = &mut hlog {
        write_hlog(f, &out.res).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some((f, path)) = &mut trace_out {
        write_trace(f, path, a.warmup)?;
    }
    let verdict = Verdict::bench(&BenchCounts::from(&out.res), args.allow_false_suspicions);
    crate::report::bench::print(&BenchReport {
        a: BenchFacts {
            nodes: a.nodes,
            transport: a.transport,
            size: a.size,
            iterations: a.iterations,
            warmup: a.warmup,
            window: a.window,
            shared_cores: a.shared_cores,
            procs: a.procs,
            boot: a.boot.is_some(),
            join: a.join.is_some(),
            json: args.json,
            params: a.params.clone(),
            o_ns_given: a.o_ns.is_some(),
            l_ns_given: a.l_ns.is_some(),
            loss: out.noise.as_ref().and_then(|n| n.loss),
            loss_rto_measured: out.loss_rto_measured,
        },
        algo: &out.algo,
        res: &out.res,
        est: out.est,
        cal: out.cal.as_ref(),
        pred,
        workers: out.workers,
        poll: out.poll,
        kills: &checked.kills,
        kill_text: &checked.kill_text,
        o_ns: out.o_ns,
        l_ns: out.l_ns,
        own_o_ns: out.own_o_ns,
        model: out.model,
        model_cores: out.model_cores,
        model_visit_ns: out.model_visit_ns,
        model_work_ns: out.model_work_ns,
        model_local_work_ns: out.model_local_work_ns,
        model_local_or_ns: out.model_local_or_ns,
        model_ring_poll_ns: out.model_ring_poll_ns,
        // Loss alone (a fixed o and L) is not drawn from measured distributions.
        noisy: out.noise.as_ref().is_some_and(|n| n.loss.is_none() || !n.is_constant()),
        node_hop: out.node_hop,
        cores: out.cores,
        verdict: &verdict,
    });
    if let Some(note) = verdict.accepted_note() {
        eprintln!("ftcoll: warning: {note}");
    }
    verdict.into_result()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::args::{Cli, Command};
    use crate::experiment::bench::Runner;
    use crate::transport::udp::auth::AuthKey;

    /// The runner `ftcoll bench FLAGS` picks, checked without running anything.
    fn runner(flags: &str) -> Result<Runner, String> {
        let argv = ["ftcoll", "bench"].into_iter().chain(flags.split_whitespace());
        let Command::Bench(args) = Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command else {
            unreachable!("parsed as bench");
        };
        let configure_verbs = |_| Ok(());
        let job_key = |_| Ok(None::<AuthKey>);
        let write_key_file = |_: &std::path::Path, _: &AuthKey| Err::<std::path::PathBuf, _>("no files".to_string());
        let env = super::BenchEnv {
            configure_verbs: &configure_verbs,
            job_key: &job_key,
            write_key_file: &write_key_file,
            poll_name: crate::cli::values::poll_name,
        };
        Ok(args.to_spec().validate(&env)?.runner())
    }

    #[test]
    fn the_flags_pick_the_runner() {
        assert_eq!(runner("--nodes 4"), Ok(Runner::Local));
        assert_eq!(runner("--nodes 4 --transport inproc --workers 2"), Ok(Runner::Local));
        assert_eq!(runner("--nodes 4 --procs"), Ok(Runner::Procs));
        let join = "--join 127.0.0.1:9 --nodes 4 --rank";
        assert_eq!(runner(&format!("{join} 0")), Ok(Runner::Coordinator));
        assert_eq!(runner(&format!("{join} 3")), Ok(Runner::Node { rank: 3 }));
        let boot = "--boot 127.0.0.1:9001 --o-ns 1000 --L-ns 2000 --nodes 4 --rank";
        assert_eq!(runner(&format!("{boot} 0")), Ok(Runner::Coordinator));
        assert_eq!(
            runner(&format!("{boot} 1 --boot-parent 127.0.0.1:9000")),
            Ok(Runner::Node { rank: 1 })
        );
        assert!(runner("--nodes 4 --procs --join 127.0.0.1:9 --rank 0").is_err());
    }
}
