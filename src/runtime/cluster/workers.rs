//! The worker loop every local run uses: W threads, pinned to cores (spawned first, pinned
//! inside the thread so no mask is inherited), each owning the nodes `rank % W == w` and
//! stepping them in turn; each worker also runs its [`WorkerHook`] once per pass (worker 0's
//! is the coordinator of a benchmark, or a group's lead). Everyone stops when
//! [`Control::stop`] is set.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::PollMode;
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::board::Control;
use crate::runtime::node::{Node, NodeParams};
use crate::wire::WireMessage;

/// How a run's nodes are spread over threads and how those wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    /// Worker threads (clamped to 1..=nodes).
    pub workers: usize,
    /// Pin worker `w` to core `w` (modulo the cores there are).
    pub pin: bool,
    pub poll: PollMode,
}

/// What a worker does besides stepping its nodes.
pub trait WorkerHook<P: Protocol>: Send
where
    P::Msg: WireMessage,
{
    /// Once per pass, after the worker stepped its `nodes`; returns whether it did anything
    /// that counts as progress (a worker that makes none waits as its poll mode says).
    fn after_pass(&mut self, nodes: &mut [Node<P>], ctl: &Control, epoch: Instant) -> bool;

    /// An idle worker in [`PollMode::Blocking`] waits here (`idle`: passes without
    /// progress). By default: a worker with one node and nothing else to do blocks on that
    /// node's socket; otherwise a short sleep (blocking on one socket would starve the rest).
    fn block(&mut self, nodes: &mut [Node<P>], idle: u32) {
        let _ = idle;
        if nodes.len() == 1 && !self.coordinates() {
            nodes[0].wait(Duration::from_micros(200))
        } else {
            std::thread::sleep(Duration::from_micros(20))
        }
    }

    /// Does this hook have work of its own besides the nodes (a coordinator)?
    fn coordinates(&self) -> bool;

    /// A pass that made no progress took `ns` (from its start to the next pass's, the
    /// worker's wait included): what a visit of its nodes costs when they have nothing to do,
    /// the processor-sharing model's visit cost ([`IdlePasses`]). By default: ignored.
    fn idle_pass(&mut self, ns: u64) {
        let _ = ns;
    }

    /// A pass that made progress took `ns` (measured as [`WorkerHook::idle_pass`]'s, with no
    /// clock read of its own): on a worker whose one node receives one message a pass, what
    /// a node's visit with work holds its worker ([`IdlePasses::busy_ns`]). By default:
    /// ignored.
    fn busy_pass(&mut self, ns: u64) {
        let _ = ns;
    }

    /// Once, on the worker's thread, before its first pass. By default: nothing.
    fn started(&mut self) {}
}

/// A worker's passes without progress: how many, and their time (see
/// [`WorkerHook::idle_pass`]); and the times of those with progress
/// ([`WorkerHook::busy_pass`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IdlePasses {
    /// The nodes the worker steps in each pass.
    pub nodes: u32,
    pub passes: u64,
    pub ns: u64,
    /// Passes with progress by time, [`BUSY_BUCKET_NS`] a bucket up to
    /// [`LONGEST_IDLE_PASS_NS`] (empty: none yet). Their median, not their mean: a pass
    /// with progress is a few hundred ns and a preemption that lands in one a thousand
    /// times that, so a few of those would make the mean.
    #[serde(skip)]
    pub busy: Vec<u32>,
    /// Passes with progress not in `busy`: [`LONGEST_IDLE_PASS_NS`] or longer (the thread
    /// was away in them).
    #[serde(skip)]
    pub busy_away: u64,
    /// How many times the worker's thread was preempted over these passes (involuntary
    /// context switches, [`crate::runtime::thread_switches`]; `None`: not counted).
    #[serde(skip)]
    pub preempted: Option<u64>,
}

/// The width of [`IdlePasses::busy`]'s buckets, ns.
pub const BUSY_BUCKET_NS: u64 = 10;

/// An idle pass this long or longer was not a round of visits but the thread's absence (a
/// preemption, a sleep of the blocking poll mode): it is not counted.
pub const LONGEST_IDLE_PASS_NS: u64 = 10_000;

impl IdlePasses {
    /// One idle pass of `ns` (not counted from [`LONGEST_IDLE_PASS_NS`] on).
    pub fn add(&mut self, ns: u64) {
        if ns < LONGEST_IDLE_PASS_NS {
            self.passes += 1;
            self.ns += ns;
        }
    }

    /// One pass with progress of `ns` (not counted from [`LONGEST_IDLE_PASS_NS`] on: the
    /// thread was away).
    pub fn add_busy(&mut self, ns: u64) {
        if ns < LONGEST_IDLE_PASS_NS {
            if self.busy.is_empty() {
                self.busy = vec![0; LONGEST_IDLE_PASS_NS.div_ceil(BUSY_BUCKET_NS) as usize];
            }
            let b = &mut self.busy[(ns / BUSY_BUCKET_NS) as usize];
            *b = b.saturating_add(1);
        } else {
            self.busy_away += 1;
        }
    }

