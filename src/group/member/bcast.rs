//! A member's broadcasts ([`super::Member::broadcast`]): one runtime node of the chosen
//! algorithm (the same node machine, codec and reliable UDP transport as `ftcoll bench`'s) on
//! the member's broadcast socket, stepped by the member's thread, with a [`Control`] of its
//! own that the member's calls drive instead of a coordinator.
//!
//! Broadcasts are collective, as MPI's are: every member calls them in the same order, naming
//! the same root, so the `k`-th call is operation `k` everywhere and the operations are
//! numbered in one sequence over all roots (Corrected Gossip Claim 1) with nobody to number
//! them. A member may hear an operation before its own call names it: the datagram names its
//! root ([`Control::learn_roots`]), and the member forwards and delivers at once; a call that
//! names another root than the one heard, or a datagram that names another root than the
//! call (or than the first datagram, before the call), is the callers' error, reported once
//! per operation ([`Event::RootMismatch`]; the datagram is dropped and counted). The root may
//! start a call's operation once it is at most [`IN_FLIGHT`] past the oldest one this member
//! has not finished.
//!
//! Each member decides alone when an operation is over for it ([`Event::Completed`]): it
//! delivered and its protocol instance will send nothing more, or `op_timeout` passed since
//! its call here or, not yet called, since it was the oldest one known here (heard, or a later
//! one heard: then `timed_out` says whether it delivered), so a member whose caller lags does
//! not hold its window for an operation whose root died before any copy reached it. Nothing
//! waits for the others: a member that finished an operation drops its later messages as
//! stale, and the others' protocols already owe it nothing. Nothing holds a root back for a
//! member that lags either: what comes past that member's window (64) is dropped and counted
//! (`too_far`), and those operations time out there.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::group::{Event, MAX_WALL, nanos};
use crate::model::{LogGP, LogP};
use crate::protocol::Protocol;
use crate::runtime::board::{Control, NodeBoard, WINDOW};
use crate::runtime::control::ChildAgent;
use crate::runtime::node::{Node, NodeParams, Payloads};
use crate::transport::Transport;
use crate::transport::TransportStats;
use crate::wire::WireMessage;

/// Operations a member lets its calls start ahead of the oldest one it has not finished: half
/// the window, so that a member up to as many behind this one still admits its datagrams.
pub(super) const IN_FLIGHT: u64 = WINDOW as u64 / 2;

/// What the member's thread asks of its broadcasts.
pub(super) trait Broadcasts {
    /// The caller's broadcast `seq` (its `seq`-th call), rooted at `root`, carrying `bytes`
    /// (used at the root only; `None` at the root: its call was refused, the operation is used
    /// up and never starts).
    fn call(&mut self, seq: u64, root: u32, bytes: Option<Vec<u8>>);
    /// One pass: admits calls into the window, steps the node, and retires what is over.
    fn step(&mut self, now: Instant) -> bool;
    /// Calls waiting, or operations called, heard or held by the node and not over here
    /// (their protocols' timers are due in model time, which no descriptor signals).
    fn busy(&self) -> bool;
    /// Blocks until the node's socket may have data, one of `also` is readable (the
    /// agreements' socket, the caller's doorbell), or `timeout` passed.
    fn wait(&mut self, timeout: Duration, also: &[std::os::fd::BorrowedFd<'_>]);
    /// `Some(by)` once the node has stopped: fenced by `by` (its transport's FENCE).
    fn stopped(&self) -> Option<Option<u32>>;
    /// The member learned elsewhere that `peer` failed (an agreement decided it).
    fn suspect(&mut self, peer: u32, now: Instant);
    /// The node's counters, into `c`.
    fn count(&self, c: &mut MemberCounters);
    /// Everything the node sent has been acknowledged (or its peer suspected), and nothing
    /// waits to be sent: the member may leave without losing a message ([`Node::flushed`]).
    fn flushed(&self) -> bool;
}

/// What a member counted ([`super::Member::counters`]), since it joined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemberCounters {
    /// The agreements' transport (ERA messages and heartbeats).
    pub agreements: TransportStats,
    /// The broadcasts' transport (zero without broadcasts).
    pub broadcasts: TransportStats,
    /// Broadcast datagrams dropped as invalid (header, body or payload: the wire's checks).
    pub invalid: u64,
    /// Broadcast datagrams of an operation already over here (late copies).
    pub stale: u64,
    /// Broadcast datagrams of an operation too far ahead of this member's window.
    pub too_far: u64,
    /// Broadcast datagrams whose header named another sender than the transport's.
    pub spoofed: u64,
    /// Broadcast datagrams that named another root for their operation than this member's
    /// call did (or, before its call, than an earlier datagram did): dropped, and the
    /// operation reported once ([`Event::RootMismatch`]).
    pub root_mismatch: u64,
    /// Broadcast messages not sent: the destination was suspected (owed nothing).
    pub to_suspected: u64,
    /// Broadcast messages dropped because the send queue was full (the operation fails).
    pub send_overflow: u64,
    /// Broadcasts that were over here without a delivery (timed out).
    pub timed_out: u64,
}

/// A member's broadcast node and the state its calls drive.
pub(super) struct Bcasts<'s, P: Protocol> {
    rank: u32,
    node: Node<P>,
    ctl: Control,
    params: NodeParams<'s, P::Shared>,
    /// The root's payloads, by operation, until its node takes them.
    payloads: Pending,
    /// Calls not yet admitted into the window: `(seq, root, when called, aborted)`.
    calls: VecDeque<Call>,
    /// Per slot: the operation called there and when (its timeout counts from then).
    called_at: Vec<(u64, Instant)>,
    /// Operations whose root's call was refused (their payload too long): `(seq, root)`,
    /// over at once at the root (the others time out, as for a root that failed).
    aborted: VecDeque<(u64, u32)>,
    /// Operations over here: every one below.
    retired: u64,
    /// Since when the oldest operation not over has been known here (called or heard).
    head_since: Option<Instant>,
    op_timeout: Duration,
    events: mpsc::Sender<Event>,
    /// Operations over here without a delivery.
    timed_out: u64,
    /// Operations over here before this member knew their root (neither called nor heard, a
    /// later one heard): their [`Event::Completed`] waits for the call that names the root.
    owed: VecDeque<u64>,
    /// Roots named differently for one operation ([`Disagreements`]).
    roots: Roots,
}

