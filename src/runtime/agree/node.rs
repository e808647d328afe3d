//! One node of the agreement benchmark: its ERA driven by the generic node loop
//! ([`crate::runtime::driver`]: transport, codec, heartbeat failure detector), and what it
//! measured. One pass ([`Node::step`]): receive and decode into ERA, suspicions (the
//! transport's, then the detector's over ERA's tree neighbours) to ERA, what ERA queued sent,
//! returns recorded and the next agreement entered, sent again.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{AgreeBench, CONTINUE, JOB, Shared, contribution, valid};
use crate::protocol::agree::{AgreeId, And64, Era, EraMsg, Outcome};
use crate::protocol::{DetectorConfig, Event, Machine, Rank, Time};
use crate::runtime::agree_window::{BATCH, Rec};
use crate::runtime::driver::{Decoded, Driver, Framing, Plain};
use crate::transport::{Transport, TransportStats};
use crate::wire::agree::Heartbeat;
use crate::wire::{DecodeError, HEADER_LEN, Header, WireMessage, encode_datagram, kind};

/// ERA's datagrams: `ERA_AND64` messages and `HEARTBEAT`s.
pub struct EraFraming;

impl Framing for EraFraming {
    type Msg = EraMsg<And64>;
    const MAX_DATAGRAM: usize = HEADER_LEN + EraMsg::<And64>::MAX_BODY;

    #[inline]
    fn decode(k: u8, body: &[u8], n: u32) -> Result<Decoded<Self::Msg>, DecodeError> {
        match k {
            kind::ERA_AND64 => EraMsg::<And64>::decode(body, n).map(Decoded::Msg),
            kind::HEARTBEAT => Heartbeat::decode(body, n).map(|_| Decoded::Heartbeat),
            _ => Err(DecodeError::UnknownKind),
        }
    }

    /// Both forms of ERA's bodies: a compact one names its agreement in the header.
    #[inline]
    fn decode_datagram(h: &Header, body: &[u8], n: u32) -> Result<Decoded<Self::Msg>, DecodeError> {
        match h.kind {
            kind::ERA_AND64 => EraMsg::<And64>::decode_in(h, body, n).map(Decoded::Msg),
            k => Self::decode(k, body, n),
        }
    }

    /// The header's operation sequence is the agreement's id, so the body is the compact
    /// form wherever the message has one ([`crate::wire::agree`]).
    #[inline]
    fn encode(m: &Self::Msg, job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        encode_datagram(buf, job, 0, m.id(), rank, m, &[]).ok()
    }

    fn heartbeat(job: u64, rank: Rank, buf: &mut [u8]) -> Option<usize> {
        encode_datagram(buf, job, 0, 0, rank, &Heartbeat, &[]).ok()
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
    /// The transport, the detector and the counters of messages and drops.
    pub(crate) drv: Driver<EraFraming>,
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
    /// An injected stall not yet taken: the agreement it comes before, and its length.
    stall: Option<(AgreeId, Duration)>,
    /// The ranks the run kills or stalls (sorted): none of them checks a value ([`checker`]),
    /// since a node that dies takes its count with it.
    doomed: Vec<Rank>,
    /// Stalled (doing nothing at all) until then.
    stalled_until: Option<Instant>,
    seed: u64,
    pub(crate) returned: u64,
    pub(crate) invalid: u64,
    pub(crate) max_stored: usize,
    pub(crate) suspicions: u64,
    pub(crate) false_suspicions: u64,
    /// Every rank this node suspected (for `--procs`, where the parent knows the truth).
    pub(crate) suspected: Vec<Rank>,
    /// When this node first suspected a peer (ns on the run's clock).
    pub(crate) first_suspect_ns: Option<u64>,
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

/// A node hands its returns over at least this often (ns), so the shared idle timeout sees
/// progress.
const HANDOFF_NS: u64 = 10_000_000;

/// Batches handed over are folded into the statistics once this many wait (and at the end):
/// the work is done in bulk, as a benchmark loop keeps its timings and sorts them after the
/// loop, in bounded memory (`FOLD_AT` × [`BATCH`] returns).
const FOLD_AT: usize = 64;

/// What [`Node::record_returns`] folds besides handing the node's batch over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Every batch waiting, now (waiting for another node's fold): the end of a run.
    Wait,
    /// Every batch waiting once [`FOLD_AT`] wait, unless another node is folding.
    IfFull,
    /// None: a dying node, whose worker steps survivors that have its death to find (a
    /// fold of `FOLD_AT` batches held them 50-300 µs; docs/measurements.md, "Probing a
    /// doubted neighbour").
    Never,
}

/// Agreements per outcome digest.
pub const DIGEST_BLOCK: u64 = 4096;

/// The node that checks agreement `id`'s value ([`valid`]): the first rank from `id mod n` on,
/// cyclically, that neither the decided failed set names nor the run kills or stalls
/// (`doomed`, sorted), so every node that returned `id` and lives names the same one, and it
/// lives to report its count (unless a false suspicion fences it: its checks are then lost).
pub(super) fn checker(n: Rank, id: AgreeId, failed: &crate::protocol::agree::RankSet, doomed: &[Rank]) -> Option<Rank> {
    let n64 = u64::from(n.max(1));
    (0..u64::from(n))
        .map(|k| ((id % n64 + k) % n64) as Rank)
        .find(|&r| !failed.contains(r) && doomed.binary_search(&r).is_err())
}

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
    pub stall: Option<(AgreeId, Duration)>,
}

