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
    /// `logp.slot()` (issue 16: the real per-hop time, so the synchronized start is the
    /// moment dissemination really ends).
    pub logp: LogGP,
    /// The correction algorithm and its timing parameters.
    pub corr: CorrParams,
    /// Synchronized or overlapped correction start.
    pub start: Start,
    /// The tree's fault-free dissemination latency: the synchronized correction start.
    pub sync_at: Time,
}

impl TreeShared {
    /// Builds the shared configuration; delays not given are derived from the model.
    pub fn new(tree: Tree, logp: impl Into<LogGP>, correction: Correction, start: Start) -> Self {
        let logp: LogGP = logp.into();
        let sync_at = tree.dissemination_latency(logp);
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
        let corr = CorrParams {
            kind: correction,
            first: Dir::Bwd,
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
#[derive(Clone, Debug)]
pub struct CorrectedTree<const C: usize> {
    /// A tree message arrived (or this is the root): children are owed a message.
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
                // An early correction message may have colored us already (overlapped
                // start): then we still forward down the tree but do not correct (§3.3).
                self.corr.colored_by_dissemination();
            }
            TreeMsg::Corr(c) => {
                self.corr.on_message(&s.corr, cx.rank, cx.n, cx.now, from, c);
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
mod tests {
    use super::*;
    use crate::model::LogP;
    use crate::protocol::bcast::correction::FAILPROOF_CAP;
    use crate::sim::{DeadBefore, Engine, Faults, RunStats};
    use crate::topology::{Order, TreeKind};

    #[allow(clippy::too_many_arguments)]
    fn run(
        kind: TreeKind,
        order: Order,
        n: u32,
        logp: LogP,
        c: Correction,
        start: Start,
        faults: &Faults,
        seed: u64,
    ) -> RunStats {
        let tree = Tree::build(kind, order, n, logp).unwrap();
        let shared = TreeShared::new(tree, logp, c, start);
        let s = match c {
            Correction::FailProof { .. } => {
                Engine::<CorrectedTree<FAILPROOF_CAP>>::new(n, logp).run(&shared, faults, seed, 100_000_000)
            }
            _ => Engine::<CorrectedTree<0>>::new(n, logp).run(&shared, faults, seed, 100_000_000),
        };
        assert!(!s.aborted, "n={n} {c:?} seed={seed}: aborted at the event cap");
        s
    }

    fn dead(k: u32) -> Faults {
        Faults {
            before: DeadBefore::Count(k),
            ..Faults::default()
        }
    }

    const TREES: [TreeKind; 5] = [
        TreeKind::Binomial,
        TreeKind::Lame(2),
        TreeKind::Optimal,
        TreeKind::Kary(2),
        TreeKind::Kary(4),
    ];

    /// Corrected Trees Lemma 2 and Corollary 1, exactly, for L divisible by o.
    #[test]
    fn lemma2_and_corollary1_fault_free_synchronized_checked() {
        for (l, o) in [(1, 1), (2, 1), (3, 1), (5, 1), (4, 2), (6, 3), (0, 1)] {
            let logp = LogP { l, o };
            let lff = 4 * o + l + (l / o) * o;
            let mscc = 3 + l / o;
            for kind in TREES {
                for n in [16, 1000, 4096] {
                    let s = run(
                        kind,
                        Order::Interleaved,
                        n,
                        logp,
                        Correction::Checked,
                        Start::Synchronized,
                        &dead(0),
                        1,
                    );
                    let d = Tree::build(kind, Order::Interleaved, n, logp)
                        .unwrap()
                        .dissemination_latency(logp);
                    assert_eq!(s.uncolored_live, 0);
                    assert_eq!(s.coloring, d, "{kind:?} n={n} L={l} o={o}");
                    assert_eq!(s.correction, lff, "{kind:?} n={n} L={l} o={o}");
                    assert_eq!(s.quiescence, d + lff);
                    assert_eq!(
                        s.messages - u64::from(n - 1),
                        u64::from(n) * mscc,
                        "{kind:?} n={n} L={l} o={o}"
                    );
                    assert_eq!(s.gmax, 0);
                }
            }
        }
    }

    /// Lemma 3: L_FF + g_max·o <= L_SCC <= L_FF + (2·g_max + 1)·o, and every live process is
    /// colored, whatever the faults before the operation.
    #[test]
    fn lemma3_bounds_and_full_coloring_under_faults() {
        let logp = LogP { l: 2, o: 1 };
        let lff = 8;
        for kind in TREES {
            for seed in 0..40 {
                let s = run(
                    kind,
                    Order::Interleaved,
                    4096,
                    logp,
                    Correction::Checked,
                    Start::Synchronized,
                    &dead(41 + seed as u32),
                    seed,
                );
                assert_eq!(s.uncolored_live, 0, "{kind:?} seed {seed}");
                let g = u64::from(s.gmax);
                assert!(s.correction >= lff + g * logp.o, "{kind:?} seed {seed}: {s:?}");
                assert!(
                    s.correction <= lff + (2 * g + 1) * logp.o,
                    "{kind:?} seed {seed}: {s:?}"
                );
            }
        }
    }

    #[test]
    fn checked_correction_colors_everyone_with_many_faults_in_any_mode() {
        let logp = LogP { l: 2, o: 1 };
        for order in [Order::Interleaved, Order::InOrder] {
            for start in [Start::Synchronized, Start::Overlapped] {
                for seed in 0..20 {
                    let s = run(
                        TreeKind::Binomial,
                        order,
                        2000,
                        logp,
                        Correction::Checked,
                        start,
                        &dead(200),
                        seed,
                    );
                    assert_eq!(s.uncolored_live, 0, "{order:?} {start:?} seed {seed}");
                }
            }
        }
    }

    /// §3.2.1: opportunistic correction with d >= k on a k-ary tree tolerates k - 1 failures.
    #[test]
    fn kary_opportunistic_tolerates_k_minus_one_failures() {
        let logp = LogP { l: 2, o: 1 };
        for k in [2u32, 3, 4] {
            for seed in 0..200 {
                for start in [Start::Synchronized, Start::Overlapped] {
                    let s = run(
                        TreeKind::Kary(k),
                        Order::Interleaved,
                        500,
                        logp,
                        Correction::Opportunistic { d: k },
                        start,
                        &dead(k - 1),
                        seed,
                    );
                    assert_eq!(s.uncolored_live, 0, "k={k} seed={seed} {start:?}");
                }
            }
        }
        // ... and the guarantee is not vacuous: killing all the root's children leaves holes.
        let tree = Tree::build(TreeKind::Kary(2), Order::Interleaved, 500, logp).unwrap();
        let f = Faults {
            before: DeadBefore::List(tree.children(0).to_vec()),
            ..Faults::default()
        };
        let s = run(
            TreeKind::Kary(2),
            Order::Interleaved,
            500,
            logp,
            Correction::Opportunistic { d: 2 },
            Start::Synchronized,
            &f,
            0,
        );
        assert!(s.uncolored_live > 0);
    }

    #[test]
    fn optimized_opportunistic_sends_no_more_than_opportunistic_and_colors_all() {
        let logp = LogP { l: 2, o: 1 };
        for seed in 0..30 {
            let a = run(
                TreeKind::Binomial,
                Order::Interleaved,
                4096,
                logp,
                Correction::Opportunistic { d: 4 },
                Start::Overlapped,
                &dead(8),
                seed,
            );
            let b = run(
                TreeKind::Binomial,
                Order::Interleaved,
                4096,
                logp,
                Correction::Optimized { d: 4 },
                Start::Overlapped,
                &dead(8),
                seed,
            );
            assert!(b.messages <= a.messages, "seed {seed}: {} > {}", b.messages, a.messages);
            assert_eq!(a.uncolored_live, 0);
            assert_eq!(b.uncolored_live, 0, "seed {seed}");
        }
        let ff = run(
            TreeKind::Binomial,
            Order::Interleaved,
            4096,
            logp,
            Correction::Optimized { d: 4 },
            Start::Overlapped,
            &dead(0),
            0,
        );
        let plain = run(
            TreeKind::Binomial,
            Order::Interleaved,
            4096,
            logp,
            Correction::Opportunistic { d: 4 },
            Start::Overlapped,
            &dead(0),
            0,
        );
        assert!(
            ff.messages < plain.messages,
            "the optimization saves messages fault-free"
        );
    }

    #[test]
    fn delayed_correction_sends_one_message_fault_free_and_still_colors_all() {
        let logp = LogP { l: 2, o: 1 };
        let s = run(
            TreeKind::Binomial,
            Order::Interleaved,
            1024,
            logp,
            Correction::Delayed { delay: None },
            Start::Synchronized,
            &dead(0),
            0,
        );
        assert_eq!(s.messages, 1023 + 1024);
        // Overlapped: early correction messages turn some processes into c-nodes that do not
        // participate (§3.3), so their left neighbours search: more messages, same coloring.
        for start in [Start::Synchronized, Start::Overlapped] {
            for seed in 0..30 {
                let s = run(
                    TreeKind::Binomial,
                    Order::Interleaved,
                    1024,
                    logp,
                    Correction::Delayed { delay: None },
                    start,
                    &dead(20),
                    seed,
                );
                assert_eq!(s.uncolored_live, 0, "{start:?} seed {seed}");
            }
        }
    }

    /// FCG's correction on trees keeps its guarantee with up to f failures during the run.
    #[test]
    fn failproof_survives_online_failures() {
        let logp = LogP { l: 2, o: 1 };
        let n = 1024;
        let horizon = Tree::build(TreeKind::Binomial, Order::Interleaved, n, logp)
            .unwrap()
            .dissemination_latency(logp)
            + 30;
        for f in [1u32, 2] {
            for seed in 0..40 {
                let faults = Faults {
                    before: DeadBefore::Count(10),
                    online: f,
                    online_horizon: horizon,
                    ..Faults::default()
                };
                let s = run(
                    TreeKind::Binomial,
                    Order::Interleaved,
                    n,
                    logp,
                    Correction::FailProof { f },
                    Start::Synchronized,
                    &faults,
                    seed,
                );
                assert_eq!(s.uncolored_live, 0, "f={f} seed={seed}");
                assert!(!s.aborted);
            }
        }
    }

    #[test]
    fn interleaving_keeps_gaps_small() {
        let logp = LogP { l: 2, o: 1 };
        let (mut gi, mut go) = (0, 0);
        for seed in 0..20 {
            gi += run(
                TreeKind::Binomial,
                Order::Interleaved,
                4096,
                logp,
                Correction::Checked,
                Start::Synchronized,
                &dead(5),
                seed,
            )
            .gmax;
            go += run(
                TreeKind::Binomial,
                Order::InOrder,
                4096,
                logp,
                Correction::Checked,
                Start::Synchronized,
                &dead(5),
                seed,
            )
            .gmax;
        }
        assert!(go > 4 * gi, "in-order {go} vs interleaved {gi}");
    }
}
