//! What a run prints and writes: output files ([`output`]) and figures ([`plot`]).

pub mod agree;
pub mod bench;
pub mod output;
pub mod plot;
