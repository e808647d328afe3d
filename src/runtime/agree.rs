//! ERA on a local cluster (`ftcoll agree`): nodes as threads of this process over UDP loopback,
//! in-process queues or ibverbs (or, with [`crate::runtime::agree_procs`], one process each),
//! each running ULFM's `benchagree` loop of back-to-back agreements on a 64-bit AND, with a
//! failure detector that watches only the node's ERA tree neighbours (ERA §2): heartbeats
//! every `heartbeat`, a neighbour silent for `suspect_after` is suspected, and so is one the
//! transport reports (UDP retries exhausted or ICMP port unreachable; in-process, a send to a
//! killed endpoint — the closed-socket signal). Nodes can be killed when they would enter a
//! given agreement; they then stop dead (the endpoint is closed, nothing more is sent).
//!
//! Every return is recorded on the process's one monotonic clock and classed online by
//! [`Window`] as in the paper's §5.1 (failure-free, failure-detecting, stabilizing,
//! post-failure): nothing is kept per agreement, so memory per node is constant however many
//! agreements run (`--duration`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::protocol::Rank;
use crate::protocol::agree::{AgreeId, And64, Era, EraConfig, EraMsg, Outcome};
use crate::runtime::agree_window::{BATCH, Class, Rec, Window};
use crate::sim::agree::SimValue;
use crate::transport::inproc::InprocNet;
use crate::transport::udp::{UdpConfig, UdpTransport};
use crate::transport::{Delivery, SendError, Transport, TransportStats};
use crate::wire::agree::Heartbeat;
use crate::wire::{DropCounters, HEADER_LEN, Header, WireMessage, encode_datagram, kind};

const JOB: u64 = 0xE4A0_A64E_E000_0001;

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
    pub heartbeat: Duration,
    pub suspect_after: Duration,
    /// The run is abandoned when no agreement returns anywhere for this long.
    pub op_timeout: Duration,
    pub seed: u64,
}

/// What a run measured.
pub struct AgreeBenchReport {
    pub classes: Vec<Class>,
    /// Agreements where two live nodes returned different outcomes (must be 0).
    pub disagreements: u64,
    /// Returns whose value misses a live node's contribution (must be 0).
    pub invalid: u64,
    /// Live nodes that did not return every agreement (timed out).
    pub unfinished: u64,
    /// Failure-detector suspicions, and those of a node that was alive (must be 0).
    pub suspicions: u64,
    pub false_suspicions: u64,
    /// From the kill to the last live node's return of the first successful agreement after
    /// it, ns.
    pub first_success_after_kill: Option<u64>,
    pub messages_per_agreement: f64,
    pub heartbeats: u64,
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

/// One node's returns, handed over at once.
type Batch = (Rank, Vec<(AgreeId, Rec)>);

/// What the nodes of one process share.
pub(crate) struct Shared {
    base: Instant,
    dead: Vec<AtomicBool>,
    finished: AtomicU64,
    live: AtomicU64,
    last_return: AtomicU64,
    abort: AtomicBool,
    kill_ns: AtomicU64,
    inproc: Option<InprocNet>,
    /// Per node: the first agreement whose return of it does not count ([`Window`]): the one
    /// before its death (its decision may not have spread), `u64::MAX` while it lives.
    dead_from: Vec<AtomicU64>,
    /// Batches of returns handed over and not yet folded into `window`, in order.
    handoff: Mutex<VecDeque<Batch>>,
    window: Mutex<Window>,
    /// A node process (`--procs`, `--join`): a kill is a real SIGKILL of the process, first
    /// announced (with its time) by this, which may wait for the SIGKILL or return to have the
    /// process kill itself.
    pub(crate) on_crash: Option<CrashReport>,
}

/// How a node process announces its injected crash: `(rank, time ns, its returns not yet
/// reported but the last)`.
pub(crate) type CrashReport = Box<dyn Fn(Rank, u64, &[(AgreeId, Rec)]) + Send + Sync>;

impl Shared {
    pub(crate) fn new(base: Instant, n: u32, warmup: u64, kill_id: Option<AgreeId>) -> Self {
        Self {
            base,
            dead: (0..n).map(|_| AtomicBool::new(false)).collect(),
            finished: AtomicU64::new(0),
            live: AtomicU64::new(u64::from(n)),
            last_return: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            kill_ns: AtomicU64::new(u64::MAX),
            inproc: None,
            dead_from: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            handoff: Mutex::new(VecDeque::new()),
            window: Mutex::new(Window::new(warmup, kill_id)),
            on_crash: None,
        }
    }