impl Node {
    /// `base` is the run's time base, [`Shared`]'s: entries and returns are timed on the
    /// driver's clock, which converts a pass's instant once for all its uses.
    pub(crate) fn new(b: &AgreeBench, init: NodeInit, tp: Box<dyn Transport>, base: Instant) -> Result<Self, String> {
        let n = b.n;
        Ok(Node {
            rank: init.rank,
            n,
            era: Era::new(init.rank, n, b.era)?,
            drv: Driver::new(
                tp,
                JOB,
                DetectorConfig {
                    heartbeat: b.heartbeat.as_nanos() as Time,
                    suspect_after: b.suspect_after.as_nanos() as Time,
                },
                base,
            ),
            dead: false,
            enforced: false,
            finished: false,
            total: init.total,
            deadline: init.deadline,
            entry: None,
            kill_id: init.kill_id,
            stall: init.stall,
            doomed: {
                let mut d: Vec<Rank> = b
                    .kills
                    .iter()
                    .map(|k| k.0)
                    .chain(b.stalls.iter().map(|t| t.rank))
                    .collect();
                d.sort_unstable();
                d.dedup();
                d
            },
            stalled_until: None,
            seed: b.seed,
            returned: 0,
            invalid: 0,
            max_stored: 0,
            suspicions: 0,
            false_suspicions: 0,
            suspected: Vec::new(),
            first_suspect_ns: None,
            digests: Vec::new(),
            last_failed: Vec::new(),
            unrecorded: Vec::new(),
            tap: None,
        })
    }

    /// A suspicion is final: a suspected node that is in fact alive is made dead (it stops at
    /// its next step, as ULFM's runtime removes a process it suspects), so the detector stays
    /// accurate in the sense ERA needs (Lemma 1: only dead processes are marked dead).
    fn suspect(&mut self, peer: Rank, sh: &Shared, t: Time) {
        if self.era.known_dead().contains(peer) {
            return;
        }
        self.suspicions += 1;
        self.suspected.push(peer);
        // Stamped now, not on the pass's clock `t`: a pass that read its clock before a crash
        // it learns of here (preempted in between; the kill is stamped before its signal)
        // would date the suspicion before the kill, and it would not count as one after it
        // (`after_kill`; seen once as a null `first_suspicion_after_kill_us` in
        // `bench/kill_ab.sh` on a loaded machine). One clock read per node and run.
        if self.first_suspect_ns.is_none() {
            self.first_suspect_ns = Some(self.drv.ns(Instant::now()));
        }
        // Its returns from about here on may not have spread (it may be a step either side).
        sh.mark_dead(peer, self.era.next_id().saturating_sub(2));
        if !sh.dead[peer as usize].swap(true, Ordering::AcqRel) {
            // (In a node process every suspicion lands here; the parent sorts them out.)
            self.false_suspicions += 1;
            if let Some(net) = &sh.inproc {
                net.kill(peer);
            }
        }
        _ = self.era.handle(t, Event::Suspect(peer));
    }

    /// Has someone made this node dead? Then it stops here, for good.
    fn check_alive(&mut self, sh: &Shared) -> bool {
        alive(&mut self.dead, &mut self.enforced, self.finished, self.rank, sh)
    }

