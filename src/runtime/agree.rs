//! ERA on a local cluster (`ftcoll agree`): nodes as threads of this process over UDP loopback,
//! in-process queues or ibverbs, stepped by a library group's workers (`prepare`,
//! `AgreeRun::split`, `AgreeWorker::pass`: `group::Group::agree_stream`), or, with
//! [`crate::runtime::agree_procs`], one process each,
//! each running ULFM's `benchagree` loop of back-to-back agreements on a 64-bit AND, with a
//! failure detector that watches only the node's ERA tree neighbours (ERA §2): heartbeats
//! every `heartbeat`, a neighbour silent for `suspect_after` is suspected, and so is one the
//! transport reports (UDP retries exhausted or ICMP port unreachable; in-process, a send to a
//! killed endpoint — the closed-socket signal). Nodes can be killed when they would enter a
//! given agreement; they then stop dead (the endpoint is closed, nothing more is sent).
//!
//! Every return is recorded on the process's one monotonic clock and classed online by
//! [`Window`](crate::runtime::agree_window::Window) as in the paper's §5.1 (failure-free, failure-detecting, stabilizing,
//! post-failure): nothing is kept per agreement, so memory per node is constant however many
//! agreements run (`--duration`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::protocol::Rank;
use crate::protocol::agree::{AgreeId, And64, EraConfig, SimValue};
use crate::runtime::agree_window::Class;
use crate::runtime::cluster::IdlePasses;
use crate::transport::inproc::InprocNet;
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::transport::{Transport, TransportStats};
use crate::wire::{DropCounters, HEADER_LEN};

mod node;
mod shared;

pub use node::DIGEST_BLOCK;
pub use node::EraFraming;
pub(crate) use node::{Fold, Node, NodeInit};
pub(crate) use shared::{CrashReport, LeftOutReport, Shared};

const JOB: u64 = 0xE4A0_A64E_E000_0001;

/// The heartbeat period of `ftcoll agree` by default when every node has a core of its own.
/// A node that waits on a neighbour it spoke to last heartbeats it after half a period, and a
/// dead neighbour's closed port refuses that heartbeat at once, so the period bounds how soon
/// a crash is found. On a lent 16-core machine (N = 8, kill 4@2500, three alternations) 50 µs
/// took UDP's kill to the first successful agreement from 212–246 µs (100 µs) to 177–186 µs
/// and inproc's from 135–143 to 85–112 µs, with the failure-free node p50 unchanged (UDP
/// 22.6–25.0 against 22.1–25.5 µs) (docs/measurements.md, "Kill to the first successful
/// agreement"). Where nodes share cores see [`shared_heartbeat`].
pub const DEDICATED_HEARTBEAT: Duration = Duration::from_micros(50);

/// The heartbeat period where `per_core` nodes share each core (1: a core of its own):
/// [`DEDICATED_HEARTBEAT`] times `per_core`, so a core sends about as many heartbeats as one
/// node with a core of its own does. A node heartbeats a neighbour it waits on, and where
/// nodes share a core an agreement takes about `per_core` times as long, so a fixed period
/// sends that many more heartbeats per agreement, each taking a neighbour's time (a UDP
/// heartbeat is a system call): at 100 µs, 16 nodes on one worker sent 128 datagrams per
/// agreement over UDP, ERA's 30 and 98 heartbeats, and took 2.7–4.0× the model's time; at
/// 800 µs 30, and 1.0–1.6× (docs/measurements.md, "Heartbeats where nodes share cores").
/// Finding a crash takes about half a period, which an agreement on shared cores takes
/// anyway.
pub fn shared_heartbeat(per_core: u32) -> Duration {
    DEDICATED_HEARTBEAT * per_core.max(1)
}

/// A neighbour silent this long is suspected, by default (the floor of the detector's
/// adaptive bound).
pub const DEFAULT_SUSPECT_AFTER: Duration = Duration::from_millis(100);

/// The most nodes: an ERA message with every other node failed and acknowledged (two sets of
/// `n - 1` ranks) must fit one transport datagram ([`crate::transport::MAX_PAYLOAD`]).
pub const MAX_NODES: u32 = 128;

