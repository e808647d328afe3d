//! Tree broadcast with acknowledgments, the traditional baseline of Corrected Trees §4.1
//! (Figure 6, dashed line; used among others by Buntinas): the payload goes down the tree,
//! children in send order, then each process acknowledges to its parent once all its children
//! have acknowledged (leaves at once). There is no failure handling — that is the point of the
//! baseline: with a dead process the root never completes and the dead process's descendants
//! stay uncolored. Fault-free it sends `2(P − 1)` messages.

use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};
use crate::topology::Tree;

/// Configuration shared by all processes of a tree broadcast with acknowledgments.
#[derive(Debug)]
pub struct TreeAckShared {
    /// The dissemination tree (root 0).
    pub tree: Tree,
}

impl TreeAckShared {
    /// A broadcast along `tree` with acknowledgments back up the same tree.
    pub fn new(tree: Tree) -> Self {
        Self { tree }
    }
}

impl SharedInfo for TreeAckShared {}

/// A tree-with-acknowledgments message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeAckMsg {
    /// The payload, from a parent to a child.
    Tree,
    /// "My whole subtree has the payload", from a child to its parent.
    Ack,
}

impl Message for TreeAckMsg {
    fn phase(&self) -> Phase {
        match self {
            TreeAckMsg::Tree => Phase::Dissemination,
            TreeAckMsg::Ack => Phase::Control,
        }
    }
    fn label(&self) -> &'static str {
        match self {
            TreeAckMsg::Tree => "tree",
            TreeAckMsg::Ack => "ack",
        }
    }
}

/// One process of a tree broadcast with acknowledgments.
#[derive(Clone, Debug)]
pub struct TreeAck {
    /// The payload has arrived (or this is the root).
    received: bool,
    /// Next child index to send the payload to.
    next_child: u32,
    /// One bit per child index: its acknowledgment has arrived (duplicates count once).
    /// Children 0..64 here, the rest (only wide k-ary trees have them) in `acked_more`.
    acked: u64,
    acked_more: Vec<u64>,
    /// Children whose acknowledgment has arrived.
    acks: u32,
    /// This process has acknowledged to its parent (never set at the root).
    ack_sent: bool,
}

impl TreeAck {
    /// Has the whole tree acknowledged? Only the root can tell; `false` elsewhere.
    pub fn complete(&self, cx: &Ctx<'_, TreeAckShared>) -> bool {
        cx.rank == 0 && self.received && self.subtree_done(cx)
    }

    /// All children have been sent the payload and have acknowledged.
    fn subtree_done(&self, cx: &Ctx<'_, TreeAckShared>) -> bool {
        let k = cx.shared.tree.children(cx.rank).len() as u32;
        self.next_child >= k && self.acks >= k
    }
}

impl Protocol for TreeAck {
    type Shared = TreeAckShared;
    type Msg = TreeAckMsg;

    fn new(cx: &Ctx<'_, TreeAckShared>) -> Self {
        let k = cx.shared.tree.children(cx.rank).len();
        Self {
            received: false,
            next_child: 0,
            acked: 0,
            acked_more: vec![0; k.saturating_sub(64).div_ceil(64)],
            acks: 0,
            ack_sent: false,
        }
    }

    fn start(&mut self, cx: &Ctx<'_, TreeAckShared>) {
        if cx.rank == 0 {
            self.received = true;
        }
    }

    fn on_message(&mut self, cx: &Ctx<'_, TreeAckShared>, from: Rank, msg: &TreeAckMsg) {
        match msg {
            TreeAckMsg::Tree => self.received = true,
            TreeAckMsg::Ack => {
                // Only a child's first acknowledgment counts.
                let children = cx.shared.tree.children(cx.rank);
                // Children are normally in increasing rank order; search linearly otherwise.
                let found = children.binary_search(&from).ok();
                let Some(i) = found.or_else(|| children.iter().position(|&c| c == from)) else {
                    return;
                };
                let word = match i {
                    0..64 => Some(&mut self.acked),
                    _ => self.acked_more.get_mut(i / 64 - 1),
                };
                if let Some(word) = word {
                    let bit = 1u64 << (i % 64);
                    if *word & bit == 0 {
                        *word |= bit;
                        self.acks += 1;
                    }
                }
            }
        }
    }

    fn poll_send(&mut self, cx: &Ctx<'_, TreeAckShared>, _rng: &mut ProtoRng) -> Action<TreeAckMsg> {
        if !self.received {
            return Action::Wait;
        }
        let tree = &cx.shared.tree;
        if let Some(&child) = tree.children(cx.rank).get(self.next_child as usize) {
            self.next_child += 1;
            return Action::Send {
                to: child,
                msg: TreeAckMsg::Tree,
            };
        }
        match tree.parent(cx.rank) {
            Some(parent) if !self.ack_sent && self.subtree_done(cx) => {
                self.ack_sent = true;
                Action::Send {
                    to: parent,
                    msg: TreeAckMsg::Ack,
                }
            }
            _ => Action::Wait,
        }
    }

