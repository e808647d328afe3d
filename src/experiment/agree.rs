//! `agree --sim`: ERA agreements in the LogP simulator, run after run, and their totals.

use crate::experiment::limits;
use crate::protocol::agree::{And64, Era};
use crate::sim::agree::{AgreeRun, AgreeSim, SimValue, Violations, run_once};
use crate::sim::stats::Dist;

/// Everything measured over the runs.
pub struct Totals {
    pub latency: Dist,
    pub process_latency: Dist,
    pub messages: Dist,
    pub steps: Dist,
    pub max_sent: Dist,
    pub max_steps_failure_free: u32,
    pub failure_free_agreements: u64,
    pub max_stored: usize,
    pub not_acknowledged: u64,
    pub rebalances: u64,
    pub dead: u64,
    pub aborted: u64,
    pub events: u64,
    pub violations: Violations,
}

impl Totals {
    /// Nothing measured yet.
    fn new() -> Self {
        Self {
            latency: Dist::new(1),
            process_latency: Dist::new(1),
            messages: Dist::new(1),
            steps: Dist::new(1),
            max_sent: Dist::new(1),
            max_steps_failure_free: 0,
            failure_free_agreements: 0,
            max_stored: 0,
            not_acknowledged: 0,
            rebalances: 0,
            dead: 0,
            aborted: 0,
            events: 0,
            violations: Violations::default(),
        }
    }

    /// Adds one run.
    fn add(&mut self, r: &AgreeRun) {
        self.latency.merge(&r.latency);
        self.process_latency.merge(&r.process_latency);
        self.messages.merge(&r.messages);
        self.steps.merge(&r.steps);
        self.max_sent.merge(&r.max_sent_per_process);
        self.max_steps_failure_free = self.max_steps_failure_free.max(r.max_steps_failure_free);
        self.failure_free_agreements += r.failure_free_agreements;
        self.max_stored = self.max_stored.max(r.max_stored);
        self.not_acknowledged += r.not_acknowledged;
        self.rebalances += r.rebalances;
        self.dead += u64::from(r.dead);
        self.aborted += u64::from(r.aborted);
        self.events += r.events;
        self.violations.merge(&r.violations);
    }
}

/// Refuses `--nodes` when the processes' trees alone (n², see [`Era::footprint`]) would not
/// fit in this host's memory: before anything over `n` is built.
pub fn check_nodes(n: u32) -> Result<(), String> {
    let need = u64::from(n).saturating_mul(Era::<And64>::footprint(n));
    limits::check_memory(
        "--nodes",
        u64::from(n),
        need,
        "the simulator (each process holds a tree over all n)",
    )
}

/// Refuses `--nodes` or `--agreements` when one run would not fit in this host's memory.
pub fn check_fits<V: SimValue>(sim: &AgreeSim) -> Result<(), String> {
    let need = sim.footprint::<V>();
    // Name the flag that drives the need: the processes' trees (n²) or the agreements.
    let per_agreement = sim.footprint::<V>().saturating_sub(
        AgreeSim {
            agreements: 0,
            ..sim.clone()
        }
        .footprint::<V>(),
    );
    let (flag, value, what) = if per_agreement > need / 2 {
        ("--agreements", sim.agreements, "the simulator's per-agreement records")
    } else {
        (
            "--nodes",
            u64::from(sim.n),
            "the simulator (each process holds a tree over all n)",
        )
    };
    limits::check_memory(flag, value, need, what)
}

/// `runs` simulated runs of `sim` (run `i` seeded from `(seed, i)`), with values of type `V`.
pub fn simulate<V: SimValue>(sim: &AgreeSim, runs: u64, seed: u64) -> Result<Totals, String> {
    check_fits::<V>(sim)?;
    let mut t = Totals::new();
    for i in 0..runs {
        let r = run_once::<V>(sim, crate::protocol::ProtoRng::run_seed(seed, i))?;
        t.add(&r);
    }
    Ok(t)
}
