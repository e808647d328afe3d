//! One process of the self-stabilizing BMG overlay (BMG paper §3): Algorithm 1
//! ([`TreeToRing`]) and Algorithm 2 ([`RingToBmg`]) composed, as §4 runs them, with §4's
//! quiet mode and a periodic refresh.
//!
//! Self-stabilizing algorithms never stop (§4): a process could start in a state where it
//! believes its work is done. As in §4 a process goes quiet (its spontaneous rules stop, it
//! still reacts to messages) once its local state is correct as far as it can tell: `Succ` and
//! `Pred` assigned by their rules (rule 1 or 6, rules 2, 4 or 5) and Algorithm 2's rule 1 run
//! with both. §4 decides this with the simulator's global knowledge; here it is local, and
//! what stands in for §4's timers is a refresh: a quiet process still runs its spontaneous
//! rules every `refresh` phases, so the fair scheduler of §3.1 (and with it convergence from
//! any state) is kept. A rule that overwrites `Succ`, `Pred` or level 0 with another value,
//! and any suspected failure, wakes the process up.

use super::ring_to_bmg::{BmgMsg, RingToBmg, levels};
use super::tree_to_ring::{RingMsg, TreeToRing};
use super::{Guarded, Outbox};
use crate::protocol::{ProtoRng, Rank};
use crate::topology::launch_tree::LaunchTree;
use crate::topology::ring::{backward, forward};

/// The overlay's messages: Algorithm 1's and Algorithm 2's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlayMsg {
    Ring(RingMsg),
    Bmg(BmgMsg),
}

/// One process running Algorithms 1 and 2.
#[derive(Clone, Debug)]
pub struct BmgOverlay {
    pub ring: TreeToRing,
    pub bmg: RingToBmg,
    /// Identifiers are `0..ids` (the ring may be smaller once processes crashed).
    ids: u32,
    quiet: bool,
    succ_ok: bool,
    pred_ok: bool,
    level0_sent: bool,
    refresh: u32,
    since: u32,
    dropped: u64,
    scratch_ring: Outbox<RingMsg>,
    scratch_bmg: Outbox<BmgMsg>,
}

impl BmgOverlay {
    /// Process `id` of `n` with its launch-tree constants, all outputs `⊥` (§4's start).
    /// A quiet process re-runs its spontaneous rules every `refresh` phases (at least 1).
    pub fn new(id: Rank, n: u32, parent: Option<Rank>, children: Vec<Rank>, refresh: u32) -> Self {
        Self {
            ring: TreeToRing::new(id, parent, children),
            bmg: RingToBmg::new(n),
            ids: n,
            quiet: false,
            succ_ok: false,
            pred_ok: false,
            level0_sent: false,
            refresh: refresh.max(1),
            since: 0,
            dropped: 0,
            scratch_ring: Vec::new(),
            scratch_bmg: Vec::new(),
        }
    }

    /// Process `id` of the launch tree `t`.
    pub fn from_tree(t: &LaunchTree, id: Rank, refresh: u32) -> Self {
        Self::new(id, t.len(), t.parent(id), t.children(id).to_vec(), refresh)
    }

    /// New tree constants and ring size after a crash was repaired (the dead process's
    /// children re-attached to its parent, `N` one less): the outputs are kept, now an
    /// arbitrary state for the new tree, from which the algorithms converge again (§3.1:
    /// a permanent crash is, for the survivors, a transient fault plus a topology change).
    /// `Succ` and `Pred` are kept (only the dead process's ring neighbours change); the finger
    /// tables are emptied, since with a new `N` most of their entries move, and a build from
    /// `⊥` is monotone where repairing wrong entries sets off introductions level after
    /// level. The process wakes up.
    pub fn reattach(&mut self, parent: Option<Rank>, children: Vec<Rank>, n: u32) {
        self.ring.parent = parent;
        self.ring.children = children;
        self.bmg = RingToBmg::new(n);
        self.pred_ok = false;
        self.succ_ok = false;
        self.wake();
    }

    /// Messages dropped as invalid (an identifier or level out of range): never trusted.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// An arbitrary state (a transient fault, §3.1): every output and every flag of the quiet
    /// mode drawn at random, identifiers `⊥` or any process. The tree constants stay (§3.3.1).
    pub fn corrupt(&mut self, rng: &mut ProtoRng) {
        let n = self.ids;
        let any = |rng: &mut ProtoRng| {
            let x = rng.below(n + 1);
            (x < n).then_some(x)
        };
        self.ring.succ = any(rng);
        self.ring.pred = any(rng);
        for k in 0..self.bmg.cw.len() {
            self.bmg.cw[k] = any(rng);
            self.bmg.ccw[k] = any(rng);
        }
        let bits = rng.next_u64();
        self.quiet = bits & 1 == 1;
        self.succ_ok = bits & 2 == 2;
        self.pred_ok = bits & 4 == 4;
        self.level0_sent = bits & 8 == 8;
        self.since = (bits >> 8) as u32 % self.refresh;
    }

