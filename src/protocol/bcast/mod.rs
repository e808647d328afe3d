//! Broadcast protocols: Corrected Trees, Corrected Gossip and the papers' baselines.

pub mod algo;
pub mod bfb;
pub mod big;
pub mod corrected_gossip;
pub mod corrected_tree;
pub mod correction;
pub mod gossip;
pub mod tree_ack;

use serde::Serialize;

use crate::protocol::Phase;
use correction::{CorrKind, CorrMsg, Dir};

/// When correction starts (Corrected Trees §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Start {
    /// All participants start together, once the dissemination is over.
    Synchronized,
    /// Each participant starts right after its own dissemination sends.
    Overlapped,
}

fn corr_phase<const C: usize>(c: &CorrMsg<C>) -> Phase {
    match c.kind {
        CorrKind::Normal | CorrKind::Final => Phase::Correction,
        CorrKind::Reply | CorrKind::Sos => Phase::Control,
    }
}

fn corr_label<const C: usize>(c: &CorrMsg<C>) -> &'static str {
    match (c.kind, c.dir) {
        (CorrKind::Normal, Dir::Fwd) => "corr>",
        (CorrKind::Normal, Dir::Bwd) => "corr<",
        (CorrKind::Final, Dir::Fwd) => "final>",
        (CorrKind::Final, Dir::Bwd) => "final<",
        (CorrKind::Reply, _) => "reply",
        (CorrKind::Sos, _) => "sos",
    }
}
