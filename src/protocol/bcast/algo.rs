//! The broadcast algorithms as one value ([`Algo`]), with the names the CLI spells them by.
//! Mapping an [`Algo`] to its protocol type, shared configuration and codec happens one floor
//! up, in `wire::dispatch`, since the codec lives there.

use serde::Serialize;

use crate::model::Time;
use crate::protocol::bcast::Start;
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::protocol::bcast::correction::Correction;
use crate::topology::{Order, TreeKind};

/// A fully resolved algorithm.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Algo {
    CorrectedTree {
        tree: TreeKind,
        order: Order,
        correction: Correction,
        start: Start,
    },
    /// GOS, OCG, CCG or FCG gossiping until `t`.
    CorrectedGossip {
        variant: Variant,
        t: Time,
    },
    Big,
    Bfb,
    TreeAck {
        tree: TreeKind,
        order: Order,
    },
}

impl Algo {
    /// A short human description.
    pub fn describe(&self) -> String {
        match self {
            Algo::CorrectedTree {
                tree,
                order,
                correction,
                start,
            } => {
                format!(
                    "corrected-tree tree={} order={} correction={} start={}",
                    tree_name(tree),
                    order_name(*order),
                    corr_name(correction),
                    start_name(*start)
                )
            }
            Algo::CorrectedGossip { variant, t } => match variant {
                Variant::Gos => format!("gossip (GOS) T={t}"),
                Variant::Ocg { c } => format!("corrected-gossip variant=ocg T={t} C={c}"),
                Variant::Ccg => format!("corrected-gossip variant=ccg T={t}"),
                Variant::Fcg { f } => format!("corrected-gossip variant=fcg f={f} T={t}"),
            },
            Algo::Big => "big (binomial-graph broadcast)".into(),
            Algo::Bfb => "bfb (Buntinas' fault-tolerant broadcast)".into(),
            Algo::TreeAck { tree, order } => format!("tree-ack tree={} order={}", tree_name(tree), order_name(*order)),
        }
    }
}

/// Short name of a tree kind, as the CLI spells it.
pub fn tree_name(t: &TreeKind) -> String {
    match t {
        TreeKind::Kary(k) => format!("kary:{k}"),
        TreeKind::Binomial => "binomial".into(),
        TreeKind::Lame(k) => format!("lame:{k}"),
        TreeKind::Optimal => "optimal".into(),
    }
}

fn order_name(o: Order) -> &'static str {
    match o {
        Order::Interleaved => "interleaved",
        Order::InOrder => "in-order",
    }
}

fn start_name(s: Start) -> &'static str {
    match s {
        Start::Synchronized => "synchronized",
        Start::Overlapped => "overlapped",
    }
}

/// Short name of a correction, as the CLI spells it.
pub fn corr_name(c: &Correction) -> String {
    match c {
        Correction::None => "none".into(),
        Correction::Opportunistic { d } => format!("opportunistic:{d}"),
        Correction::Optimized { d } => format!("optimized:{d}"),
        Correction::Checked => "checked".into(),
        Correction::FailProof { f } => format!("failproof:{f}"),
        Correction::Delayed { delay: None } => "delayed".into(),
        Correction::Delayed { delay: Some(d) } => format!("delayed:{d}"),
    }
}