    /// Alone in the system: no ring to build.
    fn alone(&self) -> bool {
        self.ring.parent.is_none() && self.ring.children.is_empty()
    }

    /// An inconsistency: run the spontaneous rules again from the next phase on.
    fn wake(&mut self) {
        self.quiet = false;
        self.level0_sent = false;
    }

    fn settle(&mut self) {
        if self.succ_ok && self.pred_ok && self.level0_sent {
            self.quiet = true;
        }
    }

    fn flush(&mut self, out: &mut Outbox<OverlayMsg>) {
        out.extend(self.scratch_ring.drain(..).map(|(to, m)| (to, OverlayMsg::Ring(m))));
        out.extend(self.scratch_bmg.drain(..).map(|(to, m)| (to, OverlayMsg::Bmg(m))));
    }

    /// Is a received message well formed for a system of `n` processes?
    fn valid(&self, from: Rank, msg: &OverlayMsg) -> bool {
        let ids = self.ids;
        from < ids
            && match *msg {
                OverlayMsg::Ring(m) => m.ident() < ids,
                // No rule sends level 0 (Algorithm 2 introduces from level 1 on; level 0 is
                // the ring's, set by Algorithm 1): a level-0 message is corrupted, and taken
                // it would overwrite `CW[0]`/`CCW[0]` of a quiet process without waking it.
                OverlayMsg::Bmg(BmgMsg::Up { ident, hop } | BmgMsg::Dn { ident, hop }) => {
                    ident < ids && hop >= 1 && usize::from(hop) < self.bmg.cw.len()
                }
            }
    }
}

impl Guarded for BmgOverlay {
    type Msg = OverlayMsg;

    fn spontaneous_due(&self) -> bool {
        !self.alone() && (!self.quiet || self.since >= self.refresh)
    }

    fn spontaneous(&mut self, out: &mut Outbox<OverlayMsg>) {
        self.since = 0;
        let a = self.ring.spontaneous(&mut self.scratch_ring);
        let mut changed = a.changed;
        self.succ_ok |= a.succ;
        changed |= self
            .bmg
            .spontaneous(self.ring.pred, self.ring.succ, &mut self.scratch_bmg);
        if changed {
            self.quiet = false;
        }
        self.level0_sent = self.ring.pred.is_some() && self.ring.succ.is_some();
        self.settle();
        self.flush(out);
    }

    fn on_message(&mut self, from: Rank, msg: OverlayMsg, out: &mut Outbox<OverlayMsg>) {
        if !self.valid(from, &msg) {
            self.dropped += 1;
            return;
        }
        match msg {
            OverlayMsg::Ring(m) => {
                let a = self.ring.on_message(from, m, &mut self.scratch_ring);
                if a.changed {
                    self.wake();
                }
                self.succ_ok |= a.succ;
                self.pred_ok |= a.pred;
            }
            // An overwritten finger entry does not wake the process: the introduction that
            // overwrote it goes on up the levels by itself, and the refresh repairs the rest.
            // Waking on it feeds back (every wake re-introduces every level) into a storm of
            // introductions from a corrupted state.
            OverlayMsg::Bmg(m) => {
                self.bmg.on_message(m, &mut self.scratch_bmg);
            }
        }
        self.settle();
        self.flush(out);
    }

    fn on_phase(&mut self) {
        self.since = self.since.saturating_add(1);
    }

    fn on_suspect(&mut self, _peer: Rank) {
        self.wake();
    }

    fn quiet(&self) -> bool {
        self.quiet || self.alone()
    }
}

/// The legitimate configuration for a launch tree: the ring of Algorithm 1 (Definition 3.2
/// and A.4: the tree's preorder, closed by the root) and the BMG over it (Definition A.5,
/// `l1`: `CW_{p_a}[k] = p_{a+2^k}`, `CCW_{p_a}[k] = p_{a-2^k}` for every level `2^k < N`).
#[derive(Clone, Debug)]
pub struct Legitimate {
    order: Vec<Rank>,
    pos: Vec<u32>,
}

impl Legitimate {
    /// The target of the launch tree `t`.
    pub fn new(t: &LaunchTree) -> Self {
        let order = t.ring_order();
        let mut pos = vec![0u32; t.len() as usize];
        for (i, &p) in order.iter().enumerate() {
            pos[p as usize] = i as u32;
        }
        Self { order, pos }
    }

    /// The process at ring position `i` (`p_i`, `p_0` the tree's root).
    pub fn at(&self, i: u32) -> Rank {
        self.order[i as usize]
    }

    /// Ring position of process `p`.
    pub fn position(&self, p: Rank) -> u32 {
        self.pos[p as usize]
    }

    /// Are `p`'s `Succ` and `Pred` those of the legitimate ring?
    pub fn ring_ok(&self, p: &BmgOverlay) -> bool {
        let n = self.order.len() as u32;
        if n == 1 {
            return true;
        }
        let a = self.pos[p.ring.id as usize];
        p.ring.succ == Some(self.at(forward(a, 1, n))) && p.ring.pred == Some(self.at(backward(a, 1, n)))
    }

