//! Han–Finkel dissemination: procedures `Disseminate` (§2) and `Reorganize` (§4).
//!
//! `n` machines act in synchronous rounds; a run is `⌈log n⌉` rounds, and in round `r` of a
//! run machine `i` sends one message to `(i + 2^r) mod n` and accepts one from
//! `(i − 2^r) mod n`. A message carries everything the sender still has to forward: the
//! information it started and what it received within the last rounds (piggybacking).
//! Theorem 1: an item reaches every machine within any `⌈log n⌉` consecutive rounds, from any
//! source and any start round, for any `n`; Theorem 2: with exactly one failed machine,
//! within `⌈log n⌉ + 2` rounds. So an item is forwarded for [`HanFinkel::span`] rounds after
//! it started: `⌈log n⌉`, or `⌈log n⌉ + 2` when single faults are tolerated (§4's second
//! strategy).
//!
//! `Reorganize` (§4): a machine whose expected message does not arrive notices a failure and
//! dates it to the previous round; every message carries the earliest failure known
//! (`f`, `failtime`), the earliest time winning; every machine reorganizes at
//! `failtime + ⌈log n⌉ + 3` (Theorem 3): `n` becomes `n − 1`, machine `n − 1` takes the failed
//! machine's identity, and the round restarts at 0. New broadcasts wait while a
//! reorganization is scheduled. Broadcasts the failure may have damaged start again from every
//! holder: with `⌈log n⌉`-round forwarding (§4's first strategy) every item known from
//! `failtime − ⌈log n⌉ + 1` on ("a failure that occurs at time t could damage broadcasts
//! started as early as time t − ⌈log n⌉ + 1"), which have stopped being forwarded long before
//! the reorganization; with single-fault forwarding (the second strategy) the items still
//! being forwarded.
//!
//! An item is named by `(origin, seq)` where `origin` is the identity its machine had at the
//! start ([`HanFinkel::origin`]), which a reorganization does not change: the identity
//! machine `n − 1` takes over routes messages (§4: "destination tables might need to be
//! modified"), but the items it started before stay `n − 1`'s, which the new system still
//! accepts, and the ones it starts after are not taken for the failed machine's items of the
//! same `seq`. (Renamed with the machine, an item of `n − 1` in flight at the reorganization
//! named a machine the new system does not have: every receiver dropped the message and took
//! the silence for a failure, and the system reorganized again and again; found by an audit
//! against §4.)

use std::collections::HashMap;

use crate::protocol::Rank;
use crate::topology::ring::{backward, forward};

/// `⌈log2 n⌉`: the rounds of a run (0 for `n <= 1`).
pub fn run_len(n: u32) -> u32 {
    if n <= 1 { 0 } else { u32::BITS - (n - 1).leading_zeros() }
}

/// Machine `i`'s destination in round `r`: `(i + 2^r) mod n`.
pub fn destination(i: Rank, r: u32, n: u32) -> Rank {
    forward(i, ((1u64 << r) % u64::from(n)) as u32, n)
}

/// The machine `i` hears from in round `r`: `(i − 2^r) mod n`.
pub fn expected_source(i: Rank, r: u32, n: u32) -> Rank {
    backward(i, ((1u64 << r) % u64::from(n)) as u32, n)
}

/// One unit of disseminated information: `(origin, seq)` names it; `age` is the number of
/// rounds since its origin first sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    pub origin: Rank,
    pub seq: u32,
    pub age: u8,
}

/// The message of a round: the items to forward and the earliest failure known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HfMsg {
    pub items: Vec<Item>,
    /// `(f, failtime)`, `None` for `failtime = ∞`.
    pub fail: Option<(Rank, u64)>,
}

/// Fault tolerance of the forwarding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// Forward for `⌈log n⌉` rounds (Theorem 1).
    None,
    /// Forward for `⌈log n⌉ + 2` rounds: one failed machine tolerated (Theorem 2).
    OneFault,
}

/// One machine running `Reorganize` (which contains `Disseminate`).
#[derive(Clone, Debug)]
pub struct HanFinkel {
    i: Rank,
    n: u32,
    /// The identity this machine had at the start: the origin of the items it starts.
    origin: Rank,
    /// The machines at the start: origins are below it.
    n0: u32,
    tolerance: Tolerance,
    reorganizing: bool,
    /// Monotone, one per round (the procedure's `clock`).
    clock: u64,
    /// Round within the run.
    round: u32,
    /// Items to forward, with the clock of their first round.
    pending: Vec<(Rank, u32, u64)>,
    /// Items known, with the clock at which they became known.
    known: HashMap<(Rank, u32), u64>,
    /// Items known, with the clock at which they became known, in order.
    delivered: Vec<(Rank, u32, u64)>,
    /// Broadcasts held back while a reorganization is scheduled.
    held: Vec<u32>,
    f: Rank,
    failtime: Option<u64>,
    reorganize: Option<u64>,
    reorganizations: u32,
    dropped: u64,
}

