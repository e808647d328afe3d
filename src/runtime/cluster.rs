//! A local cluster: W worker threads, pinned to cores (spawned first, pinned inside the thread
//! so no mask is inherited), each owning a set of nodes and polling them ([`run_workers`],
//! the one worker loop, run by a `group::Group`); and the `Coordinator` that worker 0 runs
//! (a group's lead) or a launched run's coordinator drives: it starts operations back to back
//! (a barrier between iterations, as osu_bcast does, or a window of K in flight), checks
//! consistency and records latencies.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::protocol::Protocol;
use crate::runtime::board::{Control, WINDOW};
use crate::runtime::node::Node;
use crate::transport::TransportStats;
use crate::wire::{DropCounters, WireMessage};

mod workers;
pub use workers::{BUSY_BUCKET_NS, IdlePasses, LONGEST_IDLE_PASS_NS, Pool, WorkerHook, run_workers, worker_count};

/// How workers wait when there is nothing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PollMode {
    /// Spin on the endpoints (lowest latency; needs a core per worker).
    Busy,
    /// Spin for 2000 idle passes, then yield the core after each idle pass (it never sleeps:
    /// a yield returns at once when no other thread wants the core).
    Adaptive,
    /// Yield the core after every pass (Open MPI's `mpi_yield_when_idle`), also after one that
    /// did work, and send at most one message per pass: for more nodes than cores when the
    /// kernel's wake-up latency would dominate a hop. The cores stay busy, but a message is seen
    /// as soon as its receiver is next scheduled, and a node with a burst of sends (a
    /// correction phase) gives the core back after each one instead of holding it for the
    /// whole burst while a receiver on the same core waits (LogP's `o` per message).
    Yield,
    /// Sleep between polls when idle (for machines with fewer cores than workers).
    Blocking,
}

impl PollMode {
    /// Messages a node sends per pass before its worker looks at the others (and, yielding,
    /// at the other processes on its core).
    pub fn sends_per_pass(self) -> u32 {
        match self {
            PollMode::Yield => 1,
            _ => 16,
        }
    }

    /// What a worker does after a pass that made progress: only `Yield` gives the core away.
    pub fn after_progress(self) {
        if self == PollMode::Yield {
            std::thread::yield_now();
        }
    }

    /// What an idle worker does after `idle` passes without progress; `block` sleeps in the
    /// kernel (on the node's socket where it can).
    pub fn idle(self, idle: u32, block: impl FnOnce()) {
        match self {
            PollMode::Busy => std::hint::spin_loop(),
            PollMode::Adaptive if idle < 2000 => std::hint::spin_loop(),
            PollMode::Adaptive | PollMode::Yield => std::thread::yield_now(),
            PollMode::Blocking => block(),
        }
    }
}

/// A benchmark run's parameters.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterConfig {
    pub nodes: u32,
    pub workers: usize,
    pub poll: PollMode,
    pub warmup: u64,
    pub iterations: u64,
    pub window: u64,
    pub payload_len: usize,
    pub tick_ns: u64,
    pub job: u64,
    pub seed: u64,
    /// An operation not complete after this is abandoned and counted as a violation.
    pub op_timeout: Duration,
    /// Once every live node delivered, an operation is over when nothing happened for this
    /// long even if some protocol never reports itself finished (BFB's inner nodes).
    pub idle: Duration,
    pub pin: bool,
    /// Stop the run once this many operations in a row were abandoned at `op_timeout`, or at
    /// once when the root of the next operation is dead (killed, or fenced after a false
    /// suspicion: nothing more can start): the operations left are counted in
    /// [`ClusterResult::not_run`] instead of each waiting out its timeout (`None`: never stop
    /// early, as a library group that runs what it is asked).
    pub give_up_after: Option<u32>,
}

impl ClusterConfig {
    /// The run's worker pool.
    pub fn pool(&self) -> Pool {
        Pool {
            workers: self.workers,
            pin: self.pin,
            poll: self.poll,
        }
    }
}

