//! The ERA driver as it was before ERA ran on the shared LogP engine, kept verbatim (test
//! builds only) as the oracle of the differential test in `differential.rs`: the same inputs
//! must give the same run, event for event.

use std::collections::{HashMap, HashSet};

use super::{AgreeRun, AgreeSim, Dist, Kill, KillAt, SimValue, Violations, fingerprint, includes};
use crate::model::Time;
use crate::protocol::agree::{AgreeId, Era, EraMsg, Outcome};
use crate::protocol::{Event, Machine, ProtoRng, Rank};
use crate::sim::calendar::{Calendar, Item};
use crate::sim::timing::Timing;

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A message arrives at `to` (its receive then occupies `to` for `o`).
    Arrive(u32),
    /// The receive of a message ends: the protocol handles it.
    Handle(u32),
    Detect {
        node: Rank,
        dead: Rank,
    },
    Die(Rank),
}

struct Flight<V> {
    from: Rank,
    to: Rank,
    steps: u32,
    msg: EraMsg<V>,
}

struct Run<'a, V: SimValue> {
    sim: &'a AgreeSim,
    seed: u64,
    eras: Vec<Era<V>>,
    alive: Vec<bool>,
    death: Vec<Time>,
    cal: Calendar<Ev>,
    slab: Vec<Option<Flight<V>>>,
    free: Vec<u32>,
    /// What a message costs (shared with the broadcast engine).
    timing: Timing,
    send_free: Vec<Time>,
    recv_free: Vec<Time>,
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
    out: AgreeRun,
    nb: Vec<Rank>,
    rng: ProtoRng,
}

