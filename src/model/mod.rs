//! LogP model and the papers' closed forms (latencies, gap laws, optimal gossip time).

pub mod logp;

pub use logp::{LogP, Time};