const _: () =
    assert!(HEADER_LEN + 1 + 8 + 8 + 2 * (2 + 4 * (MAX_NODES as usize - 1)) + 1 + 8 <= crate::transport::MAX_PAYLOAD);

/// Which transport carries the agreements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgreeTransport {
    Inproc,
    Udp,
    /// ibverbs on this host's device; a crash destroys the node's QPs, which peers see as
    /// error completions (the transport's suspicion).
    Verbs,
}

/// One benchmark run.
#[derive(Clone, Debug)]
pub struct AgreeBench {
    pub n: u32,
    pub era: EraConfig,
    pub transport: AgreeTransport,
    /// Worker threads; node `r` runs on worker `r % workers`.
    pub workers: usize,
    pub pin: bool,
    pub warmup: u64,
    pub iterations: u64,
    /// Run until this much time is up instead of for `iterations` (`--duration`).
    pub duration: Option<Duration>,
    /// `(rank, i)`: the rank dies instead of entering measured agreement `i`.
    pub kills: Vec<(Rank, u64)>,
    /// Live nodes that stop for a while (`--stall`).
    pub stalls: Vec<Stall>,
    pub heartbeat: Duration,
    pub suspect_after: Duration,
    /// The run is abandoned when no agreement returns anywhere for this long.
    pub op_timeout: Duration,
    pub seed: u64,
}

/// A live node that stops for a while, as a descheduled or swapped-out process does: `rank`
/// neither receives nor sends (nor heartbeats) for `pause` instead of entering measured
/// agreement `at`, then goes on. Longer than `suspect_after`, its neighbours suspect it while
/// it lives — a false suspicion, which the run counts (and fails on unless allowed); the
/// suspected node is then made dead, as ULFM's runtime removes a process it suspects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub rank: Rank,
    pub at: u64,
    pub pause: Duration,
}

/// What a run measured.
pub struct AgreeBenchReport {
    pub classes: Vec<Class>,
    /// Agreements where two live nodes returned different outcomes (must be 0).
    pub disagreements: u64,
    /// Agreements whose value misses a live node's contribution (must be 0), each checked by
    /// one node that lives through the run (`runtime::agree::node::checker`).
    pub invalid: u64,
    /// Live nodes that did not return every agreement (timed out).
    pub unfinished: u64,
    /// Failure-detector suspicions, and those of a node that was alive (must be 0).
    pub suspicions: u64,
    pub false_suspicions: u64,
    /// From the kill to the last live node's return of the first successful agreement after
    /// it, ns.
    pub first_success_after_kill: Option<u64>,
    /// The injected kill to the first suspicion of any node by any other (ns): the failure
    /// detection part of `first_success_after_kill`.
    pub first_suspicion_after_kill: Option<u64>,
    pub messages_per_agreement: f64,
    pub heartbeats: u64,
    /// Of those, probes: heartbeats sent at once to a neighbour an ERA message came around
    /// ([`crate::runtime::driver::Driver::probe`]).
    pub probes: u64,
    pub transport: TransportStats,
    pub drops: DropCounters,
    pub agreements: u64,
    pub seconds: f64,
    /// Peak resident memory of the process(es) running the nodes, kB (`VmHWM`; with
    /// `--procs` the largest node process).
    pub peak_rss_kb: Option<u64>,
    /// The most agreements one node's ERA kept stored at once (pending or decided and not
    /// yet garbage-collected, §4).
    pub era_stored_max: usize,
    /// Returns left out because they came after their agreement was final.
    pub late: u64,
    /// Node processes: report lines dropped as malformed.
    pub bad_lines: u64,
    /// Across hosts (`--join`): the largest uncertainty of a node's clock offset to rank 0.
    pub clock_uncertainty_ns: Option<u64>,
    /// What a worker's visit of an idle node cost, ns: the cheapest worker's mean over its
    /// passes without progress, per node it steps (`None`: no worker had one; runs of node
    /// processes have none).
    pub idle_visit_ns: Option<f64>,
    /// How many times the workers' threads were preempted over the stream (involuntary
    /// context switches; `None`: not counted, runs of node processes).
    pub preempted: Option<u64>,
    /// Across hosts (`--join`): connections rank 0 refused (no valid hello in time, too long,
    /// a rank taken, over the cap).
    pub refused_streams: Option<u64>,
    /// The outcome digests (per block of [`DIGEST_BLOCK`] agreements) of the lowest live
    /// node that returned the most agreements: what `group::Member::agree_stream`'s members
    /// report, to compare a run with another of the same seed.
    pub digests: Vec<u64>,
}

