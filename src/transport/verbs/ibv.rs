//! The verbs calls of this transport: rdma-sys, or in unit tests the HCA model of
//! [`super::fake`] for the objects it created (everything else still goes to rdma-sys).

#[cfg(test)]
pub use super::fake::*;
#[cfg(not(test))]
pub use rdma_sys::*;