    /// The median pass with progress, ns, to a bucket's width (the bucket's middle; `None`:
    /// none).
    pub fn busy_ns(&self) -> Option<f64> {
        let total: u64 = self.busy.iter().map(|&c| u64::from(c)).sum();
        let mut seen = 0;
        for (i, &c) in self.busy.iter().enumerate() {
            seen += u64::from(c);
            if total > 0 && 2 * seen >= total {
                return Some((i as u64 * BUSY_BUCKET_NS) as f64 + BUSY_BUCKET_NS as f64 / 2.0);
            }
        }
        None
    }

    /// The least of `figure` over the workers that have it (`None`: none has it): the
    /// cheapest worker is the one without the coordinator's work on top, which a run's
    /// other workers are too.
    pub fn cheapest(workers: &[IdlePasses], figure: impl Fn(&IdlePasses) -> Option<f64>) -> Option<f64> {
        workers.iter().filter_map(figure).min_by(f64::total_cmp)
    }

    /// The mean cost of visiting one node that has nothing to do, ns (`None`: no idle pass).
    pub fn visit_ns(&self) -> Option<f64> {
        (self.passes > 0 && self.nodes > 0).then(|| self.ns as f64 / self.passes as f64 / f64::from(self.nodes))
    }
}

/// Runs `nodes` (any order) on the pool's workers, worker `w` running `hooks[w]`, until
/// [`Control::stop`]; `progress`, if given, hears [`Control::retired`] about every 100 ms
/// from the calling thread. Returns each worker's hook and nodes, in worker order.
/// `hooks` holds one hook per worker: [`worker_count`] of the pool for the run's members,
/// which are `nodes` or, where the hooks step nodes of their own (a group's agreements
/// only), more.
pub fn run_workers<P, H>(
    params: &NodeParams<'_, P::Shared>,
    ctl: &Control,
    pool: Pool,
    nodes: Vec<Node<P>>,
    hooks: Vec<H>,
    progress: Option<&(dyn Fn(u64) + Sync)>,
) -> Vec<(H, Vec<Node<P>>)>
where
    P: Protocol,
    P::Shared: SharedInfo,
    P::Msg: WireMessage,
    H: WorkerHook<P>,
{
    let workers = hooks.len();
    assert!(
        workers >= worker_count(pool, nodes.len()) && workers <= pool.workers.max(1),
        "one hook per worker"
    );
    let mut groups: Vec<Vec<Node<P>>> = (0..workers).map(|_| Vec::new()).collect();
    for mut node in nodes {
        node.kill_at_start(&ctl.boards[node.rank as usize]);
        node.set_sends_per_step(pool.poll.sends_per_pass());
        groups[node.rank as usize % workers].push(node);
    }
    let cores = if pool.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .into_iter()
            .zip(hooks)
            .enumerate()
            .map(|(w, (group, hook))| {
                let core = (!cores.is_empty()).then(|| cores[w % cores.len()]);
                s.spawn(move || {
                    if let Some(c) = core {
                        core_affinity::set_for_current(c);
                    }
                    work(params, ctl, pool.poll, group, hook)
                })
            })
            .collect();
        // The caller's thread sleeps and reports progress while the workers run.
        if let Some(p) = progress {
            while !ctl.stop.load(Ordering::Relaxed) {
                p(ctl.retired.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_millis(100));
            }
            p(ctl.retired.load(Ordering::Relaxed));
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect()
    })
}

/// The workers a pool runs for `nodes` nodes.
pub fn worker_count(pool: Pool, nodes: usize) -> usize {
    pool.workers.clamp(1, nodes.max(1))
}

/// One worker's loop.
fn work<P, H>(
    params: &NodeParams<'_, P::Shared>,
    ctl: &Control,
    poll: PollMode,
    group: Vec<Node<P>>,
    mut hook: H,
) -> (H, Vec<Node<P>>)
where
    P: Protocol,
    P::Shared: SharedInfo,
    P::Msg: WireMessage,
    H: WorkerHook<P>,
{
    // The group in this thread's own memory (a new vector: collecting in place would keep
    // the spawning thread's, next to the other groups').
    let mut fresh = Vec::with_capacity(group.len());
    fresh.extend(group);
    let mut group = fresh;
    let mut idle_rounds = 0u32;
    // The start of the last pass and whether it made progress: its time is measured to the
    // next pass's start with the clock read the first node's step needs anyway.
    let mut last: Option<(Instant, bool)> = None;
    hook.started();
    while !ctl.stop.load(Ordering::Relaxed) {
        let mut progress = false;
        let start = Instant::now();
        if let Some((t, busy)) = last.take() {
            let ns = start.saturating_duration_since(t).as_nanos() as u64;
            if busy {
                hook.busy_pass(ns);
            } else {
                hook.idle_pass(ns);
            }
        }
        for (i, node) in group.iter_mut().enumerate() {
            // A fresh clock per node: timestamps are per event, not per round.
            let now = if i == 0 { start } else { Instant::now() };
            progress |= node.step(params, ctl, now);
        }
        progress |= hook.after_pass(&mut group, ctl, params.epoch);
        if progress {
            idle_rounds = 0;
            poll.after_progress();
            last = Some((start, true));
            continue;
        }
        last = Some((start, false));
        idle_rounds = idle_rounds.saturating_add(1);
        poll.idle(idle_rounds, || hook.block(&mut group, idle_rounds));
    }
    (hook, group)
}