/// Bit 63 of every contribution says "continue": an agreement whose value has it clear is
/// the run's last, at every node alike (the AND of §2.1's agreement), so a `--duration`
/// run stops without any other coordination. Validity checks mask it out.
pub const CONTINUE: u64 = 1 << 63;

/// Rank `r`'s contribution to agreement `id`.
pub fn contribution(seed: u64, r: Rank, id: AgreeId, cont: bool) -> And64 {
    let c = And64::contribution(seed, r, id).0 & !CONTINUE;
    And64(if cont { c | CONTINUE } else { c })
}

/// Participation and validity of a decided value (continue bit masked out): it keeps every
/// bit all contributions share and is within every live contribution (`v & c = v`).
pub fn valid(seed: u64, n: u32, id: AgreeId, value: u64, is_dead: &dyn Fn(Rank) -> bool) -> bool {
    let v = value & !CONTINUE;
    let (mut live_and, mut all_and) = (!CONTINUE, !CONTINUE);
    for r in 0..n {
        let c = contribution(seed, r, id, false).0;
        all_and &= c;
        if !is_dead(r) {
            live_and &= c;
        }
    }
    v & live_and == v && v & all_and == all_and
}

/// Peak resident set of this process, kB (`VmHWM` of /proc/self/status).
pub fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Checks the flags common to both modes.
pub fn validate(b: &AgreeBench) -> Result<(), String> {
    if b.n < 2 || b.n > MAX_NODES {
        return Err(format!("--nodes must be in 2..={MAX_NODES} for the network benchmark"));
    }
    if b.warmup.checked_add(b.iterations).is_none_or(|t| t >= u64::MAX / 2) {
        return Err(format!(
            "--warmup {} plus --agreements {} must be below 2^63 (agreements are numbered in 64 bits)",
            b.warmup, b.iterations
        ));
    }
    for &(r, i) in &b.kills {
        if r >= b.n || (b.duration.is_none() && i >= b.iterations) {
            return Err(format!(
                "bad --kill {r}@{i}: the rank must be below {} and the iteration below {}",
                b.n, b.iterations
            ));
        }
        if b.kills.iter().filter(|k| k.0 == r).count() > 1 {
            return Err(format!("bad --kill: rank {r} is killed twice"));
        }
    }
    if b.kills.len() >= b.n as usize {
        return Err("bad --kill: at least one node must survive".into());
    }
    for s in &b.stalls {
        if s.rank >= b.n || (b.duration.is_none() && s.at >= b.iterations) {
            return Err(format!(
                "bad --stall {}@{}: the rank must be below {} and the iteration below {}",
                s.rank, s.at, b.n, b.iterations
            ));
        }
        if s.pause.is_zero() {
            return Err(format!("bad --stall {}@{}: the pause must be positive", s.rank, s.at));
        }
        if b.stalls.iter().filter(|t| t.rank == s.rank).count() > 1 || b.kills.iter().any(|k| k.0 == s.rank) {
            return Err(format!("bad --stall: rank {} is stalled twice or also killed", s.rank));
        }
    }
    Ok(())
}

/// Node `r`'s stall, if any: the agreement id it stops before and for how long.
pub(crate) fn stall_of(b: &AgreeBench, r: Rank) -> Option<(AgreeId, Duration)> {
    b.stalls
        .iter()
        .find(|s| s.rank == r)
        .map(|s| (b.warmup + s.at, s.pause))
}

/// Agreements at most (warm-up included): `--duration` runs are bounded by time only.
pub(crate) fn total(b: &AgreeBench) -> u64 {
    if b.duration.is_some() {
        u64::MAX
    } else {
        b.warmup + b.iterations
    }
}

