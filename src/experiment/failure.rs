//! How an experiment fails: a one-line error, simulated runs aborted at their event cap, or a
//! run that completed but failed its checks (the CLI exits with 2, 3 and 1 for them).

/// Why a command failed: bad input (or an environment error), or aborted simulation runs.
#[derive(Debug)]
pub enum Failure {
    /// A one-line error (bad input, or the environment).
    Error(String),
    /// Some simulated runs hit the event cap.
    Aborted(String),
    /// The run completed, and failed ([`crate::experiment::verdict::Verdict`]): the line says
    /// why (`bench failed: 3 violations in 300 operations`).
    Failed(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Error(e)
    }
}

/// `Err(Failure::Aborted)` naming `aborted` of `runs` runs of `what`, unless `allowed` (then a
/// note on stderr) or none aborted.
pub fn check_aborts(aborted: u64, runs: u64, what: &str, allowed: bool) -> Result<(), Failure> {
    if aborted == 0 {
        return Ok(());
    }
    let msg = format!(
        "{aborted} of {runs} runs aborted at the event cap ({what}): their figures are not valid \
         (raise --max-events, or pass --allow-aborts to accept them)"
    );
    if allowed {
        eprintln!("ftcoll: warning: {msg}");
        return Ok(());
    }
    Err(Failure::Aborted(msg))
}