    /// Are `p`'s finger tables those of the BMG over the legitimate ring?
    pub fn bmg_ok(&self, p: &BmgOverlay) -> bool {
        let n = self.order.len() as u32;
        let a = self.pos[p.ring.id as usize];
        (0..levels(n)).all(|k| {
            p.bmg.cw[k] == Some(self.at(forward(a, 1 << k, n))) && p.bmg.ccw[k] == Some(self.at(backward(a, 1 << k, n)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::binomial_graph::neighbors;
    use crate::topology::launch_tree::LaunchShape;

    #[test]
    fn invalid_messages_are_dropped_and_counted() {
        let mut p = BmgOverlay::new(1, 4, Some(0), vec![], 8);
        let mut out = Vec::new();
        p.on_message(9, OverlayMsg::Ring(RingMsg::BConnect(2)), &mut out);
        p.on_message(0, OverlayMsg::Ring(RingMsg::BConnect(4)), &mut out);
        p.on_message(0, OverlayMsg::Bmg(BmgMsg::Up { ident: 2, hop: 3 }), &mut out);
        assert_eq!(p.dropped(), 3);
        assert_eq!(p.ring.succ, None);
        p.on_message(0, OverlayMsg::Bmg(BmgMsg::Up { ident: 2, hop: 2 }), &mut out);
        assert_eq!((p.dropped(), p.bmg.ccw[2]), (3, Some(2)));
        // Level 0 is the ring's: no rule sends it, so it is corrupted and changes nothing.
        let ccw0 = p.bmg.ccw[0];
        p.on_message(0, OverlayMsg::Bmg(BmgMsg::Up { ident: 3, hop: 0 }), &mut out);
        p.on_message(0, OverlayMsg::Bmg(BmgMsg::Dn { ident: 3, hop: 0 }), &mut out);
        assert_eq!((p.dropped(), p.bmg.ccw[0]), (5, ccw0));
    }

    #[test]
    fn quiet_after_confirmation_and_woken_by_a_change() {
        // Leaf 1 of root 0 in a 2-process tree.
        let mut p = BmgOverlay::new(1, 2, Some(0), vec![], 3);
        let mut out = Vec::new();
        assert!(p.spontaneous_due());
        p.spontaneous(&mut out);
        assert_eq!(out, [(0, OverlayMsg::Ring(RingMsg::Info(1)))]);
        out.clear();
        p.on_message(0, OverlayMsg::Ring(RingMsg::FConnect(0)), &mut out);
        p.on_message(0, OverlayMsg::Ring(RingMsg::BConnect(0)), &mut out);
        assert!(!p.quiet());
        p.spontaneous(&mut out);
        assert!(p.quiet() && !p.spontaneous_due());
        for _ in 0..3 {
            p.on_phase();
        }
        assert!(p.spontaneous_due(), "the refresh is due");
        out.clear();
        p.spontaneous(&mut out);
        assert!(p.quiet() && !out.is_empty());
        // Filling an unset entry is progress; overwriting Succ is an inconsistency.
        p.on_message(0, OverlayMsg::Bmg(BmgMsg::Up { ident: 1, hop: 1 }), &mut out);
        assert!(p.quiet());
        p.on_message(0, OverlayMsg::Ring(RingMsg::BConnect(1)), &mut out);
        assert!(!p.quiet() && p.spontaneous_due());
        p.spontaneous(&mut out);
        assert!(p.quiet());
        p.on_suspect(0);
        assert!(!p.quiet());
    }

    #[test]
    fn legitimate_bmg_is_the_topology_binomial_graph() {
        let t = LaunchTree::build(LaunchShape::Binomial { depth: 4 }, 1 << 10, &mut ProtoRng::new(1)).unwrap();
        let goal = Legitimate::new(&t);
        let n = t.len();
        for id in 0..n {
            let mut p = BmgOverlay::from_tree(&t, id, 4);
            let a = goal.position(id);
            p.ring.succ = Some(goal.at((a + 1) % n));
            p.ring.pred = Some(goal.at((a + n - 1) % n));
            for k in 0..levels(n) {
                p.bmg.cw[k] = Some(goal.at((a + (1 << k)) % n));
                p.bmg.ccw[k] = Some(goal.at((a + n - (1 << k) % n) % n));
            }
            assert!(goal.ring_ok(&p) && goal.bmg_ok(&p));
            let mut mine: Vec<u32> = (0..levels(n))
                .flat_map(|k| [p.bmg.cw[k], p.bmg.ccw[k]])
                .map(|q| goal.position(q.unwrap()))
                .collect();
            mine.sort_unstable();
            mine.dedup();
            let mut want = neighbors(a, n);
            want.sort_unstable();
            assert_eq!(mine, want);
            p.bmg.ccw[1] = Some(id);
            assert!(!goal.bmg_ok(&p));
        }
    }
}
