//! A `bench` run: broadcasts back to back on a cluster, with crashes injected, measured and
//! put beside the LogP model's prediction. The run as specified ([`BenchSpec`], no flag
//! parsing) is checked ([`BenchSpec::validate`]) into a [`Checked`] spec that names its
//! [`Runner`]; [`Checked::run`] is the one entry point, whatever the runner.
//!
//! - [`spec`]: the spec, its checks, and the runner it picks.
//! - [`runner`]: the runners: a local cluster (threads over UDP loopback or in-process
//!   queues), one process per node (`procs`), a launched run's rank 0 or other ranks (`join`,
//!   `boot`).
//! - [`local`]: the local cluster, a [`Group`](crate::group::Group)'s
//!   [`Stream`](crate::group::Stream): the library's runtime, measured.
//! - [`model`]: the run's LogP unit (given, calibrated or measured, with the node's own hop
//!   folded in) and the prediction.
//! - [`node_hop`]: the hop as a broadcast node pays it, measured on a local cluster.
//! - [`outcome`]: a finished run's result, assembled for the report.
//! - [`host`]: whether this host's memory and file descriptors can hold the run.
//! - [`node`]: one node process of such a run ([`node::NodeRunSpec`], `ftcoll node`).

pub mod host;
pub mod local;
pub mod model;
pub mod node;
pub mod node_hop;
pub mod outcome;
pub mod runner;
pub mod spec;
#[cfg(test)]
mod tests;

pub use outcome::BenchOutcome;
pub use runner::{Ran, Runner};
pub use spec::{BenchEnv, BenchSpec, Checked};

/// Operations abandoned at the timeout in a row after which a bench run stops: the rest would
/// most likely wait out theirs too (a node cut off, a dead subtree), and a run of N such
/// operations would take N timeouts. The operations left are reported as not run, and the
/// run fails.
pub const GIVE_UP_AFTER: u32 = 3;