/// A threads run's nodes, made over endpoints of their own and ready to be spread over a
/// pool's workers ([`prepare`], then [`AgreeRun::split`]): the library group's agreement
/// stream (`group::Group::agree_stream`) runs them, and `ftcoll agree`'s local run is such a
/// stream.
pub(crate) struct AgreeRun {
    sh: Arc<Shared>,
    nodes: Vec<Node>,
    duration: Option<Duration>,
    op_timeout: Duration,
}

/// Checks `b`, opens its nodes' endpoints on its transport (UDP: on 127.0.0.1) and makes
/// the nodes.
pub(crate) fn prepare(b: &AgreeBench) -> Result<AgreeRun, String> {
    validate(b)?;
    let (tps, inproc): (Vec<Box<dyn Transport>>, Option<InprocNet>) = match b.transport {
        AgreeTransport::Inproc => {
            let (net, eps) = InprocNet::new(b.n, 256);
            (
                eps.into_iter().map(|e| Box::new(e) as Box<dyn Transport>).collect(),
                Some(net),
            )
        }
        AgreeTransport::Udp => {
            // Every port is bound before any node starts (`UdpConfig::bound_at_start`).
            let cfg = UdpConfig {
                bound_at_start: true,
                ..UdpConfig::default()
            };
            let (_, eps) = UdpTransport::bind_ephemeral_local(b.n, cfg)
                .map_err(|e| format!("cannot bind UDP sockets on 127.0.0.1: {e}"))?;
            (
                eps.into_iter().map(|e| Box::new(e) as Box<dyn Transport>).collect(),
                None,
            )
        }
        AgreeTransport::Verbs => (
            crate::transport::verbs::local_endpoints(b.n, JOB, b.seed)?
                .into_iter()
                .map(|(t, _)| t)
                .collect(),
            None,
        ),
    };
    let base = Instant::now();
    let first_kill = b.kills.iter().map(|k| b.warmup + k.1).min();
    let mut sh = Shared::new(base, b.n, b.warmup, first_kill);
    sh.inproc = inproc;
    let mut nodes = Vec::new();
    for (r, tp) in tps.into_iter().enumerate() {
        let r = r as Rank;
        let init = NodeInit {
            rank: r,
            total: total(b),
            deadline: None,
            kill_id: b.kills.iter().find(|k| k.0 == r).map(|k| b.warmup + k.1),
            stall: stall_of(b, r),
        };
        nodes.push(Node::new(b, init, tp, base)?);
    }
    Ok(AgreeRun {
        sh: Arc::new(sh),
        nodes,
        duration: b.duration,
        op_timeout: b.op_timeout,
    })
}

impl AgreeRun {
    /// Node `r` goes to share `r % workers` (`workers` clamped to 1..=nodes); the shares
    /// start together ([`AgreeWorker::start`]) and a `--duration` run's clock starts now.
    /// Returns the shares, by worker, and what reports the run once every share is back.
    pub(crate) fn split(self, workers: usize) -> (Vec<AgreeWorker>, AgreeFinish) {
        let workers = workers.clamp(1, self.nodes.len().max(1));
        let mut shares: Vec<Vec<Node>> = (0..workers).map(|_| Vec::new()).collect();
        for node in self.nodes {
            shares[node.rank as usize % workers].push(node);
        }
        let started = Instant::now();
        let deadline = self.duration.map(|d| started + d);
        let barrier = Arc::new(std::sync::Barrier::new(workers));
        let shares = shares
            .into_iter()
            .map(|nodes| AgreeWorker {
                nodes,
                sh: self.sh.clone(),
                barrier: barrier.clone(),
                deadline,
                op_timeout: self.op_timeout,
                idle_passes: 0,
                timed: IdlePasses::default(),
            })
            .collect();
        (shares, AgreeFinish { sh: self.sh, started })
    }
}

/// One worker's share of a run's nodes, stepped by that worker ([`AgreeWorker::pass`]) until
/// every live node finished or the run was abandoned.
pub(crate) struct AgreeWorker {
    nodes: Vec<Node>,
    sh: Arc<Shared>,
    barrier: Arc<std::sync::Barrier>,
    deadline: Option<Instant>,
    op_timeout: Duration,
    idle_passes: u32,
    /// The share's passes as the worker loop timed them ([`AgreeWorker::passed`]): those
    /// without progress are what a visit of nodes with nothing to do costs (the
    /// processor-sharing model's visit cost, `experiment/agree_predict.rs`).
    timed: IdlePasses,
}

