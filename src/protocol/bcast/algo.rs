//! The broadcast algorithms as one value, and the one place that maps such a value to a
//! protocol type and its shared configuration ([`Algo::dispatch`]): the simulator, the
//! runtime and the node processes all go through it.

use serde::Serialize;

use crate::model::{LogGP, LogP, Time};
use crate::protocol::bcast::Start;
use crate::protocol::bcast::bfb::{Bfb, BfbShared};
use crate::protocol::bcast::big::{Big, BigShared};
use crate::protocol::bcast::corrected_gossip::{CorrectedGossip, GossipShared, Variant};
use crate::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use crate::protocol::bcast::correction::{Correction, FAILPROOF_CAP};
use crate::protocol::bcast::tree_ack::{TreeAck, TreeAckShared};
use crate::protocol::{Protocol, SharedInfo};
use crate::topology::{Order, Tree, TreeKind};
use crate::wire::WireMessage;

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

/// Something done with a protocol type and its shared configuration (run it in the
/// simulator, on a cluster, as one node process).
pub trait Visit {
    type Out;
    fn visit<P>(self, shared: &P::Shared) -> Self::Out
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage;
}

impl Algo {
    /// Builds the shared configuration for `n` processes with the protocols' LogP `logp` and
    /// hands it, with the protocol type, to `v`. Errors (an impossible tree) are one line.
    /// `logp` may be LogGP parameters: the protocols count time with them (BFB's closed form
    /// only knows LogP and gets the nearest one, `o` the mean of `o_s` and `o_r`).
    pub fn dispatch<V: Visit>(&self, n: u32, logp: impl Into<LogGP>, v: V) -> Result<V::Out, String> {
        let logp: LogGP = logp.into();
        Ok(match self {
            Algo::CorrectedTree {
                tree,
                order,
                correction,
                start,
            } => {
                let shared = TreeShared::new(Tree::build(*tree, *order, n, logp)?, logp, *correction, *start);
                match correction {
                    Correction::FailProof { .. } => v.visit::<CorrectedTree<FAILPROOF_CAP>>(&shared),
                    _ => v.visit::<CorrectedTree<0>>(&shared),
                }
            }
            Algo::CorrectedGossip { variant, t } => {
                let shared = GossipShared::new(n, logp, *t, *variant);
                match variant {
                    Variant::Fcg { .. } => v.visit::<CorrectedGossip<FAILPROOF_CAP>>(&shared),
                    _ => v.visit::<CorrectedGossip<0>>(&shared),
                }
            }
            Algo::Big => v.visit::<Big>(&BigShared::new(n)),
            Algo::Bfb => {
                let near = logp.as_logp().unwrap_or(LogP {
                    l: logp.l,
                    o: logp.mean_o(),
                });
                v.visit::<Bfb>(&BfbShared::new(n, near))
            }
            Algo::TreeAck { tree, order } => {
                v.visit::<TreeAck>(&TreeAckShared::new(Tree::build(*tree, *order, n, logp)?))
            }
        })
    }
}