impl HanFinkel {
    /// Machine `i` of `n`, at clock 0 and round 0. With `reorganizing`, failures detected are
    /// spread and the system reorganizes (`Reorganize`); without, only `Disseminate` runs.
    pub fn new(i: Rank, n: u32, tolerance: Tolerance, reorganizing: bool) -> Self {
        Self {
            i,
            n,
            origin: i,
            n0: n,
            tolerance,
            reorganizing,
            clock: 0,
            round: 0,
            pending: Vec::new(),
            known: HashMap::new(),
            delivered: Vec::new(),
            held: Vec::new(),
            f: 0,
            failtime: None,
            reorganize: None,
            reorganizations: 0,
            dropped: 0,
        }
    }

    /// This machine's identity (changes when it takes a failed machine's).
    pub fn id(&self) -> Rank {
        self.i
    }

    /// The origin of the items this machine starts: its identity at the start, which a
    /// reorganization does not change.
    pub fn origin(&self) -> Rank {
        self.origin
    }

    /// The number of machines it believes in.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// The procedure's clock: rounds so far.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Rounds an item is forwarded after it started.
    pub fn span(&self) -> u32 {
        run_len(self.n)
            + match self.tolerance {
                Tolerance::None => 0,
                Tolerance::OneFault => 2,
            }
    }

    /// The earliest failure known, `(f, failtime)`.
    pub fn failure(&self) -> Option<(Rank, u64)> {
        self.failtime.map(|t| (self.f, t))
    }

    /// The clock at which the scheduled reorganization happens.
    pub fn reorganize_at(&self) -> Option<u64> {
        self.reorganize
    }

    /// Reorganizations done.
    pub fn reorganizations(&self) -> u32 {
        self.reorganizations
    }

    /// Messages or items dropped as invalid (wrong sender, identifiers out of range).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The clock at which item `(origin, seq)` became known here, if it did.
    pub fn known_at(&self, origin: Rank, seq: u32) -> Option<u64> {
        self.known.get(&(origin, seq)).copied()
    }

    /// Items known so far, in the order they became known, with that clock.
    pub fn delivered(&self) -> &[(Rank, u32, u64)] {
        &self.delivered
    }

    /// Starts disseminating new information `seq` from this machine at its next round (held
    /// back while a reorganization is scheduled, §4 "Active broadcast").
    pub fn broadcast(&mut self, seq: u32) {
        if self.reorganize.is_some_and(|r| r >= self.clock) {
            self.held.push(seq);
            return;
        }
        self.start(seq);
    }

    /// Records a newly known item; false if it was known.
    fn learn(&mut self, origin: Rank, seq: u32) -> bool {
        if self.known.contains_key(&(origin, seq)) {
            return false;
        }
        self.known.insert((origin, seq), self.clock);
        self.delivered.push((origin, seq, self.clock));
        true
    }

    fn start(&mut self, seq: u32) {
        if self.learn(self.origin, seq) {
            self.pending.push((self.origin, seq, self.clock));
        }
    }

    /// The start of a round: reorganizes if it is time, then returns the round's message
    /// and its destination `(i + 2^round) mod n`.
    pub fn begin_round(&mut self) -> (Rank, HfMsg) {
        if self.reorganize == Some(self.clock) {
            if self.i == self.n - 1 {
                self.i = self.f;
            }
            let failtime = self.failtime.take().unwrap_or(self.clock);
            let damaged_from = failtime.saturating_sub(u64::from(run_len(self.n)).saturating_sub(1));
            self.reorganize = None;
            self.n -= 1;
            self.round = 0;
            self.reorganizations += 1;
            // Broadcasts the failure may have damaged start again from every holder.
            let now = self.clock;
            if self.tolerance == Tolerance::None {
                self.pending.clear();
                self.pending.extend(
                    self.delivered
                        .iter()
                        .filter(|&&(_, _, at)| at >= damaged_from)
                        .map(|&(origin, seq, _)| (origin, seq, now)),
                );
            }
            for p in &mut self.pending {
                p.2 = now;
            }
            for seq in std::mem::take(&mut self.held) {
                self.start(seq);
            }
        }
        let span = u64::from(self.span());
        let now = self.clock;
        self.pending.retain(|&(_, _, born)| now - born < span);
        let items = self
            .pending
            .iter()
            .map(|&(origin, seq, born)| Item {
                origin,
                seq,
                age: (now - born) as u8,
            })
            .collect();
        let fail = if self.reorganizing { self.failure() } else { None };
        (destination(self.i, self.round, self.n), HfMsg { items, fail })
    }

