//! Communication topologies: dissemination trees (interleaved and in-order), the correction
//! ring and the binomial graph.
//!
//! - [`tree`]: k-ary, binomial, Lamé and LogP-optimal trees (Corrected Trees §3.2), numbered
//!   interleaved (Definition 1) or in order, with their fault-free LogP arrival times.
//! - [`ring`]: moves, distances and the longest gap on the correction ring (§3.1, §3.3).
//! - [`binomial_graph`]: binomial-graph neighbours (Corrected Gossip §IV.B.3, BMG).

pub mod binomial_graph;
pub mod launch_tree;
pub mod ring;
pub mod tree;

pub use tree::{Order, Tree, TreeKind};
