//! ftcoll: fault-tolerant group communication for HPC clusters.
//!
//! Layers (see `docs/architecture.md`): [`model`] (LogP closed forms) and [`topology`] at the bottom,
//! [`protocol`] (sans-IO state machines) above them, [`sim`] (the LogP discrete-event driver)
//! on top, and the command line in [`cli`]. Programs that embed ftcoll start with [`group`]:
//! broadcast their own bytes to a process group and hear about crashed members.

pub mod cli;
pub mod experiment;
pub mod fuzz;
pub mod group;
pub mod model;
pub mod protocol;
pub mod report;
pub mod runtime;
pub mod sim;
pub mod topology;
pub mod transport;
pub mod wire;
