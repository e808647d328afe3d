//! BFB: Buntinas' fault-tolerant broadcast (Corrected Gossip §IV.B.2), the restarting baseline.
//!
//! The root disseminates along a binomial tree over its current *live view*: the ranks not in
//! its excluded set, numbered by position. Tree messages carry the epoch, the excluded set and
//! the range of positions the receiver is responsible for ("each message contains the
//! information about the children in the next levels"), so every receiver computes its own
//! children. Leaves acknowledge to their parent, inner nodes once all their children have; the
//! root is done when all its children have acknowledged. A process whose child is suspected by
//! the failure detector sends NACK(epoch, dead rank) toward the root at once (inner processes
//! forward it); the root, on a NACK of its current epoch, excludes the dead rank, increments
//! the epoch and restarts the whole operation on the smaller tree. Messages of older epochs are
//! ignored; a process delivers on its first tree message of any epoch and re-forwards in every
//! newer epoch.
//!
//! The tree over positions `[lo, hi)` is the in-order binomial tree: the process at `lo` sends
//! to `mid = lo + ⌈(hi − lo)/2⌉` (responsible for `[mid, hi)`), then halves `[lo, mid)` the
//! same way, so its first child has the largest subtree. Fault-free with `N = 2^k`, the last
//! process is colored at `k(2o + L)` and the root has every acknowledgment at
//! `T_BFB = 2(2o + L)·k` ([`BfbShared::t_bfb`]); `2(N − 1)` messages for any `N`.
//!
//! **Capacity.** The excluded set travels inline in every tree message (a `Copy` message), at
//! most [`MAX_EXCLUDED`] ranks. When a restart would need more, the root *overflows*: it stops
//! restarting and never completes ([`Bfb::overflowed`]); processes that the last epochs did not
//! reach stay uncolored, and the simulator counts them (`uncolored_live`).

use std::fmt;

use crate::model::{LogP, Time};
use crate::protocol::{Action, Ctx, Message, Phase, ProtoRng, Protocol, Rank, SharedInfo};

/// The most ranks the excluded set (and thus the number of restarts) can hold.
pub const MAX_EXCLUDED: usize = 32;

/// Configuration shared by all processes of a BFB broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BfbShared {
    /// Number of processes `N`.
    pub n: u32,
    /// LogP parameters, for the closed form [`BfbShared::t_bfb`].
    pub logp: LogP,
}

impl BfbShared {
    /// A BFB broadcast over `n` processes.
    pub fn new(n: u32, logp: LogP) -> Self {
        Self { n, logp }
    }

    /// §IV.B.2's minimal latency `T_BFB = 2(2o + L)·⌈log2 N⌉`: down the binomial tree and back
    /// up. Exactly the fault-free completion time at the root when `N` is a power of two; an
    /// upper bound otherwise.
    pub fn t_bfb(&self) -> Time {
        2 * self.logp.hop() * Time::from(ceil_log2(self.n))
    }
}

impl SharedInfo for BfbShared {
    fn uses_failure_detector(&self) -> bool {
        true
    }
}

/// `⌈log2 s⌉`: the number of children of a process responsible for `s` positions.
fn ceil_log2(s: u32) -> u32 {
    if s <= 1 { 0 } else { u32::BITS - (s - 1).leading_zeros() }
}

/// The excluded set of an epoch: ranks known dead, sorted, inline (at most [`MAX_EXCLUDED`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Excluded {
    len: u8,
    ranks: [Rank; MAX_EXCLUDED],
}

impl Excluded {
    /// The empty set (epoch 0).
    pub const EMPTY: Excluded = Excluded {
        len: 0,
        ranks: [0; MAX_EXCLUDED],
    };

    /// The ranks, increasing.
    pub fn as_slice(&self) -> &[Rank] {
        &self.ranks[..usize::from(self.len).min(MAX_EXCLUDED)]
    }

    /// `None` if `ranks` does not fit.
    pub fn from_slice(ranks: &[Rank]) -> Option<Self> {
        let mut e = Self::EMPTY;
        e.ranks.get_mut(..ranks.len())?.copy_from_slice(ranks);
        e.len = ranks.len() as u8;
        Some(e)
    }