    pub(crate) fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_nanos() as u64
    }

    pub(crate) fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Node `r` is dead; its returns from agreement `from` on do not count.
    fn mark_dead(&self, r: Rank, from: AgreeId) {
        self.dead_from[r as usize].fetch_min(from, Ordering::AcqRel);
    }

    /// Whether node `r`'s return of agreement `id` counts ([`Window`]'s `dead`).
    fn left_out(&self, r: Rank, id: AgreeId) -> bool {
        id >= self.dead_from[r as usize].load(Ordering::Acquire)
    }

    /// Folds the batches handed over so far, unless another node is at it (`wait`: wait for
    /// it, then fold what is left).
    fn fold(&self, wait: bool) {
        let mut w = if wait {
            self.window()
        } else {
            match self.window.try_lock() {
                Ok(w) => w,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            }
        };
        loop {
            let next = self.handoff.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            let Some((rank, batch)) = next else { break };
            for (id, rec) in batch {
                w.record(rank, id, rec, &|r, i| self.left_out(r, i));
            }
        }
    }
}

/// What a crashed node's endpoint becomes: its socket closed (so that peers' datagrams to it
/// draw the same "port unreachable" a dead process's would), nothing sent or received.
struct Closed {
    rank: u32,
    size: u32,
    stats: TransportStats,
}

impl Transport for Closed {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn send(&mut self, _: u32, _: &[u8], _: Instant) -> Result<(), crate::transport::SendError> {
        Err(crate::transport::SendError::Suspected)
    }
    fn poll(&mut self, _: Instant, _: &mut dyn FnMut(crate::transport::Delivery<'_>)) -> std::io::Result<usize> {
        Ok(0)
    }
    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        std::thread::sleep(timeout);
        Ok(())
    }
    fn stats(&self) -> TransportStats {
        self.stats
    }
}

