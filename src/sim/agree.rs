//! ERA's experiment in the LogP simulator ([`crate::protocol::agree::Era`], through the
//! sans-IO contract of [`crate::protocol::machine`], run by the shared LogP engine
//! [`MachineEngine`]; this module is the [`Harness`] around it and has no event loop): every
//! process runs a loop of back-to-back agreements (ULFM's `benchagree`), failures are injected
//! before or during them (at a time, or on a process's k-th received message), and a modeled
//! failure detector reports each death to the processes that watch the dead one (its tree
//! neighbours, [`Era::neighbours`]) after a configurable delay (§2's eventually perfect
//! detector). A message costs what it costs in the broadcast engine, by the same code
//! ([`crate::sim::core`], [`crate::sim::timing`]): LogGP (a send occupies the sender for
//! `o_s + G·(k−1)`, the message travels `L`, its receive occupies the receiver for `o_r`, in
//! arrival order, sends and receives `g` apart), with noisy per-message overheads and
//! latencies and shared cores as options; a message to a dead process vanishes.
//!
//! Every return is checked on the spot against §2.1: agreement (one outcome per agreement
//! among the processes alive at the end; footnote 1 allows others only at dead ones),
//! participation (the decided value includes the contribution of every process alive when it
//! returns, `F(v', v) = v'`), validity (it is `F` of contributions), irrevocability (each
//! agreement returns once, in order), the failed set holding only dead processes, and at the
//! end termination (every live process returned every agreement).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::model::{LogGP, LogP, Time};
pub use crate::protocol::agree::SimValue;
use crate::protocol::agree::{AgreeId, Era, EraConfig, EraMsg, Outcome, Value};
use crate::protocol::{Event, Machine, ProtoRng, Rank};
use crate::sim::machine_engine::{Harness, MachineEngine};
use crate::sim::noise::Noise;
use crate::sim::stats::Dist;

/// When a process dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillAt {
    /// Dead before the first agreement.
    Before,
    /// At this time.
    Time(Time),
    /// On receiving its k-th message (k >= 1), before acting on it.
    Message(u64),
}

/// One injected failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kill {
    pub rank: Rank,
    pub at: KillAt,
}

/// One simulated experiment.
#[derive(Clone, Debug)]
pub struct AgreeSim {
    pub n: Rank,
    pub era: EraConfig,
    pub logp: LogP,
    /// LogGP parameters refining `logp` (asymmetric overheads, a gap, a per-byte cost);
    /// `None`: exactly `logp`.
    pub loggp: Option<LogGP>,
    /// Noisy mode: each message's `o_s`, `L` and `o_r` drawn from these distributions.
    pub noise: Option<Arc<Noise>>,
    /// The processes share this many cores (rank `r` on core `r mod C`); `None`: a core each.
    pub cores: Option<u32>,
    /// With shared cores: a core's visit of a process with nothing to do, time units (0: a
    /// core switches for free); a core then serves its processes in turn, as a runtime
    /// worker steps its nodes ([`crate::sim::timing::Timing::set_visit`]).
    pub visit: Time,
    /// Agreements per process, entered back to back.
    pub agreements: u64,
    /// Failure detection delay after a death (per watcher), plus uniform `[0, jitter]`.
    pub detect_delay: Time,
    pub detect_jitter: Time,
    pub kills: Vec<Kill>,
    /// Random distinct processes dying at uniform random times in `[0, kill_horizon)`.
    pub random_kills: u32,
    pub kill_horizon: Time,
    /// A process that returns "failure not acknowledged" acknowledges the failures before
    /// its next agreement (the ULFM pattern: detecting, then stabilizing agreements).
    pub ack_on_error: bool,
    /// Events per run at most; a run over it is counted as aborted.
    pub max_events: u64,
}

impl AgreeSim {
    /// The message costs this experiment simulates.
    pub fn params(&self) -> LogGP {
        self.loggp.unwrap_or_else(|| self.logp.into())
    }

    /// Checks the configuration: one-line errors.
    pub fn validate(&self) -> Result<(), String> {
        if self.n == 0 {
            return Err("at least one process is needed".into());
        }
        if self.agreements == 0 {
            return Err("--agreements must be at least 1".into());
        }
        // Added to event times: bounded like L and o.
        for (name, v) in [
            ("--detect-delay", self.detect_delay),
            ("--detect-jitter", self.detect_jitter),
        ] {
            if v > LogP::MAX {
                return Err(format!("{name} must be at most {} (got {v})", LogP::MAX));
            }
        }
        let mut seen = HashSet::new();
        for k in &self.kills {
            if k.rank >= self.n {
                return Err(format!("kill of rank {} but there are {} processes", k.rank, self.n));
            }
            if !seen.insert(k.rank) {
                return Err(format!("rank {} is killed twice", k.rank));
            }
            if k.at == KillAt::Message(0) {
                return Err("a kill on a message counts from 1".into());
            }
        }
        if self.kills.len() as u64 + u64::from(self.random_kills) >= u64::from(self.n) {
            return Err("at least one process must survive: too many kills".into());
        }
        Ok(())
    }
}