    /// Well formed for `n` processes: in capacity, strictly increasing, never the root.
    pub fn is_valid(&self, n: u32) -> bool {
        let s = self.as_slice();
        usize::from(self.len) <= MAX_EXCLUDED && s.iter().all(|&r| r > 0 && r < n) && s.windows(2).all(|w| w[0] < w[1])
    }
}

impl fmt::Debug for Excluded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.as_slice()).finish()
    }
}

/// A BFB message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BfbMsg {
    /// The payload in `epoch`; the receiver sits at position `lo` of the live view (all ranks
    /// but `excluded`) and is responsible for positions `[lo, hi)`.
    Tree {
        epoch: u32,
        lo: u32,
        hi: u32,
        excluded: Excluded,
    },
    /// The sender's whole subtree of `epoch` has the payload.
    Ack { epoch: u32 },
    /// `dead` is dead and was part of `epoch`'s tree: restart without it.
    Nack { epoch: u32, dead: Rank },
}

impl Message for BfbMsg {
    fn phase(&self) -> Phase {
        match self {
            BfbMsg::Tree { .. } => Phase::Dissemination,
            BfbMsg::Ack { .. } | BfbMsg::Nack { .. } => Phase::Control,
        }
    }
    fn label(&self) -> &'static str {
        match self {
            BfbMsg::Tree { .. } => "tree",
            BfbMsg::Ack { .. } => "ack",
            BfbMsg::Nack { .. } => "nack",
        }
    }
}

/// One process of a BFB broadcast.
#[derive(Clone, Debug)]
pub struct Bfb {
    /// The payload has arrived (or this is the root).
    delivered: bool,
    /// Taking part in `epoch` (the root from the start).
    joined: bool,
    epoch: u32,
    /// Who sent this epoch's tree message (unused at the root).
    parent: Rank,
    /// This process's range of positions in the current epoch.
    lo: u32,
    hi: u32,
    /// Children not yet sent to are the halvings of `[lo, next_hi)`.
    next_hi: u32,
    /// Bit `i`: the `i`-th child (in send order) has acknowledged this epoch.
    acked: u64,
    ack_sent: bool,
    /// A NACK of the current epoch waiting to be sent, and whether one was queued at all
    /// (one per epoch reaches the root unless a process on the way dies, which its own parent
    /// then reports).
    nack: Option<Rank>,
    nacked: bool,
    /// The current epoch's excluded set, increasing.
    excluded: Vec<Rank>,
    /// Ranks the failure detector suspects (all dead: the modeled detector is perfect).
    suspected: Vec<Rank>,
    /// Root only: every child of the current epoch has acknowledged.
    complete: bool,
    /// Root only: a restart would exceed [`MAX_EXCLUDED`]; no more restarts.
    overflowed: bool,
}

impl Bfb {
    /// The current epoch (the root's number of restarts).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Root: has every live process of the current epoch acknowledged? (`false` elsewhere.)
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// Root: did a restart need more than [`MAX_EXCLUDED`] excluded ranks? The root then keeps
    /// its last epoch and never completes.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The current epoch's excluded ranks, increasing.
    pub fn excluded(&self) -> &[Rank] {
        &self.excluded
    }

    /// The rank at `pos` of the live view (`pos` below `n − |excluded|`).
    fn rank_at(&self, pos: u32) -> Rank {
        let mut r = pos;
        for &e in &self.excluded {
            if e <= r {
                r += 1;
            } else {
                break;
            }
        }
        r
    }

    /// The position of `rank` in the live view; `None` if it is excluded.
    fn pos_of(&self, rank: Rank) -> Option<u32> {
        let below = self.excluded.partition_point(|&e| e < rank);
        (self.excluded.get(below) != Some(&rank)).then(|| rank - below as u32)
    }

    /// Number of children in the current epoch.
    fn children(&self) -> u32 {
        ceil_log2(self.hi - self.lo)
    }

    /// Index (in send order) of the child at position `pos`, if it is one.
    fn child_index(&self, pos: u32) -> Option<u32> {
        let (lo, mut hi) = (self.lo, self.hi);
        let mut i = 0;
        while hi - lo > 1 {
            let mid = lo + (hi - lo).div_ceil(2);
            if mid == pos {
                return Some(i);
            }
            hi = mid;
            i += 1;
        }
        None
    }