/// What the node heard of roots that differ, as `(seq, root known, root heard)`
/// ([`Payloads::wrong_root`]), until the member's thread looks.
type Disagreements = Arc<Mutex<Vec<(u64, u32, u32)>>>;

/// What a member knows of the roots its operations were heard with, to compare them with its
/// calls' ([`Event::RootMismatch`]).
#[derive(Default)]
struct Roots {
    /// From the node.
    heard: Disagreements,
    /// Operations over here before their call, heard: `(seq, root heard)`, oldest first.
    retired_heard: VecDeque<(u64, u32)>,
    /// Operations not yet called: another root heard than the first one (the first holds).
    other: BTreeMap<u64, u32>,
    /// Operations called here: the root the call named (an aborted call's too: the caller's
    /// rank, never [`NO_ROOT`]), until the operation's slot may hold another ([`Roots::horizon`]).
    called: BTreeMap<u64, u32>,
    /// Operations reported, once each: kept as long as the node may still hear the
    /// operation's datagrams (its slot may still hold it: [`Roots::horizon`]).
    reported: BTreeSet<u64>,
}

impl Roots {
    /// The oldest operation whose slot may still hold it once `retired` are over here (a slot
    /// is reused only by an operation [`WINDOW`] later, admitted once this one is over): the
    /// node's reports of older ones are late copies of a disagreement reported already (or
    /// that came too late to report), and are dropped.
    fn horizon(retired: u64) -> u64 {
        retired.saturating_sub(WINDOW as u64)
    }

    /// Notes that operation `seq` was called here naming `root`.
    fn note_call(&mut self, seq: u64, root: u32) {
        self.called.insert(seq, root);
    }

    /// Whether operation `seq` is to be reported now: not reported before.
    fn first_report(&mut self, seq: u64) -> bool {
        self.reported.insert(seq)
    }

