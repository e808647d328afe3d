//! `agree --procs` and `stress agree --procs`: the parent's side. It starts one `ftcoll
//! agree-node` process per node ([`crate::runtime::agree_procs`] is the node's side), says
//! `go` to all once every one is ready, merges their streamed returns into one online window
//! and SIGKILLs a node at its injected crash. `agree --join` ([`super::agree_join`]) drives
//! launched nodes through the same `Cluster` over TCP streams.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::experiment::launch::spawn::{Launch, Procs, Report};
use crate::protocol::agree::Rebalance;
use crate::runtime::agree::{AgreeBench, AgreeBenchReport, AgreeTransport, validate};
use crate::runtime::agree_procs::{ChildResult, ChildSpec, Line, parse};
use crate::runtime::agree_stream::Merge;
use crate::runtime::agree_window::Window;
use crate::runtime::procs::{aligned_epoch, unix_ns};
use crate::transport::TransportStats;
use crate::wire::DropCounters;

/// The node processes, one per slot (rank), and their lines ([`Procs`]: every process still
/// running is killed on drop).
pub(crate) struct Cluster {
    procs: Procs,
    /// The common clock (the children align theirs to the same epoch).
    epoch: Instant,
    epoch_unix_ns: u64,
}

/// How long a node process may take to bind its port, and all to be ready.
const START_TIMEOUT: Duration = Duration::from_secs(20);

impl Cluster {
    /// `n` slots on the clock of `epoch_unix_ns` (as aligned by this process), for processes
    /// of `exe`.
    pub(crate) fn new(exe: &Path, n: u32, epoch_unix_ns: u64) -> Self {
        let mut launch = Launch::new(exe, Report::Pipe(crate::runtime::agree_procs::BOUND), START_TIMEOUT);
        launch.stdin = true;
        launch.what = "node process";
        Self {
            procs: launch.slots(n),
            epoch: aligned_epoch(epoch_unix_ns),
            epoch_unix_ns,
        }
    }

    /// Starts a new process in `slot` (a previous one there is killed).
    fn spawn(&mut self, slot: u32, spec: &ChildSpec) -> Result<(), String> {
        let spec = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        self.procs.spawn(slot, &["agree-node".into(), "--spec".into(), spec])
    }

    /// Puts in `slot` a launched node whose lines come from `lines` and whose commands go to
    /// `input`.
    pub(crate) fn attach(&mut self, slot: u32, lines: impl Read + Send + 'static, input: Box<dyn Write + Send>) {
        self.procs.attach(slot, lines, input);
    }

    /// The next line of any node, parsed, within `within`.
    fn recv(&mut self, within: Duration) -> Option<(usize, Line)> {
        self.procs
            .recv(within)
            .map(|(slot, l)| (slot, l.as_deref().map_or(Line::Eof, parse)))
    }

    /// The addresses the new processes in `slots` bound (each says `bound ADDR` once its
    /// socket, which it keeps, is bound), in the order of `slots`.
    fn bound(&mut self, slots: &[u32]) -> Result<Vec<SocketAddr>, String> {
        self.procs.addresses(slots)
    }

    /// Hands the process of `slot` its spec for the next generation (the first one, for a
    /// process just bound).
    fn send_spec(&mut self, slot: u32, spec: &ChildSpec) -> Result<(), String> {
        let line = format!("next {}", serde_json::to_string(spec).map_err(|e| e.to_string())?);
        self.procs.send(slot as usize, &line);
        Ok(())
    }

    /// SIGKILLs the process of `slot` now; returns the time on the common clock.
    fn kill(&mut self, slot: usize) -> u64 {
        // Stamped before the signal: this thread may lose its core between the signal and a
        // later clock read while the survivors already notice the death, and a suspicion
        // stamped before the kill would not count as one after it.
        let at = self.epoch.elapsed().as_nanos() as u64;
        self.procs.kill(slot); // SIGKILL on Unix.
        at
    }

