//! Operation identity and duplicate suppression (Corrected Gossip, Claim 1;
//! `docs/architecture.md`, decision 5): every broadcast or agreement is named by `(root, sequence)`; a process keeps,
//! per root, which sequences it has completed and discards every later message of those.

/// The name of one operation: its root's physical rank and the root's sequence counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId {
    /// Physical rank of the operation's root.
    pub root: u32,
    /// The root's per-operation counter, incremented before every `bcast()`.
    pub seq: u64,
}

/// What a process should do with a message of some operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A message of an operation this process has not completed: hand it to the protocol.
    Live,
    /// A message of an operation already completed here (or too old to track): drop it.
    Stale,
    /// Further ahead than the window of concurrent operations: drop it and count it.
    TooFarAhead,
}

/// Per-root record of completed operations, with a window of `WINDOW` operations that may
/// complete out of order (pipelined broadcasts, `--window K`). Memory: O(roots).
#[derive(Clone, Debug)]
pub struct DuplicateFilter {
    /// For each root: every sequence below `floor` is completed; bit i of `ahead` says
    /// whether `floor + 1 + i` is completed (`floor` itself is not, by construction).
    roots: Vec<(u64, u64)>,
}

impl DuplicateFilter {
    /// How many operations per root may be in flight at once.
    pub const WINDOW: u64 = 64;

    /// A filter for `n` possible roots; sequences start at 0.
    pub fn new(n: u32) -> Self {
        Self {
            roots: vec![(0, 0); n as usize],
        }
    }

    /// Classifies a message of `op`. Roots outside the membership are `Stale`.
    pub fn admit(&self, op: OpId) -> Admission {
        let Some(&(floor, ahead)) = self.roots.get(op.root as usize) else {
            return Admission::Stale;
        };
        if op.seq < floor {
            return Admission::Stale;
        }
        let d = op.seq - floor;
        if d == 0 {
            return Admission::Live;
        }
        if d > Self::WINDOW {
            return Admission::TooFarAhead;
        }
        if ahead >> (d - 1) & 1 == 1 {
            Admission::Stale
        } else {
            Admission::Live
        }
    }

    /// Records that `op` completed here: later messages of it are `Stale`.
    pub fn complete(&mut self, op: OpId) {
        if self.admit(op) != Admission::Live {
            return;
        }
        let (floor, ahead) = &mut self.roots[op.root as usize];
        let d = op.seq - *floor;
        if d > 0 {
            *ahead |= 1 << (d - 1);
            return;
        }
        // The floor completed: advance past it and every completed successor.
        *floor += 1;
        while *ahead & 1 == 1 {
            *ahead >>= 1;
            *floor += 1;
        }
        *ahead >>= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(root: u32, seq: u64) -> OpId {
        OpId { root, seq }
    }

    #[test]
    fn completed_operations_are_stale_and_others_live() {
        let mut f = DuplicateFilter::new(4);
        assert_eq!(f.admit(op(1, 0)), Admission::Live);
        f.complete(op(1, 0));
        assert_eq!(f.admit(op(1, 0)), Admission::Stale);
        assert_eq!(f.admit(op(1, 1)), Admission::Live);
        assert_eq!(f.admit(op(2, 0)), Admission::Live, "roots are independent");
        assert_eq!(f.admit(op(9, 0)), Admission::Stale, "root outside the membership");
    }

    #[test]
    fn out_of_order_completion_within_the_window() {
        let mut f = DuplicateFilter::new(1);
        f.complete(op(0, 2));
        f.complete(op(0, 1));
        assert_eq!(f.admit(op(0, 0)), Admission::Live);
        assert_eq!(f.admit(op(0, 1)), Admission::Stale);
        f.complete(op(0, 0));
        for s in 0..3 {
            assert_eq!(f.admit(op(0, s)), Admission::Stale);
        }
        assert_eq!(f.admit(op(0, 3)), Admission::Live);
        assert_eq!(f.admit(op(0, 3 + DuplicateFilter::WINDOW + 1)), Admission::TooFarAhead);
    }

    #[test]
    fn completing_twice_is_harmless() {
        let mut f = DuplicateFilter::new(1);
        f.complete(op(0, 0));
        f.complete(op(0, 0));
        assert_eq!(f.admit(op(0, 1)), Admission::Live);
    }
}
