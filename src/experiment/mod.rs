//! Experiments: what a run is (typed specs, no flag parsing), how it is resolved and checked,
//! and the runners that execute it on the simulator or the runtime.
//!
//! - [`algo`]: a broadcast algorithm as specified ([`algo::AlgoSpec`]) and its resolution.
//! - [`bench`](mod@bench): a runtime benchmark ([`bench::BenchSpec`]) checked into the runner it
//!   picks ([`bench::Runner`]: a local cluster, one process per node, or a launched run) and
//!   run; [`bench::node`] runs one node process, [`bench::node_hop`] measures the hop as a
//!   broadcast node pays it.
//! - [`sim`]: a `sim`/`model` run ([`sim::SimSpec`]) resolved into a [`sim::Setup`].
//! - [`simulate`]: runs a [`sim::Setup`] on the LogP simulator (Monte Carlo or traced).
//! - [`defaults`]: the parameters the papers' models choose when the user does not, and the
//!   fault-free latency the model predicts.
//! - [`flood`]: a local bench run under a flood of garbage (the flood tests and benchmark).
//! - [`limits`]: the host's memory and file-descriptor limits, checked before a run allocates.
//! - [`verdict`]: whether a finished bench or agreement run passed, and why not.
//! - [`spec`]: the grammar of compact values (`kary:4`, `failproof:1`, `1%`, `5@12`).

pub mod agree;
pub mod agree_local;
pub mod agree_predict;
pub mod algo;
pub mod bench;
pub mod bootstrap_kill;
pub mod defaults;
pub mod failure;
pub mod flood;
pub mod launch;
pub use crate::runtime::limits;
pub mod logp;
pub mod overlay;
pub mod predict;
pub mod reproduce;
pub mod sim;
pub mod simulate;
pub mod spec;
pub mod stress;
pub mod sweep;
pub mod verdict;