/// What a run measured.
#[derive(Debug)]
pub struct ClusterResult {
    /// Root's start to the last live node's delivery, ns, per measured operation that every
    /// live node delivered (an abandoned one, counted in `timeouts`, has none).
    pub coloring: Histogram<u64>,
    /// Root's start to the last send/receive of the operation, ns.
    pub quiescence: Histogram<u64>,
    /// Messages per operation.
    pub messages: Histogram<u64>,
    /// Per-node delivery latency, ns (merged over the nodes other than each operation's
    /// root).
    pub delivery: Histogram<u64>,
    /// Each rank's delivery latency summed over the measured operations (`osu_bcast`'s metric).
    pub per_rank: crate::runtime::node::RankTimes,
    /// Live nodes that did not deliver exactly once with an intact payload, summed over
    /// measured operations.
    pub violations: u64,
    /// Operations abandoned at the timeout.
    pub timeouts: u64,
    /// Operations in which some node could not send a message (its deferred queue was full,
    /// or the protocol named no valid destination): failed operations, never silent.
    pub dropped_ops: u64,
    /// Measured operations never run (or not waited for) because the run stopped early
    /// after `give_up_after` timeouts in a row or its root's death: failed operations, not in
    /// `measured`.
    pub not_run: u64,
    /// The run stopped early because its root died: that rank, and who fenced it if a false
    /// suspicion did (`None`: a planned kill, or a multi-process run that does not say).
    pub root_lost: Option<(u32, Option<u32>)>,
    pub measured: u64,
    pub wall: Duration,
    pub transport: TransportStats,
    pub drops: DropCounters,
    pub stale: u64,
    pub spoofed: u64,
    pub wrong_kind: u64,
    pub backpressure: u64,
    pub deferred_overflow: u64,
    /// Datagrams dropped because their operation was too far ahead of the node's window.
    pub too_far: u64,
    pub dead_nodes: Vec<u32>,
    /// Nodes that died because a peer suspected them while they were alive (fenced:
    /// fail-stop enforcement made the suspicion true), not planned kills. Among `dead_nodes`.
    pub false_suspicions: u64,
    /// Local runs: each fenced node and the peer that fenced it (`false_suspicions` of them).
    pub fenced: Vec<(u32, u32)>,
    /// Multi-process runs: nodes whose counters died with their process (SIGKILLed), so the
    /// totals miss their sends while their peers counted what they received from them.
    pub counters_lost: u32,
    /// Multi-process runs: the largest uncertainty of the per-process clock offsets (ns);
    /// `None` when every node shares one clock.
    pub clock_uncertainty_ns: Option<u64>,
    /// Multi-process runs: per rank, the clock offset to the coordinator and its uncertainty
    /// (ns), as each process applied it (`None`: not reported).
    pub clocks: Vec<Option<(i64, u64)>>,
    /// Deliveries of measured operations stamped before their operation's start: the
    /// processes' clocks disagree by more than a hop (a clock offset off by more than its
    /// estimate's uncertainty says, or one not applied). Each is recorded as 1 ns, so the
    /// latencies near 0 are clock error; one process sharing a clock has none.
    pub before_start: u64,
    /// Per worker of a local run, its passes without progress ([`IdlePasses`]; empty for a
    /// launched or multi-process run).
    pub idle_passes: Vec<IdlePasses>,
    /// The measured operations again, split where a crash starts
    /// ([`crate::runtime::kill::segments`]; empty without a crash inside the window): what a
    /// run with a crash is compared with the model by, segment by segment.
    pub segments: Vec<SegmentResult>,
}

