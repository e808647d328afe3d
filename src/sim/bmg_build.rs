//! Building the BMG overlay from a launch tree under the §4 schedulers (BMG paper Figures
//! 2–4): phases until the ring (Algorithm 1) and the BMG (Algorithm 2) are legitimate,
//! messages sent, and the most messages received by a single process, from §4's start
//! (every output `⊥`) or from an arbitrary corrupted configuration (§3.1's transient faults).
//!
//! A run ends once the processes' states are legitimate and every process has stayed quiet
//! and legitimate for `closure_phases` phases (a few refresh periods, so every process has
//! re-run its spontaneous rules) and until every message that was in the channels when that
//! began has been consumed: closure, Lemmas A.2 and A.7. (Under the asynchronous scheduler a
//! process consumes one message a phase; where more than that keep coming, as to a node of
//! a high fan-in from quiet processes refreshing, its channels grow without end. The older
//! messages still come first, so closure waits until they are consumed, however legitimate
//! the states look meanwhile; `backlog` says how deep the channels were when the run ended.)
//! Each time a legitimate state is lost again is counted in `breaks`: from a clean start there
//! must be none; from a corrupted one, messages still in the channels may break a state that
//! only looked legitimate (its channels were not, Definition A.3).

use serde::Serialize;

use crate::protocol::overlay::Guarded;
use crate::protocol::overlay::bmg_overlay::{BmgOverlay, OverlayMsg};
use crate::protocol::overlay::repair::Mended;
use crate::protocol::overlay::ring_to_bmg::{BmgMsg, table_len};
use crate::protocol::overlay::tree_to_ring::RingMsg;
use crate::protocol::{ProtoRng, Rank};
use crate::sim::phased::{Phased, Scheduler};
use crate::topology::launch_tree::LaunchTree;

/// How a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// §4: every `Succ`, `Pred`, `CW`, `CCW` is `⊥`, channels empty.
    Clean,
    /// Every process's outputs and quiet-mode flags random, and this many random messages
    /// (random kinds, identifiers and levels, some out of range) already in the channels.
    Corrupted { messages: u32 },
}

/// Parameters of one run.
#[derive(Clone, Copy, Debug)]
pub struct BuildRun {
    pub scheduler: Scheduler,
    /// A quiet process re-runs its spontaneous rules every `refresh` phases.
    pub refresh: u32,
    pub start: Start,
    /// Give up after this many phases (the result then says "not converged").
    pub max_phases: u64,
    /// Phases run after silence to check closure.
    pub closure_phases: u64,
}

/// What one run measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Convergence {
    /// Processes.
    pub n: u32,
    /// Phases until the ring is legitimate for good (None: not within `max_phases`).
    pub ring_phases: Option<u64>,
    /// Phases until the ring and the BMG are legitimate for good.
    pub bmg_phases: Option<u64>,
    /// Phases until legitimate with every process quiet, for good.
    pub quiet_phases: Option<u64>,
    /// Times a legitimate state was lost again.
    pub breaks: u64,
    /// Messages sent until the BMG was legitimate.
    pub messages: u64,
    /// The most messages received by one process until the BMG was legitimate (Figure 3).
    pub max_received: u64,
    /// Messages dropped by processes as invalid, or sent to no process.
    pub dropped: u64,
    /// Did the configuration stay legitimate and quiet for `closure_phases`, and until every
    /// message in the channels when that began was consumed?
    pub closed: bool,
    /// The most messages waiting for one process when the run ended.
    pub backlog: u64,
}

/// A random message for a corrupted channel: any kind, identifiers up to `n + 1` (some out of
/// range), levels up to `table_len(n)` (one out of range).
fn random_msg(n: u32, rng: &mut ProtoRng) -> OverlayMsg {
    let ident = rng.below(n + 2);
    let hop = rng.below(table_len(n) as u32 + 1) as u8;
    match rng.below(6) {
        0 => OverlayMsg::Ring(RingMsg::FConnect(ident)),
        1 => OverlayMsg::Ring(RingMsg::Info(ident)),
        2 => OverlayMsg::Ring(RingMsg::AskConnect(ident)),
        3 => OverlayMsg::Ring(RingMsg::BConnect(ident)),
        4 => OverlayMsg::Bmg(BmgMsg::Up { ident, hop }),
        _ => OverlayMsg::Bmg(BmgMsg::Dn { ident, hop }),
    }
}