    fn delivered(&self) -> bool {
        self.received
    }

    fn colored_by_dissemination(&self) -> bool {
        self.received
    }

    fn finished(&self, cx: &Ctx<'_, TreeAckShared>) -> bool {
        self.ack_sent || self.complete(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LogP, Time};
    use crate::sim::{DeadBefore, Engine, Faults, RunStats};
    use crate::topology::{Order, TreeKind};

    const TREES: [TreeKind; 7] = [
        TreeKind::Binomial,
        TreeKind::Lame(2),
        TreeKind::Optimal,
        TreeKind::Kary(1),
        TreeKind::Kary(2),
        TreeKind::Kary(4),
        TreeKind::Kary(150),
    ];

    fn run_on(tree: &Tree, logp: LogP, faults: &Faults) -> (RunStats, Engine<TreeAck>) {
        let n = tree.len();
        let shared = TreeAckShared::new(tree.clone());
        let mut e = Engine::<TreeAck>::new(n, logp);
        let s = e.run(&shared, faults, 1, 100_000_000);
        assert!(!s.aborted, "n={n}: aborted at the event cap");
        (s, e)
    }

    /// The fault-free LogP schedule, derived by hand: a process colored at `a` sends to its
    /// children at `a, a + o, …` (free at `a + k·o`); an acknowledgment sent at `s` arrives at
    /// `s + o + L` and is received for `o` in arrival order; a process acknowledges when its
    /// sender is free and its last child's acknowledgment has been received. Returns the time
    /// the root has received every acknowledgment.
    fn reference_completion(tree: &Tree, logp: LogP) -> Time {
        let arrival = tree.arrival_times(logp);
        let n = tree.len() as usize;
        // `ready[r]`: r's acknowledgment send starts (root: all acknowledgments received).
        let mut ready = vec![0; n];
        // Children outrank parents: reverse rank order visits children first.
        for r in (0..n).rev() {
            let children = tree.children(r as u32);
            let mut at: Vec<Time> = children.iter().map(|&c| ready[c as usize] + logp.o + logp.l).collect();
            at.sort_unstable();
            let mut free = arrival[r]; // the payload's receive ended at `arrival[r]`
            for a in at {
                free = free.max(a) + logp.o;
            }
            ready[r] = free.max(arrival[r] + logp.o * children.len() as Time);
        }
        ready[0]
    }

    #[test]
    fn fault_free_two_messages_per_process_and_exact_latency() {
        for (l, o) in [(2, 1), (0, 1), (1, 1), (5, 1), (4, 2)] {
            let logp = LogP { l, o };
            for kind in TREES {
                for order in [Order::Interleaved, Order::InOrder] {
                    for n in [1u32, 2, 3, 7, 16, 100, 1000] {
                        let tree = Tree::build(kind, order, n, logp).unwrap();
                        let (s, e) = run_on(&tree, logp, &Faults::default());
                        let what = format!("{kind:?} {order:?} n={n} L={l} o={o}");
                        assert_eq!(s.uncolored_live, 0, "{what}");
                        assert_eq!(s.messages, 2 * u64::from(n - 1), "{what}");
                        assert_eq!(s.coloring, tree.dissemination_latency(logp), "{what}");
                        assert_eq!(s.quiescence, reference_completion(&tree, logp), "{what}");
                        let cx = Ctx {
                            rank: 0,
                            n,
                            now: 0,
                            shared: &TreeAckShared::new(tree.clone()),
                        };
                        assert!(e.node(0).complete(&cx), "{what}");
                        assert!((0..n).all(|r| e.node(r).finished(&Ctx { rank: r, ..cx })), "{what}");
                    }
                }
            }
        }
    }

    /// Binomial tree over `P = 2^k` with `2o + L >= 2o`: down in `k(2o + L)`, up in the same
    /// (the first child's subtree is the last to acknowledge), so `2k(2o + L)` in total.
    #[test]
    fn fault_free_binomial_latency_closed_form() {
        for (l, o) in [(2, 1), (0, 1), (5, 1), (4, 2)] {
            let logp = LogP { l, o };
            for k in 0..=12u32 {
                let n = 1u32 << k;
                let tree = Tree::build(TreeKind::Binomial, Order::InOrder, n, logp).unwrap();
                let (s, _) = run_on(&tree, logp, &Faults::default());
                assert_eq!(s.coloring, Time::from(k) * logp.hop(), "n={n} L={l} o={o}");
                assert_eq!(s.quiescence, 2 * Time::from(k) * logp.hop(), "n={n} L={l} o={o}");
            }
        }
    }

    #[test]
    fn dead_inner_node_leaves_its_descendants_uncolored_and_root_incomplete() {
        let logp = LogP::default();
        for kind in TREES {
            let n = 200;
            let tree = Tree::build(kind, Order::Interleaved, n, logp).unwrap();
            let dead = tree.children(0)[0];
            let mut descendants = 0u32;
            for r in 1..n {
                let mut a = r;
                while let Some(p) = tree.parent(a) {
                    if p == dead {
                        descendants += 1;
                        break;
                    }
                    a = p;
                }
            }
            assert!(descendants > 0, "{kind:?}");
            let faults = Faults {
                before: DeadBefore::List(vec![dead]),
                ..Faults::default()
            };
            let (s, e) = run_on(&tree, logp, &faults);
            assert_eq!(s.uncolored_live, descendants, "{kind:?}");
            let cx = Ctx {
                rank: 0,
                n,
                now: 0,
                shared: &TreeAckShared::new(tree.clone()),
            };
            assert!(!e.node(0).complete(&cx), "{kind:?}");
            assert!(!e.node(0).finished(&cx), "{kind:?}");
        }
    }

    /// A root with 150 children counts each child's acknowledgment once, however often sent.
    #[test]
    fn wide_node_counts_each_child_once() {
        let logp = LogP::default();
        let n = 151;
        let shared = TreeAckShared::new(Tree::build(TreeKind::Kary(150), Order::Interleaved, n, logp).unwrap());
        let cx = Ctx {
            rank: 0,
            n,
            now: 0,
            shared: &shared,
        };
        let mut rng = ProtoRng::new(1);
        let mut root = TreeAck::new(&cx);
        root.start(&cx);
        while let Action::Send { .. } = root.poll_send(&cx, &mut rng) {}
        for c in (1..n).rev() {
            assert!(!root.complete(&cx));
            root.on_message(&cx, c, &TreeAckMsg::Ack);
            root.on_message(&cx, c, &TreeAckMsg::Ack);
        }
        assert!(root.complete(&cx));
        for c in 1..n {
            root.on_message(&cx, c, &TreeAckMsg::Ack);
        }
        assert_eq!(root.acks, n - 1);
    }

    #[test]
    fn duplicate_and_foreign_messages_are_harmless() {
        let logp = LogP::default();
        let tree = Tree::build(TreeKind::Binomial, Order::InOrder, 8, logp).unwrap();
        let shared = TreeAckShared::new(tree);
        let children = shared.tree.children(0).to_vec();
        let cx = Ctx {
            rank: 0,
            n: 8,
            now: 0,
            shared: &shared,
        };
        let mut rng = ProtoRng::new(1);
        let mut root = TreeAck::new(&cx);
        root.start(&cx);
        // Acknowledgments from strangers, duplicates and out-of-range ranks count for nothing.
        let stranger = (1..8).find(|r| !children.contains(r)).unwrap();
        for from in [children[0], children[0], stranger, 99, u32::MAX] {
            root.on_message(&cx, from, &TreeAckMsg::Ack);
        }
        root.on_message(&cx, 5, &TreeAckMsg::Tree);
        assert_eq!(root.acks, 1);
        for &c in &children {
            assert_eq!(
                root.poll_send(&cx, &mut rng),
                Action::Send {
                    to: c,
                    msg: TreeAckMsg::Tree
                }
            );
        }
        for &c in &children {
            root.on_message(&cx, c, &TreeAckMsg::Ack);
        }
        assert!(root.complete(&cx));
        assert_eq!(root.poll_send(&cx, &mut rng), Action::Wait);
        // A process that never got the payload acknowledges nothing, whatever it receives.
        let leaf = (1..8).find(|&r| shared.tree.children(r).is_empty()).unwrap();
        let lcx = Ctx { rank: leaf, ..cx };
        let mut p = TreeAck::new(&lcx);
        p.start(&lcx);
        p.on_message(&lcx, 0, &TreeAckMsg::Ack);
        assert_eq!(p.poll_send(&lcx, &mut rng), Action::Wait);
        p.on_message(&lcx, 0, &TreeAckMsg::Tree);
        p.on_message(&lcx, 0, &TreeAckMsg::Tree);
        let parent = shared.tree.parent(leaf).unwrap();
        assert_eq!(
            p.poll_send(&lcx, &mut rng),
            Action::Send {
                to: parent,
                msg: TreeAckMsg::Ack
            }
        );
        assert_eq!(p.poll_send(&lcx, &mut rng), Action::Wait);
        assert!(p.finished(&lcx));
    }
}