impl<'a, V: SimValue> Run<'a, V> {
    fn alloc(&mut self, f: Flight<V>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(f);
                i
            }
            None => {
                self.slab.push(Some(f));
                self.slab.len() as u32 - 1
            }
        }
    }

    /// Starts the next send of `r` if its sender is free.
    fn pump(&mut self, r: Rank, now: Time) {
        if !self.alive[r as usize] || self.send_free[r as usize] > now {
            return;
        }
        let core = self.timing.core(r);
        let turn = self.timing.turn(core, r, now);
        if core.is_some() && turn > now {
            // The core is doing another process's send or receive (or, with a visit cost, is
            // elsewhere in its round): try again at this process's turn.
            self.cal.push_late(turn, r);
            return;
        }
        let Some((to, msg)) = self.eras[r as usize].poll_transmit(now) else {
            return;
        };
        let id = msg.id();
        let steps = self.depth.get(&(r, id)).copied().unwrap_or(0) + 1;
        *self.sent.entry((r, id)).or_insert(0) += 1;
        if let Some(c) = self.msgs.get_mut(id as usize) {
            *c += 1;
        }
        let sent = self.timing.send(core, r, to, now);
        self.send_free[r as usize] = sent.next;
        // The sender may send again then: whatever is queued by then goes out.
        self.cal.push_late(sent.next, r);
        let i = self.alloc(Flight {
            from: r,
            to,
            steps,
            msg,
        });
        self.cal.push(sent.arrive, Ev::Arrive(i));
    }

    /// Collects `r`'s returns, enters its next agreement, watches its neighbours.
    fn settle(&mut self, r: Rank, now: Time) {
        loop {
            while let Some(o) = self.eras[r as usize].poll_output() {
                self.on_return(r, &o, now);
                if !o.ok() && self.sim.ack_on_error {
                    self.eras[r as usize].acknowledge_failures();
                }
            }
            let e = &mut self.eras[r as usize];
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
        self.out.max_stored = self.out.max_stored.max(self.eras[r as usize].stored());
        if self.alive.iter().any(|a| !a) {
            let mut nb = std::mem::take(&mut self.nb);
            self.eras[r as usize].neighbours(&mut nb);
            for &x in &nb {
                if !self.alive[x as usize] && self.watched.insert((r, x)) {
                    let t = self.detect_time(x).max(now);
                    self.cal.push(t, Ev::Detect { node: r, dead: x });
                }
            }
            self.nb = nb;
        }
        self.pump(r, now);
    }

    fn detect_time(&mut self, x: Rank) -> Time {
        let j = if self.sim.detect_jitter > 0 {
            u64::from(
                self.rng
                    .below(self.sim.detect_jitter.min(u64::from(u32::MAX)) as u32 + 1),
            )
        } else {
            0
        };
        self.death[x as usize] + self.sim.detect_delay + j
    }

    fn on_return(&mut self, r: Rank, o: &Outcome<V>, now: Time) {
        let v = &mut self.out.violations;
        if o.id != self.returned[r as usize] {
            v.irrevocability += 1;
            return;
        }
        self.returned[r as usize] += 1;
        self.out.process_latency.record(now - self.entered[r as usize]);
        if !o.ok() {
            self.out.not_acknowledged += 1;
        }
        if o.failed.as_slice().iter().any(|&f| self.alive[f as usize]) {
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
            let n = self.eras.len() as Rank;
            let mut all = V::bottom();
            for p in 0..n {
                let c = V::contribution(self.seed, p, o.id);
                if self.alive[p as usize] && !includes(&o.value, &c) {
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

    fn kill(&mut self, r: Rank, now: Time) {
        if !self.alive[r as usize] {
            return;
        }
        self.alive[r as usize] = false;
        self.death[r as usize] = now;
        self.out.dead += 1;
        for y in 0..self.eras.len() as Rank {
            if !self.alive[y as usize] {
                continue;
            }
            let mut nb = std::mem::take(&mut self.nb);
            self.eras[y as usize].neighbours(&mut nb);
            if nb.contains(&r) && self.watched.insert((y, r)) {
                let t = self.detect_time(r);
                self.cal.push(t, Ev::Detect { node: y, dead: r });
            }
            self.nb = nb;
        }
    }
}

/// `F(v', v) = v'`: `v'` includes `v` (§2.1's "contributed").
/// Runs one experiment with seed `seed`.
pub(super) fn run_once<V: SimValue>(sim: &AgreeSim, seed: u64) -> Result<AgreeRun, String> {
    sim.validate()?;
    let n = sim.n;
    let k = sim.agreements as usize;
    let mut eras: Vec<Era<V>> = Vec::with_capacity(n as usize);
    for r in 0..n {
        eras.push(Era::new(r, n, sim.era)?);
    }
    let mut rng = ProtoRng::new(seed);
    let mut run = Run {
        sim,
        seed,
        eras,
        alive: vec![true; n as usize],
        death: vec![Time::MAX; n as usize],
        cal: Calendar::new(4 * sim.params().hop() + sim.detect_delay + sim.detect_jitter, n),
        timing: {
            let mut t = Timing::new(sim.params());
            t.set_noise(sim.noise.clone());
            t.set_cores(n, sim.cores);
            t.reset(seed);
            t
        },
        slab: Vec::new(),
        free: Vec::new(),
        send_free: vec![0; n as usize],
        recv_free: vec![0; n as usize],
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
            KillAt::Before => run.kill(kl.rank, 0),
            KillAt::Time(t) => run.cal.push(t, Ev::Die(kl.rank)),
            KillAt::Message(m) => run.kill_on_msg[kl.rank as usize] = m,
        }
    }
    for r in 0..n {
        if run.alive[r as usize] {
            run.settle(r, 0);
        }
    }
    while let Some((now, item)) = run.cal.pop() {
        run.out.events += 1;
        if run.out.events > sim.max_events {
            run.out.aborted = true;
            break;
        }
        match item {
            Item::Late(r) => run.pump(r, now),
            Item::Early(Ev::Die(r)) => run.kill(r, now),
            Item::Early(Ev::Arrive(i)) => {
                let (from, to) = run.slab[i as usize].as_ref().map_or((0, 0), |f| (f.from, f.to));
                if !run.alive[to as usize] {
                    run.slab[i as usize] = None;
                    run.free.push(i);
                    continue;
                }
                let core = run.timing.core(to);
                let (end, free) = run.timing.receive(core, from, to, now, run.recv_free[to as usize]);
                run.recv_free[to as usize] = free;
                run.cal.push(end, Ev::Handle(i));
            }
            Item::Early(Ev::Handle(i)) => {
                let Some(f) = run.slab[i as usize].take() else { continue };
                run.free.push(i);
                let to = f.to;
                if !run.alive[to as usize] {
                    continue;
                }
                run.received[to as usize] += 1;
                if run.kill_on_msg[to as usize] == run.received[to as usize] {
                    run.kill(to, now);
                    continue;
                }
                let id = f.msg.id();
                let d = run.depth.entry((to, id)).or_insert(0);
                *d = (*d).max(f.steps);
                _ = run.eras[to as usize].handle(
                    now,
                    Event::Message {
                        from: f.from,
                        msg: f.msg,
                    },
                );
                run.settle(to, now);
            }
            Item::Early(Ev::Detect { node, dead }) => {
                if run.alive[node as usize] {
                    _ = run.eras[node as usize].handle(now, Event::Suspect(dead));
                    run.settle(node, now);
                }
            }
        }
        run.out.end_time = now;
    }
    finish(run)
}

fn finish<V: SimValue>(mut run: Run<'_, V>) -> Result<AgreeRun, String> {
    let k = run.sim.agreements;
    for (&(_, id), &c) in &run.sent {
        if let Some(m) = run.sent_max.get_mut(id as usize) {
            *m = (*m).max(c);
        }
    }
    for r in 0..run.eras.len() {
        if run.alive[r] && run.returned[r] < k {
            run.out.violations.termination += 1;
        }
        run.out.rebalances += run.eras[r].rebalances() as u64;
    }
    // A conflicting return counts if its process is alive, or if a live process holds the
    // first outcome... any two live processes with different outcomes is a violation.
    let mut by_id: HashMap<AgreeId, Vec<(Rank, u64)>> = HashMap::new();
    for &(id, r, fp) in &run.conflicts {
        by_id.entry(id).or_default().push((r, fp));
    }
    for (id, list) in by_id {
        let odd: HashSet<Rank> = list.iter().map(|x| x.0).collect();
        let mut live_fps: HashSet<u64> = list
            .iter()
            .filter(|(r, _)| run.alive[*r as usize])
            .map(|x| x.1)
            .collect();
        let first_live = (0..run.eras.len() as Rank)
            .any(|r| run.alive[r as usize] && !odd.contains(&r) && run.returned[r as usize] > id);
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
        run.out
            .latency
            .record(run.last_return[id].saturating_sub(run.first_entry[id]));
        run.out.messages.record(run.msgs[id]);
        run.out.steps.record(u64::from(run.steps[id]));
        run.out.max_sent_per_process.record(u64::from(run.sent_max[id]));
        if run.out.dead == 0 {
            run.out.failure_free_agreements += 1;
            run.out.max_steps_failure_free = run.out.max_steps_failure_free.max(run.steps[id]);
        }
    }
    Ok(run.out)
}
