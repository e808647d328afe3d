//! Lock-free shared state between the nodes and the coordinator of a local cluster: the
//! coordinator lets the root start operations and retires them; each node publishes, per
//! operation, when it delivered and when it was last active. Nothing here is on the message
//! path (nodes write a few atomics once per operation).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Operations that may be in flight at once (`--window` is at most this).
pub const WINDOW: usize = 64;

/// What one node reports about one operation.
#[derive(Debug, Default)]
pub struct OpBoard {
    /// The operation (sequence number + 1) this entry describes; 0: none yet.
    pub seq1: AtomicU64,
    /// Nanoseconds since the cluster epoch at delivery (0: not delivered).
    pub delivered_ns: AtomicU64,
    /// Deliveries of this operation (must be exactly 1 at a live node).
    pub deliveries: AtomicU32,
    /// Messages of this operation received with a corrupted payload.
    pub bad_payload: AtomicU32,
    /// Last send or receive of this operation, ns since the epoch.
    pub last_ns: AtomicU64,
    /// Messages this node sent for the operation.
    pub sent: AtomicU32,
    /// Messages of this operation this node could not send (its deferred queue was full):
    /// the operation is reported failed.
    pub send_drops: AtomicU32,
    /// The protocol says this node will send nothing more for the operation.
    pub finished: AtomicBool,
}

/// One node's reports.
#[derive(Debug)]
pub struct NodeBoard {
    pub ops: Vec<OpBoard>,
    /// The node has crashed (injected).
    pub dead: AtomicBool,
    /// The iteration during which it crashed (`u64::MAX`: before the first, or alive).
    pub died_in: AtomicU64,
}

impl Default for NodeBoard {
    fn default() -> Self {
        Self {
            ops: (0..WINDOW).map(|_| OpBoard::default()).collect(),
            dead: AtomicBool::new(false),
            died_in: AtomicU64::new(u64::MAX),
        }
    }
}

impl OpBoard {
    /// Records activity at `ns`: `last_ns` only grows (a step's start time may be older than
    /// a fresh clock read earlier in the same step). One node thread writes its board.
    pub fn touch(&self, ns: u64) {
        if ns > self.last_ns.load(Ordering::Relaxed) {
            self.last_ns.store(ns, Ordering::Relaxed);
        }
    }
}

impl NodeBoard {
    /// The entry for `seq`, reset for it if it held an older operation.
    pub fn claim(&self, seq: u64) -> &OpBoard {
        let b = &self.ops[(seq % WINDOW as u64) as usize];
        if b.seq1.load(Ordering::Acquire) != seq + 1 {
            b.delivered_ns.store(0, Ordering::Relaxed);
            b.deliveries.store(0, Ordering::Relaxed);
            b.bad_payload.store(0, Ordering::Relaxed);
            b.last_ns.store(0, Ordering::Relaxed);
            b.sent.store(0, Ordering::Relaxed);
            b.send_drops.store(0, Ordering::Relaxed);
            b.finished.store(false, Ordering::Relaxed);
            b.seq1.store(seq + 1, Ordering::Release);
        }
        b
    }

    /// The entry for `seq` as [`NodeBoard::claim`], unless it already holds a newer operation
    /// (then `seq` is over and its late bookkeeping is dropped, not written over the newer).
    pub fn claim_unless_newer(&self, seq: u64) -> Option<&OpBoard> {
        let b = &self.ops[(seq % WINDOW as u64) as usize];
        (b.seq1.load(Ordering::Acquire) <= seq + 1).then(|| self.claim(seq))
    }

    /// The entry for `seq` if this node has touched that operation.
    pub fn get(&self, seq: u64) -> Option<&OpBoard> {
        let b = &self.ops[(seq % WINDOW as u64) as usize];
        (b.seq1.load(Ordering::Acquire) == seq + 1).then_some(b)
    }
}

/// The coordinator's commands.
#[derive(Debug)]
pub struct Control {
    /// The root may start every operation with `seq < allowed`.
    pub allowed: AtomicU64,
    /// Operations with `seq < retired` are over: their state may be dropped.
    pub retired: AtomicU64,
    /// Everyone stops.
    pub stop: AtomicBool,
    /// Ns since the epoch at which the root started each in-flight operation (by slot).
    pub started_ns: Vec<AtomicU64>,
    /// The root of each in-flight operation (by slot; rank 0 unless set), written before
    /// the operation is allowed.
    pub roots: Vec<AtomicU32>,
    pub boards: Vec<NodeBoard>,
    /// Roots are learned, not only named: a datagram of an operation at or past `allowed`
    /// names its root itself (written to [`Control::roots`]), as in a group of processes
    /// whose members each name the roots of the broadcasts they call, in the same order, and
    /// may hear one before they call it (`group::Member`). A datagram of an allowed operation
    /// must still name the root its slot holds.
    pub learn_roots: bool,
}

impl Control {
    /// Control for `n` nodes.
    pub fn new(n: u32) -> Self {
        Self {
            allowed: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            started_ns: (0..WINDOW).map(|_| AtomicU64::new(0)).collect(),
            roots: (0..WINDOW).map(|_| AtomicU32::new(0)).collect(),
            boards: (0..n).map(|_| NodeBoard::default()).collect(),
            learn_roots: false,
        }
    }

    /// Control for `n` nodes whose roots are learned from datagrams ahead of `allowed`
    /// ([`Control::learn_roots`]).
    pub fn learning(n: u32) -> Self {
        Self {
            learn_roots: true,
            ..Self::new(n)
        }
    }

    /// The root of operation `seq` (meaningful once the operation is allowed).
    pub fn root_of(&self, seq: u64) -> u32 {
        self.roots[(seq % WINDOW as u64) as usize].load(Ordering::Relaxed)
    }

    /// Names the root of operation `seq`; call before allowing it.
    pub fn set_root(&self, seq: u64, root: u32) {
        self.roots[(seq % WINDOW as u64) as usize].store(root, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_only_moves_forward_and_a_new_operation_starts_clean() {
        let nb = NodeBoard::default();
        let b = nb.claim(5);
        b.touch(100);
        b.touch(40); // a send stamped with its step's (older) start time
        assert_eq!(b.last_ns.load(Ordering::Relaxed), 100);
        b.send_drops.fetch_add(1, Ordering::Relaxed);
        let b = nb.claim(5 + WINDOW as u64);
        assert_eq!(b.last_ns.load(Ordering::Relaxed), 0);
        assert_eq!(b.send_drops.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn late_bookkeeping_of_an_older_operation_never_takes_a_newer_ones_entry() {
        let nb = NodeBoard::default();
        let w = WINDOW as u64;
        nb.claim(3 + w).sent.fetch_add(2, Ordering::Relaxed);
        assert!(nb.claim_unless_newer(3).is_none());
        assert_eq!(nb.get(3 + w).map(|b| b.sent.load(Ordering::Relaxed)), Some(2));
        // The same or an older occupant: claimed as usual.
        assert!(nb.claim_unless_newer(3 + w).is_some());
        assert!(nb.claim_unless_newer(3 + 2 * w).is_some());
        assert!(nb.get(3 + w).is_none());
    }
}
