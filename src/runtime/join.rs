//! The parameters of a joined run; the table's byte format is [`crate::wire::join`]'s.

pub use crate::wire::join::JobParams;