/// What one run measured and checked.
#[derive(Clone, Debug)]
pub struct AgreeRun {
    /// Per agreement: first entry to the last return at a process alive at the end.
    pub latency: Dist,
    /// Per process and agreement: its entry to its return.
    pub process_latency: Dist,
    /// Messages per agreement.
    pub messages: Dist,
    /// Per agreement: the longest causal chain of messages to a return (Theorem 5's
    /// parallel steps).
    pub steps: Dist,
    /// The most steps of an agreement, in a run where no process died (else 0).
    pub max_steps_failure_free: u32,
    /// Agreements of runs where no process died.
    pub failure_free_agreements: u64,
    /// Per agreement: the most messages one process sent for it (ERA's per-process load;
    /// logarithmic in a balanced tree, §4).
    pub max_sent_per_process: Dist,
    /// Agreements stored by one process at most (pending plus decided, not yet collected).
    pub max_stored: usize,
    /// Returns that said "failure not acknowledged".
    pub not_acknowledged: u64,
    /// Tree rebuilds, summed over processes.
    pub rebalances: u64,
    pub violations: Violations,
    pub events: u64,
    pub aborted: bool,
    pub dead: u32,
    pub end_time: Time,
}

/// Property violations (all must be 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Violations {
    pub agreement: u64,
    pub participation: u64,
    pub validity: u64,
    pub irrevocability: u64,
    pub failed_set: u64,
    pub termination: u64,
}

impl Violations {
    pub fn total(&self) -> u64 {
        self.agreement + self.participation + self.validity + self.irrevocability + self.failed_set + self.termination
    }

    pub fn merge(&mut self, o: &Violations) {
        self.agreement += o.agreement;
        self.participation += o.participation;
        self.validity += o.validity;
        self.irrevocability += o.irrevocability;
        self.failed_set += o.failed_set;
        self.termination += o.termination;
    }
}

/// The experiment around the engine: what each process is asked to do (enter agreements back
/// to back, die at a point of the protocol), the modeled failure detector, and every check
/// and measurement of [`AgreeRun`].
struct Agreements<'a, V: SimValue> {
    sim: &'a AgreeSim,
    seed: u64,
    received: Vec<u64>,
    kill_on_msg: Vec<u64>,
    watched: HashSet<(Rank, Rank)>,
    depth: HashMap<(Rank, AgreeId), u32>,
    /// Messages sent by one process for one agreement (folded into `sent_max` when done).
    sent: HashMap<(Rank, AgreeId), u32>,
    sent_max: Vec<u32>,
    entered: Vec<Time>,
    /// Per agreement: first entry, last return, messages, steps, fingerprint of the first
    /// outcome.
    first_entry: Vec<Time>,
    last_return: Vec<Time>,
    msgs: Vec<u64>,
    steps: Vec<u32>,
    fingerprint: Vec<u64>,
    /// (agreement, rank, fingerprint) of returns that differ from the first.
    conflicts: Vec<(AgreeId, Rank, u64)>,
    returned: Vec<u64>,
    /// Only the post-failure agreements are measured ([`run_post_failure`]).
    post_failure_only: bool,
    /// The first agreement a process returned from with a failure not acknowledged (the
    /// failure-detecting agreement of ERA §5.1).
    detecting: Option<AgreeId>,
    out: AgreeRun,
    nb: Vec<Rank>,
    rng: ProtoRng,
    _v: std::marker::PhantomData<V>,
}

/// The engine ERA runs on; a message's tag is its causal depth (Theorem 5's steps).
type Net<V> = MachineEngine<Era<V>, u32>;

fn fingerprint<V: Hash>(o: &Outcome<V>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    o.value.hash(&mut h);
    o.failed.hash(&mut h);
    o.unacknowledged.hash(&mut h);
    h.finish()
}