/// What a run measured in one stretch of its operations between crashes.
#[derive(Debug)]
pub struct SegmentResult {
    /// Its operations (sequence numbers, as `--kill R@I` counts) and the nodes dead for all
    /// of them.
    pub segment: crate::runtime::kill::Segment,
    pub coloring: Histogram<u64>,
    pub quiescence: Histogram<u64>,
    pub messages: Histogram<u64>,
    /// Operations abandoned at the timeout, and operations whose live nodes did not all
    /// deliver exactly once.
    pub timeouts: u64,
    pub violated_ops: u64,
    /// Operations never started because their root had crashed (counted measured and timed
    /// out, without latencies: a group stream's roots may include a crashed member).
    pub unstarted: u64,
}

impl ClusterResult {
    pub(crate) fn empty() -> Self {
        ClusterResult {
            coloring: hist(),
            quiescence: hist(),
            messages: hist(),
            delivery: hist(),
            per_rank: Default::default(),
            violations: 0,
            timeouts: 0,
            dropped_ops: 0,
            not_run: 0,
            root_lost: None,
            measured: 0,
            wall: Duration::ZERO,
            transport: TransportStats::default(),
            drops: DropCounters::default(),
            stale: 0,
            spoofed: 0,
            wrong_kind: 0,
            backpressure: 0,
            deferred_overflow: 0,
            too_far: 0,
            dead_nodes: Vec::new(),
            false_suspicions: 0,
            fenced: Vec::new(),
            counters_lost: 0,
            clock_uncertainty_ns: None,
            clocks: Vec::new(),
            before_start: 0,
            idle_passes: Vec::new(),
            segments: Vec::new(),
        }
    }

    /// The segment that holds operation `seq` (none without a crash inside the window).
    fn segment_of(&mut self, seq: u64) -> Option<&mut SegmentResult> {
        self.segments.iter_mut().find(|sg| sg.segment.ops.contains(&seq))
    }

    /// Adds one node's transport counters.
    pub fn add_transport(&mut self, t: &TransportStats) {
        let s = &mut self.transport;
        s.sent += t.sent;
        s.received += t.received;
        s.retransmits += t.retransmits;
        s.acks_sent += t.acks_sent;
        s.duplicates += t.duplicates;
        s.malformed += t.malformed;
        s.foreign += t.foreign;
        s.suspected += t.suspected;
        s.injected_losses += t.injected_losses;
        s.window_full += t.window_full;
        s.from_suspected += t.from_suspected;
        s.bad_mac += t.bad_mac;
        s.foreign_job += t.foreign_job;
        s.bad_rank += t.bad_rank;
        s.refused += t.refused;
        s.refused_probes += t.refused_probes;
        s.fences_sent += t.fences_sent;
        s.fenced += t.fenced;
        s.spurious_retransmits += t.spurious_retransmits;
        s.beats_sent += t.beats_sent;
        s.died_on_host += t.died_on_host;
        s.timeouts += t.timeouts;
        s.timeout_wait_ns += t.timeout_wait_ns;
    }

    /// Adds one node's counters: its transport's and its own, and whether it died (and why).
    pub fn add_node<P: Protocol>(&mut self, node: &Node<P>)
    where
        P::Msg: WireMessage,
    {
        self.add_transport(&node.transport_stats());
        if !node.alive() {
            self.dead_nodes.push(node.rank);
        }
        self.false_suspicions += u64::from(node.fenced_by().is_some());
        if let Some(by) = node.fenced_by() {
            self.fenced.push((node.rank, by));
        }
        self.drops.merge(&node.stats.drops);
        self.stale += node.stats.stale;
        self.spoofed += node.stats.spoofed;
        self.wrong_kind += node.stats.wrong_kind;
        self.backpressure += node.stats.backpressure;
        self.deferred_overflow += node.stats.deferred_overflow;
        self.too_far += node.stats.too_far;
    }

    /// How many times the run's workers were preempted, all together ([`IdlePasses::preempted`];
    /// `None`: a worker that did not count, or no workers here: a run of processes).
    pub fn preempted(&self) -> Option<u64> {
        if self.idle_passes.is_empty() {
            return None;
        }
        self.idle_passes.iter().map(|w| w.preempted).sum()
    }

