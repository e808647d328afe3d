//! What a run prints and writes: the tables and JSON objects of `bench` ([`bench`](mod@bench)), `agree`
//! ([`agree`]) and `bootstrap --kill` ([`bootstrap`]), the HdrHistogram log and other output
//! files ([`output`]), and figures ([`plot`]).

pub mod agree;
pub mod bench;
pub mod bootstrap;
pub mod output;
pub mod plot;
pub mod segments;