/// One node: its ERA, transport and failure detector, and what it measured. It holds no
/// per-agreement state: returns go to the shared [`Window`] in batches. Aligned so that two
/// nodes driven by different threads never share a cache line.
#[repr(align(128))]
pub(crate) struct Node {
    pub(crate) rank: Rank,
    n: u32,
    pub(crate) era: Era<And64>,
    pub(crate) tp: Box<dyn Transport>,
    last_heard: Vec<Instant>,
    last_sent: Vec<Instant>,
    nb: Vec<Rank>,
    nb_at: Instant,
    last_step: Instant,
    /// The neighbours watched at the last check.
    watching: Vec<Rank>,
    /// When each peer last sent this node a heartbeat (it watches this node).
    pinged: Vec<Option<Instant>>,
    /// Messages refused with `WindowFull`, in order; only their peers wait (a slow peer must
    /// not hold up heartbeats to the others, who would then suspect this node).
    backlog: VecDeque<(Rank, Vec<u8>)>,
    /// Peers with messages in `backlog`.
    blocked: Vec<bool>,
    buf: Vec<u8>,
    pub(crate) dead: bool,
    /// Made dead by another node's suspicion.
    enforced: bool,
    pub(crate) finished: bool,
    /// Agreements at most (warm-up included).
    total: u64,
    /// Contributions say "stop" from this time on (`--duration`).
    deadline: Option<Instant>,
    /// Entry time of the agreement in flight, if any.
    entry: Option<u64>,
    kill_id: Option<AgreeId>,
    seed: u64,
    pub(crate) returned: u64,
    pub(crate) invalid: u64,
    pub(crate) max_stored: usize,
    pub(crate) suspicions: u64,
    pub(crate) false_suspicions: u64,
    /// Every rank this node suspected (for `--procs`, where the parent knows the truth).
    pub(crate) suspected: Vec<Rank>,
    pub(crate) messages: u64,
    pub(crate) heartbeats: u64,
    pub(crate) drops: DropCounters,
    suspects: Vec<Rank>,
    /// Outcome fingerprints of every returned agreement, chained per block of
    /// [`DIGEST_BLOCK`] ids (`--procs` compares them across processes).
    pub(crate) digests: Vec<u64>,
    /// The agreed failed set of the last return (ranks, ascending).
    pub(crate) last_failed: Vec<Rank>,
    /// Returns not yet in the shared window: recorded after this step's sends, so the lock
    /// and the shared counters never delay a message.
    unrecorded: Vec<(AgreeId, Rec)>,
    /// A node process's returns, for the process that classifies them per agreement
    /// ([`crate::runtime::agree_stream`]) instead of the shared window; `None` in a threads
    /// run.
    pub(crate) tap: Option<Vec<(AgreeId, Rec)>>,
}

/// What a poll's deliveries update: a node's fields, borrowed apart from its transport.
struct Receiver<'a> {
    era: &'a mut Era<And64>,
    drops: &'a mut DropCounters,
    last_heard: &'a mut [Instant],
    pinged: &'a mut [Option<Instant>],
    suspects: &'a mut Vec<Rank>,
    n: u32,
    now: Instant,
}

impl Receiver<'_> {
    /// Checks and hands one delivery on; a bad datagram is dropped and counted.
    fn deliver(&mut self, d: Delivery<'_>) {
        let (from, bytes) = match d {
            Delivery::Message { from, bytes } => (from, bytes),
            Delivery::Suspect { peer } => return self.suspects.push(peer),
        };
        self.last_heard[from as usize] = self.now;
        match Header::decode(bytes, JOB, self.n) {
            Err(e) => self.drops.count(e),
            Ok((h, _, _)) if h.sender != from => self.drops.count(crate::wire::DecodeError::RankOutOfRange),
            Ok((h, body, _)) if h.kind == kind::ERA_AND64 => match EraMsg::<And64>::decode(body, self.n) {
                Ok(m) => self.era.on_message(from, m),
                Err(e) => self.drops.count(e),
            },
            Ok((h, body, _)) if h.kind == kind::HEARTBEAT => match Heartbeat::decode(body, self.n) {
                Ok(_) => self.pinged[from as usize] = Some(self.now),
                Err(e) => self.drops.count(e),
            },
            Ok(_) => self.drops.count(crate::wire::DecodeError::UnknownKind),
        }
    }
}

/// A node hands its returns over at least this often (ns), so the shared idle timeout sees
/// progress.
const HANDOFF_NS: u64 = 10_000_000;

/// Batches handed over are folded into the statistics once this many wait (and at the end):
/// the work is done in bulk, as a benchmark loop keeps its timings and sorts them after the
/// loop, in bounded memory (`FOLD_AT` × [`BATCH`] returns).
const FOLD_AT: usize = 64;

/// Agreements per outcome digest.
pub const DIGEST_BLOCK: u64 = 4096;

/// A 64-bit digest of an outcome (value, failed set, unacknowledged set) that returns
/// compare across nodes and processes: a fixed multiply-xorshift mix of its words, cheap
/// enough for every return (it runs before the next contribution goes out).
fn fingerprint(o: &Outcome<And64>) -> u64 {
    fn mix(h: u64, x: u64) -> u64 {
        let h = (h ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 29)
    }
    let mut h = mix(0x243F_6A88_85A3_08D3, o.value.0);
    for set in [&o.failed, &o.unacknowledged] {
        h = mix(h, set.len() as u64 | 1 << 40);
        for &r in set.as_slice() {
            h = mix(h, u64::from(r));
        }
    }
    h | 1
}