    /// Takes what the node heard of roots that differ (`(seq, root known, root heard)`), with
    /// `allowed` operations called and `retired` over here: returns the disagreements of
    /// operations called here not yet reported, as `(seq, the call's root, the other root)`;
    /// keeps those of operations not yet called for their call ([`Roots::other`]); forgets
    /// what no datagram can bring up again.
    fn take_heard(&mut self, allowed: u64, retired: u64) -> Vec<(u64, u32, u32)> {
        let heard = std::mem::take(&mut *self.heard.lock().unwrap_or_else(|e| e.into_inner()));
        let horizon = Self::horizon(retired);
        let mut out = Vec::new();
        for (seq, known, other) in heard {
            if seq >= allowed {
                self.other.entry(seq).or_insert(other);
                continue;
            }
            // Called here: the report names the call's root, and the other one the node saw
            // (the slot's, heard before the call, or the datagram's); an aborted call's slot
            // names no root (`NO_ROOT`), never reported as one.
            let Some(&root) = self.called.get(&seq).filter(|_| seq >= horizon) else {
                continue;
            };
            let heard = if known != root && known != NO_ROOT {
                known
            } else {
                other
            };
            if heard != root && heard != NO_ROOT && self.first_report(seq) {
                out.push((seq, root, heard));
            }
        }
        while self.reported.first().is_some_and(|&s| s < horizon) {
            self.reported.pop_first();
        }
        while self.called.first_key_value().is_some_and(|(&s, _)| s < horizon) {
            self.called.pop_first();
        }
        out
    }
}

/// A call waiting for the window.
#[derive(Clone, Copy, Debug)]
struct Call {
    seq: u64,
    root: u32,
    at: Instant,
    /// The root's call was refused: the operation is used up, never started.
    aborted: bool,
}

/// A slot's root while its operation may not start (aborted): no member has this rank.
const NO_ROOT: u32 = u32::MAX;

/// The root's payloads by operation.
type Pending = Arc<Mutex<HashMap<u64, Vec<u8>>>>;

/// What a member's node carries: the caller's bytes at the root, any bytes up to `max` from
/// the others, delivered to the caller as [`Event::Delivered`].
struct MemberPayloads {
    rank: u32,
    max: usize,
    pending: Pending,
    events: mpsc::Sender<Event>,
    disagreements: Disagreements,
}

impl Payloads for MemberPayloads {
    fn source(&mut self, seq: u64, out: &mut Vec<u8>) {
        if let Some(b) = self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&seq) {
            out.extend_from_slice(&b);
        }
    }

    fn admit(&mut self, _: u64, bytes: &[u8]) -> bool {
        bytes.len() <= self.max
    }

    fn deliver(&mut self, root: u32, seq: u64, bytes: &[u8]) {
        let _ = self.events.send(Event::Delivered {
            member: self.rank,
            root,
            seq,
            bytes: bytes.to_vec(),
        });
    }

    fn wrong_root(&mut self, seq: u64, named: u32, heard: u32) {
        self.disagreements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((seq, named, heard));
    }
}

/// Where a member's broadcast node runs: its transport and the run's clock and model time.
pub(super) struct Setup {
    pub rank: u32,
    pub n: u32,
    pub transport: Box<dyn crate::transport::Transport>,
    pub job: u64,
    pub seed: u64,
    pub tick_ns: u64,
    pub epoch: Instant,
    pub op_timeout: Duration,
    /// The longest payload the algorithm's datagrams carry.
    pub max: usize,
}

