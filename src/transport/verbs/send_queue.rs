//! Send-queue bookkeeping of one RC QP, perftest's pattern: sends are unsignaled except every
//! `signal_every`-th (perftest's `cq_mod`), whose completion retires it and every earlier WR
//! of the QP (completions are in order on one QP); at most `depth` WRs are outstanding.
//! A WR's index also names its staging slot (`index % depth`), free once it is retired.

/// One post the caller is allowed to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Post {
    pub index: u64,
    pub signaled: bool,
}

/// A completion for a WR that was not outstanding and signaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unexpected;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendQueue {
    depth: u64,
    signal_every: u64,
    posted: u64,
    retired: u64,
    /// Unsignaled WRs since the last signaled one.
    tail: u64,
    /// Index of the newest signaled WR, +1 (0 = none yet).
    last_signaled: u64,
}

impl SendQueue {
    /// `signal_every` is clamped to 1..=depth (perftest clamps cq_mod to tx_depth): then every
    /// window of `depth` outstanding WRs holds a signaled one and the queue cannot jam.
    pub fn new(depth: u32, signal_every: u32) -> Self {
        let depth = u64::from(depth.max(1));
        SendQueue {
            depth,
            signal_every: u64::from(signal_every).clamp(1, depth),
            posted: 0,
            retired: 0,
            tail: 0,
            last_signaled: 0,
        }
    }

    /// The oldest WR index not yet retired.
    pub fn retired(&self) -> u64 {
        self.retired
    }

    pub fn outstanding(&self) -> u64 {
        self.posted - self.retired
    }

    /// Unsignaled WRs after the last signaled one: they complete silently only when a later
    /// signaled WR does, so an idle sender flushes them with one signaled WR.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    pub fn signal_every(&self) -> u64 {
        self.signal_every
    }

    /// Reserves the next WR; `force` signals it regardless (flush). `None` when full.
    pub fn reserve(&mut self, force: bool) -> Option<Post> {
        if self.outstanding() >= self.depth {
            return None;
        }
        let index = self.posted;
        let signaled = force || self.tail + 1 >= self.signal_every;
        self.posted += 1;
        if signaled {
            self.tail = 0;
            self.last_signaled = index + 1;
        } else {
            self.tail += 1;
        }
        Some(Post { index, signaled })
    }

    /// Takes back the last reservation (the post itself failed).
    pub fn unreserve(&mut self, p: Post) {
        debug_assert_eq!(p.index + 1, self.posted);
        self.posted -= 1;
        if p.signaled {
            // Cannot restore the previous tail exactly; conservatively treat the failed WR's
            // predecessors as a tail that needs a flush.
            self.tail = self.posted - self.retired;
            self.last_signaled = 0;
        } else {
            self.tail -= 1;
        }
    }

    /// A successful completion of signaled WR `index`: retires it and every earlier WR.
    pub fn complete(&mut self, index: u64) -> Result<u64, Unexpected> {
        if index < self.retired || index >= self.posted {
            return Err(Unexpected);
        }
        let n = index + 1 - self.retired;
        self.retired = index + 1;
        Ok(n)
    }

    /// The staging slot of WR `index`.
    pub fn slot(&self, index: u64) -> usize {
        (index % self.depth) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_every_nth_and_retires_in_bulk() {
        let mut q = SendQueue::new(8, 4);
        let sig: Vec<bool> = (0..8).map(|_| q.reserve(false).unwrap().signaled).collect();
        assert_eq!(sig, [false, false, false, true, false, false, false, true]);
        assert_eq!(q.reserve(false), None, "full at depth");
        assert_eq!(q.complete(3), Ok(4));
        assert_eq!(q.outstanding(), 4);
        assert_eq!(q.complete(3), Err(Unexpected), "already retired");
        assert_eq!(q.complete(8), Err(Unexpected), "never posted");
        assert_eq!(q.complete(7), Ok(4));
        assert_eq!(q.outstanding(), 0);
    }

    #[test]
    fn signal_every_is_clamped_so_the_queue_never_jams() {
        for (depth, every) in [(1u32, 100u32), (4, 100), (128, 100), (16, 0)] {
            let mut q = SendQueue::new(depth, every);
            assert!(q.signal_every() >= 1 && q.signal_every() <= u64::from(depth));
            // Fill, retire through the newest signaled WR, repeat: progress every round.
            for _ in 0..10 {
                let mut last = None;
                while let Some(p) = q.reserve(false) {
                    if p.signaled {
                        last = Some(p.index);
                    }
                }
                let l = last.expect("a full queue holds a signaled WR");
                assert!(q.complete(l).unwrap() >= 1);
            }
        }
    }

    #[test]
    fn flush_signals_the_tail() {
        let mut q = SendQueue::new(16, 8);
        q.reserve(false);
        q.reserve(false);
        assert_eq!(q.tail(), 2);
        let p = q.reserve(true).unwrap();
        assert!(p.signaled);
        assert_eq!(q.tail(), 0);
        assert_eq!(q.complete(p.index), Ok(3));
    }

    #[test]
    fn unreserve_restores_the_count_and_slots_wrap() {
        let mut q = SendQueue::new(4, 2);
        let a = q.reserve(false).unwrap();
        q.unreserve(a);
        assert_eq!(q.outstanding(), 0);
        assert_eq!(q.tail(), 0);
        let b = q.reserve(false).unwrap();
        assert_eq!(b.index, 0);
        let s = q.reserve(false).unwrap();
        assert!(s.signaled);
        q.unreserve(s);
        assert_eq!(q.tail(), 1, "the remaining unsignaled WR still needs a flush");
        assert_eq!(q.slot(5), 1);
    }
}