/// A system building the overlay: the processes, the phased driver, the legitimate target
/// and per-process bookkeeping of what is not legitimate yet.
pub struct Build {
    sys: Phased<BmgOverlay>,
    mended: Mended,
    cfg: BuildRun,
    live: Vec<bool>,
    ring_ok: Vec<bool>,
    bmg_ok: Vec<bool>,
    quiet: Vec<bool>,
    ring_bad: usize,
    bmg_bad: usize,
    loud: usize,
}

impl Build {
    /// Processes of the launch tree `t` (at least 2) started as `cfg.start` says.
    pub fn new(t: &LaunchTree, cfg: &BuildRun, rng: &mut ProtoRng) -> Self {
        let n = t.len();
        let mut nodes: Vec<BmgOverlay> = (0..n).map(|id| BmgOverlay::from_tree(t, id, cfg.refresh)).collect();
        let mut sys_msgs = Vec::new();
        if let Start::Corrupted { messages } = cfg.start {
            for p in &mut nodes {
                p.corrupt(rng);
            }
            for _ in 0..messages {
                let to = rng.below(n);
                sys_msgs.push((to, rng.other_than(to, n), random_msg(n, rng)));
            }
        }
        let mut sys = Phased::new(nodes, cfg.scheduler);
        for (to, from, m) in sys_msgs {
            sys.inject(to, from, m);
        }
        let mut b = Build {
            sys,
            mended: Mended::new(t),
            cfg: *cfg,
            live: vec![true; n as usize],
            ring_ok: Vec::new(),
            bmg_ok: Vec::new(),
            quiet: Vec::new(),
            ring_bad: 0,
            bmg_bad: 0,
            loud: 0,
        };
        b.recount();
        b
    }

    /// Recomputes every live process's status from scratch.
    fn recount(&mut self) {
        let (goal, live) = (self.mended.goal(), &self.live);
        let nodes = self.sys.nodes();
        let status = |f: &dyn Fn(&BmgOverlay) -> bool| -> Vec<bool> {
            nodes.iter().zip(live).map(|(p, &l)| !l || f(p)).collect()
        };
        self.ring_ok = status(&|p| goal.ring_ok(p));
        self.bmg_ok = status(&|p| goal.bmg_ok(p));
        self.quiet = status(&|p| p.quiet());
        let bad = |v: &[bool]| v.iter().filter(|&&x| !x).count();
        (self.ring_bad, self.bmg_bad, self.loud) = (bad(&self.ring_ok), bad(&self.bmg_ok), bad(&self.quiet));
    }

    /// Is every live process's state legitimate (ring and BMG)?
    pub fn legitimate(&self) -> bool {
        self.ring_bad + self.bmg_bad == 0
    }

    /// The launch tree as mended so far.
    pub fn tree(&self) -> &LaunchTree {
        self.mended.tree()
    }

    /// The processes.
    pub fn nodes(&self) -> &[BmgOverlay] {
        self.sys.nodes()
    }

    /// Runs until the configuration has been legitimate and quiet for `closure_phases`, or
    /// `max_phases` more phases have passed; phases and counts are measured from the call.
    pub fn converge(&mut self) -> Convergence {
        let (phase0, sent0) = (self.sys.phase(), self.sys.sent());
        let recv0: Vec<u64> = (0..self.live.len() as u32).map(|p| self.sys.received(p)).collect();
        let dropped0 = self.dropped();
        let mut c = Convergence {
            n: self.live.iter().filter(|&&l| l).count() as u32,
            ..Convergence::default()
        };
        let mut quiet_at = None;
        // Per live process, the consumptions after which every message that was in its
        // channels when the quiet window began is consumed (FIFO: they come first).
        let mut owed: Vec<u64> = Vec::new();
        let mut was_legit = false;
        let goal = self.mended.goal();
        while self.sys.phase() - phase0 < self.cfg.max_phases {
            let (ring_ok, bmg_ok, quiet) = (&mut self.ring_ok, &mut self.bmg_ok, &mut self.quiet);
            let (ring_bad, bmg_bad, loud) = (&mut self.ring_bad, &mut self.bmg_bad, &mut self.loud);
            self.sys.step(|i, p| {
                let (r, b, q) = (goal.ring_ok(p), goal.bmg_ok(p), p.quiet());
                for (flag, now, count) in [
                    (&mut ring_ok[i], r, &mut *ring_bad),
                    (&mut bmg_ok[i], b, &mut *bmg_bad),
                    (&mut quiet[i], q, &mut *loud),
                ] {
                    if *flag != now {
                        *flag = now;
                        if now {
                            *count -= 1;
                        } else {
                            *count += 1;
                        }
                    }
                }
            });
            let phase = self.sys.phase() - phase0;
            c.ring_phases = match (self.ring_bad, c.ring_phases) {
                (0, None) => Some(phase),
                (0, at) => at,
                _ => None,
            };
            let legit = self.ring_bad + self.bmg_bad == 0;
            if legit && c.bmg_phases.is_none() {
                c.bmg_phases = Some(phase);
                c.messages = self.sys.sent() - sent0;
                c.max_received = (0..self.live.len())
                    .map(|p| self.sys.received(p as u32) - recv0[p])
                    .max()
                    .unwrap_or(0);
            }
            if !legit {
                c.bmg_phases = None;
                c.breaks += u64::from(was_legit);
            }
            was_legit = legit;
            quiet_at = match (legit && self.loud == 0, quiet_at) {
                (true, None) => {
                    owed = (0..self.live.len() as u32)
                        .map(|p| self.sys.received(p) + self.sys.queued(p))
                        .collect();
                    Some(phase)
                }
                (true, at) => at,
                (false, _) => None,
            };
            let consumed = |sys: &Phased<BmgOverlay>, live: &[bool]| {
                owed.iter()
                    .enumerate()
                    .all(|(p, &o)| !live[p] || sys.received(p as u32) >= o)
            };
            if let Some(at) = quiet_at
                && phase >= at + self.cfg.closure_phases
                && consumed(&self.sys, &self.live)
            {
                c.quiet_phases = Some(at);
                c.closed = true;
                break;
            }
        }
        c.dropped = self.dropped() - dropped0;
        c.backlog = (0..self.live.len() as u32)
            .filter(|&p| self.live[p as usize])
            .map(|p| self.sys.queued(p))
            .max()
            .unwrap_or(0);
        c
    }

