//! Rebuilding ERA's tree once the agreed failures degenerated it (ERA §5.1, "Impact of
//! Failures"): the stabilizing agreement pays for the rebuild, a linear cost, and the
//! post-failure agreements after it return to a failure-free agreement's latency. So the
//! tree is weighed once per newly agreed failed set, not at every decision: every agreement
//! after a failure decides the same set again (the ballot carries `S_p`), and weighing it
//! anew (a fresh tree of the survivors, the mended tree's shape) cost each process O(n) per
//! agreement, the group O(n²).

use super::{Era, Rebalance};
use crate::protocol::Rank;
use crate::protocol::agree::era_tree::EraTree;
use crate::protocol::agree::slots::AgreeId;
use crate::protocol::agree::value::{Ballot, Value};

impl<V: Value> Era<V> {
    /// After agreement `id` decided `v`: starts a new epoch with a tree of the survivors from
    /// `id + 1` if [`EraConfig::rebalance`](super::EraConfig::rebalance) asks for it for the
    /// failures `v` agreed on (only with a window of 1, where every process switches at the
    /// same agreement). A decided failed set already weighed against the current tree changes
    /// nothing and is not weighed again.
    pub(super) fn rebalance(&mut self, id: AgreeId, v: &Ballot<V>) {
        // Failure-free: no failure agreed, nothing to weigh.
        if v.failed.is_empty() || self.cfg.rebalance == Rebalance::Off || self.cfg.window != 1 {
            return;
        }
        let (last_from, _) = self.epochs[self.epochs.len() - 1];
        if id < last_from {
            return;
        }
        if self
            .weighed
            .as_ref()
            .is_some_and(|(from, set)| *from == last_from && *set == v.failed)
        {
            return;
        }
        self.weighed = Some((last_from, v.failed.clone()));
        let agreed: Vec<Rank> = {
            let tree = self.tree_for(id);
            v.failed
                .as_slice()
                .iter()
                .copied()
                .filter(|&r| tree.is_member(r))
                .collect()
        };
        if agreed.is_empty() {
            return;
        }
        self.weighings += 1;
        let tree = self.tree_for(id);
        let mut common = vec![false; self.dead.len()];
        for &r in &agreed {
            common[r as usize] = true;
        }
        let survivors: Vec<Rank> = tree
            .members()
            .iter()
            .copied()
            .filter(|&r| !common[r as usize])
            .collect();
        if !survivors.contains(&self.me) {
            return;
        }
        let fresh = EraTree::new(tree.shape(), survivors, self.dead.len() as Rank);
        let go = match self.cfg.rebalance {
            Rebalance::Off => false,
            Rebalance::Always => true,
            Rebalance::Degenerated => {
                let (h, f) = tree.mended_shape(&common);
                let (hb, fb) = fresh.shape_stats();
                h > hb + 1 || f > 2 * fb
            }
        };
        if go {
            self.rebuilds += 1;
            self.epochs.push((id + 1, fresh));
            // Old epochs no agreement can use any more are dropped.
            let lowest = self.slots.first_key().unwrap_or(id + 1).min(id + 1);
            while self.epochs.len() > 1 && self.epochs[1].0 <= lowest {
                self.epochs.remove(0);
            }
        }
    }
}