    pub(crate) fn enter_next(&mut self, sh: &Shared, now: Instant) {
        let id = self.era.next_id();
        if id >= self.total || self.dead || self.finished {
            return;
        }
        if self.kill_id == Some(id) {
            // The kill's own instant, not the pass's (`now`, read before the pass's receives
            // and returns): the times to the first suspicion and the first success after the
            // kill count from it (a stale stamp added the rest of the pass to both; on 2
            // shared cores, up to 200 µs).
            let killed = Instant::now().max(now);
            self.dead = true;
            sh.mark_dead(self.rank, id.saturating_sub(1));
            sh.dead[self.rank as usize].store(true, Ordering::Release);
            sh.kill_ns.fetch_min(sh.ns(killed), Ordering::AcqRel);
            if let Some(report) = &sh.on_crash {
                let mut pending = self.tap.take().unwrap_or_default();
                pending.extend_from_slice(&self.unrecorded);
                pending.pop();
                report(self.rank, sh.ns(killed), &pending);
                crate::runtime::procs::sigkill_self();
            }
            if let Some(net) = &sh.inproc {
                net.kill(self.rank);
            }
            // A crash closes the socket, as a killed process's would (its counters kept).
            let tp = &self.drv.tp;
            let closed = Closed {
                rank: tp.rank(),
                size: tp.size(),
                stats: tp.stats(),
            };
            self.drv.tp = Box::new(closed);
            sh.live.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        if let Some((at, pause)) = self.stall
            && at == id
        {
            // It stops here, before its contribution goes out; `step` enters on waking.
            self.stall = None;
            self.stalled_until = Some(now + pause);
            return;
        }
        // A fresh clock for the deadline: a node that decides alone (every peer dead) returns at
        // once on each entry, so one step can run any number of agreements and its `now` is
        // stale; compared with that, the deadline never came and the run never stopped.
        let cont = id + 1 < self.total && self.deadline.is_none_or(|d| Instant::now() < d);
        let value = contribution(self.seed, self.rank, id, cont);
        if self.era.handle(self.drv.ns(now), Event::Input(value)).is_ok() {
            self.entry = Some(self.drv.ns(now));
        }
    }

    fn on_return(&mut self, o: Outcome<And64>, sh: &Shared, now: Instant) {
        let ret = self.drv.ns(now);
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
        self.last_failed
            .extend(o.failed.as_slice().iter().copied().filter(|&r| r < self.n));
        // The value's check is O(n) (every rank's contribution): one node makes it per
        // agreement, not each (O(n²) per agreement at n nodes, on the nodes' cores and not in
        // the model: 18 % of a failure-free agreement's p50 at 64 nodes on this 2-core
        // machine, docs/measurements.md).
        if checker(self.n, id, &o.failed, &self.doomed) == Some(self.rank) {
            let dead = |r: Rank| o.failed.contains(r) || sh.dead[r as usize].load(Ordering::Acquire);
            if !valid(self.seed, self.n, id, value, &dead) {
                self.invalid += 1;
            }
        }
    }

    /// One pass: receive, detect, return and re-enter, send. Returns whether anything
    /// happened.
    pub(crate) fn step(&mut self, sh: &Shared) -> bool {
        if !self.check_alive(sh) {
            // Its returns were handed over when it died; a dead node on a shared worker must
            // not wait for the window's lock on every pass after that.
            if !self.unrecorded.is_empty() {
                self.record_returns(sh, Fold::Never);
            }
            return false;
        }
        let now = Instant::now();
        let suspicions = self.suspicions;
        if let Some(until) = self.stalled_until {
            if now < until {
                return false;
            }
            self.stalled_until = None;
            self.enter_next(sh, now);
        }
        // Receive (bounded, as `Driver::receive`), but what each message made ERA send (a
        // decision's DOWN, an UP) leaves before the next poll: one empty poll less on every
        // hop of the agreement's critical path.
        let mut progress = false;
        for _ in 0..64 {
            if !self.drv.receive_once(&mut Plain(&mut self.era), now) || self.drv.fenced_by().is_some() {
                break;
            }
            progress = true;
            self.send_pending(sh, now);
        }
        if self.drv.fenced_by().is_some() {
            // A peer's transport suspected this node and fenced it (fail-stop enforcement):
            // it is dead, as if that peer's suspicion had reached it through `Shared`.
            sh.mark_dead(self.rank, self.era.next_id().saturating_sub(1));
            sh.dead[self.rank as usize].store(true, Ordering::Release);
            self.check_alive(sh);
            self.record_returns(sh, Fold::Never);
            return true;
        }
        while let Some((peer, _)) = self.drv.poll_suspect() {
            let t = self.drv.ns(now);
            self.suspect(peer, sh, t);
        }
        // The failure detector watches ERA's tree neighbours (ERA §2).
        let era = &mut self.era;
        self.drv.detect(now, |nb| era.neighbours(nb));
        while let Some((peer, _)) = self.drv.poll_suspect() {
            let t = self.drv.ns(now);
            self.suspect(peer, sh, t);
        }
        // What the messages just handled made ERA send (a decision's DOWN above all) goes out
        // before this node records its own return: the bookkeeping is off the critical path.
        progress |= self.send_pending(sh, now);
        // A return is stamped with the pass's clock, read before its receives: the entry
        // that follows it is too, so a node's entry-to-return spans whole passes either side
        // and a failure-free pass costs no clock read. Not so on the failure path: the pass
        // that suspects a node or returns a failed agreement does cold work after that read
        // (the failure's detection and handling, ERA's Part 4), and its returns, stamped
        // before it, came before the suspicion they follow: the kill to the first success
        // read shorter than the kill to the first suspicion, both of which are stamped when
        // they happen (docs/measurements.md, "Returns stamped before their failure"). From
        // there on in such a pass each return reads the clock.
        let mut failure_path = self.suspicions != suspicions;
        let mut at = now;
        while let Some(o) = self.era.poll_output() {
            progress = true;
            failure_path |= !o.ok();
            if failure_path {
                at = Instant::now().max(at);
            }
            self.on_return(o, sh, at);
        }
        // The rest of the pass goes on from the latest instant (the transport's timers and
        // the handoff's age never see time go back).
        let now = at;
        if self.dead {
            // Handed over, not folded: folding every batch waiting (up to `FOLD_AT` of
            // them) here held this node's worker for 50-300 µs right after the kill, while
            // the survivors it steps had the failure to detect (docs/measurements.md,
            // "Probing a doubted neighbour"); they are folded with the others' (at the end
            // at the latest).
            self.record_returns(sh, Fold::Never);
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
                    .is_some_and(|(_, r)| self.drv.ns(now).saturating_sub(r.ret) >= HANDOFF_NS))
        {
            self.record_returns(sh, if self.finished { Fold::Wait } else { Fold::IfFull });
        }
        progress
    }

    /// Hands the returns not yet recorded over, as one batch, and folds the batches waiting
    /// as `fold` says.
    pub(crate) fn record_returns(&mut self, sh: &Shared, fold: Fold) {
        let wait = fold == Fold::Wait;
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
        if wait || (fold == Fold::IfFull && waiting >= FOLD_AT) {
            sh.fold(wait);
        }
    }

    /// Sends what ERA queued (after the backlog of blocked peers) while this node lives;
    /// whether anything was.
    fn send_pending(&mut self, sh: &Shared, now: Instant) -> bool {
        let (dead, enforced, finished, rank) = (&mut self.dead, &mut self.enforced, self.finished, self.rank);
        self.drv
            .transmit(&mut self.era, now, || alive(dead, enforced, finished, rank, sh))
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
        self.drv.settle();
        self.unrecorded = Vec::with_capacity(BATCH);
    }

    /// The node's first step at the start of the run.
    pub(crate) fn start(&mut self, sh: &Shared, now: Instant) {
        self.drv.start(now);
        self.enter_next(sh, now);
    }
}

/// Has someone made node `rank` dead? Then it stops here, for good (`dead` set, the shared
/// counts of live and finished nodes corrected).
fn alive(dead: &mut bool, enforced: &mut bool, finished: bool, rank: Rank, sh: &Shared) -> bool {
    if !*dead && sh.dead[rank as usize].load(Ordering::Acquire) {
        *dead = true;
        *enforced = true;
        // Finished first: the workers stop once `finished >= live`, and a live count taken
        // down before the finished one would let them see that for an instant while live
        // nodes still work (a worker that stopped then never steps its nodes again).
        if finished {
            sh.finished.fetch_sub(1, Ordering::AcqRel);
        }
        sh.live.fetch_sub(1, Ordering::AcqRel);
    }
    !*dead
}

#[cfg(test)]
mod tests;
