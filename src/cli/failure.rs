//! Exit codes of a failed command: 1 for a run that failed its checks, 2 for a one-line error,
//! 3 for aborted simulation runs.

/// Exit code of a run that completed and failed: violations, timeouts, disagreements, false
/// suspicions, lost messages ([`crate::experiment::verdict::Verdict`]).
pub const EXIT_FAILED: i32 = 1;

/// Exit code for bad input.
pub const EXIT_USAGE: i32 = 2;

/// Exit code of a simulation in which some run was aborted at its event cap.
pub const EXIT_ABORTED: i32 = 3;

pub use crate::experiment::failure::{Failure, check_aborts};
