//! The one place that maps an [`Algo`] to its protocol type, shared configuration and codec:
//! the simulator, the runtime and the node processes all go through [`Dispatch::dispatch`]
//! with a [`Visit`] (what to do with the protocol type).

use crate::model::{LogGP, LogP};
use crate::protocol::bcast::algo::Algo;
use crate::protocol::bcast::bfb::{Bfb, BfbShared};
use crate::protocol::bcast::big::{Big, BigShared};
use crate::protocol::bcast::corrected_gossip::{CorrectedGossip, GossipShared, Variant};
use crate::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
use crate::protocol::bcast::correction::{Correction, FAILPROOF_CAP};
use crate::protocol::bcast::tree_ack::{TreeAck, TreeAckShared};
use crate::protocol::{Protocol, SharedInfo};
use crate::topology::Tree;
use crate::wire::WireMessage;

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

/// Runs a [`Visit`] on the protocol type an [`Algo`] names.
pub trait Dispatch {
    /// Builds the shared configuration for `n` processes with the protocols' LogP `logp` and
    /// hands it, with the protocol type, to `v`. Errors (an impossible tree) are one line.
    /// `logp` may be LogGP parameters: the protocols count time with them (BFB's closed form
    /// only knows LogP and gets the nearest one, `o` the mean of `o_s` and `o_r`).
    fn dispatch<V: Visit>(&self, n: u32, logp: impl Into<LogGP>, v: V) -> Result<V::Out, String>;
}

impl Dispatch for Algo {
    fn dispatch<V: Visit>(&self, n: u32, logp: impl Into<LogGP>, v: V) -> Result<V::Out, String> {
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
