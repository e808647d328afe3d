//! Sweeps for the figures of `ftcoll plot`: one Monte Carlo experiment per algorithm and
//! value of the swept parameter (node count or fault rate), resolved as `ftcoll sim` resolves
//! its flags.

use crate::experiment::algo::{AlgoSpec, LoggpSpec};
use crate::experiment::sim::{Setup, SimSpec};
use crate::experiment::simulate as runner;

/// One algorithm's Monte Carlo reports along a swept parameter (node count or fault rate).
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The legend entry (the algorithm spec as given).
    pub label: String,
    /// (parameter, report) in sweep order.
    pub points: Vec<(f64, crate::sim::Report)>,
}

/// One resolved point of a sweep.
pub struct Point(Setup);

impl Point {
    /// `alg` on `nodes` processes (LogP `l`, `o`) with `faults` dead before the operation,
    /// `runs` runs from `seed`; errors are one line.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        alg: &AlgoSpec,
        nodes: u32,
        l: u64,
        o: u64,
        faults: &str,
        runs: u64,
        seed: u64,
        threads: Option<usize>,
    ) -> Result<Point, String> {
        Setup::from_spec(&SimSpec {
            alg: alg.clone(),
            nodes,
            l,
            o,
            loggp: LoggpSpec::default(),
            faults: faults.to_string(),
            dead: None,
            online_faults: 0,
            kill: None,
            detect_delay: 10,
            known_dead: false,
            cores: None,
            core_visit: None,
            core_work: None,
            core_local_work: None,
            core_local_receive: None,
            core_poll_per_source: None,
            receives: None,
            runs,
            seed,
            threads,
            max_events: None,
        })
        .map(Point)
    }
}

/// Runs every experiment of every series (all resolved first, so that bad flags fail before
/// anything runs); notes runs that left live processes uncolored on stderr.
pub fn run_all(series: Vec<(String, Vec<(f64, Point)>)>) -> Result<Vec<Sweep>, String> {
    let mut out = Vec::new();
    for (label, setups) in series {
        let mut points = Vec::new();
        for (x, p) in setups {
            points.push((x, simulate(&p.0)?));
        }
        out.push(Sweep { label, points });
    }
    Ok(out)
}

/// One point's report; an error if any run was aborted at the event cap (never plotted).
fn simulate(setup: &Setup) -> Result<crate::sim::Report, String> {
    let what = format!(
        "{} at P={}, faults {}",
        setup.algo.describe(),
        setup.experiment.n,
        setup.faults_text
    );
    let r = runner::simulate_complete(setup, &what)?.report();
    if r.uncolored_runs > 0 {
        eprintln!(
            "ftcoll: note: {what}: {} of {} runs left live processes uncolored",
            r.uncolored_runs, r.runs,
        );
    }
    Ok(r)
}
