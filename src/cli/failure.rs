//! Exit codes of a failed command: 2 for a one-line error, 3 for aborted simulation runs.

/// Exit code for bad input.
pub const EXIT_USAGE: i32 = 2;

/// Exit code of a simulation in which some run was aborted at its event cap.
pub const EXIT_ABORTED: i32 = 3;

pub use crate::experiment::failure::{Failure, check_aborts};