    /// Waits until every slot's process said `ready` (within `within`), then tells them all
    /// `go`.
    pub(crate) fn start(&mut self, within: Duration) -> Result<Instant, String> {
        let n = self.procs.len();
        let mut ready = vec![false; n];
        let deadline = Instant::now() + within;
        while ready.iter().any(|r| !r) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (slot, line) = self.recv(left).ok_or_else(|| {
                let k = ready.iter().filter(|r| **r).count();
                format!("only {k} of {n} node processes were ready within {within:?}")
            })?;
            match line {
                Line::Ready => ready[slot] = true,
                Line::Eof => return Err(self.procs.exit_error(slot, "before it was ready")),
                _ => {}
            }
        }
        let started = Instant::now();
        for slot in 0..n {
            self.procs.send(slot, "go");
        }
        Ok(started)
    }

    /// Gathers one result per slot — a report, a kill (asked for by the node at its injected
    /// crash: SIGKILLed here, with the time; a launched node kills itself and gives its
    /// time), or the process's end — while merging the streamed returns into `window`; gives
    /// up when no node said anything for `idle`.
    pub(crate) fn collect(&mut self, started: Instant, idle: Duration, window: Window) -> Outcomes {
        let n = self.procs.len();
        let mut o = Outcomes {
            results: vec![None; n],
            killed: vec![None; n],
            gone: vec![false; n],
            seconds: 0.0,
            merge: Merge::new(n as u32, window),
            bad_lines: 0,
        };
        while (0..n).any(|r| o.results[r].is_none() && o.killed[r].is_none() && !o.gone[r]) {
            let Some((slot, line)) = self.recv(idle) else {
                break;
            };
            if let Line::Killed(ns) = line {
                let launched = !self.procs.is_process(slot);
                let at = self.kill(slot);
                o.killed[slot] = Some(if launched { ns } else { at });
            }
            let dead = ALIVE;
            match line {
                Line::Recs(v) => o.merge.push(slot as u32, v, &dead),
                Line::Result(res) => {
                    o.results[slot] = Some(*res);
                    o.seconds = started.elapsed().as_secs_f64();
                    o.merge.close(slot as u32, &dead);
                }
                Line::Killed(_) => o.merge.close(slot as u32, &dead),
                Line::Eof => {
                    o.gone[slot] = true;
                    o.merge.close(slot as u32, &dead);
                }
                Line::Bad => o.bad_lines += 1,
                Line::Ready | Line::Bound => {}
            }
        }
        o.merge.finish(&ALIVE);
        o
    }

    /// Closes every node's input: each stops (a launched node's process exits).
    pub(crate) fn close_inputs(&mut self) {
        self.procs.close_inputs();
    }
}

/// Whom the window leaves out: nobody. A node's stream ends where it crashed, without its
/// last return (see [`crash_report`]), so every return in it was made alive and agreed
/// (ERA §1: only a decision that had not spread when its node died may differ), unlike the
/// threads run's shared flags, which may mark a node dead before its last returns are classed.
const ALIVE: fn(u32) -> bool = |_| false;

/// What one generation's processes reported, by slot, and their returns classed.
pub(crate) struct Outcomes {
    results: Vec<Option<ChildResult>>,
    killed: Vec<Option<u64>>,
    gone: Vec<bool>,
    seconds: f64,
    merge: Merge,
    bad_lines: u64,
}

/// The window that classes `b`'s returns (warm-up, the first kill).
pub(crate) fn window_of(b: &AgreeBench) -> Window {
    Window::new(b.warmup, b.kills.iter().map(|k| b.warmup + k.1).min())
}

/// A node that says nothing for this long (they stream their returns every
/// [`FLUSH_MS`] and report at the end) is given up.
pub(crate) fn idle_limit(b: &AgreeBench) -> Duration {
    b.op_timeout + Duration::from_secs(30)
}

pub(crate) fn spec_of(
    b: &AgreeBench,
    rank: u32,
    peers: &[SocketAddr],
    epoch_unix_ns: u64,
    generation: u64,
) -> ChildSpec {
    ChildSpec {
        rank,
        peers: peers.to_vec(),
        epoch_unix_ns,
        tree: b.era.shape.to_string(),
        gc: b.era.gc,
        rebalance: match b.era.rebalance {
            Rebalance::Off => 0,
            Rebalance::Degenerated => 1,
            Rebalance::Always => 2,
        },
        warmup: b.warmup,
        iterations: b.iterations,
        duration_ms: b.duration.map(|d| d.as_millis() as u64),
        kills: b.kills.clone(),
        stalls: b
            .stalls
            .iter()
            .map(|s| (s.rank, s.at, s.pause.as_micros() as u64))
            .collect(),
        heartbeat_us: b.heartbeat.as_micros() as u64,
        suspect_ms: b.suspect_after.as_millis() as u64,
        op_timeout_ms: b.op_timeout.as_millis() as u64,
        seed: b.seed,
        generation,
    }
}

/// Runs the benchmark with one `exe agree-node` process per node.
pub fn run(b: &AgreeBench, exe: &Path) -> Result<AgreeBenchReport, String> {
    validate(b)?;
    if b.transport != AgreeTransport::Udp {
        return Err("--procs runs over UDP: use --transport udp".into());
    }
    let mut c = Cluster::new(exe, b.n, unix_ns());
    // Every process binds a port of its own choice and keeps it; the table then goes to all.
    for r in 0..b.n {
        c.spawn(r, &spec_of(b, r, &[], c.epoch_unix_ns, 0))?;
    }
    let all: Vec<u32> = (0..b.n).collect();
    let peers = c.bound(&all)?;
    for r in 0..b.n {
        c.send_spec(r, &spec_of(b, r, &peers, c.epoch_unix_ns, 0))?;
    }
    let started = c.start(START_TIMEOUT)?;
    let o = c.collect(started, idle_limit(b), window_of(b));
    // The end: closing stdin stops every node.
    c.close_inputs();
    c.procs.stop(Duration::from_secs(5), &mut || {});
    Ok(merge(b, o))
}