    fn dropped(&self) -> u64 {
        self.sys.lost() + self.sys.nodes().iter().map(BmgOverlay::dropped).sum::<u64>()
    }

    /// Process `dead` crashes for good (a permanent crash, outside the paper's model
    /// of transient faults), repaired as [`Mended`] says (the runtime's repair, the same
    /// code): the launcher's tree is mended, every survivor learns it at once (on the runtime
    /// by a failure notice, [`crate::protocol::overlay::failure_notice`]) and keeps its
    /// outputs, which the algorithms then repair as any transient fault. Errors if `dead` is
    /// not in the tree or is the last process.
    pub fn crash(&mut self, dead: Rank) -> Result<(), String> {
        self.mended.excise(dead)?;
        self.sys.crash(dead);
        self.live[dead as usize] = false;
        for p in (0..self.live.len() as u32).filter(|&p| self.live[p as usize]) {
            self.mended.reattach(self.sys.node_mut(p));
        }
        self.recount();
        Ok(())
    }
}

/// Runs Algorithms 1 and 2 on the launch tree `t` (at least 2 processes) until converged.
pub fn run(t: &LaunchTree, cfg: &BuildRun, rng: &mut ProtoRng) -> Convergence {
    Build::new(t, cfg, rng).converge()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::launch_tree::LaunchShape;

    fn clean(s: Scheduler) -> BuildRun {
        BuildRun {
            scheduler: s,
            refresh: 16,
            start: Start::Clean,
            max_phases: 100_000,
            closure_phases: 48,
        }
    }

    fn tree(shape: LaunchShape, seed: u64) -> LaunchTree {
        LaunchTree::build(shape, 1 << 20, &mut ProtoRng::new(seed)).unwrap()
    }

    /// A star whose leaves, quiet, refresh faster than the asynchronous scheduler lets its
    /// centre consume (one message a phase): the centre's channels grow without end. The run
    /// is not reported closed before the messages waiting when its states became legitimate
    /// and quiet are consumed (it was at once, with 11 617 waiting), and when it is, its
    /// backlog shows the growth. With a slower refresh the same star closes with its channels
    /// drained.
    #[test]
    fn a_flooded_centre_is_not_closed_before_its_older_messages_are_consumed() {
        let star = |k: u32| LaunchTree::from_parents((0..=k).map(|p| (p > 0).then_some(0)).collect()).unwrap();
        let at = |k: u32, refresh: u32, max_phases: u64| {
            let cfg = BuildRun {
                refresh,
                max_phases,
                ..clean(Scheduler::Asynchronous)
            };
            run(&star(k), &cfg, &mut ProtoRng::new(1))
        };
        let flooded = at(24, 4, 6000);
        assert!(!flooded.closed && flooded.backlog > 1000, "{flooded:?}");
        let later = at(24, 4, 100_000);
        assert!(
            later.closed && later.backlog > flooded.backlog,
            "{later:?} after {flooded:?}"
        );
        let calm = at(24, 256, 6000);
        assert!(calm.closed && calm.backlog < 24, "{calm:?}");
    }

    #[test]
    fn synchronous_binomial_ring_in_five_phases() {
        // §4: 4 synchronous phases on a binomial tree, counting message hops (Info, Info,
        // Ask_Connect, B_Connect); the first phase here only runs the spontaneous rules.
        for depth in 2..=10 {
            let t = tree(LaunchShape::Binomial { depth }, 1);
            let c = run(&t, &clean(Scheduler::Synchronous), &mut ProtoRng::new(1));
            assert_eq!(c.ring_phases, Some(5), "depth {depth}");
            assert!(c.closed && c.dropped == 0 && c.breaks == 0);
            assert!(c.bmg_phases.unwrap() > 5);
        }
    }

    #[test]
    fn synchronous_binary_ring_grows_with_depth() {
        let mut last = 0;
        for depth in 1..=9 {
            let t = tree(LaunchShape::Binary { depth }, 1);
            let c = run(&t, &clean(Scheduler::Synchronous), &mut ProtoRng::new(1));
            let ring = c.ring_phases.unwrap();
            // The leftmost leaf's Info climbs `depth` levels to the root, then Ask_Connect
            // and B_Connect: O(log N) (§4).
            assert_eq!(ring, u64::from(depth) + 3, "depth {depth}");
            assert!(ring > last && c.closed && c.breaks == 0);
            last = ring;
            // The BMG needs O(log N) more phases after the ring.
            let extra = c.bmg_phases.unwrap() - ring;
            assert!(extra <= 2 * u64::from(depth + 2), "depth {depth}: {extra}");
        }
    }

    #[test]
    fn asynchronous_binomial_is_slower_than_binary_of_same_size() {
        let a = BuildRun {
            scheduler: Scheduler::Asynchronous,
            ..clean(Scheduler::Asynchronous)
        };
        let bin = run(&tree(LaunchShape::Binomial { depth: 9 }, 1), &a, &mut ProtoRng::new(1));
        let bry = run(&tree(LaunchShape::Binary { depth: 8 }, 1), &a, &mut ProtoRng::new(1));
        assert!(bin.closed && bry.closed);
        assert!(bin.bmg_phases.unwrap() > bry.bmg_phases.unwrap());
        assert!(bin.max_received > bry.max_received, "Figure 3: {bin:?} vs {bry:?}");
    }

    #[test]
    fn repairs_itself_after_permanent_crashes() {
        for s in [Scheduler::Synchronous, Scheduler::Asynchronous] {
            for (shape, dead) in [
                (LaunchShape::Binomial { depth: 6 }, [0u32, 1, 63]),
                (LaunchShape::Binary { depth: 5 }, [0, 2, 40]),
            ] {
                let t = tree(shape, 1);
                let mut b = Build::new(&t, &clean(s), &mut ProtoRng::new(1));
                assert!(b.converge().closed);
                let mut n = t.len();
                for d in dead {
                    assert!(b.legitimate());
                    b.crash(d).unwrap();
                    assert!(!b.legitimate(), "a crash breaks the ring");
                    n -= 1;
                    let c = b.converge();
                    assert!(c.closed && c.n == n, "{s:?} {shape:?} dead {d}: {c:?}");
                }
                assert!(b.crash(dead[0]).is_err());
            }
        }
    }

    #[test]
    fn self_stabilizes_from_corrupted_configurations() {
        let mut rng = ProtoRng::new(11);
        for seed in 0..60u64 {
            let shape = match seed % 3 {
                0 => LaunchShape::Binary {
                    depth: 1 + (seed % 5) as u32,
                },
                1 => LaunchShape::Binomial {
                    depth: 1 + (seed % 6) as u32,
                },
                _ => LaunchShape::Random {
                    depth: 1 + (seed % 4) as u32,
                    degree: 3,
                },
            };
            let t = tree(shape, seed);
            if t.len() < 2 {
                continue;
            }
            for s in [Scheduler::Synchronous, Scheduler::Asynchronous] {
                // The refresh leaves room for the introductions a corrupted state sets off:
                // with a refresh of 8 phases, §4's asynchronous scheduler (one message per
                // process and phase) falls behind and the backlog grows without bound.
                let cfg = BuildRun {
                    start: Start::Corrupted { messages: 4 * t.len() },
                    refresh: 64,
                    closure_phases: 192,
                    max_phases: 200_000,
                    ..clean(s)
                };
                let c = run(&t, &cfg, &mut rng);
                assert!(c.closed, "seed {seed} {s:?} n={}: {c:?}", t.len());
                assert!(c.quiet_phases.unwrap() >= c.bmg_phases.unwrap());
            }
        }
    }
}
