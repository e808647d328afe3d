//! The counters a node keeps for a run's final report.

use hdrhistogram::Histogram;

use crate::wire::DropCounters;

/// Counters a node keeps for the final report.
#[derive(Debug)]
pub struct NodeStats {
    pub drops: DropCounters,
    /// Valid datagrams of another protocol family.
    pub wrong_kind: u64,
    /// Messages of operations already retired here (late copies).
    pub stale: u64,
    /// Messages of operations too far ahead of the window.
    pub too_far: u64,
    /// Messages whose header sender differs from the transport's sender.
    pub spoofed: u64,
    /// Sends refused because the peer is suspected.
    pub to_suspected: u64,
    /// Sends deferred by a full retransmit window.
    pub backpressure: u64,
    /// Deferred sends dropped because the deferral queue was full (counted, never silent).
    pub deferred_overflow: u64,
    /// Delivery latency (root's start to this node's delivery), ns.
    pub delivery_ns: Histogram<u64>,
}

impl Default for NodeStats {
    fn default() -> Self {
        Self {
            drops: DropCounters::default(),
            wrong_kind: 0,
            stale: 0,
            too_far: 0,
            spoofed: 0,
            to_suspected: 0,
            backpressure: 0,
            deferred_overflow: 0,
            delivery_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        }
    }
}
