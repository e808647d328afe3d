//! Corrected Trees (Corrected Trees §3): dissemination on any interleaved or in-order tree
//! (§3.2), then ring correction (§3.3): opportunistic, optimized opportunistic, checked,
//! failure-proof or delayed, started synchronized (all participants at the tree's fault-free
//! dissemination latency) or overlapped (each right after its own tree sends).
//!
//! Phases are counted, not clocked (`docs/architecture.md`, decision 3): a tree message carries the sender's
//! virtual time, so a process knows how long to wait for the synchronized start without a
//! clock.

use crate::model::LogGP;
use crate::protocol::bcast::Start;
use crate::protocol::bcast::correction::{CorrMsg, CorrParams, Correction, Corrector, Dir};
use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo, Time, VTime, vtime};
use crate::topology::Tree;

/// Configuration shared by all processes of a corrected-tree broadcast.
#[derive(Debug)]
pub struct TreeShared {
    /// The dissemination tree (root 0).
    pub tree: Tree,
    /// LogP/LogGP parameters the counted phases use: a hop is `logp.hop()`, a send
    /// `logp.slot()` (the real per-hop time, so the synchronized start is the
    /// moment dissemination really ends).
    pub logp: LogGP,
    /// The correction algorithm and its timing parameters.
    pub corr: CorrParams,
    /// Synchronized or overlapped correction start.
    pub start: Start,
    /// The tree's fault-free dissemination latency: the synchronized correction start.
    pub sync_at: Time,
    /// Each process's fault-free arrival time ([`Tree::arrival_times`]): the virtual time an
    /// early-corrected process forwards the tree from (see [`CorrectedTree`]).
    pub arrival: Vec<Time>,
}

impl TreeShared {
    /// Builds the shared configuration; delays not given are derived from the model.
    pub fn new(tree: Tree, logp: impl Into<LogGP>, correction: Correction, start: Start) -> Self {
        let logp: LogGP = logp.into();
        let arrival = tree.arrival_times(logp);
        let sync_at = arrival.iter().copied().max().unwrap_or(0);
        let n = Time::from(tree.len());
        let hop = logp.hop();
        // Delayed correction: the right neighbour's first message needs 2o + L; overlapped
        // starts differ by up to the dissemination latency. One o of slack.
        let default_delay = match start {
            Start::Synchronized => hop + logp.slot(),
            Start::Overlapped => sync_at + hop + logp.slot(),
        };
        let delay = match correction {
            Correction::Delayed { delay: Some(d) } => d,
            _ => default_delay,
        };
        // Every Corrected Trees correction sends its first message to the left. CT Lemma 2's
        // proof says so for checked correction, and its exact counts depend on it. For
        // opportunistic correction §3.1 names the targets as a set, "{r + 1, r − 1, …, r + d,
        // r − d}", not an order (CG's Algorithm 1 for OCG sends right first, and our Corrected
        // Gossip does). Optimized correction needs left first: §3.3's skip rule listens for the
        // right neighbour's messages, and only when everyone's first message goes left does it
        // arrive soon enough for §4.1's "optimized opportunistic correction sends at most as many
        // messages as checked correction" to hold (fault-free at 16K: 5.5–6.0 messages per
        // process against checked's 6; right first, 6.5–7.3; see
        // `tests::optimized_sends_at_most_as_many_as_checked_fault_free`). Plain opportunistic
        // correction keeps the same order, so that optimized is plain plus §3.3's skips and
        // nothing else: with plain sending right first, the changed timing alone made optimized
        // color fewer processes in 459 of 40 000 random fault sets, against 3 with one order.
        let first = Dir::Bwd;
        let corr = CorrParams {
            kind: correction,
            first,
            o: logp.slot(),
            delay,
            // A full loop of the ring by one sender, plus the dissemination: never expires in a
            // run where f + 1 g-nodes exist (FCG Lemma 3), still finite.
            idle_when_stopped: false,
            sos_timeout: sync_at + 2 * n * logp.slot() + 2 * hop,
        };
        Self {
            tree,
            logp,
            corr,
            start,
            sync_at,
            arrival,
        }
    }
}

impl SharedInfo for TreeShared {
    fn sync_correction_start(&self) -> Option<Time> {
        (self.start == Start::Synchronized && self.corr.kind != Correction::None).then_some(self.sync_at)
    }
}

/// A corrected-tree message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeMsg<const C: usize> {
    /// Dissemination along a tree edge; `vt` is the sender's virtual time at the send.
    Tree { vt: VTime },
    /// Ring correction.
    Corr(CorrMsg<C>),
}

impl<const C: usize> Message for TreeMsg<C> {
    fn phase(&self) -> Phase {
        match self {
            TreeMsg::Tree { .. } => Phase::Dissemination,
            TreeMsg::Corr(c) => crate::protocol::bcast::corr_phase(c),
        }
    }
    fn label(&self) -> &'static str {
        match self {
            TreeMsg::Tree { .. } => "tree",
            TreeMsg::Corr(c) => crate::protocol::bcast::corr_label(c),
        }
    }
}

