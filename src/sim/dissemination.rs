//! A synchronous-round driver for Han–Finkel machines ([`HanFinkel`]): machines that fail
//! stop sending, every live machine sends and accepts one message per round, and messages are
//! routed by the identities the machines currently hold (which change at reorganization).
//!
//! [`all_gather`] runs one round-robin all-gather (every live machine disseminates one item,
//! all starting at the same round) and reports how many rounds every item took to reach every
//! live machine: the quantity Theorems 1 and 2 bound.

use serde::Serialize;

use crate::protocol::Rank;
use crate::protocol::overlay::han_finkel::{HanFinkel, HfMsg, Tolerance, run_len};

/// A system of machines `0..n` (physical indices; identities may change).
pub struct Rounds {
    machines: Vec<HanFinkel>,
    /// `Some(c)`: the machine sends nothing from clock `c` on.
    fails_at: Vec<Option<u64>>,
    clock: u64,
    messages: u64,
    max_items: usize,
}

impl Rounds {
    /// `n` machines at clock 0.
    pub fn new(n: u32, tolerance: Tolerance, reorganizing: bool) -> Self {
        Self {
            machines: (0..n).map(|i| HanFinkel::new(i, n, tolerance, reorganizing)).collect(),
            fails_at: vec![None; n as usize],
            clock: 0,
            messages: 0,
            max_items: 0,
        }
    }

    /// Machine `p` fails at the start of clock `c` (sends nothing from then on).
    pub fn fail(&mut self, p: usize, c: u64) {
        self.fails_at[p] = Some(c);
    }

    fn alive(&self, p: usize) -> bool {
        self.fails_at[p].is_none_or(|c| self.clock < c)
    }

    /// The machines.
    pub fn machines(&self) -> &[HanFinkel] {
        &self.machines
    }

    /// Machine `p`, to start broadcasts.
    pub fn machine_mut(&mut self, p: usize) -> &mut HanFinkel {
        &mut self.machines[p]
    }

    /// Rounds run.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Messages sent so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// The most items one message carried.
    pub fn max_items(&self) -> usize {
        self.max_items
    }

    /// One synchronous round.
    pub fn round(&mut self) {
        let n = self.machines.len();
        let live: Vec<bool> = (0..n).map(|p| self.alive(p)).collect();
        let sends: Vec<Option<(Rank, HfMsg)>> = self
            .machines
            .iter_mut()
            .zip(&live)
            .map(|(m, &alive)| alive.then(|| m.begin_round()))
            .collect();
        // Identity -> live machine holding it (a failed machine keeps its identity until
        // someone takes it over; messages to it are lost).
        let mut by_id: Vec<Option<usize>> = vec![None; n];
        for p in (0..n).filter(|&p| live[p]) {
            if let Some(slot) = by_id.get_mut(self.machines[p].id() as usize) {
                *slot = Some(p);
            }
        }
        let mut inbox: Vec<Option<(Rank, HfMsg)>> = vec![None; n];
        for (p, s) in sends.into_iter().enumerate() {
            let Some((to, msg)) = s else { continue };
            self.messages += 1;
            self.max_items = self.max_items.max(msg.items.len());
            if let Some(Some(q)) = by_id.get(to as usize) {
                inbox[*q] = Some((self.machines[p].id(), msg));
            }
        }
        for p in (0..n).filter(|&p| live[p]) {
            let got = inbox[p].take();
            self.machines[p].end_round(got.as_ref().map(|(from, m)| (*from, m)));
        }
        self.clock += 1;
    }
}

/// One all-gather's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Gather {
    /// Rounds until every item had reached every live machine (None: not within the span).
    pub rounds: Option<u64>,
    /// Messages sent.
    pub messages: u64,
    /// The most items one message carried.
    pub max_items: usize,
}

/// `n` machines, machine `failed` (if any) dead from the start, every live machine
/// broadcasting one item at clock `start`; runs the item span and reports the rounds the
/// slowest item took (counted from `start`, inclusive).
pub fn all_gather(n: u32, start: u64, failed: Option<usize>, tolerance: Tolerance) -> Gather {
    let mut sys = Rounds::new(n, tolerance, false);
    if let Some(f) = failed {
        sys.fail(f, 0);
    }
    for _ in 0..start {
        sys.round();
    }
    let live: Vec<usize> = (0..n as usize).filter(|&p| Some(p) != failed).collect();
    for &p in &live {
        sys.machine_mut(p).broadcast(0);
    }
    let span = u64::from(sys.machines()[0].span());
    for _ in 0..span {
        sys.round();
    }
    let mut slowest = Some(0);
    'outer: for &src in &live {
        for &p in &live {
            match sys.machines()[p].known_at(src as Rank, 0) {
                Some(c) => slowest = slowest.map(|s: u64| s.max(c + 1 - start)),
                None => {
                    slowest = None;
                    break 'outer;
                }
            }
        }
    }
    Gather {
        rounds: slowest,
        messages: sys.messages(),
        max_items: sys.max_items(),
    }
}

