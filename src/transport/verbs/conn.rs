//! The connection record of an RC QP; its byte format is [`crate::wire::conn`]'s.

#[cfg(test)]
pub use crate::wire::conn::sample;
pub use crate::wire::conn::{ConnError, ConnInfo, LEN};
