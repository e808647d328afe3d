//! A `sim` / `model` run as the user specifies it ([`SimSpec`]) and its resolution into a
//! checked [`Setup`]: every impossible combination is a one-line error here, before anything runs.

use crate::experiment::algo::{Algo, AlgoSpec, LoggpSpec, loggp, resolve_algo};
use crate::experiment::spec;
use crate::model::LogP;
use crate::sim::{DeadBefore, Experiment, Faults, Receives};

/// A Monte Carlo simulation of one broadcast algorithm, unresolved (the flags of `sim`).
#[derive(Clone, Debug)]
pub struct SimSpec {
    pub alg: AlgoSpec,
    /// Number of processes P (N).
    pub nodes: u32,
    /// LogP latency L.
    pub l: u64,
    /// LogP overhead o (> 0).
    pub o: u64,
    pub loggp: LoggpSpec,
    /// Processes dead before the operation: a count (5), a percentage (1%) or a fraction (0.01).
    pub faults: String,
    /// These ranks are dead before the operation (comma-separated; overrides `faults`).
    pub dead: Option<String>,
    /// Random processes that die during each run.
    pub online_faults: u32,
    /// Specific online failures: RANK@TIME,...
    pub kill: Option<String>,
    /// Modeled failure-detector delay (BFB).
    pub detect_delay: u64,
    /// The senders know the processes dead before the operation ([`Faults::known_dead`]).
    pub known_dead: bool,
    /// `queued` or `parallel` [default: queued].
    pub receives: Option<String>,
    /// The processes share this many cores (`None`: a core per process).
    pub cores: Option<u32>,
    /// With `cores`: a core's visit of a process with nothing to do, time units.
    pub core_visit: Option<u64>,
    /// With `core_visit`: what a process's visit with work holds its core after its last send
    /// or receive (`Timing::set_work`).
    pub core_work: Option<u64>,
    /// With `core_visit`: what a visit that received only from its own core holds its core
    /// after its work, and with `cores` the receive of a message from a process of the same
    /// core, time units (`Timing::set_local`; `None`: `core_work`, `o_r`).
    pub core_local_work: Option<u64>,
    pub core_local_receive: Option<u64>,
    /// With `core_visit`: what a process's visit costs more per process beyond the first that
    /// sends to it, time units (`Timing::set_poll_per_source`).
    pub core_poll_per_source: Option<f64>,
    /// Monte Carlo runs.
    pub runs: u64,
    /// Base seed.
    pub seed: u64,
    /// Worker threads [default: all cores].
    pub threads: Option<usize>,
    /// Per-run event cap [default: 4000·P + 10^7].
    pub max_events: Option<u64>,
}

/// The most simulation threads (`--threads`).
pub const MAX_THREADS: usize = 4096;

/// A validated `sim` / `model` invocation.
#[derive(Clone, Debug)]
pub struct Setup {
    pub algo: Algo,
    pub experiment: Experiment,
    /// The fault flag as given, for the report header.
    pub faults_text: String,
}

impl Setup {
    /// Validates the spec; errors are one line (naming the flags of `sim`).
    pub fn from_spec(a: &SimSpec) -> Result<Setup, String> {
        if a.nodes < 2 {
            return Err(format!("--nodes must be at least 2, got {}", a.nodes));
        }
        let logp = LogP::new(a.l, a.o)?;
        if a.detect_delay > LogP::MAX {
            return Err(format!(
                "--detect-delay must be at most {} (got {})",
                LogP::MAX,
                a.detect_delay
            ));
        }
        let gp = loggp(logp, &a.loggp)?;
        // The closed forms behind the defaults (gossip T, the online-fault window) have a
        // LogP form only: they get the LogP that counts the same hop and send slot.
        let logp = gp.counting_logp();
        if a.runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        let n = a.nodes;
        let dead_guess = match spec::dead(&a.faults)? {
            DeadBefore::Count(c) => c,
            DeadBefore::Fraction(f) => Faults::fraction_count(f, n),
            DeadBefore::List(l) => l.len() as u32,
        };
        let algo = resolve_algo(&a.alg, n, logp, dead_guess)?;
        let before = match &a.dead {
            Some(list) => DeadBefore::List(spec::ranks(list)?),
            None => spec::dead(&a.faults)?,
        };
        let online_list = a.kill.as_deref().map(spec::kills).transpose()?.unwrap_or_default();
        let horizon = crate::experiment::defaults::fault_free_latency(&algo, n, logp).max(1);
        let faults = Faults {
            before,
            online: a.online_faults,
            online_horizon: horizon,
            online_list,
            detect_delay: a.detect_delay,
            known_dead: a.known_dead,
        };
        faults.validate(n)?;
        if a.core_visit.is_some() && a.cores.is_none() {
            return Err("--core-visit is the cost of a shared core's visit: give --cores too".into());
        }
        if a.core_local_receive.is_some() && a.cores.is_none() {
            return Err(
                "--core-local-receive is the cost of a receive from a process of the same core: give --cores too"
                    .into(),
            );
        }
        if a.core_local_work.is_some() && a.core_visit.is_none() {
            return Err(
                "--core-local-work is what a shared core's visit that received only from its own core costs after it: give --cores and --core-visit too"
                    .into(),
            );
        }
        if a.core_poll_per_source.is_some() && a.core_visit.is_none() {
            return Err(
                "--core-poll-per-source is what a shared core's visit costs per process that sends to its process: give --cores and --core-visit too"
                    .into(),
            );
        }
        if a.core_poll_per_source.is_some_and(|u| u > 0.0) && n > crate::sim::timing::MAX_SOURCE_PROCESSES {
            return Err(format!(
                "--core-poll-per-source keeps each process's senders: at most {} processes",
                crate::sim::timing::MAX_SOURCE_PROCESSES
            ));
        }
        if a.core_work.is_some() && a.core_visit.is_none() {
            return Err(
                "--core-work is what a shared core's visit with work costs after it: give --cores and --core-visit too"
                    .into(),
            );
        }
        let threads = match a.threads {
            Some(0) => return Err("--threads must be at least 1".into()),
            Some(t) if t > MAX_THREADS => {
                return Err(format!(
                    "--threads {t} is more than {MAX_THREADS} (each holds a simulator and a stack; one per core is what helps)"
                ));
            }
            Some(t) => t,
            None => std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1),
        };
        let noise = a
            .loggp
            .noise
            .as_deref()
            .map(|p| crate::sim::Noise::load(p, gp).map(std::sync::Arc::new))
            .transpose()?;
        let experiment = Experiment {
            n,
            logp: gp,
            noise,
            faults,
            runs: a.runs,
            seed: a.seed,
            threads,
            max_events: a.max_events.unwrap_or_else(|| Experiment::default_max_events(n)),
            receives: match a.receives.as_deref() {
                Some("parallel") => Receives::Parallel,
                _ => Receives::Queued,
            },
            cores: a.cores,
            visit: a.core_visit.unwrap_or(0),
            work: a.core_work.unwrap_or(0),
            local_work: a.core_local_work,
            local_receive: a.core_local_receive,
            poll_per_source: a.core_poll_per_source.map_or(0, |u| (u * 1000.0).round() as u64),
        };
        let faults_text = match &a.dead {
            Some(l) => format!("dead={l}"),
            None => a.faults.clone(),
        };
        Ok(Setup {
            algo,
            experiment,
            faults_text,
        })
    }
}