    /// Index of `rank` among the current children, if it is one.
    fn child_index_of(&self, rank: Rank) -> Option<u32> {
        self.pos_of(rank).and_then(|p| self.child_index(p))
    }

    /// Children already sent to (or skipped as known dead) this epoch.
    fn handled(&self) -> u32 {
        self.children() - ceil_log2(self.next_hi - self.lo)
    }

    fn all_acked(&self) -> bool {
        let k = self.children();
        self.next_hi - self.lo <= 1 && self.acked == (1u64 << k) - 1
    }

    fn is_root(&self, cx: &Ctx<'_, BfbShared>) -> bool {
        cx.rank == 0
    }

    /// Takes part in `epoch` for positions `[lo, hi)` of the view without `excluded`.
    fn join(&mut self, cx: &Ctx<'_, BfbShared>, epoch: u32, parent: Rank, lo: u32, hi: u32) {
        self.joined = true;
        self.epoch = epoch;
        self.parent = parent;
        (self.lo, self.hi, self.next_hi) = (lo, hi, hi);
        self.acked = 0;
        self.ack_sent = false;
        self.nack = None;
        self.nacked = false;
        // A child already known dead: report it now (it will not be sent to).
        let known_dead = self
            .suspected
            .iter()
            .copied()
            .find(|&s| self.child_index_of(s).is_some());
        if let Some(d) = known_dead {
            if self.is_root(cx) {
                // Only when it did not fit in the excluded set.
                self.overflowed = true;
            } else {
                self.queue_nack(d);
            }
        }
        if self.is_root(cx) && self.children() == 0 {
            self.complete = true;
        }
    }

    fn queue_nack(&mut self, dead: Rank) {
        if !self.nacked {
            self.nacked = true;
            self.nack = Some(dead);
        }
    }

    /// Root: exclude `dead` (and every other rank it suspects) and start a new epoch.
    fn restart(&mut self, cx: &Ctx<'_, BfbShared>, dead: Rank) {
        let mut add: Vec<Rank> = self.suspected.clone();
        add.push(dead);
        add.retain(|r| self.excluded.binary_search(r).is_err());
        add.sort_unstable();
        add.dedup();
        if self.excluded.len() + add.len() > MAX_EXCLUDED {
            self.overflowed = true;
            return;
        }
        self.excluded.extend_from_slice(&add);
        self.excluded.sort_unstable();
        let m = cx.n - self.excluded.len() as u32;
        self.join(cx, self.epoch + 1, 0, 0, m);
    }

    /// A child that has not acknowledged this epoch is dead: report or restart.
    fn child_dead(&mut self, cx: &Ctx<'_, BfbShared>, dead: Rank) {
        let Some(i) = self.child_index_of(dead) else {
            return;
        };
        if self.acked >> i & 1 == 1 {
            return;
        }
        if self.is_root(cx) {
            if !self.complete && !self.overflowed {
                self.restart(cx, dead);
            }
        } else {
            self.queue_nack(dead);
        }
    }
}

impl Protocol for Bfb {
    type Shared = BfbShared;
    type Msg = BfbMsg;

    fn new(_cx: &Ctx<'_, BfbShared>) -> Self {
        Self {
            delivered: false,
            joined: false,
            epoch: 0,
            parent: 0,
            lo: 0,
            hi: 0,
            next_hi: 0,
            acked: 0,
            ack_sent: false,
            nack: None,
            nacked: false,
            excluded: Vec::new(),
            suspected: Vec::new(),
            complete: false,
            overflowed: false,
        }
    }

    fn start(&mut self, cx: &Ctx<'_, BfbShared>) {
        if self.is_root(cx) && !self.joined {
            self.delivered = true;
            self.join(cx, 0, 0, 0, cx.n);
        }
    }

