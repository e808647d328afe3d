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
            b.finished.store(false, Ordering::Relaxed);
            b.seq1.store(seq + 1, Ordering::Release);
        }
        b
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
    pub boards: Vec<NodeBoard>,
}

impl Control {
    /// Control for `n` nodes.
    pub fn new(n: u32) -> Self {
        Self {
            allowed: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            started_ns: (0..WINDOW).map(|_| AtomicU64::new(0)).collect(),
            boards: (0..n).map(|_| NodeBoard::default()).collect(),
        }
    }
}
