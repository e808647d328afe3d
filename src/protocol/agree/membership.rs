//! `shrink` (ERA §1.1, `MPIX_Comm_shrink`): the live membership after an agreement on the
//! failed set. Every live process derives it from the same decided [`Outcome`], so it is
//! identical everywhere; later operations (a new ERA group, broadcast trees) number their
//! processes by their index in it.

use super::era::Outcome;
use crate::protocol::Rank;

/// An ordered group of physical ranks; a member's index is its rank inside the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    ranks: Vec<Rank>,
}

impl Membership {
    /// Every rank `0..n`.
    pub fn all(n: Rank) -> Self {
        Self {
            ranks: (0..n).collect(),
        }
    }

    /// These ranks (sorted, deduplicated).
    pub fn of(ranks: impl IntoIterator<Item = Rank>) -> Self {
        let mut ranks: Vec<Rank> = ranks.into_iter().collect();
        ranks.sort_unstable();
        ranks.dedup();
        Self { ranks }
    }

    /// The shrunk group: this one without the agreed failed processes of `outcome`.
    pub fn shrink<V>(&self, outcome: &Outcome<V>) -> Membership {
        Self {
            ranks: self
                .ranks
                .iter()
                .copied()
                .filter(|&r| !outcome.failed.contains(r))
                .collect(),
        }
    }

    pub fn len(&self) -> u32 {
        self.ranks.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    pub fn ranks(&self) -> &[Rank] {
        &self.ranks
    }

    /// The group rank of physical rank `r`.
    pub fn index_of(&self, r: Rank) -> Option<u32> {
        self.ranks.binary_search(&r).ok().map(|i| i as u32)
    }

    /// The physical rank of group rank `i`.
    pub fn rank_at(&self, i: u32) -> Option<Rank> {
        self.ranks.get(i as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::agree::RankSet;

    #[test]
    fn shrink_removes_the_agreed_failed_and_renumbers() {
        let m = Membership::all(6);
        let o = Outcome {
            id: 0,
            value: (),
            failed: RankSet::of([1, 4]),
            unacknowledged: RankSet::new(),
        };
        let s = m.shrink(&o);
        assert_eq!(s.ranks(), &[0, 2, 3, 5]);
        assert_eq!(s.index_of(3), Some(2));
        assert_eq!(s.index_of(4), None);
        assert_eq!(s.rank_at(3), Some(5));
    }

    #[test]
    fn a_broadcast_tree_is_rebuilt_over_the_shrunk_group() {
        use crate::model::LogP;
        use crate::topology::tree::{Order, Tree, TreeKind};
        let m = Membership::all(16);
        let o = Outcome {
            id: 3,
            value: (),
            failed: RankSet::of([0, 7, 8]),
            unacknowledged: RankSet::new(),
        };
        let s = m.shrink(&o);
        let t = Tree::build(
            TreeKind::Binomial,
            Order::Interleaved,
            s.len(),
            LogP::new(2, 1).unwrap(),
        )
        .unwrap();
        // Every live rank is in the tree exactly once, no failed one is.
        let mut seen = [0u32; 16];
        for v in 0..t.len() {
            seen[s.rank_at(v).unwrap() as usize] += 1;
        }
        for r in 0..16u32 {
            assert_eq!(seen[r as usize], u32::from(!o.failed.contains(r)), "rank {r}");
        }
        assert_eq!(t.len(), 13);
    }
}