    /// Adds the node counters gathered in `part` ([`ClusterResult::add_node`]) to this
    /// result (the coordinator's); names who fenced a lost root.
    pub fn add_counters(&mut self, part: ClusterResult) {
        self.add_transport(&part.transport);
        self.idle_passes.extend(part.idle_passes);
        self.dead_nodes.extend(part.dead_nodes);
        self.dead_nodes.sort_unstable();
        self.false_suspicions += part.false_suspicions;
        self.fenced.extend(part.fenced);
        if let Some((r, by)) = self.root_lost.as_mut()
            && let Some(&(_, f)) = self.fenced.iter().find(|(x, _)| x == r)
        {
            *by = Some(f);
        }
        self.drops.merge(&part.drops);
        self.stale += part.stale;
        self.spoofed += part.spoofed;
        self.wrong_kind += part.wrong_kind;
        self.backpressure += part.backpressure;
        self.deferred_overflow += part.deferred_overflow;
        self.too_far += part.too_far;
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
}

/// Starts operations, decides when each is over, checks it and records its latencies.
pub(crate) struct Coordinator {
    total: u64,
    window: u64,
    warmup: u64,
    next_allow: u64,
    cur: u64,
    op_timeout_ns: u64,
    idle_ns: u64,
    give_up_after: Option<u32>,
    /// Operations abandoned at the timeout since the last one that completed.
    timeouts_in_a_row: u32,
    res: ClusterResult,
}

impl Coordinator {
    pub(crate) fn new(cfg: &ClusterConfig) -> Self {
        Coordinator {
            total: cfg.warmup + cfg.iterations,
            window: cfg.window.clamp(1, WINDOW as u64 / 2),
            warmup: cfg.warmup,
            next_allow: 0,
            cur: 0,
            // Saturated, never truncated: a timeout of 2^64 ns and a bit is not 1.2 ms.
            op_timeout_ns: u64::try_from(cfg.op_timeout.as_nanos()).unwrap_or(u64::MAX),
            idle_ns: u64::try_from(cfg.idle.as_nanos()).unwrap_or(u64::MAX),
            give_up_after: cfg.give_up_after,
            timeouts_in_a_row: 0,
            res: ClusterResult::empty(),
        }
    }

    /// Also records the measured operations segment by segment between the crashes of
    /// `kills` ([`ClusterResult::segments`]; nothing when no crash falls inside the window).
    /// Their iterations are sequence numbers, as the nodes' kills count them.
    pub(crate) fn split_at(mut self, kills: &[crate::runtime::kill::Kill]) -> Self {
        let segs = crate::runtime::kill::segments(kills, self.warmup, self.total);
        self.res.segments = if segs.len() > 1 {
            segs.into_iter()
                .map(|segment| SegmentResult {
                    segment,
                    coloring: hist(),
                    quiescence: hist(),
                    messages: hist(),
                    timeouts: 0,
                    violated_ops: 0,
                    unstarted: 0,
                })
                .collect()
        } else {
            Vec::new()
        };
        self
    }

    /// A coordinator whose operations are numbered from `first` on (a group's stream, after
    /// the operations that came before it): `cfg.warmup` and `cfg.iterations` count from there.
    pub(crate) fn starting_at(cfg: &ClusterConfig, first: u64) -> Self {
        let mut c = Self::new(cfg);
        c.total += first;
        c.warmup += first;
        c.next_allow = first;
        c.cur = first;
        c
    }

    /// Operations after the last retired one that may be in flight at once.
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    /// The sequence number after the last operation known.
    pub(crate) fn end(&self) -> u64 {
        self.total
    }

    /// The results so far.
    pub(crate) fn into_result(self) -> ClusterResult {
        self.res
    }