impl<V: SimValue> Harness<Era<V>> for Agreements<'_, V> {
    type Tag = u32;

    fn on_send(&mut self, r: Rank, _to: Rank, msg: &EraMsg<V>, _now: Time) -> u32 {
        let id = msg.id();
        *self.sent.entry((r, id)).or_insert(0) += 1;
        if let Some(c) = self.msgs.get_mut(id as usize) {
            *c += 1;
        }
        self.depth.get(&(r, id)).copied().unwrap_or(0) + 1
    }

    fn on_receive(&mut self, eng: &mut Net<V>, to: Rank, _from: Rank, msg: &EraMsg<V>, steps: u32, now: Time) -> bool {
        self.received[to as usize] += 1;
        if self.kill_on_msg[to as usize] == self.received[to as usize] {
            self.kill(eng, to, now);
            return false;
        }
        let d = self.depth.entry((to, msg.id())).or_insert(0);
        *d = (*d).max(steps);
        true
    }

    /// Collects `r`'s returns, enters its next agreement, watches its neighbours.
    fn settle(&mut self, eng: &mut Net<V>, r: Rank, now: Time) {
        loop {
            while let Some(o) = eng.node_mut(r).poll_output() {
                self.on_return(eng, r, &o, now);
                if !o.ok() && self.sim.ack_on_error {
                    eng.node_mut(r).acknowledge_failures();
                }
            }
            let e = eng.node_mut(r);
            let id = e.next_id();
            if id >= self.sim.agreements || id != self.returned[r as usize] {
                break;
            }
            if e.handle(now, Event::Input(V::contribution(self.seed, r, id))).is_err() {
                break;
            }
            self.entered[r as usize] = now;
            let f = &mut self.first_entry[id as usize];
            *f = (*f).min(now);
        }
        self.out.max_stored = self.out.max_stored.max(eng.node(r).stored());
        if self.out.dead > 0 {
            let mut nb = std::mem::take(&mut self.nb);
            eng.node_mut(r).neighbours(&mut nb);
            for &x in &nb {
                if !eng.alive(x) && self.watched.insert((r, x)) {
                    let t = self.detect_time(eng, x).max(now);
                    eng.suspect_at(t, r, x);
                }
            }
            self.nb = nb;
        }
    }

    fn on_die(&mut self, eng: &mut Net<V>, r: Rank, now: Time) {
        self.kill(eng, r, now);
    }
}

impl<V: SimValue> Agreements<'_, V> {
    /// Whether agreement `id` is measured: every one, or ([`run_post_failure`]) only those
    /// after the failure-detecting agreement and the stabilizing one after it, as the runtime's
    /// `agree` classes them (`runtime::agree_window`).
    fn measured(&self, id: AgreeId) -> bool {
        !self.post_failure_only || self.detecting.is_some_and(|d| id > d + 1)
    }

    fn detect_time(&mut self, eng: &Net<V>, x: Rank) -> Time {
        let j = if self.sim.detect_jitter > 0 {
            u64::from(
                self.rng
                    .below(self.sim.detect_jitter.min(u64::from(u32::MAX)) as u32 + 1),
            )
        } else {
            0
        };
        eng.death(x) + self.sim.detect_delay + j
    }

    fn on_return(&mut self, eng: &Net<V>, r: Rank, o: &Outcome<V>, now: Time) {
        if o.id != self.returned[r as usize] {
            self.out.violations.irrevocability += 1;
            return;
        }
        self.returned[r as usize] += 1;
        if !o.ok() {
            self.out.not_acknowledged += 1;
            // Each process returns its agreements in order and a decided ballot's failures
            // are acknowledged or not alike everywhere, so with a window of 1 the detecting
            // agreement is known before any return it classes.
            self.detecting = Some(self.detecting.map_or(o.id, |d| d.min(o.id)));
        }
        if self.measured(o.id) {
            self.out.process_latency.record(now - self.entered[r as usize]);
        }
        let v = &mut self.out.violations;
        if o.failed.as_slice().iter().any(|&f| eng.alive(f)) {
            v.failed_set += 1;
        }
        let id = o.id as usize;
        // Kept for the DOWNs this return is about to send; older entries are done.
        let d = self.depth.get(&(r, o.id)).copied().unwrap_or(0);
        if o.id >= 2 {
            self.depth.remove(&(r, o.id - 2));
            if let Some(c) = self.sent.remove(&(r, o.id - 2)) {
                let m = &mut self.sent_max[(o.id - 2) as usize];
                *m = (*m).max(c);
            }
        }
        self.steps[id] = self.steps[id].max(d);
        self.last_return[id] = self.last_return[id].max(now);
        let fp = fingerprint(o);
        if self.fingerprint[id] == 0 {
            self.fingerprint[id] = fp | 1;
            let mut all = V::bottom();
            for p in 0..eng.n() {
                let c = V::contribution(self.seed, p, o.id);
                if eng.alive(p) && !includes(&o.value, &c) {
                    v.participation += 1;
                }
                all.fold(&c);
            }
            if !includes(&all, &o.value) {
                v.validity += 1;
            }
        } else if self.fingerprint[id] != fp | 1 {
            self.conflicts.push((o.id, r, fp | 1));
        }
    }

    /// `r` dies at `now`; the live processes that watch it will suspect it.
    fn kill(&mut self, eng: &mut Net<V>, r: Rank, now: Time) {
        if !eng.kill(r, now) {
            return;
        }
        self.out.dead += 1;
        let mut nb = std::mem::take(&mut self.nb);
        for y in 0..eng.n() {
            if !eng.alive(y) {
                continue;
            }
            eng.node_mut(y).neighbours(&mut nb);
            if nb.contains(&r) && self.watched.insert((y, r)) {
                let t = self.detect_time(eng, r);
                eng.suspect_at(t, y, r);
            }
        }
        self.nb = nb;
    }
}

