//! The broadcast algorithms as one value ([`Algo`]), with the names the CLI spells them by.
//! Mapping an [`Algo`] to its protocol type, shared configuration and codec happens one floor
//! up, in `wire::dispatch`, since the codec lives there.

use serde::Serialize;

use crate::model::{LogP, Time};
use crate::protocol::bcast::Start;
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::protocol::bcast::correction::{Correction, MAX_FAILPROOF_F};
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
    /// Whether the algorithm can run, with the command line's limits (`experiment::spec`):
    /// a failure-proof correction or FCG tolerates at most [`MAX_FAILPROOF_F`] failures (its
    /// correctors hold that much knowledge, `FAILPROOF_CAP`; more tripped their assertion in
    /// a worker), and a time it counts (gossip's `T`, OCG's `C`, a correction's delay) is at
    /// most [`LogP::MAX`], as `L` and `o` are (a `T` near `u64::MAX` overflowed the gossip
    /// phase's end). An [`Algo`] built in code, not parsed, is checked here before it runs
    /// (`Group`, `MemberSpec`); errors are one line.
    pub fn check(&self) -> Result<(), String> {
        let time = |what: &str, v: Time| {
            if v > LogP::MAX {
                return Err(format!("{what} must be at most {} (got {v})", LogP::MAX));
            }
            Ok(())
        };
        let failproof = |what: &str, f: u32| {
            if f > MAX_FAILPROOF_F {
                return Err(format!("{what} supports F <= {MAX_FAILPROOF_F}, got {f}"));
            }
            Ok(())
        };
        match self {
            Algo::CorrectedTree { correction, .. } => match *correction {
                Correction::FailProof { f } => failproof("failproof:F", f),
                Correction::Delayed { delay: Some(d) } => time("delayed:DELAY", d),
                _ => Ok(()),
            },
            Algo::CorrectedGossip { variant, t } => {
                time("the gossip rounds T", *t)?;
                match *variant {
                    Variant::Fcg { f } => failproof("fcg:F", f),
                    Variant::Ocg { c } => time("the correction time C", c),
                    Variant::Gos | Variant::Ccg => Ok(()),
                }
            }
            Algo::Big | Algo::Bfb | Algo::TreeAck { .. } => Ok(()),
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_takes_the_command_lines_limits() {
        let gossip = |variant, t| Algo::CorrectedGossip { variant, t };
        let tree = |correction| Algo::CorrectedTree {
            tree: TreeKind::Binomial,
            order: Order::Interleaved,
            correction,
            start: Start::Synchronized,
        };
        for ok in [
            gossip(Variant::Ccg, LogP::MAX),
            gossip(Variant::Fcg { f: MAX_FAILPROOF_F }, 20),
            gossip(Variant::Ocg { c: LogP::MAX }, 20),
            tree(Correction::FailProof { f: MAX_FAILPROOF_F }),
            tree(Correction::Delayed { delay: Some(LogP::MAX) }),
            Algo::Big,
        ] {
            assert_eq!(ok.check(), Ok(()), "{ok:?}");
        }
        for bad in [
            gossip(Variant::Ccg, u64::MAX),
            gossip(Variant::Gos, LogP::MAX + 1),
            gossip(Variant::Fcg { f: 100 }, 20),
            gossip(Variant::Ocg { c: LogP::MAX + 1 }, 20),
            tree(Correction::FailProof { f: MAX_FAILPROOF_F + 1 }),
            tree(Correction::Delayed { delay: Some(u64::MAX) }),
        ] {
            let e = bad.check().unwrap_err();
            assert!(
                !e.contains('\n') && (e.contains("at most") || e.contains("F <=")),
                "{bad:?}: {e}"
            );
        }
    }
}