/// What a reorganization after a single failure looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Reorg {
    /// Did every live machine agree on `(f, failtime)` before reorganizing, reorganize at the
    /// same clock, and end with the identities `0..n-1`?
    pub agreed: bool,
    /// Clock of the reorganization minus the failure's clock.
    pub rounds_after_failure: u64,
    /// Rounds an all-gather took in the reorganized system (Theorem 1 for `n − 1`).
    pub gather_after: Option<u64>,
}

/// `n` machines; machine `f` fails at the start of clock `at`; runs until every live machine
/// has reorganized, then an all-gather in the new system.
pub fn reorganize(n: u32, f: usize, at: u64) -> Reorg {
    let mut sys = Rounds::new(n, Tolerance::OneFault, true);
    sys.fail(f, at);
    let live: Vec<usize> = (0..n as usize).filter(|&p| p != f).collect();
    let limit = at + 4 * u64::from(run_len(n)) + 16;
    let mut failures = Vec::new();
    while sys.clock() < limit && live.iter().any(|&p| sys.machines()[p].reorganizations() == 0) {
        // Just before a machine reorganizes, record what it believes.
        for &p in &live {
            let m = &sys.machines()[p];
            if m.reorganizations() == 0 && m.reorganize_at() == Some(sys.clock()) {
                failures.push((m.failure(), sys.clock()));
            }
        }
        sys.round();
    }
    let done = live.iter().all(|&p| sys.machines()[p].reorganizations() == 1);
    let mut ids: Vec<Rank> = live.iter().map(|&p| sys.machines()[p].id()).collect();
    ids.sort_unstable();
    let agreed = done
        && failures.len() == live.len()
        && failures.iter().all(|x| *x == failures[0])
        && failures[0].0.is_some_and(|(ff, _)| ff as usize == f)
        && ids == (0..n - 1).collect::<Vec<_>>();
    let when = failures.first().map(|x| x.1).unwrap_or(0);
    // Theorem 1 in the reorganized system: every machine broadcasts, all reach everyone.
    let start = sys.clock();
    let seq = 1;
    for &p in &live {
        sys.machine_mut(p).broadcast(seq);
    }
    let span = u64::from(run_len(n - 1));
    for _ in 0..span {
        sys.round();
    }
    let mut slowest = Some(0u64);
    for &src in &live {
        let origin = sys.machines()[src].origin();
        for &p in &live {
            match sys.machines()[p].known_at(origin, seq) {
                Some(c) if slowest.is_some() => slowest = slowest.map(|s| s.max(c + 1 - start)),
                _ => slowest = None,
            }
        }
    }
    Reorg {
        agreed,
        rounds_after_failure: when.saturating_sub(at),
        gather_after: slowest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn theorem_1_every_n_up_to_64_every_start_round_every_source() {
        for n in 2..=64u32 {
            let l = u64::from(run_len(n));
            let mut worst = 0;
            for start in 0..l {
                let g = all_gather(n, start, None, Tolerance::None);
                let r = g.rounds.unwrap_or_else(|| panic!("n={n} start={start}: incomplete"));
                assert!(r <= l, "n={n} start={start}: {r} rounds");
                assert_eq!(
                    g.messages,
                    u64::from(n) * (start + l),
                    "one message per machine and round"
                );
                worst = worst.max(r);
            }
            // ⌈log n⌉ is also needed: dissemination at most doubles the informed set.
            assert_eq!(worst, l, "n={n}");
        }
    }

    #[test]
    fn theorem_2_every_n_up_to_64_every_start_round_source_and_failed_machine() {
        let mut needs_two_more = 0;
        for n in 3..=64u32 {
            let l = u64::from(run_len(n));
            for start in 0..l {
                for f in 0..n as usize {
                    let g = all_gather(n, start, Some(f), Tolerance::OneFault);
                    let r = g.rounds.unwrap_or_else(|| panic!("n={n} start={start} f={f}"));
                    assert!(r <= l + 2, "n={n} start={start} f={f}: {r}");
                    needs_two_more += u32::from(r == l + 2);
                }
            }
        }
        assert!(needs_two_more > 0, "the bound ⌈log n⌉ + 2 is reached");
    }

    #[test]
    fn the_papers_example_needs_six_rounds() {
        // §3: n = 10, broadcast from machine 0 started at round 3, machine 1 failed.
        let mut sys = Rounds::new(10, Tolerance::OneFault, false);
        sys.fail(1, 0);
        for _ in 0..3 {
            sys.round();
        }
        sys.machine_mut(0).broadcast(0);
        for _ in 0..6 {
            sys.round();
        }
        let last = (0..10)
            .filter(|&p| p != 1)
            .map(|p| sys.machines()[p].known_at(0, 0).unwrap() + 1 - 3)
            .max();
        assert_eq!(last, Some(6));
        // Machine 5 is the one reached last (the chart's last row).
        assert_eq!(sys.machines()[5].known_at(0, 0), Some(3 + 5));
    }

    #[test]
    fn reorganize_every_n_every_failed_machine_every_failure_round() {
        for n in 3..=64u32 {
            let l = u64::from(run_len(n));
            for f in 0..n as usize {
                for at in 0..l {
                    let r = reorganize(n, f, 2 * l + at);
                    assert!(r.agreed, "n={n} f={f} at={at}: {r:?}");
                    // Theorem 3: detection dates the failure one round early, so the
                    // reorganization falls ⌈log n⌉ + 2 rounds after the failure.
                    assert_eq!(r.rounds_after_failure, l + 2, "n={n} f={f}");
                    assert!(
                        r.gather_after.is_some_and(|g| g <= u64::from(run_len(n - 1))),
                        "n={n} f={f}"
                    );
                }
            }
        }
    }

    /// `n` machines, `f` failing at clock `fail`, machine `b` broadcasting item `seq` at clock
    /// `at` (when it is live then); runs well past the reorganization.
    fn failure_and_broadcast(n: u32, tolerance: Tolerance, f: usize, fail: u64, b: usize, at: u64) -> Rounds {
        let mut sys = Rounds::new(n, tolerance, true);
        sys.fail(f, fail);
        let end = fail.max(at) + 4 * u64::from(run_len(n)) + 16;
        while sys.clock() < end {
            if sys.clock() == at && (b != f || at < fail) {
                sys.machine_mut(b).broadcast(7);
            }
            sys.round();
        }
        sys
    }

    /// A broadcast around a failure, from any machine, the one that takes over the failed
    /// machine's identity among them: every live machine reorganizes once, drops nothing, and
    /// knows the item. (Items renamed with their machine named a machine the reorganized system
    /// does not have: messages carrying them were dropped, each drop taken for a failure, and
    /// the system reorganized again and again, down to no machine at all.)
    #[test]
    fn a_broadcast_across_a_reorganization_reorganizes_once_and_arrives() {
        for n in 3..=20u32 {
            let l = u64::from(run_len(n));
            let fail = 2 * l + 1;
            for f in 0..n as usize {
                for b in [n as usize - 1, (f + 1) % n as usize] {
                    for at in fail.saturating_sub(l + 2)..=fail + l + 2 {
                        let sys = failure_and_broadcast(n, Tolerance::OneFault, f, fail, b, at);
                        let ctx = format!("n={n} f={f} b={b} at={at}");
                        for (p, m) in sys.machines().iter().enumerate().filter(|&(p, _)| p != f) {
                            assert_eq!(m.reorganizations(), 1, "{ctx}: machine {p}");
                            assert_eq!(m.dropped(), 0, "{ctx}: machine {p}");
                            if b != f {
                                assert!(m.known_at(b as Rank, 7).is_some(), "{ctx}: machine {p}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The machine that takes the failed one's identity keeps its own items' origin: its
    /// broadcast after the reorganization is not taken for the failed machine's item of the
    /// same sequence, which every live machine had known since before the failure.
    #[test]
    fn the_successor_of_a_failed_identity_starts_items_of_its_own() {
        let n = 8u32;
        let mut sys = Rounds::new(n, Tolerance::OneFault, true);
        sys.machine_mut(1).broadcast(1);
        sys.fail(1, 6);
        while sys.machines()[7].reorganizations() == 0 {
            sys.round();
        }
        assert_eq!((sys.machines()[7].id(), sys.machines()[7].origin()), (1, 7));
        let after = sys.clock();
        sys.machine_mut(7).broadcast(1);
        for _ in 0..3 * run_len(n) {
            sys.round();
        }
        for p in (0..n as usize).filter(|&p| p != 1) {
            let m = &sys.machines()[p];
            assert!(
                m.known_at(1, 1).is_some_and(|c| c < 6),
                "machine {p}: the failed one's item"
            );
            assert!(m.known_at(7, 1).is_some_and(|c| c >= after), "machine {p}: the new one");
        }
    }

    /// §4's first strategy (`⌈log n⌉`-round forwarding, reorganizing): a broadcast started
    /// within `⌈log n⌉` rounds before the failure may be damaged, and it is started again after
    /// the reorganization: every live machine knows it in the end, whichever machine failed.
    #[test]
    fn the_first_strategy_restarts_the_broadcasts_a_failure_damaged() {
        for n in 3..=16u32 {
            let l = u64::from(run_len(n));
            let fail = 2 * l + 2;
            for f in 0..n as usize {
                for b in (0..n as usize).filter(|&b| b != f) {
                    for at in fail + 1 - l..=fail {
                        let sys = failure_and_broadcast(n, Tolerance::None, f, fail, b, at);
                        for (p, m) in sys.machines().iter().enumerate().filter(|&(p, _)| p != f) {
                            assert_eq!(m.reorganizations(), 1, "n={n} f={f} b={b} at={at} machine {p}");
                            assert!(
                                m.known_at(b as Rank, 7).is_some(),
                                "n={n} f={f} b={b} at={at}: machine {p} never learned it"
                            );
                        }
                    }
                }
            }
        }
    }
}