/// `F(v', v) = v'`: `v'` includes `v` (§2.1's "contributed").
fn includes<V: Value>(big: &V, small: &V) -> bool {
    let mut x = big.clone();
    x.fold(small);
    &x == big
}

impl AgreeSim {
    /// Bytes [`run_once`] allocates up front: one [`Era`] per process (each holds a tree over
    /// all `n`, so this grows as n²), the experiment's per-process vectors (counters, entries,
    /// returns), the per-agreement ones (first entry, last return, messages, steps,
    /// fingerprint, most sent) and the engine's (ports and calendar).
    pub fn footprint<V: SimValue>(&self) -> u64 {
        let n = u64::from(self.n);
        let per_process = (size_of::<Time>() + 3 * size_of::<u64>()) as u64;
        let per_agreement = (3 * size_of::<Time>() + 2 * size_of::<u64>() + 2 * size_of::<u32>()) as u64;
        n.saturating_mul(Era::<V>::footprint(self.n).saturating_add(per_process))
            .saturating_add(self.agreements.saturating_mul(per_agreement))
            .saturating_add(Net::<V>::footprint(self.n, self.window()))
    }

    /// How far ahead the engine's calendar looks: a few hops and a detection.
    fn window(&self) -> Time {
        4 * self.params().hop() + self.detect_delay + self.detect_jitter
    }
}

/// Runs one experiment with seed `seed`.
pub fn run_once<V: SimValue>(sim: &AgreeSim, seed: u64) -> Result<AgreeRun, String> {
    run::<V>(sim, seed, false)
}

/// As [`run_once`], with only the post-failure agreements measured (ERA §5.1's classes):
/// those after the first agreement that returned a failure not acknowledged and the
/// stabilizing agreement after it. Its latencies, messages and steps are theirs (empty if no
/// agreement failed or none came after the stabilizing one); its other fields are the whole
/// run's.
pub fn run_post_failure<V: SimValue>(sim: &AgreeSim, seed: u64) -> Result<AgreeRun, String> {
    run::<V>(sim, seed, true)
}