/// What a node needs to start.
pub(crate) struct NodeInit {
    pub rank: Rank,
    pub total: u64,
    pub deadline: Option<Instant>,
    pub kill_id: Option<AgreeId>,
}

impl Node {
    pub(crate) fn new(b: &AgreeBench, init: NodeInit, tp: Box<dyn Transport>, base: Instant) -> Result<Self, String> {
        let n = b.n;
        Ok(Node {
            rank: init.rank,
            n,
            era: Era::new(init.rank, n, b.era)?,
            tp,
            last_heard: vec![base; n as usize],
            last_sent: vec![base; n as usize],
            nb: Vec::new(),
            nb_at: base,
            last_step: base,
            pinged: vec![None; n as usize],
            watching: Vec::new(),
            backlog: VecDeque::new(),
            blocked: vec![false; n as usize],
            buf: Vec::new(),
            dead: false,
            enforced: false,
            finished: false,
            total: init.total,
            deadline: init.deadline,
            entry: None,
            kill_id: init.kill_id,
            seed: b.seed,
            returned: 0,
            invalid: 0,
            max_stored: 0,
            suspicions: 0,
            false_suspicions: 0,
            suspected: Vec::new(),
            messages: 0,
            heartbeats: 0,
            drops: DropCounters::default(),
            suspects: Vec::new(),
            digests: Vec::new(),
            last_failed: Vec::new(),
            unrecorded: Vec::new(),
            tap: None,
        })
    }

    /// A suspicion is final: a suspected node that is in fact alive is made dead (it stops at
    /// its next step, as ULFM's runtime removes a process it suspects), so the detector stays
    /// accurate in the sense ERA needs (Lemma 1: only dead processes are marked dead).
    fn suspect(&mut self, peer: Rank, sh: &Shared) {
        if self.era.known_dead().contains(peer) {
            return;
        }
        self.suspicions += 1;
        self.suspected.push(peer);
        // Its returns from about here on may not have spread (it may be a step either side).
        sh.mark_dead(peer, self.era.next_id().saturating_sub(2));
        if !sh.dead[peer as usize].swap(true, Ordering::AcqRel) {
            // (In a node process every suspicion lands here; the parent sorts them out.)
            self.false_suspicions += 1;
            if let Some(net) = &sh.inproc {
                net.kill(peer);
            }
        }
        self.era.on_dead(peer);
    }

    /// Has someone made this node dead? Then it stops here, for good.
    fn check_alive(&mut self, sh: &Shared) -> bool {
        if !self.dead && sh.dead[self.rank as usize].load(Ordering::Acquire) {
            self.dead = true;
            self.enforced = true;
            sh.live.fetch_sub(1, Ordering::AcqRel);
            if self.finished {
                sh.finished.fetch_sub(1, Ordering::AcqRel);
            }
        }
        !self.dead
    }

    /// Sends, or queues behind `to`'s earlier messages (per-peer order is kept).
    /// Only a refused message is copied (into the backlog).
    fn send_bytes(&mut self, to: Rank, bytes: &[u8], now: Instant) {
        if self.blocked[to as usize] {
            self.backlog.push_back((to, bytes.to_vec()));
            return;
        }
        match self.tp.send(to, bytes, now) {
            Ok(()) => self.last_sent[to as usize] = now,
            Err(SendError::WindowFull) => {
                self.blocked[to as usize] = true;
                self.backlog.push_back((to, bytes.to_vec()));
            }
            Err(_) => {}
        }
    }