impl<'s, P: Protocol> Bcasts<'s, P>
where
    P::Msg: WireMessage,
{
    pub(super) fn new(shared: &'s P::Shared, s: Setup, events: mpsc::Sender<Event>) -> Self {
        let payloads: Pending = Arc::default();
        let roots = Roots::default();
        let carried = MemberPayloads {
            rank: s.rank,
            max: s.max,
            pending: payloads.clone(),
            events: events.clone(),
            disagreements: roots.heard.clone(),
        };
        let node = Node::<P>::new(s.rank, s.n, s.transport, Box::new(carried), None, s.seed, None);
        Bcasts {
            rank: s.rank,
            node,
            ctl: Control::learning(s.n),
            params: NodeParams {
                shared,
                n: s.n,
                root: None,
                job: s.job,
                tick_ns: s.tick_ns,
                epoch: s.epoch,
            },
            payloads,
            calls: VecDeque::new(),
            called_at: vec![(u64::MAX, Instant::now()); WINDOW],
            aborted: VecDeque::new(),
            retired: 0,
            head_since: None,
            op_timeout: s.op_timeout,
            events,
            timed_out: 0,
            owed: VecDeque::new(),
            roots,
        }
    }

    fn board(&self) -> &NodeBoard {
        &self.ctl.boards[self.rank as usize]
    }

    fn allowed(&self) -> u64 {
        self.ctl.allowed.load(Ordering::Relaxed)
    }

    /// Lets the node start (at the root) or check the root of (elsewhere) call `c`.
    fn admit_call(&mut self, c: Call) {
        // Heard before it was called (or over already): its datagrams named the root, which
        // the slot holds (a root that differs is the callers' mistake, reported: the
        // deliveries name the sender's). Otherwise the call names it; an aborted one no member.
        let heard = c.seq < self.retired || self.board().get(c.seq).is_some();
        self.check_call(c, heard);
        if !heard {
            self.ctl.set_root(c.seq, if c.aborted { NO_ROOT } else { c.root });
            if c.aborted {
                self.aborted.push_back((c.seq, c.root));
            }
        }
        if c.seq >= self.retired {
            self.called_at[c.seq as usize % WINDOW] = (c.seq, c.at);
        }
        self.ctl.allowed.store(c.seq + 1, Ordering::Release);
    }

    /// Compares call `c`'s root with the roots its operation was heard with (`heard`: before
    /// the call) and reports the first that differs.
    fn check_call(&mut self, c: Call, heard: bool) {
        let r = &mut self.roots;
        r.note_call(c.seq, c.root);
        while r.retired_heard.front().is_some_and(|&(s, _)| s < c.seq) {
            r.retired_heard.pop_front();
        }
        let learned = match r.retired_heard.front() {
            Some(&(s, root)) if s == c.seq => {
                r.retired_heard.pop_front();
                Some(root)
            }
            // Over before its root was known: nothing heard to compare.
            _ if c.seq < self.retired => None,
            _ => heard.then(|| self.ctl.root_of(c.seq)),
        };
        let other = r.other.remove(&c.seq);
        while r.other.first_key_value().is_some_and(|(&s, _)| s < c.seq) {
            r.other.pop_first();
        }
        let differs = match learned {
            Some(l) if l != c.root => Some(l),
            _ => other.filter(|&o| o != c.root),
        };
        if let Some(h) = differs {
            self.mismatch(c.seq, c.root, h);
        }
    }

    /// Reports once that operation `seq`, called here with `root`, was heard from `heard`.
    fn mismatch(&mut self, seq: u64, root: u32, heard: u32) {
        if self.roots.first_report(seq) {
            self.tell(seq, root, heard);
        }
    }

    fn tell(&self, seq: u64, root: u32, heard: u32) {
        let _ = self.events.send(Event::RootMismatch {
            member: self.rank,
            seq,
            root,
            heard,
        });
    }

    /// Takes what the node heard of roots that differ: reported (once) for an operation
    /// called here, kept for its call otherwise ([`Roots::take_heard`]).
    fn disagreements(&mut self) {
        for (seq, root, heard) in self.roots.take_heard(self.allowed(), self.retired) {
            self.tell(seq, root, heard);
        }
    }

    /// Retires, oldest first, the operations over here; whether any was.
    fn retire(&mut self, now: Instant) -> bool {
        let mut progress = false;
        loop {
            let seq = self.retired;
            let board = &self.ctl.boards[self.rank as usize];
            let b = board.get(seq);
            if seq >= self.ctl.allowed.load(Ordering::Relaxed)
                && b.is_none()
                && !board.ops.iter().any(|o| o.seq1.load(Ordering::Relaxed) > seq + 1)
            {
                // Neither called nor heard yet, nor a later one (which would say it exists:
                // the calls come in one order): nothing to wait for.
                self.head_since = None;
                break;
            }
            // Its timeout counts from its call, or from when it was first the oldest here.
            let since = match self.called_at[seq as usize % WINDOW] {
                (s, at) if s == seq => at,
                _ => *self.head_since.get_or_insert(now),
            };
            let delivered = b.is_some_and(|b| b.deliveries.load(Ordering::Relaxed) > 0);
            let finished = b.is_some_and(|b| b.finished.load(Ordering::Acquire));
            let aborted = self.aborted.front().is_some_and(|&(s, _)| s == seq);
            if !(aborted || delivered && finished) && now.saturating_duration_since(since) < self.op_timeout {
                break;
            }
            let root = match self.aborted.front() {
                Some(&(s, r)) if s == seq => {
                    self.aborted.pop_front();
                    r
                }
                _ => self.ctl.root_of(seq),
            };
            let called = seq < self.ctl.allowed.load(Ordering::Relaxed);
            let root_known = called || b.is_some();
            if !called && b.is_some() {
                // Over before its call: the call compares its root with this one.
                self.roots.retired_heard.push_back((seq, root));
            }
            self.payloads.lock().unwrap_or_else(|e| e.into_inner()).remove(&seq);
            self.retired += 1;
            self.ctl.retired.store(self.retired, Ordering::Release);
            self.head_since = None;
            self.timed_out += u64::from(!delivered);
            progress = true;
            if !root_known {
                self.owed.push_back(seq);
                continue;
            }
            let _ = self.events.send(Event::Completed {
                root,
                seq,
                timed_out: !delivered,
            });
        }
        progress
    }
}