    /// The end of a round: `got` is the message accepted from `from`, if any arrived. A
    /// message from another machine than `(i − 2^round) mod n` is dropped, and counts as none.
    pub fn end_round(&mut self, got: Option<(Rank, &HfMsg)>) {
        let expected = expected_source(self.i, self.round, self.n);
        let got = got.filter(|&(from, m)| {
            let ok = from == expected && self.valid(m);
            if !ok {
                self.dropped += 1;
            }
            ok
        });
        let (newfail, newfailtime) = match got {
            None => (expected, self.clock.checked_sub(1)),
            Some((_, m)) => {
                let span = u64::from(self.span());
                for it in &m.items {
                    // Sent at age `age` this round: first sent `age` rounds ago; forwarded
                    // while younger than the span (in its last round: known, not forwarded).
                    if self.learn(it.origin, it.seq) && u64::from(it.age) + 1 < span {
                        self.pending.push((it.origin, it.seq, self.clock - u64::from(it.age)));
                    }
                }
                match m.fail {
                    Some((f, t)) => (f, Some(t)),
                    None => (0, None),
                }
            }
        };
        if self.reorganizing {
            if let Some(t) = newfailtime
                && self.failtime.is_none_or(|old| t < old)
            {
                self.failtime = Some(t);
                self.f = newfail;
            }
            if let Some(t) = self.failtime {
                self.reorganize = Some(t + u64::from(run_len(self.n)) + 3);
            }
        }
        self.clock += 1;
        self.round += 1;
        if self.round >= run_len(self.n) {
            self.round = 0;
        }
    }

    fn valid(&self, m: &HfMsg) -> bool {
        let span = self.span();
        m.items
            .iter()
            .all(|it| it.origin < self.n0 && u32::from(it.age) < span && u64::from(it.age) <= self.clock)
            && m.fail.is_none_or(|(f, t)| f < self.n && t <= self.clock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_destination_chart_for_six() {
        // §2's chart for n = 6: rows are rounds, columns sources.
        let chart = [[1, 2, 3, 4, 5, 0], [2, 3, 4, 5, 0, 1], [4, 5, 0, 1, 2, 3]];
        assert_eq!(run_len(6), 3);
        for (r, row) in chart.iter().enumerate() {
            for (i, &d) in row.iter().enumerate() {
                assert_eq!(destination(i as u32, r as u32, 6), d);
                assert_eq!(expected_source(d, r as u32, 6), i as u32);
            }
        }
        assert_eq!(
            (run_len(1), run_len(2), run_len(9), run_len(64), run_len(65)),
            (0, 1, 4, 6, 7)
        );
    }

    #[test]
    fn a_missing_message_is_a_failure_dated_one_round_earlier() {
        let mut m = HanFinkel::new(3, 8, Tolerance::OneFault, true);
        m.broadcast(7);
        let (to, msg) = m.begin_round();
        assert_eq!(to, 4);
        assert_eq!(
            msg.items,
            [Item {
                origin: 3,
                seq: 7,
                age: 0
            }]
        );
        m.end_round(Some((2, &HfMsg::default())));
        assert_eq!(m.failure(), None);
        let (to, _) = m.begin_round();
        assert_eq!(to, 5);
        m.end_round(None);
        // Round 1 expects machine 1; the clock was 1, so failtime 0.
        assert_eq!(m.failure(), Some((1, 0)));
        assert_eq!(m.reorganize_at(), Some(3 + 3));
        // A later failure time loses; an earlier one wins.
        let later = HfMsg {
            items: vec![],
            fail: Some((6, 1)),
        };
        m.begin_round();
        m.end_round(Some((7, &later)));
        assert_eq!(m.failure(), Some((1, 0)));
        // A message from the wrong sender, or naming a machine out of range, is dropped.
        m.begin_round();
        m.end_round(Some((5, &HfMsg::default())));
        assert_eq!(m.dropped(), 1);
        let bad = HfMsg {
            items: vec![Item {
                origin: 8,
                seq: 0,
                age: 0,
            }],
            fail: None,
        };
        m.begin_round();
        m.end_round(Some((1, &bad)));
        assert_eq!(m.dropped(), 2);
        // New broadcasts wait for the reorganization.
        m.broadcast(8);
        assert_eq!(m.known_at(3, 8), None);
        while m.reorganizations() == 0 {
            m.begin_round();
            m.end_round(None);
        }
        assert_eq!(m.n(), 7);
        assert!(m.known_at(3, 8).is_some());
    }
}