fn run<V: SimValue>(sim: &AgreeSim, seed: u64, post_failure_only: bool) -> Result<AgreeRun, String> {
    sim.validate()?;
    if post_failure_only && sim.era.window != 1 {
        return Err("post-failure agreements are classed for blocking agreements only (a window of 1)".into());
    }
    let n = sim.n;
    let k = sim.agreements as usize;
    let mut eras: Vec<Era<V>> = Vec::with_capacity(n as usize);
    for r in 0..n {
        eras.push(Era::new(r, n, sim.era)?);
    }
    let mut rng = ProtoRng::new(seed);
    let mut eng: Net<V> = MachineEngine::new(eras, sim.params(), sim.window(), seed, sim.max_events);
    eng.timing().set_noise(sim.noise.clone());
    eng.timing().set_cores(n, sim.cores);
    eng.timing().set_visit(sim.visit);
    let mut h = Agreements {
        sim,
        seed,
        received: vec![0; n as usize],
        kill_on_msg: vec![0; n as usize],
        watched: HashSet::new(),
        depth: HashMap::new(),
        sent: HashMap::new(),
        sent_max: vec![0; k],
        entered: vec![0; n as usize],
        first_entry: vec![Time::MAX; k],
        last_return: vec![0; k],
        msgs: vec![0; k],
        steps: vec![0; k],
        fingerprint: vec![0; k],
        conflicts: Vec::new(),
        returned: vec![0; n as usize],
        post_failure_only,
        detecting: None,
        out: AgreeRun {
            latency: Dist::new(1),
            process_latency: Dist::new(1),
            messages: Dist::new(1),
            steps: Dist::new(1),
            max_sent_per_process: Dist::new(1),
            max_steps_failure_free: 0,
            failure_free_agreements: 0,
            max_stored: 0,
            not_acknowledged: 0,
            rebalances: 0,
            violations: Violations::default(),
            events: 0,
            aborted: false,
            dead: 0,
            end_time: 0,
        },
        nb: Vec::new(),
        rng: ProtoRng::new(seed ^ 0x5EED),
        _v: std::marker::PhantomData,
    };
    // The fault plan: listed kills, then random ones on distinct other processes.
    let mut plan: Vec<Kill> = sim.kills.clone();
    let mut taken: HashSet<Rank> = plan.iter().map(|k| k.rank).collect();
    while (plan.len() - sim.kills.len()) < sim.random_kills as usize {
        let r = rng.below(n);
        if taken.insert(r) {
            let t = rng.below(sim.kill_horizon.clamp(1, u64::from(u32::MAX)) as u32);
            plan.push(Kill {
                rank: r,
                at: KillAt::Time(u64::from(t)),
            });
        }
    }
    for kl in &plan {
        match kl.at {
            KillAt::Before => h.kill(&mut eng, kl.rank, 0),
            KillAt::Time(t) => eng.die_at(t, kl.rank),
            KillAt::Message(m) => h.kill_on_msg[kl.rank as usize] = m,
        }
    }
    eng.run(&mut h);
    h.out.events = eng.events();
    h.out.aborted = eng.aborted();
    h.out.end_time = eng.end_time();
    Ok(finish(h, &eng))
}

fn finish<V: SimValue>(mut run: Agreements<'_, V>, eng: &Net<V>) -> AgreeRun {
    let k = run.sim.agreements;
    for (&(_, id), &c) in &run.sent {
        if let Some(m) = run.sent_max.get_mut(id as usize) {
            *m = (*m).max(c);
        }
    }
    for r in 0..eng.n() {
        if eng.alive(r) && run.returned[r as usize] < k {
            run.out.violations.termination += 1;
        }
        run.out.rebalances += eng.node(r).rebalances() as u64;
    }
    // Any two live processes with different outcomes for one agreement is a violation.
    let mut by_id: HashMap<AgreeId, Vec<(Rank, u64)>> = HashMap::new();
    for &(id, r, fp) in &run.conflicts {
        by_id.entry(id).or_default().push((r, fp));
    }
    for (id, list) in by_id {
        let odd: HashSet<Rank> = list.iter().map(|x| x.0).collect();
        let mut live_fps: HashSet<u64> = list.iter().filter(|(r, _)| eng.alive(*r)).map(|x| x.1).collect();
        let first_live = (0..eng.n()).any(|r| eng.alive(r) && !odd.contains(&r) && run.returned[r as usize] > id);
        if first_live {
            live_fps.insert(run.fingerprint[id as usize]);
        }
        if live_fps.len() > 1 {
            run.out.violations.agreement += 1;
        }
    }
    for id in 0..k as usize {
        if run.first_entry[id] == Time::MAX {
            continue;
        }
        if run.measured(id as AgreeId) {
            run.out
                .latency
                .record(run.last_return[id].saturating_sub(run.first_entry[id]));
            run.out.messages.record(run.msgs[id]);
            run.out.steps.record(u64::from(run.steps[id]));
            run.out.max_sent_per_process.record(u64::from(run.sent_max[id]));
        }
        if run.out.dead == 0 {
            run.out.failure_free_agreements += 1;
            run.out.max_steps_failure_free = run.out.max_steps_failure_free.max(run.steps[id]);
        }
    }
    run.out
}

/// Theorem 5's failure-free bound on parallel steps: `2·⌈log_δ n⌉` for a tree of largest
/// fan-out `δ ≥ 2`, else twice the tree's height (a string, δ = 1).
pub fn theorem5_bound(n: Rank, fanout: u32, height: u32) -> u32 {
    if fanout < 2 || n < 2 {
        return 2 * height;
    }
    // ⌈log_δ n⌉ in integers.
    let (mut levels, mut reach) = (0u32, 1u64);
    while reach < u64::from(n) {
        reach = reach.saturating_mul(u64::from(fanout));
        levels += 1;
    }
    2 * levels
}

#[cfg(test)]
mod differential;
#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;