impl<P: Protocol> Broadcasts for Bcasts<'_, P>
where
    P::Msg: WireMessage,
{
    fn call(&mut self, seq: u64, root: u32, bytes: Option<Vec<u8>>) {
        if self.owed.front() == Some(&seq) {
            // Over here already, unheard: the call names its root.
            self.owed.pop_front();
            let _ = self.events.send(Event::Completed {
                root,
                seq,
                timed_out: true,
            });
        }
        if root == self.rank
            && seq >= self.retired
            && let Some(b) = &bytes
        {
            self.payloads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(seq, b.clone());
        }
        self.calls.push_back(Call {
            seq,
            root,
            at: Instant::now(),
            aborted: root == self.rank && bytes.is_none(),
        });
    }

    fn step(&mut self, now: Instant) -> bool {
        let mut progress = false;
        while let Some(&c) = self.calls.front() {
            if c.seq >= self.retired + IN_FLIGHT {
                break;
            }
            self.calls.pop_front();
            self.admit_call(c);
            progress = true;
        }
        progress |= self.node.step(&self.params, &self.ctl, now);
        self.disagreements();
        progress | self.retire(now)
    }

    fn busy(&self) -> bool {
        !self.calls.is_empty() || self.retired < self.allowed() || self.node.has_live_ops()
    }

    fn wait(&mut self, timeout: Duration, also: &[std::os::fd::BorrowedFd<'_>]) {
        self.node.wait_or(timeout, also);
    }

    fn stopped(&self) -> Option<Option<u32>> {
        (!self.node.alive()).then(|| self.node.fenced_by())
    }

    fn suspect(&mut self, peer: u32, now: Instant) {
        self.node.suspect(peer, now);
    }

    fn flushed(&self) -> bool {
        self.node.flushed()
    }

    fn count(&self, c: &mut MemberCounters) {
        let st = &self.node.stats;
        c.broadcasts = self.node.transport_stats();
        c.invalid = st.drops.total();
        c.stale = st.stale;
        c.too_far = st.too_far;
        c.spoofed = st.spoofed;
        c.root_mismatch = st.wrong_root;
        c.to_suspected = st.to_suspected;
        c.send_overflow = st.deferred_overflow;
        c.timed_out = self.timed_out;
    }
}

#[cfg(test)]
mod roots_tests;

/// The broadcasts' model from rank 0's `o` and `L` (ns, as its rendezvous sent them): `L`
/// in units of `o`, and `o` in ns (the unit). Rank 0 checked its own as `Member::join` does
/// (`o` at most [`MAX_WALL`], `L` at most [`LogP::MAX`] times `o`); a datagram that passed
/// the run's checks but carries more (another build's rank 0, say) is refused here rather
/// than overflow.
pub(super) fn rank0_model(o_ns: u64, l_ns: u64) -> Result<(LogGP, u64), String> {
    let tick_ns = o_ns.max(1);
    let l = l_ns.saturating_add(tick_ns / 2) / tick_ns;
    if tick_ns > nanos(MAX_WALL) || l > LogP::MAX {
        return Err(format!(
            "rank 0's broadcast overhead o ({o_ns} ns) must be at most {MAX_WALL:?} and its latency L ({l_ns} ns) at most {} times o (LogP::MAX)",
            LogP::MAX
        ));
    }
    Ok((LogP { l, o: 1 }.into(), tick_ns))
}

/// A member's broadcast endpoint once joined, for its thread.
pub(super) struct BcastSetup {
    pub(super) transport: Box<dyn Transport>,
    pub(super) job: u64,
    pub(super) algo: crate::protocol::bcast::algo::Algo,
    /// Rank 0's LogP, in units of `tick_ns`.
    pub(super) model: LogGP,
    pub(super) tick_ns: u64,
    pub(super) seed: u64,
    pub(super) op_timeout: Duration,
    /// The longest payload the algorithm's datagrams carry.
    pub(super) max: usize,
    /// The coordinator's epoch on this host's clock.
    pub(super) epoch: Instant,
    /// Kept open, as the member thread's agent (`Run::_agent`).
    pub(super) _agent: ChildAgent,
}