    /// Retries the queued messages once, in order.
    fn drain_backlog(&mut self, now: Instant) {
        if self.backlog.is_empty() {
            return;
        }
        let queued = std::mem::take(&mut self.backlog);
        self.blocked.iter_mut().for_each(|b| *b = false);
        for (to, b) in queued {
            self.send_bytes(to, &b, now);
        }
    }

    pub(crate) fn enter_next(&mut self, sh: &Shared, now: Instant) {
        let id = self.era.next_id();
        if id >= self.total || self.dead || self.finished {
            return;
        }
        if self.kill_id == Some(id) {
            self.dead = true;
            sh.mark_dead(self.rank, id.saturating_sub(1));
            sh.dead[self.rank as usize].store(true, Ordering::Release);
            sh.kill_ns.fetch_min(sh.ns(now), Ordering::AcqRel);
            if let Some(report) = &sh.on_crash {
                let mut pending = self.tap.take().unwrap_or_default();
                pending.extend_from_slice(&self.unrecorded);
                pending.pop();
                report(self.rank, sh.ns(now), &pending);
                crate::runtime::procs::sigkill_self();
            }
            if let Some(net) = &sh.inproc {
                net.kill(self.rank);
            }
            // A crash closes the socket, as a killed process's would (its counters kept).
            let closed = Closed {
                rank: self.tp.rank(),
                size: self.tp.size(),
                stats: self.tp.stats(),
            };
            self.tp = Box::new(closed);
            sh.live.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let cont = id + 1 < self.total && self.deadline.is_none_or(|d| now < d);
        if self.era.agree(contribution(self.seed, self.rank, id, cont)).is_ok() {
            self.entry = Some(sh.ns(now));
        }
    }

    fn on_return(&mut self, o: Outcome<And64>, sh: &Shared, now: Instant) {
        let ret = sh.ns(now);
        let fp = fingerprint(&o);
        let rec = Rec {
            entry: self.entry.take().unwrap_or(ret),
            ret,
            fp,
            ok: o.ok(),
        };
        self.returned += 1;
        self.max_stored = self.max_stored.max(self.era.stored());
        let (id, value) = (o.id, o.value.0);
        self.unrecorded.push((id, rec));
        if !o.ok() {
            self.era.acknowledge_failures();
        }
        if value & CONTINUE == 0 && !self.finished {
            self.finished = true;
            sh.finished.fetch_add(1, Ordering::AcqRel);
        }
        self.enter_next(sh, now);
        // The next contribution goes out before the rest of the bookkeeping.
        self.send_pending(sh, now);
        let block = (id / DIGEST_BLOCK) as usize;
        if self.digests.len() <= block {
            self.digests.resize(block + 1, 0);
        }
        let d = &mut self.digests[block];
        *d = d.rotate_left(5) ^ fp.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ id;
        self.last_failed.clear();
        self.last_failed.extend((0..self.n).filter(|&r| o.failed.contains(r)));
        let dead = |r: Rank| o.failed.contains(r) || sh.dead[r as usize].load(Ordering::Acquire);
        if !valid(self.seed, self.n, id, value, &dead) {
            self.invalid += 1;
        }
    }

    /// One pass: receive, detect, return and re-enter, send. Returns whether anything
    /// happened.
    pub(crate) fn step(&mut self, sh: &Shared, bench: &AgreeBench) -> bool {
        if !self.check_alive(sh) {
            self.record_returns(sh, true);
            return false;
        }
        let now = Instant::now();
        // This node was not polling for a while (descheduled): the silence of others during
        // that time says nothing about them, so it does not count.
        if now.saturating_duration_since(self.last_step) >= bench.suspect_after / 4 {
            self.last_heard.iter_mut().for_each(|t| *t = now);
        }
        self.last_step = now;
        let n = bench.n;
        // Messages are decoded straight out of the transport's buffer (no copy).
        let mut rx = Receiver {
            era: &mut self.era,
            drops: &mut self.drops,
            last_heard: &mut self.last_heard,
            pinged: &mut self.pinged,
            suspects: &mut self.suspects,
            n,
            now,
        };
        let mut progress = false;
        // Transports may hand out one delivery per poll: drain (bounded).
        for _ in 0..64 {
            let got = self.tp.poll(now, &mut |d| rx.deliver(d));
            if !matches!(got, Ok(k) if k > 0) {
                break;
            }
            progress = true;
        }
        for peer in std::mem::take(&mut self.suspects) {
            self.suspect(peer, sh);
        }
        // Failure detector over the tree neighbours.
        if now.saturating_duration_since(self.nb_at) >= bench.heartbeat / 4 {
            self.nb_at = now;
            let mut nb = std::mem::take(&mut self.nb);
            self.era.neighbours(&mut nb);
            // Those who watch this node (their views may differ from this one's) hear from it
            // too: heartbeats go to the neighbours and to every recent pinger.
            let watched = nb.len();
            // A peer newly watched is timed from now, not from the last time it happened to
            // send something (it may never have had reason to).
            let mut was = std::mem::take(&mut self.watching);
            for &p in &nb {
                if !was.contains(&p) {
                    self.last_heard[p as usize] = now;
                }
            }
            was.clear();
            was.extend_from_slice(&nb);
            self.watching = was;
            for p in 0..n {
                if self.pinged[p as usize].is_some_and(|t| now.saturating_duration_since(t) < bench.suspect_after)
                    && !nb.contains(&p)
                {
                    nb.push(p);
                }
            }
            for (i, &p) in nb.iter().enumerate() {
                if i < watched && now.saturating_duration_since(self.last_heard[p as usize]) >= bench.suspect_after {
                    self.suspect(p, sh);
                } else if !self.blocked[p as usize]
                    && now.saturating_duration_since(self.last_sent[p as usize]) >= bench.heartbeat
                {
                    // (A blocked peer has data waiting for it; a heartbeat would only queue.)
                    let mut b = [0u8; HEADER_LEN];
                    if let Ok(len) = encode_datagram(&mut b, JOB, 0, 0, self.rank, &Heartbeat, &[]) {
                        self.heartbeats += 1;
                        self.send_bytes(p, &b[..len], now);
                    }
                }
            }
            self.nb = nb;
        }
        // What the messages just handled made ERA send (a decision's DOWN above all) goes out
        // before this node records its own return: the bookkeeping is off the critical path.
        progress |= self.send_pending(sh, now);
        while let Some(o) = self.era.poll_outcome() {
            progress = true;
            self.on_return(o, sh, now);
        }
        if self.dead {
            self.record_returns(sh, true);
            return true;
        }
        progress |= self.send_pending(sh, now);
        // Returns go over in batches, after this step's sends but before this node can
        // contribute to another agreement ([`agree_window`]'s bound), and at least every
        // `HANDOFF_NS` (the idle timeout watches the folded returns). A finished node leaves
        // nothing behind.
        // (The age check only on a pass with nothing else done: it reads the clock math.)
        if self.finished
            || self.unrecorded.len() >= BATCH
            || (!progress
                && self
                    .unrecorded
                    .first()
                    .is_some_and(|(_, r)| sh.ns(now).saturating_sub(r.ret) >= HANDOFF_NS))
        {
            self.record_returns(sh, self.finished);
        }
        progress
    }

    /// Hands the returns not yet recorded over, as one batch, and folds the batches waiting
    /// unless another node is folding (`wait`: fold everything now).
    pub(crate) fn record_returns(&mut self, sh: &Shared, wait: bool) {
        if self.unrecorded.is_empty() && !wait {
            return;
        }
        if let Some(tap) = &mut self.tap {
            // A node process: the coordinating process classes them (this one's window
            // would only repeat that work on the node's core).
            tap.append(&mut self.unrecorded);
            return;
        }
        let mut waiting = 0;
        if !self.unrecorded.is_empty() {
            let last = self.unrecorded.iter().map(|(_, r)| r.ret).max().unwrap_or(0);
            let batch = std::mem::replace(&mut self.unrecorded, Vec::with_capacity(BATCH));
            let mut q = sh.handoff.lock().unwrap_or_else(|e| e.into_inner());
            q.push_back((self.rank, batch));
            waiting = q.len();
            drop(q);
            sh.last_return.fetch_max(last, Ordering::AcqRel);
        }
        if wait || waiting >= FOLD_AT {
            sh.fold(wait);
        }
    }

    /// Sends what ERA queued (after the backlog of blocked peers); whether anything was.
    fn send_pending(&mut self, sh: &Shared, now: Instant) -> bool {
        let mut sent = false;
        self.drain_backlog(now);
        while self.check_alive(sh)
            && let Some((to, m)) = self.era.poll_send()
        {
            sent = true;
            self.messages += 1;
            let mut buf = std::mem::take(&mut self.buf);
            buf.resize(HEADER_LEN + EraMsg::<And64>::MAX_BODY, 0);
            if let Ok(len) = encode_datagram(&mut buf, JOB, 0, m.id(), self.rank, &m, &[]) {
                self.send_bytes(to, &buf[..len], now);
            }
            self.buf = buf;
        }
        sent
    }

    /// Contributions say "stop" from `d` on.
    pub(crate) fn set_deadline(&mut self, d: Option<Instant>) {
        self.deadline = d;
    }

    /// Moves the node's buffers into memory of the calling thread: nodes are made by one
    /// thread, so the small buffers of nodes driven by different threads could share cache
    /// lines (false sharing on every message).
    pub(crate) fn settle(&mut self) {
        self.era = self.era.clone();
        self.last_heard = self.last_heard.clone();
        self.last_sent = self.last_sent.clone();
        self.pinged = self.pinged.clone();
        self.blocked = self.blocked.clone();
        self.buf = Vec::with_capacity(HEADER_LEN + EraMsg::<And64>::MAX_BODY);
        self.unrecorded = Vec::with_capacity(BATCH);
    }

    /// The node's first step at the start of the run.
    pub(crate) fn start(&mut self, sh: &Shared, now: Instant) {
        self.last_heard.iter_mut().for_each(|t| *t = now);
        self.last_step = now;
        self.enter_next(sh, now);
    }
}

/// Checks the flags common to both modes.
pub(crate) fn validate(b: &AgreeBench) -> Result<(), String> {
    if b.n < 2 || b.n > MAX_NODES {
        return Err(format!("--nodes must be in 2..={MAX_NODES} for the network benchmark"));
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
    Ok(())
}

/// Agreements at most (warm-up included): `--duration` runs are bounded by time only.
pub(crate) fn total(b: &AgreeBench) -> u64 {
    if b.duration.is_some() {
        u64::MAX
    } else {
        b.warmup + b.iterations
    }
}

/// Runs the benchmark.
pub fn run(b: &AgreeBench) -> Result<AgreeBenchReport, String> {
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
            let (_, eps) = UdpTransport::bind_ephemeral_local(b.n, UdpConfig::default())
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
        };
        nodes.push(Node::new(b, init, tp, base)?);
    }
    let workers = b.workers.clamp(1, b.n as usize);
    let mut groups: Vec<Vec<Node>> = (0..workers).map(|_| Vec::new()).collect();
    for node in nodes {
        groups[node.rank as usize % workers].push(node);
    }
    let cores = if b.pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    let sh = Arc::new(sh);
    let started = Instant::now();
    let deadline = b.duration.map(|d| started + d);
    let barrier = std::sync::Barrier::new(workers);
    let groups: Vec<Vec<Node>> = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .into_iter()
            .enumerate()
            .map(|(w, group)| {
                let (sh, barrier) = (&sh, &barrier);
                let core = (!cores.is_empty()).then(|| cores[w % cores.len()]);
                s.spawn(move || {
                    if let Some(c) = core {
                        core_affinity::set_for_current(c);
                    }
                    // The group and its nodes' buffers in this thread's own memory (a new
                    // vector: collecting in place would keep the spawning thread's).
                    let mut fresh = Vec::with_capacity(group.len());
                    for mut node in group {
                        node.settle();
                        fresh.push(node);
                    }
                    let mut group = fresh;
                    barrier.wait();
                    let now = Instant::now();
                    sh.last_return.fetch_max(sh.ns(now), Ordering::AcqRel);
                    for node in group.iter_mut() {
                        node.deadline = deadline;
                        node.start(sh, now);
                    }
                    let mut idle_passes = 0u32;
                    loop {
                        let mut progress = false;
                        for node in group.iter_mut() {
                            progress |= node.step(sh, b);
                        }
                        if sh.finished.load(Ordering::Acquire) >= sh.live.load(Ordering::Acquire)
                            || sh.abort.load(Ordering::Acquire)
                        {
                            break;
                        }
                        idle_passes = if progress { 0 } else { idle_passes.wrapping_add(1) };
                        // (The clock is read for the timeout only every 256 idle passes: a
                        // cheaper pass notices the next message sooner.)
                        if idle_passes % 256 == 255 {
                            let idle = sh
                                .ns(Instant::now())
                                .saturating_sub(sh.last_return.load(Ordering::Acquire));
                            if idle > b.op_timeout.as_nanos() as u64 {
                                sh.abort.store(true, Ordering::Release);
                            }
                        }
                    }
                    group
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut nodes: Vec<Node> = groups.into_iter().flatten().collect();
    nodes.sort_by_key(|n| n.rank);
    // (A node stopped mid-batch, e.g. by an abort, still has returns to hand over.)
    for node in nodes.iter_mut() {
        node.record_returns(&sh, true);
    }
    Ok(report(&sh, &nodes, seconds))
}

fn report(sh: &Shared, nodes: &[Node], seconds: f64) -> AgreeBenchReport {
    sh.fold(true);
    let mut w = sh.window();
    w.flush(&|r, i| sh.left_out(r, i));
    let live: Vec<&Node> = nodes.iter().filter(|n| !n.dead).collect();
    let unfinished = live.iter().filter(|n| !n.finished).count() as u64;
    let kill_ns = sh.kill_ns.load(Ordering::Acquire);
    let first_success = w.first_success.map(|(_, last)| last.saturating_sub(kill_ns));
    let mut transport = TransportStats::default();
    let mut drops = DropCounters::default();
    let (mut suspicions, mut false_suspicions, mut messages, mut heartbeats, mut invalid) = (0, 0, 0, 0, 0);
    for n in nodes {
        let s = n.tp.stats();
        transport.sent += s.sent;
        transport.received += s.received;
        transport.retransmits += s.retransmits;
        transport.suspected += s.suspected;
        transport.malformed += s.malformed;
        transport.window_full += s.window_full;
        drops.merge(&n.drops);
        suspicions += n.suspicions;
        false_suspicions += n.false_suspicions;
        messages += n.messages;
        heartbeats += n.heartbeats;
        if !n.dead {
            invalid += n.invalid;
        }
    }
    AgreeBenchReport {
        classes: std::mem::take(&mut w.classes),
        disagreements: w.disagreements,
        invalid,
        unfinished,
        suspicions,
        false_suspicions,
        first_success_after_kill: first_success,
        messages_per_agreement: messages as f64 / w.agreements.max(1) as f64,
        heartbeats,
        transport,
        drops,
        agreements: w.agreements,
        seconds,
        peak_rss_kb: peak_rss_kb(),
        era_stored_max: nodes.iter().map(|n| n.max_stored).max().unwrap_or(0),
        late: w.late,
        bad_lines: 0,
        clock_uncertainty_ns: None,
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
