//! A broadcast [`Protocol`] run on the [`MachineEngine`] through the [`Bcast`] adapter, the
//! path a single LogP loop would take (`docs/architecture.md`, "Not yet one"): the same
//! operation as [`crate::sim::Engine::run`] for LogP costs (no noise, a core per process,
//! queued receives), processes dead before the start and at fixed times, no failure detector.
//!
//! It exists to measure that path against the broadcast engine, not to replace it: the
//! differential tests (`bcast_machine_tests.rs`) check that both give the same run, and
//! `cargo bench --bench sim_throughput -- --machine` times both on the same configuration.

use crate::model::{LogGP, Time};
use crate::protocol::machine::Bcast;
use crate::protocol::{Event, Machine, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};
use crate::sim::engine::RunStats;
use crate::sim::faults::Faults;
use crate::sim::machine_engine::{Harness, MachineEngine};
use crate::topology::ring;

/// What the run collects (the broadcast engine's [`RunStats`]).
struct Collect {
    /// Each process's first delivery (`Time::MAX`: none).
    delivered_at: Vec<Time>,
    sent: Vec<u32>,
    messages: u64,
    quiescence: Time,
    diss_end: Time,
    /// The send occupancy `o_s` (a send's end is `o_s` after its start: LogP costs).
    os: Time,
}

impl<'s, P: Protocol> Harness<Bcast<'s, P>> for Collect {
    type Tag = ();

    fn on_send(&mut self, r: Rank, _to: Rank, _msg: &P::Msg, now: Time) {
        self.messages += 1;
        self.sent[r as usize] += 1;
        self.quiescence = self.quiescence.max(now + self.os);
    }

    fn on_receive(
        &mut self,
        _eng: &mut MachineEngine<Bcast<'s, P>, ()>,
        _to: Rank,
        _from: Rank,
        msg: &P::Msg,
        _tag: (),
        now: Time,
    ) -> bool {
        self.quiescence = self.quiescence.max(now);
        if msg.phase() == Phase::Dissemination {
            self.diss_end = self.diss_end.max(now);
        }
        true
    }

    fn settle(&mut self, eng: &mut MachineEngine<Bcast<'s, P>, ()>, r: Rank, now: Time) {
        if eng.node_mut(r).poll_output().is_some() {
            self.delivered_at[r as usize] = now;
        }
    }

    fn polled(&mut self, eng: &mut MachineEngine<Bcast<'s, P>, ()>, r: Rank, now: Time) {
        // A delivery made while asked to send (a correction's start) counts as after an event.
        <Self as Harness<Bcast<'s, P>>>::settle(self, eng, r, now);
    }

    fn on_die(&mut self, eng: &mut MachineEngine<Bcast<'s, P>, ()>, r: Rank, now: Time) {
        eng.kill(r, now);
    }
}

/// One operation of `P` over `n` processes on the machine engine: LogP costs `logp`, the
/// deaths of `faults` drawn from `seed` as the broadcast engine draws them, at most
/// `max_events` events; the run's statistics as [`crate::sim::Engine::run`] reports them, and
/// each process's first delivery (`Time::MAX`: none).
/// Every process gets its own generator (seeded from `seed` and its rank), so a randomized
/// protocol's run differs from the broadcast engine's, which draws from one generator in event
/// order; a deterministic one's must not. A protocol that takes suspicions gets none (no
/// failure detector is modeled here). `one_event`: each message is one event, its end of
/// receive scheduled at its send ([`MachineEngine::receive_at_send`]), as the broadcast
/// engine does; else two (its arrival, its end of receive), as ERA's experiment runs.
pub fn run<P: Protocol>(
    n: u32,
    logp: LogGP,
    shared: &P::Shared,
    faults: &Faults,
    seed: u64,
    max_events: u64,
    one_event: bool,
) -> (RunStats, Vec<Time>)
where
    P::Shared: SharedInfo,
{
    let mut rng = ProtoRng::new(seed);
    let mut death = vec![Time::MAX; n as usize];
    faults.draw(n, &mut rng, &mut death, &mut Vec::new());
    let nodes = (0..n)
        .map(|r| Bcast::<P>::new(r, n, shared, ProtoRng::new(seed ^ (u64::from(r) << 32 | 0x9E37))))
        .collect();
    let mut eng = MachineEngine::new(nodes, logp, 4 * logp.hop() + 4, seed, max_events);
    eng.instant_order(true);
    eng.receive_at_send(one_event);
    let mut h = Collect {
        delivered_at: vec![Time::MAX; n as usize],
        sent: vec![0; n as usize],
        messages: 0,
        quiescence: 0,
        diss_end: 0,
        os: logp.send(),
    };
    for (r, &d) in death.iter().enumerate() {
        let r = r as Rank;
        if d == 0 {
            eng.kill(r, 0);
        } else if d != Time::MAX {
            eng.die_at(d, r);
        }
    }
    for r in 0..n {
        if eng.alive(r) {
            // Starting never fails (`Bcast`'s error type is uninhabited).
            _ = eng.node_mut(r).handle(0, Event::Input(()));
        }
    }
    eng.run(&mut h);

    let mut st = RunStats {
        events: eng.events(),
        aborted: eng.aborted(),
        messages: h.messages,
        quiescence: h.quiescence,
        max_messages_per_process: h.sent.iter().copied().max().unwrap_or(0),
        ..RunStats::default()
    };
    for r in 0..n {
        if death[r as usize] != Time::MAX {
            continue;
        }
        match h.delivered_at[r as usize] {
            Time::MAX => st.uncolored_live += 1,
            t => st.coloring = st.coloring.max(t),
        }
    }
    st.gmax = ring::longest_circular_run(|r| !eng.node(r).protocol().colored_by_dissemination(), n);
    st.dissemination_end = h.diss_end.max(shared.sync_correction_start().unwrap_or(0));
    st.correction = st.quiescence.saturating_sub(st.dissemination_end);
    (st, h.delivered_at)
}

#[cfg(test)]
#[path = "bcast_machine_tests.rs"]
mod tests;
