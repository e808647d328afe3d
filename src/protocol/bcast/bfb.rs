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
//! same way, so its first child has the largest subtree. Fault-free, with `P = 2^k` and
//! `2o + L ≥ 2o`, the last process is colored at `k(2o + L)` and the root has every
//! acknowledgment at `T_BFB = 2(2o + L)·k` ([`BfbShared::t_bfb`]), with `2(P − 1)` messages.
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
    fn from_slice(ranks: &[Rank]) -> Option<Self> {
        let mut e = Self::EMPTY;
        e.ranks.get_mut(..ranks.len())?.copy_from_slice(ranks);
        e.len = ranks.len() as u8;
        Some(e)
    }

    /// Well formed for `n` processes: in capacity, strictly increasing, never the root.
    fn is_valid(&self, n: u32) -> bool {
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
