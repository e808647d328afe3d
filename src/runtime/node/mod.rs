//! One node of the runtime: the generic node loop ([`crate::runtime::driver::Driver`])
//! driving the broadcast family's machine over the window of operations in flight
//! (`ops`), over a [`Transport`], in real time (`docs/architecture.md`, decisions 1–2, 6).
//!
//! A pass ([`Node::step`]) is: retire what the coordinator declared over; a root starts the
//! operations it may ([`Event::Input`]) and sends their first messages before it reads its
//! socket; then, while datagrams keep arriving (bounded), one poll of the transport (each
//! datagram checked and admitted by the machine, see `ops`), the transport's verdicts
//! ([`Event::Suspect`]) and a fence, the due timers ([`Event::Timer`]), and a send phase
//! ([`crate::runtime::driver::Driver::transmit_to`], oldest operation first, at most
//! `sends_per_step` messages).
//!
//! Operations are numbered in one sequence for the whole group; a benchmark's all have one
//! root, a group's coordinator names each one's ([`Control::root_of`]). What an operation carries comes from the node's
//! [`Payloads`]: the user's bytes at the root, handed to the user at every delivery (the
//! benchmark's are [`Generated`]).

mod crash;
mod datagrams;
mod ops;
mod payload;
pub mod stages;
mod stats;
pub mod trace;

pub use crash::Faults;
pub use datagrams::{Datagrams, Op};
pub use payload::{Generated, Payloads, payload_byte};
pub use stats::{NodeStats, OsuBcast, RankTimes};

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::protocol::{DetectorConfig, Event, Machine, Protocol};
use crate::runtime::board::{Control, NodeBoard};
use crate::runtime::driver::Driver;
use crate::runtime::kill::Kill;
use crate::transport::{Transport, TransportStats};
use crate::wire::WireMessage;
use ops::{Ops, Pass};

/// Parameters every node of a run shares.
pub struct NodeParams<'a, S> {
    pub shared: &'a S,
    pub n: u32,
    /// `Some(r)`: every operation's root is `r` (a benchmark); `None`: the coordinator names
    /// each one's ([`Control::root_of`]).
    pub root: Option<u32>,
    pub job: u64,
    /// Nanoseconds per model time unit.
    pub tick_ns: u64,
    pub epoch: Instant,
}

/// The node's endpoint: its transport until the first pass (which knows the run's job and
/// epoch), then its driver; none once dead. (The driver is inline: a node is stepped in a
/// tight loop, and one per rank is all there is.)
#[allow(clippy::large_enum_variant)]
enum Link<M> {
    Idle(Box<dyn Transport>),
    Up(Driver<Datagrams<M>>),
    Down,
}

/// How a pass ended a node's life.
enum Death {
    /// A peer's FENCE (it suspected this live node).
    Fenced(u32),
    /// An injected crash in this iteration.
    Crash(u64),
}

/// One node: its endpoint, its operations and its counters. Aligned so that two nodes
/// driven by different threads never share a cache line.
#[repr(align(128))]
pub struct Node<P: Protocol> {
    pub rank: u32,
    link: Link<P::Msg>,
    on_death: Option<Box<dyn FnMut() + Send>>,
    ops: Ops<P>,
    /// The transport's counters when the node died (its sends count in the run's totals).
    last_stats: TransportStats,
    /// The peer whose FENCE killed this node (a false suspicion made true), if one did.
    fenced_by: Option<u32>,
    pub stats: NodeStats,
}