/// One process of a corrected-tree broadcast.
///
/// **Early correction** (CT §3.3, overlapped start): "a correction message is early if a
/// process is reached by the correction message before a tree message. After receiving an early
/// correction, a process still sends tree messages to its children." So a process colored by
/// correction before any tree message forwards the tree to its children at once — also when its
/// parent is dead and no tree message will ever come, which is what keeps a dead parent's
/// subtree from being left to the ring. It stays a c-node: it sends no *correction* message
/// (§3.1, "processes that become colored during correction do not send any messages"); its
/// children, colored by a tree message, are participants like any other.
///
/// It counts virtual time from its fault-free arrival time, `TreeShared::arrival[rank]`: tree
/// messages carry counted, not clocked, time (DESIGN.md decision 3), so every process colored by
/// a tree message holds exactly its fault-free arrival time however late the message really
/// came; an early-corrected process takes the same value, and its subtree counts exactly as it
/// would below a live parent. With the overlapped start the counted time is carried, never
/// waited on, so this choice moves no send.
///
/// Only the overlapped start has early corrections: with the synchronized start correction
/// begins after the fault-free dissemination latency, when every tree message that will ever
/// arrive has arrived, so a process reached by correction then has a dead ancestor and, being a
/// c-node of a correction phase that follows the dissemination (CG §III), sends nothing.
/// Failure-proof correction keeps FCG's own rule for c-nodes (they deliver only once `f + 1`
/// g-nodes are known, Algorithm 3) and does not forward.
#[derive(Clone, Debug)]
pub struct CorrectedTree<const C: usize> {
    /// A tree message arrived, an early correction colored this process (overlapped start),
    /// or this is the root: children are owed a message.
    tree_received: bool,
    /// All children were sent to (and a participant's correction started).
    tree_sent: bool,
    /// Next child index to send to.
    next_child: u32,
    /// Virtual time of this process's sender.
    vt: Time,
    corr: Corrector<C>,
}

impl<const C: usize> Protocol for CorrectedTree<C> {
    type Shared = TreeShared;
    type Msg = TreeMsg<C>;

    fn new(_cx: &Ctx<'_, TreeShared>) -> Self {
        Self {
            tree_received: false,
            tree_sent: false,
            next_child: 0,
            vt: 0,
            corr: Corrector::new(),
        }
    }

    fn start(&mut self, cx: &Ctx<'_, TreeShared>) {
        if cx.rank == 0 {
            self.tree_received = true;
            self.vt = 0;
            self.corr.colored_by_dissemination();
        }
    }

    fn on_message(&mut self, cx: &Ctx<'_, TreeShared>, from: Rank, msg: &TreeMsg<C>) {
        let s = cx.shared;
        match msg {
            TreeMsg::Tree { vt } => {
                if self.tree_received {
                    return;
                }
                self.tree_received = true;
                // Counted time: the send started at `vt`, so we hold it at vt + 2o + L.
                self.vt = Time::from(*vt) + s.logp.hop();
                // Colored by dissemination: a participant, unless a correction message came
                // first (then it stays a c-node; see `TreeMsg::Corr` for early corrections).
                self.corr.colored_by_dissemination();
            }
            TreeMsg::Corr(c) => {
                let colored = self.corr.on_message(&s.corr, cx.rank, cx.n, cx.now, from, c);
                // An early correction (§3.3): forward the tree as a tree message would have.
                if colored
                    && !self.tree_received
                    && s.start == Start::Overlapped
                    && !matches!(s.corr.kind, Correction::FailProof { .. })
                {
                    self.tree_received = true;
                    self.vt = s.arrival.get(cx.rank as usize).copied().unwrap_or(0);
                }
            }
        }
    }

    fn poll_send(&mut self, cx: &Ctx<'_, TreeShared>, _rng: &mut ProtoRng) -> Action<TreeMsg<C>> {
        let s = cx.shared;
        if self.tree_received && !self.tree_sent {
            let children = s.tree.children(cx.rank);
            if let Some(&child) = children.get(self.next_child as usize) {
                self.next_child += 1;
                let vt = self.vt;
                self.vt += s.logp.slot();
                return Action::Send {
                    to: child,
                    msg: TreeMsg::Tree { vt: vtime(vt) },
                };
            }
            if self.corr.is_participant() {
                if s.start == Start::Synchronized && self.vt < s.sync_at {
                    let wait = s.sync_at - self.vt;
                    self.vt = s.sync_at;
                    return Action::Sleep(wait);
                }
                self.corr.start(&s.corr, cx.n, cx.now);
            }
            // Every child served and correction started: later polls skip the tree.
            self.tree_sent = true;
        }
        self.corr.poll(&s.corr, cx.rank, cx.n).map(TreeMsg::Corr)
    }

    fn on_timer(&mut self, cx: &Ctx<'_, TreeShared>) {
        self.corr.on_timer(&cx.shared.corr, cx.rank, cx.n, cx.now);
    }

    fn next_timer(&self) -> Option<Time> {
        self.corr.next_timer()
    }

    fn delivered(&self) -> bool {
        self.corr.delivered()
    }

    fn colored_by_dissemination(&self) -> bool {
        self.corr.is_participant()
    }

    fn finished(&self, cx: &Ctx<'_, TreeShared>) -> bool {
        let children = cx.shared.tree.children(cx.rank).len() as u32;
        let tree_done = !self.tree_received || self.next_child >= children;
        tree_done && self.corr.finished()
    }
}

#[cfg(test)]
mod tests;
