//! An endpoint's index from a peer's rank to what it holds for that peer: a direct table in
//! small jobs, a hash map (memory as the entries) in large ones.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::DENSE_MAX;

/// No entry.
pub(super) const NONE: u32 = u32::MAX;

/// Hashes a rank (Fibonacci hashing: one multiplication).
#[derive(Default)]
pub(super) struct RankHasher(u64);

impl Hasher for RankHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = u64::from(x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Per peer rank: the index of something this endpoint holds for it, or nothing.
pub(super) enum PeerIndex {
    /// `n <= DENSE_MAX`: one entry per rank, [`NONE`] when absent.
    Dense(Vec<u32>),
    /// Larger jobs: only the peers that have an entry.
    Sparse(HashMap<u32, u32, BuildHasherDefault<RankHasher>>),
}

impl PeerIndex {
    pub(super) fn new(n: u32) -> Self {
        if n <= DENSE_MAX {
            PeerIndex::Dense(vec![NONE; n as usize])
        } else {
            PeerIndex::Sparse(HashMap::default())
        }
    }

    #[inline]
    pub(super) fn get(&self, rank: u32) -> u32 {
        match self {
            PeerIndex::Dense(v) => v[rank as usize],
            PeerIndex::Sparse(m) => m.get(&rank).copied().unwrap_or(NONE),
        }
    }

    pub(super) fn set(&mut self, rank: u32, index: u32) {
        match self {
            PeerIndex::Dense(v) => v[rank as usize] = index,
            PeerIndex::Sparse(m) => {
                m.insert(rank, index);
            }
        }
    }

    /// Heap bytes held.
    pub(super) fn bytes(&self) -> usize {
        match self {
            PeerIndex::Dense(v) => v.capacity() * size_of::<u32>(),
            PeerIndex::Sparse(m) => m.capacity() * (size_of::<(u32, u32)>() + 1),
        }
    }

    /// Heap bytes [`PeerIndex::new`] and `entries` insertions take, about.
    pub(super) fn footprint(n: u32, entries: u64) -> u64 {
        if n <= DENSE_MAX {
            u64::from(n) * size_of::<u32>() as u64
        } else {
            // hashbrown keeps its load at 7/8 and doubles: at most 16/7 slots per entry.
            entries.saturating_mul(16 * (size_of::<(u32, u32)>() as u64 + 1)) / 7
        }
    }
}
