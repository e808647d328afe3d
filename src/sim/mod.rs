//! LogP discrete-event simulator: the first driver of the sans-IO protocols.

pub mod agree;
pub mod bcast_machine;
pub mod bmg_build;
pub mod calendar;
pub mod core;
pub mod dissemination;
pub mod engine;
pub mod faults;
pub mod machine_engine;
pub mod montecarlo;
pub mod noise;
pub mod notices;
pub mod phased;
pub mod stats;
pub mod timing;

pub use engine::{Engine, Receives, RunStats, TraceRow};
pub use faults::{DeadBefore, Faults};
pub use montecarlo::{Experiment, run_many, trace_one, write_trace};
pub use noise::Noise;
pub use stats::{Report, Summary};
#[cfg(test)]
mod cores_tests;
#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod loggp_tests;
#[cfg(test)]
mod machine_engine_tests;
#[cfg(test)]
mod queue_tests;