    fn on_message(&mut self, cx: &Ctx<'_, BfbShared>, from: Rank, msg: &BfbMsg) {
        if from >= cx.n || from == cx.rank {
            return;
        }
        match *msg {
            BfbMsg::Tree {
                epoch,
                lo,
                hi,
                excluded,
            } => {
                // The root is nobody's child; older epochs and duplicates change nothing (a
                // joined process has delivered already).
                if self.is_root(cx) || (self.joined && epoch <= self.epoch) || !excluded.is_valid(cx.n) {
                    return;
                }
                // A valid excluded set holds fewer than `n` ranks, all below `n`.
                let e = excluded.as_slice();
                let m = cx.n - e.len() as u32;
                let below = e.partition_point(|&x| x < cx.rank);
                if e.get(below) == Some(&cx.rank) || cx.rank - below as u32 != lo || lo >= hi || hi > m {
                    return;
                }
                self.delivered = true;
                self.excluded.clear();
                self.excluded.extend_from_slice(e);
                self.join(cx, epoch, from, lo, hi);
            }
            BfbMsg::Ack { epoch } => {
                if !self.joined || epoch != self.epoch {
                    return;
                }
                let Some(i) = self.child_index_of(from) else {
                    return;
                };
                if i >= self.handled() {
                    // Not sent to yet: not a genuine acknowledgment.
                    return;
                }
                self.acked |= 1 << i;
                if self.is_root(cx) && self.all_acked() {
                    self.complete = true;
                }
            }
            BfbMsg::Nack { epoch, dead } => {
                if !self.joined || epoch != self.epoch || dead == 0 || dead >= cx.n || dead == cx.rank {
                    return;
                }
                if self.is_root(cx) {
                    if !self.complete && !self.overflowed && self.excluded.binary_search(&dead).is_err() {
                        self.restart(cx, dead);
                    }
                } else {
                    self.queue_nack(dead);
                }
            }
        }
    }

    fn poll_send(&mut self, cx: &Ctx<'_, BfbShared>, _rng: &mut ProtoRng) -> Action<BfbMsg> {
        if !self.joined {
            return Action::Wait;
        }
        if let Some(dead) = self.nack.take() {
            return Action::Send {
                to: self.parent,
                msg: BfbMsg::Nack {
                    epoch: self.epoch,
                    dead,
                },
            };
        }
        while self.next_hi - self.lo > 1 {
            let hi = self.next_hi;
            let mid = self.lo + (hi - self.lo).div_ceil(2);
            self.next_hi = mid;
            let to = self.rank_at(mid);
            if self.suspected.contains(&to) {
                // Known dead: already reported at `join`; never acknowledges.
                continue;
            }
            let excluded = Excluded::from_slice(&self.excluded).unwrap_or(Excluded::EMPTY);
            return Action::Send {
                to,
                msg: BfbMsg::Tree {
                    epoch: self.epoch,
                    lo: mid,
                    hi,
                    excluded,
                },
            };
        }
        if !self.is_root(cx) && !self.ack_sent && self.all_acked() {
            self.ack_sent = true;
            return Action::Send {
                to: self.parent,
                msg: BfbMsg::Ack { epoch: self.epoch },
            };
        }
        Action::Wait
    }

    fn on_suspect(&mut self, cx: &Ctx<'_, BfbShared>, peer: Rank) {
        if peer >= cx.n || peer == cx.rank || peer == 0 {
            return;
        }
        if !self.suspected.contains(&peer) {
            self.suspected.push(peer);
        }
        if self.joined {
            self.child_dead(cx, peer);
        }
    }

    fn delivered(&self) -> bool {
        self.delivered
    }

    fn colored_by_dissemination(&self) -> bool {
        self.delivered
    }

