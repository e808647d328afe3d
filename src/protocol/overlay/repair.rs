//! Repair after a permanent crash, one implementation for the simulator
//! ([`crate::sim::bmg_build`]) and the runtime ([`crate::runtime::watch`]).
//!
//! The BMG paper's model has transient faults only (§3.1): a crashed process is one that
//! restarts in an arbitrary state, and the tree of `Parent`/`Children` constants holds every
//! process forever. A permanent crash breaks that assumption: the dead process's children and
//! its parent keep naming it, so Algorithm 1 can never close the ring. ftcoll mends the
//! launch tree as ERA mends its tree ([`LaunchTree::without`]: the dead process's children
//! take its place, in order, in its parent's list), gives every survivor its new constants
//! and the new `N` ([`BmgOverlay::reattach`]), and lets Algorithms 1 and 2 converge from the
//! state they are in — for them a transient fault plus a topology change, from which they
//! self-stabilize. The survivors learn the crash from a failure notice
//! ([`super::failure_notice`]); whoever applies the same crashes gets the same tree, in any
//! order.

use super::bmg_overlay::{BmgOverlay, Legitimate};
use crate::protocol::Rank;
use crate::topology::launch_tree::LaunchTree;

/// The launch tree mended after the crashes so far, and the legitimate overlay over it.
#[derive(Clone, Debug)]
pub struct Mended {
    tree: LaunchTree,
    live: Vec<bool>,
    goal: Legitimate,
}

impl Mended {
    /// No crash yet.
    pub fn new(t: &LaunchTree) -> Self {
        Self {
            tree: t.clone(),
            live: vec![true; t.len() as usize],
            goal: Legitimate::new(t),
        }
    }

    /// Process `dead` crashed for good: excised from the tree. Errors if it is not in the tree
    /// (already excised, unknown) or is the last process.
    pub fn excise(&mut self, dead: Rank) -> Result<(), String> {
        let t = self.tree.without(dead)?;
        self.live[dead as usize] = false;
        self.goal = Legitimate::new(&t);
        self.tree = t;
        Ok(())
    }

    /// Gives process `p` its constants in the mended tree and the survivors' count.
    pub fn reattach(&self, p: &mut BmgOverlay) {
        let id = p.ring.id;
        p.reattach(self.tree.parent(id), self.tree.children(id).to_vec(), self.survivors());
    }

    /// Processes left.
    pub fn survivors(&self) -> u32 {
        self.live.iter().filter(|&&l| l).count() as u32
    }

    /// The mended tree.
    pub fn tree(&self) -> &LaunchTree {
        &self.tree
    }

    /// The legitimate overlay over the survivors.
    pub fn goal(&self) -> &Legitimate {
        &self.goal
    }

    /// Is `p`'s state (`Succ`, `Pred`, `CW`, `CCW`) the legitimate one over the survivors?
    pub fn legitimate(&self, p: &BmgOverlay) -> bool {
        self.goal.ring_ok(p) && self.goal.bmg_ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ProtoRng;
    use crate::topology::launch_tree::LaunchShape;

    #[test]
    fn the_same_crashes_in_any_order_mend_the_same_tree() {
        let t = LaunchTree::build(LaunchShape::Binomial { depth: 5 }, 64, &mut ProtoRng::new(1)).unwrap();
        for dead in [[0u32, 1, 2], [3, 1, 0], [31, 16, 17], [2, 0, 30]] {
            let mut a = Mended::new(&t);
            let mut b = Mended::new(&t);
            for &d in &dead {
                a.excise(d).unwrap();
            }
            for &d in dead.iter().rev() {
                b.excise(d).unwrap();
            }
            assert_eq!(a.tree(), b.tree(), "{dead:?}");
            assert_eq!(a.survivors(), 29);
            let ring = a.tree().ring_order();
            assert_eq!(ring.len(), 29);
            assert!(dead.iter().all(|d| !ring.contains(d)));
            assert!(a.excise(dead[0]).is_err());
        }
    }
}