/// `stress agree --procs`: what one generation did.
pub struct Generation {
    pub report: AgreeBenchReport,
    /// Processes SIGKILLed (injected crashes, and live processes the group excluded).
    pub killed: u32,
    /// Survivors whose shrink (the last agreement's failed set) differs from the others'.
    pub shrink_mismatch: u64,
    /// Processes started for this generation (the first: all of them).
    pub newcomers: u32,
}

/// `stress agree --procs`: generations of one group of node processes. Each generation runs
/// `b.iterations` agreements with `kills_of(g)` injected (each a SIGKILL); the survivors keep
/// their processes (and ports) into the next generation, whose membership is the shrink of
/// the last agreement's failed set — checked identical at every survivor — plus newcomers
/// started in the failed ranks, who get the group's address table with their spec. `each`
/// sees every generation; returning `false` ends the run.
pub fn stress(
    b: &AgreeBench,
    exe: &Path,
    kills_of: &mut dyn FnMut(u64) -> Vec<(u32, u64)>,
    each: &mut dyn FnMut(&Generation) -> bool,
) -> Result<(), String> {
    validate(b)?;
    let n = b.n;
    let mut peers: Vec<SocketAddr> = vec![SocketAddr::from(([127, 0, 0, 1], 0)); n as usize];
    let mut c = Cluster::new(exe, n, unix_ns());
    let mut fresh: Vec<u32> = (0..n).collect();
    let mut g = 0u64;
    loop {
        let mut gb = b.clone();
        gb.kills = kills_of(g);
        validate(&gb)?;
        // Newcomers bind ports of their own choice (and keep them); survivors keep theirs.
        for &r in &fresh {
            c.spawn(r, &spec_of(&gb, r, &[], c.epoch_unix_ns, g))?;
        }
        for (&r, a) in fresh.iter().zip(c.bound(&fresh)?) {
            peers[r as usize] = a;
        }
        for r in 0..n {
            c.send_spec(r, &spec_of(&gb, r, &peers, c.epoch_unix_ns, g))?;
        }
        let newcomers = fresh.len() as u32;
        let started = c.start(START_TIMEOUT)?;
        let o = c.collect(started, idle_limit(b), window_of(&gb));
        // The shrink at every survivor: all ranks but the agreed failed set.
        let survivors: Vec<&ChildResult> = (0..n as usize)
            .filter(|&r| o.killed[r].is_none())
            .filter_map(|r| o.results[r].as_ref())
            .collect();
        let failed: Vec<u32> = survivors.first().map(|r| r.failed.clone()).unwrap_or_default();
        let shrink_mismatch = survivors.iter().filter(|r| r.failed != failed).count() as u64;
        let no_survivor = survivors.is_empty();
        // Ranks to refill: the failed set, and any process that did not report (it is gone or
        // stuck: the group went on without it).
        fresh = (0..n)
            .filter(|&r| failed.contains(&r) || o.results[r as usize].is_none() || o.killed[r as usize].is_some())
            .collect();
        let mut killed = 0;
        for &r in &fresh {
            if o.killed[r as usize].is_none() {
                c.kill(r as usize); // Excluded while alive: made dead, as ULFM would.
            }
            killed += 1;
        }
        let report = merge(&gb, o);
        let go_on = each(&Generation {
            report,
            killed,
            shrink_mismatch,
            newcomers,
        });
        if !go_on || no_survivor {
            break;
        }
        g += 1;
    }
    Ok(())
}