    /// The results so far, in place.
    pub(crate) fn result(&self) -> &ClusterResult {
        &self.res
    }

    /// Adds one operation to run after those already known (a group learns its operations
    /// as its user asks for them); returns its sequence number.
    pub(crate) fn push_op(&mut self) -> u64 {
        self.total += 1;
        self.total - 1
    }

    /// Operations over so far (every `seq` below this is retired).
    pub(crate) fn retired(&self) -> u64 {
        self.cur
    }

    fn live_for(ctl: &Control, r: usize, seq: u64) -> bool {
        let b = &ctl.boards[r];
        if !b.dead.load(Ordering::Acquire) {
            return true;
        }
        let died = b.died_in.load(Ordering::Relaxed);
        died != u64::MAX && died > seq
    }

    /// Operation `seq` (the current one) is over: its slot's start is cleared before the
    /// root may start the operation `WINDOW` later in it (which waits for `allowed`, moved
    /// after this), and the operations before `seq + 1` are retired.
    fn retire(&mut self, ctl: &Control, seq: u64) {
        ctl.started_ns[(seq % WINDOW as u64) as usize].store(0, Ordering::Release);
        self.cur += 1;
        ctl.retired.store(self.cur, Ordering::Release);
    }

    /// Checks the oldest unfinished operation; returns false once everything is done.
    pub(crate) fn tick(&mut self, ctl: &Control, epoch: Instant) -> bool {
        if self.cur >= self.total {
            return false;
        }
        if self.next_allow < (self.cur + self.window).min(self.total) {
            self.next_allow = (self.cur + self.window).min(self.total);
            ctl.allowed.store(self.next_allow, Ordering::Release);
        }
        let seq = self.cur;
        let root_rank = ctl.root_of(seq);
        let root = &ctl.boards[root_rank as usize];
        if self.give_up_after.is_some() && root.dead.load(Ordering::Acquire) {
            let died = root.died_in.load(Ordering::Relaxed);
            if died == u64::MAX || died <= seq {
                // The root died before this operation was over at it (killed, or fenced when a
                // peer suspected it): no later operation can start, and this one would only
                // wait out its timeout if the root's messages did not all leave. Stop now.
                self.res.not_run = self.total - self.cur.max(self.warmup);
                self.res.root_lost = Some((root_rank, None));
                self.cur = self.total;
                return false;
            }
        }
        // The claim first: the root stores the start, then claims the slot (Release), so a
        // claim seen here (Acquire) comes with this operation's start; read the other way
        // round, the start could be the one of the operation `WINDOW` before, claimed over in
        // between (a root on another worker than the coordinator's). A root whose first send
        // was refused or overflowed claims the slot in its send phase, before it announces
        // the start: retiring an operation clears its start (below), so what such a claim is
        // seen with is 0, not started yet, never an older operation's start.
        let claimed = root.get(seq).is_some();
        let start = ctl.started_ns[(seq % WINDOW as u64) as usize].load(Ordering::Acquire);
        if start == 0 || !claimed {
            // Dead first, then the claim: a root that claimed before it died is seen to have.
            if root.dead.load(Ordering::Acquire) && root.get(seq).is_none() {
                // The root crashed before starting the operation: it never happens.
                if seq >= self.warmup {
                    self.res.measured += 1;
                    self.res.timeouts += 1;
                    if let Some(sg) = self.res.segment_of(seq) {
                        sg.timeouts += 1;
                        sg.unstarted += 1;
                    }
                }
                self.retire(ctl, seq);
                return self.cur < self.total;
            }
            return true;
        }
        let now = epoch.elapsed().as_nanos() as u64;
        let (mut all_delivered, mut all_finished, mut last, mut colored) = (true, true, start, start);
        for r in 0..ctl.boards.len() {
            if !Self::live_for(ctl, r, seq) {
                continue;
            }
            match ctl.boards[r].get(seq) {
                Some(b) => {
                    // A node stamps its delivery's count, then its time (Release): a time seen
                    // with no count yet is a delivery being published (its thread may lose
                    // its core in between, past `idle`), not one that went wrong.
                    let d = b.delivered_ns.load(Ordering::Acquire);
                    if d == 0 || b.deliveries.load(Ordering::Relaxed) == 0 {
                        all_delivered = false;
                    }
                    colored = colored.max(d);
                    last = last.max(b.last_ns.load(Ordering::Relaxed));
                    all_finished &= b.finished.load(Ordering::Acquire);
                }
                None => {
                    all_delivered = false;
                    all_finished = false;
                }
            }
        }
        let timed_out = now.saturating_sub(start) > self.op_timeout_ns;
        let quiet = now.saturating_sub(last) > self.idle_ns;
        if !(all_delivered && (all_finished || quiet)) && !timed_out {
            return true;
        }
        // The operation is over: account for it.
        let abandoned = timed_out && !all_delivered;
        self.timeouts_in_a_row = if abandoned { self.timeouts_in_a_row + 1 } else { 0 };
        if seq >= self.warmup {
            let r = &mut self.res;
            r.measured += 1;
            if abandoned {
                r.timeouts += 1;
            }
            let mut msgs = 0u64;
            let mut dropped = false;
            let violations_before = r.violations;
            for (i, nb) in ctl.boards.iter().enumerate() {
                let Some(b) = nb.get(seq) else {
                    if Self::live_for(ctl, i, seq) {
                        r.violations += 1;
                    }
                    continue;
                };
                msgs += u64::from(b.sent.load(Ordering::Relaxed));
                dropped |= b.send_drops.load(Ordering::Relaxed) > 0;
                if !Self::live_for(ctl, i, seq) {
                    continue;
                }
                let d = b.delivered_ns.load(Ordering::Relaxed);
                if b.deliveries.load(Ordering::Relaxed) != 1 || b.bad_payload.load(Ordering::Relaxed) > 0 || d == 0 {
                    r.violations += 1;
                } else {
                    r.before_start += u64::from(d < start);
                    r.per_rank.record(i, d.saturating_sub(start).max(1));
                    if i != root_rank as usize {
                        r.delivery.saturating_record(d.saturating_sub(start).max(1));
                    }
                }
            }
            r.dropped_ops += u64::from(dropped);
            let coloring = colored.saturating_sub(start).max(1);
            // A delivery is activity of the operation: quiescence is never before coloring
            // (`--procs` reports may carry a `last_ns` older than a later delivery stamp).
            let quiescence = last.max(colored).saturating_sub(start).max(1);
            // An abandoned operation never colored: its last delivery so far is no coloring
            // latency (it is a timeout, and a violation where a live node missed it).
            if !abandoned {
                r.coloring.saturating_record(coloring);
                r.quiescence.saturating_record(quiescence);
            }
            r.messages.saturating_record(msgs.max(1));
            let violated = r.violations > violations_before;
            if let Some(sg) = r.segment_of(seq) {
                if !abandoned {
                    sg.coloring.saturating_record(coloring);
                    sg.quiescence.saturating_record(quiescence);
                }
                sg.messages.saturating_record(msgs.max(1));
                sg.timeouts += u64::from(abandoned);
                sg.violated_ops += u64::from(violated);
            }
        }
        self.retire(ctl, seq);
        if self.give_up_after.is_some_and(|k| self.timeouts_in_a_row >= k.max(1)) && self.cur < self.total {
            // Back-to-back timeouts: the rest would most likely wait out theirs too (a cut-off
            // node, a dead root's subtree). Stop, and count every measured operation left
            // (those in flight included) as not run.
            self.res.not_run = self.total - self.cur.max(self.warmup);
            self.cur = self.total;
            return false;
        }
        self.cur < self.total
    }
}

#[cfg(test)]
mod tests;