impl<P: Protocol> Node<P>
where
    P::Msg: WireMessage,
{
    /// A node with its transport and payloads; `on_death` runs when an injected crash kills
    /// it.
    pub fn new(
        rank: u32,
        n: u32,
        transport: Box<dyn Transport>,
        payloads: Box<dyn Payloads>,
        kill: Option<Kill>,
        seed: u64,
        on_death: Option<Box<dyn FnMut() + Send>>,
    ) -> Self {
        let faults = kill.map(|k| Box::new(k) as Box<dyn Faults>);
        Self {
            rank,
            link: Link::Idle(transport),
            on_death,
            ops: Ops::new(rank, n, payloads, faults, seed),
            last_stats: TransportStats::default(),
            fenced_by: None,
            stats: NodeStats::default(),
        }
    }

    /// Bounds the messages sent per step (at least one).
    pub fn set_sends_per_step(&mut self, n: u32) {
        self.ops.sends_per_step = n.max(1);
    }

    /// Is this node alive?
    pub fn alive(&self) -> bool {
        !matches!(self.link, Link::Down)
    }

    /// The peer whose FENCE made this node crash (it had suspected this live node), if one
    /// did: a dead node that was not a planned kill.
    pub fn fenced_by(&self) -> Option<u32> {
        self.fenced_by
    }

    fn transport(&mut self) -> Option<&mut dyn Transport> {
        match &mut self.link {
            Link::Idle(t) => Some(&mut **t),
            Link::Up(d) => Some(&mut *d.tp),
            Link::Down => None,
        }
    }

    /// A failure learned elsewhere (an agreement decided `peer` failed): the transport
    /// enforces it and the protocol hears of it at the next step, as of its own suspicions.
    pub fn suspect(&mut self, peer: u32, now: Instant) {
        match &mut self.link {
            Link::Up(drv) => drv.suspect(peer, now),
            // No operation yet to tell.
            Link::Idle(t) => t.enforce_suspicion(peer, now),
            Link::Down => {}
        }
    }

    /// Blocks until the transport may have data or `timeout` passed (blocking poll mode).
    pub fn wait(&mut self, timeout: Duration) {
        if let Some(t) = self.transport() {
            let _ = t.wait(timeout);
        } else {
            std::thread::sleep(timeout);
        }
    }

    /// [`Node::wait`], woken also when one of `also` is readable.
    pub fn wait_or(&mut self, timeout: Duration, also: &[std::os::fd::BorrowedFd<'_>]) {
        if let Some(t) = self.transport() {
            let _ = t.wait_or(timeout, also);
        } else {
            std::thread::sleep(timeout);
        }
    }

    /// Does the node hold an operation not yet retired (its protocol may have a timer due)?
    pub fn has_live_ops(&self) -> bool {
        !self.ops.live().is_empty()
    }

    /// What the node handed its transport has been acknowledged and nothing waits in its
    /// send queue (dead: nothing more will be). An operation's sends not yet made are not
    /// counted: a caller that leaves waits for its operations to finish first.
    pub fn flushed(&self) -> bool {
        match &self.link {
            Link::Idle(t) => t.unacked() == 0,
            Link::Up(d) => d.flushed(),
            Link::Down => true,
        }
    }

    /// The transport's counters (as they were at death, once dead).
    pub fn transport_stats(&self) -> TransportStats {
        match &self.link {
            Link::Idle(t) => t.stats(),
            Link::Up(d) => d.tp.stats(),
            Link::Down => self.last_stats,
        }
    }

    fn die(&mut self, board: &NodeBoard, iter: u64) {
        self.last_stats = self.transport_stats();
        // (The transport closes: peers' datagrams to it draw what a dead process's would.)
        self.link = Link::Down;
        board.died_in.store(iter, Ordering::Relaxed);
        board.dead.store(true, Ordering::Release);
        if let Some(f) = self.on_death.as_mut() {
            f();
        }
    }

    /// Crashes this node now (crash-stop): its transport closes, `on_death` runs, and the
    /// operations it has not retired no longer wait for it.
    pub fn crash(&mut self, board: &NodeBoard) {
        if self.alive() {
            self.die(board, self.ops.retired);
        }
    }

    /// Marks a node that is dead from the start.
    pub fn kill_at_start(&mut self, board: &NodeBoard) {
        if self.ops.faults.as_ref().is_some_and(|f| f.dead_at_start()) {
            self.die(board, u64::MAX);
        }
    }

    /// One round of work: start allowed operations (root), receive, time out, send.
    /// Returns true if anything happened.
    pub fn step(&mut self, p: &NodeParams<'_, P::Shared>, ctl: &Control, now: Instant) -> bool {
        let board = &ctl.boards[self.rank as usize];
        if let Link::Idle(_) = self.link {
            let Link::Idle(tp) = std::mem::replace(&mut self.link, Link::Down) else {
                unreachable!()
            };
            let det = DetectorConfig {
                heartbeat: u64::MAX,
                suspect_after: u64::MAX,
            };
            self.link = Link::Up(Driver::new(tp, p.job, det, p.epoch).with_outbox_cap(MAX_DEFERRED));
        }
        let Link::Up(drv) = &mut self.link else { return false };
        let mut pass = Pass {
            ops: &mut self.ops,
            stats: &mut self.stats,
            p,
            ctl,
            board,
            now,
        };
        let (progress, death) = Self::pass(drv, &mut pass);
        // What the pass delivered counts, also when the node dies now.
        pass.publish();
        match death {
            Some(Death::Fenced(by)) => {
                // Fail-stop enforcement: a peer suspected this node; it crashes now, and the
                // coordinator counts it dead from the first operation it has not retired.
                self.fenced_by = Some(by);
                self.die(board, self.ops.retired);
            }
            Some(Death::Crash(iter)) => {
                self.ops.dying = None;
                self.die(board, iter);
            }
            None => {}
        }
        progress
    }

    /// The pass of [`Node::step`] over a live node; whether anything happened, and whether
    /// the node must die.
    #[inline]
    fn pass(drv: &mut Driver<Datagrams<P::Msg>>, m: &mut Pass<'_, '_, P>) -> (bool, Option<Death>) {
        let mut progress = false;
        let (p, ctl, rank) = (m.p, m.ctl, m.ops.rank);
        m.ops.retire(ctl.retired.load(Ordering::Acquire));
        // A root starts what it may.
        let allowed = match p.root {
            Some(r) if r != rank => 0,
            _ => ctl.allowed.load(Ordering::Acquire),
        };
        let starts = m.ops.starts_until(allowed);
        if !starts.is_empty() {
            for seq in starts.clone() {
                // Not rooted here; or over here already, an operation whose root was learned
                // before the caller named this node (a caller's mistake: `Control::learn_roots`).
                if (p.root.is_none() && ctl.root_of(seq) != rank) || seq < m.ops.retired {
                    continue;
                }
                _ = m.handle(0, Event::Input(seq));
                progress = true;
            }
            // The root's first sends leave before it reads its socket (LogP: they follow the
            // start, `o` apart), and before its own delivery's bookkeeping (the board's
            // stamps, the user's hand-over), which no peer waits for.
            if progress {
                // (The start read the clock a moment ago: no second read, which could move the
                // pass's instant past the start at which the root delivers.)
                Self::send_phase(drv, m, false);
                m.announce_starts();
                if let Some(iter) = m.ops.dying {
                    return (true, Some(Death::Crash(iter)));
                }
                for seq in starts {
                    m.started(seq);
                }
                m.publish();
            }
        }
        // Receive, act, send; again while datagrams keep arriving (the transport hands out
        // one delivery per poll so that a forward leaves before the next read), bounded so the
        // worker's other nodes are served too.
        for round in 0..16 {
            if round > 0 {
                m.now = Instant::now();
            }
            let delivered = drv.receive_once(m, m.now);
            progress |= delivered;
            while let Some((peer, _)) = drv.poll_suspect() {
                _ = m.handle(0, Event::Suspect(peer));
            }
            if let Some(by) = drv.fenced_by() {
                return (true, Some(Death::Fenced(by)));
            }
            if let Some(iter) = m.ops.dying {
                return (true, Some(Death::Crash(iter)));
            }
            if let Some(due) = m.poll_timeout() {
                let units = |now: Instant| now.saturating_duration_since(p.epoch).as_nanos() as u64 / p.tick_ns.max(1);
                // Not due at the pass's instant, which was read before the receive: a timer
                // that expired during the read fires now, not a pass later (as a counted
                // wait's end, `send_phase`); the clock is read only while a timer is armed.
                if due > units(m.now) {
                    let now = Instant::now();
                    if due <= units(now) {
                        m.now = now;
                    }
                }
                if due <= units(m.now) {
                    _ = m.handle(0, Event::Timer);
                    progress = true;
                }
            }
            progress |= Self::send_phase(drv, m, true);
            m.publish();
            if let Some(iter) = m.ops.dying {
                return (true, Some(Death::Crash(iter)));
            }
            if !delivered {
                break;
            }
        }
        (progress, None)
    }

    /// Sends what the operations have (oldest first, `sends_per_step` at most) unless the
    /// sender is busy; whether anything was sent or left the queue. `reread`: a wait that
    /// has not ended at the pass's instant is checked against the clock again (one clock read
    /// per pass while a node waits, ~20-40 ns; not at a start, which has just read it).
    #[inline]
    fn send_phase(drv: &mut Driver<Datagrams<P::Msg>>, m: &mut Pass<'_, '_, P>, reread: bool) -> bool {
        if m.ops.busy(m.now) {
            if !reread {
                return false;
            }
            // The pass's instant was read before its receive: a counted wait (the synchronized
            // correction start) that ended during the read is over now, and the model's node
            // sends then, not a pass later (over UDP an empty read alone is ~0.5 µs).
            let now = Instant::now();
            if m.ops.busy(now) {
                return false;
            }
            m.now = now;
        }
        m.begin_sends();
        let mut budget = m.ops.sends_per_step;
        let now = m.now;
        let (sent, flushed) = drv.transmit_to(m, now, || {
            let go = budget > 0;
            budget = budget.saturating_sub(1);
            go
        });
        if m.ops.dying.is_none() {
            m.end_sends();
        }
        sent || flushed
    }
}

/// The most datagrams a node defers (then it drops, counted).
const MAX_DEFERRED: usize = 4096;

#[cfg(test)]
mod tests;
