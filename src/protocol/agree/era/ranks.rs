//! ERA Part 1's per-agreement sets that grow one rank per message (`Contributed`,
//! `Requested`, and the ranks a new root asked): a sorted vector changed in place, its
//! allocation reused by the next agreement ([`super::Era`]'s spares). The sets a ballot
//! carries are [`RankSet`](crate::protocol::agree::RankSet)s instead (inline up to two ranks,
//! shared beyond), copied at every send and never changed in place.

use crate::protocol::Rank;

/// A set of ranks, sorted, without duplicates, changed in place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Ranks(Vec<Rank>);

impl Ranks {
    /// Adds `r`; returns whether it was new.
    pub(super) fn insert(&mut self, r: Rank) -> bool {
        match self.0.binary_search(&r) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, r);
                true
            }
        }
    }

    pub(super) fn contains(&self, r: Rank) -> bool {
        self.0.binary_search(&r).is_ok()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ranks in increasing order.
    pub(super) fn as_slice(&self) -> &[Rank] {
        &self.0
    }

    /// Ranks the set can hold without allocating.
    pub(super) fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Empties the set, keeping its allocation.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_keep_the_ranks_sorted_and_once() {
        let mut s = Ranks::default();
        for r in [5, 1, 9, 1, 5, 0] {
            s.insert(r);
        }
        assert_eq!(s.as_slice(), &[0, 1, 5, 9]);
        assert!(!s.insert(9) && s.insert(7) && s.contains(7) && !s.contains(2));
        let cap = s.capacity();
        s.clear();
        assert!(s.as_slice().is_empty() && s.capacity() == cap);
    }
}
