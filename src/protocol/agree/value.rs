//! The values ERA agrees on (ERA §2: `C ∪ {⊥}` with `F` is a monoid of identity `⊥`, `F`
//! associative, commutative and idempotent), and the ULFM ballot built from them (§1.1).

use std::hash::Hash;

pub use super::rank_set::RankSet;
use super::slots::AgreeId;
use crate::protocol::{ProtoRng, Rank};

/// An agreement value with its operation `F`: `fold` is `self ← F(self, other)`.
pub trait Value: Clone + PartialEq + Eq + std::fmt::Debug + Send + 'static {
    /// `F`'s identity `⊥`.
    fn bottom() -> Self;
    /// `self ← F(self, other)`; must be associative, commutative and idempotent.
    fn fold(&mut self, other: &Self);
}

/// Bitwise AND of a 32-bit word (`MPIX_Comm_agree`'s integer flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct And32(pub u32);

/// Bitwise AND of a 64-bit word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct And64(pub u64);

impl Value for And32 {
    fn bottom() -> Self {
        And32(u32::MAX)
    }
    fn fold(&mut self, other: &Self) {
        self.0 &= other.0;
    }
}

impl Value for And64 {
    fn bottom() -> Self {
        And64(u64::MAX)
    }
    fn fold(&mut self, other: &Self) {
        self.0 &= other.0;
    }
}

impl Value for RankSet {
    fn bottom() -> Self {
        RankSet::new()
    }
    fn fold(&mut self, other: &Self) {
        self.union_with(other);
    }
}

/// What a process contributes to an agreement and what is decided (ULFM semantics, §1.1 and
/// §4): the user's value under its `F`, the union of the failures known to the contributors,
/// the intersection of the failures they had acknowledged before entering, and (§4, garbage
/// collection) the smallest prefix of agreement ids every contributor had returned from.
/// Each field's operation is associative, commutative and idempotent, so the ballot is a
/// [`Value`] too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ballot<V> {
    pub value: V,
    /// Union of the processes known dead.
    pub failed: RankSet,
    /// Intersection of the acknowledged failures; `None` is `⊥` (no contribution yet).
    pub acked: Option<RankSet>,
    /// Minimum over contributors of "every agreement id below this has returned here";
    /// `u64::MAX` is `⊥`.
    pub returned_below: u64,
}

impl<V: Value> Value for Ballot<V> {
    fn bottom() -> Self {
        Ballot {
            value: V::bottom(),
            failed: RankSet::new(),
            acked: None,
            returned_below: u64::MAX,
        }
    }

    fn fold(&mut self, o: &Self) {
        self.fold_parts(&o.value, &o.failed, o.acked.as_ref(), o.returned_below);
    }
}

impl<V: Value> Ballot<V> {
    /// `self ← F(self, b)` for the ballot `b` of these parts, without building it (a
    /// process folds its own contribution from its state, not from copies of it).
    pub fn fold_parts(&mut self, value: &V, failed: &RankSet, acked: Option<&RankSet>, returned_below: AgreeId) {
        self.value.fold(value);
        self.failed.union_with(failed);
        match (&mut self.acked, acked) {
            (Some(a), Some(b)) => a.intersect_with(b),
            (a @ None, Some(b)) => *a = Some(b.clone()),
            (_, None) => {}
        }
        self.returned_below = self.returned_below.min(returned_below);
    }
}

/// A value type whose contributions can be generated from a seed (the simulator's and the
/// agreement benchmark's loops of agreements).
pub trait SimValue: Value + Hash {
    /// Process `r`'s contribution to agreement `id` (a pure function of the seed).
    fn contribution(seed: u64, r: Rank, id: AgreeId) -> Self;
}

fn mix(seed: u64, r: Rank, id: AgreeId) -> u64 {
    ProtoRng::run_seed(seed ^ u64::from(r).wrapping_mul(0xA24B_AED4_963E_E407), id)
}

impl SimValue for And64 {
    /// A random word with most bits set, so that the AND keeps some.
    fn contribution(seed: u64, r: Rank, id: AgreeId) -> Self {
        And64(!(mix(seed, r, id) & mix(seed ^ 1, r, id) & mix(seed ^ 2, r, id)))
    }
}

impl SimValue for And32 {
    fn contribution(seed: u64, r: Rank, id: AgreeId) -> Self {
        And32(And64::contribution(seed, r, id).0 as u32)
    }
}

impl SimValue for RankSet {
    /// `{r}`: the decided set is exactly the set of contributors.
    fn contribution(_seed: u64, r: Rank, _id: AgreeId) -> Self {
        RankSet::of([r])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn laws<V: Value>(xs: &[V]) {
        for a in xs {
            let mut aa = a.clone();
            aa.fold(a);
            assert_eq!(&aa, a, "idempotent");
            let mut ab = a.clone();
            ab.fold(&V::bottom());
            assert_eq!(&ab, a, "identity");
            for b in xs {
                let (mut x, mut y) = (a.clone(), b.clone());
                x.fold(b);
                y.fold(a);
                assert_eq!(x, y, "commutative");
                for c in xs {
                    let (mut l, mut r) = (a.clone(), b.clone());
                    l.fold(b);
                    l.fold(c);
                    r.fold(c);
                    let mut a2 = a.clone();
                    a2.fold(&r);
                    assert_eq!(l, a2, "associative");
                }
            }
        }
    }

    #[test]
    fn and_and_union_are_idempotent_commutative_monoids() {
        laws(&[And32(0), And32(5), And32(u32::MAX), And32(0xF0F0)]);
        laws(&[And64(3), And64(u64::MAX), And64(1 << 40)]);
        laws(&[
            RankSet::of([1, 5]),
            RankSet::new(),
            RankSet::of([2, 5, 9]),
            RankSet::of([0]),
        ]);
        let b = |v: u64, f: &[Rank], a: Option<&[Rank]>, r: u64| Ballot {
            value: And64(v),
            failed: RankSet::of(f.iter().copied()),
            acked: a.map(|a| RankSet::of(a.iter().copied())),
            returned_below: r,
        };
        laws(&[
            b(7, &[1], Some(&[1]), 3),
            b(5, &[], Some(&[]), 9),
            b(u64::MAX, &[2, 3], None, 1),
            Ballot::bottom(),
        ]);
    }

    #[test]
    fn union_merges_sorted() {
        let mut a = RankSet::of([9, 1, 5, 1]);
        assert_eq!(a.as_slice(), &[1, 5, 9]);
        a.union_with(&RankSet::of([0, 5, 10]));
        assert_eq!(a.as_slice(), &[0, 1, 5, 9, 10]);
        assert_eq!(a.minus(&RankSet::of([1, 10])).as_slice(), &[0, 5, 9]);
        assert!(RankSet::from_sorted(vec![1, 1]).is_none());
        assert!(RankSet::from_sorted(vec![1, 3]).is_some());
    }

    #[test]
    fn ballot_intersects_acks_and_takes_min_prefix() {
        let mut x = Ballot {
            value: And32(6),
            failed: RankSet::of([2]),
            acked: Some(RankSet::of([2, 3])),
            returned_below: 5,
        };
        x.fold(&Ballot {
            value: And32(3),
            failed: RankSet::of([4]),
            acked: Some(RankSet::of([3])),
            returned_below: 4,
        });
        assert_eq!(x.value, And32(2));
        assert_eq!(x.failed.as_slice(), &[2, 4]);
        assert_eq!(x.acked.as_ref().map(|a| a.as_slice().to_vec()), Some(vec![3]));
        assert_eq!(x.returned_below, 4);
    }
}