impl AgreeWorker {
    /// In the worker's own thread: settles the share's buffers in its memory, waits for
    /// every other share to get there too, and enters the first agreement.
    pub(crate) fn start(&mut self) {
        // The nodes and their buffers in this thread's own memory (a new vector: collecting
        // in place would keep the spawning thread's).
        let mut fresh = Vec::with_capacity(self.nodes.len());
        for mut node in self.nodes.drain(..) {
            node.settle();
            fresh.push(node);
        }
        self.nodes = fresh;
        self.barrier.wait();
        let sh = &*self.sh;
        let now = Instant::now();
        sh.last_return.fetch_max(sh.ns(now), Ordering::AcqRel);
        for node in self.nodes.iter_mut() {
            node.set_deadline(self.deadline);
            node.start(sh, now);
        }
    }

    /// Steps every node of the share once: whether anything happened, `None` once the run
    /// is over (every live node finished, or no agreement returned anywhere for the run's
    /// `op_timeout`: abandoned).
    #[inline]
    pub(crate) fn pass(&mut self) -> Option<bool> {
        let sh = &*self.sh;
        let mut progress = false;
        for node in self.nodes.iter_mut() {
            progress |= node.step(sh);
        }
        if sh.finished.load(Ordering::Acquire) >= sh.live.load(Ordering::Acquire) || sh.abort.load(Ordering::Acquire) {
            return None;
        }
        self.idle_passes = if progress { 0 } else { self.idle_passes.wrapping_add(1) };
        // (The clock is read for the timeout only every 256 idle passes: a cheaper pass
        // notices the next message sooner.)
        if self.idle_passes % 256 == 255 {
            let idle = sh
                .ns(Instant::now())
                .saturating_sub(sh.last_return.load(Ordering::Acquire));
            if u128::from(idle) > self.op_timeout.as_nanos() {
                sh.abort.store(true, Ordering::Release);
            }
        }
        Some(progress)
    }

    /// The worker loop timed the share's last pass, start to next start, `ns`
    /// ([`crate::runtime::cluster::WorkerHook::busy_pass`], no clock read of its own), which
    /// made `progress` or not.
    #[inline]
    pub(crate) fn passed(&mut self, ns: u64, progress: bool) {
        if progress {
            self.timed.add_busy(ns);
        } else {
            self.timed.add(ns);
        }
    }

    /// The share's ranks, in the order it steps them.
    #[cfg(test)]
    pub(crate) fn ranks(&self) -> Vec<Rank> {
        self.nodes.iter().map(|n| n.rank).collect()
    }

    /// The share's nodes, for [`AgreeFinish::finish`] (its timed passes go to the run's
    /// [`Shared`], with the preemptions of the thread that stepped them, if counted).
    pub(crate) fn into_nodes(self, preempted: Option<u64>) -> Vec<Node> {
        let timed = IdlePasses {
            nodes: self.nodes.len() as u32,
            preempted,
            ..self.timed
        };
        self.sh.idle.lock().expect("not poisoned").push(timed);
        self.nodes
    }
}

/// Reports a run once its shares are back.
pub(crate) struct AgreeFinish {
    sh: Arc<Shared>,
    started: Instant,
}

impl AgreeFinish {
    /// What the run measured, from every share's nodes (any order).
    pub(crate) fn finish(self, mut nodes: Vec<Node>) -> AgreeBenchReport {
        let seconds = self.started.elapsed().as_secs_f64();
        nodes.sort_by_key(|n| n.rank);
        // (A node stopped mid-batch, e.g. by an abort, still has returns to hand over.)
        for node in nodes.iter_mut() {
            node.record_returns(&self.sh, Fold::Wait);
        }
        report(&self.sh, &nodes, seconds)
    }
}

/// The first of `times` at or after an injected kill at `kill_ns`, measured from it (none
/// without a kill).
pub(crate) fn after_kill(kill_ns: u64, times: impl Iterator<Item = u64>) -> Option<u64> {
    (kill_ns != u64::MAX)
        .then(|| times.filter(|&t| t >= kill_ns).min().map(|t| t - kill_ns))
        .flatten()
}