/// The run's report from what the nodes reported and the classed returns.
pub(crate) fn merge(b: &AgreeBench, o: Outcomes) -> AgreeBenchReport {
    let Outcomes {
        results,
        killed,
        seconds,
        mut merge,
        bad_lines,
        ..
    } = o;
    // A fenced node (suspected while alive, stopped by the suspecter's FENCE) is dead like a
    // killed one, but not by the user's request: a false suspicion.
    let fenced: Vec<bool> = results
        .iter()
        .map(|r| r.as_ref().is_some_and(|r| r.fenced_by.is_some()))
        .collect();
    let live: Vec<&ChildResult> = results
        .iter()
        .zip(&killed)
        .zip(&fenced)
        .filter_map(|((r, k), &f)| r.as_ref().filter(|_| k.is_none() && !f))
        .collect();
    let expected_live = b.n as usize - killed.iter().zip(&fenced).filter(|&(k, &f)| k.is_some() || f).count();
    let unfinished = (expected_live - live.iter().filter(|r| r.finished).count().min(expected_live)) as u64;
    let mut transport = TransportStats::default();
    let (mut suspicions, mut messages, mut heartbeats, mut invalid) = (0, 0, 0, 0);
    // Processes suspected while alive: those fenced, and those a live node suspected that
    // were not killed (each counted once, as a threads run counts them).
    let mut falsely: Vec<bool> = fenced.clone();
    let mut drops = DropCounters::default();
    for r in &live {
        transport.sent += r.transport[0];
        transport.received += r.transport[1];
        transport.retransmits += r.transport[2];
        transport.suspected += r.transport[3];
        transport.window_full += r.counters[0];
        transport.acks_sent += r.counters[1];
        transport.refused += r.counters[2];
        transport.refused_probes += r.counters[3];
        suspicions += r.suspected.len() as u64;
        for &p in &r.suspected {
            if let Some(f) = falsely.get_mut(p as usize)
                && killed[p as usize].is_none()
            {
                *f = true;
            }
        }
        messages += r.messages;
        heartbeats += r.heartbeats;
        invalid += r.invalid;
        drops.merge(&r.drops);
    }
    let false_suspicions = falsely.iter().filter(|&&f| f).count() as u64;
    let w = &mut merge.window;
    // Disagreements: per agreement, live returns with different outcomes (the window); as a
    // cross-check, outcome digests of a block that differ between live nodes; plus live nodes
    // that returned a different number of agreements.
    let mut digest_disagreements = 0;
    let mut mismatch = 0;
    if let Some(first) = live.first() {
        let blocks = live.iter().map(|r| r.digests.len()).max().unwrap_or(0);
        for i in 0..blocks {
            let d = first.digests.get(i);
            digest_disagreements += u64::from(live.iter().any(|r| r.digests.get(i) != d));
        }
        mismatch = u64::from(live.iter().any(|r| r.returned != first.returned));
    }
    let kill_ns = killed.iter().flatten().min().copied();
    let first_success = kill_ns.and_then(|k| w.first_success.map(|(_, t)| t.saturating_sub(k)));
    let first_suspicion =
        kill_ns.and_then(|k| crate::runtime::agree::after_kill(k, live.iter().filter_map(|r| r.first_suspect_ns)));
    AgreeBenchReport {
        classes: std::mem::take(&mut w.classes),
        disagreements: w.disagreements.max(digest_disagreements) + mismatch,
        invalid,
        unfinished,
        suspicions,
        false_suspicions,
        first_success_after_kill: first_success,
        first_suspicion_after_kill: first_suspicion,
        messages_per_agreement: messages as f64 / w.agreements.max(1) as f64,
        heartbeats,
        transport,
        drops,
        agreements: w.agreements,
        seconds,
        peak_rss_kb: live.iter().filter_map(|r| r.peak_rss_kb).max(),
        era_stored_max: live.iter().map(|r| r.max_stored).max().unwrap_or(0),
        late: w.late,
        bad_lines,
        clock_uncertainty_ns: None,
        refused_streams: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_process_is_dead_and_counted_once_as_a_false_suspicion() {
        let b = AgreeBench {
            n: 4,
            era: crate::protocol::agree::EraConfig::default(),
            transport: AgreeTransport::Udp,
            workers: 1,
            pin: false,
            warmup: 0,
            iterations: 10,
            duration: None,
            kills: vec![(3, 5)],
            stalls: Vec::new(),
            heartbeat: Duration::from_millis(10),
            suspect_after: Duration::from_millis(100),
            op_timeout: Duration::from_secs(5),
            seed: 1,
        };
        let done = |rank, suspected: Vec<u32>| ChildResult {
            rank,
            finished: true,
            suspected,
            ..ChildResult::default()
        };
        // Rank 2 was suspected by ranks 0 and 1 while alive and fenced (it did not finish);
        // rank 3 was killed as asked, and suspected too.
        let fenced = ChildResult {
            rank: 2,
            fenced_by: Some(0),
            ..ChildResult::default()
        };
        let o = Outcomes {
            results: vec![Some(done(0, vec![2, 3])), Some(done(1, vec![2])), Some(fenced), None],
            killed: vec![None, None, None, Some(1)],
            gone: vec![false; 4],
            seconds: 1.0,
            merge: Merge::new(4, window_of(&b)),
            bad_lines: 0,
        };
        let r = merge(&b, o);
        assert_eq!(r.false_suspicions, 1, "rank 2 once, the killed rank 3 not");
        assert_eq!(r.unfinished, 0, "the fenced node is dead, not unfinished");
        assert_eq!(r.suspicions, 3);
    }
}
