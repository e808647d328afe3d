//! [`RankSet`]: a set of ranks as ballots carry it (ERA's failed and acknowledged sets, the
//! ranks a RESULT_REQUEST names dead, the union value), copied at every message.

use std::hash::Hash;
use std::sync::Arc;

use crate::protocol::Rank;

/// A set of ranks, kept sorted and without duplicates; as a [`Value`](super::Value), `F` is set union.
///
/// Up to [`RankSet::INLINE`] ranks (below `Rank::MAX`) are held in the value itself, so a copy is a copy of 16
/// bytes: no allocation, no reference count. Every ballot of every agreement after a failure
/// carries the same failed and acknowledged sets (ERA §5.1: those agreements cost what
/// failure-free ones do), and each process copies its ballot into every UP and DOWN it sends
/// and into its decided result; with a vector per copy, the sets' allocations made a
/// post-failure agreement cost 1.5–1.9× a failure-free one, and with a shared `Arc` the
/// reference counts' locked instructions most of that (`cargo bench --bench era_cost`,
/// docs/measurements.md). Larger sets are shared (`Arc`: a copy is a reference count). Why
/// two ranks and 16 bytes, not more inline: a ballot copied whole at every message, and the
/// failure-free agreements carry only empty sets; a 24-byte set with four inline ranks made
/// them 4–7 % slower, with five (a byte for the length) 20–25 %. A change builds a new set, so the
/// sets that grow one rank per message (ERA's `Contributed` and `Requested`) are kept apart,
/// in place (`era/ranks.rs`).
#[derive(Clone)]
pub struct RankSet(Repr);

/// [`RankSet`]'s storage: `Inline` for at most [`RankSet::INLINE`] ranks, below
/// [`Rank::MAX`] (an unused slot holds `Rank::MAX`, and so do the slots after it), `Shared`
/// for the others. 16 bytes: the inline ranks sit beside the shared pointer's niche.
#[derive(Clone)]
enum Repr {
    Inline([Rank; RankSet::INLINE]),
    Shared(Arc<[Rank]>),
}

/// An unused inline slot.
const UNUSED: Rank = Rank::MAX;

impl Default for RankSet {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for RankSet {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for RankSet {}

impl Hash for RankSet {
    /// As the ranks' slice (and so as the `Vec` this type once was).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl std::fmt::Debug for RankSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RankSet").field(&self.as_slice()).finish()
    }
}

impl RankSet {
    /// Ranks held without an allocation.
    pub const INLINE: usize = 2;

    /// The empty set.
    pub const fn new() -> Self {
        Self(Repr::Inline([UNUSED; Self::INLINE]))
    }

    /// The set of these ranks (any order, duplicates allowed).
    pub fn of(ranks: impl IntoIterator<Item = Rank>) -> Self {
        let mut v: Vec<Rank> = ranks.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        Self::sorted(&v)
    }

    /// From a strictly increasing list; `None` otherwise (used by the wire decoder).
    pub fn from_sorted(v: Vec<Rank>) -> Option<Self> {
        Self::from_sorted_slice(&v)
    }

    /// From a strictly increasing slice (no allocation up to [`RankSet::INLINE`] ranks, one
    /// above); `None` otherwise.
    pub fn from_sorted_slice(v: &[Rank]) -> Option<Self> {
        v.windows(2).all(|w| w[0] < w[1]).then(|| Self::sorted(v))
    }

    /// `v` is strictly increasing.
    fn sorted(v: &[Rank]) -> Self {
        // (`UNUSED` can only be a sorted slice's last rank.)
        if v.len() <= Self::INLINE && v.last() != Some(&UNUSED) {
            let mut ranks = [UNUSED; Self::INLINE];
            ranks[..v.len()].copy_from_slice(v);
            Self(Repr::Inline(ranks))
        } else {
            Self(Repr::Shared(Arc::from(v)))
        }
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        *self = Self::new();
    }

    /// Adds `r`; returns whether it was new.
    pub fn insert(&mut self, r: Rank) -> bool {
        match self.as_slice().binary_search(&r) {
            Ok(_) => false,
            Err(i) => {
                let s = self.as_slice();
                let mut v = Vec::with_capacity(s.len() + 1);
                v.extend_from_slice(&s[..i]);
                v.push(r);
                v.extend_from_slice(&s[i..]);
                *self = Self::sorted(&v);
                true
            }
        }
    }

    pub fn contains(&self, r: Rank) -> bool {
        self.as_slice().binary_search(&r).is_ok()
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        matches!(self.0, Repr::Inline([UNUSED, ..]))
    }

    /// The ranks in increasing order.
    pub fn as_slice(&self) -> &[Rank] {
        match &self.0 {
            Repr::Inline(ranks) => {
                let len = ranks.iter().filter(|&&r| r != UNUSED).count();
                &ranks[..len]
            }
            Repr::Shared(a) => a,
        }
    }

    /// Every rank of `self` is in `other`.
    pub fn is_subset_of(&self, other: &RankSet) -> bool {
        self.same(other) || self.as_slice().iter().all(|&r| other.contains(r))
    }

    /// The same shared set, or both empty: equal without comparing ranks.
    fn same(&self, other: &RankSet) -> bool {
        match (&self.0, &other.0) {
            (Repr::Shared(a), Repr::Shared(b)) => Arc::ptr_eq(a, b),
            _ => self.is_empty() && other.is_empty(),
        }
    }