    /// The root is finished once complete (or overflowed with nothing left to send). Any other
    /// process may be asked to re-forward by a later epoch and never knows the root is done,
    /// so it never reports finished.
    fn finished(&self, cx: &Ctx<'_, BfbShared>) -> bool {
        self.is_root(cx) && (self.complete || (self.overflowed && self.next_hi - self.lo <= 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{DeadBefore, Engine, Faults, RunStats};

    fn engine(n: u32, logp: LogP, faults: &Faults, seed: u64) -> (RunStats, Engine<Bfb>) {
        let mut e = Engine::<Bfb>::new(n, logp);
        let s = e.run(&BfbShared::new(n, logp), faults, seed, 100_000_000);
        assert!(!s.aborted, "n={n} seed={seed}: aborted at the event cap");
        (s, e)
    }

    /// The fault-free schedule derived by hand from the in-order binomial tree: the process at
    /// `lo` colored at `a` sends its `i`-th child's message at `a + i·o`, received at
    /// `a + i·o + 2o + L`; an acknowledgment sent at `s` arrives at `s + o + L` and is received
    /// for `o` in arrival order; a process acknowledges once its sender is free and its last
    /// child's acknowledgment is received. Returns (last coloring, root's completion).
    fn reference(n: u32, logp: LogP) -> (Time, Time) {
        let n = n as usize;
        let mut arrival = vec![0; n];
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut stack = vec![(0usize, n)];
        while let Some((lo, mut hi)) = stack.pop() {
            while hi - lo > 1 {
                let mid = lo + (hi - lo).div_ceil(2);
                arrival[mid] = arrival[lo] + logp.hop() + logp.o * children[lo].len() as Time;
                children[lo].push(mid);
                stack.push((mid, hi));
                hi = mid;
            }
        }
        let mut ready = vec![0; n];
        // Children sit at higher positions than their parent.
        for r in (0..n).rev() {
            let mut at: Vec<Time> = children[r].iter().map(|&c| ready[c] + logp.o + logp.l).collect();
            at.sort_unstable();
            let mut free = arrival[r];
            for a in at {
                free = free.max(a) + logp.o;
            }
            ready[r] = free.max(arrival[r] + logp.o * children[r].len() as Time);
        }
        (arrival.iter().copied().max().unwrap_or(0), ready[0])
    }

    /// §IV.B.2: fault-free, `2(N − 1)` messages, no restart; the latency follows the tree
    /// schedule exactly, which for `N = 2^k` is `k(2o + L)` down and `T_BFB = 2k(2o + L)` in
    /// total.
    #[test]
    fn fault_free_messages_and_exact_latency() {
        for (l, o) in [(2, 1), (0, 1), (1, 1), (5, 1), (4, 2), (6, 3)] {
            let logp = LogP { l, o };
            for n in (1..=70).chain([100, 1000, 1023, 1024, 1025, 4096]) {
                let what = format!("n={n} L={l} o={o}");
                let (s, e) = engine(n, logp, &Faults::default(), 1);
                assert_eq!(s.uncolored_live, 0, "{what}");
                assert_eq!(s.messages, 2 * u64::from(n - 1), "{what}");
                let (col, done) = reference(n, logp);
                assert_eq!((s.coloring, s.quiescence), (col, done), "{what}");
                let t_bfb = BfbShared::new(n, logp).t_bfb();
                assert_eq!(Ok(t_bfb), crate::model::baselines::t_bfb(n.into(), logp), "{what}");
                assert_eq!(s.messages, crate::model::baselines::bfb_messages(n.into()), "{what}");
                assert!(s.quiescence <= t_bfb, "{what}");
                if n.is_power_of_two() {
                    let k = Time::from(n.trailing_zeros());
                    assert_eq!(s.coloring, k * logp.hop(), "{what}");
                    assert_eq!(s.quiescence, t_bfb, "{what}");
                    assert_eq!(t_bfb, 2 * k * logp.hop(), "{what}");
                }
                let root = e.node(0);
                assert!(root.complete() && !root.overflowed() && root.epoch() == 0, "{what}");
                let cx = Ctx {
                    rank: 0,
                    n,
                    now: 0,
                    shared: &BfbShared::new(n, logp),
                };
                assert!(root.finished(&cx), "{what}");
            }
        }
    }

    /// Every dead process lies in the tree, so each is reported (restarts) until the root's
    /// excluded set is exactly the dead set; then every live process is colored.
    #[test]
    fn dead_before_restarts_and_colors_every_live_process() {
        let logp = LogP::default();
        for n in [10u32, 100, 1000] {
            for dead in 1..=6 {
                for seed in 0..15 {
                    let faults = Faults {
                        before: DeadBefore::Count(dead),
                        ..Faults::default()
                    };
                    let (s, e) = engine(n, logp, &faults, seed);
                    let what = format!("n={n} dead={dead} seed={seed}");
                    assert_eq!(s.uncolored_live, 0, "{what}");
                    assert!(!s.aborted, "{what}");
                    let root = e.node(0);
                    assert!(root.complete() && !root.overflowed(), "{what}");
                    assert!((1..=dead).contains(&root.epoch()), "{what}: epoch {}", root.epoch());
                    let dead_set: Vec<Rank> = (0..n).filter(|&r| e.death_time(r) == 0).collect();
                    assert_eq!(root.excluded(), &dead_set[..], "{what}");
                }
            }
        }
    }

    #[test]
    fn online_failures_restart_and_color_every_live_process() {
        let logp = LogP::default();
        let mut restarted = 0;
        for n in [64u32, 1000] {
            let horizon = BfbShared::new(n, logp).t_bfb();
            for seed in 0..30 {
                let faults = Faults {
                    before: DeadBefore::Count(2),
                    online: 3,
                    online_horizon: horizon,
                    ..Faults::default()
                };
                let (s, e) = engine(n, logp, &faults, seed);
                let what = format!("n={n} seed={seed}");
                assert_eq!(s.uncolored_live, 0, "{what}");
                let root = e.node(0);
                assert!(root.complete(), "{what}");
                assert!(root.epoch() >= 1, "{what}");
                assert!(
                    root.excluded().iter().all(|&r| e.death_time(r) != Time::MAX),
                    "{what}: excluded a live process"
                );
                restarted += u32::from(root.epoch() > 2);
            }
        }
        assert!(
            restarted > 0,
            "online failures never caused a restart beyond the dead-before ones"
        );
    }

    /// The root's first child (position `N/2`) dies after forwarding to part of its subtree:
    /// the root suspects it, restarts once without it, and everyone else is colored.
    #[test]
    fn inner_node_dying_mid_forwarding_causes_one_restart() {
        let logp = LogP::default();
        let n = 64;
        // Rank 32 is colored at 2o + L = 4 and sends to its children at 4, 5, ...
        let faults = Faults {
            online_list: vec![(32, 6)],
            detect_delay: 10,
            ..Faults::default()
        };
        let (s, e) = engine(n, logp, &faults, 1);
        let root = e.node(0);
        assert_eq!(s.uncolored_live, 0);
        assert!(root.complete());
        assert_eq!(root.epoch(), 1);
        assert_eq!(root.excluded(), &[32]);
        // Suspected at 6 + 10 = 16, when the root restarts; epoch 1 then runs exactly like a
        // fault-free operation over the 63 live processes (epoch-0 stragglers delay nothing).
        assert_eq!(s.quiescence, 16 + reference(63, logp).1, "{s:?}");
    }

    /// More dead processes than [`MAX_EXCLUDED`]: the root overflows, never completes, and the
    /// processes it did not reach are counted uncolored.
    #[test]
    fn overflow_stops_restarts_and_is_visible() {
        let logp = LogP::default();
        let n = 256;
        let mut uncolored = 0;
        for seed in 0..20 {
            let faults = Faults {
                before: DeadBefore::Count(60),
                ..Faults::default()
            };
            let (s, e) = engine(n, logp, &faults, seed);
            let root = e.node(0);
            assert!(!s.aborted, "seed {seed}");
            assert!(root.overflowed() && !root.complete(), "seed {seed}");
            assert!(root.excluded().len() <= MAX_EXCLUDED, "seed {seed}");
            assert!(root.epoch() as usize <= MAX_EXCLUDED, "seed {seed}");
            let cx = Ctx {
                rank: 0,
                n,
                now: 0,
                shared: &BfbShared::new(n, logp),
            };
            assert!(root.finished(&cx), "seed {seed}");
            let never: u32 = (0..n)
                .filter(|&r| e.death_time(r) == Time::MAX && !e.node(r).delivered())
                .count() as u32;
            assert_eq!(s.uncolored_live, never, "seed {seed}");
            uncolored += s.uncolored_live;
        }
        assert!(uncolored > 0);
    }

    fn excluded(ranks: &[Rank]) -> Excluded {
        Excluded::from_slice(ranks).unwrap()
    }

    /// Malformed, foreign, duplicate and late messages and suspicions change nothing and never
    /// panic.
    #[test]
    fn malformed_foreign_and_late_messages_are_ignored() {
        let logp = LogP::default();
        let n = 8;
        let shared = BfbShared::new(n, logp);
        let cx = Ctx {
            rank: 4,
            n,
            now: 0,
            shared: &shared,
        };
        let mut rng = ProtoRng::new(1);
        let mut p = Bfb::new(&cx);
        p.start(&cx);
        let good = BfbMsg::Tree {
            epoch: 0,
            lo: 4,
            hi: 8,
            excluded: Excluded::EMPTY,
        };
        let bad = [
            BfbMsg::Tree {
                epoch: 0,
                lo: 4,
                hi: 8,
                excluded: Excluded {
                    len: 200,
                    ranks: [1; MAX_EXCLUDED],
                },
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 4,
                hi: 8,
                excluded: excluded(&[3, 2]),
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 4,
                hi: 8,
                excluded: excluded(&[0]),
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 4,
                hi: 8,
                excluded: excluded(&[9]),
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 3,
                hi: 7,
                excluded: excluded(&[4]),
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 3,
                hi: 8,
                excluded: Excluded::EMPTY,
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 4,
                hi: 9,
                excluded: Excluded::EMPTY,
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 4,
                hi: 4,
                excluded: Excluded::EMPTY,
            },
            BfbMsg::Tree {
                epoch: 0,
                lo: 3,
                hi: 8,
                excluded: excluded(&[1, 2, 3, 5, 6, 7]),
            },
            BfbMsg::Ack { epoch: 0 },
            BfbMsg::Nack { epoch: 0, dead: 5 },
        ];
        for m in &bad {
            p.on_message(&cx, 0, m);
        }
        p.on_message(&cx, n, &good);
        p.on_message(&cx, 4, &good);
        assert!(!p.delivered());
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);

        p.on_message(&cx, 0, &good);
        assert!(p.delivered());
        // Positions [4, 8): children 6 then 5; 6 is a range [6, 8) with child 7.
        let tree = |lo, hi| BfbMsg::Tree {
            epoch: 0,
            lo,
            hi,
            excluded: Excluded::EMPTY,
        };
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Send { to: 6, msg: tree(6, 8) });
        // An acknowledgment from a child not yet sent to, a stranger, another epoch: nothing.
        for (from, epoch) in [(5, 0), (7, 0), (6, 1), (0, 0)] {
            p.on_message(&cx, from, &BfbMsg::Ack { epoch });
        }
        p.on_message(&cx, 2, &good);
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Send { to: 5, msg: tree(5, 6) });
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);
        for from in [6, 6, 5] {
            p.on_message(&cx, from, &BfbMsg::Ack { epoch: 0 });
        }
        assert_eq!(
            p.poll_send(&cx, &mut rng),
            Action::Send {
                to: 0,
                msg: BfbMsg::Ack { epoch: 0 }
            }
        );
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);
        // Late suspicions of acknowledged children, strangers, itself, out of range: nothing.
        for peer in [5, 3, 4, 0, n, u32::MAX] {
            p.on_suspect(&cx, peer);
        }
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);
        assert!(!p.finished(&cx));

        // A new epoch without rank 2: position 3 now, children recomputed, suspected child 5
        // (position 4) reported at once and skipped.
        let e1 = BfbMsg::Tree {
            epoch: 1,
            lo: 3,
            hi: 7,
            excluded: excluded(&[2]),
        };
        p.on_message(&cx, 1, &e1);
        assert_eq!(p.epoch(), 1);
        assert_eq!(
            p.poll_send(&cx, &mut rng),
            Action::Send {
                to: 1,
                msg: BfbMsg::Nack { epoch: 1, dead: 5 }
            }
        );
        let tree1 = |lo, hi| BfbMsg::Tree {
            epoch: 1,
            lo,
            hi,
            excluded: excluded(&[2]),
        };
        assert_eq!(
            p.poll_send(&cx, &mut rng),
            Action::Send {
                to: 6,
                msg: tree1(5, 7)
            }
        );
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);
        // The old epoch and a repeat of the current one are ignored.
        p.on_message(&cx, 0, &good);
        p.on_message(&cx, 3, &e1);
        assert_eq!(p.epoch(), 1);
        assert_eq!(p.poll_send(&cx, &mut rng), Action::Wait);
    }

    #[test]
    fn root_ignores_stale_and_invalid_nacks_and_restarts_on_a_current_one() {
        let logp = LogP::default();
        let n = 8;
        let shared = BfbShared::new(n, logp);
        let cx = Ctx {
            rank: 0,
            n,
            now: 0,
            shared: &shared,
        };
        let mut rng = ProtoRng::new(1);
        let mut root = Bfb::new(&cx);
        root.start(&cx);
        for dead in [0, n, u32::MAX] {
            root.on_message(&cx, 3, &BfbMsg::Nack { epoch: 0, dead });
        }
        root.on_message(&cx, 3, &BfbMsg::Nack { epoch: 1, dead: 3 });
        root.on_message(
            &cx,
            3,
            &BfbMsg::Tree {
                epoch: 5,
                lo: 0,
                hi: 8,
                excluded: Excluded::EMPTY,
            },
        );
        assert_eq!(root.epoch(), 0);
        root.on_message(&cx, 4, &BfbMsg::Nack { epoch: 0, dead: 3 });
        assert_eq!((root.epoch(), root.excluded()), (1, &[3][..]));
        root.on_message(&cx, 4, &BfbMsg::Nack { epoch: 0, dead: 5 });
        assert_eq!(root.epoch(), 1);
        let ex = excluded(&[3]);
        let sends: Vec<_> = std::iter::from_fn(|| match root.poll_send(&cx, &mut rng) {
            Action::Send { to, msg } => Some((to, msg)),
            _ => None,
        })
        .collect();
        // Seven live positions: children at positions 4, 2, 1 = ranks 5, 2, 1.
        assert_eq!(
            sends,
            vec![
                (
                    5,
                    BfbMsg::Tree {
                        epoch: 1,
                        lo: 4,
                        hi: 7,
                        excluded: ex
                    }
                ),
                (
                    2,
                    BfbMsg::Tree {
                        epoch: 1,
                        lo: 2,
                        hi: 4,
                        excluded: ex
                    }
                ),
                (
                    1,
                    BfbMsg::Tree {
                        epoch: 1,
                        lo: 1,
                        hi: 2,
                        excluded: ex
                    }
                ),
            ]
        );
        for from in [5, 2, 1] {
            root.on_message(&cx, from, &BfbMsg::Ack { epoch: 1 });
        }
        assert!(root.complete());
        root.on_message(&cx, 5, &BfbMsg::Nack { epoch: 1, dead: 6 });
        root.on_suspect(&cx, 2);
        assert_eq!(root.epoch(), 1);
        assert!(root.finished(&cx));
    }

    /// Random messages and suspicions in any order: no panic, and every send goes to another
    /// process in range.
    #[test]
    fn random_messages_never_panic() {
        let logp = LogP::default();
        let mut rng = ProtoRng::new(7);
        for n in [1u32, 2, 3, 8, 40] {
            let shared = BfbShared::new(n, logp);
            for rank in 0..n {
                let cx = Ctx {
                    rank,
                    n,
                    now: 0,
                    shared: &shared,
                };
                let mut p = Bfb::new(&cx);
                p.start(&cx);
                for _ in 0..2000 {
                    let small = |rng: &mut ProtoRng| rng.below(n + 3);
                    let msg = match rng.below(3) {
                        0 => {
                            let mut ranks = [0; MAX_EXCLUDED];
                            let len = rng.below(4) as usize;
                            let mut r = 0;
                            for slot in ranks.iter_mut().take(len) {
                                r += 1 + rng.below(3);
                                *slot = r;
                            }
                            let ex = Excluded { len: len as u8, ranks };
                            BfbMsg::Tree {
                                epoch: rng.below(4),
                                lo: small(&mut rng),
                                hi: small(&mut rng),
                                excluded: ex,
                            }
                        }
                        1 => BfbMsg::Ack { epoch: rng.below(4) },
                        _ => BfbMsg::Nack {
                            epoch: rng.below(4),
                            dead: small(&mut rng),
                        },
                    };
                    match rng.below(4) {
                        0 => p.on_suspect(&cx, small(&mut rng)),
                        _ => p.on_message(&cx, small(&mut rng), &msg),
                    }
                    if let Action::Send { to, .. } = p.poll_send(&cx, &mut rng) {
                        assert!(to < n && to != rank, "n={n} rank={rank} to={to}");
                    }
                }
            }
        }
    }
}
