//! Agreement: ERA, the Early Returning Agreement (Herault et al., "Practical scalable consensus
//! for pseudo-synchronous distributed systems", SC 2015; see `docs/agreement.md`), with its
//! trees, its values and the shrink built on it.

pub mod era;
mod era_machine;
pub mod era_tree;
pub mod membership;
mod rank_set;
pub mod slots;
pub mod value;

pub use era::{AgreeError, AgreeId, Era, EraConfig, EraCounters, EraMsg, Outcome, Rebalance};
pub use era_tree::{EraTree, Flat, Shape};
pub use membership::Membership;
pub use value::{And32, And64, Ballot, RankSet, SimValue, Value};
