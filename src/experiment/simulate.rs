//! Runs a resolved [`Setup`] on the simulator, through [`Dispatch::dispatch`]: Monte Carlo or a
//! single traced run.

use crate::experiment::sim::Setup;
use crate::protocol::{Protocol, SharedInfo};
use crate::sim::{Experiment, Summary, TraceRow, run_many, trace_one};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

struct MonteCarlo<'a>(&'a Experiment, &'a (dyn Fn(u64) + Sync));

impl Visit for MonteCarlo<'_> {
    type Out = Summary;
    fn visit<P>(self, shared: &P::Shared) -> Summary
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        run_many::<P>(shared, self.0, self.1)
    }
}

struct Traced<'a>(&'a Experiment);

impl Visit for Traced<'_> {
    type Out = Vec<TraceRow>;
    fn visit<P>(self, shared: &P::Shared) -> Vec<TraceRow>
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        trace_one::<P>(shared, self.0, 0)
    }
}

/// Runs the experiment, calling `progress` with completed run counts.
pub fn simulate(setup: &Setup, progress: &(dyn Fn(u64) + Sync)) -> Result<Summary, String> {
    let ex = &setup.experiment;
    setup.algo.dispatch(ex.n, ex.logp, MonteCarlo(ex, progress))
}

/// As [`simulate`], but an error naming `what` if any run was aborted at the event cap: for
/// callers that print figures (reproduce, plot, bench's prediction), where an unfinished run
/// must never become a number.
pub fn simulate_complete(setup: &Setup, what: &str) -> Result<Summary, String> {
    let s = simulate(setup, &|_| {})?;
    if s.aborted_runs > 0 {
        return Err(format!(
            "{what}: {} of {} runs aborted at the event cap (--max-events {}); no figure is printed from them",
            s.aborted_runs, s.runs, setup.experiment.max_events
        ));
    }
    Ok(s)
}

/// The event trace of run 0 of the experiment.
pub fn trace(setup: &Setup) -> Result<Vec<TraceRow>, String> {
    let ex = &setup.experiment;
    setup.algo.dispatch(ex.n, ex.logp, Traced(ex))
}