    /// `self ← self ∪ other` (linear merge; a copy of `other` if `self` is empty, nothing
    /// if `other` adds nothing).
    pub fn union_with(&mut self, other: &RankSet) {
        if other.is_subset_of(self) {
            return;
        }
        if self.is_empty() {
            *self = other.clone();
            return;
        }
        let (a, b) = (self.as_slice(), other.as_slice());
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let x = match (a.get(i), b.get(j)) {
                (Some(&x), Some(&y)) if x == y => {
                    i += 1;
                    j += 1;
                    x
                }
                (Some(&x), Some(&y)) if x < y => {
                    i += 1;
                    x
                }
                (Some(_) | None, Some(&y)) => {
                    j += 1;
                    y
                }
                (Some(&x), None) => {
                    i += 1;
                    x
                }
                (None, None) => break,
            };
            out.push(x);
        }
        *self = Self::sorted(&out);
    }

    /// `self ← self ∩ other` (nothing to build if `self ⊆ other`).
    pub fn intersect_with(&mut self, other: &RankSet) {
        if self.is_subset_of(other) {
            return;
        }
        let v: Vec<Rank> = self.as_slice().iter().copied().filter(|&r| other.contains(r)).collect();
        *self = Self::sorted(&v);
    }

    /// `self \ other` (a copy of `self` if they are disjoint).
    pub fn minus(&self, other: &RankSet) -> RankSet {
        if self.same(other) {
            return RankSet::new();
        }
        if !self.as_slice().iter().any(|&r| other.contains(r)) {
            return self.clone();
        }
        let v: Vec<Rank> = self
            .as_slice()
            .iter()
            .copied()
            .filter(|&r| !other.contains(r))
            .collect();
        Self::sorted(&v)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::hash::{DefaultHasher, Hasher};

    use super::*;
    use crate::protocol::ProtoRng;

    fn hash_of<T: Hash + ?Sized>(x: &T) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    /// Random sets of 0 to 7 ranks (both representations and the boundary between them),
    /// `Rank::MAX` among the ranks now and then.
    fn random_set(rng: &mut ProtoRng) -> BTreeSet<Rank> {
        let len = rng.below(8);
        (0..len)
            .map(|_| if rng.below(10) == 0 { Rank::MAX } else { rng.below(12) })
            .collect()
    }

    fn of(s: &BTreeSet<Rank>) -> RankSet {
        RankSet::of(s.iter().copied())
    }

    /// Every operation against `BTreeSet`'s on the same inputs, and equality and hashes
    /// the same whatever each set's representation (a hash as the ranks' `Vec`'s, as the
    /// simulator's fingerprints took it before the sets were inline).
    #[test]
    fn operations_agree_with_a_btreeset() {
        let mut rng = ProtoRng::new(11);
        for _ in 0..3000 {
            let (a, b) = (random_set(&mut rng), random_set(&mut rng));
            let (sa, sb) = (of(&a), of(&b));
            let v: Vec<Rank> = a.iter().copied().collect();
            assert_eq!(sa.as_slice(), &v[..]);
            assert_eq!((sa.len(), sa.is_empty()), (a.len(), a.is_empty()));
            assert_eq!(hash_of(&sa), hash_of(&v));
            assert_eq!(RankSet::from_sorted(v.clone()), Some(sa.clone()));
            assert_eq!(sa == sb, a == b);
            let mut u = sa.clone();
            u.union_with(&sb);
            assert_eq!(u, of(&a.union(&b).copied().collect()), "{a:?} ∪ {b:?}");
            let mut i = sa.clone();
            i.intersect_with(&sb);
            assert_eq!(i, of(&a.intersection(&b).copied().collect()), "{a:?} ∩ {b:?}");
            assert_eq!(
                sa.minus(&sb),
                of(&a.difference(&b).copied().collect()),
                "{a:?} \\ {b:?}"
            );
            assert_eq!(sa.is_subset_of(&sb), a.is_subset(&b));
            // A set against a copy of itself (the shared representation's pointer shortcut).
            let copy = sa.clone();
            assert!(sa.minus(&copy).is_empty() && sa.is_subset_of(&copy) && copy.is_subset_of(&sa));
            let (mut u2, mut i2) = (sa.clone(), sa.clone());
            u2.union_with(&copy);
            i2.intersect_with(&copy);
            assert!(u2 == sa && i2 == sa);
            let r = rng.below(12);
            let mut ins = sa.clone();
            assert_eq!(ins.insert(r), !a.contains(&r));
            assert!(ins.contains(r) && ins.len() == a.len() + usize::from(!a.contains(&r)));
            assert_eq!(hash_of(&ins), hash_of(ins.as_slice()));
            let mut c = u.clone();
            c.clear();
            assert!(c.is_empty() && c == RankSet::new() && c.as_slice().is_empty());
        }
        assert!(RankSet::from_sorted(vec![2, 2]).is_none() && RankSet::from_sorted(vec![3, 1]).is_none());
    }

    #[test]
    fn a_set_is_16_bytes_and_copies_small_sets_without_sharing() {
        assert_eq!(size_of::<RankSet>(), 16);
        let small = RankSet::of([3, 9]);
        assert!(matches!(small.0, Repr::Inline(_)));
        assert!(matches!(RankSet::of([1, 2, 3]).0, Repr::Shared(_)));
        assert!(matches!(RankSet::of([5, Rank::MAX]).0, Repr::Shared(_)));
        assert_eq!(RankSet::of([Rank::MAX]).as_slice(), &[Rank::MAX]);
        assert_eq!(format!("{small:?}"), "RankSet([3, 9])");
    }
}