fn report(sh: &Shared, nodes: &[Node], seconds: f64) -> AgreeBenchReport {
    sh.fold(true);
    let mut w = sh.window();
    w.flush(&|r, i| sh.left_out(r, i));
    let live: Vec<&Node> = nodes.iter().filter(|n| !n.dead).collect();
    let unfinished = live.iter().filter(|n| !n.finished).count() as u64;
    let kill_ns = sh.kill_ns.load(Ordering::Acquire);
    // (No kill fired, e.g. its node was fenced first: no time from it, not 0.)
    let first_success = w
        .first_success
        .and_then(|(_, last)| after_kill(kill_ns, std::iter::once(last)));
    let first_suspicion = after_kill(kill_ns, nodes.iter().filter_map(|n| n.first_suspect_ns));
    let mut transport = TransportStats::default();
    let mut drops = DropCounters::default();
    let (mut suspicions, mut false_suspicions, mut messages, mut heartbeats, mut invalid) = (0, 0, 0, 0, 0);
    let mut probes = 0;
    for n in nodes {
        let s = n.drv.tp.stats();
        transport.sent += s.sent;
        transport.received += s.received;
        transport.retransmits += s.retransmits;
        transport.suspected += s.suspected;
        transport.malformed += s.malformed;
        transport.window_full += s.window_full;
        transport.acks_sent += s.acks_sent;
        transport.refused += s.refused;
        transport.refused_probes += s.refused_probes;
        drops.merge(&n.drv.drops);
        suspicions += n.suspicions;
        false_suspicions += n.false_suspicions;
        messages += n.drv.messages;
        heartbeats += n.drv.heartbeats;
        probes += n.drv.probes;
        if !n.dead {
            invalid += n.invalid;
        }
    }
    let idle = sh.idle.lock().expect("not poisoned");
    AgreeBenchReport {
        classes: std::mem::take(&mut w.classes),
        disagreements: w.disagreements,
        invalid,
        unfinished,
        suspicions,
        false_suspicions,
        first_success_after_kill: first_success,
        first_suspicion_after_kill: first_suspicion,
        messages_per_agreement: messages as f64 / w.agreements.max(1) as f64,
        heartbeats,
        probes,
        transport,
        drops,
        agreements: w.agreements,
        seconds,
        peak_rss_kb: peak_rss_kb(),
        era_stored_max: nodes.iter().map(|n| n.max_stored).max().unwrap_or(0),
        late: w.late,
        bad_lines: 0,
        clock_uncertainty_ns: None,
        idle_visit_ns: IdlePasses::cheapest(&idle, IdlePasses::visit_ns),
        preempted: (!idle.is_empty())
            .then(|| idle.iter().map(|w| w.preempted).sum::<Option<u64>>())
            .flatten(),
        refused_streams: None,
        digests: live
            .iter()
            .max_by_key(|n| (n.returned, std::cmp::Reverse(n.rank)))
            .map(|n| n.digests.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_continue_bit_is_the_only_difference_and_validity_ignores_it() {
        let (go, stop) = (contribution(7, 3, 11, true).0, contribution(7, 3, 11, false).0);
        assert_eq!(go ^ stop, CONTINUE);
        let all = (0..4).fold(!0u64, |v, r| v & contribution(7, r, 11, r != 2).0);
        assert_eq!(all & CONTINUE, 0, "one 'stop' ends the run for all");
        assert!(valid(7, 4, 11, all, &|_| false));
        // Without rank 1's contribution while rank 1 is alive: participation fails (unless
        // rank 1's word happens to add nothing, which these seeds do not).
        let without_1 = [0, 2, 3].iter().fold(!0u64, |v, &r| v & contribution(7, r, 11, true).0);
        assert_ne!(without_1 & !CONTINUE, all & !CONTINUE);
        assert!(!valid(7, 4, 11, without_1, &|_| false));
        assert!(valid(7, 4, 11, without_1, &|r| r == 1), "rank 1 dead: fine");
        // A bit some live contribution lacks is never in a valid value.
        let extra = !all & !CONTINUE;
        assert_ne!(extra, 0);
        assert!(!valid(7, 4, 11, all | (extra & extra.wrapping_neg()), &|_| false));
    }
}
