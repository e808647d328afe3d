//! A bench run as specified ([`BenchSpec`], no flag parsing), its checks
//! ([`BenchSpec::validate`]) and the runner it picks ([`Checked::runner`]).

use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};

use super::Runner;
use super::host;
use crate::experiment::algo::AlgoSpec;
use crate::runtime::TransportKind;
use crate::runtime::cluster::PollMode;
use crate::runtime::kill::{Kill, KillPoint, parse_kills};
use crate::runtime::procs::rank_from_env;
use crate::transport::udp::auth::AuthKey;

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
    /// Fraction of the datagrams each node's UDP transport drops on receive (loss injection,
    /// repaired by retransmission; local and `procs` runs).
    pub loss: f64,
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
    /// What runs it (picked from the spec, see [`Checked::runner`]).
    pub(super) runner: Runner,
    pub kills: Vec<Kill>,
    /// The crash specs as given (or defaulted).
    pub kill_text: String,
}

/// `--loss`'s value (of `bench` and of a `procs` node): a fraction in `[0, 1)`.
pub(crate) fn check_loss(p: f64) -> Result<(), String> {
    if (0.0..1.0).contains(&p) {
        Ok(())
    } else {
        Err(format!("--loss must be a fraction in [0, 1), got {p}"))
    }
}

fn default_kills(a: &BenchSpec) -> String {
    if a.nodes < 3 {
        return "none".into();
    }
    format!("1@{}", a.warmup + a.iterations / 2)
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
    // The flag the user gave: --boot launches like --join.
    let flag = if a.boot.is_some() { "--boot" } else { "--join" };
    if a.procs {
        return Err(format!(
            "{flag} and --procs exclude each other (the launcher starts the processes)"
        ));
    }
    if a.transport == TransportKind::Inproc {
        return Err(format!(
            "{flag} needs --transport udp or verbs (processes do not share memory)"
        ));
    }
    let (rank, n) = match a.rank {
        Some(r) => (r, a.nodes),
        None => rank_from_env().ok_or(format!(
            "{flag} needs this process's rank: give --rank (and --nodes), or run under Slurm, Open MPI or a PMI launcher"
        ))?,
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
        // Here, before anything is measured (the run's ping-pong may print a warning first).
        if a.procs && a.transport == TransportKind::Inproc {
            return Err("--procs needs --transport udp or verbs (processes do not share memory)".into());
        }
        check_loss(a.loss)?;
        if a.loss > 0.0 && a.transport != TransportKind::Udp {
            return Err("--loss needs --transport udp (the loss is injected in the UDP transport and repaired by its retransmissions)".into());
        }
        if a.loss > 0.0 && (a.join.is_some() || a.boot.is_some()) {
            return Err(
                "--loss applies to local and --procs runs (a launched run's network loses what it loses)".into(),
            );
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
        // (After the host check: the probe builds the algorithm for the run's nodes.) A payload
        // fits one datagram beside the algorithm's longest message (BFB's names the
        // ranks it excludes): a larger one ran while the messages were short and could not be
        // sent once they were not.
        let probe = crate::experiment::algo::resolve_algo(&a.alg, a.nodes, crate::model::LogP { l: 2, o: 1 }, 0)?;
        let max = crate::group::max_payload_of(&probe, a.nodes)?;
        if a.size > max {
            return Err(format!(
                "--size {}: at most {max} bytes fit one datagram beside {}'s longest message",
                a.size,
                probe.describe()
            ));
        }
        let runner = Runner::pick(a.procs, join_rank);
        let kill_text = a.kill.clone().unwrap_or_else(|| default_kills(&a));
        let kills = if kill_text == "none" {
            Vec::new()
        } else {
            parse_kills(&kill_text, a.nodes)?
        };
        // Iterations count from the first warm-up operation: one past the run's last would
        // never happen, and the run would pass as if it had crashed nobody.
        let ops = a.warmup.saturating_add(a.iterations);
        if let Some((k, i)) = kills
            .iter()
            .find_map(|k| Some((k, k.iteration()?)).filter(|&(_, i)| i >= ops))
        {
            return Err(format!(
                "--kill {}@{i}: the run's iterations are 0 to {} (--warmup {} then --iterations {}), so this crash would never happen",
                k.rank,
                ops - 1,
                a.warmup,
                a.iterations
            ));
        }
        Ok(Checked {
            runner,
            spec: a,
            kills,
            kill_text,
        })
    }
}

impl Checked {
    /// What the runner refuses of a spec that passed [`BenchSpec::validate`]: checked when the
    /// run starts (after the caller opened its outputs), before anything runs.
    pub fn refusal(&self) -> Option<String> {
        let a = &self.spec;
        match self.runner {
            Runner::Procs | Runner::Coordinator if a.workers.is_some() => {
                Some("--workers does not apply to --procs (each node process has one worker)".into())
            }
            Runner::Local if self.kills.iter().any(|k| matches!(k.point, KillPoint::SigKill { .. })) => {
                Some("--kill R@I:sigkill needs --procs (a thread cannot be SIGKILLed)".into())
            }
            _ => None,
        }
    }

    /// The runner this spec goes to: a local cluster, one process per node, or a launched
    /// run's coordinator or other node.
    pub fn runner(&self) -> Runner {
        self.runner
    }

    /// Whether this process reports the run (every runner but a launched run's node other
    /// than rank 0, which prints nothing).
    pub fn reports(&self) -> bool {
        !matches!(self.runner, Runner::Node { .. })
    }
}
